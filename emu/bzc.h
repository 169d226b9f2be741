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
#include <rdma/ib_verbs.h>
#include <rdma/bzc-abi.h>

#define BZC_DRV_NAME "bzc"

/* One port, RoCE v2 on the netdev named at `rdma link add`. */
#define BZC_PORT 1
#define BZC_GID_TBL_LEN 128
#define BZC_PKEY_TBL_LEN 1
#define BZC_DEFAULT_PKEY 0xffff
#define BZC_MAX_CQE (SZ_64K - 1)
#define BZC_MAX_MR SZ_256K

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
	/* MRs by key index (lkey >> 8); lookups from the data path. */
	struct xarray mr_xa;
	u32 mr_next;
};

struct bzc_ucontext {
	struct ib_ucontext ibuc;
};

struct bzc_pd {
	struct ib_pd ibpd;
};

/* Kernel memory (vmalloc_user) that a process maps through its ucontext. */
struct bzc_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	void *kaddr;
};

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
};

struct bzc_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;
	struct page **pages;		/* pinned pages of the region, in order */
	u64 npages;
	u64 iova;
	u64 length;
	int access;
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

static inline struct bzc_mr *to_bmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct bzc_mr, ibmr);
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
int bzc_ring_alloc(struct bzc_ring *ring, struct ib_udata *udata,
		   size_t hdr_bytes, size_t slot_bytes, u32 entries);
void bzc_ring_free(struct bzc_ring *ring);

/* bzc_cq.c */
int bzc_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  struct ib_udata *udata);
int bzc_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int bzc_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
bool bzc_cq_post(struct bzc_cq *cq, const struct bzc_cqe *cqe, bool solicited);

/* bzc_mr.c */
struct ib_mr *bzc_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
			      u64 iova, int access, struct ib_udata *udata);
int bzc_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);

#endif /* BZC_H */
