// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: shared receive queues.
 *
 * The kernel allocates the SRQ's ring, in the RQ ring format, and hands
 * out its mmap key in the create response (struct bzc_create_srq_resp).
 * ibv_post_srq_recv() writes WQEs into it and publishes the producer
 * index, without a system call; the kernel takes WQEs from it for any QP
 * created on the SRQ.  An SRQ is never flushed, so unlike a QP's RQ it
 * needs no doorbell.  ibv_modify_srq(IBV_SRQ_MAX_WR) swaps the ring for a
 * bigger or smaller one holding the posted receives
 * (BZC_METHOD_SRQ_RESIZE), with the SRQ's lock held so nothing is posted
 * meanwhile.
 *
 * An XRC SRQ (ibv_create_srq_ex() with IBV_SRQT_XRC) is the same ring; it
 * belongs to an XRC domain and has a number, ibv_get_srq_num(), which the
 * senders on XRC INI QPs name it by, and its receives complete on the CQ
 * given at its creation.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"

/*
 * What bzc_create_srq_ex() accepts: a basic SRQ (the CQ is not used) or
 * an XRC SRQ.
 */
enum {
	BZC_SRQ_INIT_ATTR_MASK_KNOWN = IBV_SRQ_INIT_ATTR_TYPE |
				       IBV_SRQ_INIT_ATTR_PD |
				       IBV_SRQ_INIT_ATTR_XRCD |
				       IBV_SRQ_INIT_ATTR_CQ,
};

static struct bzc_srq *bzc_srq_alloc(void)
{
	struct bzc_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	ret = pthread_spin_init(&srq->wq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	return srq;
}

static void bzc_srq_free(struct bzc_srq *srq)
{
	pthread_spin_destroy(&srq->wq.lock);
	free(srq);
}

/*
 * Second half of both creates: map the ring of an SRQ the kernel has
 * just created with the caps in @attr (what it granted).  On failure the
 * kernel object is destroyed again and srq freed.
 */
static int bzc_srq_finish_create(struct ibv_context *context,
				 struct bzc_srq *srq,
				 const struct ibv_srq_attr *attr,
				 const struct bzc_create_srq_resp *drv)
{
	int ret = EPROTO;

	if (attr->max_sge > BZC_MAX_WQE_SGE) {
		bzc_err(context, "kernel granted %u SGEs, a WQE holds %u\n",
			attr->max_sge, BZC_MAX_WQE_SGE);
		goto err_destroy;
	}
	ret = bzc_wq_map(context, &srq->wq, drv->mmap_key, drv->mmap_len,
			 drv->entries, drv->wqe_size,
			 sizeof(struct bzc_recv_wqe) +
				 (uint64_t)attr->max_sge *
					 sizeof(struct bzc_sge),
			 attr->max_wr);
	if (ret)
		goto err_destroy;
	srq->wq.max_sge = attr->max_sge;
	return 0;

err_destroy:
	ibv_cmd_destroy_srq(&srq->vsrq.srq);
	bzc_srq_free(srq);
	return ret;
}

struct ibv_srq *bzc_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct ubzc_create_srq_resp resp = {};
	struct bzc_srq *srq;
	int ret;

	srq = bzc_srq_alloc();
	if (!srq)
		return NULL;

	/* No driver request data; attr->attr comes back with the real caps. */
	ret = ibv_cmd_create_srq(pd, &srq->vsrq.srq, attr, NULL, 0,
				 &resp.ibv_resp, sizeof(resp));
	if (ret) {
		bzc_srq_free(srq);
		errno = ret;
		return NULL;
	}
	srq->vsrq.srq_type = IBV_SRQT_BASIC;
	ret = bzc_srq_finish_create(pd->context, srq, &attr->attr,
				    &resp.drv_payload);
	if (ret) {
		errno = ret;
		return NULL;
	}
	return &srq->vsrq.srq;
}

/*
 * An XRC SRQ of attr->xrcd in attr->pd, completing on attr->cq: the same
 * ring, created through the extended command, which also returns its
 * number.
 */
static struct ibv_srq *bzc_create_xrc_srq(struct ibv_context *context,
					  struct ibv_srq_init_attr_ex *attr)
{
	struct ubzc_create_srq_resp resp = {};
	struct bzc_srq *srq;
	int ret;

	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
	    attr->xrcd->context != context ||
	    !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq ||
	    attr->cq->context != context) {
		bzc_err(context,
			"XRC SRQ without an XRC domain and a CQ of this context\n");
		errno = EINVAL;
		return NULL;
	}

	srq = bzc_srq_alloc();
	if (!srq)
		return NULL;
	ret = ibv_cmd_create_srq_ex(context, &srq->vsrq, attr, NULL, 0,
				    &resp.ibv_resp, sizeof(resp));
	if (ret) {
		bzc_srq_free(srq);
		errno = ret;
		return NULL;
	}
	/* What ibv_create_srq() would set, which the _ex path leaves. */
	srq->vsrq.srq.pd = attr->pd;
	srq->vsrq.srq.srq_context = attr->srq_context;
	srq->vsrq.srq.events_completed = 0;
	ret = bzc_srq_finish_create(context, srq, &attr->attr,
				    &resp.drv_payload);
	if (ret) {
		errno = ret;
		return NULL;
	}
	return &srq->vsrq.srq;
}

struct ibv_srq *bzc_create_srq_ex(struct ibv_context *context,
				  struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr init = {};
	struct ibv_srq *srq;

	bool xrc = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
		   attr->srq_type == IBV_SRQT_XRC;

	/* Tag-matching SRQs are not supported, XRC ones by newer kernels. */
	if ((attr->comp_mask & ~(uint32_t)BZC_SRQ_INIT_ATTR_MASK_KNOWN) ||
	    ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	     attr->srq_type != IBV_SRQT_BASIC && !xrc) ||
	    (xrc && !bzc_has_xrc(context))) {
		bzc_err(context,
			"only basic and XRC SRQs are supported (comp_mask %#x, type %d)\n",
			attr->comp_mask, attr->srq_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != context) {
		bzc_err(context, "SRQ without a PD of this context\n");
		errno = EINVAL;
		return NULL;
	}
	if (xrc)
		return bzc_create_xrc_srq(context, attr);

	init.srq_context = attr->srq_context;
	init.attr = attr->attr;
	srq = bzc_create_srq(attr->pd, &init);
	if (srq)
		attr->attr = init.attr;
	return srq;
}

/*
 * The kernel's new ring replaces the mapped one; the old mapping goes.
 * Called with the SRQ's lock held.
 */
static int bzc_srq_resize(struct bzc_srq *srq, uint32_t max_wr)
{
	struct ibv_context *context = srq->vsrq.srq.context;
	struct bzc_srq_resize_cmd req = { .max_wr = max_wr };
	struct bzc_srq_resize_resp resp = {};
	struct bzc_wq new_wq = {};
	struct bzc_cmd cmd;
	int ret;

	bzc_cmd_init(&cmd, UVERBS_OBJECT_SRQ, BZC_METHOD_SRQ_RESIZE);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_SRQ_RESIZE_HANDLE,
			srq->vsrq.srq.handle);
	bzc_cmd_add_ptr_in(&cmd, BZC_ATTR_SRQ_RESIZE_CMD, &req, sizeof(req));
	bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_SRQ_RESIZE_RESP, &resp,
			    sizeof(resp));
	ret = bzc_cmd_exec(context, &cmd);
	if (ret)
		return ret;

	/* The slots keep their size; the kernel took the WQEs along. */
	ret = EPROTO;
	if (resp.wqe_size == (1U << srq->wq.wqe_shift))
		ret = bzc_wq_map(context, &new_wq, resp.mmap_key,
				 resp.mmap_len, resp.entries, resp.wqe_size,
				 resp.wqe_size, max_wr);
	bzc_wq_unmap(&srq->wq);
	if (ret) {
		/* The kernel reads only the new ring now: this one is lost. */
		bzc_err(context,
			"SRQ resized, but its new ring cannot be used (%s): no more receives can be posted to it\n",
			strerror(ret));
		return ret;
	}
	srq->wq.hdr = new_wq.hdr;
	srq->wq.ring_len = new_wq.ring_len;
	srq->wq.wqes = new_wq.wqes;
	srq->wq.entries = new_wq.entries;
	srq->wq.prod = new_wq.prod;
	srq->wq.cons = new_wq.cons;
	return 0;
}

int bzc_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		   int attr_mask)
{
	struct bzc_srq *srq = to_bsrq(ibsrq);
	struct ibv_modify_srq cmd = {};
	int ret;

	if (attr_mask & IBV_SRQ_MAX_WR) {
		if (!(to_bctx(ibsrq->context)->caps & BZC_CAP_SRQ_RESIZE)) {
			bzc_err(ibsrq->context,
				"this kernel cannot resize an SRQ\n");
			return EOPNOTSUPP;
		}
		/* Both at once: the limit must fit the new size. */
		if ((attr_mask & IBV_SRQ_LIMIT) &&
		    attr->srq_limit > attr->max_wr)
			return EINVAL;
		bzc_wq_lock(&srq->wq);
		ret = srq->wq.hdr ? bzc_srq_resize(srq, attr->max_wr) : EIO;
		bzc_wq_unlock(&srq->wq);
		if (ret)
			return ret;
		attr->max_wr = srq->wq.entries;
		attr_mask &= ~IBV_SRQ_MAX_WR;
		if (!attr_mask)
			return 0;
	}
	return ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd, sizeof(cmd));
}

int bzc_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd = {};

	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

int bzc_destroy_srq(struct ibv_srq *ibsrq)
{
	struct bzc_srq *srq = to_bsrq(ibsrq);
	int ret;

	/* EBUSY while a QP still uses it: then nothing changes here. */
	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;

	bzc_wq_unmap(&srq->wq);
	bzc_srq_free(srq);
	return 0;
}

/* ibv_get_srq_num(): what XRC senders name an XRC SRQ by. */
int bzc_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct bzc_srq *srq = to_bsrq(ibsrq);

	if (srq->vsrq.srq_type != IBV_SRQT_XRC)
		return EINVAL;
	*srq_num = srq->vsrq.srq_num;
	return 0;
}

int bzc_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct bzc_wq *wq = &to_bsrq(ibsrq)->wq;
	uint32_t start;
	int ret = 0;

	bzc_wq_lock(wq);
	start = wq->prod;
	/* A resize whose new ring could not be mapped lost the ring. */
	if (!wq->hdr)
		ret = EIO;
	for (; !ret && wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge) {
			ret = EINVAL;
			break;
		}
		if (bzc_wq_full(wq, wq->prod)) {
			ret = ENOMEM;
			break;
		}
		bzc_write_recv_wqe(wq, wq->prod, wr);
		wq->prod++;
	}
	if (wq->prod != start)
		bzc_wq_publish(wq);
	bzc_wq_unlock(wq);

	if (ret == EINVAL)
		bzc_dbg(ibsrq->context, "SRQ: receive with %d SGEs, max_sge is %u\n",
			wr->num_sge, wq->max_sge);
	else if (ret == EIO)
		bzc_dbg(ibsrq->context, "SRQ: its ring was lost in a resize\n");
	else if (ret)
		bzc_dbg(ibsrq->context, "SRQ full\n");
	if (ret)
		*bad_wr = wr;
	return ret;
}
