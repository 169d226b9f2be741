// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: RoCE v2 packet builders and parsers over flat buffers.
 *
 * Builders: a message (struct bzc_roce_msg) becomes per-packet headers
 * (struct bzc_roce_hdrs: opcode by position and PMTU, PSN, extension
 * header fields), which become bytes; IP and UDP headers from a pair of
 * GIDs. Parsers: bytes from a peer become the same structs, every field
 * checked once against the opcode table and the path MTU, with one
 * verdict per refused packet so the receive path can count and log what
 * was wrong. The PSN window, keys and QP state are the responder's
 * business (docs/transport.md), not the codec's.
 *
 * Opcodes and their headers follow IBA Vol. 1 9.2 (table 38) and 9.4; the
 * payload rules 9.7.5 (requests) and 9.7.6 (responses); RoCE v2 framing
 * Annex A17.
 */
#include <linux/types.h>
#include <linux/errno.h>
#include <linux/string.h>
#include <rdma/ib_user_verbs.h>

#include "bzc_roce_hdr.h"

#define REQ_FIRST	(BZC_OPF_VALID | BZC_OPF_REQUEST | BZC_OPF_START | \
			 BZC_OPF_PAYLOAD)
#define REQ_MIDDLE	(BZC_OPF_VALID | BZC_OPF_REQUEST | BZC_OPF_PAYLOAD)
#define REQ_LAST	(BZC_OPF_VALID | BZC_OPF_REQUEST | BZC_OPF_END | \
			 BZC_OPF_PAYLOAD)
#define REQ_ONLY	(REQ_FIRST | BZC_OPF_END)
#define RSP_FIRST	(BZC_OPF_VALID | BZC_OPF_START | BZC_OPF_PAYLOAD)
#define RSP_MIDDLE	(BZC_OPF_VALID | BZC_OPF_PAYLOAD)
#define RSP_LAST	(BZC_OPF_VALID | BZC_OPF_END | BZC_OPF_PAYLOAD)
#define RSP_ONLY	(RSP_FIRST | BZC_OPF_END)
#define RSP_NODATA	(BZC_OPF_VALID | BZC_OPF_START | BZC_OPF_END)
#define REQ_NODATA	(RSP_NODATA | BZC_OPF_REQUEST)
#define UC		BZC_TRANSPORT_UC

/* hdr_len: BTH plus the lengths of ext; tools/roce-codec checks they agree */
#define OP(code, fl, ext, len, k, str)					\
	[code] = { .flags = (fl), .hdrs = (ext),			\
		   .hdr_len = BZC_BTH_LEN + (len), .kind = (k),		\
		   .name = (str) }

/* What each of the 256 opcodes is; all zero: not an RC, UC or UD opcode */
const struct bzc_roce_opinfo bzc_roce_opinfo[256] = {
	OP(BZC_OP_SEND_FIRST, REQ_FIRST, 0,
	   0, BZC_KIND_SEND, "RC_SEND_FIRST"),
	OP(BZC_OP_SEND_MIDDLE, REQ_MIDDLE, 0,
	   0, BZC_KIND_SEND, "RC_SEND_MIDDLE"),
	OP(BZC_OP_SEND_LAST, REQ_LAST, 0,
	   0, BZC_KIND_SEND, "RC_SEND_LAST"),
	OP(BZC_OP_SEND_LAST_IMM, REQ_LAST, BZC_HDR_IMMDT,
	   BZC_IMMDT_LEN, BZC_KIND_SEND, "RC_SEND_LAST_WITH_IMMEDIATE"),
	OP(BZC_OP_SEND_ONLY, REQ_ONLY, 0,
	   0, BZC_KIND_SEND, "RC_SEND_ONLY"),
	OP(BZC_OP_SEND_ONLY_IMM, REQ_ONLY, BZC_HDR_IMMDT,
	   BZC_IMMDT_LEN, BZC_KIND_SEND, "RC_SEND_ONLY_WITH_IMMEDIATE"),
	OP(BZC_OP_WRITE_FIRST, REQ_FIRST, BZC_HDR_RETH,
	   BZC_RETH_LEN, BZC_KIND_WRITE, "RC_RDMA_WRITE_FIRST"),
	OP(BZC_OP_WRITE_MIDDLE, REQ_MIDDLE, 0,
	   0, BZC_KIND_WRITE, "RC_RDMA_WRITE_MIDDLE"),
	OP(BZC_OP_WRITE_LAST, REQ_LAST, 0,
	   0, BZC_KIND_WRITE, "RC_RDMA_WRITE_LAST"),
	OP(BZC_OP_WRITE_LAST_IMM, REQ_LAST, BZC_HDR_IMMDT,
	   BZC_IMMDT_LEN, BZC_KIND_WRITE, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE"),
	OP(BZC_OP_WRITE_ONLY, REQ_ONLY, BZC_HDR_RETH,
	   BZC_RETH_LEN, BZC_KIND_WRITE, "RC_RDMA_WRITE_ONLY"),
	OP(BZC_OP_WRITE_ONLY_IMM, REQ_ONLY, BZC_HDR_RETH | BZC_HDR_IMMDT,
	   BZC_RETH_LEN + BZC_IMMDT_LEN, BZC_KIND_WRITE,
	   "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
	OP(BZC_OP_READ_REQUEST, REQ_NODATA, BZC_HDR_RETH,
	   BZC_RETH_LEN, BZC_KIND_READ_REQ, "RC_RDMA_READ_REQUEST"),
	OP(BZC_OP_READ_RESP_FIRST, RSP_FIRST, BZC_HDR_AETH,
	   BZC_AETH_LEN, BZC_KIND_READ_RESP, "RC_RDMA_READ_RESPONSE_FIRST"),
	OP(BZC_OP_READ_RESP_MIDDLE, RSP_MIDDLE, 0,
	   0, BZC_KIND_READ_RESP, "RC_RDMA_READ_RESPONSE_MIDDLE"),
	OP(BZC_OP_READ_RESP_LAST, RSP_LAST, BZC_HDR_AETH,
	   BZC_AETH_LEN, BZC_KIND_READ_RESP, "RC_RDMA_READ_RESPONSE_LAST"),
	OP(BZC_OP_READ_RESP_ONLY, RSP_ONLY, BZC_HDR_AETH,
	   BZC_AETH_LEN, BZC_KIND_READ_RESP, "RC_RDMA_READ_RESPONSE_ONLY"),
	OP(BZC_OP_ACK, RSP_NODATA, BZC_HDR_AETH,
	   BZC_AETH_LEN, BZC_KIND_ACK, "RC_ACKNOWLEDGE"),
	OP(BZC_OP_ATOMIC_ACK, RSP_NODATA, BZC_HDR_AETH | BZC_HDR_ATMACK,
	   BZC_AETH_LEN + BZC_ATMACK_LEN, BZC_KIND_ATOMIC_ACK,
	   "RC_ATOMIC_ACKNOWLEDGE"),
	OP(BZC_OP_CMP_SWAP, REQ_NODATA, BZC_HDR_ATMETH,
	   BZC_ATMETH_LEN, BZC_KIND_ATOMIC, "RC_COMPARE_SWAP"),
	OP(BZC_OP_FETCH_ADD, REQ_NODATA, BZC_HDR_ATMETH,
	   BZC_ATMETH_LEN, BZC_KIND_ATOMIC, "RC_FETCH_ADD"),
	OP(BZC_OP_SEND_LAST_INV, REQ_LAST, BZC_HDR_IETH,
	   BZC_IETH_LEN, BZC_KIND_SEND, "RC_SEND_LAST_WITH_INVALIDATE"),
	OP(BZC_OP_SEND_ONLY_INV, REQ_ONLY, BZC_HDR_IETH,
	   BZC_IETH_LEN, BZC_KIND_SEND, "RC_SEND_ONLY_WITH_INVALIDATE"),
	/* UC: the SEND and WRITE opcodes of RC */
	OP(UC | BZC_OP_SEND_FIRST, REQ_FIRST, 0,
	   0, BZC_KIND_SEND, "UC_SEND_FIRST"),
	OP(UC | BZC_OP_SEND_MIDDLE, REQ_MIDDLE, 0,
	   0, BZC_KIND_SEND, "UC_SEND_MIDDLE"),
	OP(UC | BZC_OP_SEND_LAST, REQ_LAST, 0,
	   0, BZC_KIND_SEND, "UC_SEND_LAST"),
	OP(UC | BZC_OP_SEND_LAST_IMM, REQ_LAST, BZC_HDR_IMMDT,
	   BZC_IMMDT_LEN, BZC_KIND_SEND, "UC_SEND_LAST_WITH_IMMEDIATE"),
	OP(UC | BZC_OP_SEND_ONLY, REQ_ONLY, 0,
	   0, BZC_KIND_SEND, "UC_SEND_ONLY"),
	OP(UC | BZC_OP_SEND_ONLY_IMM, REQ_ONLY, BZC_HDR_IMMDT,
	   BZC_IMMDT_LEN, BZC_KIND_SEND, "UC_SEND_ONLY_WITH_IMMEDIATE"),
	OP(UC | BZC_OP_WRITE_FIRST, REQ_FIRST, BZC_HDR_RETH,
	   BZC_RETH_LEN, BZC_KIND_WRITE, "UC_RDMA_WRITE_FIRST"),
	OP(UC | BZC_OP_WRITE_MIDDLE, REQ_MIDDLE, 0,
	   0, BZC_KIND_WRITE, "UC_RDMA_WRITE_MIDDLE"),
	OP(UC | BZC_OP_WRITE_LAST, REQ_LAST, 0,
	   0, BZC_KIND_WRITE, "UC_RDMA_WRITE_LAST"),
	OP(UC | BZC_OP_WRITE_LAST_IMM, REQ_LAST, BZC_HDR_IMMDT,
	   BZC_IMMDT_LEN, BZC_KIND_WRITE, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE"),
	OP(UC | BZC_OP_WRITE_ONLY, REQ_ONLY, BZC_HDR_RETH,
	   BZC_RETH_LEN, BZC_KIND_WRITE, "UC_RDMA_WRITE_ONLY"),
	OP(UC | BZC_OP_WRITE_ONLY_IMM, REQ_ONLY, BZC_HDR_RETH | BZC_HDR_IMMDT,
	   BZC_RETH_LEN + BZC_IMMDT_LEN, BZC_KIND_WRITE,
	   "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
	OP(BZC_OP_UD_SEND_ONLY, REQ_ONLY, BZC_HDR_DETH,
	   BZC_DETH_LEN, BZC_KIND_SEND, "UD_SEND_ONLY"),
	OP(BZC_OP_UD_SEND_ONLY_IMM, REQ_ONLY, BZC_HDR_DETH | BZC_HDR_IMMDT,
	   BZC_DETH_LEN + BZC_IMMDT_LEN, BZC_KIND_SEND,
	   "UD_SEND_ONLY_WITH_IMMEDIATE"),
};

static const char * const bzc_roce_verdicts[BZC_ROCE_NR_VERDICTS] = {
	[BZC_ROCE_OK] = "ok",
	[BZC_ROCE_SHORT] = "shorter than its headers",
	[BZC_ROCE_IP_VERSION] = "not IPv4 or IPv6",
	[BZC_ROCE_IP_OPTIONS] = "IP options or extension headers",
	[BZC_ROCE_IP_LENGTH] = "bad IP length",
	[BZC_ROCE_IP_FRAGMENT] = "IP fragment",
	[BZC_ROCE_IP_CSUM] = "bad IPv4 header checksum",
	[BZC_ROCE_NOT_UDP] = "not UDP",
	[BZC_ROCE_UDP_PORT] = "not UDP port 4791",
	[BZC_ROCE_UDP_LENGTH] = "bad UDP length",
	[BZC_ROCE_BTH_VERSION] = "bad BTH transport version",
	[BZC_ROCE_OPCODE] = "unknown opcode",
	[BZC_ROCE_PAD] = "bad pad count",
	[BZC_ROCE_PAYLOAD] = "payload on an opcode without one",
	[BZC_ROCE_PMTU] = "payload length against the path MTU",
	[BZC_ROCE_DMA_LEN] = "bad RETH DMA length",
	[BZC_ROCE_SYNDROME] = "reserved AETH syndrome",
	[BZC_ROCE_ICRC] = "bad ICRC",
};

/**
 * bzc_roce_verdict_str() - what a parser's verdict means, for a log line
 * @v: the verdict
 *
 * Return: a constant string.
 */
const char *bzc_roce_verdict_str(enum bzc_roce_verdict v)
{
	if ((unsigned int)v >= BZC_ROCE_NR_VERDICTS)
		return "?";
	return bzc_roce_verdicts[v];
}

static bool bzc_syndrome_valid(u8 syndrome)
{
	if (syndrome & 0x80)
		return false;
	switch (syndrome & BZC_AETH_TYPE_MASK) {
	case BZC_AETH_RESERVED:
		return false;
	case BZC_AETH_NAK:
		return (syndrome & BZC_AETH_VALUE_MASK) <= BZC_NAK_MAX;
	default:
		return true;
	}
}

/**
 * bzc_roce_write_hdrs() - write a packet's BTH and extension headers
 * @h: the fields; @h->paylen sets the pad count
 * @buf: where BTH goes
 * @room: bytes at @buf
 *
 * The payload, its pad (zeros) and the ICRC follow; the caller adds them.
 *
 * Return: the number of bytes written, -EINVAL for an unknown opcode, a
 * payload on an opcode without one, a PSN or QPN over 24 bits, or a
 * reserved AETH syndrome, -ENOSPC if @room is too small.
 */
int bzc_roce_write_hdrs(const struct bzc_roce_hdrs *h, void *buf, size_t room)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	struct bzc_bth *bth = buf;
	u8 *p = (u8 *)buf + BZC_BTH_LEN;
	u8 pad = -h->paylen & 3;

	if (!(op->flags & BZC_OPF_VALID) ||
	    (h->paylen && !(op->flags & BZC_OPF_PAYLOAD)) ||
	    h->psn > BZC_PSN_MASK || h->dqpn > BZC_QPN_MASK ||
	    h->sqpn > BZC_QPN_MASK || h->msn > BZC_PSN_MASK ||
	    ((op->hdrs & BZC_HDR_AETH) && !bzc_syndrome_valid(h->syndrome)))
		return -EINVAL;
	if (room < op->hdr_len)
		return -ENOSPC;

	bth->opcode = h->opcode;
	bth->flags = (h->se ? BZC_BTH_SE : 0) | (h->mig ? BZC_BTH_MIG : 0) |
		     pad << BZC_BTH_PAD_SHIFT | BZC_BTH_TVER;
	bth->pkey = cpu_to_be16(h->pkey);
	bth->qpn = cpu_to_be32(h->dqpn);
	bth->apsn = cpu_to_be32((h->ackreq ? BZC_BTH_ACKREQ : 0) | h->psn);

	if (op->hdrs & BZC_HDR_DETH) {
		struct bzc_deth *deth = (struct bzc_deth *)p;

		deth->qkey = cpu_to_be32(h->qkey);
		deth->sqpn = cpu_to_be32(h->sqpn);
		p += BZC_DETH_LEN;
	}
	if (op->hdrs & BZC_HDR_RETH) {
		struct bzc_reth *reth = (struct bzc_reth *)p;

		reth->va = cpu_to_be64(h->va);
		reth->rkey = cpu_to_be32(h->rkey);
		reth->dma_len = cpu_to_be32(h->dma_len);
		p += BZC_RETH_LEN;
	}
	if (op->hdrs & BZC_HDR_ATMETH) {
		struct bzc_atmeth *ae = (struct bzc_atmeth *)p;

		ae->va = cpu_to_be64(h->va);
		ae->rkey = cpu_to_be32(h->rkey);
		ae->swap_add = cpu_to_be64(h->swap_add);
		ae->compare = cpu_to_be64(h->compare);
		p += BZC_ATMETH_LEN;
	}
	if (op->hdrs & BZC_HDR_AETH) {
		struct bzc_aeth *aeth = (struct bzc_aeth *)p;

		aeth->smsn = cpu_to_be32((u32)h->syndrome << 24 | h->msn);
		p += BZC_AETH_LEN;
	}
	if (op->hdrs & BZC_HDR_ATMACK) {
		struct bzc_atmack *ack = (struct bzc_atmack *)p;

		ack->orig = cpu_to_be64(h->orig);
		p += BZC_ATMACK_LEN;
	}
	if (op->hdrs & BZC_HDR_IMMDT) {
		((struct bzc_immdt *)p)->imm = h->imm;
		p += BZC_IMMDT_LEN;
	}
	if (op->hdrs & BZC_HDR_IETH) {
		((struct bzc_ieth *)p)->rkey = cpu_to_be32(h->inv_rkey);
		p += BZC_IETH_LEN;
	}
	return p - (u8 *)buf;
}

/* Payload length rules of one packet (IBA 9.7.5.1.x, 9.7.6.1.x) */
static enum bzc_roce_verdict
bzc_roce_check_paylen(const struct bzc_roce_opinfo *op, u32 paylen, u32 pmtu)
{
	bool start = op->flags & BZC_OPF_START, end = op->flags & BZC_OPF_END;

	if (paylen > pmtu)
		return BZC_ROCE_PMTU;
	if (!end && paylen != pmtu)		/* FIRST, MIDDLE: exactly PMTU */
		return BZC_ROCE_PMTU;
	if (end && !start && !paylen)		/* LAST: 1 to PMTU bytes */
		return BZC_ROCE_PMTU;
	return BZC_ROCE_OK;
}

/**
 * bzc_roce_read_hdrs() - parse and check a packet's transport headers
 * @h: where the fields go (zeroed first)
 * @buf: the packet from BTH on
 * @len: bytes from BTH to the end of the ICRC (the UDP payload)
 * @pmtu: the receiving QP's path MTU (256 to 4096)
 *
 * Checks what the packet alone can show: transport version, a known
 * opcode, headers within @len, payload plus pad a multiple of 4 bytes,
 * no payload on opcodes without one, payload against @pmtu by position in
 * the message, RETH lengths, AETH syndromes. Not the ICRC (bzc_icrc_buf()
 * over the IP header), nor PSN, keys or QP (the responder and completer).
 *
 * Return: BZC_ROCE_OK with @h filled (@h->paylen: payload bytes, which
 * start at @buf + bzc_roce_opinfo[@h->opcode].hdr_len), or the reason the
 * packet must be dropped.
 */
enum bzc_roce_verdict bzc_roce_read_hdrs(struct bzc_roce_hdrs *h,
					 const void *buf, size_t len, u32 pmtu)
{
	const struct bzc_bth *bth = buf;
	const struct bzc_roce_opinfo *op;
	const u8 *p = (const u8 *)buf + BZC_BTH_LEN;
	enum bzc_roce_verdict v;
	size_t rest;
	u8 pad;

	memset(h, 0, sizeof(*h));
	if (len < BZC_BTH_LEN + BZC_ICRC_LEN)
		return BZC_ROCE_SHORT;
	if (bzc_bth_tver(bth) != BZC_BTH_TVER)
		return BZC_ROCE_BTH_VERSION;
	op = &bzc_roce_opinfo[bth->opcode];
	if (!(op->flags & BZC_OPF_VALID))
		return BZC_ROCE_OPCODE;
	if (len < op->hdr_len + BZC_ICRC_LEN)
		return BZC_ROCE_SHORT;

	rest = len - op->hdr_len - BZC_ICRC_LEN;
	pad = bzc_bth_pad(bth);
	if (rest & 3 || pad > rest)
		return BZC_ROCE_PAD;
	if (rest && !(op->flags & BZC_OPF_PAYLOAD))
		return BZC_ROCE_PAYLOAD;
	if (!bzc_roce_pmtu_valid(pmtu))
		return BZC_ROCE_PMTU;
	h->paylen = rest - pad;
	if (op->flags & BZC_OPF_PAYLOAD) {
		v = bzc_roce_check_paylen(op, h->paylen, pmtu);
		if (v)
			return v;
	}

	h->opcode = bth->opcode;
	h->se = bth->flags & BZC_BTH_SE;
	h->mig = bth->flags & BZC_BTH_MIG;
	h->ackreq = bzc_bth_ackreq(bth);
	h->pkey = be16_to_cpu(bth->pkey);
	h->dqpn = bzc_bth_qpn(bth);
	h->psn = bzc_bth_psn(bth);

	if (op->hdrs & BZC_HDR_DETH) {
		const struct bzc_deth *deth = (const struct bzc_deth *)p;

		h->qkey = be32_to_cpu(deth->qkey);
		h->sqpn = bzc_be24(deth->sqpn);
		p += BZC_DETH_LEN;
	}
	if (op->hdrs & BZC_HDR_RETH) {
		const struct bzc_reth *reth = (const struct bzc_reth *)p;

		h->va = be64_to_cpu(reth->va);
		h->rkey = be32_to_cpu(reth->rkey);
		h->dma_len = be32_to_cpu(reth->dma_len);
		if (h->dma_len > BZC_MAX_MSG_LEN)
			return BZC_ROCE_DMA_LEN;
		/* a WRITE in one packet moves exactly what RETH announces */
		if (op->kind == BZC_KIND_WRITE && (op->flags & BZC_OPF_END) &&
		    h->dma_len != h->paylen)
			return BZC_ROCE_DMA_LEN;
		p += BZC_RETH_LEN;
	}
	if (op->hdrs & BZC_HDR_ATMETH) {
		const struct bzc_atmeth *ae = (const struct bzc_atmeth *)p;

		h->va = be64_to_cpu(ae->va);
		h->rkey = be32_to_cpu(ae->rkey);
		h->swap_add = be64_to_cpu(ae->swap_add);
		h->compare = be64_to_cpu(ae->compare);
		p += BZC_ATMETH_LEN;
	}
	if (op->hdrs & BZC_HDR_AETH) {
		u32 smsn = be32_to_cpu(((const struct bzc_aeth *)p)->smsn);

		h->syndrome = smsn >> 24;
		h->msn = smsn & BZC_PSN_MASK;
		if (!bzc_syndrome_valid(h->syndrome))
			return BZC_ROCE_SYNDROME;
		p += BZC_AETH_LEN;
	}
	if (op->hdrs & BZC_HDR_ATMACK) {
		h->orig = be64_to_cpu(((const struct bzc_atmack *)p)->orig);
		p += BZC_ATMACK_LEN;
	}
	if (op->hdrs & BZC_HDR_IMMDT) {
		h->imm = ((const struct bzc_immdt *)p)->imm;
		p += BZC_IMMDT_LEN;
	}
	if (op->hdrs & BZC_HDR_IETH)
		h->inv_rkey = be32_to_cpu(((const struct bzc_ieth *)p)->rkey);
	return BZC_ROCE_OK;
}

/**
 * bzc_ip4_csum() - the IPv4 header checksum of a 20-byte header
 * @iph: the header; its checksum field is summed too, so a header with a
 *	right checksum gives 0 and one with a zero field gives the value
 *	to store there
 *
 * Return: the ones' complement of the ones' complement sum, as stored.
 */
__sum16 bzc_ip4_csum(const void *iph)
{
	const u8 *b = iph;
	u32 sum = 0;
	int i;

	/* summed as big-endian words, stored big-endian */
	for (i = 0; i < BZC_IPV4_HLEN; i += 2)
		sum += (u32)b[i] << 8 | b[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (__force __sum16)cpu_to_be16(~sum & 0xffff);
}

static const u8 bzc_v4mapped_prefix[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};

static bool bzc_gid_is_v4(const u8 *gid)
{
	return !memcmp(gid, bzc_v4mapped_prefix, sizeof(bzc_v4mapped_prefix));
}

/**
 * bzc_roce_write_ipudp() - write the IP and UDP headers of a packet
 * @ip: addresses (both IPv4-mapped, or both not), class, hop limit,
 *	flow label, source port
 * @roce_len: bytes after the UDP header: BTH to the end of the ICRC
 * @buf: where the IP header goes
 * @room: bytes at @buf
 *
 * IPv4 gets DF, identification 0 (allowed with DF, RFC 6864) and its
 * checksum; the UDP checksum is 0 for both forms, as Annex A17 lets RoCE
 * v2 send it (the ICRC covers the payload).
 *
 * Return: the bytes written (28 or 48), -EINVAL for mixed address forms
 * or a length over what IP carries, -ENOSPC if @room is too small.
 */
int bzc_roce_write_ipudp(const struct bzc_roce_ip *ip, u32 roce_len,
			 void *buf, size_t room)
{
	bool v4 = bzc_gid_is_v4(ip->sgid);
	u32 udp_len = BZC_UDP_HLEN + roce_len;
	u8 *b = buf, *udp;
	__sum16 csum;

	if (v4 != bzc_gid_is_v4(ip->dgid) || ip->flow_label > 0xfffff)
		return -EINVAL;
	if (room < (v4 ? BZC_IPV4_HLEN : BZC_IPV6_HLEN) + BZC_UDP_HLEN)
		return -ENOSPC;
	if (v4) {
		u32 tot = BZC_IPV4_HLEN + udp_len;

		if (tot > 0xffff)
			return -EINVAL;
		memset(b, 0, BZC_IPV4_HLEN);
		b[0] = 0x45;
		b[1] = ip->tclass;
		b[2] = tot >> 8;
		b[3] = tot;
		b[6] = 0x40;		/* DF */
		b[8] = ip->hop_limit;
		b[9] = 17;		/* UDP */
		memcpy(b + 12, ip->sgid + 12, 4);
		memcpy(b + 16, ip->dgid + 12, 4);
		csum = bzc_ip4_csum(b);
		memcpy(b + 10, &csum, sizeof(csum));
		udp = b + BZC_IPV4_HLEN;
	} else {
		if (udp_len > 0xffff)
			return -EINVAL;
		b[0] = 0x60 | ip->tclass >> 4;
		b[1] = ip->tclass << 4 | ip->flow_label >> 16;
		b[2] = ip->flow_label >> 8;
		b[3] = ip->flow_label;
		b[4] = udp_len >> 8;
		b[5] = udp_len;
		b[6] = 17;		/* UDP */
		b[7] = ip->hop_limit;
		memcpy(b + 8, ip->sgid, 16);
		memcpy(b + 24, ip->dgid, 16);
		udp = b + BZC_IPV6_HLEN;
	}
	udp[0] = ip->sport >> 8;
	udp[1] = ip->sport;
	udp[2] = BZC_ROCE_UDP_DPORT >> 8;
	udp[3] = BZC_ROCE_UDP_DPORT & 0xff;
	udp[4] = udp_len >> 8;
	udp[5] = udp_len;
	udp[6] = 0;
	udp[7] = 0;
	return udp + BZC_UDP_HLEN - b;
}

static u16 bzc_get_be16(const u8 *p)
{
	return (u16)p[0] << 8 | p[1];
}

/**
 * bzc_roce_read_ipudp() - parse and check the IP and UDP headers
 * @ip: where addresses (GID form), class, hop limit, flow label and UDP
 *	source port go
 * @buf: the IP header
 * @len: bytes at @buf (a frame's trailing padding may follow the packet)
 * @hlen: set to the length of the IP and UDP headers
 * @roce_len: set to the UDP payload length (BTH to the end of the ICRC)
 *
 * Refuses IP options and IPv6 extension headers (RoCE v2 sends none),
 * fragments, lengths that disagree or overrun @len, a bad IPv4 header
 * checksum, anything but UDP to port 4791, and a UDP payload too short
 * for BTH and ICRC.
 *
 * Return: BZC_ROCE_OK or the reason to drop the packet.
 */
enum bzc_roce_verdict bzc_roce_read_ipudp(struct bzc_roce_ip *ip,
					  const void *buf, size_t len,
					  u32 *hlen, u32 *roce_len)
{
	const u8 *b = buf, *udp;
	u32 ip_payload;

	memset(ip, 0, sizeof(*ip));
	if (len < 1)
		return BZC_ROCE_SHORT;
	switch (b[0] >> 4) {
	case 4:
		if (len < BZC_IPV4_HLEN)
			return BZC_ROCE_SHORT;
		if ((b[0] & 0x0f) != 5)
			return BZC_ROCE_IP_OPTIONS;
		if (bzc_get_be16(b + 2) > len ||
		    bzc_get_be16(b + 2) < BZC_IPV4_HLEN)
			return BZC_ROCE_IP_LENGTH;
		if (bzc_get_be16(b + 6) & 0x3fff)	/* MF, offset */
			return BZC_ROCE_IP_FRAGMENT;
		if (bzc_ip4_csum(b))
			return BZC_ROCE_IP_CSUM;
		if (b[9] != 17)
			return BZC_ROCE_NOT_UDP;
		ip_payload = bzc_get_be16(b + 2) - BZC_IPV4_HLEN;
		ip->tclass = b[1];
		ip->hop_limit = b[8];
		memcpy(ip->sgid, bzc_v4mapped_prefix, 12);
		memcpy(ip->sgid + 12, b + 12, 4);
		memcpy(ip->dgid, bzc_v4mapped_prefix, 12);
		memcpy(ip->dgid + 12, b + 16, 4);
		udp = b + BZC_IPV4_HLEN;
		break;
	case 6:
		if (len < BZC_IPV6_HLEN)
			return BZC_ROCE_SHORT;
		ip_payload = bzc_get_be16(b + 4);
		if (ip_payload > len - BZC_IPV6_HLEN)
			return BZC_ROCE_IP_LENGTH;
		if (b[6] != 17)		/* extension headers included */
			return b[6] == 44 ? BZC_ROCE_IP_FRAGMENT :
					    BZC_ROCE_NOT_UDP;
		ip->tclass = (b[0] & 0x0f) << 4 | b[1] >> 4;
		ip->flow_label = (u32)(b[1] & 0x0f) << 16 | bzc_get_be16(b + 2);
		ip->hop_limit = b[7];
		memcpy(ip->sgid, b + 8, 16);
		memcpy(ip->dgid, b + 24, 16);
		udp = b + BZC_IPV6_HLEN;
		break;
	default:
		return BZC_ROCE_IP_VERSION;
	}
	if (ip_payload < BZC_UDP_HLEN)
		return BZC_ROCE_IP_LENGTH;
	if (bzc_get_be16(udp + 2) != BZC_ROCE_UDP_DPORT)
		return BZC_ROCE_UDP_PORT;
	if (bzc_get_be16(udp + 4) != ip_payload)
		return BZC_ROCE_UDP_LENGTH;
	if (ip_payload < BZC_UDP_HLEN + BZC_BTH_LEN + BZC_ICRC_LEN)
		return BZC_ROCE_SHORT;
	ip->sport = bzc_get_be16(udp);
	*hlen = udp + BZC_UDP_HLEN - b;
	*roce_len = ip_payload - BZC_UDP_HLEN;
	return BZC_ROCE_OK;
}

/* IBA opcode of packet i of n of a request */
static int bzc_roce_req_opcode(const struct bzc_roce_msg *m, u32 i, u32 n)
{
	bool first = i == 0, last = i == n - 1;
	u8 t = m->transport;

	switch (m->wr_opcode) {
	case IB_UVERBS_WR_SEND:
	case IB_UVERBS_WR_SEND_WITH_IMM:
	case IB_UVERBS_WR_SEND_WITH_INV: {
		bool imm = m->wr_opcode == IB_UVERBS_WR_SEND_WITH_IMM;
		bool inv = m->wr_opcode == IB_UVERBS_WR_SEND_WITH_INV;

		if (inv && t != BZC_TRANSPORT_RC)
			return -EINVAL;
		if (first && last)
			return t | (imm ? BZC_OP_SEND_ONLY_IMM :
				    inv ? BZC_OP_SEND_ONLY_INV :
				    BZC_OP_SEND_ONLY);
		if (last)
			return t | (imm ? BZC_OP_SEND_LAST_IMM :
				    inv ? BZC_OP_SEND_LAST_INV :
				    BZC_OP_SEND_LAST);
		return t | (first ? BZC_OP_SEND_FIRST : BZC_OP_SEND_MIDDLE);
	}
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM: {
		bool imm = m->wr_opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;

		if (t == BZC_TRANSPORT_UD)
			return -EINVAL;
		if (first && last)
			return t | (imm ? BZC_OP_WRITE_ONLY_IMM :
				    BZC_OP_WRITE_ONLY);
		if (last)
			return t | (imm ? BZC_OP_WRITE_LAST_IMM :
				    BZC_OP_WRITE_LAST);
		return t | (first ? BZC_OP_WRITE_FIRST : BZC_OP_WRITE_MIDDLE);
	}
	case IB_UVERBS_WR_RDMA_READ:
		return t == BZC_TRANSPORT_RC ? BZC_OP_READ_REQUEST : -EINVAL;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
		return t == BZC_TRANSPORT_RC ? BZC_OP_CMP_SWAP : -EINVAL;
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return t == BZC_TRANSPORT_RC ? BZC_OP_FETCH_ADD : -EINVAL;
	default:
		return -EINVAL;
	}
}

/* IBA opcode of packet i of n of the response to an RC request */
static int bzc_roce_resp_opcode(const struct bzc_roce_msg *m, u32 i, u32 n)
{
	bool first = i == 0, last = i == n - 1;

	if (m->transport != BZC_TRANSPORT_RC)
		return -EINVAL;
	switch (m->wr_opcode) {
	case IB_UVERBS_WR_RDMA_READ:
		if (first && last)
			return BZC_OP_READ_RESP_ONLY;
		if (last)
			return BZC_OP_READ_RESP_LAST;
		return first ? BZC_OP_READ_RESP_FIRST :
			       BZC_OP_READ_RESP_MIDDLE;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return BZC_OP_ATOMIC_ACK;
	default:
		return BZC_OP_ACK;
	}
}

static bool bzc_roce_msg_has_payload(const struct bzc_roce_msg *m)
{
	switch (m->wr_opcode) {
	case IB_UVERBS_WR_RDMA_READ:
		return m->response;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return false;
	default:
		return !m->response;
	}
}

/**
 * bzc_roce_msg_npkts() - how many packets carry a message
 * @m: the message (a request, or with @m->response the response to it)
 * @pmtu: the path MTU
 *
 * Return: the packet count (one for a message without payload), or 0 if
 * @pmtu is not a path MTU.
 */
u32 bzc_roce_msg_npkts(const struct bzc_roce_msg *m, u32 pmtu)
{
	if (!bzc_roce_pmtu_valid(pmtu))
		return 0;
	if (!bzc_roce_msg_has_payload(m) || !m->len)
		return 1;
	return (m->len - 1) / pmtu + 1;
}

/**
 * bzc_roce_msg_hdrs() - the headers of one packet of a message
 * @m: the message: transport, IB_UVERBS_WR_* opcode, destination QPN,
 *	first PSN, length and the fields of its extension headers; with
 *	@m->response, the response (READ response, ACK or atomic ACK, with
 *	@m->syndrome, @m->msn and @m->orig) to that request
 * @pmtu: the path MTU
 * @i: which packet, from 0 to bzc_roce_msg_npkts() - 1
 * @h: where the packet's headers go
 *
 * Packet @i carries PSN @m->psn + @i and payload bytes [@i * @pmtu,
 * min((@i + 1) * @pmtu, @m->len)); RETH on the first packet of a WRITE
 * and on a READ request, ImmDt or IETH and the solicited bit on the last,
 * AETH on READ response first/last/only, AckReq on the last packet of an
 * RC request. A READ request is one packet but takes as many PSNs as its
 * response has packets; advancing the send PSN is the requester's.
 *
 * Return: 0, or -EINVAL for an opcode the transport does not have, a
 * message over 2^31 bytes, a UD message over @pmtu, @i out of range, or
 * a PSN or QPN over 24 bits.
 */
int bzc_roce_msg_hdrs(const struct bzc_roce_msg *m, u32 pmtu, u32 i,
		      struct bzc_roce_hdrs *h)
{
	u32 n = bzc_roce_msg_npkts(m, pmtu);
	int opcode;
	bool last;

	if (!n || i >= n || m->len > BZC_MAX_MSG_LEN ||
	    m->psn > BZC_PSN_MASK || m->dqpn > BZC_QPN_MASK ||
	    (m->transport == BZC_TRANSPORT_UD && m->len > pmtu))
		return -EINVAL;
	if (m->transport != BZC_TRANSPORT_RC &&
	    m->transport != BZC_TRANSPORT_UC &&
	    m->transport != BZC_TRANSPORT_UD)
		return -EINVAL;
	opcode = m->response ? bzc_roce_resp_opcode(m, i, n) :
			       bzc_roce_req_opcode(m, i, n);
	if (opcode < 0)
		return opcode;

	last = i == n - 1;
	memset(h, 0, sizeof(*h));
	h->opcode = opcode;
	h->pkey = m->pkey;
	h->dqpn = m->dqpn;
	h->psn = bzc_psn_add(m->psn, i);
	if (bzc_roce_msg_has_payload(m))
		h->paylen = last ? m->len - i * pmtu : pmtu;

	if (m->response) {
		h->syndrome = m->syndrome;
		h->msn = m->msn;
		h->orig = m->orig;
		return 0;
	}
	h->ackreq = last && m->transport == BZC_TRANSPORT_RC;
	h->se = last && m->se;
	h->va = m->va;
	h->rkey = m->rkey;
	h->dma_len = m->len;
	h->swap_add = m->swap_add;
	h->compare = m->compare;
	h->imm = m->imm;
	h->inv_rkey = m->inv_rkey;
	h->qkey = m->qkey;
	h->sqpn = m->sqpn;
	return 0;
}
