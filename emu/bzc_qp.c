// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: queue pairs — creation with mapped SQ/RQ rings, the IB state
 * machine, query, destroy, flush, and the doorbells.
 */
#include <linux/log2.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/uverbs_ioctl.h>
#define UVERBS_MODULE_NAME bzc
#include <rdma/uverbs_named_ioctl.h>
#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"
#include "bzc_compat.h"
#include "bzc_xport.h"

#define BZC_MIN_QPN	16	/* 0 and 1 are the special QPs */
#define BZC_MAX_QPN	((1U << 24) - 1)
#define BZC_MAX_INLINE	512
#define BZC_RECV_WQE_HDR sizeof(struct bzc_recv_wqe)

/* For bzc_qp.serial; 64 bits do not wrap. */
static atomic64_t bzc_qp_serials = ATOMIC64_INIT(0);

static struct bzc_wq_ring_hdr *wq_hdr(struct bzc_ring *ring)
{
	return ring->kaddr;
}

/* Size a work queue: slots for `wr` WQEs of `hdr` bytes + `sge` SGEs. */
static void bzc_wq_size(u32 wr, u32 hdr, u32 data, u32 *entries, u32 *slot)
{
	*entries = roundup_pow_of_two(max(wr, 1U));
	*slot = roundup_pow_of_two(hdr + max_t(u32, data, sizeof(struct bzc_sge)));
}

static int bzc_qp_check_caps(struct bzc_dev *bdev, struct ib_qp_init_attr *init)
{
	struct ib_qp_cap *cap = &init->cap;

	if (cap->max_send_wr > bdev->attr.max_qp_wr ||
	    cap->max_send_sge > bdev->attr.max_send_sge ||
	    cap->max_inline_data > BZC_MAX_INLINE)
		return -EINVAL;
	if (!init->srq && (cap->max_recv_wr > bdev->attr.max_qp_wr ||
			   cap->max_recv_sge > bdev->attr.max_recv_sge))
		return -EINVAL;
	return 0;
}

static int bzc_qp_alloc_sq(struct bzc_qp *qp, struct bzc_dev *bdev,
			   struct ib_qp_cap *cap, struct ib_udata *udata)
{
	u32 entries, slot;
	int err;

	bzc_wq_size(cap->max_send_wr, BZC_SEND_WQE_DATA_OFFSET,
		    max(cap->max_send_sge * (u32)sizeof(struct bzc_sge),
			cap->max_inline_data), &entries, &slot);
	qp->sq_wqe = kmalloc(slot, bzc_gfp(udata));
	if (!qp->sq_wqe)
		return -ENOMEM;
	err = bzc_ring_alloc(&qp->sq, udata, BZC_WQ_RING_WQE_OFFSET, slot,
			     entries);
	if (err) {
		kfree(qp->sq_wqe);
		return err;
	}

	/* Report what the slots really hold. */
	qp->sq_wqe_size = slot;
	qp->max_send_sge = min_t(u32, (slot - BZC_SEND_WQE_DATA_OFFSET) /
				 sizeof(struct bzc_sge), bdev->attr.max_send_sge);
	qp->max_inline = min_t(u32, slot - BZC_SEND_WQE_DATA_OFFSET,
			       BZC_MAX_INLINE);
	cap->max_send_wr = entries;
	cap->max_send_sge = qp->max_send_sge;
	cap->max_inline_data = qp->max_inline;
	return 0;
}

static int bzc_qp_alloc_rq(struct bzc_qp *qp, struct bzc_dev *bdev,
			   struct ib_qp_cap *cap, struct ib_udata *udata)
{
	u32 entries, slot;
	int err;

	bzc_wq_size(cap->max_recv_wr, BZC_RECV_WQE_HDR,
		    cap->max_recv_sge * sizeof(struct bzc_sge), &entries, &slot);
	qp->rq_wqe = kmalloc(slot, bzc_gfp(udata));
	if (!qp->rq_wqe)
		return -ENOMEM;
	err = bzc_ring_alloc(&qp->rq, udata, BZC_WQ_RING_WQE_OFFSET, slot,
			     entries);
	if (err) {
		kfree(qp->rq_wqe);
		return err;
	}

	qp->rq_wqe_size = slot;
	qp->max_recv_sge = min_t(u32, (slot - BZC_RECV_WQE_HDR) /
				 sizeof(struct bzc_sge), bdev->attr.max_recv_sge);
	cap->max_recv_wr = entries;
	cap->max_recv_sge = qp->max_recv_sge;
	return 0;
}

static void bzc_qp_free_rings(struct bzc_qp *qp)
{
	if (qp->rq.kaddr)
		bzc_ring_free(&qp->rq);
	bzc_ring_free(&qp->sq);
	kfree(qp->rq_wqe);
	kfree(qp->sq_wqe);
}

int bzc_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		  struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibqp->device);
	struct bzc_qp *qp = to_bqp(ibqp);
	struct bzc_create_qp_resp resp = {};
	u32 qpn;
	int err;

	if (init->qp_type == IB_QPT_XRC_TGT) {
		/* A process's, created by the core without its udata. */
		err = bzc_xrc_tgt_check_init(init);
		if (err)
			return err;
	} else if (!udata) {
		/* A kernel consumer's (bzc_kqp.c), the GSI QP among them. */
		err = bzc_kqp_check_init(init);
		if (err)
			return err;
	} else if (init->qp_type != IB_QPT_RC && init->qp_type != IB_QPT_UC &&
		   init->qp_type != IB_QPT_UD &&
		   init->qp_type != IB_QPT_XRC_INI) {
		return -EOPNOTSUPP;
	}
	if (init->create_flags)
		return -EOPNOTSUPP;
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	err = bzc_qp_check_caps(bdev, init);
	if (err)
		return err;
	err = bzc_obj_get(bdev, &bdev->num_qp, bdev->attr.max_qp, "QP");
	if (err)
		return err;

	refcount_set(&qp->refcnt, 1);
	init_completion(&qp->released);
	spin_lock_init(&qp->lock);
	spin_lock_init(&qp->rq_lock);
	mutex_init(&qp->modify_mutex);
	mutex_init(&qp->sq_mutex);
	spin_lock_init(&qp->ksq_lock);
	spin_lock_init(&qp->krq_lock);
	INIT_DELAYED_WORK(&qp->sq_work, bzc_sq_work);
	qp->state = IB_QPS_RESET;
	qp->port = BZC_PORT;
	qp->sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	qp->path_mtu = IB_MTU_1024;
	qp->xrcd = init->xrcd;

	err = bzc_qp_alloc_scratch(qp, bzc_gfp(udata));
	if (err)
		goto err_count;
	/*
	 * An XRC TGT QP sends nothing: its send ring is an empty one in
	 * kernel memory, never mapped, which keeps the state machine and
	 * the executor the same for every QP.
	 */
	err = bzc_qp_alloc_sq(qp, bdev, &init->cap, udata);
	if (err)
		goto err_scratch;
	/*
	 * A QP on an SRQ has no receive queue of its own, nor has either
	 * half of XRC: the target takes receives from the XRC SRQ each
	 * message names.
	 */
	if (init->srq || init->qp_type == IB_QPT_XRC_INI ||
	    init->qp_type == IB_QPT_XRC_TGT) {
		if (init->qp_type == IB_QPT_XRC_TGT)
			memset(&init->cap, 0, sizeof(init->cap));
		init->cap.max_recv_wr = 0;
		init->cap.max_recv_sge = 0;
	} else {
		err = bzc_qp_alloc_rq(qp, bdev, &init->cap, udata);
	}
	if (err) {
		bzc_ring_free(&qp->sq);
		kfree(qp->sq_wqe);
		goto err_scratch;
	}

	if (udata) {
		resp.sq_mmap_key = qp->sq.mmap_key;
		resp.sq_mmap_len = qp->sq.mmap_len;
		resp.sq_entries = qp->sq.entries;
		resp.sq_wqe_size = qp->sq_wqe_size;
		if (qp->rq.kaddr) {
			resp.rq_mmap_key = qp->rq.mmap_key;
			resp.rq_mmap_len = qp->rq.mmap_len;
			resp.rq_entries = qp->rq.entries;
			resp.rq_wqe_size = qp->rq_wqe_size;
		}
		err = ib_copy_to_udata(udata, &resp,
				       min(udata->outlen, sizeof(resp)));
		if (err)
			goto err_rings;
	}

	qp->serial = atomic64_inc_return(&bzc_qp_serials);
	/* Visible to senders last: a RESET QP accepts nothing anyway. */
	if (init->qp_type == IB_QPT_GSI) {
		/* Peers' CMs send to QP1 on our port. */
		qpn = 1;
		err = xa_insert(&bdev->qp_xa, qpn, qp, GFP_KERNEL);
	} else {
		err = xa_alloc_cyclic(&bdev->qp_xa, &qpn, qp,
				      XA_LIMIT(BZC_MIN_QPN, BZC_MAX_QPN),
				      &bdev->qp_next, bzc_gfp(udata));
	}
	if (err < 0) {
		err = err == -EBUSY ? -ENOMEM : err;
		goto err_rings;
	}
	ibqp->qp_num = qpn;
	return 0;

err_rings:
	bzc_qp_free_rings(qp);
err_scratch:
	bzc_qp_free_scratch(qp);
err_count:
	bzc_obj_put(&bdev->num_qp);
	return err;
}

/* Find a QP by number, with a reference (bzc_qp_put()). */
struct bzc_qp *bzc_qp_get(struct bzc_dev *bdev, u32 qpn)
{
	struct bzc_qp *qp;

	xa_lock(&bdev->qp_xa);
	qp = xa_load(&bdev->qp_xa, qpn);
	if (qp && !refcount_inc_not_zero(&qp->refcnt))
		qp = NULL;
	xa_unlock(&bdev->qp_xa);
	return qp;
}

void bzc_qp_put(struct bzc_qp *qp)
{
	if (refcount_dec_and_test(&qp->refcnt))
		complete(&qp->released);
}

int bzc_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct bzc_qp *qp = to_bqp(ibqp);

	/* No new senders find it; wait for those delivering to it. */
	bzc_mcast_detach_all(qp);
	xa_erase(&to_bdev(ibqp->device)->qp_xa, ibqp->qp_num);
	bzc_qp_put(qp);
	wait_for_completion(&qp->released);

	/* And stop its own send queue for good (the timer kicks it). */
	bzc_wire_stop(qp);
	cancel_delayed_work_sync(&qp->sq_work);
	mutex_lock(&qp->sq_mutex);
	mutex_unlock(&qp->sq_mutex);

	bzc_qp_free_rings(qp);
	bzc_qp_free_scratch(qp);
	bzc_obj_put(&to_bdev(ibqp->device)->num_qp);
	return 0;
}

/*
 * Flush every RQE posted so far with IB_WC_WR_FLUSH_ERR. The CQEs are
 * written in order under rq_lock; the CQ's handlers run after it is
 * dropped (a kernel consumer's may post receives, which flush again).
 */
void bzc_rq_flush(struct bzc_qp *qp)
{
	struct bzc_cq *cq = to_bcq(qp->ibqp.recv_cq);
	struct bzc_wq_ring_hdr *hdr;
	struct bzc_recv_wqe *rqe = qp->rq_wqe;
	struct bzc_cqe cqe = {
		.status = IB_WC_WR_FLUSH_ERR,
		.opcode = IB_WC_RECV,
		.qp_num = cpu_to_le32(qp->ibqp.qp_num),
	};
	unsigned long flags;
	u32 prod, calls = 0;

	if (!qp->rq.kaddr)
		return;
	hdr = wq_hdr(&qp->rq);

	/* irqsave: a kernel consumer may post (and flush) from any context. */
	spin_lock_irqsave(&qp->rq_lock, flags);
	/* Pairs with the process's release of prod after its RQEs. */
	prod = le32_to_cpu(smp_load_acquire(&hdr->prod));
	/*
	 * A producer index the RQ cannot hold flushes nothing more, nor does
	 * a QP out of ERR: a RESET (whose RQ reset takes rq_lock after it set
	 * the state) may have overtaken the error this flush is for.
	 */
	if (prod - qp->rq_cons > qp->rq.entries ||
	    READ_ONCE(qp->state) != IB_QPS_ERR)
		prod = qp->rq_cons;
	while (qp->rq_cons != prod) {
		memcpy(rqe, bzc_wq_slot(&qp->rq, qp->rq_cons, qp->rq_wqe_size),
		       sizeof(*rqe));
		cqe.wr_id = rqe->wr_id;
		qp->rq_cons++;
		/* The RQE is copied out: the process may reuse its slot. */
		smp_store_release(&hdr->cons, cpu_to_le32(qp->rq_cons));
		bzc_cq_write(cq, &cqe, false, &calls);
	}
	spin_unlock_irqrestore(&qp->rq_lock, flags);
	bzc_cq_notify(cq, calls);
}

/* Tell the QP's owner; type 0 (IB_EVENT_CQ_ERR, never a QP's): nothing. */
static void bzc_qp_event(struct bzc_qp *qp, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = qp->ibqp.device,
		.element.qp = &qp->ibqp,
		.event = type,
	};

	if (type && qp->ibqp.event_handler)
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
}

/*
 * Set the state, and the rings' `error` that tells the process about ERR,
 * together under qp->lock: a RESET that wins against the data path's
 * move to ERR leaves no `error` behind for the next life of the QP.
 */
static void bzc_qp_set_state(struct bzc_qp *qp, enum ib_qp_state state)
{
	__le32 error = cpu_to_le32(state == IB_QPS_ERR);

	lockdep_assert_held(&qp->lock);
	qp->state = state;
	WRITE_ONCE(wq_hdr(&qp->sq)->error, error);
	if (qp->rq.kaddr)
		WRITE_ONCE(wq_hdr(&qp->rq)->error, error);
}

/*
 * Having entered the error state: flush both queues. The caller raises
 * IB_EVENT_QP_LAST_WQE_REACHED on a QP of an SRQ, holding no lock.
 */
static void bzc_qp_enter_error(struct bzc_qp *qp)
{
	/*
	 * Pairs with post_recv's prod store, fence, error load: either the
	 * flush below sees the new RQE, or the process sees `error` and rings
	 * the RQ doorbell.
	 */
	smp_mb();
	bzc_rq_flush(qp);
	/*
	 * The SQ executor flushes the SQ: now, even if an RNR wait was
	 * pending, and in its own context (we may be in another QP's).
	 */
	bzc_sq_queue_in(qp, 0);
}

/*
 * The event a QP entering ERR raises besides any error event: on an SRQ,
 * the owner learns that the QP takes no more WQEs from it (Last WQE
 * Reached); a QP in ERR takes none, and nothing of the SRQ is flushed.
 */
static enum ib_event_type bzc_qp_error_event(struct bzc_qp *qp)
{
	return qp->ibqp.srq ? IB_EVENT_QP_LAST_WQE_REACHED : 0;
}

/*
 * The data path found an error that breaks the QP (a bad WQE, a transport
 * error): move it to ERR and tell the owner with `event` if it is an
 * asynchronous error (0: reported through a completion already).
 */
void bzc_qp_error(struct bzc_qp *qp, enum ib_event_type event)
{
	bool changed;

	spin_lock(&qp->lock);
	changed = qp->state != IB_QPS_ERR && qp->state != IB_QPS_RESET;
	if (changed)
		bzc_qp_set_state(qp, IB_QPS_ERR);
	spin_unlock(&qp->lock);

	if (!changed)
		return;
	bzc_qp_enter_error(qp);
	bzc_qp_event(qp, bzc_qp_error_event(qp));
	bzc_qp_event(qp, event);
}

/*
 * SQD: the executor takes no new WQE; the one it may be running finishes
 * under sq_mutex. The SQ is drained once the RC send window is empty too
 * (IBA 10.3.1: all outstanding messages acknowledged): returns true if it
 * is now (the caller raises IB_EVENT_SQ_DRAINED), else the worker raises
 * it when it retires the window's last message (bzc_qp_sq_drained();
 * the answer that completes it kicks the worker).
 */
static bool bzc_qp_sq_drain(struct bzc_qp *qp)
{
	bool now;

	mutex_lock(&qp->sq_mutex);
	now = !bzc_wire_inflight(qp);
	qp->sqd_owed = !now;
	mutex_unlock(&qp->sq_mutex);
	return now;
}

/**
 * bzc_qp_sq_drained() - the window a move to SQD waited for is empty
 * @qp: the QP; called by its SQ worker without sq_mutex
 *
 * Raises IB_EVENT_SQ_DRAINED unless the QP left SQD meanwhile.
 */
void bzc_qp_sq_drained(struct bzc_qp *qp)
{
	if (READ_ONCE(qp->state) == IB_QPS_SQD)
		bzc_qp_event(qp, IB_EVENT_SQ_DRAINED);
}

/* Forget all WQEs: RESET discards both queues without completions. */
static void bzc_qp_reset(struct bzc_qp *qp)
{
	struct bzc_wq_ring_hdr *hdr = wq_hdr(&qp->sq);

	mutex_lock(&qp->sq_mutex);
	qp->sq_cons = le32_to_cpu(READ_ONCE(hdr->prod));
	/* Every slot is free again: the kernel reads none of them now. */
	smp_store_release(&hdr->cons, cpu_to_le32(qp->sq_cons));
	qp->rnr_waiting = false;
	bzc_wire_reset(qp);
	mutex_unlock(&qp->sq_mutex);

	if (!qp->rq.kaddr)
		return;
	hdr = wq_hdr(&qp->rq);
	spin_lock_irq(&qp->rq_lock);
	qp->rq_cons = le32_to_cpu(READ_ONCE(hdr->prod));
	/* Every slot is free again: the kernel reads none of them now. */
	smp_store_release(&hdr->cons, cpu_to_le32(qp->rq_cons));
	spin_unlock_irq(&qp->rq_lock);
}

/*
 * Access rights a QP grants its peers. It also takes the FLUSH rights,
 * which rdma-core 45 and later set on every RC QP of their tests: bzc
 * executes no FLUSH, its responder refuses the operation with or without
 * the right, so granting it opens nothing. MRs do not take them (the 6.2+
 * core refuses them for a device without FLUSH, bzc_mr.c on 6.1).
 */
static int bzc_qp_check_attr(struct bzc_qp *qp, struct ib_qp_attr *attr,
			     int mask)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);

	if ((mask & IB_QP_PORT) && attr->port_num != BZC_PORT)
		return -EINVAL;
	if ((mask & IB_QP_PKEY_INDEX) && attr->pkey_index >= BZC_PKEY_TBL_LEN)
		return -EINVAL;
	if ((mask & IB_QP_PATH_MTU) &&
	    (attr->path_mtu < IB_MTU_256 || attr->path_mtu > IB_MTU_4096))
		return -EINVAL;
	if ((mask & IB_QP_MAX_QP_RD_ATOMIC) &&
	    attr->max_rd_atomic > bdev->attr.max_qp_init_rd_atom)
		return -EINVAL;
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > bdev->attr.max_qp_rd_atom)
		return -EINVAL;
	if ((mask & IB_QP_TIMEOUT) && attr->timeout > 31)
		return -EINVAL;
	if ((mask & IB_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IB_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IB_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return -EINVAL;
	/*
	 * ON_DEMAND is an MR's property; rdma-core's ODP tests give the QP
	 * their MR's flags, and hardware that has ODP ignores it here.
	 */
	if ((mask & IB_QP_ACCESS_FLAGS) &&
	    (attr->qp_access_flags & ~(IB_ACCESS_REMOTE_WRITE |
				       IB_ACCESS_REMOTE_READ |
				       IB_ACCESS_REMOTE_ATOMIC |
				       IB_ACCESS_LOCAL_WRITE |
				       IB_ACCESS_MW_BIND |
				       IB_ACCESS_ON_DEMAND |
				       BZC_ACCESS_FLUSH)))
		return -EINVAL;
	if ((mask & IB_QP_CAP) &&
	    (attr->cap.max_send_wr > qp->sq.entries ||
	     attr->cap.max_recv_wr > qp->rq.entries))
		return -EINVAL;	/* resizing a QP is not supported */
	return 0;
}

int bzc_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_udata *udata)
{
	struct bzc_qp *qp = to_bqp(ibqp);
	enum ib_event_type event = 0;
	enum ib_qp_state cur, next;
	struct bzc_av av = {};
	int err;

	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	if (mask & ~IB_QP_ATTR_STANDARD_BITS)
		return -EOPNOTSUPP;

	mutex_lock(&qp->modify_mutex);
again:
	/*
	 * Modifies are serialized; only the data path changes the state
	 * meanwhile (to ERR or SQE), so this is rechecked under the lock.
	 */
	cur = READ_ONCE(qp->state);
	err = -EINVAL;
	if ((mask & IB_QP_CUR_STATE) && attr->cur_qp_state != cur) {
		ibdev_info_ratelimited(ibqp->device,
				       "QP %u: modify from state %u, but the QP is in state %u\n",
				       ibqp->qp_num, attr->cur_qp_state, cur);
		goto out;
	}
	next = (mask & IB_QP_STATE) ? attr->qp_state : cur;
	if (!ib_modify_qp_is_ok(cur, next, ibqp->qp_type, mask))
		goto out;
	err = bzc_qp_check_attr(qp, attr, mask);
	if (err)
		goto out;
	if (mask & IB_QP_AV) {
		err = bzc_av_from_attr(&av, &attr->ah_attr);
		if (err)
			goto out;
	}

	spin_lock(&qp->lock);
	if (qp->state != cur) {
		/* Moved to ERR or SQE since: decide again from there. */
		spin_unlock(&qp->lock);
		goto again;
	}
	if (mask & IB_QP_AV)
		qp->av = av;
	if (mask & IB_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IB_QP_DEST_QPN)
		qp->dest_qpn = attr->dest_qp_num;
	if (mask & IB_QP_SQ_PSN) {
		qp->sq_psn = attr->sq_psn & 0xffffff;
		qp->tx_psn = qp->sq_psn;	/* the wire starts there */
	}
	if (mask & IB_QP_RQ_PSN) {
		qp->rq_psn = attr->rq_psn & 0xffffff;
		qp->resp_gen++;		/* the wire's responder takes it up */
	}
	if (mask & IB_QP_ACCESS_FLAGS)
		qp->access = attr->qp_access_flags;
	if (mask & IB_QP_PKEY_INDEX)
		qp->pkey_index = attr->pkey_index;
	if (mask & IB_QP_TIMEOUT)
		qp->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		qp->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		qp->rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_MIN_RNR_TIMER)
		qp->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		qp->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		qp->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_PATH_MTU)
		qp->path_mtu = attr->path_mtu;
	bzc_qp_set_state(qp, next);
	spin_unlock(&qp->lock);

	if (next != cur) {
		if (next == IB_QPS_RESET) {
			bzc_qp_reset(qp);
		} else if (next == IB_QPS_ERR) {
			bzc_qp_enter_error(qp);
			event = bzc_qp_error_event(qp);
		} else if (next == IB_QPS_RTS) {
			bzc_sq_kick(qp);	/* resume after SQD/SQE */
		} else if (next == IB_QPS_SQD) {
			if (bzc_qp_sq_drain(qp))
				event = IB_EVENT_SQ_DRAINED;
		}
	}
	err = 0;
out:
	mutex_unlock(&qp->modify_mutex);
	/* Not under modify_mutex: a handler may modify the QP again. */
	bzc_qp_event(qp, event);
	return err;
}

int bzc_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		 struct ib_qp_init_attr *init)
{
	struct bzc_qp *qp = to_bqp(ibqp);

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));

	spin_lock(&qp->lock);
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->path_mtu = qp->path_mtu;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qkey = qp->qkey;
	attr->rq_psn = qp->rq_psn;
	attr->sq_psn = qp->sq_psn;
	attr->dest_qp_num = qp->dest_qpn;
	attr->qp_access_flags = qp->access;
	attr->pkey_index = qp->pkey_index;
	attr->port_num = qp->port;
	attr->max_rd_atomic = qp->max_rd_atomic;
	attr->max_dest_rd_atomic = qp->max_dest_rd_atomic;
	attr->min_rnr_timer = qp->min_rnr_timer;
	attr->timeout = qp->timeout;
	attr->retry_cnt = qp->retry_cnt;
	attr->rnr_retry = qp->rnr_retry;
	attr->sq_draining = 0;
	if (ibqp->qp_type != IB_QPT_UD)
		bzc_av_to_attr(&qp->av, &attr->ah_attr);
	spin_unlock(&qp->lock);

	attr->cap.max_send_wr = qp->sq.entries;
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_inline_data = qp->max_inline;
	attr->cap.max_recv_wr = qp->rq.entries;
	attr->cap.max_recv_sge = qp->max_recv_sge;
	if (ibqp->qp_type == IB_QPT_XRC_TGT)
		memset(&attr->cap, 0, sizeof(attr->cap));

	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = attr->cap;
	init->sq_sig_type = qp->sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	return 0;
}

/*
 * The SQ doorbell of providers without BZC_CAP_QP_DOORBELL:
 * IB_USER_VERBS_CMD_POST_SEND with no WRs. WQEs are in the mapped ring; a
 * process's WRs through the command are not taken. A kernel consumer's
 * WRs go into its ring (bzc_kqp.c).
 */
int bzc_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr)
{
	/* An XRC target has no send queue (its empty one is not for WRs). */
	if (ibqp->qp_type == IB_QPT_XRC_TGT) {
		*bad_wr = wr;
		return -EINVAL;
	}
	if (bzc_qp_is_kernel(to_bqp(ibqp)))
		return bzc_kpost_send(to_bqp(ibqp), wr, bad_wr);
	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	bzc_sq_kick(to_bqp(ibqp));
	return 0;
}

/*
 * BZC_METHOD_QP_DOORBELL: the SQ doorbell as a driver method, which skips
 * the POST_SEND command's copies and allocation (the latency of short
 * WQEs is mostly this syscall). The core holds the QP's uobject for read:
 * the QP cannot be destroyed underneath.
 *
 * -EPERM from another process than the PD's: the kernel reads the ring
 * through its own mapping, so a forked child or an SCM_RIGHTS receiver,
 * which has the fd but not the ring (VM_DONTCOPY), would run the owner's
 * WQEs whenever it likes. The write() doorbells (POST_SEND, POST_RECV)
 * have the core's check of the fd's credentials instead.
 */
static int UVERBS_HANDLER(BZC_METHOD_QP_DOORBELL)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *ibqp = uverbs_attr_get_obj(attrs,
						 BZC_ATTR_QP_DOORBELL_HANDLE);

	if (IS_ERR(ibqp))
		return PTR_ERR(ibqp);
	ibqp = ibqp->real_qp;
	/* An XRC target has no send queue, nor a PD to own it. */
	if (ibqp->qp_type == IB_QPT_XRC_TGT)
		return -EINVAL;
	if (!bzc_mrc_owned_by_current(to_bpd(ibqp->pd))) {
		ibdev_info_ratelimited(ibqp->device,
				       "QP %u: doorbell from %s[%d], not the process that owns it\n",
				       ibqp->qp_num, current->comm,
				       task_pid_nr(current));
		return -EPERM;
	}
	bzc_sq_kick(to_bqp(ibqp));
	return 0;
}

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_QP_DOORBELL,
	UVERBS_ATTR_IDR(BZC_ATTR_QP_DOORBELL_HANDLE, UVERBS_OBJECT_QP,
			UVERBS_ACCESS_READ, UA_MANDATORY));

ADD_UVERBS_METHODS(bzc_qp_methods, UVERBS_OBJECT_QP,
		   &UVERBS_METHOD(BZC_METHOD_QP_DOORBELL));

const struct uapi_definition bzc_qp_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_QP, &bzc_qp_methods),
	{},
};

/* The RQ doorbell, rung only to flush receives posted in the error state. */
int bzc_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		  const struct ib_recv_wr **bad_wr)
{
	struct bzc_qp *qp = to_bqp(ibqp);

	/* XRC: receives are posted to XRC SRQs only. */
	if (ibqp->qp_type == IB_QPT_XRC_TGT ||
	    ibqp->qp_type == IB_QPT_XRC_INI) {
		*bad_wr = wr;
		return -EINVAL;
	}
	if (bzc_qp_is_kernel(qp))
		return bzc_kpost_recv(qp, wr, bad_wr);
	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		bzc_rq_flush(qp);
	return 0;
}
