/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzc: the pieces of the data path and what passes between them
 * (docs/transport.md). The requester builds a message from a checked WQE,
 * a transport carries it to the responder, and the completer turns the
 * responder's answer into the WQE's completion.
 */
#ifndef BZC_XPORT_H
#define BZC_XPORT_H

#include <linux/timer.h>
#include <net/dst_cache.h>

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
	u32 xrc_srqn;			/* XRC: the SRQ at the target QP */
	u32 qkey;			/* UD: the Q_Key */
	const struct bzc_av *av;	/* the destination: QP's or AH's */
	struct bzc_sgl *local;		/* the payload, or the READ sink */
	u64 remote_addr;		/* WRITE, READ, atomics */
	u32 rkey;
	/* immediate (its value, as the WQE holds it), or rkey to invalidate */
	__le32 imm_data;
	u64 compare_add;		/* atomics */
	u64 swap;			/* and ATOMIC_WRITE's 8 bytes */
	u32 length;			/* FLUSH: the range's bytes */
	u8 flush_type;			/* FLUSH: enum bzc_flush_type bits */
	u8 flush_level;			/* FLUSH: enum bzc_flush_level */
	/*
	 * The WQE it comes from, or NULL (a bulk message). An RC message on
	 * the wire with a WQE joins the send window and completes later; one
	 * without is answered in place, unless nowait.
	 */
	const struct bzc_send_wqe *wqe;
	/*
	 * A bulk message that does not wait for its answer (RC on the wire):
	 * the send window takes its SGL, and a failure goes to the QP's
	 * bzc_wire.bulk_status and puts the QP in ERR. Elsewhere, as without.
	 */
	bool nowait;
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
	/*
	 * The requester's own SGEs lost a page of an ODP MR while the
	 * responder copied (the process unmapped it): the WQE fails with a
	 * local protection error, whatever the responder answers.
	 */
	bool local_lost;
	/*
	 * Not an answer: the transport must wait for one and the caller may
	 * not sleep. The requester hands the WQE to the QP's worker.
	 */
	bool defer;
	/*
	 * Not an answer either: the message joined the RC send window, with
	 * the WQE's copy and its SGL (the caller's SGL is left empty); it
	 * completes when its answer comes (bzc_wire_reap()).
	 */
	bool posted;
	/*
	 * Not sent: the send window has no room for it, a fence or an
	 * ordering rule holds it. Answers to the window kick the worker.
	 */
	bool wait;
};

/*
 * The responder's working memory, owned by the context it runs in (the
 * local transport: the requester's QP, under its sq_mutex).
 */
struct bzc_resp_scratch {
	struct bzc_sgl *sgl;		/* the target MR or receive buffers */
	struct bzc_recv_wqe *rqe;	/* a receive WQE, BZC_MAX_SGE SGEs */
	/*
	 * At an XRC target QP, set by bzc_resp_execute() for one message:
	 * the XRC SRQ it names, referenced. Its receive comes from there,
	 * completes on the SRQ's CQ, and its keys are checked in the SRQ's
	 * PD (the target QP has no PD, CQ or SRQ of its own).
	 */
	struct bzc_srq *xrc_srq;
};

#define BZC_RESP_RQE_BYTES	(sizeof(struct bzc_recv_wqe) + \
				 BZC_MAX_SGE * sizeof(struct bzc_sge))

/*
 * An RC or UC QP's route to its peer, kept between messages: both of its
 * directions (requests out, ACKs and READ responses back) go between the
 * same two GIDs. The pair is set by the first lookup and never changes,
 * so nothing has to be reset while packets are sent; dst_cache checks the
 * route against routing changes each time it hands it out.
 */
struct bzc_route {
	struct dst_cache cache;
	int state;			/* BZC_ROUTE_* */
	union ib_gid sgid, dgid;	/* the pair it holds, once SET */
};

enum { BZC_ROUTE_EMPTY, BZC_ROUTE_FILLING, BZC_ROUTE_SET };

/*
 * An RC or UC QP's state on the wire (bzc_roce_rc.c).
 *
 * The requester's part is the RC send window: the messages sent and not
 * yet completed, oldest first (struct bzc_wire_msg, private to
 * bzc_roce_rc.c), and what their answers did. The list changes (a message
 * posted or retired) only in the requester's context, under sq_mutex and
 * `lock`; the receive worker marks its messages answered and places READ
 * responses under `lock`; the retransmit timer only flags and kicks.
 * The responder's part is the receive worker's alone.
 */
#define BZC_WIRE_NONE		0xff	/* no message in progress */
#define BZC_WIRE_ATOMICS	16	/* atomic answers kept for duplicates */

struct bzc_wire {
	spinlock_t lock;		/* the requester's part, up to sync_rr */
	wait_queue_head_t wait;		/* a bulk message waiting in place */
	struct bzc_qp *qp;		/* for the timer */
	struct timer_list timer;	/* the oldest unacknowledged PSN's */
	struct list_head out;		/* messages in flight, oldest first */
	u32 snd_nxt;			/* the next PSN to put on the wire */
	/*
	 * RC: owns the QP's packets until the qdisc and the NIC are done with
	 * them (sk_wmem_alloc counts their bytes): bzc_wire_tx() holds the
	 * rest of the window back while too many wait there.
	 */
	struct socket *txsock;
	void (*old_write_space)(struct sock *sk);
	struct bzc_route route;		/* to the peer, both directions */
	unsigned long tx_flags;		/* BZC_WIRE_TX_* */
	u32 n_out;			/* how many */
	u32 n_wqes;			/* of them WQEs of the SQ */
	u32 n_rd;			/* of them READs and atomics */
	u32 acked;			/* the last PSN an ACK covered */
	u32 una;			/* the oldest PSN not acknowledged */
	u32 una_seen;			/* una at the last timeout or NAK */
	unsigned long deadline;		/* the timer's, while it is armed */
	u32 tries;			/* timeouts left without progress */
	u32 naks;			/* PSN sequence NAKs left likewise */
	bool event;			/* an answer for the requester */
	bool expired;			/* the timer ran out */
	bool dead;			/* the QP goes: no timer any more */
	bool blocked;			/* a message failed locally: send no more */
	bool room_wait;			/* a WQE waits for room: kick on an ACK */
	bool nak_pending;		/* a PSN sequence or RNR NAK to act on */
	u8 nak_syndrome;
	u32 nak_psn;			/* the PSN it named */
	bool rnr_pending;		/* go back to rnr_psn at rnr_until */
	bool rnr_counting;		/* rnr_left counts RNR NAKs in a row */
	u8 rnr_left;
	u32 rnr_psn;
	unsigned long rnr_until;
	/* A bulk message (no WQE), answered in place: its answer. */
	bool sync_done;
	bool sync_answered;
	struct bzc_resp_result sync_rr;
	/* The first failure of the bulk messages sent with nowait. */
	enum ib_wc_status bulk_status;

	u32 gen;			/* bzc_qp.resp_gen taken up */
	u32 epsn;			/* the PSN expected next */
	u32 msn;			/* messages completed */
	bool nak_sent;			/* a PSN sequence NAK for epsn */
	u8 cur;				/* kind of the message in progress */
	u64 off;			/* its bytes placed */
	u64 va;				/* WRITE: its RETH */
	u32 rkey;
	u32 dma_len;
	bool have_rqe;			/* SEND: rqe is its receive WQE */
	struct bzc_recv_wqe *rqe;
	struct bzc_sgl *sgl;		/* one packet's target */
	struct {
		u32 psn;
		bool valid;
		u64 orig;
	} atomics[BZC_WIRE_ATOMICS];
	u32 next_atomic;
};

/* What running a WQE produced, for its completion. */
struct bzc_result {
	enum ib_wc_status status;	/* for the requester */
	bool defer;			/* run it again in the worker */
	bool posted;			/* in the send window: completes later */
	bool wait;			/* held until the send window has room */
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
struct bzc_dev *bzc_dev_by_gid(struct bzc_dev *from, const union ib_gid *gid);
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

/* bzc_roce_tx.c: RoCE v2 on the netdev */
extern const struct bzc_xport_ops bzc_roce_xport;

/* Where a message's packets go: addresses, IP fields and the route. */
struct bzc_roce_dest {
	struct bzc_roce_ip ip;
	struct dst_entry *dst;
	bool v4;
	struct sock *owner;		/* charged for the packets, or NULL */
};

int bzc_roce_dest_get(struct bzc_dev *bdev, const union ib_gid *sgid,
		      const union ib_gid *dgid, struct bzc_route *rt,
		      struct bzc_roce_dest *d);
int bzc_roce_dest_for_msg(struct bzc_qp *qp, const struct bzc_msg *msg,
			  struct bzc_roce_dest *d);
void bzc_roce_dest_put(struct bzc_roce_dest *d);
int bzc_roce_xmit(struct bzc_dev *bdev, const struct bzc_roce_dest *d,
		  const struct bzc_roce_hdrs *h, struct bzc_cursor *payload,
		  gfp_t gfp);

/* bzc_roce_rc.c: RC and UC on the wire */
u32 bzc_qp_pmtu(struct bzc_qp *qp);
int bzc_wire_alloc(struct bzc_qp *qp, gfp_t gfp);
void bzc_wire_free(struct bzc_qp *qp);
bool bzc_wire_send(struct bzc_qp *qp, const struct bzc_msg *msg,
		   bool may_sleep, struct bzc_resp_result *res);
bool bzc_wire_reap(struct bzc_qp *qp);
void bzc_wire_tx(struct bzc_qp *qp, bool may_sleep);
void bzc_wire_reset(struct bzc_qp *qp);
void bzc_wire_stop(struct bzc_qp *qp);
bool bzc_wire_windowed(struct bzc_qp *qp, u8 opcode);

/* RC messages in the send window (a QP's sq_mutex held, or a snapshot). */
static inline u32 bzc_wire_inflight(struct bzc_qp *qp)
{
	return qp->wire ? READ_ONCE(qp->wire->n_out) : 0;
}

void bzc_wire_rx(struct bzc_dev *bdev, struct bzc_qp *qp,
		 const struct bzc_roce_ip *ip, const struct bzc_roce_hdrs *h,
		 const struct bzc_sgl *payload);

/* bzc_resp.c: the responder */
bool bzc_resp_accepts(struct bzc_qp *tqp, const struct bzc_msg *msg);
int bzc_resp_rq_take(struct bzc_qp *tqp, struct bzc_recv_wqe *rqe);
void bzc_resp_recv_complete(struct bzc_qp *tqp, const struct bzc_msg *msg,
			    const struct bzc_recv_wqe *rqe,
			    enum ib_wc_status status, u64 byte_len);
void bzc_resp_no_rqe(struct bzc_qp *tqp, const struct bzc_msg *msg,
		     int err, struct bzc_resp_result *res);
void bzc_resp_error(struct bzc_qp *tqp, const struct bzc_msg *msg,
		    u8 syndrome, struct bzc_resp_result *res);
u8 bzc_resp_rdma_target(struct bzc_qp *tqp, u32 rkey, u64 addr, u64 len,
			int access, struct bzc_sgl *sgl);
bool bzc_resp_execute(struct bzc_qp *tqp, const struct bzc_msg *msg,
		      const struct bzc_resp_scratch *scratch, bool may_sleep,
		      struct bzc_resp_result *res);

/* bzc_placement.c: atomics, ATOMIC_WRITE and FLUSH at the responder */
u8 bzc_resp_atomic(struct bzc_qp *tqp, const struct bzc_msg *msg, u64 *orig);
u8 bzc_resp_atomic_pd(struct bzc_qp *tqp, struct ib_pd *pd,
		      const struct bzc_msg *msg, u64 *orig);
u8 bzc_resp_atomic_write(struct bzc_qp *tqp, const struct bzc_msg *msg);
u8 bzc_resp_flush(struct bzc_qp *tqp, const struct bzc_msg *msg);

/* bzc_comp.c: the completer */
void bzc_comp_answer(const struct bzc_msg *msg,
		     const struct bzc_resp_result *rr, bool may_sleep,
		     struct bzc_result *res);
bool bzc_comp_wqe(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
		  struct bzc_result *res);
void bzc_comp_flush(struct bzc_qp *qp, const struct bzc_send_wqe *wqe);
void bzc_comp_retired(struct bzc_qp *qp, const struct bzc_send_wqe *wqe,
		      struct bzc_result *res);
u32 bzc_rnr_timer_usecs(u8 rnr_timer);

/* bzc_bulk_qp.c: bulk requests as RDMA messages on an RC QP */
enum ib_wc_status bzc_bulk_qp_msg(struct bzc_qp *qp, u8 opcode,
				  struct bzc_sgl *local, u64 remote_addr,
				  u32 rkey, __le32 imm, bool first_msg, bool more,
				  const bool *stop);

#endif /* BZC_XPORT_H */
