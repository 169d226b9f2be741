// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Compile-time checks of the bzc uAPI layout (kernel-headers/rdma/bzc-abi.h).
 *
 * The build compiles this file for the native ABI and again with -m32 (and
 * -mx32 where the compiler supports it), so a struct whose layout differs
 * between i386, x32 and x86_64 fails the build.  The sizes are written out
 * as numbers on purpose: they are the ABI, not whatever the compiler
 * happens to produce.
 *
 * Every struct in bzc-abi.h must have a BZC_CHECK_SIZE() line here; the
 * build checks that too (providers/bzc/CMakeLists.txt).
 */
#include <stddef.h>

#include <rdma/bzc-abi.h>
#include <rdma/bzc_user_ioctl_verbs.h>

#define BZC_CHECK_SIZE(type, size)                                             \
	_Static_assert(sizeof(struct type) == (size),                          \
		       "sizeof(struct " #type ") != " #size)
#define BZC_CHECK_OFFSET(type, member, offset)                                 \
	_Static_assert(offsetof(struct type, member) == (offset),              \
		       "offsetof(struct " #type ", " #member ") != " #offset)
/* Appended to 8-byte aligned core structs, so 8-byte multiples only. */
#define BZC_CHECK_ALIGN(type)                                                  \
	_Static_assert(_Alignof(struct type) == 8 &&                           \
			       sizeof(struct type) % 8 == 0,                   \
		       "struct " #type " is not 8-byte aligned and sized")

BZC_CHECK_SIZE(bzc_alloc_ucontext_req, 8);
BZC_CHECK_OFFSET(bzc_alloc_ucontext_req, comp_mask, 0);
BZC_CHECK_ALIGN(bzc_alloc_ucontext_req);

BZC_CHECK_SIZE(bzc_alloc_ucontext_resp, 16);
BZC_CHECK_OFFSET(bzc_alloc_ucontext_resp, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_alloc_ucontext_resp, caps, 8);
BZC_CHECK_ALIGN(bzc_alloc_ucontext_resp);

/*
 * The CQ ring: header, slot offset, slots (kernel writes, process reads).
 * Each side's indices on a cache line of their own.
 */
_Static_assert(BZC_RING_LINE == 64, "ring header lines move");
BZC_CHECK_SIZE(bzc_cq_ring_hdr, 128);
BZC_CHECK_OFFSET(bzc_cq_ring_hdr, prod, 0);
BZC_CHECK_OFFSET(bzc_cq_ring_hdr, pad0, 4);
BZC_CHECK_OFFSET(bzc_cq_ring_hdr, cons, 64);
BZC_CHECK_OFFSET(bzc_cq_ring_hdr, arm, 68);
BZC_CHECK_OFFSET(bzc_cq_ring_hdr, pad1, 72);
_Static_assert(BZC_CQ_RING_CQE_OFFSET == 128, "CQE slots move");
_Static_assert(BZC_CQ_RING_CQE_OFFSET >= sizeof(struct bzc_cq_ring_hdr),
	       "CQE slots overlap the ring header");
_Static_assert(BZC_CQ_RING_CQE_OFFSET % 8 == 0, "CQE slots misaligned");

BZC_CHECK_SIZE(bzc_cqe, 56);
BZC_CHECK_OFFSET(bzc_cqe, wr_id, 0);
BZC_CHECK_OFFSET(bzc_cqe, byte_len, 8);
BZC_CHECK_OFFSET(bzc_cqe, imm_data, 12);
BZC_CHECK_OFFSET(bzc_cqe, qp_num, 16);
BZC_CHECK_OFFSET(bzc_cqe, src_qp, 20);
BZC_CHECK_OFFSET(bzc_cqe, vendor_err, 24);
BZC_CHECK_OFFSET(bzc_cqe, pkey_index, 28);
BZC_CHECK_OFFSET(bzc_cqe, slid, 30);
BZC_CHECK_OFFSET(bzc_cqe, status, 32);
BZC_CHECK_OFFSET(bzc_cqe, opcode, 33);
BZC_CHECK_OFFSET(bzc_cqe, wc_flags, 34);
BZC_CHECK_OFFSET(bzc_cqe, sl, 35);
BZC_CHECK_OFFSET(bzc_cqe, dlid_path_bits, 36);
BZC_CHECK_OFFSET(bzc_cqe, pad, 37);
BZC_CHECK_OFFSET(bzc_cqe, timestamp, 40);
BZC_CHECK_OFFSET(bzc_cqe, wallclock_ns, 48);
/* Slots follow each other with their 64-bit wr_id aligned. */
_Static_assert(_Alignof(struct bzc_cqe) == 8, "bzc_cqe alignment");

BZC_CHECK_SIZE(bzc_create_cq_resp, 16);
BZC_CHECK_OFFSET(bzc_create_cq_resp, mmap_key, 0);
BZC_CHECK_OFFSET(bzc_create_cq_resp, mmap_len, 8);
BZC_CHECK_OFFSET(bzc_create_cq_resp, entries, 12);
BZC_CHECK_ALIGN(bzc_create_cq_resp);

BZC_CHECK_SIZE(bzc_resize_cq_resp, 16);
BZC_CHECK_OFFSET(bzc_resize_cq_resp, mmap_key, 0);
BZC_CHECK_OFFSET(bzc_resize_cq_resp, mmap_len, 8);
BZC_CHECK_OFFSET(bzc_resize_cq_resp, entries, 12);
BZC_CHECK_ALIGN(bzc_resize_cq_resp);

/* Work queue rings: header, slot offset (process writes, kernel reads). */
BZC_CHECK_SIZE(bzc_wq_ring_hdr, 128);
BZC_CHECK_OFFSET(bzc_wq_ring_hdr, prod, 0);
BZC_CHECK_OFFSET(bzc_wq_ring_hdr, error, 4);
BZC_CHECK_OFFSET(bzc_wq_ring_hdr, pad0, 8);
BZC_CHECK_OFFSET(bzc_wq_ring_hdr, cons, 64);
BZC_CHECK_OFFSET(bzc_wq_ring_hdr, pad1, 68);
_Static_assert(BZC_WQ_RING_WQE_OFFSET == 128, "WQE slots move");
_Static_assert(BZC_WQ_RING_WQE_OFFSET >= sizeof(struct bzc_wq_ring_hdr),
	       "WQE slots overlap the ring header");

BZC_CHECK_SIZE(bzc_sge, 16);
BZC_CHECK_OFFSET(bzc_sge, addr, 0);
BZC_CHECK_OFFSET(bzc_sge, length, 8);
BZC_CHECK_OFFSET(bzc_sge, lkey, 12);
_Static_assert(_Alignof(struct bzc_sge) == 8, "bzc_sge alignment");

BZC_CHECK_SIZE(bzc_send_wqe, 64);
BZC_CHECK_OFFSET(bzc_send_wqe, wr_id, 0);
BZC_CHECK_OFFSET(bzc_send_wqe, opcode, 8);
BZC_CHECK_OFFSET(bzc_send_wqe, flags, 9);
BZC_CHECK_OFFSET(bzc_send_wqe, num_sge, 10);
BZC_CHECK_OFFSET(bzc_send_wqe, pad0, 11);
BZC_CHECK_OFFSET(bzc_send_wqe, imm_data, 12);
BZC_CHECK_OFFSET(bzc_send_wqe, rdma.remote_addr, 16);
BZC_CHECK_OFFSET(bzc_send_wqe, rdma.rkey, 24);
BZC_CHECK_OFFSET(bzc_send_wqe, rdma.pad, 28);
BZC_CHECK_OFFSET(bzc_send_wqe, atomic.remote_addr, 16);
BZC_CHECK_OFFSET(bzc_send_wqe, atomic.compare_add, 24);
BZC_CHECK_OFFSET(bzc_send_wqe, atomic.swap, 32);
BZC_CHECK_OFFSET(bzc_send_wqe, atomic.rkey, 40);
BZC_CHECK_OFFSET(bzc_send_wqe, atomic.pad, 44);
BZC_CHECK_OFFSET(bzc_send_wqe, flush.remote_addr, 16);
BZC_CHECK_OFFSET(bzc_send_wqe, flush.rkey, 24);
BZC_CHECK_OFFSET(bzc_send_wqe, flush.length, 28);
BZC_CHECK_OFFSET(bzc_send_wqe, flush.type, 32);
BZC_CHECK_OFFSET(bzc_send_wqe, flush.level, 33);
BZC_CHECK_OFFSET(bzc_send_wqe, flush.pad, 34);
BZC_CHECK_OFFSET(bzc_send_wqe, ud.ah, 16);
BZC_CHECK_OFFSET(bzc_send_wqe, ud.remote_qpn, 20);
BZC_CHECK_OFFSET(bzc_send_wqe, ud.remote_qkey, 24);
BZC_CHECK_OFFSET(bzc_send_wqe, ud.pad, 28);
BZC_CHECK_OFFSET(bzc_send_wqe, bind.addr, 16);
BZC_CHECK_OFFSET(bzc_send_wqe, bind.length, 24);
BZC_CHECK_OFFSET(bzc_send_wqe, bind.mw_rkey, 32);
BZC_CHECK_OFFSET(bzc_send_wqe, bind.mr_lkey, 36);
BZC_CHECK_OFFSET(bzc_send_wqe, bind.access, 40);
BZC_CHECK_OFFSET(bzc_send_wqe, bind.pad, 44);
BZC_CHECK_OFFSET(bzc_send_wqe, inline_len, 48);
BZC_CHECK_OFFSET(bzc_send_wqe, xrc_srqn, 52);
BZC_CHECK_OFFSET(bzc_send_wqe, pad1, 56);
_Static_assert(_Alignof(struct bzc_send_wqe) == 8, "bzc_send_wqe alignment");
/* SGEs or inline data follow the header directly, 8-byte aligned. */
_Static_assert(BZC_SEND_WQE_DATA_OFFSET == sizeof(struct bzc_send_wqe),
	       "send WQE data offset");
_Static_assert(BZC_SEND_WQE_DATA_OFFSET % _Alignof(struct bzc_sge) == 0,
	       "send WQE SGEs misaligned");

BZC_CHECK_SIZE(bzc_recv_wqe, 16);
BZC_CHECK_OFFSET(bzc_recv_wqe, wr_id, 0);
BZC_CHECK_OFFSET(bzc_recv_wqe, num_sge, 8);
BZC_CHECK_OFFSET(bzc_recv_wqe, pad, 9);
/* Its SGEs follow at sizeof(struct bzc_recv_wqe). */
_Static_assert(sizeof(struct bzc_recv_wqe) % _Alignof(struct bzc_sge) == 0,
	       "receive WQE SGEs misaligned");

BZC_CHECK_SIZE(bzc_create_qp_resp, 40);
BZC_CHECK_OFFSET(bzc_create_qp_resp, sq_mmap_key, 0);
BZC_CHECK_OFFSET(bzc_create_qp_resp, rq_mmap_key, 8);
BZC_CHECK_OFFSET(bzc_create_qp_resp, sq_mmap_len, 16);
BZC_CHECK_OFFSET(bzc_create_qp_resp, rq_mmap_len, 20);
BZC_CHECK_OFFSET(bzc_create_qp_resp, sq_entries, 24);
BZC_CHECK_OFFSET(bzc_create_qp_resp, rq_entries, 28);
BZC_CHECK_OFFSET(bzc_create_qp_resp, sq_wqe_size, 32);
BZC_CHECK_OFFSET(bzc_create_qp_resp, rq_wqe_size, 36);
BZC_CHECK_ALIGN(bzc_create_qp_resp);

/* The SRQ ring is an RQ ring; the response says where and how big. */
BZC_CHECK_SIZE(bzc_create_srq_resp, 24);
BZC_CHECK_OFFSET(bzc_create_srq_resp, mmap_key, 0);
BZC_CHECK_OFFSET(bzc_create_srq_resp, mmap_len, 8);
BZC_CHECK_OFFSET(bzc_create_srq_resp, entries, 12);
BZC_CHECK_OFFSET(bzc_create_srq_resp, wqe_size, 16);
BZC_CHECK_OFFSET(bzc_create_srq_resp, pad, 20);
BZC_CHECK_ALIGN(bzc_create_srq_resp);

/* BZC_METHOD_SRQ_RESIZE: the new ring described as at creation. */
BZC_CHECK_SIZE(bzc_srq_resize_cmd, 16);
BZC_CHECK_OFFSET(bzc_srq_resize_cmd, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_srq_resize_cmd, max_wr, 8);
BZC_CHECK_OFFSET(bzc_srq_resize_cmd, pad, 12);
BZC_CHECK_ALIGN(bzc_srq_resize_cmd);
BZC_CHECK_SIZE(bzc_srq_resize_resp, 32);
BZC_CHECK_OFFSET(bzc_srq_resize_resp, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_srq_resize_resp, mmap_key, 8);
BZC_CHECK_OFFSET(bzc_srq_resize_resp, mmap_len, 16);
BZC_CHECK_OFFSET(bzc_srq_resize_resp, entries, 20);
BZC_CHECK_OFFSET(bzc_srq_resize_resp, wqe_size, 24);
BZC_CHECK_OFFSET(bzc_srq_resize_resp, pad, 28);
BZC_CHECK_ALIGN(bzc_srq_resize_resp);

/*
 * The exception to BZC_CHECK_ALIGN: the CREATE_AH core response is 4
 * bytes, so the kernel writes this at a 4-byte aligned offset, and it must
 * not be 8-byte aligned or the provider's struct would pad before it.
 */
BZC_CHECK_SIZE(bzc_create_ah_resp, 8);
BZC_CHECK_OFFSET(bzc_create_ah_resp, ah_index, 0);
BZC_CHECK_OFFSET(bzc_create_ah_resp, pad, 4);
_Static_assert(_Alignof(struct bzc_create_ah_resp) == 4,
	       "bzc_create_ah_resp must be 4-byte aligned");

BZC_CHECK_SIZE(bzc_dm_query_resp, 24);
BZC_CHECK_OFFSET(bzc_dm_query_resp, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_dm_query_resp, length, 8);
BZC_CHECK_OFFSET(bzc_dm_query_resp, mmap_offset, 16);
BZC_CHECK_ALIGN(bzc_dm_query_resp);

BZC_CHECK_SIZE(bzc_bulk_caps, 48);
BZC_CHECK_OFFSET(bzc_bulk_caps, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_bulk_caps, max_bulk_len, 8);
BZC_CHECK_OFFSET(bzc_bulk_caps, mr_cache_max_bytes, 16);
BZC_CHECK_OFFSET(bzc_bulk_caps, max_bulk_sge, 24);
BZC_CHECK_OFFSET(bzc_bulk_caps, max_chan_depth, 28);
BZC_CHECK_OFFSET(bzc_bulk_caps, seg_bytes, 32);
BZC_CHECK_OFFSET(bzc_bulk_caps, workers, 36);
BZC_CHECK_OFFSET(bzc_bulk_caps, max_chans, 40);
BZC_CHECK_OFFSET(bzc_bulk_caps, pad, 44);
BZC_CHECK_ALIGN(bzc_bulk_caps);

BZC_CHECK_SIZE(bzc_mr_cache_stats, 56);
BZC_CHECK_OFFSET(bzc_mr_cache_stats, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_mr_cache_stats, hits, 8);
BZC_CHECK_OFFSET(bzc_mr_cache_stats, misses, 16);
BZC_CHECK_OFFSET(bzc_mr_cache_stats, evictions, 24);
BZC_CHECK_OFFSET(bzc_mr_cache_stats, invalidations, 32);
BZC_CHECK_OFFSET(bzc_mr_cache_stats, pinned_bytes, 40);
BZC_CHECK_OFFSET(bzc_mr_cache_stats, entries, 48);
BZC_CHECK_ALIGN(bzc_mr_cache_stats);

BZC_CHECK_SIZE(bzc_bulk_chan_create_cmd, 16);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_cmd, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_cmd, depth, 8);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_cmd, pad, 12);
BZC_CHECK_ALIGN(bzc_bulk_chan_create_cmd);

BZC_CHECK_SIZE(bzc_bulk_chan_create_resp, 32);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_resp, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_resp, mmap_key, 8);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_resp, mmap_len, 16);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_resp, entries, 20);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_resp, wqe_size, 24);
BZC_CHECK_OFFSET(bzc_bulk_chan_create_resp, chan_num, 28);
BZC_CHECK_ALIGN(bzc_bulk_chan_create_resp);

BZC_CHECK_SIZE(bzc_bulk_chan_connect_cmd, 32);
BZC_CHECK_OFFSET(bzc_bulk_chan_connect_cmd, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_bulk_chan_connect_cmd, remote_gid, 8);
BZC_CHECK_OFFSET(bzc_bulk_chan_connect_cmd, remote_chan, 24);
BZC_CHECK_OFFSET(bzc_bulk_chan_connect_cmd, sgid_index, 28);
BZC_CHECK_ALIGN(bzc_bulk_chan_connect_cmd);

BZC_CHECK_SIZE(bzc_bulk_sge, 24);
BZC_CHECK_OFFSET(bzc_bulk_sge, addr, 0);
BZC_CHECK_OFFSET(bzc_bulk_sge, length, 8);
BZC_CHECK_OFFSET(bzc_bulk_sge, lkey, 16);
BZC_CHECK_OFFSET(bzc_bulk_sge, pad, 20);
BZC_CHECK_ALIGN(bzc_bulk_sge);

BZC_CHECK_SIZE(bzc_bulk_wqe, BZC_BULK_WQE_SGE_OFFSET);
BZC_CHECK_OFFSET(bzc_bulk_wqe, wr_id, 0);
BZC_CHECK_OFFSET(bzc_bulk_wqe, remote_addr, 8);
BZC_CHECK_OFFSET(bzc_bulk_wqe, opcode, 16);
BZC_CHECK_OFFSET(bzc_bulk_wqe, flags, 17);
BZC_CHECK_OFFSET(bzc_bulk_wqe, num_sge, 18);
BZC_CHECK_OFFSET(bzc_bulk_wqe, rkey, 20);
BZC_CHECK_OFFSET(bzc_bulk_wqe, remote_chan, 24);
BZC_CHECK_OFFSET(bzc_bulk_wqe, imm_data, 28);
BZC_CHECK_ALIGN(bzc_bulk_wqe);

BZC_CHECK_SIZE(bzc_cached_mr_reg_cmd, 32);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_cmd, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_cmd, addr, 8);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_cmd, length, 16);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_cmd, access, 24);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_cmd, pad, 28);
BZC_CHECK_ALIGN(bzc_cached_mr_reg_cmd);

BZC_CHECK_SIZE(bzc_cached_mr_reg_resp, 24);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_resp, comp_mask, 0);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_resp, lkey, 8);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_resp, rkey, 12);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_resp, flags, 16);
BZC_CHECK_OFFSET(bzc_cached_mr_reg_resp, pad, 20);
BZC_CHECK_ALIGN(bzc_cached_mr_reg_resp);

_Static_assert(BZC_BULK_WQE_FENCE <= 0xff, "bzc_bulk_wqe.flags is 8 bits");
_Static_assert(BZC_BULK_OP_COPY <= 0xff, "bzc_bulk_wqe.opcode is 8 bits");

/* The arm values and CQE flags fit their fields. */
_Static_assert(BZC_CQ_ARM_NONE == 0, "the kernel clears arm to 0");
_Static_assert(BZC_CQ_ARM_NEXT != BZC_CQ_ARM_SOLICITED, "arm values");
_Static_assert((BZC_CQE_WITH_IMM | BZC_CQE_WITH_INV | BZC_CQE_GRH |
		BZC_CQE_SOLICITED) <= 0xff,
	       "bzc_cqe.wc_flags is 8 bits");

_Static_assert((BZC_WQE_SIGNALED | BZC_WQE_SOLICITED | BZC_WQE_FENCE |
		BZC_WQE_INLINE) <= 0xff,
	       "bzc_send_wqe.flags is 8 bits");

/* Driver id 0 is RDMA_DRIVER_UNKNOWN, which libibverbs never matches. */
_Static_assert(BZC_RDMA_DRIVER_ID != 0, "driver id 0 is the wildcard");
_Static_assert(BZC_RDMA_DRIVER_ID <= 0xffffffffu, "driver id is 32 bits");
_Static_assert(BZC_UVERBS_ABI_VERSION > 0, "uverbs ABI version 0");

/* ISO C forbids an empty translation unit. */
extern int bzc_abi_check_unused;
