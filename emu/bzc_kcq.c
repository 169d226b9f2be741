// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: completion queues of kernel consumers (the MAD layer, the CM, kernel
 * ULPs). They use the same ring and CQE format as a process's CQ, so one
 * producer (bzc_cq_post()) serves both; here the kernel is also the
 * consumer: poll_cq reads CQEs into struct ib_wc and req_notify_cq sets the
 * arm word the producer checks.
 */
#include <rdma/ib_verbs.h>

#include "bzc.h"

static struct bzc_cq_ring_hdr *bzc_kcq_hdr(struct bzc_cq *cq)
{
	return cq->ring.kaddr;
}

static const struct bzc_cqe *bzc_kcq_slot(struct bzc_cq *cq, u32 index)
{
	return cq->ring.kaddr + BZC_CQ_RING_CQE_OFFSET +
	       (size_t)(index & (cq->ring.entries - 1)) *
	       sizeof(struct bzc_cqe);
}

static void bzc_kcq_to_wc(struct bzc_dev *bdev, const struct bzc_cqe *cqe,
			  struct ib_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = le64_to_cpu(cqe->wr_id);
	wc->status = cqe->status;
	wc->opcode = cqe->opcode;
	wc->vendor_err = le32_to_cpu(cqe->vendor_err);
	wc->byte_len = le32_to_cpu(cqe->byte_len);
	/*
	 * The consumer owns its QPs and destroys them only once it is done
	 * with their completions, so the QP named by the CQE is alive (or
	 * gone, then NULL, while it tears everything down).
	 */
	wc->qp = xa_load(&bdev->qp_xa, le32_to_cpu(cqe->qp_num));
	wc->src_qp = le32_to_cpu(cqe->src_qp);
	wc->pkey_index = le16_to_cpu(cqe->pkey_index);
	wc->slid = le16_to_cpu(cqe->slid);
	wc->sl = cqe->sl;
	wc->dlid_path_bits = cqe->dlid_path_bits;
	wc->port_num = BZC_PORT;
	if (cqe->wc_flags & BZC_CQE_WITH_IMM) {
		wc->wc_flags |= IB_WC_WITH_IMM;
		wc->ex.imm_data = cpu_to_be32(le32_to_cpu(cqe->imm_data));
	} else if (cqe->wc_flags & BZC_CQE_WITH_INV) {
		wc->wc_flags |= IB_WC_WITH_INVALIDATE;
		wc->ex.invalidate_rkey = le32_to_cpu(cqe->imm_data);
	}
	if (cqe->wc_flags & BZC_CQE_GRH) {
		/*
		 * The device always writes the 40-byte IPv6 form of the
		 * header (IPv4 addresses as v4-mapped GIDs); say so, so the
		 * core reads both GIDs from it as RoCE v2 ones.
		 */
		wc->wc_flags |= IB_WC_GRH | IB_WC_WITH_NETWORK_HDR_TYPE;
		wc->network_hdr_type = RDMA_NETWORK_IPV6;
	}
}

int bzc_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct bzc_dev *bdev = to_bdev(ibcq->device);
	struct bzc_cq *cq = to_bcq(ibcq);
	struct bzc_cq_ring_hdr *hdr;
	unsigned long flags;
	u32 cons;
	int n = 0;

	/*
	 * A process polls its own ring; the legacy POLL_CQ command has
	 * nothing to do for it.
	 */
	if (cq->ring.mmap)
		return -EOPNOTSUPP;

	spin_lock_irqsave(&cq->lock, flags);
	hdr = bzc_kcq_hdr(cq);
	/* Only the kernel writes this ring: its indexes are trusted. */
	cons = le32_to_cpu(hdr->cons);
	while (n < num_entries && cons != cq->prod) {
		bzc_kcq_to_wc(bdev, bzc_kcq_slot(cq, cons), &wc[n]);
		cons++;
		n++;
	}
	WRITE_ONCE(hdr->cons, cpu_to_le32(cons));
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

/*
 * Arm the CQ. bzc_cq_post() reads and clears the arm word under the same
 * lock, after publishing its CQE: either it sees the arm and calls the
 * handler, or we see its CQE here and report it as missed.
 */
int bzc_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct bzc_cq *cq = to_bcq(ibcq);
	struct bzc_cq_ring_hdr *hdr;
	unsigned long irqflags;
	bool missed;
	u32 arm;

	arm = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
		BZC_CQ_ARM_SOLICITED : BZC_CQ_ARM_NEXT;

	spin_lock_irqsave(&cq->lock, irqflags);
	hdr = bzc_kcq_hdr(cq);
	/*
	 * For a process's CQ (the legacy REQ_NOTIFY_CQ command) this is the
	 * store the process itself may make in its ring; nothing is read.
	 */
	WRITE_ONCE(hdr->arm, cpu_to_le32(arm));
	missed = !cq->ring.mmap && le32_to_cpu(hdr->cons) != cq->prod;
	spin_unlock_irqrestore(&cq->lock, irqflags);

	return (flags & IB_CQ_REPORT_MISSED_EVENTS) && missed ? 1 : 0;
}
