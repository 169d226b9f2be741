// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: shared receive queues — a mapped ring of receive WQEs (the RQ ring
 * format) that any QP created on the SRQ consumes, the srq_limit event,
 * and the verbs around them.
 *
 * The process fills the ring and publishes prod without a system call (a
 * kernel consumer through bzc_post_srq_recv(), into a ring of kernel
 * memory nobody maps); a sender delivering to a QP on the SRQ takes the
 * next WQE here under the SRQ's lock (bzc_srq_take()). Nothing flushes an
 * SRQ: its WQEs belong to no QP until one is taken. A resize
 * (BZC_METHOD_SRQ_RESIZE) moves the posted WQEs to a new ring under that
 * lock. An XRC SRQ has a number too, by which messages to XRC target QPs
 * name it (bzc_xrc.c).
 */
#define UVERBS_MODULE_NAME bzc
#include <linux/log2.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/uverbs_named_ioctl.h>
#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"

#define BZC_RECV_WQE_HDR sizeof(struct bzc_recv_wqe)

static void bzc_srq_event(struct bzc_srq *srq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = srq->ibsrq.device,
		.element.srq = &srq->ibsrq,
		.event = type,
	};

	if (srq->ibsrq.event_handler)
		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
}

int bzc_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		   struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibsrq->device);
	struct bzc_srq *srq = to_bsrq(ibsrq);
	struct bzc_create_srq_resp resp = {};
	u32 entries, slot;
	int err;

	/* No kernel consumer asks for an XRC SRQ; processes do. */
	if (init->srq_type != IB_SRQT_BASIC &&
	    (init->srq_type != IB_SRQT_XRC || !udata))
		return -EOPNOTSUPP;
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	/* srq_limit is not looked at: the limit is armed by modify_srq. */
	if (!init->attr.max_wr || init->attr.max_wr > bdev->attr.max_srq_wr ||
	    init->attr.max_sge > bdev->attr.max_srq_sge)
		return -EINVAL;

	err = bzc_obj_get(bdev, &bdev->num_srq, bdev->attr.max_srq, "SRQ");
	if (err)
		return err;

	entries = roundup_pow_of_two(init->attr.max_wr);
	slot = roundup_pow_of_two(BZC_RECV_WQE_HDR +
				  max_t(u32, init->attr.max_sge *
					     sizeof(struct bzc_sge),
					sizeof(struct bzc_sge)));
	spin_lock_init(&srq->lock);
	spin_lock_init(&srq->kpost_lock);
	refcount_set(&srq->refcnt, 1);
	init_completion(&srq->released);
	err = bzc_ring_alloc(&srq->ring, udata, BZC_WQ_RING_WQE_OFFSET, slot,
			     entries);
	if (err)
		goto err_count;
	srq->cons = 0;
	srq->limit = 0;
	srq->broken = false;
	srq->wqe_size = slot;
	srq->max_sge = min_t(u32, (slot - BZC_RECV_WQE_HDR) /
			     sizeof(struct bzc_sge), bdev->attr.max_srq_sge);

	/* What the slots really hold goes back to the consumer. */
	init->attr.max_wr = entries;
	init->attr.max_sge = srq->max_sge;
	if (!udata)
		return 0;

	resp.mmap_key = srq->ring.mmap_key;
	resp.mmap_len = srq->ring.mmap_len;
	resp.entries = entries;
	resp.wqe_size = slot;
	err = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
	if (err)
		goto err_ring;
	/* Found by senders from now on: last. */
	if (init->srq_type == IB_SRQT_XRC) {
		err = bzc_xrc_srq_publish(srq, udata);
		if (err)
			goto err_ring;
	}
	return 0;

err_ring:
	bzc_ring_free(&srq->ring);
err_count:
	bzc_obj_put(&bdev->num_srq);
	return err;
}

int bzc_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		   enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibsrq->device);
	struct bzc_srq *srq = to_bsrq(ibsrq);

	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	if (mask & ~(IB_SRQ_MAX_WR | IB_SRQ_LIMIT))
		return -EINVAL;
	if (mask & IB_SRQ_MAX_WR) {
		if (!attr->max_wr || attr->max_wr > bdev->attr.max_srq_wr)
			return -EINVAL;
		/*
		 * Only BZC_METHOD_SRQ_RESIZE resizes: this command has no
		 * response to say where the new ring is. A kernel SRQ keeps
		 * its size: bzc_post_srq_recv() writes the ring unlocked.
		 */
		return -EOPNOTSUPP;
	}

	if (mask & IB_SRQ_LIMIT) {
		spin_lock(&srq->lock);
		if (attr->srq_limit > srq->ring.entries) {
			spin_unlock(&srq->lock);
			return -EINVAL;
		}
		srq->limit = attr->srq_limit;
		spin_unlock(&srq->lock);
	}
	return 0;
}

/*
 * Move the posted WQEs of `srq` into `ring` (allocated, as big as the
 * caller checked max_wr to be) and take receives from it from now on;
 * `ring` gets the old ring back to free. The process's prod is read once.
 */
static int bzc_srq_swap_ring(struct bzc_srq *srq, struct bzc_ring *ring,
			     u32 max_wr)
{
	struct bzc_wq_ring_hdr *old_hdr, *new_hdr = ring->kaddr;
	struct bzc_ring old;
	u32 prod, posted, i;
	const char *why;

	spin_lock(&srq->lock);
	old_hdr = srq->ring.kaddr;
	prod = le32_to_cpu(READ_ONCE(old_hdr->prod));
	posted = prod - srq->cons;
	if (srq->broken)
		why = "the SRQ is broken";
	else if (posted > srq->ring.entries)
		why = "its ring holds a producer index out of range";
	else if (posted > max_wr)
		why = "more receives are posted than the new size";
	else if (srq->limit > max_wr)
		why = "the armed srq_limit is above the new size";
	else
		why = NULL;
	if (why) {
		spin_unlock(&srq->lock);
		ibdev_info_ratelimited(srq->ibsrq.device,
				       "SRQ resize to %u refused: %s (prod %u, cons %u, %u slots)\n",
				       max_wr, why, prod, srq->cons,
				       srq->ring.entries);
		return -EINVAL;
	}

	/* The same free-running indices, so nothing the process kept moves. */
	for (i = srq->cons; i != prod; i++)
		memcpy(bzc_wq_slot(ring, i, srq->wqe_size),
		       bzc_wq_slot(&srq->ring, i, srq->wqe_size),
		       srq->wqe_size);
	new_hdr->prod = cpu_to_le32(prod);
	new_hdr->cons = cpu_to_le32(srq->cons);
	old = srq->ring;
	srq->ring = *ring;
	spin_unlock(&srq->lock);
	*ring = old;
	return 0;
}

/*
 * BZC_METHOD_SRQ_RESIZE: a new ring of at least max_wr slots holding the
 * receives posted (bzc-abi.h, struct bzc_srq_resize_cmd). The core holds
 * the SRQ's uobject for read: it cannot be destroyed underneath, but two
 * resizes may run at once, each swapping under the SRQ's lock.
 */
static int UVERBS_HANDLER(BZC_METHOD_SRQ_RESIZE)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_srq *ibsrq = uverbs_attr_get_obj(attrs,
						   BZC_ATTR_SRQ_RESIZE_HANDLE);
	struct bzc_srq_resize_resp resp = {};
	struct bzc_srq_resize_cmd cmd;
	struct bzc_ring ring;
	struct bzc_srq *srq;
	int err;

	if (IS_ERR(ibsrq))
		return PTR_ERR(ibsrq);
	srq = to_bsrq(ibsrq);
	err = uverbs_copy_from_or_zero(&cmd, attrs, BZC_ATTR_SRQ_RESIZE_CMD);
	if (err)
		return err;
	if (cmd.comp_mask & ~(u64)BZC_SRQ_RESIZE_MASK_ALL)
		return -EOPNOTSUPP;
	if (!cmd.max_wr || cmd.max_wr > to_bdev(ibsrq->device)->attr.max_srq_wr)
		return -EINVAL;

	err = bzc_ring_alloc(&ring, &attrs->driver_udata,
			     BZC_WQ_RING_WQE_OFFSET, srq->wqe_size,
			     roundup_pow_of_two(cmd.max_wr));
	if (err)
		return err;
	/* Answer first: copying to the process may fault, so not under lock. */
	resp.mmap_key = ring.mmap_key;
	resp.mmap_len = ring.mmap_len;
	resp.entries = ring.entries;
	resp.wqe_size = srq->wqe_size;
	err = uverbs_copy_to_struct_or_zero(attrs, BZC_ATTR_SRQ_RESIZE_RESP,
					    &resp, sizeof(resp));
	if (!err)
		err = bzc_srq_swap_ring(srq, &ring, cmd.max_wr);
	/* The old ring on success, the new one on failure. */
	bzc_ring_free(&ring);
	return err;
}

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_SRQ_RESIZE,
	UVERBS_ATTR_IDR(BZC_ATTR_SRQ_RESIZE_HANDLE, UVERBS_OBJECT_SRQ,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_IN(BZC_ATTR_SRQ_RESIZE_CMD,
			   UVERBS_ATTR_STRUCT(struct bzc_srq_resize_cmd, max_wr),
			   UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(BZC_ATTR_SRQ_RESIZE_RESP,
			    UVERBS_ATTR_STRUCT(struct bzc_srq_resize_resp,
					       wqe_size),
			    UA_MANDATORY));

ADD_UVERBS_METHODS(bzc_srq_methods, UVERBS_OBJECT_SRQ,
		   &UVERBS_METHOD(BZC_METHOD_SRQ_RESIZE));

const struct uapi_definition bzc_srq_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_SRQ, &bzc_srq_methods),
	{},
};

int bzc_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct bzc_srq *srq = to_bsrq(ibsrq);

	spin_lock(&srq->lock);
	attr->max_wr = srq->ring.entries;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	spin_unlock(&srq->lock);
	return 0;
}

/**
 * bzc_post_srq_recv() - ib_post_srq_recv() on a kernel consumer's SRQ
 * @ibsrq: the SRQ
 * @wr: the receive WRs, SGE addresses kernel virtual under the PD's DMA MR
 * @bad_wr: set to the first WR not posted
 *
 * Any context; never sleeps. A process's SRQ is posted to through its
 * mapped ring, without this.
 *
 * Return: 0, -EINVAL (a process's SRQ, too many SGEs) or -ENOMEM (full).
 */
int bzc_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	struct bzc_srq *srq = to_bsrq(ibsrq);
	unsigned long flags;
	int err;

	if (ibsrq->uobject) {
		*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&srq->kpost_lock, flags);
	err = bzc_kring_post_recv(&srq->ring, srq->wqe_size, srq->max_sge, wr,
				  bad_wr);
	spin_unlock_irqrestore(&srq->kpost_lock, flags);
	return err;
}

/*
 * The core refuses to destroy an SRQ that QPs still use, and a QP waits
 * for the senders delivering to it before it goes, so nobody is in
 * bzc_srq_take() any more. Senders find an XRC SRQ by number instead:
 * it is unpublished first, then its destroy waits for them.
 */
int bzc_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct bzc_srq *srq = to_bsrq(ibsrq);

	if (ibsrq->srq_type == IB_SRQT_XRC)
		bzc_xrc_srq_unpublish(srq);
	bzc_srq_put(srq);
	wait_for_completion(&srq->released);
	bzc_ring_free(&srq->ring);
	bzc_obj_put(&to_bdev(ibsrq->device)->num_srq);
	return 0;
}

/*
 * Take the next receive WQE into `rqe` (room for BZC_MAX_SGE SGEs).
 * -EAGAIN: none posted; -EIO: the ring is corrupt (a producer index it
 * cannot hold, or more SGEs than a slot has): the SRQ is broken for good
 * and IB_EVENT_SRQ_ERR is raised once.
 */
int bzc_srq_take(struct bzc_srq *srq, struct bzc_recv_wqe *rqe)
{
	struct bzc_wq_ring_hdr *hdr = srq->ring.kaddr;
	bool limit_reached = false, broke = false;
	int ret;

	spin_lock(&srq->lock);
	if (srq->broken) {
		ret = -EIO;
		goto out;
	}
	/* ret: the WQEs still posted, or an error. */
	ret = bzc_recv_ring_take(&srq->ring, &srq->cons, srq->wqe_size,
				 srq->max_sge, rqe);
	if (ret == -EIO) {
		srq->broken = true;
		broke = true;
		WRITE_ONCE(hdr->error, cpu_to_le32(1));
	}
	/* Fewer WQEs left than the armed limit: one event, then disarmed. */
	if (ret >= 0 && srq->limit && (u32)ret < srq->limit) {
		srq->limit = 0;
		limit_reached = true;
	}
out:
	spin_unlock(&srq->lock);
	if (broke) {
		ibdev_info_ratelimited(srq->ibsrq.device,
				       "corrupt shared receive queue ring\n");
		bzc_srq_event(srq, IB_EVENT_SRQ_ERR);
	}
	if (limit_reached)
		bzc_srq_event(srq, IB_EVENT_SRQ_LIMIT_REACHED);
	return ret < 0 ? ret : 0;
}
