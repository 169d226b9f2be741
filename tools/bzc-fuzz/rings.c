// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The provider's private structs, read to find rings and handles (see
 * rings.h).  Built against the same providers/bzc/bzc.h as the library it
 * runs with (one build tree), so the layouts agree.
 */
#include <sys/mman.h>

#include "bzc.h"
#include "fuzz.h"
#include "rings.h"

static bool ring_wq(struct bzc_wq *wq, struct ring *r)
{
	if (!wq->hdr)
		return false;
	r->base = (uint8_t *)wq->hdr;
	r->len = wq->ring_len;
	r->slots = wq->wqes;
	r->entries = wq->entries;
	r->slot_size = 1U << wq->wqe_shift;
	return true;
}

bool ring_sq(struct ibv_qp *qp, struct ring *r)
{
	return ring_wq(&to_bqp(qp)->sq, r);
}

bool ring_rq(struct ibv_qp *qp, struct ring *r)
{
	return ring_wq(&to_bqp(qp)->rq, r);
}

bool ring_srq(struct ibv_srq *srq, struct ring *r)
{
	return ring_wq(&to_bsrq(srq)->wq, r);
}

static struct bzc_bulk_chan *to_chan(struct bzcdv_bulk_chan *chan)
{
	return container_of(chan, struct bzc_bulk_chan, dv);
}

bool ring_chan(struct bzcdv_bulk_chan *chan, struct ring *r)
{
	return ring_wq(&to_chan(chan)->wq, r);
}

bool ring_cq(struct ibv_cq *ibcq, struct ring *r)
{
	struct bzc_cq *cq = to_bcq(ibcq);

	if (!cq->hdr)
		return false;
	r->base = (uint8_t *)cq->hdr;
	r->len = cq->ring_len;
	r->slots = (uint8_t *)cq->cqes;
	r->entries = cq->entries;
	r->slot_size = sizeof(struct bzc_cqe);
	return true;
}

uint32_t chan_handle(struct bzcdv_bulk_chan *chan)
{
	return to_chan(chan)->handle;
}

uint32_t cmr_handle(struct bzcdv_mr_cached *mr)
{
	return container_of(mr, struct bzc_mr_cached, dv)->handle;
}

static void unmap_wq(struct bzc_wq *wq)
{
	if (wq->hdr)
		munmap(wq->hdr, wq->ring_len);
	wq->hdr = NULL;
}

void rings_unmap_qp(struct ibv_qp *qp)
{
	unmap_wq(&to_bqp(qp)->sq);
	unmap_wq(&to_bqp(qp)->rq);
}

void rings_unmap_srq(struct ibv_srq *srq)
{
	unmap_wq(&to_bsrq(srq)->wq);
}

void rings_unmap_chan(struct bzcdv_bulk_chan *chan)
{
	unmap_wq(&to_chan(chan)->wq);
}

void rings_unmap_cq(struct ibv_cq *ibcq)
{
	struct bzc_cq *cq = to_bcq(ibcq);

	if (cq->hdr)
		munmap(cq->hdr, cq->ring_len);
	cq->hdr = NULL;
}

static int take_wq(struct bzc_wq *wq, void **base, size_t *len)
{
	if (!wq->hdr)
		return 0;
	*base = wq->hdr;
	*len = wq->ring_len;
	wq->hdr = NULL;
	return 1;
}

int rings_take(int kind, void *obj, void **base, size_t *len)
{
	struct bzc_cq *cq;
	int n = 0;

	switch (kind) {
	case A_QP:
		n = take_wq(&to_bqp(obj)->sq, base, len);
		n += take_wq(&to_bqp(obj)->rq, base + n, len + n);
		break;
	case A_SRQ:
		n = take_wq(&to_bsrq(obj)->wq, base, len);
		break;
	case A_CHAN:
		n = take_wq(&to_chan(obj)->wq, base, len);
		break;
	case A_CQ:
		cq = to_bcq(obj);
		if (cq->hdr) {
			*base = cq->hdr;
			*len = cq->ring_len;
			cq->hdr = NULL;
			n = 1;
		}
		break;
	}
	return n;
}
