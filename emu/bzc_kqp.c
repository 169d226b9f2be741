// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: queue pairs of kernel consumers, the GSI QP (QP1) among them.
 *
 * A kernel QP has the same SQ and RQ rings as a process's, in kernel
 * memory: post_send and post_recv turn struct ib_send_wr / ib_recv_wr into
 * the ring's WQEs, so the one requester (bzc_req.c) serves both. Posting
 * never sleeps (callers hold spinlocks, some with interrupts off): it
 * writes the WQEs under a spinlock and leaves execution to the QP's worker.
 * SGE addresses are kernel virtual addresses under the PD's DMA MR
 * (bzc_kmem.c). REG_MR, LOCAL_INV and SEND_WITH_INV of fast-register MRs
 * (bzc_fastreg.c) are WQEs like the others, so they run in order.
 */
#include <rdma/ib_mad.h>

#include "bzc.h"

#define BZC_KSEND_FLAGS (IB_SEND_FENCE | IB_SEND_SIGNALED | \
			 IB_SEND_SOLICITED | IB_SEND_INLINE)

/* What a kernel QP may be asked for at creation. */
int bzc_kqp_check_init(struct ib_qp_init_attr *init)
{
	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UC:
	case IB_QPT_UD:
		return 0;
	case IB_QPT_GSI:
		/* One GSI QP on the one port, made by the MAD layer. */
		return init->port_num == BZC_PORT ? 0 : -EINVAL;
	default:
		return -EOPNOTSUPP;
	}
}

static struct bzc_wq_ring_hdr *bzc_kwq_hdr(struct bzc_ring *ring)
{
	return ring->kaddr;
}

static int bzc_ksend_opcode(enum ib_wr_opcode op, enum ib_qp_type type,
			    u8 *opcode)
{
	switch (op) {
	case IB_WR_SEND:
		*opcode = IB_UVERBS_WR_SEND;
		return 0;
	case IB_WR_SEND_WITH_IMM:
		*opcode = IB_UVERBS_WR_SEND_WITH_IMM;
		return 0;
	case IB_WR_RDMA_WRITE:
		*opcode = IB_UVERBS_WR_RDMA_WRITE;
		break;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		*opcode = IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;
		break;
	case IB_WR_RDMA_READ:
		*opcode = IB_UVERBS_WR_RDMA_READ;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		*opcode = IB_UVERBS_WR_ATOMIC_CMP_AND_SWP;
		break;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		*opcode = IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
		break;
	case IB_WR_SEND_WITH_INV:
		*opcode = IB_UVERBS_WR_SEND_WITH_INV;
		break;
	case IB_WR_LOCAL_INV:
		*opcode = IB_UVERBS_WR_LOCAL_INV;
		break;
	case IB_WR_REG_MR:
		*opcode = BZC_KWR_REG_MR;
		break;
	default:
		return -EOPNOTSUPP;
	}
	/* Datagram QPs send and nothing else. */
	return bzc_type_ud(type) ? -EINVAL : 0;
}

/* Copy an inline WR's data from its (kernel) SGEs into the WQE. */
static int bzc_ksend_inline(struct bzc_qp *qp, const struct ib_send_wr *wr,
			    struct bzc_send_wqe *wqe)
{
	void *data = (void *)wqe + BZC_SEND_WQE_DATA_OFFSET;
	u32 len = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		u32 n = wr->sg_list[i].length;

		if (n > qp->max_inline - len)
			return -EINVAL;
		memcpy(data + len, (void *)(uintptr_t)wr->sg_list[i].addr, n);
		len += n;
	}
	wqe->flags |= BZC_WQE_INLINE;
	wqe->inline_len = cpu_to_le32(len);
	return 0;
}

static int bzc_ksend_build(struct bzc_qp *qp, const struct ib_send_wr *wr,
			   struct bzc_send_wqe *wqe)
{
	struct bzc_sge *sge = (void *)wqe + BZC_SEND_WQE_DATA_OFFSET;
	int i, err;

	if (wr->send_flags & ~BZC_KSEND_FLAGS)
		return -EINVAL;
	err = bzc_ksend_opcode(wr->opcode, qp->ibqp.qp_type, &wqe->opcode);
	if (err)
		return err;

	wqe->wr_id = cpu_to_le64(wr->wr_id);
	if (wr->send_flags & IB_SEND_SIGNALED)
		wqe->flags |= BZC_WQE_SIGNALED;
	if (wr->send_flags & IB_SEND_SOLICITED)
		wqe->flags |= BZC_WQE_SOLICITED;
	if (wr->send_flags & IB_SEND_FENCE)
		wqe->flags |= BZC_WQE_FENCE;
	if (wr->opcode == IB_WR_SEND_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		wqe->imm_data = cpu_to_le32(be32_to_cpu(wr->ex.imm_data));
	if (wr->opcode == IB_WR_SEND_WITH_INV ||
	    wr->opcode == IB_WR_LOCAL_INV)
		wqe->imm_data = cpu_to_le32(wr->ex.invalidate_rkey);

	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
		wqe->rdma.remote_addr = cpu_to_le64(rdma_wr(wr)->remote_addr);
		wqe->rdma.rkey = cpu_to_le32(rdma_wr(wr)->rkey);
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		wqe->atomic.remote_addr =
			cpu_to_le64(atomic_wr(wr)->remote_addr);
		wqe->atomic.compare_add =
			cpu_to_le64(atomic_wr(wr)->compare_add);
		wqe->atomic.swap = cpu_to_le64(atomic_wr(wr)->swap);
		wqe->atomic.rkey = cpu_to_le32(atomic_wr(wr)->rkey);
		break;
	case IB_WR_REG_MR:
		/*
		 * The MR's range as ib_map_mr_sg() left it, now: the page
		 * list and key take effect when the WQE runs
		 * (bzc_fr_register()).
		 */
		wqe->bind.mw_rkey = cpu_to_le32(reg_wr(wr)->key);
		wqe->bind.mr_lkey = cpu_to_le32(reg_wr(wr)->mr->lkey);
		wqe->bind.addr = cpu_to_le64(reg_wr(wr)->mr->iova);
		wqe->bind.length = cpu_to_le64(reg_wr(wr)->mr->length);
		wqe->bind.access = cpu_to_le32(reg_wr(wr)->access);
		return 0;
	default:
		if (bzc_type_ud(qp->ibqp.qp_type)) {
			if (!ud_wr(wr)->ah)
				return -EINVAL;
			wqe->ud.ah = cpu_to_le32(to_bah(ud_wr(wr)->ah)->index);
			wqe->ud.remote_qpn = cpu_to_le32(ud_wr(wr)->remote_qpn);
			wqe->ud.remote_qkey =
				cpu_to_le32(ud_wr(wr)->remote_qkey);
		}
		break;
	}

	if (wr->num_sge < 0)
		return -EINVAL;
	if (wr->send_flags & IB_SEND_INLINE)
		return bzc_ksend_inline(qp, wr, wqe);
	if (wr->num_sge > qp->max_send_sge)
		return -EINVAL;
	wqe->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = cpu_to_le64(wr->sg_list[i].addr);
		sge[i].length = cpu_to_le32(wr->sg_list[i].length);
		sge[i].lkey = cpu_to_le32(wr->sg_list[i].lkey);
	}
	return 0;
}

/* ib_post_send() on a kernel QP. Any context; never sleeps. */
int bzc_kpost_send(struct bzc_qp *qp, const struct ib_send_wr *wr,
		   const struct ib_send_wr **bad_wr)
{
	struct bzc_wq_ring_hdr *hdr = bzc_kwq_hdr(&qp->sq);
	unsigned long flags;
	u32 prod;
	int err = 0;

	if (READ_ONCE(qp->state) < IB_QPS_RTS &&
	    READ_ONCE(qp->state) != IB_QPS_ERR) {
		*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&qp->ksq_lock, flags);
	/* Only the kernel writes prod; cons comes from the executor. */
	prod = le32_to_cpu(hdr->prod);
	for (; wr; wr = wr->next) {
		struct bzc_send_wqe *wqe;

		/* Acquire: the executor is done with slots before cons. */
		if (prod - le32_to_cpu(smp_load_acquire(&hdr->cons)) >=
		    qp->sq.entries) {
			err = -ENOMEM;
			break;
		}
		wqe = bzc_wq_slot(&qp->sq, prod, qp->sq_wqe_size);
		memset(wqe, 0, qp->sq_wqe_size);
		err = bzc_ksend_build(qp, wr, wqe);
		if (err)
			break;
		prod++;
	}
	/* Release: the WQEs are written before the executor sees prod. */
	smp_store_release(&hdr->prod, cpu_to_le32(prod));
	spin_unlock_irqrestore(&qp->ksq_lock, flags);

	if (err)
		*bad_wr = wr;
	/* The worker runs the WQEs: the caller may hold locks of its own. */
	bzc_sq_queue(qp);
	return err;
}

/**
 * bzc_kring_post_recv() - write receive WRs into a kernel consumer's ring
 * @ring: an RQ's or SRQ's ring of kernel memory
 * @wqe_size: bytes per slot
 * @max_sge: SGEs a slot holds
 * @wr: the WRs
 * @bad_wr: set to the first WR not written
 *
 * The caller holds the ring's producer lock. Publishes prod with release
 * semantics, so a consumer that reads it sees the WQEs.
 *
 * Return: 0, -EINVAL (too many SGEs) or -ENOMEM (the ring is full).
 */
int bzc_kring_post_recv(struct bzc_ring *ring, u32 wqe_size, u32 max_sge,
			const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr)
{
	struct bzc_wq_ring_hdr *hdr = bzc_kwq_hdr(ring);
	u32 prod = le32_to_cpu(hdr->prod);
	int err = 0;

	for (; wr; wr = wr->next) {
		struct bzc_recv_wqe *rqe;
		struct bzc_sge *sge;
		int i;

		if (wr->num_sge < 0 || wr->num_sge > max_sge) {
			err = -EINVAL;
			break;
		}
		/* Acquire: consumers are done with slots before cons. */
		if (prod - le32_to_cpu(smp_load_acquire(&hdr->cons)) >=
		    ring->entries) {
			err = -ENOMEM;
			break;
		}
		rqe = bzc_wq_slot(ring, prod, wqe_size);
		rqe->wr_id = cpu_to_le64(wr->wr_id);
		rqe->num_sge = wr->num_sge;
		sge = (struct bzc_sge *)(rqe + 1);
		for (i = 0; i < wr->num_sge; i++) {
			sge[i].addr = cpu_to_le64(wr->sg_list[i].addr);
			sge[i].length = cpu_to_le32(wr->sg_list[i].length);
			sge[i].lkey = cpu_to_le32(wr->sg_list[i].lkey);
		}
		prod++;
	}
	/* Release: the WQEs are written before a consumer sees prod. */
	smp_store_release(&hdr->prod, cpu_to_le32(prod));
	if (err)
		*bad_wr = wr;
	return err;
}

/* ib_post_recv() on a kernel QP. Any context; never sleeps. */
int bzc_kpost_recv(struct bzc_qp *qp, const struct ib_recv_wr *wr,
		   const struct ib_recv_wr **bad_wr)
{
	unsigned long flags;
	int err;

	if (!qp->rq.kaddr) {
		*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&qp->krq_lock, flags);
	err = bzc_kring_post_recv(&qp->rq, qp->rq_wqe_size, qp->max_recv_sge,
				  wr, bad_wr);
	spin_unlock_irqrestore(&qp->krq_lock, flags);

	/*
	 * Receives posted in the error state complete flushed (ib_drain_rq).
	 * Full barrier: prod is visible before we read the state, pairing
	 * with bzc_qp_enter_error()'s state store, barrier, flush.
	 */
	smp_mb();
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		bzc_rq_flush(qp);
	return err;
}
