// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the completer (docs/transport.md). The responder's answer to a
 * message becomes its WQE's status; the SQ's head WQE is then completed
 * in order: counted, its slot handed back, its CQE written, RNR NAKs
 * retried after the responder's timer, errors turned into ERR or SQE.
 */
#include "bzc_xport.h"

/* The requester's status for a NAK (IBA 9.9.3 on the requester's side). */
static enum ib_wc_status bzc_nak_status(u8 syndrome)
{
	switch (syndrome) {
	case BZC_AETH_NAK_INV_REQ:
		return IB_WC_REM_INV_REQ_ERR;
	case BZC_AETH_NAK_REM_ACCESS:
		return IB_WC_REM_ACCESS_ERR;
	default:
		return IB_WC_REM_OP_ERR;
	}
}

/**
 * bzc_comp_answer() - what the responder's answer means for a WQE
 * @msg: the message the WQE sent
 * @rr: the answer; NULL: none came
 * @may_sleep: the caller may sleep (and so fault in an ODP MR's page)
 * @res: the WQE's result, updated
 *
 * An RC message without an answer has run out of retries; a NAK fails
 * the WQE, an RNR NAK has it retried; an atomic's ACK brings the original
 * value into the local SGEs. UC and UD expect no answer. Local SGEs that
 * lost a page of an ODP MR on the way (the process unmapped it) fail the
 * WQE with IB_WC_LOC_PROT_ERR.
 */
void bzc_comp_answer(const struct bzc_msg *msg,
		     const struct bzc_resp_result *rr, bool may_sleep,
		     struct bzc_result *res)
{
	struct bzc_sgl orig;
	struct bzc_cursor dc = { .sgl = msg->local }, oc = { .sgl = &orig };

	if (rr && rr->defer) {
		res->defer = true;
		return;
	}
	/* In the send window, or held for room there: no result yet. */
	if (rr && (rr->posted || rr->wait)) {
		res->posted = rr->posted;
		res->wait = rr->wait;
		return;
	}
	if (rr && rr->local_lost) {
		res->status = IB_WC_LOC_PROT_ERR;
		return;
	}
	if (!rr) {
		/* Nobody answers: RC retries in vain, UC and UD drop. */
		if (bzc_type_reliable(msg->type))
			res->status = IB_WC_RETRY_EXC_ERR;
		return;
	}
	switch (rr->syndrome & BZC_AETH_TYPE_MASK) {
	case BZC_AETH_RNR_NAK:
		res->rnr = true;
		res->rnr_timer = rr->syndrome & BZC_AETH_VALUE_MASK;
		return;
	case BZC_AETH_NAK:
		res->status = bzc_nak_status(rr->syndrome);
		return;
	}
	if (msg->opcode == IB_UVERBS_WR_ATOMIC_CMP_AND_SWP ||
	    msg->opcode == IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD) {
		bzc_sgl_kbuf(&orig, &rr->atomic_orig, sizeof(rr->atomic_orig));
		if (bzc_copy(&dc, &oc, sizeof(rr->atomic_orig), may_sleep))
			res->status = IB_WC_LOC_PROT_ERR;
		res->byte_len = sizeof(rr->atomic_orig);
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
	case BZC_KWR_REG_MR:
		return IB_WC_REG_MR;
	case BZC_WR_ATOMIC_WRITE:
		return BZC_WC_ATOMIC_WRITE;
	case BZC_WR_FLUSH:
		return BZC_WC_FLUSH;
	default:
		return IB_WC_SEND;
	}
}

/* RNR NAK timer values of the IB spec, in microseconds, by min_rnr_timer. */
static const u32 bzc_rnr_usecs[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

/**
 * bzc_rnr_timer_usecs() - the wait an RNR NAK's timer field asks for
 * @rnr_timer: the responder's min_rnr_timer (5 bits)
 *
 * Return: microseconds.
 */
u32 bzc_rnr_timer_usecs(u8 rnr_timer)
{
	return bzc_rnr_usecs[rnr_timer & 31];
}

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
	bzc_sq_queue_in(qp, delay);
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

/*
 * A send error: RC (and XRC initiator) QPs go to ERR, UC and UD to SQE;
 * later WQEs flush.
 */
static void bzc_sq_error(struct bzc_qp *qp)
{
	if (bzc_type_reliable(qp->ibqp.qp_type)) {
		bzc_qp_error(qp, 0);
		return;
	}
	spin_lock(&qp->lock);
	if (qp->state == IB_QPS_RTS)
		qp->state = IB_QPS_SQE;
	spin_unlock(&qp->lock);
}

/**
 * bzc_comp_wqe() - complete the SQ's head WQE once it has run
 * @qp: the QP, its sq_mutex held
 * @wqe: the WQE (a copy)
 * @res: what running it produced; an RNR NAK whose retries are used up
 *	 becomes IBV_WC_RNR_RETRY_EXC_ERR here
 *
 * Counts it, hands its slot back, writes its CQE if it has one (an error
 * always does) and puts the QP in ERR (RC) or SQE (UC, UD) on an error.
 *
 * Return: false when the WQE waits for an RNR retry instead (the worker
 * is scheduled): it stays at the head, and the SQ stops.
 */
bool bzc_comp_wqe(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
		  struct bzc_result *res)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);

	if (res->rnr) {
		if (bzc_rnr_wait(qp, res->rnr_timer))
			return false;
		res->status = IB_WC_RNR_RETRY_EXC_ERR;
	}
	qp->rnr_waiting = false;
	if (res->status == IB_WC_SUCCESS) {
		bzc_count(bdev, BZC_CNT_SENT_WQES, 1);
		bzc_count(bdev, BZC_CNT_SENT_BYTES, res->byte_len);
	} else {
		bzc_count(bdev, BZC_CNT_SEND_ERRORS, 1);
	}
	bzc_sq_advance(qp);
	if (res->status != IB_WC_SUCCESS ||
	    (wqe->flags & BZC_WQE_SIGNALED) || qp->sig_all)
		bzc_sq_complete(qp, wqe, res->status, res->byte_len);
	if (res->status != IB_WC_SUCCESS)
		bzc_sq_error(qp);
	return true;
}

/**
 * bzc_comp_retired() - complete a WQE that left the RC send window
 * @qp: the QP, its sq_mutex held
 * @wqe: the WQE (the window's copy); its slot was handed back already
 * @res: its result: IB_WC_WR_FLUSH_ERR when the QP went to ERR before
 *	 its answer came; an RNR NAK here has used up its retries
 *
 * As bzc_comp_wqe() for the head of the SQ, in the same order: the
 * window retires its messages oldest first (bzc_wire_reap()).
 */
void bzc_comp_retired(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
		      struct bzc_result *res)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);

	if (res->status == IB_WC_WR_FLUSH_ERR) {
		bzc_sq_complete(qp, wqe, res->status, 0);
		return;
	}
	if (res->rnr)
		res->status = IB_WC_RNR_RETRY_EXC_ERR;
	if (res->status == IB_WC_SUCCESS) {
		bzc_count(bdev, BZC_CNT_SENT_WQES, 1);
		bzc_count(bdev, BZC_CNT_SENT_BYTES, res->byte_len);
	} else {
		bzc_count(bdev, BZC_CNT_SEND_ERRORS, 1);
	}
	if (res->status != IB_WC_SUCCESS ||
	    (wqe->flags & BZC_WQE_SIGNALED) || qp->sig_all)
		bzc_sq_complete(qp, wqe, res->status, res->byte_len);
	if (res->status != IB_WC_SUCCESS)
		bzc_sq_error(qp);
}

/**
 * bzc_comp_flush() - complete the SQ's head WQE as flushed (ERR, SQE)
 * @qp: the QP, its sq_mutex held
 * @wqe: the WQE (a copy)
 */
void bzc_comp_flush(struct bzc_qp *qp, const struct bzc_send_wqe *wqe)
{
	bzc_sq_complete(qp, wqe, IB_WC_WR_FLUSH_ERR, 0);
	bzc_sq_advance(qp);
}
