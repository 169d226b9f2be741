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
 * A CQ ring: struct bzc_cq_ring_hdr at offset 0, then `entries` slots of
 * struct bzc_cqe from BZC_CQ_RING_CQE_OFFSET, entries a power of two.
 * prod and cons count CQEs since creation (free-running, wrapping at 2^32);
 * slot i is at index i & (entries - 1). The kernel writes a CQE, then prod
 * (release); the process reads prod (acquire), the CQEs, then writes cons.
 * A cons that the kernel finds more than `entries` behind prod, or ahead of
 * it, means overflow: the CQ goes to error with IBV_EVENT_CQ_ERR.
 */
struct bzc_cq_ring_hdr {
	__le32 prod;		/* written by the kernel */
	__le32 cons;		/* written by the process */
	__le32 arm;		/* enum bzc_cq_arm: process sets, kernel clears */
	__le32 pad;
};

#define BZC_CQ_RING_CQE_OFFSET 64

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
	__u8 opcode;		/* enum ib_uverbs_wc_opcode */
	__u8 wc_flags;		/* enum bzc_cqe_flags */
	__u8 sl;
	__u8 dlid_path_bits;
	__u8 pad[3];
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

#endif /* BZC_ABI_USER_H */
