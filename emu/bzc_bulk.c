// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: bulk channels, the transfer engine behind bzcdv_post_bulk().
 *
 * A channel is a ring of bulk WQEs (struct bzc_bulk_wqe) on a PD, with a CQ
 * that gets exactly one completion per WQE and an optional receive CQ for
 * WRITE_WITH_IMM arrivals. The doorbell copies new WQEs out of the ring
 * into requests; nothing read from the ring is trusted.
 *
 * The channel's lanes (work items on bzc_wq, bulk_workers of them) run the
 * requests in posting order. The first lane to reach a request resolves its
 * keys, which may pin pages through the PD's MR cache; then every lane takes
 * bulk_seg_kb segments of it, or of the requests after it, so one long
 * request is copied by all lanes at once and short ones overlap. Data moves
 * once, page to page.
 *
 * Ordering: completions come in posting order, and the ring slot of a WQE
 * is free again only once it has completed. A request with
 * BZC_BULK_WQE_FENCE starts once all earlier ones have completed; others
 * may overlap the tail of the ones before. A WRITE_WITH_IMM arrival is
 * reported when the WRITE completes, so after its data and all earlier
 * requests' data is in place.
 *
 * Access: WRITE, WRITE_WITH_IMM and READ reach only the channel this one
 * is connected to (bzc_bulk_chan_connect()), and only while that channel
 * is connected back to this one, as RC QPs name each other. Zero-length
 * requests are checked the same way. Or, connected to an RC QP of the
 * process (bzc_bulk_chan_connect_qp()), they go as RDMA messages on that
 * QP's connection (bzc_bulk_qp.c), to whatever it is connected to, one
 * request after the other and each sent by one lane; the lanes still
 * resolve the keys of the requests behind it.
 *
 * A request that fails completes with its error; the channel goes on
 * (on a QP: the QP goes to ERR and the channel stops, as below).
 * Destroy flushes what has not started (IB_WC_WR_FLUSH_ERR), stops what
 * is running between segments, and waits for the lanes. A channel whose
 * CQ or receive CQ overflowed (IB_EVENT_CQ_ERR: a completion or an arrival
 * was lost) is dead the same way: nothing more runs unreported, and its
 * doorbell fails with EIO.
 */
#include <linux/highmem.h>
#include <linux/nsproxy.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>

#include "bzc_xport.h"

static unsigned int bulk_workers = 2;
module_param(bulk_workers, uint, 0644);
MODULE_PARM_DESC(bulk_workers,
		 "Workers one bulk channel spreads its WQEs over (1-16), at channel creation");

static unsigned int bulk_seg_kb = 1024;
module_param(bulk_seg_kb, uint, 0644);
MODULE_PARM_DESC(bulk_seg_kb,
		 "KiB a worker copies of a bulk WQE at a time (64-65536), at channel creation");

static unsigned int bulk_qp_msg_kb = 1024;
module_param(bulk_qp_msg_kb, uint, 0644);
MODULE_PARM_DESC(bulk_qp_msg_kb,
		 "KiB in one RDMA message of a bulk request on a QP (4-2097152, at most 2^31 bytes), at connection");

static unsigned int max_bulk_chans = 1024;
module_param(max_bulk_chans, uint, 0644);
MODULE_PARM_DESC(max_bulk_chans,
		 "Bulk channels one device holds at once (1-65536), at channel creation");

#define BZC_BULK_MAX_WORKERS	16
#define BZC_BULK_MAX_CHANS	SZ_64K
#define BZC_BULK_MAX_SGE	16
#define BZC_BULK_MAX_DEPTH	4096
#define BZC_BULK_MAX_LEN	BIT_ULL(42)	/* 4 TiB */
/* Slot size: header + the SGEs, rounded to a power of two. */
#define BZC_BULK_WQE_SIZE	512
/* The pick result that asks a lane to resolve a request's keys. */
#define BZC_BULK_PREPARE	U64_MAX

static_assert(BZC_BULK_WQE_SGE_OFFSET +
	      BZC_BULK_MAX_SGE * sizeof(struct bzc_bulk_sge) <=
	      BZC_BULK_WQE_SIZE);

/*
 * One side of a transfer: a byte range over pinned pages, or over an ODP
 * MR's pages, looked up page by page (pages NULL).
 */
struct bzc_span {
	struct page **pages;
	u64 first;		/* byte offset of the range from pages[0] */
	u64 len;
	struct bzc_mr *mr;	/* what holds the pages: an MR ... */
	struct bzc_mrc_ent *ent; /* ... or an MR cache range */
};

enum bzc_bulk_state {
	BZC_BULK_NEW,		/* read from the ring */
	BZC_BULK_PREP,		/* a lane resolves its keys */
	BZC_BULK_READY,		/* segments being copied */
	BZC_BULK_DONE,		/* waits for the earlier ones to complete */
};

struct bzc_bulk_req {
	struct list_head node;
	enum bzc_bulk_state state;
	enum ib_wc_status status;
	__le64 wr_id;
	u64 remote_addr;
	u64 len;
	u32 rkey;
	u32 remote_chan;
	__le32 imm;
	u8 opcode;
	u8 flags;
	u16 num_sge;
	bool wire;			/* messages on the channel's QP */
	u64 nseg;
	u64 next_seg;		/* the next segment a lane takes */
	u64 segs_done;
	struct bzc_bulk_chan *target;	/* remote_chan, referenced */
	bool arrival_lost;		/* the target's receive CQ was full */
	struct bzc_span far;
	u32 nlocal;
	struct bzc_span local[BZC_BULK_MAX_SGE];
	struct bzc_bulk_sge sge[BZC_BULK_MAX_SGE];	/* as read */
};

struct bzc_bulk_lane {
	struct work_struct work;
	struct bzc_bulk_chan *chan;
};

struct bzc_bulk_chan {
	struct bzc_dev *bdev;
	struct bzc_pd *pd;
	struct bzc_cq *cq;
	struct bzc_cq *rcq;		/* may be NULL */
	u32 num;			/* chan_num, in bzc_chans */
	refcount_t refcnt;		/* 1 while it exists + requests naming it */
	/*
	 * The peer, set once by bzc_bulk_chan_connect(); read by anyone
	 * after an acquire of `connected`.
	 */
	bool connected;
	/*
	 * Or, instead of a peer channel, an RC QP carrying the transfers
	 * (held by its ibqp.usecnt).
	 */
	struct bzc_qp *qp;
	u64 msg_bytes;			/* in messages of at most this */
	union ib_gid sgid;		/* this channel's address */
	union ib_gid peer_gid;
	u32 peer_num;
	struct completion released;
	struct bzc_ring ring;
	u64 seg_bytes;
	struct mutex db_mutex;		/* the doorbell reads the ring */
	u32 read;			/* next slot to read; under db_mutex */
	spinlock_t lock;		/* reqs, their states, dead */
	struct list_head reqs;		/* posting order, not yet completed */
	struct mutex complete_mutex;	/* CQEs in posting order */
	u32 cons;			/* completed WQEs; under complete_mutex */
	bool dead;
	wait_queue_head_t idle;
	u32 nlanes;
	struct bzc_bulk_lane lanes[];
};

/*
 * Channels by number, unique across all bzc devices of this kernel; a
 * lookup names the device too.
 */
static DEFINE_XARRAY_ALLOC1(bzc_chans);
static u32 bzc_chan_next;

static u32 bzc_bulk_workers(void)
{
	return clamp_t(u32, READ_ONCE(bulk_workers), 1, BZC_BULK_MAX_WORKERS);
}

static u32 bzc_bulk_max_chans(void)
{
	return clamp_t(u32, READ_ONCE(max_bulk_chans), 1, BZC_BULK_MAX_CHANS);
}

/*
 * A message holds the QP's sq_mutex while it is posted, and a READ's
 * response comes back unpaced: shorter messages let the QP's own WQEs in
 * between and bound that burst (emu/README.md, "Messages").
 */
static u64 bzc_bulk_qp_msg_bytes(void)
{
	return (u64)clamp_t(u32, READ_ONCE(bulk_qp_msg_kb), 4,
			    BZC_MAX_MSG_SZ >> 10) << 10;
}

static u64 bzc_bulk_seg_bytes(void)
{
	return (u64)clamp_t(u32, READ_ONCE(bulk_seg_kb), 64, SZ_64K) << 10;
}

void bzc_bulk_caps(struct bzc_bulk_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	caps->max_bulk_len = BZC_BULK_MAX_LEN;
	caps->mr_cache_max_bytes = (u64)READ_ONCE(bzc_mr_cache_max_mb) << 20;
	caps->max_bulk_sge = BZC_BULK_MAX_SGE;
	caps->max_chan_depth = BZC_BULK_MAX_DEPTH;
	caps->seg_bytes = bzc_bulk_seg_bytes();
	caps->workers = bzc_bulk_workers();
	caps->max_chans = bzc_bulk_max_chans();
	caps->comp_mask = BZC_BULK_CAPS_MAX_CHANS;
}

/* Channel `num` of `bdev`, referenced. */
static struct bzc_bulk_chan *bzc_chan_get(struct bzc_dev *bdev, u32 num)
{
	struct bzc_bulk_chan *chan;

	xa_lock(&bzc_chans);
	chan = xa_load(&bzc_chans, num);
	if (chan && (chan->bdev != bdev || !refcount_inc_not_zero(&chan->refcnt)))
		chan = NULL;
	xa_unlock(&bzc_chans);
	return chan;
}

static void bzc_chan_put(struct bzc_bulk_chan *chan)
{
	if (refcount_dec_and_test(&chan->refcnt))
		complete(&chan->released);
}

/*
 * Resolve (key, addr, len) in `pd` with `access`: key 0 is the PD's MR
 * cache (may pin, so may sleep). Only non-empty ranges come here.
 */
static bool bzc_span_get(struct bzc_dev *bdev, struct bzc_pd *pd, u32 key,
			 u64 addr, u64 len, int access, struct bzc_span *sp)
{
	struct bzc_mr *mr;

	sp->len = len;
	sp->mr = NULL;
	sp->ent = NULL;
	if (!key) {
		struct bzc_mrc_ent *ent;
		bool hit;

		ent = bzc_mrc_get(pd, addr, len, &hit);
		if (IS_ERR(ent))
			return false;
		sp->ent = ent;
		sp->pages = bzc_mrc_ent_pages(ent, addr);
		sp->first = offset_in_page(addr);
		return true;
	}
	mr = bzc_lkey_get(bdev, key, &pd->ibpd, addr, len, access);
	if (!mr)
		return false;
	/*
	 * An ODP MR's range is faulted in here, in the lane (for writing
	 * when the access writes): a range that cannot be fails the key.
	 */
	if (mr->odp &&
	    bzc_odp_fault(mr, addr - mr->iova, len,
			  access & (IB_ACCESS_LOCAL_WRITE |
				    IB_ACCESS_REMOTE_WRITE), true)) {
		bzc_mr_put(mr);
		return false;
	}
	sp->mr = mr;
	sp->pages = mr->pages;
	sp->first = mr->page_off + (addr - mr->iova);
	return true;
}

static void bzc_span_put(struct bzc_span *sp)
{
	if (sp->mr)
		bzc_mr_put(sp->mr);
	if (sp->ent)
		bzc_mrc_put(sp->ent);
	sp->mr = NULL;
	sp->ent = NULL;
}

/*
 * Does `target` take operations from `chan`: connected, to chan's number
 * at chan's address, as a packet from chan would name its source?
 */
static bool bzc_bulk_accepts(struct bzc_bulk_chan *target,
			     struct bzc_bulk_chan *chan)
{
	/* Pairs with the release in bzc_bulk_chan_connect(). */
	return smp_load_acquire(&target->connected) &&
	       target->peer_num == chan->num &&
	       !memcmp(&target->peer_gid, &chan->sgid, sizeof(chan->sgid));
}

/* Resolve a request's keys and its target; the status it fails with. */
static enum ib_wc_status bzc_bulk_prepare(struct bzc_bulk_chan *chan,
					  struct bzc_bulk_req *req)
{
	int local_access = 0, far_access;
	u64 len = 0;
	u32 i;

	if (req->status != IB_WC_SUCCESS)
		return req->status;
	if (req->flags & ~BZC_BULK_WQE_FENCE)
		return IB_WC_LOC_QP_OP_ERR;
	switch (req->opcode) {
	case BZC_BULK_OP_WRITE:
	case BZC_BULK_OP_WRITE_WITH_IMM:
		far_access = IB_ACCESS_REMOTE_WRITE;
		break;
	case BZC_BULK_OP_READ:
		far_access = IB_ACCESS_REMOTE_READ;
		local_access = IB_ACCESS_LOCAL_WRITE;
		break;
	case BZC_BULK_OP_COPY:
		far_access = IB_ACCESS_LOCAL_WRITE;
		break;
	default:
		return IB_WC_LOC_QP_OP_ERR;
	}

	for (i = 0; i < req->num_sge; i++) {
		u64 l = le64_to_cpu(req->sge[i].length);

		if (l > BZC_BULK_MAX_LEN || len + l > BZC_BULK_MAX_LEN)
			return IB_WC_LOC_LEN_ERR;
		len += l;
	}
	req->len = len;

	for (i = 0; i < req->num_sge; i++) {
		const struct bzc_bulk_sge *sge = &req->sge[i];

		if (!sge->length)
			continue;
		if (!bzc_span_get(chan->bdev, chan->pd, le32_to_cpu(sge->lkey),
				  le64_to_cpu(sge->addr),
				  le64_to_cpu(sge->length), local_access,
				  &req->local[req->nlocal]))
			return IB_WC_LOC_PROT_ERR;
		req->nlocal++;
	}

	if (req->opcode == BZC_BULK_OP_COPY) {
		if (len && !bzc_span_get(chan->bdev, chan->pd, req->rkey,
					 req->remote_addr, len, far_access,
					 &req->far))
			return IB_WC_LOC_PROT_ERR;
	} else {
		/*
		 * Messages on the QP's connection: its peer checks the rkey,
		 * its receive queue takes the immediate. remote_chan is not
		 * used. One lane sends them all, in order. The acquire pairs
		 * with bzc_bulk_chan_connect_qp()'s release.
		 */
		if (smp_load_acquire(&chan->connected) && chan->qp) {
			req->wire = true;
			req->nseg = 1;
			return IB_WC_SUCCESS;
		}
		/*
		 * Only to the connected peer, and only if it names us back.
		 * The acquire pairs with bzc_bulk_chan_connect()'s release.
		 */
		if (!smp_load_acquire(&chan->connected) ||
		    req->remote_chan != chan->peer_num)
			return IB_WC_LOC_QP_OP_ERR;
		req->target = bzc_chan_get(chan->bdev, chan->peer_num);
		if (!req->target || !bzc_bulk_accepts(req->target, chan))
			return IB_WC_REM_INV_REQ_ERR;
		if (req->opcode == BZC_BULK_OP_WRITE_WITH_IMM &&
		    !req->target->rcq)
			return IB_WC_REM_INV_REQ_ERR;
		/*
		 * No MR cache on the far side: it is another process's. An
		 * rkey is checked even for zero bytes.
		 */
		if ((len || req->rkey) &&
		    (!req->rkey ||
		     !bzc_span_get(req->target->bdev, req->target->pd,
				   req->rkey, req->remote_addr, len,
				   far_access, &req->far)))
			return IB_WC_REM_ACCESS_ERR;
	}
	req->nseg = DIV_ROUND_UP_ULL(len, chan->seg_bytes);
	return IB_WC_SUCCESS;
}

/* The span's ODP MR, or NULL. */
static struct bzc_mr *bzc_span_odp(const struct bzc_span *sp)
{
	return sp->mr && sp->mr->odp ? sp->mr : NULL;
}

/*
 * Pages of an ODP span looked up ahead for one run of a copy: valid only
 * while the ODP tables stay locked (bzc_bulk_copy_seg() forgets them,
 * n = 0, when it unlocks).
 */
struct bzc_odp_ahead {
	const struct bzc_span *sp;
	u64 first;			/* page index (b >> PAGE_SHIFT) of pages[0] */
	unsigned int n;
	struct page *pages[BZC_ODP_RUN / PAGE_SIZE + 1];
};

/*
 * The page of byte `b` (from the span's first page); ODP: locked, or NULL.
 * An ODP span's pages come from one table walk per run (`ahead`).
 */
static struct page *bzc_span_page(const struct bzc_span *sp, u64 b,
				  bool write, struct bzc_odp_ahead *ahead)
{
	u64 pg = b >> PAGE_SHIFT;

	if (!bzc_span_odp(sp))
		return sp->pages[pg];
	if (ahead->sp != sp || pg < ahead->first ||
	    pg >= ahead->first + ahead->n) {
		ahead->sp = sp;
		ahead->first = pg;
		ahead->n = bzc_odp_pages(sp->mr, b - sp->mr->page_off,
					 ARRAY_SIZE(ahead->pages), write,
					 ahead->pages);
		if (!ahead->n)
			return NULL;
	}
	return ahead->pages[pg - ahead->first];
}

/*
 * Fault in the page of an ODP span that bzc_span_page() did not find
 * (the process's mapping changed since the request was prepared), with
 * the ODP tables unlocked. Returns IB_WC_SUCCESS, or the error of the
 * side that cannot be made present (the process unmapped it meanwhile):
 * the local span's IB_WC_LOC_PROT_ERR, the far one's @far_err.
 */
static enum ib_wc_status bzc_bulk_refault(const struct bzc_span *l, u64 lb,
					  const struct bzc_span *f, u64 fb,
					  u64 n, bool to_far, bool local_gone,
					  enum ib_wc_status far_err)
{
	if (local_gone)
		return bzc_odp_fault(l->mr, lb - l->mr->page_off, n, !to_far,
				     true) ? IB_WC_LOC_PROT_ERR : IB_WC_SUCCESS;
	return bzc_odp_fault(f->mr, fb - f->mr->page_off, n, to_far, true) ?
	       far_err : IB_WC_SUCCESS;
}

/*
 * Copy segment `seg` of a request: the one copy, page by page. Where a
 * side is an ODP MR, the ODP tables stay locked across a run of pages
 * (BZC_ODP_RUN bytes) so no invalidation takes them meanwhile; a page
 * that went since the request was prepared is faulted in again. Returns
 * IB_WC_SUCCESS, or the request's error when a page of an ODP MR went
 * away for good: the local SGEs' IB_WC_LOC_PROT_ERR, the far key's
 * IB_WC_REM_ACCESS_ERR (COPY's far key is a local one too), as when the
 * key did not resolve at all.
 */
static enum ib_wc_status bzc_bulk_copy_seg(struct bzc_bulk_chan *chan,
					   struct bzc_bulk_req *req, u64 seg)
{
	bool to_far = req->opcode != BZC_BULK_OP_READ;
	enum ib_wc_status far_err = req->opcode == BZC_BULK_OP_COPY ?
				    IB_WC_LOC_PROT_ERR : IB_WC_REM_ACCESS_ERR;
	bool far_odp = bzc_span_odp(&req->far);
	u64 foff = seg * chan->seg_bytes, loff = foff;
	u64 left = min(chan->seg_bytes, req->len - foff);
	unsigned int pages = 0;
	bool locked = false;
	u64 run = 0;
	u32 i = 0;
	enum ib_wc_status st;
	struct bzc_odp_ahead ahead[2] = {}, *la = &ahead[0], *fa = &ahead[1];

	/* Only non-empty local spans exist, and they cover req->len. */
	while (loff >= req->local[i].len)
		loff -= req->local[i++].len;

	while (left) {
		struct bzc_span *l = &req->local[i];
		u64 lb = l->first + loff, fb = req->far.first + foff;
		u64 n = min3(PAGE_SIZE - offset_in_page(lb),
			     PAGE_SIZE - offset_in_page(fb), left);
		struct page *lpg, *fpg = NULL;
		void *lp, *fp;

		n = min(n, l->len - loff);
		if ((bzc_span_odp(l) || far_odp) && !locked) {
			bzc_odp_lock();
			locked = true;
			run = 0;
		}
		lpg = bzc_span_page(l, lb, !to_far, la);
		if (lpg)
			fpg = bzc_span_page(&req->far, fb, to_far, fa);
		if (!fpg) {
			/* Only an ODP side can be missing: locked. */
			bzc_odp_unlock();
			locked = false;
			la->n = 0;
			fa->n = 0;
			st = bzc_bulk_refault(l, lb, &req->far, fb, n, to_far,
					      !lpg, far_err);
			if (st != IB_WC_SUCCESS)
				return st;
			continue;
		}
		lp = kmap_local_page(lpg);
		fp = kmap_local_page(fpg);
		if (to_far)
			bzc_copy_piece(fp + offset_in_page(fb),
				       lp + offset_in_page(lb), n);
		else
			bzc_copy_piece(lp + offset_in_page(lb),
				       fp + offset_in_page(fb), n);
		kunmap_local(fp);
		kunmap_local(lp);
		left -= n;
		foff += n;
		loff += n;
		if (loff == l->len && left) {
			i++;
			loff = 0;
		}
		run += n;
		if (locked && (run >= BZC_ODP_RUN || !left)) {
			bzc_odp_unlock();
			locked = false;
			la->n = 0;
			fa->n = 0;
		}
		if (++pages >= 64 && !locked) {
			cond_resched();
			pages = 0;
		}
	}
	return IB_WC_SUCCESS;
}

/* Append `len` bytes of span `sp` from byte `off` to `sgl` (it has room). */
static void bzc_bulk_sgl_add(struct bzc_sgl *sgl, const struct bzc_span *sp,
			     u64 off, u64 len)
{
	struct bzc_seg *seg = &sgl->seg[sgl->n];

	if (!sp->mr) {
		/* An MR cache range: the request holds it until it is freed. */
		bzc_sgl_add_pages(sgl, sp->pages, sp->first + off, len);
		return;
	}
	/* The request holds the MR: one more reference for the SGL. */
	refcount_inc(&sp->mr->refcnt);
	seg->mr = sp->mr;
	seg->pages = NULL;
	seg->off = sp->first - sp->mr->page_off + off;
	seg->len = len;
	sgl->n++;
	sgl->total += len;
}

/*
 * Run a request on the channel's QP: messages of at most msg_bytes
 * (bulk_qp_msg_kb, at most BZC_MAX_MSG_SZ) bytes, in order (READs as
 * READ requests), the immediate on the last one only, so the peer
 * consumes one receive for the whole request. A zero-length request is
 * one zero-length message. On the wire the WRITE messages but the last
 * do not wait for their answers (bzc_bulk_qp_msg()). Stops at the first
 * error. Returns the request's status.
 */
static enum ib_wc_status bzc_bulk_wire_run(struct bzc_bulk_chan *chan,
					   struct bzc_bulk_req *req)
{
	enum ib_wc_status st = IB_WC_SUCCESS;
	u64 off = 0, soff = 0;
	struct bzc_sgl *sgl;
	u32 i = 0;

	sgl = kmalloc(sizeof(*sgl), GFP_KERNEL);
	if (!sgl)
		return IB_WC_GENERAL_ERR;
	do {
		u64 n = min(req->len - off, chan->msg_bytes), left = n;
		bool last = off + n == req->len;
		u8 op = IB_UVERBS_WR_RDMA_WRITE;

		if (req->opcode == BZC_BULK_OP_READ)
			op = IB_UVERBS_WR_RDMA_READ;
		else if (req->opcode == BZC_BULK_OP_WRITE_WITH_IMM && last)
			op = IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;
		/* Only non-empty local spans exist, and they cover req->len. */
		bzc_sgl_init(sgl);
		while (left) {
			const struct bzc_span *sp = &req->local[i];
			u64 take = min(left, sp->len - soff);

			bzc_bulk_sgl_add(sgl, sp, soff, take);
			left -= take;
			soff += take;
			if (soff == sp->len) {
				i++;
				soff = 0;
			}
		}
		st = bzc_bulk_qp_msg(chan->qp, op, sgl, req->remote_addr + off,
				     req->rkey, last ? req->imm : 0, !off,
				     !last, &chan->dead);
		bzc_sgl_put(sgl);
		off += n;
		if (st == IB_WC_SUCCESS && !last && READ_ONCE(chan->dead))
			st = IB_WC_WR_FLUSH_ERR;
	} while (st == IB_WC_SUCCESS && off < req->len);
	kfree(sgl);
	return st;
}

static u8 bzc_bulk_wc_opcode(u8 opcode)
{
	switch (opcode) {
	case BZC_BULK_OP_READ:
		return IB_WC_RDMA_READ;
	case BZC_BULK_OP_COPY:
		return BZC_WC_BULK_COPY;
	default:
		return IB_WC_RDMA_WRITE;
	}
}

/*
 * The channel can no longer report what it runs: nothing more runs, and
 * the ring header tells the process so before it publishes more WQEs.
 * Under chan->lock.
 */
static void bzc_bulk_stop(struct bzc_bulk_chan *chan)
{
	struct bzc_wq_ring_hdr *hdr = chan->ring.kaddr;

	chan->dead = true;
	WRITE_ONCE(hdr->error, cpu_to_le32(1));
}

/* The CQEs of a finished request; false if one was lost (CQ overflow). */
static bool bzc_bulk_post_cqes(struct bzc_bulk_chan *chan,
			       struct bzc_bulk_req *req)
{
	u32 byte_len = min_t(u64, req->len, U32_MAX);
	struct bzc_cqe cqe = {
		.wr_id = req->wr_id,
		.status = req->status,
		.opcode = bzc_bulk_wc_opcode(req->opcode),
		.qp_num = cpu_to_le32(chan->num),
	};
	bool posted;

	if (req->status == IB_WC_SUCCESS) {
		cqe.byte_len = cpu_to_le32(byte_len);
		bzc_count(chan->bdev, BZC_CNT_BULK_WQES, 1);
		bzc_count(chan->bdev, BZC_CNT_BULK_BYTES, req->len);
	}
	posted = bzc_cq_post(chan->cq, &cqe, false);

	if (req->opcode == BZC_BULK_OP_WRITE_WITH_IMM && req->target &&
	    req->status == IB_WC_SUCCESS) {
		struct bzc_cqe arrival = {
			.wr_id = req->wr_id,
			.byte_len = cpu_to_le32(byte_len),
			.imm_data = req->imm,
			.qp_num = cpu_to_le32(req->target->num),
			.src_qp = cpu_to_le32(chan->num),
			.status = IB_WC_SUCCESS,
			.opcode = IB_WC_RECV_RDMA_WITH_IMM,
			.wc_flags = BZC_CQE_WITH_IMM,
		};

		/* The target is stopped when the request is freed. */
		if (!bzc_cq_post(req->target->rcq, &arrival, false))
			req->arrival_lost = true;
	}
	return posted;
}

/*
 * Complete the finished requests at the head, in posting order, and move
 * them to `done` to be freed. They are taken off the list under
 * chan->lock, their CQEs are posted with no lock held (the CQs' handlers
 * run then, and may take locks of their own); complete_mutex keeps the
 * CQEs of two lanes in posting order. Channel destroy waits for the lanes
 * (cancel_work_sync), so it cannot free the channel in between.
 */
static void bzc_bulk_complete(struct bzc_bulk_chan *chan,
			      struct list_head *done)
{
	struct bzc_wq_ring_hdr *hdr = chan->ring.kaddr;
	struct bzc_bulk_req *req, *tmp;
	LIST_HEAD(finished);
	bool lost = false;
	u32 n = 0;

	mutex_lock(&chan->complete_mutex);
	spin_lock(&chan->lock);
	list_for_each_entry_safe(req, tmp, &chan->reqs, node) {
		if (req->state != BZC_BULK_DONE)
			break;
		list_move_tail(&req->node, &finished);
	}
	spin_unlock(&chan->lock);

	list_for_each_entry(req, &finished, node) {
		if (!bzc_bulk_post_cqes(chan, req))
			lost = true;
		n++;
	}
	if (lost) {
		spin_lock(&chan->lock);
		bzc_bulk_stop(chan);
		spin_unlock(&chan->lock);
	}
	if (n) {
		WRITE_ONCE(chan->cons, chan->cons + n);
		/* The slots are free once the process sees cons: after the CQEs. */
		smp_store_release(&hdr->cons, cpu_to_le32(chan->cons));
	}
	list_splice_tail(&finished, done);
	mutex_unlock(&chan->complete_mutex);
}

/* Release what completed requests hold; may sleep (MR cache unpins). */
static void bzc_bulk_free(struct bzc_bulk_chan *chan, struct list_head *done)
{
	struct bzc_bulk_req *req, *tmp;
	u32 i;

	if (list_empty(done))
		return;
	list_for_each_entry_safe(req, tmp, done, node) {
		for (i = 0; i < req->nlocal; i++)
			bzc_span_put(&req->local[i]);
		bzc_span_put(&req->far);
		if (req->target) {
			if (req->arrival_lost) {
				spin_lock(&req->target->lock);
				bzc_bulk_stop(req->target);
				spin_unlock(&req->target->lock);
			}
			bzc_chan_put(req->target);
		}
		kfree(req);
	}
	INIT_LIST_HEAD(done);
	wake_up(&chan->idle);
}

/*
 * The next thing for a lane to do, in posting order: resolve a new request
 * (*seg = BZC_BULK_PREPARE) or copy a segment of a ready one. NULL: nothing
 * now. Under chan->lock.
 */
static struct bzc_bulk_req *bzc_bulk_pick(struct bzc_bulk_chan *chan, u64 *seg)
{
	struct bzc_bulk_req *req;
	bool earlier = false;	/* an earlier request has not finished */

	list_for_each_entry(req, &chan->reqs, node) {
		bool before = earlier;

		if (req->state == BZC_BULK_DONE)
			continue;
		if ((req->flags & BZC_BULK_WQE_FENCE) && earlier)
			return NULL;
		earlier = true;
		if (req->state == BZC_BULK_NEW) {
			req->state = BZC_BULK_PREP;
			*seg = BZC_BULK_PREPARE;
			return req;
		}
		if (req->state != BZC_BULK_READY || req->next_seg == req->nseg)
			continue;
		if (chan->dead) {
			/* Destroyed or CQ lost: segments not started are dropped. */
			req->status = IB_WC_WR_FLUSH_ERR;
			req->segs_done += req->nseg - req->next_seg;
			req->next_seg = req->nseg;
			if (req->segs_done == req->nseg)
				req->state = BZC_BULK_DONE;
			continue;
		}
		/* One QP, one PSN order: after every earlier request. */
		if (req->wire && before)
			continue;
		*seg = req->next_seg++;
		return req;
	}
	return NULL;
}

static void bzc_bulk_kick(struct bzc_bulk_chan *chan, u32 lanes)
{
	u32 i;

	for (i = 0; i < min(lanes, chan->nlanes); i++)
		queue_work(bzc_wq, &chan->lanes[i].work);
}

static void bzc_bulk_lane_work(struct work_struct *work)
{
	struct bzc_bulk_chan *chan =
		container_of(work, struct bzc_bulk_lane, work)->chan;
	struct bzc_bulk_req *req;
	enum ib_wc_status status;
	LIST_HEAD(done);
	u64 seg;

	for (;;) {
		bzc_bulk_complete(chan, &done);
		bzc_bulk_free(chan, &done);
		spin_lock(&chan->lock);
		req = bzc_bulk_pick(chan, &seg);
		spin_unlock(&chan->lock);
		if (!req)
			return;

		if (seg == BZC_BULK_PREPARE) {
			status = bzc_bulk_prepare(chan, req);
			spin_lock(&chan->lock);
			req->status = status;
			if (status == IB_WC_SUCCESS && chan->dead)
				req->status = IB_WC_WR_FLUSH_ERR;
			if (req->status != IB_WC_SUCCESS || !req->nseg)
				req->state = BZC_BULK_DONE;
			else
				req->state = BZC_BULK_READY;
			spin_unlock(&chan->lock);
			/* Call in the other lanes for a request worth sharing. */
			if (req->nseg > 1)
				bzc_bulk_kick(chan, req->nseg);
			continue;
		}

		if (req->wire)
			status = bzc_bulk_wire_run(chan, req);
		else
			status = bzc_bulk_copy_seg(chan, req, seg);
		spin_lock(&chan->lock);
		if (status != IB_WC_SUCCESS && req->wire) {
			/* The QP's connection broke: nothing more runs. */
			req->status = status;
			bzc_bulk_stop(chan);
		} else if (status != IB_WC_SUCCESS &&
			   req->status == IB_WC_SUCCESS) {
			/* An ODP page gone: the request fails, as a bad key. */
			req->status = status;
		}
		if (++req->segs_done == req->nseg)
			req->state = BZC_BULK_DONE;
		spin_unlock(&chan->lock);
	}
}

/* Copy one WQE out of the ring into a new request. */
static struct bzc_bulk_req *bzc_bulk_read_wqe(const void *slot)
{
	const struct bzc_bulk_wqe *wqe = slot;
	struct bzc_bulk_req *req;

	req = kzalloc(sizeof(*req), GFP_KERNEL);
	if (!req)
		return NULL;
	req->wr_id = READ_ONCE(wqe->wr_id);
	req->remote_addr = le64_to_cpu(READ_ONCE(wqe->remote_addr));
	req->opcode = READ_ONCE(wqe->opcode);
	req->flags = READ_ONCE(wqe->flags);
	req->num_sge = le16_to_cpu(READ_ONCE(wqe->num_sge));
	req->rkey = le32_to_cpu(READ_ONCE(wqe->rkey));
	req->remote_chan = le32_to_cpu(READ_ONCE(wqe->remote_chan));
	req->imm = READ_ONCE(wqe->imm_data);
	/* Checked once, here: the copy is what runs. */
	if (req->num_sge > BZC_BULK_MAX_SGE) {
		req->status = IB_WC_LOC_LEN_ERR;
		req->num_sge = 0;
	}
	memcpy(req->sge, slot + BZC_BULK_WQE_SGE_OFFSET,
	       req->num_sge * sizeof(struct bzc_bulk_sge));
	return req;
}

/*
 * BZC_METHOD_BULK_CHAN_DOORBELL: queue the WQEs posted since the last one.
 * -EPERM from another process than the PD's (a forked child), -EINVAL for
 * a producer index the ring cannot hold.
 */
int bzc_bulk_doorbell(struct bzc_bulk_chan *chan)
{
	struct bzc_wq_ring_hdr *hdr = chan->ring.kaddr;
	u32 prod, cons, mask = chan->ring.entries - 1;
	struct bzc_bulk_req *req;
	LIST_HEAD(new);
	int err = 0;

	if (!bzc_mrc_owned_by_current(chan->pd))
		return -EPERM;

	mutex_lock(&chan->db_mutex);
	/* Pairs with the process's release of prod after its WQEs. */
	prod = le32_to_cpu(smp_load_acquire(&hdr->prod));
	cons = READ_ONCE(chan->cons);
	/* Unsigned: also catches prod behind what was read or completed. */
	if (prod - cons > chan->ring.entries || prod - chan->read > prod - cons) {
		ibdev_info_ratelimited(&chan->bdev->ibdev,
				       "bulk channel %u: producer index %u beyond the ring (%u completed, %u entries)\n",
				       chan->num, prod, cons,
				       chan->ring.entries);
		err = -EINVAL;
		goto out;
	}
	while (chan->read != prod) {
		req = bzc_bulk_read_wqe(bzc_wq_slot(&chan->ring,
						    chan->read & mask,
						    BZC_BULK_WQE_SIZE));
		if (!req) {
			err = -ENOMEM;	/* the rest waits for the next doorbell */
			break;
		}
		list_add_tail(&req->node, &new);
		chan->read++;
	}
	spin_lock(&chan->lock);
	if (chan->dead)
		err = -EIO;
	list_splice_tail(&new, &chan->reqs);
	spin_unlock(&chan->lock);
out:
	mutex_unlock(&chan->db_mutex);
	bzc_bulk_kick(chan, 1);
	return err;
}

/*
 * Is `attr` (a GID of the channel's device, referenced, or an ERR_PTR) an
 * address the caller may use: its netdev in the caller's network
 * namespace? Drops the reference.
 */
static bool bzc_bulk_gid_usable(const struct ib_gid_attr *attr)
{
	struct net_device *ndev;
	bool ok;

	if (IS_ERR(attr))
		return false;
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	ok = !IS_ERR(ndev) && net_eq(dev_net(ndev), current->nsproxy->net_ns);
	rcu_read_unlock();
	rdma_put_gid_attr(attr);
	return ok;
}

/**
 * bzc_bulk_chan_connect() - name the one peer of a bulk channel
 * @chan: a channel of the calling process
 * @remote_gid: the peer channel's device address
 * @remote_chan: the peer channel's number
 * @sgid_index: this channel's own address, a GID index of the port
 *
 * A channel reaches, and takes operations from, only the peer it names,
 * and only while that peer names it back (GID and number, as a packet
 * names its source). Both GIDs must belong to the channel's device in the
 * caller's network namespace: channels reach channels of their own device
 * (across hosts, bzc_bulk_chan_connect_qp()). Once per channel.
 *
 * Return: 0; -EPERM from another process than the PD's; -EINVAL for
 * channel number 0 or no usable GID at @sgid_index; -ENETUNREACH when
 * @remote_gid is not an address of the channel's device in the caller's
 * network namespace; -EISCONN when the channel is connected already.
 */
int bzc_bulk_chan_connect(struct bzc_bulk_chan *chan,
			  const union ib_gid *remote_gid, u32 remote_chan,
			  u32 sgid_index)
{
	struct ib_device *ibdev = &chan->bdev->ibdev;
	const struct ib_gid_attr *attr;
	union ib_gid sgid = {};
	int err = 0;

	if (!bzc_mrc_owned_by_current(chan->pd))
		return -EPERM;
	if (!remote_chan)
		return -EINVAL;
	attr = rdma_get_gid_attr(ibdev, BZC_PORT, sgid_index);
	if (!IS_ERR(attr))
		sgid = attr->gid;
	if (!bzc_bulk_gid_usable(attr)) {
		ibdev_info_ratelimited(ibdev,
				       "bulk channel %u: no usable GID at index %u to connect from\n",
				       chan->num, sgid_index);
		return -EINVAL;
	}
	attr = rdma_find_gid(ibdev, remote_gid, IB_GID_TYPE_ROCE_UDP_ENCAP,
			     NULL);
	if (!bzc_bulk_gid_usable(attr)) {
		ibdev_info_ratelimited(ibdev,
				       "bulk channel %u: peer GID %pI6 is not an address of this device\n",
				       chan->num, remote_gid->raw);
		return -ENETUNREACH;
	}

	spin_lock(&chan->lock);
	if (chan->connected) {
		err = -EISCONN;
	} else {
		chan->sgid = sgid;
		chan->peer_gid = *remote_gid;
		chan->peer_num = remote_chan;
		/* Readers see the fields above once they see this. */
		smp_store_release(&chan->connected, true);
	}
	spin_unlock(&chan->lock);
	return err;
}

/**
 * bzc_bulk_chan_connect_qp() - carry a bulk channel's transfers on an RC QP
 * @chan: a channel of the calling process
 * @ibqp: an RC QP of the caller on the channel's PD, in RTS
 *
 * The channel's WRITE, WRITE_WITH_IMM and READ requests become RDMA
 * messages on @ibqp's connection (bzc_bulk_qp.c), so they reach whatever
 * the QP is connected to (any RoCE v2 RC QP, or a QP on a bzc device of
 * this kernel) and nothing else, with the rkeys its owner handed out. The
 * QP is held (its usecnt: ibv_destroy_qp() fails with EBUSY) until the
 * channel is destroyed. Once per channel, exclusive of
 * bzc_bulk_chan_connect().
 *
 * Return: 0; -EPERM from another process than the PD's; -EINVAL for a
 * QP of another device or PD, or not RC; -ENOTCONN for a QP not in RTS;
 * -EISCONN when the channel is connected already.
 */
int bzc_bulk_chan_connect_qp(struct bzc_bulk_chan *chan, struct ib_qp *ibqp)
{
	int err;

	if (!bzc_mrc_owned_by_current(chan->pd))
		return -EPERM;
	if (ibqp->device != &chan->bdev->ibdev)
		return -EINVAL;
	err = bzc_bulk_qp_check(ibqp, &chan->pd->ibpd);
	if (err)
		return err;

	spin_lock(&chan->lock);
	if (chan->connected) {
		err = -EISCONN;
	} else {
		/* The uverbs core holds the QP's uobject: no destroy races. */
		atomic_inc(&ibqp->usecnt);
		chan->qp = to_bqp(ibqp);
		chan->msg_bytes = bzc_bulk_qp_msg_bytes();
		/* Readers see qp once they see this. */
		smp_store_release(&chan->connected, true);
	}
	spin_unlock(&chan->lock);
	return err;
}

struct bzc_bulk_chan *bzc_bulk_chan_create(struct bzc_pd *pd,
					   struct bzc_cq *cq,
					   struct bzc_cq *rcq, u32 depth,
					   struct ib_udata *udata,
					   struct bzc_bulk_chan_create_resp *resp)
{
	struct bzc_dev *bdev = to_bdev(pd->ibpd.device);
	u32 i, nlanes = bzc_bulk_workers(), max = bzc_bulk_max_chans();
	struct bzc_bulk_chan *chan;
	int err;

	if (!depth || depth > BZC_BULK_MAX_DEPTH)
		return ERR_PTR(-EINVAL);
	if (atomic_inc_return(&bdev->bulk_chans) > max) {
		ibdev_info_ratelimited(&bdev->ibdev,
				       "bulk channel limit (%u per device) reached\n",
				       max);
		err = -ENOMEM;
		goto err_count;
	}

	chan = kzalloc(struct_size(chan, lanes, nlanes), GFP_KERNEL);
	if (!chan) {
		err = -ENOMEM;
		goto err_count;
	}
	chan->bdev = bdev;
	chan->pd = pd;
	chan->cq = cq;
	chan->rcq = rcq;
	chan->seg_bytes = bzc_bulk_seg_bytes();
	refcount_set(&chan->refcnt, 1);
	init_completion(&chan->released);
	mutex_init(&chan->db_mutex);
	mutex_init(&chan->complete_mutex);
	spin_lock_init(&chan->lock);
	INIT_LIST_HEAD(&chan->reqs);
	init_waitqueue_head(&chan->idle);
	chan->nlanes = nlanes;
	for (i = 0; i < nlanes; i++) {
		chan->lanes[i].chan = chan;
		INIT_WORK(&chan->lanes[i].work, bzc_bulk_lane_work);
	}

	err = bzc_ring_alloc(&chan->ring, udata, BZC_WQ_RING_WQE_OFFSET,
			     BZC_BULK_WQE_SIZE, roundup_pow_of_two(depth));
	if (err)
		goto err_free;
	err = xa_alloc_cyclic(&bzc_chans, &chan->num, chan,
			      XA_LIMIT(1, INT_MAX), &bzc_chan_next, GFP_KERNEL);
	if (err < 0)
		goto err_ring;

	atomic_inc(&pd->ibpd.usecnt);
	atomic_inc(&cq->ibcq.usecnt);
	if (rcq)
		atomic_inc(&rcq->ibcq.usecnt);

	resp->mmap_key = chan->ring.mmap_key;
	resp->mmap_len = chan->ring.mmap_len;
	resp->entries = chan->ring.entries;
	resp->wqe_size = BZC_BULK_WQE_SIZE;
	resp->chan_num = chan->num;
	return chan;

err_ring:
	bzc_ring_free(&chan->ring);
err_free:
	kfree(chan);
err_count:
	atomic_dec(&bdev->bulk_chans);
	return ERR_PTR(err);
}

static bool bzc_bulk_idle(struct bzc_bulk_chan *chan)
{
	bool idle;

	spin_lock(&chan->lock);
	idle = list_empty(&chan->reqs);
	spin_unlock(&chan->lock);
	return idle;
}

void bzc_bulk_chan_destroy(struct bzc_bulk_chan *chan)
{
	struct bzc_bulk_req *req;
	u32 i;

	/* No new request can name it. */
	xa_erase(&bzc_chans, chan->num);

	mutex_lock(&chan->db_mutex);
	spin_lock(&chan->lock);
	chan->dead = true;
	list_for_each_entry(req, &chan->reqs, node) {
		if (req->state == BZC_BULK_NEW) {
			req->state = BZC_BULK_DONE;
			req->status = IB_WC_WR_FLUSH_ERR;
		}
	}
	spin_unlock(&chan->lock);
	mutex_unlock(&chan->db_mutex);

	/* The lanes complete the flushed ones and stop the running ones. */
	bzc_bulk_kick(chan, chan->nlanes);
	wait_event(chan->idle, bzc_bulk_idle(chan));
	for (i = 0; i < chan->nlanes; i++)
		cancel_work_sync(&chan->lanes[i].work);

	/* Other channels' requests into this one finish first. */
	bzc_chan_put(chan);
	wait_for_completion(&chan->released);

	if (chan->qp)
		atomic_dec(&chan->qp->ibqp.usecnt);
	if (chan->rcq)
		atomic_dec(&chan->rcq->ibcq.usecnt);
	atomic_dec(&chan->cq->ibcq.usecnt);
	atomic_dec(&chan->pd->ibpd.usecnt);
	atomic_dec(&chan->bdev->bulk_chans);
	bzc_ring_free(&chan->ring);
	kfree(chan);
}
