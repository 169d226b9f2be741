// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: bulk requests as RDMA messages on an RC QP (issue 11, part 4).
 *
 * A bulk channel connected to one of its process's RC QPs
 * (bzc_bulk_chan_connect_qp()) carries each WRITE, WRITE_WITH_IMM and READ
 * request as standard RDMA WRITE, WRITE with immediate and READ messages
 * of at most BZC_MAX_MSG_SZ (2^31) bytes on that QP's connection. A
 * message is sent the way the QP's own WQEs are: under the QP's sq_mutex,
 * between its WQEs, with its next PSN, through the transport the QP's
 * address picks (bzc_local_send(): a QP on a bzc device of this kernel
 * without a packet, anything else over RoCE v2 with the wire's PSNs,
 * ACKs and retransmission in bzc_roce_rc.c). The far side needs nothing
 * bzc-specific: an RC QP connected to this one and an rkey its owner
 * handed out. This file is the requester's side of one such message; the
 * channel (bzc_bulk.c) cuts requests into messages and completes them.
 */
#include <linux/delay.h>
#include <rdma/ib_cache.h>

#include "bzc_xport.h"

/**
 * bzc_bulk_qp_check() - may a bulk channel on @pd carry its requests on @ibqp
 * @ibqp: a QP of the same device
 * @pd: the channel's PD
 *
 * Return: 0; -EINVAL for a QP that is not RC or not on @pd; -ENOTCONN for
 * one that is not in RTS (not connected yet, or broken).
 */
int bzc_bulk_qp_check(struct ib_qp *ibqp, struct ib_pd *pd)
{
	if (ibqp->qp_type != IB_QPT_RC || ibqp->pd != pd)
		return -EINVAL;
	if (READ_ONCE(to_bqp(ibqp)->state) != IB_QPS_RTS)
		return -ENOTCONN;
	return 0;
}

/* The message's addresses, from the QP's as they are now; false: no GID. */
static bool bzc_bulk_qp_address(struct bzc_qp *qp, struct bzc_av *av,
				struct bzc_msg *msg)
{
	const struct ib_gid_attr *attr;

	spin_lock(&qp->lock);
	*av = qp->av;
	msg->dqpn = qp->dest_qpn;
	spin_unlock(&qp->lock);
	msg->av = av;
	attr = rdma_get_gid_attr(qp->ibqp.device, BZC_PORT, av->sgid_index);
	if (IS_ERR(attr))
		return false;
	msg->sgid = attr->gid;
	rdma_put_gid_attr(attr);
	return true;
}

/*
 * The request's status: the first failure of the messages that did not
 * wait for their answers, if one failed, else `st`. Under sq_mutex.
 */
static enum ib_wc_status bzc_bulk_qp_failed(struct bzc_qp *qp,
					    enum ib_wc_status st)
{
	if (qp->wire && qp->wire->bulk_status != IB_WC_SUCCESS)
		return qp->wire->bulk_status;
	return st;
}

/**
 * bzc_bulk_qp_msg() - one message of a bulk request on an RC QP
 * @qp: the channel's QP (an RC QP it holds, bzc_bulk_qp_check() passed)
 * @opcode: IB_UVERBS_WR_RDMA_WRITE, _RDMA_WRITE_WITH_IMM or _RDMA_READ
 * @local: the local bytes, at most BZC_MAX_MSG_SZ (READ: where they go)
 * @remote_addr: the peer's address
 * @rkey: the peer's rkey
 * @imm: WRITE_WITH_IMM's immediate, as the bulk WQE holds it
 * @first_msg: the request's first message
 * @more: more messages of the request follow this one
 * @stop: the channel stopped: no more RNR retries
 *
 * Sleeps: the caller is a channel lane. On the wire, a WRITE with @more
 * does not wait for its answer: it returns once it is in the QP's send
 * window (which takes @local's references), so the next one follows
 * without a round trip in between; the request's last message waits
 * until every message before it is answered, then for its own answer.
 * A failure of an earlier message is the request's status from then on.
 * An RNR NAK (the peer had no receive for the immediate) is retried
 * after the peer's RNR timer, at most the QP's rnr_retry times (7: until
 * @stop), with sq_mutex dropped in between so the QP's own WQEs go on.
 * Any error moves the QP to ERR, as an error of one of its own WQEs
 * does: its connection is broken.
 *
 * Return: the status for the bulk request so far: IB_WC_SUCCESS; the QP's
 * error (IB_WC_RETRY_EXC_ERR, IB_WC_REM_ACCESS_ERR, IB_WC_REM_INV_REQ_ERR,
 * IB_WC_REM_OP_ERR, IB_WC_RNR_RETRY_EXC_ERR); IB_WC_WR_FLUSH_ERR when the
 * QP is not in RTS (any more) or @stop was set during RNR retries.
 */
enum ib_wc_status bzc_bulk_qp_msg(struct bzc_qp *qp, u8 opcode,
				  struct bzc_sgl *local, u64 remote_addr,
				  u32 rkey, __le32 imm, bool first_msg,
				  bool more, const bool *stop)
{
	struct bzc_msg msg = {
		.opcode = opcode,
		.type = IB_QPT_RC,
		.sqpn = qp->ibqp.qp_num,
		.local = local,
		.remote_addr = remote_addr,
		.rkey = rkey,
		.imm_data = imm,
		.nowait = more && opcode == IB_UVERBS_WR_RDMA_WRITE,
	};
	struct bzc_resp_result rr;
	struct bzc_result res;
	u8 rnr_retry = 0, rnr_left = 0;
	bool first = true, answered;
	struct bzc_av av;

	for (;;) {
		mutex_lock(&qp->sq_mutex);
		/* The request's earlier messages: none has failed yet. */
		if (first_msg && qp->wire)
			qp->wire->bulk_status = IB_WC_SUCCESS;
		first_msg = false;
		if (READ_ONCE(qp->state) != IB_QPS_RTS) {
			res.status = bzc_bulk_qp_failed(qp, IB_WC_WR_FLUSH_ERR);
			mutex_unlock(&qp->sq_mutex);
			return res.status;
		}
		if (first) {
			rnr_retry = READ_ONCE(qp->rnr_retry);
			rnr_left = rnr_retry;
			first = false;
		}
		memset(&rr, 0, sizeof(rr));
		rr.syndrome = BZC_AETH_ACK;
		memset(&res, 0, sizeof(res));
		res.status = IB_WC_SUCCESS;
		/* Where it may sleep the wire answers in place: no defer. */
		answered = bzc_bulk_qp_address(qp, &av, &msg) &&
			   bzc_xport_send(&bzc_local_xport, qp, &msg, true, &rr);
		bzc_comp_answer(&msg, answered ? &rr : NULL, true, &res);
		if (!res.rnr)
			res.status = bzc_bulk_qp_failed(qp, res.status);
		if (res.rnr) {
			bzc_count(to_bdev(qp->ibqp.device), BZC_CNT_RNR_NAKS, 1);
			if (rnr_retry != 7 && !rnr_left--)
				res.status = IB_WC_RNR_RETRY_EXC_ERR;
		}
		if (res.status != IB_WC_SUCCESS)
			bzc_qp_error(qp, 0);
		mutex_unlock(&qp->sq_mutex);
		if (!res.rnr || res.status != IB_WC_SUCCESS)
			return res.status;
		if (READ_ONCE(*stop))
			return IB_WC_WR_FLUSH_ERR;
		fsleep(bzc_rnr_timer_usecs(res.rnr_timer));
	}
}
