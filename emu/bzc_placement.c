// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the responder's operations on single words and regions, RC only:
 * the atomics (CMP_AND_SWP, FETCH_AND_ADD) and the IBTA Memory Placement
 * Extensions, RDMA ATOMIC_WRITE and FLUSH. The requester (bzc_req.c)
 * checks the WQE and gathers the operands into the message; here the
 * target QP's rights and the rkey are checked and the operation placed.
 * Each function answers with an AETH syndrome; a NAK is a class C error of
 * the responder, which bzc_resp.c takes the QP to the error state for.
 *
 * Everything the device writes is a CPU store done before the WQE
 * completes, and WQEs execute in order, so a FLUSH finds every earlier
 * write placed; making it visible to all takes a barrier. The device has
 * no persistent memory: no MR can grant FLUSH to persistence.
 */
#include <linux/highmem.h>

#include "bzc.h"
#include "bzc_compat.h"
#include "bzc_xport.h"

/*
 * The 8 bytes an atomic or ATOMIC_WRITE works on: an 8-byte aligned
 * address under @rkey (of @pd) with @access, on a QP that allows @access.
 * Returns BZC_AETH_ACK with *@mr referenced and the word mapped (undo
 * with bzc_resp_unmap_u64()), or the NAK: INV_REQ for a misaligned
 * address, REM_ACCESS for missing rights or bounds, or, in an ODP MR, a
 * page that cannot be faulted in for writing.
 */
static u8 bzc_resp_map_u64(struct bzc_qp *tqp, struct ib_pd *pd,
			   const struct bzc_msg *msg, int access,
			   struct bzc_mr **mr, u64 **p)
{
	struct bzc_dev *bdev = to_bdev(tqp->ibqp.device);
	u64 raddr = msg->remote_addr;
	struct page *page;
	u64 off, byte;

	if (!IS_ALIGNED(raddr, sizeof(u64)))
		return BZC_AETH_NAK_INV_REQ;
	if (!(READ_ONCE(tqp->access) & access))
		return BZC_AETH_NAK_REM_ACCESS;
	*mr = bzc_rkey_get(bdev, msg->rkey, tqp, pd, raddr, sizeof(u64),
			   access, &off);
	if (!*mr)
		return BZC_AETH_NAK_REM_ACCESS;
	/* An iova aligned otherwise than the pages is misaligned there. */
	byte = (*mr)->page_off + off;
	if (!IS_ALIGNED(byte, sizeof(u64))) {
		bzc_mr_put(*mr);
		return BZC_AETH_NAK_INV_REQ;
	}
	if (!(*mr)->odp) {
		page = (*mr)->pages[byte >> PAGE_SHIFT];
	} else {
		/*
		 * Fault the page in writable, then hold the MR's table
		 * locked while the word is used, so no invalidation takes
		 * the page meanwhile; it may have gone again in between.
		 */
		for (;;) {
			if (bzc_odp_fault(*mr, off, sizeof(u64), true, true)) {
				bzc_mr_put(*mr);
				return BZC_AETH_NAK_REM_ACCESS;
			}
			bzc_odp_lock();
			page = bzc_odp_page(*mr, off, true);
			if (page)
				break;
			bzc_odp_unlock();
		}
	}
	/* Aligned 8 bytes never straddle a page. */
	*p = kmap_local_page(page) + offset_in_page(byte);
	return BZC_AETH_ACK;
}

/* Undo a successful bzc_resp_map_u64(). */
static void bzc_resp_unmap_u64(struct bzc_mr *mr, u64 *p)
{
	kunmap_local(p);
	if (mr->odp)
		bzc_odp_unlock();
	bzc_mr_put(mr);
}

/**
 * bzc_resp_atomic_pd() - execute CMP_AND_SWP or FETCH_AND_ADD at a responder
 * @tqp: the responder QP
 * @pd: the PD the rkey must be of: the QP's, or an XRC SRQ's
 * @msg: the message: opcode, remote_addr, rkey, compare_add and swap
 * @orig: where the original value goes, for the atomic ACK
 *
 * Atomic against the CPUs and other atomics too; needs remote atomic
 * rights on the QP and the rkey.
 *
 * Return: BZC_AETH_ACK, or the NAK syndrome (see bzc_resp_map_u64()).
 */
u8 bzc_resp_atomic_pd(struct bzc_qp *tqp, struct ib_pd *pd,
		      const struct bzc_msg *msg, u64 *orig)
{
	struct bzc_mr *mr;
	u64 *p;
	u8 syndrome;

	syndrome = bzc_resp_map_u64(tqp, pd, msg, IB_ACCESS_REMOTE_ATOMIC,
				    &mr, &p);
	if (syndrome != BZC_AETH_ACK)
		return syndrome;
	if (msg->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP)
		*orig = cmpxchg64(p, msg->compare_add, msg->swap);
	else
		*orig = atomic64_fetch_add(msg->compare_add, (atomic64_t *)p);
	bzc_resp_unmap_u64(mr, p);
	return BZC_AETH_ACK;
}

/* bzc_resp_atomic_pd() under a key of the QP's PD. */
u8 bzc_resp_atomic(struct bzc_qp *tqp, const struct bzc_msg *msg, u64 *orig)
{
	return bzc_resp_atomic_pd(tqp, tqp->ibqp.pd, msg, orig);
}

/**
 * bzc_resp_atomic_write() - place an RDMA ATOMIC_WRITE at a responder
 * @tqp: the responder QP
 * @msg: the message: remote_addr, rkey, and the 8 bytes in swap
 *
 * The 8 bytes go to an 8-byte aligned address under an rkey with remote
 * write rights, on a QP that allows remote writes, as one store: no other
 * access, atomics included, sees part of it.
 *
 * Return: BZC_AETH_ACK, or the NAK syndrome (see bzc_resp_map_u64()).
 */
u8 bzc_resp_atomic_write(struct bzc_qp *tqp, const struct bzc_msg *msg)
{
	struct bzc_mr *mr;
	u64 *p;
	u8 syndrome;

	syndrome = bzc_resp_map_u64(tqp, tqp->ibqp.pd, msg,
				    IB_ACCESS_REMOTE_WRITE, &mr, &p);
	if (syndrome != BZC_AETH_ACK)
		return syndrome;
	atomic64_set((atomic64_t *)p, msg->swap);
	bzc_resp_unmap_u64(mr, p);
	return BZC_AETH_ACK;
}

/**
 * bzc_resp_flush() - execute an RDMA FLUSH at a responder
 * @tqp: the responder QP
 * @msg: the message: rkey, flush_type, flush_level, and for the range
 *	 level remote_addr and length
 *
 * The placement type (global visibility, persistence) must be granted by
 * the QP's access flags and by the MR the rkey names
 * (IB_ACCESS_FLUSH_GLOBAL, _PERSISTENT); at the range level the range
 * must lie in it, at the memory region level address and length are not
 * looked at.
 *
 * Return: BZC_AETH_ACK, BZC_AETH_NAK_INV_REQ for an unknown type or
 * level, BZC_AETH_NAK_REM_ACCESS for missing rights or bounds.
 */
u8 bzc_resp_flush(struct bzc_qp *tqp, const struct bzc_msg *msg)
{
	struct bzc_dev *bdev = to_bdev(tqp->ibqp.device);
	u8 type = msg->flush_type;
	struct bzc_mr *mr;
	int access = 0;
	u64 off;

	if (!type || type & ~(BZC_FLUSH_GLOBAL | BZC_FLUSH_PERSISTENT) ||
	    msg->flush_level > BZC_FLUSH_MR)
		return BZC_AETH_NAK_INV_REQ;
	if (type & BZC_FLUSH_GLOBAL)
		access |= BZC_ACCESS_FLUSH_GLOBAL;
	if (type & BZC_FLUSH_PERSISTENT)
		access |= BZC_ACCESS_FLUSH_PERSISTENT;
	if ((READ_ONCE(tqp->access) & access) != access)
		return BZC_AETH_NAK_REM_ACCESS;

	if (msg->flush_level == BZC_FLUSH_MR)
		mr = bzc_rkey_get_region(bdev, msg->rkey, tqp, access);
	else
		mr = bzc_rkey_get(bdev, msg->rkey, tqp, tqp->ibqp.pd,
				  msg->remote_addr, msg->length, access, &off);
	if (!mr)
		return BZC_AETH_NAK_REM_ACCESS;
	/* Earlier writes were stores of this kernel: order them before. */
	smp_mb();
	bzc_mr_put(mr);
	return BZC_AETH_ACK;
}
