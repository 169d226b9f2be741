// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc-fuzz: the run.  Forks --procs worker processes of --threads threads
 * each; every thread draws ops (weighted, from the enabled ones) with its
 * own PRNG seeded from --seed, its process and thread number.  Meanwhile
 * the main process forks short-lived victim workers and SIGKILLs them
 * mid-op.  At the end it prints the (op, result) pairs reached and the
 * rate, and fails when a worker crashed or did not stop.
 *
 *   bzc-fuzz --seed 1 --time 60 --procs 2 --threads 2
 *   bzc-fuzz --seed 1 --worker 0.1 --ops 5000      replay one thread
 *   bzc-fuzz --dump LOGDIR                           print the op logs
 *
 * The kernel side (WARN, lockdep, hung tasks, leaks) is checked by
 * tools/fuzz, which runs this on a machine with bzc0.
 */
#include <errno.h>
#include <execinfo.h>
#include <getopt.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

/* Weights: how often each op is drawn relative to the others. */
const struct fuzz_op fuzz_ops[OP_COUNT] = {
	[OP_CTX_REOPEN] = { "ctx_reopen", op_ctx_reopen, 1 },
	[OP_PD_ALLOC] = { "pd_alloc", op_pd_alloc, 3 },
	[OP_PD_FREE] = { "pd_free", op_pd_free, 2 },
	[OP_CQ_CREATE] = { "cq_create", op_cq_create, 4 },
	[OP_CQ_CREATE_EDGE] = { "cq_create_edge", op_cq_create_edge, 1 },
	[OP_CQ_DESTROY] = { "cq_destroy", op_cq_destroy, 3 },
	[OP_CQ_RESIZE] = { "cq_resize", op_cq_resize, 2 },
	[OP_CQ_POLL] = { "cq_poll", op_cq_poll, 12 },
	[OP_CQ_ARM] = { "cq_arm", op_cq_arm, 3 },
	[OP_QP_CREATE] = { "qp_create", op_qp_create, 6 },
	[OP_QP_CREATE_EDGE] = { "qp_create_edge", op_qp_create_edge, 1 },
	[OP_QP_DESTROY] = { "qp_destroy", op_qp_destroy, 4 },
	[OP_QP_CONNECT] = { "qp_connect", op_qp_connect, 8 },
	[OP_QP_MODIFY] = { "qp_modify", op_qp_modify, 4 },
	[OP_QUERY] = { "query", op_query, 2 },
	[OP_SRQ_CREATE] = { "srq_create", op_srq_create, 2 },
	[OP_SRQ_DESTROY] = { "srq_destroy", op_srq_destroy, 2 },
	[OP_SRQ_MODIFY] = { "srq_modify", op_srq_modify, 2 },
	[OP_MR_REG] = { "mr_reg", op_mr_reg, 5 },
	[OP_MR_REG_EDGE] = { "mr_reg_edge", op_mr_reg_edge, 1 },
	[OP_MR_DEREG] = { "mr_dereg", op_mr_dereg, 3 },
	[OP_MR_REREG] = { "mr_rereg", op_mr_rereg, 2 },
	[OP_MW_ALLOC] = { "mw_alloc", op_mw_alloc, 2 },
	[OP_MW_FREE] = { "mw_free", op_mw_free, 2 },
	[OP_MW_BIND] = { "mw_bind", op_mw_bind, 3 },
	[OP_AH_CREATE] = { "ah_create", op_ah_create, 2 },
	[OP_AH_DESTROY] = { "ah_destroy", op_ah_destroy, 2 },
	[OP_POST_SEND] = { "post_send", op_post_send, 16 },
	[OP_POST_RECV] = { "post_recv", op_post_recv, 8 },
	[OP_POST_SRQ_RECV] = { "post_srq_recv", op_post_srq_recv, 4 },
	[OP_CHAN_CREATE] = { "chan_create", op_chan_create, 3 },
	[OP_CHAN_DESTROY] = { "chan_destroy", op_chan_destroy, 2 },
	[OP_CHAN_CONNECT] = { "chan_connect", op_chan_connect, 4 },
	[OP_BULK_POST] = { "bulk_post", op_bulk_post, 8 },
	[OP_BULK_POST_EDGE] = { "bulk_post_edge", op_bulk_post_edge, 1 },
	[OP_CMR_REG] = { "cmr_reg", op_cmr_reg, 4 },
	[OP_CMR_REG_EDGE] = { "cmr_reg_edge", op_cmr_reg_edge, 1 },
	[OP_CMR_RELEASE] = { "cmr_release", op_cmr_release, 3 },
	[OP_CACHE_QUERY] = { "cache_query", op_cache_query, 1 },
	[OP_SQ_SCRIBBLE] = { "sq_scribble", op_sq_scribble, 4 },
	[OP_RQ_SCRIBBLE] = { "rq_scribble", op_rq_scribble, 3 },
	[OP_SRQ_SCRIBBLE] = { "srq_scribble", op_srq_scribble, 2 },
	[OP_CQ_SCRIBBLE] = { "cq_scribble", op_cq_scribble, 2 },
	[OP_BULK_SCRIBBLE] = { "bulk_scribble", op_bulk_scribble, 3 },
	[OP_RAW_IOCTL] = { "raw_ioctl", op_raw_ioctl, 8 },
	[OP_RAW_WRITE] = { "raw_write", op_raw_write, 3 },
	[OP_RAW_MMAP] = { "raw_mmap", op_raw_mmap, 3 },
	[OP_MEM_CHURN] = { "mem_churn", op_mem_churn, 3 },
	[OP_FORK_CHILD] = { "fork_child", op_fork_child, 1 },
	[OP_DM_ALLOC] = { "dm_alloc", op_dm_alloc, 2 },
	[OP_DM_FREE] = { "dm_free", op_dm_free, 2 },
	[OP_DM_COPY] = { "dm_copy", op_dm_copy, 3 },
	[OP_DM_MR] = { "dm_mr", op_dm_mr, 2 },
	[OP_DM_IMPORT] = { "dm_import", op_dm_import, 2 },
	[OP_DMABUF_MR] = { "dmabuf_mr", op_dmabuf_mr, 2 },
	[OP_ADVISE_MR] = { "advise_mr", op_advise_mr, 2 },
	[OP_CQE_STATUS] = { "(cqe status)", NULL, 0 },
	[OP_ASYNC_EVENT] = { "(async event)", NULL, 0 },
};

struct fuzz_opts opts = {
	.seed = 1,
	.procs = 2,
	.threads = 2,
	.kill_victims = true,
};
struct shared *shm;
__thread sigjmp_buf *fault_guard;

/* ---------------------------------------------------------------------- */
/* PRNG                                                                     */
/* ---------------------------------------------------------------------- */

uint64_t seed_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

uint64_t rnd(struct worker *w)
{
	uint64_t x = w->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	w->rng = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint64_t rnd_below(struct worker *w, uint64_t n)
{
	return n ? rnd(w) % n : 0;
}

bool chance(struct worker *w, unsigned int percent)
{
	return rnd_below(w, 100) < percent;
}

uint64_t rnd_edge(struct worker *w)
{
	static const uint64_t edges[] = {
		0, 1, 2, 3, 7, 8, 63, 64, 255, 256, 4095, 4096, 4097,
		1ULL << 16, (1ULL << 16) + 1, 1ULL << 20, 1ULL << 24,
		(1ULL << 31) - 1, 1ULL << 31, (1ULL << 32) - 1, 1ULL << 32,
		1ULL << 40, 1ULL << 42, (1ULL << 42) + 1, 1ULL << 47,
		(1ULL << 63) - 1, 1ULL << 63, UINT64_MAX - 4095, UINT64_MAX,
	};
	uint64_t v = edges[rnd_below(w, sizeof(edges) / sizeof(edges[0]))];

	return chance(w, 10) ? v - rnd_below(w, 3) : v;
}

uint32_t rnd_key(struct worker *w)
{
	struct ibv_mr *mr;

	switch (rnd_below(w, 10)) {
	case 0:
		return 0;
	case 1:
		return UINT32_MAX;
	case 2:
		return (uint32_t)rnd(w);
	case 3: case 4: case 5:
		mr = w->wd.ctx ? any_mr(w) : NULL;
		if (mr)
			return chance(w, 50) ? mr->lkey : mr->rkey;
		/* fall through */
	default:
		return shm->key[rnd_below(w, NSHARED)].rkey ^
		       (chance(w, 10) ? 0x100 : 0);	/* a neighbour's index */
	}
}

uint64_t cache_len(uint64_t len)
{
	if ((opts.avoid & AVOID_CACHE_HUGE) && len > ARENA_LEN)
		return 1 + len % ARENA_LEN;
	return len;
}

static const struct {
	const char *name;
	unsigned int bit;
} avoid_names[] = {
	{ "cache-huge", AVOID_CACHE_HUGE },
};

static void set_avoid(char *list)
{
	char *save = NULL, *name;
	size_t i;

	for (name = strtok_r(list, ",", &save); name;
	     name = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < sizeof(avoid_names) / sizeof(avoid_names[0]); i++)
			if (!strcmp(avoid_names[i].name, name))
				break;
		if (i == sizeof(avoid_names) / sizeof(avoid_names[0])) {
			fprintf(stderr, "bzc-fuzz: unknown --avoid '%s'\n", name);
			exit(2);
		}
		opts.avoid |= avoid_names[i].bit;
	}
}

void count(int op, int code)
{
	if (code < 0 || code >= NCODE)
		code = NCODE - 1;
	atomic_fetch_add_explicit(&shm->counts[op][code], 1,
				  memory_order_relaxed);
}

/* ---------------------------------------------------------------------- */
/* Workers                                                                  */
/* ---------------------------------------------------------------------- */

static unsigned int total_weight;

static int draw_op(struct worker *w)
{
	uint64_t x = rnd_below(w, total_weight);
	int op;

	for (op = 0; op < OP_DRAWN; op++) {
		if (!opts.enabled[op])
			continue;
		if (x < fuzz_ops[op].weight)
			return op;
		x -= fuzz_ops[op].weight;
	}
	return OP_QUERY;
}

static void *thread_main(void *arg)
{
	struct worker *w = arg;
	int op, code;

	w->arena = mmap(NULL, ARENA_LEN, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/*
	 * The scratch page and a guard page after it: a pointer run off its
	 * end (rnd_ptr()) must fault, not reach whatever mapping the kernel
	 * happened to place next (a library's data, another thread's heap).
	 */
	w->scratch = mmap(NULL, 2 * 4096, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w->arena == MAP_FAILED || w->scratch == MAP_FAILED ||
	    mprotect(w->scratch, 4096, PROT_READ | PROT_WRITE)) {
		perror("mmap");
		exit(2);
	}
	w->log = oplog_open(opts.log_dir, w->proc, w->thread, w->seed);

	while (!atomic_load(&shm->stop) && (!opts.ops || w->nops < opts.ops)) {
		if (!w->wd.ctx || w->wd.dead)
			op = OP_CTX_REOPEN;
		else
			op = draw_op(w);
		oplog_begin(w, op);
		code = fuzz_ops[op].fn(w);
		oplog_end(w, code);
		if (code != NOTHING)
			count(op, code);
		w->nops++;
		if (!w->wd.ctx) {
			/* No device (deleted meanwhile?): do not spin. */
			struct timespec ts = { 0, 20 * 1000 * 1000 };

			nanosleep(&ts, NULL);
		}
	}
	oplog_begin(w, OP_CTX_REOPEN);
	note(w, "final close");
	world_close(w, true);
	oplog_end(w, 0);
	return NULL;
}

/* Worker process @proc: opts.threads threads (1 for a victim). */
static void worker_main(int proc, int nthreads, int only_thread)
{
	struct worker *ws = calloc((size_t)nthreads, sizeof(*ws));
	pthread_t *tids = calloc((size_t)nthreads, sizeof(*tids));
	int t;

	for (t = 0; t < nthreads; t++) {
		struct worker *w = &ws[t];

		w->proc = proc;
		w->thread = only_thread >= 0 ? only_thread : t;
		w->seed = seed_mix(opts.seed ^ seed_mix(((uint64_t)proc << 16) |
						      (uint64_t)w->thread));
		w->rng = w->seed | 1;
		w->devices = opts.devices;
		w->ndevices = opts.ndevices;
		if (pthread_create(&tids[t], NULL, thread_main, w)) {
			perror("pthread_create");
			exit(2);
		}
	}
	for (t = 0; t < nthreads; t++)
		pthread_join(tids[t], NULL);
	exit(0);
}

/*
 * A fault in a guarded access (a raw mapping) returns to the op; any other,
 * or an abort (glibc's heap checks), is a crash of this process: where it
 * happened goes to stderr (resolve library offsets with addr2line), then
 * the default action.
 */
static void fault_handler(int sig, siginfo_t *si, void *uc)
{
	void *frames[32];
	char line[80];
	ssize_t written;
	int n;

	if (fault_guard && sig != SIGABRT)
		siglongjmp(*fault_guard, 1);
	n = backtrace(frames, 32);
	/*
	 * Not dprintf(): it takes stdio's lock, which a thread in fork() or
	 * the aborting thread itself may hold.
	 */
	snprintf(line, sizeof(line),
		 "bzc-fuzz: signal %d at address %p, backtrace:\n", sig,
		 si->si_addr);
	written = write(2, line, strlen(line));
	(void)written;
	backtrace_symbols_fd(frames, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* ---------------------------------------------------------------------- */
/* The report                                                               */
/* ---------------------------------------------------------------------- */

static const char *code_name(int op, int code)
{
	static char buf[32];
	const char *s;

	if (op == OP_CQE_STATUS)
		return ibv_wc_status_str((enum ibv_wc_status)code);
	if (op == OP_ASYNC_EVENT)
		return ibv_event_type_str((enum ibv_event_type)code);
	if (!code)
		return "0";
	s = strerrorname_np(code);
	if (s)
		return s;
	snprintf(buf, sizeof(buf), "%d", code);
	return buf;
}

static uint64_t report(double secs)
{
	uint64_t total = 0, pairs = 0, n;
	FILE *sf = NULL;
	int op, code;

	if (opts.stats_file) {
		sf = fopen(opts.stats_file, "w");
		if (!sf)
			perror(opts.stats_file);
	}
	printf("%-16s %9s  results\n", "op", "count");
	for (op = 0; op < OP_COUNT; op++) {
		uint64_t sum = 0;

		for (code = 0; code < NCODE; code++)
			sum += atomic_load(&shm->counts[op][code]);
		if (!sum)
			continue;
		if (op < OP_DRAWN)
			total += sum;
		printf("%-16s %9" PRIu64 " ", fuzz_ops[op].name, sum);
		for (code = 0; code < NCODE; code++) {
			n = atomic_load(&shm->counts[op][code]);
			if (!n)
				continue;
			pairs++;
			printf(" %s:%" PRIu64, code_name(op, code), n);
			if (sf)
				fprintf(sf, "%s\t%s\t%" PRIu64 "\n",
					fuzz_ops[op].name, code_name(op, code), n);
		}
		printf("\n");
	}
	if (sf)
		fclose(sf);
	printf("bzc-fuzz: seed %" PRIu64 ": %" PRIu64 " ops in %.1f s (%.0f ops/s), "
	       "%" PRIu64 " distinct (op, result) pairs\n", opts.seed, total,
	       secs, secs > 0 ? total / secs : 0.0, pairs);
	return pairs;
}

/* Print where a stuck process's threads are in the kernel. */
static void show_stacks(pid_t pid)
{
	char cmd[384];

	snprintf(cmd, sizeof(cmd),
		 "for t in /proc/%d/task/*; do echo \"== $t $(cat $t/wchan)\"; "
		 "cat $t/stack; done 2>/dev/null; command -v gdb >/dev/null && "
		 "gdb -p %d -batch -ex 'thread apply all bt' 2>/dev/null | "
		 "grep -E '^(#|Thread)'", (int)pid, (int)pid);
	fflush(stdout);
	if (system(cmd) < 0)
		perror("system");
}

/* A victim that died of anything but our SIGKILL crashed. */
static void victim_done(int status, unsigned int n, int *failed)
{
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		return;
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return;
	printf("bzc-fuzz: victim %u (process %u) %s %d\n", n, 100 + n % 8,
	       WIFSIGNALED(status) ? "died of signal" : "exited with",
	       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	oplog_dump(opts.log_dir, 100 + (int)(n % 8), 32);
	*failed = 1;
}

/* ---------------------------------------------------------------------- */
/* main                                                                     */
/* ---------------------------------------------------------------------- */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void msleep(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static int find_op(const char *name)
{
	for (int op = 0; op < OP_DRAWN; op++)
		if (!strcmp(fuzz_ops[op].name, name))
			return op;
	return -1;
}

/* "a,b,c": set enabled[] of each op named to @on. */
static void set_ops(char *list, bool on)
{
	char *save = NULL, *name;

	for (name = strtok_r(list, ",", &save); name;
	     name = strtok_r(NULL, ",", &save)) {
		int op = find_op(name);

		if (op < 0) {
			fprintf(stderr, "bzc-fuzz: unknown op '%s' (--list-ops)\n",
				name);
			exit(2);
		}
		opts.enabled[op] = on;
	}
}

static void usage(void)
{
	fprintf(stderr,
"usage: bzc-fuzz [options]\n"
"  -s, --seed N        run seed (default 1); each thread's seed derives from it\n"
"  -t, --time SEC      run for SEC seconds (default 30, unless --ops)\n"
"  -n, --ops N         stop each thread after N ops\n"
"  -p, --procs N       worker processes (default 2)\n"
"  -T, --threads N     threads per worker process (default 2)\n"
"  -d, --device DEV    device to use (repeat for several; default bzc0)\n"
"  --disable OP,...    leave these ops out      --only OP,...  only these\n"
"  --no-kill           no SIGKILLed victim workers\n"
"  --avoid BUG,...     steer clear of known kernel bugs: cache-huge (MR cache\n"
"                      lengths above 4 MiB)\n"
"  --worker P.T        replay thread T of process P alone (with --seed, --ops)\n"
"  --log-dir DIR       per-thread op logs (default /tmp/bzc-fuzz-logs)\n"
"  --stats FILE        write 'op<TAB>result<TAB>count' lines\n"
"  --dump DIR          print the op logs in DIR and exit\n"
"  --list-ops          print the ops and their weights and exit\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "seed", required_argument, NULL, 's' },
		{ "time", required_argument, NULL, 't' },
		{ "ops", required_argument, NULL, 'n' },
		{ "procs", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 'T' },
		{ "device", required_argument, NULL, 'd' },
		{ "disable", required_argument, NULL, 1 },
		{ "only", required_argument, NULL, 2 },
		{ "no-kill", no_argument, NULL, 3 },
		{ "worker", required_argument, NULL, 4 },
		{ "log-dir", required_argument, NULL, 5 },
		{ "stats", required_argument, NULL, 6 },
		{ "dump", required_argument, NULL, 7 },
		{ "list-ops", no_argument, NULL, 8 },
		{ "avoid", required_argument, NULL, 9 },
		{}
	};
	int c, i, only_proc = -1, only_thread = -1, failed = 0, running;
	pid_t *pids;
	double t0, deadline, next_victim;
	struct sigaction sa = {};
	uint64_t vrng;
	pid_t victim = 0;
	double victim_kill = 0;
	unsigned int victims = 0;
	void *frame;

	for (i = 0; i < OP_DRAWN; i++)
		opts.enabled[i] = true;
	opts.log_dir = "/tmp/bzc-fuzz-logs";
	while ((c = getopt_long(argc, argv, "s:t:n:p:T:d:", lopts, NULL)) != -1) {
		switch (c) {
		case 's': opts.seed = strtoull(optarg, NULL, 0); break;
		case 't': opts.seconds = (unsigned int)atoi(optarg); break;
		case 'n': opts.ops = strtoull(optarg, NULL, 0); break;
		case 'p': opts.procs = atoi(optarg); break;
		case 'T': opts.threads = atoi(optarg); break;
		case 'd':
			if (opts.ndevices < 4)
				opts.devices[opts.ndevices++] = optarg;
			break;
		case 1: set_ops(optarg, false); break;
		case 2:
			for (i = 0; i < OP_DRAWN; i++)
				opts.enabled[i] = false;
			set_ops(optarg, true);
			break;
		case 3: opts.kill_victims = false; break;
		case 4:
			if (sscanf(optarg, "%d.%d", &only_proc, &only_thread) != 2)
				usage();
			break;
		case 5: opts.log_dir = optarg; break;
		case 6: opts.stats_file = optarg; break;
		case 7: return oplog_dump(optarg, -1, 64);
		case 8:
			for (i = 0; i < OP_DRAWN; i++)
				printf("%-16s %u\n", fuzz_ops[i].name,
				       fuzz_ops[i].weight);
			return 0;
		case 9: set_avoid(optarg); break;
		default: usage();
		}
	}
	if (optind != argc || opts.procs < 1 || opts.threads < 1)
		usage();
	if (!opts.ndevices)
		opts.devices[opts.ndevices++] = "bzc0";
	if (!opts.seconds && !opts.ops)
		opts.seconds = 30;
	for (i = 0; i < OP_DRAWN; i++)
		if (opts.enabled[i])
			total_weight += fuzz_ops[i].weight;
	if (!total_weight)
		usage();
	mkdir(opts.log_dir, 0755);

	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	/* backtrace() loads libgcc on first use: not in a crashed handler. */
	backtrace(&frame, 1);
	sa.sa_sigaction = fault_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	/* glibc's heap checks abort(); where they fired matters as much. */
	sigaction(SIGABRT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	printf("bzc-fuzz: seed %" PRIu64 ", %d procs x %d threads, ",
	       opts.seed, only_proc >= 0 ? 1 : opts.procs,
	       only_proc >= 0 ? 1 : opts.threads);
	if (opts.ops)
		printf("%" PRIu64 " ops per thread", opts.ops);
	if (opts.seconds)
		printf("%s%u s", opts.ops ? ", at most " : "", opts.seconds);
	printf(", devices");
	for (i = 0; i < opts.ndevices; i++)
		printf(" %s", opts.devices[i]);
	printf(", op logs in %s\n", opts.log_dir);
	printf("bzc-fuzz: disabled ops:");
	for (i = 0; i < OP_DRAWN; i++)
		if (!opts.enabled[i])
			printf(" %s", fuzz_ops[i].name);
	printf("; avoiding:");
	for (i = 0; i < (int)(sizeof(avoid_names) / sizeof(avoid_names[0])); i++)
		if (opts.avoid & avoid_names[i].bit)
			printf(" %s", avoid_names[i].name);
	printf("\n");
	fflush(stdout);

	if (only_proc >= 0) {
		opts.procs = 1;
		opts.kill_victims = false;
	}
	pids = calloc((size_t)opts.procs, sizeof(*pids));
	t0 = now();
	deadline = opts.seconds ? t0 + opts.seconds : 1e300;
	for (i = 0; i < opts.procs; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			return 2;
		}
		if (!pids[i]) {
			if (only_proc >= 0)
				worker_main(only_proc, 1, only_thread);
			worker_main(i, opts.threads, -1);
		}
	}

	/* Victims: one at a time, SIGKILLed 0.2-2.5 s into their life. */
	vrng = seed_mix(opts.seed ^ 0x7669637469ULL);
	next_victim = t0 + 0.2;
	running = opts.procs;
	while (running) {
		double t = now();
		int status;
		pid_t pid;

		if (t >= deadline)
			atomic_store(&shm->stop, 1);
		if (opts.kill_victims && !atomic_load(&shm->stop) && !victim &&
		    t >= next_victim) {
			int vproc = 100 + (int)(victims++ % 8);

			victim = fork();
			if (!victim)
				worker_main(vproc, 1, -1);
			vrng = seed_mix(vrng);
			/* Opening the device alone takes 0.1-0.5 s under TCG. */
			victim_kill = t + 0.2 + (double)(vrng % 2300) / 1000;
		}
		if (victim && (t >= victim_kill || atomic_load(&shm->stop))) {
			kill(victim, SIGKILL);
			if (waitpid(victim, &status, 0) == victim)
				victim_done(status, victims - 1, &failed);
			victim = 0;
			vrng = seed_mix(vrng);
			next_victim = t + 0.2 + (double)(vrng % 800) / 1000;
		}
		pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0 && pid == victim) {
			/* Died before its SIGKILL: only a crash does that. */
			victim_done(status, victims - 1, &failed);
			victim = 0;
			continue;
		}
		if (pid > 0) {
			for (i = 0; i < opts.procs; i++)
				if (pids[i] == pid)
					break;
			if (i == opts.procs)
				continue;
			pids[i] = 0;
			running--;
			if (WIFSIGNALED(status) ||
			    (WIFEXITED(status) && WEXITSTATUS(status))) {
				printf("bzc-fuzz: worker %d %s %d\n", i,
				       WIFSIGNALED(status) ? "died of signal" :
				       "exited with", WIFSIGNALED(status) ?
				       WTERMSIG(status) : WEXITSTATUS(status));
				oplog_dump(opts.log_dir,
					   only_proc >= 0 ? only_proc : i, 32);
				failed = 1;
			}
			continue;
		}
		/* A worker that does not stop within 60 s is stuck in the kernel. */
		if (atomic_load(&shm->stop) && now() > deadline + 60) {
			for (i = 0; i < opts.procs; i++) {
				if (!pids[i])
					continue;
				printf("bzc-fuzz: worker %d did not stop 60 s after the end "
				       "(stuck in the kernel?)\n", i);
				show_stacks(pids[i]);
				oplog_dump(opts.log_dir,
					   only_proc >= 0 ? only_proc : i, 16);
				kill(pids[i], SIGKILL);
			}
			failed = 1;
			msleep(5000);
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
			break;
		}
		msleep(20);
	}
	report(now() - t0);
	if (failed)
		printf("bzc-fuzz: FAILED (seed %" PRIu64 "); op logs: bzc-fuzz --dump %s\n",
		       opts.seed, opts.log_dir);
	return failed;
}
