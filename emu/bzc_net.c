// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the device's own receive steering (docs/transport.md, "Receive").
 *
 * A RoCE NIC takes the RoCE v2 packets addressed to it off the wire before
 * the host stack sees them. bzc does the same with an rx_handler on its
 * netdev: an IPv4 or IPv6 packet to UDP port 4791 whose destination is an
 * address of that netdev is queued for the device's receive worker
 * (bzc_roce_rx.c), as is one to a multicast address while the device has
 * a multicast group (the worker finds the group or drops it); everything
 * else goes on to the stack untouched. Packet taps (tcpdump) run before
 * the handler and still see every packet.
 *
 * The handler runs in softirq and only classifies and queues: every check
 * of what the packet says, and the responder, run in the worker, where
 * they may sleep and take the data path's locks as the local transport
 * does.
 */
#include <linux/igmp.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inetdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/net.h>
#include <linux/udp.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>
#include <net/sock.h>
#include <rdma/ib_addr.h>

#include "bzc_xport.h"

/*
 * Packets waiting for the receive worker; more are dropped and counted, so
 * a flood costs the host at most this much memory per device.
 */
#define BZC_RXQ_MAX	4096

/*
 * Is this an IPv4 or IPv6 RoCE v2 packet to an address of `ndev`, or to a
 * multicast address while `bdev` has groups?
 */
static bool bzc_rx_is_ours(struct sk_buff *skb, struct net_device *ndev,
			   const struct bzc_dev *bdev)
{
	bool mc = READ_ONCE(bdev->mc_groups);
	const struct udphdr *uh;
	unsigned int ihl;

	switch (skb->protocol) {
	case htons(ETH_P_IP): {
		const struct iphdr *iph;

		if (!pskb_may_pull(skb, sizeof(*iph)))
			return false;
		iph = (const struct iphdr *)skb->data;
		ihl = iph->ihl * 4;
		if (iph->version != 4 || ihl < sizeof(*iph) ||
		    iph->protocol != IPPROTO_UDP ||
		    !pskb_may_pull(skb, ihl + sizeof(*uh)))
			return false;
		iph = (const struct iphdr *)skb->data;
		uh = (const struct udphdr *)(skb->data + ihl);
		if (uh->dest != htons(BZC_ROCE_UDP_DPORT))
			return false;
		if (ipv4_is_multicast(iph->daddr))
			return mc;
		return __ip_dev_find(dev_net(ndev), iph->daddr, false) == ndev;
	}
	case htons(ETH_P_IPV6): {
		const struct ipv6hdr *ip6h;

		if (!pskb_may_pull(skb, sizeof(*ip6h) + sizeof(*uh)))
			return false;
		ip6h = (const struct ipv6hdr *)skb->data;
		uh = (const struct udphdr *)(skb->data + sizeof(*ip6h));
		if (ip6h->version != 6 || ip6h->nexthdr != IPPROTO_UDP ||
		    uh->dest != htons(BZC_ROCE_UDP_DPORT))
			return false;
		if (ipv6_addr_is_multicast(&ip6h->daddr))
			return mc;
		return ipv6_chk_addr(dev_net(ndev), &ip6h->daddr, ndev, 0);
	}
	default:
		return false;
	}
}

/* Softirq, RCU held: the netdev's packets before the stack sees them. */
static rx_handler_result_t bzc_rx_handler(struct sk_buff **pskb)
{
	struct sk_buff *skb = *pskb;
	struct bzc_dev *bdev = rcu_dereference(skb->dev->rx_handler_data);

	if (skb->pkt_type == PACKET_OTHERHOST || skb->pkt_type == PACKET_LOOPBACK ||
	    !bzc_rx_is_ours(skb, skb->dev, bdev))
		return RX_HANDLER_PASS;
	if (skb_queue_len(&bdev->rxq) >= BZC_RXQ_MAX) {
		bzc_count(bdev, BZC_CNT_RX_DROPS, 1);
		ibdev_info_ratelimited(&bdev->ibdev,
				       "receive queue full: dropped a packet\n");
		kfree_skb(skb);
		return RX_HANDLER_CONSUMED;
	}
	skb = skb_share_check(skb, GFP_ATOMIC);
	if (!skb)
		return RX_HANDLER_CONSUMED;
	skb_queue_tail(&bdev->rxq, skb);
	queue_work(bzc_cpu_wq, &bdev->rx_work);
	return RX_HANDLER_CONSUMED;
}

/**
 * bzc_net_init() - the receive side's state of a new device
 * @bdev: the device, not registered yet
 *
 * Return: 0 or -ENOMEM.
 */
int bzc_net_init(struct bzc_dev *bdev)
{
	skb_queue_head_init(&bdev->rxq);
	INIT_WORK(&bdev->rx_work, bzc_rx_work);
	bdev->rx_sgl = kzalloc(sizeof(*bdev->rx_sgl), GFP_KERNEL);
	bdev->rx_rqe = kzalloc(BZC_RESP_RQE_BYTES, GFP_KERNEL);
	bdev->rx_payload = kzalloc(sizeof(*bdev->rx_payload), GFP_KERNEL);
	bdev->rx_pages = kcalloc(BZC_RX_PAGES, sizeof(*bdev->rx_pages),
				 GFP_KERNEL);
	if (bdev->rx_sgl && bdev->rx_rqe && bdev->rx_payload && bdev->rx_pages)
		return 0;
	bzc_net_cleanup(bdev);
	return -ENOMEM;
}

/*
 * A kernel UDP socket in the netdev's namespace, never bound, that the
 * device's multicast datagrams are sent with. Its IP_MULTICAST_LOOP
 * (IPV6_MULTICAST_LOOP) is off: without a socket the stack loops a copy
 * of every multicast packet back into itself (ip_mc_output(),
 * ip6_finish_output2()), where it would reach a local UDP 4791 socket,
 * rxe's, or be counted and dropped. This device's own members have theirs
 * from bzc_local_mcast(), as a NIC's do. NULL when the family is missing
 * (IPv6 disabled): the copy then comes back as before.
 */
static struct socket *bzc_net_mc_sock(struct net_device *ndev, int family)
{
	struct socket *sock;
	int off = 0, err;

	if (sock_create_kern(dev_net(ndev), family, SOCK_DGRAM, IPPROTO_UDP,
			     &sock))
		return NULL;
	if (family == AF_INET)
		err = sock->ops->setsockopt(sock, SOL_IP, IP_MULTICAST_LOOP,
					    KERNEL_SOCKPTR(&off), sizeof(off));
	else
		err = sock->ops->setsockopt(sock, SOL_IPV6, IPV6_MULTICAST_LOOP,
					    KERNEL_SOCKPTR(&off), sizeof(off));
	if (err) {
		sock_release(sock);
		return NULL;
	}
	return sock;
}

/**
 * bzc_net_mc_sk() - the socket a multicast datagram is sent with
 * @bdev: the sending device
 * @v4: an IPv4 datagram
 *
 * Caller holds the RCU read lock until the packet is handed to the stack.
 *
 * Return: the socket's sock, or NULL (the stack loops a copy back).
 */
struct sock *bzc_net_mc_sk(struct bzc_dev *bdev, bool v4)
{
	struct socket *sock = v4 ? rcu_dereference(bdev->mc_sock4) :
				   rcu_dereference(bdev->mc_sock6);

	return sock ? sock->sk : NULL;
}

/**
 * bzc_net_attach() - start taking the netdev's RoCE v2 packets; RTNL held
 * @bdev: the device, registered
 *
 * The netdev is held while the handler is registered; the NETDEV_UNREGISTER
 * notifier detaches first.
 *
 * Return: 0, or -EBUSY when the netdev has another rx_handler (a bridge
 * port, a bond slave, a macvlan's lower device).
 */
int bzc_net_attach(struct bzc_dev *bdev)
{
	int err;

	ASSERT_RTNL();
	if (bdev->rx_attached)
		return 0;
	err = netdev_rx_handler_register(bdev->ndev, bzc_rx_handler, bdev);
	if (err) {
		pr_err(BZC_DRV_NAME ": %s has another receive handler (a bridge, bond or macvlan port?): %d\n",
		       netdev_name(bdev->ndev), err);
		return err;
	}
	dev_hold(bdev->ndev);
	bdev->rx_attached = true;
	rcu_assign_pointer(bdev->mc_sock4, bzc_net_mc_sock(bdev->ndev, AF_INET));
	rcu_assign_pointer(bdev->mc_sock6, bzc_net_mc_sock(bdev->ndev, AF_INET6));
	return 0;
}

/**
 * bzc_net_take_over() - make a netdev's rx_handler free for a new device
 * @ndev: the netdev; RTNL held
 *
 * A bzc device that `rdma link delete` unregistered keeps its handler
 * until its last user lets go of it; a new device on the same netdev takes
 * its place at once.
 *
 * Return: 0, or -EBUSY when another driver's handler is there (a bridge
 * port, a bond slave, a macvlan's lower device).
 */
int bzc_net_take_over(struct net_device *ndev)
{
	ASSERT_RTNL();
	if (rtnl_dereference(ndev->rx_handler) == bzc_rx_handler)
		bzc_net_detach(rtnl_dereference(ndev->rx_handler_data));
	return netdev_is_rx_handler_busy(ndev) ? -EBUSY : 0;
}

/**
 * bzc_net_detach() - stop taking packets; RTNL held
 * @bdev: the device
 *
 * Idempotent: the NETDEV_UNREGISTER notifier and the device's teardown
 * both call it. When it returns no handler runs any more.
 */
void bzc_net_detach(struct bzc_dev *bdev)
{
	struct socket *sock4, *sock6;

	ASSERT_RTNL();
	if (!bdev->rx_attached)
		return;
	netdev_rx_handler_unregister(bdev->ndev);
	bdev->rx_attached = false;
	/* Released while their namespace is sure to exist. */
	sock4 = rtnl_dereference(bdev->mc_sock4);
	sock6 = rtnl_dereference(bdev->mc_sock6);
	RCU_INIT_POINTER(bdev->mc_sock4, NULL);
	RCU_INIT_POINTER(bdev->mc_sock6, NULL);
	synchronize_net();
	if (sock4)
		sock_release(sock4);
	if (sock6)
		sock_release(sock6);
	dev_put(bdev->ndev);
}

/**
 * bzc_net_cleanup() - free the receive side; no handler is registered
 * @bdev: the device
 */
void bzc_net_cleanup(struct bzc_dev *bdev)
{
	cancel_work_sync(&bdev->rx_work);
	skb_queue_purge(&bdev->rxq);
	kfree(bdev->rx_sgl);
	kfree(bdev->rx_rqe);
	kfree(bdev->rx_payload);
	kfree(bdev->rx_pages);
	bdev->rx_sgl = NULL;
	bdev->rx_rqe = NULL;
	bdev->rx_payload = NULL;
	bdev->rx_pages = NULL;
}

/**
 * bzc_net_mc_join() - join a multicast group on the device's netdev
 * @bdev: the device
 * @mgid: the group: an IPv4-mapped or an IPv6 multicast GID
 *
 * The host joins the group on the netdev as a socket would, under RTNL
 * (ip_mc_inc_group(), ipv6_dev_mc_inc()): the netdev's filter takes the
 * group's frames in and IGMP or MLD reports tell the switches. The host
 * stack counts joins, so the RDMA CM's own IGMP join of the same group
 * (cma_igmp_send()) and ours stack. Sleeps.
 *
 * Return: 0, -ENODEV when the netdev has no IPv4 (or IPv6) to join with,
 * or -ENOMEM.
 */
int bzc_net_mc_join(struct bzc_dev *bdev, const union ib_gid *mgid)
{
	const struct in6_addr *a = (const struct in6_addr *)mgid->raw;
	struct net_device *ndev = bdev->ndev;
	struct in_device *in_dev;
	int err = -ENODEV;

	rtnl_lock();
	if (ipv6_addr_v4mapped(a)) {
		in_dev = __in_dev_get_rtnl(ndev);
		if (in_dev) {
			ip_mc_inc_group(in_dev, a->s6_addr32[3]);
			err = 0;
		}
	} else if (__in6_dev_get(ndev)) {
		err = ipv6_dev_mc_inc(ndev, a);
	}
	rtnl_unlock();
	return err;
}

/**
 * bzc_net_mc_leave() - leave a group bzc_net_mc_join() joined
 * @bdev: the device
 * @mgid: the group
 *
 * A netdev being unregistered has dropped its groups already. Sleeps.
 */
void bzc_net_mc_leave(struct bzc_dev *bdev, const union ib_gid *mgid)
{
	const struct in6_addr *a = (const struct in6_addr *)mgid->raw;
	struct net_device *ndev = bdev->ndev;
	struct in_device *in_dev;

	rtnl_lock();
	if (ipv6_addr_v4mapped(a)) {
		in_dev = __in_dev_get_rtnl(ndev);
		if (in_dev)
			ip_mc_dec_group(in_dev, a->s6_addr32[3]);
	} else if (__in6_dev_get(ndev)) {
		ipv6_dev_mc_dec(ndev, a);
	}
	rtnl_unlock();
}
