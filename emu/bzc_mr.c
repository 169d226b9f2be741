// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: memory regions over pinned user memory.
 *
 * The device moves data between struct pages, so an MR is its pinned pages
 * in order, found by key from the data path. lkey and rkey are the same
 * value: the MR's index in the device's key table << 8 | a key byte.
 * Memory windows (bzc_mw.c) take their rkeys from the same table, so one
 * lookup resolves any rkey; an lkey never names a window.
 *
 * Keys must be neither guessable nor stale: the table hands out indexes
 * cyclically (an index comes back only after the allocator went round
 * the table), and the key byte is random and differs from the byte of
 * the index's previous key, so a key kept after its object went away
 * never names the next object at the index, and an index says nothing
 * about the byte. A byte repeats after the index was reused more than
 * once only by chance (1 in 255); an RC requester that tries a wrong key
 * loses its connection.
 *
 * Registered MRs cannot be invalidated (LOCAL_INV, SEND_WITH_INV): IBA
 * allows that only for fast-register MRs (bzc_fastreg.c), which only
 * kernel consumers create.
 */
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>
#include <rdma/ib_umem.h>

#include "bzc.h"
#include "bzc_compat.h"

/*
 * What the software device implements; anything else but the optional
 * (ignorable) bits, such as relaxed ordering, is refused.
 */
#define BZC_MR_ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |	\
		       IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC |	\
		       IB_ACCESS_MW_BIND | IB_ZERO_BASED | IB_ACCESS_OPTIONAL | \
		       BZC_MR_ACCESS_FLUSH | IB_ACCESS_ON_DEMAND |	\
		       IB_ACCESS_HUGETLB)
/*
 * FLUSH to global visibility where the core carries it; never to
 * persistence: the device has no persistent memory domain.
 */
#define BZC_MR_ACCESS_FLUSH (BZC_CORE_HAS_FLUSH ? BZC_ACCESS_FLUSH_GLOBAL : 0)

/**
 * bzc_mr_access_ok() - are these MR access flags ones the device implements
 * @access: IB_ACCESS_* of a registration
 *
 * Return: true unless a flag outside what the device implements (or may
 * ignore) is set.
 */
bool bzc_mr_access_ok(int access)
{
	return !(access & ~BZC_MR_ACCESS);
}

/*
 * IB_ACCESS_HUGETLB says an ODP MR's memory is huge pages: a hint the
 * software device has no use for, taken with ODP only (as mlx5 does).
 */
static bool bzc_mr_reg_access_ok(int access)
{
	return bzc_mr_access_ok(access) &&
	       (!(access & IB_ACCESS_HUGETLB) ||
		(access & IB_ACCESS_ON_DEMAND));
}

/*
 * The implicit ODP MR: ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND) asks for
 * the whole address space, addressed by virtual address.
 */
static bool bzc_mr_implicit(u64 start, u64 length, u64 iova, int access)
{
	return (access & IB_ACCESS_ON_DEMAND) && !start && !iova &&
	       length == U64_MAX;
}

static int bzc_mr_collect_pages(struct bzc_mr *mr)
{
	struct sg_page_iter iter;
	u64 i = 0;

	mr->npages = ib_umem_num_pages(mr->umem);
	mr->pages = bzc_page_array_alloc(mr->npages);
	if (!mr->pages)
		return -ENOMEM;

	for_each_sgtable_page(&mr->umem->sgt_append.sgt, &iter, 0) {
		if (WARN_ON_ONCE(i >= mr->npages))
			break;
		mr->pages[i++] = sg_page_iter_page(&iter);
	}
	return 0;
}

/**
 * bzc_keys_init() - size the device's key table and allocate its key bytes
 * @bdev: the device, its limits set (bzc_init_device_attr())
 *
 * The table has max_mr + max_mw indexes (BZC_MAX_MR with the default
 * limits); kernel PDs' DMA MRs and cached MRs take indexes from it too. A
 * device made with lowered limits comes back to an index sooner.
 *
 * Return: 0 or -ENOMEM.
 */
int bzc_keys_init(struct bzc_dev *bdev)
{
	bdev->key_max = min_t(u32, bdev->attr.max_mr + bdev->attr.max_mw,
			      BZC_MAX_MR);
	bdev->key_bytes = kvzalloc(bdev->key_max + 1, GFP_KERNEL);
	return bdev->key_bytes ? 0 : -ENOMEM;
}

/**
 * bzc_keys_free() - free what bzc_keys_init() allocated
 * @bdev: the device (the key table is empty); called twice is harmless
 */
void bzc_keys_free(struct bzc_dev *bdev)
{
	kvfree(bdev->key_bytes);
	bdev->key_bytes = NULL;
}

/**
 * bzc_key_reserve() - reserve an index in the key table and make its key
 * @bdev: the device
 * @key: the new key: the index << 8 | a random byte other than the byte
 *	 of the index's previous key
 *
 * The index resolves to nothing until bzc_key_publish(), so the object
 * can take its key first.
 *
 * Return: 0, or -ENOMEM when the table is full.
 */
int bzc_key_reserve(struct bzc_dev *bdev, u32 *key)
{
	u32 index;
	u8 byte;
	int err;

	err = xa_alloc_cyclic(&bdev->mr_xa, &index, NULL,
			      XA_LIMIT(1, bdev->key_max), &bdev->mr_next,
			      GFP_KERNEL);
	if (err < 0)
		return err == -EBUSY ? -ENOMEM : err;

	/* The index is ours: nobody else reads or writes its byte now. */
	byte = bdev->key_bytes[index] + 1 + get_random_u32_below(255);
	bdev->key_bytes[index] = byte;
	*key = index << 8 | byte;
	return 0;
}

/**
 * bzc_key_publish() - make a reserved key resolve to its object
 * @bdev: the device
 * @key: from bzc_key_reserve()
 * @entry: an MR, or a memory window tagged with BZC_KEY_TAG_MW
 */
void bzc_key_publish(struct bzc_dev *bdev, u32 key, void *entry)
{
	/* Replaces the reservation: no allocation, so it cannot fail. */
	xa_store(&bdev->mr_xa, key >> 8, entry, GFP_KERNEL);
}

/**
 * bzc_mr_alloc() - a zeroed MR that holds its first reference
 * @gfp: GFP_KERNEL_ACCOUNT for a process's MR, GFP_KERNEL for the kernel's
 *
 * Every kind of MR (user, cached, device memory, dma-buf, fast
 * registration, DMA) starts here, so the data path's reference and the
 * release wait are set up the same way for all of them.
 *
 * Return: the MR, or NULL.
 */
struct bzc_mr *bzc_mr_alloc(gfp_t gfp)
{
	struct bzc_mr *mr = kzalloc(sizeof(*mr), gfp);

	if (!mr)
		return NULL;
	refcount_set(&mr->refcnt, 1);
	init_completion(&mr->released);
	atomic_set(&mr->num_mw, 0);
	return mr;
}

/**
 * bzc_mr_set_range() - the address range an MR covers and its access
 * @mr: the MR
 * @iova: its first address (0 for a zero-based MR)
 * @length: in bytes
 * @access: IB_ACCESS_* flags
 *
 * Sets bzc's copy, which the data path checks, and the core's, which it
 * reports, together.
 */
void bzc_mr_set_range(struct bzc_mr *mr, u64 iova, u64 length, int access)
{
	mr->iova = iova;
	mr->length = length;
	mr->access = access;
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	mr->ibmr.page_size = PAGE_SIZE;
}

int bzc_mr_assign_key(struct bzc_dev *bdev, struct bzc_mr *mr)
{
	u32 key;
	int err;

	err = bzc_key_reserve(bdev, &key);
	if (err)
		return err;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	bzc_key_publish(bdev, key, mr);
	return 0;
}

struct ib_mr *bzc_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
			      u64 iova, int access, struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibpd->device);
	bool implicit = bzc_mr_implicit(start, length, iova, access);
	struct bzc_mr *mr;
	int err;

	if (!bzc_mr_reg_access_ok(access))
		return ERR_PTR(-EOPNOTSUPP);
	if (!length || (length > bdev->attr.max_mr_size && !implicit))
		return ERR_PTR(-EINVAL);
	/* No driver request is defined; a newer one must be all zero. */
	if (udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return ERR_PTR(-EOPNOTSUPP);
	err = bzc_obj_get(bdev, &bdev->num_mr, bdev->attr.max_mr, "MR");
	if (err)
		return ERR_PTR(err);

	mr = bzc_mr_alloc(GFP_KERNEL_ACCOUNT);
	if (!mr) {
		bzc_obj_put(&bdev->num_mr);
		return ERR_PTR(-ENOMEM);
	}

	if (access & IB_ACCESS_ON_DEMAND) {
		/* Nothing pinned: pages are looked up when touched. */
		bzc_mr_set_range(mr, iova, length, access);
		err = bzc_odp_init(bdev, mr, start, implicit);
		if (err)
			goto err_free;
		err = bzc_mr_assign_key(bdev, mr);
		if (err)
			goto err_odp;
		return &mr->ibmr;
	}

	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		err = PTR_ERR(mr->umem);
		goto err_free;
	}
	err = bzc_mr_collect_pages(mr);
	if (err)
		goto err_release;

	mr->page_off = ib_umem_offset(mr->umem);
	bzc_mr_set_range(mr, iova, length, access);
	err = bzc_mr_assign_key(bdev, mr);
	if (err)
		goto err_pages;
	return &mr->ibmr;

err_odp:
	bzc_odp_release(mr);
	goto err_free;
err_pages:
	kvfree(mr->pages);
err_release:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	bzc_obj_put(&bdev->num_mr);
	return ERR_PTR(err);
}

/*
 * Take `mr` out of the key table unless windows are bound to it (IBA: an
 * MR with bound windows cannot be deregistered). Binding counts num_mw
 * with the table locked, so no bind can slip in after the check. Only
 * `mr` itself is erased: after a rereg its index may name another MR.
 */
static int bzc_mr_unpublish(struct bzc_dev *bdev, struct bzc_mr *mr)
{
	xa_lock(&bdev->mr_xa);
	if (atomic_read(&mr->num_mw)) {
		xa_unlock(&bdev->mr_xa);
		return -EBUSY;
	}
	__xa_cmpxchg(&bdev->mr_xa, mr->ibmr.lkey >> 8, mr, NULL, 0);
	xa_unlock(&bdev->mr_xa);
	return 0;
}

static void bzc_mr_destroy(struct bzc_mr *mr)
{
	/* Wait for the data path to let go. */
	bzc_mr_put(mr);
	wait_for_completion(&mr->released);

	/* A device memory MR's pages are the device memory's. */
	if (mr->dm)
		bzc_dm_put(mr->dm);
	else
		kvfree(mr->pages);
	if (mr->dmabuf)
		bzc_dmabuf_mr_release(mr);
	bzc_fr_free(mr->fr);
	bzc_odp_release(mr);
	ib_umem_release(mr->umem);
	kfree(mr);
}

int bzc_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct bzc_mr *mr = to_bmr(ibmr);
	int err;

	err = bzc_mr_unpublish(to_bdev(ibmr->device), mr);
	if (err)
		return err;
	/* A kernel PD's DMA MR (bzc_get_dma_mr()) is not counted. */
	if (!bzc_mr_is_kernel(mr))
		bzc_obj_put(&to_bdev(ibmr->device)->num_mr);
	bzc_mr_destroy(mr);
	return 0;
}

/*
 * Change the access rights and PD of `mr` in place, unless windows are
 * bound to it (IBA). Checked and changed with mr_xa locked, as
 * bzc_mw_bind() checks the MR and counts its windows, so no bind falls
 * between the check and the change. The PD is set here, not only by the
 * core after rereg returns, for the same reason.
 */
static int bzc_mr_change(struct bzc_dev *bdev, struct bzc_mr *mr, int access,
			 struct ib_pd *pd)
{
	xa_lock(&bdev->mr_xa);
	if (atomic_read(&mr->num_mw)) {
		xa_unlock(&bdev->mr_xa);
		return -EBUSY;
	}
	WRITE_ONCE(mr->access, access);
	WRITE_ONCE(mr->ibmr.pd, pd);
	xa_unlock(&bdev->mr_xa);
	return 0;
}

/*
 * ibv_rereg_mr. Access and PD change in place (bzc_mr_change()); the data
 * path reads them once per lookup, so an operation already under way
 * finishes with the old ones. A new translation, or write rights on
 * pages pinned read-only, needs new pages: that is a new MR with new
 * keys, which the core puts in place of the old one and then deregisters
 * it, waiting for its in-flight users. Either way windows bound to the
 * MR make it fail with EBUSY, checked under the lock binds take.
 */
struct ib_mr *bzc_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				u64 length, u64 iova, int access,
				struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibmr->device);
	struct bzc_mr *mr = to_bmr(ibmr);
	struct ib_mr *new;

	if (flags & ~(IB_MR_REREG_TRANS | IB_MR_REREG_PD | IB_MR_REREG_ACCESS))
		return ERR_PTR(-EOPNOTSUPP);
	if (!(flags & IB_MR_REREG_ACCESS))
		access = mr->access;
	if (!bzc_mr_reg_access_ok(access))
		return ERR_PTR(-EOPNOTSUPP);
	if (udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return ERR_PTR(-EOPNOTSUPP);

	/*
	 * In place unless the pages must change: a new translation, ODP
	 * turned on or off, or write rights on pages pinned read-only. An
	 * ODP MR looks its pages up with the rights of each access.
	 */
	if (!(flags & IB_MR_REREG_TRANS) &&
	    !((access ^ mr->access) & IB_ACCESS_ON_DEMAND) &&
	    (mr->odp || mr->umem->writable || !ib_access_writable(access))) {
		int err = bzc_mr_change(bdev, mr, access, ibpd);

		return err ? ERR_PTR(err) : NULL;
	}

	if (!(flags & IB_MR_REREG_TRANS)) {
		start = mr->odp ? mr->odp->uaddr : mr->umem->address;
		length = mr->length;
		iova = mr->iova;
	}
	new = bzc_reg_user_mr(ibpd, start, length, iova, access, udata);
	if (IS_ERR(new))
		return new;
	/* The old keys stop resolving now, unless a window is bound. */
	if (bzc_mr_unpublish(bdev, mr)) {
		bzc_mr_unpublish(bdev, to_bmr(new));
		bzc_obj_put(&bdev->num_mr);
		bzc_mr_destroy(to_bmr(new));
		return ERR_PTR(-EBUSY);
	}
	return new;
}

/* Find a registered MR by lkey, with a reference. */
struct bzc_mr *bzc_mr_get(struct bzc_dev *bdev, u32 key)
{
	struct bzc_mr *mr;

	/* The data path runs in process context only: no irq-safe locks. */
	xa_lock(&bdev->mr_xa);
	mr = xa_load(&bdev->mr_xa, key >> 8);
	/* A cached MR dies with its range when the process remaps it. */
	if (mr && (xa_pointer_tag(mr) || !bzc_mr_key_ok(mr, key) ||
		   (mr->ent && !bzc_mrc_ent_valid(mr->ent)) ||
		   !refcount_inc_not_zero(&mr->refcnt)))
		mr = NULL;
	xa_unlock(&bdev->mr_xa);
	return mr;
}

/*
 * Resolve a local access to [addr, addr + len) by `lkey` in `pd` with
 * `access` (IB_ACCESS_LOCAL_WRITE or 0): the MR with a reference, or NULL
 * when the key, PD, rights or bounds do not allow it.
 */
struct bzc_mr *bzc_lkey_get(struct bzc_dev *bdev, u32 lkey, struct ib_pd *pd,
			    u64 addr, u64 len, int access)
{
	struct bzc_mr *mr = bzc_mr_get(bdev, lkey);

	if (!mr)
		return NULL;
	if (mr->ibmr.pd != pd ||
	    (READ_ONCE(mr->access) & access) != access ||
	    addr < mr->iova || len > mr->length ||
	    addr - mr->iova > mr->length - len ||
	    (bzc_mr_is_kernel(mr) && !bzc_kva_range_ok(addr, len))) {
		bzc_mr_put(mr);
		return NULL;
	}
	return mr;
}

/* Does `mr` (its key table entry) let `rkey` in `pd` have `access`? */
static bool bzc_mr_grants(struct bzc_mr *mr, u32 rkey, struct ib_pd *pd,
			  int access)
{
	return bzc_mr_key_ok(mr, rkey) && mr->ibmr.pd == pd &&
	       (!mr->ent || bzc_mrc_ent_valid(mr->ent)) &&
	       (READ_ONCE(mr->access) & access) == access;
}

/*
 * Resolve a remote access to [addr, addr + len) by `rkey` arriving at `qp`
 * with `access` (one IB_ACCESS_REMOTE_* right): through an MR of `pd`, or
 * through a window bound to one. `pd` is the QP's, or for an XRC target
 * QP, which has none, the PD of the XRC SRQ the message names. Returns
 * the MR with a reference and the offset of addr in it, or NULL when the
 * key, PD, QP, rights or bounds do not allow it.
 */
struct bzc_mr *bzc_rkey_get(struct bzc_dev *bdev, u32 rkey, struct bzc_qp *qp,
			    struct ib_pd *pd, u64 addr, u64 len, int access,
			    u64 *off)
{
	struct bzc_mr *mr;
	void *entry;

	xa_lock(&bdev->mr_xa);
	entry = xa_load(&bdev->mr_xa, rkey >> 8);
	if (!entry) {
		mr = NULL;
	} else if (xa_pointer_tag(entry) == BZC_KEY_TAG_MW) {
		mr = bzc_mw_resolve(xa_untag_pointer(entry), rkey, qp, pd,
				    addr, len, access, off);
	} else {
		mr = entry;
		if (!bzc_mr_grants(mr, rkey, pd, access) ||
		    addr < mr->iova || len > mr->length ||
		    addr - mr->iova > mr->length - len ||
		    !refcount_inc_not_zero(&mr->refcnt))
			mr = NULL;
		else
			*off = addr - mr->iova;
	}
	xa_unlock(&bdev->mr_xa);
	return mr;
}

/**
 * bzc_rkey_get_region() - resolve an rkey that names a whole MR
 * @bdev: the device the access arrives at
 * @rkey: the key
 * @qp: the QP the access arrives at
 * @access: the rights the access needs (IB_ACCESS_FLUSH_*)
 *
 * For a FLUSH of the memory region level, which names no range. Only an
 * MR's own rkey does: a window names a range, and grants no FLUSH right.
 *
 * Return: the MR with a reference, or NULL when the key, PD or rights do
 * not allow the access.
 */
struct bzc_mr *bzc_rkey_get_region(struct bzc_dev *bdev, u32 rkey,
				   struct bzc_qp *qp, int access)
{
	struct bzc_mr *mr = NULL;
	void *entry;

	xa_lock(&bdev->mr_xa);
	entry = xa_load(&bdev->mr_xa, rkey >> 8);
	if (entry && xa_pointer_tag(entry) != BZC_KEY_TAG_MW &&
	    bzc_mr_grants(entry, rkey, qp->ibqp.pd, access) &&
	    refcount_inc_not_zero(&((struct bzc_mr *)entry)->refcnt))
		mr = entry;
	xa_unlock(&bdev->mr_xa);
	return mr;
}

void bzc_mr_put(struct bzc_mr *mr)
{
	if (refcount_dec_and_test(&mr->refcnt)) {
		complete(&mr->released);
	} else if (mr->fr) {
		/* A REG_MR may wait for the last access (bzc_fr_register()). */
		smp_mb();
		wake_up_var(&mr->refcnt);
	}
}
