/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * bzc uAPI: driver data appended to standard uverbs commands and responses.
 *
 * Layout rules: fixed-width types only, explicit padding, 64-bit fields
 * naturally aligned so i386, x32 and x86_64 agree. Extensions append fields
 * and announce them with comp_mask bits; there are no reserved fields and
 * no version numbers. Every struct has its size checked in
 * emu/bzc_abi_check.c and providers/bzc/abi_check.c (also built with -m32).
 */
#ifndef BZC_ABI_USER_H
#define BZC_ABI_USER_H

#include <linux/types.h>
#include <rdma/bzc_user_ioctl_verbs.h>

/* IB_USER_VERBS_CMD_GET_CONTEXT / UVERBS_METHOD_GET_CONTEXT */
struct bzc_alloc_ucontext_req {
	__aligned_u64 comp_mask;	/* enum bzc_alloc_ucontext_req_mask */
};

struct bzc_alloc_ucontext_resp {
	__aligned_u64 comp_mask;	/* enum bzc_alloc_ucontext_resp_mask */
	__aligned_u64 caps;		/* enum bzc_device_caps */
};

/*
 * Ring headers keep what the kernel writes and what the process writes on
 * separate cache lines of BZC_RING_LINE bytes, so that posting or polling
 * on one side does not take the other side's line away on every index
 * update. A field the other side writes only on a rare state change sits
 * on the line of the side that reads it often. The header layout is part
 * of BZC_ALLOC_UCTX_REQ_SPLIT_RING_HDR.
 */
#define BZC_RING_LINE 64

/*
 * A CQ ring: struct bzc_cq_ring_hdr at offset 0, then `entries` slots of
 * struct bzc_cqe from BZC_CQ_RING_CQE_OFFSET, entries a power of two.
 * prod and cons count CQEs since creation (free-running, wrapping at 2^32);
 * slot i is at index i & (entries - 1). The kernel writes a CQE, then prod
 * (release); the process reads prod (acquire), the CQEs, then writes cons.
 * A cons that the kernel finds more than `entries` behind prod, or ahead of
 * it, means overflow: the CQ goes to error with IBV_EVENT_CQ_ERR.
 */
struct bzc_cq_ring_hdr {
	/* the kernel's line */
	__le32 prod;		/* written by the kernel */
	__u8 pad0[60];
	/* the process's line, which the kernel reads with every CQE */
	__le32 cons;		/* written by the process */
	__le32 arm;		/* enum bzc_cq_arm: process sets, kernel clears */
	__u8 pad1[56];
};

#define BZC_CQ_RING_CQE_OFFSET 128

/* One completion, little-endian, as the device writes it. */
struct bzc_cqe {
	__aligned_le64 wr_id;
	__le32 byte_len;
	__le32 imm_data;	/* immediate (host order) or invalidated rkey */
	__le32 qp_num;
	__le32 src_qp;
	__le32 vendor_err;
	__le16 pkey_index;
	__le16 slid;
	__u8 status;		/* enum ibv_wc_status (== enum ib_wc_status) */
	__u8 opcode;		/* enum ibv_wc_opcode (== enum ib_wc_opcode) */
	__u8 wc_flags;		/* enum bzc_cqe_flags */
	__u8 sl;
	__u8 dlid_path_bits;
	__u8 pad[3];
	/*
	 * When the CQE was written, in nanoseconds: CLOCK_MONOTONIC (the
	 * device clock, hca_core_clock 1 GHz) and CLOCK_REALTIME. Only in a
	 * CQ created with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION; 0 in
	 * others.
	 */
	__aligned_le64 timestamp;
	__aligned_le64 wallclock_ns;
};

/* IB_USER_VERBS_CMD_CREATE_CQ and _RESIZE_CQ / UVERBS_METHOD_CQ_CREATE */
struct bzc_create_cq_resp {
	__aligned_u64 mmap_key;	/* mmap offset of the ring on the uverbs fd */
	__u32 mmap_len;		/* bytes to map */
	__u32 entries;		/* CQE slots, a power of two */
};

struct bzc_resize_cq_resp {
	__aligned_u64 mmap_key;
	__u32 mmap_len;
	__u32 entries;
};

/*
 * Work queue rings (SQ and RQ): struct bzc_wq_ring_hdr at offset 0, then
 * `entries` slots of `wqe_size` bytes from BZC_WQ_RING_WQE_OFFSET; entries
 * and wqe_size are powers of two. The process writes WQEs, then prod
 * (release); the kernel copies each WQE out of the ring before it checks
 * it, then advances cons. A slot is free again once cons has passed it.
 * For the SQ the process then rings the doorbell, one syscall per
 * ibv_post_send call: BZC_METHOD_QP_DOORBELL when the context reports
 * BZC_CAP_QP_DOORBELL, else IB_USER_VERBS_CMD_POST_SEND with wr_count 0
 * (the kernel accepts both). The RQ needs none,
 * except once `error` is set: WQEs posted to a QP in the error state are
 * flushed by the kernel when the process sends IB_USER_VERBS_CMD_POST_RECV
 * with wr_count 0 (the RQ doorbell).
 */
struct bzc_wq_ring_hdr {
	/* the process's line */
	__le32 prod;		/* written by the process */
	/*
	 * Written by the kernel, non-zero once the queue failed: a QP in
	 * QPS_ERR, a corrupt SRQ, a stopped bulk channel. Rarely written;
	 * the process reads it on every receive or bulk post.
	 */
	__le32 error;
	__u8 pad0[56];
	/* the kernel's line */
	__le32 cons;		/* written by the kernel */
	__u8 pad1[60];
};

#define BZC_WQ_RING_WQE_OFFSET 128

/* One scatter/gather element in a WQE. */
struct bzc_sge {
	__aligned_le64 addr;
	__le32 length;
	__le32 lkey;
};

/*
 * Send WQE: this header, then num_sge struct bzc_sge, or with
 * BZC_WQE_INLINE inline_len bytes of data, from BZC_SEND_WQE_DATA_OFFSET.
 */
struct bzc_send_wqe {
	__aligned_le64 wr_id;
	__u8 opcode;		/* enum ib_uverbs_wr_opcode */
	__u8 flags;		/* enum bzc_wqe_flags */
	__u8 num_sge;
	__u8 pad0;
	__le32 imm_data;	/* immediate (host order) or rkey to invalidate */
	union {
		struct {
			__aligned_le64 remote_addr;
			__le32 rkey;
			__le32 pad;
		} rdma;
		struct {
			__aligned_le64 remote_addr;
			__aligned_le64 compare_add;
			__aligned_le64 swap;
			__le32 rkey;
			__le32 pad;
		} atomic;
		struct {			/* BZC_WR_FLUSH */
			__aligned_le64 remote_addr;
			__le32 rkey;
			__le32 length;		/* BZC_FLUSH_RANGE: bytes */
			__u8 type;		/* enum bzc_flush_type bits */
			__u8 level;		/* enum bzc_flush_level */
			__u8 pad[6];
		} flush;
		struct {
			__le32 ah;		/* bzc_create_ah_resp.ah_index */
			__le32 remote_qpn;
			__le32 remote_qkey;
			__le32 pad;
		} ud;
		struct {
			__aligned_le64 addr;
			__aligned_le64 length;
			__le32 mw_rkey;		/* the new rkey of the window */
			__le32 mr_lkey;
			__le32 access;		/* enum ib_uverbs_access_flags */
			__le32 pad;
		} bind;
	};
	__le32 inline_len;
	/*
	 * An XRC INI QP's WQEs (BZC_CAP_XRC): the number of the XRC SRQ at
	 * the target that the message's receive comes from, and whose PD
	 * its keys are checked in. Zero on other QPs.
	 */
	__le32 xrc_srqn;
	__le32 pad1[2];
};

#define BZC_SEND_WQE_DATA_OFFSET 64

/* Receive WQE: this header, then num_sge struct bzc_sge. */
struct bzc_recv_wqe {
	__aligned_le64 wr_id;
	__u8 num_sge;
	__u8 pad[7];
};

/* IB_USER_VERBS_CMD_CREATE_QP / UVERBS_METHOD_QP_CREATE */
struct bzc_create_qp_resp {
	__aligned_u64 sq_mmap_key;
	__aligned_u64 rq_mmap_key;	/* unused with an SRQ */
	__u32 sq_mmap_len;
	__u32 rq_mmap_len;
	__u32 sq_entries;
	__u32 rq_entries;
	__u32 sq_wqe_size;		/* bytes per SQ slot */
	__u32 rq_wqe_size;		/* bytes per RQ slot */
};

/*
 * IB_USER_VERBS_CMD_CREATE_SRQ / UVERBS_METHOD_SRQ_CREATE: the SRQ's ring,
 * laid out and used like an RQ ring (struct bzc_wq_ring_hdr, then
 * `entries` slots of `wqe_size` bytes, each a struct bzc_recv_wqe and its
 * SGEs). Any QP on the SRQ takes receives from it, so it needs no
 * doorbell and is never flushed; the kernel sets `error` in its header
 * only when it finds the ring corrupt (IBV_EVENT_SRQ_ERR).
 */
struct bzc_create_srq_resp {
	__aligned_u64 mmap_key;
	__u32 mmap_len;
	__u32 entries;		/* slots, a power of two */
	__u32 wqe_size;		/* bytes per slot, a power of two */
	__u32 pad;
};

/*
 * BZC_METHOD_SRQ_RESIZE (with BZC_CAP_SRQ_RESIZE): give the SRQ a ring of
 * at least max_wr slots, keeping the receives posted. The process stops
 * posting to the SRQ until the call returns. The kernel allocates the new
 * ring, then, under the SRQ's lock, reads the old ring's prod once and
 * refuses (EINVAL) a prod its ring cannot hold or more receives posted
 * than max_wr; else it copies the posted WQEs to the new ring at the same
 * free-running indices, with the same prod and cons in its header, and
 * takes receives only from the new ring from then on. The old ring stays
 * mapped in the process, unread, until the process unmaps it. max_wr
 * below an armed srq_limit, 0 or beyond max_srq_wr is EINVAL.
 */
struct bzc_srq_resize_cmd {
	__aligned_u64 comp_mask;	/* enum bzc_srq_resize_mask */
	__u32 max_wr;
	__u32 pad;
};

/* The new ring, described as at creation (struct bzc_create_srq_resp). */
struct bzc_srq_resize_resp {
	__aligned_u64 comp_mask;	/* none defined yet */
	__aligned_u64 mmap_key;
	__u32 mmap_len;
	__u32 entries;		/* slots, a power of two */
	__u32 wqe_size;		/* bytes per slot, as before */
	__u32 pad;
};

/* IB_USER_VERBS_CMD_CREATE_AH / UVERBS_METHOD_AH_CREATE */
struct bzc_create_ah_resp {
	__u32 ah_index;		/* what a UD send WQE names the AH by */
	__u32 pad;
};

/*
 * BZC_METHOD_DM_QUERY: a DM of the ucontext, for a context that did not
 * allocate it (ibv_import_dm()). The memory is mapped MAP_SHARED from the
 * uverbs fd at mmap_offset, length rounded up to whole pages, as after
 * UVERBS_METHOD_DM_ALLOC.
 */
struct bzc_dm_query_resp {
	__aligned_u64 comp_mask;	/* none defined yet */
	__aligned_u64 length;		/* bytes, as asked of DM_ALLOC */
	__aligned_u64 mmap_offset;	/* BZC_ATTR_ALLOC_DM_RESP_MMAP_OFFSET */
};

/*
 * Bulk transfers (bzc_user_ioctl_cmds.h: BZC_OBJECT_BULK_CHAN, _CACHED_MR).
 */

/* BZC_METHOD_QUERY_BULK_CAPS */
struct bzc_bulk_caps {
	__aligned_u64 comp_mask;	/* enum bzc_bulk_caps_mask */
	__aligned_u64 max_bulk_len;	/* bytes one bulk WQE may move */
	__aligned_u64 mr_cache_max_bytes; /* pinned bytes a PD's cache keeps */
	__u32 max_bulk_sge;		/* SGEs in one bulk WQE */
	__u32 max_chan_depth;		/* WQE slots of a channel ring */
	__u32 seg_bytes;		/* the unit a worker copies at a time */
	__u32 workers;			/* workers one WQE is spread over */
	/* BZC_BULK_CAPS_MAX_CHANS: channels the device holds at once */
	__u32 max_chans;
	__u32 pad;
};

/* BZC_METHOD_QUERY_MR_CACHE: the counters of one PD's cache. */
struct bzc_mr_cache_stats {
	__aligned_u64 comp_mask;	/* none defined yet */
	__aligned_u64 hits;		/* lookups served by pinned ranges */
	__aligned_u64 misses;		/* lookups that pinned pages */
	__aligned_u64 evictions;	/* ranges unpinned to stay in bounds */
	__aligned_u64 invalidations;	/* ranges dropped on munmap/mremap/... */
	__aligned_u64 pinned_bytes;	/* bytes pinned by the cache now */
	__aligned_u64 entries;		/* ranges in the cache now */
};

/* BZC_METHOD_BULK_CHAN_CREATE */
struct bzc_bulk_chan_create_cmd {
	__aligned_u64 comp_mask;	/* enum bzc_bulk_chan_create_mask */
	__u32 depth;			/* WQEs that may be outstanding */
	__u32 pad;
};

/*
 * The channel's ring: struct bzc_wq_ring_hdr at 0, then `entries` slots of
 * `wqe_size` bytes from BZC_WQ_RING_WQE_OFFSET, each a struct bzc_bulk_wqe,
 * with the producer/consumer rules of a QP's SQ. The doorbell is
 * BZC_METHOD_BULK_CHAN_DOORBELL; the kernel reads the ring only there.
 * The kernel sets `error` once the channel is stopped (its CQ or receive
 * CQ overflowed): nothing more runs, and its doorbell fails with EIO.
 */
struct bzc_bulk_chan_create_resp {
	__aligned_u64 comp_mask;	/* none defined yet */
	__aligned_u64 mmap_key;
	__u32 mmap_len;
	__u32 entries;			/* a power of two, >= depth */
	__u32 wqe_size;			/* bytes per slot */
	__u32 chan_num;			/* what other channels name it by */
};

/*
 * BZC_METHOD_BULK_CHAN_CONNECT: the peer a channel reaches and accepts,
 * named the way a wire packet names it, (GID, channel number), with this
 * channel's own address as the index of a GID of the device's port 1.
 * An operation runs only between two channels that named each other.
 */
struct bzc_bulk_chan_connect_cmd {
	__aligned_u64 comp_mask;	/* enum bzc_bulk_chan_connect_mask */
	__u8 remote_gid[16];		/* the peer's device address */
	__u32 remote_chan;		/* its bzc_bulk_chan_create_resp.chan_num */
	__u32 sgid_index;		/* this channel's address */
};

/* One scatter/gather element of a bulk WQE: 64-bit lengths. */
struct bzc_bulk_sge {
	__aligned_le64 addr;
	__aligned_le64 length;
	__le32 lkey;			/* 0: the PD's MR cache */
	__le32 pad;
};

/*
 * A bulk WQE: this header, then num_sge struct bzc_bulk_sge from
 * BZC_BULK_WQE_SGE_OFFSET. The far side is one range: remote_addr in the
 * MR named by rkey (0 with COPY: the PD's MR cache).
 */
struct bzc_bulk_wqe {
	__aligned_le64 wr_id;
	__aligned_le64 remote_addr;
	__u8 opcode;			/* enum bzc_bulk_opcode */
	__u8 flags;			/* enum bzc_bulk_wqe_flags */
	__le16 num_sge;
	__le32 rkey;
	__le32 remote_chan;		/* bzc_bulk_chan_create_resp.chan_num */
	__le32 imm_data;		/* WRITE_WITH_IMM: host order, as in QP WQEs */
};

#define BZC_BULK_WQE_SGE_OFFSET 32

/* BZC_METHOD_CACHED_MR_REG */
struct bzc_cached_mr_reg_cmd {
	__aligned_u64 comp_mask;	/* enum bzc_cached_mr_reg_mask */
	__aligned_u64 addr;		/* process virtual address */
	__aligned_u64 length;		/* bytes */
	__u32 access;			/* enum ib_uverbs_access_flags */
	__u32 pad;
};

struct bzc_cached_mr_reg_resp {
	__aligned_u64 comp_mask;	/* none defined yet */
	__u32 lkey;
	__u32 rkey;
	__u32 flags;			/* enum bzc_cached_mr_reg_flags */
	__u32 pad;
};

#endif /* BZC_ABI_USER_H */
