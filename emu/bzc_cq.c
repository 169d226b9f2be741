// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: completion queues.
 *
 * A CQ is a ring the kernel writes and the process reads without entering
 * the kernel (kernel-headers/rdma/bzc-abi.h describes it). The kernel keeps
 * its own producer index; the consumer index and the arm word come from
 * process memory and are treated as hostile: a consumer index that does not
 * leave room is an overflow, which puts the CQ in error.
 */
#include <linux/log2.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "bzc.h"

static struct bzc_cq_ring_hdr *bzc_cq_hdr(struct bzc_ring *ring)
{
	return ring->kaddr;
}

static struct bzc_cqe *bzc_cq_slot(struct bzc_ring *ring, u32 index)
{
	return ring->kaddr + BZC_CQ_RING_CQE_OFFSET +
	       (size_t)(index & (ring->entries - 1)) * sizeof(struct bzc_cqe);
}

static int bzc_cq_entries(struct bzc_cq *cq, int cqe, u32 *entries)
{
	if (cqe < 1 || cqe > to_bdev(cq->ibcq.device)->attr.max_cqe)
		return -EINVAL;
	*entries = roundup_pow_of_two(cqe);
	return 0;
}

static int bzc_cq_ring_alloc(struct bzc_ring *ring, struct ib_udata *udata,
			     u32 entries)
{
	return bzc_ring_alloc(ring, udata, BZC_CQ_RING_CQE_OFFSET,
			      sizeof(struct bzc_cqe), entries);
}

/* Driver data of the create and resize responses: where the ring is. */
static int bzc_cq_respond(struct ib_udata *udata, struct bzc_ring *ring)
{
	struct bzc_create_cq_resp resp = {
		.mmap_key = ring->mmap_key,
		.mmap_len = ring->mmap_len,
		.entries = ring->entries,
	};

	return ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
}

int bzc_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibcq->device);
	struct bzc_cq *cq = to_bcq(ibcq);
	u32 entries;
	int err;

	if (attr->flags & ~IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION)
		return -EOPNOTSUPP;
	if (attr->comp_vector >= ibcq->device->num_comp_vectors)
		return -EINVAL;
	/* No driver request is defined; a newer one must be all zero. */
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	err = bzc_cq_entries(cq, attr->cqe, &entries);
	if (err)
		return err;
	err = bzc_obj_get(bdev, &bdev->num_cq, bdev->attr.max_cq, "CQ");
	if (err)
		return err;

	spin_lock_init(&cq->lock);
	cq->timestamps = attr->flags & IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION;
	err = bzc_cq_ring_alloc(&cq->ring, udata, entries);
	if (err)
		goto err_count;

	/* A kernel consumer's ring stays private; it polls through bzc_kcq.c. */
	err = udata ? bzc_cq_respond(udata, &cq->ring) : 0;
	if (err)
		goto err_ring;

	ibcq->cqe = entries;
	return 0;

err_ring:
	bzc_ring_free(&cq->ring);
err_count:
	bzc_obj_put(&bdev->num_cq);
	return err;
}

int bzc_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct bzc_cq *cq = to_bcq(ibcq);

	bzc_ring_free(&cq->ring);
	bzc_obj_put(&to_bdev(ibcq->device)->num_cq);
	return 0;
}

/*
 * Move the unconsumed CQEs to a new ring. The process holds off polling
 * while it resizes; the new ring starts at cons 0 with prod = count.
 */
int bzc_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct bzc_cq *cq = to_bcq(ibcq);
	struct bzc_ring new_ring, old_ring;
	struct bzc_cq_ring_hdr *old_hdr, *new_hdr;
	u32 entries, cons, used, i;
	unsigned long flags;
	int err;

	if (!udata)
		return -EOPNOTSUPP;
	err = bzc_cq_entries(cq, cqe, &entries);
	if (err)
		return err;

	err = bzc_cq_ring_alloc(&new_ring, udata, entries);
	if (err)
		return err;
	/* Answer first: copying to the process may fault, so not under lock. */
	err = bzc_cq_respond(udata, &new_ring);
	if (err)
		goto err_free;

	spin_lock_irqsave(&cq->lock, flags);
	old_hdr = bzc_cq_hdr(&cq->ring);
	new_hdr = bzc_cq_hdr(&new_ring);
	cons = le32_to_cpu(READ_ONCE(old_hdr->cons));
	used = cq->prod - cons;
	if (used > cq->ring.entries || used > entries) {
		spin_unlock_irqrestore(&cq->lock, flags);
		err = -EINVAL;
		goto err_free;
	}
	for (i = 0; i < used; i++)
		memcpy(bzc_cq_slot(&new_ring, i),
		       bzc_cq_slot(&cq->ring, cons + i), sizeof(struct bzc_cqe));
	WRITE_ONCE(new_hdr->arm, READ_ONCE(old_hdr->arm));
	WRITE_ONCE(new_hdr->prod, cpu_to_le32(used));
	old_ring = cq->ring;
	cq->ring = new_ring;
	cq->prod = used;
	spin_unlock_irqrestore(&cq->lock, flags);

	bzc_ring_free(&old_ring);
	ibcq->cqe = entries;
	return 0;

err_free:
	bzc_ring_free(&new_ring);
	return err;
}

static void bzc_cq_error_event(struct bzc_cq *cq)
{
	struct ib_event ev = {
		.device = cq->ibcq.device,
		.element.cq = &cq->ibcq,
		.event = IB_EVENT_CQ_ERR,
	};

	if (cq->ibcq.event_handler)
		cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
}

/* Does the armed state ask for an event for this completion? */
static bool bzc_cq_arm_fires(u32 arm, const struct bzc_cqe *cqe,
			     bool solicited)
{
	if (arm == BZC_CQ_ARM_NEXT)
		return true;
	return arm == BZC_CQ_ARM_SOLICITED &&
	       (solicited || cqe->status != IB_WC_SUCCESS);
}

/**
 * bzc_cq_write() - write one CQE, leaving the handlers to the caller
 * @cq: the CQ
 * @cqe: the entry
 * @solicited: the completion of a solicited message (arming for solicited)
 * @calls: BZC_CQ_CALL_* bits of the handlers that are due are ORed in
 *
 * Any context; never sleeps. The caller may hold its own locks: it calls
 * bzc_cq_notify() with @calls once it has dropped them, so that a handler
 * that posts again (a kernel consumer's) never finds a bzc lock held.
 *
 * Return: false when the CQ has no room (or is already in error): the CQE
 * is dropped and the CQ is in error.
 */
bool bzc_cq_write(struct bzc_cq *cq, const struct bzc_cqe *cqe, bool solicited,
		  u32 *calls)
{
	struct bzc_cq_ring_hdr *hdr;
	struct bzc_cqe *slot;
	bool posted = false;
	unsigned long flags;
	u32 cons, arm;

	spin_lock_irqsave(&cq->lock, flags);
	if (cq->overflowed)
		goto out_unlock;

	hdr = bzc_cq_hdr(&cq->ring);
	cons = le32_to_cpu(READ_ONCE(hdr->cons));
	/* Also catches a cons ahead of prod: the difference wraps. */
	if (cq->prod - cons >= cq->ring.entries) {
		cq->overflowed = true;
		*calls |= BZC_CQ_CALL_OVERFLOW;
		goto out_unlock;
	}

	slot = bzc_cq_slot(&cq->ring, cq->prod);
	memcpy(slot, cqe, sizeof(*cqe));
	/* Stamped under the lock: monotonic in the order of the ring. */
	if (cq->timestamps) {
		slot->timestamp = cpu_to_le64(ktime_get_ns());
		slot->wallclock_ns = cpu_to_le64(ktime_get_real_ns());
	}
	cq->prod++;
	/* The CQE is in place before the process can see prod. */
	smp_store_release(&hdr->prod, cpu_to_le32(cq->prod));
	posted = true;

	/* Pairs with the process's store of arm before its last poll. */
	smp_mb();
	arm = le32_to_cpu(READ_ONCE(hdr->arm));
	if (bzc_cq_arm_fires(arm, cqe, solicited) &&
	    cmpxchg((u32 *)&hdr->arm, (__force u32)cpu_to_le32(arm),
		    (__force u32)cpu_to_le32(BZC_CQ_ARM_NONE)) ==
	    (__force u32)cpu_to_le32(arm))
		*calls |= BZC_CQ_CALL_COMP;
out_unlock:
	spin_unlock_irqrestore(&cq->lock, flags);
	return posted;
}

/**
 * bzc_cq_notify() - call the handlers bzc_cq_write() found due
 * @cq: the CQ
 * @calls: BZC_CQ_CALL_* bits collected by bzc_cq_write()
 *
 * Any context; never sleeps. Call with no bzc spinlock held: the
 * completion handler of a kernel consumer may post and poll again.
 */
void bzc_cq_notify(struct bzc_cq *cq, u32 calls)
{
	if (calls & BZC_CQ_CALL_OVERFLOW) {
		bzc_count(to_bdev(cq->ibcq.device), BZC_CNT_CQ_OVERFLOWS, 1);
		ibdev_err_ratelimited(cq->ibcq.device,
				      "CQ overflow: %u entries\n",
				      cq->ring.entries);
		bzc_cq_error_event(cq);
	}
	if ((calls & BZC_CQ_CALL_COMP) && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

/**
 * bzc_cq_post() - write one CQE and call the handlers it makes due
 * @cq: the CQ
 * @cqe: the entry
 * @solicited: the completion of a solicited message
 *
 * Any context; never sleeps; the caller holds no bzc spinlock (else
 * bzc_cq_write() and bzc_cq_notify()).
 *
 * Return: false when the CQ has no room (or is already in error): the CQE
 * is dropped, the CQ is in error and its owner has been told with
 * IB_EVENT_CQ_ERR.
 */
bool bzc_cq_post(struct bzc_cq *cq, const struct bzc_cqe *cqe, bool solicited)
{
	u32 calls = 0;
	bool posted;

	posted = bzc_cq_write(cq, cqe, solicited, &calls);
	bzc_cq_notify(cq, calls);
	return posted;
}
