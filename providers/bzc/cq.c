// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: completion queues.
 *
 * The kernel allocates each CQ ring and hands out an mmap key for it in the
 * create and resize responses (struct bzc_create_cq_resp).  Completions are
 * then consumed entirely in userspace: the kernel writes a CQE and
 * publishes hdr->prod with a release store; poll_cq reads prod with an
 * acquire load, converts the CQEs in [cons, prod) and publishes its new
 * cons with a release store.  Arming for a completion event is a store to
 * hdr->arm; the kernel clears it when it raises the event.  Only create,
 * resize and destroy enter the kernel.
 */

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rdma/bzc_user_ioctl_verbs.h>

#include "bzc.h"

/* The CQE carries the kernel's opcode and status values unchanged. */
#define BZC_SAME_OPCODE(name)                                                  \
	_Static_assert((int)IBV_WC_##name == (int)IB_UVERBS_WC_##name,         \
		       "IBV_WC_" #name " != IB_UVERBS_WC_" #name)
BZC_SAME_OPCODE(SEND);
BZC_SAME_OPCODE(RDMA_WRITE);
BZC_SAME_OPCODE(RDMA_READ);
BZC_SAME_OPCODE(COMP_SWAP);
BZC_SAME_OPCODE(FETCH_ADD);
BZC_SAME_OPCODE(BIND_MW);
BZC_SAME_OPCODE(LOCAL_INV);
BZC_SAME_OPCODE(TSO);
_Static_assert(IBV_WC_RECV == 128 && IBV_WC_RECV_RDMA_WITH_IMM == 129,
	       "receive opcodes differ from the kernel's ib_wc_opcode");

/* What bzc_create_cq_ex() accepts. */
enum {
	BZC_CQ_INIT_ATTR_MASK_KNOWN =
		IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD,
	BZC_CREATE_CQ_ATTR_FLAGS_KNOWN = IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
					 IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN,
	BZC_CQ_TS_WC_FLAGS = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			     IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	BZC_CQ_SUP_WC_FLAGS = IBV_WC_STANDARD_FLAGS | BZC_CQ_TS_WC_FLAGS,
};

/* A validated ring mapping, before it is installed in a CQ. */
struct bzc_cq_ring {
	struct bzc_cq_ring_hdr *hdr;
	size_t len;
	uint32_t entries;
};

/* Map the ring the kernel described; errors as bzc_ring_map(). */
static int bzc_cq_ring_map(struct ibv_context *context, uint64_t mmap_key,
			   uint32_t mmap_len, uint32_t entries,
			   struct bzc_cq_ring *ring)
{
	const struct bzc_ring_desc desc = {
		.mmap_key = mmap_key,
		.mmap_len = mmap_len,
		.entries = entries,
		/* cq->cqe is an int: 2^30 is its largest power of two. */
		.max_entries = INT_MAX / 2 + 1,
		.slot_offset = BZC_CQ_RING_CQE_OFFSET,
		.slot_size = sizeof(struct bzc_cqe),
	};
	void *addr;
	int ret;

	ret = bzc_ring_map(context, &desc, &addr);
	if (ret)
		return ret;

	ring->hdr = addr;
	ring->len = mmap_len;
	ring->entries = entries;
	return 0;
}

static void bzc_cq_ring_install(struct bzc_cq *cq,
				const struct bzc_cq_ring *ring)
{
	cq->hdr = ring->hdr;
	cq->ring_len = ring->len;
	cq->cqes = (struct bzc_cqe *)((uint8_t *)ring->hdr +
				      BZC_CQ_RING_CQE_OFFSET);
	cq->entries = ring->entries;
	/* Where the kernel expects consumption to continue (0 when new). */
	cq->cons = le32toh(__atomic_load_n(&ring->hdr->cons, __ATOMIC_ACQUIRE));
	cq->cur = NULL;
	cq->vcq.cq.cqe = (int)ring->entries;
}

static void bzc_cq_ring_unmap(struct bzc_cq *cq)
{
	if (cq->hdr)
		munmap(cq->hdr, cq->ring_len);
	cq->hdr = NULL;
	cq->cqes = NULL;
	cq->ring_len = 0;
	cq->entries = 0;
}

static inline void bzc_cq_lock(struct bzc_cq *cq)
{
	if (!cq->single_threaded)
		pthread_spin_lock(&cq->lock);
}

static inline void bzc_cq_unlock(struct bzc_cq *cq)
{
	if (!cq->single_threaded)
		pthread_spin_unlock(&cq->lock);
}

/*
 * Completions ready to consume, or -1 if the ring is lost or prod is not
 * within `entries` ahead of cons (the kernel never lets that happen; it
 * would mean this process corrupted hdr->cons).  The acquire load orders
 * the reads of the CQEs after it.
 */
static inline int64_t bzc_cq_avail(struct bzc_cq *cq)
{
	uint32_t prod, avail;

	if (!cq->hdr)
		return -1;
	prod = le32toh(__atomic_load_n(&cq->hdr->prod, __ATOMIC_ACQUIRE));
	avail = prod - cq->cons;
	if (avail > cq->entries)
		return -1;
	return avail;
}

static inline const struct bzc_cqe *bzc_cq_slot(struct bzc_cq *cq,
						uint32_t index)
{
	return &cq->cqes[index & (cq->entries - 1)];
}

/* Hand the consumed slots back to the kernel. */
static inline void bzc_cq_publish_cons(struct bzc_cq *cq)
{
	__atomic_store_n(&cq->hdr->cons, htole32(cq->cons), __ATOMIC_RELEASE);
}

static inline unsigned int bzc_cqe_wc_flags(const struct bzc_cqe *cqe)
{
	unsigned int flags = 0;

	if (cqe->wc_flags & BZC_CQE_WITH_IMM)
		flags |= IBV_WC_WITH_IMM;
	if (cqe->wc_flags & BZC_CQE_WITH_INV)
		flags |= IBV_WC_WITH_INV;
	if (cqe->wc_flags & BZC_CQE_GRH)
		flags |= IBV_WC_GRH;
	return flags;
}

static inline void bzc_cqe_to_wc(const struct bzc_cqe *cqe, struct ibv_wc *wc)
{
	uint32_t imm = le32toh(cqe->imm_data);

	wc->wr_id = le64toh(cqe->wr_id);
	wc->status = (enum ibv_wc_status)cqe->status;
	wc->opcode = (enum ibv_wc_opcode)cqe->opcode;
	wc->vendor_err = le32toh(cqe->vendor_err);
	wc->byte_len = le32toh(cqe->byte_len);
	/*
	 * The CQE holds the immediate in host order; ibv_wc wants it in
	 * network order.  An invalidated rkey shares the field and is a
	 * plain number.
	 */
	if (cqe->wc_flags & BZC_CQE_WITH_INV)
		wc->invalidated_rkey = imm;
	else
		wc->imm_data = htobe32(imm);
	wc->qp_num = le32toh(cqe->qp_num);
	wc->src_qp = le32toh(cqe->src_qp);
	wc->wc_flags = bzc_cqe_wc_flags(cqe);
	wc->pkey_index = le16toh(cqe->pkey_index);
	wc->slid = le16toh(cqe->slid);
	wc->sl = cqe->sl;
	wc->dlid_path_bits = cqe->dlid_path_bits;
}

int bzc_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct bzc_cq *cq = to_bcq(ibcq);
	int64_t avail;
	int i, n;

	bzc_cq_lock(cq);

	avail = bzc_cq_avail(cq);
	if (avail < 0) {
		bzc_cq_unlock(cq);
		errno = EIO;
		return -EIO;
	}

	n = num_entries < avail ? num_entries : (int)avail;
	for (i = 0; i < n; i++)
		bzc_cqe_to_wc(bzc_cq_slot(cq, cq->cons + i), &wc[i]);

	if (n > 0) {
		cq->cons += n;
		bzc_cq_publish_cons(cq);
	} else {
		n = 0;
	}

	bzc_cq_unlock(cq);
	return n;
}

/*
 * Drop the unpolled completions of QP @qpn (the QP went to RESET, which
 * discards its work, as mlx4/mlx5 do): the others move up, in order,
 * over the dropped ones, and cons advances past the gap.  Only slots
 * between cons and the prod read here are touched; the kernel writes
 * beyond prod only, and a cons that moves forward only gives it room.
 * Must not be called between start_poll and end_poll on this thread.
 */
void bzc_cq_clean(struct ibv_cq *ibcq, uint32_t qpn)
{
	struct bzc_cq *cq = to_bcq(ibcq);
	uint32_t i, removed = 0;
	int64_t avail;

	bzc_cq_lock(cq);
	avail = bzc_cq_avail(cq);
	for (i = (uint32_t)(avail > 0 ? avail : 0); i-- > 0;) {
		const struct bzc_cqe *cqe = bzc_cq_slot(cq, cq->cons + i);

		if (le32toh(cqe->qp_num) == qpn)
			removed++;
		else if (removed)
			memcpy((void *)bzc_cq_slot(cq, cq->cons + i + removed),
			       cqe, sizeof(*cqe));
	}
	if (removed) {
		cq->cons += removed;
		bzc_cq_publish_cons(cq);
	}
	bzc_cq_unlock(cq);
}

/* ---------------------------------------------------------------------- */
/* Extended polling (ibv_cq_ex)                                             */
/* ---------------------------------------------------------------------- */

/*
 * The iterator: cq->cur points at the slot of index cq->cons while a
 * completion is current.  next_poll and end_poll consume it; cons reaches
 * the ring header once, in end_poll.  The lock is held from a successful
 * start_poll to end_poll.
 */
static int bzc_cq_iter_load(struct bzc_cq *cq)
{
	int64_t avail = bzc_cq_avail(cq);

	if (avail < 0)
		return EIO;
	if (avail == 0)
		return ENOENT;

	cq->cur = bzc_cq_slot(cq, cq->cons);
	cq->vcq.cq_ex.wr_id = le64toh(cq->cur->wr_id);
	cq->vcq.cq_ex.status = (enum ibv_wc_status)cq->cur->status;
	return 0;
}

static int bzc_start_poll(struct ibv_cq_ex *ibcq, struct ibv_poll_cq_attr *attr)
{
	struct bzc_cq *cq = to_bcq_ex(ibcq);
	int ret;

	/* No attributes are defined yet. */
	if (attr->comp_mask) {
		bzc_err(ibcq->context, "start_poll comp_mask %#x is not supported\n",
			attr->comp_mask);
		return EINVAL;
	}

	bzc_cq_lock(cq);
	ret = bzc_cq_iter_load(cq);
	/* On failure the caller does not call end_poll. */
	if (ret)
		bzc_cq_unlock(cq);
	return ret;
}

static int bzc_next_poll(struct ibv_cq_ex *ibcq)
{
	struct bzc_cq *cq = to_bcq_ex(ibcq);

	if (cq->cur) {
		cq->cons++;
		cq->cur = NULL;
	}
	/* On failure the caller still calls end_poll. */
	return bzc_cq_iter_load(cq);
}

static void bzc_end_poll(struct ibv_cq_ex *ibcq)
{
	struct bzc_cq *cq = to_bcq_ex(ibcq);

	if (cq->cur) {
		cq->cons++;
		cq->cur = NULL;
	}
	if (cq->hdr)
		bzc_cq_publish_cons(cq);
	bzc_cq_unlock(cq);
}

static enum ibv_wc_opcode bzc_wc_read_opcode(struct ibv_cq_ex *ibcq)
{
	return (enum ibv_wc_opcode)to_bcq_ex(ibcq)->cur->opcode;
}

static uint32_t bzc_wc_read_vendor_err(struct ibv_cq_ex *ibcq)
{
	return le32toh(to_bcq_ex(ibcq)->cur->vendor_err);
}

static uint32_t bzc_wc_read_byte_len(struct ibv_cq_ex *ibcq)
{
	return le32toh(to_bcq_ex(ibcq)->cur->byte_len);
}

/*
 * Also what ibv_wc_read_invalidated_rkey() calls, which returns the value
 * unconverted: like the union in struct ibv_wc, an immediate is returned in
 * network order and an invalidated rkey as a plain number.
 */
static __be32 bzc_wc_read_imm_data(struct ibv_cq_ex *ibcq)
{
	const struct bzc_cqe *cqe = to_bcq_ex(ibcq)->cur;
	uint32_t imm = le32toh(cqe->imm_data);

	if (cqe->wc_flags & BZC_CQE_WITH_INV)
		return (__be32)imm;
	return htobe32(imm);
}

static uint32_t bzc_wc_read_qp_num(struct ibv_cq_ex *ibcq)
{
	return le32toh(to_bcq_ex(ibcq)->cur->qp_num);
}

static uint32_t bzc_wc_read_src_qp(struct ibv_cq_ex *ibcq)
{
	return le32toh(to_bcq_ex(ibcq)->cur->src_qp);
}

static unsigned int bzc_wc_read_wc_flags(struct ibv_cq_ex *ibcq)
{
	return bzc_cqe_wc_flags(to_bcq_ex(ibcq)->cur);
}

static uint32_t bzc_wc_read_slid(struct ibv_cq_ex *ibcq)
{
	return le16toh(to_bcq_ex(ibcq)->cur->slid);
}

static uint8_t bzc_wc_read_sl(struct ibv_cq_ex *ibcq)
{
	return to_bcq_ex(ibcq)->cur->sl;
}

static uint8_t bzc_wc_read_dlid_path_bits(struct ibv_cq_ex *ibcq)
{
	return to_bcq_ex(ibcq)->cur->dlid_path_bits;
}

/* Device clock ticks: CLOCK_MONOTONIC nanoseconds (hca_core_clock 1 GHz). */
static uint64_t bzc_wc_read_completion_ts(struct ibv_cq_ex *ibcq)
{
	return le64toh(to_bcq_ex(ibcq)->cur->timestamp);
}

static uint64_t bzc_wc_read_completion_wallclock_ns(struct ibv_cq_ex *ibcq)
{
	return le64toh(to_bcq_ex(ibcq)->cur->wallclock_ns);
}

/* ---------------------------------------------------------------------- */
/* Create, resize, destroy                                                  */
/* ---------------------------------------------------------------------- */

static struct bzc_cq *bzc_cq_alloc(void)
{
	struct bzc_cq *cq;
	int ret;

	/*
	 * Zeroed: until the caller runs verbs_init_cq() on success, a failed
	 * create may call ibv_cmd_destroy_cq(), which locks cq->mutex and
	 * reads the event counters; all-zero is their initial state.
	 */
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	ret = pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}

	/* Every bzc CQ can be polled either way. */
	cq->vcq.cq_ex.start_poll = bzc_start_poll;
	cq->vcq.cq_ex.next_poll = bzc_next_poll;
	cq->vcq.cq_ex.end_poll = bzc_end_poll;
	cq->vcq.cq_ex.read_opcode = bzc_wc_read_opcode;
	cq->vcq.cq_ex.read_vendor_err = bzc_wc_read_vendor_err;
	cq->vcq.cq_ex.read_byte_len = bzc_wc_read_byte_len;
	cq->vcq.cq_ex.read_imm_data = bzc_wc_read_imm_data;
	cq->vcq.cq_ex.read_qp_num = bzc_wc_read_qp_num;
	cq->vcq.cq_ex.read_src_qp = bzc_wc_read_src_qp;
	cq->vcq.cq_ex.read_wc_flags = bzc_wc_read_wc_flags;
	cq->vcq.cq_ex.read_slid = bzc_wc_read_slid;
	cq->vcq.cq_ex.read_sl = bzc_wc_read_sl;
	cq->vcq.cq_ex.read_dlid_path_bits = bzc_wc_read_dlid_path_bits;
	cq->vcq.cq_ex.read_completion_ts = bzc_wc_read_completion_ts;
	cq->vcq.cq_ex.read_completion_wallclock_ns =
		bzc_wc_read_completion_wallclock_ns;

	return cq;
}

static void bzc_cq_free(struct bzc_cq *cq)
{
	pthread_spin_destroy(&cq->lock);
	free(cq);
}

/*
 * Second half of both creates: map the ring of a CQ the kernel has just
 * created.  On failure the kernel object is destroyed again and cq freed.
 */
static int bzc_cq_finish_create(struct ibv_context *context, struct bzc_cq *cq,
				const struct bzc_create_cq_resp *drv)
{
	struct bzc_cq_ring ring = {};
	int ret;

	ret = bzc_cq_ring_map(context, drv->mmap_key, drv->mmap_len,
			      drv->entries, &ring);
	if (ret) {
		ibv_cmd_destroy_cq(&cq->vcq.cq);
		bzc_cq_free(cq);
		return ret;
	}

	bzc_cq_ring_install(cq, &ring);
	return 0;
}

struct ibv_cq *bzc_create_cq(struct ibv_context *context, int cqe,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct ubzc_create_cq_resp resp = {};
	struct bzc_cq *cq;
	int ret;

	cq = bzc_cq_alloc();
	if (!cq)
		return NULL;

	/* No driver request data: the kernel sizes the ring from cqe. */
	ret = ibv_cmd_create_cq(context, cqe, channel, comp_vector,
				&cq->vcq.cq, NULL, 0, &resp.ibv_resp,
				sizeof(resp));
	if (ret) {
		bzc_cq_free(cq);
		errno = ret;
		return NULL;
	}

	ret = bzc_cq_finish_create(context, cq, &resp.drv_payload);
	if (ret) {
		errno = ret;
		return NULL;
	}

	return &cq->vcq.cq;
}

struct ibv_cq_ex *bzc_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr)
{
	struct ubzc_create_cq_ex_resp resp = {};
	struct ibv_cq_init_attr_ex ts_attr;
	struct bzc_cq *cq;
	int ret;

	if (attr->comp_mask & ~BZC_CQ_INIT_ATTR_MASK_KNOWN) {
		bzc_err(context, "unsupported comp_mask bits %#x\n",
			attr->comp_mask & ~BZC_CQ_INIT_ATTR_MASK_KNOWN);
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* A CQ on a parent domain (pd.c): one of this context, or EINVAL. */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || attr->parent_domain->context != context ||
	     !to_bpd(attr->parent_domain)->protection)) {
		bzc_err(context, "parent_domain is no parent domain of this context\n");
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) {
		if (attr->flags & ~BZC_CREATE_CQ_ATTR_FLAGS_KNOWN) {
			bzc_err(context, "unknown flags %#x\n",
				attr->flags & ~BZC_CREATE_CQ_ATTR_FLAGS_KNOWN);
			errno = EINVAL;
			return NULL;
		}
		/* Overflow always puts a bzc CQ in error. */
		if (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) {
			bzc_err(context,
				"IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN is not supported\n");
			errno = EOPNOTSUPP;
			return NULL;
		}
	}
	/* CVLAN, flow tag, tag matching. */
	if (attr->wc_flags & ~(uint64_t)BZC_CQ_SUP_WC_FLAGS) {
		bzc_err(context, "unsupported wc_flags %#llx\n",
			(unsigned long long)(attr->wc_flags &
					     ~(uint64_t)BZC_CQ_SUP_WC_FLAGS));
		errno = EOPNOTSUPP;
		return NULL;
	}

	cq = bzc_cq_alloc();
	if (!cq)
		return NULL;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		cq->single_threaded = true;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    bzc_pd_single_threaded(attr->parent_domain))
		cq->single_threaded = true;

	/*
	 * The kernel stamps CQEs of a CQ created with
	 * IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION, which libibverbs sets for
	 * IBV_WC_EX_WITH_COMPLETION_TIMESTAMP: ask for it for the wall clock
	 * too, as the kernel writes both.
	 */
	ts_attr = *attr;
	if (attr->wc_flags & BZC_CQ_TS_WC_FLAGS)
		ts_attr.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	ret = ibv_cmd_create_cq_ex(context, &ts_attr, &cq->vcq, NULL, 0,
				   &resp.ibv_resp, sizeof(resp), 0);
	if (ret) {
		bzc_cq_free(cq);
		errno = ret;
		return NULL;
	}

	ret = bzc_cq_finish_create(context, cq, &resp.drv_payload);
	if (ret) {
		errno = ret;
		return NULL;
	}

	return &cq->vcq.cq_ex;
}

/*
 * Arm through the ring header; no system call.  This is one half of a
 * Dekker pair: here store arm, then (full fence) load prod in the next
 * poll; in the kernel store prod, then (full barrier) exchange arm with 0
 * and raise the event if it was armed.  At least one side sees the
 * other's store, so a poll - arm - poll sequence never misses both the
 * completion and the event.  The fence is needed because the poll's load
 * of prod is only an acquire, which may otherwise be satisfied before the
 * arm store is visible.
 */
int bzc_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct bzc_cq *cq = to_bcq(ibcq);
	uint32_t expected = htole32(BZC_CQ_ARM_NONE);

	bzc_cq_lock(cq);
	if (!cq->hdr) {
		bzc_cq_unlock(cq);
		return EIO;
	}

	if (solicited_only)
		/* Never downgrade a pending arm for the next completion. */
		__atomic_compare_exchange_n(&cq->hdr->arm, &expected,
					    htole32(BZC_CQ_ARM_SOLICITED),
					    false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	else
		__atomic_store_n(&cq->hdr->arm, htole32(BZC_CQ_ARM_NEXT),
				 __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);

	bzc_cq_unlock(cq);
	return 0;
}

int bzc_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct bzc_cq *cq = to_bcq(ibcq);
	struct ibv_resize_cq cmd = {};
	struct ubzc_resize_cq_resp resp = {};
	struct bzc_cq_ring ring = {};
	int ret;

	bzc_cq_lock(cq);
	if (!cq->hdr) {
		ret = EIO;
		goto out;
	}

	/* The kernel moves the CQEs from cons on to the new ring. */
	bzc_cq_publish_cons(cq);

	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (ret)
		goto out;

	ret = bzc_cq_ring_map(ibcq->context, resp.drv_payload.mmap_key,
			      resp.drv_payload.mmap_len,
			      resp.drv_payload.entries, &ring);
	if (ret) {
		/*
		 * The kernel has switched to a ring this process cannot
		 * see.  The old ring receives nothing any more, so the CQ
		 * is lost: polling it fails from now on.
		 */
		bzc_cq_ring_unmap(cq);
		ibcq->cqe = 0;
		goto out;
	}

	bzc_cq_ring_unmap(cq);
	bzc_cq_ring_install(cq, &ring);
out:
	bzc_cq_unlock(cq);
	if (ret)
		errno = ret;
	return ret;
}

int bzc_destroy_cq(struct ibv_cq *ibcq)
{
	struct bzc_cq *cq = to_bcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;

	bzc_cq_ring_unmap(cq);
	bzc_cq_free(cq);
	return 0;
}
