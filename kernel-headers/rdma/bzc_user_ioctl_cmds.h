/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * bzc uAPI: object, method and attribute ids of the bzc driver namespace on
 * the uverbs ioctl interface.
 *
 * Ids start at (1U << UVERBS_ID_NS_SHIFT) so they never collide with the
 * core's. Linux 6.1 limits a driver namespace to 12 objects, 8 methods per
 * object and 31 attributes per method. The ioctl header's driver_id must be
 * BZC_RDMA_DRIVER_ID or the core refuses the call with EINVAL.
 *
 * No driver objects exist yet: the standard verbs need none. The bulk
 * channel and the MR cache are added here as they land.
 */
#ifndef BZC_USER_IOCTL_CMDS_H
#define BZC_USER_IOCTL_CMDS_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/bzc_user_ioctl_verbs.h>

#endif /* BZC_USER_IOCTL_CMDS_H */
