/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * bzc uAPI: object, method and attribute ids of the bzc driver namespace on
 * the uverbs ioctl interface (RDMA_VERBS_IOCTL on the uverbs fd).
 *
 * Ids start at (1U << UVERBS_ID_NS_SHIFT) so they never collide with the
 * core's. Linux 6.1 limits a driver namespace to 12 objects, 8 methods per
 * object and 31 attributes per method. The ioctl header's driver_id must be
 * BZC_RDMA_DRIVER_ID or the core refuses the call with EINVAL.
 *
 * Attribute payloads are the structs of bzc-abi.h named beside each id.
 * New behaviour comes as new attributes or comp_mask bits; an unknown
 * comp_mask bit is refused with EOPNOTSUPP.
 */
#ifndef BZC_USER_IOCTL_CMDS_H
#define BZC_USER_IOCTL_CMDS_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/bzc_user_ioctl_verbs.h>

enum bzc_objects {
	/* No instances: carries the device-wide (global) methods. */
	BZC_OBJECT_DEVICE = (1U << UVERBS_ID_NS_SHIFT),
	BZC_OBJECT_BULK_CHAN,
	BZC_OBJECT_CACHED_MR,
};

enum bzc_device_methods {
	BZC_METHOD_QUERY_BULK_CAPS = (1U << UVERBS_ID_NS_SHIFT),
	BZC_METHOD_QUERY_MR_CACHE,
};

/*
 * Driver attribute of the core's UVERBS_METHOD_QUERY_CONTEXT: the same
 * response ALLOC_UCONTEXT gave, so an imported context
 * (ibv_import_device()) learns the capabilities too.
 */
enum bzc_query_context_attrs {
	/* PTR_OUT struct bzc_alloc_ucontext_resp, optional */
	BZC_ATTR_QUERY_CONTEXT_RESP_UCTX = (1U << UVERBS_ID_NS_SHIFT),
};

enum bzc_query_bulk_caps_attrs {
	/* PTR_OUT struct bzc_bulk_caps */
	BZC_ATTR_QUERY_BULK_CAPS_RESP = (1U << UVERBS_ID_NS_SHIFT),
};

enum bzc_query_mr_cache_attrs {
	/* IDR UVERBS_OBJECT_PD, read: whose cache */
	BZC_ATTR_QUERY_MR_CACHE_PD_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_OUT struct bzc_mr_cache_stats */
	BZC_ATTR_QUERY_MR_CACHE_RESP,
};

enum bzc_bulk_chan_methods {
	BZC_METHOD_BULK_CHAN_CREATE = (1U << UVERBS_ID_NS_SHIFT),
	BZC_METHOD_BULK_CHAN_DESTROY,
	/* Execute the WQEs written to the channel's ring since the last one. */
	BZC_METHOD_BULK_CHAN_DOORBELL,
	/* Name the one peer channel this channel reaches and accepts. */
	BZC_METHOD_BULK_CHAN_CONNECT,
	/*
	 * Carry the channel's transfers as RDMA messages on one of the
	 * caller's RC QPs: its connection is the peer (any RoCE v2 RC QP).
	 */
	BZC_METHOD_BULK_CHAN_CONNECT_QP,
};

enum bzc_bulk_chan_create_attrs {
	BZC_ATTR_BULK_CHAN_CREATE_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* IDR UVERBS_OBJECT_PD: the keys the channel's WQEs may name */
	BZC_ATTR_BULK_CHAN_CREATE_PD_HANDLE,
	/* IDR UVERBS_OBJECT_CQ: one completion per bulk WQE */
	BZC_ATTR_BULK_CHAN_CREATE_CQ_HANDLE,
	/* IDR UVERBS_OBJECT_CQ, optional: WRITE_WITH_IMM arrivals */
	BZC_ATTR_BULK_CHAN_CREATE_RECV_CQ_HANDLE,
	/* PTR_IN struct bzc_bulk_chan_create_cmd */
	BZC_ATTR_BULK_CHAN_CREATE_CMD,
	/* PTR_OUT struct bzc_bulk_chan_create_resp */
	BZC_ATTR_BULK_CHAN_CREATE_RESP,
};

enum bzc_bulk_chan_destroy_attrs {
	BZC_ATTR_BULK_CHAN_DESTROY_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
};

enum bzc_bulk_chan_doorbell_attrs {
	BZC_ATTR_BULK_CHAN_DOORBELL_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
};

enum bzc_bulk_chan_connect_attrs {
	/* IDR BZC_OBJECT_BULK_CHAN, read: a channel of this process */
	BZC_ATTR_BULK_CHAN_CONNECT_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_IN struct bzc_bulk_chan_connect_cmd */
	BZC_ATTR_BULK_CHAN_CONNECT_CMD,
};

enum bzc_bulk_chan_connect_qp_attrs {
	/* IDR BZC_OBJECT_BULK_CHAN, read: a channel of this process */
	BZC_ATTR_BULK_CHAN_CONNECT_QP_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* IDR UVERBS_OBJECT_QP, read: an RC QP on the channel's PD, in RTS */
	BZC_ATTR_BULK_CHAN_CONNECT_QP_QP_HANDLE,
};

enum bzc_cached_mr_methods {
	BZC_METHOD_CACHED_MR_REG = (1U << UVERBS_ID_NS_SHIFT),
	BZC_METHOD_CACHED_MR_RELEASE,
};

enum bzc_cached_mr_reg_attrs {
	BZC_ATTR_CACHED_MR_REG_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* IDR UVERBS_OBJECT_PD: whose cache, and the PD of the keys */
	BZC_ATTR_CACHED_MR_REG_PD_HANDLE,
	/* PTR_IN struct bzc_cached_mr_reg_cmd */
	BZC_ATTR_CACHED_MR_REG_CMD,
	/* PTR_OUT struct bzc_cached_mr_reg_resp */
	BZC_ATTR_CACHED_MR_REG_RESP,
};

enum bzc_cached_mr_release_attrs {
	BZC_ATTR_CACHED_MR_RELEASE_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
};

/* Driver methods on the core UVERBS_OBJECT_QP (with BZC_CAP_QP_DOORBELL). */
enum bzc_qp_methods {
	/*
	 * The SQ doorbell: execute the WQEs written to the QP's send ring
	 * since the last one. No payload, nothing returned; lighter than
	 * IB_USER_VERBS_CMD_POST_SEND with no work requests.
	 */
	BZC_METHOD_QP_DOORBELL = (1U << UVERBS_ID_NS_SHIFT),
};

enum bzc_qp_doorbell_attrs {
	/* IDR UVERBS_OBJECT_QP, read: a QP of this process */
	BZC_ATTR_QP_DOORBELL_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
};

/* Driver methods on the core UVERBS_OBJECT_SRQ (with BZC_CAP_SRQ_RESIZE). */
enum bzc_srq_methods {
	/*
	 * ibv_modify_srq(IBV_SRQ_MAX_WR): a new ring holding the posted
	 * receives. A method because the core's MODIFY_SRQ command has no
	 * response to say where the new ring is.
	 */
	BZC_METHOD_SRQ_RESIZE = (1U << UVERBS_ID_NS_SHIFT),
};

enum bzc_srq_resize_attrs {
	/* IDR UVERBS_OBJECT_SRQ, read: an SRQ of this process */
	BZC_ATTR_SRQ_RESIZE_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_IN struct bzc_srq_resize_cmd */
	BZC_ATTR_SRQ_RESIZE_CMD,
	/* PTR_OUT struct bzc_srq_resize_resp */
	BZC_ATTR_SRQ_RESIZE_RESP,
};

/*
 * Driver attributes of the core's UVERBS_METHOD_DM_ALLOC (with BZC_CAP_DM).
 * The device memory is mapped MAP_SHARED from the uverbs fd at the offset
 * returned, its length rounded up to whole pages.
 */
enum bzc_alloc_dm_attrs {
	/* PTR_OUT __aligned_u64: the mmap offset of the memory */
	BZC_ATTR_ALLOC_DM_RESP_MMAP_OFFSET = (1U << UVERBS_ID_NS_SHIFT),
};

/*
 * Driver methods on the core UVERBS_OBJECT_DM (BZC_METHOD_DM_EXPORT_DMABUF
 * with BZC_CAP_DM_EXPORT_DMABUF, BZC_METHOD_DM_QUERY with
 * BZC_CAP_DM_QUERY).
 */
enum bzc_dm_methods {
	/*
	 * A dma-buf of the whole device memory (its length rounded up to
	 * pages), which holds the memory until its last reference goes.
	 */
	BZC_METHOD_DM_EXPORT_DMABUF = (1U << UVERBS_ID_NS_SHIFT),
	/*
	 * What a context needs to use a DM it did not allocate (another
	 * context on the same ucontext, ibv_import_dm()): its length and
	 * where to map it.
	 */
	BZC_METHOD_DM_QUERY,
};

enum bzc_dm_export_dmabuf_attrs {
	/* IDR UVERBS_OBJECT_DM, read: a DM of this process */
	BZC_ATTR_DM_EXPORT_DMABUF_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_OUT __s32: the new file descriptor (O_RDWR | O_CLOEXEC) */
	BZC_ATTR_DM_EXPORT_DMABUF_RESP_FD,
};

enum bzc_dm_query_attrs {
	/* IDR UVERBS_OBJECT_DM, read: a DM of this ucontext */
	BZC_ATTR_DM_QUERY_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* PTR_OUT struct bzc_dm_query_resp */
	BZC_ATTR_DM_QUERY_RESP,
};

#endif /* BZC_USER_IOCTL_CMDS_H */
