// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: shared receive queues.
 *
 * The kernel allocates the SRQ's ring, in the RQ ring format, and hands
 * out its mmap key in the create response (struct bzc_create_srq_resp).
 * ibv_post_srq_recv() writes WQEs into it and publishes the producer
 * index, without a system call; the kernel takes WQEs from it for any QP
 * created on the SRQ.  An SRQ is never flushed, so unlike a QP's RQ it
 * needs no doorbell.
 */

#include <errno.h>
#include <stdlib.h>

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

/* Resizing is refused by the kernel (the ring is mapped); the limit arms. */
int bzc_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		   int attr_mask)
{
	struct ibv_modify_srq cmd = {};

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

	pthread_spin_lock(&wq->lock);
	start = wq->prod;
	for (; wr; wr = wr->next) {
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
	pthread_spin_unlock(&wq->lock);

	if (ret == EINVAL)
		bzc_dbg(ibsrq->context, "SRQ: receive with %d SGEs, max_sge is %u\n",
			wr->num_sge, wq->max_sge);
	else if (ret)
		bzc_dbg(ibsrq->context, "SRQ full\n");
	if (ret)
		*bad_wr = wr;
	return ret;
}
