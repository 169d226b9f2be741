// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the responder (docs/transport.md). A message arrives at a QP: the
 * checks of its source, keys, bounds, rights and receive WQE, each once
 * and before any side effect, then the placement of the data, the
 * receive CQE and the answer (struct bzc_resp_result). The transport
 * decides where this runs: the local one in the requester's context.
 */
#include <linux/highmem.h>

#include "bzc_xport.h"

#define BZC_GRH_BYTES		40

static bool bzc_qp_receives(enum ib_qp_state state)
{
	return state == IB_QPS_RTR || state == IB_QPS_RTS ||
	       state == IB_QPS_SQD || state == IB_QPS_SQE;
}

/**
 * bzc_resp_accepts() - the responder's checks of a message's source
 * @tqp: the target QP
 * @msg: the message (or a packet of it, from the wire)
 *
 * In one place for both transports: does @tqp take @msg? It must
 * be of the sender's type (an XRC target for an XRC initiator) and
 * receiving, and
 * - UD: the Q_Key matches;
 * - RC, UC: it is connected to the sender: its dest_qp_num is the
 *   sender's QPN and its address vector's DGID the sender's GID, as a NIC
 *   drops a packet whose source is not its connection's. The sender's
 *   device is in the responder's namespace (bzc_dev_by_gid()).
 * On the wire an RC or UC packet carries no source QPN: the receive path
 * puts the QP's dest_qp_num in @msg->sqpn, and the check is the source
 * address (docs/transport.md, section 2).
 * A refused message is dropped silently: an RC requester retries in vain.
 *
 * Return: true if @tqp takes it.
 */
bool bzc_resp_accepts(struct bzc_qp *tqp, const struct bzc_msg *msg)
{
	enum ib_qp_type type = msg->type;
	bool ok, peer = true;

	if (type == IB_QPT_XRC_INI)
		type = IB_QPT_XRC_TGT;
	spin_lock(&tqp->lock);
	ok = tqp->ibqp.qp_type == type && bzc_qp_receives(tqp->state);
	if (ok && bzc_type_ud(type)) {
		ok = tqp->qkey == msg->qkey;
	} else if (ok) {
		peer = tqp->dest_qpn == msg->sqpn &&
		       !memcmp(&tqp->av.dgid, &msg->sgid, sizeof(msg->sgid));
		ok = peer;
	}
	spin_unlock(&tqp->lock);
	if (!peer)
		ibdev_info_ratelimited(tqp->ibqp.device,
				       "QP %u: dropped a message from QP %u at %pI6c: not its peer\n",
				       tqp->ibqp.qp_num, msg->sqpn,
				       msg->sgid.raw);
	return ok;
}

/**
 * bzc_recv_ring_take() - take the next receive WQE of an RQ or SRQ ring
 * @ring: the ring
 * @cons: the kernel's consumer index, advanced
 * @wqe_size: the size of a slot
 * @max_sge: the SGEs a slot holds
 * @rqe: where the WQE goes, room for BZC_MAX_SGE SGEs
 *
 * The WQE is copied out and its slot handed back to the producer. The
 * caller holds the queue's lock.
 *
 * Return: the number of WQEs still posted after this one, -EAGAIN when
 * none is posted, or -EIO when the ring is corrupt: a producer index
 * further ahead than the ring holds, or more SGEs than a slot has
 * (nothing is consumed then).
 */
int bzc_recv_ring_take(struct bzc_ring *ring, u32 *cons, u32 wqe_size,
		       u32 max_sge, struct bzc_recv_wqe *rqe)
{
	struct bzc_wq_ring_hdr *hdr = ring->kaddr;
	const struct bzc_recv_wqe *slot;
	u32 prod;

	/*
	 * Acquire: pairs with the producer's release of prod after its WQEs
	 * (the process's post, or bzc_kpost_recv()).
	 */
	prod = le32_to_cpu(smp_load_acquire(&hdr->prod));
	if (prod == *cons)
		return -EAGAIN;
	slot = bzc_wq_slot(ring, *cons, wqe_size);
	memcpy(rqe, slot, sizeof(*rqe));
	if (prod - *cons > ring->entries || rqe->num_sge > max_sge)
		return -EIO;
	memcpy(rqe + 1, slot + 1, rqe->num_sge * sizeof(struct bzc_sge));
	(*cons)++;
	/*
	 * Release: the WQE is copied out before the producer, whose acquire
	 * of cons pairs with this, may reuse its slot.
	 */
	smp_store_release(&hdr->cons, cpu_to_le32(*cons));
	return prod - *cons;
}

/* The SRQ a message's receive comes from: an XRC SRQ, the QP's, or none. */
static struct bzc_srq *bzc_resp_srq(struct bzc_qp *tqp,
				    const struct bzc_resp_scratch *scratch)
{
	if (scratch && scratch->xrc_srq)
		return scratch->xrc_srq;
	return tqp->ibqp.srq ? to_bsrq(tqp->ibqp.srq) : NULL;
}

/* The PD the rkeys of a message must be of: the QP's, or the XRC SRQ's. */
static struct ib_pd *bzc_resp_key_pd(struct bzc_qp *tqp,
				     const struct bzc_resp_scratch *scratch)
{
	return scratch->xrc_srq ? scratch->xrc_srq->ibsrq.pd : tqp->ibqp.pd;
}

/* The CQ of a message's receive: the QP's, or the XRC SRQ's. */
static struct ib_cq *bzc_resp_rcq(struct bzc_qp *tqp,
				  const struct bzc_resp_scratch *scratch)
{
	return scratch->xrc_srq ? scratch->xrc_srq->ibsrq.ext.cq :
				  tqp->ibqp.recv_cq;
}

/* bzc_resp_rq_take() from `srq` (NULL: the QP's RQ). */
static int bzc_resp_take(struct bzc_qp *tqp, struct bzc_srq *srq,
			 struct bzc_recv_wqe *rqe)
{
	unsigned long flags;
	int ret;

	if (srq) {
		if (!bzc_qp_receives(READ_ONCE(tqp->state)))
			return -EAGAIN;
		ret = bzc_srq_take(srq, rqe);
		if (ret == -EIO)
			bzc_qp_error(tqp, IB_EVENT_QP_FATAL);
		return ret;
	}

	spin_lock_irqsave(&tqp->rq_lock, flags);
	if (bzc_qp_receives(READ_ONCE(tqp->state)))
		ret = bzc_recv_ring_take(&tqp->rq, &tqp->rq_cons,
					 tqp->rq_wqe_size, tqp->max_recv_sge,
					 rqe);
	else
		ret = -EAGAIN;
	spin_unlock_irqrestore(&tqp->rq_lock, flags);
	if (ret == -EIO) {
		ibdev_info_ratelimited(tqp->ibqp.device,
				       "QP %u: corrupt receive queue ring\n",
				       tqp->ibqp.qp_num);
		bzc_qp_error(tqp, IB_EVENT_QP_FATAL);
	}
	return ret < 0 ? ret : 0;
}

/**
 * bzc_resp_rq_take() - take a QP's next receive WQE, from its RQ or SRQ
 * @tqp: the QP
 * @rqe: where it goes (BZC_RESP_RQE_BYTES)
 *
 * Return: 0; -EAGAIN: none posted (RNR); -EIO: the ring is corrupt (the
 * QP has been put in error).
 */
int bzc_resp_rq_take(struct bzc_qp *tqp, struct bzc_recv_wqe *rqe)
{
	return bzc_resp_take(tqp, bzc_resp_srq(tqp, NULL), rqe);
}

/* bzc_resp_recv_complete() on `rcq`. */
static void bzc_resp_complete(struct bzc_qp *tqp, struct ib_cq *rcq,
			      const struct bzc_msg *msg,
			      const struct bzc_recv_wqe *rqe,
			      enum ib_wc_status status, u64 byte_len)
{
	struct bzc_cqe cqe = {
		.wr_id = rqe->wr_id,
		.status = status,
		.opcode = msg->opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM ?
			  IB_WC_RECV_RDMA_WITH_IMM : IB_WC_RECV,
		.byte_len = cpu_to_le32(byte_len),
		.qp_num = cpu_to_le32(tqp->ibqp.qp_num),
		.src_qp = cpu_to_le32(msg->sqpn),
	};

	if (status == IB_WC_SUCCESS) {
		if (msg->opcode == IB_UVERBS_WR_SEND_WITH_IMM ||
		    msg->opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM) {
			cqe.wc_flags |= BZC_CQE_WITH_IMM;
			cqe.imm_data = msg->imm_data;
		}
		if (msg->opcode == IB_UVERBS_WR_SEND_WITH_INV) {
			cqe.wc_flags |= BZC_CQE_WITH_INV;
			cqe.imm_data = msg->imm_data;	/* the rkey */
		}
		if (bzc_type_ud(tqp->ibqp.qp_type))
			cqe.wc_flags |= BZC_CQE_GRH;
	}
	/*
	 * A full CQ drops the CQE and goes to error (IBV_EVENT_CQ_ERR); the
	 * QP can no longer report its work, which is IBA's local work queue
	 * catastrophic error.
	 */
	bzc_count(to_bdev(tqp->ibqp.device), BZC_CNT_RCVD_MSGS, 1);
	if (!bzc_cq_post(to_bcq(rcq), &cqe, msg->flags & BZC_WQE_SOLICITED))
		bzc_qp_error(tqp, IB_EVENT_QP_FATAL);
}

/**
 * bzc_resp_recv_complete() - the receive completion of a message
 * @tqp: the QP
 * @msg: the message (opcode, immediate, solicited flag, source QPN)
 * @rqe: the receive WQE it consumed
 * @status: its status
 * @byte_len: the bytes received
 */
void bzc_resp_recv_complete(struct bzc_qp *tqp, const struct bzc_msg *msg,
			    const struct bzc_recv_wqe *rqe,
			    enum ib_wc_status status, u64 byte_len)
{
	bzc_resp_complete(tqp, tqp->ibqp.recv_cq, msg, rqe, status, byte_len);
}

/*
 * The GRH a UD receiver finds in its first 40 bytes: RoCE v2 in its IPv6
 * form (next header UDP, IPv4 addresses as v4-mapped GIDs), so that
 * ibv_init_ah_from_wc() and the kernel CM look the GID up as a RoCE v2 one.
 */
static void bzc_build_grh(struct ib_grh *grh, const struct bzc_msg *msg)
{
	memset(grh, 0, sizeof(*grh));
	grh->version_tclass_flow = cpu_to_be32(6 << 28);
	grh->paylen = cpu_to_be16(msg->local->total);
	grh->next_hdr = IPPROTO_UDP;
	grh->hop_limit = 64;
	grh->sgid = msg->sgid;
	grh->dgid = msg->av->dgid;
}

/**
 * bzc_resp_no_rqe() - no receive WQE for a message that needs one
 * @tqp: the QP
 * @msg: the message
 * @err: what bzc_resp_rq_take() returned
 * @res: the answer
 *
 * An RC responder NAKs, RNR (none posted) or remote operational error (a
 * corrupt ring); UC and UD drop the message.
 */
void bzc_resp_no_rqe(struct bzc_qp *tqp, const struct bzc_msg *msg,
		     int err, struct bzc_resp_result *res)
{
	if (!bzc_type_reliable(msg->type))
		return;
	if (err == -EAGAIN)
		res->syndrome = BZC_AETH_RNR_NAK |
				(READ_ONCE(tqp->min_rnr_timer) &
				 BZC_AETH_VALUE_MASK);
	else
		res->syndrome = BZC_AETH_NAK_REM_OP;
}

/*
 * A copy into a receive WQE's buffers stopped at a page of an ODP MR that
 * was not there (bzc_copy()). The receive's own buffer: a local
 * protection error at the responder, which goes to ERR, and a remote
 * operational error for an RC requester (as when its SGEs do not
 * resolve). The sender's buffer: its WQE fails with a local protection
 * error; the receive, half filled, completes with IB_WC_REM_ABORT_ERR
 * (the requester aborted the message) and the QP stays as it is.
 */
static void bzc_resp_lost(struct bzc_qp *tqp, struct ib_cq *rcq,
			  const struct bzc_msg *msg,
			  const struct bzc_recv_wqe *rqe, int lost,
			  struct bzc_resp_result *res)
{
	if (lost & BZC_COPY_DST_LOST) {
		bzc_resp_complete(tqp, rcq, msg, rqe, IB_WC_LOC_PROT_ERR, 0);
		bzc_qp_error(tqp, 0);
		if (bzc_type_reliable(msg->type))
			res->syndrome = BZC_AETH_NAK_REM_OP;
		return;
	}
	res->local_lost = true;
	bzc_resp_complete(tqp, rcq, msg, rqe, IB_WC_REM_ABORT_ERR, 0);
}

/* SEND, SEND_WITH_IMM: consume a receive at the peer and fill it. */
static void bzc_resp_send(struct bzc_qp *tqp, const struct bzc_msg *msg,
			  const struct bzc_resp_scratch *scratch,
			  bool may_sleep, struct bzc_resp_result *res)
{
	struct bzc_dev *tdev = to_bdev(tqp->ibqp.device);
	struct bzc_recv_wqe *rqe = scratch->rqe;
	bool ud = bzc_type_ud(msg->type);
	struct bzc_cursor dc, sc = { .sgl = msg->local };
	struct bzc_sgl *dst = scratch->sgl;
	u64 need = msg->local->total + (ud ? BZC_GRH_BYTES : 0);
	struct bzc_srq *srq = bzc_resp_srq(tqp, scratch);
	struct ib_cq *rcq = bzc_resp_rcq(tqp, scratch);
	int err, lost = 0;

	err = bzc_resp_take(tqp, srq, rqe);
	if (err) {
		bzc_resp_no_rqe(tqp, msg, err, res);
		return;
	}

	/* An SRQ's receive buffers are in the SRQ's PD. */
	if (!bzc_sgl_from_sges(dst, tdev, srq ? srq->ibsrq.pd : tqp->ibqp.pd,
			       (const struct bzc_sge *)(rqe + 1), rqe->num_sge,
			       IB_ACCESS_LOCAL_WRITE)) {
		bzc_resp_complete(tqp, rcq, msg, rqe, IB_WC_LOC_PROT_ERR, 0);
		bzc_qp_error(tqp, 0);
		if (bzc_type_reliable(msg->type))
			res->syndrome = BZC_AETH_NAK_REM_OP;
		return;
	}
	if (dst->total < need) {
		bzc_sgl_put(dst);
		bzc_resp_complete(tqp, rcq, msg, rqe, IB_WC_LOC_LEN_ERR, 0);
		bzc_qp_error(tqp, 0);
		if (bzc_type_reliable(msg->type))
			res->syndrome = BZC_AETH_NAK_INV_REQ;
		return;
	}

	dc.sgl = dst;
	if (ud) {
		struct ib_grh grh;
		struct bzc_sgl gsgl;
		struct bzc_cursor gc = { .sgl = &gsgl };

		bzc_build_grh(&grh, msg);
		bzc_sgl_kbuf(&gsgl, &grh, sizeof(grh));
		lost = bzc_copy(&dc, &gc, sizeof(grh), may_sleep);
	}
	if (!lost)
		lost = bzc_copy(&dc, &sc, msg->local->total, may_sleep);
	bzc_sgl_put(dst);
	if (lost) {
		bzc_resp_lost(tqp, rcq, msg, rqe, lost, res);
		return;
	}
	/*
	 * SEND_WITH_INV: the responder invalidates before it completes. A
	 * key it may not invalidate is an invalid request (IBA 9.9.3,
	 * class J): the receive and the send fail, the responder's QP too.
	 */
	if (msg->opcode == IB_UVERBS_WR_SEND_WITH_INV &&
	    bzc_key_invalidate(tdev, le32_to_cpu(msg->imm_data), tqp, true)) {
		bzc_resp_complete(tqp, rcq, msg, rqe, IB_WC_REM_INV_REQ_ERR, 0);
		bzc_qp_error(tqp, 0);
		res->syndrome = BZC_AETH_NAK_INV_REQ;
		return;
	}
	bzc_resp_complete(tqp, rcq, msg, rqe, IB_WC_SUCCESS, need);
}

/**
 * bzc_resp_error() - an RC responder's error of IBA class C
 * @tqp: the QP
 * @msg: the message
 * @syndrome: BZC_AETH_NAK_REM_ACCESS or BZC_AETH_NAK_INV_REQ
 * @res: the answer
 *
 * An R_Key or access violation (IBV_WC_REM_ACCESS_ERR) or an invalid
 * request (IBV_WC_REM_INV_REQ_ERR): it NAKs with @syndrome, so the
 * requester's WQE fails, and goes to ERR, flushing its receives; with no
 * completion of its own to say why, its owner learns it from an
 * affiliated event. A UC responder drops the message (class D/E): its
 * requester sees nothing.
 */
void bzc_resp_error(struct bzc_qp *tqp, const struct bzc_msg *msg,
		    u8 syndrome, struct bzc_resp_result *res)
{
	bool access = syndrome == BZC_AETH_NAK_REM_ACCESS;

	if (!bzc_type_reliable(msg->type))
		return;
	res->syndrome = syndrome;
	ibdev_info_ratelimited(tqp->ibqp.device,
			       "QP %u: %s from QP %u, to the error state\n",
			       tqp->ibqp.qp_num,
			       access ? "remote access violation" :
					"invalid request",
			       msg->sqpn);
	bzc_qp_error(tqp, access ? IB_EVENT_QP_ACCESS_ERR :
				   IB_EVENT_QP_REQ_ERR);
}

/* bzc_resp_rdma_target() with the PD the R_Key must be of (NULL: the QP's) */
static u8 bzc_resp_rdma_target_pd(struct bzc_qp *tqp, struct ib_pd *pd,
				  u32 rkey, u64 addr, u64 len, int access,
				  struct bzc_sgl *sgl)
{
	bzc_sgl_init(sgl);
	if (!(READ_ONCE(tqp->access) & access) ||
	    !bzc_sgl_add(sgl, to_bdev(tqp->ibqp.device), pd, tqp, rkey, addr,
			 len, access))
		return BZC_AETH_NAK_REM_ACCESS;
	return BZC_AETH_ACK;
}

/**
 * bzc_resp_rdma_target() - the memory an RDMA WRITE or READ names
 * @tqp: the responder QP
 * @rkey: the R_Key
 * @addr: the first byte
 * @len: the length
 * @access: IB_ACCESS_REMOTE_WRITE or IB_ACCESS_REMOTE_READ
 * @sgl: where the range goes, with a reference on its MR (bzc_sgl_put())
 *
 * The QP must allow the access, and the R_Key resolve on its device to an
 * MR or window of its PD covering the range with the right.
 *
 * Return: BZC_AETH_ACK, or BZC_AETH_NAK_REM_ACCESS with @sgl empty.
 */
u8 bzc_resp_rdma_target(struct bzc_qp *tqp, u32 rkey, u64 addr, u64 len,
			int access, struct bzc_sgl *sgl)
{
	return bzc_resp_rdma_target_pd(tqp, NULL, rkey, addr, len, access,
				       sgl);
}

/* RDMA WRITE (with immediate): into the peer's MR named by rkey. */
static void bzc_resp_write(struct bzc_qp *tqp, const struct bzc_msg *msg,
			   const struct bzc_resp_scratch *scratch,
			   bool may_sleep, struct bzc_resp_result *res)
{
	struct bzc_sgl *dst = scratch->sgl;
	struct bzc_cursor dc = { .sgl = dst }, sc = { .sgl = msg->local };
	bool imm = msg->opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;
	struct bzc_recv_wqe *rqe = scratch->rqe;
	int err, lost;

	if (bzc_resp_rdma_target_pd(tqp, bzc_resp_key_pd(tqp, scratch),
				    msg->rkey, msg->remote_addr,
				    msg->local->total, IB_ACCESS_REMOTE_WRITE,
				    dst) != BZC_AETH_ACK) {
		bzc_resp_error(tqp, msg, BZC_AETH_NAK_REM_ACCESS, res);
		return;
	}

	if (imm) {
		err = bzc_resp_take(tqp, bzc_resp_srq(tqp, scratch), rqe);
		if (err) {
			bzc_resp_no_rqe(tqp, msg, err, res);
			bzc_sgl_put(dst);
			return;
		}
	}
	lost = bzc_copy(&dc, &sc, msg->local->total, may_sleep);
	bzc_sgl_put(dst);
	/*
	 * The target MR's page: an access violation (IBA class C); the
	 * immediate's receive, taken already, fails as the responder's own.
	 */
	if (lost & BZC_COPY_DST_LOST) {
		if (imm)
			bzc_resp_complete(tqp, bzc_resp_rcq(tqp, scratch), msg,
					  rqe, IB_WC_LOC_PROT_ERR, 0);
		bzc_resp_error(tqp, msg, BZC_AETH_NAK_REM_ACCESS, res);
		return;
	}
	if (lost) {
		res->local_lost = true;
		if (imm)
			bzc_resp_complete(tqp, bzc_resp_rcq(tqp, scratch), msg,
					  rqe, IB_WC_REM_ABORT_ERR, 0);
		return;
	}
	if (imm)
		bzc_resp_complete(tqp, bzc_resp_rcq(tqp, scratch), msg, rqe,
				  IB_WC_SUCCESS, msg->local->total);
}

/* RDMA READ: from the peer's MR into the local SGEs. */
static void bzc_resp_read(struct bzc_qp *tqp, const struct bzc_msg *msg,
			  const struct bzc_resp_scratch *scratch,
			  bool may_sleep, struct bzc_resp_result *res)
{
	struct bzc_sgl *remote = scratch->sgl;
	struct bzc_cursor dc = { .sgl = msg->local }, sc = { .sgl = remote };
	int lost;

	if (bzc_resp_rdma_target_pd(tqp, bzc_resp_key_pd(tqp, scratch),
				    msg->rkey, msg->remote_addr,
				    msg->local->total, IB_ACCESS_REMOTE_READ,
				    remote) != BZC_AETH_ACK) {
		bzc_resp_error(tqp, msg, BZC_AETH_NAK_REM_ACCESS, res);
		return;
	}
	lost = bzc_copy(&dc, &sc, msg->local->total, may_sleep);
	bzc_sgl_put(remote);
	/* The source MR's page: an access violation; the sink's: local. */
	if (lost & BZC_COPY_SRC_LOST)
		bzc_resp_error(tqp, msg, BZC_AETH_NAK_REM_ACCESS, res);
	else if (lost)
		res->local_lost = true;
}

/**
 * bzc_resp_execute() - a message arrives at a QP
 * @tqp: the target QP, referenced by the caller
 * @msg: the message
 * @scratch: the responder's working memory, for this call only
 * @may_sleep: the caller may sleep (long copies reschedule)
 * @res: the answer, an ACK on entry; a NAK or RNR NAK if the responder
 *	 says so, an atomic's original value
 *
 * The responder's checks (the source, at an XRC target the SRQ the
 * message names, then keys, bounds, rights and the receive WQE), then the
 * operation and the receive CQE.
 *
 * Return: false when @tqp does not take the message at all (not its
 * peer, not receiving, wrong Q_Key): dropped, nothing changed, no answer.
 */
bool bzc_resp_execute(struct bzc_qp *tqp, const struct bzc_msg *msg,
		      const struct bzc_resp_scratch *scratch, bool may_sleep,
		      struct bzc_resp_result *res)
{
	struct bzc_resp_scratch s = *scratch;
	u8 syndrome;

	if (!bzc_resp_accepts(tqp, msg))
		return false;
	/* No such XRC SRQ, or of another XRC domain: an invalid request. */
	s.xrc_srq = NULL;
	if (tqp->ibqp.qp_type == IB_QPT_XRC_TGT) {
		s.xrc_srq = bzc_xrc_srq_get(tqp, msg->xrc_srqn);
		if (!s.xrc_srq) {
			bzc_resp_error(tqp, msg, BZC_AETH_NAK_INV_REQ, res);
			return true;
		}
	}
	switch (msg->opcode) {
	case IB_UVERBS_WR_SEND:
	case IB_UVERBS_WR_SEND_WITH_IMM:
	case IB_UVERBS_WR_SEND_WITH_INV:
		bzc_resp_send(tqp, msg, &s, may_sleep, res);
		break;
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		bzc_resp_write(tqp, msg, &s, may_sleep, res);
		break;
	case IB_UVERBS_WR_RDMA_READ:
		bzc_resp_read(tqp, msg, &s, may_sleep, res);
		break;
	default:
		if (msg->opcode == BZC_WR_ATOMIC_WRITE)
			syndrome = bzc_resp_atomic_write(tqp, msg);
		else if (msg->opcode == BZC_WR_FLUSH)
			syndrome = bzc_resp_flush(tqp, msg);
		else
			syndrome = bzc_resp_atomic_pd(tqp,
						      bzc_resp_key_pd(tqp, &s),
						      msg, &res->atomic_orig);
		if (syndrome != BZC_AETH_ACK)
			bzc_resp_error(tqp, msg, syndrome, res);
		break;
	}
	if (s.xrc_srq)
		bzc_srq_put(s.xrc_srq);
	return true;
}
