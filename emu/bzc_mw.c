// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: memory windows.
 *
 * A window is an rkey for a range of an MR with remote rights of its own.
 * Its rkey lives in the MR key table (tagged), so the data path resolves
 * window and MR rkeys in one lookup (bzc_rkey_get()). Type 1 windows
 * belong to a PD and are bound with ibv_bind_mw(); type 2 windows (2B:
 * bound to one QP) are bound with a BIND_MW work request. Both kinds of
 * bind arrive as a BIND_MW WQE on the send queue and run in order with
 * the QP's other WQEs; the provider marks ibv_bind_mw()'s with
 * BZC_WQE_BIND_TYPE1, because IBA lets each type be bound one way only.
 * The new rkey keeps the window's index (key >> 8) and takes the low byte
 * the consumer chose (ibv_inc_rkey()).
 *
 * What guards a window's keys, given that IBA gives their low byte to the
 * consumer: while the window exists, only its current rkey resolves, and
 * only while it is bound (type 2: from the QP it is bound to). Its index
 * is the device's (random first byte, as for MRs: bzc_key_reserve()), and
 * once it is deallocated the next object at the index takes a random
 * byte other than the window's last one, so its last rkey dies with it.
 * Its earlier rkeys, and the byte a consumer picks for a new binding, are
 * only as unpredictable as the consumer makes them.
 *
 * Every use of a window happens with mr_xa locked, then under the
 * window's own lock: dealloc erases the entry first, after which nothing
 * can reach it.
 */
#include "bzc.h"

/* Rights a window can grant; local write is implied by its MR, ignored. */
#define BZC_MW_ACCESS (IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE | \
		       IB_ACCESS_REMOTE_ATOMIC | IB_ACCESS_LOCAL_WRITE)

int bzc_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibmw->device);
	struct bzc_mw *mw = to_bmw(ibmw);
	int err;

	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	/* No driver data is defined; a newer request must be all zero. */
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;

	err = bzc_obj_get(bdev, &bdev->num_mw, bdev->attr.max_mw, "MW");
	if (err)
		return err;

	spin_lock_init(&mw->lock);
	err = bzc_key_reserve(bdev, &mw->rkey);
	if (err) {
		bzc_obj_put(&bdev->num_mw);
		return err;
	}
	/* Unbound: the rkey resolves to nothing until a bind. */
	ibmw->rkey = mw->rkey;
	bzc_key_publish(bdev, mw->rkey, xa_tag_pointer(mw, BZC_KEY_TAG_MW));
	return 0;
}

/* Drop the binding; called with mw->lock held. Returns the MR to put. */
static struct bzc_mr *bzc_mw_unbind(struct bzc_mw *mw)
{
	struct bzc_mr *mr = mw->mr;

	mw->mr = NULL;
	mw->length = 0;
	mw->access = 0;
	mw->qp_serial = 0;
	return mr;
}

static void bzc_mw_release_mr(struct bzc_mr *mr)
{
	if (!mr)
		return;
	atomic_dec(&mr->num_mw);
	bzc_mr_put(mr);
}

int bzc_dealloc_mw(struct ib_mw *ibmw)
{
	struct bzc_dev *bdev = to_bdev(ibmw->device);
	struct bzc_mw *mw = to_bmw(ibmw);
	struct bzc_mr *mr;

	/*
	 * Binds change the rkey with mr_xa locked: the last one is recorded
	 * as the index's byte, which the next key at the index will not
	 * repeat.
	 */
	xa_lock(&bdev->mr_xa);
	bdev->key_bytes[mw->rkey >> 8] = mw->rkey & 0xff;
	__xa_erase(&bdev->mr_xa, mw->rkey >> 8);
	xa_unlock(&bdev->mr_xa);
	/* Unreachable now; no lock needed for the last look. */
	mr = bzc_mw_unbind(mw);
	bzc_mw_release_mr(mr);
	bzc_obj_put(&bdev->num_mw);
	return 0;
}

/*
 * The checks of IBA 10.6.7.2 for binding `mw` to [addr, addr + length) of
 * `mr` from `qp`. Called with mr_xa and mw->lock held.
 */
static bool bzc_mw_bind_ok(struct bzc_mw *mw, struct bzc_mr *mr,
			   struct bzc_qp *qp, bool type1_verb, u64 addr,
			   u64 length, int access)
{
	bool type1 = mw->ibmw.type == IB_MW_TYPE_1;
	int mr_access;

	if (type1 != type1_verb || mw->ibmw.pd != qp->ibqp.pd)
		return false;
	if (access & ~BZC_MW_ACCESS)
		return false;	/* zero-based windows are not supported */
	/* A type 2 window is bound once, then invalidated before rebinding. */
	if (!type1 && (mw->mr || !length))
		return false;
	if (!length)
		return true;	/* type 1: unbind */
	if (!mr || mr->ibmr.pd != qp->ibqp.pd)
		return false;
	mr_access = READ_ONCE(mr->access);	/* rereg may change it */
	if (!(mr_access & IB_ACCESS_MW_BIND))
		return false;
	/* Remote write or atomic rights need a locally writable MR. */
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr_access & IB_ACCESS_LOCAL_WRITE))
		return false;
	return addr >= mr->iova && length <= mr->length &&
	       addr - mr->iova <= mr->length - length;
}

/* Execute a BIND_MW WQE of `qp` (already copied out of the ring). */
enum ib_wc_status bzc_mw_bind(struct bzc_qp *qp, const struct bzc_send_wqe *wqe)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	u32 rkey = le32_to_cpu(wqe->bind.mw_rkey);
	u32 lkey = le32_to_cpu(wqe->bind.mr_lkey);
	u64 addr = le64_to_cpu(wqe->bind.addr);
	u64 length = le64_to_cpu(wqe->bind.length);
	int access = le32_to_cpu(wqe->bind.access);
	struct bzc_mr *mr = NULL, *old = NULL;
	enum ib_wc_status status = IB_WC_MW_BIND_ERR;
	struct bzc_mw *mw;
	void *entry;

	xa_lock(&bdev->mr_xa);
	entry = xa_load(&bdev->mr_xa, rkey >> 8);
	if (!entry || xa_pointer_tag(entry) != BZC_KEY_TAG_MW)
		goto out;
	mw = xa_untag_pointer(entry);
	if (length) {
		entry = xa_load(&bdev->mr_xa, lkey >> 8);
		if (!entry || xa_pointer_tag(entry))
			goto out;
		mr = entry;
		if (!bzc_mr_key_ok(mr, lkey) ||
		    !refcount_inc_not_zero(&mr->refcnt)) {
			mr = NULL;
			goto out;
		}
	}

	spin_lock(&mw->lock);
	if (bzc_mw_bind_ok(mw, mr, qp, wqe->flags & BZC_WQE_BIND_TYPE1, addr,
			   length, access)) {
		old = bzc_mw_unbind(mw);
		if (length) {
			/* Counted with mr_xa locked: see bzc_mr_unpublish(). */
			atomic_inc(&mr->num_mw);
			mw->mr = mr;
			mr = NULL;	/* the window's reference now */
			mw->addr = addr;
			mw->length = length;
			mw->access = access & ~IB_ACCESS_LOCAL_WRITE;
			if (mw->ibmw.type == IB_MW_TYPE_2)
				mw->qp_serial = qp->serial;
		}
		mw->rkey = rkey;
		mw->ibmw.rkey = rkey;
		status = IB_WC_SUCCESS;
	}
	spin_unlock(&mw->lock);
out:
	xa_unlock(&bdev->mr_xa);
	if (mr)
		bzc_mr_put(mr);
	bzc_mw_release_mr(old);
	return status;
}

/*
 * LOCAL_INV (remote false) or SEND_WITH_INV arriving at `qp` (remote
 * true): invalidate the type 2 window or the fast-register MR
 * (bzc_fr_invalidate()) `rkey` names. A window must be bound, of the QP's
 * PD, and for a remote invalidation bound to this QP. Type 1 windows and
 * registered MRs cannot be invalidated: -EINVAL.
 */
int bzc_key_invalidate(struct bzc_dev *bdev, u32 rkey, struct bzc_qp *qp,
		       bool remote)
{
	struct bzc_mr *old = NULL;
	struct bzc_mw *mw;
	void *entry;
	int err = -EINVAL;

	xa_lock(&bdev->mr_xa);
	entry = xa_load(&bdev->mr_xa, rkey >> 8);
	if (!entry)
		goto out;
	if (xa_pointer_tag(entry) != BZC_KEY_TAG_MW) {
		err = bzc_fr_invalidate(entry, rkey, qp);
		goto out;
	}
	mw = xa_untag_pointer(entry);
	spin_lock(&mw->lock);
	if (mw->ibmw.type == IB_MW_TYPE_2 && mw->rkey == rkey && mw->mr &&
	    mw->ibmw.pd == qp->ibqp.pd &&
	    (!remote || mw->qp_serial == qp->serial)) {
		old = bzc_mw_unbind(mw);
		err = 0;
	}
	spin_unlock(&mw->lock);
out:
	xa_unlock(&bdev->mr_xa);
	bzc_mw_release_mr(old);
	return err;
}

/*
 * bzc_rkey_get() for a window, with mr_xa held: the MR behind it with a
 * reference, if `rkey` is the window's current key, it is bound, of the
 * QP's PD (type 2: bound to this QP) and grants `access` over the range.
 */
struct bzc_mr *bzc_mw_resolve(struct bzc_mw *mw, u32 rkey, struct bzc_qp *qp,
			      struct ib_pd *pd, u64 addr, u64 len, int access,
			      u64 *off)
{
	struct bzc_mr *mr = NULL;

	spin_lock(&mw->lock);
	if (mw->mr && mw->rkey == rkey && mw->ibmw.pd == pd &&
	    (mw->ibmw.type == IB_MW_TYPE_1 || mw->qp_serial == qp->serial) &&
	    (mw->access & access) == access &&
	    addr >= mw->addr && len <= mw->length &&
	    addr - mw->addr <= mw->length - len &&
	    refcount_inc_not_zero(&mw->mr->refcnt)) {
		mr = mw->mr;
		*off = addr - mr->iova;
	}
	spin_unlock(&mw->lock);
	return mr;
}
