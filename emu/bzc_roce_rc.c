// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: RC and UC on the wire (docs/transport.md, "Reliability"): PSNs,
 * the requester's wait for the answer with retransmission, the completer's
 * side of ACKs, NAKs, READ responses and atomic ACKs, and the responder's
 * per-packet placement with its expected PSN, duplicates and NAKs.
 *
 * The requester sends one message at a time and waits for its answer
 * before the next (the send window is one message): a WQE runs in the
 * QP's worker, which sleeps until the receive worker hands it the answer
 * or the local ACK timeout passes, then goes back to the message's first
 * PSN (go-back-N), at most retry_cnt times. Large messages keep the link
 * busy all the same; small ones pay one round trip each.
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
#include <rdma/ib_addr.h>

#include "bzc_xport.h"

/*
 * A local ACK timeout shorter than this is taken as this (IBA allows more):
 * a software peer under load answers a long message late.
 */
#define BZC_MIN_ACK_TIMEOUT	msecs_to_jiffies(200)
/* An RC request asks for an ACK at least every this many packets. */
#define BZC_WIRE_ACK_EVERY	32
/*
 * A READ whose sink (an ODP MR) lost pages faults in this much ahead, and
 * gives up when the process takes them away again this many times in a
 * row without a byte placed in between.
 */
#define BZC_WIRE_SINK_FAULT	SZ_64M
#define BZC_WIRE_SINK_FAULTS	8
/* Times a packet the local queue refused is offered again. */
#define BZC_WIRE_XMIT_TRIES	20
/* PSN sequence NAKs one message may get before it fails. */
#define BZC_WIRE_SEQ_NAKS	64
/* timeout 0: no timer (IBA); the wait still checks the QP this often. */
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
	if (!w->rqe || !w->sgl) {
		kfree(w->rqe);
		kfree(w->sgl);
		kfree(w);
		return -ENOMEM;
	}
	spin_lock_init(&w->lock);
	init_waitqueue_head(&w->wait);
	w->gen = U32_MAX;
	qp->wire = w;
	return 0;
}

void bzc_wire_free(struct bzc_qp *qp)
{
	if (!qp->wire)
		return;
	kfree(qp->wire->rqe);
	kfree(qp->wire->sgl);
	kfree(qp->wire);
	qp->wire = NULL;
}

/*
 * Requester
 */

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
 * Send packets `from` to the end of a request message. Returns 0, or the
 * errno of the first packet that could not go (bzc_wire_xmit()).
 */
static int bzc_wire_req_xmit(struct bzc_qp *qp, const struct bzc_msg *msg,
			     const struct bzc_roce_msg *m, u32 pmtu, u32 from,
			     const struct bzc_roce_dest *d, bool may_sleep)
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
 * Wait for the answer, the QP leaving RTS, or a whole timeout with no
 * progress (an ACK of part of the message, a READ response).
 */
static void bzc_wire_wait(struct bzc_qp *qp, unsigned long tmo, bool no_timer)
{
	struct bzc_wire *w = qp->wire;
	bool moved;

	for (;;) {
		wait_event_timeout(w->wait, READ_ONCE(w->done) ||
				   READ_ONCE(w->progress) ||
				   READ_ONCE(w->sink_lost) ||
				   !bzc_wire_req_live(qp), tmo);
		spin_lock(&w->lock);
		moved = w->progress;
		w->progress = false;
		spin_unlock(&w->lock);
		if (READ_ONCE(w->done) || READ_ONCE(w->sink_lost) ||
		    !bzc_wire_req_live(qp) || (!moved && !no_timer))
			return;
	}
}

/*
 * An RC message: send it, wait for its answer, go back to the first PSN
 * not acknowledged on a timeout or a PSN sequence NAK. False when no
 * answer came after retry_cnt retries.
 */
static bool bzc_wire_rc(struct bzc_qp *qp, const struct bzc_msg *msg,
			struct bzc_roce_msg *m, u32 pmtu,
			const struct bzc_roce_dest *d,
			struct bzc_resp_result *res)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	struct bzc_wire *w = qp->wire;
	unsigned long tmo = bzc_ack_timeout(READ_ONCE(qp->timeout));
	bool no_timer = !READ_ONCE(qp->timeout);
	u32 tries = READ_ONCE(qp->retry_cnt) + 1;
	u32 naks = BZC_WIRE_SEQ_NAKS;
	bool reading = msg->opcode == IB_UVERBS_WR_RDMA_READ;
	struct bzc_roce_msg resp = *m, req;
	u32 last, from = 0, reached, prev;
	bool done, sink_lost;
	struct bzc_cursor at;
	u64 placed, placed_at_fault = 0;
	u32 sink_faults = BZC_WIRE_SINK_FAULTS;

	resp.response = true;
	if (reading)
		last = bzc_psn_add(m->psn, bzc_roce_msg_npkts(&resp, pmtu) - 1);
	else
		last = bzc_psn_add(m->psn, bzc_roce_msg_npkts(m, pmtu) - 1);

	spin_lock(&w->lock);
	w->opcode = msg->opcode;
	w->first = m->psn;
	w->last = last;
	w->acked = bzc_psn_add(m->psn, -1);
	w->expect = m->psn;
	w->sink.sgl = msg->local;
	w->sink.i = 0;
	w->sink.pos = 0;
	w->sunk = 0;
	w->sink_lost = false;
	prev = m->psn;
	spin_unlock(&w->lock);
	for (;;) {
		req = *m;
		spin_lock(&w->lock);
		w->active = true;
		w->done = false;
		w->progress = false;
		w->rr.syndrome = BZC_AETH_ACK;
		/*
		 * A READ asks again for what it has not received: the
		 * responder answers a READ request at any PSN of the first
		 * one, for the VA and length it names, as IBA's rules for
		 * duplicate READ requests have it.
		 */
		if (reading) {
			req.psn = w->expect;
			req.va += w->sunk;
			req.len -= w->sunk;
		}
		spin_unlock(&w->lock);

		/*
		 * The WQE's own ODP page is gone: it fails locally; what the
		 * responder has of the message is never completed.
		 */
		if (bzc_wire_req_xmit(qp, msg, &req, pmtu, from, d, true) ==
		    -EFAULT) {
			spin_lock(&w->lock);
			w->active = false;
			spin_unlock(&w->lock);
			res->local_lost = true;
			return true;
		}
		bzc_wire_wait(qp, tmo, no_timer);

		spin_lock(&w->lock);
		w->active = false;
		done = w->done;
		*res = w->rr;
		sink_lost = w->sink_lost;
		w->sink_lost = false;
		at = w->sink;
		placed = w->sunk;
		/* Go back to the first PSN the responder has not acknowledged. */
		from = bzc_psn_diff(w->acked, m->psn) + 1;
		if (done && res->syndrome == (BZC_AETH_NAK | BZC_NAK_PSN_SEQ))
			from = bzc_psn_diff(w->nak_psn, m->psn);
		reached = reading ? w->expect : bzc_psn_add(w->acked, 1);
		spin_unlock(&w->lock);

		if (!bzc_wire_req_live(qp))
			return false;
		if (done && res->syndrome != (BZC_AETH_NAK | BZC_NAK_PSN_SEQ))
			break;
		/*
		 * A READ response found the sink's ODP page gone: fault in
		 * what is left (up to BZC_WIRE_SINK_FAULT bytes, so a fork's
		 * copy-on-write costs one round, not one per page) and ask
		 * again from there; no retry spent. A page that cannot come
		 * back (unmapped) fails the WQE locally.
		 */
		if (!done && sink_lost) {
			u64 ahead = min_t(u64, msg->local->total - placed,
					  BZC_WIRE_SINK_FAULT);

			if (placed != placed_at_fault)
				sink_faults = BZC_WIRE_SINK_FAULTS;
			placed_at_fault = placed;
			if (!--sink_faults || bzc_sgl_fault(&at, ahead, true)) {
				res->local_lost = true;
				return true;
			}
			continue;
		}
		bzc_count(bdev, BZC_CNT_RETRANSMITS, 1);
		/*
		 * The retry counts bound retries without progress: a round
		 * that moved the message on (ACKs, READ responses placed)
		 * starts them afresh, as an ACK does on hardware, so a long
		 * message on a slow or lossy path does not fail for its
		 * length, and a peer that went away still fails in
		 * retry_cnt + 1 timeouts.
		 */
		if (bzc_psn_diff(reached, prev) > 0) {
			tries = READ_ONCE(qp->retry_cnt) + 1;
			naks = BZC_WIRE_SEQ_NAKS;
		}
		prev = reached;
		/*
		 * A NAK is no timeout (IBA 9.7.5.1.5) but is bounded all the
		 * same: a peer that keeps NAKing cannot hold the QP forever.
		 */
		if (done ? !--naks : !--tries)
			return false;
	}
	/* An RNR NAK retries the same PSNs after the responder's timer. */
	if ((res->syndrome & BZC_AETH_TYPE_MASK) != BZC_AETH_RNR_NAK)
		qp->tx_psn = bzc_psn_add(last, 1);
	return true;
}

/**
 * bzc_wire_send() - an RC or UC message on the wire
 * @qp: the requester's QP, its sq_mutex held
 * @msg: the message
 * @may_sleep: the caller may sleep; RC needs it (it waits for the answer)
 * @res: the answer (RC), an ACK on entry
 *
 * Return: true when the message was answered (RC) or sent (UC); false for
 * an RC message nobody answered, a UC message that could not be sent.
 */
bool bzc_wire_send(struct bzc_qp *qp, const struct bzc_msg *msg,
		   bool may_sleep, struct bzc_resp_result *res)
{
	struct bzc_roce_dest d;
	struct bzc_roce_msg m;
	u32 pmtu, n;
	bool ok;
	int err;

	if (!qp->wire || bzc_roce_dest_for_msg(qp, msg, &d))
		return false;
	pmtu = bzc_qp_pmtu(qp);
	bzc_wire_req_msg(qp, msg, &m);
	if (msg->type == IB_QPT_RC) {
		ok = bzc_wire_rc(qp, msg, &m, pmtu, &d, res);
	} else {
		n = bzc_roce_msg_npkts(&m, pmtu);
		err = bzc_wire_req_xmit(qp, msg, &m, pmtu, 0, &d, may_sleep);
		ok = !err || err == -EFAULT;
		res->local_lost = err == -EFAULT;
		qp->tx_psn = bzc_psn_add(qp->tx_psn, n);
	}
	bzc_roce_dest_put(&d);
	return ok;
}

/*
 * Completer: answers to the requester's message, from the receive worker
 */

static void bzc_wire_answered(struct bzc_wire *w, u8 syndrome)
{
	w->rr.syndrome = syndrome;
	w->done = true;
	wake_up(&w->wait);
}

/*
 * An ACK, NAK, READ response or atomic ACK for `qp`'s outstanding message:
 * anything else (late, duplicate, out of order) is dropped; a READ
 * response's payload goes into the WQE's SGEs, in PSN order only.
 */
static void bzc_wire_comp_rx(struct bzc_dev *bdev, struct bzc_qp *qp,
			     const struct bzc_roce_hdrs *h, const u8 *payload)
{
	const struct bzc_roce_opinfo *op = &bzc_roce_opinfo[h->opcode];
	struct bzc_wire *w = qp->wire;
	u8 type = h->syndrome & BZC_AETH_TYPE_MASK;
	bool reading, in_range;

	spin_lock(&w->lock);
	if (!w->active || w->done)
		goto drop;
	reading = w->opcode == IB_UVERBS_WR_RDMA_READ;
	in_range = bzc_psn_diff(h->psn, w->first) >= 0 &&
		   bzc_psn_diff(w->last, h->psn) >= 0;
	if (!in_range)
		goto drop;

	/* A NAK (or RNR NAK) ends the message whatever it is. */
	if ((op->hdrs & BZC_HDR_AETH) && type != BZC_AETH_ACK) {
		bzc_count(bdev, BZC_CNT_NAKS_RCVD, 1);
		w->nak_psn = h->psn;
		bzc_wire_answered(w, h->syndrome);
		goto out;
	}
	switch (op->kind) {
	case BZC_KIND_ACK:
		/* Only the last PSN of a SEND or WRITE completes it. */
		if (reading || w->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
		    w->opcode == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD)
			goto drop;
		if (bzc_psn_diff(h->psn, w->acked) > 0) {
			w->acked = h->psn;
			w->progress = true;
		}
		if (h->psn == w->last)
			bzc_wire_answered(w, BZC_AETH_ACK);
		else
			wake_up(&w->wait);
		break;
	case BZC_KIND_ATOMIC_ACK:
		if (w->opcode != IB_UVERBS_WR_ATOMIC_CMP_AND_SWP &&
		    w->opcode != IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD)
			goto drop;
		w->rr.atomic_orig = h->orig;
		bzc_wire_answered(w, BZC_AETH_ACK);
		break;
	case BZC_KIND_READ_RESP: {
		struct bzc_sgl pl;
		struct bzc_cursor pc = { .sgl = &pl }, at;

		if (!reading || h->psn != w->expect ||
		    w->sunk + h->paylen > w->sink.sgl->total ||
		    ((op->flags & BZC_OPF_END) &&
		     w->sunk + h->paylen != w->sink.sgl->total))
			goto drop;
		bzc_sgl_kbuf(&pl, payload, h->paylen);
		at = w->sink;
		/* No fault here, under w->lock: the requester takes it. */
		if (bzc_copy(&w->sink, &pc, h->paylen, false)) {
			w->sink = at;
			w->sink_lost = true;
			wake_up(&w->wait);
			break;
		}
		w->sunk += h->paylen;
		w->expect = bzc_psn_add(w->expect, 1);
		w->progress = true;
		if (op->flags & BZC_OPF_END)
			bzc_wire_answered(w, BZC_AETH_ACK);
		else if (!(h->psn & 31))
			wake_up(&w->wait);
		break;
	}
	default:
		goto drop;
	}
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
	err = bzc_roce_dest_get(bdev, &sgid, &dgid, &d);
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
 * Place a packet's payload at byte `off` of `dst` (the one copy). False
 * when a page of an ODP MR there is gone (the process unmapped it).
 */
static bool bzc_wire_place(struct bzc_sgl *dst, u64 off, const u8 *payload,
			   u32 len)
{
	struct bzc_cursor dc = { .sgl = dst }, sc;
	struct bzc_sgl pl;

	if (!len)
		return true;
	bzc_cursor_skip(&dc, off);
	bzc_sgl_kbuf(&pl, payload, len);
	sc.sgl = &pl;
	sc.i = 0;
	sc.pos = 0;
	return !bzc_copy(&dc, &sc, len, true);
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
			    const struct bzc_roce_hdrs *h, const u8 *payload,
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
	placed = bzc_wire_place(w->sgl, w->off, payload, h->paylen);
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
			     const struct bzc_roce_hdrs *h, const u8 *payload,
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
	placed = bzc_wire_place(w->sgl, 0, payload, h->paylen);
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
			    const struct bzc_roce_hdrs *h, const u8 *payload,
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
			     const struct bzc_roce_hdrs *h, const u8 *payload)
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
 * @payload: its h->paylen bytes of payload
 *
 * Called by the receive worker only, one packet at a time per device.
 */
void bzc_wire_rx(struct bzc_dev *bdev, struct bzc_qp *qp,
		 const struct bzc_roce_ip *ip, const struct bzc_roce_hdrs *h,
		 const u8 *payload)
{
	if (!qp->wire)
		return;
	if (bzc_roce_opinfo[h->opcode].flags & BZC_OPF_REQUEST)
		bzc_wire_resp_rx(bdev, qp, ip, h, payload);
	else if (qp->ibqp.qp_type == IB_QPT_RC)
		bzc_wire_comp_rx(bdev, qp, h, payload);
}
