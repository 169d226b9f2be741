// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Bulk channels (bzcdv.h): the device's bulk limits, channel creation on a
 * ring mapped from the kernel, the connection to the one peer a channel
 * reaches, and bzcdv_post_bulk(), which fills that ring and rings the
 * doorbell method once per call.
 *
 * The ring follows the rules of a QP's SQ (kernel-headers/rdma/bzc-abi.h):
 * the process writes WQEs at prod, publishes prod with a release store and
 * calls BZC_METHOD_BULK_CHAN_DOORBELL; the kernel copies each WQE out and
 * advances cons, which frees the slot.  Unlike a QP's, the kernel reads
 * the ring only in the doorbell.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rdma/bzc_user_ioctl_cmds.h>
#include <rdma/bzc_user_ioctl_verbs.h>

#include "bzc.h"

/* The public names are the uAPI's values, so they are passed unconverted. */
_Static_assert(BZCDV_WC_BULK_COPY == BZC_WC_BULK_COPY,
	       "BZCDV_WC_BULK_COPY differs from the kernel's BZC_WC_BULK_COPY");
_Static_assert((int)BZCDV_BULK_WRITE == BZC_BULK_OP_WRITE &&
		       (int)BZCDV_BULK_WRITE_WITH_IMM ==
			       BZC_BULK_OP_WRITE_WITH_IMM &&
		       (int)BZCDV_BULK_READ == BZC_BULK_OP_READ &&
		       (int)BZCDV_BULK_COPY == BZC_BULK_OP_COPY,
	       "bzcdv_bulk_opcode differs from bzc_bulk_opcode");
_Static_assert((int)BZCDV_BULK_FENCE == BZC_BULK_WQE_FENCE,
	       "BZCDV_BULK_FENCE differs from BZC_BULK_WQE_FENCE");
_Static_assert(sizeof(struct bzc_bulk_wqe) == BZC_BULK_WQE_SGE_OFFSET,
	       "bulk SGEs do not follow the WQE header");

#define BZC_BULK_OP_MAX BZC_BULK_OP_COPY
#define BZC_BULK_FLAGS_KNOWN BZCDV_BULK_FENCE
/* bzc_bulk_wqe.num_sge is 16 bits wide. */
#define BZC_BULK_SGE_FIELD_MAX 0xffffu

static struct bzc_bulk_chan *to_bchan(struct bzcdv_bulk_chan *chan)
{
	return container_of(chan, struct bzc_bulk_chan, dv);
}

static int bzc_query_bulk_caps(struct ibv_context *context,
			       struct bzc_bulk_caps *caps)
{
	struct bzc_cmd cmd;

	memset(caps, 0, sizeof(*caps));
	bzc_cmd_init(&cmd, BZC_OBJECT_DEVICE, BZC_METHOD_QUERY_BULK_CAPS);
	bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_QUERY_BULK_CAPS_RESP, caps,
			    sizeof(*caps));
	return bzc_cmd_exec(context, &cmd);
}

/* enum bzcdv_device_caps of @ctx's device. */
static int bzc_device_caps(struct ibv_context *ctx, uint64_t *caps)
{
	struct ibv_device_attr_ex ex = {};
	int ret;

	*caps = 0;
	if (to_bctx(ctx)->caps & BZC_CAP_DM_EXPORT_DMABUF)
		*caps |= BZCDV_DEVICE_CAP_EXPORT_DM;
	/* The bulk engine faults ODP pages like the QPs do. */
	ret = ibv_query_device_ex(ctx, NULL, &ex);
	if (ret)
		return ret;
	if (ex.odp_caps.general_caps & IBV_ODP_SUPPORT)
		*caps |= BZCDV_DEVICE_CAP_BULK_ODP;
	return 0;
}

BZC_EXPORT int bzcdv_query_device(struct ibv_context *ctx,
				  struct bzcdv_device_attr *attr)
{
	struct bzc_bulk_caps caps;
	int ret;

	ret = bzc_check_bulk(ctx);
	if (ret)
		return ret;
	if (!attr)
		return EINVAL;

	ret = bzc_query_bulk_caps(ctx, &caps);
	if (ret)
		return ret;

	attr->max_bulk_len = caps.max_bulk_len;
	attr->mr_cache_max_bytes = caps.mr_cache_max_bytes;
	attr->max_bulk_sge = caps.max_bulk_sge;
	attr->max_chan_depth = caps.max_chan_depth;
	attr->seg_bytes = caps.seg_bytes;
	attr->workers = caps.workers;
	/* Optional fields: written only when the caller's struct has them. */
	if ((attr->comp_mask & BZCDV_DEVICE_ATTR_MASK_MAX_CHANS) &&
	    (caps.comp_mask & BZC_BULK_CAPS_MAX_CHANS))
		attr->max_chans = caps.max_chans;
	else
		attr->comp_mask &= ~(uint64_t)BZCDV_DEVICE_ATTR_MASK_MAX_CHANS;
	if (attr->comp_mask & BZCDV_DEVICE_ATTR_MASK_CAPS) {
		ret = bzc_device_caps(ctx, &attr->caps);
		if (ret)
			return ret;
	}
	attr->comp_mask &= BZCDV_DEVICE_ATTR_MASK_ALL;
	return 0;
}

static int bzc_bulk_chan_destroy_cmd(struct ibv_context *context,
				     uint32_t handle)
{
	struct bzc_cmd cmd;

	bzc_cmd_init(&cmd, BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_DESTROY);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_DESTROY_HANDLE, handle);
	return bzc_cmd_exec(context, &cmd);
}

static int bzc_check_chan_attr(struct ibv_context *ctx,
			       const struct bzcdv_bulk_chan_init_attr *attr)
{
	if (!attr)
		return EINVAL;
	if (attr->comp_mask & ~(uint64_t)BZCDV_BULK_CHAN_INIT_ATTR_MASK_RECV_CQ)
		return EINVAL;
	if (!attr->pd || !attr->cq || attr->pd->context != ctx ||
	    attr->cq->context != ctx)
		return EINVAL;
	if ((attr->comp_mask & BZCDV_BULK_CHAN_INIT_ATTR_MASK_RECV_CQ) &&
	    (!attr->recv_cq || attr->recv_cq->context != ctx))
		return EINVAL;
	if (!attr->depth)
		return EINVAL;
	return 0;
}

BZC_EXPORT struct bzcdv_bulk_chan *
bzcdv_create_bulk_chan(struct ibv_context *ctx,
		       struct bzcdv_bulk_chan_init_attr *attr)
{
	struct bzc_bulk_chan_create_resp resp = {};
	struct bzc_bulk_chan_create_cmd ccmd = {};
	struct ibv_cq *recv_cq = NULL;
	struct ib_uverbs_attr *handle;
	struct bzc_bulk_caps caps;
	struct bzc_bulk_chan *chan;
	struct bzc_cmd cmd;
	uint32_t max_sge;
	int ret;

	ret = bzc_check_bulk(ctx);
	if (!ret)
		ret = bzc_check_chan_attr(ctx, attr);
	if (!ret)
		ret = bzc_query_bulk_caps(ctx, &caps);
	if (!ret && attr->depth > caps.max_chan_depth)
		ret = EINVAL;
	if (ret) {
		errno = ret;
		return NULL;
	}
	if (attr->comp_mask & BZCDV_BULK_CHAN_INIT_ATTR_MASK_RECV_CQ)
		recv_cq = attr->recv_cq;

	chan = calloc(1, sizeof(*chan));
	if (!chan) {
		errno = ENOMEM;
		return NULL;
	}
	ret = pthread_spin_init(&chan->wq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_free;

	ccmd.comp_mask = 0;
	ccmd.depth = attr->depth;
	bzc_cmd_init(&cmd, BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_CREATE);
	handle = bzc_cmd_add_idr_new(&cmd, BZC_ATTR_BULK_CHAN_CREATE_HANDLE);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_CREATE_PD_HANDLE,
			attr->pd->handle);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_CREATE_CQ_HANDLE,
			attr->cq->handle);
	if (recv_cq)
		bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_CREATE_RECV_CQ_HANDLE,
				recv_cq->handle);
	bzc_cmd_add_ptr_in(&cmd, BZC_ATTR_BULK_CHAN_CREATE_CMD, &ccmd,
			   sizeof(ccmd));
	bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_BULK_CHAN_CREATE_RESP, &resp,
			    sizeof(resp));
	ret = bzc_cmd_exec(ctx, &cmd);
	if (ret)
		goto err_lock;
	chan->handle = (uint32_t)handle->data;

	/* The channel ring has the SQ's format: one WQE and an SGE at least. */
	ret = bzc_wq_map(ctx, &chan->wq, resp.mmap_key, resp.mmap_len,
			 resp.entries, resp.wqe_size,
			 sizeof(struct bzc_bulk_wqe) + sizeof(struct bzc_bulk_sge),
			 attr->depth);
	if (ret)
		goto err_destroy;

	/* What one slot holds, what the device takes, what the field holds. */
	max_sge = (uint32_t)((((size_t)1 << chan->wq.wqe_shift) -
			      sizeof(struct bzc_bulk_wqe)) /
			     sizeof(struct bzc_bulk_sge));
	if (max_sge > caps.max_bulk_sge)
		max_sge = caps.max_bulk_sge;
	if (max_sge > BZC_BULK_SGE_FIELD_MAX)
		max_sge = BZC_BULK_SGE_FIELD_MAX;

	chan->dv.context = ctx;
	chan->dv.pd = attr->pd;
	chan->dv.cq = attr->cq;
	chan->dv.recv_cq = recv_cq;
	chan->dv.chan_num = resp.chan_num;
	chan->dv.depth = chan->wq.entries;
	chan->dv.max_sge = max_sge;
	return &chan->dv;

err_destroy:
	bzc_bulk_chan_destroy_cmd(ctx, chan->handle);
err_lock:
	pthread_spin_destroy(&chan->wq.lock);
err_free:
	free(chan);
	errno = ret;
	return NULL;
}

BZC_EXPORT int bzcdv_destroy_bulk_chan(struct bzcdv_bulk_chan *dv)
{
	struct bzc_bulk_chan *chan = to_bchan(dv);
	int ret;

	/* The kernel flushes what it has not finished before returning. */
	ret = bzc_bulk_chan_destroy_cmd(dv->context, chan->handle);
	if (!bzc_destroyed(ret))
		return ret;

	bzc_wq_unmap(&chan->wq);
	pthread_spin_destroy(&chan->wq.lock);
	free(chan);
	return 0;
}

/*
 * Whether a failed doorbell left the WQEs it was rung for unposted.  By
 * errno:
 *  - EPERM (this process is not the PD's; it can hold the ring only if it
 *    undid MADV_DONTFORK) and EINVAL (a producer index the ring cannot
 *    hold): the kernel read none of them, and no doorbell of the owner
 *    reads them either, since its next post writes its own WQEs into those
 *    slots and its own prod.  Not posted.
 *  - EIO: the channel stopped after bzcdv_post_bulk() found it running
 *    (the kernel flushes what it read: posted), or the device is gone
 *    (nothing completes any more, as for every WR posted before).
 *  - anything else, ENOMEM for one: the kernel read some; the rest run at
 *    the next doorbell.  Posted.
 */
static bool bzc_bulk_doorbell_unposted(int err)
{
	return err == EPERM || err == EINVAL;
}

BZC_EXPORT int bzcdv_connect_bulk_chan(struct bzcdv_bulk_chan *dv,
				       const struct bzcdv_bulk_conn_attr *attr)
{
	struct bzc_bulk_chan_connect_cmd ccmd = {};
	struct bzc_bulk_chan *chan;
	struct bzc_cmd cmd;
	int ret;

	if (!dv || !attr)
		return EINVAL;
	if (attr->comp_mask & ~(uint64_t)BZCDV_BULK_CONN_ATTR_MASK_ALL)
		return EINVAL;
	chan = to_bchan(dv);

	memcpy(ccmd.remote_gid, attr->remote_gid.raw, sizeof(ccmd.remote_gid));
	ccmd.remote_chan = attr->remote_chan;
	ccmd.sgid_index = attr->sgid_index;
	bzc_cmd_init(&cmd, BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_CONNECT);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_CONNECT_HANDLE, chan->handle);
	bzc_cmd_add_ptr_in(&cmd, BZC_ATTR_BULK_CHAN_CONNECT_CMD, &ccmd,
			   sizeof(ccmd));
	ret = bzc_cmd_exec(dv->context, &cmd);
	/* A kernel from before connections has no such method. */
	return ret == EPROTONOSUPPORT ? EOPNOTSUPP : ret;
}

BZC_EXPORT int bzcdv_connect_bulk_chan_qp(struct bzcdv_bulk_chan *dv,
					  struct ibv_qp *qp)
{
	struct bzc_cmd cmd;
	int ret;

	if (!dv || !qp)
		return EINVAL;
	if (qp->context != dv->context)
		return EINVAL;
	bzc_cmd_init(&cmd, BZC_OBJECT_BULK_CHAN,
		     BZC_METHOD_BULK_CHAN_CONNECT_QP);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_CONNECT_QP_HANDLE,
			to_bchan(dv)->handle);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_CONNECT_QP_QP_HANDLE,
			qp->handle);
	ret = bzc_cmd_exec(dv->context, &cmd);
	/* A kernel from before bulk transfers on QPs has no such method. */
	return ret == EPROTONOSUPPORT ? EOPNOTSUPP : ret;
}

static int bzc_bulk_doorbell(struct bzc_bulk_chan *chan)
{
	struct bzc_cmd cmd;

	bzc_cmd_init(&cmd, BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_DOORBELL);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_DOORBELL_HANDLE,
			chan->handle);
	return bzc_cmd_exec(chan->dv.context, &cmd);
}

/* Write @wr into slot @index; chan->wq.lock held. */
static int bzc_bulk_build(struct bzc_bulk_chan *chan, uint32_t index,
			  const struct bzcdv_bulk_wr *wr)
{
	struct bzc_bulk_sge *sge;
	struct bzc_bulk_wqe *wqe;
	uint32_t i;

	if ((unsigned int)wr->opcode > BZC_BULK_OP_MAX)
		return bzc_refuse(EINVAL, "unknown opcode");
	if (wr->flags & ~(uint32_t)BZC_BULK_FLAGS_KNOWN)
		return bzc_refuse(EINVAL, "unknown flags");
	if (wr->num_sge > chan->dv.max_sge || (wr->num_sge && !wr->sg_list))
		return bzc_refuse(EINVAL, "more SGEs than max_sge, or no sg_list");
	if (bzc_wq_full(&chan->wq, index))
		return bzc_refuse(ENOMEM, "ring full");

	wqe = bzc_wq_slot(&chan->wq, index);
	memset(wqe, 0, sizeof(*wqe));
	wqe->wr_id = htole64(wr->wr_id);
	wqe->remote_addr = htole64(wr->remote_addr);
	wqe->opcode = (uint8_t)wr->opcode;
	wqe->flags = (uint8_t)wr->flags;
	wqe->num_sge = htole16((uint16_t)wr->num_sge);
	wqe->rkey = htole32(wr->rkey);
	wqe->remote_chan = htole32(wr->remote_chan);
	/* The ring carries the immediate in host order, verbs in network. */
	wqe->imm_data = htole32(be32toh(wr->imm_data));

	sge = (struct bzc_bulk_sge *)((uint8_t *)wqe + BZC_BULK_WQE_SGE_OFFSET);
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = htole64(wr->sg_list[i].addr);
		sge[i].length = htole64(wr->sg_list[i].length);
		sge[i].lkey = htole32(wr->sg_list[i].lkey);
		sge[i].pad = 0;
	}
	return 0;
}

BZC_EXPORT int bzcdv_post_bulk(struct bzcdv_bulk_chan *dv,
			       struct bzcdv_bulk_wr *wr,
			       struct bzcdv_bulk_wr **bad_wr)
{
	struct bzc_bulk_chan *chan = to_bchan(dv);
	struct bzcdv_bulk_wr *first = wr;
	uint32_t start;
	int ret = 0, db;
	bool posted;

	if (!wr)
		return 0;

	bzc_wq_lock(&chan->wq);
	/*
	 * A stopped channel runs nothing more: refuse before publishing, so
	 * that this EIO means "not posted".  One that stops after this look
	 * flushes what its doorbell reads: those are posted.
	 */
	if (__atomic_load_n(&chan->wq.hdr->error, __ATOMIC_ACQUIRE)) {
		bzc_wq_unlock(&chan->wq);
		bzc_dbg(dv->context,
			"bulk channel %u is stopped (its CQ or receive CQ overflowed)\n",
			dv->chan_num);
		*bad_wr = wr;
		return EIO;
	}
	start = chan->wq.prod;
	for (; wr; wr = wr->next) {
		ret = bzc_bulk_build(chan, chan->wq.prod, wr);
		if (ret)
			break;
		chan->wq.prod++;
	}
	posted = chan->wq.prod != start;
	if (posted)
		bzc_wq_publish(&chan->wq);
	bzc_wq_unlock(&chan->wq);

	if (ret) {
		bzc_dbg(dv->context,
			"bulk channel %u: work request %#llx refused (%s): %s\n",
			dv->chan_num, (unsigned long long)wr->wr_id,
			strerror(ret), bzc_refusal);
		*bad_wr = wr;
	}

	/*
	 * Outside the lock: a doorbell runs whatever is published, so one
	 * thread's doorbell may run another's WQEs and nothing is lost.
	 */
	if (!posted)
		return ret;
	db = bzc_bulk_doorbell(chan);
	if (!db)
		return ret;
	bzc_err(dv->context, "bulk channel %u: doorbell failed (%s)%s\n",
		dv->chan_num, strerror(db),
		bzc_bulk_doorbell_unposted(db) ?
			": nothing was posted" :
			"; the posted work requests run at the next doorbell, or never if the channel stopped or the device is gone");
	if (!bzc_bulk_doorbell_unposted(db))
		return ret;
	*bad_wr = first;
	return db;
}
