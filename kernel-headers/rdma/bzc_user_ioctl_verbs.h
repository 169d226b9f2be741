/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * bzc uAPI: enums and flags shared by the kernel driver and the provider.
 */
#ifndef BZC_USER_IOCTL_VERBS_H
#define BZC_USER_IOCTL_VERBS_H

#include <linux/types.h>

/*
 * bzc is out of tree and has no RDMA_DRIVER_* id of its own. This private id
 * is reported as RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, matched by the provider and
 * carried in every ioctl header. It sits far above upstream's dense enum
 * (19 entries in Linux 6.1); see emu/README.md for the risk.
 */
#define BZC_RDMA_DRIVER_ID 0x627a

/*
 * Matched against the uverbs device's abi_version. Never bumped: new
 * behaviour is negotiated with comp_mask and capability bits instead.
 */
#define BZC_UVERBS_ABI_VERSION 1

/* bzc_alloc_ucontext_req.comp_mask: optional behaviours the provider asks for. */
enum bzc_alloc_ucontext_req_mask {
	/*
	 * The provider lays ring headers out with the producer and the
	 * consumer index on separate cache lines (bzc-abi.h, BZC_RING_LINE).
	 * Required: a kernel refuses a context without it (EOPNOTSUPP), and
	 * a kernel from before it refuses the unknown bit, so a provider and
	 * a module from either side of the change never share a ring.
	 */
	BZC_ALLOC_UCTX_REQ_SPLIT_RING_HDR = 1 << 0,
	/*
	 * The provider reads CQEs of 56 bytes, with the completion
	 * timestamps (struct bzc_cqe). Required, for the same reason.
	 */
	BZC_ALLOC_UCTX_REQ_CQE_TIMESTAMPS = 1 << 1,
	BZC_ALLOC_UCTX_REQ_MASK_ALL = BZC_ALLOC_UCTX_REQ_SPLIT_RING_HDR |
				      BZC_ALLOC_UCTX_REQ_CQE_TIMESTAMPS,
};

/* bzc_alloc_ucontext_resp.comp_mask: which response fields are valid. */
enum bzc_alloc_ucontext_resp_mask {
	BZC_ALLOC_UCTX_RESP_CAPS = 1 << 0,
};

/* bzc_alloc_ucontext_resp.caps: what this kernel driver implements. */
enum bzc_device_caps {
	/* Rings are mapped with rdma_user_mmap_entry keys from responses. */
	BZC_CAP_MMAP_ENTRIES = 1 << 0,
	/* The BZC_OBJECT_BULK_CHAN and BZC_OBJECT_CACHED_MR objects exist. */
	BZC_CAP_BULK = 1 << 1,
	/* BZC_METHOD_QP_DOORBELL exists on UVERBS_OBJECT_QP. */
	BZC_CAP_QP_DOORBELL = 1 << 2,
	/* RC send WQEs may be BZC_WR_ATOMIC_WRITE. */
	BZC_CAP_ATOMIC_WRITE = 1 << 3,
	/*
	 * RC send WQEs may be BZC_WR_FLUSH, and MRs may grant the FLUSH
	 * rights. Only where the kernel's core carries those access bits
	 * (IB_ACCESS_FLUSH_GLOBAL, Linux 6.2 and later): without them no MR
	 * could be flushed.
	 */
	BZC_CAP_FLUSH = 1 << 4,
	/* BZC_METHOD_SRQ_RESIZE exists on UVERBS_OBJECT_SRQ. */
	BZC_CAP_SRQ_RESIZE = 1 << 5,
	/*
	 * Device memory: UVERBS_METHOD_DM_ALLOC returns where to map the
	 * memory (BZC_ATTR_ALLOC_DM_RESP_MMAP_OFFSET).
	 */
	BZC_CAP_DM = 1 << 6,
	/* BZC_METHOD_DM_EXPORT_DMABUF exists on UVERBS_OBJECT_DM. */
	BZC_CAP_DM_EXPORT_DMABUF = 1 << 7,
	/*
	 * XRC: XRC domains, XRC SRQs with their SRQ numbers, XRC INI QPs
	 * whose send WQEs name the remote SRQ in bzc_send_wqe.xrc_srqn, and
	 * XRC TGT QPs (which have no rings).
	 */
	BZC_CAP_XRC = 1 << 8,
	/* BZC_METHOD_DM_QUERY exists on UVERBS_OBJECT_DM. */
	BZC_CAP_DM_QUERY = 1 << 9,
};

/* bzc_cq_ring_hdr.arm: what the next completion event waits for. */
enum bzc_cq_arm {
	BZC_CQ_ARM_NONE = 0,
	BZC_CQ_ARM_NEXT = 1,		/* any completion */
	BZC_CQ_ARM_SOLICITED = 2,	/* solicited or error completions */
};

/* bzc_cqe.wc_flags */
enum bzc_cqe_flags {
	BZC_CQE_WITH_IMM = 1 << 0,
	BZC_CQE_WITH_INV = 1 << 1,
	BZC_CQE_GRH = 1 << 2,
	BZC_CQE_SOLICITED = 1 << 3,
};

/* bzc_send_wqe.flags */
enum bzc_wqe_flags {
	BZC_WQE_SIGNALED = 1 << 0,
	BZC_WQE_SOLICITED = 1 << 1,
	BZC_WQE_FENCE = 1 << 2,
	BZC_WQE_INLINE = 1 << 3,
	/* A BIND_MW WQE from ibv_bind_mw() (type 1), not a bind work request. */
	BZC_WQE_BIND_TYPE1 = 1 << 4,
};

/*
 * bzc_send_wqe.opcode is an enum ib_uverbs_wr_opcode. These two, of the
 * IBTA Memory Placement Extensions, came with Linux 6.2
 * (IB_UVERBS_WR_FLUSH, IB_UVERBS_WR_ATOMIC_WRITE; libibverbs' IBV_WR_FLUSH
 * and IBV_WR_ATOMIC_WRITE have the same values) and are named here for
 * the kernels and rdma-core releases whose headers lack them.
 */
enum bzc_wr_opcode {
	/* bzc_send_wqe.flush: make earlier writes globally visible */
	BZC_WR_FLUSH = 14,
	/*
	 * 8 bytes (BZC_WQE_INLINE, or an 8-byte gather list) stored at
	 * bzc_send_wqe.rdma.remote_addr, 8-byte aligned, as one store
	 */
	BZC_WR_ATOMIC_WRITE = 15,
};

/* bzc_cqe.opcode of their completions (IBV_WC_FLUSH, IBV_WC_ATOMIC_WRITE). */
enum bzc_wc_opcode {
	BZC_WC_FLUSH = 8,
	BZC_WC_ATOMIC_WRITE = 9,
};

/* bzc_send_wqe.flush.type: placement type bits (IBV_FLUSH_GLOBAL, ...). */
enum bzc_flush_type {
	BZC_FLUSH_GLOBAL = 1 << 0,	/* global visibility */
	BZC_FLUSH_PERSISTENT = 1 << 1,	/* persistence */
};

/* bzc_send_wqe.flush.level: selectivity level (IBV_FLUSH_RANGE, _MR). */
enum bzc_flush_level {
	BZC_FLUSH_RANGE = 0,		/* remote_addr, length */
	BZC_FLUSH_MR = 1,		/* the whole MR of rkey */
};

/* bzc_bulk_wqe.opcode */
enum bzc_bulk_opcode {
	/*
	 * Local SGL -> (remote_addr, rkey) of the channel remote_chan, which
	 * must be the connected peer (BZC_METHOD_BULK_CHAN_CONNECT).
	 */
	BZC_BULK_OP_WRITE = 0,
	/* The same, then a completion on remote_chan's receive CQ. */
	BZC_BULK_OP_WRITE_WITH_IMM = 1,
	/* (remote_addr, rkey) of the channel remote_chan -> local SGL. */
	BZC_BULK_OP_READ = 2,
	/* Local SGL -> (remote_addr, rkey as an lkey of this channel's PD). */
	BZC_BULK_OP_COPY = 3,
};

/* bzc_bulk_wqe.flags */
enum bzc_bulk_wqe_flags {
	/* Start only once every earlier WQE of the channel has completed. */
	BZC_BULK_WQE_FENCE = 1 << 0,
};

/*
 * The opcode of a bulk COPY completion: IBV_WC_DRIVER1 of libibverbs.
 * WRITE and WRITE_WITH_IMM complete as IBV_WC_RDMA_WRITE, READ as
 * IBV_WC_RDMA_READ, arrivals as IBV_WC_RECV_RDMA_WITH_IMM.
 */
#define BZC_WC_BULK_COPY 135

/* bzc_bulk_caps.comp_mask: which optional fields the kernel filled in. */
enum bzc_bulk_caps_mask {
	BZC_BULK_CAPS_MAX_CHANS = 1 << 0,
};

/* bzc_bulk_chan_create_cmd.comp_mask */
enum bzc_bulk_chan_create_mask {
	BZC_BULK_CHAN_CREATE_MASK_ALL = 0,
};

/* bzc_bulk_chan_connect_cmd.comp_mask */
enum bzc_bulk_chan_connect_mask {
	BZC_BULK_CHAN_CONNECT_MASK_ALL = 0,
};

/* bzc_cached_mr_reg_cmd.comp_mask */
enum bzc_cached_mr_reg_mask {
	BZC_CACHED_MR_REG_MASK_ALL = 0,
};

/* bzc_srq_resize_cmd.comp_mask */
enum bzc_srq_resize_mask {
	BZC_SRQ_RESIZE_MASK_ALL = 0,
};

/* bzc_cached_mr_reg_resp.flags */
enum bzc_cached_mr_reg_flags {
	/* Served from pages the cache already had pinned. */
	BZC_CACHED_MR_HIT = 1 << 0,
};

#endif /* BZC_USER_IOCTL_VERBS_H */
