/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzc: userspace verbs provider for the bzc bulk zero-copy RDMA device.
 */
#ifndef __BZC_H__
#define __BZC_H__

#include <endian.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Out of tree this is provider-abi/ibverbs_provider.h, bzc's description of
 * the rdma-core 44 provider interface; in rdma-core it is
 * <infiniband/driver.h>.
 */
#include <ibverbs_provider.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/bzc-abi.h>

#include "bzcdv.h"


struct bzc_device {
	struct verbs_device ibv_dev;
};

/* A PD, or a parent domain over one (pd.c). */
/*
 * A thread domain (ibv_alloc_td): the application promises that one
 * thread at a time uses the queues created under it, so their provider
 * locks are not taken (see bzc_wq.single_threaded, bzc_cq.single_threaded).
 */
struct bzc_td {
	struct ibv_td ibtd;
	atomic_uint parents;		/* parent domains naming it */
};

struct bzc_pd {
	struct ibv_pd ibpd;
	/* Parent domain: its protection domain; NULL in a PD. */
	struct bzc_pd *protection;
	/* Parent domain: its thread domain, or NULL. */
	struct bzc_td *td;
	atomic_uint parents;		/* PD: parent domains over it */
};

struct bzc_context {
	struct verbs_context ibv_ctx;
	/* enum bzc_device_caps reported by the kernel, 0 if it sent none */
	uint64_t caps;
};

/*
 * GET_CONTEXT with the bzc driver data appended.  This is the layout
 * rdma-core's DECLARE_DRV_CMD(ubzc_alloc_ucontext,
 * IB_USER_VERBS_CMD_GET_CONTEXT, bzc_alloc_ucontext_req,
 * bzc_alloc_ucontext_resp) produces; libibverbs finds the driver data at
 * sizeof(struct ibv_get_context) and sizeof(struct
 * ib_uverbs_get_context_resp), so there must be no padding in between.
 */
struct ubzc_alloc_ucontext {
	struct ibv_get_context ibv_cmd;
	struct bzc_alloc_ucontext_req drv_payload;
};

struct ubzc_alloc_ucontext_resp {
	struct ib_uverbs_get_context_resp ibv_resp;
	struct bzc_alloc_ucontext_resp drv_payload;
};

_Static_assert(offsetof(struct ubzc_alloc_ucontext, drv_payload) ==
		       sizeof(struct ibv_get_context),
	       "padding between GET_CONTEXT core and driver request");
_Static_assert(sizeof(struct ubzc_alloc_ucontext) ==
		       sizeof(struct ibv_get_context) +
			       sizeof(struct bzc_alloc_ucontext_req),
	       "padding after GET_CONTEXT driver request");
_Static_assert(offsetof(struct ubzc_alloc_ucontext_resp, drv_payload) ==
		       sizeof(struct ib_uverbs_get_context_resp),
	       "padding between GET_CONTEXT core and driver response");
_Static_assert(sizeof(struct ubzc_alloc_ucontext_resp) ==
		       sizeof(struct ib_uverbs_get_context_resp) +
			       sizeof(struct bzc_alloc_ucontext_resp),
	       "padding after GET_CONTEXT driver response");

/*
 * A CQ whose ring the kernel writes and this process reads, without a
 * system call (kernel-headers/rdma/bzc-abi.h describes the ring).
 *
 * lock serialises the users of the ring: poll_cq, a start_poll .. end_poll
 * batch of the extended API (which holds it throughout), req_notify_cq and
 * resize_cq, which swaps the ring.  So a thread must not arm or resize a
 * CQ between its own start_poll and end_poll.  Not taken at all for a CQ
 * created with IBV_CREATE_CQ_ATTR_SINGLE_THREADED or on a parent domain
 * with a thread domain.
 */
struct bzc_cq {
	struct verbs_cq vcq;
	pthread_spinlock_t lock;

	/*
	 * The mapping of ring_len bytes: the header at offset 0, CQE slots
	 * from BZC_CQ_RING_CQE_OFFSET.  hdr is NULL once the ring is lost
	 * (a resize the kernel did but this process could not map).
	 */
	struct bzc_cq_ring_hdr *hdr;
	size_t ring_len;
	struct bzc_cqe *cqes;
	uint32_t entries;		/* a power of two */
	/* Single-threaded or on a thread domain: the caller serialises. */
	bool single_threaded;

	/*
	 * Local copy of the consumer index: free running like hdr->cons,
	 * published to hdr->cons after each batch.
	 */
	uint32_t cons;
	/* Extended polling: the CQE the iterator points at, or NULL. */
	const struct bzc_cqe *cur;
};

/*
 * Responses with the bzc driver data appended, as for GET_CONTEXT above
 * (rdma-core: DECLARE_DRV_CMD with an empty request).
 */

/* CREATE_CQ: no driver request data; the ring in the response. */
struct ubzc_create_cq_resp {
	struct ib_uverbs_create_cq_resp ibv_resp;
	struct bzc_create_cq_resp drv_payload;
};

/* CREATE_CQ for ibv_create_cq_ex(): the extended core response. */
struct ubzc_create_cq_ex_resp {
	struct ib_uverbs_ex_create_cq_resp ibv_resp;
	struct bzc_create_cq_resp drv_payload;
};

/* RESIZE_CQ: no driver request data; the new ring in the response. */
struct ubzc_resize_cq_resp {
	struct ib_uverbs_resize_cq_resp ibv_resp;
	struct bzc_resize_cq_resp drv_payload;
};

/*
 * libibverbs passes everything past the core response as the driver's
 * output buffer, so the driver part must follow it without padding.
 */
#define BZC_ASSERT_RESP_LAYOUT(type, core, drv)                                \
	_Static_assert(offsetof(struct type, drv_payload) ==                   \
				       sizeof(struct core) &&                  \
			       sizeof(struct type) ==                          \
				       sizeof(struct core) +                   \
					       sizeof(struct drv),             \
		       "padding in struct " #type)

BZC_ASSERT_RESP_LAYOUT(ubzc_create_cq_resp, ib_uverbs_create_cq_resp,
		       bzc_create_cq_resp);
BZC_ASSERT_RESP_LAYOUT(ubzc_create_cq_ex_resp, ib_uverbs_ex_create_cq_resp,
		       bzc_create_cq_resp);
BZC_ASSERT_RESP_LAYOUT(ubzc_resize_cq_resp, ib_uverbs_resize_cq_resp,
		       bzc_resize_cq_resp);

/*
 * A work queue ring (SQ or RQ) that this process fills and the kernel
 * drains (kernel-headers/rdma/bzc-abi.h describes it).  Everything here
 * except the ring memory is under lock.
 */
struct bzc_wq {
	pthread_spinlock_t lock;
	/* The mapping of ring_len bytes; NULL for the RQ of a QP on an SRQ. */
	struct bzc_wq_ring_hdr *hdr;
	size_t ring_len;
	uint8_t *wqes;			/* slot 0, at BZC_WQ_RING_WQE_OFFSET */
	uint32_t entries;		/* a power of two */
	uint32_t wqe_shift;		/* log2 of the slot size */
	/*
	 * Free-running producer index, the copy of hdr->prod only this
	 * process writes; and the last hdr->cons seen, re-read only when the
	 * ring looks full.
	 */
	uint32_t prod;
	uint32_t cons;
	uint32_t max_sge;
	uint32_t max_inline;		/* SQ only */
	/* Created under a thread domain: the caller serialises, no lock. */
	bool single_threaded;
};

struct bzc_qp {
	struct verbs_qp vqp;
	struct bzc_wq sq;
	struct bzc_wq rq;
	/* Every send WQE is signaled (created with sq_sig_all). */
	bool sq_sig_all;
	/*
	 * The state the last successful modify_qp set (enum ibv_qp_state),
	 * for the checks at post time; atomic because posting threads read
	 * it without a lock.
	 */
	int state;

	/*
	 * The ibv_wr_* batch, valid from wr_start (which takes sq.lock) to
	 * wr_complete or wr_abort (which release it): the WQEs built so
	 * far from sq.prod on, the one the setters fill, and the first
	 * error, which makes wr_complete discard the batch.
	 */
	uint32_t wr_count;
	struct bzc_send_wqe *wr_cur;
	int wr_err;
};

/*
 * A shared receive queue: a receive ring any QP created on it drains, or
 * for an XRC SRQ every XRC TGT QP of its domain whose messages name its
 * number (vsrq.srq_num).
 */
struct bzc_srq {
	struct verbs_srq vsrq;
	struct bzc_wq wq;
};

/* An XRC domain: libibverbs' view of it is all bzc needs. */
struct bzc_xrcd {
	struct verbs_xrcd vxrcd;
};

/* The address handle: the kernel's index, which UD send WQEs carry. */
struct bzc_ah {
	struct ibv_ah ibv_ah;
	uint32_t ah_index;
};

/* CREATE_QP: no driver request data; both rings in the response. */
struct ubzc_create_qp_resp {
	struct ib_uverbs_create_qp_resp ibv_resp;
	struct bzc_create_qp_resp drv_payload;
};

/* CREATE_QP for ibv_create_qp_ex(): the extended core response. */
struct ubzc_create_qp_ex_resp {
	struct ib_uverbs_ex_create_qp_resp ibv_resp;
	struct bzc_create_qp_resp drv_payload;
};

/* CREATE_SRQ: no driver request data; the ring in the response. */
struct ubzc_create_srq_resp {
	struct ib_uverbs_create_srq_resp ibv_resp;
	struct bzc_create_srq_resp drv_payload;
};

/* CREATE_AH: the index follows the 4-byte core response directly. */
struct ubzc_create_ah_resp {
	struct ib_uverbs_create_ah_resp ibv_resp;
	struct bzc_create_ah_resp drv_payload;
};

BZC_ASSERT_RESP_LAYOUT(ubzc_create_qp_resp, ib_uverbs_create_qp_resp,
		       bzc_create_qp_resp);
BZC_ASSERT_RESP_LAYOUT(ubzc_create_qp_ex_resp, ib_uverbs_ex_create_qp_resp,
		       bzc_create_qp_resp);
BZC_ASSERT_RESP_LAYOUT(ubzc_create_srq_resp, ib_uverbs_create_srq_resp,
		       bzc_create_srq_resp);
BZC_ASSERT_RESP_LAYOUT(ubzc_create_ah_resp, ib_uverbs_create_ah_resp,
		       bzc_create_ah_resp);

static inline struct bzc_device *to_bdev(struct ibv_device *ibdev)
{
	return container_of(ibdev, struct bzc_device, ibv_dev.device);
}

static inline struct bzc_context *to_bctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct bzc_context, ibv_ctx.context);
}

/*
 * What the provider refuses, it says why through libibverbs' log
 * (VERBS_LOG_LEVEL, VERBS_LOG_FILE): bzc_err() for the control path,
 * bzc_dbg() for work requests, which are refused in normal operation too
 * (a full ring).  @ibctx must be a bzc context.
 */
/*
 * Why this thread's last work request was refused, for the log message
 * its post call writes once it has released the queue's lock:
 * bzc_refuse() records it where the check fails.
 */
extern __thread const char *bzc_refusal;

static inline int bzc_refuse(int err, const char *why)
{
	bzc_refusal = why;
	return err;
}

#define bzc_err(ibctx, format, ...)                                            \
	verbs_err(&to_bctx(ibctx)->ibv_ctx, format, ##__VA_ARGS__)
#define bzc_dbg(ibctx, format, ...)                                            \
	verbs_debug(&to_bctx(ibctx)->ibv_ctx, format, ##__VA_ARGS__)

/* The lock of a work queue, unless the queue is on a thread domain. */
static inline void bzc_wq_lock(struct bzc_wq *wq)
{
	if (!wq->single_threaded)
		pthread_spin_lock(&wq->lock);
}

static inline void bzc_wq_unlock(struct bzc_wq *wq)
{
	if (!wq->single_threaded)
		pthread_spin_unlock(&wq->lock);
}

static inline struct bzc_td *to_btd(struct ibv_td *ibtd)
{
	return container_of(ibtd, struct bzc_td, ibtd);
}

static inline struct bzc_pd *to_bpd(struct ibv_pd *ibpd)
{
	return container_of(ibpd, struct bzc_pd, ibpd);
}

static inline struct bzc_cq *to_bcq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct bzc_cq, vcq.cq);
}

static inline struct bzc_cq *to_bcq_ex(struct ibv_cq_ex *ibcq)
{
	return container_of(ibcq, struct bzc_cq, vcq.cq_ex);
}

static inline struct bzc_qp *to_bqp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct bzc_qp, vqp.qp);
}

static inline struct bzc_qp *to_bqp_ex(struct ibv_qp_ex *ibqp)
{
	return container_of(ibqp, struct bzc_qp, vqp.qp_ex);
}

static inline struct bzc_srq *to_bsrq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct bzc_srq, vsrq.srq);
}

static inline struct bzc_xrcd *to_bxrcd(struct ibv_xrcd *ibxrcd)
{
	return container_of(ibxrcd, struct bzc_xrcd, vxrcd.xrcd);
}

static inline struct bzc_ah *to_bah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct bzc_ah, ibv_ah);
}

static inline enum ibv_qp_state bzc_qp_state(struct bzc_qp *qp)
{
	return (enum ibv_qp_state)__atomic_load_n(&qp->state,
						   __ATOMIC_RELAXED);
}

/* Address of slot @index (free running) of a mapped work queue. */
static inline void *bzc_wq_slot(struct bzc_wq *wq, uint32_t index)
{
	return wq->wqes + ((size_t)(index & (wq->entries - 1))
			   << wq->wqe_shift);
}

/*
 * Whether slot @index cannot be written yet because the kernel has not
 * consumed what it held.  The acquire load orders the kernel's reads of
 * the slot (it copies every WQE out before advancing cons) before our
 * writes to it.  Called with wq->lock held.
 */
static inline bool bzc_wq_full(struct bzc_wq *wq, uint32_t index)
{
	if (index - wq->cons < wq->entries)
		return false;
	wq->cons = le32toh(__atomic_load_n(&wq->hdr->cons, __ATOMIC_ACQUIRE));
	return index - wq->cons >= wq->entries;
}

/* Hand the WQEs up to wq->prod to the kernel. */
static inline void bzc_wq_publish(struct bzc_wq *wq)
{
	__atomic_store_n(&wq->hdr->prod, htole32(wq->prod), __ATOMIC_RELEASE);
}

/*
 * The direct verbs (bzcdv.h): exported through bzc.map; everything else in
 * the library is hidden.
 */
#define BZC_EXPORT __attribute__((visibility("default")))

/* bzc.c: whether @ibdev is a bzc device (driven by this library). */
bool bzc_is_bzc_device(struct ibv_device *ibdev);

/*
 * dv_cmd.c: one method call in the bzc driver namespace on the uverbs
 * ioctl interface.  Built on the stack with bzc_cmd_init(), filled with
 * the bzc_cmd_add_*() helpers, run with bzc_cmd_exec().
 */
#define BZC_CMD_MAX_ATTRS 9

struct bzc_cmd {
	struct ib_uverbs_ioctl_hdr hdr;
	struct ib_uverbs_attr attrs[BZC_CMD_MAX_ATTRS];
};

void bzc_cmd_init(struct bzc_cmd *cmd, uint16_t object_id,
		  uint16_t method_id);
/* An IDR attribute naming an existing object by its kernel handle. */
void bzc_cmd_add_idr(struct bzc_cmd *cmd, uint16_t attr_id, uint32_t handle);
/* A new object's handle: the kernel writes it into the attribute. */
struct ib_uverbs_attr *bzc_cmd_add_idr_new(struct bzc_cmd *cmd,
					   uint16_t attr_id);
void bzc_cmd_add_ptr_in(struct bzc_cmd *cmd, uint16_t attr_id,
			const void *ptr, size_t len);
void bzc_cmd_add_ptr_out(struct bzc_cmd *cmd, uint16_t attr_id, void *ptr,
			 size_t len);
/* 0 or the errno of the ioctl. */
int bzc_cmd_exec(struct ibv_context *context, struct bzc_cmd *cmd);
/*
 * 0 if @context is a bzc device whose kernel has the bulk objects,
 * EOPNOTSUPP otherwise.
 */
int bzc_check_bulk(struct ibv_context *context);

/*
 * Whether a destroy method's answer means the kernel object is gone: 0,
 * or EIO once the device was removed.  The uverbs core destroyed every
 * object of the context with the device and then refuses the methods a
 * driver adds, destroys too (EIO); the core's own destroys succeed (0),
 * whatever still uses the object.  The caller then frees its struct;
 * anything else leaves both.
 */
static inline bool bzc_destroyed(int ret)
{
	return !ret || ret == EIO;
}

/* bulk.c: the provider side of a bzcdv_bulk_chan. */
struct bzc_bulk_chan {
	struct bzcdv_bulk_chan dv;	/* first: the public part */
	uint32_t handle;		/* the kernel's object handle */
	struct bzc_wq wq;		/* the ring: an SQ's format and rules */
};

/* mr_cache.c: the provider side of a bzcdv_mr_cached. */
struct bzc_mr_cached {
	struct bzcdv_mr_cached dv;	/* first: the public part */
	/*
	 * The release goes through this, not dv.pd: after a device removal
	 * the PD's dealloc succeeds whatever still uses the PD, so an
	 * application may free it first.
	 */
	struct ibv_context *context;
	uint32_t handle;
};

/* pd.c */
struct ibv_pd *bzc_alloc_pd(struct ibv_context *context);
struct ibv_pd *bzc_alloc_parent_domain(struct ibv_context *context,
				       struct ibv_parent_domain_init_attr *attr);
int bzc_dealloc_pd(struct ibv_pd *ibpd);
struct ibv_pd *bzc_import_pd(struct ibv_context *context, uint32_t pd_handle);
void bzc_unimport_pd(struct ibv_pd *ibpd);
struct ibv_td *bzc_alloc_td(struct ibv_context *context,
			    struct ibv_td_init_attr *attr);
int bzc_dealloc_td(struct ibv_td *ibtd);
bool bzc_pd_single_threaded(struct ibv_pd *ibpd);

/* cq.c */
struct ibv_cq *bzc_create_cq(struct ibv_context *context, int cqe,
			     struct ibv_comp_channel *channel,
			     int comp_vector);
struct ibv_cq_ex *bzc_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr);
int bzc_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc);
int bzc_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
int bzc_resize_cq(struct ibv_cq *ibcq, int cqe);
int bzc_destroy_cq(struct ibv_cq *ibcq);
void bzc_cq_clean(struct ibv_cq *ibcq, uint32_t qpn);

/* mr.c */
struct ibv_mr *bzc_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  uint64_t hca_va, int access);
int bzc_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		 void *addr, size_t length, int access);
int bzc_dereg_mr(struct verbs_mr *vmr);
int bzc_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		  uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);
struct ibv_mr *bzc_import_mr(struct ibv_pd *pd, uint32_t mr_handle);
void bzc_unimport_mr(struct ibv_mr *mr);
struct ibv_mr *bzc_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access);

/* dm.c */
struct ibv_dm *bzc_alloc_dm(struct ibv_context *context,
			    struct ibv_alloc_dm_attr *attr);
int bzc_free_dm(struct ibv_dm *ibdm);
struct ibv_dm *bzc_import_dm(struct ibv_context *context, uint32_t dm_handle);
void bzc_unimport_dm(struct ibv_dm *ibdm);
struct ibv_mr *bzc_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
			     uint64_t dm_offset, size_t length,
			     unsigned int access);

/* A WQE's num_sge is 8 bits wide. */
#define BZC_MAX_WQE_SGE 255U

/* mw.c */
struct ibv_mw *bzc_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int bzc_dealloc_mw(struct ibv_mw *mw);
int bzc_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw,
		struct ibv_mw_bind *mw_bind);

/* ring.c */

static inline bool bzc_is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/*
 * A ring the kernel allocated, as its create or resize response describes
 * it, and what this process can accept: entries slots of slot_size bytes
 * from slot_offset, inside the mmap_len bytes at mmap offset mmap_key of
 * the uverbs fd.
 */
struct bzc_ring_desc {
	uint64_t mmap_key;
	uint32_t mmap_len;
	uint32_t entries;
	uint32_t min_entries;
	uint32_t max_entries;
	uint32_t slot_offset;
	uint32_t slot_size;
};

int bzc_ring_map(struct ibv_context *context, const struct bzc_ring_desc *desc,
		 void **addr);
int bzc_wq_map(struct ibv_context *context, struct bzc_wq *wq,
	       uint64_t mmap_key, uint32_t mmap_len, uint32_t entries,
	       uint32_t wqe_size, uint64_t min_wqe_size, uint32_t max_wr);
void bzc_wq_unmap(struct bzc_wq *wq);

/* qp.c */
void bzc_write_recv_wqe(struct bzc_wq *rq, uint32_t index,
			const struct ibv_recv_wr *wr);
struct ibv_qp *bzc_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *bzc_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *attr);
int bzc_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		  int attr_mask);
int bzc_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
		 struct ibv_qp_init_attr *init_attr);
int bzc_destroy_qp(struct ibv_qp *ibqp);
int bzc_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);

/* xrc.c */
struct ibv_xrcd *bzc_open_xrcd(struct ibv_context *context,
			       struct ibv_xrcd_init_attr *attr);
int bzc_close_xrcd(struct ibv_xrcd *ibxrcd);
struct ibv_qp *bzc_open_qp(struct ibv_context *context,
			   struct ibv_qp_open_attr *attr);
bool bzc_has_xrc(struct ibv_context *context);

/* srq.c */
int bzc_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num);
struct ibv_srq *bzc_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr);
struct ibv_srq *bzc_create_srq_ex(struct ibv_context *context,
				  struct ibv_srq_init_attr_ex *attr);
int bzc_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		   int attr_mask);
int bzc_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr);
int bzc_destroy_srq(struct ibv_srq *ibsrq);
int bzc_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);

/* wr.c */
uint64_t bzc_send_ops_supported(struct ibv_context *context,
				enum ibv_qp_type qp_type);
uint64_t bzc_send_ops_flags(struct ibv_context *context,
			    enum ibv_qp_type qp_type);
void bzc_qp_init_wr_ops(struct bzc_qp *qp);
int bzc_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr);
int bzc_post_bind_type1(struct bzc_qp *qp, const struct ibv_mw_bind *mw_bind,
			uint32_t rkey);

/* ah.c */
struct ibv_ah *bzc_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int bzc_destroy_ah(struct ibv_ah *ibah);

#endif /* __BZC_H__ */
