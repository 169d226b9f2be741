// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the data path.
 *
 * A QP's send WQEs are executed in order by whoever holds its sq_mutex: the
 * doorbell syscall itself for short WQEs (low latency, nothing sleeps), a
 * worker on bzc_wq for the rest (long copies may reschedule). Executing a
 * WQE means finding the destination QP in this kernel by GID and QPN and
 * moving the data once, from the source MR's pinned pages to the
 * destination's, as the transport's semantics say (RC: reliable with RNR
 * retries and error completions on both sides; UC and UD: what cannot be
 * delivered is dropped).
 *
 * Everything read from a ring is copied into kernel memory first and
 * checked there; the process can change its ring at any time.
 *
 * Ordering: WQEs complete in order, and each has finished, reads and
 * atomics included, before the next starts, so fences hold trivially.
 */
#include <linux/highmem.h>
#include <linux/inetdevice.h>
#include <linux/sched.h>
#include <net/addrconf.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_umem.h>

#include "bzc_sgl.h"

struct workqueue_struct *bzc_wq;

/*
 * What one doorbell syscall runs itself: at most this many WQEs (flushed
 * ones included) moving at most this many bytes in all; the worker takes
 * the rest, at most BZC_WORKER_WQES per pass.
 */
#define BZC_DOORBELL_WQES	64
#define BZC_DOORBELL_BYTES	SZ_64K
#define BZC_WORKER_WQES		1024
#define BZC_GRH_BYTES		40
#define BZC_PEER_RQE_BYTES	(sizeof(struct bzc_recv_wqe) + \
				 BZC_MAX_SGE * sizeof(struct bzc_sge))

/* What executing a WQE produced. */
struct bzc_result {
	enum ib_wc_status status;	/* for the requester */
	u64 byte_len;
	bool rnr;			/* no receive posted: retry later */
	u8 rnr_timer;			/* the responder's min_rnr_timer */
};

/*
 * The bzc device whose netdev owns the IP address in `gid` in the network
 * namespace of `from`'s netdev, referenced: a QP reaches only devices of
 * its own device's namespace, as its packets would.
 */
static struct bzc_dev *bzc_dev_by_gid(struct bzc_dev *from,
				      const union ib_gid *gid)
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

static bool bzc_qp_receives(enum ib_qp_state state)
{
	return state == IB_QPS_RTR || state == IB_QPS_RTS ||
	       state == IB_QPS_SQD || state == IB_QPS_SQE;
}

/*
 * The destination QP of a WQE, referenced (and its device: put both with
 * bzc_peer_put()), or NULL if nothing in this kernel would receive it.
 * For UD the caller has put the AH's address in peer->av.
 */
struct bzc_peer {
	struct bzc_dev *bdev;
	struct bzc_qp *qp;
	struct bzc_av av;
};

/* The Q_Key a UD WQE sends with: its own, or the QP's (high bit set). */
static u32 bzc_ud_qkey(struct bzc_qp *qp, const struct bzc_send_wqe *wqe)
{
	u32 qkey = le32_to_cpu(wqe->ud.remote_qkey);

	return qkey & 0x80000000 ? READ_ONCE(qp->qkey) : qkey;
}

/*
 * The responder's checks of a message's source, in one place (a wire
 * transport runs the same on each packet): does `tqp` take what `qp`
 * sends from GID `sgid`? It must be of the same type and receiving, and
 * - UD: the Q_Key (`qkey`) matches;
 * - RC, UC: it is connected to the sender: its dest_qp_num is the
 *   sender's QPN and its address vector's DGID the sender's GID, as a NIC
 *   drops a packet whose source is not its connection's. The sender's
 *   device is in the responder's namespace (bzc_dev_by_gid()).
 * A refused message is dropped silently: an RC requester retries in vain.
 */
static bool bzc_responder_accepts(struct bzc_qp *tqp, struct bzc_qp *qp,
				  const union ib_gid *sgid, u32 qkey)
{
	enum ib_qp_type type = qp->ibqp.qp_type;
	bool ok, peer = true;

	spin_lock(&tqp->lock);
	ok = tqp->ibqp.qp_type == type && bzc_qp_receives(tqp->state);
	if (ok && bzc_type_ud(type)) {
		ok = tqp->qkey == qkey;
	} else if (ok) {
		peer = tqp->dest_qpn == qp->ibqp.qp_num &&
		       !memcmp(&tqp->av.dgid, sgid, sizeof(*sgid));
		ok = peer;
	}
	spin_unlock(&tqp->lock);
	if (!peer)
		ibdev_info_ratelimited(tqp->ibqp.device,
				       "QP %u: dropped a message from QP %u of %s (%pI6c): not its peer\n",
				       tqp->ibqp.qp_num, qp->ibqp.qp_num,
				       dev_name(&qp->ibqp.device->dev),
				       sgid->raw);
	return ok;
}

/* The GID `qp` sends from (its AV's source GID index): false if none. */
static bool bzc_sender_gid(struct bzc_qp *qp, u8 sgid_index, union ib_gid *gid)
{
	const struct ib_gid_attr *attr;

	attr = rdma_get_gid_attr(qp->ibqp.device, BZC_PORT, sgid_index);
	if (IS_ERR(attr))
		return false;
	*gid = attr->gid;
	rdma_put_gid_attr(attr);
	return true;
}

static bool bzc_peer_get(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			 struct bzc_peer *peer)
{
	enum ib_qp_type type = qp->ibqp.qp_type;
	struct bzc_av *av = &peer->av;
	union ib_gid sgid = {};
	u32 dqpn, qkey = 0;

	if (bzc_type_ud(type)) {
		/* peer->av: resolved by the caller, an AH of the QP's PD. */
		dqpn = le32_to_cpu(wqe->ud.remote_qpn) & 0xffffff;
		qkey = bzc_ud_qkey(qp, wqe);
	} else {
		spin_lock(&qp->lock);
		*av = qp->av;
		dqpn = qp->dest_qpn;
		spin_unlock(&qp->lock);
		if (!bzc_sender_gid(qp, av->sgid_index, &sgid))
			return false;
	}

	peer->bdev = bzc_dev_by_gid(to_bdev(qp->ibqp.device), &av->dgid);
	if (!peer->bdev)
		return false;
	peer->qp = bzc_qp_get(peer->bdev, dqpn);
	if (!peer->qp)
		goto err_dev;

	if (bzc_responder_accepts(peer->qp, qp, &sgid, qkey))
		return true;

	bzc_qp_put(peer->qp);
err_dev:
	ib_device_put(&peer->bdev->ibdev);
	return false;
}

static void bzc_peer_put(struct bzc_peer *peer)
{
	bzc_qp_put(peer->qp);
	ib_device_put(&peer->bdev->ibdev);
}

/*
 * Take the next receive WQE of an RQ or SRQ ring into `rqe` (room for
 * BZC_MAX_SGE SGEs) and hand its slot back to the producer. `*cons` is the
 * kernel's consumer index, `wqe_size` and `max_sge` what a slot holds; the
 * caller holds the queue's lock. Returns the number of WQEs still posted
 * after this one, -EAGAIN when none is posted, or -EIO when the ring is
 * corrupt: a producer index further ahead than the ring holds, or more
 * SGEs than a slot has (nothing is consumed then).
 */
int bzc_recv_ring_take(struct bzc_ring *ring, u32 *cons, u32 wqe_size,
		       u32 max_sge, struct bzc_recv_wqe *rqe)
{
	struct bzc_wq_ring_hdr *hdr = ring->kaddr;
	const struct bzc_recv_wqe *slot;
	u32 prod;

	/*
	 * Acquire: pairs with the producer's release of prod after its WQEs
	 * (the process's post, or bzc_kpost_recv()).
	 */
	prod = le32_to_cpu(smp_load_acquire(&hdr->prod));
	if (prod == *cons)
		return -EAGAIN;
	slot = bzc_wq_slot(ring, *cons, wqe_size);
	memcpy(rqe, slot, sizeof(*rqe));
	if (prod - *cons > ring->entries || rqe->num_sge > max_sge)
		return -EIO;
	memcpy(rqe + 1, slot + 1, rqe->num_sge * sizeof(struct bzc_sge));
	(*cons)++;
	/*
	 * Release: the WQE is copied out before the producer, whose acquire
	 * of cons pairs with this, may reuse its slot.
	 */
	smp_store_release(&hdr->cons, cpu_to_le32(*cons));
	return prod - *cons;
}

/*
 * Take the peer's next receive WQE into `rqe` (the sender's scratch), from
 * its RQ or its SRQ. -EAGAIN: none posted (RNR); -EIO: the peer's ring is
 * corrupt (the peer QP has been put in error).
 */
static int bzc_rq_take(struct bzc_qp *tqp, struct bzc_recv_wqe *rqe)
{
	unsigned long flags;
	int ret;

	if (tqp->ibqp.srq) {
		if (!bzc_qp_receives(READ_ONCE(tqp->state)))
			return -EAGAIN;
		ret = bzc_srq_take(to_bsrq(tqp->ibqp.srq), rqe);
		if (ret == -EIO)
			bzc_qp_error(tqp, IB_EVENT_QP_FATAL);
		return ret;
	}

	spin_lock_irqsave(&tqp->rq_lock, flags);
	if (bzc_qp_receives(READ_ONCE(tqp->state)))
		ret = bzc_recv_ring_take(&tqp->rq, &tqp->rq_cons,
					 tqp->rq_wqe_size, tqp->max_recv_sge,
					 rqe);
	else
		ret = -EAGAIN;
	spin_unlock_irqrestore(&tqp->rq_lock, flags);
	if (ret == -EIO) {
		ibdev_info_ratelimited(tqp->ibqp.device,
				       "QP %u: corrupt receive queue ring\n",
				       tqp->ibqp.qp_num);
		bzc_qp_error(tqp, IB_EVENT_QP_FATAL);
	}
	return ret < 0 ? ret : 0;
}

static void bzc_recv_complete(struct bzc_qp *tqp, struct bzc_qp *qp,
			      const struct bzc_recv_wqe *rqe,
			      const struct bzc_send_wqe *wqe,
			      enum ib_wc_status status, u64 byte_len)
{
	struct bzc_cqe cqe = {
		.wr_id = rqe->wr_id,
		.status = status,
		.opcode = wqe->opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM ?
			  IB_WC_RECV_RDMA_WITH_IMM : IB_WC_RECV,
		.byte_len = cpu_to_le32(byte_len),
		.qp_num = cpu_to_le32(tqp->ibqp.qp_num),
		.src_qp = cpu_to_le32(qp->ibqp.qp_num),
	};

	if (status == IB_WC_SUCCESS) {
		if (wqe->opcode == IB_UVERBS_WR_SEND_WITH_IMM ||
		    wqe->opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM) {
			cqe.wc_flags |= BZC_CQE_WITH_IMM;
			cqe.imm_data = wqe->imm_data;
		}
		if (wqe->opcode == IB_UVERBS_WR_SEND_WITH_INV) {
			cqe.wc_flags |= BZC_CQE_WITH_INV;
			cqe.imm_data = wqe->imm_data;	/* the rkey */
		}
		if (bzc_type_ud(tqp->ibqp.qp_type))
			cqe.wc_flags |= BZC_CQE_GRH;
	}
	/*
	 * A full CQ drops the CQE and goes to error (IBV_EVENT_CQ_ERR); the
	 * QP can no longer report its work, which is IBA's local work queue
	 * catastrophic error.
	 */
	bzc_count(to_bdev(tqp->ibqp.device), BZC_CNT_RCVD_MSGS, 1);
	if (!bzc_cq_post(to_bcq(tqp->ibqp.recv_cq), &cqe,
			 wqe->flags & BZC_WQE_SOLICITED))
		bzc_qp_error(tqp, IB_EVENT_QP_FATAL);
}

/*
 * The GRH a UD receiver finds in its first 40 bytes: RoCE v2 in its IPv6
 * form (next header UDP, IPv4 addresses as v4-mapped GIDs), so that
 * ibv_init_ah_from_wc() and the kernel CM look the GID up as a RoCE v2 one.
 */
static void bzc_build_grh(struct ib_grh *grh, struct bzc_qp *qp,
			  const struct bzc_av *dst, u32 len)
{
	const struct ib_gid_attr *sgid;

	memset(grh, 0, sizeof(*grh));
	grh->version_tclass_flow = cpu_to_be32(6 << 28);
	grh->paylen = cpu_to_be16(len);
	grh->next_hdr = IPPROTO_UDP;
	grh->hop_limit = 64;
	sgid = rdma_get_gid_attr(qp->ibqp.device, BZC_PORT, dst->sgid_index);
	if (!IS_ERR(sgid)) {
		grh->sgid = sgid->gid;
		rdma_put_gid_attr(sgid);
	}
	grh->dgid = dst->dgid;
}

/* SEND, SEND_WITH_IMM: consume a receive at the peer and fill it. */
static void bzc_exec_send(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			  struct bzc_sgl *src, struct bzc_peer *peer,
			  bool may_sleep, struct bzc_result *res)
{
	struct bzc_qp *tqp = peer->qp;
	struct bzc_recv_wqe *rqe = qp->peer_rqe;
	bool ud = bzc_type_ud(qp->ibqp.qp_type);
	struct bzc_cursor dc, sc = { .sgl = src };
	struct bzc_sgl *dst = qp->peer_sgl;
	u64 need = src->total + (ud ? BZC_GRH_BYTES : 0);
	int err;

	err = bzc_rq_take(tqp, rqe);
	if (err) {
		/* Only RC waits for a receive; UC and UD drop. */
		res->rnr = err == -EAGAIN && qp->ibqp.qp_type == IB_QPT_RC;
		res->rnr_timer = READ_ONCE(tqp->min_rnr_timer);
		if (err == -EIO && qp->ibqp.qp_type == IB_QPT_RC)
			res->status = IB_WC_REM_OP_ERR;
		return;
	}

	/* An SRQ's receive buffers are in the SRQ's PD. */
	if (!bzc_sgl_from_sges(dst, peer->bdev, tqp->ibqp.srq ?
			       tqp->ibqp.srq->pd : tqp->ibqp.pd,
			       (const struct bzc_sge *)(rqe + 1), rqe->num_sge,
			       IB_ACCESS_LOCAL_WRITE)) {
		bzc_recv_complete(tqp, qp, rqe, wqe, IB_WC_LOC_PROT_ERR, 0);
		bzc_qp_error(tqp, 0);
		if (!ud)
			res->status = IB_WC_REM_OP_ERR;
		return;
	}
	if (dst->total < need) {
		bzc_sgl_put(dst);
		bzc_recv_complete(tqp, qp, rqe, wqe, IB_WC_LOC_LEN_ERR, 0);
		bzc_qp_error(tqp, 0);
		if (!ud)
			res->status = IB_WC_REM_INV_REQ_ERR;
		return;
	}

	dc.sgl = dst;
	if (ud) {
		struct ib_grh grh;
		struct bzc_sgl gsgl;
		struct bzc_cursor gc = { .sgl = &gsgl };

		bzc_build_grh(&grh, qp, &peer->av, src->total);
		bzc_sgl_kbuf(&gsgl, &grh, sizeof(grh));
		bzc_copy(&dc, &gc, sizeof(grh), false);
	}
	bzc_copy(&dc, &sc, src->total, may_sleep);
	bzc_sgl_put(dst);
	/*
	 * SEND_WITH_INV: the responder invalidates before it completes. A
	 * key it may not invalidate is an invalid request (IBA 9.9.3,
	 * class J): the receive and the send fail, the responder's QP too.
	 */
	if (wqe->opcode == IB_UVERBS_WR_SEND_WITH_INV &&
	    bzc_key_invalidate(peer->bdev, le32_to_cpu(wqe->imm_data), tqp,
			       true)) {
		bzc_recv_complete(tqp, qp, rqe, wqe, IB_WC_REM_INV_REQ_ERR, 0);
		bzc_qp_error(tqp, 0);
		res->status = IB_WC_REM_INV_REQ_ERR;
		return;
	}
	bzc_recv_complete(tqp, qp, rqe, wqe, IB_WC_SUCCESS, need);
}

/*
 * A UD send to a multicast GID: one copy to every QP attached to the group
 * on this device, the sender's own QP included, each taking it as a unicast
 * datagram (Q_Key check, dropped without a receive). Members are referenced
 * under the group lock and served outside it.
 */
static void bzc_exec_mcast(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			   struct bzc_sgl *src, struct bzc_peer *peer,
			   bool may_sleep, struct bzc_result *res)
{
	struct bzc_qp *members[BZC_MAX_MCAST_QP_ATTACH];
	u32 qkey = bzc_ud_qkey(qp, wqe);
	int i, n;

	/* Multicast datagrams carry DQPN 0xffffff; others are dropped. */
	if ((le32_to_cpu(wqe->ud.remote_qpn) & 0xffffff) != BZC_MCAST_QPN)
		return;
	peer->bdev = to_bdev(qp->ibqp.device);
	n = bzc_mcast_members(peer->bdev, &peer->av.dgid, members);
	for (i = 0; i < n; i++) {
		peer->qp = members[i];
		if (bzc_responder_accepts(peer->qp, qp, NULL, qkey))
			bzc_exec_send(qp, wqe, src, peer, may_sleep, res);
		bzc_qp_put(members[i]);
	}
}

/*
 * An RC responder's error of IBA class C: an R_Key or access violation
 * (IBV_WC_REM_ACCESS_ERR) or an invalid request (IBV_WC_REM_INV_REQ_ERR).
 * It NAKs, so the requester's WQE fails with `status`, and goes to ERR,
 * flushing its receives; with no completion of its own to say why, its
 * owner learns it from an affiliated event. A UC responder drops the
 * message (class D/E): its requester sees nothing.
 */
static void bzc_responder_error(struct bzc_qp *qp, struct bzc_qp *tqp,
				enum ib_wc_status status,
				struct bzc_result *res)
{
	bool access = status == IB_WC_REM_ACCESS_ERR;

	if (qp->ibqp.qp_type != IB_QPT_RC)
		return;
	res->status = status;
	ibdev_info_ratelimited(tqp->ibqp.device,
			       "QP %u: %s from QP %u, to the error state\n",
			       tqp->ibqp.qp_num,
			       access ? "remote access violation" :
					"invalid request",
			       qp->ibqp.qp_num);
	bzc_qp_error(tqp, access ? IB_EVENT_QP_ACCESS_ERR :
				   IB_EVENT_QP_REQ_ERR);
}

/* RDMA WRITE (with immediate): into the peer's MR named by rkey. */
static void bzc_exec_write(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			   struct bzc_sgl *src, struct bzc_peer *peer,
			   bool may_sleep, struct bzc_result *res)
{
	struct bzc_qp *tqp = peer->qp;
	struct bzc_sgl *dst = qp->peer_sgl;
	struct bzc_cursor dc = { .sgl = dst }, sc = { .sgl = src };
	bool imm = wqe->opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;
	struct bzc_recv_wqe *rqe = qp->peer_rqe;
	bool rc = qp->ibqp.qp_type == IB_QPT_RC;
	int err;

	bzc_sgl_init(dst);
	if (!(READ_ONCE(tqp->access) & IB_ACCESS_REMOTE_WRITE) ||
	    !bzc_sgl_add(dst, peer->bdev, NULL, tqp,
			 le32_to_cpu(wqe->rdma.rkey),
			 le64_to_cpu(wqe->rdma.remote_addr), src->total,
			 IB_ACCESS_REMOTE_WRITE)) {
		bzc_responder_error(qp, tqp, IB_WC_REM_ACCESS_ERR, res);
		return;
	}

	if (imm) {
		err = bzc_rq_take(tqp, rqe);
		if (err) {
			res->rnr = err == -EAGAIN && rc;
			res->rnr_timer = READ_ONCE(tqp->min_rnr_timer);
			if (err == -EIO && rc)
				res->status = IB_WC_REM_OP_ERR;
			bzc_sgl_put(dst);
			return;
		}
	}
	bzc_copy(&dc, &sc, src->total, may_sleep);
	bzc_sgl_put(dst);
	if (imm)
		bzc_recv_complete(tqp, qp, rqe, wqe, IB_WC_SUCCESS, src->total);
}

/* RDMA READ: from the peer's MR into the local SGEs. */
static void bzc_exec_read(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			  struct bzc_sgl *local, struct bzc_peer *peer,
			  bool may_sleep, struct bzc_result *res)
{
	struct bzc_qp *tqp = peer->qp;
	struct bzc_sgl *remote = qp->peer_sgl;
	struct bzc_cursor dc = { .sgl = local }, sc = { .sgl = remote };

	bzc_sgl_init(remote);
	if (!(READ_ONCE(tqp->access) & IB_ACCESS_REMOTE_READ) ||
	    !bzc_sgl_add(remote, peer->bdev, NULL, tqp,
			 le32_to_cpu(wqe->rdma.rkey),
			 le64_to_cpu(wqe->rdma.remote_addr), local->total,
			 IB_ACCESS_REMOTE_READ)) {
		bzc_responder_error(qp, tqp, IB_WC_REM_ACCESS_ERR, res);
		return;
	}
	bzc_copy(&dc, &sc, local->total, may_sleep);
	bzc_sgl_put(remote);
}

/* 64-bit atomics on the peer's memory, atomic against the CPUs too. */
static void bzc_exec_atomic(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			    struct bzc_sgl *local, struct bzc_peer *peer,
			    struct bzc_result *res)
{
	u64 raddr = le64_to_cpu(wqe->atomic.remote_addr);
	struct bzc_qp *tqp = peer->qp;
	struct bzc_sgl *remote = qp->peer_sgl;
	struct bzc_sgl result;
	struct bzc_cursor dc = { .sgl = local }, rc = { .sgl = &result };
	u64 orig, byte;
	struct bzc_seg *seg;
	u64 *p;

	if (!IS_ALIGNED(raddr, sizeof(u64))) {
		bzc_responder_error(qp, tqp, IB_WC_REM_INV_REQ_ERR, res);
		return;
	}
	bzc_sgl_init(remote);
	if (!(READ_ONCE(tqp->access) & IB_ACCESS_REMOTE_ATOMIC) ||
	    !bzc_sgl_add(remote, peer->bdev, NULL, tqp,
			 le32_to_cpu(wqe->atomic.rkey), raddr, sizeof(u64),
			 IB_ACCESS_REMOTE_ATOMIC)) {
		bzc_responder_error(qp, tqp, IB_WC_REM_ACCESS_ERR, res);
		return;
	}

	/* Aligned 8 bytes never straddle a page. */
	seg = &remote->seg[0];
	byte = seg->mr->page_off + seg->off;
	p = kmap_local_page(seg->mr->pages[byte >> PAGE_SHIFT]) +
	    offset_in_page(byte);
	if (wqe->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP)
		orig = cmpxchg64(p, le64_to_cpu(wqe->atomic.compare_add),
				 le64_to_cpu(wqe->atomic.swap));
	else
		orig = atomic64_fetch_add(le64_to_cpu(wqe->atomic.compare_add),
					  (atomic64_t *)p);
	kunmap_local(p);
	bzc_sgl_put(remote);

	bzc_sgl_kbuf(&result, &orig, sizeof(orig));
	bzc_copy(&dc, &rc, sizeof(orig), false);
	res->byte_len = sizeof(orig);
}

static bool bzc_opcode_valid(enum ib_qp_type type, u8 opcode)
{
	switch (opcode) {
	case IB_UVERBS_WR_SEND:
	case IB_UVERBS_WR_SEND_WITH_IMM:
		return true;
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		return !bzc_type_ud(type);
	case IB_UVERBS_WR_RDMA_READ:
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
	case IB_UVERBS_WR_SEND_WITH_INV:
		return type == IB_QPT_RC;
	/* Local operations: windows exist for connected QPs only. */
	case IB_UVERBS_WR_LOCAL_INV:
	case IB_UVERBS_WR_BIND_MW:
		return type != IB_QPT_UD;
	default:
		return false;
	}
}

static u8 bzc_wc_opcode(u8 wr_opcode)
{
	switch (wr_opcode) {
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_UVERBS_WR_RDMA_READ:
		return IB_WC_RDMA_READ;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
		return IB_WC_COMP_SWAP;
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return IB_WC_FETCH_ADD;
	case IB_UVERBS_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case IB_UVERBS_WR_BIND_MW:
		return IB_WC_BIND_MW;
	default:
		return IB_WC_SEND;
	}
}

/* Bytes a (checked) WQE moves: decides doorbell vs worker. */
static u64 bzc_wqe_bytes(const struct bzc_send_wqe *wqe)
{
	const struct bzc_sge *sge = (const void *)wqe + BZC_SEND_WQE_DATA_OFFSET;
	u64 bytes = 0;
	u32 i;

	if (wqe->flags & BZC_WQE_INLINE)
		return le32_to_cpu(wqe->inline_len);
	for (i = 0; i < wqe->num_sge; i++)
		bytes += le32_to_cpu(sge[i].length);
	return bytes;
}

/* Is the WQE well formed for this QP? (It is in kernel memory now.) */
static bool bzc_wqe_valid(struct bzc_qp *qp, const struct bzc_send_wqe *wqe)
{
	if (!bzc_opcode_valid(qp->ibqp.qp_type, wqe->opcode))
		return false;
	if (wqe->flags & BZC_WQE_INLINE)
		return le32_to_cpu(wqe->inline_len) <= qp->max_inline &&
		       wqe->opcode != IB_UVERBS_WR_BIND_MW &&
		       wqe->opcode != IB_UVERBS_WR_LOCAL_INV &&
		       wqe->opcode != IB_UVERBS_WR_RDMA_READ &&
		       wqe->opcode != IB_UVERBS_WR_ATOMIC_CMP_AND_SWP &&
		       wqe->opcode != IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
	return wqe->num_sge <= qp->max_send_sge;
}

static void bzc_exec_wqe(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			 bool may_sleep, struct bzc_result *res)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	struct bzc_sgl *local = qp->local_sgl;
	bool reads_in = wqe->opcode == IB_UVERBS_WR_RDMA_READ ||
			wqe->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
			wqe->opcode == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
	struct bzc_peer peer;

	res->status = IB_WC_SUCCESS;
	res->rnr = false;

	if (!bzc_wqe_valid(qp, wqe)) {
		res->status = IB_WC_LOC_QP_OP_ERR;
		return;
	}
	/* Local operations: nothing moves, no peer; their SGEs are ignored. */
	res->byte_len = 0;
	if (wqe->opcode == IB_UVERBS_WR_BIND_MW) {
		res->status = bzc_mw_bind(qp, wqe);
		return;
	}
	if (wqe->opcode == IB_UVERBS_WR_LOCAL_INV) {
		if (bzc_key_invalidate(bdev, le32_to_cpu(wqe->imm_data), qp,
				       false))
			res->status = IB_WC_LOC_QP_OP_ERR;
		return;
	}
	if (wqe->flags & BZC_WQE_INLINE) {
		bzc_sgl_kbuf(local, (const void *)wqe + BZC_SEND_WQE_DATA_OFFSET,
			     le32_to_cpu(wqe->inline_len));
	} else if (!bzc_sgl_from_sges(local, bdev, qp->ibqp.pd,
				      (const void *)wqe + BZC_SEND_WQE_DATA_OFFSET,
				      wqe->num_sge,
				      reads_in ? IB_ACCESS_LOCAL_WRITE : 0)) {
		res->status = IB_WC_LOC_PROT_ERR;
		return;
	}
	res->byte_len = local->total;
	/* An atomic's local SGEs must hold its 8-byte result. */
	if (local->total > BZC_MAX_MSG_SZ ||
	    (reads_in && wqe->opcode != IB_UVERBS_WR_RDMA_READ &&
	     local->total < sizeof(u64))) {
		res->status = IB_WC_LOC_LEN_ERR;
		goto out;
	}

	/* An AH that is not this PD's is the sender's error, not a drop. */
	if (bzc_type_ud(qp->ibqp.qp_type) &&
	    !bzc_ah_get_av(bdev, le32_to_cpu(wqe->ud.ah), qp->ibqp.pd,
			   &peer.av)) {
		res->status = IB_WC_LOC_QP_OP_ERR;
		goto out;
	}
	/*
	 * A datagram longer than the port MTU is not sent, yet the sender
	 * sees success (IBA C10-93.1.1), as on a real port.
	 */
	if (bzc_type_ud(qp->ibqp.qp_type) &&
	    local->total > ib_mtu_enum_to_int(iboe_get_mtu(READ_ONCE(bdev->ndev->mtu))))
		goto out;
	if (bzc_type_ud(qp->ibqp.qp_type) &&
	    rdma_is_multicast_addr((struct in6_addr *)peer.av.dgid.raw)) {
		bzc_exec_mcast(qp, wqe, local, &peer, may_sleep, res);
		goto out;
	}
	if (!bzc_peer_get(qp, wqe, &peer)) {
		/* Nobody answers: RC retries in vain, UC and UD drop. */
		if (qp->ibqp.qp_type == IB_QPT_RC)
			res->status = IB_WC_RETRY_EXC_ERR;
		goto out;
	}

	switch (wqe->opcode) {
	case IB_UVERBS_WR_SEND:
	case IB_UVERBS_WR_SEND_WITH_IMM:
	case IB_UVERBS_WR_SEND_WITH_INV:
		bzc_exec_send(qp, wqe, local, &peer, may_sleep, res);
		break;
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		bzc_exec_write(qp, wqe, local, &peer, may_sleep, res);
		break;
	case IB_UVERBS_WR_RDMA_READ:
		bzc_exec_read(qp, wqe, local, &peer, may_sleep, res);
		break;
	default:
		bzc_exec_atomic(qp, wqe, local, &peer, res);
		break;
	}
	bzc_peer_put(&peer);
out:
	bzc_sgl_put(local);
}

/* RNR NAK timer values of the IB spec, in microseconds, by min_rnr_timer. */
static const u32 bzc_rnr_usecs[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

/*
 * The head WQE found no receive at an RC peer (an RNR NAK, in wire terms).
 * Returns true if it is retried after the responder's RNR timer (the
 * worker is scheduled), false once rnr_retry retries are used up.
 */
static bool bzc_rnr_wait(struct bzc_qp *qp, u8 rnr_timer)
{
	unsigned long delay;

	bzc_count(to_bdev(qp->ibqp.device), BZC_CNT_RNR_NAKS, 1);
	if (!qp->rnr_waiting) {
		qp->rnr_waiting = true;
		qp->rnr_left = qp->rnr_retry;
	}
	if (qp->rnr_retry != 7) {	/* 7: retry forever */
		if (!qp->rnr_left) {
			qp->rnr_waiting = false;
			return false;
		}
		qp->rnr_left--;
	}
	delay = usecs_to_jiffies(bzc_rnr_usecs[rnr_timer & 31]);
	qp->rnr_until = jiffies + delay;
	/* mod_: a doorbell may have queued the work already, undelayed. */
	mod_delayed_work(bzc_wq, &qp->sq_work, delay);
	return true;
}

static void bzc_sq_complete(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
			    enum ib_wc_status status, u64 byte_len)
{
	struct bzc_cqe cqe = {
		.wr_id = wqe->wr_id,
		.status = status,
		.opcode = bzc_wc_opcode(wqe->opcode),
		.byte_len = cpu_to_le32(byte_len),
		.qp_num = cpu_to_le32(qp->ibqp.qp_num),
	};

	/* As for a receive: a dropped CQE puts the QP in ERR. */
	if (!bzc_cq_post(to_bcq(qp->ibqp.send_cq), &cqe, false))
		bzc_qp_error(qp, IB_EVENT_QP_FATAL);
}

static void bzc_sq_advance(struct bzc_qp *qp)
{
	struct bzc_wq_ring_hdr *hdr = qp->sq.kaddr;

	qp->sq_cons++;
	/* The slot is free for the process once it sees cons. */
	smp_store_release(&hdr->cons, cpu_to_le32(qp->sq_cons));
}

/* A send error: RC QPs go to ERR, UC and UD to SQE; later WQEs flush. */
static void bzc_sq_error(struct bzc_qp *qp)
{
	if (qp->ibqp.qp_type == IB_QPT_RC) {
		bzc_qp_error(qp, 0);
		return;
	}
	spin_lock(&qp->lock);
	if (qp->state == IB_QPS_RTS)
		qp->state = IB_QPS_SQE;
	spin_unlock(&qp->lock);
}

/*
 * Execute (or, in ERR/SQE, flush) the SQ's WQEs that the producer index
 * shows when the run starts, at most `max_wqes` of them (flushed ones
 * included) and, unless `max_bytes` is U64_MAX, no WQE that would take the
 * bytes moved past `max_bytes`. Holds sq_mutex. Returns true when WQEs of
 * that snapshot are left: the caller hands them to the worker.
 *
 * prod is read once: a process that keeps posting while another of its
 * threads rings the doorbell must not keep the kernel in this loop.
 */
static bool bzc_sq_run(struct bzc_qp *qp, u32 max_wqes, u64 max_bytes,
		       bool may_sleep)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	struct bzc_wq_ring_hdr *hdr = qp->sq.kaddr;
	struct bzc_send_wqe *wqe = qp->sq_wqe;
	struct bzc_result res;
	enum ib_qp_state state;
	u32 prod, done = 0;

	/* Pairs with the process's release of prod after its WQEs. */
	prod = le32_to_cpu(smp_load_acquire(&hdr->prod));
	if (prod - qp->sq_cons > qp->sq.entries) {
		ibdev_info_ratelimited(qp->ibqp.device,
				       "QP %u: send queue producer index %u is beyond the ring\n",
				       qp->ibqp.qp_num, prod);
		bzc_qp_error(qp, IB_EVENT_QP_FATAL);
		return false;
	}

	for (; qp->sq_cons != prod; done++) {
		if (done == max_wqes)
			return true;
		if (done && may_sleep)
			cond_resched();
		state = READ_ONCE(qp->state);
		memcpy(wqe, bzc_wq_slot(&qp->sq, qp->sq_cons, qp->sq_wqe_size),
		       qp->sq_wqe_size);

		if (state == IB_QPS_ERR || state == IB_QPS_SQE) {
			bzc_sq_complete(qp, wqe, IB_WC_WR_FLUSH_ERR, 0);
			bzc_sq_advance(qp);
			continue;
		}
		if (state != IB_QPS_RTS)
			return false;	/* held until RTS (SQD, or not yet) */
		if (qp->rnr_waiting && time_before(jiffies, qp->rnr_until)) {
			/* Woken early (a doorbell): keep the RNR timer armed. */
			mod_delayed_work(bzc_wq, &qp->sq_work,
					 qp->rnr_until - jiffies);
			return false;
		}
		if (max_bytes != U64_MAX && bzc_wqe_valid(qp, wqe) &&
		    bzc_wqe_bytes(wqe) > max_bytes)
			return true;

		bzc_exec_wqe(qp, wqe, may_sleep, &res);
		if (res.rnr) {
			if (bzc_rnr_wait(qp, res.rnr_timer))
				return false;
			res.status = IB_WC_RNR_RETRY_EXC_ERR;
		}
		qp->rnr_waiting = false;
		if (res.status == IB_WC_SUCCESS) {
			bzc_count(bdev, BZC_CNT_SENT_WQES, 1);
			bzc_count(bdev, BZC_CNT_SENT_BYTES, res.byte_len);
		} else {
			bzc_count(bdev, BZC_CNT_SEND_ERRORS, 1);
		}
		bzc_sq_advance(qp);
		if (res.status != IB_WC_SUCCESS ||
		    (wqe->flags & BZC_WQE_SIGNALED) || qp->sig_all)
			bzc_sq_complete(qp, wqe, res.status, res.byte_len);
		if (res.status != IB_WC_SUCCESS)
			bzc_sq_error(qp);
		if (max_bytes != U64_MAX)
			max_bytes -= min(max_bytes, res.byte_len);
	}
	return false;
}

/* The doorbell: run a few short WQEs right here, hand the rest to the worker. */
void bzc_sq_kick(struct bzc_qp *qp)
{
	bool more;

	bzc_count(to_bdev(qp->ibqp.device), BZC_CNT_DOORBELLS, 1);
	if (!mutex_trylock(&qp->sq_mutex)) {
		/* The holder may be past its look at prod: requeue. */
		queue_delayed_work(bzc_wq, &qp->sq_work, 0);
		return;
	}
	more = bzc_sq_run(qp, BZC_DOORBELL_WQES, BZC_DOORBELL_BYTES, false);
	mutex_unlock(&qp->sq_mutex);
	if (more)
		queue_delayed_work(bzc_wq, &qp->sq_work, 0);
}

/*
 * The worker: one bounded pass, then it queues itself again if WQEs are
 * left, so a busy QP shares the workqueue and the CPU with the others.
 */
void bzc_sq_work(struct work_struct *work)
{
	struct bzc_qp *qp = container_of(to_delayed_work(work), struct bzc_qp,
					 sq_work);
	bool more;

	mutex_lock(&qp->sq_mutex);
	more = bzc_sq_run(qp, BZC_WORKER_WQES, U64_MAX, true);
	mutex_unlock(&qp->sq_mutex);
	if (more)
		queue_delayed_work(bzc_wq, &qp->sq_work, 0);
}

/* Scratch space a QP's executor needs; allocated with the QP. */
int bzc_qp_alloc_scratch(struct bzc_qp *qp, gfp_t gfp)
{
	qp->local_sgl = kzalloc(sizeof(struct bzc_sgl), gfp);
	qp->peer_sgl = kzalloc(sizeof(struct bzc_sgl), gfp);
	qp->peer_rqe = kzalloc(BZC_PEER_RQE_BYTES, gfp);
	if (qp->local_sgl && qp->peer_sgl && qp->peer_rqe)
		return 0;
	bzc_qp_free_scratch(qp);
	return -ENOMEM;
}

void bzc_qp_free_scratch(struct bzc_qp *qp)
{
	kfree(qp->local_sgl);
	kfree(qp->peer_sgl);
	kfree(qp->peer_rqe);
	qp->local_sgl = NULL;
	qp->peer_sgl = NULL;
	qp->peer_rqe = NULL;
}
