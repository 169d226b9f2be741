/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzc: software model of the bulk zero-copy RDMA device.
 *
 * The device is a NIC whose queues live in host memory: rings are vmalloc'ed
 * by the kernel and mapped into the process, and data moves once, from
 * source pages to destination pages.
 */
#ifndef BZC_H
#define BZC_H

#include <linux/netdevice.h>
#include <linux/sizes.h>
#include <linux/xarray.h>
#include <linux/workqueue.h>
#include <linux/refcount.h>
#include <linux/completion.h>
#include <linux/hashtable.h>
#include <linux/mutex.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/bzc-abi.h>

#define BZC_DRV_NAME "bzc"

/* One port, RoCE v2 on the netdev named at `rdma link add`. */
#define BZC_PORT 1
#define BZC_GID_TBL_LEN 128
#define BZC_PKEY_TBL_LEN 1
#define BZC_DEFAULT_PKEY 0xffff
#define BZC_MAX_MR SZ_256K		/* largest key table: MRs and windows */
#define BZC_MAX_SGE 32
/*
 * Pages a received packet's payload (at most 4096 bytes) may span in its
 * skb: each of at most BZC_MAX_SGE pieces two more than its bytes fill.
 */
#define BZC_RX_PAGES (2 * BZC_MAX_SGE + 2)
#define BZC_MAX_MSG_SZ SZ_2G
/* Pages one fast-register MR maps (max_fast_reg_page_list_len). */
#define BZC_MAX_FR_PAGES 512
#define BZC_MAX_MCAST_GRP 1024
#define BZC_MAX_MCAST_QP_ATTACH 32
#define BZC_MAX_MCAST_ATTACH 8192	/* QP attachments over all groups */
#define BZC_MCAST_QPN 0xffffff		/* the DQPN of multicast datagrams */

struct bzc_sgl;
struct bzc_wire;

/* The port's counters (bzc_stats.c), named there. */
enum bzc_counter {
	BZC_CNT_DOORBELLS,	/* SQ doorbells rung by processes */
	BZC_CNT_SENT_WQES,	/* send WQEs completed successfully */
	BZC_CNT_SENT_BYTES,	/* bytes they moved (READs: bytes read) */
	BZC_CNT_SEND_ERRORS,	/* send WQEs completed in error (not flushed) */
	BZC_CNT_RCVD_MSGS,	/* receive completions */
	BZC_CNT_RNR_NAKS,	/* RNR waits: no receive at an RC responder */
	BZC_CNT_CQ_OVERFLOWS,	/* CQs put in error by a dropped CQE */
	BZC_CNT_BULK_WQES,	/* bulk WQEs completed successfully */
	BZC_CNT_BULK_BYTES,	/* bytes they moved */
	/* The wire (RoCE v2 on the netdev): */
	BZC_CNT_TX_PKTS,	/* packets sent */
	BZC_CNT_TX_BYTES,	/* their bytes, IP header to ICRC */
	BZC_CNT_RX_PKTS,	/* packets taken off the netdev */
	BZC_CNT_RX_BYTES,	/* their bytes, IP header to ICRC */
	BZC_CNT_RX_DROPS,	/* dropped: bad headers, no such QP, ... */
	BZC_CNT_ICRC_ERRORS,	/* dropped for a bad ICRC */
	BZC_CNT_RX_DUPLICATES,	/* duplicate or late packets (RC) */
	BZC_CNT_RX_OUT_OF_SEQ,	/* packets past a PSN gap */
	BZC_CNT_RETRANSMITS,	/* RC messages sent again */
	BZC_CNT_NAKS_SENT,	/* NAKs and RNR NAKs sent */
	BZC_CNT_NAKS_RCVD,	/* NAKs and RNR NAKs received */
	BZC_CNT_TX_ERRORS,	/* packets that could not be sent */
	/* On-demand paging (bzc_odp.c): */
	BZC_CNT_ODP_FAULTS,	/* hmm_range_fault() runs that stored pages */
	BZC_CNT_ODP_FAULT_PAGES, /* the pages they stored */
	BZC_CNT_ODP_INVALIDATIONS, /* MMU-notifier invalidations of ODP MRs */
	BZC_NUM_COUNTERS
};

struct bzc_stats {
	u64 v[BZC_NUM_COUNTERS];
};

struct bzc_dev {
	struct ib_device ibdev;
	struct ib_device_attr attr;
	/*
	 * Not reference counted: the device is unregistered on
	 * NETDEV_UNREGISTER before the netdev goes away, as rxe does. The core
	 * holds its own reference for the port through ib_device_set_netdev().
	 */
	struct net_device *ndev;
	/* Last port state reported with an event; changed under RTNL only. */
	enum ib_port_state port_state;
	/*
	 * Objects the data path finds by number. Lookups take the xarray
	 * lock and a reference, so destroy can wait for in-flight users.
	 */
	struct xarray mr_xa;		/* MRs and MWs by key index (key >> 8) */
	u32 mr_next;
	u32 key_max;			/* largest key index: max_mr + max_mw */
	u8 *key_bytes;			/* by key index: the byte of its last key */
	struct xarray qp_xa;		/* by QPN */
	u32 qp_next;
	struct xarray ah_xa;		/* by bzc_create_ah_resp.ah_index */
	u32 ah_next;
	struct xarray srq_xa;		/* XRC SRQs by SRQ number (bzc_xrc.c) */
	u32 srq_next;
	/*
	 * Objects of each kind that exist, each at most its attr.max_*
	 * (bzc_obj_get()). Kernel PDs' DMA MRs are not counted.
	 */
	atomic_t num_pd;
	atomic_t num_cq;
	atomic_t num_qp;
	atomic_t num_srq;
	atomic_t num_mr;
	atomic_t num_mw;
	atomic_t num_ah;
	atomic_t bulk_chans;		/* at most bzc_bulk_max_chans() */
	atomic64_t dm_bytes;		/* device memory, at most max_dm_size */
	/*
	 * Multicast groups by MGID (bzc_mcast.c): each lists the QPs
	 * attached to it, without holding references. A QP is detached from
	 * all of them before its destruction waits for its users. mc_mutex
	 * serializes the changes (the netdev joins and leaves, which take
	 * RTNL, never run under it); mc_lock also keeps the senders' and the
	 * receiver's lookups out. mc_leaving counts the leaves a QP's
	 * destruction left to a worker.
	 */
	struct mutex mc_mutex;		/* changes */
	spinlock_t mc_lock;		/* changes, lookups */
	DECLARE_HASHTABLE(mc_hash, 6);
	u32 mc_groups;			/* at most attr.max_mcast_grp */
	u32 mc_attached;		/* at most max_total_mcast_qp_attach */
	atomic_t mc_leaving;
	struct bzc_stats __percpu *stats;
	/*
	 * The wire (bzc_net.c, bzc_roce_rx.c): RoCE v2 packets the netdev's
	 * rx_handler took for this device, at most BZC_RXQ_MAX, wait in rxq
	 * for rx_work, which runs the responder with rx_scratch. rx_attached
	 * (changed under RTNL) says the handler is registered and ndev held.
	 * rx_payload is the packet's payload as an SGL over the skb's pages
	 * (rx_pages, BZC_RX_PAGES of them), copied from there once.
	 */
	struct sk_buff_head rxq;
	struct work_struct rx_work;
	struct bzc_sgl *rx_sgl;
	void *rx_rqe;
	struct bzc_sgl *rx_payload;
	struct page **rx_pages;
	bool rx_attached;
	/*
	 * The sockets multicast datagrams go out with, one per IP version
	 * (bzc_net.c): set while rx_attached, read under RCU.
	 */
	struct socket __rcu *mc_sock4;
	struct socket __rcu *mc_sock6;
};

/* Count `n` on this CPU's copy of a counter; any context. */
static inline void bzc_count(struct bzc_dev *bdev, enum bzc_counter c, u64 n)
{
	this_cpu_add(bdev->stats->v[c], n);
}

/*
 * Count one more object against a device limit; -ENOMEM at the limit, as
 * hardware fails when its tables are full. Any context.
 */
static inline int bzc_obj_get(struct bzc_dev *bdev, atomic_t *num, int max,
			      const char *what)
{
	if (atomic_add_unless(num, 1, max))
		return 0;
	ibdev_info_ratelimited(&bdev->ibdev, "%s limit of %d reached\n",
			       what, max);
	return -ENOMEM;
}

static inline void bzc_obj_put(atomic_t *num)
{
	atomic_dec(num);
}

struct bzc_ucontext {
	struct ib_ucontext ibuc;
};

struct bzc_mr_cache;

struct bzc_pd {
	struct ib_pd ibpd;
	struct bzc_mr_cache *mrc;	/* user PDs: pinned ranges by address */
};

/*
 * Allocation flags for what an object needs: a process's objects (udata)
 * are charged to its memory cgroup, kernel consumers' are not.
 */
static inline gfp_t bzc_gfp(struct ib_udata *udata)
{
	return udata ? GFP_KERNEL_ACCOUNT : GFP_KERNEL;
}

struct bzc_dm;

/*
 * Kernel memory that a process maps through its ucontext: a ring the
 * entry owns (vmalloc_user), or device memory it holds a reference on.
 */
struct bzc_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	void *kaddr;
	struct bzc_dm *dm;
};

/*
 * The core's record of a user mapping it revokes on disassociate, and the
 * exported function that links a VMA into its list (ib_core_uverbs.c). The
 * core offers drivers only rdma_user_mmap_io() for this, which maps one
 * physically contiguous range; rings are vmalloc memory. The declarations
 * live in the core's private core_priv.h, so they are repeated here, and
 * must match it: unchanged from Linux 5.5 to at least 6.12.
 */
struct rdma_umap_priv {
	struct vm_area_struct *vma;
	struct list_head list;
	struct rdma_user_mmap_entry *entry;
};

void rdma_umap_priv_init(struct rdma_umap_priv *priv,
			 struct vm_area_struct *vma,
			 struct rdma_user_mmap_entry *entry);

/*
 * A ring shared with the process: a header then `entries` fixed-size slots.
 * Everything the process can write in it is re-validated on every read.
 */
struct bzc_ring {
	void *kaddr;
	u32 entries;			/* power of two */
	struct bzc_mmap_entry *mmap;	/* NULL for a kernel consumer's ring */
	u64 mmap_key;
	u32 mmap_len;
};

struct bzc_cq {
	struct ib_cq ibcq;
	spinlock_t lock;		/* producers and resize */
	struct bzc_ring ring;
	u32 prod;			/* the kernel's copy, never read back */
	bool overflowed;
	bool timestamps;		/* IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION */
};

struct bzc_mr {
	struct ib_mr ibmr;
	refcount_t refcnt;		/* 1 while registered + data path users */
	struct completion released;
	struct ib_umem *umem;		/* or, for a cached MR: */
	struct bzc_mrc_ent *ent;	/* the MR cache range holding the pages */
	struct bzc_dm *dm;		/* or the device memory, referenced */
	struct bzc_dmabuf *dmabuf;	/* or a dma-buf, attached and pinned */
	struct page **pages;		/* pinned pages of the region, in order */
	u64 npages;
	u32 page_off;			/* of the first byte in pages[0] */
	u64 iova;
	u64 length;
	int access;			/* READ_ONCE: rereg changes it */
	atomic_t num_mw;		/* windows bound to it; changed with */
					/* mr_xa locked while it is registered */
	struct bzc_fr *fr;		/* a fast-register MR's state, or NULL */
	struct bzc_odp *odp;		/* or on-demand paging: no pages above */
};

/*
 * An ODP MR's view of its process's memory (bzc_odp.c): the pages the
 * device has looked up, by user page number, each tagged when mapped
 * writable, dropped by the notifier when the mapping changes. Copies lock
 * the tables for reading while they use the pages (bzc_odp_lock()).
 */
struct bzc_odp {
	struct mmu_interval_notifier notifier;
	struct bzc_dev *bdev;		/* the MR's device: its counters */
	struct xarray pages;
	/* Entries in pages, and of them writable: xarray locked to change. */
	unsigned long present;
	unsigned long writable;
	u64 uaddr;			/* user address of the MR's first byte */
	unsigned long start;		/* the range watched, page aligned */
	unsigned long end;
	bool implicit;			/* the whole address space */
};

/*
 * A fast-register MR (bzc_fastreg.c): a kernel consumer maps pages into
 * `staged` (ib_map_mr_sg()), then an IB_WR_REG_MR on a send queue makes
 * them the MR's pages and the key valid; LOCAL_INV or SEND_WITH_INV make
 * it invalid again. `valid` and `key` change with mr_xa locked; the data
 * path reads them there (bzc_mr_key_ok()).
 */
struct bzc_fr {
	struct page **staged;		/* the next registration's pages */
	u32 staged_npages;
	u32 staged_off;			/* of its first byte in staged[0] */
	u32 max_pages;			/* of both page arrays: max_num_sg */
	u32 key;			/* the key REG_MR gave it */
	bool valid;
	bool registering;		/* a REG_MR waits for its accesses */
};

/*
 * A memory window: an rkey naming a range of an MR with rights of its own.
 * Found through mr_xa like an MR (tagged), and used only with mr_xa
 * locked, so dealloc needs no reference count: the entry is erased first.
 * While bound it holds a reference on its MR and counts in mr->num_mw.
 */
struct bzc_mw {
	struct ib_mw ibmw;
	spinlock_t lock;		/* the binding below */
	struct bzc_mr *mr;		/* NULL while not bound */
	u64 addr;
	u64 length;
	int access;			/* IB_ACCESS_REMOTE_* granted */
	u32 rkey;			/* the current rkey */
	u64 qp_serial;			/* type 2: the QP it is bound to */
};

/* Where a UD datagram or a connected QP's messages go, as the AH said. */
struct bzc_av {
	union ib_gid dgid;
	u32 flow_label;
	u8 sgid_index;
	u8 hop_limit;
	u8 traffic_class;
	u8 sl;
	u8 dmac[ETH_ALEN];
};

struct bzc_ah {
	struct ib_ah ibah;
	struct bzc_av av;
	u32 index;
};

struct bzc_qp {
	struct ib_qp ibqp;
	/* Never reused, unlike the QPN: what a type 2 window is bound to. */
	u64 serial;
	refcount_t refcnt;		/* 1 while it exists + data path users */
	struct completion released;

	/* Attributes; written under `lock` by modify, read by the data path. */
	spinlock_t lock;
	enum ib_qp_state state;
	struct bzc_av av;
	u32 qkey;
	u32 dest_qpn;
	u32 sq_psn;
	u32 rq_psn;
	int access;			/* IB_ACCESS_REMOTE_* the QP accepts */
	u16 pkey_index;
	u8 port;
	u8 timeout;
	u8 retry_cnt;
	u8 rnr_retry;
	u8 min_rnr_timer;
	u8 max_rd_atomic;
	u8 max_dest_rd_atomic;
	enum ib_mtu path_mtu;
	bool sig_all;
	struct ib_xrcd *xrcd;		/* an XRC TGT QP's domain */
	struct mutex modify_mutex;
	u32 mc_groups;			/* groups attached, under mc_lock */

	/* Send queue: executed in order by whoever holds sq_mutex. */
	struct mutex sq_mutex;
	struct delayed_work sq_work;
	struct bzc_ring sq;
	u32 sq_cons;			/* the kernel's copy */
	u32 sq_wqe_size;
	u32 max_send_sge;
	u32 max_inline;
	u8 rnr_left;			/* RNR retries left for the head WQE */
	bool rnr_waiting;
	bool sqd_owed;			/* SQ_DRAINED when the window empties */
	unsigned long rnr_until;	/* jiffies */
	void *sq_wqe;			/* private copy of the head WQE */
	u32 tx_psn;			/* the wire's next PSN to send */
	struct bzc_wire *wire;		/* RC, UC */
	u32 resp_gen;			/* under lock: rq_psn given again */
	/*
	 * Scratch under sq_mutex only: the requester's SGL, and what the
	 * local transport lends the responder it runs (bzc_local.c).
	 */
	struct bzc_sgl *local_sgl;
	struct bzc_sgl *peer_sgl;
	void *peer_rqe;

	/* Receive queue: consumed by any sender, under rq_lock. */
	spinlock_t rq_lock;
	struct bzc_ring rq;
	u32 rq_cons;
	u32 rq_wqe_size;
	u32 max_recv_sge;
	void *rq_wqe;			/* private copy of the RQE being taken */

	/* Kernel QPs (bzc_kqp.c): producers of the rings in kernel memory. */
	spinlock_t ksq_lock;		/* kernel posters to the SQ */
	spinlock_t krq_lock;		/* kernel posters to the RQ */
};

/*
 * A shared receive queue: a mapped ring like an RQ, from which every QP
 * created on it takes receives, under `lock`.
 */
struct bzc_srq {
	struct ib_srq ibsrq;
	/*
	 * An XRC SRQ is found by number by senders (bzc_xrc_srq_get()), so
	 * its destroy waits for them: 1 while it exists + data path users.
	 */
	refcount_t refcnt;
	struct completion released;
	spinlock_t lock;		/* consumers, modify_srq and resize */
	spinlock_t kpost_lock;		/* a kernel consumer's producer */
	struct bzc_ring ring;		/* replaced whole by a resize */
	u32 cons;			/* the kernel's copy */
	u32 wqe_size;
	u32 max_sge;
	u32 limit;			/* armed srq_limit; 0: not armed */
	bool broken;			/* the ring was found corrupt */
};

/* An XRC domain: the core keeps its sharing; bzc needs nothing more. */
struct bzc_xrcd {
	struct ib_xrcd ibxrcd;
};

static inline struct bzc_dev *to_bdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct bzc_dev, ibdev);
}

static inline struct bzc_ucontext *to_buctx(struct ib_ucontext *ibuc)
{
	return container_of(ibuc, struct bzc_ucontext, ibuc);
}

static inline struct bzc_cq *to_bcq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct bzc_cq, ibcq);
}

static inline struct bzc_qp *to_bqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct bzc_qp, ibqp);
}

static inline struct bzc_srq *to_bsrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct bzc_srq, ibsrq);
}

static inline struct bzc_ah *to_bah(struct ib_ah *ibah)
{
	return container_of(ibah, struct bzc_ah, ibah);
}

static inline struct bzc_pd *to_bpd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct bzc_pd, ibpd);
}

static inline struct bzc_mr *to_bmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct bzc_mr, ibmr);
}

/* mr_xa holds MRs as plain pointers and MWs tagged with this. */
#define BZC_KEY_TAG_MW 1

static inline struct bzc_mw *to_bmw(struct ib_mw *ibmw)
{
	return container_of(ibmw, struct bzc_mw, ibmw);
}

/* Datagram semantics: UD, and the GSI QP (QP1) that carries MADs. */
static inline bool bzc_type_ud(enum ib_qp_type type)
{
	return type == IB_QPT_UD || type == IB_QPT_GSI;
}

/*
 * Reliable connected semantics (acknowledged, RNR retries, class C errors
 * at the responder): RC, and XRC's initiator and target halves.
 */
static inline bool bzc_type_reliable(enum ib_qp_type type)
{
	return type == IB_QPT_RC || type == IB_QPT_XRC_INI ||
	       type == IB_QPT_XRC_TGT;
}

/* A kernel consumer's QP: its rings are not mapped into any process. */
static inline bool bzc_qp_is_kernel(struct bzc_qp *qp)
{
	return !qp->sq.mmap;
}

/* A kernel PD's DMA MR (bzc_kmem.c): kernel addresses, no pinned pages. */
static inline bool bzc_mr_is_kernel(struct bzc_mr *mr)
{
	return !mr->umem && !mr->ent && !mr->dm && !mr->dmabuf && !mr->fr &&
	       !mr->odp;
}

/*
 * Does `key` name `mr` now? Its own key does, unless it is a fast-register
 * MR that is not registered. Called with mr_xa locked.
 */
static inline bool bzc_mr_key_ok(const struct bzc_mr *mr, u32 key)
{
	if (mr->fr)
		return mr->fr->valid && mr->fr->key == key;
	return mr->ibmr.lkey == key;
}

/* Slot `index` of an SQ or RQ ring: the index is masked, never trusted. */
static inline void *bzc_wq_slot(struct bzc_ring *ring, u32 index,
				u32 slot_size)
{
	return ring->kaddr + BZC_WQ_RING_WQE_OFFSET +
	       (size_t)(index & (ring->entries - 1)) * slot_size;
}

/*
 * The device's one copy, of at most a page: whole aligned pages go through
 * copy_page(), the architecture's page copy (rep movsq or an unrolled loop
 * on x86-64). The generic memcpy() may be a byte-wise rep movsb, which
 * emulators such as QEMU's TCG execute a byte per step, several times
 * slower.
 */
static inline void bzc_copy_piece(void *dst, const void *src, size_t len)
{
	if (len == PAGE_SIZE && PAGE_ALIGNED(dst) && PAGE_ALIGNED(src))
		copy_page(dst, (void *)src);
	else
		memcpy(dst, src, len);
}

static inline struct bzc_mmap_entry *
to_bmmap(struct rdma_user_mmap_entry *rdma_entry)
{
	return container_of(rdma_entry, struct bzc_mmap_entry, rdma_entry);
}

/* bzc_verbs.c */
extern const struct ib_device_ops bzc_dev_ops;
void bzc_init_device_attr(struct bzc_dev *bdev);
enum ib_port_state bzc_port_state(struct bzc_dev *bdev);

/* bzc_mmap.c */
int bzc_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma);
void bzc_mmap_free(struct rdma_user_mmap_entry *rdma_entry);
struct bzc_mmap_entry *bzc_mmap_insert(struct ib_ucontext *ibuc, void *kaddr,
				       size_t size, struct bzc_dm *dm,
				       u64 *key);
int bzc_ring_alloc(struct bzc_ring *ring, struct ib_udata *udata,
		   size_t hdr_bytes, size_t slot_bytes, u32 entries);
void bzc_ring_free(struct bzc_ring *ring);

/* bzc_cq.c */
int bzc_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  struct ib_udata *udata);
int bzc_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int bzc_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
/* Handlers bzc_cq_write() leaves to bzc_cq_notify(). */
#define BZC_CQ_CALL_COMP	BIT(0)	/* comp_handler: the CQ was armed */
#define BZC_CQ_CALL_OVERFLOW	BIT(1)	/* IB_EVENT_CQ_ERR: it overflowed */
bool bzc_cq_write(struct bzc_cq *cq, const struct bzc_cqe *cqe, bool solicited,
		  u32 *calls);
void bzc_cq_notify(struct bzc_cq *cq, u32 calls);
bool bzc_cq_post(struct bzc_cq *cq, const struct bzc_cqe *cqe, bool solicited);

/* bzc_mr.c */
struct ib_mr *bzc_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
			      u64 iova, int access, struct ib_udata *udata);
int bzc_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ib_mr *bzc_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				u64 length, u64 iova, int access,
				struct ib_pd *ibpd, struct ib_udata *udata);
struct bzc_mr *bzc_mr_get(struct bzc_dev *bdev, u32 key);
struct bzc_mr *bzc_rkey_get(struct bzc_dev *bdev, u32 rkey, struct bzc_qp *qp,
			    struct ib_pd *pd, u64 addr, u64 len, int access,
			    u64 *off);
struct bzc_mr *bzc_rkey_get_region(struct bzc_dev *bdev, u32 rkey,
				   struct bzc_qp *qp, int access);
void bzc_mr_put(struct bzc_mr *mr);
struct bzc_mr *bzc_lkey_get(struct bzc_dev *bdev, u32 lkey, struct ib_pd *pd,
			    u64 addr, u64 len, int access);
struct bzc_mr *bzc_mr_alloc(gfp_t gfp);
void bzc_mr_set_range(struct bzc_mr *mr, u64 iova, u64 length, int access);
int bzc_mr_assign_key(struct bzc_dev *bdev, struct bzc_mr *mr);
bool bzc_mr_access_ok(int access);

/* bzc_odp.c: on-demand paging MRs */
bool bzc_odp_active(void);
int bzc_odp_init(struct bzc_dev *bdev, struct bzc_mr *mr, u64 start,
		 bool implicit);
void bzc_odp_release(struct bzc_mr *mr);
int bzc_odp_fault(struct bzc_mr *mr, u64 off, u64 len, bool write,
		  bool fault);
struct page *bzc_odp_page(struct bzc_mr *mr, u64 off, bool write);
unsigned int bzc_odp_pages(struct bzc_mr *mr, u64 off, unsigned int n,
			   bool write, struct page **pages);
/* The most a copy moves with the ODP tables locked: invalidations wait. */
#define BZC_ODP_RUN	(64 * 1024)
void bzc_odp_lock(void);
void bzc_odp_unlock(void);
int bzc_advise_mr(struct ib_pd *ibpd, enum ib_uverbs_advise_mr_advice advice,
		  u32 flags, struct ib_sge *sg_list, u32 num_sge,
		  struct uverbs_attr_bundle *attrs);

/* bzc_dm.c */
struct ib_dm *bzc_alloc_dm(struct ib_device *ibdev,
			   struct ib_ucontext *ibuc,
			   struct ib_dm_alloc_attr *attr,
			   struct uverbs_attr_bundle *attrs);
int bzc_dealloc_dm(struct ib_dm *ibdm, struct uverbs_attr_bundle *attrs);
struct ib_mr *bzc_reg_dm_mr(struct ib_pd *ibpd, struct ib_dm *ibdm,
			    struct ib_dm_mr_attr *attr,
			    struct uverbs_attr_bundle *attrs);
void bzc_dm_put(struct bzc_dm *dm);
extern const struct uapi_definition bzc_dm_uapi_defs[];

/* bzc_dmabuf.c */
int bzc_dmabuf_init(void);
void bzc_dmabuf_exit(void);
struct ib_mr *bzc_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
				     u64 length, u64 iova, int fd, int access,
				     struct ib_udata *udata);
void bzc_dmabuf_mr_release(struct bzc_mr *mr);
int bzc_keys_init(struct bzc_dev *bdev);
void bzc_keys_free(struct bzc_dev *bdev);
int bzc_key_reserve(struct bzc_dev *bdev, u32 *key);
void bzc_key_publish(struct bzc_dev *bdev, u32 key, void *entry);

/*
 * Pages one pinned range (MR or MR cache range) may hold: its page array
 * must stay within what kvmalloc() takes (just under 1 TiB of 4 KiB pages).
 */
#define BZC_MAX_PIN_PAGES (INT_MAX / sizeof(struct page *))

/*
 * The page array of a range to pin. Its size comes from the user: refused
 * above BZC_MAX_PIN_PAGES, charged to the caller's memory cgroup, and no
 * allocation-failure warning.
 */
static inline struct page **bzc_page_array_alloc(unsigned long npages)
{
	if (npages > BZC_MAX_PIN_PAGES)
		return NULL;
	return kvcalloc(npages, sizeof(struct page *),
			GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
}

/* bzc_mr_cache.c */
struct bzc_mr_cache_stats;
extern unsigned int bzc_mr_cache_max_mb;
int bzc_mrc_create(struct bzc_pd *pd);
void bzc_mrc_destroy(struct bzc_pd *pd);
struct bzc_mrc_ent *bzc_mrc_get(struct bzc_pd *pd, u64 addr, u64 len,
				bool *hit);
void bzc_mrc_put(struct bzc_mrc_ent *ent);
bool bzc_mrc_ent_valid(const struct bzc_mrc_ent *ent);
bool bzc_mrc_owned_by_current(struct bzc_pd *pd);
struct page **bzc_mrc_ent_pages(const struct bzc_mrc_ent *ent, u64 addr);
void bzc_mrc_stats(struct bzc_pd *pd, struct bzc_mr_cache_stats *st);
struct bzc_mr *bzc_cached_mr_create(struct bzc_pd *pd, u64 addr, u64 len,
				    int access, bool *hit);
void bzc_cached_mr_destroy(struct bzc_mr *mr);

/* bzc_bulk.c */
struct bzc_bulk_chan;
void bzc_bulk_caps(struct bzc_bulk_caps *caps);
struct bzc_bulk_chan *bzc_bulk_chan_create(struct bzc_pd *pd,
					   struct bzc_cq *cq,
					   struct bzc_cq *rcq, u32 depth,
					   struct ib_udata *udata,
					   struct bzc_bulk_chan_create_resp *resp);
void bzc_bulk_chan_destroy(struct bzc_bulk_chan *chan);
int bzc_bulk_doorbell(struct bzc_bulk_chan *chan);
int bzc_bulk_chan_connect_qp(struct bzc_bulk_chan *chan, struct ib_qp *ibqp);
/* bzc_bulk_qp.c */
int bzc_bulk_qp_check(struct ib_qp *ibqp, struct ib_pd *pd);
int bzc_bulk_chan_connect(struct bzc_bulk_chan *chan,
			  const union ib_gid *remote_gid, u32 remote_chan,
			  u32 sgid_index);

/* bzc_bulk_uapi.c */
extern const struct uapi_definition bzc_uapi_defs[];

/* bzc_qp.c */
extern const struct uapi_definition bzc_qp_uapi_defs[];

/* bzc_verbs.c */
extern const struct uapi_definition bzc_context_uapi_defs[];

/* bzc_stats.c */
int bzc_stats_init(struct bzc_dev *bdev);
void bzc_stats_free(struct bzc_dev *bdev);
struct rdma_hw_stats *bzc_alloc_hw_port_stats(struct ib_device *ibdev,
					      u32 port_num);
int bzc_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
		     u32 port, int index);

/* bzc_mw.c */
int bzc_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int bzc_dealloc_mw(struct ib_mw *ibmw);
enum ib_wc_status bzc_mw_bind(struct bzc_qp *qp,
			      const struct bzc_send_wqe *wqe);
int bzc_key_invalidate(struct bzc_dev *bdev, u32 rkey, struct bzc_qp *qp,
		       bool remote);
struct bzc_mr *bzc_mw_resolve(struct bzc_mw *mw, u32 rkey, struct bzc_qp *qp,
			      struct ib_pd *pd, u64 addr, u64 len, int access,
			      u64 *off);

/* bzc_fastreg.c: memory management extensions for kernel consumers */
/* A REG_MR WQE: only a kernel QP's ring holds it (bzc_kqp.c). */
#define BZC_KWR_REG_MR 0xf0
struct ib_mr *bzc_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			   u32 max_num_sg);
int bzc_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		  unsigned int *sg_offset);
enum ib_wc_status bzc_fr_register(struct bzc_qp *qp,
				  const struct bzc_send_wqe *wqe);
int bzc_fr_invalidate(struct bzc_mr *mr, u32 rkey, struct bzc_qp *qp);
void bzc_fr_free(struct bzc_fr *fr);

/* bzc_ah.c */
int bzc_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		  struct ib_udata *udata);
int bzc_destroy_ah(struct ib_ah *ibah, u32 flags);
int bzc_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr);
int bzc_av_from_attr(struct bzc_av *av, const struct rdma_ah_attr *attr);
void bzc_av_to_attr(const struct bzc_av *av, struct rdma_ah_attr *attr);
bool bzc_ah_get_av(struct bzc_dev *bdev, u32 index, struct ib_pd *pd,
		   struct bzc_av *av);

/* bzc_qp.c */
int bzc_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		  struct ib_udata *udata);
int bzc_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_udata *udata);
int bzc_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		 struct ib_qp_init_attr *init);
int bzc_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int bzc_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr);
int bzc_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		  const struct ib_recv_wr **bad_wr);
struct bzc_qp *bzc_qp_get(struct bzc_dev *bdev, u32 qpn);
void bzc_qp_put(struct bzc_qp *qp);

/* bzc_mcast.c */
void bzc_mcast_init(struct bzc_dev *bdev);
void bzc_mcast_wait_leaves(struct bzc_dev *bdev);
void bzc_mcast_cleanup(struct bzc_dev *bdev);
int bzc_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int bzc_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
void bzc_mcast_detach_all(struct bzc_qp *qp);
int bzc_mcast_members(struct bzc_dev *bdev, const union ib_gid *mgid,
		      struct bzc_qp **qps);
void bzc_qp_error(struct bzc_qp *qp, enum ib_event_type event);
void bzc_qp_sq_drained(struct bzc_qp *qp);
void bzc_rq_flush(struct bzc_qp *qp);

/* bzc_srq.c */
int bzc_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		   struct ib_udata *udata);
int bzc_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		   enum ib_srq_attr_mask mask, struct ib_udata *udata);
int bzc_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int bzc_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int bzc_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr);
int bzc_srq_take(struct bzc_srq *srq, struct bzc_recv_wqe *rqe);
extern const struct uapi_definition bzc_srq_uapi_defs[];

/* bzc_xrc.c: XRC domains, SRQ numbers, target QPs */
int bzc_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int bzc_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int bzc_xrc_srq_publish(struct bzc_srq *srq, struct ib_udata *udata);
void bzc_xrc_srq_unpublish(struct bzc_srq *srq);
struct bzc_srq *bzc_xrc_srq_get(struct bzc_qp *tqp, u32 srqn);
void bzc_srq_put(struct bzc_srq *srq);
int bzc_xrc_tgt_check_init(struct ib_qp_init_attr *init);

/* bzc_kcq.c, bzc_kqp.c, bzc_kmem.c: kernel consumers */
int bzc_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int bzc_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int bzc_kqp_check_init(struct ib_qp_init_attr *init);
int bzc_kpost_send(struct bzc_qp *qp, const struct ib_send_wr *wr,
		   const struct ib_send_wr **bad_wr);
int bzc_kring_post_recv(struct bzc_ring *ring, u32 wqe_size, u32 max_sge,
			const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr);
int bzc_kpost_recv(struct bzc_qp *qp, const struct ib_recv_wr *wr,
		   const struct ib_recv_wr **bad_wr);
struct ib_mr *bzc_get_dma_mr(struct ib_pd *ibpd, int access);
bool bzc_kva_range_ok(u64 addr, u64 len);
struct page *bzc_kva_page(unsigned long addr);
void *bzc_kva_map(u64 addr, u64 max, size_t *len);

/* bzc_req.c: the requester (the rest of the data path: bzc_xport.h) */
extern struct workqueue_struct *bzc_wq;
extern struct workqueue_struct *bzc_cpu_wq;

/* Run the QP's worker now; nothing changes if it is already queued. */
static inline void bzc_sq_queue(struct bzc_qp *qp)
{
	queue_delayed_work(bzc_cpu_wq, &qp->sq_work, 0);
}

/* Run the QP's worker `delay` jiffies from now, queued already or not. */
static inline void bzc_sq_queue_in(struct bzc_qp *qp, unsigned long delay)
{
	mod_delayed_work(bzc_cpu_wq, &qp->sq_work, delay);
}

void bzc_sq_kick(struct bzc_qp *qp);
void bzc_sq_work(struct work_struct *work);
int bzc_qp_alloc_scratch(struct bzc_qp *qp, gfp_t gfp);
void bzc_qp_free_scratch(struct bzc_qp *qp);

/* bzc_net.c: the netdev's RoCE v2 packets */
int bzc_net_init(struct bzc_dev *bdev);
int bzc_net_attach(struct bzc_dev *bdev);
int bzc_net_take_over(struct net_device *ndev);
void bzc_net_detach(struct bzc_dev *bdev);
struct sock *bzc_net_mc_sk(struct bzc_dev *bdev, bool v4);
void bzc_net_cleanup(struct bzc_dev *bdev);
int bzc_net_mc_join(struct bzc_dev *bdev, const union ib_gid *mgid);
void bzc_net_mc_leave(struct bzc_dev *bdev, const union ib_gid *mgid);

/* bzc_roce_rx.c */
void bzc_rx_work(struct work_struct *work);

/* bzc_resp.c: the responder (the rest of the data path: bzc_xport.h) */
int bzc_recv_ring_take(struct bzc_ring *ring, u32 *cons, u32 wqe_size,
		       u32 max_sge, struct bzc_recv_wqe *rqe);

#endif /* BZC_H */
