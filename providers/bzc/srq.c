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
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"

/* What bzc_create_srq_ex() accepts: a basic SRQ (the CQ is not used). */
enum {
	BZC_SRQ_INIT_ATTR_MASK_KNOWN = IBV_SRQ_INIT_ATTR_TYPE |
				       IBV_SRQ_INIT_ATTR_PD |
				       IBV_SRQ_INIT_ATTR_CQ,
};

struct ibv_srq *bzc_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct ubzc_create_srq_resp resp = {};
	struct bzc_create_srq_resp *drv = &resp.drv_payload;
	struct bzc_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	ret = pthread_spin_init(&srq->wq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_free;

	/* No driver request data; attr->attr comes back with the real caps. */
	ret = ibv_cmd_create_srq(pd, &srq->ibv_srq, attr, NULL, 0,
				 &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_lock;

	ret = EPROTO;
	if (attr->attr.max_sge > BZC_MAX_WQE_SGE) {
		bzc_err(pd->context, "kernel granted %u SGEs, a WQE holds %u\n",
			attr->attr.max_sge, BZC_MAX_WQE_SGE);
		goto err_destroy;
	}
	ret = bzc_wq_map(pd->context, &srq->wq, drv->mmap_key, drv->mmap_len,
			 drv->entries, drv->wqe_size,
			 sizeof(struct bzc_recv_wqe) +
				 (uint64_t)attr->attr.max_sge *
					 sizeof(struct bzc_sge),
			 attr->attr.max_wr);
	if (ret)
		goto err_destroy;
	srq->wq.max_sge = attr->attr.max_sge;
	return &srq->ibv_srq;

err_destroy:
	ibv_cmd_destroy_srq(&srq->ibv_srq);
err_lock:
	pthread_spin_destroy(&srq->wq.lock);
err_free:
	free(srq);
	errno = ret;
	return NULL;
}

struct ibv_srq *bzc_create_srq_ex(struct ibv_context *context,
				  struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr init = {};
	struct ibv_srq *srq;

	/* XRC and tag-matching SRQs are not supported. */
	if ((attr->comp_mask & ~(uint32_t)BZC_SRQ_INIT_ATTR_MASK_KNOWN) ||
	    ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	     attr->srq_type != IBV_SRQT_BASIC)) {
		bzc_err(context,
			"only basic SRQs are supported (comp_mask %#x, type %d)\n",
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
	struct ibv_context *context = srq->ibv_srq.context;
	struct bzc_srq_resize_cmd req = { .max_wr = max_wr };
	struct bzc_srq_resize_resp resp = {};
	struct bzc_wq new_wq = {};
	struct bzc_cmd cmd;
	int ret;

	bzc_cmd_init(&cmd, UVERBS_OBJECT_SRQ, BZC_METHOD_SRQ_RESIZE);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_SRQ_RESIZE_HANDLE, srq->ibv_srq.handle);
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
	pthread_spin_destroy(&srq->wq.lock);
	free(srq);
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
