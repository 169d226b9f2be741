/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What the fuzzer reads of the provider's private structs
 * (providers/bzc/bzc.h): the rings of QPs, SRQs, CQs and bulk channels, and
 * the kernel handles of the direct-verbs objects.  The only file that
 * includes bzc.h, so a change there breaks one file here.
 */
#ifndef BZC_FUZZ_RINGS_H
#define BZC_FUZZ_RINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <infiniband/bzcdv.h>

/*
 * A mapped ring: the header (struct bzc_wq_ring_hdr or bzc_cq_ring_hdr, the
 * index words first) at base, entries slots of slot_size bytes at slots.
 */
struct ring {
	uint8_t *base;
	size_t len;
	uint8_t *slots;
	uint32_t entries;
	uint32_t slot_size;
};

bool ring_sq(struct ibv_qp *qp, struct ring *r);
bool ring_rq(struct ibv_qp *qp, struct ring *r);
bool ring_srq(struct ibv_srq *srq, struct ring *r);
bool ring_cq(struct ibv_cq *cq, struct ring *r);
bool ring_chan(struct bzcdv_bulk_chan *chan, struct ring *r);
uint32_t chan_handle(struct bzcdv_bulk_chan *chan);
uint32_t cmr_handle(struct bzcdv_mr_cached *mr);

/*
 * Take over an object's ring mappings (up to 2: base/len pairs), so they
 * outlive the provider's struct; returns how many.
 */
int rings_take(int kind, void *obj, void **base, size_t *len);

/* Unmap an abandoned object's rings (each mapping pins the uverbs file). */
void rings_unmap_qp(struct ibv_qp *qp);
void rings_unmap_cq(struct ibv_cq *cq);
void rings_unmap_srq(struct ibv_srq *srq);
void rings_unmap_chan(struct bzcdv_bulk_chan *chan);

#endif /* BZC_FUZZ_RINGS_H */
