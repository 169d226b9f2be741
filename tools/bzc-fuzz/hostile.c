// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * What a hostile process does that the provider never would: random WQEs
 * and producer indices written into the shared rings followed by
 * doorbells, driver and core methods called through raw uverbs ioctls with
 * random and edge attributes, raw uverbs write() commands, mmap of the
 * uverbs fd at random offsets, unmapping and remapping registered memory,
 * and forked children that use inherited objects and get SIGKILLed.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl.h>
#include <rdma/bzc-abi.h>
#include <rdma/bzc_user_ioctl_cmds.h>

#include "fuzz.h"
#include "rings.h"

/* Where the ring headers keep the indices (prod is at 0 in both). */
#define WQ_CONS offsetof(struct bzc_wq_ring_hdr, cons)
#define CQ_CONS offsetof(struct bzc_cq_ring_hdr, cons)
#define CQ_ARM offsetof(struct bzc_cq_ring_hdr, arm)

/* Set around accesses that may fault (raw mappings): main.c's handler. */
extern __thread sigjmp_buf *fault_guard;

/* ---------------------------------------------------------------------- */
/* Raw ioctls                                                               */
/* ---------------------------------------------------------------------- */

#define MAX_ATTRS 8

struct raw_cmd {
	struct ib_uverbs_ioctl_hdr hdr;
	struct ib_uverbs_attr attrs[MAX_ATTRS];
};

static int raw_exec(struct ibv_context *ctx, struct raw_cmd *cmd, bool fix_len)
{
	if (fix_len)
		cmd->hdr.length = (uint16_t)(sizeof(cmd->hdr) +
				 cmd->hdr.num_attrs * sizeof(cmd->attrs[0]));
	if (ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &cmd->hdr))
		return errno;
	return 0;
}

int raw_qp_doorbell(struct ibv_context *ctx, uint32_t qp_handle)
{
	struct raw_cmd cmd = {
		.hdr = {
			.object_id = UVERBS_OBJECT_QP,
			.method_id = BZC_METHOD_QP_DOORBELL,
			.num_attrs = 1,
			.driver_id = BZC_RDMA_DRIVER_ID,
		},
		.attrs[0] = {
			.attr_id = BZC_ATTR_QP_DOORBELL_HANDLE,
			.flags = UVERBS_ATTR_F_MANDATORY,
			.data = qp_handle,
		},
	};

	return raw_exec(ctx, &cmd, true);
}

static int raw_chan_doorbell(struct ibv_context *ctx, uint32_t handle)
{
	struct raw_cmd cmd = {
		.hdr = {
			.object_id = BZC_OBJECT_BULK_CHAN,
			.method_id = BZC_METHOD_BULK_CHAN_DOORBELL,
			.num_attrs = 1,
			.driver_id = BZC_RDMA_DRIVER_ID,
		},
		.attrs[0] = {
			.attr_id = BZC_ATTR_BULK_CHAN_DOORBELL_HANDLE,
			.flags = UVERBS_ATTR_F_MANDATORY,
			.data = handle,
		},
	};

	return raw_exec(ctx, &cmd, true);
}

/* What else an attribute of a method carries (after enum obj_kind). */
enum { A_NEW = A_DM + 1, A_IN, A_OUT };

struct raw_method {
	const char *name;
	uint16_t obj, meth;
	/* A destroy method: the kind of object that a success destroys. */
	uint8_t destroys;
	struct { uint16_t id; uint8_t kind; uint16_t len; } a[6];
};

static const struct raw_method methods[] = {
	{ "bulk_caps", BZC_OBJECT_DEVICE, BZC_METHOD_QUERY_BULK_CAPS, A_NONE,
	  { { BZC_ATTR_QUERY_BULK_CAPS_RESP, A_OUT, sizeof(struct bzc_bulk_caps) } } },
	{ "mr_cache", BZC_OBJECT_DEVICE, BZC_METHOD_QUERY_MR_CACHE, A_NONE,
	  { { BZC_ATTR_QUERY_MR_CACHE_PD_HANDLE, A_PD, 0 },
	    { BZC_ATTR_QUERY_MR_CACHE_RESP, A_OUT, sizeof(struct bzc_mr_cache_stats) } } },
	{ "chan_create", BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_CREATE, A_NONE,
	  { { BZC_ATTR_BULK_CHAN_CREATE_HANDLE, A_NEW, 0 },
	    { BZC_ATTR_BULK_CHAN_CREATE_PD_HANDLE, A_PD, 0 },
	    { BZC_ATTR_BULK_CHAN_CREATE_CQ_HANDLE, A_CQ, 0 },
	    { BZC_ATTR_BULK_CHAN_CREATE_RECV_CQ_HANDLE, A_CQ, 0 },
	    { BZC_ATTR_BULK_CHAN_CREATE_CMD, A_IN, sizeof(struct bzc_bulk_chan_create_cmd) },
	    { BZC_ATTR_BULK_CHAN_CREATE_RESP, A_OUT, sizeof(struct bzc_bulk_chan_create_resp) } } },
	{ "chan_destroy", BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_DESTROY, A_CHAN,
	  { { BZC_ATTR_BULK_CHAN_DESTROY_HANDLE, A_CHAN, 0 } } },
	{ "chan_doorbell", BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_DOORBELL, A_NONE,
	  { { BZC_ATTR_BULK_CHAN_DOORBELL_HANDLE, A_CHAN, 0 } } },
	{ "chan_connect", BZC_OBJECT_BULK_CHAN, BZC_METHOD_BULK_CHAN_CONNECT, A_NONE,
	  { { BZC_ATTR_BULK_CHAN_CONNECT_HANDLE, A_CHAN, 0 },
	    { BZC_ATTR_BULK_CHAN_CONNECT_CMD, A_IN, sizeof(struct bzc_bulk_chan_connect_cmd) } } },
	{ "cmr_reg", BZC_OBJECT_CACHED_MR, BZC_METHOD_CACHED_MR_REG, A_NONE,
	  { { BZC_ATTR_CACHED_MR_REG_HANDLE, A_NEW, 0 },
	    { BZC_ATTR_CACHED_MR_REG_PD_HANDLE, A_PD, 0 },
	    { BZC_ATTR_CACHED_MR_REG_CMD, A_IN, sizeof(struct bzc_cached_mr_reg_cmd) },
	    { BZC_ATTR_CACHED_MR_REG_RESP, A_OUT, sizeof(struct bzc_cached_mr_reg_resp) } } },
	{ "cmr_release", BZC_OBJECT_CACHED_MR, BZC_METHOD_CACHED_MR_RELEASE, A_CMR,
	  { { BZC_ATTR_CACHED_MR_RELEASE_HANDLE, A_CMR, 0 } } },
	{ "qp_doorbell", UVERBS_OBJECT_QP, BZC_METHOD_QP_DOORBELL, A_NONE,
	  { { BZC_ATTR_QP_DOORBELL_HANDLE, A_QP, 0 } } },
	{ "dm_query", UVERBS_OBJECT_DM, BZC_METHOD_DM_QUERY, A_NONE,
	  { { BZC_ATTR_DM_QUERY_HANDLE, A_DM, 0 },
	    { BZC_ATTR_DM_QUERY_RESP, A_OUT, sizeof(struct bzc_dm_query_resp) } } },
	/*
	 * Core destroys behind the provider's back.  A success makes the
	 * thread forget the object (world_forget()): the provider's struct
	 * may point at objects that go next, and its calls would use them.
	 */
	{ "qp_destroy", UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY, A_QP,
	  { { UVERBS_ATTR_DESTROY_QP_HANDLE, A_QP, 0 },
	    { UVERBS_ATTR_DESTROY_QP_RESP, A_OUT, sizeof(struct ib_uverbs_destroy_qp_resp) } } },
	{ "cq_destroy", UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY, A_CQ,
	  { { UVERBS_ATTR_DESTROY_CQ_HANDLE, A_CQ, 0 },
	    { UVERBS_ATTR_DESTROY_CQ_RESP, A_OUT, sizeof(struct ib_uverbs_destroy_cq_resp) } } },
	{ "srq_destroy", UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY, A_SRQ,
	  { { UVERBS_ATTR_DESTROY_SRQ_HANDLE, A_SRQ, 0 },
	    { UVERBS_ATTR_DESTROY_SRQ_RESP, A_OUT, sizeof(struct ib_uverbs_destroy_srq_resp) } } },
	{ "mr_destroy", UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY, A_MR,
	  { { UVERBS_ATTR_DESTROY_MR_HANDLE, A_MR, 0 } } },
	{ "mw_destroy", UVERBS_OBJECT_MW, UVERBS_METHOD_MW_DESTROY, A_MW,
	  { { UVERBS_ATTR_DESTROY_MW_HANDLE, A_MW, 0 } } },
	{ "ah_destroy", UVERBS_OBJECT_AH, UVERBS_METHOD_AH_DESTROY, A_AH,
	  { { UVERBS_ATTR_DESTROY_AH_HANDLE, A_AH, 0 } } },
	{ "pd_destroy", UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY, A_PD,
	  { { UVERBS_ATTR_DESTROY_PD_HANDLE, A_PD, 0 } } },
};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

/* A handle of the kind asked for, or (sometimes) of another, or junk. */
static uint64_t rnd_handle(struct worker *w, int kind)
{
	struct world *wd = &w->wd;
	int s;

	if (chance(w, 10))
		kind = A_PD + (int)rnd_below(w, A_DM - A_PD + 1);
	if (chance(w, 8))
		return chance(w, 50) ? rnd_edge(w) : rnd_below(w, 64);
#define H(arr, expr)                                                   \
	do {                                                           \
		s = pick_used(w, SLOTS(wd->arr));                      \
		return s < 0 ? rnd_below(w, 16) : (expr);              \
	} while (0)
	switch (kind) {
	case A_PD: H(pd, wd->pd[s]->handle);
	case A_CQ: H(cq, wd->cq[s]->handle);
	case A_QP: H(qp, wd->qp[s]->handle);
	case A_SRQ: H(srq, wd->srq[s]->handle);
	case A_MR: H(mr, wd->mr[s]->handle);
	case A_MW: H(mw, wd->mw[s]->handle);
	case A_AH: H(ah, wd->ah[s]->handle);
	case A_CHAN: H(chan, chan_handle(wd->chan[s]));
	case A_CMR: H(cmr, cmr_handle(wd->cmr[s]));
	case A_DM: H(dm, wd->dm[s]->handle);
	default:
		return 0;
	}
#undef H
}

static uint64_t rnd_ptr(struct worker *w, void *good)
{
	switch (rnd_below(w, 20)) {
	case 0:
		return 0;
	case 1:
		return 0xffff888000000000ULL;
	case 2:
		return (uintptr_t)good + 4093;	/* into the guard page */
	default:
		return (uintptr_t)good;
	}
}

static void rnd_bytes(struct worker *w, void *buf, size_t len)
{
	uint64_t v;

	for (size_t i = 0; i < len; i += 8) {
		v = rnd(w);
		memcpy((uint8_t *)buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* A plausible command payload for a PTR_IN, with edge values. */
static void fill_in(struct worker *w, const struct raw_method *m, void *buf,
		    size_t len)
{
	struct bzc_cached_mr_reg_cmd *mr = buf;
	struct bzc_bulk_chan_create_cmd *chan = buf;
	struct bzc_bulk_chan_connect_cmd *conn = buf;
	struct world *wd = &w->wd;

	rnd_bytes(w, buf, len);
	if (m->meth == BZC_METHOD_CACHED_MR_REG && len >= sizeof(*mr)) {
		if (chance(w, 80)) {
			mr->comp_mask = chance(w, 90) ? 0 : rnd(w);
			mr->addr = (uintptr_t)w->arena + rnd_below(w, ARENA_LEN);
			mr->length = chance(w, 60) ?
				1 + rnd_below(w, ARENA_LEN / 2) : rnd_edge(w);
			mr->access = chance(w, 70) ? 7 : (uint32_t)rnd(w);
		}
		mr->length = cache_len(mr->length);
		mr->access = arena_access(w, mr->addr, mr->length, mr->access);
	} else if (m->meth == BZC_METHOD_BULK_CHAN_CREATE &&
		   len >= sizeof(*chan) && chance(w, 80)) {
		chan->comp_mask = chance(w, 90) ? 0 : rnd(w);
		chan->depth = chance(w, 60) ? 1 + rnd_below(w, 64) :
					      (uint32_t)rnd_edge(w);
	} else if (m->meth == BZC_METHOD_BULK_CHAN_CONNECT &&
		   len >= sizeof(*conn) && chance(w, 80)) {
		int g = wd->ngid ? (int)rnd_below(w, wd->ngid) : -1;

		conn->comp_mask = chance(w, 90) ? 0 : rnd(w);
		if (g >= 0 && chance(w, 80)) {
			memcpy(conn->remote_gid, &wd->gid[g], 16);
			conn->sgid_index = wd->gid_index[g];
		}
		conn->remote_chan = chance(w, 80) ?
			atomic_load(&shm->chan_num[rnd_below(w, NSHARED)]) :
			(uint32_t)rnd_edge(w);
	}
}

/*
 * Destroys the thread's object of @kind with @handle through the core's
 * method, well formed, behind the provider's back; a success makes the
 * thread forget it (its struct stays allocated).  Returns the errno.
 */
int raw_destroy(struct worker *w, int kind, uint32_t handle)
{
	const struct raw_method *m = NULL;
	struct raw_cmd cmd = {};
	size_t i;
	int ret;

	if (w->in_child)
		return NOTHING;
	for (i = 0; i < NMETHODS && !m; i++)
		if (methods[i].destroys == kind)
			m = &methods[i];
	if (!m)
		return NOTHING;
	cmd.hdr.object_id = m->obj;
	cmd.hdr.method_id = m->meth;
	cmd.hdr.driver_id = BZC_RDMA_DRIVER_ID;
	for (i = 0; i < 6 && m->a[i].kind != A_NONE; i++) {
		cmd.attrs[i].attr_id = m->a[i].id;
		cmd.attrs[i].flags = UVERBS_ATTR_F_MANDATORY;
		if (m->a[i].kind == A_OUT) {
			cmd.attrs[i].len = m->a[i].len;
			cmd.attrs[i].data = (uintptr_t)(w->scratch + 2048);
		} else {
			cmd.attrs[i].data = handle;
		}
	}
	cmd.hdr.num_attrs = (uint16_t)i;
	ret = raw_exec(w->wd.ctx, &cmd, true);
	if (!ret)
		world_forget(w, kind, handle);
	return ret;
}

int op_raw_ioctl(struct worker *w)
{
	const struct raw_method *m = &methods[rnd_below(w, NMETHODS)];
	uint8_t *in = w->scratch, *out = w->scratch + 2048;
	struct raw_cmd cmd = {};
	uint64_t victim = UINT64_MAX;
	bool fix_len = true;
	int i, n = 0, ret;

	/* A forked child shares the file: it would destroy its parent's objects. */
	if (w->in_child && m->destroys)
		return NOTHING;

	cmd.hdr.object_id = m->obj;
	cmd.hdr.method_id = m->meth;
	cmd.hdr.driver_id = chance(w, 97) ? BZC_RDMA_DRIVER_ID : (uint32_t)rnd(w);
	if (chance(w, 2))
		cmd.hdr.reserved1 = rnd(w);
	for (i = 0; i < 6 && m->a[i].kind != A_NONE; i++) {
		struct ib_uverbs_attr *a = &cmd.attrs[n];
		uint16_t len = m->a[i].len;

		if (chance(w, 5))
			continue;	/* a missing attribute */
		n++;
		a->attr_id = m->a[i].id;
		a->flags = chance(w, 90) ? UVERBS_ATTR_F_MANDATORY :
					   (uint16_t)rnd(w);
		switch (m->a[i].kind) {
		case A_NEW:
			break;
		case A_IN:
			if (chance(w, 10))
				len = (uint16_t)(chance(w, 50) ? len + rnd_below(w, 64) - 32 :
						 rnd(w) & 0x7ff);
			fill_in(w, m, in, len > 2048 ? 2048 : len);
			a->len = len;
			if (len <= 8)
				memcpy(&a->data, in, len);
			else
				a->data = rnd_ptr(w, in);
			break;
		case A_OUT:
			if (chance(w, 10))
				len = (uint16_t)(chance(w, 50) ? len + rnd_below(w, 64) - 32 :
						 rnd(w) & 0x7ff);
			a->len = len > 2048 ? 2048 : len;
			a->data = rnd_ptr(w, out);
			break;
		default:
			a->data = rnd_handle(w, m->a[i].kind);
			if (m->destroys && !i)
				victim = a->data;
			if (chance(w, 3))
				a->len = (uint16_t)rnd(w);
			break;
		}
		if (chance(w, 3))
			a->attr_id = (uint16_t)(chance(w, 50) ? rnd(w) :
						a->attr_id + rnd_below(w, 8));
	}
	if (chance(w, 3) && n < MAX_ATTRS) {	/* an attribute nobody asked for */
		cmd.attrs[n].attr_id = (uint16_t)rnd(w);
		cmd.attrs[n].len = (uint16_t)rnd_below(w, 64);
		cmd.attrs[n].data = (uintptr_t)in;
		n++;
	}
	cmd.hdr.num_attrs = (uint16_t)n;
	if (chance(w, 2)) {
		cmd.hdr.length = (uint16_t)rnd_edge(w);
		fix_len = false;
	}
	note(w, "%s attrs %d", m->name, n);
	ret = raw_exec(w->wd.ctx, &cmd, fix_len);
	/*
	 * The core destroys the object before the method copies its
	 * response: EFAULT (a bad response pointer) destroyed it too.
	 */
	if ((!ret || ret == EFAULT) && m->destroys && victim != UINT64_MAX)
		world_forget(w, m->destroys, (uint32_t)victim);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Raw write() commands: the doorbells of the write interface               */
/* ---------------------------------------------------------------------- */

int op_raw_write(struct worker *w)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		union {
			struct ib_uverbs_post_send send;
			struct ib_uverbs_post_recv recv;
			struct ib_uverbs_post_srq_recv srq;
		};
		uint8_t wrs[256];
	} c = {};
	struct ib_uverbs_post_send_resp resp;
	struct ibv_qp *qp = any_qp(w);
	int which = (int)rnd_below(w, 3), s;
	uint32_t wr_count = chance(w, 70) ? 0 : (uint32_t)rnd_below(w, 3);
	size_t len;

	for (size_t i = 0; i < sizeof(c.wrs); i++)
		c.wrs[i] = (uint8_t)rnd(w);
	switch (which) {
	case 0:
		c.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
		c.send.response = (uintptr_t)&resp;
		c.send.qp_handle = (uint32_t)(qp ? qp->handle : rnd_below(w, 16));
		c.send.wr_count = wr_count;
		c.send.sge_count = (uint32_t)rnd_below(w, 3);
		c.send.wqe_size = chance(w, 80) ? sizeof(struct ib_uverbs_send_wr) :
						  (uint32_t)rnd_edge(w);
		len = sizeof(c.hdr) + sizeof(c.send) + sizeof(c.wrs);
		break;
	case 1:
		c.hdr.command = IB_USER_VERBS_CMD_POST_RECV;
		c.recv.response = (uintptr_t)&resp;
		c.recv.qp_handle = (uint32_t)(qp ? qp->handle : rnd_below(w, 16));
		c.recv.wr_count = wr_count;
		c.recv.sge_count = (uint32_t)rnd_below(w, 3);
		c.recv.wqe_size = chance(w, 80) ? sizeof(struct ib_uverbs_recv_wr) :
						  (uint32_t)rnd_edge(w);
		len = sizeof(c.hdr) + sizeof(c.recv) + sizeof(c.wrs);
		break;
	default:
		s = pick_used(w, SLOTS(w->wd.srq));
		c.hdr.command = IB_USER_VERBS_CMD_POST_SRQ_RECV;
		c.srq.response = (uintptr_t)&resp;
		c.srq.srq_handle = (uint32_t)(s >= 0 ? w->wd.srq[s]->handle :
					      rnd_below(w, 16));
		c.srq.wr_count = wr_count;
		c.srq.sge_count = (uint32_t)rnd_below(w, 3);
		c.srq.wqe_size = chance(w, 80) ? sizeof(struct ib_uverbs_recv_wr) :
						 (uint32_t)rnd_edge(w);
		len = sizeof(c.hdr) + sizeof(c.srq) + sizeof(c.wrs);
		break;
	}
	c.hdr.in_words = (uint16_t)(len / 4);
	c.hdr.out_words = sizeof(resp) / 4;
	note(w, "cmd %u wr_count %u", c.hdr.command, wr_count);
	if (write(w->wd.ctx->cmd_fd, &c, len) < 0)
		return errno;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Ring scribbles                                                           */
/* ---------------------------------------------------------------------- */

static void put32(void *p, uint32_t v)
{
	__atomic_store_n((uint32_t *)p, v, __ATOMIC_RELEASE);
}

static uint32_t get32(const void *p)
{
	return __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
}

/* A new producer index: plausible, one past the ring, or junk. */
static uint32_t rnd_prod(struct worker *w, const struct ring *r, uint32_t from,
			 uint32_t k)
{
	uint32_t cons = get32(r->base + WQ_CONS);

	switch (rnd_below(w, 10)) {
	case 0:
		return cons + r->entries + (uint32_t)rnd_below(w, 3);
	case 1:
		return (uint32_t)rnd(w);
	case 2:
		return cons - 1;
	default:
		return from + k;
	}
}

/* Send WQEs: a random slot image, or a header that looks right with edges. */
static void scribble_send_wqe(struct worker *w, uint8_t *slot, uint32_t size)
{
	struct bzc_send_wqe *q = (struct bzc_send_wqe *)slot;
	struct bzc_sge *sge = (struct bzc_sge *)(slot + BZC_SEND_WQE_DATA_OFFSET);
	uint32_t nsge = (size - BZC_SEND_WQE_DATA_OFFSET) / sizeof(*sge), i;
	struct ibv_mr *mr = any_mr(w);

	rnd_bytes(w, slot, size);
	if (chance(w, 25))
		return;
	q->opcode = (uint8_t)rnd_below(w, chance(w, 90) ? 16 : 256);
	q->flags = (uint8_t)rnd_below(w, 32);
	q->num_sge = (uint8_t)(chance(w, 80) ? rnd_below(w, nsge + 1) : rnd(w));
	q->inline_len = (uint32_t)(chance(w, 70) ? rnd_below(w, size) : rnd_edge(w));
	q->rdma.rkey = rnd_key(w);
	for (i = 0; i < nsge && i < q->num_sge; i++) {
		if (mr && chance(w, 70)) {
			sge[i].addr = (uintptr_t)mr->addr + rnd_below(w, mr->length + 1);
			sge[i].length = (uint32_t)rnd_below(w, mr->length + 1);
			sge[i].lkey = mr->lkey;
		} else {
			sge[i].length = (uint32_t)rnd_edge(w);
			sge[i].lkey = rnd_key(w);
		}
	}
}

static void scribble_recv_wqe(struct worker *w, uint8_t *slot, uint32_t size)
{
	struct bzc_recv_wqe *q = (struct bzc_recv_wqe *)slot;
	struct bzc_sge *sge = (struct bzc_sge *)(q + 1);
	uint32_t nsge = (size - sizeof(*q)) / sizeof(*sge), i;
	struct ibv_mr *mr = any_mr(w);

	rnd_bytes(w, slot, size);
	if (chance(w, 25))
		return;
	q->num_sge = (uint8_t)(chance(w, 80) ? rnd_below(w, nsge + 1) : rnd(w));
	for (i = 0; i < nsge && i < q->num_sge; i++) {
		if (mr && chance(w, 70)) {
			sge[i].addr = (uintptr_t)mr->addr + rnd_below(w, mr->length + 1);
			sge[i].length = (uint32_t)rnd_below(w, mr->length + 1);
			sge[i].lkey = mr->lkey;
		} else {
			sge[i].length = (uint32_t)rnd_edge(w);
			sge[i].lkey = rnd_key(w);
		}
	}
}

static void scribble_bulk_wqe(struct worker *w, uint8_t *slot, uint32_t size)
{
	struct bzc_bulk_wqe *q = (struct bzc_bulk_wqe *)slot;
	struct bzc_bulk_sge *sge = (struct bzc_bulk_sge *)(slot + BZC_BULK_WQE_SGE_OFFSET);
	uint32_t nsge = (size - BZC_BULK_WQE_SGE_OFFSET) / sizeof(*sge), i;

	rnd_bytes(w, slot, size);
	if (chance(w, 25))
		return;
	q->opcode = (uint8_t)rnd_below(w, chance(w, 90) ? 4 : 256);
	q->flags = (uint8_t)rnd_below(w, 4);
	q->num_sge = (uint16_t)(chance(w, 80) ? rnd_below(w, nsge + 1) : rnd(w));
	q->rkey = rnd_key(w);
	q->remote_chan = atomic_load(&shm->chan_num[rnd_below(w, NSHARED)]);
	q->remote_addr = (uintptr_t)w->arena + rnd_below(w, ARENA_LEN);
	for (i = 0; i < nsge && i < q->num_sge; i++) {
		sge[i].addr = (uintptr_t)w->arena + rnd_below(w, ARENA_LEN);
		sge[i].length = chance(w, 70) ? rnd_below(w, 256 << 10) : rnd_edge(w);
		sge[i].lkey = chance(w, 60) ? 0 : rnd_key(w);
		/* rkey 0: a COPY's far range comes from the cache too. */
		if (!sge[i].lkey || !q->rkey)
			sge[i].length = cache_len(sge[i].length);
	}
}

/* Write 1-4 WQEs from the kernel's cons on, move prod, return it. */
static uint32_t scribble_wq(struct worker *w, struct ring *r,
			    void (*fill)(struct worker *, uint8_t *, uint32_t))
{
	uint32_t from = get32(r->base + WQ_CONS), k = 1 + (uint32_t)rnd_below(w, 4);
	uint32_t i, prod;

	if (chance(w, 50))
		from = get32(r->base);
	for (i = 0; i < k; i++)
		fill(w, r->slots + (size_t)((from + i) & (r->entries - 1)) *
				       r->slot_size, r->slot_size);
	prod = rnd_prod(w, r, from, k);
	put32(r->base, prod);
	if (chance(w, 3))
		put32(r->base + WQ_CONS, (uint32_t)rnd(w));	/* the kernel's */
	note(w, "entries %u from %u prod %u", r->entries, from, prod);
	return prod;
}

int op_sq_scribble(struct worker *w)
{
	struct ibv_qp *qp = any_qp(w);
	struct ring r;

	if (!qp || !ring_sq(qp, &r))
		return NOTHING;
	note(w, "qpn %u", qp->qp_num);
	scribble_wq(w, &r, scribble_send_wqe);
	return raw_qp_doorbell(w->wd.ctx, qp->handle);
}

int op_rq_scribble(struct worker *w)
{
	struct ibv_qp *qp = any_qp(w);
	struct ring r;

	if (!qp || !ring_rq(qp, &r))
		return NOTHING;
	note(w, "qpn %u", qp->qp_num);
	scribble_wq(w, &r, scribble_recv_wqe);
	return 0;
}

int op_srq_scribble(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.srq));
	struct ring r;

	if (s < 0 || !ring_srq(w->wd.srq[s], &r))
		return NOTHING;
	scribble_wq(w, &r, scribble_recv_wqe);
	return 0;
}

int op_cq_scribble(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.cq));
	struct ring r;

	if (s < 0 || !ring_cq(w->wd.cq[s], &r))
		return NOTHING;
	switch (rnd_below(w, 4)) {
	case 0:
		put32(r.base + CQ_CONS, (uint32_t)rnd(w));
		break;
	case 1:
		put32(r.base + CQ_ARM, (uint32_t)rnd(w));
		break;
	case 2:
		put32(r.base + CQ_CONS, get32(r.base) - r.entries - 1);
		break;
	default:
		rnd_bytes(w, r.slots + (size_t)rnd_below(w, r.entries) *
				     r.slot_size, r.slot_size);
		break;
	}
	return 0;
}

int op_bulk_scribble(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.chan));
	struct ring r;

	if (s < 0 || !ring_chan(w->wd.chan[s], &r))
		return NOTHING;
	scribble_wq(w, &r, scribble_bulk_wqe);
	return raw_chan_doorbell(w->wd.ctx, chan_handle(w->wd.chan[s]));
}

/* ---------------------------------------------------------------------- */
/* mmap of the uverbs fd                                                    */
/* ---------------------------------------------------------------------- */

int op_raw_mmap(struct worker *w)
{
	int s = (int)rnd_below(w, NSLOT);
	size_t len = chance(w, 90) ? (1 + rnd_below(w, 16)) * 4096 :
				     (size_t)rnd_edge(w);
	off_t off = chance(w, 90) ? (off_t)rnd_below(w, 64) * 4096 :
				    (off_t)rnd_edge(w);
	int prot = chance(w, 80) ? PROT_READ | PROT_WRITE : PROT_READ;
	int flags = chance(w, 90) ? MAP_SHARED : MAP_PRIVATE;
	sigjmp_buf jb;
	void *p;

	if (w->wd.map[s]) {
		munmap(w->wd.map[s], w->wd.map_len[s]);
		w->wd.map[s] = NULL;
	}
	note(w, "off 0x%llx len 0x%zx prot %d flags %d",
	     (unsigned long long)off, len, prot, flags);
	p = mmap(NULL, len, prot, flags, w->wd.ctx->cmd_fd, off);
	if (p == MAP_FAILED)
		return errno;
	if (!sigsetjmp(jb, 1)) {
		fault_guard = &jb;
		(void)*(volatile uint8_t *)p;
		(void)*((volatile uint8_t *)p + len - 1);
		if (prot & PROT_WRITE && chance(w, 30))
			*(volatile uint32_t *)p = (uint32_t)rnd(w);
	} else {
		note(w, "fault");
	}
	fault_guard = NULL;
	if (chance(w, 50)) {
		munmap(p, len);
	} else {
		w->wd.map[s] = p;
		w->wd.map_len[s] = len;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Registered memory changing under the device                              */
/* ---------------------------------------------------------------------- */

int op_mem_churn(struct worker *w)
{
	size_t pages = 1 + rnd_below(w, 64);
	size_t off = rnd_below(w, ARENA_LEN / 4096 - pages + 1) * 4096;
	uint8_t *p = w->arena + off;
	size_t len = pages * 4096;
	int how = (int)rnd_below(w, 4), ret = 0;

	note(w, "how %d off 0x%zx len 0x%zx", how, off, len);
	switch (how) {
	case 0:
		ret = madvise(p, len, MADV_DONTNEED) ? errno : 0;
		break;
	case 1:
		if (mmap(p, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			ret = errno;
		break;
	case 2:
		/* Read-only for a moment: registrations for write now fail. */
		mprotect(p, len, PROT_READ);
		if (w->wd.ctx && chance(w, 50)) {
			struct ibv_pd *pd = get_pd(w);
			struct ibv_mr *mr = pd ? ibv_reg_mr(pd, p, len,
					IBV_ACCESS_LOCAL_WRITE) : NULL;

			ret = mr ? 0 : errno;
			if (mr)
				ibv_dereg_mr(mr);
		}
		mprotect(p, len, PROT_READ | PROT_WRITE);
		break;
	default:
		memset(p, (int)rnd_below(w, 256), len);
		break;
	}
	return ret;
}

/* ---------------------------------------------------------------------- */
/* fork                                                                     */
/* ---------------------------------------------------------------------- */

/*
 * The child uses what it inherited with system calls only (another
 * thread may have held a provider lock at fork time), then exits; the
 * parent waits for it or SIGKILLs it at a random moment.
 */
int op_fork_child(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.chan)), q = pick_used(w, SLOTS(w->wd.qp));
	unsigned int delay = (unsigned int)rnd_below(w, 3000);
	bool kill_it = chance(w, 50);
	uint32_t qh = q >= 0 ? w->wd.qp[q]->handle : 0;
	uint32_t ch = s >= 0 ? chan_handle(w->wd.chan[s]) : 0;
	int status, ret = 0;
	pid_t pid;

	note(w, "qp %d chan %d kill %d after %u us", q, s, kill_it, delay);
	pid = fork();
	if (pid < 0)
		return errno;
	if (!pid) {
		int i;

		alarm(10);
		oplog_detach(w);
		w->in_child = true;
		for (i = 0; i < 8; i++) {
			w->arena[rnd_below(w, ARENA_LEN)] = 1;	/* COW */
			if (q >= 0)
				raw_qp_doorbell(w->wd.ctx, qh);
			if (s >= 0)
				raw_chan_doorbell(w->wd.ctx, ch);
			if (chance(w, 30))
				op_raw_ioctl(w);
		}
		_exit(0);
	}
	if (kill_it) {
		struct timespec ts = { 0, (long)delay * 1000 };

		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
	}
	if (waitpid(pid, &status, 0) < 0)
		ret = errno;
	else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
		ret = EFAULT;	/* the child crashed: seen in the counts */
	return ret;
}
