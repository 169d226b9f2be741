// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Bulk channels (bzcdv.h): the device's bulk limits, channel creation on a
 * ring mapped from the kernel, and bzcdv_post_bulk(), which fills that
 * ring and rings the doorbell method once per call.
 *
 * The ring follows the rules of a QP's SQ (kernel-headers/rdma/bzc-abi.h):
 * the process writes WQEs at prod, publishes prod with a release store and
 * calls BZC_METHOD_BULK_CHAN_DOORBELL; the kernel copies each WQE out and
 * advances cons, which frees the slot.
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
	/* No optional fields exist yet: none was filled in. */
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

/*
 * Map the ring the kernel described, after checking the description: a
 * power-of-two number (at least @depth) of power-of-two sized slots, each
 * holding a WQE and at least one SGE, all inside the mapping.  Anything
 * else is EPROTO rather than trusted.
 */
static int bzc_bulk_chan_map(struct ibv_context *context,
			     struct bzc_bulk_chan *chan,
			     const struct bzc_bulk_chan_create_resp *resp,
			     uint32_t depth)
{
	uint32_t entries = resp->entries, wqe_size = resp->wqe_size;
	void *addr;

	if (!entries || (entries & (entries - 1)) || entries > 1U << 31 ||
	    entries < depth)
		return EPROTO;
	if (!wqe_size || (wqe_size & (wqe_size - 1)) ||
	    wqe_size < sizeof(struct bzc_bulk_wqe) + sizeof(struct bzc_bulk_sge))
		return EPROTO;
	if ((uint64_t)resp->mmap_len <
	    BZC_WQ_RING_WQE_OFFSET + (uint64_t)entries * wqe_size)
		return EPROTO;
	if ((off_t)resp->mmap_key < 0 ||
	    (uint64_t)(off_t)resp->mmap_key != resp->mmap_key)
		return EPROTO;

	addr = mmap(NULL, resp->mmap_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		    context->cmd_fd, (off_t)resp->mmap_key);
	if (addr == MAP_FAILED)
		return errno;

	chan->hdr = addr;
	chan->ring_len = resp->mmap_len;
	chan->wqes = (uint8_t *)addr + BZC_WQ_RING_WQE_OFFSET;
	chan->entries = entries;
	chan->wqe_shift = (uint32_t)__builtin_ctz(wqe_size);
	chan->prod = le32toh(__atomic_load_n(&chan->hdr->prod,
					     __ATOMIC_RELAXED));
	chan->cons = le32toh(__atomic_load_n(&chan->hdr->cons,
					     __ATOMIC_ACQUIRE));
	return 0;
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
	ret = pthread_spin_init(&chan->lock, PTHREAD_PROCESS_PRIVATE);
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

	ret = bzc_bulk_chan_map(ctx, chan, &resp, attr->depth);
	if (ret)
		goto err_destroy;

	/* What one slot holds, what the device takes, what the field holds. */
	max_sge = (uint32_t)((((size_t)1 << chan->wqe_shift) -
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
	chan->dv.depth = chan->entries;
	chan->dv.max_sge = max_sge;
	return &chan->dv;

err_destroy:
	bzc_bulk_chan_destroy_cmd(ctx, chan->handle);
err_lock:
	pthread_spin_destroy(&chan->lock);
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
	if (ret)
		return ret;

	munmap(chan->hdr, chan->ring_len);
	pthread_spin_destroy(&chan->lock);
	free(chan);
	return 0;
}

static int bzc_bulk_doorbell(struct bzc_bulk_chan *chan)
{
	struct bzc_cmd cmd;

	bzc_cmd_init(&cmd, BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_DOORBELL);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_BULK_CHAN_DOORBELL_HANDLE,
			chan->handle);
	return bzc_cmd_exec(chan->dv.context, &cmd);
}

/* As bzc_wq_full() for a QP: re-read cons only when the ring looks full. */
static bool bzc_bulk_ring_full(struct bzc_bulk_chan *chan, uint32_t index)
{
	if (index - chan->cons < chan->entries)
		return false;
	chan->cons = le32toh(__atomic_load_n(&chan->hdr->cons,
					     __ATOMIC_ACQUIRE));
	return index - chan->cons >= chan->entries;
}

/* Write @wr into slot @index; chan->lock held. */
static int bzc_bulk_build(struct bzc_bulk_chan *chan, uint32_t index,
			  const struct bzcdv_bulk_wr *wr)
{
	struct bzc_bulk_sge *sge;
	struct bzc_bulk_wqe *wqe;
	uint32_t i;

	if ((unsigned int)wr->opcode > BZC_BULK_OP_MAX)
		return EINVAL;
	if (wr->flags & ~(uint32_t)BZC_BULK_FLAGS_KNOWN)
		return EINVAL;
	if (wr->num_sge > chan->dv.max_sge || (wr->num_sge && !wr->sg_list))
		return EINVAL;
	if (bzc_bulk_ring_full(chan, index))
		return ENOMEM;

	wqe = (struct bzc_bulk_wqe *)(chan->wqes +
				      ((size_t)(index & (chan->entries - 1))
				       << chan->wqe_shift));
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

	pthread_spin_lock(&chan->lock);
	start = chan->prod;
	for (; wr; wr = wr->next) {
		ret = bzc_bulk_build(chan, chan->prod, wr);
		if (ret)
			break;
		chan->prod++;
	}
	posted = chan->prod != start;
	if (posted)
		__atomic_store_n(&chan->hdr->prod, htole32(chan->prod),
				 __ATOMIC_RELEASE);
	pthread_spin_unlock(&chan->lock);

	if (ret)
		*bad_wr = wr;

	/*
	 * Outside the lock: a doorbell runs whatever is published, so one
	 * thread's doorbell may run another's WQEs and nothing is lost.
	 */
	if (posted) {
		db = bzc_bulk_doorbell(chan);
		if (db) {
			*bad_wr = first;
			return db;
		}
	}
	return ret;
}
