// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the local transport (docs/transport.md). A message to a QP on a bzc
 * device of this kernel, in the sending device's network namespace, needs
 * no packet: the target is found by GID and QPN and its responder runs in
 * the requester's context.
 */
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <rdma/ib_addr.h>

#include "bzc_xport.h"

/**
 * bzc_dev_by_gid() - the bzc device of this kernel that owns a GID
 * @from: the device asking
 * @gid: the GID
 *
 * The device whose netdev owns the IP address in @gid in the network
 * namespace of @from's netdev: a QP reaches only devices of its own
 * device's namespace, as its packets would.
 *
 * Return: the device, referenced (ib_device_put()), or NULL.
 */
struct bzc_dev *bzc_dev_by_gid(struct bzc_dev *from, const union ib_gid *gid)
{
	const struct in6_addr *addr = (const struct in6_addr *)gid->raw;
	struct net_device *ndev;
	struct ib_device *ibdev;
	struct net *net;

	/* The namespace stays while RCU is held, even if the netdev moves. */
	rcu_read_lock();
	net = dev_net(from->ndev);
	if (ipv6_addr_v4mapped(addr))
		ndev = __ip_dev_find(net, addr->s6_addr32[3], false);
	else
		ndev = ipv6_dev_find(net, addr, NULL);
	if (ndev)
		dev_hold(ndev);
	rcu_read_unlock();
	if (!ndev)
		return NULL;
	ibdev = ib_device_get_by_netdev(ndev, BZC_RDMA_DRIVER_ID);
	dev_put(ndev);
	return ibdev ? to_bdev(ibdev) : NULL;
}

/*
 * The destination QP of a message, referenced (and its device: put both
 * with bzc_peer_put()).
 */
struct bzc_peer {
	struct bzc_dev *bdev;
	struct bzc_qp *qp;
};

/* The QP on `peer->bdev` that `msg` goes to: false if there is none. */
static bool bzc_peer_get(struct bzc_qp *qp, const struct bzc_msg *msg,
			 struct bzc_peer *peer)
{
	peer->qp = bzc_qp_get(peer->bdev, msg->dqpn);
	if (peer->qp)
		return true;
	ib_device_put(&peer->bdev->ibdev);
	return false;
}

static void bzc_peer_put(struct bzc_peer *peer)
{
	bzc_qp_put(peer->qp);
	ib_device_put(&peer->bdev->ibdev);
}

/*
 * A UD send to a multicast GID: one copy to every QP attached to the group
 * on this device, the sender's own QP included, each taking it as a unicast
 * datagram (Q_Key check, dropped without a receive), and one on the wire
 * for the group's members elsewhere. Members are referenced under the
 * group lock and served outside it.
 */
static void bzc_local_mcast(struct bzc_qp *qp, const struct bzc_msg *msg,
			    const struct bzc_resp_scratch *scratch,
			    bool may_sleep, struct bzc_resp_result *res)
{
	struct bzc_qp *members[BZC_MAX_MCAST_QP_ATTACH];
	int i, n;

	/* Multicast datagrams carry DQPN 0xffffff; others are dropped. */
	if (msg->dqpn != BZC_MCAST_QPN)
		return;
	n = bzc_mcast_members(to_bdev(qp->ibqp.device), &msg->av->dgid,
			      members);
	for (i = 0; i < n; i++) {
		bzc_resp_execute(members[i], msg, scratch, may_sleep, res);
		bzc_qp_put(members[i]);
	}
	bzc_roce_xport.send(qp, msg, may_sleep, res);
}

/**
 * bzc_local_send() - carry a message to its destination in this kernel,
 *		      or hand it to the wire when it is not in this kernel
 * @qp: the requester's QP, its sq_mutex held
 * @msg: the message
 * @may_sleep: the caller may sleep
 * @res: the responder's answer, an ACK on entry
 *
 * The responder runs right here, in the requester's scratch; the data
 * moves once, from the source pages to the destination pages.
 *
 * Return: false when nothing took the message.
 */
bool bzc_local_send(struct bzc_qp *qp, const struct bzc_msg *msg,
		    bool may_sleep, struct bzc_resp_result *res)
{
	struct bzc_resp_scratch scratch = {
		.sgl = qp->peer_sgl,
		.rqe = qp->peer_rqe,
	};
	struct bzc_peer peer;
	bool taken;

	if (bzc_type_ud(msg->type) &&
	    rdma_is_multicast_addr((struct in6_addr *)msg->av->dgid.raw)) {
		bzc_local_mcast(qp, msg, &scratch, may_sleep, res);
		return true;
	}
	/*
	 * The transport's choice (docs/transport.md, section 3): a GID of a
	 * bzc device in this kernel and namespace is reached without a
	 * packet; anything else is on the wire.
	 */
	peer.bdev = bzc_dev_by_gid(to_bdev(qp->ibqp.device), &msg->av->dgid);
	/* XRC has no wire yet (no XRCETH): unreachable, as a lost packet. */
	if (!peer.bdev && msg->type == IB_QPT_XRC_INI)
		return false;
	if (!peer.bdev)
		return bzc_roce_xport.send(qp, msg, may_sleep, res);
	/* After the messages still on the wire, in order. */
	if (bzc_wire_inflight(qp)) {
		ib_device_put(&peer.bdev->ibdev);
		res->wait = true;
		return true;
	}
	if (!bzc_peer_get(qp, msg, &peer))
		return false;
	taken = bzc_resp_execute(peer.qp, msg, &scratch, may_sleep, res);
	bzc_peer_put(&peer);
	return taken;
}

const struct bzc_xport_ops bzc_local_xport = {
	.send = bzc_local_send,
};
