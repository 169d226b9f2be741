/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/* Userspace stand-in for the kernel's <linux/build_bug.h>: static_assert() */
#ifndef BZC_KSHIM_BUILD_BUG_H
#define BZC_KSHIM_BUILD_BUG_H
#include <assert.h>
#endif
