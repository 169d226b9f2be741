/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * bzc-fuzz: random sequences of verbs, direct verbs, raw uverbs ioctls and
 * ring scribbles against a bzc device, from several processes and threads.
 *
 * Layout: main.c (options, processes, threads, SIGKILL victims, the
 * report), oplog.c (per-thread op logs that survive a crash), world.c (a
 * thread's objects and the well-formed verbs on them), hostile.c (ring
 * scribbles, raw ioctls and writes, mmap, memory churn, fork), rings.c
 * (the only reader of the provider's private structs).
 */
#ifndef BZC_FUZZ_H
#define BZC_FUZZ_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <infiniband/bzcdv.h>

/* Object slots of each kind a thread keeps. */
#define NSLOT 4
/* Result codes counted per op: errno values, CQE status, event type. */
#define NCODE 256
/* Entries of the tables through which workers find each other's objects. */
#define NSHARED 64
/* Bytes of a thread's buffer arena (MRs, SGEs and cached MRs live in it). */
#define ARENA_LEN (4UL << 20)

/* Op ids: also the index into fuzz_ops[] (main.c). */
enum op_id {
	OP_CTX_REOPEN,
	OP_PD_ALLOC,
	OP_PD_FREE,
	OP_CQ_CREATE,
	OP_CQ_CREATE_EDGE,
	OP_CQ_DESTROY,
	OP_CQ_RESIZE,
	OP_CQ_POLL,
	OP_CQ_ARM,
	OP_QP_CREATE,
	OP_QP_CREATE_EDGE,
	OP_QP_DESTROY,
	OP_QP_CONNECT,
	OP_QP_MODIFY,
	OP_QUERY,
	OP_SRQ_CREATE,
	OP_SRQ_DESTROY,
	OP_SRQ_MODIFY,
	OP_MR_REG,
	OP_MR_REG_EDGE,
	OP_MR_DEREG,
	OP_MR_REREG,
	OP_MW_ALLOC,
	OP_MW_FREE,
	OP_MW_BIND,
	OP_AH_CREATE,
	OP_AH_DESTROY,
	OP_POST_SEND,
	OP_POST_RECV,
	OP_POST_SRQ_RECV,
	OP_CHAN_CREATE,
	OP_CHAN_DESTROY,
	OP_CHAN_CONNECT,
	OP_BULK_POST,
	OP_BULK_POST_EDGE,
	OP_CMR_REG,
	OP_CMR_REG_EDGE,
	OP_CMR_RELEASE,
	OP_CACHE_QUERY,
	OP_SQ_SCRIBBLE,
	OP_RQ_SCRIBBLE,
	OP_SRQ_SCRIBBLE,
	OP_CQ_SCRIBBLE,
	OP_BULK_SCRIBBLE,
	OP_RAW_IOCTL,
	OP_RAW_WRITE,
	OP_RAW_MMAP,
	OP_MEM_CHURN,
	OP_FORK_CHILD,
	OP_DM_ALLOC,
	OP_DM_FREE,
	OP_DM_COPY,
	OP_DM_MR,
	OP_DM_IMPORT,
	OP_DMABUF_MR,
	OP_ADVISE_MR,
	/* Not drawn: what completions and events reported (status, type). */
	OP_CQE_STATUS,
	OP_ASYNC_EVENT,
	OP_COUNT
};
#define OP_DRAWN OP_CQE_STATUS

struct worker;
typedef int (*op_fn)(struct worker *w);

struct fuzz_op {
	const char *name;
	op_fn fn;
	unsigned int weight;
};
extern const struct fuzz_op fuzz_ops[OP_COUNT];

/* A key another worker may aim at: an rkey over [addr, addr + len). */
struct shared_key {
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
	uint64_t len;
};

/* Shared by all processes of a run (anonymous MAP_SHARED before fork). */
struct shared {
	atomic_uint_fast64_t counts[OP_COUNT][NCODE];
	atomic_uint qpn[NSHARED];
	atomic_uint chan_num[NSHARED];
	/* Channels asking to be connected back: from << 32 | to (chan_num). */
	atomic_uint_fast64_t chan_ask[NSHARED];
	struct shared_key key[NSHARED];	/* racy on purpose: any value goes */
	atomic_int stop;
};
extern struct shared *shm;

/* A thread's objects on one open context. */
struct world {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	union ibv_gid gid[4];
	uint8_t gid_index[4];		/* of gid[i] in the port's table */
	int ngid;
	bool dead;			/* IBV_EVENT_DEVICE_FATAL seen */
	pthread_t drainer;
	atomic_int drainer_stop;
	bool drainer_running;
	/*
	 * Held by the drainer from reading an event to acking it, and around
	 * destroying a CQ, QP or SRQ (destroy_evented()): a destroy
	 * that fails with EIO (the device was removed) frees the object at
	 * once, without waiting for the acks of the events naming it.
	 */
	pthread_mutex_t ev_lock;

	struct ibv_pd *pd[NSLOT];
	struct ibv_cq *cq[NSLOT];
	struct ibv_qp *qp[NSLOT];
	struct ibv_srq *srq[NSLOT];
	struct ibv_mr *mr[NSLOT];
	struct ibv_mw *mw[NSLOT];
	struct ibv_ah *ah[NSLOT];
	struct bzcdv_bulk_chan *chan[NSLOT];
	uint32_t chan_peer[NSLOT];	/* what chan[i] connected to; 0: none */
	struct bzcdv_mr_cached *cmr[NSLOT];
	struct ibv_dm *dm[NSLOT];
	uint64_t dm_len[NSLOT];
	/* Raw mappings of the uverbs fd kept for a while (raw_mmap). */
	void *map[NSLOT];
	size_t map_len[NSLOT];
	/*
	 * Rings of objects destroyed behind the provider's back, still
	 * mapped (as a careless process would leave them) until close.
	 */
	void *zombie[4 * NSLOT];
	size_t zombie_len[4 * NSLOT];
};

struct oplog;

/* Kinds of objects a thread holds (raw ioctls name them by handle). */
enum obj_kind {
	A_NONE, A_PD, A_CQ, A_QP, A_SRQ, A_MR, A_MW, A_AH, A_CHAN, A_CMR, A_DM,
};

struct worker {
	int proc, thread;
	uint64_t seed;			/* this thread's own seed */
	uint64_t rng;
	uint64_t nops;
	struct oplog *log;
	struct world wd;
	uint8_t *arena;
	uint8_t *scratch;		/* 4 KiB for raw command payloads,
					 * then a PROT_NONE page */
	const char *const *devices;
	int ndevices;
	bool in_child;			/* in a forked child (fork_child) */
};

/*
 * Known kernel bugs the ops can be told to steer clear of (--avoid), so a
 * CI run stays green until the fix lands; each names the bug it avoids.
 */
enum avoid {
	/* MR cache: WARN in kvmalloc for the page array of a huge range. */
	AVOID_CACHE_HUGE = 1 << 0,
};

/* Options every part reads (main.c). */
struct fuzz_opts {
	uint64_t seed;
	uint64_t ops;			/* per thread; 0: until --time */
	unsigned int seconds;
	int procs, threads;
	bool kill_victims;
	bool quiet;
	const char *log_dir;
	const char *stats_file;
	const char *devices[4];
	int ndevices;
	bool enabled[OP_COUNT];
	unsigned int avoid;		/* enum avoid */
};
extern struct fuzz_opts opts;

/* PRNG (splitmix64 / xorshift*): deterministic per thread. */
uint64_t seed_mix(uint64_t x);
uint64_t rnd(struct worker *w);
uint64_t rnd_below(struct worker *w, uint64_t n);
bool chance(struct worker *w, unsigned int percent);
/* Sizes at the edges: 0, 1, page +-1, 2^31, 2^32-1, 2^63, -1, ... */
uint64_t rnd_edge(struct worker *w);
/* A 32-bit key: a real one from the shared table, 0, -1 or random. */
uint32_t rnd_key(struct worker *w);

void count(int op, int code);
/* A length for the MR cache: @len, or within the arena under --avoid cache-huge. */
uint64_t cache_len(uint64_t len);

/* oplog.c */
struct oplog *oplog_open(const char *dir, int proc, int thread, uint64_t seed);
void oplog_begin(struct worker *w, int op);
void note(struct worker *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void oplog_end(struct worker *w, int code);
void oplog_detach(struct worker *w);
/* Print the op logs in @dir (of one proc, or all with proc < 0). */
int oplog_dump(const char *dir, int proc, unsigned int last);

/* world.c */
int world_open(struct worker *w);
void world_close(struct worker *w, bool orderly);
/* Drop the object of @kind with kernel handle @handle: it is gone. */
void world_forget(struct worker *w, int kind, uint32_t handle);
struct ibv_pd *get_pd(struct worker *w);
struct ibv_cq *get_cq(struct worker *w);
struct ibv_mr *any_mr(struct worker *w);
struct ibv_qp *any_qp(struct worker *w);
/* A world's array of object pointers, as pick_slot()/pick_used() take it. */
#define SLOTS(a) ((void *const *)(a))
int pick_slot(struct worker *w, void *const *slots);
int pick_used(struct worker *w, void *const *slots);
void publish_qpn(struct worker *w, uint32_t qpn);
void publish_key(struct worker *w, uint32_t rkey, uint64_t addr, uint64_t len);
/* Access flags for an MR: usual sets, single bits flipped, or random. */
unsigned int rnd_access(struct worker *w);
/* @access without the write rights unless the range lies in the arena. */
unsigned int arena_access(const struct worker *w, uint64_t addr, uint64_t len,
			  unsigned int access);

int op_ctx_reopen(struct worker *w);
int op_pd_alloc(struct worker *w);
int op_pd_free(struct worker *w);
int op_cq_create(struct worker *w);
int op_cq_create_edge(struct worker *w);
int op_cq_destroy(struct worker *w);
int op_cq_resize(struct worker *w);
int op_cq_poll(struct worker *w);
int op_cq_arm(struct worker *w);
int op_qp_create(struct worker *w);
int op_qp_create_edge(struct worker *w);
int op_qp_destroy(struct worker *w);
int op_qp_connect(struct worker *w);
int op_qp_modify(struct worker *w);
int op_query(struct worker *w);
int op_srq_create(struct worker *w);
int op_srq_destroy(struct worker *w);
int op_srq_modify(struct worker *w);
int op_mr_reg(struct worker *w);
int op_mr_reg_edge(struct worker *w);
int op_mr_dereg(struct worker *w);
int op_mr_rereg(struct worker *w);
int op_mw_alloc(struct worker *w);
int op_mw_free(struct worker *w);
int op_mw_bind(struct worker *w);
int op_ah_create(struct worker *w);
int op_ah_destroy(struct worker *w);
int op_post_send(struct worker *w);
int op_post_recv(struct worker *w);
int op_post_srq_recv(struct worker *w);
int op_chan_create(struct worker *w);
int op_chan_destroy(struct worker *w);
int op_chan_connect(struct worker *w);
int op_bulk_post(struct worker *w);
int op_bulk_post_edge(struct worker *w);
int op_cmr_reg(struct worker *w);
int op_cmr_reg_edge(struct worker *w);
int op_cmr_release(struct worker *w);
int op_cache_query(struct worker *w);

/* hostile.c */
int op_sq_scribble(struct worker *w);
int op_rq_scribble(struct worker *w);
int op_srq_scribble(struct worker *w);
int op_cq_scribble(struct worker *w);
int op_bulk_scribble(struct worker *w);
int op_raw_ioctl(struct worker *w);
int op_raw_write(struct worker *w);
int op_raw_mmap(struct worker *w);
int op_mem_churn(struct worker *w);
int op_fork_child(struct worker *w);

/* memory.c */
int op_dm_alloc(struct worker *w);
int op_dm_free(struct worker *w);
int op_dm_copy(struct worker *w);
int op_dm_mr(struct worker *w);
int op_dm_import(struct worker *w);
int op_dmabuf_mr(struct worker *w);
int op_advise_mr(struct worker *w);
/* A raw SQ doorbell (BZC_METHOD_QP_DOORBELL); 0 or errno. */
int raw_qp_doorbell(struct ibv_context *ctx, uint32_t qp_handle);
/* The core's destroy of the object @kind @handle; forgets it on success. */
int raw_destroy(struct worker *w, int kind, uint32_t handle);

/* An op's return when it did nothing worth counting (no object to use). */
#define NOTHING (-1)

#endif /* BZC_FUZZ_H */
