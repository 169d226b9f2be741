// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * cm_late_listen: an LD_PRELOAD shim that makes a server reach one of its
 * rdma_listen() calls late, for tests of what a client does when its
 * connection request is rejected because nobody listens yet (the race
 * between a server's listen and its client's connect that a loaded
 * machine opens).
 *
 *   BZC_LATE_LISTEN_MS   delay in milliseconds (unset or 0: no delay)
 *   BZC_LATE_LISTEN_NTH  which call of the process to delay, from 1
 *                        (default 2: perftest -R listens first for its
 *                        control connection, then for the data one)
 *
 * Every call then goes on to the real rdma_listen() unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

struct rdma_cm_id;

int rdma_listen(struct rdma_cm_id *id, int backlog);

static long env_long(const char *name, long def)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return def;
	v = strtol(s, &end, 10);
	return *end || v < 0 ? def : v;
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	static int (*real_listen)(struct rdma_cm_id *, int);
	static long calls;
	long ms = env_long("BZC_LATE_LISTEN_MS", 0);
	struct timespec ts;

	if (!real_listen) {
		real_listen = (int (*)(struct rdma_cm_id *, int))
			dlsym(RTLD_NEXT, "rdma_listen");
		if (!real_listen) {
			errno = ENOSYS;
			return -1;
		}
	}
	if (++calls == env_long("BZC_LATE_LISTEN_NTH", 2) && ms) {
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (ms % 1000) * 1000000L;
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	return real_listen(id, backlog);
}
