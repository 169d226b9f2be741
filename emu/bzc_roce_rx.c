// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: RoCE v2 receive (docs/transport.md, "Receive"). The netdev's
 * rx_handler (bzc_net.c) queues the packets addressed to the device; this
 * worker takes them in arrival order and checks every field a peer sent,
 * once, before anything is looked up with it: IP and UDP headers, the
 * ICRC, the transport headers against the opcode table and the receiving
 * QP's path MTU. Then the packet goes to the responder of its destination
 * QP, as a message from the local transport would. A refused packet is
 * dropped and counted, with a rate-limited line that names the reason.
 *
 * Only the headers are made flat (pskb_may_pull()); the ICRC is computed
 * and the payload copied where the skb holds them, in its linear part
 * and its page fragments, so the payload is copied once, into the
 * destination. A virtio-net or NIC receive buffer holds a 4 KiB packet in
 * a fragment: linearizing it was a second copy of every byte.
 */
#include <linux/skbuff.h>
#include <rdma/ib_addr.h>

#include "bzc_xport.h"

static void bzc_rx_drop(struct bzc_dev *bdev, const char *why, u32 qpn)
{
	bzc_count(bdev, BZC_CNT_RX_DROPS, 1);
	ibdev_info_ratelimited(&bdev->ibdev, "dropped a packet to QP %u: %s\n",
			       qpn, why);
}

/*
 * The ICRC the packet carries against the one its bytes give: `len`
 * bytes from the IP header, whose IP, UDP and BTH headers (`hlen` bytes)
 * are in the linear part; the rest may be in fragments.
 */
static bool bzc_rx_icrc_ok(struct sk_buff *skb, u32 hlen, u32 len)
{
	unsigned int consumed = 0, n, want = len - BZC_ICRC_LEN - hlen;
	struct skb_seq_state st;
	const u8 *data;
	__le32 got;
	u32 crc;

	crc = bzc_icrc_hdrs(skb->data);
	skb_prepare_seq_read(skb, hlen, len - BZC_ICRC_LEN, &st);
	while (consumed < want && (n = skb_seq_read(consumed, &data, &st))) {
		/* A block may run on past the end asked for. */
		n = min(n, want - consumed);
		crc = bzc_icrc_add(crc, data, n);
		consumed += n;
	}
	skb_abort_seq_read(&st);
	if (consumed != want)
		return false;
	if (skb_copy_bits(skb, len - BZC_ICRC_LEN, &got, sizeof(got)))
		return false;
	return bzc_icrc_final(crc) == got;
}

/* Append `len` bytes from byte `off` of the pages from `page` on. */
static bool bzc_rx_add_pages(struct bzc_dev *bdev, unsigned int *used,
			     struct page *page, u32 off, u32 len)
{
	unsigned int k, n;

	page = nth_page(page, off >> PAGE_SHIFT);
	off = offset_in_page(off);
	n = DIV_ROUND_UP(off + len, PAGE_SIZE);
	if (bdev->rx_payload->n == BZC_MAX_SGE || *used + n > BZC_RX_PAGES)
		return false;
	for (k = 0; k < n; k++)
		bdev->rx_pages[*used + k] = nth_page(page, k);
	bzc_sgl_add_pages(bdev->rx_payload, bdev->rx_pages + *used, off, len);
	*used += n;
	return true;
}

/*
 * Make bdev->rx_payload the `len` bytes from byte `off` of the skb, over
 * the pages that hold them (the linear part is direct-mapped memory, each
 * fragment a run of pages): valid while the skb is. False when they do
 * not fit the scratch (more than BZC_MAX_SGE pieces, a frag list).
 */
static bool bzc_rx_payload(struct bzc_dev *bdev, const struct sk_buff *skb,
			   u32 off, u32 len)
{
	unsigned int used = 0, i;
	u32 start, end, n;

	bzc_sgl_init(bdev->rx_payload);
	if (skb_has_frag_list(skb))
		return false;
	end = skb_headlen(skb);
	if (len && off < end) {
		const u8 *p = skb->data + off;

		n = min(len, end - off);
		if (!bzc_rx_add_pages(bdev, &used, virt_to_page(p),
				      offset_in_page(p), n))
			return false;
		off += n;
		len -= n;
	}
	for (i = 0; len && i < skb_shinfo(skb)->nr_frags; i++) {
		const skb_frag_t *f = &skb_shinfo(skb)->frags[i];

		start = end;
		end = start + skb_frag_size(f);
		if (off >= end)
			continue;
		n = min(len, end - off);
		if (!bzc_rx_add_pages(bdev, &used, skb_frag_page(f),
				      skb_frag_off(f) + off - start, n))
			return false;
		off += n;
		len -= n;
	}
	return !len;
}

/* The IBA message opcode of a UD packet. */
static u8 bzc_rx_ud_wr_opcode(u8 opcode)
{
	return opcode == BZC_OP_UD_SEND_ONLY_IMM ? IB_UVERBS_WR_SEND_WITH_IMM :
						   IB_UVERBS_WR_SEND;
}

/*
 * A datagram to a UD QP or the GSI QP: the responder takes it as it takes
 * one from the local transport (Q_Key, receive WQE, GRH, CQE) or drops it.
 */
static void bzc_rx_ud(struct bzc_dev *bdev, struct bzc_qp *qp,
		      const struct bzc_roce_ip *ip,
		      const struct bzc_roce_hdrs *h, struct bzc_sgl *payload)
{
	struct bzc_resp_scratch scratch = {
		.sgl = bdev->rx_sgl,
		.rqe = bdev->rx_rqe,
	};
	struct bzc_resp_result rr = { .syndrome = BZC_AETH_ACK };
	struct bzc_av av = {};
	struct bzc_msg msg = {
		.opcode = bzc_rx_ud_wr_opcode(h->opcode),
		.flags = h->se ? BZC_WQE_SOLICITED : 0,
		.type = qp->ibqp.qp_type,
		.sqpn = h->sqpn,
		.dqpn = h->dqpn,
		.qkey = h->qkey,
		.av = &av,
		.local = payload,
		.imm_data = cpu_to_le32(be32_to_cpu(h->imm)),
	};

	memcpy(msg.sgid.raw, ip->sgid, sizeof(msg.sgid.raw));
	memcpy(av.dgid.raw, ip->dgid, sizeof(av.dgid.raw));
	if (!bzc_resp_execute(qp, &msg, &scratch, true, &rr))
		bzc_rx_drop(bdev, "not taken (state or Q_Key)", h->dqpn);
}

/* A UD QP's path MTU: the netdev's, as the sender's port has it. */
static u32 bzc_rx_ud_pmtu(struct bzc_dev *bdev)
{
	return ib_mtu_enum_to_int(iboe_get_mtu(READ_ONCE(bdev->ndev->mtu)));
}

/*
 * The P_Key, then the payload into bdev->rx_payload; false when the
 * packet was dropped.
 */
static bool bzc_rx_body(struct bzc_dev *bdev, struct sk_buff *skb, u32 hlen,
			const struct bzc_roce_hdrs *h, u32 qpn)
{
	u32 poff = hlen + bzc_roce_opinfo[h->opcode].hdr_len;

	if (h->pkey != BZC_DEFAULT_PKEY) {
		bzc_rx_drop(bdev, "P_Key not in the table", qpn);
		return false;
	}
	/* Rarely a packet in more pieces than that: flat, it is one. */
	if (!bzc_rx_payload(bdev, skb, poff, h->paylen) &&
	    (skb_linearize(skb) ||
	     !bzc_rx_payload(bdev, skb, poff, h->paylen))) {
		bzc_rx_drop(bdev, "no memory", qpn);
		return false;
	}
	return true;
}

/*
 * A datagram to a multicast group (DQPN 0xffffff): a copy to every UD QP
 * of this device attached to the group its destination address names,
 * each taking it as a unicast datagram (IBA 10.5.2.4). Only UD sends may
 * be multicast.
 */
static void bzc_rx_mcast(struct bzc_dev *bdev, struct sk_buff *skb,
			 const struct bzc_roce_ip *ip,
			 const struct bzc_bth *bth, u32 hlen, u32 roce_len)
{
	struct bzc_qp *members[BZC_MAX_MCAST_QP_ATTACH];
	enum bzc_roce_verdict v;
	struct bzc_roce_hdrs h;
	union ib_gid mgid;
	int i, n;

	memcpy(mgid.raw, ip->dgid, sizeof(mgid.raw));
	if (!rdma_is_multicast_addr((struct in6_addr *)mgid.raw)) {
		bzc_rx_drop(bdev, "multicast QPN to a unicast address",
			    BZC_MCAST_QPN);
		return;
	}
	v = bzc_roce_read_hdrs(&h, bth, roce_len, bzc_rx_ud_pmtu(bdev) ?: 256);
	if (v) {
		bzc_rx_drop(bdev, bzc_roce_verdict_str(v), BZC_MCAST_QPN);
		return;
	}
	if ((h.opcode & BZC_TRANSPORT_MASK) != BZC_TRANSPORT_UD) {
		bzc_rx_drop(bdev, "multicast opcode not UD", BZC_MCAST_QPN);
		return;
	}
	if (!bzc_rx_body(bdev, skb, hlen, &h, BZC_MCAST_QPN))
		return;
	n = bzc_mcast_members(bdev, &mgid, members);
	if (!n)
		bzc_rx_drop(bdev, "no QP attached to the group",
			    BZC_MCAST_QPN);
	for (i = 0; i < n; i++) {
		bzc_rx_ud(bdev, members[i], ip, &h, bdev->rx_payload);
		bzc_qp_put(members[i]);
	}
}

/* One packet off the queue; the caller frees it. */
static void bzc_rx_one(struct bzc_dev *bdev, struct sk_buff *skb)
{
	enum bzc_roce_verdict v;
	struct bzc_roce_hdrs h;
	struct bzc_roce_ip ip;
	u32 hlen, roce_len, qpn, pmtu, tlen;
	const struct bzc_bth *bth;
	struct bzc_qp *qp;

	bzc_count(bdev, BZC_CNT_RX_PKTS, 1);
	bzc_count(bdev, BZC_CNT_RX_BYTES, skb->len);
	/* IP, UDP and BTH flat, as far as the packet has them. */
	if (!pskb_may_pull(skb, min_t(u32, skb->len, BZC_IPV6_HLEN +
					BZC_UDP_HLEN + BZC_BTH_LEN))) {
		bzc_rx_drop(bdev, "no memory", 0);
		return;
	}
	v = bzc_roce_read_ipudp(&ip, skb->data, skb->len, &hlen, &roce_len);
	if (v) {
		bzc_rx_drop(bdev, bzc_roce_verdict_str(v), 0);
		return;
	}
	/* Then the opcode's extended headers (the parser checks the length). */
	bth = (const struct bzc_bth *)(skb->data + hlen);
	tlen = min_t(u32, roce_len, bzc_roce_opinfo[bth->opcode].hdr_len);
	if (!pskb_may_pull(skb, hlen + tlen)) {
		bzc_rx_drop(bdev, "no memory", 0);
		return;
	}
	bth = (const struct bzc_bth *)(skb->data + hlen);
	qpn = bzc_bth_qpn(bth);
	if (!bzc_rx_icrc_ok(skb, hlen + BZC_BTH_LEN, hlen + roce_len)) {
		bzc_count(bdev, BZC_CNT_ICRC_ERRORS, 1);
		bzc_rx_drop(bdev, bzc_roce_verdict_str(BZC_ROCE_ICRC), qpn);
		return;
	}
	if (qpn == BZC_MCAST_QPN) {
		bzc_rx_mcast(bdev, skb, &ip, bth, hlen, roce_len);
		return;
	}
	if (rdma_is_multicast_addr((struct in6_addr *)ip.dgid)) {
		bzc_rx_drop(bdev, "multicast address, not the multicast QPN",
			    qpn);
		return;
	}

	qp = bzc_qp_get(bdev, qpn);
	if (!qp) {
		bzc_rx_drop(bdev, "no such QP", qpn);
		return;
	}
	if (bzc_type_ud(qp->ibqp.qp_type))
		pmtu = bzc_rx_ud_pmtu(bdev);
	else
		pmtu = bzc_qp_pmtu(qp);
	v = bzc_roce_read_hdrs(&h, bth, roce_len, pmtu ?: 256);
	if (v) {
		bzc_rx_drop(bdev, bzc_roce_verdict_str(v), qpn);
		goto out;
	}
	if (!bzc_rx_body(bdev, skb, hlen, &h, qpn))
		goto out;
	switch (h.opcode & BZC_TRANSPORT_MASK) {
	case BZC_TRANSPORT_UD:
		if (bzc_type_ud(qp->ibqp.qp_type)) {
			bzc_rx_ud(bdev, qp, &ip, &h, bdev->rx_payload);
			goto out;
		}
		break;
	case BZC_TRANSPORT_RC:
		if (qp->ibqp.qp_type == IB_QPT_RC) {
			bzc_wire_rx(bdev, qp, &ip, &h, bdev->rx_payload);
			goto out;
		}
		break;
	case BZC_TRANSPORT_UC:
		if (qp->ibqp.qp_type == IB_QPT_UC) {
			bzc_wire_rx(bdev, qp, &ip, &h, bdev->rx_payload);
			goto out;
		}
		break;
	}
	bzc_rx_drop(bdev, "opcode not of the QP's transport", qpn);
out:
	bzc_qp_put(qp);
}

/**
 * bzc_rx_work() - the device's receive worker
 * @work: bzc_dev.rx_work
 *
 * Takes the packets the rx_handler queued, in order, until the queue is
 * empty; it may sleep, and reschedules between packets.
 */
void bzc_rx_work(struct work_struct *work)
{
	struct bzc_dev *bdev = container_of(work, struct bzc_dev, rx_work);
	struct sk_buff *skb;

	while ((skb = skb_dequeue(&bdev->rxq))) {
		bzc_rx_one(bdev, skb);
		consume_skb(skb);
		cond_resched();
	}
}
