/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzc: where the kernel API moved between the kernels bzc builds for,
 * Linux 6.1 (Debian 12) and 6.12 (Debian 13). Every version check of the
 * module is here, each with the release that made the change.
 */
#ifndef BZC_COMPAT_H
#define BZC_COMPAT_H

#include <linux/bits.h>
#include <linux/mm.h>
#include <linux/version.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "bzc.h"

/*
 * ib_device_ops.create_cq: Linux 6.11 passes the uverbs attribute bundle
 * instead of the driver udata. Kernel consumers (ib_alloc_cq()) pass NULL
 * either way.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
static inline int bzc_create_cq_op(struct ib_cq *ibcq,
				   const struct ib_cq_init_attr *attr,
				   struct uverbs_attr_bundle *attrs)
{
	return bzc_create_cq(ibcq, attr, attrs ? &attrs->driver_udata : NULL);
}
#else
static inline int bzc_create_cq_op(struct ib_cq *ibcq,
				   const struct ib_cq_init_attr *attr,
				   struct ib_udata *udata)
{
	return bzc_create_cq(ibcq, attr, udata);
}
#endif

/*
 * ib_device_ops.reg_user_mr_dmabuf: Linux 6.10 passes the uverbs attribute
 * bundle instead of the driver udata.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
static inline struct ib_mr *
bzc_reg_user_mr_dmabuf_op(struct ib_pd *pd, u64 offset, u64 length, u64 iova,
			  int fd, int access, struct uverbs_attr_bundle *attrs)
{
	return bzc_reg_user_mr_dmabuf(pd, offset, length, iova, fd, access,
				      attrs ? &attrs->driver_udata : NULL);
}
#else
static inline struct ib_mr *
bzc_reg_user_mr_dmabuf_op(struct ib_pd *pd, u64 offset, u64 length, u64 iova,
			  int fd, int access, struct ib_udata *udata)
{
	return bzc_reg_user_mr_dmabuf(pd, offset, length, iova, fd, access,
				      udata);
}
#endif

/* pin_user_pages_remote(): Linux 6.5 dropped the vmas argument. */
static inline long bzc_pin_user_pages_remote(struct mm_struct *mm,
					     unsigned long start,
					     unsigned long nr_pages,
					     unsigned int gup_flags,
					     struct page **pages)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0)
	return pin_user_pages_remote(mm, start, nr_pages, gup_flags, pages,
				     NULL);
#else
	return pin_user_pages_remote(mm, start, nr_pages, gup_flags, pages,
				     NULL, NULL);
#endif
}

/* vma->vm_flags: Linux 6.3 made it read-only, set with vm_flags_set(). */
static inline void bzc_vm_flags_set(struct vm_area_struct *vma,
				    vm_flags_t flags)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

/*
 * The IBTA Memory Placement Extensions (RDMA ATOMIC_WRITE and FLUSH):
 * Linux 6.2 named their opcodes, the device capability bits and the
 * FLUSH access bits 8 and 9, and its core lets an MR with a FLUSH right
 * through when the device advertises that placement type. Linux 6.1's
 * core refuses those access bits (EINVAL), so bzc offers FLUSH only from
 * 6.2 on (BZC_CORE_HAS_FLUSH). The capability bits reach user space on
 * 6.1 too: query_device_ex copies device_cap_flags whole.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
#define BZC_CORE_HAS_FLUSH true
#define BZC_ACCESS_FLUSH_GLOBAL IB_ACCESS_FLUSH_GLOBAL
#define BZC_ACCESS_FLUSH_PERSISTENT IB_ACCESS_FLUSH_PERSISTENT
#define BZC_DEVICE_ATOMIC_WRITE IB_DEVICE_ATOMIC_WRITE
#define BZC_DEVICE_FLUSH_GLOBAL IB_DEVICE_FLUSH_GLOBAL
static_assert((int)BZC_WR_FLUSH == (int)IB_UVERBS_WR_FLUSH);
static_assert((int)BZC_WR_ATOMIC_WRITE == (int)IB_UVERBS_WR_ATOMIC_WRITE);
static_assert((int)BZC_WC_FLUSH == (int)IB_WC_FLUSH);
static_assert((int)BZC_WC_ATOMIC_WRITE == (int)IB_WC_ATOMIC_WRITE);
static_assert((int)BZC_FLUSH_GLOBAL == (int)IB_FLUSH_GLOBAL);
static_assert((int)BZC_FLUSH_PERSISTENT == (int)IB_FLUSH_PERSISTENT);
static_assert((int)BZC_FLUSH_RANGE == (int)IB_FLUSH_RANGE);
static_assert((int)BZC_FLUSH_MR == (int)IB_FLUSH_MR);
#else
#define BZC_CORE_HAS_FLUSH false
#define BZC_ACCESS_FLUSH_GLOBAL BIT(8)
#define BZC_ACCESS_FLUSH_PERSISTENT BIT(9)
#define BZC_DEVICE_ATOMIC_WRITE BIT_ULL(40)
#define BZC_DEVICE_FLUSH_GLOBAL 0
#endif
#define BZC_ACCESS_FLUSH (BZC_ACCESS_FLUSH_GLOBAL | BZC_ACCESS_FLUSH_PERSISTENT)

#endif /* BZC_COMPAT_H */
