// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: RoCE v2 transmit (docs/transport.md, "Transmit"). A message becomes
 * packets (bzc_roce_pkt.c builds their headers), each an skb routed in the
 * namespace of the device's netdev and sent with ip_local_out() or
 * ip6_local_out(), so the host's routing, neighbour resolution and queueing
 * disciplines (tc netem included) apply to them as to any IP packet. A
 * route that leaves through another netdev, the loopback device included,
 * is refused: the packet would bypass the device.
 *
 * The payload is copied into the skb (one copy on each side of the wire);
 * attaching the source pages as fragments instead is the next step.
 */
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/ipv6_stubs.h>
#include <net/route.h>
#include <net/ip6_route.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_verbs.h>

#include "bzc_xport.h"

/* Whether `rt` holds the route from `sgid` to `dgid`. */
static bool bzc_route_is_for(struct bzc_route *rt, const union ib_gid *sgid,
			     const union ib_gid *dgid)
{
	/* Acquire: the pair is read only after SET is seen. */
	return smp_load_acquire(&rt->state) == BZC_ROUTE_SET &&
	       !memcmp(&rt->sgid, sgid, sizeof(*sgid)) &&
	       !memcmp(&rt->dgid, dgid, sizeof(*dgid));
}

/* The route `rt` holds, still valid and out of `ndev`, referenced; or NULL. */
static struct dst_entry *bzc_route_cached(struct bzc_route *rt, bool v4,
					  struct net_device *ndev)
{
	struct dst_entry *dst;
	struct in6_addr saddr6;
	__be32 saddr;

	/* dst_cache keeps a route per CPU: BHs off while it is used. */
	local_bh_disable();
	if (v4) {
		struct rtable *r = dst_cache_get_ip4(&rt->cache, &saddr);

		dst = r ? &r->dst : NULL;
	} else {
		dst = dst_cache_get_ip6(&rt->cache, &saddr6);
	}
	local_bh_enable();
	if (dst && dst->dev != ndev) {
		dst_release(dst);
		dst = NULL;
	}
	return dst;
}

/* Keep `dst` in `rt` when `rt` is empty or holds this pair of GIDs. */
static void bzc_route_keep(struct bzc_route *rt, const union ib_gid *sgid,
			   const union ib_gid *dgid, struct bzc_roce_dest *d)
{
	const struct in6_addr *s6 = (const struct in6_addr *)sgid->raw;

	if (cmpxchg(&rt->state, BZC_ROUTE_EMPTY, BZC_ROUTE_FILLING) ==
	    BZC_ROUTE_EMPTY) {
		rt->sgid = *sgid;
		rt->dgid = *dgid;
		/* Release: the pair is written before anyone sees SET. */
		smp_store_release(&rt->state, BZC_ROUTE_SET);
	}
	if (!bzc_route_is_for(rt, sgid, dgid))
		return;
	local_bh_disable();
	if (d->v4)
		dst_cache_set_ip4(&rt->cache, d->dst, s6->s6_addr32[3]);
	else
		dst_cache_set_ip6(&rt->cache, d->dst, s6);
	local_bh_enable();
}

/**
 * bzc_roce_dest_get() - route to a destination on the wire
 * @bdev: the sending device
 * @sgid: the GID packets come from (an address of its netdev)
 * @dgid: the destination GID
 * @rt: the QP's route cache (struct bzc_wire.route), or NULL to look the
 *	route up without keeping it (UD: every datagram has its own)
 * @d: the addresses and route, for bzc_roce_xmit(); the caller fills
 *     @d->ip's class, hop limit, flow label and UDP source port
 *
 * Return: 0 (put @d with bzc_roce_dest_put()), -EINVAL for GIDs of mixed
 * forms, -ENETUNREACH when there is no route out of the device's netdev,
 * or the routing error.
 */
int bzc_roce_dest_get(struct bzc_dev *bdev, const union ib_gid *sgid,
		      const union ib_gid *dgid, struct bzc_route *rt,
		      struct bzc_roce_dest *d)
{
	const struct in6_addr *s6 = (const struct in6_addr *)sgid->raw;
	const struct in6_addr *d6 = (const struct in6_addr *)dgid->raw;
	struct net_device *ndev = bdev->ndev;
	struct net *net = dev_net(ndev);

	d->owner = NULL;
	memcpy(d->ip.sgid, sgid->raw, sizeof(d->ip.sgid));
	memcpy(d->ip.dgid, dgid->raw, sizeof(d->ip.dgid));
	d->v4 = ipv6_addr_v4mapped(d6);
	if (d->v4 != ipv6_addr_v4mapped(s6))
		return -EINVAL;
	if (rt && bzc_route_is_for(rt, sgid, dgid)) {
		d->dst = bzc_route_cached(rt, d->v4, ndev);
		if (d->dst)
			return 0;
	}
	if (d->v4) {
		struct flowi4 fl = {
			.flowi4_oif = ndev->ifindex,
			.flowi4_proto = IPPROTO_UDP,
			.daddr = d6->s6_addr32[3],
			.saddr = s6->s6_addr32[3],
		};
		struct rtable *r = ip_route_output_key(net, &fl);

		if (IS_ERR(r))
			return PTR_ERR(r);
		d->dst = &r->dst;
	} else {
		struct flowi6 fl6 = {
			.flowi6_oif = ndev->ifindex,
			.flowi6_proto = IPPROTO_UDP,
			.daddr = *d6,
			.saddr = *s6,
		};

		d->dst = ipv6_stub->ipv6_dst_lookup_flow(net, NULL, &fl6, NULL);
		if (IS_ERR(d->dst))
			return PTR_ERR(d->dst);
	}
	if (d->dst->dev != ndev) {
		dst_release(d->dst);
		return -ENETUNREACH;
	}
	if (rt)
		bzc_route_keep(rt, sgid, dgid, d);
	return 0;
}

void bzc_roce_dest_put(struct bzc_roce_dest *d)
{
	dst_release(d->dst);
}

/**
 * bzc_roce_xmit() - send one packet
 * @bdev: the sending device
 * @d: where to (bzc_roce_dest_get()); @d->owner, when set, is charged for
 *     the packet until the local qdisc and NIC are done with it
 * @h: its transport headers; @h->paylen bytes of payload follow them
 * @payload: where the payload comes from, advanced past it; NULL when
 *	     @h->paylen is 0
 * @gfp: GFP_KERNEL where the caller may sleep
 *
 * Return: 0 when the packet left for the netdev's queue (it may still be
 * dropped there, as on any wire), a negative errno when it was not sent:
 * -EFAULT when the payload's page of an ODP MR could not be made present
 * (bzc_copy()), which sending again will not change.
 */
int bzc_roce_xmit(struct bzc_dev *bdev, const struct bzc_roce_dest *d,
		  const struct bzc_roce_hdrs *h, struct bzc_cursor *payload,
		  gfp_t gfp)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	struct net_device *ndev = bdev->ndev;
	u32 iplen = (d->v4 ? BZC_IPV4_HLEN : BZC_IPV6_HLEN) + BZC_UDP_HLEN;
	u32 pad = -h->paylen & 3;
	u32 roce_len = op->hdr_len + h->paylen + pad + BZC_ICRC_LEN;
	struct sk_buff *skb;
	struct sock *sk;
	__le32 icrc;
	u8 *p;
	int err;

	skb = alloc_skb(LL_RESERVED_SPACE(ndev) + iplen + roce_len +
			ndev->needed_tailroom, gfp | __GFP_NOWARN);
	if (!skb)
		return -ENOMEM;
	skb_reserve(skb, LL_RESERVED_SPACE(ndev));
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, iplen - BZC_UDP_HLEN);
	p = skb_put(skb, iplen + roce_len);
	if (bzc_roce_write_ipudp(&d->ip, roce_len, p, iplen) != iplen ||
	    bzc_roce_write_hdrs(h, p + iplen, op->hdr_len) != op->hdr_len) {
		kfree_skb(skb);
		return -EINVAL;
	}
	if (h->paylen) {
		struct bzc_sgl into;
		struct bzc_cursor ic = { .sgl = &into };

		bzc_sgl_kbuf(&into, p + iplen + op->hdr_len, h->paylen);
		/* A worker may fault in an ODP MR's page here. */
		if (bzc_copy(&ic, payload, h->paylen,
			     gfpflags_allow_blocking(gfp))) {
			kfree_skb(skb);
			return -EFAULT;
		}
	}
	memset(p + iplen + op->hdr_len + h->paylen, 0, pad);
	bzc_icrc_buf(p, iplen + roce_len - BZC_ICRC_LEN, &icrc);
	memcpy(p + iplen + roce_len - BZC_ICRC_LEN, &icrc, sizeof(icrc));

	skb->dev = ndev;
	skb->protocol = htons(d->v4 ? ETH_P_IP : ETH_P_IPV6);
	memset(skb->cb, 0, sizeof(skb->cb));	/* IPCB / IP6CB */
	skb_dst_set(skb, dst_clone(d->dst));
	if (d->owner)
		skb_set_owner_w(skb, d->owner);
	bzc_count(bdev, BZC_CNT_TX_PKTS, 1);
	bzc_count(bdev, BZC_CNT_TX_BYTES, skb->len);
	rcu_read_lock();
	sk = rdma_is_multicast_addr((struct in6_addr *)d->ip.dgid) ?
	     bzc_net_mc_sk(bdev, d->v4) : NULL;
	if (d->v4)
		err = ip_local_out(dev_net(ndev), sk, skb);
	else
		err = ip6_local_out(dev_net(ndev), sk, skb);
	rcu_read_unlock();
	return net_xmit_eval(err) ? -ENOBUFS : 0;
}

/*
 * The UDP source port of a QP pair's packets: from the AV's flow label, or
 * one computed from both QPNs, so a flow's packets take one ECMP path
 * (Annex A17.4.1 leaves the port to the sender).
 */
static u16 bzc_roce_sport(const struct bzc_av *av, u32 sqpn, u32 dqpn)
{
	u32 fl = av->flow_label ?: rdma_calc_flow_label(sqpn, dqpn);

	return rdma_flow_label_to_udp_sport(fl);
}

/**
 * bzc_roce_dest_for_msg() - the route and IP fields of a message's packets
 * @qp: the requester's QP
 * @msg: the message (its sender GID and address vector)
 * @d: filled as by bzc_roce_dest_get()
 *
 * Return: 0 or the errno of bzc_roce_dest_get().
 */
int bzc_roce_dest_for_msg(struct bzc_qp *qp, const struct bzc_msg *msg,
			  struct bzc_roce_dest *d)
{
	int err;

	err = bzc_roce_dest_get(to_bdev(qp->ibqp.device), &msg->sgid,
				&msg->av->dgid,
				qp->wire ? &qp->wire->route : NULL, d);
	if (err)
		return err;
	d->ip.tclass = msg->av->traffic_class;
	/* RoCE v2 routes by IP: a hop limit of 0 would not leave the host. */
	d->ip.hop_limit = msg->av->hop_limit ?: 64;
	d->ip.flow_label = d->v4 ? 0 : msg->av->flow_label & 0xfffff;
	d->ip.sport = bzc_roce_sport(msg->av, msg->sqpn, msg->dqpn);
	return 0;
}

/* A datagram: one packet, nothing comes back (IBA 9.8.4). */
static int bzc_roce_send_ud(struct bzc_qp *qp, const struct bzc_msg *msg,
			    bool may_sleep)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	struct bzc_cursor sc = { .sgl = msg->local };
	struct bzc_roce_msg m = {
		.transport = BZC_TRANSPORT_UD,
		.wr_opcode = msg->opcode,
		.se = msg->flags & BZC_WQE_SOLICITED,
		.pkey = BZC_DEFAULT_PKEY,
		.dqpn = msg->dqpn,
		.len = msg->local->total,
		.imm = cpu_to_be32(le32_to_cpu(msg->imm_data)),
		.qkey = msg->qkey,
		.sqpn = msg->sqpn,
	};
	struct bzc_roce_hdrs h;
	struct bzc_roce_dest d;
	int err;

	/* UD PSNs are not checked; they count the QP's datagrams. */
	m.psn = qp->tx_psn;
	qp->tx_psn = bzc_psn_add(qp->tx_psn, 1);
	/* The requester has held the length to the port MTU. */
	err = bzc_roce_msg_hdrs(&m, 4096, 0, &h);
	if (err)
		return err;
	err = bzc_roce_dest_for_msg(qp, msg, &d);
	if (err)
		return err;
	err = bzc_roce_xmit(bdev, &d, &h, &sc,
			    may_sleep ? GFP_KERNEL : GFP_ATOMIC);
	bzc_roce_dest_put(&d);
	return err;
}

/**
 * bzc_roce_send() - carry a message over RoCE v2 (struct bzc_xport_ops)
 * @qp: the requester's QP, its sq_mutex held
 * @msg: the message
 * @may_sleep: the caller may sleep
 * @res: the responder's answer, an ACK on entry
 *
 * Return: true when the message is on its way (a datagram or a UC message
 * has no answer to wait for) or answered (RC), false when it could not be
 * sent (no route out of the device's netdev, no memory for a packet) or
 * RC got no answer.
 */
static bool bzc_roce_send(struct bzc_qp *qp, const struct bzc_msg *msg,
			  bool may_sleep, struct bzc_resp_result *res)
{
	int err;

	if (!bzc_type_ud(msg->type)) {
		/*
		 * A bulk message waits for its answer: only where it may
		 * sleep. A WQE's joins the send window from a process's
		 * doorbell syscall too (no round trip through the worker);
		 * a kernel QP's doorbell may be in atomic context.
		 */
		if (msg->type == IB_QPT_RC && !may_sleep &&
		    (!msg->wqe || bzc_qp_is_kernel(qp))) {
			res->defer = true;
			return true;
		}
		return bzc_wire_send(qp, msg, may_sleep, res);
	}
	err = bzc_roce_send_ud(qp, msg, may_sleep);
	/* The sender's ODP page is gone: its WQE fails, not the network. */
	if (err == -EFAULT) {
		res->local_lost = true;
		return true;
	}
	if (err)
		ibdev_dbg(qp->ibqp.device, "QP %u: datagram to %pI6c not sent: %d\n",
			  qp->ibqp.qp_num, msg->av->dgid.raw, err);
	return !err;
}

const struct bzc_xport_ops bzc_roce_xport = {
	.send = bzc_roce_send,
};
