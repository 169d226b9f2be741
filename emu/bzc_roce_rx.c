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

/* The ICRC the packet carries against the one its bytes give. */
static bool bzc_rx_icrc_ok(const u8 *iph, u32 len)
{
	__le32 want, got;

	if (bzc_icrc_buf(iph, len - BZC_ICRC_LEN, &want))
		return false;
	memcpy(&got, iph + len - BZC_ICRC_LEN, sizeof(got));
	return want == got;
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
		      const struct bzc_roce_hdrs *h, const u8 *payload)
{
	struct bzc_resp_scratch scratch = {
		.sgl = bdev->rx_sgl,
		.rqe = bdev->rx_rqe,
	};
	struct bzc_resp_result rr = { .syndrome = BZC_AETH_ACK };
	struct bzc_av av = {};
	struct bzc_sgl data;
	struct bzc_msg msg = {
		.opcode = bzc_rx_ud_wr_opcode(h->opcode),
		.flags = h->se ? BZC_WQE_SOLICITED : 0,
		.type = qp->ibqp.qp_type,
		.sqpn = h->sqpn,
		.dqpn = h->dqpn,
		.qkey = h->qkey,
		.av = &av,
		.local = &data,
		.imm_data = cpu_to_le32(be32_to_cpu(h->imm)),
	};

	memcpy(msg.sgid.raw, ip->sgid, sizeof(msg.sgid.raw));
	memcpy(av.dgid.raw, ip->dgid, sizeof(av.dgid.raw));
	bzc_sgl_kbuf(&data, payload, h->paylen);
	if (!bzc_resp_execute(qp, &msg, &scratch, true, &rr))
		bzc_rx_drop(bdev, "not taken (state or Q_Key)", h->dqpn);
}

/* One packet off the queue; the caller frees it. */
static void bzc_rx_one(struct bzc_dev *bdev, struct sk_buff *skb)
{
	enum bzc_roce_verdict v;
	struct bzc_roce_hdrs h;
	struct bzc_roce_ip ip;
	u32 hlen, roce_len, qpn, pmtu;
	const struct bzc_bth *bth;
	const u8 *payload;
	struct bzc_qp *qp;

	bzc_count(bdev, BZC_CNT_RX_PKTS, 1);
	bzc_count(bdev, BZC_CNT_RX_BYTES, skb->len);
	/* One flat packet: the headers, the ICRC and (for now) the payload. */
	if (skb_linearize(skb)) {
		bzc_rx_drop(bdev, "no memory", 0);
		return;
	}
	v = bzc_roce_read_ipudp(&ip, skb->data, skb->len, &hlen, &roce_len);
	if (v) {
		bzc_rx_drop(bdev, bzc_roce_verdict_str(v), 0);
		return;
	}
	bth = (const struct bzc_bth *)(skb->data + hlen);
	qpn = bzc_bth_qpn(bth);
	if (!bzc_rx_icrc_ok(skb->data, hlen + roce_len)) {
		bzc_count(bdev, BZC_CNT_ICRC_ERRORS, 1);
		bzc_rx_drop(bdev, bzc_roce_verdict_str(BZC_ROCE_ICRC), qpn);
		return;
	}

	qp = bzc_qp_get(bdev, qpn);
	if (!qp) {
		bzc_rx_drop(bdev, "no such QP", qpn);
		return;
	}
	if (bzc_type_ud(qp->ibqp.qp_type))
		pmtu = ib_mtu_enum_to_int(iboe_get_mtu(READ_ONCE(bdev->ndev->mtu)));
	else
		pmtu = bzc_qp_pmtu(qp);
	v = bzc_roce_read_hdrs(&h, bth, roce_len, pmtu ?: 256);
	if (v) {
		bzc_rx_drop(bdev, bzc_roce_verdict_str(v), qpn);
		goto out;
	}
	if (h.pkey != BZC_DEFAULT_PKEY) {
		bzc_rx_drop(bdev, "P_Key not in the table", qpn);
		goto out;
	}
	payload = (const u8 *)bth + bzc_roce_opinfo[h.opcode].hdr_len;
	switch (h.opcode & BZC_TRANSPORT_MASK) {
	case BZC_TRANSPORT_UD:
		if (bzc_type_ud(qp->ibqp.qp_type)) {
			bzc_rx_ud(bdev, qp, &ip, &h, payload);
			goto out;
		}
		break;
	case BZC_TRANSPORT_RC:
		if (qp->ibqp.qp_type == IB_QPT_RC) {
			bzc_wire_rx(bdev, qp, &ip, &h, payload);
			goto out;
		}
		break;
	case BZC_TRANSPORT_UC:
		if (qp->ibqp.qp_type == IB_QPT_UC) {
			bzc_wire_rx(bdev, qp, &ip, &h, payload);
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
