/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * Userspace stand-in for the kernel's <linux/types.h>, enough for emu's
 * RoCE codec (bzc_roce_pkt.c, bzc_icrc.c): the uapi types plus the
 * kernel's short names, bool and the attributes the codec uses.
 */
#ifndef BZC_KSHIM_TYPES_H
#define BZC_KSHIM_TYPES_H

#include_next <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;

#define __packed __attribute__((__packed__))
#define __force

#endif
