// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: queue pairs - create, modify, query, destroy, and the receive queue.
 *
 * The kernel allocates the send and receive queue rings of every QP and
 * hands out an mmap key for each in the create response (struct
 * bzc_create_qp_resp).  Work requests are then written straight into the
 * rings: a WQE into the slot at the producer index, then the index itself
 * with a release store; the kernel copies each WQE out before it looks at
 * it and advances the consumer index.  Receives need no system call at
 * all, sends one doorbell per ibv_post_send() (wr.c).
 *
 * XRC: an INI QP (IBV_QPT_XRC_SEND) has a send queue only; a TGT QP
 * (IBV_QPT_XRC_RECV) has no rings at all: it belongs to an XRC domain,
 * and the XRC SRQ each arriving message names gives its receive.  Other
 * processes of the domain reach a TGT QP with ibv_open_qp().
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bzc.h"

/* What bzc_create_qp_ex() accepts. */
enum {
	BZC_QP_INIT_ATTR_MASK_KNOWN = IBV_QP_INIT_ATTR_PD |
				      IBV_QP_INIT_ATTR_XRCD |
				      IBV_QP_INIT_ATTR_CREATE_FLAGS |
				      IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
};

static struct bzc_qp *bzc_qp_alloc(void)
{
	struct bzc_qp *qp;
	int ret;

	/*
	 * Zeroed: verbs_qp.comp_mask must start at 0 for the non-extended
	 * create, which does not set it, and ibv_qp_ex's unsupported
	 * function pointers stay NULL.
	 */
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;

	ret = pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_free;
	ret = pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_sq_lock;

	qp->state = IBV_QPS_RESET;
	return qp;

err_sq_lock:
	pthread_spin_destroy(&qp->sq.lock);
err_free:
	free(qp);
	errno = ret;
	return NULL;
}

static void bzc_qp_free(struct bzc_qp *qp)
{
	pthread_spin_destroy(&qp->rq.lock);
	pthread_spin_destroy(&qp->sq.lock);
	free(qp);
}

/*
 * Second half of both creates: map the rings of a QP the kernel has just
 * created with the caps in @cap (what it granted).  On failure the kernel
 * object is destroyed again and qp freed.
 */
static int bzc_qp_finish_create(struct ibv_context *context,
				struct bzc_qp *qp, const struct ibv_qp_cap *cap,
				int sq_sig_all, bool has_rq,
				const struct bzc_create_qp_resp *drv)
{
	uint64_t send_data, recv_data;
	int ret = EPROTO;

	/* An XRC TGT QP has no rings. */
	if (qp->vqp.qp.qp_type == IBV_QPT_XRC_RECV)
		return 0;

	if (cap->max_send_sge > BZC_MAX_WQE_SGE ||
	    cap->max_recv_sge > BZC_MAX_WQE_SGE) {
		bzc_err(context,
			"kernel granted %u send / %u receive SGEs, a WQE holds %u\n",
			cap->max_send_sge, cap->max_recv_sge, BZC_MAX_WQE_SGE);
		goto err;
	}

	/* A send slot holds the header, then the SGEs or the inline data. */
	send_data = (uint64_t)cap->max_send_sge * sizeof(struct bzc_sge);
	if (send_data < cap->max_inline_data)
		send_data = cap->max_inline_data;
	ret = bzc_wq_map(context, &qp->sq, drv->sq_mmap_key, drv->sq_mmap_len,
			 drv->sq_entries, drv->sq_wqe_size,
			 BZC_SEND_WQE_DATA_OFFSET + send_data,
			 cap->max_send_wr);
	if (ret)
		goto err;

	/* With an SRQ (or as an XRC INI) the QP has no receive queue. */
	if (has_rq) {
		recv_data = (uint64_t)cap->max_recv_sge *
			    sizeof(struct bzc_sge);
		ret = bzc_wq_map(context, &qp->rq, drv->rq_mmap_key,
				 drv->rq_mmap_len, drv->rq_entries,
				 drv->rq_wqe_size,
				 sizeof(struct bzc_recv_wqe) + recv_data,
				 cap->max_recv_wr);
		if (ret)
			goto err_sq;
	}

	qp->sq.max_sge = cap->max_send_sge;
	qp->sq.max_inline = cap->max_inline_data;
	qp->rq.max_sge = cap->max_recv_sge;
	qp->sq_sig_all = sq_sig_all != 0;
	return 0;

err_sq:
	bzc_wq_unmap(&qp->sq);
err:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
	bzc_qp_free(qp);
	return ret;
}

static bool bzc_qp_type_supported(struct ibv_context *context,
				  enum ibv_qp_type qp_type)
{
	/* The XRC TGT QP sends nothing. */
	if (qp_type == IBV_QPT_XRC_RECV)
		return bzc_has_xrc(context);
	/* RC, UC, UD and XRC INI: every other type has send opcodes. */
	return bzc_send_ops_supported(context, qp_type) != 0;
}

/* A receive queue of its own: not with an SRQ, not in XRC. */
static bool bzc_qp_has_rq(enum ibv_qp_type qp_type, struct ibv_srq *srq)
{
	return !srq && qp_type != IBV_QPT_XRC_SEND &&
	       qp_type != IBV_QPT_XRC_RECV;
}

struct ibv_qp *bzc_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ubzc_create_qp_resp resp = {};
	struct bzc_qp *qp;
	int ret;

	if (!bzc_qp_type_supported(pd->context, attr->qp_type)) {
		bzc_err(pd->context, "QP type %d is not supported\n",
			attr->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* Its XRC domain can only be given to ibv_create_qp_ex(). */
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		bzc_err(pd->context,
			"an XRC TGT QP needs ibv_create_qp_ex() with an XRC domain\n");
		errno = EINVAL;
		return NULL;
	}

	qp = bzc_qp_alloc();
	if (!qp)
		return NULL;

	/* No driver request data; attr->cap comes back with the real caps. */
	ret = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, NULL, 0,
				&resp.ibv_resp, sizeof(resp));
	if (ret) {
		bzc_qp_free(qp);
		errno = ret;
		return NULL;
	}

	qp->sq.single_threaded = bzc_pd_single_threaded(pd);
	qp->rq.single_threaded = qp->sq.single_threaded;
	ret = bzc_qp_finish_create(pd->context, qp, &attr->cap,
				   attr->sq_sig_all,
				   bzc_qp_has_rq(attr->qp_type, attr->srq),
				   &resp.drv_payload);
	if (ret) {
		errno = ret;
		return NULL;
	}

	return &qp->vqp.qp;
}

struct ibv_qp *bzc_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *attr)
{
	struct ubzc_create_qp_ex_resp resp = {};
	struct bzc_qp *qp;
	int ret;

	/* XRC, TSO, RSS and WQ indirection tables. */
	if (attr->comp_mask & ~(uint32_t)BZC_QP_INIT_ATTR_MASK_KNOWN) {
		bzc_err(context, "unsupported comp_mask bits %#x\n",
			attr->comp_mask &
				~(uint32_t)BZC_QP_INIT_ATTR_MASK_KNOWN);
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* An XRC TGT QP has an XRC domain instead of a PD. */
	if (attr->qp_type == IBV_QPT_XRC_RECV ?
		    !(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd ||
			    attr->xrcd->context != context :
		    !(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		bzc_err(context, "no %s\n",
			attr->qp_type == IBV_QPT_XRC_RECV ?
				"XRC domain of this context (IBV_QP_INIT_ATTR_XRCD)" :
				"PD (IBV_QP_INIT_ATTR_PD)");
		errno = EINVAL;
		return NULL;
	}
	/* No create flag is supported. */
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    attr->create_flags) {
		bzc_err(context, "unsupported create_flags %#x\n",
			attr->create_flags);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!bzc_qp_type_supported(context, attr->qp_type)) {
		bzc_err(context, "QP type %d is not supported\n", attr->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	/*
	 * ibv_wr_* opcodes this QP type, the kernel or this libibverbs
	 * cannot carry (TSO; FLUSH before Linux 6.2 or rdma-core 45...).
	 */
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (attr->send_ops_flags &
	     ~bzc_send_ops_flags(context, attr->qp_type))) {
		bzc_err(context,
			"send_ops_flags %#llx not supported on QP type %d\n",
			(unsigned long long)(attr->send_ops_flags &
					     ~bzc_send_ops_flags(context,
								 attr->qp_type)),
			attr->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}

	qp = bzc_qp_alloc();
	if (!qp)
		return NULL;

	ret = ibv_cmd_create_qp_ex2(context, &qp->vqp, attr, NULL, 0,
				    &resp.ibv_resp, sizeof(resp));
	if (ret) {
		bzc_qp_free(qp);
		errno = ret;
		return NULL;
	}

	if (attr->qp_type != IBV_QPT_XRC_RECV)
		qp->sq.single_threaded = bzc_pd_single_threaded(attr->pd);
	qp->rq.single_threaded = qp->sq.single_threaded;
	ret = bzc_qp_finish_create(context, qp, &attr->cap, attr->sq_sig_all,
				   bzc_qp_has_rq(attr->qp_type, attr->srq),
				   &resp.drv_payload);
	if (ret) {
		errno = ret;
		return NULL;
	}

	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		bzc_qp_init_wr_ops(qp);

	return &qp->vqp.qp;
}

/*
 * ibv_modify_qp() updates qp->state itself; the provider keeps its own
 * copy, which ibv_query_qp() does not overwrite, for the checks at post
 * time.  Moving to RESET needs nothing here: the kernel sets each ring's
 * cons to its prod (discarding what was posted) and clears `error`.
 */
int bzc_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct bzc_qp *qp = to_bqp(ibqp);
	struct ibv_modify_qp cmd = {};
	int ret;

	ret = ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
	if (ret)
		return ret;

	if (attr_mask & IBV_QP_STATE)
		__atomic_store_n(&qp->state, (int)attr->qp_state,
				 __ATOMIC_RELAXED);
	/* Reset discards the QP's work, completions not yet polled too. */
	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
		if (ibqp->recv_cq)
			bzc_cq_clean(ibqp->recv_cq, ibqp->qp_num);
		if (ibqp->send_cq && ibqp->send_cq != ibqp->recv_cq)
			bzc_cq_clean(ibqp->send_cq, ibqp->qp_num);
	}
	return 0;
}

int bzc_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
		 struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd = {};

	return ibv_cmd_query_qp(ibqp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

/*
 * ibv_open_qp(): this process's handle on an XRC TGT QP of an XRC domain
 * it has opened (another process may have created the QP).  Like a TGT
 * QP created here it has no rings; it can be modified, queried and
 * destroyed (closed: the QP goes when its last handle does).
 */
struct ibv_qp *bzc_open_qp(struct ibv_context *context,
			   struct ibv_qp_open_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_open_qp cmd = {};
	struct bzc_qp *qp;
	int ret;

	if (!bzc_has_xrc(context) ||
	    ((attr->comp_mask & IBV_QP_OPEN_ATTR_TYPE) &&
	     attr->qp_type != IBV_QPT_XRC_RECV)) {
		bzc_err(context, "only XRC TGT QPs can be opened\n");
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = bzc_qp_alloc();
	if (!qp)
		return NULL;
	ret = ibv_cmd_open_qp(context, &qp->vqp, sizeof(qp->vqp), attr, &cmd,
			      sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		bzc_qp_free(qp);
		errno = ret;
		return NULL;
	}
	return &qp->vqp.qp;
}

int bzc_destroy_qp(struct ibv_qp *ibqp)
{
	struct bzc_qp *qp = to_bqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;

	bzc_wq_unmap(&qp->rq);
	bzc_wq_unmap(&qp->sq);
	bzc_qp_free(qp);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Receive queue                                                            */
/* ---------------------------------------------------------------------- */

void bzc_write_recv_wqe(struct bzc_wq *rq, uint32_t index,
			const struct ibv_recv_wr *wr)
{
	struct bzc_recv_wqe *wqe = bzc_wq_slot(rq, index);
	struct bzc_sge *sge = (struct bzc_sge *)(wqe + 1);
	int i;

	wqe->wr_id = htole64(wr->wr_id);
	wqe->num_sge = (uint8_t)wr->num_sge;
	memset(wqe->pad, 0, sizeof(wqe->pad));
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = htole64(wr->sg_list[i].addr);
		sge[i].length = htole32(wr->sg_list[i].length);
		sge[i].lkey = htole32(wr->sg_list[i].lkey);
	}
}

/*
 * The kernel flushes receives itself when the QP enters the error state,
 * but only those it can see then.  Receives posted afterwards need the RQ
 * doorbell, which this process rings when it finds `error` set after
 * publishing prod.  It is a Dekker pair with the kernel, which sets error
 * and then (full barrier) reads prod to flush: the fence between our prod
 * store and error load makes sure at least one side sees the other, so a
 * receive posted in the error state is always flushed (maybe twice
 * looked at, never lost).
 *
 * The receives are posted by then, whatever the doorbell does: arriving
 * messages take them straight from the ring, and the next RQ doorbell or
 * move to ERR flushes them.  It fails only once the device is gone (EIO),
 * when nothing completes any more.
 */
static void bzc_rq_flush_if_error(struct bzc_qp *qp)
{
	struct ibv_recv_wr *bad = NULL;
	int ret;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&qp->rq.hdr->error, __ATOMIC_RELAXED))
		return;
	ret = ibv_cmd_post_recv(&qp->vqp.qp, NULL, &bad);
	if (ret)
		bzc_err(qp->vqp.qp.context,
			"QP %u: receive flush doorbell failed (%s); the posted receives are flushed at the next one, or never if the device is gone\n",
			qp->vqp.qp.qp_num, strerror(ret));
}

int bzc_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr)
{
	struct bzc_qp *qp = to_bqp(ibqp);
	struct bzc_wq *rq = &qp->rq;
	uint32_t start;
	bool posted;
	int ret = 0;

	if (!wr)
		return 0;
	/* A QP on an SRQ takes its receives from there. */
	if (!rq->hdr || bzc_qp_state(qp) == IBV_QPS_RESET) {
		bzc_dbg(ibqp->context, "QP %u: %s\n", ibqp->qp_num,
			rq->hdr ? "receive posted in RESET" :
				  "receive posted to a QP on an SRQ");
		*bad_wr = wr;
		return EINVAL;
	}

	bzc_wq_lock(rq);
	start = rq->prod;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
			ret = EINVAL;
			break;
		}
		if (bzc_wq_full(rq, rq->prod)) {
			ret = ENOMEM;
			break;
		}
		bzc_write_recv_wqe(rq, rq->prod, wr);
		rq->prod++;
	}
	posted = rq->prod != start;
	if (posted)
		bzc_wq_publish(rq);
	bzc_wq_unlock(rq);

	if (ret == EINVAL)
		bzc_dbg(ibqp->context,
			"QP %u: receive with %d SGEs, max_recv_sge is %u\n",
			ibqp->qp_num, wr->num_sge, rq->max_sge);
	else if (ret)
		bzc_dbg(ibqp->context, "QP %u: receive queue full\n",
			ibqp->qp_num);
	if (ret)
		*bad_wr = wr;
	if (posted)
		bzc_rq_flush_if_error(qp);
	return ret;
}
