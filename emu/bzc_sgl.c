// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: scatter-gather lists over MRs, and the device's one copy between
 * them, page by page (kmap_local_page() + bzc_copy_piece()), spread over
 * two workers when it is long.
 */
#include <linux/highmem.h>
#include <linux/sched.h>

#include "bzc_sgl.h"

/**
 * bzc_sgl_put() - drop the MR references of an SGL and empty it
 * @sgl: an SGL built by bzc_sgl_add() or bzc_sgl_from_sges()
 */
void bzc_sgl_put(struct bzc_sgl *sgl)
{
	u32 i;

	for (i = 0; i < sgl->n; i++)
		if (sgl->seg[i].mr)
			bzc_mr_put(sgl->seg[i].mr);
	sgl->n = 0;
}

/* Append one segment: an MR's range or, with no MR, pinned pages. */
static void bzc_sgl_push(struct bzc_sgl *sgl, struct bzc_mr *mr,
			 struct page **pages, u64 off, u64 len)
{
	struct bzc_seg *seg = &sgl->seg[sgl->n++];

	seg->mr = mr;
	seg->pages = pages;
	seg->off = off;
	seg->len = len;
	sgl->total += len;
}

/**
 * bzc_sgl_add() - append one checked (key, address, length) to an SGL
 * @sgl: the SGL, with room for one more segment
 * @bdev: the device whose key table resolves @key
 * @pd: the PD the MR (or window) must belong to; for an rkey NULL means
 *	@rqp's (an XRC target QP has none: the XRC SRQ's PD is given)
 * @rqp: for an rkey: the QP the access arrives at (bzc_rkey_get()); NULL
 *	 for an lkey
 * @key: the lkey or rkey
 * @addr: the first byte
 * @len: the length; 0 adds nothing and succeeds
 * @access: the IB_ACCESS_* rights the MR (or window) must grant
 *
 * The segment holds a reference on its MR until bzc_sgl_put(). The
 * pages of an ODP MR's range are faulted in (for writing if @access
 * writes), so this may sleep.
 *
 * Return: false when the key, PD, QP, rights or bounds do not match.
 */
bool bzc_sgl_add(struct bzc_sgl *sgl, struct bzc_dev *bdev, struct ib_pd *pd,
		 struct bzc_qp *rqp, u32 key, u64 addr, u64 len, int access)
{
	struct bzc_mr *mr;
	u64 off;

	if (!len)
		return true;
	if (rqp) {
		mr = bzc_rkey_get(bdev, key, rqp, pd ?: rqp->ibqp.pd, addr,
				  len, access, &off);
		if (!mr)
			return false;
	} else {
		mr = bzc_lkey_get(bdev, key, pd, addr, len, access);
		if (!mr)
			return false;
		off = addr - mr->iova;
	}
	/*
	 * An ODP MR's pages are looked up now, before anything happens:
	 * an address without a mapping (or a write to a read-only one)
	 * fails the access like a bad key.
	 */
	if (mr->odp &&
	    bzc_odp_fault(mr, off, len, access & (IB_ACCESS_LOCAL_WRITE |
						  IB_ACCESS_REMOTE_WRITE |
						  IB_ACCESS_REMOTE_ATOMIC),
			  true)) {
		bzc_mr_put(mr);
		return false;
	}
	bzc_sgl_push(sgl, mr, NULL, off, len);
	return true;
}

/**
 * bzc_sgl_add_pages() - append a range of pinned pages to an SGL
 * @sgl: the SGL, with room for one more segment
 * @pages: the pages, pinned by the caller until the SGL is put
 * @off: the range's first byte, from the start of pages[0]
 * @len: its length; 0 adds nothing
 *
 * No reference is taken: the caller keeps the pages (a bulk channel's MR
 * cache range) for as long as the SGL is in use.
 */
void bzc_sgl_add_pages(struct bzc_sgl *sgl, struct page **pages, u64 off,
		       u64 len)
{
	if (len)
		bzc_sgl_push(sgl, NULL, pages, off, len);
}

/**
 * bzc_sgl_from_sges() - resolve a WQE's SGE array against local keys
 * @sgl: the SGL to fill (emptied first)
 * @bdev: the device
 * @pd: the PD the lkeys must belong to
 * @sge: the SGEs, already copied into kernel memory
 * @num_sge: how many (at most BZC_MAX_SGE)
 * @access: the IB_ACCESS_* rights each MR must grant
 *
 * Return: false, with @sgl empty, when an SGE does not resolve.
 */
bool bzc_sgl_from_sges(struct bzc_sgl *sgl, struct bzc_dev *bdev,
		       struct ib_pd *pd, const struct bzc_sge *sge, u32 num_sge,
		       int access)
{
	u32 i;

	bzc_sgl_init(sgl);
	for (i = 0; i < num_sge; i++) {
		if (!bzc_sgl_add(sgl, bdev, pd, NULL, le32_to_cpu(sge[i].lkey),
				 le64_to_cpu(sge[i].addr),
				 le32_to_cpu(sge[i].length), access)) {
			bzc_sgl_put(sgl);
			return false;
		}
	}
	return true;
}

/* Map the current position; *len gets the contiguous bytes there. */
static void *bzc_cursor_map(struct bzc_cursor *c, size_t *len)
{
	const struct bzc_seg *seg;
	u64 byte;

	if (c->sgl->kbuf) {
		*len = c->sgl->total - c->pos;
		return (void *)c->sgl->kbuf + c->pos;
	}
	/* Skip exhausted segments. */
	while (c->pos == c->sgl->seg[c->i].len) {
		c->i++;
		c->pos = 0;
	}
	seg = &c->sgl->seg[c->i];
	if (!seg->mr) {
		byte = seg->off + c->pos;
		*len = min_t(u64, PAGE_SIZE - offset_in_page(byte),
			     seg->len - c->pos);
		return kmap_local_page(seg->pages[byte >> PAGE_SHIFT]) +
		       offset_in_page(byte);
	}
	if (bzc_mr_is_kernel(seg->mr))
		return bzc_kva_map(seg->off + c->pos, seg->len - c->pos, len);
	byte = seg->mr->page_off + seg->off + c->pos;
	*len = min_t(u64, PAGE_SIZE - offset_in_page(byte), seg->len - c->pos);
	return kmap_local_page(seg->mr->pages[byte >> PAGE_SHIFT]) +
	       offset_in_page(byte);
}

static void bzc_cursor_unmap(struct bzc_cursor *c, void *addr)
{
	if (!c->sgl->kbuf)
		kunmap_local(addr);
}

/* Skip exhausted segments: the cursor is at a byte that exists. */
static void bzc_cursor_settle(struct bzc_cursor *c)
{
	if (c->sgl->kbuf)
		return;
	while (c->pos == c->sgl->seg[c->i].len) {
		c->i++;
		c->pos = 0;
	}
}

/* The ODP MR under the cursor, or NULL. */
static struct bzc_mr *bzc_cursor_odp(struct bzc_cursor *c)
{
	struct bzc_mr *mr;

	if (c->sgl->kbuf)
		return NULL;
	bzc_cursor_settle(c);
	mr = c->sgl->seg[c->i].mr;
	return mr && mr->odp ? mr : NULL;
}

/*
 * Map the cursor's position in an ODP MR, with its table locked: NULL
 * when the page is not present (for a write: not writable).
 */
static void *bzc_cursor_map_odp(struct bzc_cursor *c, bool write, size_t *len)
{
	const struct bzc_seg *seg = &c->sgl->seg[c->i];
	u64 off = seg->off + c->pos;
	u64 byte = seg->mr->page_off + off;
	struct page *page = bzc_odp_page(seg->mr, off, write);

	if (!page)
		return NULL;
	*len = min_t(u64, PAGE_SIZE - offset_in_page(byte), seg->len - c->pos);
	return kmap_local_page(page) + offset_in_page(byte);
}

/* Fault in the cursor's page of an ODP MR. */
static int bzc_cursor_fault(struct bzc_cursor *c, bool write)
{
	const struct bzc_seg *seg = &c->sgl->seg[c->i];

	return bzc_odp_fault(seg->mr, seg->off + c->pos, 1, write, true);
}

/*
 * Copy a run of pieces (up to BZC_ODP_RUN bytes, and `len`) where one
 * side or both are in ODP MRs, their tables locked across the run so no
 * invalidation takes the pages meanwhile; the cursors advance. The run
 * ends early where either cursor enters another MR. A page that went away
 * since the SGL was built is faulted in again where the caller may sleep.
 * Returns the bytes copied, or 0 with *lost set to the side
 * (BZC_COPY_DST_LOST, BZC_COPY_SRC_LOST) whose page is not there and
 * cannot be made present (the process unmapped the range while the
 * transfer ran, or the caller may not sleep).
 */
static u64 bzc_copy_odp_run(struct bzc_cursor *dst, struct bzc_cursor *src,
			    u64 len, bool may_sleep, int *lost)
{
	struct bzc_mr *dmr = bzc_cursor_odp(dst), *smr = bzc_cursor_odp(src);
	u64 done = 0, n;
	size_t dlen, slen;
	void *d, *s;
	int err;

	len = min_t(u64, len, BZC_ODP_RUN);
	for (;;) {
		bzc_odp_lock();
		for (;;) {
			d = dmr ? bzc_cursor_map_odp(dst, true, &dlen) :
				  bzc_cursor_map(dst, &dlen);
			s = NULL;
			if (d)
				s = smr ? bzc_cursor_map_odp(src, false, &slen) :
					  bzc_cursor_map(src, &slen);
			if (!d || !s)
				break;
			n = min3((u64)dlen, (u64)slen, len - done);
			bzc_copy_piece(d, s, n);
			bzc_cursor_unmap(src, s);
			bzc_cursor_unmap(dst, d);
			dst->pos += n;
			src->pos += n;
			done += n;
			if (done == len || bzc_cursor_odp(dst) != dmr ||
			    bzc_cursor_odp(src) != smr)
				break;
		}
		if (d && !s)
			bzc_cursor_unmap(dst, d);
		bzc_odp_unlock();
		if (done)
			return done;

		/* Only where faults may sleep (bzc_odp_active()). */
		err = -EAGAIN;
		if (may_sleep)
			err = d ? bzc_cursor_fault(src, false) :
				  bzc_cursor_fault(dst, true);
		if (err) {
			*lost = d ? BZC_COPY_SRC_LOST : BZC_COPY_DST_LOST;
			return 0;
		}
	}
}

/*
 * Copy `len` bytes (both sides hold at least that much), page by page.
 * Stops at a page of an ODP MR that cannot be made present: returns its
 * side (BZC_COPY_*_LOST), the cursors left there; 0 when all went.
 */
static int bzc_copy_pages(struct bzc_cursor *dst, struct bzc_cursor *src,
			  u64 len, bool may_sleep)
{
	int lost = 0;

	while (len) {
		size_t dlen, slen;
		u64 n;
		void *d, *s;

		if (bzc_cursor_odp(dst) || bzc_cursor_odp(src)) {
			n = bzc_copy_odp_run(dst, src, len, may_sleep, &lost);
			if (lost)
				return lost;
		} else {
			d = bzc_cursor_map(dst, &dlen);
			s = bzc_cursor_map(src, &slen);
			n = min3((u64)dlen, (u64)slen, len);
			bzc_copy_piece(d, s, n);
			bzc_cursor_unmap(src, s);
			bzc_cursor_unmap(dst, d);
			dst->pos += n;
			src->pos += n;
		}
		len -= n;
		if (may_sleep)
			cond_resched();
	}
	return 0;
}

/**
 * bzc_sgl_fault() - fault in the ODP MR pages of an SGL range
 * @c: where the range starts (not moved)
 * @len: its bytes; the SGL holds at least that many past @c
 * @write: the pages must be writable
 *
 * For a copy that could not sleep (a spinlock held) and found a page
 * missing: the owner of the SGL calls this where it may sleep, then has
 * the bytes brought again (bzc_wire_rc() asks for the rest of a READ).
 * Sleeps.
 *
 * Return: 0, or bzc_odp_fault()'s errno for the first page that could not
 * be made present.
 */
int bzc_sgl_fault(const struct bzc_cursor *c, u64 len, bool write)
{
	const struct bzc_seg *seg;
	u64 pos = c->pos, n;
	u32 i = c->i;
	int err;

	if (c->sgl->kbuf)
		return 0;
	for (; len && i < c->sgl->n; i++, pos = 0) {
		seg = &c->sgl->seg[i];
		n = min_t(u64, len, seg->len - pos);
		if (n && seg->mr && seg->mr->odp) {
			err = bzc_odp_fault(seg->mr, seg->off + pos, n, write,
					    true);
			if (err)
				return err;
		}
		len -= n;
	}
	return 0;
}

/**
 * bzc_cursor_skip() - move a cursor on by @n bytes without copying
 * @c: the cursor
 * @n: bytes; the SGL holds at least that many past it
 */
void bzc_cursor_skip(struct bzc_cursor *c, u64 n)
{
	if (c->sgl->kbuf) {
		c->pos += n;
		return;
	}
	while (n > c->sgl->seg[c->i].len - c->pos) {
		n -= c->sgl->seg[c->i].len - c->pos;
		c->i++;
		c->pos = 0;
	}
	c->pos += n;
}

/*
 * Copies in a worker at least this long are offered to a second worker, in
 * chunks both take from one counter: a helper that gets no CPU (say, the
 * process spins on its CQ on the other one) costs nothing but the offer.
 */
#define BZC_SPLIT_BYTES SZ_256K
#define BZC_CHUNK_BYTES SZ_64K

struct bzc_copy_job {
	struct work_struct work;
	struct bzc_cursor dst, src;	/* where the copy starts */
	u64 len;
	u64 nchunks;
	atomic64_t next;		/* the next chunk to take */
	atomic_t lost;			/* BZC_COPY_*_LOST of any chunk */
};

static void bzc_copy_chunks(struct bzc_copy_job *job)
{
	u64 c;
	int lost;

	while ((c = atomic64_fetch_inc(&job->next)) < job->nchunks) {
		struct bzc_cursor d = job->dst, s = job->src;
		u64 off = c * BZC_CHUNK_BYTES;

		bzc_cursor_skip(&d, off);
		bzc_cursor_skip(&s, off);
		lost = bzc_copy_pages(&d, &s, min_t(u64, BZC_CHUNK_BYTES,
						    job->len - off), true);
		if (lost) {
			/* The message fails: the other chunks need not go. */
			atomic_or(lost, &job->lost);
			atomic64_set(&job->next, job->nchunks);
		}
	}
}

static void bzc_copy_helper(struct work_struct *work)
{
	bzc_copy_chunks(container_of(work, struct bzc_copy_job, work));
}

/**
 * bzc_copy() - the one copy of the device, between two SGL positions
 * @dst: where the bytes go; advanced by @len
 * @src: where they come from; advanced by @len
 * @len: bytes to copy; both sides hold at least that many
 * @may_sleep: the caller may sleep: long copies reschedule and share the
 *	       work with a second worker on bzc_wq (one copy thread runs at
 *	       about half the memory bandwidth of two), and a page of an ODP
 *	       MR that was invalidated since the SGL was built is faulted in
 *	       again
 *
 * A page of an ODP MR that is not there and cannot be made present (the
 * process unmapped it while the transfer ran; or @may_sleep is false) ends
 * the copy early: what was copied before it stays, the cursors are then
 * somewhere short of @len, and the caller fails the message with the
 * status its side calls for.
 *
 * Return: 0 when all @len bytes went; otherwise BZC_COPY_DST_LOST and/or
 * BZC_COPY_SRC_LOST, the side whose page was missing.
 */
int bzc_copy(struct bzc_cursor *dst, struct bzc_cursor *src, u64 len,
	     bool may_sleep)
{
	struct bzc_copy_job job;
	int lost;

	if (!may_sleep || len < BZC_SPLIT_BYTES)
		return bzc_copy_pages(dst, src, len, may_sleep);
	job.dst = *dst;
	job.src = *src;
	job.len = len;
	job.nchunks = DIV_ROUND_UP_ULL(len, BZC_CHUNK_BYTES);
	atomic64_set(&job.next, 0);
	atomic_set(&job.lost, 0);
	INIT_WORK_ONSTACK(&job.work, bzc_copy_helper);
	queue_work(bzc_wq, &job.work);
	bzc_copy_chunks(&job);
	/* Not started: never will; running: finishing its last chunk. */
	cancel_work_sync(&job.work);
	destroy_work_on_stack(&job.work);
	lost = atomic_read(&job.lost);
	if (lost)
		return lost;
	bzc_cursor_skip(dst, len);
	bzc_cursor_skip(src, len);
	return 0;
}
