/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzcdv: direct verbs of the bzc bulk zero-copy RDMA device.
 *
 * Link with -lbzc (pkg-config libbzc).  The library is also the libibverbs
 * provider of bzc devices (libbzc-rdmav34.so is a link to libbzc.so.1), so
 * the objects below work on contexts, PDs and CQs opened with the ordinary
 * ibv_* calls.  The man pages bzcdv(7) and bzcdv_*(3) describe the
 * semantics in full.
 *
 * Conventions:
 *  - Functions returning int return 0 or a positive errno value (and leave
 *    errno alone); functions returning a pointer return NULL and set errno.
 *  - Every function but bzcdv_is_supported() fails with EOPNOTSUPP on a
 *    context that is not a bzc device, or whose kernel driver lacks the
 *    objects it uses (the bulk objects, BZC_CAP_BULK; for
 *    bzcdv_export_dm(), BZC_CAP_DM_EXPORT_DMABUF).
 *  - comp_mask of an input struct names the optional fields the caller
 *    filled in; a bit this library does not know fails with EINVAL.
 *    comp_mask of an output struct (the query functions) is in/out as in
 *    mlx5dv_query_device(): on input the optional fields the caller wants,
 *    on output those that were filled in; unknown bits are cleared, not an
 *    error, and the base fields are always filled in.
 *  - Lengths and addresses are bytes; depths are entries (WQEs).
 */
#ifndef _INFINIBAND_BZCDV_H_
#define _INFINIBAND_BZCDV_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Completion opcode (ibv_wc.opcode) of a bulk COPY.  Bulk WRITE and
 * WRITE_WITH_IMM complete as IBV_WC_RDMA_WRITE, READ as IBV_WC_RDMA_READ;
 * the target of a WRITE_WITH_IMM gets IBV_WC_RECV_RDMA_WITH_IMM.
 */
#define BZCDV_WC_BULK_COPY IBV_WC_DRIVER1

/*
 * Whether @device is driven by this library (a bzc device).  Whether its
 * kernel driver has bulk channels shows when a bzcdv_* call on an open
 * context fails with EOPNOTSUPP.  No system call.
 */
bool bzcdv_is_supported(struct ibv_device *device);

/* ---------------------------------------------------------------------- */
/* Device limits                                                            */
/* ---------------------------------------------------------------------- */

/* bzcdv_device_attr.comp_mask: the optional fields. */
enum bzcdv_device_attr_mask {
	BZCDV_DEVICE_ATTR_MASK_MAX_CHANS = 1 << 0,
	BZCDV_DEVICE_ATTR_MASK_CAPS = 1 << 1,
	BZCDV_DEVICE_ATTR_MASK_ALL = BZCDV_DEVICE_ATTR_MASK_MAX_CHANS |
				     BZCDV_DEVICE_ATTR_MASK_CAPS,
};

/* bzcdv_device_attr.caps: what the device does beyond the verbs' limits. */
enum bzcdv_device_caps {
	/* bzcdv_export_dm() exports device memory as a dma-buf fd. */
	BZCDV_DEVICE_CAP_EXPORT_DM = 1 << 0,
	/* Bulk WRs take lkeys of ODP MRs (IBV_ACCESS_ON_DEMAND). */
	BZCDV_DEVICE_CAP_BULK_ODP = 1 << 1,
};

struct bzcdv_device_attr {
	uint64_t comp_mask;		/* in/out, see above */
	uint64_t max_bulk_len;		/* bytes one bulk WR may move */
	uint64_t mr_cache_max_bytes;	/* bytes a PD's MR cache keeps pinned;
					   0: the cache is disabled */
	uint32_t max_bulk_sge;		/* SGEs in one bulk WR */
	uint32_t max_chan_depth;	/* largest channel depth, in WQEs */
	uint32_t seg_bytes;		/* bytes a worker copies at a time */
	uint32_t workers;		/* workers one WR is spread over */
	/* BZCDV_DEVICE_ATTR_MASK_MAX_CHANS: */
	uint32_t max_chans;		/* channels the device holds at once,
					   all processes together */
	uint32_t pad;
	/* BZCDV_DEVICE_ATTR_MASK_CAPS: */
	uint64_t caps;			/* enum bzcdv_device_caps */
};

/*
 * Fills @attr with the bulk limits of @ctx's device (max_chans only when
 * asked for in comp_mask and the kernel reports it; caps when asked for).
 * Kernel: BZC_OBJECT_DEVICE / BZC_METHOD_QUERY_BULK_CAPS (and, for caps,
 * the context's capabilities and IB_USER_VERBS_EX_CMD_QUERY_DEVICE).
 * Returns 0, EOPNOTSUPP (no bulk support), or the ioctl's errno (EIO once
 * the device is gone).
 */
int bzcdv_query_device(struct ibv_context *ctx, struct bzcdv_device_attr *attr);

/* ---------------------------------------------------------------------- */
/* Bulk channels                                                            */
/* ---------------------------------------------------------------------- */

/* bzcdv_bulk_chan_init_attr.comp_mask */
enum bzcdv_bulk_chan_init_attr_mask {
	/* recv_cq is valid: WRITE_WITH_IMM arrivals complete there. */
	BZCDV_BULK_CHAN_INIT_ATTR_MASK_RECV_CQ = 1 << 0,
};

struct bzcdv_bulk_chan_init_attr {
	uint64_t comp_mask;	/* enum bzcdv_bulk_chan_init_attr_mask */
	struct ibv_pd *pd;	/* whose lkeys (and MR cache) WRs use */
	struct ibv_cq *cq;	/* one completion per bulk WR */
	uint32_t depth;		/* WRs outstanding at once, 1..max_chan_depth */
	struct ibv_cq *recv_cq;	/* with ..._MASK_RECV_CQ */
};

/*
 * A bulk channel.  Read-only for the application; chan_num is what its
 * peer names it by (bzcdv_connect_bulk_chan()).
 */
struct bzcdv_bulk_chan {
	struct ibv_context *context;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_cq *recv_cq;		/* NULL without one */
	uint32_t chan_num;
	uint32_t depth;			/* ring slots, >= the requested depth */
	uint32_t max_sge;		/* SGEs one WR of this channel may carry */
};

/*
 * Creates a bulk channel on @attr->pd with completions on @attr->cq (and
 * WRITE_WITH_IMM arrivals on @attr->recv_cq).  All must belong to @ctx.
 * Size the CQs for the WRs the application keeps outstanding: every WR
 * completes, and the library does not count completions.
 * Kernel: BZC_OBJECT_BULK_CHAN / BZC_METHOD_BULK_CHAN_CREATE, then mmap of
 * the channel's ring on the uverbs fd.
 * Returns the channel, or NULL with errno: EOPNOTSUPP (no bulk support),
 * EINVAL (unknown comp_mask bit, missing pd/cq, objects of another
 * context, depth 0 or above max_chan_depth), ENOMEM (also: the device
 * holds max_chans channels already), EPROTO (the kernel
 * described a ring this library cannot use), or the ioctl's errno.
 */
struct bzcdv_bulk_chan *
bzcdv_create_bulk_chan(struct ibv_context *ctx,
		       struct bzcdv_bulk_chan_init_attr *attr);

/*
 * Destroys @chan.  WRs the device has not finished complete with
 * IBV_WC_WR_FLUSH_ERR on the channel's CQ before this returns.  The CQs
 * and PD stay the application's.
 * Kernel: BZC_OBJECT_BULK_CHAN / BZC_METHOD_BULK_CHAN_DESTROY.
 * Returns 0 or the ioctl's errno (then @chan is still valid).
 */
int bzcdv_destroy_bulk_chan(struct bzcdv_bulk_chan *chan);

/* bzcdv_bulk_conn_attr.comp_mask: no optional fields yet. */
enum bzcdv_bulk_conn_attr_mask {
	BZCDV_BULK_CONN_ATTR_MASK_ALL = 0,
};

/*
 * The peer of a channel, named as a packet names its source: the GID of
 * the peer's device and the peer's chan_num; and this channel's own
 * address, an index into the GID table of port 1 (ibv_query_gid(3)).
 */
struct bzcdv_bulk_conn_attr {
	uint64_t comp_mask;		/* enum bzcdv_bulk_conn_attr_mask */
	union ibv_gid remote_gid;	/* the peer channel's device address */
	uint32_t remote_chan;		/* the peer channel's chan_num */
	uint8_t sgid_index;		/* this channel's address */
};

/*
 * Connects @chan to the channel @attr names.  A channel's WRITE,
 * WRITE_WITH_IMM and READ reach only its peer, and only while the peer is
 * connected back to it with this channel's address: both sides consent,
 * as RC QPs name each other.  The peer need not exist yet.  Both GIDs must
 * belong to @chan's device, in the caller's network namespace (a channel
 * reaches only channels of its own device for now).  Once per channel.
 * Kernel: BZC_OBJECT_BULK_CHAN / BZC_METHOD_BULK_CHAN_CONNECT.
 * Returns 0, EOPNOTSUPP (no bulk support, or a kernel without the
 * method), EINVAL (unknown comp_mask bit, remote_chan 0, no GID at
 * sgid_index), ENETUNREACH (remote_gid is not an address of @chan's
 * device in the caller's network namespace), EISCONN (connected already),
 * EPERM (not the PD's process, e.g. a forked child), or the ioctl's errno.
 */
int bzcdv_connect_bulk_chan(struct bzcdv_bulk_chan *chan,
			    const struct bzcdv_bulk_conn_attr *attr);

/*
 * Carries @chan's WRITE, WRITE_WITH_IMM and READ requests as standard RDMA
 * WRITE, WRITE with immediate and READ messages (each at most 2^31 bytes)
 * on @qp's connection, instead of to a peer channel: the far side may be
 * any RC QP @qp is connected to (rxe, a RoCE NIC, bzc, on this host or
 * another), and needs nothing but an MR and the rkey it hands out.  @qp
 * is an RC QP of the caller on @chan's PD, in RTS; it stays held while
 * the channel exists (ibv_destroy_qp() fails with EBUSY until
 * bzcdv_destroy_bulk_chan()).  WRITE_WITH_IMM consumes one receive at the
 * far QP, with the immediate, once per request; remote_chan is not used.
 * Once per channel, exclusive of bzcdv_connect_bulk_chan().
 * Kernel: BZC_OBJECT_BULK_CHAN / BZC_METHOD_BULK_CHAN_CONNECT_QP.
 * Returns 0, EINVAL (NULL argument, QP of another context or PD, not RC),
 * ENOTCONN (@qp is not in RTS), EISCONN (connected already), EPERM (not
 * the PD's process), EOPNOTSUPP (a kernel without the method), or the
 * ioctl's errno.
 */
int bzcdv_connect_bulk_chan_qp(struct bzcdv_bulk_chan *chan,
			       struct ibv_qp *qp);

enum bzcdv_bulk_opcode {
	/* sg_list -> (remote_addr, rkey) of channel remote_chan, the peer */
	BZCDV_BULK_WRITE = 0,
	/* the same, then a completion on remote_chan's recv_cq */
	BZCDV_BULK_WRITE_WITH_IMM = 1,
	/* (remote_addr, rkey) of channel remote_chan -> sg_list */
	BZCDV_BULK_READ = 2,
	/* sg_list -> (remote_addr, rkey as an lkey of this PD, 0: cache) */
	BZCDV_BULK_COPY = 3,
};

enum bzcdv_bulk_wr_flags {
	/* Start only after every earlier WR of the channel completed. */
	BZCDV_BULK_FENCE = 1 << 0,
};

/*
 * One local range.  lkey 0: addr is a virtual address of this process,
 * served by the PD's MR cache (pinned on first use).
 */
struct bzcdv_sge {
	uint64_t addr;
	uint64_t length;	/* bytes; the WR moves the sum of all SGEs */
	uint32_t lkey;
};

struct bzcdv_bulk_wr {
	uint64_t wr_id;
	struct bzcdv_bulk_wr *next;
	struct bzcdv_sge *sg_list;
	uint32_t num_sge;		/* 0..chan->max_sge */
	enum bzcdv_bulk_opcode opcode;
	uint32_t flags;			/* enum bzcdv_bulk_wr_flags */
	__be32 imm_data;		/* WRITE_WITH_IMM, network order as verbs */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t remote_chan;		/* chan_num of the connected peer */
};

/*
 * Queues the chain of WRs @wr on @chan and rings the doorbell once.  Each
 * WR gets exactly one completion on chan->cq, in posting order, with
 * wr_id, status, opcode and byte_len (bytes moved, 0xffffffff for 4 GiB or
 * more).  Thread safe.  Nothing is checked against the device beyond the
 * shape: keys, bounds, lengths above max_bulk_len, a remote_chan that is
 * not the connected peer and a peer that is not connected back are error
 * completions (see bzcdv_post_bulk(3)).
 * Kernel: BZC_OBJECT_BULK_CHAN / BZC_METHOD_BULK_CHAN_DOORBELL.
 * Returns 0, or with *@bad_wr at the first WR not queued: EINVAL (num_sge
 * above chan->max_sge, unknown opcode or flags, sg_list NULL with num_sge
 * non-zero), ENOMEM (the ring is full: poll completions and retry); the
 * WRs before *@bad_wr are queued and executed.  A failed doorbell returns
 * its errno with *@bad_wr = @wr (EIO: the device is gone, or the channel's
 * CQ or receive CQ overflowed and the channel stopped; EPERM: not the PD's process,
 * e.g. a forked child).
 */
int bzcdv_post_bulk(struct bzcdv_bulk_chan *chan, struct bzcdv_bulk_wr *wr,
		    struct bzcdv_bulk_wr **bad_wr);

/* ---------------------------------------------------------------------- */
/* The MR cache                                                             */
/* ---------------------------------------------------------------------- */

enum bzcdv_mr_cached_flags {
	/* Served from pages the PD's cache already had pinned. */
	BZCDV_MR_CACHED_HIT = 1 << 0,
};

struct bzcdv_mr_cached {
	struct ibv_pd *pd;
	void *addr;
	size_t length;		/* bytes */
	uint32_t lkey;		/* for bulk WRs and ibv_post_send/recv of pd */
	uint32_t rkey;
	uint32_t flags;		/* enum bzcdv_mr_cached_flags */
};

/*
 * Registers [addr, addr + length) through @pd's MR cache: pins the pages,
 * or finds them pinned by an earlier registration.  @access is enum
 * ibv_access_flags (LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ).  The keys are
 * valid until bzcdv_release_mr_cached(); the pages stay in the cache after
 * that until evicted or the memory is unmapped.
 * Kernel: BZC_OBJECT_CACHED_MR / BZC_METHOD_CACHED_MR_REG.
 * Returns the registration, or NULL with errno: EOPNOTSUPP (no bulk
 * support, or the cache is disabled: mr_cache_max_bytes 0), EINVAL (NULL
 * pd, length 0, unknown access bits, a range that wraps), ENOMEM, or the
 * kernel's errno (EFAULT: memory not mapped with the access asked for;
 * ENOMEM: more than RLIMIT_MEMLOCK allows, or more pages than one
 * registration holds, about 1 TiB; EPERM: not the process that allocated
 * @pd, e.g. a forked child; see bzcdv_reg_mr_cached(3)).
 */
struct bzcdv_mr_cached *bzcdv_reg_mr_cached(struct ibv_pd *pd, void *addr,
					    size_t length, unsigned int access);

/*
 * Drops the keys of @mr and frees it.
 * Kernel: BZC_OBJECT_CACHED_MR / BZC_METHOD_CACHED_MR_RELEASE.
 * Returns 0 or the ioctl's errno (then @mr is still valid).
 */
int bzcdv_release_mr_cached(struct bzcdv_mr_cached *mr);

/* bzcdv_mr_cache_stats.comp_mask: no optional fields yet. */
enum bzcdv_mr_cache_stats_mask {
	BZCDV_MR_CACHE_STATS_MASK_ALL = 0,
};

struct bzcdv_mr_cache_stats {
	uint64_t comp_mask;	/* in/out, see above */
	uint64_t hits;		/* lookups served by pinned ranges */
	uint64_t misses;	/* lookups that pinned pages */
	uint64_t evictions;	/* ranges unpinned to stay within the limit */
	uint64_t invalidations;	/* ranges dropped on munmap, mremap, ... */
	uint64_t pinned_bytes;	/* bytes pinned now */
	uint64_t entries;	/* ranges cached now */
};

/*
 * The counters of @pd's MR cache (they count since the PD was allocated).
 * Kernel: BZC_OBJECT_DEVICE / BZC_METHOD_QUERY_MR_CACHE.
 * Returns 0, EOPNOTSUPP (no bulk support), or the ioctl's errno.
 */
int bzcdv_query_mr_cache(struct ibv_pd *pd, struct bzcdv_mr_cache_stats *stats);

/* ---------------------------------------------------------------------- */
/* Device memory                                                            */
/* ---------------------------------------------------------------------- */

/* bzcdv_export_dm_attr.comp_mask: no optional fields yet. */
enum bzcdv_export_dm_attr_mask {
	BZCDV_EXPORT_DM_ATTR_MASK_ALL = 0,
};

struct bzcdv_export_dm_attr {
	uint64_t comp_mask;	/* in: enum bzcdv_export_dm_attr_mask */
	int fd;			/* out: the dma-buf */
};

/*
 * Exports the device memory @dm (from ibv_alloc_dm() on a bzc device) as a
 * dma-buf: attr->fd, opened O_RDWR | O_CLOEXEC, of the DM's length rounded
 * up to whole pages.  Another process or driver imports it, bzc's own
 * ibv_reg_dmabuf_mr() included, or maps it (mmap).  The dma-buf holds the
 * memory: it outlives ibv_free_dm() until its last reference is closed.
 * Each call makes a new dma-buf.
 * Kernel: UVERBS_OBJECT_DM / BZC_METHOD_DM_EXPORT_DMABUF.
 * Returns 0, EOPNOTSUPP (not a bzc device's DM, or a kernel without
 * BZC_CAP_DM_EXPORT_DMABUF), EINVAL (NULL attr, unknown comp_mask bit), or
 * the ioctl's errno (EMFILE: no free file descriptor; ENOMEM); see
 * bzcdv_export_dm(3).
 */
int bzcdv_export_dm(struct ibv_dm *dm, struct bzcdv_export_dm_attr *attr);

#ifdef __cplusplus
}
#endif

#endif /* _INFINIBAND_BZCDV_H_ */
