/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzc: scatter-gather lists over MRs and the device's one copy
 * (bzc_sgl.c), shared by the requester, the responder and the completer.
 */
#ifndef BZC_SGL_H
#define BZC_SGL_H

#include "bzc.h"

/*
 * A byte range of an MR, with a reference on the MR; or (mr NULL) of
 * pinned pages someone else holds for as long as the SGL is used (a bulk
 * channel's MR cache range, bzc_sgl_add_pages()).
 */
struct bzc_seg {
	struct bzc_mr *mr;
	struct page **pages;	/* mr NULL: the pages */
	u64 off;		/* from the MR's first byte, or from pages[0]'s */
	u64 len;
};

/* Where a message's bytes come from or go to: MR ranges or kernel memory. */
struct bzc_sgl {
	struct bzc_seg seg[BZC_MAX_SGE];
	u32 n;
	u64 total;
	const void *kbuf;	/* instead of seg[]: inline data, GRH, result */
};

/* A position in a bzc_sgl. */
struct bzc_cursor {
	const struct bzc_sgl *sgl;
	u32 i;
	u64 pos;
};

static inline void bzc_sgl_init(struct bzc_sgl *sgl)
{
	sgl->n = 0;
	sgl->total = 0;
	sgl->kbuf = NULL;
}

/* An SGL over kernel memory: inline data, a GRH, an atomic's result. */
static inline void bzc_sgl_kbuf(struct bzc_sgl *sgl, const void *buf, u64 len)
{
	sgl->n = 0;
	sgl->kbuf = buf;
	sgl->total = len;
}

void bzc_sgl_put(struct bzc_sgl *sgl);
bool bzc_sgl_add(struct bzc_sgl *sgl, struct bzc_dev *bdev, struct ib_pd *pd,
		 struct bzc_qp *rqp, u32 key, u64 addr, u64 len, int access);
void bzc_sgl_add_pages(struct bzc_sgl *sgl, struct page **pages, u64 off,
		       u64 len);
bool bzc_sgl_from_sges(struct bzc_sgl *sgl, struct bzc_dev *bdev,
		       struct ib_pd *pd, const struct bzc_sge *sge, u32 num_sge,
		       int access);
void bzc_cursor_skip(struct bzc_cursor *c, u64 n);
int bzc_sgl_fault(const struct bzc_cursor *c, u64 len, bool write);
/* bzc_copy()'s result: the side whose ODP MR page was not there */
#define BZC_COPY_DST_LOST	BIT(0)
#define BZC_COPY_SRC_LOST	BIT(1)
int __must_check bzc_copy(struct bzc_cursor *dst, struct bzc_cursor *src,
			  u64 len, bool may_sleep);

#endif /* BZC_SGL_H */
