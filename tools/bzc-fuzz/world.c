// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * A thread's world: one open context with a few objects of every kind, and
 * the ops that create, use and destroy them through ibv_* and bzcdv_*.
 * Arguments are mostly plausible (so the ops get past the first check and
 * reach the device) with edge values mixed in; the *_edge ops use edge
 * values throughout.  Keys and QP numbers come from the shared tables as
 * often as from the thread's own objects, so threads and processes aim
 * at each other.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "rings.h"

static int err_or(int ret)
{
	return ret ? (errno ? errno : EIO) : 0;
}

int pick_slot(struct worker *w, void *const *slots)
{
	int i, start = (int)rnd_below(w, NSLOT);

	for (i = 0; i < NSLOT; i++)
		if (!slots[(start + i) % NSLOT])
			return (start + i) % NSLOT;
	return -1;
}

int pick_used(struct worker *w, void *const *slots)
{
	int i, start = (int)rnd_below(w, NSLOT);

	for (i = 0; i < NSLOT; i++)
		if (slots[(start + i) % NSLOT])
			return (start + i) % NSLOT;
	return -1;
}

void publish_qpn(struct worker *w, uint32_t qpn)
{
	atomic_store(&shm->qpn[rnd_below(w, NSHARED)], qpn);
}

void publish_key(struct worker *w, uint32_t rkey, uint64_t addr, uint64_t len)
{
	struct shared_key *k = &shm->key[rnd_below(w, NSHARED)];

	k->rkey = rkey;
	k->addr = addr;
	k->len = len;
}

static uint32_t rnd_qpn(struct worker *w)
{
	struct ibv_qp *qp;

	switch (rnd_below(w, 10)) {
	case 0:
		return (uint32_t)rnd(w) & 0xffffff;
	case 1:
		return rnd_below(w, 4);	/* QP0, QP1 (the kernel's GSI), ... */
	case 2: case 3: case 4: case 5:
		return atomic_load(&shm->qpn[rnd_below(w, NSHARED)]);
	default:
		qp = any_qp(w);
		return qp ? qp->qp_num : 0;
	}
}

/* An arena range: offset and length inside the thread's arena. */
static void arena_range(struct worker *w, uint64_t *addr, uint64_t *len,
			uint64_t max)
{
	uint64_t off = chance(w, 50) ? rnd_below(w, ARENA_LEN / 4096) * 4096 :
				       rnd_below(w, ARENA_LEN);
	uint64_t room = ARENA_LEN - off;

	if (max > room)
		max = room;
	*addr = (uintptr_t)w->arena + off;
	*len = chance(w, 10) ? room : 1 + rnd_below(w, max);
}

/*
 * The access flags a registration of [addr, addr + len) keeps.  The device
 * writes what an MR grants, and every thread aims RECVs, WRITEs and
 * atomics at the MRs it knows of: a writable MR past the arena would let
 * them scribble over this process's own stacks and malloc arenas (the
 * pages after a thread's arena; an ODP MR reaches them across an unmapped
 * gap).  Outside the arena an MR is registered read-only.
 */
unsigned int arena_access(const struct worker *w, uint64_t addr, uint64_t len,
			  unsigned int access)
{
	uint64_t start = (uintptr_t)w->arena;

	if (addr >= start && len <= ARENA_LEN && addr - start <= ARENA_LEN - len)
		return access;
	return access & ~(unsigned int)(IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_ATOMIC);
}

unsigned int rnd_access(struct worker *w)
{
	static const unsigned int bits[] = {
		IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE,
		IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_ATOMIC,
		IBV_ACCESS_MW_BIND, IBV_ACCESS_ZERO_BASED,
		IBV_ACCESS_ON_DEMAND, IBV_ACCESS_RELAXED_ORDERING,
	};
	unsigned int a = 0, i;

	if (chance(w, 5))
		return (unsigned int)rnd(w);
	if (chance(w, 60))
		a = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	for (i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
		if (chance(w, 20))
			a ^= bits[i];
	return a;
}

/* ---------------------------------------------------------------------- */
/* Open and close                                                           */
/* ---------------------------------------------------------------------- */

/*
 * Reads and acknowledges every async and completion event, so destroy
 * calls (which wait for the acknowledgement of every event reported) never
 * wait for this thread.
 */
static void *drainer_main(void *arg)
{
	struct worker *w = arg;
	struct world *wd = &w->wd;
	struct pollfd pfd[2] = {
		{ .fd = wd->ctx->async_fd, .events = POLLIN },
		{ .fd = wd->ch ? wd->ch->fd : -1, .events = POLLIN },
	};
	struct ibv_async_event ev;
	struct ibv_cq *cq;
	void *cq_ctx;

	while (!atomic_load(&wd->drainer_stop)) {
		if (poll(pfd, 2, 50) <= 0)
			continue;
		pthread_mutex_lock(&wd->ev_lock);
		if ((pfd[0].revents & POLLIN) &&
		    !ibv_get_async_event(wd->ctx, &ev)) {
			count(OP_ASYNC_EVENT, ev.event_type);
			if (ev.event_type == IBV_EVENT_DEVICE_FATAL)
				wd->dead = true;
			ibv_ack_async_event(&ev);
		}
		if ((pfd[1].revents & POLLIN) &&
		    !ibv_get_cq_event(wd->ch, &cq, &cq_ctx))
			ibv_ack_cq_events(cq, 1);
		pthread_mutex_unlock(&wd->ev_lock);
		if (pfd[0].revents & (POLLERR | POLLHUP))
			wd->dead = true;
	}
	return NULL;
}

/*
 * Destroy a CQ, QP or SRQ (kind A_CQ, A_QP or A_SRQ) under the drainer's
 * lock (struct world's ev_lock).
 */
static int destroy_evented(struct world *wd, int kind, void *obj)
{
	int ret;

	pthread_mutex_lock(&wd->ev_lock);
	switch (kind) {
	case A_CQ:
		ret = ibv_destroy_cq(obj);
		break;
	case A_QP:
		ret = ibv_destroy_qp(obj);
		break;
	default:
		ret = ibv_destroy_srq(obj);
		break;
	}
	pthread_mutex_unlock(&wd->ev_lock);
	return ret;
}

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int world_open(struct worker *w)
{
	struct world *wd = &w->wd;
	struct ibv_device **list;
	int n, i, k, start, ret = ENODEV;

	memset(wd, 0, sizeof(*wd));
	pthread_mutex_init(&wd->ev_lock, NULL);
	list = ibv_get_device_list(&n);
	if (!list)
		return errno ? errno : ENODEV;
	start = (int)rnd_below(w, w->ndevices);
	for (k = 0; k < w->ndevices && !wd->ctx; k++) {
		const char *want = w->devices[(start + k) % w->ndevices];

		for (i = 0; i < n; i++)
			if (!strcmp(ibv_get_device_name(list[i]), want))
				break;
		if (i == n)
			continue;
		note(w, "%s", want);
		wd->ctx = ibv_open_device(list[i]);
		if (!wd->ctx)
			ret = errno ? errno : EIO;
	}
	ibv_free_device_list(list);
	if (!wd->ctx)
		return ret;

	for (i = 0; i < 4; i++) {
		union ibv_gid gid;

		if (!ibv_query_gid(wd->ctx, 1, i, &gid) &&
		    (gid.global.subnet_prefix || gid.global.interface_id)) {
			wd->gid_index[wd->ngid] = (uint8_t)i;
			wd->gid[wd->ngid++] = gid;
		}
	}
	wd->ch = ibv_create_comp_channel(wd->ctx);
	set_nonblock(wd->ctx->async_fd);
	if (wd->ch)
		set_nonblock(wd->ch->fd);
	atomic_store(&wd->drainer_stop, 0);
	wd->drainer_running = !pthread_create(&wd->drainer, NULL,
					      drainer_main, w);
	return 0;
}

static void unmap_raw(struct world *wd)
{
	int i;

	for (i = 0; i < NSLOT; i++)
		if (wd->map[i]) {
			munmap(wd->map[i], wd->map_len[i]);
			wd->map[i] = NULL;
		}
	for (i = 0; i < 4 * NSLOT; i++)
		if (wd->zombie[i]) {
			munmap(wd->zombie[i], wd->zombie_len[i]);
			wd->zombie[i] = NULL;
		}
}

void world_forget(struct worker *w, int kind, uint32_t handle)
{
	struct world *wd = &w->wd;
	void *base[2];
	size_t len[2];
	int i, k, n, z;

#define FORGET(arr, h)                                                 \
	for (i = 0; i < NSLOT; i++)                                    \
		if (wd->arr[i] && (h) == handle) {                     \
			obj = wd->arr[i];                              \
			wd->arr[i] = NULL;                             \
		}
	void *obj = NULL;

	switch (kind) {
	case A_PD: FORGET(pd, wd->pd[i]->handle); break;
	case A_CQ: FORGET(cq, wd->cq[i]->handle); break;
	case A_QP: FORGET(qp, wd->qp[i]->handle); break;
	case A_SRQ: FORGET(srq, wd->srq[i]->handle); break;
	case A_MR: FORGET(mr, wd->mr[i]->handle); break;
	case A_MW: FORGET(mw, wd->mw[i]->handle); break;
	case A_AH: FORGET(ah, wd->ah[i]->handle); break;
	case A_CHAN: FORGET(chan, chan_handle(wd->chan[i])); break;
	case A_CMR: FORGET(cmr, cmr_handle(wd->cmr[i])); break;
	case A_DM: break;	/* no raw method destroys a DM */
	}
#undef FORGET
	if (!obj)
		return;
	note(w, "forgets it");
	n = rings_take(kind, obj, base, len);
	for (k = 0; k < n; k++) {
		z = (int)rnd_below(w, 4 * NSLOT);
		if (wd->zombie[z])
			munmap(wd->zombie[z], wd->zombie_len[z]);
		wd->zombie[z] = base[k];
		wd->zombie_len[z] = len[k];
	}
}

/*
 * Whether an object of the world was created on @parent (a PD, CQ or
 * SRQ).  Such a parent is destroyed only through the core's method
 * (raw_destroy()), never its verb: once the device is removed the kernel
 * lets every destroy succeed, whatever still uses the object, so the verb
 * would free a struct its children still point at (seen: advise_mr
 * reading a freed mr->pd).
 */
static bool is_parent(const struct world *wd, const void *parent)
{
	int i;

	for (i = 0; i < NSLOT; i++) {
		const struct ibv_qp *qp = wd->qp[i];
		const struct bzcdv_bulk_chan *chan = wd->chan[i];

		if ((wd->mr[i] && wd->mr[i]->pd == parent) ||
		    (wd->mw[i] && wd->mw[i]->pd == parent) ||
		    (wd->ah[i] && wd->ah[i]->pd == parent) ||
		    (wd->srq[i] && wd->srq[i]->pd == parent) ||
		    (wd->cmr[i] && wd->cmr[i]->pd == parent))
			return true;
		if (qp && (qp->pd == parent || qp->send_cq == parent ||
			   qp->recv_cq == parent || qp->srq == parent))
			return true;
		if (chan && (chan->pd == parent || chan->cq == parent ||
			     chan->recv_cq == parent))
			return true;
	}
	return false;
}

/*
 * Orderly: destroy everything, dependents first (what still fails is
 * abandoned below).  Otherwise abandon it all: unmap the rings (each
 * mapping holds the uverbs file open) and close, so the kernel's cleanup
 * of a closed file with live objects runs.
 */
void world_close(struct worker *w, bool orderly)
{
	struct world *wd = &w->wd;
	int i, pass;

	if (!wd->ctx)
		return;
	/* A step that hangs shows in the op log as the last note. */
	for (pass = 0; orderly && pass < 2; pass++) {
		note(w, "pass %d", pass);
		for (i = 0; i < NSLOT; i++) {
			if (wd->cmr[i] && !bzcdv_release_mr_cached(wd->cmr[i]))
				wd->cmr[i] = NULL;
			if (wd->chan[i] && !bzcdv_destroy_bulk_chan(wd->chan[i]))
				wd->chan[i] = NULL;
			if (wd->mw[i] && !ibv_dealloc_mw(wd->mw[i]))
				wd->mw[i] = NULL;
			if (wd->qp[i] && !destroy_evented(wd, A_QP, wd->qp[i]))
				wd->qp[i] = NULL;
			if (wd->ah[i] && !ibv_destroy_ah(wd->ah[i]))
				wd->ah[i] = NULL;
		}
		for (i = 0; i < NSLOT; i++) {
			if (wd->srq[i] && !is_parent(wd, wd->srq[i]) &&
			    !destroy_evented(wd, A_SRQ, wd->srq[i]))
				wd->srq[i] = NULL;
			if (wd->mr[i] && !ibv_dereg_mr(wd->mr[i]))
				wd->mr[i] = NULL;
		}
		for (i = 0; i < NSLOT; i++) {
			if (wd->dm[i] && !ibv_free_dm(wd->dm[i]))
				wd->dm[i] = NULL;
			if (wd->cq[i] && !is_parent(wd, wd->cq[i]) &&
			    !destroy_evented(wd, A_CQ, wd->cq[i]))
				wd->cq[i] = NULL;
			if (wd->pd[i] && !is_parent(wd, wd->pd[i]) &&
			    !ibv_dealloc_pd(wd->pd[i]))
				wd->pd[i] = NULL;
		}
	}
	if (wd->drainer_running) {
		atomic_store(&wd->drainer_stop, 1);
		pthread_join(wd->drainer, NULL);
	}
	for (i = 0; i < NSLOT; i++) {
		if (wd->qp[i])
			rings_unmap_qp(wd->qp[i]);
		if (wd->cq[i])
			rings_unmap_cq(wd->cq[i]);
		if (wd->srq[i])
			rings_unmap_srq(wd->srq[i]);
		if (wd->chan[i])
			rings_unmap_chan(wd->chan[i]);
	}
	unmap_raw(wd);
	/* Leaves the comp channel's fd open if a CQ still names it. */
	if (wd->ch && ibv_destroy_comp_channel(wd->ch))
		close(wd->ch->fd);
	ibv_close_device(wd->ctx);
	pthread_mutex_destroy(&wd->ev_lock);
	/* The provider's structs of abandoned objects leak: a few KiB. */
	memset(wd, 0, sizeof(*wd));
}

int op_ctx_reopen(struct worker *w)
{
	bool orderly = chance(w, 60);

	note(w, orderly ? "orderly" : "abandon");
	world_close(w, orderly);
	return world_open(w);
}

/* ---------------------------------------------------------------------- */
/* PD, CQ                                                                   */
/* ---------------------------------------------------------------------- */

static int alloc_pd_slot(struct worker *w, int s)
{
	w->wd.pd[s] = ibv_alloc_pd(w->wd.ctx);
	return w->wd.pd[s] ? 0 : errno;
}

struct ibv_pd *get_pd(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.pd));

	if (s < 0 && (s = pick_slot(w, SLOTS(w->wd.pd))) >= 0 &&
	    alloc_pd_slot(w, s))
		return NULL;
	return s < 0 ? NULL : w->wd.pd[s];
}

int op_pd_alloc(struct worker *w)
{
	int s = pick_slot(w, SLOTS(w->wd.pd));

	if (s < 0)
		return op_pd_free(w);
	return alloc_pd_slot(w, s);
}

int op_pd_free(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.pd)), ret;

	if (s < 0)
		return NOTHING;
	if (is_parent(&w->wd, w->wd.pd[s]))
		return raw_destroy(w, A_PD, w->wd.pd[s]->handle);
	ret = ibv_dealloc_pd(w->wd.pd[s]);
	if (!ret)
		w->wd.pd[s] = NULL;
	return ret;
}

static int create_cq_slot(struct worker *w, int s, int cqe)
{
	struct ibv_comp_channel *ch = chance(w, 50) ? w->wd.ch : NULL;
	int vec = chance(w, 90) ? 0 : (int)rnd(w);

	note(w, "cqe %d ch %d vec %d", cqe, !!ch, vec);
	w->wd.cq[s] = ibv_create_cq(w->wd.ctx, cqe, NULL, ch, vec);
	return w->wd.cq[s] ? 0 : errno;
}

struct ibv_cq *get_cq(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.cq));

	if (s < 0 && (s = pick_slot(w, SLOTS(w->wd.cq))) >= 0 &&
	    create_cq_slot(w, s, 256))
		return NULL;
	return s < 0 ? NULL : w->wd.cq[s];
}

int op_cq_create(struct worker *w)
{
	int s = pick_slot(w, SLOTS(w->wd.cq));

	if (s < 0)
		return op_cq_destroy(w);
	return create_cq_slot(w, s, 1 + (int)rnd_below(w, 512));
}

int op_cq_create_edge(struct worker *w)
{
	int s = pick_slot(w, SLOTS(w->wd.cq));

	if (s < 0)
		return op_cq_destroy(w);
	return create_cq_slot(w, s, (int)rnd_edge(w));
}

int op_cq_destroy(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.cq)), ret;

	if (s < 0)
		return NOTHING;
	if (is_parent(&w->wd, w->wd.cq[s]))
		return raw_destroy(w, A_CQ, w->wd.cq[s]->handle);
	ret = destroy_evented(&w->wd, A_CQ, w->wd.cq[s]);
	if (!ret)
		w->wd.cq[s] = NULL;
	return ret;
}

int op_cq_resize(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.cq));
	int cqe = chance(w, 80) ? 1 + (int)rnd_below(w, 1024) : (int)rnd_edge(w);

	if (s < 0)
		return NOTHING;
	note(w, "cqe %d", cqe);
	return ibv_resize_cq(w->wd.cq[s], cqe);
}

int op_cq_poll(struct worker *w)
{
	struct ibv_wc wc[16];
	int s = pick_used(w, SLOTS(w->wd.cq)), n, i;

	if (s < 0)
		return NOTHING;
	n = ibv_poll_cq(w->wd.cq[s], 16, wc);
	if (n < 0)
		return EIO;
	for (i = 0; i < n; i++)
		count(OP_CQE_STATUS, wc[i].status);
	note(w, "%d", n);
	return 0;
}

int op_cq_arm(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.cq));

	if (s < 0)
		return NOTHING;
	return ibv_req_notify_cq(w->wd.cq[s], chance(w, 50));
}

/* ---------------------------------------------------------------------- */
/* QP, SRQ                                                                  */
/* ---------------------------------------------------------------------- */

struct ibv_qp *any_qp(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.qp));

	return s < 0 ? NULL : w->wd.qp[s];
}

static int create_qp(struct worker *w, bool edge)
{
	static const enum ibv_qp_type types[] = {
		IBV_QPT_RC, IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_UD,
	};
	struct ibv_qp_init_attr attr = {};
	int s = pick_slot(w, SLOTS(w->wd.qp)), ss;

	if (s < 0)
		return op_qp_destroy(w);
	attr.qp_type = types[rnd_below(w, 5)];
	if (chance(w, 3))
		attr.qp_type = (enum ibv_qp_type)rnd_below(w, 16);
	attr.send_cq = get_cq(w);
	attr.recv_cq = chance(w, 70) ? attr.send_cq : get_cq(w);
	ss = pick_used(w, SLOTS(w->wd.srq));
	if (ss >= 0 && chance(w, 30))
		attr.srq = w->wd.srq[ss];
	attr.sq_sig_all = chance(w, 50);
	if (edge) {
		attr.cap.max_send_wr = (uint32_t)rnd_edge(w);
		attr.cap.max_recv_wr = (uint32_t)rnd_edge(w);
		attr.cap.max_send_sge = (uint32_t)rnd_edge(w);
		attr.cap.max_recv_sge = (uint32_t)rnd_edge(w);
		attr.cap.max_inline_data = (uint32_t)rnd_edge(w);
	} else {
		attr.cap.max_send_wr = 1 + rnd_below(w, 64);
		attr.cap.max_recv_wr = 1 + rnd_below(w, 64);
		attr.cap.max_send_sge = 1 + rnd_below(w, 4);
		attr.cap.max_recv_sge = 1 + rnd_below(w, 4);
		attr.cap.max_inline_data = rnd_below(w, 256);
	}
	if (!attr.send_cq || !get_pd(w))
		return NOTHING;
	note(w, "type %d wr %u/%u sge %u/%u inl %u srq %d", attr.qp_type,
	     attr.cap.max_send_wr, attr.cap.max_recv_wr, attr.cap.max_send_sge,
	     attr.cap.max_recv_sge, attr.cap.max_inline_data, !!attr.srq);
	w->wd.qp[s] = ibv_create_qp(get_pd(w), &attr);
	if (!w->wd.qp[s])
		return errno;
	publish_qpn(w, w->wd.qp[s]->qp_num);
	return 0;
}

int op_qp_create(struct worker *w)
{
	return create_qp(w, false);
}

int op_qp_create_edge(struct worker *w)
{
	return create_qp(w, true);
}

int op_qp_destroy(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.qp)), ret;

	if (s < 0)
		return NOTHING;
	note(w, "handle %u", w->wd.qp[s]->handle);
	ret = destroy_evented(&w->wd, A_QP, w->wd.qp[s]);
	if (!ret)
		w->wd.qp[s] = NULL;
	return ret;
}

static void fill_av(struct worker *w, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = chance(w, 95);
	ah->port_num = chance(w, 95) ? 1 : (uint8_t)rnd(w);
	ah->dlid = (uint16_t)rnd(w);
	ah->sl = rnd_below(w, 16);
	ah->grh.hop_limit = 64;
	ah->grh.sgid_index = w->wd.ngid && chance(w, 90) ?
		(uint8_t)rnd_below(w, w->wd.ngid) : (uint8_t)rnd(w);
	if (w->wd.ngid && chance(w, 90))
		ah->grh.dgid = w->wd.gid[rnd_below(w, w->wd.ngid)];
	else
		for (int i = 0; i < 16; i++)
			ah->grh.dgid.raw[i] = (uint8_t)rnd(w);
}

/* RESET -> INIT -> RTR -> RTS towards a QP number from anywhere. */
int op_qp_connect(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.qp)), ret;
	struct ibv_qp_attr a = {};
	struct ibv_qp *qp;
	bool ud;

	if (s < 0)
		return NOTHING;
	qp = w->wd.qp[s];
	ud = qp->qp_type == IBV_QPT_UD;
	a.qp_state = IBV_QPS_RESET;
	if (chance(w, 70) && (ret = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
		return ret;

	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = rnd_access(w) & 0xf;
	a.qkey = chance(w, 80) ? 0x11111111 : (uint32_t)rnd(w);
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | (ud ? IBV_QP_QKEY :
					   IBV_QP_ACCESS_FLAGS));
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = 1 + rnd_below(w, 5);
	a.dest_qp_num = rnd_qpn(w);
	a.rq_psn = (uint32_t)rnd(w) & 0xffffff;
	a.max_dest_rd_atomic = rnd_below(w, 16);
	a.min_rnr_timer = rnd_below(w, 4);
	fill_av(w, &a.ah_attr);
	note(w, "type %d qpn %u -> %u", qp->qp_type, qp->qp_num, a.dest_qp_num);
	ret = ibv_modify_qp(qp, &a, ud ? IBV_QP_STATE :
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    (qp->qp_type == IBV_QPT_RC ?
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = (uint32_t)rnd(w) & 0xffffff;
	a.timeout = rnd_below(w, 20);
	a.retry_cnt = rnd_below(w, 8);
	/* 7 is "retry forever": rarely, it keeps a QP busy. */
	a.rnr_retry = chance(w, 95) ? rnd_below(w, 3) : 7;
	a.max_rd_atomic = rnd_below(w, 16);
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     (qp->qp_type == IBV_QPT_RC ?
			      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0));
}

/* One modify with random state, mask and values. */
int op_qp_modify(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.qp));
	struct ibv_qp_attr a = {};
	int mask;

	if (s < 0)
		return NOTHING;
	a.qp_state = rnd_below(w, 8);
	a.cur_qp_state = rnd_below(w, 8);
	a.path_mtu = rnd_below(w, 8);
	a.qkey = (uint32_t)rnd(w);
	a.rq_psn = (uint32_t)rnd(w);
	a.sq_psn = (uint32_t)rnd(w);
	a.dest_qp_num = rnd_qpn(w);
	a.qp_access_flags = rnd_access(w);
	a.cap.max_send_wr = (uint32_t)rnd_edge(w);
	a.cap.max_recv_wr = (uint32_t)rnd_edge(w);
	fill_av(w, &a.ah_attr);
	fill_av(w, &a.alt_ah_attr);
	a.pkey_index = chance(w, 80) ? 0 : (uint16_t)rnd(w);
	a.en_sqd_async_notify = rnd_below(w, 2);
	a.max_rd_atomic = (uint8_t)rnd(w);
	a.max_dest_rd_atomic = (uint8_t)rnd(w);
	a.min_rnr_timer = (uint8_t)rnd(w);
	a.port_num = chance(w, 80) ? 1 : (uint8_t)rnd(w);
	a.timeout = (uint8_t)rnd(w);
	a.retry_cnt = (uint8_t)rnd(w);
	a.rnr_retry = (uint8_t)rnd(w);
	mask = (int)(rnd(w) & ((1 << 21) - 1));
	if (chance(w, 80))
		mask |= IBV_QP_STATE;
	note(w, "qpn %u state %d mask 0x%x", w->wd.qp[s]->qp_num, a.qp_state,
	     mask);
	return ibv_modify_qp(w->wd.qp[s], &a, mask);
}

int op_srq_create(struct worker *w)
{
	struct ibv_srq_init_attr attr = {};
	int s = pick_slot(w, SLOTS(w->wd.srq));
	struct ibv_pd *pd;

	if (s < 0)
		return op_srq_destroy(w);
	pd = get_pd(w);
	if (!pd)
		return NOTHING;
	if (chance(w, 85)) {
		attr.attr.max_wr = 1 + rnd_below(w, 128);
		attr.attr.max_sge = 1 + rnd_below(w, 4);
		attr.attr.srq_limit = rnd_below(w, attr.attr.max_wr + 1);
	} else {
		attr.attr.max_wr = (uint32_t)rnd_edge(w);
		attr.attr.max_sge = (uint32_t)rnd_edge(w);
		attr.attr.srq_limit = (uint32_t)rnd_edge(w);
	}
	note(w, "wr %u sge %u limit %u", attr.attr.max_wr, attr.attr.max_sge,
	     attr.attr.srq_limit);
	w->wd.srq[s] = ibv_create_srq(pd, &attr);
	return w->wd.srq[s] ? 0 : errno;
}

int op_srq_destroy(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.srq)), ret;

	if (s < 0)
		return NOTHING;
	if (is_parent(&w->wd, w->wd.srq[s]))
		return raw_destroy(w, A_SRQ, w->wd.srq[s]->handle);
	ret = destroy_evented(&w->wd, A_SRQ, w->wd.srq[s]);
	if (!ret)
		w->wd.srq[s] = NULL;
	return ret;
}

int op_srq_modify(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.srq));
	struct ibv_srq_attr a = {};
	int mask;

	if (s < 0)
		return NOTHING;
	if (chance(w, 20))
		return ibv_query_srq(w->wd.srq[s], &a);
	a.max_wr = (uint32_t)(chance(w, 50) ? rnd_below(w, 256) : rnd_edge(w));
	a.srq_limit = (uint32_t)(chance(w, 50) ? rnd_below(w, 256) : rnd_edge(w));
	mask = chance(w, 80) ? IBV_SRQ_LIMIT : (int)rnd_below(w, 4);
	note(w, "mask %d wr %u limit %u", mask, a.max_wr, a.srq_limit);
	return ibv_modify_srq(w->wd.srq[s], &a, mask);
}

int op_query(struct worker *w)
{
	struct ibv_context *ctx = w->wd.ctx;
	struct ibv_device_attr_ex dx;
	struct ibv_port_attr pa;
	struct bzcdv_device_attr da = {};
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;
	union ibv_gid gid;
	__be16 pkey;
	struct ibv_qp *qp;
	int which = (int)rnd_below(w, 6);

	note(w, "%d", which);
	switch (which) {
	case 0:
		return ibv_query_device_ex(ctx, NULL, &dx);
	case 1:
		return ibv_query_port(ctx, chance(w, 90) ? 1 : (uint8_t)rnd(w),
				      &pa);
	case 2:
		return err_or(ibv_query_gid(ctx, 1, (int)rnd_edge(w) & 0xffff,
					    &gid));
	case 3:
		return err_or(ibv_query_pkey(ctx, 1, (int)rnd_below(w, 4),
					     &pkey));
	case 4:
		qp = any_qp(w);
		if (!qp)
			return NOTHING;
		return ibv_query_qp(qp, &qa, (int)rnd(w) & 0x1fffff, &init);
	default:
		da.comp_mask = chance(w, 80) ? 0 : rnd(w);
		return bzcdv_query_device(ctx, &da);
	}
}

/* ---------------------------------------------------------------------- */
/* MR, MW, AH                                                               */
/* ---------------------------------------------------------------------- */

struct ibv_mr *any_mr(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.mr));

	return s < 0 ? NULL : w->wd.mr[s];
}

static int reg_mr(struct worker *w, uint64_t addr, uint64_t len)
{
	int s = pick_slot(w, SLOTS(w->wd.mr));
	unsigned int access = rnd_access(w);
	struct ibv_pd *pd;
	struct ibv_mr *mr;

	if (s < 0)
		return op_mr_dereg(w);
	pd = get_pd(w);
	if (!pd)
		return NOTHING;
	access = arena_access(w, addr, len, access);
	note(w, "0x%" PRIx64 "+0x%" PRIx64 " access 0x%x", addr, len, access);
	mr = ibv_reg_mr(pd, (void *)(uintptr_t)addr, len, (int)access);
	if (!mr)
		return errno;
	w->wd.mr[s] = mr;
	publish_key(w, mr->rkey, addr, len);
	return 0;
}

int op_mr_reg(struct worker *w)
{
	uint64_t addr, len;

	arena_range(w, &addr, &len, 256 << 10);
	return reg_mr(w, addr, len);
}

/* Addresses and lengths at the edges: NULL, kernel, unmapped, huge. */
static uint64_t rnd_edge_addr(struct worker *w)
{
	switch (rnd_below(w, 6)) {
	case 0:
		return 0;
	case 1:
		return 0xffff888000000000ULL;	/* the kernel's direct map */
	case 2:
		return (uintptr_t)w->arena + ARENA_LEN - 1;
	case 3:
		return rnd_edge(w);
	case 4:
		return (uintptr_t)w->arena + rnd_below(w, ARENA_LEN);
	default:
		return rnd(w) & ((1ULL << 47) - 1);
	}
}

int op_mr_reg_edge(struct worker *w)
{
	return reg_mr(w, rnd_edge_addr(w), rnd_edge(w));
}

int op_mr_dereg(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.mr)), ret;

	if (s < 0)
		return NOTHING;
	ret = ibv_dereg_mr(w->wd.mr[s]);
	if (!ret)
		w->wd.mr[s] = NULL;
	return ret;
}

int op_mr_rereg(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.mr)), flags, ret;
	unsigned int access = rnd_access(w);
	uint64_t addr, len;
	struct ibv_pd *pd;

	if (s < 0)
		return NOTHING;
	pd = get_pd(w);
	arena_range(w, &addr, &len, 256 << 10);
	flags = chance(w, 90) ? (int)rnd_below(w, 8) : (int)rnd(w);
	/* No PD to move to (none could be made): libibverbs reads pd->handle. */
	if (!pd && (flags & IBV_REREG_MR_CHANGE_PD))
		return NOTHING;
	/* New rights over the range the MR keeps when it does not move. */
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		access = arena_access(w, addr, len, access);
	else
		access = arena_access(w, (uintptr_t)w->wd.mr[s]->addr,
				      w->wd.mr[s]->length, access);
	note(w, "flags 0x%x 0x%" PRIx64 "+0x%" PRIx64 " access 0x%x", flags,
	     addr, len, access);
	errno = 0;
	ret = ibv_rereg_mr(w->wd.mr[s], flags, pd, (void *)(uintptr_t)addr,
			   len, (int)access);
	if (!ret)
		publish_key(w, w->wd.mr[s]->rkey, addr, len);
	return ret ? (errno ? errno : EINVAL) : 0;
}

int op_mw_alloc(struct worker *w)
{
	int s = pick_slot(w, SLOTS(w->wd.mw));
	enum ibv_mw_type type = chance(w, 50) ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2;
	struct ibv_pd *pd;

	if (s < 0)
		return op_mw_free(w);
	if (chance(w, 3))
		type = (enum ibv_mw_type)rnd_below(w, 8);
	pd = get_pd(w);
	if (!pd)
		return NOTHING;
	note(w, "type %d", type);
	w->wd.mw[s] = ibv_alloc_mw(pd, type);
	return w->wd.mw[s] ? 0 : errno;
}

int op_mw_free(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.mw)), ret;

	if (s < 0)
		return NOTHING;
	ret = ibv_dealloc_mw(w->wd.mw[s]);
	if (!ret)
		w->wd.mw[s] = NULL;
	return ret;
}

static void fill_bind(struct worker *w, struct ibv_mw_bind_info *b)
{
	struct ibv_mr *mr = any_mr(w);

	b->mr = mr;
	b->mw_access_flags = rnd_access(w);
	if (mr && chance(w, 80)) {
		b->addr = (uintptr_t)mr->addr + rnd_below(w, mr->length + 1);
		b->length = rnd_below(w, mr->length + 1);
	} else {
		b->addr = rnd_edge_addr(w);
		b->length = rnd_edge(w);
	}
}

int op_mw_bind(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.mw));
	struct ibv_mw_bind bind = {};
	struct ibv_qp *qp = any_qp(w);
	int ret;

	if (s < 0 || !qp)
		return NOTHING;
	bind.wr_id = rnd(w);
	bind.send_flags = chance(w, 50) ? IBV_SEND_SIGNALED : 0;
	fill_bind(w, &bind.bind_info);
	note(w, "mw type %d qpn %u len 0x%" PRIx64, w->wd.mw[s]->type,
	     qp->qp_num, (uint64_t)bind.bind_info.length);
	ret = ibv_bind_mw(qp, w->wd.mw[s], &bind);
	if (!ret)
		publish_key(w, w->wd.mw[s]->rkey, bind.bind_info.addr,
			    bind.bind_info.length);
	return ret;
}

int op_ah_create(struct worker *w)
{
	int s = pick_slot(w, SLOTS(w->wd.ah));
	struct ibv_ah_attr attr;
	struct ibv_pd *pd;

	if (s < 0)
		return op_ah_destroy(w);
	pd = get_pd(w);
	if (!pd)
		return NOTHING;
	fill_av(w, &attr);
	note(w, "sgid %u port %u", attr.grh.sgid_index, attr.port_num);
	w->wd.ah[s] = ibv_create_ah(pd, &attr);
	return w->wd.ah[s] ? 0 : errno;
}

int op_ah_destroy(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.ah)), ret;

	if (s < 0)
		return NOTHING;
	ret = ibv_destroy_ah(w->wd.ah[s]);
	if (!ret)
		w->wd.ah[s] = NULL;
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Work requests                                                            */
/* ---------------------------------------------------------------------- */

/* Up to @max SGEs over the thread's MRs, with bad keys and lengths mixed in. */
static int fill_sges(struct worker *w, struct ibv_sge *sge, int max)
{
	int n = (int)rnd_below(w, max + 1), i;

	for (i = 0; i < n; i++) {
		struct ibv_mr *mr = any_mr(w);

		if (mr && chance(w, 85)) {
			uint64_t off = rnd_below(w, mr->length + 1);

			sge[i].addr = (uintptr_t)mr->addr + off;
			sge[i].length = (uint32_t)rnd_below(w, mr->length - off + 1);
			sge[i].lkey = chance(w, 90) ? mr->lkey : rnd_key(w);
			if (sge[i].length > (64 << 10) && chance(w, 70))
				sge[i].length = rnd_below(w, 64 << 10);
		} else {
			sge[i].addr = rnd_edge_addr(w);
			sge[i].length = (uint32_t)rnd_edge(w);
			sge[i].lkey = rnd_key(w);
		}
	}
	return n;
}

static void fill_remote(struct worker *w, uint64_t *addr, uint32_t *rkey)
{
	struct shared_key k = shm->key[rnd_below(w, NSHARED)];
	struct ibv_mr *mr = any_mr(w);

	if (mr && chance(w, 40)) {
		k.rkey = mr->rkey;
		k.addr = (uintptr_t)mr->addr;
		k.len = mr->length;
	}
	*rkey = chance(w, 90) ? k.rkey : rnd_key(w);
	*addr = k.addr + rnd_below(w, k.len + 1);
	if (chance(w, 5))
		*addr = rnd_edge_addr(w);
}

int op_post_send(struct worker *w)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,
		IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV,
	};
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_sge sge[3][4];
	struct ibv_qp *qp = any_qp(w);
	int n = 1 + (int)rnd_below(w, 3), i;

	if (!qp)
		return NOTHING;
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		struct ibv_send_wr *r = &wr[i];
		int s;

		r->wr_id = rnd(w);
		r->next = i + 1 < n ? &wr[i + 1] : NULL;
		r->opcode = chance(w, 97) ? ops[rnd_below(w, 10)] :
					    (enum ibv_wr_opcode)rnd_below(w, 256);
		r->send_flags = (unsigned int)rnd_below(w, 16);
		r->sg_list = sge[i];
		r->num_sge = fill_sges(w, sge[i], 4);
		r->imm_data = (uint32_t)rnd(w);
		r->invalidate_rkey = rnd_key(w);
		/* Inline data is read by the provider, here: real memory only. */
		if (r->send_flags & IBV_SEND_INLINE)
			for (s = 0; s < r->num_sge; s++) {
				sge[i][s].addr = (uintptr_t)w->arena +
						 rnd_below(w, ARENA_LEN - 256);
				sge[i][s].length = (uint32_t)rnd_below(w, 257);
			}
		switch (r->opcode) {
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			fill_remote(w, &r->wr.atomic.remote_addr,
				    &r->wr.atomic.rkey);
			if (chance(w, 80))
				r->wr.atomic.remote_addr &= ~7ULL;
			r->wr.atomic.compare_add = rnd(w);
			r->wr.atomic.swap = rnd(w);
			break;
		case IBV_WR_BIND_MW:
			s = pick_used(w, SLOTS(w->wd.mw));
			if (s < 0) {
				r->opcode = IBV_WR_SEND;
				break;
			}
			r->bind_mw.mw = w->wd.mw[s];
			r->bind_mw.rkey = chance(w, 80) ?
				ibv_inc_rkey(w->wd.mw[s]->rkey) : rnd_key(w);
			fill_bind(w, &r->bind_mw.bind_info);
			break;
		default:
			fill_remote(w, &r->wr.rdma.remote_addr, &r->wr.rdma.rkey);
			break;
		}
		if (qp->qp_type == IBV_QPT_UD) {
			s = pick_used(w, SLOTS(w->wd.ah));
			r->wr.ud.ah = s < 0 ? NULL : w->wd.ah[s];
			r->wr.ud.remote_qpn = rnd_qpn(w);
			r->wr.ud.remote_qkey = chance(w, 80) ? 0x11111111 :
							       (uint32_t)rnd(w);
		}
		note(w, "op %d sge %d flags 0x%x", r->opcode, r->num_sge,
		     r->send_flags);
	}
	note(w, "qpn %u", qp->qp_num);
	return ibv_post_send(qp, wr, &bad);
}

static int post_recv_list(struct worker *w, struct ibv_qp *qp,
			  struct ibv_srq *srq)
{
	struct ibv_recv_wr wr[4], *bad = NULL;
	struct ibv_sge sge[4][4];
	int n = 1 + (int)rnd_below(w, 4), i;

	for (i = 0; i < n; i++) {
		wr[i].wr_id = rnd(w);
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = sge[i];
		wr[i].num_sge = fill_sges(w, sge[i], 4);
	}
	note(w, "%d wrs", n);
	return qp ? ibv_post_recv(qp, wr, &bad) : ibv_post_srq_recv(srq, wr, &bad);
}

int op_post_recv(struct worker *w)
{
	struct ibv_qp *qp = any_qp(w);

	if (!qp || qp->srq)
		return NOTHING;
	return post_recv_list(w, qp, NULL);
}

int op_post_srq_recv(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.srq));

	if (s < 0)
		return NOTHING;
	return post_recv_list(w, NULL, w->wd.srq[s]);
}

/* ---------------------------------------------------------------------- */
/* Bulk channels and the MR cache                                           */
/* ---------------------------------------------------------------------- */

int op_chan_create(struct worker *w)
{
	struct bzcdv_bulk_chan_init_attr attr = {};
	int s = pick_slot(w, SLOTS(w->wd.chan));
	struct bzcdv_bulk_chan *chan;

	if (s < 0)
		return op_chan_destroy(w);
	attr.pd = get_pd(w);
	attr.cq = get_cq(w);
	attr.depth = chance(w, 90) ? 1 + (uint32_t)rnd_below(w, 64) :
				     (uint32_t)rnd_edge(w);
	if (chance(w, 40)) {
		attr.comp_mask = BZCDV_BULK_CHAN_INIT_ATTR_MASK_RECV_CQ;
		attr.recv_cq = get_cq(w);
	}
	if (!attr.pd || !attr.cq)
		return NOTHING;
	note(w, "depth %u recv_cq %d", attr.depth, !!attr.recv_cq);
	chan = bzcdv_create_bulk_chan(w->wd.ctx, &attr);
	if (!chan)
		return errno;
	w->wd.chan[s] = chan;
	w->wd.chan_peer[s] = 0;
	atomic_store(&shm->chan_num[rnd_below(w, NSHARED)], chan->chan_num);
	return 0;
}

/* This thread's channel numbered @num, or -1. */
static int chan_slot(struct worker *w, uint32_t num)
{
	int i;

	for (i = 0; i < NSLOT; i++)
		if (w->wd.chan[i] && w->wd.chan[i]->chan_num == num)
			return i;
	return -1;
}

static int chan_connect(struct worker *w, int s,
			const struct bzcdv_bulk_conn_attr *a)
{
	int ret = bzcdv_connect_bulk_chan(w->wd.chan[s], a);

	if (!ret)
		w->wd.chan_peer[s] = a->remote_chan;
	return ret;
}

/* Boundary and random addresses and numbers for a connect. */
static void conn_edge(struct worker *w, struct bzcdv_bulk_conn_attr *a)
{
	static const uint32_t nums[] = { 0, 1, 0x7fffffff, 0x80000000,
					 0xffffffff };

	if (chance(w, 50))
		a->remote_chan = chance(w, 50) ? nums[rnd_below(w, 5)] :
						 (uint32_t)rnd(w);
	switch (rnd_below(w, 5)) {
	case 0:
		memset(&a->remote_gid, 0, sizeof(a->remote_gid));
		break;
	case 1:
		memset(&a->remote_gid, 0xff, sizeof(a->remote_gid));
		break;
	case 2:
		a->remote_gid.global.subnet_prefix = rnd(w);
		a->remote_gid.global.interface_id = rnd(w);
		break;
	case 3:
		a->remote_gid.raw[15] ^= 1;	/* a neighbour's address */
		break;
	}
	if (chance(w, 30))
		a->sgid_index = (uint8_t)(chance(w, 50) ? rnd(w) : 255);
	if (chance(w, 10))
		a->comp_mask = rnd(w);
}

/*
 * Connect a channel, so that bulk WRITE/READ get past the connect check
 * and into the data path: to itself, to another channel of this thread
 * (and that one back), to another process's channel from the shared
 * table (asking it, through shm->chan_ask, to connect back), back to a
 * channel that asked; or to boundary and random GIDs and numbers.
 */
int op_chan_connect(struct worker *w)
{
	struct bzcdv_bulk_conn_attr a = {};
	int s = pick_used(w, SLOTS(w->wd.chan)), t = -1, g, i, ret;
	uint64_t ask;

	if (s < 0)
		return NOTHING;
	if (w->wd.ngid) {
		g = (int)rnd_below(w, w->wd.ngid);
		a.remote_gid = w->wd.gid[g];
		a.sgid_index = w->wd.gid_index[g];
	}
	switch (rnd_below(w, 10)) {
	case 0:
	case 1:
		a.remote_chan = w->wd.chan[s]->chan_num;
		note(w, "chan %u to itself", a.remote_chan);
		return chan_connect(w, s, &a);
	case 2:
	case 3:
		t = pick_used(w, SLOTS(w->wd.chan));
		a.remote_chan = w->wd.chan[t]->chan_num;
		note(w, "chan %u and chan %u", w->wd.chan[s]->chan_num,
		     a.remote_chan);
		ret = chan_connect(w, s, &a);
		if (ret || t == s)
			return ret;
		a.remote_chan = w->wd.chan[s]->chan_num;
		return chan_connect(w, t, &a);
	case 4:
	case 5:
		a.remote_chan = atomic_load(&shm->chan_num[rnd_below(w, NSHARED)]);
		atomic_store(&shm->chan_ask[rnd_below(w, NSHARED)],
			     (uint64_t)w->wd.chan[s]->chan_num << 32 |
			     a.remote_chan);
		note(w, "chan %u to chan %u, asking back",
		     w->wd.chan[s]->chan_num, a.remote_chan);
		return chan_connect(w, s, &a);
	case 6:
	case 7:
		for (i = 0; i < NSHARED && t < 0; i++) {
			ask = atomic_load(&shm->chan_ask[i]);
			t = chan_slot(w, (uint32_t)ask);
		}
		if (t < 0)
			return NOTHING;
		a.remote_chan = (uint32_t)(ask >> 32);
		note(w, "chan %u back to chan %u", w->wd.chan[t]->chan_num,
		     a.remote_chan);
		return chan_connect(w, t, &a);
	default:
		a.remote_chan = atomic_load(&shm->chan_num[rnd_below(w, NSHARED)]);
		conn_edge(w, &a);
		note(w, "chan %u to chan %u gid %016" PRIx64 ":%016" PRIx64
		     " sgid_index %u comp_mask 0x%" PRIx64,
		     w->wd.chan[s]->chan_num, a.remote_chan,
		     be64toh(a.remote_gid.global.subnet_prefix),
		     be64toh(a.remote_gid.global.interface_id), a.sgid_index,
		     a.comp_mask);
		return chan_connect(w, s, &a);
	}
}

int op_chan_destroy(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.chan)), ret;

	if (s < 0)
		return NOTHING;
	ret = bzcdv_destroy_bulk_chan(w->wd.chan[s]);
	if (!ret)
		w->wd.chan[s] = NULL;
	return ret;
}

static int bulk_post(struct worker *w, bool edge)
{
	int s = pick_used(w, SLOTS(w->wd.chan)), i, n;
	struct bzcdv_bulk_wr wr[2], *bad = NULL;
	struct bzcdv_sge sge[2][4];
	struct bzcdv_bulk_chan *chan;

	if (s < 0)
		return NOTHING;
	chan = w->wd.chan[s];
	n = 1 + (int)rnd_below(w, 2);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		struct bzcdv_bulk_wr *r = &wr[i];
		uint32_t rkey;
		int k;

		r->wr_id = rnd(w);
		r->next = i + 1 < n ? &wr[i + 1] : NULL;
		r->opcode = (enum bzcdv_bulk_opcode)rnd_below(w, chance(w, 95) ? 4 : 8);
		r->flags = chance(w, 90) ? (uint32_t)rnd_below(w, 2) : (uint32_t)rnd(w);
		r->num_sge = (uint32_t)rnd_below(w, 5);
		r->sg_list = sge[i];
		r->imm_data = (uint32_t)rnd(w);
		for (k = 0; k < (int)r->num_sge; k++) {
			struct ibv_mr *mr = any_mr(w);
			uint64_t addr, len;

			arena_range(w, &addr, &len, 256 << 10);
			sge[i][k].addr = addr;
			sge[i][k].length = len;
			sge[i][k].lkey = 0;	/* the PD's MR cache */
			if (mr && chance(w, 50)) {
				sge[i][k].addr = (uintptr_t)mr->addr;
				sge[i][k].length = rnd_below(w, mr->length + 1);
				sge[i][k].lkey = mr->lkey;
			}
			if (edge) {
				if (chance(w, 50))
					sge[i][k].addr = rnd_edge_addr(w);
				sge[i][k].length = rnd_edge(w);
				if (chance(w, 30))
					sge[i][k].lkey = rnd_key(w);
			}
			if (!sge[i][k].lkey)
				sge[i][k].length = cache_len(sge[i][k].length);
		}
		fill_remote(w, &r->remote_addr, &rkey);
		r->rkey = rkey;
		if (r->opcode == BZCDV_BULK_COPY && chance(w, 50)) {
			r->rkey = 0;
			r->remote_addr = (uintptr_t)w->arena +
					 rnd_below(w, ARENA_LEN);
		}
		/* rkey 0: a COPY's far range comes from the cache too. */
		if (!r->rkey)
			for (k = 0; k < (int)r->num_sge; k++)
				sge[i][k].length = cache_len(sge[i][k].length);
		r->remote_chan = chance(w, 50) ? chan->chan_num :
			atomic_load(&shm->chan_num[rnd_below(w, NSHARED)]);
		/* The peer, mostly: only it gets past the connect check. */
		if (w->wd.chan_peer[s] && chance(w, 70))
			r->remote_chan = w->wd.chan_peer[s];
		if (chance(w, 3))
			r->remote_chan = (uint32_t)rnd(w);
		note(w, "op %d sge %u chan %u", r->opcode, r->num_sge,
		     r->remote_chan);
	}
	return bzcdv_post_bulk(chan, wr, &bad);
}

int op_bulk_post(struct worker *w)
{
	return bulk_post(w, false);
}

int op_bulk_post_edge(struct worker *w)
{
	return bulk_post(w, true);
}

static int cmr_reg(struct worker *w, uint64_t addr, uint64_t len)
{
	int s = pick_slot(w, SLOTS(w->wd.cmr));
	unsigned int access = rnd_access(w);
	struct bzcdv_mr_cached *mr;
	struct ibv_pd *pd;

	if (s < 0)
		return op_cmr_release(w);
	pd = get_pd(w);
	if (!pd)
		return NOTHING;
	len = cache_len(len);
	access = arena_access(w, addr, len, access);
	note(w, "0x%" PRIx64 "+0x%" PRIx64 " access 0x%x", addr, len, access);
	mr = bzcdv_reg_mr_cached(pd, (void *)(uintptr_t)addr, len, access);
	if (!mr)
		return errno;
	w->wd.cmr[s] = mr;
	publish_key(w, mr->rkey, addr, len);
	return 0;
}

int op_cmr_reg(struct worker *w)
{
	uint64_t addr, len;

	arena_range(w, &addr, &len, ARENA_LEN);
	return cmr_reg(w, addr, len);
}

int op_cmr_reg_edge(struct worker *w)
{
	return cmr_reg(w, rnd_edge_addr(w), rnd_edge(w));
}

int op_cmr_release(struct worker *w)
{
	int s = pick_used(w, SLOTS(w->wd.cmr)), ret;

	if (s < 0)
		return NOTHING;
	ret = bzcdv_release_mr_cached(w->wd.cmr[s]);
	if (!ret)
		w->wd.cmr[s] = NULL;
	return ret;
}

int op_cache_query(struct worker *w)
{
	struct bzcdv_mr_cache_stats st = {};
	struct ibv_pd *pd = get_pd(w);

	if (!pd)
		return NOTHING;
	st.comp_mask = chance(w, 80) ? 0 : rnd(w);
	return bzcdv_query_mr_cache(pd, &st);
}
