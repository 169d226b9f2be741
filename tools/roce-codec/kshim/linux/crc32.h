/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * Userspace stand-in for the kernel's crc32_le(): CRC-32 with the
 * reflected polynomial 0xedb88320, no preset or final complement (the
 * caller's, as in the kernel), one bit at a time -- slow and obviously
 * right. test_roce_codec.py checks the ICRC it gives against zlib's CRC-32
 * and against rxe's packets.
 */
#ifndef BZC_KSHIM_CRC32_H
#define BZC_KSHIM_CRC32_H
#include <linux/types.h>

static inline u32 crc32_le(u32 crc, const void *p, size_t len)
{
	const u8 *b = p;
	int i;

	while (len--) {
		crc ^= *b++;
		for (i = 0; i < 8; i++)
			crc = (crc >> 1) ^ (0xedb88320U & -(crc & 1));
	}
	return crc;
}
#endif
