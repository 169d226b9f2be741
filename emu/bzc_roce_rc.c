// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: RC and UC on the wire (docs/transport.md, "Reliability"): PSNs,
 * the requester's wait for the answer with retransmission, the completer's
 * side of ACKs, NAKs, READ responses and atomic ACKs, and the responder's
 * per-packet placement with its expected PSN, duplicates and NAKs.
 *
 * The requester keeps a send window (docs/transport.md, section 10): the
 * QP's worker sends WQEs' messages while the window has room (at most
 * BZC_WIRE_WINDOW PSNs past the oldest unacknowledged one, max_rd_atomic
 * READs and atomics, fences) and returns without waiting. The receive
 * worker marks messages answered as ACKs (one may cover several), NAKs,
 * READ responses and atomic ACKs come, and kicks the worker, which
 * retires them oldest first, so CQEs keep WQE order. Packets go in PSN
 * order from snd_nxt (bzc_wire_tx()) while few enough of the QP's wait in
 * the local qdisc and NIC ring, owned by a socket of the QP's whose
 * sk_write_space() kicks the worker as they drain. A retransmit timer
 * follows the oldest unacknowledged PSN; on its expiry or a PSN sequence
 * NAK the worker goes back N from there, at most retry_cnt times without
 * progress; an RNR NAK goes back after the responder's timer. A bulk
 * request's message (no WQE) waits in place for its answer, alone in the
 * window.
 *
 * The responder places each packet as it comes, with the checks of
 * bzc_resp.c: the peer, the R_Key over the packet's range (and the whole
 * message's on its first packet), the receive WQE's SGEs. It holds no MR
 * reference between packets, so a peer that never finishes a message
 * cannot keep an MR from being deregistered.
 */
#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/wait.h>
#include <net/sock.h>
#include <rdma/ib_addr.h>

#include "bzc_xport.h"

/*
 * A local ACK timeout shorter than this is taken as this (IBA allows more):
 * a software peer under load answers a long message late.
 */
#define BZC_MIN_ACK_TIMEOUT	msecs_to_jiffies(200)
/*
 * The RC send window: at most this many PSNs from the oldest one not
 * acknowledged to the last one sent: two 1 MiB messages at path MTU 4096,
 * so the next starts while the last one's ACKs come back. One message
 * always goes, whatever its length.
 */
#define BZC_WIRE_WINDOW		512
/* An RC request asks for an ACK at least every this many packets. */
#define BZC_WIRE_ACK_EVERY	32
/*
 * A READ whose sink (an ODP MR) lost pages faults in this much ahead, and
 * gives up when the process takes them away again this many times in a
 * row without a byte placed in between.
 */
#define BZC_WIRE_SINK_FAULT	SZ_64M
#define BZC_WIRE_SINK_FAULTS	8
/*
 * Bytes (skb truesize) of a QP's packets that may wait in the local qdisc
 * and the NIC's ring before bzc_wire_tx() holds the rest of the window
 * back; it goes on when they have drained to half of it. A window of 512
 * packets handed down at once overflows the NIC's ring into the qdisc,
 * and fq_codel (Debian's default) drops from a queue whose packets wait
 * longer than 5 ms, after it accepted them: the requester learns of it
 * from a PSN sequence NAK and goes back over the whole window. 512 KiB is
 * about 60 packets of 4 KiB: less than a virtio-net ring of 256 holds, and
 * 0.4 ms at 10 Gb/s. The worker that sends more must be scheduled while
 * the other half drains: 128 KiB cost a quarter of bzc<->bzc ib_write_bw
 * in TCG guests, where a kworker's wake-up takes milliseconds.
 */
#define BZC_WIRE_TXQ_BYTES	SZ_512K
/* tx_flags: the window waits for the local queue to drain. */
#define BZC_WIRE_TX_WAIT	0
/* Times a packet the local queue refused is offered again. */
#define BZC_WIRE_XMIT_TRIES	20
/*
 * PSN sequence NAKs the window may get while its oldest unacknowledged
 * PSN does not move, before the oldest message fails (a round that moves
 * it starts the count again, as for timeouts).
 */
#define BZC_WIRE_SEQ_NAKS	64
/* timeout 0: no timer (IBA; bzc_wire_arm() arms none); a nominal value. */
#define BZC_NO_TIMER_POLL	(HZ)

/**
 * bzc_qp_pmtu() - a QP's path MTU in bytes
 * @qp: the QP (its path_mtu is always one of 256 to 4096 once set)
 *
 * Return: the bytes; 256 if it was never set.
 */
u32 bzc_qp_pmtu(struct bzc_qp *qp)
{
	return ib_mtu_enum_to_int(READ_ONCE(qp->path_mtu)) ?: 256;
}

static void bzc_wire_timer(struct timer_list *t);

/*
 * The QP's packets leave the local queues (sock_wfree() calls this after
 * each, the packet's bytes already uncharged): a window bzc_wire_tx() held
 * back goes on once they have drained to half of BZC_WIRE_TXQ_BYTES. Runs
 * in softirq or process context; sk_user_data is cleared, under
 * sk_callback_lock, before the QP's worker is cancelled.
 */
static void bzc_wire_write_space(struct sock *sk)
{
	struct bzc_qp *qp;

	if (refcount_read(&sk->sk_wmem_alloc) > BZC_WIRE_TXQ_BYTES / 2)
		return;
	read_lock(&sk->sk_callback_lock);
	qp = sk->sk_user_data;
	if (qp && test_and_clear_bit(BZC_WIRE_TX_WAIT, &qp->wire->tx_flags)) {
		WRITE_ONCE(qp->wire->event, true);
		bzc_sq_queue(qp);
		wake_up(&qp->wire->wait);
	}
	read_unlock(&sk->sk_callback_lock);
}

/*
 * The socket that owns the QP's packets below bzc (skb_set_owner_w()), in
 * the namespace of the device's netdev. It is never bound and sends
 * nothing itself: its sk_wmem_alloc counts the QP's bytes in the local
 * queues, and its sk_write_space() tells when they drain.
 */
static int bzc_wire_sock_create(struct bzc_qp *qp)
{
	struct bzc_wire *w = qp->wire;
	struct sock *sk;
	int err;

	err = sock_create_kern(dev_net(to_bdev(qp->ibqp.device)->ndev),
			       AF_INET, SOCK_DGRAM, IPPROTO_UDP, &w->txsock);
	if (err)
		return err;
	sk = w->txsock->sk;
	write_lock_bh(&sk->sk_callback_lock);
	w->old_write_space = sk->sk_write_space;
	sk->sk_user_data = qp;
	sk->sk_write_space = bzc_wire_write_space;
	write_unlock_bh(&sk->sk_callback_lock);
	return 0;
}

/*
 * The QP goes: its packets still queued below (a netem delay may hold them
 * for long) no longer reach it, and no longer call into this module.
 */
static void bzc_wire_sock_detach(struct bzc_wire *w)
{
	struct sock *sk;

	if (!w->txsock)
		return;
	sk = w->txsock->sk;
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_write_space = w->old_write_space;
	write_unlock_bh(&sk->sk_callback_lock);
}

/**
 * bzc_wire_alloc() - the wire state of an RC or UC QP
 * @qp: the QP
 * @gfp: allocation flags
 *
 * Return: 0 or -ENOMEM.
 */
int bzc_wire_alloc(struct bzc_qp *qp, gfp_t gfp)
{
	struct bzc_wire *w;

	w = kzalloc(sizeof(*w), gfp);
	if (!w)
		return -ENOMEM;
	w->rqe = kzalloc(BZC_RESP_RQE_BYTES, gfp);
	w->sgl = kzalloc(sizeof(*w->sgl), gfp);
	if (!w->rqe || !w->sgl || dst_cache_init(&w->route.cache, gfp)) {
		dst_cache_destroy(&w->route.cache);
		kfree(w->rqe);
		kfree(w->sgl);
		kfree(w);
		return -ENOMEM;
	}
	spin_lock_init(&w->lock);
	init_waitqueue_head(&w->wait);
	INIT_LIST_HEAD(&w->out);
	timer_setup(&w->timer, bzc_wire_timer, 0);
	w->qp = qp;
	w->gen = U32_MAX;
	qp->wire = w;
	/* Only the RC send window is held back (UC has nothing to resend). */
	if (qp->ibqp.qp_type == IB_QPT_RC && bzc_wire_sock_create(qp)) {
		bzc_wire_free(qp);
		return -ENOMEM;
	}
	return 0;
}

void bzc_wire_free(struct bzc_qp *qp)
{
	if (!qp->wire)
		return;
	bzc_wire_stop(qp);
	bzc_wire_reset(qp);
	if (qp->wire->txsock)
		sock_release(qp->wire->txsock);
	dst_cache_destroy(&qp->wire->route.cache);
	kfree(qp->wire->rqe);
	kfree(qp->wire->sgl);
	kfree(qp->wire);
	qp->wire = NULL;
}

/*
 * Requester
 */

/*
 * An RC message in the send window: what it needs to be sent again and
 * completed, and what its answers did so far. Allocated when it is sent,
 * freed when it is retired, oldest first.
 */
struct bzc_wire_msg {
	struct list_head link;
	struct bzc_msg msg;		/* local: &sgl, or the bulk caller's */
	struct bzc_roce_msg m;		/* the request from its first PSN */
	struct bzc_av av;
	u32 first, last;		/* its PSNs (READ: of the responses) */
	bool rd;			/* READ or atomic: its response ends it */
	bool done;			/* answered (or failed): retire it */
	bool local_lost;		/* its own ODP page is gone */
	bool no_answer;			/* retries used up */
	u8 syndrome;			/* the answer: ACK or a NAK */
	u64 orig;			/* atomic: the value before */
	u32 expect;			/* READ: the next response PSN */
	struct bzc_cursor sink;		/* READ: into its SGEs */
	u64 sunk;			/* READ: bytes placed */
	bool sink_lost;			/* READ: the sink lost an ODP page */
	u64 placed_at_fault;
	u32 sink_faults;
	struct bzc_sgl sgl;		/* a WQE's SGEs, held until retired */
	u8 wqe[];			/* a WQE's copy, sq_wqe_size bytes */
};

static unsigned long bzc_ack_timeout(u8 timeout)
{
	u64 usecs;

	if (!timeout)
		return BZC_NO_TIMER_POLL;
	usecs = (4096ULL << min_t(u8, timeout, 31)) / 1000;
	return max(usecs_to_jiffies(min_t(u64, usecs, U32_MAX)),
		   BZC_MIN_ACK_TIMEOUT);
}

/* The requester's message as the codec sees it. */
static void bzc_wire_req_msg(struct bzc_qp *qp, const struct bzc_msg *msg,
			     struct bzc_roce_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->transport = msg->type == IB_QPT_RC ? BZC_TRANSPORT_RC :
						BZC_TRANSPORT_UC;
	m->wr_opcode = msg->opcode;
	m->se = msg->flags & BZC_WQE_SOLICITED;
	m->pkey = BZC_DEFAULT_PKEY;
	m->dqpn = msg->dqpn;
	m->psn = qp->tx_psn;
	m->va = msg->remote_addr;
	m->rkey = msg->rkey;
	m->imm = cpu_to_be32(le32_to_cpu(msg->imm_data));
	m->inv_rkey = le32_to_cpu(msg->imm_data);
	switch (msg->opcode) {
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
		m->compare = msg->compare_add;
		m->swap_add = msg->swap;
		break;
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		m->swap_add = msg->compare_add;
		break;
	default:
		m->len = msg->local->total;
		break;
	}
}

/*
 * Send one packet, its payload (if any) from `sc`, advanced past it. A
 * packet the local queue refused (a full qdisc or NIC ring) is offered
 * again a few times where the caller may sleep; a payload page that is
 * gone (-EFAULT) is not. Returns 0 or the errno.
 */
static int bzc_wire_xmit(struct bzc_dev *bdev, const struct bzc_roce_dest *d,
			 const struct bzc_roce_hdrs *h, struct bzc_cursor *sc,
			 bool may_sleep)
{
	u32 again;
	int err;

	for (again = 0;; again++) {
		struct bzc_cursor at = *sc;

		err = bzc_roce_xmit(bdev, d, h, h->paylen ? &at : NULL,
				    may_sleep ? GFP_KERNEL : GFP_ATOMIC);
		if (!err) {
			*sc = at;
			return 0;
		}
		bzc_count(bdev, BZC_CNT_TX_ERRORS, 1);
		if (!may_sleep || again == BZC_WIRE_XMIT_TRIES ||
		    err == -EFAULT)
			return err;
		usleep_range(200, 1000);
	}
}

/*
 * May the send window put another packet on the wire, or do too many of
 * the QP's packets wait in the local queues (BZC_WIRE_TXQ_BYTES)? Then
 * bzc_wire_write_space() kicks the requester when they have drained.
 */
static bool bzc_wire_txq_room(struct bzc_wire *w)
{
	struct sock *sk = w->txsock->sk;

	if (refcount_read(&sk->sk_wmem_alloc) < BZC_WIRE_TXQ_BYTES)
		return true;
	set_bit(BZC_WIRE_TX_WAIT, &w->tx_flags);
	/*
	 * The flag before the second look, as bzc_wire_write_space() uncharges
	 * before it tests the flag: one of the two sees the other. It may
	 * have drained before the flag was seen: look again.
	 */
	smp_mb__after_atomic();
	if (refcount_read(&sk->sk_wmem_alloc) > BZC_WIRE_TXQ_BYTES / 2)
		return false;
	clear_bit(BZC_WIRE_TX_WAIT, &w->tx_flags);
	return true;
}

/*
 * Send packets `from` to the end of a request message. With `sent` (the
 * RC send window), stop with -EAGAIN when the local queue holds enough of
 * the QP's packets, and count the packets sent there. Returns 0, -EAGAIN,
 * or the errno of the first packet that could not go (bzc_wire_xmit()).
 */
static int bzc_wire_req_xmit(struct bzc_qp *qp, const struct bzc_msg *msg,
			     const struct bzc_roce_msg *m, u32 pmtu, u32 from,
			     const struct bzc_roce_dest *d, bool may_sleep,
			     u32 *sent)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	struct bzc_cursor sc = { .sgl = msg->local };
	struct bzc_roce_hdrs h;
	u32 i, n;
	int err;

	/* A READ request is one packet, without payload, whatever its length. */
	n = bzc_roce_msg_npkts(m, pmtu);
	if (from >= n)
		from = 0;
	if (from && msg->opcode != IB_UVERBS_WR_RDMA_READ)
		bzc_cursor_skip(&sc, (u64)from * pmtu);
	for (i = from; i < n; i++) {
		if (sent && !bzc_wire_txq_room(qp->wire))
			return -EAGAIN;
		err = bzc_roce_msg_hdrs(m, pmtu, i, &h);
		if (err)
			return err;
		/* Ask for an ACK now and then too: progress restarts the timer. */
		if (m->transport == BZC_TRANSPORT_RC &&
		    !((i + 1) % BZC_WIRE_ACK_EVERY))
			h.ackreq = true;
		err = bzc_wire_xmit(bdev, d, &h, &sc, may_sleep);
		if (err)
			return err;
		if (sent)
			(*sent)++;
		if (may_sleep)
			cond_resched();
	}
	return 0;
}

/* Is the QP still one the requester should wait for? */
static bool bzc_wire_req_live(struct bzc_qp *qp)
{
	return READ_ONCE(qp->state) == IB_QPS_RTS &&
	       refcount_read(&qp->refcnt);
}

/*
 * The retransmit timer: a timer_list of the QP's own, not a delay of the
 * QP's worker (sq_work). The worker does not wait for answers any more:
 * it sends while the window has room and returns, and answers kick it
 * (queue_delayed_work(), delay 0); a delay on that same work item would
 * either be cut short by every kick or hold back a doorbell's work
 * behind it, and the RNR wait already uses it. The timer only flags the
 * expiry and kicks; the worker decides under sq_mutex whether it is one
 * (an ACK may have pushed the deadline since), so nothing here sleeps or
 * takes a lock in softirq.
 */
static void bzc_wire_timer(struct timer_list *t)
{
	struct bzc_wire *w = from_timer(w, t, timer);

	WRITE_ONCE(w->expired, true);
	bzc_sq_queue(w->qp);
	wake_up(&w->wait);
}

/* Arm the timer for the oldest unacknowledged PSN; under w->lock. */
static void bzc_wire_arm(struct bzc_qp *qp)
{
	struct bzc_wire *w = qp->wire;
	u8 timeout = READ_ONCE(qp->timeout);

	/* timeout 0: no timer (IBA), the message waits for its answer. */
	if (w->dead || !timeout || w->rnr_pending)
		return;
	w->deadline = jiffies + bzc_ack_timeout(timeout);
	mod_timer(&w->timer, w->deadline);
}

/* The message in flight that PSN `psn` belongs to; under w->lock. */
static struct bzc_wire_msg *bzc_wire_find(struct bzc_wire *w, u32 psn)
{
	struct bzc_wire_msg *e;

	list_for_each_entry(e, &w->out, link)
		if (bzc_psn_diff(psn, e->first) >= 0 &&
		    bzc_psn_diff(e->last, psn) >= 0)
			return e;
	return NULL;
}

/*
 * An ACK (or an implied one) of every PSN up to `psn`: the SENDs and
 * WRITEs it covers are answered, READs and atomics wait for their own
 * responses (IBA 9.7.5.1.1: one ACK may acknowledge several messages).
 * Under w->lock.
 */
static void bzc_wire_ack_upto(struct bzc_wire *w, u32 psn)
{
	struct bzc_wire_msg *e;

	list_for_each_entry(e, &w->out, link) {
		if (bzc_psn_diff(psn, e->first) < 0)
			break;
		if (!e->done && !e->rd && bzc_psn_diff(psn, e->last) >= 0)
			e->done = true;
	}
	if (bzc_psn_diff(psn, w->acked) > 0)
		w->acked = psn;
}

/* The message sent last; the window is not empty. */
static struct bzc_wire_msg *bzc_wire_newest(struct bzc_wire *w)
{
	return list_last_entry(&w->out, struct bzc_wire_msg, link);
}

/* The oldest PSN no answer covers yet; under w->lock. */
static u32 bzc_wire_una(struct bzc_wire *w)
{
	struct bzc_wire_msg *e;

	list_for_each_entry(e, &w->out, link) {
		if (e->done)
			continue;
		if (e->msg.opcode == IB_UVERBS_WR_RDMA_READ)
			return e->expect;
		if (!e->rd && bzc_psn_diff(w->acked, e->first) >= 0)
			return bzc_psn_add(w->acked, 1);
		return e->first;
	}
	return bzc_psn_add(bzc_wire_newest(w)->last, 1);
}

/*
 * After answers changed the window (under w->lock): the timer follows the
 * oldest unacknowledged PSN, and the requester is kicked when the oldest
 * message can be retired or something needs it.
 */
static void bzc_wire_moved(struct bzc_qp *qp, bool event)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_wire_msg *head;
	u32 una;

	if (list_empty(&w->out))
		return;
	una = bzc_wire_una(w);
	if (una != w->una) {
		w->una = una;
		bzc_wire_arm(qp);
		/* A WQE waits for room in the window: there may be some now. */
		if (w->room_wait)
			event = true;
	}
	head = list_first_entry(&w->out, struct bzc_wire_msg, link);
	if (!event && !head->done)
		return;
	w->room_wait = false;
	w->event = true;
	bzc_sq_queue(qp);
	wake_up(&w->wait);
}

/*
 * Go back N: send again, from PSN `psn`, every message of the window not
 * answered yet (bzc_wire_tx()). Under sq_mutex, where it may sleep.
 */
static void bzc_wire_resend(struct bzc_qp *qp, u32 psn)
{
	struct bzc_wire *w = qp->wire;

	bzc_count(to_bdev(qp->ibqp.device), BZC_CNT_RETRANSMITS, 1);
	if (bzc_psn_diff(psn, w->snd_nxt) < 0)
		w->snd_nxt = psn;
	bzc_wire_tx(qp, true);
}

/* Fail the oldest message not answered: its retries are used up. */
static void bzc_wire_give_up(struct bzc_wire *w)
{
	struct bzc_wire_msg *e;

	list_for_each_entry(e, &w->out, link) {
		if (!e->done) {
			e->done = true;
			e->no_answer = true;
			w->blocked = true;
			return;
		}
	}
}

/*
 * A bulk message that did not wait for its answer leaves the window: the
 * first failure is the bulk request's status, and breaks the connection
 * as a failed WQE does (IB_WC_WR_FLUSH_ERR, a flush, is kept only if
 * nothing failed before it). No RNR NAK is expected (a plain WRITE takes
 * no receive): one fails it.
 */
static void bzc_wire_retire_nowait(struct bzc_qp *qp, struct bzc_wire_msg *e,
				   bool flush,
				   const struct bzc_resp_result *rr)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_result res = { .status = IB_WC_SUCCESS };

	if (flush)
		res.status = IB_WC_WR_FLUSH_ERR;
	else
		bzc_comp_answer(&e->msg, rr, true, &res);
	if (res.rnr)
		res.status = IB_WC_RNR_RETRY_EXC_ERR;
	if (res.status != IB_WC_SUCCESS && w->bulk_status == IB_WC_SUCCESS)
		w->bulk_status = res.status;
	/* A flush: the QP is in ERR already, or being destroyed. */
	if (res.status != IB_WC_SUCCESS && !flush)
		bzc_qp_error(qp, 0);
	bzc_sgl_put(&e->sgl);
	kfree(e);
	wake_up(&w->wait);
}

/* A message leaves the window: its WQE's completion, or a bulk answer. */
static void bzc_wire_retire(struct bzc_qp *qp, struct bzc_wire_msg *e,
			    bool flush)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_resp_result rr = {
		.syndrome = e->syndrome,
		.atomic_orig = e->orig,
		.local_lost = e->local_lost,
	};
	struct bzc_result res = {
		.status = IB_WC_SUCCESS,
		.byte_len = e->msg.local->total,
	};
	struct bzc_wq_ring_hdr *hdr = qp->sq.kaddr;
	bool answered = !e->no_answer && !flush;

	spin_lock(&w->lock);
	list_del(&e->link);
	w->n_out--;
	if (e->rd)
		w->n_rd--;
	if (e->msg.wqe)
		w->n_wqes--;
	if (!w->n_out) {
		del_timer(&w->timer);
		w->blocked = false;
		w->nak_pending = false;
		w->rnr_pending = false;
	}
	spin_unlock(&w->lock);
	if (!flush && !e->no_answer &&
	    (e->syndrome & BZC_AETH_TYPE_MASK) == BZC_AETH_ACK)
		w->rnr_counting = false;

	if (e->msg.nowait) {
		bzc_wire_retire_nowait(qp, e, flush, answered ? &rr : NULL);
		return;
	}
	if (!e->msg.wqe) {
		/* A bulk message: its caller completes it (bzc_wire_sync()). */
		w->sync_done = true;
		w->sync_answered = answered;
		w->sync_rr = rr;
		/* An RNR NAK sends the same PSNs again, later. */
		if (answered &&
		    (e->syndrome & BZC_AETH_TYPE_MASK) == BZC_AETH_RNR_NAK)
			qp->tx_psn = e->first;
		kfree(e);
		return;
	}
	/* The slot was the window's since it was sent: the process's now. */
	smp_store_release(&hdr->cons,
			  cpu_to_le32(qp->sq_cons - READ_ONCE(w->n_wqes)));
	if (flush)
		res.status = IB_WC_WR_FLUSH_ERR;
	else
		bzc_comp_answer(&e->msg, answered ? &rr : NULL, true, &res);
	bzc_comp_retired(qp, (const struct bzc_send_wqe *)e->wqe, &res);
	bzc_sgl_put(&e->sgl);
	kfree(e);
}

/*
 * A READ response found a page of the sink's ODP MR gone: fault in what
 * is left (up to BZC_WIRE_SINK_FAULT bytes, so a fork's copy-on-write
 * costs one round, not one per page) and ask again from there; no retry
 * spent. A page that cannot come back (unmapped) fails the WQE locally.
 */
static void bzc_wire_sink_refault(struct bzc_qp *qp, struct bzc_wire_msg *e)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_cursor at;
	u64 placed, ahead;
	bool lost;

	spin_lock(&w->lock);
	at = e->sink;
	placed = e->sunk;
	e->sink_lost = false;
	spin_unlock(&w->lock);
	ahead = min_t(u64, e->msg.local->total - placed, BZC_WIRE_SINK_FAULT);
	if (placed != e->placed_at_fault)
		e->sink_faults = BZC_WIRE_SINK_FAULTS;
	e->placed_at_fault = placed;
	lost = !--e->sink_faults || bzc_sgl_fault(&at, ahead, true);
	spin_lock(&w->lock);
	if (lost) {
		e->local_lost = true;
		e->done = true;
		w->blocked = true;
	}
	spin_unlock(&w->lock);
	if (!lost)
		bzc_wire_resend(qp, e->expect);
}

/*
 * A PSN sequence NAK (go back N now) or an RNR NAK (go back after the
 * responder's timer, at most rnr_retry times in a row). Under sq_mutex.
 */
static void bzc_wire_nak(struct bzc_qp *qp, u8 syndrome, u32 psn)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_wire_msg *e;
	unsigned long delay;
	u8 rnr_retry = READ_ONCE(qp->rnr_retry);
	bool again = false;

	spin_lock(&w->lock);
	e = bzc_wire_find(w, psn);
	if (!e || e->done) {
		spin_unlock(&w->lock);
		return;
	}
	if (w->una != w->una_seen) {
		w->una_seen = w->una;
		w->tries = READ_ONCE(qp->retry_cnt) + 1;
		w->naks = BZC_WIRE_SEQ_NAKS;
	}
	if ((syndrome & BZC_AETH_TYPE_MASK) != BZC_AETH_RNR_NAK) {
		/*
		 * A NAK is no timeout (IBA 9.7.5.1.5) but is bounded all the
		 * same: a peer that keeps NAKing cannot hold the QP forever.
		 */
		if (!--w->naks)
			bzc_wire_give_up(w);
		else
			again = true;
		psn = w->una;
		spin_unlock(&w->lock);
		if (again)
			bzc_wire_resend(qp, psn);
		return;
	}
	bzc_count(to_bdev(qp->ibqp.device), BZC_CNT_RNR_NAKS, 1);
	/* A bulk message retries an RNR NAK itself (bzc_bulk_qp_msg()). */
	if (!e->msg.wqe) {
		e->done = true;
		e->syndrome = syndrome;
		spin_unlock(&w->lock);
		return;
	}
	if (!w->rnr_counting) {
		w->rnr_counting = true;
		w->rnr_left = rnr_retry;
	}
	if (rnr_retry != 7 && !w->rnr_left) {	/* 7: retry forever */
		e->done = true;
		e->syndrome = syndrome;
		w->blocked = true;
		w->rnr_counting = false;
		spin_unlock(&w->lock);
		return;
	}
	if (rnr_retry != 7)
		w->rnr_left--;
	delay = usecs_to_jiffies(bzc_rnr_timer_usecs(syndrome &
						     BZC_AETH_VALUE_MASK));
	w->rnr_pending = true;
	w->rnr_psn = psn;
	w->rnr_until = jiffies + delay;
	/* The RNR wait is no timeout: the timer starts again after it. */
	del_timer(&w->timer);
	spin_unlock(&w->lock);
	bzc_sq_queue_in(qp, delay);
}

/**
 * bzc_wire_reap() - the requester's side of the send window's answers
 * @qp: an RC or UC QP, its sq_mutex held, in a context that may sleep
 *
 * Retires the answered messages oldest first (their CQEs in WQE order),
 * flushes the window when the QP is in ERR, and acts on what the answers
 * and the timer said: a PSN sequence NAK or a timeout goes back N from
 * the oldest unacknowledged PSN, an RNR NAK after the responder's timer,
 * a READ whose sink lost an ODP page faults it in and asks again; a NAK
 * that fails a message, or retries used up, fail it when it is the
 * oldest, and the QP goes to ERR (bzc_comp_retired()).
 *
 * Return: false when the SQ must not send now (an RNR wait: the worker is
 * scheduled for its end).
 */
bool bzc_wire_reap(struct bzc_qp *qp)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_wire_msg *e, *lost;
	bool flush, expired = false, nak;
	u8 syndrome;
	u32 psn;

	if (!w)
		return true;
	for (;;) {
		if (list_empty(&w->out))
			return true;
		flush = READ_ONCE(qp->state) == IB_QPS_ERR ||
			!refcount_read(&qp->refcnt);
		e = list_first_entry(&w->out, struct bzc_wire_msg, link);
		spin_lock(&w->lock);
		w->event = false;
		if (flush || e->done) {
			spin_unlock(&w->lock);
			bzc_wire_retire(qp, e, flush);
			continue;
		}
		/* A READ's sink lost a page (any READ's: they go in order). */
		lost = NULL;
		list_for_each_entry(e, &w->out, link) {
			if (e->sink_lost) {
				lost = e;
				break;
			}
		}
		nak = w->nak_pending;
		syndrome = w->nak_syndrome;
		psn = w->nak_psn;
		w->nak_pending = false;
		expired |= READ_ONCE(w->expired);
		WRITE_ONCE(w->expired, false);
		spin_unlock(&w->lock);

		if (lost) {
			bzc_wire_sink_refault(qp, lost);
			continue;
		}
		if (nak) {
			bzc_wire_nak(qp, syndrome, psn);
			continue;
		}
		break;
	}

	spin_lock(&w->lock);
	if (w->rnr_pending) {
		if (time_before(jiffies, w->rnr_until)) {
			spin_unlock(&w->lock);
			bzc_sq_queue_in(qp, w->rnr_until - jiffies);
			return false;
		}
		w->rnr_pending = false;
		psn = w->una;
		bzc_wire_arm(qp);
		spin_unlock(&w->lock);
		bzc_wire_resend(qp, psn);
		return true;
	}
	if (!expired || !READ_ONCE(qp->timeout) ||
	    time_before(jiffies, w->deadline)) {
		spin_unlock(&w->lock);
		return true;
	}
	/*
	 * A timeout. The retry count bounds timeouts without progress: a
	 * round that moved the oldest unacknowledged PSN on (ACKs, READ
	 * responses placed) starts it afresh, as an ACK does on hardware,
	 * so a long message on a slow or lossy path does not fail for its
	 * length, and a peer that went away still fails in retry_cnt + 1
	 * timeouts.
	 */
	if (w->una != w->una_seen) {
		w->una_seen = w->una;
		w->tries = READ_ONCE(qp->retry_cnt) + 1;
		w->naks = BZC_WIRE_SEQ_NAKS;
	}
	if (!--w->tries) {
		bzc_wire_give_up(w);
		spin_unlock(&w->lock);
		return bzc_wire_reap(qp);
	}
	psn = w->una;
	bzc_wire_arm(qp);
	spin_unlock(&w->lock);
	bzc_wire_resend(qp, psn);
	return true;
}

/**
 * bzc_wire_reset() - forget the send window (the QP went to RESET)
 * @qp: the QP, its sq_mutex held
 */
void bzc_wire_reset(struct bzc_qp *qp)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_wire_msg *e, *tmp;

	if (!w)
		return;
	spin_lock(&w->lock);
	del_timer(&w->timer);
	list_for_each_entry_safe(e, tmp, &w->out, link) {
		list_del(&e->link);
		if (e->msg.local == &e->sgl)
			bzc_sgl_put(&e->sgl);
		kfree(e);
	}
	w->n_out = 0;
	w->n_wqes = 0;
	w->n_rd = 0;
	w->blocked = false;
	w->nak_pending = false;
	w->rnr_pending = false;
	w->rnr_counting = false;
	WRITE_ONCE(w->expired, false);
	clear_bit(BZC_WIRE_TX_WAIT, &w->tx_flags);
	spin_unlock(&w->lock);
}

/**
 * bzc_wire_stop() - no retransmit timer any more: the QP is destroyed
 * @qp: the QP, out of the device's table, before its worker is cancelled
 */
void bzc_wire_stop(struct bzc_qp *qp)
{
	struct bzc_wire *w = qp->wire;

	if (!w)
		return;
	spin_lock(&w->lock);
	w->dead = true;
	spin_unlock(&w->lock);
	del_timer_sync(&w->timer);
	bzc_wire_sock_detach(w);
}

/**
 * bzc_wire_windowed() - may a WQE join a non-empty RC send window?
 * @qp: the QP
 * @opcode: the WQE's IB_UVERBS_WR_*
 *
 * Messages do; local operations (they complete at once, and CQEs go in
 * WQE order) and what the wire does not carry wait until it is empty.
 *
 * Return: true if it may.
 */
bool bzc_wire_windowed(struct bzc_qp *qp, u8 opcode)
{
	if (qp->ibqp.qp_type != IB_QPT_RC)
		return false;
	switch (opcode) {
	case IB_UVERBS_WR_SEND:
	case IB_UVERBS_WR_SEND_WITH_IMM:
	case IB_UVERBS_WR_SEND_WITH_INV:
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
	case IB_UVERBS_WR_RDMA_READ:
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return true;
	default:
		return false;
	}
}

/**
 * bzc_wire_tx() - put the send window's packets on the wire
 * @qp: an RC QP, its sq_mutex held
 * @may_sleep: the caller may sleep (packets allocated with GFP_KERNEL, a
 *	       payload's ODP page faulted in)
 *
 * Sends, in PSN order from w->snd_nxt on, the packets of the messages not
 * answered yet, while fewer than BZC_WIRE_TXQ_BYTES of the QP's packets
 * wait in the local queues; the rest goes when they drain
 * (bzc_wire_write_space() kicks the worker). A READ asks for what it has
 * not received: the responder answers a READ request at any PSN of the
 * first one, for the VA and length it names (IBA's rules for duplicate
 * READ requests). A message whose own ODP page is gone fails locally
 * (when it is the oldest): what the responder has of it never completes,
 * and nothing after it is sent. A packet the local queue refused waits
 * for the next call or the retransmit timer.
 */
void bzc_wire_tx(struct bzc_qp *qp, bool may_sleep)
{
	struct bzc_wire *w = qp->wire;
	enum ib_qp_state state = READ_ONCE(qp->state);
	u32 pmtu = bzc_qp_pmtu(qp);
	struct bzc_wire_msg *e;
	struct bzc_roce_dest d;
	struct bzc_roce_msg req;
	bool got = false, done, read;
	u32 from, sent;
	int err;

	/* An RNR wait holds the window until the responder's timer ends. */
	if (!w || !w->n_out || READ_ONCE(w->rnr_pending) ||
	    (state != IB_QPS_RTS && state != IB_QPS_SQD))
		return;
	/* ODP pages are faulted in only where that may sleep: the worker. */
	if (!may_sleep && bzc_odp_active()) {
		bzc_sq_queue(qp);
		return;
	}
	/*
	 * From the message snd_nxt falls in, found from the newest: after a
	 * post that is the new message, so a full window of short messages
	 * is not walked from its oldest on every post.
	 */
	list_for_each_entry_reverse(e, &w->out, link)
		if (bzc_psn_diff(w->snd_nxt, e->first) >= 0)
			break;
	if (list_entry_is_head(e, &w->out, link))
		e = list_first_entry(&w->out, struct bzc_wire_msg, link);
	list_for_each_entry_from(e, &w->out, link) {
		if (bzc_psn_diff(e->last, w->snd_nxt) < 0)
			continue;
		read = e->msg.opcode == IB_UVERBS_WR_RDMA_READ;
		spin_lock(&w->lock);
		done = e->done;
		req = e->m;
		if (read) {
			req.psn = e->expect;
			req.va += e->sunk;
			req.len -= e->sunk;
		}
		spin_unlock(&w->lock);
		if (done) {
			if (e->local_lost)
				break;
			w->snd_nxt = bzc_psn_add(e->last, 1);
			continue;
		}
		if (!got) {
			if (bzc_roce_dest_for_msg(qp, &e->msg, &d))
				return;	/* no route now: the timer tries again */
			d.owner = w->txsock->sk;
			got = true;
		}
		from = read ? 0 : max(bzc_psn_diff(w->snd_nxt, e->first), 0);
		sent = 0;
		err = bzc_wire_req_xmit(qp, &e->msg, &req, pmtu, from, &d,
					may_sleep, &sent);
		if (read)
			w->snd_nxt = sent ? bzc_psn_add(e->last, 1) : e->first;
		else
			w->snd_nxt = bzc_psn_add(e->first, from + sent);
		if (err == -EFAULT) {
			spin_lock(&w->lock);
			e->local_lost = true;
			e->done = true;
			w->blocked = true;
			bzc_wire_moved(qp, true);
			spin_unlock(&w->lock);
		}
		if (err)
			break;
	}
	if (got)
		bzc_roce_dest_put(&d);
}

/*
 * Put an RC message in the send window and send it. A WQE's message takes
 * a copy of the WQE and the caller's SGL (left empty), as does a bulk
 * message sent with nowait; another bulk message's SGL stays its
 * caller's, who waits for the answer. Returns false (and
 * sets res->wait) when the window has no room, a fence holds it or the
 * window holds a message that failed; res->defer when there is no memory
 * now.
 */
static bool bzc_wire_post(struct bzc_qp *qp, const struct bzc_msg *msg,
			  u32 pmtu, bool may_sleep,
			  struct bzc_resp_result *res)
{
	struct bzc_wire *w = qp->wire;
	bool rd = msg->opcode == IB_UVERBS_WR_RDMA_READ ||
		  msg->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
		  msg->opcode == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
	u32 wqe_size = msg->wqe ? qp->sq_wqe_size : 0;
	struct bzc_wire_msg *e;
	struct bzc_roce_msg resp;
	u32 npkts;

	e = kmalloc(struct_size(e, wqe, wqe_size),
		    may_sleep ? GFP_KERNEL : GFP_ATOMIC);
	if (!e) {
		res->defer = true;
		return false;
	}
	memset(e, 0, sizeof(*e));
	bzc_wire_req_msg(qp, msg, &e->m);
	if (msg->opcode == IB_UVERBS_WR_RDMA_READ) {
		resp = e->m;
		resp.response = true;
		npkts = bzc_roce_msg_npkts(&resp, pmtu);
	} else {
		npkts = bzc_roce_msg_npkts(&e->m, pmtu);
	}
	spin_lock(&w->lock);
	/*
	 * Room: at most BZC_WIRE_WINDOW PSNs from the oldest unacknowledged
	 * one (one message always goes, however long), at most max_rd_atomic
	 * READs and atomics, nothing past a fenced WQE until the READs and
	 * atomics before it are answered, nothing after a failed message or
	 * during an RNR wait (the responder waits for the PSN it NAKed).
	 */
	if (w->n_out &&
	    (w->blocked || w->rnr_pending ||
	     bzc_psn_diff(bzc_psn_add(qp->tx_psn, npkts), w->una) >
	     BZC_WIRE_WINDOW ||
	     (rd && w->n_rd >= max_t(u8, READ_ONCE(qp->max_rd_atomic), 1)) ||
	     (msg->wqe && (msg->wqe->flags & BZC_WQE_FENCE) && w->n_rd))) {
		w->room_wait = true;
		spin_unlock(&w->lock);
		kfree(e);
		res->wait = true;
		return false;
	}
	spin_unlock(&w->lock);

	e->msg = *msg;
	e->av = *msg->av;
	e->msg.av = &e->av;
	e->first = qp->tx_psn;
	e->last = bzc_psn_add(e->first, npkts - 1);
	e->rd = rd;
	e->syndrome = BZC_AETH_ACK;
	e->expect = e->first;
	if (msg->wqe || msg->nowait) {
		/* The SGL's references are the window's now. */
		e->sgl = *msg->local;
		bzc_sgl_init(msg->local);
		e->msg.local = &e->sgl;
	}
	if (msg->wqe) {
		memcpy(e->wqe, msg->wqe, wqe_size);
		e->msg.wqe = (const struct bzc_send_wqe *)e->wqe;
		/* Inline data: in the WQE's copy. */
		if (!e->sgl.n && e->sgl.kbuf)
			e->sgl.kbuf = e->wqe + BZC_SEND_WQE_DATA_OFFSET;
	}
	e->sink.sgl = e->msg.local;
	e->sink_faults = BZC_WIRE_SINK_FAULTS;
	qp->tx_psn = bzc_psn_add(e->last, 1);

	spin_lock(&w->lock);
	if (!w->n_out) {
		w->snd_nxt = e->first;
		w->acked = bzc_psn_add(e->first, -1);
		w->una = e->first;
		w->una_seen = e->first;
		w->tries = READ_ONCE(qp->retry_cnt) + 1;
		w->naks = BZC_WIRE_SEQ_NAKS;
		bzc_wire_arm(qp);
	}
	list_add_tail(&e->link, &w->out);
	w->n_out++;
	if (rd)
		w->n_rd++;
	if (msg->wqe)
		w->n_wqes++;
	spin_unlock(&w->lock);

	bzc_wire_tx(qp, may_sleep);
	res->posted = true;
	return true;
}

/*
 * A message without a WQE (a bulk request's, bzc_bulk_qp.c): after the
 * QP's own messages, alone in the window, answered in place; or, with
 * msg->nowait, put in the window as soon as it has room (returns true
 * then, an ACK in `res`; bzc_wire_retire_nowait() takes its answer), so
 * a request's messages follow each other without a round trip between
 * them. Sleeps.
 */
static bool bzc_wire_sync(struct bzc_qp *qp, const struct bzc_msg *msg,
			  u32 pmtu, struct bzc_resp_result *res)
{
	struct bzc_wire *w = qp->wire;
	unsigned long tmo;
	bool posted = false;

	w->sync_done = false;
	for (;;) {
		if (!bzc_wire_reap(qp))
			tmo = max_t(long, (long)(w->rnr_until - jiffies), 1);
		else
			tmo = HZ;
		bzc_wire_tx(qp, true);
		if (posted && w->sync_done)
			break;
		/* The QP left RTS: no answer (the window flushes in ERR). */
		if (!bzc_wire_req_live(qp)) {
			if (posted && !w->sync_done)
				bzc_wire_retire(qp, bzc_wire_newest(w), true);
			return false;
		}
		/* Alone in the window, or (nowait) where there is room. */
		if (!posted && (!w->n_out || msg->nowait)) {
			res->posted = false;
			res->wait = false;
			res->defer = false;
			if (bzc_wire_post(qp, msg, pmtu, true, res)) {
				res->posted = false;
				if (msg->nowait)
					return true;
				posted = true;
				continue;
			}
			if (res->defer)
				return false;
			res->wait = false;
		}
		wait_event_timeout(w->wait, READ_ONCE(w->event) ||
				   READ_ONCE(w->expired) ||
				   !bzc_wire_req_live(qp), tmo);
	}
	res->syndrome = w->sync_rr.syndrome;
	res->atomic_orig = w->sync_rr.atomic_orig;
	res->local_lost = w->sync_rr.local_lost;
	return w->sync_answered;
}

/**
 * bzc_wire_send() - an RC or UC message on the wire
 * @qp: the requester's QP, its sq_mutex held
 * @msg: the message
 * @may_sleep: the caller may sleep; a bulk message needs it (a WQE's
 *	       message is sent from the doorbell syscall too: a packet the
 *	       local queue refuses there is left to the retransmit timer)
 * @res: the answer, an ACK on entry. RC: res->posted when a WQE's message
 *	 joined the send window (it completes later), res->wait when the
 *	 window has no room for it now; a bulk message (no WQE) is answered
 *
 * Return: true when the message was posted or answered (RC) or sent (UC);
 * false for an RC message nobody answered, a UC message that could not
 * be sent.
 */
bool bzc_wire_send(struct bzc_qp *qp, const struct bzc_msg *msg,
		   bool may_sleep, struct bzc_resp_result *res)
{
	struct bzc_roce_dest d;
	struct bzc_roce_msg m;
	u32 pmtu, n;
	bool ok;
	int err;

	/* No route out of the device's netdev: the message fails now. */
	if (!qp->wire || bzc_roce_dest_for_msg(qp, msg, &d))
		return false;
	pmtu = bzc_qp_pmtu(qp);
	if (msg->type == IB_QPT_RC) {
		/* The send window routes its packets itself (bzc_wire_tx()). */
		bzc_roce_dest_put(&d);
		if (msg->wqe)
			return bzc_wire_post(qp, msg, pmtu, may_sleep, res) ||
			       res->wait || res->defer;
		return bzc_wire_sync(qp, msg, pmtu, res);
	}
	/* UC: no window, nothing to send again. */
	bzc_wire_req_msg(qp, msg, &m);
	n = bzc_roce_msg_npkts(&m, pmtu);
	err = bzc_wire_req_xmit(qp, msg, &m, pmtu, 0, &d, may_sleep, NULL);
	ok = !err || err == -EFAULT;
	res->local_lost = err == -EFAULT;
	qp->tx_psn = bzc_psn_add(qp->tx_psn, n);
	bzc_roce_dest_put(&d);
	return ok;
}

/*
 * Completer: answers to the send window, from the receive worker
 */

/*
 * An ACK, NAK, READ response or atomic ACK for a message in `qp`'s send
 * window: anything else (late, duplicate, out of order) is dropped; a READ
 * response's payload goes into the WQE's SGEs, in PSN order only.
 */
static void bzc_wire_comp_rx(struct bzc_dev *bdev, struct bzc_qp *qp,
			     const struct bzc_roce_hdrs *h,
			     const struct bzc_sgl *payload)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	struct bzc_wire *w = qp->wire;
	u8 type = h->syndrome & BZC_AETH_TYPE_MASK;
	struct bzc_wire_msg *e;
	bool event = false;

	spin_lock(&w->lock);
	e = bzc_wire_find(w, h->psn);
	if (!e || e->done)
		goto drop;

	if ((op->hdrs & BZC_HDR_AETH) && type != BZC_AETH_ACK) {
		bzc_count(bdev, BZC_CNT_NAKS_RCVD, 1);
		/* A NAK acknowledges what came before the PSN it names. */
		bzc_wire_ack_upto(w, bzc_psn_add(h->psn, -1));
		if (type == BZC_AETH_RNR_NAK ||
		    h->syndrome == (BZC_AETH_NAK | BZC_NAK_PSN_SEQ)) {
			/* One go-back at a time; none during an RNR wait. */
			if (!w->nak_pending && !w->rnr_pending) {
				w->nak_pending = true;
				w->nak_syndrome = h->syndrome;
				w->nak_psn = h->psn;
			}
		} else {
			/* The message fails, and the QP with it. */
			e->done = true;
			e->syndrome = h->syndrome;
			w->blocked = true;
		}
		bzc_wire_moved(qp, true);
		goto out;
	}
	switch (op->kind) {
	case BZC_KIND_ACK:
		bzc_wire_ack_upto(w, h->psn);
		break;
	case BZC_KIND_ATOMIC_ACK:
		if (e->msg.opcode != IB_UVERBS_WR_ATOMIC_CMP_AND_SWP &&
		    e->msg.opcode != IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD)
			goto drop;
		bzc_wire_ack_upto(w, bzc_psn_add(h->psn, -1));
		e->orig = h->orig;
		e->done = true;
		break;
	case BZC_KIND_READ_RESP: {
		struct bzc_cursor pc = { .sgl = payload }, at;

		if (e->msg.opcode != IB_UVERBS_WR_RDMA_READ ||
		    h->psn != e->expect ||
		    e->sunk + h->paylen > e->msg.local->total ||
		    ((op->flags & BZC_OPF_END) &&
		     e->sunk + h->paylen != e->msg.local->total))
			goto drop;
		/* A READ response acknowledges the requests before the READ. */
		bzc_wire_ack_upto(w, bzc_psn_add(e->first, -1));
		at = e->sink;
		/* No fault here, under w->lock: the requester takes it. */
		if (bzc_copy(&e->sink, &pc, h->paylen, false)) {
			e->sink = at;
			e->sink_lost = true;
			event = true;
			break;
		}
		e->sunk += h->paylen;
		e->expect = bzc_psn_add(e->expect, 1);
		if (op->flags & BZC_OPF_END)
			e->done = true;
		break;
	}
	default:
		goto drop;
	}
	bzc_wire_moved(qp, event);
out:
	spin_unlock(&w->lock);
	return;
drop:
	spin_unlock(&w->lock);
	bzc_count(bdev, BZC_CNT_RX_DUPLICATES, 1);
}

/*
 * Responder
 */

/*
 * Send a response (ACK, NAK, atomic ACK, READ response packets). Returns
 * 0, or the errno of the packet that could not go: -EFAULT when a READ's
 * source page of an ODP MR is gone.
 */
static int bzc_wire_respond(struct bzc_dev *bdev, struct bzc_qp *qp,
			    const struct bzc_roce_ip *ip,
			    struct bzc_roce_msg *m, struct bzc_sgl *src)
{
	struct bzc_cursor sc = { .sgl = src };
	struct bzc_roce_dest d;
	struct bzc_roce_hdrs h;
	union ib_gid sgid, dgid;
	u32 pmtu = bzc_qp_pmtu(qp);
	u32 i, n;
	int err;

	memcpy(sgid.raw, ip->dgid, sizeof(sgid.raw));
	memcpy(dgid.raw, ip->sgid, sizeof(dgid.raw));
	err = bzc_roce_dest_get(bdev, &sgid, &dgid, &qp->wire->route, &d);
	if (err) {
		bzc_count(bdev, BZC_CNT_TX_ERRORS, 1);
		return err;
	}
	d.ip.tclass = ip->tclass;
	d.ip.hop_limit = 64;
	d.ip.sport = ip->sport;
	m->response = true;
	m->transport = BZC_TRANSPORT_RC;
	m->pkey = BZC_DEFAULT_PKEY;
	m->dqpn = READ_ONCE(qp->dest_qpn);
	n = bzc_roce_msg_npkts(m, pmtu);
	for (i = 0; i < n; i++) {
		err = bzc_roce_msg_hdrs(m, pmtu, i, &h);
		if (!err)
			err = bzc_wire_xmit(bdev, &d, &h, &sc, true);
		if (err)
			break;
		cond_resched();
	}
	bzc_roce_dest_put(&d);
	return err;
}

static void bzc_wire_ack(struct bzc_dev *bdev, struct bzc_qp *qp,
			 const struct bzc_roce_ip *ip, u32 psn, u8 syndrome)
{
	struct bzc_roce_msg m = {
		.wr_opcode = IB_UVERBS_WR_SEND,
		.psn = psn,
		.syndrome = syndrome == BZC_AETH_ACK ? BZC_AETH_NO_CREDIT :
						      syndrome,
		.msn = qp->wire->msn,
	};

	if ((syndrome & BZC_AETH_TYPE_MASK) != BZC_AETH_ACK)
		bzc_count(bdev, BZC_CNT_NAKS_SENT, 1);
	bzc_wire_respond(bdev, qp, ip, &m, NULL);
}

/* The message in progress ends (placed, failed or abandoned). */
static void bzc_wire_msg_end(struct bzc_wire *w)
{
	w->cur = BZC_WIRE_NONE;
	w->off = 0;
	w->have_rqe = false;
}

/*
 * A READ request: the R_Key over the whole range, then the response
 * packets from the MR, PSN by PSN. Also answers a duplicate again.
 */
static u8 bzc_wire_read(struct bzc_dev *bdev, struct bzc_qp *qp,
			const struct bzc_roce_ip *ip,
			const struct bzc_roce_hdrs *h)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_roce_msg m = {
		.wr_opcode = IB_UVERBS_WR_RDMA_READ,
		.psn = h->psn,
		.len = h->dma_len,
		.syndrome = BZC_AETH_NO_CREDIT,
		.msn = w->msn,
	};
	u8 syndrome;
	int err;

	syndrome = bzc_resp_rdma_target(qp, h->rkey, h->va, h->dma_len,
					IB_ACCESS_REMOTE_READ, w->sgl);
	if (syndrome != BZC_AETH_ACK)
		return syndrome;
	if (!h->dma_len)
		bzc_sgl_kbuf(w->sgl, NULL, 0);
	err = bzc_wire_respond(bdev, qp, ip, &m, w->sgl);
	bzc_sgl_put(w->sgl);
	/*
	 * The MR's page is gone mid-response: an access violation; the
	 * NAK ends the READ at the requester, whatever it has received.
	 */
	return err == -EFAULT ? BZC_AETH_NAK_REM_ACCESS : BZC_AETH_ACK;
}

/* An atomic, or the saved answer to it when it is a duplicate. */
static u8 bzc_wire_atomic(struct bzc_dev *bdev, struct bzc_qp *qp,
			  const struct bzc_roce_ip *ip,
			  const struct bzc_roce_hdrs *h, bool dup)
{
	struct bzc_wire *w = qp->wire;
	struct bzc_msg msg = {
		.opcode = h->opcode == BZC_OP_CMP_SWAP ?
			  IB_UVERBS_WR_ATOMIC_CMP_AND_SWP :
			  IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD,
		.remote_addr = h->va,
		.rkey = h->rkey,
		.compare_add = h->opcode == BZC_OP_CMP_SWAP ? h->compare :
							     h->swap_add,
		.swap = h->swap_add,
	};
	struct bzc_roce_msg m = {
		.wr_opcode = msg.opcode,
		.psn = h->psn,
		.syndrome = BZC_AETH_NO_CREDIT,
	};
	u32 i;
	u8 syndrome;

	if (dup) {
		/* Never executed twice (IBA 9.9.2.1): answered from memory. */
		for (i = 0; i < BZC_WIRE_ATOMICS; i++) {
			if (w->atomics[i].valid && w->atomics[i].psn == h->psn) {
				m.orig = w->atomics[i].orig;
				m.msn = w->msn;
				bzc_wire_respond(bdev, qp, ip, &m, NULL);
				break;
			}
		}
		return BZC_AETH_ACK;
	}
	syndrome = bzc_resp_atomic(qp, &msg, &m.orig);
	if (syndrome != BZC_AETH_ACK)
		return syndrome;
	i = w->next_atomic++ % BZC_WIRE_ATOMICS;
	w->atomics[i].valid = true;
	w->atomics[i].psn = h->psn;
	w->atomics[i].orig = m.orig;
	w->msn = bzc_psn_add(w->msn, 1);
	m.msn = w->msn;
	bzc_wire_respond(bdev, qp, ip, &m, NULL);
	return BZC_AETH_ACK;
}

/*
 * Place a packet's payload at byte `off` of `dst` (the one copy, from the
 * skb's pages). False when a page of an ODP MR there is gone (the
 * process unmapped it).
 */
static bool bzc_wire_place(struct bzc_sgl *dst, u64 off,
			   const struct bzc_sgl *payload)
{
	struct bzc_cursor dc = { .sgl = dst }, sc = { .sgl = payload };

	if (!payload->total)
		return true;
	bzc_cursor_skip(&dc, off);
	return !bzc_copy(&dc, &sc, payload->total, true);
}

/*
 * No receive WQE: RC answers as bzc_resp_no_rqe() said (RNR NAK, remote
 * operational error); UC drops the message, and its other packets with it.
 */
static u8 bzc_wire_no_rqe_syndrome(struct bzc_qp *qp,
				   const struct bzc_resp_result *res)
{
	return qp->ibqp.qp_type == IB_QPT_RC ? res->syndrome :
					       BZC_AETH_NAK_REM_OP;
}

/*
 * The SEND's receive WQE fails with `status` at the responder, which goes
 * to ERR; returns the syndrome the requester is answered with.
 */
static u8 bzc_wire_recv_fail(struct bzc_qp *qp, const struct bzc_msg *msg,
			     enum ib_wc_status status, u8 syndrome)
{
	bzc_resp_recv_complete(qp, msg, qp->wire->rqe, status, 0);
	bzc_qp_error(qp, 0);
	return syndrome;
}

/*
 * One packet of a SEND: its receive WQE is taken on the first packet and
 * kept; each packet resolves the WQE's SGEs again and places its bytes at
 * the message's offset. Returns the syndrome to NAK with, or ACK.
 */
static u8 bzc_wire_send_pkt(struct bzc_qp *qp, const struct bzc_msg *msg,
			    const struct bzc_roce_hdrs *h,
			    const struct bzc_sgl *payload,
			    struct bzc_resp_result *res)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	struct bzc_wire *w = qp->wire;
	bool placed;
	int err;

	if (!w->have_rqe) {
		err = bzc_resp_rq_take(qp, w->rqe);
		if (err) {
			bzc_resp_no_rqe(qp, msg, err, res);
			return bzc_wire_no_rqe_syndrome(qp, res);
		}
		w->have_rqe = true;
	}
	if (!bzc_sgl_from_sges(w->sgl, bdev, qp->ibqp.srq ? qp->ibqp.srq->pd :
			       qp->ibqp.pd,
			       (const struct bzc_sge *)(w->rqe + 1),
			       w->rqe->num_sge, IB_ACCESS_LOCAL_WRITE))
		return bzc_wire_recv_fail(qp, msg, IB_WC_LOC_PROT_ERR,
					  BZC_AETH_NAK_REM_OP);
	if (w->sgl->total < w->off + h->paylen) {
		bzc_sgl_put(w->sgl);
		return bzc_wire_recv_fail(qp, msg, IB_WC_LOC_LEN_ERR,
					  BZC_AETH_NAK_INV_REQ);
	}
	placed = bzc_wire_place(w->sgl, w->off, payload);
	bzc_sgl_put(w->sgl);
	/* Its buffer lost an ODP page: as if its SGEs had not resolved. */
	if (!placed)
		return bzc_wire_recv_fail(qp, msg, IB_WC_LOC_PROT_ERR,
					  BZC_AETH_NAK_REM_OP);
	w->off += h->paylen;
	if (!(op->flags & BZC_OPF_END))
		return BZC_AETH_ACK;
	if (msg->opcode == IB_UVERBS_WR_SEND_WITH_INV &&
	    bzc_key_invalidate(bdev, le32_to_cpu(msg->imm_data), qp, true))
		return bzc_wire_recv_fail(qp, msg, IB_WC_REM_INV_REQ_ERR,
					  BZC_AETH_NAK_INV_REQ);
	bzc_resp_recv_complete(qp, msg, w->rqe, IB_WC_SUCCESS, w->off);
	return BZC_AETH_ACK;
}

/*
 * One packet of an RDMA WRITE: the R_Key over the whole message on its
 * first packet, then over each packet's range as it is placed.
 */
static u8 bzc_wire_write_pkt(struct bzc_qp *qp, const struct bzc_msg *msg,
			     const struct bzc_roce_hdrs *h,
			     const struct bzc_sgl *payload,
			     struct bzc_resp_result *res)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	struct bzc_wire *w = qp->wire;
	bool placed;
	u8 syndrome;
	int err;

	if (op->flags & BZC_OPF_START) {
		w->va = h->va;
		w->rkey = h->rkey;
		w->dma_len = h->dma_len;
		syndrome = bzc_resp_rdma_target(qp, w->rkey, w->va, w->dma_len,
						IB_ACCESS_REMOTE_WRITE, w->sgl);
		if (syndrome != BZC_AETH_ACK)
			return syndrome;
		bzc_sgl_put(w->sgl);
	}
	if (w->off + h->paylen > w->dma_len ||
	    ((op->flags & BZC_OPF_END) && w->off + h->paylen != w->dma_len))
		return BZC_AETH_NAK_INV_REQ;
	syndrome = bzc_resp_rdma_target(qp, w->rkey, w->va + w->off, h->paylen,
					IB_ACCESS_REMOTE_WRITE, w->sgl);
	if (syndrome != BZC_AETH_ACK)
		return syndrome;
	/* The immediate's receive first: an RNR NAK must leave nothing placed. */
	if ((op->flags & BZC_OPF_END) &&
	    msg->opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM) {
		err = bzc_resp_rq_take(qp, w->rqe);
		if (err) {
			bzc_sgl_put(w->sgl);
			bzc_resp_no_rqe(qp, msg, err, res);
			return bzc_wire_no_rqe_syndrome(qp, res);
		}
	}
	placed = bzc_wire_place(w->sgl, 0, payload);
	bzc_sgl_put(w->sgl);
	if ((op->flags & BZC_OPF_END) &&
	    msg->opcode == IB_UVERBS_WR_RDMA_WRITE_WITH_IMM)
		bzc_resp_recv_complete(qp, msg, w->rqe,
				       placed ? IB_WC_SUCCESS :
						IB_WC_LOC_PROT_ERR,
				       placed ? w->dma_len : 0);
	/* The target MR's page is gone: an access violation (class C). */
	if (!placed)
		return BZC_AETH_NAK_REM_ACCESS;
	w->off += h->paylen;
	return BZC_AETH_ACK;
}

/* The IB_UVERBS_WR_* of the message a request packet belongs to. */
static u8 bzc_wire_wr_opcode(u8 opcode)
{
	switch (opcode & ~BZC_TRANSPORT_MASK) {
	case BZC_OP_SEND_LAST_IMM:
	case BZC_OP_SEND_ONLY_IMM:
		return IB_UVERBS_WR_SEND_WITH_IMM;
	case BZC_OP_SEND_LAST_INV:
	case BZC_OP_SEND_ONLY_INV:
		return IB_UVERBS_WR_SEND_WITH_INV;
	case BZC_OP_WRITE_FIRST:
	case BZC_OP_WRITE_MIDDLE:
	case BZC_OP_WRITE_LAST:
	case BZC_OP_WRITE_ONLY:
		return IB_UVERBS_WR_RDMA_WRITE;
	case BZC_OP_WRITE_LAST_IMM:
	case BZC_OP_WRITE_ONLY_IMM:
		return IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;
	default:
		return IB_UVERBS_WR_SEND;
	}
}

/*
 * A request packet with the expected PSN: the opcode sequence, then the
 * placement. Returns the syndrome for the answer.
 */
static u8 bzc_wire_resp_pkt(struct bzc_dev *bdev, struct bzc_qp *qp,
			    const struct bzc_roce_ip *ip,
			    const struct bzc_roce_hdrs *h,
			    const struct bzc_sgl *payload,
			    struct bzc_msg *msg)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	struct bzc_resp_result res = { .syndrome = BZC_AETH_ACK };
	struct bzc_wire *w = qp->wire;
	bool start = op->flags & BZC_OPF_START;
	bool idle = w->cur == BZC_WIRE_NONE;
	u8 syndrome;

	/* A message starts when none is in progress and goes on as it began. */
	if (start != idle || (!start && w->cur != op->kind))
		return BZC_AETH_NAK_INV_REQ;

	switch (op->kind) {
	case BZC_KIND_SEND:
		syndrome = bzc_wire_send_pkt(qp, msg, h, payload, &res);
		break;
	case BZC_KIND_WRITE:
		syndrome = bzc_wire_write_pkt(qp, msg, h, payload, &res);
		break;
	case BZC_KIND_READ_REQ:
		syndrome = bzc_wire_read(bdev, qp, ip, h);
		break;
	case BZC_KIND_ATOMIC:
		syndrome = bzc_wire_atomic(bdev, qp, ip, h, false);
		break;
	default:
		syndrome = BZC_AETH_NAK_INV_REQ;
		break;
	}
	if (syndrome == BZC_AETH_ACK) {
		w->cur = op->kind;
		if (op->flags & BZC_OPF_END) {
			bzc_wire_msg_end(w);
			if (op->kind == BZC_KIND_SEND ||
			    op->kind == BZC_KIND_WRITE)
				w->msn = bzc_psn_add(w->msn, 1);
		}
	}
	return syndrome;
}

/* Take up the PSN modify_qp gave, after a (re)connection. */
static void bzc_wire_resp_sync(struct bzc_qp *qp)
{
	struct bzc_wire *w = qp->wire;
	u32 gen;

	spin_lock(&qp->lock);
	gen = qp->resp_gen;
	if (gen != w->gen) {
		w->gen = gen;
		w->epsn = qp->rq_psn;
		w->msn = 0;
		w->nak_sent = false;
		bzc_wire_msg_end(w);
	}
	spin_unlock(&qp->lock);
}

/*
 * A request packet to an RC or UC QP: from its peer only, then by PSN: the
 * expected one is placed, a duplicate (RC) answered again without placing,
 * one past a gap NAKed once (RC) or, on UC, the message in progress
 * abandoned (IBA 9.8.3).
 */
static void bzc_wire_resp_rx(struct bzc_dev *bdev, struct bzc_qp *qp,
			     const struct bzc_roce_ip *ip,
			     const struct bzc_roce_hdrs *h,
			     const struct bzc_sgl *payload)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	struct bzc_wire *w = qp->wire;
	bool rc = qp->ibqp.qp_type == IB_QPT_RC;
	struct bzc_resp_result res = { .syndrome = BZC_AETH_ACK };
	struct bzc_msg msg = {
		.opcode = bzc_wire_wr_opcode(h->opcode),
		.flags = h->se ? BZC_WQE_SOLICITED : 0,
		.type = qp->ibqp.qp_type,
		/* RC/UC packets name no source QP: checked by address. */
		.sqpn = READ_ONCE(qp->dest_qpn),
		.dqpn = h->dqpn,
	};
	s32 d;
	u8 syndrome;

	memcpy(msg.sgid.raw, ip->sgid, sizeof(msg.sgid.raw));
	if (!bzc_resp_accepts(qp, &msg)) {
		bzc_count(bdev, BZC_CNT_RX_DROPS, 1);
		ibdev_info_ratelimited(&bdev->ibdev,
				       "QP %u: dropped a request packet (state %u)\n",
				       qp->ibqp.qp_num, READ_ONCE(qp->state));
		return;
	}
	bzc_wire_resp_sync(qp);
	if (op->kind == BZC_KIND_SEND && (op->hdrs & BZC_HDR_IETH))
		msg.imm_data = cpu_to_le32(h->inv_rkey);
	else
		msg.imm_data = cpu_to_le32(be32_to_cpu(h->imm));

	d = bzc_psn_diff(h->psn, w->epsn);
	if (!rc) {
		/* UC: a new message resynchronizes; a gap loses the rest. */
		if (d && (op->flags & BZC_OPF_START)) {
			bzc_wire_msg_end(w);
			w->epsn = h->psn;
			d = 0;
		}
		if (d) {
			bzc_wire_msg_end(w);
			bzc_count(bdev, BZC_CNT_RX_OUT_OF_SEQ, 1);
			return;
		}
	} else if (d > 0) {
		bzc_count(bdev, BZC_CNT_RX_OUT_OF_SEQ, 1);
		if (!w->nak_sent) {
			w->nak_sent = true;
			/* The NAK names the PSN expected (IBA 9.7.5.2.6). */
			bzc_wire_ack(bdev, qp, ip, w->epsn,
				     BZC_AETH_NAK | BZC_NAK_PSN_SEQ);
		}
		return;
	} else if (d < 0) {
		/* A duplicate: answered again, never placed again. */
		bzc_count(bdev, BZC_CNT_RX_DUPLICATES, 1);
		if (op->kind == BZC_KIND_READ_REQ)
			bzc_wire_read(bdev, qp, ip, h);
		else if (op->kind == BZC_KIND_ATOMIC)
			bzc_wire_atomic(bdev, qp, ip, h, true);
		else if (h->ackreq)
			bzc_wire_ack(bdev, qp, ip, bzc_psn_add(w->epsn, -1),
				     BZC_AETH_ACK);
		return;
	}

	syndrome = bzc_wire_resp_pkt(bdev, qp, ip, h, payload, &msg);
	if ((syndrome & BZC_AETH_TYPE_MASK) == BZC_AETH_RNR_NAK) {
		/* Nothing consumed: the requester sends it again later. */
		if (rc)
			bzc_wire_ack(bdev, qp, ip, h->psn, syndrome);
		return;
	}
	if (syndrome != BZC_AETH_ACK) {
		bzc_wire_msg_end(w);
		if (syndrome == BZC_AETH_NAK_REM_ACCESS ||
		    syndrome == BZC_AETH_NAK_INV_REQ)
			bzc_resp_error(qp, &msg, syndrome, &res);
		if (rc)
			bzc_wire_ack(bdev, qp, ip, h->psn, syndrome);
		return;
	}
	w->nak_sent = false;
	if (op->kind == BZC_KIND_READ_REQ) {
		/* A READ takes a PSN for each of its response packets. */
		struct bzc_roce_msg r = { .wr_opcode = IB_UVERBS_WR_RDMA_READ,
					  .response = true,
					  .len = h->dma_len };

		w->epsn = bzc_psn_add(w->epsn,
				      bzc_roce_msg_npkts(&r, bzc_qp_pmtu(qp)));
		w->msn = bzc_psn_add(w->msn, 1);
		return;
	}
	w->epsn = bzc_psn_add(w->epsn, 1);
	if (rc && h->ackreq && op->kind != BZC_KIND_ATOMIC)
		bzc_wire_ack(bdev, qp, ip, h->psn, BZC_AETH_ACK);
}

/**
 * bzc_wire_rx() - an RC or UC packet for a QP of this device
 * @bdev: the device
 * @qp: the destination QP, referenced, RC or UC
 * @ip: the packet's addresses and IP fields, checked
 * @h: its transport headers, checked against the opcode table and PMTU
 * @payload: its h->paylen bytes of payload, where the skb holds them
 *
 * Called by the receive worker only, one packet at a time per device.
 */
void bzc_wire_rx(struct bzc_dev *bdev, struct bzc_qp *qp,
		 const struct bzc_roce_ip *ip, const struct bzc_roce_hdrs *h,
		 const struct bzc_sgl *payload)
{
	if (!qp->wire)
		return;
	if (bzc_roce_opinfo[h->opcode].flags & BZC_OPF_REQUEST)
		bzc_wire_resp_rx(bdev, qp, ip, h, payload);
	else if (qp->ibqp.qp_type == IB_QPT_RC)
		bzc_wire_comp_rx(bdev, qp, h, payload);
}
