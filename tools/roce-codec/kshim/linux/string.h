/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/* Userspace stand-in for the kernel's <linux/string.h> */
#ifndef BZC_KSHIM_STRING_H
#define BZC_KSHIM_STRING_H
#include <string.h>
#endif
