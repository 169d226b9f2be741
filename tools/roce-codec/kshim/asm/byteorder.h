/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/* Userspace stand-in for the kernel's byte order helpers */
#ifndef BZC_KSHIM_BYTEORDER_H
#define BZC_KSHIM_BYTEORDER_H
#include <endian.h>
#include <linux/types.h>

#define cpu_to_be16(x) ((__be16)htobe16(x))
#define cpu_to_be32(x) ((__be32)htobe32(x))
#define cpu_to_be64(x) ((__be64)htobe64(x))
#define cpu_to_le32(x) ((__le32)htole32(x))
#define be16_to_cpu(x) be16toh((u16)(x))
#define be32_to_cpu(x) be32toh((u32)(x))
#define be64_to_cpu(x) be64toh((u64)(x))
#define le32_to_cpu(x) le32toh((u32)(x))
#endif
