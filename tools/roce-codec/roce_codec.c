// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * roce-codec: emu's RoCE v2 codec (emu/bzc_roce_pkt.c, emu/bzc_icrc.c),
 * compiled in userspace behind kshim/, driven from the command line so
 * tests can hold it against implementations we did not write:
 *
 *   roce-codec build OUT.pcap      packets of every kind our builders
 *                                  make, in a pcap; one JSON line per
 *                                  packet on stdout with the fields it
 *                                  carries, named as Wireshark names them
 *   roce-codec parse [--pmtu N] IN.pcap
 *                                  every RoCE v2 frame of a capture
 *                                  (Ethernet) through our parser and ICRC:
 *                                  one JSON line per frame
 *   roce-codec selftest            the opcode table's header lengths and
 *                                  the message builder's refusals
 *
 * pyverbs-tests/test_roce_codec.py runs it against tshark and against
 * captures of rxe traffic.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/ib_user_verbs.h>

#include "bzc_roce_hdr.h"

#define PCAP_MAGIC	0xa1b2c3d4
#define LINKTYPE_ETH	1
#define ETH_HLEN	14
#define MAX_FRAME	(ETH_HLEN + 65535)

struct pcap_hdr {
	u32 magic;
	u16 major, minor;
	s32 zone;
	u32 sigfigs, snaplen, linktype;
};

struct pcap_rec {
	u32 sec, usec, caplen, len;
};

/* ---- build ---- */

static const u8 mac_a[6] = { 0x52, 0x54, 0x00, 0x19, 0x00, 0x01 };
static const u8 mac_b[6] = { 0x52, 0x54, 0x00, 0x19, 0x00, 0x02 };

static void gid_v4(u8 *gid, u8 a, u8 b, u8 c, u8 d)
{
	memset(gid, 0, 16);
	gid[10] = 0xff;
	gid[11] = 0xff;
	gid[12] = a;
	gid[13] = b;
	gid[14] = c;
	gid[15] = d;
}

static void gid_v6(u8 *gid, u8 last)
{
	static const u8 prefix[8] = { 0xfe, 0x80 };

	memset(gid, 0, 16);
	memcpy(gid, prefix, sizeof(prefix));
	gid[15] = last;
}

static void put_num(const char *key, u64 v, int *first)
{
	printf("%s\"%s\": %" PRIu64, *first ? "" : ", ", key, v);
	*first = 0;
}

/* The fields of one packet, under Wireshark's names, as one JSON object */
static void print_fields(const struct bzc_roce_hdrs *h)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	int first = 1;

	printf("{");
	put_num("infiniband.bth.opcode", h->opcode, &first);
	put_num("infiniband.bth.se", h->se, &first);
	put_num("infiniband.bth.m", h->mig, &first);
	put_num("infiniband.bth.padcnt", -h->paylen & 3, &first);
	put_num("infiniband.bth.tver", 0, &first);
	put_num("infiniband.bth.p_key", h->pkey, &first);
	put_num("infiniband.bth.destqp", h->dqpn, &first);
	put_num("infiniband.bth.a", h->ackreq, &first);
	put_num("infiniband.bth.psn", h->psn, &first);
	if (op->hdrs & BZC_HDR_DETH) {
		put_num("infiniband.deth.q_key", h->qkey, &first);
		put_num("infiniband.deth.srcqp", h->sqpn, &first);
	}
	if (op->hdrs & BZC_HDR_RETH) {
		put_num("infiniband.reth.va", h->va, &first);
		put_num("infiniband.reth.r_key", h->rkey, &first);
		put_num("infiniband.reth.dmalen", h->dma_len, &first);
	}
	if (op->hdrs & BZC_HDR_ATMETH) {
		put_num("infiniband.reth.va", h->va, &first);
		put_num("infiniband.reth.r_key", h->rkey, &first);
		put_num("infiniband.atomiceth.swapdt", h->swap_add, &first);
		put_num("infiniband.atomiceth.cmpdt", h->compare, &first);
	}
	if (op->hdrs & BZC_HDR_AETH) {
		put_num("infiniband.aeth.syndrome", h->syndrome, &first);
		put_num("infiniband.aeth.msn", h->msn, &first);
	}
	if (op->hdrs & BZC_HDR_ATMACK)
		put_num("infiniband.atomicacketh.origremdt", h->orig, &first);
	if (op->hdrs & BZC_HDR_IMMDT)
		put_num("infiniband.immdt", be32_to_cpu(h->imm), &first);
	if (op->hdrs & BZC_HDR_IETH)
		put_num("infiniband.ieth", h->inv_rkey, &first);
	printf("}");
}

static FILE *pcap_create(const char *path)
{
	struct pcap_hdr ph = {
		.magic = PCAP_MAGIC, .major = 2, .minor = 4,
		.snaplen = MAX_FRAME, .linktype = LINKTYPE_ETH,
	};
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(&ph, sizeof(ph), 1, f) != 1) {
		fprintf(stderr, "roce-codec: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	return f;
}

/*
 * One frame: Ethernet, IP/UDP by bzc_roce_write_ipudp(), headers by
 * bzc_roce_write_hdrs(), payload (bytes counting up from seed), zero pad,
 * ICRC by bzc_icrc_buf() -- the order the transmit path will use.
 */
static int build_frame(u8 *frame, const struct bzc_roce_ip *ip,
		       const struct bzc_roce_hdrs *h, u8 seed)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	u32 pad = -h->paylen & 3;
	u32 roce_len = op->hdr_len + h->paylen + pad + BZC_ICRC_LEN;
	u8 *p = frame + ETH_HLEN, *l3 = p;
	__le32 icrc;
	int n;
	u32 i;

	memcpy(frame, mac_b, 6);
	memcpy(frame + 6, mac_a, 6);
	n = bzc_roce_write_ipudp(ip, roce_len, p, MAX_FRAME - ETH_HLEN);
	if (n < 0)
		return n;
	frame[12] = n == BZC_IPV4_HLEN + BZC_UDP_HLEN ? 0x08 : 0x86;
	frame[13] = n == BZC_IPV4_HLEN + BZC_UDP_HLEN ? 0x00 : 0xdd;
	p += n;
	n = bzc_roce_write_hdrs(h, p, MAX_FRAME - (p - frame));
	if (n < 0)
		return n;
	p += n;
	for (i = 0; i < h->paylen; i++)
		*p++ = seed + i;
	memset(p, 0, pad);
	p += pad;
	if (bzc_icrc_buf(l3, p - l3, &icrc))
		return -EINVAL;
	memcpy(p, &icrc, sizeof(icrc));
	p += sizeof(icrc);
	return p - frame;
}

static int nframes;

static void emit(FILE *f, const char *name, const struct bzc_roce_ip *ip,
		 const struct bzc_roce_hdrs *h)
{
	static u8 frame[MAX_FRAME];
	struct pcap_rec rec = { .sec = 1, .usec = nframes };
	int len = build_frame(frame, ip, h, nframes);
	u32 icrc;

	if (len < 0) {
		fprintf(stderr, "roce-codec: building %s: %s\n", name,
			strerror(-len));
		exit(1);
	}
	rec.caplen = len;
	rec.len = len;
	if (fwrite(&rec, sizeof(rec), 1, f) != 1 ||
	    fwrite(frame, len, 1, f) != 1) {
		perror("roce-codec: writing the pcap");
		exit(2);
	}
	memcpy(&icrc, frame + len - 4, 4);
	nframes++;
	printf("{\"frame\": %d, \"case\": \"%s\", \"name\": \"%s\", "
	       "\"paylen\": %u, \"icrc\": \"%02x%02x%02x%02x\", "
	       "\"fields\": ", nframes, name, bzc_roce_opinfo[h->opcode].name,
	       h->paylen, frame[len - 4], frame[len - 3], frame[len - 2],
	       frame[len - 1]);
	print_fields(h);
	printf("}\n");
}

/* Every packet of a message, through bzc_roce_msg_hdrs() */
static void emit_msg(FILE *f, const char *name, const struct bzc_roce_ip *ip,
		     const struct bzc_roce_msg *m, u32 pmtu)
{
	struct bzc_roce_hdrs h;
	u32 i, n = bzc_roce_msg_npkts(m, pmtu);

	for (i = 0; i < n; i++) {
		if (bzc_roce_msg_hdrs(m, pmtu, i, &h)) {
			fprintf(stderr, "roce-codec: %s: packet %u refused\n",
				name, i);
			exit(1);
		}
		emit(f, name, ip, &h);
	}
}

static int cmd_build(const char *path)
{
	const u32 pmtu = 256;
	struct bzc_roce_ip v4 = { .hop_limit = 64, .tclass = 0x0a,
				  .sport = 0xc0de };
	struct bzc_roce_ip v6 = { .hop_limit = 255, .tclass = 0xb8,
				  .flow_label = 0x12345, .sport = 0xd00d };
	struct bzc_roce_msg m;
	struct bzc_roce_hdrs h;
	FILE *f = pcap_create(path);

	gid_v4(v4.sgid, 198, 19, 0, 1);
	gid_v4(v4.dgid, 198, 19, 0, 2);
	gid_v6(v6.sgid, 1);
	gid_v6(v6.dgid, 2);

	/* UD SEND with DETH, IPv4 (a datagram carries no GRH on RoCE v2) */
	m = (struct bzc_roce_msg){ .transport = BZC_TRANSPORT_UD,
		.wr_opcode = IB_UVERBS_WR_SEND, .pkey = 0xffff,
		.dqpn = 0x000456, .psn = 0x123456, .len = 37,
		.qkey = 0x11111111, .sqpn = 0x000123, .se = true };
	emit_msg(f, "ud_send", &v4, &m, pmtu);
	/* and with immediate data over IPv6 (class and flow label masked) */
	m.wr_opcode = IB_UVERBS_WR_SEND_WITH_IMM;
	m.imm = cpu_to_be32(0xcafef00d);
	m.len = 256;
	emit_msg(f, "ud_send_imm_ipv6", &v6, &m, pmtu);

	/* RC SEND FIRST/MIDDLE/LAST, PSNs across the 2^24 wrap */
	m = (struct bzc_roce_msg){ .transport = BZC_TRANSPORT_RC,
		.wr_opcode = IB_UVERBS_WR_SEND, .pkey = 0xffff,
		.dqpn = 0x0000a1, .psn = 0xfffffe, .len = 2 * pmtu + 130 };
	emit_msg(f, "rc_send", &v4, &m, pmtu);
	m.wr_opcode = IB_UVERBS_WR_SEND_WITH_INV;
	m.len = 5;
	m.psn = 1;
	m.inv_rkey = 0x5a5a0102;
	emit_msg(f, "rc_send_inv", &v4, &m, pmtu);

	/* RDMA WRITE with RETH, then ImmDt on the last packet */
	m = (struct bzc_roce_msg){ .transport = BZC_TRANSPORT_RC,
		.wr_opcode = IB_UVERBS_WR_RDMA_WRITE_WITH_IMM, .pkey = 0xffff,
		.dqpn = 0x0000a2, .psn = 0x000100, .len = pmtu + 44,
		.va = 0x00007f1234567000ULL, .rkey = 0x00c0ffee,
		.imm = cpu_to_be32(0x01020304), .se = true };
	emit_msg(f, "rc_write_imm", &v4, &m, pmtu);
	m.len = 8;
	m.psn = 0x000102;
	emit_msg(f, "rc_write_only_imm", &v6, &m, pmtu);
	m.transport = BZC_TRANSPORT_UC;
	m.wr_opcode = IB_UVERBS_WR_RDMA_WRITE;
	m.len = 3;
	emit_msg(f, "uc_write", &v4, &m, pmtu);

	/* RDMA READ request and its response */
	m = (struct bzc_roce_msg){ .transport = BZC_TRANSPORT_RC,
		.wr_opcode = IB_UVERBS_WR_RDMA_READ, .pkey = 0xffff,
		.dqpn = 0x0000a3, .psn = 0x000200, .len = 2 * pmtu + 100,
		.va = 0xffff888012340008ULL, .rkey = 0x12345678 };
	emit_msg(f, "rc_read_request", &v4, &m, pmtu);
	m.response = true;
	m.dqpn = 0x0000b3;
	m.syndrome = BZC_AETH_ACK | BZC_AETH_NO_CREDIT;
	m.msn = 0x000007;
	emit_msg(f, "rc_read_response", &v4, &m, pmtu);

	/* ACK, RNR NAK and NAK with AETH */
	h = (struct bzc_roce_hdrs){ .opcode = BZC_OP_ACK, .pkey = 0xffff,
		.dqpn = 0x0000b1, .psn = 0x000042,
		.syndrome = BZC_AETH_ACK | BZC_AETH_NO_CREDIT, .msn = 0x000042 };
	emit(f, "rc_ack", &v4, &h);
	h.syndrome = BZC_AETH_RNR_NAK | 14;
	emit(f, "rc_rnr_nak", &v4, &h);
	h.syndrome = BZC_AETH_NAK | BZC_NAK_REM_ACCESS;
	emit(f, "rc_nak", &v6, &h);

	/* atomics with AtomicETH, and the AtomicAckETH answer */
	m = (struct bzc_roce_msg){ .transport = BZC_TRANSPORT_RC,
		.wr_opcode = IB_UVERBS_WR_ATOMIC_CMP_AND_SWP, .pkey = 0xffff,
		.dqpn = 0x0000a4, .psn = 0x000300, .len = 8,
		.va = 0x0000000000601008ULL, .rkey = 0x00abcdef,
		.swap_add = 0x1122334455667788ULL,
		.compare = 0x99aabbccddeeff00ULL };
	emit_msg(f, "rc_cmp_swap", &v4, &m, pmtu);
	m.wr_opcode = IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
	m.psn = 0x000301;
	m.swap_add = 1;
	m.compare = 0;
	emit_msg(f, "rc_fetch_add", &v4, &m, pmtu);
	m.response = true;
	m.dqpn = 0x0000b4;
	m.syndrome = BZC_AETH_ACK | BZC_AETH_NO_CREDIT;
	m.msn = 0x000009;
	m.orig = 0x0123456789abcdefULL;
	emit_msg(f, "rc_atomic_ack", &v4, &m, pmtu);

	if (fclose(f)) {
		perror("roce-codec: closing the pcap");
		return 2;
	}
	return 0;
}

/* ---- parse ---- */

static void print_verdict(int frame, enum bzc_roce_verdict v)
{
	printf("{\"frame\": %d, \"verdict\": \"%s\", \"verdict_id\": %d}\n",
	       frame, bzc_roce_verdict_str(v), v);
}

static void parse_frame(int frame, const u8 *buf, u32 len, u32 pmtu)
{
	struct bzc_roce_hdrs h;
	struct bzc_roce_ip ip;
	enum bzc_roce_verdict v;
	const u8 *l3, *bth, *wire;
	u32 hlen, roce_len;
	__le32 icrc;
	u16 type;

	if (len < ETH_HLEN)
		return;
	type = (u16)buf[12] << 8 | buf[13];
	if (type != 0x0800 && type != 0x86dd)
		return;		/* ARP and the like: not RoCE */
	l3 = buf + ETH_HLEN;
	v = bzc_roce_read_ipudp(&ip, l3, len - ETH_HLEN, &hlen, &roce_len);
	if (v == BZC_ROCE_UDP_PORT || v == BZC_ROCE_NOT_UDP)
		return;		/* other traffic on the link */
	if (v) {
		print_verdict(frame, v);
		return;
	}
	bth = l3 + hlen;
	wire = bth + roce_len - BZC_ICRC_LEN;
	bzc_icrc_buf(l3, wire - l3, &icrc);
	if (memcmp(&icrc, wire, sizeof(icrc))) {
		const u8 *ours = (const u8 *)&icrc;

		printf("{\"frame\": %d, \"verdict\": \"%s\", \"verdict_id\": %d, "
		       "\"icrc\": \"%02x%02x%02x%02x\", "
		       "\"icrc_ours\": \"%02x%02x%02x%02x\"}\n", frame,
		       bzc_roce_verdict_str(BZC_ROCE_ICRC), BZC_ROCE_ICRC,
		       wire[0], wire[1], wire[2], wire[3],
		       ours[0], ours[1], ours[2], ours[3]);
		return;
	}
	v = bzc_roce_read_hdrs(&h, bth, roce_len, pmtu);
	if (v) {
		print_verdict(frame, v);
		return;
	}
	printf("{\"frame\": %d, \"verdict\": \"ok\", \"verdict_id\": 0, "
	       "\"name\": \"%s\", \"paylen\": %u, \"sport\": %u, "
	       "\"icrc\": \"%02x%02x%02x%02x\", \"fields\": ", frame,
	       bzc_roce_opinfo[h.opcode].name, h.paylen, ip.sport,
	       wire[0], wire[1], wire[2], wire[3]);
	print_fields(&h);
	printf("}\n");
}

static int cmd_parse(const char *path, u32 pmtu)
{
	static u8 buf[MAX_FRAME];
	struct pcap_hdr ph;
	struct pcap_rec rec;
	FILE *f = fopen(path, "rb");
	int frame = 0;

	if (!f || fread(&ph, sizeof(ph), 1, f) != 1) {
		fprintf(stderr, "roce-codec: %s: cannot read a pcap header\n",
			path);
		return 2;
	}
	if (ph.magic != PCAP_MAGIC || ph.linktype != LINKTYPE_ETH) {
		fprintf(stderr, "roce-codec: %s: not a microsecond pcap of "
			"Ethernet frames (magic %#x, link type %u)\n", path,
			ph.magic, ph.linktype);
		return 2;
	}
	while (fread(&rec, sizeof(rec), 1, f) == 1) {
		frame++;
		if (rec.caplen > sizeof(buf) ||
		    fread(buf, rec.caplen, 1, f) != 1) {
			fprintf(stderr, "roce-codec: %s: frame %d truncated\n",
				path, frame);
			return 2;
		}
		if (rec.caplen < rec.len) {
			fprintf(stderr, "roce-codec: %s: frame %d captured "
				"short (%u of %u bytes): raise the snap length\n",
				path, frame, rec.caplen, rec.len);
			return 2;
		}
		parse_frame(frame, buf, rec.caplen, pmtu);
	}
	fclose(f);
	return 0;
}

/* ---- selftest ---- */

static int cmd_selftest(void)
{
	static const struct { u8 bit, len; } ext[] = {
		{ BZC_HDR_DETH, BZC_DETH_LEN }, { BZC_HDR_RETH, BZC_RETH_LEN },
		{ BZC_HDR_ATMETH, BZC_ATMETH_LEN },
		{ BZC_HDR_AETH, BZC_AETH_LEN },
		{ BZC_HDR_ATMACK, BZC_ATMACK_LEN },
		{ BZC_HDR_IMMDT, BZC_IMMDT_LEN }, { BZC_HDR_IETH, BZC_IETH_LEN },
	};
	struct bzc_roce_msg m = { .transport = BZC_TRANSPORT_UC,
				  .wr_opcode = IB_UVERBS_WR_RDMA_READ };
	struct bzc_roce_hdrs h;
	int bad = 0, op;
	unsigned int i;

	for (op = 0; op < 256; op++) {
		const struct bzc_roce_opinfo *oi = &bzc_roce_opinfo[op];
		unsigned int want = BZC_BTH_LEN;

		if (!(oi->flags & BZC_OPF_VALID))
			continue;
		for (i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
			if (oi->hdrs & ext[i].bit)
				want += ext[i].len;
		if (oi->hdr_len != want) {
			printf("opcode %#x (%s): hdr_len %u, headers add up "
			       "to %u\n", op, oi->name, oi->hdr_len, want);
			bad++;
		}
		printf("{\"opcode\": %d, \"name\": \"%s\", \"hdr_len\": %u}\n",
		       op, oi->name, oi->hdr_len);
	}
	/* operations a transport does not have, and bounds */
	if (bzc_roce_msg_hdrs(&m, 256, 0, &h) != -EINVAL)
		bad++, printf("UC READ built\n");
	m.wr_opcode = IB_UVERBS_WR_SEND_WITH_INV;
	if (bzc_roce_msg_hdrs(&m, 256, 0, &h) != -EINVAL)
		bad++, printf("UC SEND_WITH_INV built\n");
	m.transport = BZC_TRANSPORT_UD;
	m.wr_opcode = IB_UVERBS_WR_SEND;
	m.len = 257;
	if (bzc_roce_msg_hdrs(&m, 256, 0, &h) != -EINVAL)
		bad++, printf("UD SEND over the PMTU built\n");
	m.transport = BZC_TRANSPORT_RC;
	m.len = 1024;
	if (bzc_roce_msg_npkts(&m, 256) != 4 ||
	    bzc_roce_msg_hdrs(&m, 256, 4, &h) != -EINVAL)
		bad++, printf("RC SEND of 4 PMTUs: wrong packet count\n");
	if (bzc_roce_msg_npkts(&m, 300) != 0)
		bad++, printf("PMTU 300 accepted\n");
	m.psn = 0x1000000;
	if (bzc_roce_msg_hdrs(&m, 256, 0, &h) != -EINVAL)
		bad++, printf("25-bit PSN built\n");
	if (bzc_psn_diff(0, 0xffffff) != 1 || bzc_psn_diff(0xffffff, 0) != -1 ||
	    bzc_psn_add(0xffffff, 2) != 1 ||
	    bzc_psn_diff(0x800000, 0) != -0x800000)
		bad++, printf("PSN arithmetic across the wrap\n");
	printf("{\"selftest_failures\": %d}\n", bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "build"))
		return cmd_build(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "parse"))
		return cmd_parse(argv[2], 4096);
	if (argc == 5 && !strcmp(argv[1], "parse") &&
	    !strcmp(argv[2], "--pmtu"))
		return cmd_parse(argv[4], strtoul(argv[3], NULL, 0));
	if (argc == 2 && !strcmp(argv[1], "selftest"))
		return cmd_selftest();
	fprintf(stderr, "usage: roce-codec build OUT.pcap\n"
		"       roce-codec parse [--pmtu N] IN.pcap\n"
		"       roce-codec selftest\n");
	return 2;
}
