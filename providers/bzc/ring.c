// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: mapping the rings the kernel allocates and shares with this process.
 *
 * Every QP, SRQ, CQ and bulk channel has its rings allocated by the kernel,
 * which describes each in the create (or resize) response: an mmap key on
 * the uverbs fd, the length to map, the number of slots and their size.
 * That description is input from outside this process and is checked
 * before anything is mapped or indexed with it.
 */

#include <errno.h>
#include <sys/mman.h>

#include "bzc.h"

/*
 * Map one work queue ring the kernel described, after checking that the
 * description is sound: a power-of-two number of power-of-two sized slots,
 * at least @max_wr of them, each at least @min_wqe_size bytes, all inside
 * the mapping.  Anything else is refused with EPROTO rather than trusted.
 */
int bzc_wq_map(struct ibv_context *context, struct bzc_wq *wq,
	       uint64_t mmap_key, uint32_t mmap_len, uint32_t entries,
	       uint32_t wqe_size, uint64_t min_wqe_size, uint32_t max_wr)
{
	void *addr;

	/* Free-running 32-bit indices need entries <= 2^31. */
	if (!entries || (entries & (entries - 1)) || entries > 1U << 31 ||
	    entries < max_wr)
		return EPROTO;
	if (!wqe_size || (wqe_size & (wqe_size - 1)) || wqe_size < min_wqe_size)
		return EPROTO;
	if ((uint64_t)mmap_len <
	    BZC_WQ_RING_WQE_OFFSET + (uint64_t)entries * wqe_size)
		return EPROTO;
	/* The key is an mmap offset: it must survive the trip through off_t. */
	if ((off_t)mmap_key < 0 || (uint64_t)(off_t)mmap_key != mmap_key)
		return EPROTO;

	addr = mmap(NULL, mmap_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		    context->cmd_fd, (off_t)mmap_key);
	if (addr == MAP_FAILED)
		return errno;

	wq->hdr = addr;
	wq->ring_len = mmap_len;
	wq->wqes = (uint8_t *)addr + BZC_WQ_RING_WQE_OFFSET;
	wq->entries = entries;
	wq->wqe_shift = (uint32_t)__builtin_ctz(wqe_size);
	/* Both 0 for a new QP; wherever the kernel says otherwise. */
	wq->prod = le32toh(__atomic_load_n(&wq->hdr->prod, __ATOMIC_RELAXED));
	wq->cons = le32toh(__atomic_load_n(&wq->hdr->cons, __ATOMIC_ACQUIRE));
	return 0;
}

void bzc_wq_unmap(struct bzc_wq *wq)
{
	if (wq->hdr)
		munmap(wq->hdr, wq->ring_len);
	wq->hdr = NULL;
	wq->wqes = NULL;
}
