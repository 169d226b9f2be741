/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/* Userspace stand-in for the kernel's <linux/stddef.h>: offsetof() */
#ifndef BZC_KSHIM_STDDEF_H
#define BZC_KSHIM_STDDEF_H
#include_next <linux/stddef.h>
#include <stddef.h>
#endif
