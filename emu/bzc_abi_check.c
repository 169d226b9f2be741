// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: compile-time layout checks of the uAPI structs, as the kernel sees
 * them. The provider checks the same numbers natively and with -m32, so all
 * three ABIs (i386, x32, x86_64) must agree with these.
 */
#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <rdma/bzc-abi.h>

static_assert(sizeof(struct bzc_alloc_ucontext_req) == 8);
static_assert(offsetof(struct bzc_alloc_ucontext_req, comp_mask) == 0);

static_assert(sizeof(struct bzc_alloc_ucontext_resp) == 16);
static_assert(offsetof(struct bzc_alloc_ucontext_resp, comp_mask) == 0);
static_assert(offsetof(struct bzc_alloc_ucontext_resp, caps) == 8);

static_assert(BZC_RING_LINE == 64);
static_assert(sizeof(struct bzc_cq_ring_hdr) == 2 * BZC_RING_LINE);
static_assert(offsetof(struct bzc_cq_ring_hdr, prod) == 0);
static_assert(offsetof(struct bzc_cq_ring_hdr, cons) == BZC_RING_LINE);
static_assert(offsetof(struct bzc_cq_ring_hdr, arm) == BZC_RING_LINE + 4);
static_assert(sizeof(struct bzc_cq_ring_hdr) == BZC_CQ_RING_CQE_OFFSET);

static_assert(sizeof(struct bzc_cqe) == 56);
static_assert(offsetof(struct bzc_cqe, wr_id) == 0);
static_assert(offsetof(struct bzc_cqe, byte_len) == 8);
static_assert(offsetof(struct bzc_cqe, imm_data) == 12);
static_assert(offsetof(struct bzc_cqe, qp_num) == 16);
static_assert(offsetof(struct bzc_cqe, src_qp) == 20);
static_assert(offsetof(struct bzc_cqe, vendor_err) == 24);
static_assert(offsetof(struct bzc_cqe, pkey_index) == 28);
static_assert(offsetof(struct bzc_cqe, slid) == 30);
static_assert(offsetof(struct bzc_cqe, status) == 32);
static_assert(offsetof(struct bzc_cqe, opcode) == 33);
static_assert(offsetof(struct bzc_cqe, wc_flags) == 34);
static_assert(offsetof(struct bzc_cqe, sl) == 35);
static_assert(offsetof(struct bzc_cqe, dlid_path_bits) == 36);
static_assert(offsetof(struct bzc_cqe, timestamp) == 40);
static_assert(offsetof(struct bzc_cqe, wallclock_ns) == 48);

static_assert(sizeof(struct bzc_create_cq_resp) == 16);
static_assert(offsetof(struct bzc_create_cq_resp, mmap_key) == 0);
static_assert(offsetof(struct bzc_create_cq_resp, mmap_len) == 8);
static_assert(offsetof(struct bzc_create_cq_resp, entries) == 12);
static_assert(sizeof(struct bzc_resize_cq_resp) ==
	      sizeof(struct bzc_create_cq_resp));

static_assert(sizeof(struct bzc_wq_ring_hdr) == 2 * BZC_RING_LINE);
static_assert(offsetof(struct bzc_wq_ring_hdr, prod) == 0);
static_assert(offsetof(struct bzc_wq_ring_hdr, error) == 4);
static_assert(offsetof(struct bzc_wq_ring_hdr, cons) == BZC_RING_LINE);
static_assert(sizeof(struct bzc_wq_ring_hdr) == BZC_WQ_RING_WQE_OFFSET);

static_assert(sizeof(struct bzc_sge) == 16);
static_assert(offsetof(struct bzc_sge, length) == 8);
static_assert(offsetof(struct bzc_sge, lkey) == 12);

static_assert(sizeof(struct bzc_send_wqe) == BZC_SEND_WQE_DATA_OFFSET);
static_assert(offsetof(struct bzc_send_wqe, opcode) == 8);
static_assert(offsetof(struct bzc_send_wqe, flags) == 9);
static_assert(offsetof(struct bzc_send_wqe, num_sge) == 10);
static_assert(offsetof(struct bzc_send_wqe, imm_data) == 12);
static_assert(offsetof(struct bzc_send_wqe, rdma.remote_addr) == 16);
static_assert(offsetof(struct bzc_send_wqe, rdma.rkey) == 24);
static_assert(offsetof(struct bzc_send_wqe, atomic.compare_add) == 24);
static_assert(offsetof(struct bzc_send_wqe, atomic.swap) == 32);
static_assert(offsetof(struct bzc_send_wqe, atomic.rkey) == 40);
static_assert(offsetof(struct bzc_send_wqe, flush.remote_addr) == 16);
static_assert(offsetof(struct bzc_send_wqe, flush.rkey) == 24);
static_assert(offsetof(struct bzc_send_wqe, flush.length) == 28);
static_assert(offsetof(struct bzc_send_wqe, flush.type) == 32);
static_assert(offsetof(struct bzc_send_wqe, flush.level) == 33);
static_assert(offsetof(struct bzc_send_wqe, ud.ah) == 16);
static_assert(offsetof(struct bzc_send_wqe, ud.remote_qpn) == 20);
static_assert(offsetof(struct bzc_send_wqe, ud.remote_qkey) == 24);
static_assert(offsetof(struct bzc_send_wqe, bind.mw_rkey) == 32);
static_assert(offsetof(struct bzc_send_wqe, inline_len) == 48);
static_assert(offsetof(struct bzc_send_wqe, xrc_srqn) == 52);
static_assert(offsetof(struct bzc_send_wqe, pad1) == 56);

static_assert(sizeof(struct bzc_recv_wqe) == 16);
static_assert(offsetof(struct bzc_recv_wqe, num_sge) == 8);

static_assert(sizeof(struct bzc_create_qp_resp) == 40);
static_assert(offsetof(struct bzc_create_qp_resp, rq_mmap_key) == 8);
static_assert(offsetof(struct bzc_create_qp_resp, sq_mmap_len) == 16);
static_assert(offsetof(struct bzc_create_qp_resp, sq_entries) == 24);
static_assert(offsetof(struct bzc_create_qp_resp, sq_wqe_size) == 32);
static_assert(offsetof(struct bzc_create_qp_resp, rq_wqe_size) == 36);

static_assert(sizeof(struct bzc_create_srq_resp) == 24);
static_assert(offsetof(struct bzc_create_srq_resp, mmap_key) == 0);
static_assert(offsetof(struct bzc_create_srq_resp, mmap_len) == 8);
static_assert(offsetof(struct bzc_create_srq_resp, entries) == 12);
static_assert(offsetof(struct bzc_create_srq_resp, wqe_size) == 16);
static_assert(offsetof(struct bzc_create_srq_resp, pad) == 20);

static_assert(sizeof(struct bzc_srq_resize_cmd) == 16);
static_assert(offsetof(struct bzc_srq_resize_cmd, max_wr) == 8);
static_assert(sizeof(struct bzc_srq_resize_resp) == 32);
static_assert(offsetof(struct bzc_srq_resize_resp, mmap_key) == 8);
static_assert(offsetof(struct bzc_srq_resize_resp, mmap_len) == 16);
static_assert(offsetof(struct bzc_srq_resize_resp, entries) == 20);
static_assert(offsetof(struct bzc_srq_resize_resp, wqe_size) == 24);

static_assert(sizeof(struct bzc_create_ah_resp) == 8);

static_assert(sizeof(struct bzc_dm_query_resp) == 24);
static_assert(offsetof(struct bzc_dm_query_resp, length) == 8);
static_assert(offsetof(struct bzc_dm_query_resp, mmap_offset) == 16);

static_assert(sizeof(struct bzc_bulk_caps) == 48);
static_assert(offsetof(struct bzc_bulk_caps, max_bulk_len) == 8);
static_assert(offsetof(struct bzc_bulk_caps, mr_cache_max_bytes) == 16);
static_assert(offsetof(struct bzc_bulk_caps, max_bulk_sge) == 24);
static_assert(offsetof(struct bzc_bulk_caps, workers) == 36);
static_assert(offsetof(struct bzc_bulk_caps, max_chans) == 40);

static_assert(sizeof(struct bzc_mr_cache_stats) == 56);
static_assert(offsetof(struct bzc_mr_cache_stats, hits) == 8);
static_assert(offsetof(struct bzc_mr_cache_stats, entries) == 48);

static_assert(sizeof(struct bzc_bulk_chan_create_cmd) == 16);
static_assert(offsetof(struct bzc_bulk_chan_create_cmd, depth) == 8);

static_assert(sizeof(struct bzc_bulk_chan_create_resp) == 32);
static_assert(offsetof(struct bzc_bulk_chan_create_resp, mmap_key) == 8);
static_assert(offsetof(struct bzc_bulk_chan_create_resp, mmap_len) == 16);
static_assert(offsetof(struct bzc_bulk_chan_create_resp, entries) == 20);
static_assert(offsetof(struct bzc_bulk_chan_create_resp, wqe_size) == 24);
static_assert(offsetof(struct bzc_bulk_chan_create_resp, chan_num) == 28);

static_assert(sizeof(struct bzc_bulk_chan_connect_cmd) == 32);
static_assert(offsetof(struct bzc_bulk_chan_connect_cmd, remote_gid) == 8);
static_assert(offsetof(struct bzc_bulk_chan_connect_cmd, remote_chan) == 24);
static_assert(offsetof(struct bzc_bulk_chan_connect_cmd, sgid_index) == 28);

static_assert(sizeof(struct bzc_bulk_sge) == 24);
static_assert(offsetof(struct bzc_bulk_sge, length) == 8);
static_assert(offsetof(struct bzc_bulk_sge, lkey) == 16);

static_assert(sizeof(struct bzc_bulk_wqe) == BZC_BULK_WQE_SGE_OFFSET);
static_assert(offsetof(struct bzc_bulk_wqe, remote_addr) == 8);
static_assert(offsetof(struct bzc_bulk_wqe, opcode) == 16);
static_assert(offsetof(struct bzc_bulk_wqe, flags) == 17);
static_assert(offsetof(struct bzc_bulk_wqe, num_sge) == 18);
static_assert(offsetof(struct bzc_bulk_wqe, rkey) == 20);
static_assert(offsetof(struct bzc_bulk_wqe, remote_chan) == 24);
static_assert(offsetof(struct bzc_bulk_wqe, imm_data) == 28);

static_assert(sizeof(struct bzc_cached_mr_reg_cmd) == 32);
static_assert(offsetof(struct bzc_cached_mr_reg_cmd, addr) == 8);
static_assert(offsetof(struct bzc_cached_mr_reg_cmd, length) == 16);
static_assert(offsetof(struct bzc_cached_mr_reg_cmd, access) == 24);

static_assert(sizeof(struct bzc_cached_mr_reg_resp) == 24);
static_assert(offsetof(struct bzc_cached_mr_reg_resp, lkey) == 8);
static_assert(offsetof(struct bzc_cached_mr_reg_resp, rkey) == 12);
static_assert(offsetof(struct bzc_cached_mr_reg_resp, flags) == 16);
