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

/*
 * The remote FLUSH rights: uAPI access bits 8 and 9, which Linux 6.2 named
 * IB_ACCESS_FLUSH_GLOBAL and IB_ACCESS_FLUSH_PERSISTENT.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
#define BZC_ACCESS_FLUSH (IB_ACCESS_FLUSH_GLOBAL | IB_ACCESS_FLUSH_PERSISTENT)
#else
#define BZC_ACCESS_FLUSH (BIT(8) | BIT(9))
#endif

#endif /* BZC_COMPAT_H */
