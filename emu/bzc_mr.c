// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: memory regions over pinned user memory.
 *
 * The device moves data between struct pages, so an MR is its pinned pages
 * in order, found by key from the data path. lkey and rkey are the same
 * value: the MR's index in the device's table << 8 | a byte that changes
 * on every registration, so a stale key does not match a reused index.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <rdma/ib_umem.h>

#include "bzc.h"

/*
 * What the software device implements; anything else but the optional
 * (ignorable) bits, such as relaxed ordering, is refused.
 */
#define BZC_MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |	\
		       IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC |	\
		       IB_ACCESS_MW_BIND | IB_ZERO_BASED | IB_ACCESS_OPTIONAL)

static int bzc_mr_collect_pages(struct bzc_mr *mr)
{
	struct sg_page_iter iter;
	u64 i = 0;

	mr->npages = ib_umem_num_pages(mr->umem);
	mr->pages = kvcalloc(mr->npages, sizeof(*mr->pages), GFP_KERNEL);
	if (!mr->pages)
		return -ENOMEM;

	for_each_sgtable_page(&mr->umem->sgt_append.sgt, &iter, 0) {
		if (WARN_ON_ONCE(i >= mr->npages))
			break;
		mr->pages[i++] = sg_page_iter_page(&iter);
	}
	return 0;
}

int bzc_mr_assign_key(struct bzc_dev *bdev, struct bzc_mr *mr)
{
	u32 index;
	int err;

	err = xa_alloc_cyclic(&bdev->mr_xa, &index, mr,
			      XA_LIMIT(1, BZC_MAX_MR), &bdev->mr_next,
			      GFP_KERNEL);
	if (err < 0)
		return err == -EBUSY ? -ENOMEM : err;

	/* The low byte varies with the registration count. */
	mr->ibmr.lkey = index << 8 | (bdev->mr_next & 0xff);
	mr->ibmr.rkey = mr->ibmr.lkey;
	return 0;
}

struct ib_mr *bzc_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
			      u64 iova, int access, struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibpd->device);
	struct bzc_mr *mr;
	int err;

	if (access & ~BZC_MR_ACCESS)
		return ERR_PTR(-EOPNOTSUPP);
	if (!length || length > bdev->attr.max_mr_size)
		return ERR_PTR(-EINVAL);
	/* No driver request is defined; a newer one must be all zero. */
	if (udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return ERR_PTR(-EOPNOTSUPP);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);

	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		err = PTR_ERR(mr->umem);
		goto err_free;
	}
	err = bzc_mr_collect_pages(mr);
	if (err)
		goto err_release;

	mr->iova = iova;
	mr->length = length;
	mr->access = access;
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	mr->ibmr.page_size = PAGE_SIZE;

	refcount_set(&mr->refcnt, 1);
	init_completion(&mr->released);
	err = bzc_mr_assign_key(bdev, mr);
	if (err)
		goto err_pages;
	return &mr->ibmr;

err_pages:
	kvfree(mr->pages);
err_release:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(err);
}

int bzc_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibmr->device);
	struct bzc_mr *mr = to_bmr(ibmr);

	/* No new lookups; then wait for the data path to let go. */
	xa_erase(&bdev->mr_xa, ibmr->lkey >> 8);
	bzc_mr_put(mr);
	wait_for_completion(&mr->released);

	kvfree(mr->pages);
	ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

/* Find a registered MR by lkey or rkey, with a reference. */
struct bzc_mr *bzc_mr_get(struct bzc_dev *bdev, u32 key)
{
	struct bzc_mr *mr;

	/* The data path runs in process context only: no irq-safe locks. */
	xa_lock(&bdev->mr_xa);
	mr = xa_load(&bdev->mr_xa, key >> 8);
	if (mr && (mr->ibmr.lkey != key || !refcount_inc_not_zero(&mr->refcnt)))
		mr = NULL;
	xa_unlock(&bdev->mr_xa);
	return mr;
}

void bzc_mr_put(struct bzc_mr *mr)
{
	if (refcount_dec_and_test(&mr->refcnt))
		complete(&mr->released);
}
