// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the requester (docs/transport.md), the SQ side of the data path.
 *
 * A QP's send WQEs are executed in order by whoever holds its sq_mutex: the
 * doorbell syscall itself for short WQEs (low latency, nothing sleeps), a
 * worker on bzc_cpu_wq for the rest (long copies may reschedule), on the
 * CPU that kicked it: the doorbell's, or the one an answer came to.
 * Executing a WQE means checking it and its local keys, building the
 * message it sends (struct bzc_msg) and handing that to the transport,
 * whose responder answers; the completer (bzc_comp.c) completes the WQE
 * from the answer, as the transport's semantics say (RC: reliable with RNR
 * retries and error completions on both sides; UC and UD: what cannot be
 * delivered is dropped).
 *
 * Everything read from a ring is copied into kernel memory first and
 * checked there; the process can change its ring at any time.
 *
 * Ordering: WQEs complete in order. RC messages on the wire join the QP's
 * send window (bzc_roce_rc.c) and complete when their answers come, so
 * several are in flight; fences, max_rd_atomic and the window's size hold
 * the next one back there. Everything else (local operations, the local
 * transport, UC and UD) runs when the window is empty and has finished
 * before the next WQE starts.
 */
#include <linux/sched.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>

#include "bzc_xport.h"

struct workqueue_struct *bzc_wq;
struct workqueue_struct *bzc_cpu_wq;

/*
 * What one doorbell syscall runs itself: at most this many WQEs (flushed
 * ones included) moving at most this many bytes in all; the worker takes
 * the rest, at most BZC_WORKER_WQES per pass.
 */
#define BZC_DOORBELL_WQES	64
#define BZC_DOORBELL_BYTES	SZ_64K
#define BZC_WORKER_WQES		1024

/* The Q_Key a UD WQE sends with: its own, or the QP's (high bit set). */
static u32 bzc_ud_qkey(struct bzc_qp *qp, const struct bzc_send_wqe *wqe)
{
	u32 qkey = le32_to_cpu(wqe->ud.remote_qkey);

	return qkey & 0x80000000 ? READ_ONCE(qp->qkey) : qkey;
}

/* The GID `qp` sends from (its AV's source GID index): false if none. */
static bool bzc_sender_gid(struct bzc_qp *qp, u8 sgid_index, union ib_gid *gid)
{
	const struct ib_gid_attr *attr;

	attr = rdma_get_gid_attr(qp->ibqp.device, BZC_PORT, sgid_index);
	if (IS_ERR(attr))
		return false;
	*gid = attr->gid;
	rdma_put_gid_attr(attr);
	return true;
}

static bool bzc_opcode_valid(enum ib_qp_type type, u8 opcode)
{
	switch (opcode) {
	case IB_UVERBS_WR_SEND:
	case IB_UVERBS_WR_SEND_WITH_IMM:
		return true;
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		return !bzc_type_ud(type);
	/* An XRC initiator: as RC, but for the Placement Extensions. */
	case IB_UVERBS_WR_RDMA_READ:
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return type == IB_QPT_RC || type == IB_QPT_XRC_INI;
	case IB_UVERBS_WR_SEND_WITH_INV:
	case BZC_WR_ATOMIC_WRITE:
	case BZC_WR_FLUSH:
		return type == IB_QPT_RC;
	/* Local operations: windows exist for connected QPs only. */
	case IB_UVERBS_WR_LOCAL_INV:
	case IB_UVERBS_WR_BIND_MW:
	case BZC_KWR_REG_MR:
		return type != IB_QPT_UD;
	default:
		return false;
	}
}

/* Bytes a (checked) WQE moves: decides doorbell vs worker. */
static u64 bzc_wqe_bytes(const struct bzc_send_wqe *wqe)
{
	const struct bzc_sge *sge = (const void *)wqe + BZC_SEND_WQE_DATA_OFFSET;
	u64 bytes = 0;
	u32 i;

	if (wqe->flags & BZC_WQE_INLINE)
		return le32_to_cpu(wqe->inline_len);
	for (i = 0; i < wqe->num_sge; i++)
		bytes += le32_to_cpu(sge[i].length);
	return bytes;
}

/* Is the WQE well formed for this QP? (It is in kernel memory now.) */
static bool bzc_wqe_valid(struct bzc_qp *qp, const struct bzc_send_wqe *wqe)
{
	if (!bzc_opcode_valid(qp->ibqp.qp_type, wqe->opcode))
		return false;
	/* A process's ring cannot hold a REG_MR (bzc_kqp.c writes them). */
	if (wqe->opcode == BZC_KWR_REG_MR)
		return bzc_qp_is_kernel(qp) && !(wqe->flags & BZC_WQE_INLINE) &&
		       !wqe->num_sge;
	/* A FLUSH moves no data of its own. */
	if (wqe->opcode == BZC_WR_FLUSH)
		return !(wqe->flags & BZC_WQE_INLINE) && !wqe->num_sge;
	if (wqe->flags & BZC_WQE_INLINE)
		return le32_to_cpu(wqe->inline_len) <= qp->max_inline &&
		       wqe->opcode != IB_UVERBS_WR_BIND_MW &&
		       wqe->opcode != IB_UVERBS_WR_LOCAL_INV &&
		       wqe->opcode != IB_UVERBS_WR_RDMA_READ &&
		       wqe->opcode != IB_UVERBS_WR_ATOMIC_CMP_AND_SWP &&
		       wqe->opcode != IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
	return wqe->num_sge <= qp->max_send_sge;
}

/*
 * ATOMIC_WRITE's 8 bytes, gathered from its (checked) local SGEs; false
 * when they lost a page of an ODP MR.
 */
static bool bzc_atomic_write_operand(struct bzc_sgl *local, u64 *operand,
				     bool may_sleep)
{
	struct bzc_sgl op;
	struct bzc_cursor dc = { .sgl = &op }, sc = { .sgl = local };

	bzc_sgl_kbuf(&op, operand, sizeof(*operand));
	return !bzc_copy(&dc, &sc, sizeof(*operand), may_sleep);
}

/*
 * The message a checked WQE sends from `local`, to `av`: for UD the AH's
 * address, already there; for RC and UC the QP's, copied here. Returns
 * false when an RC or UC QP has no GID to send from: nothing goes out.
 */
static bool bzc_msg_build(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			  struct bzc_sgl *local, struct bzc_av *av,
			  struct bzc_msg *msg)
{
	msg->opcode = wqe->opcode;
	msg->flags = wqe->flags & BZC_WQE_SOLICITED;
	msg->type = qp->ibqp.qp_type;
	msg->sqpn = qp->ibqp.qp_num;
	msg->av = av;
	msg->local = local;
	msg->imm_data = wqe->imm_data;
	msg->qkey = 0;
	msg->remote_addr = 0;
	msg->rkey = 0;
	msg->compare_add = 0;
	msg->swap = 0;
	msg->length = 0;
	msg->flush_type = 0;
	msg->flush_level = 0;
	msg->xrc_srqn = 0;
	msg->wqe = wqe;

	if (bzc_type_ud(msg->type)) {
		msg->dqpn = le32_to_cpu(wqe->ud.remote_qpn) & 0xffffff;
		msg->qkey = bzc_ud_qkey(qp, wqe);
		/* A datagram goes out anyway, its GRH naming no source. */
		if (!bzc_sender_gid(qp, av->sgid_index, &msg->sgid))
			memset(&msg->sgid, 0, sizeof(msg->sgid));
		return true;
	}

	switch (wqe->opcode) {
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
	case IB_UVERBS_WR_RDMA_READ:
		msg->remote_addr = le64_to_cpu(wqe->rdma.remote_addr);
		msg->rkey = le32_to_cpu(wqe->rdma.rkey);
		break;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		msg->remote_addr = le64_to_cpu(wqe->atomic.remote_addr);
		msg->rkey = le32_to_cpu(wqe->atomic.rkey);
		msg->compare_add = le64_to_cpu(wqe->atomic.compare_add);
		msg->swap = le64_to_cpu(wqe->atomic.swap);
		break;
	case BZC_WR_ATOMIC_WRITE:
		msg->remote_addr = le64_to_cpu(wqe->rdma.remote_addr);
		msg->rkey = le32_to_cpu(wqe->rdma.rkey);
		break;
	case BZC_WR_FLUSH:
		msg->remote_addr = le64_to_cpu(wqe->flush.remote_addr);
		msg->rkey = le32_to_cpu(wqe->flush.rkey);
		msg->length = le32_to_cpu(wqe->flush.length);
		msg->flush_type = wqe->flush.type;
		msg->flush_level = wqe->flush.level;
		break;
	}
	/* XRC: the target checks the SRQ number against its XRC domain. */
	if (msg->type == IB_QPT_XRC_INI)
		msg->xrc_srqn = le32_to_cpu(wqe->xrc_srqn) & 0xffffff;
	spin_lock(&qp->lock);
	*av = qp->av;
	msg->dqpn = qp->dest_qpn;
	spin_unlock(&qp->lock);
	return bzc_sender_gid(qp, av->sgid_index, &msg->sgid);
}

/*
 * Run one WQE: its checks and local keys, then, for what goes to a peer,
 * the message through the transport and the answer into `res`.
 */
static void bzc_req_wqe(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			bool may_sleep, struct bzc_result *res)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	struct bzc_sgl *local = qp->local_sgl;
	bool reads_in = wqe->opcode == IB_UVERBS_WR_RDMA_READ ||
			wqe->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
			wqe->opcode == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
	struct bzc_resp_result rr = { .syndrome = BZC_AETH_ACK };
	struct bzc_msg msg;
	struct bzc_av av;
	bool answered;

	res->status = IB_WC_SUCCESS;
	res->rnr = false;
	res->defer = false;
	res->posted = false;
	res->wait = false;

	if (!bzc_wqe_valid(qp, wqe)) {
		res->status = IB_WC_LOC_QP_OP_ERR;
		return;
	}
	/* Local operations: nothing moves, no peer; their SGEs are ignored. */
	res->byte_len = 0;
	if (wqe->opcode == IB_UVERBS_WR_BIND_MW) {
		res->status = bzc_mw_bind(qp, wqe);
		return;
	}
	if (wqe->opcode == BZC_KWR_REG_MR) {
		res->status = bzc_fr_register(qp, wqe);
		return;
	}
	if (wqe->opcode == IB_UVERBS_WR_LOCAL_INV) {
		if (bzc_key_invalidate(bdev, le32_to_cpu(wqe->imm_data), qp,
				       false))
			res->status = IB_WC_LOC_QP_OP_ERR;
		return;
	}
	if (wqe->flags & BZC_WQE_INLINE) {
		bzc_sgl_kbuf(local, (const void *)wqe + BZC_SEND_WQE_DATA_OFFSET,
			     le32_to_cpu(wqe->inline_len));
	} else if (!bzc_sgl_from_sges(local, bdev, qp->ibqp.pd,
				      (const void *)wqe + BZC_SEND_WQE_DATA_OFFSET,
				      wqe->num_sge,
				      reads_in ? IB_ACCESS_LOCAL_WRITE : 0)) {
		res->status = IB_WC_LOC_PROT_ERR;
		return;
	}
	res->byte_len = local->total;
	/*
	 * An atomic's local SGEs must hold its 8-byte result, an
	 * ATOMIC_WRITE's give exactly its 8 bytes.
	 */
	if (local->total > BZC_MAX_MSG_SZ ||
	    (reads_in && wqe->opcode != IB_UVERBS_WR_RDMA_READ &&
	     local->total < sizeof(u64)) ||
	    (wqe->opcode == BZC_WR_ATOMIC_WRITE &&
	     local->total != sizeof(u64))) {
		res->status = IB_WC_LOC_LEN_ERR;
		goto out;
	}

	/* An AH that is not this PD's is the sender's error, not a drop. */
	if (bzc_type_ud(qp->ibqp.qp_type) &&
	    !bzc_ah_get_av(bdev, le32_to_cpu(wqe->ud.ah), qp->ibqp.pd, &av)) {
		res->status = IB_WC_LOC_QP_OP_ERR;
		goto out;
	}
	/*
	 * A datagram longer than the port MTU is not sent, yet the sender
	 * sees success (IBA C10-93.1.1), as on a real port.
	 */
	if (bzc_type_ud(qp->ibqp.qp_type) &&
	    local->total > ib_mtu_enum_to_int(iboe_get_mtu(READ_ONCE(bdev->ndev->mtu))))
		goto out;

	answered = bzc_msg_build(qp, wqe, local, &av, &msg);
	if (answered && wqe->opcode == BZC_WR_ATOMIC_WRITE &&
	    !bzc_atomic_write_operand(local, &msg.swap, may_sleep)) {
		res->status = IB_WC_LOC_PROT_ERR;
		goto out;
	}
	/* bzc_local_send() carries it in this kernel or puts it on the wire. */
	answered = answered &&
		   bzc_xport_send(&bzc_local_xport, qp, &msg, may_sleep, &rr);
	bzc_comp_answer(&msg, answered ? &rr : NULL, may_sleep, res);
out:
	bzc_sgl_put(local);
}

/*
 * Execute (or, in ERR/SQE, flush) the SQ's WQEs that the producer index
 * shows when the run starts, at most `max_wqes` of them (flushed ones
 * included) and, unless `max_bytes` is U64_MAX, no WQE that would take the
 * bytes moved past `max_bytes`. Holds sq_mutex. Returns true when WQEs of
 * that snapshot are left: the caller hands them to the worker.
 *
 * prod is read once: a process that keeps posting while another of its
 * threads rings the doorbell must not keep the kernel in this loop.
 */
static bool bzc_sq_run(struct bzc_qp *qp, u32 max_wqes, u64 max_bytes,
		       bool may_sleep)
{
	struct bzc_wq_ring_hdr *hdr = qp->sq.kaddr;
	struct bzc_send_wqe *wqe = qp->sq_wqe;
	struct bzc_result res;
	enum ib_qp_state state;
	u32 prod, done = 0;

	/* Pairs with the process's release of prod after its WQEs. */
	prod = le32_to_cpu(smp_load_acquire(&hdr->prod));
	if (prod - qp->sq_cons > qp->sq.entries) {
		ibdev_info_ratelimited(qp->ibqp.device,
				       "QP %u: send queue producer index %u is beyond the ring\n",
				       qp->ibqp.qp_num, prod);
		bzc_qp_error(qp, IB_EVENT_QP_FATAL);
		return false;
	}

	/*
	 * The RC send window's answers first: its messages complete before
	 * any WQE after them. Only the worker retires them (it may sleep);
	 * the doorbell may add messages to the window.
	 */
	if (may_sleep && bzc_wire_inflight(qp) && !bzc_wire_reap(qp))
		return false;	/* an RNR wait: the worker comes back */
	/* Packets of the window the local queue could not take yet. */
	bzc_wire_tx(qp, may_sleep);

	for (; qp->sq_cons != prod; done++) {
		if (done == max_wqes)
			return true;
		if (done && may_sleep)
			cond_resched();
		state = READ_ONCE(qp->state);
		memcpy(wqe, bzc_wq_slot(&qp->sq, qp->sq_cons, qp->sq_wqe_size),
		       qp->sq_wqe_size);

		/* Messages in flight are flushed (or complete) first. */
		if ((state == IB_QPS_ERR || state == IB_QPS_SQE) &&
		    bzc_wire_inflight(qp)) {
			if (!may_sleep)
				return true;
			bzc_wire_reap(qp);
		}
		if (state == IB_QPS_ERR || state == IB_QPS_SQE) {
			bzc_comp_flush(qp, wqe);
			continue;
		}
		if (state != IB_QPS_RTS)
			return false;	/* held until RTS (SQD, or not yet) */
		/* ODP MRs may fault, which only the worker does. */
		if (!may_sleep && bzc_odp_active())
			return true;
		if (qp->rnr_waiting && time_before(jiffies, qp->rnr_until)) {
			/* Woken early (a doorbell): keep the RNR timer armed. */
			bzc_sq_queue_in(qp, qp->rnr_until - jiffies);
			return false;
		}
		if (max_bytes != U64_MAX && bzc_wqe_valid(qp, wqe) &&
		    bzc_wqe_bytes(wqe) > max_bytes)
			return true;
		/* A REG_MR may wait for the MR's last accesses: the worker's. */
		if (!may_sleep && wqe->opcode == BZC_KWR_REG_MR)
			return true;

		/*
		 * Only messages join a send window that holds some; the rest
		 * waits for its answers (which kick the worker).
		 */
		if (bzc_wire_inflight(qp) &&
		    !bzc_wire_windowed(qp, wqe->opcode))
			return false;

		bzc_req_wqe(qp, wqe, may_sleep, &res);
		if (res.defer)
			return true;	/* the worker runs it again */
		if (res.wait)
			return false;	/* the window's answers kick the worker */
		if (res.posted) {
			/* In the window: it completes, in order, later. */
			qp->sq_cons++;
			if (max_bytes != U64_MAX)
				max_bytes -= min(max_bytes, res.byte_len);
			continue;
		}
		/*
		 * It ended here (a bad lkey, no route) with messages before
		 * it still in the window: its CQE must follow theirs, and its
		 * slot must not be handed back ahead of theirs. It runs again
		 * once they are retired (their answers kick the worker); what
		 * failed it had no effect yet.
		 */
		if (bzc_wire_inflight(qp))
			return false;
		if (!bzc_comp_wqe(qp, wqe, &res))
			return false;
		if (max_bytes != U64_MAX)
			max_bytes -= min(max_bytes, res.byte_len);
	}
	return false;
}

/* The doorbell: run a few short WQEs right here, hand the rest to the worker. */
void bzc_sq_kick(struct bzc_qp *qp)
{
	bool more;

	bzc_count(to_bdev(qp->ibqp.device), BZC_CNT_DOORBELLS, 1);
	if (!mutex_trylock(&qp->sq_mutex)) {
		/* The holder may be past its look at prod: requeue. */
		bzc_sq_queue(qp);
		return;
	}
	more = bzc_sq_run(qp, BZC_DOORBELL_WQES, BZC_DOORBELL_BYTES, false);
	mutex_unlock(&qp->sq_mutex);
	if (more)
		bzc_sq_queue(qp);
}

/*
 * The worker: one bounded pass, then it queues itself again if WQEs are
 * left, so a busy QP shares the workqueue and the CPU with the others.
 */
void bzc_sq_work(struct work_struct *work)
{
	struct bzc_qp *qp = container_of(to_delayed_work(work), struct bzc_qp,
					 sq_work);
	bool more, drained;

	mutex_lock(&qp->sq_mutex);
	more = bzc_sq_run(qp, BZC_WORKER_WQES, U64_MAX, true);
	drained = qp->sqd_owed && !bzc_wire_inflight(qp);
	if (drained)
		qp->sqd_owed = false;
	mutex_unlock(&qp->sq_mutex);
	/* Not under sq_mutex: an event handler may modify the QP. */
	if (drained)
		bzc_qp_sq_drained(qp);
	if (more)
		bzc_sq_queue(qp);
}

/* Scratch space a QP's data path needs; allocated with the QP. */
int bzc_qp_alloc_scratch(struct bzc_qp *qp, gfp_t gfp)
{
	qp->local_sgl = kzalloc(sizeof(*qp->local_sgl), gfp);
	qp->peer_sgl = kzalloc(sizeof(*qp->peer_sgl), gfp);
	qp->peer_rqe = kzalloc(BZC_RESP_RQE_BYTES, gfp);
	if (qp->local_sgl && qp->peer_sgl && qp->peer_rqe &&
	    (bzc_type_ud(qp->ibqp.qp_type) || !bzc_wire_alloc(qp, gfp)))
		return 0;
	bzc_qp_free_scratch(qp);
	return -ENOMEM;
}

void bzc_qp_free_scratch(struct bzc_qp *qp)
{
	kfree(qp->local_sgl);
	kfree(qp->peer_sgl);
	kfree(qp->peer_rqe);
	bzc_wire_free(qp);
	qp->local_sgl = NULL;
	qp->peer_sgl = NULL;
	qp->peer_rqe = NULL;
}
