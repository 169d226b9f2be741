// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc-fuzz: device memory (ibv_alloc_dm, ibv_memcpy_{to,from}_dm,
 * ibv_reg_dm_mr, ibv_import_dm), its export as a dma-buf
 * (bzcdv_export_dm) and dma-buf MRs over it (ibv_reg_dmabuf_mr), and
 * ibv_advise_mr on any MR. The MRs go into the world's MR slots, so posts
 * and bulk WRs use them too.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

/* A length for device memory: mostly small, sometimes at the edges. */
static uint64_t dm_len(struct worker *w)
{
	if (chance(w, 15))
		return rnd_edge(w);
	return 1 + rnd_below(w, 64 << 10);
}

/* An offset and length in a DM of @len bytes, or out of it now and then. */
static void dm_range(struct worker *w, uint64_t len, uint64_t *off,
		     uint64_t *n)
{
	if (chance(w, 10)) {
		*off = rnd_edge(w);
		*n = rnd_edge(w);
		return;
	}
	*off = len ? rnd_below(w, len) : 0;
	*n = len - *off ? 1 + rnd_below(w, len - *off) : 0;
	/* Mostly in whole access units (4 bytes), as the verbs want. */
	if (chance(w, 70)) {
		*off &= ~3ULL;
		*n &= ~3ULL;
	}
}

int op_dm_alloc(struct worker *w)
{
	int s = pick_slot(w, SLOTS(w->wd.dm));
	struct ibv_alloc_dm_attr attr = {
		.length = dm_len(w),
		.log_align_req = chance(w, 80) ? 0 : (uint32_t)rnd_below(w, 64),
		.comp_mask = chance(w, 95) ? 0 : (uint32_t)rnd(w),
	};
	struct ibv_dm *dm;

	if (s < 0)
		return op_dm_free(w);
	note(w, "length 0x%zx align %u mask 0x%x", attr.length,
	     attr.log_align_req, attr.comp_mask);
	dm = ibv_alloc_dm(w->wd.ctx, &attr);
	if (!dm)
		return errno;
	w->wd.dm[s] = dm;
	w->wd.dm_len[s] = attr.length;
	return 0;
}

int op_dm_free(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.dm)), ret;

	if (s < 0)
		return NOTHING;
	/* EBUSY while an MR uses it: it stays. */
	ret = ibv_free_dm(w->wd.dm[s]);
	if (!ret)
		w->wd.dm[s] = NULL;
	return ret;
}

int op_dm_copy(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.dm));
	bool to = chance(w, 50);
	uint64_t off, n;

	if (s < 0)
		return NOTHING;
	dm_range(w, w->wd.dm_len[s], &off, &n);
	/* The host side must stay in the arena: the DM side is the test. */
	if (n > ARENA_LEN)
		n = ARENA_LEN;
	note(w, "%s 0x%" PRIx64 "+0x%" PRIx64, to ? "to" : "from", off, n);
	if (to)
		return ibv_memcpy_to_dm(w->wd.dm[s], off, w->arena, n);
	return ibv_memcpy_from_dm(w->arena, w->wd.dm[s], off, n);
}

/* An MR into a free MR slot, its key published for the peers' WQEs. */
static int keep_mr(struct worker *w, int s, struct ibv_mr *mr, uint64_t addr,
		   uint64_t len)
{
	if (!mr)
		return errno;
	w->wd.mr[s] = mr;
	publish_key(w, mr->rkey, addr, len);
	return 0;
}

int op_dm_mr(struct worker *w)
{
	int s = pick_slot(w, SLOTS(w->wd.mr)), d = pick_used(w, SLOTS(w->wd.dm));
	unsigned int access = rnd_access(w);
	struct ibv_pd *pd = get_pd(w);
	uint64_t off, n;

	if (s < 0 || d < 0 || !pd)
		return NOTHING;
	dm_range(w, w->wd.dm_len[d], &off, &n);
	/* A DM MR is zero based: mostly ask for that. */
	if (chance(w, 80))
		access |= IBV_ACCESS_ZERO_BASED;
	note(w, "dm %d 0x%" PRIx64 "+0x%" PRIx64 " access 0x%x", d, off, n,
	     access);
	return keep_mr(w, s, ibv_reg_dm_mr(pd, w->wd.dm[d], off, n, access),
		       0, n);
}

/*
 * ibv_import_dm() into the thread's own context (the same ucontext) of
 * one of its DMs, mostly, else of a handle that names something else or
 * nothing; a copy through the import, then ibv_unimport_dm().
 */
int op_dm_import(struct worker *w)
{
	int d = pick_used(w, SLOTS(w->wd.dm)), ret;
	uint32_t handle;
	struct ibv_dm *dm;
	uint64_t off, n;

	if (d < 0 || chance(w, 15))
		handle = chance(w, 50) ? (uint32_t)rnd_edge(w) :
					 (uint32_t)rnd_below(w, 64);
	else
		handle = w->wd.dm[d]->handle;
	note(w, "handle %u", handle);
	dm = ibv_import_dm(w->wd.ctx, handle);
	if (!dm)
		return errno;
	dm_range(w, d >= 0 ? w->wd.dm_len[d] : 64, &off, &n);
	if (n > ARENA_LEN)
		n = ARENA_LEN;
	note(w, "handle %u from 0x%" PRIx64 "+0x%" PRIx64, handle, off, n);
	ret = ibv_memcpy_from_dm(w->arena, dm, off, n);
	ibv_unimport_dm(dm);
	return ret;
}

/* A dma-buf fd: an exported DM mostly, else something that is not one. */
static int some_dmabuf_fd(struct worker *w, uint64_t *len, bool *ours)
{
	int d = pick_used(w, SLOTS(w->wd.dm));
	struct bzcdv_export_dm_attr attr = {
		.comp_mask = chance(w, 95) ? 0 : rnd(w),
	};

	*ours = false;
	*len = 0;
	if (d < 0 || chance(w, 10)) {
		*len = rnd_edge(w);
		switch (rnd_below(w, 3)) {
		case 0:
			return -1;
		case 1:
			return w->wd.ctx->cmd_fd;	/* not a dma-buf */
		default:
			return (int)rnd_below(w, 1024);
		}
	}
	note(w, "export dm %d mask 0x%" PRIx64, d, attr.comp_mask);
	if (bzcdv_export_dm(w->wd.dm[d], &attr))
		return -errno;
	*len = w->wd.dm_len[d];
	*ours = true;
	return attr.fd;
}

int op_dmabuf_mr(struct worker *w)
{
	int s = pick_slot(w, SLOTS(w->wd.mr)), fd, ret;
	unsigned int access = rnd_access(w);
	struct ibv_pd *pd = get_pd(w);
	uint64_t len, off, n, iova;
	bool ours;

	if (s < 0 || !pd)
		return NOTHING;
	fd = some_dmabuf_fd(w, &len, &ours);
	if (fd < -1)
		return -fd;
	dm_range(w, len, &off, &n);
	/* iova must agree with the offset within a page (the core checks). */
	iova = chance(w, 80) ? off : rnd(w);
	note(w, "fd %d 0x%" PRIx64 "+0x%" PRIx64 " iova 0x%" PRIx64
	     " access 0x%x", fd, off, n, iova, access);
	ret = keep_mr(w, s, ibv_reg_dmabuf_mr(pd, off, n, iova, fd, access),
		      iova, n);
	/* The MR keeps the buffer; the fd is ours to close. */
	if (ours)
		close(fd);
	return ret;
}

int op_advise_mr(struct worker *w)
{
	static const enum ibv_advise_mr_advice advice[] = {
		IBV_ADVISE_MR_ADVICE_PREFETCH,
		IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
		IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
	};
	struct ibv_mr *mr = any_mr(w);
	struct ibv_sge sge[4];
	uint32_t i, n = 1 + (uint32_t)rnd_below(w, 4), flags;
	enum ibv_advise_mr_advice a;
	struct ibv_pd *pd;

	if (!mr)
		return NOTHING;
	pd = chance(w, 90) ? mr->pd : get_pd(w);
	if (!pd)
		return NOTHING;
	a = chance(w, 95) ? advice[rnd_below(w, 3)] :
			    (enum ibv_advise_mr_advice)rnd(w);
	flags = chance(w, 50) ? IBV_ADVISE_MR_FLAG_FLUSH : 0;
	if (chance(w, 5))
		flags = (uint32_t)rnd(w);
	for (i = 0; i < n; i++) {
		uint64_t len = mr->length ? rnd_below(w, mr->length) + 1 : 0;

		sge[i].addr = (uintptr_t)mr->addr +
			      (len < mr->length ? rnd_below(w, mr->length - len) : 0);
		sge[i].length = (uint32_t)len;
		sge[i].lkey = chance(w, 90) ? mr->lkey : rnd_key(w);
		if (chance(w, 5)) {
			sge[i].addr = rnd_edge(w);
			sge[i].length = (uint32_t)rnd_edge(w);
		}
	}
	note(w, "lkey 0x%x advice %d flags 0x%x sges %u", mr->lkey, a, flags, n);
	return ibv_advise_mr(pd, a, flags, sge, n);
}
