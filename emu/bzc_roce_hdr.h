/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzc: RoCE v2 wire format -- the IBA transport headers (IBA Vol. 1 9.2,
 * Annex A17), the opcodes and which headers each carries, 24-bit PSN
 * arithmetic, and the codec that turns a message description into headers
 * and packets back into checked fields (bzc_roce_pkt.c, bzc_icrc.c).
 *
 * Everything on the wire is big-endian; sub-byte fields are reached by
 * shift and mask, never by C bit fields, whose order the compiler picks.
 *
 * The codec works on flat buffers and needs from the kernel only its
 * integer types, byte order, string functions and crc32_le(), so the same
 * files build in userspace behind a thin shim (tools/roce-codec/), where
 * they are checked against Wireshark's dissector and against packets rxe
 * put on the wire.
 */
#ifndef BZC_ROCE_HDR_H
#define BZC_ROCE_HDR_H

#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/build_bug.h>
#include <asm/byteorder.h>

#define BZC_ROCE_UDP_DPORT	4791

/* Header sizes in bytes */
#define BZC_IPV4_HLEN		20	/* no options: RoCE v2 sends none */
#define BZC_IPV6_HLEN		40	/* no extension headers */
#define BZC_UDP_HLEN		8
#define BZC_BTH_LEN		12
#define BZC_RETH_LEN		16
#define BZC_AETH_LEN		4
#define BZC_ATMETH_LEN		28
#define BZC_ATMACK_LEN		8
#define BZC_IMMDT_LEN		4
#define BZC_IETH_LEN		4
#define BZC_DETH_LEN		8
#define BZC_ICRC_LEN		4

#define BZC_PSN_MASK		0xffffffU
#define BZC_QPN_MASK		0xffffffU
#define BZC_DEFAULT_PKEY	0xffff
#define BZC_MAX_MSG_LEN		0x80000000U	/* IBA: a message is at most 2^31 B */

/* Base Transport Header */
struct bzc_bth {
	u8 opcode;
	u8 flags;		/* SE:1 M:1 PadCnt:2 TVer:4 */
	__be16 pkey;
	__be32 qpn;		/* resv8a:8 (FECN, BECN) DestQP:24 */
	__be32 apsn;		/* AckReq:1 resv7:7 PSN:24 */
} __packed;

#define BZC_BTH_SE		0x80
#define BZC_BTH_MIG		0x40
#define BZC_BTH_PAD_SHIFT	4
#define BZC_BTH_PAD_MASK	0x30
#define BZC_BTH_TVER_MASK	0x0f
#define BZC_BTH_TVER		0	/* the only transport header version */
#define BZC_BTH_RESV8A_OFF	4	/* byte of BTH the ICRC does not cover */
#define BZC_BTH_ACKREQ		0x80000000U

/* RDMA Extended Transport Header: WRITE first/only, READ request */
struct bzc_reth {
	__be64 va;
	__be32 rkey;
	__be32 dma_len;
} __packed;

/* ACK Extended Transport Header */
struct bzc_aeth {
	__be32 smsn;		/* Syndrome:8 MSN:24 */
} __packed;

/* Atomic Extended Transport Header: CmpSwap, FetchAdd */
struct bzc_atmeth {
	__be64 va;
	__be32 rkey;
	__be64 swap_add;
	__be64 compare;
} __packed;

/* Atomic Acknowledge Extended Transport Header */
struct bzc_atmack {
	__be64 orig;
} __packed;

/* Immediate data and the Invalidate Extended Transport Header */
struct bzc_immdt {
	__be32 imm;
} __packed;

struct bzc_ieth {
	__be32 rkey;
} __packed;

/* Datagram Extended Transport Header (UD) */
struct bzc_deth {
	__be32 qkey;
	__be32 sqpn;		/* resv8:8 SrcQP:24 */
} __packed;

static_assert(sizeof(struct bzc_bth) == BZC_BTH_LEN);
static_assert(sizeof(struct bzc_reth) == BZC_RETH_LEN);
static_assert(sizeof(struct bzc_aeth) == BZC_AETH_LEN);
static_assert(sizeof(struct bzc_atmeth) == BZC_ATMETH_LEN);
static_assert(offsetof(struct bzc_atmeth, swap_add) == 12);
static_assert(offsetof(struct bzc_atmeth, compare) == 20);
static_assert(sizeof(struct bzc_atmack) == BZC_ATMACK_LEN);
static_assert(sizeof(struct bzc_immdt) == BZC_IMMDT_LEN);
static_assert(sizeof(struct bzc_ieth) == BZC_IETH_LEN);
static_assert(sizeof(struct bzc_deth) == BZC_DETH_LEN);

/*
 * AETH syndrome (IBA 9.7.5.2.1): bit 7 reserved, bits 6-5 the type, bits
 * 4-0 a credit count (ACK), an RNR timer (RNR NAK) or a NAK code.
 */
#define BZC_AETH_TYPE_MASK	0x60
#define BZC_AETH_ACK		0x00
#define BZC_AETH_RNR_NAK	0x20
#define BZC_AETH_RESERVED	0x40
#define BZC_AETH_NAK		0x60
#define BZC_AETH_VALUE_MASK	0x1f
#define BZC_AETH_NO_CREDIT	0x1f	/* ACK: end-to-end credits not used */

enum bzc_nak_code {
	BZC_NAK_PSN_SEQ = 0,
	BZC_NAK_INV_REQ = 1,
	BZC_NAK_REM_ACCESS = 2,
	BZC_NAK_REM_OP = 3,
	BZC_NAK_INV_RD_REQ = 4,
	BZC_NAK_MAX = BZC_NAK_INV_RD_REQ,
};

/*
 * Opcodes (IBA 9.2.2, table 38): the top three bits name the transport,
 * the low five the operation; UC uses the RC codes of SEND and WRITE.
 */
#define BZC_TRANSPORT_MASK	0xe0
#define BZC_TRANSPORT_RC	0x00
#define BZC_TRANSPORT_UC	0x20
#define BZC_TRANSPORT_UD	0x60

enum bzc_roce_opcode {
	BZC_OP_SEND_FIRST		= 0x00,
	BZC_OP_SEND_MIDDLE		= 0x01,
	BZC_OP_SEND_LAST		= 0x02,
	BZC_OP_SEND_LAST_IMM		= 0x03,
	BZC_OP_SEND_ONLY		= 0x04,
	BZC_OP_SEND_ONLY_IMM		= 0x05,
	BZC_OP_WRITE_FIRST		= 0x06,
	BZC_OP_WRITE_MIDDLE		= 0x07,
	BZC_OP_WRITE_LAST		= 0x08,
	BZC_OP_WRITE_LAST_IMM		= 0x09,
	BZC_OP_WRITE_ONLY		= 0x0a,
	BZC_OP_WRITE_ONLY_IMM		= 0x0b,
	BZC_OP_READ_REQUEST		= 0x0c,
	BZC_OP_READ_RESP_FIRST		= 0x0d,
	BZC_OP_READ_RESP_MIDDLE		= 0x0e,
	BZC_OP_READ_RESP_LAST		= 0x0f,
	BZC_OP_READ_RESP_ONLY		= 0x10,
	BZC_OP_ACK			= 0x11,
	BZC_OP_ATOMIC_ACK		= 0x12,
	BZC_OP_CMP_SWAP			= 0x13,
	BZC_OP_FETCH_ADD		= 0x14,
	BZC_OP_SEND_LAST_INV		= 0x16,
	BZC_OP_SEND_ONLY_INV		= 0x17,
	/* UD: SEND only, with DETH */
	BZC_OP_UD_SEND_ONLY		= BZC_TRANSPORT_UD | 0x04,
	BZC_OP_UD_SEND_ONLY_IMM		= BZC_TRANSPORT_UD | 0x05,
};

/* The extension headers an opcode carries, in the order they follow BTH */
#define BZC_HDR_DETH		0x01
#define BZC_HDR_RETH		0x02
#define BZC_HDR_ATMETH		0x04
#define BZC_HDR_AETH		0x08
#define BZC_HDR_ATMACK		0x10
#define BZC_HDR_IMMDT		0x20
#define BZC_HDR_IETH		0x40

/* What a packet of an opcode is */
#define BZC_OPF_VALID		0x01	/* a known opcode of RC, UC or UD */
#define BZC_OPF_START		0x02	/* first or only packet of a message */
#define BZC_OPF_END		0x04	/* last or only packet of a message */
#define BZC_OPF_PAYLOAD		0x08	/* carries payload (may be 0 bytes) */
#define BZC_OPF_REQUEST		0x10	/* to the responder (else: a response) */

enum bzc_roce_kind {
	BZC_KIND_SEND,
	BZC_KIND_WRITE,
	BZC_KIND_READ_REQ,
	BZC_KIND_READ_RESP,
	BZC_KIND_ACK,
	BZC_KIND_ATOMIC,
	BZC_KIND_ATOMIC_ACK,
};

struct bzc_roce_opinfo {
	u8 flags;		/* BZC_OPF_* */
	u8 hdrs;		/* BZC_HDR_* */
	u8 hdr_len;		/* BTH and extension headers, bytes */
	u8 kind;		/* enum bzc_roce_kind */
	const char *name;
};

extern const struct bzc_roce_opinfo bzc_roce_opinfo[256];

static inline bool bzc_roce_opcode_valid(u8 opcode)
{
	return bzc_roce_opinfo[opcode].flags & BZC_OPF_VALID;
}

/* BTH accessors */
static inline u8 bzc_bth_pad(const struct bzc_bth *bth)
{
	return (bth->flags & BZC_BTH_PAD_MASK) >> BZC_BTH_PAD_SHIFT;
}

static inline u8 bzc_bth_tver(const struct bzc_bth *bth)
{
	return bth->flags & BZC_BTH_TVER_MASK;
}

static inline u32 bzc_bth_qpn(const struct bzc_bth *bth)
{
	return be32_to_cpu(bth->qpn) & BZC_QPN_MASK;
}

static inline u32 bzc_bth_psn(const struct bzc_bth *bth)
{
	return be32_to_cpu(bth->apsn) & BZC_PSN_MASK;
}

static inline bool bzc_bth_ackreq(const struct bzc_bth *bth)
{
	return be32_to_cpu(bth->apsn) & BZC_BTH_ACKREQ;
}

/* 24-bit fields below a reserved byte (DETH SrcQP, AETH MSN) */
static inline u32 bzc_be24(__be32 v)
{
	return be32_to_cpu(v) & 0xffffffU;
}

/*
 * PSN arithmetic modulo 2^24 (IBA 9.7.1): the distance from b to a,
 * sign-extended, so "a is after b" is bzc_psn_diff(a, b) > 0 across the
 * wrap.
 */
static inline u32 bzc_psn_add(u32 psn, u32 n)
{
	return (psn + n) & BZC_PSN_MASK;
}

static inline s32 bzc_psn_diff(u32 a, u32 b)
{
	return (s32)((a - b) << 8) >> 8;
}

/* Path MTUs a RoCE port can have (IBA 256 to 4096) */
static inline bool bzc_roce_pmtu_valid(u32 pmtu)
{
	return pmtu >= 256 && pmtu <= 4096 && !(pmtu & (pmtu - 1));
}

/*
 * The codec (bzc_roce_pkt.c)
 */

/*
 * One packet's transport headers in host order: what a builder writes and
 * what a parser found. Fields of headers the opcode does not carry are
 * ignored by the builder and zero after parsing.
 */
struct bzc_roce_hdrs {
	u8 opcode;
	bool se;		/* solicited event */
	bool mig;		/* MigReq */
	bool ackreq;
	u16 pkey;
	u32 dqpn;
	u32 psn;
	u32 paylen;		/* payload bytes, without the pad */
	u64 va;			/* RETH, AtomicETH */
	u32 rkey;		/* RETH, AtomicETH */
	u32 dma_len;		/* RETH */
	u64 swap_add;		/* AtomicETH */
	u64 compare;		/* AtomicETH */
	u8 syndrome;		/* AETH */
	u32 msn;		/* AETH */
	u64 orig;		/* AtomicAckETH */
	__be32 imm;		/* ImmDt, as the application gave it */
	u32 inv_rkey;		/* IETH */
	u32 qkey;		/* DETH */
	u32 sqpn;		/* DETH */
};

/* The IP and UDP headers of a RoCE v2 packet, addresses in GID form */
struct bzc_roce_ip {
	u8 sgid[16];		/* IPv4: ::ffff:a.b.c.d */
	u8 dgid[16];
	u8 tclass;		/* DSCP and ECN */
	u8 hop_limit;		/* IPv4 TTL */
	u32 flow_label;		/* IPv6 only */
	u16 sport;		/* UDP source port */
};

/*
 * A message as the wire sees it: what the requester knows once it has
 * checked a WQE (struct bzc_msg in docs/transport.md), without its SGLs;
 * or, with response set, what the responder answers to it.
 */
struct bzc_roce_msg {
	u8 transport;		/* BZC_TRANSPORT_RC, _UC or _UD */
	u8 wr_opcode;		/* IB_UVERBS_WR_* of the request */
	bool response;		/* READ response, ACK or atomic ACK */
	bool se;
	u16 pkey;
	u32 dqpn;
	u32 psn;		/* of the first packet */
	u32 len;		/* payload of the whole message */
	u64 va;
	u32 rkey;
	u64 swap_add;
	u64 compare;
	__be32 imm;
	u32 inv_rkey;
	u32 qkey;		/* UD */
	u32 sqpn;		/* UD */
	u8 syndrome;		/* response: AETH */
	u32 msn;		/* response: AETH */
	u64 orig;		/* response to an atomic: AtomicAckETH */
};

/* Why a packet was refused: one reason per check, for counters and logs */
enum bzc_roce_verdict {
	BZC_ROCE_OK = 0,
	BZC_ROCE_SHORT,		/* shorter than the headers it announces */
	BZC_ROCE_IP_VERSION,
	BZC_ROCE_IP_OPTIONS,	/* IPv4 options or IPv6 extension headers */
	BZC_ROCE_IP_LENGTH,
	BZC_ROCE_IP_FRAGMENT,
	BZC_ROCE_IP_CSUM,
	BZC_ROCE_NOT_UDP,
	BZC_ROCE_UDP_PORT,
	BZC_ROCE_UDP_LENGTH,
	BZC_ROCE_BTH_VERSION,
	BZC_ROCE_OPCODE,	/* not an RC, UC or UD opcode */
	BZC_ROCE_PAD,		/* payload and pad not a multiple of 4 */
	BZC_ROCE_PAYLOAD,	/* payload where the opcode has none */
	/* over the PMTU, FIRST/MIDDLE not 1 PMTU, empty LAST */
	BZC_ROCE_PMTU,
	/* RETH length over 2^31, or not the payload of a WRITE ONLY */
	BZC_ROCE_DMA_LEN,
	BZC_ROCE_SYNDROME,	/* reserved AETH type or NAK code */
	BZC_ROCE_ICRC,
	BZC_ROCE_NR_VERDICTS
};

const char *bzc_roce_verdict_str(enum bzc_roce_verdict v);

int bzc_roce_write_hdrs(const struct bzc_roce_hdrs *h, void *buf, size_t room);
enum bzc_roce_verdict bzc_roce_read_hdrs(struct bzc_roce_hdrs *h,
					 const void *buf, size_t len,
					 u32 pmtu);
int bzc_roce_write_ipudp(const struct bzc_roce_ip *ip, u32 roce_len,
			 void *buf, size_t room);
enum bzc_roce_verdict bzc_roce_read_ipudp(struct bzc_roce_ip *ip,
					  const void *buf, size_t len,
					  u32 *hlen, u32 *roce_len);
u32 bzc_roce_msg_npkts(const struct bzc_roce_msg *m, u32 pmtu);
int bzc_roce_msg_hdrs(const struct bzc_roce_msg *m, u32 pmtu, u32 i,
		      struct bzc_roce_hdrs *h);
__sum16 bzc_ip4_csum(const void *iph);

/* ICRC (bzc_icrc.c) */
u32 bzc_icrc_hdrs(const void *iph);
u32 bzc_icrc_add(u32 crc, const void *buf, size_t len);
__le32 bzc_icrc_final(u32 crc);
int bzc_icrc_buf(const void *iph, size_t len, __le32 *icrc);

#endif /* BZC_ROCE_HDR_H */
