// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the invariant CRC of RoCE v2 packets (IBA Annex A17.8, Vol. 1 7.8.1).
 *
 * The ICRC is the CRC-32 of Ethernet (reflected polynomial 0xedb88320,
 * preset to all ones, complemented) over the fields no router may change:
 * 8 bytes of ones standing for the IB local route header, then the IP,
 * UDP and transport headers with their variant fields set to ones, then
 * the rest of the packet up to the ICRC. Variant fields: IPv4 TOS, TTL and
 * header checksum; IPv6 traffic class, flow label and hop limit; the UDP
 * checksum; BTH's resv8a byte (FECN, BECN). Like Ethernet's FCS it goes on
 * the wire least significant byte first.
 *
 * crc32_le() does the arithmetic; the masking is here. Flat buffers only:
 * the packet builder and the receive path feed skb pieces to
 * bzc_icrc_add() one after another.
 */
#include <linux/types.h>
#include <linux/crc32.h>
#include <linux/errno.h>
#include <linux/string.h>

#include "bzc_roce_hdr.h"

/* IP header byte offsets of the variant fields */
#define IPV4_TOS_OFF	1
#define IPV4_TTL_OFF	8
#define IPV4_CSUM_OFF	10
#define IPV6_HOP_OFF	7
#define UDP_CSUM_OFF	6

static const u8 bzc_icrc_lrh_ones[8] = {
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
};

/* Length of IP + UDP + BTH at iph, or 0 if not IPv4 without options or IPv6 */
static unsigned int bzc_icrc_hdrs_len(const u8 *iph)
{
	if (iph[0] == 0x45)
		return BZC_IPV4_HLEN + BZC_UDP_HLEN + BZC_BTH_LEN;
	if ((iph[0] >> 4) == 6)
		return BZC_IPV6_HLEN + BZC_UDP_HLEN + BZC_BTH_LEN;
	return 0;
}

/**
 * bzc_icrc_hdrs() - start an ICRC with the masked headers of a packet
 * @iph: the IP header of a RoCE v2 packet, followed by UDP and BTH (an
 *	IPv4 header without options, or an IPv6 header without extension
 *	headers; the caller has checked which and that the bytes are there)
 *
 * Return: the running CRC (crc32_le() state) after the 8 bytes of ones
 * and the IP, UDP and BTH headers with their variant fields masked; go on
 * with bzc_icrc_add() from the byte after BTH.
 */
u32 bzc_icrc_hdrs(const void *iph)
{
	u8 hdrs[BZC_IPV6_HLEN + BZC_UDP_HLEN + BZC_BTH_LEN];
	unsigned int len = bzc_icrc_hdrs_len(iph);
	unsigned int udp;
	u32 crc;

	crc = crc32_le(~0U, bzc_icrc_lrh_ones, sizeof(bzc_icrc_lrh_ones));
	if (!len)	/* not a RoCE v2 IP header: a CRC nothing matches */
		return crc;
	memcpy(hdrs, iph, len);
	if (hdrs[0] == 0x45) {
		hdrs[IPV4_TOS_OFF] = 0xff;
		hdrs[IPV4_TTL_OFF] = 0xff;
		hdrs[IPV4_CSUM_OFF] = 0xff;
		hdrs[IPV4_CSUM_OFF + 1] = 0xff;
		udp = BZC_IPV4_HLEN;
	} else {
		/* all of the first word but the version: class and label */
		hdrs[0] |= 0x0f;
		hdrs[1] = 0xff;
		hdrs[2] = 0xff;
		hdrs[3] = 0xff;
		hdrs[IPV6_HOP_OFF] = 0xff;
		udp = BZC_IPV6_HLEN;
	}
	hdrs[udp + UDP_CSUM_OFF] = 0xff;
	hdrs[udp + UDP_CSUM_OFF + 1] = 0xff;
	hdrs[udp + BZC_UDP_HLEN + BZC_BTH_RESV8A_OFF] = 0xff;

	return crc32_le(crc, hdrs, len);
}

/**
 * bzc_icrc_add() - continue an ICRC over the next bytes of the packet
 * @crc: the running CRC from bzc_icrc_hdrs() or a previous call
 * @buf: the bytes
 * @len: their number
 *
 * Return: the running CRC.
 */
u32 bzc_icrc_add(u32 crc, const void *buf, size_t len)
{
	return crc32_le(crc, buf, len);
}

/**
 * bzc_icrc_final() - the ICRC as the packet carries it
 * @crc: the running CRC after the last byte before the ICRC
 *
 * Return: the 4 bytes of the ICRC trailer.
 */
__le32 bzc_icrc_final(u32 crc)
{
	return cpu_to_le32(~crc);
}

/**
 * bzc_icrc_buf() - the ICRC of a packet in one buffer
 * @iph: its IP header
 * @len: bytes from @iph up to the ICRC (not included)
 * @icrc: where to store the ICRC as the packet carries it
 *
 * Return: 0, or -EINVAL if @len does not hold the IP, UDP and BTH headers
 * or the IP header is neither IPv4 without options nor IPv6.
 */
int bzc_icrc_buf(const void *iph, size_t len, __le32 *icrc)
{
	unsigned int hlen;
	u32 crc;

	if (len < 1)
		return -EINVAL;
	hlen = bzc_icrc_hdrs_len(iph);
	if (!hlen || len < hlen)
		return -EINVAL;
	crc = bzc_icrc_hdrs(iph);
	crc = bzc_icrc_add(crc, (const u8 *)iph + hlen, len - hlen);
	*icrc = bzc_icrc_final(crc);
	return 0;
}
