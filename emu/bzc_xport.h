/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzc: the pieces of the data path and what passes between them
 * (docs/transport.md). The requester builds a message from a checked WQE,
 * a transport carries it to the responder, and the completer turns the
 * responder's answer into the WQE's completion.
 */
#ifndef BZC_XPORT_H
#define BZC_XPORT_H

#include "bzc_roce_hdr.h"
#include "bzc_sgl.h"

/*
 * One message, built by the requester from a WQE it has copied out of the
 * ring and checked, over an SGL whose lkeys it has resolved: nothing here
 * points into a ring. Everything the responder learns of the sender is in
 * it, as it would be in a packet's headers.
 */
struct bzc_msg {
	u8 opcode;			/* IB_UVERBS_WR_* of the WQE */
	u8 flags;			/* BZC_WQE_SOLICITED */
	enum ib_qp_type type;		/* the requester's QP type */
	u32 sqpn;			/* the requester's QPN */
	union ib_gid sgid;		/* and the GID it sends from */
	u32 dqpn;			/* the destination QPN */
	u32 qkey;			/* UD: the Q_Key */
	const struct bzc_av *av;	/* the destination: QP's or AH's */
	struct bzc_sgl *local;		/* the payload, or the READ sink */
	u64 remote_addr;		/* WRITE, READ, atomics */
	u32 rkey;
	__le32 imm_data;		/* immediate, or the rkey to invalidate */
	u64 compare_add;		/* atomics */
	u64 swap;			/* and ATOMIC_WRITE's 8 bytes */
	u32 length;			/* FLUSH: the range's bytes */
	u8 flush_type;			/* FLUSH: enum bzc_flush_type bits */
	u8 flush_level;			/* FLUSH: enum bzc_flush_level */
};

/*
 * The responder's answer as an AETH syndrome (bzc_roce_hdr.h): an ACK, an
 * RNR NAK | the responder's RNR timer, or a NAK | its code.
 */
#define BZC_AETH_NAK_INV_REQ	(BZC_AETH_NAK | BZC_NAK_INV_REQ)
#define BZC_AETH_NAK_REM_ACCESS	(BZC_AETH_NAK | BZC_NAK_REM_ACCESS)
#define BZC_AETH_NAK_REM_OP	(BZC_AETH_NAK | BZC_NAK_REM_OP)

struct bzc_resp_result {
	u8 syndrome;			/* BZC_AETH_* */
	u64 atomic_orig;		/* atomics: the value before */
};

/*
 * The responder's working memory, owned by the context it runs in (the
 * local transport: the requester's QP, under its sq_mutex).
 */
struct bzc_resp_scratch {
	struct bzc_sgl *sgl;		/* the target MR or receive buffers */
	struct bzc_recv_wqe *rqe;	/* a receive WQE, BZC_MAX_SGE SGEs */
};

/* What running a WQE produced, for its completion. */
struct bzc_result {
	enum ib_wc_status status;	/* for the requester */
	u64 byte_len;
	bool rnr;			/* no receive posted: retry later */
	u8 rnr_timer;			/* the responder's min_rnr_timer */
};

/*
 * A way to carry messages to their responders: the local transport
 * (bzc_local.c) to a QP in this kernel; RoCE v2 on the netdev later.
 */
struct bzc_xport_ops {
	/*
	 * Carry `msg` from `qp` (its sq_mutex held) and put the responder's
	 * answer in `res`, an ACK on entry. False: no answer came.
	 */
	bool (*send)(struct bzc_qp *qp, const struct bzc_msg *msg,
		     bool may_sleep, struct bzc_resp_result *res);
};

/* bzc_local.c: the local transport */
extern const struct bzc_xport_ops bzc_local_xport;
bool bzc_local_send(struct bzc_qp *qp, const struct bzc_msg *msg,
		    bool may_sleep, struct bzc_resp_result *res);

/* The loopback fast path stays a direct call. */
static inline bool bzc_xport_send(const struct bzc_xport_ops *xport,
				  struct bzc_qp *qp, const struct bzc_msg *msg,
				  bool may_sleep, struct bzc_resp_result *res)
{
	if (xport == &bzc_local_xport)
		return bzc_local_send(qp, msg, may_sleep, res);
	return xport->send(qp, msg, may_sleep, res);
}

/* bzc_resp.c: the responder */
bool bzc_resp_execute(struct bzc_qp *tqp, const struct bzc_msg *msg,
		      const struct bzc_resp_scratch *scratch, bool may_sleep,
		      struct bzc_resp_result *res);

/* bzc_placement.c: atomics, ATOMIC_WRITE and FLUSH at the responder */
u8 bzc_resp_atomic(struct bzc_qp *tqp, const struct bzc_msg *msg, u64 *orig);
u8 bzc_resp_atomic_write(struct bzc_qp *tqp, const struct bzc_msg *msg);
u8 bzc_resp_flush(struct bzc_qp *tqp, const struct bzc_msg *msg);

/* bzc_comp.c: the completer */
void bzc_comp_answer(const struct bzc_msg *msg,
		     const struct bzc_resp_result *rr, struct bzc_result *res);
bool bzc_comp_wqe(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
		  struct bzc_result *res);
void bzc_comp_flush(struct bzc_qp *qp, const struct bzc_send_wqe *wqe);

#endif /* BZC_XPORT_H */
