// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: XRC, the extended reliable connected transport (IBA 14.2.4 and
 * 10.2.9). An XRC initiator (INI) QP sends like an RC QP and names, in
 * each message, the XRC SRQ at the far end that the message is for; the
 * XRC target (TGT) QP it is connected to checks that the SRQ belongs to
 * its own XRC domain and takes the receive from that SRQ, which also
 * gives the PD the message's keys are checked in and the CQ its receive
 * completes on. A TGT QP has no PD, CQ, SRQ or rings of its own.
 *
 * What lives here: XRC domains (the core shares them between processes
 * through a file and counts their users), the device's table of XRC SRQs
 * by number, which senders look them up in, and the checks of a TGT QP's
 * creation. The responder's use of them is in bzc_resp.c.
 */
#include "bzc.h"

/* XRC SRQ numbers are 24 bits wide on the wire (XRCETH); 0 names none. */
#define BZC_MAX_SRQN	((1U << 24) - 1)

/*
 * An XRC domain holds nothing of bzc's: the core ties it to a file's
 * inode for sharing and keeps TGT QPs and XRC SRQs from outliving it.
 */
int bzc_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	return 0;
}

int bzc_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	return 0;
}

/**
 * bzc_xrc_srq_publish() - give an XRC SRQ its number and make it findable
 * @srq: the SRQ, otherwise ready to take receives
 * @udata: the creating process's
 *
 * Numbers are handed out cyclically, so a number just freed is not the
 * next SRQ's.
 *
 * Return: 0, or -ENOMEM when no number is free.
 */
int bzc_xrc_srq_publish(struct bzc_srq *srq, struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(srq->ibsrq.device);
	u32 srqn;
	int err;

	err = xa_alloc_cyclic(&bdev->srq_xa, &srqn, srq,
			      XA_LIMIT(1, BZC_MAX_SRQN), &bdev->srq_next,
			      bzc_gfp(udata));
	if (err < 0)
		return err == -EBUSY ? -ENOMEM : err;
	srq->ibsrq.ext.xrc.srq_num = srqn;
	return 0;
}

/* No sender finds the SRQ any more (those that did hold references). */
void bzc_xrc_srq_unpublish(struct bzc_srq *srq)
{
	xa_erase(&to_bdev(srq->ibsrq.device)->srq_xa,
		 srq->ibsrq.ext.xrc.srq_num);
}

/**
 * bzc_xrc_srq_get() - the XRC SRQ a message to a TGT QP names
 * @tqp: the XRC target QP the message arrived at
 * @srqn: the SRQ number the message carries (untrusted)
 *
 * The SRQ must exist on the TGT QP's device and belong to the TGT QP's
 * XRC domain: a message cannot reach SRQs of domains its connection's
 * owner has not opened.
 *
 * Return: the SRQ with a reference (bzc_srq_put()), or NULL: IBA's
 * invalid request (a NAK the requester sees as IBV_WC_REM_INV_REQ_ERR).
 */
struct bzc_srq *bzc_xrc_srq_get(struct bzc_qp *tqp, u32 srqn)
{
	struct bzc_dev *bdev = to_bdev(tqp->ibqp.device);
	struct bzc_srq *srq;

	xa_lock(&bdev->srq_xa);
	srq = xa_load(&bdev->srq_xa, srqn);
	if (srq && (srq->ibsrq.ext.xrc.xrcd != tqp->xrcd ||
		    !refcount_inc_not_zero(&srq->refcnt)))
		srq = NULL;
	xa_unlock(&bdev->srq_xa);
	if (!srq)
		ibdev_info_ratelimited(tqp->ibqp.device,
				       "QP %u: no XRC SRQ %u in its XRC domain\n",
				       tqp->ibqp.qp_num, srqn);
	return srq;
}

void bzc_srq_put(struct bzc_srq *srq)
{
	if (refcount_dec_and_test(&srq->refcnt))
		complete(&srq->released);
}

/**
 * bzc_xrc_tgt_check_init() - may an XRC TGT QP be created with @init?
 * @init: the attributes; its caps are set to what the QP has (nothing)
 *
 * The core creates a TGT QP for a process without its udata and without
 * PD, CQs or SRQ; it names only the XRC domain.
 *
 * Return: 0, -EINVAL without a domain, -EOPNOTSUPP with create flags.
 */
int bzc_xrc_tgt_check_init(struct ib_qp_init_attr *init)
{
	if (!init->xrcd || init->srq || init->send_cq || init->recv_cq)
		return -EINVAL;
	if (init->create_flags)
		return -EOPNOTSUPP;
	memset(&init->cap, 0, sizeof(init->cap));
	return 0;
}
