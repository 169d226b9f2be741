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
#include <string.h>
#include <sys/mman.h>

#include "bzc.h"

/*
 * Check the description of a ring, then map it; *@addr is the mapping.
 * Refused with EPROTO rather than trusted: a number of slots that is not a
 * power of two, or outside [min_entries, max_entries]; slots that do not
 * all fit in the mapping; a key that is no mmap offset.  A failed mmap or
 * madvise returns its errno.
 *
 * The mapping is not inherited by fork(): a child would share the ring
 * memory but keep its own copies of the indices, so anything it polled or
 * posted would consume the parent's completions or run as the parent's
 * work.  In a child the address is unmapped and touching it faults, as
 * with the queues of hardware providers after ibv_fork_init().
 */
int bzc_ring_map(struct ibv_context *context, const struct bzc_ring_desc *desc,
		 void **addr)
{
	void *ring;
	int ret;

	if (!bzc_is_pow2(desc->entries) ||
	    desc->entries < desc->min_entries ||
	    desc->entries > desc->max_entries) {
		bzc_err(context,
			"kernel ring of %u slots: not a power of two in [%u, %u]\n",
			desc->entries, desc->min_entries, desc->max_entries);
		return EPROTO;
	}
	if ((uint64_t)desc->mmap_len <
	    desc->slot_offset + (uint64_t)desc->entries * desc->slot_size) {
		bzc_err(context,
			"kernel ring of %u bytes cannot hold %u slots of %u bytes from offset %u\n",
			desc->mmap_len, desc->entries, desc->slot_size,
			desc->slot_offset);
		return EPROTO;
	}
	/* The key is an mmap offset: it must survive the trip through off_t. */
	if ((off_t)desc->mmap_key < 0 ||
	    (uint64_t)(off_t)desc->mmap_key != desc->mmap_key) {
		bzc_err(context, "kernel ring mmap key %#llx is no file offset\n",
			(unsigned long long)desc->mmap_key);
		return EPROTO;
	}

	ring = mmap(NULL, desc->mmap_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		    context->cmd_fd, (off_t)desc->mmap_key);
	if (ring == MAP_FAILED) {
		ret = errno;
		bzc_err(context, "mmap of a %u-byte ring failed: %s\n",
			desc->mmap_len, strerror(ret));
		return ret;
	}
	if (madvise(ring, desc->mmap_len, MADV_DONTFORK)) {
		ret = errno;
		bzc_err(context, "madvise(MADV_DONTFORK) of a ring failed: %s\n",
			strerror(ret));
		munmap(ring, desc->mmap_len);
		return ret;
	}

	*addr = ring;
	return 0;
}

/*
 * Map one work queue ring the kernel described: a power-of-two number of
 * power-of-two sized slots, at least @max_wr of them, each at least
 * @min_wqe_size bytes.  Errors as bzc_ring_map().
 */
int bzc_wq_map(struct ibv_context *context, struct bzc_wq *wq,
	       uint64_t mmap_key, uint32_t mmap_len, uint32_t entries,
	       uint32_t wqe_size, uint64_t min_wqe_size, uint32_t max_wr)
{
	const struct bzc_ring_desc desc = {
		.mmap_key = mmap_key,
		.mmap_len = mmap_len,
		.entries = entries,
		.min_entries = max_wr,
		/* Free-running 32-bit indices need entries <= 2^31. */
		.max_entries = 1U << 31,
		.slot_offset = BZC_WQ_RING_WQE_OFFSET,
		.slot_size = wqe_size,
	};
	void *addr = NULL;
	int ret;

	if (!bzc_is_pow2(wqe_size) || wqe_size < min_wqe_size) {
		bzc_err(context,
			"kernel ring slots of %u bytes: not a power of two of at least %llu\n",
			wqe_size, (unsigned long long)min_wqe_size);
		return EPROTO;
	}
	ret = bzc_ring_map(context, &desc, &addr);
	if (ret)
		return ret;

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
