// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the send queue - send WQEs built in the ring, for ibv_post_send()
 * and for the ibv_wr_* API (ibv_qp_ex), which share everything below the
 * entry points: the opcode table, the checks and the WQE writers.
 *
 * A post writes its WQEs into the slots from sq.prod on, publishes the new
 * prod with one release store, and then rings the doorbell once: the
 * driver method BZC_METHOD_QP_DOORBELL (or, from a kernel without it, the
 * POST_SEND command with no work requests in it).  The kernel copies each
 * WQE out of the ring before it checks it, so what a WQE claims (keys,
 * lengths, the AH index) is the kernel's to validate; this side refuses
 * only what the verbs API defines as a posting error.
 *
 * Publishing prod is what posts: every check that can refuse a work
 * request runs before it, and nothing can take a published WQE back.  The
 * kernel's executor reads prod on its own too (a worker still busy with a
 * long WQE, the RNR timer, a move to RTS or to ERR, which flushes), so a
 * published WQE may run whatever the doorbell does.  A doorbell that fails
 * therefore does not fail the post: the work requests are reported posted
 * (bzc_sq_doorbell() logs the failure).  The only failure this kernel has
 * is EIO from the uverbs core once the device is gone, when no work
 * request completes any more, posted before or now
 * (IBV_EVENT_DEVICE_FATAL).
 */

#include <errno.h>
#include <string.h>

#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"

/*
 * The opcode a WQE carries is the uverbs one, and IBV_QP_EX_WITH_<op> is
 * 1 << IBV_WR_<op>, so one mask per QP type serves both the check of a
 * work request's opcode and of create_qp_ex's send_ops_flags.
 */
#define BZC_SAME_WR_OPCODE(name)                                               \
	_Static_assert((int)IBV_WR_##name == (int)IB_UVERBS_WR_##name,         \
		       "IBV_WR_" #name " != IB_UVERBS_WR_" #name);             \
	_Static_assert((uint64_t)IBV_QP_EX_WITH_##name ==                      \
			       1ULL << IBV_WR_##name,                          \
		       "IBV_QP_EX_WITH_" #name " != 1 << IBV_WR_" #name)
BZC_SAME_WR_OPCODE(RDMA_WRITE);
BZC_SAME_WR_OPCODE(RDMA_WRITE_WITH_IMM);
BZC_SAME_WR_OPCODE(SEND);
BZC_SAME_WR_OPCODE(SEND_WITH_IMM);
BZC_SAME_WR_OPCODE(RDMA_READ);
BZC_SAME_WR_OPCODE(ATOMIC_CMP_AND_SWP);
BZC_SAME_WR_OPCODE(ATOMIC_FETCH_AND_ADD);
BZC_SAME_WR_OPCODE(LOCAL_INV);
BZC_SAME_WR_OPCODE(BIND_MW);
BZC_SAME_WR_OPCODE(SEND_WITH_INV);
/*
 * ATOMIC_WRITE and FLUSH: the uAPI headers of rdma-core 44 do not name
 * them, bzc's do (enum bzc_wr_opcode); IBV_WR_FLUSH is rdma-core 45's.
 */
_Static_assert((int)IBV_WR_ATOMIC_WRITE == BZC_WR_ATOMIC_WRITE,
	       "IBV_WR_ATOMIC_WRITE != BZC_WR_ATOMIC_WRITE");
/*
 * Nor are their IBV_QP_EX_WITH_* bits 1 << their opcode (IBV_WR_FLUSH is
 * 14, IBV_QP_EX_WITH_FLUSH 1 << 11): bzc_send_ops_flags() maps them.
 */
#define BZC_QP_EX_WITH_FLUSH (1ULL << 11)
_Static_assert((uint64_t)IBV_QP_EX_WITH_ATOMIC_WRITE == 1ULL << 12,
	       "IBV_QP_EX_WITH_ATOMIC_WRITE moved");
#if BZC_RDMA_CORE_CLASS >= 45
_Static_assert((int)IBV_WR_FLUSH == BZC_WR_FLUSH, "IBV_WR_FLUSH != BZC_WR_FLUSH");
_Static_assert((uint64_t)IBV_QP_EX_WITH_FLUSH == BZC_QP_EX_WITH_FLUSH,
	       "IBV_QP_EX_WITH_FLUSH moved");
_Static_assert((int)IBV_FLUSH_GLOBAL == (int)BZC_FLUSH_GLOBAL &&
		       (int)IBV_FLUSH_PERSISTENT == (int)BZC_FLUSH_PERSISTENT &&
		       (int)IBV_FLUSH_RANGE == (int)BZC_FLUSH_RANGE &&
		       (int)IBV_FLUSH_MR == (int)BZC_FLUSH_MR,
	       "IBV_FLUSH_* != BZC_FLUSH_*");
#endif

#define BZC_OP(name) (1ULL << IBV_WR_##name)

enum {
	/* UD: datagrams only. */
	BZC_OPS_UD = BZC_OP(SEND) | BZC_OP(SEND_WITH_IMM),
	/*
	 * UC: no RDMA read and no atomics (no responder resources), and no
	 * send with invalidate, for which IBA defines no UC packet opcode.
	 */
	BZC_OPS_UC = BZC_OPS_UD | BZC_OP(RDMA_WRITE) |
		     BZC_OP(RDMA_WRITE_WITH_IMM) | BZC_OP(LOCAL_INV) |
		     BZC_OP(BIND_MW),
	BZC_OPS_RC = BZC_OPS_UC | BZC_OP(SEND_WITH_INV) | BZC_OP(RDMA_READ) |
		     BZC_OP(ATOMIC_CMP_AND_SWP) | BZC_OP(ATOMIC_FETCH_AND_ADD),
	/*
	 * XRC INI: RC's, but for send with invalidate (the target has no PD
	 * to find the key in) and the Placement Extensions.
	 */
	BZC_OPS_XRC = BZC_OPS_UC | BZC_OP(RDMA_READ) |
		      BZC_OP(ATOMIC_CMP_AND_SWP) | BZC_OP(ATOMIC_FETCH_AND_ADD),
	/* RC too, where the kernel has them (BZC_CAP_ATOMIC_WRITE, _FLUSH). */
	BZC_OPS_RC_ATOMIC_WRITE = 1ULL << BZC_WR_ATOMIC_WRITE,
	BZC_OPS_RC_FLUSH = 1ULL << BZC_WR_FLUSH,
	/* The opcodes whose data goes out, so may be given inline. */
	BZC_OPS_INLINE = BZC_OP(SEND) | BZC_OP(SEND_WITH_IMM) |
			 BZC_OP(SEND_WITH_INV) | BZC_OP(RDMA_WRITE) |
			 BZC_OP(RDMA_WRITE_WITH_IMM) | BZC_OP(ATOMIC_WRITE),
	BZC_SEND_FLAGS_KNOWN = IBV_SEND_FENCE | IBV_SEND_SIGNALED |
			       IBV_SEND_SOLICITED | IBV_SEND_INLINE,
};

_Static_assert(sizeof(struct bzc_send_wqe) == BZC_SEND_WQE_DATA_OFFSET,
	       "send WQE data does not follow the header");

/*
 * The send opcodes (as 1 << IBV_WR_*) a QP of @qp_type can post in
 * @context; 0: none.  FLUSH only where this libibverbs has ibv_wr_flush
 * (rdma-core 45) and the kernel FLUSH rights on MRs (Linux 6.2).
 */
uint64_t bzc_send_ops_supported(struct ibv_context *context,
				enum ibv_qp_type qp_type)
{
	uint64_t caps = to_bctx(context)->caps;

	switch (qp_type) {
	case IBV_QPT_RC:
		return BZC_OPS_RC |
		       (caps & BZC_CAP_ATOMIC_WRITE ? BZC_OPS_RC_ATOMIC_WRITE : 0) |
		       (BZC_RDMA_CORE_CLASS >= 45 && (caps & BZC_CAP_FLUSH) ?
				BZC_OPS_RC_FLUSH : 0);
	case IBV_QPT_UC:
		return BZC_OPS_UC;
	case IBV_QPT_UD:
		return BZC_OPS_UD;
	case IBV_QPT_XRC_SEND:
		return caps & BZC_CAP_XRC ? BZC_OPS_XRC : 0;
	default:
		return 0;
	}
}

/*
 * The same as IBV_QP_EX_WITH_* flags, what create_qp_ex's send_ops_flags
 * may ask for: 1 << IBV_WR_<op> but for ATOMIC_WRITE and FLUSH.
 */
uint64_t bzc_send_ops_flags(struct ibv_context *context,
			    enum ibv_qp_type qp_type)
{
	uint64_t ops = bzc_send_ops_supported(context, qp_type);
	uint64_t flags = ops & ~(BZC_OPS_RC_ATOMIC_WRITE | BZC_OPS_RC_FLUSH);

	_Static_assert(!(BZC_OPS_RC & (BZC_QP_EX_WITH_FLUSH |
				       (uint64_t)IBV_QP_EX_WITH_ATOMIC_WRITE)),
		       "an opcode's bit is another's IBV_QP_EX_WITH_* bit");
	if (ops & BZC_OPS_RC_ATOMIC_WRITE)
		flags |= IBV_QP_EX_WITH_ATOMIC_WRITE;
	if (ops & BZC_OPS_RC_FLUSH)
		flags |= BZC_QP_EX_WITH_FLUSH;
	return flags;
}

/* Sends are refused until the QP is ready to send (RTS, or SQD/SQE/ERR). */
static int bzc_sq_check_state(struct bzc_qp *qp)
{
	switch (bzc_qp_state(qp)) {
	case IBV_QPS_RESET:
	case IBV_QPS_INIT:
	case IBV_QPS_RTR:
		return bzc_refuse(EINVAL, "the QP is not ready to send");
	default:
		return 0;
	}
}

/* Say why @wr_id was refused (bzc_refuse() recorded it), out of locks. */
static void bzc_sq_refused(struct bzc_qp *qp, uint64_t wr_id, int err)
{
	bzc_dbg(qp->vqp.qp.context, "QP %u: work request %#llx refused (%s): %s\n",
		qp->vqp.qp.qp_num, (unsigned long long)wr_id, strerror(err),
		bzc_refusal);
}

/*
 * One doorbell for the WQEs published so: BZC_METHOD_QP_DOORBELL, else
 * POST_SEND with no WRs.  They are posted already, failure or not (see the
 * top of this file).
 */
static void bzc_sq_doorbell(struct bzc_qp *qp)
{
	struct ibv_context *context = qp->vqp.qp.context;
	struct ibv_send_wr *bad = NULL;
	struct bzc_cmd cmd;
	int ret;

	if (!(to_bctx(context)->caps & BZC_CAP_QP_DOORBELL)) {
		ret = ibv_cmd_post_send(&qp->vqp.qp, NULL, &bad);
	} else {
		bzc_cmd_init(&cmd, UVERBS_OBJECT_QP, BZC_METHOD_QP_DOORBELL);
		bzc_cmd_add_idr(&cmd, BZC_ATTR_QP_DOORBELL_HANDLE,
				qp->vqp.qp.handle);
		ret = bzc_cmd_exec(context, &cmd);
	}
	if (ret)
		bzc_err(context,
			"QP %u: send doorbell failed (%s); the posted work requests run when the kernel next reads the ring, or never if the device is gone\n",
			qp->vqp.qp.qp_num, strerror(ret));
}

/* ---------------------------------------------------------------------- */
/* Send WQE writers, shared by ibv_post_send() and ibv_wr_*                 */
/* ---------------------------------------------------------------------- */

/*
 * Begin the WQE for slot @index: check the opcode against the QP type, the
 * flags, and the room in the ring, then write the header.  Called with
 * sq.lock held; the slot is not the kernel's until prod passes it.
 */
static int bzc_wqe_start(struct bzc_qp *qp, uint32_t index, uint64_t wr_id,
			 enum ibv_wr_opcode opcode, unsigned int send_flags,
			 struct bzc_send_wqe **wqep)
{
	uint64_t ops = bzc_send_ops_supported(qp->vqp.qp.context,
					      qp->vqp.qp.qp_type);
	struct bzc_send_wqe *wqe;
	uint8_t flags = 0;

	if ((unsigned int)opcode >= 64 || !(ops & (1ULL << opcode)))
		return bzc_refuse(EINVAL, "opcode not supported on this QP type");
	if (send_flags & ~(unsigned int)BZC_SEND_FLAGS_KNOWN)
		return bzc_refuse(EINVAL, "unknown send_flags");
	if (bzc_wq_full(&qp->sq, index))
		return bzc_refuse(ENOMEM, "send queue full");

	if ((send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all)
		flags |= BZC_WQE_SIGNALED;
	if (send_flags & IBV_SEND_SOLICITED)
		flags |= BZC_WQE_SOLICITED;
	if (send_flags & IBV_SEND_FENCE)
		flags |= BZC_WQE_FENCE;
	/* BZC_WQE_INLINE is bzc_wqe_inline_begin()'s. */

	wqe = bzc_wq_slot(&qp->sq, index);
	memset(wqe, 0, sizeof(*wqe));
	wqe->wr_id = htole64(wr_id);
	wqe->opcode = (uint8_t)opcode;
	wqe->flags = flags;
	*wqep = wqe;
	return 0;
}

/* The immediate travels in host order in the WQE, big-endian in verbs. */
static void bzc_wqe_set_imm(struct bzc_send_wqe *wqe, __be32 imm_data)
{
	wqe->imm_data = htole32(be32toh(imm_data));
}

/* SEND_WITH_INV and LOCAL_INV: the rkey to invalidate. */
static void bzc_wqe_set_inv(struct bzc_send_wqe *wqe, uint32_t rkey)
{
	wqe->imm_data = htole32(rkey);
}

static void bzc_wqe_set_rdma(struct bzc_send_wqe *wqe, uint32_t rkey,
			     uint64_t remote_addr)
{
	wqe->rdma.remote_addr = htole64(remote_addr);
	wqe->rdma.rkey = htole32(rkey);
}

static void bzc_wqe_set_atomic(struct bzc_send_wqe *wqe, uint32_t rkey,
			       uint64_t remote_addr, uint64_t compare_add,
			       uint64_t swap)
{
	wqe->atomic.remote_addr = htole64(remote_addr);
	wqe->atomic.compare_add = htole64(compare_add);
	wqe->atomic.swap = htole64(swap);
	wqe->atomic.rkey = htole32(rkey);
}

/*
 * ATOMIC_WRITE from ibv_wr_atomic_write(): its 8 bytes travel in the WQE
 * (any slot holds them); ibv_post_send() gathers them from the SG list.
 */
static void bzc_wqe_set_atomic_write(struct bzc_send_wqe *wqe, uint32_t rkey,
				     uint64_t remote_addr, const void *data)
{
	bzc_wqe_set_rdma(wqe, rkey, remote_addr);
	memcpy((uint8_t *)wqe + BZC_SEND_WQE_DATA_OFFSET, data, 8);
	wqe->num_sge = 0;
	wqe->flags |= BZC_WQE_INLINE;
	wqe->inline_len = htole32(8);
}

#if BZC_RDMA_CORE_CLASS >= 45
/* FLUSH: @len bytes from @remote_addr (BZC_FLUSH_RANGE), or the MR. */
static int bzc_wqe_set_flush(struct bzc_send_wqe *wqe, uint32_t rkey,
			     uint64_t remote_addr, size_t len, uint8_t type,
			     uint8_t level)
{
	if (!type || (type & ~(BZC_FLUSH_GLOBAL | BZC_FLUSH_PERSISTENT)) ||
	    level > BZC_FLUSH_MR)
		return bzc_refuse(EINVAL, "unknown FLUSH type or level");
	/* IBA's FLUSH carries a 32-bit length; the MR level ignores it. */
	if (level == BZC_FLUSH_RANGE && len > UINT32_MAX)
		return bzc_refuse(EINVAL, "FLUSH range of more than 4 GiB");
	wqe->flush.remote_addr = htole64(remote_addr);
	wqe->flush.rkey = htole32(rkey);
	wqe->flush.length = htole32(level == BZC_FLUSH_RANGE ?
					    (uint32_t)len : 0);
	wqe->flush.type = type;
	wqe->flush.level = level;
	return 0;
}
#endif

/* XRC INI: the SRQ at the target the message is for (24 bits on the wire). */
static int bzc_wqe_set_xrc(struct bzc_send_wqe *wqe, uint32_t remote_srqn)
{
	if (remote_srqn > 0xffffff)
		return bzc_refuse(EINVAL, "XRC SRQ number beyond 24 bits");
	wqe->xrc_srqn = htole32(remote_srqn);
	return 0;
}

static int bzc_wqe_set_ud(struct bzc_send_wqe *wqe, struct ibv_ah *ah,
			  uint32_t remote_qpn, uint32_t remote_qkey)
{
	if (!ah)
		return bzc_refuse(EINVAL, "UD work request without an AH");
	wqe->ud.ah = htole32(to_bah(ah)->ah_index);
	wqe->ud.remote_qpn = htole32(remote_qpn);
	wqe->ud.remote_qkey = htole32(remote_qkey);
	return 0;
}

/*
 * Bind a type 2 memory window: @rkey is its new rkey, as
 * ibv_inc_rkey(mw->rkey) makes it.  Unbinding passes a zero length and
 * may leave bind_info->mr NULL.
 */
static void bzc_wqe_set_bind(struct bzc_send_wqe *wqe, uint32_t rkey,
			     const struct ibv_mw_bind_info *info)
{
	wqe->bind.addr = htole64(info->addr);
	wqe->bind.length = htole64(info->length);
	wqe->bind.mw_rkey = htole32(rkey);
	wqe->bind.mr_lkey = htole32(info->mr ? info->mr->lkey : 0);
	/* IBV_ACCESS_* are the uverbs access flags. */
	wqe->bind.access = htole32(info->mw_access_flags);
}

static inline uint8_t *bzc_wqe_data(struct bzc_send_wqe *wqe)
{
	return (uint8_t *)wqe + BZC_SEND_WQE_DATA_OFFSET;
}

/* The gather list, replacing any data set before. */
static int bzc_wqe_set_sge_list(struct bzc_qp *qp, struct bzc_send_wqe *wqe,
				const struct ibv_sge *sg_list, size_t num_sge)
{
	struct bzc_sge *sge = (struct bzc_sge *)bzc_wqe_data(wqe);
	size_t i;

	if (num_sge > qp->sq.max_sge)
		return bzc_refuse(EINVAL, "more SGEs than max_send_sge");

	for (i = 0; i < num_sge; i++) {
		sge[i].addr = htole64(sg_list[i].addr);
		sge[i].length = htole32(sg_list[i].length);
		sge[i].lkey = htole32(sg_list[i].lkey);
	}
	wqe->num_sge = (uint8_t)num_sge;
	wqe->flags &= (uint8_t)~BZC_WQE_INLINE;
	wqe->inline_len = 0;
	return 0;
}

/* Switch the WQE to (empty) inline data, replacing any data set before. */
static int bzc_wqe_inline_begin(struct bzc_send_wqe *wqe)
{
	if (!(BZC_OPS_INLINE & (1ULL << wqe->opcode)))
		return bzc_refuse(EINVAL, "inline data with an opcode that sends none");
	wqe->num_sge = 0;
	wqe->flags |= BZC_WQE_INLINE;
	wqe->inline_len = 0;
	return 0;
}

/* Append @length bytes to the inline data; at most max_inline_data in all. */
static int bzc_wqe_inline_add(struct bzc_qp *qp, struct bzc_send_wqe *wqe,
			      const void *addr, size_t length)
{
	uint32_t used = le32toh(wqe->inline_len);

	if (length > qp->sq.max_inline - used)
		return bzc_refuse(EINVAL, "inline data beyond max_inline_data");
	memcpy(bzc_wqe_data(wqe) + used, addr, length);
	wqe->inline_len = htole32(used + (uint32_t)length);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* ibv_post_send()                                                          */
/* ---------------------------------------------------------------------- */

static int bzc_build_send_wr(struct bzc_qp *qp, uint32_t index,
			     const struct ibv_send_wr *wr)
{
	struct bzc_send_wqe *wqe;
	int i, ret;

	if (wr->num_sge < 0)
		return bzc_refuse(EINVAL, "negative num_sge");
	ret = bzc_wqe_start(qp, index, wr->wr_id, wr->opcode, wr->send_flags,
			    &wqe);
	if (ret)
		return ret;

	switch (wr->opcode) {
	case IBV_WR_SEND:
		break;
	case IBV_WR_SEND_WITH_IMM:
		bzc_wqe_set_imm(wqe, wr->imm_data);
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		bzc_wqe_set_inv(wqe, wr->invalidate_rkey);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		bzc_wqe_set_imm(wqe, wr->imm_data);
		bzc_wqe_set_rdma(wqe, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
	/* ATOMIC_WRITE: its 8 bytes are the gather list's. */
	case IBV_WR_ATOMIC_WRITE:
		bzc_wqe_set_rdma(wqe, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		bzc_wqe_set_atomic(wqe, wr->wr.atomic.rkey,
				   wr->wr.atomic.remote_addr,
				   wr->wr.atomic.compare_add,
				   wr->wr.atomic.swap);
		break;
	case IBV_WR_BIND_MW:
		bzc_wqe_set_bind(wqe, wr->bind_mw.rkey,
				 &wr->bind_mw.bind_info);
		break;
	default:
		/* bzc_wqe_start() let no other opcode through. */
		return bzc_refuse(EINVAL, "unknown opcode");
	}

	if (qp->vqp.qp.qp_type == IBV_QPT_UD) {
		ret = bzc_wqe_set_ud(wqe, wr->wr.ud.ah, wr->wr.ud.remote_qpn,
				     wr->wr.ud.remote_qkey);
		if (ret)
			return ret;
	}
	if (qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND) {
		ret = bzc_wqe_set_xrc(wqe, wr->qp_type.xrc.remote_srqn);
		if (ret)
			return ret;
	}

	if (!(wr->send_flags & IBV_SEND_INLINE))
		return bzc_wqe_set_sge_list(qp, wqe, wr->sg_list,
					    (size_t)wr->num_sge);

	/* Inline: the gather list names the bytes to copy now. */
	ret = bzc_wqe_inline_begin(wqe);
	for (i = 0; !ret && i < wr->num_sge; i++)
		ret = bzc_wqe_inline_add(qp, wqe,
					 (const void *)(uintptr_t)
						 wr->sg_list[i].addr,
					 wr->sg_list[i].length);
	return ret;
}

int bzc_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr)
{
	struct bzc_qp *qp = to_bqp(ibqp);
	uint32_t start;
	bool posted;
	int ret;

	if (!wr)
		return 0;
	ret = bzc_sq_check_state(qp);
	if (ret) {
		bzc_sq_refused(qp, wr->wr_id, ret);
		*bad_wr = wr;
		return ret;
	}

	bzc_wq_lock(&qp->sq);
	start = qp->sq.prod;
	for (; wr; wr = wr->next) {
		ret = bzc_build_send_wr(qp, qp->sq.prod, wr);
		if (ret)
			break;
		qp->sq.prod++;
	}
	posted = qp->sq.prod != start;
	if (posted)
		bzc_wq_publish(&qp->sq);
	bzc_wq_unlock(&qp->sq);

	/* WRs before a bad one are posted, and need the doorbell too. */
	if (ret) {
		bzc_sq_refused(qp, wr->wr_id, ret);
		*bad_wr = wr;
	}
	if (posted)
		bzc_sq_doorbell(qp);
	return ret;
}

/*
 * ibv_bind_mw() of a type 1 window (mw.c): one BIND_MW WQE marked
 * BZC_WQE_BIND_TYPE1, posted and rung like a one-WR ibv_post_send().
 */
int bzc_post_bind_type1(struct bzc_qp *qp, const struct ibv_mw_bind *mw_bind,
			uint32_t rkey)
{
	struct bzc_send_wqe *wqe;
	int ret;

	ret = bzc_sq_check_state(qp);
	if (ret) {
		bzc_sq_refused(qp, mw_bind->wr_id, ret);
		return ret;
	}

	bzc_wq_lock(&qp->sq);
	ret = bzc_wqe_start(qp, qp->sq.prod, mw_bind->wr_id, IBV_WR_BIND_MW,
			    mw_bind->send_flags, &wqe);
	if (!ret) {
		bzc_wqe_set_bind(wqe, rkey, &mw_bind->bind_info);
		wqe->flags |= BZC_WQE_BIND_TYPE1;
		qp->sq.prod++;
		bzc_wq_publish(&qp->sq);
	}
	bzc_wq_unlock(&qp->sq);

	if (ret) {
		bzc_sq_refused(qp, mw_bind->wr_id, ret);
		return ret;
	}
	bzc_sq_doorbell(qp);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* The ibv_wr_* API                                                         */
/* ---------------------------------------------------------------------- */

/*
 * wr_start takes sq.lock and wr_complete / wr_abort release it, so a batch
 * is built without interference and the WQEs of a failed batch are simply
 * never published.  The first error sticks: later calls do nothing, and
 * wr_complete returns it.
 */
static void bzc_wr_start(struct ibv_qp_ex *ibqp)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);

	bzc_wq_lock(&qp->sq);
	qp->wr_count = 0;
	qp->wr_cur = NULL;
	qp->wr_err = bzc_sq_check_state(qp);
}

static int bzc_wr_complete(struct ibv_qp_ex *ibqp)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);
	int ret = qp->wr_err;

	if (ret || !qp->wr_count) {
		bzc_wq_unlock(&qp->sq);
		if (ret)
			bzc_dbg(ibqp->qp_base.context,
				"QP %u: ibv_wr_* batch refused (%s): %s\n",
				ibqp->qp_base.qp_num, strerror(ret), bzc_refusal);
		return ret;
	}

	/*
	 * Every check has passed: from this store on the batch is posted,
	 * which is what a 0 from ibv_wr_complete() promises.
	 */
	qp->sq.prod += qp->wr_count;
	bzc_wq_publish(&qp->sq);
	bzc_wq_unlock(&qp->sq);

	bzc_sq_doorbell(qp);
	return 0;
}

static void bzc_wr_abort(struct ibv_qp_ex *ibqp)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);

	bzc_wq_unlock(&qp->sq);
}

/* Begin the next WQE of the batch, with ibqp->wr_id and ->wr_flags. */
static struct bzc_send_wqe *bzc_wr_new(struct ibv_qp_ex *ibqp,
				       enum ibv_wr_opcode opcode)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);
	struct bzc_send_wqe *wqe;
	int ret;

	if (qp->wr_err)
		return NULL;

	/* Inline data is chosen with wr_set_inline_data*, not the flag. */
	ret = bzc_wqe_start(qp, qp->sq.prod + qp->wr_count, ibqp->wr_id,
			    opcode, ibqp->wr_flags & ~(unsigned int)IBV_SEND_INLINE,
			    &wqe);
	if (ret) {
		qp->wr_err = ret;
		qp->wr_cur = NULL;
		return NULL;
	}

	qp->wr_count++;
	qp->wr_cur = wqe;
	return wqe;
}

/* The WQE the setters fill: the last one begun, if all went well. */
static struct bzc_send_wqe *bzc_wr_cur(struct bzc_qp *qp)
{
	if (qp->wr_err)
		return NULL;
	/* A setter before any opcode call. */
	if (!qp->wr_cur) {
		qp->wr_err = bzc_refuse(EINVAL, "a setter before any builder");
		return NULL;
	}
	return qp->wr_cur;
}

static void bzc_wr_fail(struct bzc_qp *qp, int ret)
{
	if (ret && !qp->wr_err)
		qp->wr_err = ret;
}

static void bzc_wr_send(struct ibv_qp_ex *ibqp)
{
	bzc_wr_new(ibqp, IBV_WR_SEND);
}

static void bzc_wr_send_imm(struct ibv_qp_ex *ibqp, __be32 imm_data)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_SEND_WITH_IMM);

	if (wqe)
		bzc_wqe_set_imm(wqe, imm_data);
}

static void bzc_wr_send_inv(struct ibv_qp_ex *ibqp, uint32_t invalidate_rkey)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_SEND_WITH_INV);

	if (wqe)
		bzc_wqe_set_inv(wqe, invalidate_rkey);
}

static void bzc_wr_rdma_write(struct ibv_qp_ex *ibqp, uint32_t rkey,
			      uint64_t remote_addr)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_RDMA_WRITE);

	if (wqe)
		bzc_wqe_set_rdma(wqe, rkey, remote_addr);
}

static void bzc_wr_rdma_write_imm(struct ibv_qp_ex *ibqp, uint32_t rkey,
				  uint64_t remote_addr, __be32 imm_data)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_RDMA_WRITE_WITH_IMM);

	if (wqe) {
		bzc_wqe_set_imm(wqe, imm_data);
		bzc_wqe_set_rdma(wqe, rkey, remote_addr);
	}
}

static void bzc_wr_rdma_read(struct ibv_qp_ex *ibqp, uint32_t rkey,
			     uint64_t remote_addr)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_RDMA_READ);

	if (wqe)
		bzc_wqe_set_rdma(wqe, rkey, remote_addr);
}

static void bzc_wr_atomic_cmp_swp(struct ibv_qp_ex *ibqp, uint32_t rkey,
				  uint64_t remote_addr, uint64_t compare,
				  uint64_t swap)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (wqe)
		bzc_wqe_set_atomic(wqe, rkey, remote_addr, compare, swap);
}

static void bzc_wr_atomic_fetch_add(struct ibv_qp_ex *ibqp, uint32_t rkey,
				    uint64_t remote_addr, uint64_t add)
{
	struct bzc_send_wqe *wqe =
		bzc_wr_new(ibqp, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (wqe)
		bzc_wqe_set_atomic(wqe, rkey, remote_addr, add, 0);
}

static void bzc_wr_atomic_write(struct ibv_qp_ex *ibqp, uint32_t rkey,
				uint64_t remote_addr, const void *atomic_wr)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_ATOMIC_WRITE);

	if (wqe)
		bzc_wqe_set_atomic_write(wqe, rkey, remote_addr, atomic_wr);
}

#if BZC_RDMA_CORE_CLASS >= 45
static void bzc_wr_flush(struct ibv_qp_ex *ibqp, uint32_t rkey,
			 uint64_t remote_addr, size_t len, uint8_t type,
			 uint8_t level)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_FLUSH);

	if (wqe)
		bzc_wr_fail(to_bqp_ex(ibqp),
			    bzc_wqe_set_flush(wqe, rkey, remote_addr, len,
					      type, level));
}
#endif

static void bzc_wr_local_inv(struct ibv_qp_ex *ibqp, uint32_t invalidate_rkey)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_LOCAL_INV);

	if (wqe)
		bzc_wqe_set_inv(wqe, invalidate_rkey);
}

static void bzc_wr_bind_mw(struct ibv_qp_ex *ibqp, struct ibv_mw *mw,
			   uint32_t rkey,
			   const struct ibv_mw_bind_info *bind_info)
{
	struct bzc_send_wqe *wqe = bzc_wr_new(ibqp, IBV_WR_BIND_MW);

	if (wqe)
		bzc_wqe_set_bind(wqe, rkey, bind_info);
}

static void bzc_wr_set_ud_addr(struct ibv_qp_ex *ibqp, struct ibv_ah *ah,
			       uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);
	struct bzc_send_wqe *wqe = bzc_wr_cur(qp);

	if (!wqe)
		return;
	if (ibqp->qp_base.qp_type != IBV_QPT_UD) {
		bzc_wr_fail(qp, bzc_refuse(EINVAL, "a UD address on a non-UD QP"));
		return;
	}
	bzc_wr_fail(qp, bzc_wqe_set_ud(wqe, ah, remote_qpn, remote_qkey));
}

static void bzc_wr_set_xrc_srqn(struct ibv_qp_ex *ibqp, uint32_t remote_srqn)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);
	struct bzc_send_wqe *wqe = bzc_wr_cur(qp);

	if (!wqe)
		return;
	if (ibqp->qp_base.qp_type != IBV_QPT_XRC_SEND) {
		bzc_wr_fail(qp, bzc_refuse(EINVAL,
					   "an XRC SRQ number on a non-XRC QP"));
		return;
	}
	bzc_wr_fail(qp, bzc_wqe_set_xrc(wqe, remote_srqn));
}

static void bzc_wr_set_sge(struct ibv_qp_ex *ibqp, uint32_t lkey,
			   uint64_t addr, uint32_t length)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);
	struct bzc_send_wqe *wqe = bzc_wr_cur(qp);
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	if (wqe)
		bzc_wr_fail(qp, bzc_wqe_set_sge_list(qp, wqe, &sge, 1));
}

static void bzc_wr_set_sge_list(struct ibv_qp_ex *ibqp, size_t num_sge,
				const struct ibv_sge *sg_list)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);
	struct bzc_send_wqe *wqe = bzc_wr_cur(qp);

	if (wqe)
		bzc_wr_fail(qp, bzc_wqe_set_sge_list(qp, wqe, sg_list, num_sge));
}

static void bzc_wr_set_inline_data(struct ibv_qp_ex *ibqp, void *addr,
				   size_t length)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);
	struct bzc_send_wqe *wqe = bzc_wr_cur(qp);
	int ret;

	if (!wqe)
		return;
	ret = bzc_wqe_inline_begin(wqe);
	if (!ret)
		ret = bzc_wqe_inline_add(qp, wqe, addr, length);
	bzc_wr_fail(qp, ret);
}

static void bzc_wr_set_inline_data_list(struct ibv_qp_ex *ibqp,
					size_t num_buf,
					const struct ibv_data_buf *buf_list)
{
	struct bzc_qp *qp = to_bqp_ex(ibqp);
	struct bzc_send_wqe *wqe = bzc_wr_cur(qp);
	size_t i;
	int ret;

	if (!wqe)
		return;
	ret = bzc_wqe_inline_begin(wqe);
	for (i = 0; !ret && i < num_buf; i++)
		ret = bzc_wqe_inline_add(qp, wqe, buf_list[i].addr,
					 buf_list[i].length);
	bzc_wr_fail(qp, ret);
}

/*
 * Install the ibv_wr_* API on a QP created with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (create_qp_ex has refused opcodes the
 * QP type, the kernel or this libibverbs cannot carry).  wr_send_tso
 * stays NULL: bzc has no TSO; so does wr_flush before rdma-core 45, whose
 * struct ibv_qp_ex has none.
 */
void bzc_qp_init_wr_ops(struct bzc_qp *qp)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;

	qpx->wr_start = bzc_wr_start;
	qpx->wr_complete = bzc_wr_complete;
	qpx->wr_abort = bzc_wr_abort;

	qpx->wr_send = bzc_wr_send;
	qpx->wr_send_imm = bzc_wr_send_imm;
	qpx->wr_send_inv = bzc_wr_send_inv;
	qpx->wr_rdma_write = bzc_wr_rdma_write;
	qpx->wr_rdma_write_imm = bzc_wr_rdma_write_imm;
	qpx->wr_rdma_read = bzc_wr_rdma_read;
	qpx->wr_atomic_cmp_swp = bzc_wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = bzc_wr_atomic_fetch_add;
	qpx->wr_atomic_write = bzc_wr_atomic_write;
#if BZC_RDMA_CORE_CLASS >= 45
	qpx->wr_flush = bzc_wr_flush;
#endif
	qpx->wr_local_inv = bzc_wr_local_inv;
	qpx->wr_bind_mw = bzc_wr_bind_mw;

	qpx->wr_set_ud_addr = bzc_wr_set_ud_addr;
	qpx->wr_set_xrc_srqn = bzc_wr_set_xrc_srqn;
	qpx->wr_set_sge = bzc_wr_set_sge;
	qpx->wr_set_sge_list = bzc_wr_set_sge_list;
	qpx->wr_set_inline_data = bzc_wr_set_inline_data;
	qpx->wr_set_inline_data_list = bzc_wr_set_inline_data_list;

	qp->vqp.comp_mask |= VERBS_QP_EX;
}
