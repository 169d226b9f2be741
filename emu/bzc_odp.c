// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: on-demand paging (ODP) MRs.
 *
 * An MR registered with IB_ACCESS_ON_DEMAND pins nothing. Its pages are
 * looked up in the process's page tables (hmm_range_fault()) when the
 * device touches them, kept in a table by user page number, and dropped
 * from it when the kernel changes the mapping (an interval MMU notifier:
 * munmap, madvise(MADV_DONTNEED), fork's write protection, copy-on-write,
 * migration, reclaim, exit). The tables' lock is held for writing by an
 * invalidation while it drops entries and for reading by the device while
 * it copies to or from their pages, so once the invalidation returns no
 * copy uses an old page any more: the page stays the process's for as
 * long as the device touches it, as the notifier contract requires,
 * without a reference.
 *
 * One reader-writer lock for all ODP MRs (bzc_odp_rwlock): copies, the
 * bulk workers' included, run side by side, a copy between two ODP MRs
 * takes one lock, not two in some order, and an invalidation waits for
 * the copies in progress, each of which holds it for one run of pages
 * (BZC_ODP_RUN bytes) at most.
 *
 * Why hmm_range_fault() with our own notifier rather than the core's
 * ib_umem_odp helpers: the helpers DMA-map every page for a DMA device
 * and keep a per-page DMA address array sized by the whole range, which
 * for an implicit MR (the whole address space) needs the core's child-MR
 * machinery; a software device wants struct pages, for any range, and a
 * lock it may hold across a page copy. The same calls exist unchanged in
 * Linux 6.1 and 6.12.
 *
 * Faults sleep (mmap_lock, page allocation), so they happen only in
 * process or worker context, never with a spinlock held: a doorbell
 * leaves WQEs to the QP's worker while any ODP MR exists
 * (bzc_odp_active()).
 */
#include <linux/hmm.h>
#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/highmem.h>

#include "bzc.h"

/* Pages one hmm_range_fault() call resolves. */
#define BZC_ODP_FAULT_PAGES	256

/* Times a fault is tried again when invalidations race it. */
#define BZC_ODP_FAULT_ROUNDS	64

/* A table entry's tag: the page was mapped writable when it was taken. */
#define BZC_ODP_WRITABLE	1

/* The lock of every ODP MR's page table, for reading by copies. */
static DEFINE_RWLOCK(bzc_odp_rwlock);

/* ODP MRs on all bzc devices: while any exists, doorbells defer. */
static atomic_t bzc_odp_mrs = ATOMIC_INIT(0);

/**
 * bzc_odp_active() - do ODP MRs exist on any bzc device
 *
 * The local transport runs the responder in the requester's context, so a
 * doorbell may reach any process's ODP MR; it runs no WQE itself while
 * this is true, and the QP's worker, which may fault, runs them.
 *
 * Return: true while at least one ODP MR is registered.
 */
bool bzc_odp_active(void)
{
	return atomic_read(&bzc_odp_mrs) != 0;
}

/* Count one table entry replaced by another (either may be NULL). */
static void bzc_odp_count(struct bzc_odp *odp, void *old, void *new)
{
	long present = !!new - !!old;
	long writable = (new && xa_pointer_tag(new) == BZC_ODP_WRITABLE) -
			(old && xa_pointer_tag(old) == BZC_ODP_WRITABLE);

	WRITE_ONCE(odp->present, odp->present + present);
	WRITE_ONCE(odp->writable, odp->writable + writable);
}

/*
 * Is every page of the MR in the table (writable, for a write)? Then no
 * access needs a fault or a walk of the table to find out: a warm MR's
 * cost per request. Unlocked, so only a hint, as bzc_odp_present() is.
 */
static bool bzc_odp_all_present(struct bzc_odp *odp, bool write)
{
	unsigned long pages = (odp->end - odp->start) >> PAGE_SHIFT;

	return (write ? READ_ONCE(odp->writable) :
			READ_ONCE(odp->present)) == pages;
}

static bool bzc_odp_invalidate(struct mmu_interval_notifier *mni,
			       const struct mmu_notifier_range *range,
			       unsigned long cur_seq)
{
	struct bzc_odp *odp = container_of(mni, struct bzc_odp, notifier);
	XA_STATE(xas, &odp->pages, 0);
	unsigned long last;
	void *entry;

	xas_set(&xas, max(range->start, odp->start) >> PAGE_SHIFT);
	last = (min(range->end, odp->end) - 1) >> PAGE_SHIFT;

	/*
	 * A spinning lock, held by a copy for one run of pages at most:
	 * taken in non-blockable invalidations too (the OOM reaper).
	 */
	write_lock(&bzc_odp_rwlock);
	mmu_interval_set_seq(mni, cur_seq);
	xas_lock(&xas);
	xas_for_each(&xas, entry, last) {
		xas_store(&xas, NULL);
		bzc_odp_count(odp, entry, NULL);
	}
	xas_unlock(&xas);
	write_unlock(&bzc_odp_rwlock);
	bzc_count(odp->bdev, BZC_CNT_ODP_INVALIDATIONS, 1);
	return true;
}

static const struct mmu_interval_notifier_ops bzc_odp_ops = {
	.invalidate = bzc_odp_invalidate,
};

/**
 * bzc_odp_init() - make a registered-to-be MR an ODP MR
 * @bdev: the MR's device (its counters count the faults and invalidations)
 * @mr: the MR, its range set (bzc_mr_set_range())
 * @start: the user address of its first byte
 * @implicit: the whole address space (start 0, length U64_MAX, iova 0)
 *
 * Watches [@start, @start + length) of the calling process's address space
 * (for @implicit, all of it) for changes; nothing is looked up or pinned.
 *
 * Return: 0, -EINVAL for a range that wraps or leaves user space, or
 * -ENOMEM.
 */
int bzc_odp_init(struct bzc_dev *bdev, struct bzc_mr *mr, u64 start,
		 bool implicit)
{
	struct bzc_odp *odp;
	u64 end;
	int err;

	if (implicit) {
		start = 0;
		end = TASK_SIZE;
	} else if (check_add_overflow(start, mr->length, &end) ||
		   end > TASK_SIZE) {
		return -EINVAL;
	}

	odp = kzalloc(sizeof(*odp), GFP_KERNEL_ACCOUNT);
	if (!odp)
		return -ENOMEM;
	xa_init(&odp->pages);
	odp->bdev = bdev;
	odp->uaddr = start;
	odp->start = round_down(start, PAGE_SIZE);
	odp->end = round_up(end, PAGE_SIZE);
	odp->implicit = implicit;
	err = mmu_interval_notifier_insert(&odp->notifier, current->mm,
					   odp->start, odp->end - odp->start,
					   &bzc_odp_ops);
	if (err) {
		kfree(odp);
		return err;
	}
	mr->odp = odp;
	mr->page_off = offset_in_page(start);
	atomic_inc(&bzc_odp_mrs);
	return 0;
}

/**
 * bzc_odp_release() - stop watching an ODP MR's range and free its table
 * @mr: the ODP MR, no longer used by the data path
 */
void bzc_odp_release(struct bzc_mr *mr)
{
	struct bzc_odp *odp = mr->odp;

	if (!odp)
		return;
	/* Waits for an invalidation that is running. */
	mmu_interval_notifier_remove(&odp->notifier);
	xa_destroy(&odp->pages);
	kfree(odp);
	mr->odp = NULL;
	atomic_dec(&bzc_odp_mrs);
}

/* Store what one hmm_range_fault() found, unless invalidated since. */
static int bzc_odp_store(struct bzc_odp *odp, unsigned long first,
			 const unsigned long *pfns, unsigned long n,
			 unsigned long seq)
{
	unsigned long i, stored = 0;

	for (i = 0; i < n; i++) {
		XA_STATE(xas, &odp->pages, first + i);
		void *entry, *old;

		if (!(pfns[i] & HMM_PFN_VALID))
			continue;	/* not present (no fault asked) */
		entry = xa_tag_pointer(hmm_pfn_to_page(pfns[i]),
				       pfns[i] & HMM_PFN_WRITE ?
				       BZC_ODP_WRITABLE : 0);
		do {
			/*
			 * Checked with the table locked, right before the
			 * store: an invalidation either comes after (and
			 * drops the entry) or made this fail. The xarray's
			 * own lock orders this store with other faults'.
			 */
			read_lock(&bzc_odp_rwlock);
			if (mmu_interval_read_retry(&odp->notifier, seq)) {
				read_unlock(&bzc_odp_rwlock);
				/* Frees a node it allocated, if any. */
				xas_nomem(&xas, GFP_KERNEL_ACCOUNT);
				return -EAGAIN;
			}
			xas_lock(&xas);
			old = xas_store(&xas, entry);
			if (!xas_error(&xas))
				bzc_odp_count(odp, old, entry);
			xas_unlock(&xas);
			read_unlock(&bzc_odp_rwlock);
		} while (xas_nomem(&xas, GFP_KERNEL_ACCOUNT));
		if (xas_error(&xas))
			return xas_error(&xas);
		stored++;
	}
	if (stored) {
		bzc_count(odp->bdev, BZC_CNT_ODP_FAULTS, 1);
		bzc_count(odp->bdev, BZC_CNT_ODP_FAULT_PAGES, stored);
	}
	return 0;
}

/*
 * Are pages first..first+n-1 in the table (writable, for a write)? Then
 * the access needs no hmm_range_fault(): the walk for a range of an MR
 * not wholly present (bzc_odp_all_present() answers for one that is).
 * An invalidation right after is harmless; the copy looks each page up
 * again under the table lock and faults one that went.
 */
static bool bzc_odp_present(struct bzc_odp *odp, unsigned long first,
			    unsigned long n, bool write)
{
	XA_STATE(xas, &odp->pages, first);
	unsigned long next = first;
	void *entry;

	rcu_read_lock();
	xas_for_each(&xas, entry, first + n - 1) {
		if (xas_retry(&xas, entry))
			continue;
		if (xas.xa_index != next ||
		    (write && xa_pointer_tag(entry) != BZC_ODP_WRITABLE))
			break;
		next++;
	}
	rcu_read_unlock();
	return next == first + n;
}

/*
 * Resolve n pages from user address addr (page aligned) into the table.
 * An invalidation between hmm_range_fault() and the store (the fault's
 * own copy-on-write or zero-page replacement counts) sends it round
 * again. The bound is on rounds, not on time: on a starved machine each
 * round is slower, not more contended, and a wall-clock limit there
 * turned a slow fault into an error completion.
 */
static int bzc_odp_fault_pages(struct bzc_odp *odp, struct mm_struct *mm,
			       unsigned long addr, unsigned long n,
			       unsigned long *pfns, unsigned long flags)
{
	struct hmm_range range = {
		.notifier = &odp->notifier,
		.start = addr,
		.end = addr + n * PAGE_SIZE,
		.hmm_pfns = pfns,
		.default_flags = flags,
	};
	unsigned int round;
	int err;

	for (round = 0; round < BZC_ODP_FAULT_ROUNDS; round++) {
		if (round)
			cond_resched();
		range.notifier_seq = mmu_interval_read_begin(&odp->notifier);
		mmap_read_lock(mm);
		err = hmm_range_fault(&range);
		mmap_read_unlock(mm);
		if (err == -EBUSY)
			continue;
		if (err)
			return err;
		err = bzc_odp_store(odp, addr >> PAGE_SHIFT, pfns, n,
				    range.notifier_seq);
		if (err != -EAGAIN)
			return err;
	}
	return -EBUSY;
}

/**
 * bzc_odp_fault() - make an ODP MR's pages present for an access
 * @mr: the ODP MR
 * @off: the first byte, from the MR's start
 * @len: the bytes (within the MR: the caller checked the bounds)
 * @write: the access writes: the pages must be mapped writable
 *	   (copy-on-write broken, as a CPU write fault would)
 * @fault: fault pages in; false takes only what is mapped already
 *	   (PREFETCH_NO_FAULT)
 *
 * Sleeps (mmap_lock, page faults): process or worker context only, no
 * spinlock held. The pages may be invalidated again right after; the copy
 * looks each one up under the table lock (bzc_odp_page()).
 *
 * Return: 0; -EFAULT for an address with no mapping (or a process gone),
 * -EPERM for a write to a mapping without write permission, -EBUSY when
 * invalidations kept racing the fault, -ENOMEM, or -EINTR when the
 * calling process (a prefetch's) was killed.
 */
int bzc_odp_fault(struct bzc_mr *mr, u64 off, u64 len, bool write,
		  bool fault)
{
	struct bzc_odp *odp = mr->odp;
	struct mm_struct *mm = odp->notifier.mm;
	unsigned long flags = 0, *pfns;
	u64 va, addr, end;
	int err = 0;

	if (!len)
		return 0;
	/* The bounds were checked against the MR; an implicit one's here. */
	va = odp->uaddr + off;
	if (va < odp->start || va > odp->end || len > odp->end - va)
		return -EFAULT;
	if (bzc_odp_all_present(odp, write))
		return 0;
	addr = round_down(va, PAGE_SIZE);
	end = round_up(va + len, PAGE_SIZE);

	if (fault)
		flags = HMM_PFN_REQ_FAULT | (write ? HMM_PFN_REQ_WRITE : 0);
	pfns = kmalloc_array(min_t(u64, (end - addr) >> PAGE_SHIFT,
				   BZC_ODP_FAULT_PAGES),
			     sizeof(*pfns), GFP_KERNEL | __GFP_NOWARN);
	if (!pfns)
		return -ENOMEM;
	if (!mmget_not_zero(mm)) {
		kfree(pfns);
		return -EFAULT;
	}
	while (addr < end) {
		unsigned long n = min_t(u64, (end - addr) >> PAGE_SHIFT,
					BZC_ODP_FAULT_PAGES);

		if (!bzc_odp_present(odp, addr >> PAGE_SHIFT, n, write)) {
			err = bzc_odp_fault_pages(odp, mm, addr, n, pfns,
						  flags);
			if (err)
				break;
		}
		addr += n * PAGE_SIZE;
		/* A long prefetch in a syscall ends with its process. */
		if (fatal_signal_pending(current)) {
			err = -EINTR;
			break;
		}
		cond_resched();
	}
	mmput(mm);
	kfree(pfns);
	return err;
}

/**
 * bzc_odp_page() - the page of an ODP MR's byte, if present
 * @mr: the ODP MR
 * @off: the byte, from the MR's start
 * @write: the access writes: only a page mapped writable will do
 *
 * Called with the tables locked (bzc_odp_lock()); the page stays the
 * process's until they are unlocked.
 *
 * Return: the page, or NULL when it must be faulted in first.
 */
struct page *bzc_odp_page(struct bzc_mr *mr, u64 off, bool write)
{
	void *entry = xa_load(&mr->odp->pages,
			      (mr->odp->uaddr + off) >> PAGE_SHIFT);

	if (!entry || (write && xa_pointer_tag(entry) != BZC_ODP_WRITABLE))
		return NULL;
	return xa_untag_pointer(entry);
}

/**
 * bzc_odp_pages() - the pages of a run of an ODP MR, in one table walk
 * @mr: the ODP MR
 * @off: a byte of the first page, from the MR's start
 * @n: pages wanted, from that one on
 * @write: the access writes: only pages mapped writable will do
 * @pages: where the pages go
 *
 * As bzc_odp_page() for @n pages in a row, one xarray walk instead of a
 * lookup from the root for each: a warm copy's cost per page. Called
 * with the tables locked (bzc_odp_lock()); the pages stay the process's
 * until they are unlocked.
 *
 * Return: how many pages from the first on are present (0 when the
 * first must be faulted in).
 */
unsigned int bzc_odp_pages(struct bzc_mr *mr, u64 off, unsigned int n,
			   bool write, struct page **pages)
{
	unsigned long first = (mr->odp->uaddr + off) >> PAGE_SHIFT;
	XA_STATE(xas, &mr->odp->pages, first);
	unsigned int got = 0;
	void *entry;

	/*
	 * Slot by slot with xas_next(), which stays in the leaf node: the
	 * pages of a run are neighbours, and a search (xas_find()) per
	 * entry cost a tenth of a warm copy's time in a TCG guest.
	 */
	rcu_read_lock();
	entry = xas_load(&xas);
	while (got < n) {
		if (xas_retry(&xas, entry)) {
			entry = xas_load(&xas);
			continue;
		}
		if (!entry ||
		    (write && xa_pointer_tag(entry) != BZC_ODP_WRITABLE))
			break;
		pages[got++] = xa_untag_pointer(entry);
		if (got < n)
			entry = xas_next(&xas);
	}
	rcu_read_unlock();
	return got;
}

/**
 * bzc_odp_lock() - lock the ODP MRs' page tables for a copy
 *
 * For reading: other copies go on, invalidations of ODP MRs wait until
 * bzc_odp_unlock(), so hold it for one run of pages (BZC_ODP_RUN bytes)
 * at most, and do not take it again before that. The pages that
 * bzc_odp_page() returns meanwhile stay the process's.
 */
void bzc_odp_lock(void)
{
	read_lock(&bzc_odp_rwlock);
}

/**
 * bzc_odp_unlock() - undo bzc_odp_lock()
 */
void bzc_odp_unlock(void)
{
	read_unlock(&bzc_odp_rwlock);
}

/**
 * bzc_advise_mr() - ibv_advise_mr(): prefetch ranges of ODP MRs
 * @ibpd: the PD the lkeys must belong to
 * @advice: PREFETCH (read), PREFETCH_WRITE (write: copy-on-write broken)
 *	    or PREFETCH_NO_FAULT (take what is mapped already, fault nothing)
 * @flags: IB_UVERBS_ADVISE_MR_FLAG_FLUSH: report a failed prefetch
 * @sg_list: (lkey, addr, length) from the process, not trusted
 * @num_sge: entries in @sg_list (the core checked it is at least 1)
 * @attrs: unused
 *
 * Every entry is checked first (an ODP MR of @ibpd under that lkey,
 * covering the range, with local write rights for PREFETCH_WRITE), then
 * prefetched in order, synchronously either way: without FLUSH the
 * device may prefetch later or not at all, and a failure is not reported.
 *
 * Return: 0; -EOPNOTSUPP for an unknown advice, -ENOENT for an entry
 * that names no such MR or range; with FLUSH, a failed fault's error
 * (-EFAULT for an unmapped range, -EPERM for a write to a read-only one).
 */
int bzc_advise_mr(struct ib_pd *ibpd, enum ib_uverbs_advise_mr_advice advice,
		  u32 flags, struct ib_sge *sg_list, u32 num_sge,
		  struct uverbs_attr_bundle *attrs)
{
	struct bzc_dev *bdev = to_bdev(ibpd->device);
	bool write = advice == IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	bool fault = advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT;
	int access = write ? IB_ACCESS_LOCAL_WRITE : 0;
	struct bzc_mr *mr;
	u32 i, pass;
	u64 off;
	int err;

	if (advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return -EOPNOTSUPP;
	if (flags & ~IB_UVERBS_ADVISE_MR_FLAG_FLUSH)
		return -EOPNOTSUPP;

	/* Pass 0 checks every entry, pass 1 prefetches. */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < num_sge; i++) {
			mr = bzc_lkey_get(bdev, sg_list[i].lkey, ibpd,
					  sg_list[i].addr, sg_list[i].length,
					  access);
			if (!mr)
				return -ENOENT;
			if (!mr->odp) {
				bzc_mr_put(mr);
				return -ENOENT;
			}
			err = 0;
			off = sg_list[i].addr - mr->iova;
			if (pass)
				err = bzc_odp_fault(mr, off, sg_list[i].length,
						    write, fault);
			bzc_mr_put(mr);
			if (err && (flags & IB_UVERBS_ADVISE_MR_FLAG_FLUSH))
				return err;
		}
	}
	return 0;
}
