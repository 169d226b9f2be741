// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the MR cache of a user PD.
 *
 * Pinned ranges of the process's memory, found by virtual address, so that
 * bulk WQEs with lkey 0 and cached MRs (bzcdv_reg_mr_cached) skip pinning
 * when the range is already pinned. Each range has an interval MMU notifier:
 * when the process unmaps, remaps, frees or write-protects the memory (fork
 * does, for copy-on-write), the range leaves the cache and MRs made from it
 * stop resolving, so a hit always names the pages the process sees now.
 *
 * The cache keeps at most mr_cache_max_mb per PD pinned (and the process's
 * RLIMIT_MEMLOCK applies to every pin); ranges no transfer uses are evicted
 * least recently used first. A range that cannot be kept is still used for
 * the transfer or MR that pinned it, then unpinned.
 *
 * Lifetime: a range is referenced by the cache while cached and by each
 * user. The notifier callback must not sleep, so it only unlinks the range;
 * a work item drops the cache's reference, and whoever drops the last one
 * removes the notifier and unpins.
 */
#include <linux/interval_tree.h>
#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/mm.h>

#include "bzc.h"
#include "bzc_compat.h"

unsigned int bzc_mr_cache_max_mb = 1024;
module_param_named(mr_cache_max_mb, bzc_mr_cache_max_mb, uint, 0644);
MODULE_PARM_DESC(mr_cache_max_mb,
		 "MiB one PD's MR cache keeps pinned (0: no cache, lkey 0 is refused)");

/* Pins racing with invalidations are retried this often, then -EAGAIN. */
#define BZC_MRC_PIN_TRIES 4

struct bzc_mr_cache {
	refcount_t refcnt;		/* the PD + one per range */
	struct mm_struct *mm;		/* the PD's process, mmgrab'ed */
	unsigned long lock_limit;	/* RLIMIT_MEMLOCK in pages, at creation */
	spinlock_t lock;		/* tree, lru, stats; notifier-safe */
	struct rb_root_cached tree;	/* cached ranges by address */
	struct list_head lru;		/* cached ranges, least recent first */
	struct bzc_mr_cache_stats st;
};

struct bzc_mrc_ent {
	struct mmu_interval_notifier mni;
	struct interval_tree_node it;	/* [start, last], whole pages */
	struct list_head lru;
	struct bzc_mr_cache *cache;	/* referenced until unpinned */
	struct kref ref;
	struct work_struct drop_work;	/* drops the cache's reference */
	struct page **pages;
	unsigned long npages;
	bool cached;
	bool invalid;			/* the mapping changed since the pin */
};

static u64 bzc_mrc_max_bytes(void)
{
	return (u64)READ_ONCE(bzc_mr_cache_max_mb) << 20;
}

int bzc_mrc_create(struct bzc_pd *pd)
{
	struct bzc_mr_cache *mrc;

	mrc = kzalloc(sizeof(*mrc), GFP_KERNEL);
	if (!mrc)
		return -ENOMEM;
	mrc->mm = current->mm;
	mmgrab(mrc->mm);
	mrc->lock_limit = capable(CAP_IPC_LOCK) ? ULONG_MAX :
			  rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	spin_lock_init(&mrc->lock);
	mrc->tree = RB_ROOT_CACHED;
	INIT_LIST_HEAD(&mrc->lru);
	refcount_set(&mrc->refcnt, 1);
	pd->mrc = mrc;
	return 0;
}

static void bzc_mrc_cache_put(struct bzc_mr_cache *mrc)
{
	if (refcount_dec_and_test(&mrc->refcnt)) {
		mmdrop(mrc->mm);
		kfree(mrc);
	}
}

static void bzc_mrc_release(struct kref *kref)
{
	struct bzc_mrc_ent *ent = container_of(kref, struct bzc_mrc_ent, ref);

	mmu_interval_notifier_remove(&ent->mni);
	unpin_user_pages_dirty_lock(ent->pages, ent->npages, true);
	atomic64_sub(ent->npages, &ent->cache->mm->pinned_vm);
	bzc_mrc_cache_put(ent->cache);
	kvfree(ent->pages);
	kfree(ent);
}

/* May sleep: the last reference unpins. */
void bzc_mrc_put(struct bzc_mrc_ent *ent)
{
	kref_put(&ent->ref, bzc_mrc_release);
}

static void bzc_mrc_drop_work(struct work_struct *work)
{
	bzc_mrc_put(container_of(work, struct bzc_mrc_ent, drop_work));
}

/* Take a range out of the cache (cache->lock held); its reference goes. */
static void bzc_mrc_unlink(struct bzc_mr_cache *mrc, struct bzc_mrc_ent *ent)
{
	interval_tree_remove(&ent->it, &mrc->tree);
	list_del(&ent->lru);
	ent->cached = false;
	mrc->st.pinned_bytes -= (u64)ent->npages << PAGE_SHIFT;
	mrc->st.entries--;
	queue_work(bzc_wq, &ent->drop_work);
}

void bzc_mrc_destroy(struct bzc_pd *pd)
{
	struct bzc_mr_cache *mrc = pd->mrc;
	struct bzc_mrc_ent *ent, *tmp;

	if (!mrc)
		return;
	spin_lock(&mrc->lock);
	list_for_each_entry_safe(ent, tmp, &mrc->lru, lru)
		bzc_mrc_unlink(mrc, ent);
	spin_unlock(&mrc->lock);
	/* Ranges still pinned (drop works, users) keep it alive. */
	bzc_mrc_cache_put(mrc);
	pd->mrc = NULL;
}

static bool bzc_mrc_invalidate(struct mmu_interval_notifier *mni,
			       const struct mmu_notifier_range *range,
			       unsigned long cur_seq)
{
	struct bzc_mrc_ent *ent = container_of(mni, struct bzc_mrc_ent, mni);
	struct bzc_mr_cache *mrc = ent->cache;

	/* The pages stay pinned (and safe to copy to) until the last user. */
	spin_lock(&mrc->lock);
	mmu_interval_set_seq(mni, cur_seq);
	WRITE_ONCE(ent->invalid, true);
	if (ent->cached) {
		mrc->st.invalidations++;
		bzc_mrc_unlink(mrc, ent);
	}
	spin_unlock(&mrc->lock);
	return true;
}

static const struct mmu_interval_notifier_ops bzc_mrc_ops = {
	.invalidate = bzc_mrc_invalidate,
};

static int bzc_mrc_pin_pages(struct bzc_mrc_ent *ent)
{
	unsigned long start = ent->it.start, done = 0;
	struct mm_struct *mm = ent->cache->mm;
	long ret = 0;

	/* From a worker too: the pages are the PD process's, not current's. */
	mmap_read_lock(mm);
	while (done < ent->npages) {
		ret = bzc_pin_user_pages_remote(mm,
						start + (done << PAGE_SHIFT),
						ent->npages - done,
						FOLL_WRITE | FOLL_LONGTERM,
						ent->pages + done);
		if (ret <= 0)
			break;
		done += ret;
	}
	mmap_read_unlock(mm);
	if (done == ent->npages)
		return 0;
	unpin_user_pages(ent->pages, done);
	return ret < 0 ? ret : -EFAULT;
}

/*
 * Is all of [start, last] mapped writable in `mm`? Checked before the page
 * array is allocated, so that a request over address space nothing backs
 * costs nothing; pinning still has the last word.
 */
static bool bzc_mrc_mapped(struct mm_struct *mm, unsigned long start,
			   unsigned long last)
{
	struct vm_area_struct *vma;
	bool ok = true;

	mmap_read_lock(mm);
	while (ok) {
		vma = vma_lookup(mm, start);
		ok = vma && (vma->vm_flags & VM_WRITE);
		if (!ok || vma->vm_end - 1 >= last)
			break;
		start = vma->vm_end;
	}
	mmap_read_unlock(mm);
	return ok;
}

/*
 * Pin [start, last] of the PD's process into a new, uncached range. The
 * limits come first: at most BZC_MAX_PIN_PAGES, then RLIMIT_MEMLOCK, then
 * memory that is mapped; only then is anything allocated.
 */
static struct bzc_mrc_ent *bzc_mrc_pin(struct bzc_mr_cache *mrc,
				       unsigned long start, unsigned long last)
{
	unsigned long seq, npages = (last - start + 1) >> PAGE_SHIFT;
	struct bzc_mrc_ent *ent;
	int err, tries;
	bool retry;

	if (npages > BZC_MAX_PIN_PAGES)
		return ERR_PTR(-ENOMEM);
	if (!mmget_not_zero(mrc->mm))
		return ERR_PTR(-EFAULT);	/* the process is exiting */
	if (atomic64_add_return(npages, &mrc->mm->pinned_vm) >
	    mrc->lock_limit) {
		err = -ENOMEM;
		goto err_unaccount;
	}
	if (!bzc_mrc_mapped(mrc->mm, start, last)) {
		err = -EFAULT;
		goto err_unaccount;
	}

	ent = kzalloc(sizeof(*ent), GFP_KERNEL_ACCOUNT);
	if (!ent) {
		err = -ENOMEM;
		goto err_unaccount;
	}
	ent->it.start = start;
	ent->it.last = last;
	ent->npages = npages;
	ent->cache = mrc;
	kref_init(&ent->ref);
	INIT_LIST_HEAD(&ent->lru);
	INIT_WORK(&ent->drop_work, bzc_mrc_drop_work);
	ent->pages = bzc_page_array_alloc(npages);
	if (!ent->pages) {
		err = -ENOMEM;
		goto err_free;
	}
	err = mmu_interval_notifier_insert(&ent->mni, mrc->mm, start,
					   last - start + 1, &bzc_mrc_ops);
	if (err)
		goto err_free;

	for (tries = 0; tries < BZC_MRC_PIN_TRIES; tries++) {
		seq = mmu_interval_read_begin(&ent->mni);
		err = bzc_mrc_pin_pages(ent);
		if (err)
			goto err_remove;
		spin_lock(&mrc->lock);
		retry = mmu_interval_read_retry(&ent->mni, seq);
		if (!retry)
			ent->invalid = false;
		spin_unlock(&mrc->lock);
		if (!retry)
			break;
		unpin_user_pages(ent->pages, ent->npages);
	}
	if (tries == BZC_MRC_PIN_TRIES) {
		err = -EAGAIN;
		goto err_remove;
	}
	mmput(mrc->mm);
	refcount_inc(&mrc->refcnt);
	return ent;

err_remove:
	mmu_interval_notifier_remove(&ent->mni);
err_free:
	kvfree(ent->pages);
	kfree(ent);
err_unaccount:
	atomic64_sub(npages, &mrc->mm->pinned_vm);
	mmput(mrc->mm);
	return ERR_PTR(err);
}

/* Make room for `bytes` by evicting unused ranges; cache->lock held. */
static bool bzc_mrc_make_room(struct bzc_mr_cache *mrc, u64 bytes)
{
	struct bzc_mrc_ent *ent, *tmp;
	u64 max = bzc_mrc_max_bytes();

	if (bytes > max)
		return false;
	list_for_each_entry_safe(ent, tmp, &mrc->lru, lru) {
		if (mrc->st.pinned_bytes + bytes <= max)
			break;
		/* Only the cache's reference left: nobody is using it. */
		if (kref_read(&ent->ref) == 1) {
			mrc->st.evictions++;
			bzc_mrc_unlink(mrc, ent);
		}
	}
	return mrc->st.pinned_bytes + bytes <= max;
}

/*
 * The pinned range holding [addr, addr + len) of the PD's process, with a
 * reference (bzc_mrc_put()). Pins on a miss, so it may sleep. *hit tells
 * whether the cache had it. ERR_PTR: -EOPNOTSUPP without a cache, -EINVAL
 * for an empty or wrapping range, -EFAULT for memory the process has not
 * mapped writable, -ENOMEM past RLIMIT_MEMLOCK or BZC_MAX_PIN_PAGES.
 */
struct bzc_mrc_ent *bzc_mrc_get(struct bzc_pd *pd, u64 addr, u64 len,
				bool *hit)
{
	struct bzc_mr_cache *mrc = pd->mrc;
	struct interval_tree_node *node;
	struct bzc_mrc_ent *ent;
	unsigned long start, last;

	*hit = false;
	if (!mrc || !bzc_mrc_max_bytes())
		return ERR_PTR(-EOPNOTSUPP);
	if (!len || addr + len < addr || addr + len > TASK_SIZE_MAX)
		return ERR_PTR(-EINVAL);
	start = addr & PAGE_MASK;
	last = PAGE_ALIGN(addr + len) - 1;

	spin_lock(&mrc->lock);
	for (node = interval_tree_iter_first(&mrc->tree, start, last); node;
	     node = interval_tree_iter_next(node, start, last)) {
		ent = container_of(node, struct bzc_mrc_ent, it);
		if (ent->it.start <= start && ent->it.last >= last) {
			kref_get(&ent->ref);
			list_move_tail(&ent->lru, &mrc->lru);
			mrc->st.hits++;
			spin_unlock(&mrc->lock);
			*hit = true;
			return ent;
		}
	}
	mrc->st.misses++;
	spin_unlock(&mrc->lock);

	ent = bzc_mrc_pin(mrc, start, last);
	if (IS_ERR(ent))
		return ent;

	spin_lock(&mrc->lock);
	if (!ent->invalid &&
	    bzc_mrc_make_room(mrc, (u64)ent->npages << PAGE_SHIFT)) {
		kref_get(&ent->ref);
		interval_tree_insert(&ent->it, &mrc->tree);
		list_add_tail(&ent->lru, &mrc->lru);
		ent->cached = true;
		mrc->st.pinned_bytes += (u64)ent->npages << PAGE_SHIFT;
		mrc->st.entries++;
	}
	spin_unlock(&mrc->lock);
	return ent;
}

/* Is the caller the process whose memory the PD's cache pins? */
bool bzc_mrc_owned_by_current(struct bzc_pd *pd)
{
	return !pd->mrc || pd->mrc->mm == current->mm;
}

bool bzc_mrc_ent_valid(const struct bzc_mrc_ent *ent)
{
	return !READ_ONCE(ent->invalid);
}

/* The page of the range that holds `addr` (which the range covers). */
struct page **bzc_mrc_ent_pages(const struct bzc_mrc_ent *ent, u64 addr)
{
	return ent->pages + (((addr & PAGE_MASK) - ent->it.start) >> PAGE_SHIFT);
}

void bzc_mrc_stats(struct bzc_pd *pd, struct bzc_mr_cache_stats *st)
{
	struct bzc_mr_cache *mrc = pd->mrc;

	memset(st, 0, sizeof(*st));
	if (!mrc)
		return;
	spin_lock(&mrc->lock);
	*st = mrc->st;
	spin_unlock(&mrc->lock);
}

/*
 * A cached MR: an MR of the PD over a cached range, found by key like any
 * other, so it serves standard WQEs and bulk WQEs alike. It stops resolving
 * when its range is invalidated.
 */
struct bzc_mr *bzc_cached_mr_create(struct bzc_pd *pd, u64 addr, u64 len,
				    int access, bool *hit)
{
	struct bzc_dev *bdev = to_bdev(pd->ibpd.device);
	struct bzc_mrc_ent *ent;
	struct bzc_mr *mr;
	int err;

	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		       IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC))
		return ERR_PTR(-EOPNOTSUPP);
	/* IBA 10.6.3.1: remote write or atomic needs local write. */
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_ACCESS_LOCAL_WRITE))
		return ERR_PTR(-EINVAL);

	mr = bzc_mr_alloc(GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	ent = bzc_mrc_get(pd, addr, len, hit);
	if (IS_ERR(ent)) {
		kfree(mr);
		return ERR_CAST(ent);
	}
	mr->ent = ent;
	mr->pages = bzc_mrc_ent_pages(ent, addr);
	mr->page_off = offset_in_page(addr);
	mr->npages = (PAGE_ALIGN(addr + len) - (addr & PAGE_MASK)) >> PAGE_SHIFT;
	bzc_mr_set_range(mr, addr, len, access);
	mr->ibmr.device = pd->ibpd.device;
	mr->ibmr.pd = &pd->ibpd;
	err = bzc_mr_assign_key(bdev, mr);
	if (err) {
		bzc_mrc_put(ent);
		kfree(mr);
		return ERR_PTR(err);
	}
	return mr;
}

void bzc_cached_mr_destroy(struct bzc_mr *mr)
{
	struct bzc_dev *bdev = to_bdev(mr->ibmr.device);

	xa_erase(&bdev->mr_xa, mr->ibmr.lkey >> 8);
	bzc_mr_put(mr);
	wait_for_completion(&mr->released);
	bzc_mrc_put(mr->ent);
	kfree(mr);
}
