// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Op logs: each thread writes its last LOG_SLOTS ops into a file of its own
 * that it has mapped MAP_SHARED.  A line is written before the op runs and
 * completed with its result after, so when the kernel oopses, hangs or
 * kills the process mid-op, the file still shows the op in flight and the
 * ones before it: the memory is the page cache, not the process's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

#define LOG_SLOTS 256
#define LOG_LINE 192
#define LOG_MAGIC 0x627a667a6c6f6731ULL	/* "bzfzlog1" */

struct oplog {
	uint64_t magic;
	uint64_t seed;			/* the thread's seed */
	uint64_t run_seed;		/* --seed of the run */
	int32_t proc, thread;
	volatile uint64_t next;		/* ops begun */
	char line[LOG_SLOTS][LOG_LINE];
};

struct oplog *oplog_open(const char *dir, int proc, int thread, uint64_t seed)
{
	char path[4096];
	struct oplog *log;
	int fd;

	if (!dir) {
		log = calloc(1, sizeof(*log));
	} else {
		snprintf(path, sizeof(path), "%s/p%d-t%d.log", dir, proc, thread);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || ftruncate(fd, sizeof(*log))) {
			perror(path);
			exit(2);
		}
		log = mmap(NULL, sizeof(*log), PROT_READ | PROT_WRITE,
			   MAP_SHARED, fd, 0);
		close(fd);
		if (log == MAP_FAILED) {
			perror("mmap oplog");
			exit(2);
		}
	}
	log->magic = LOG_MAGIC;
	log->seed = seed;
	log->run_seed = opts.seed;
	log->proc = proc;
	log->thread = thread;
	return log;
}

/* A forked child's own scratch log, so it does not write into its parent's. */
void oplog_detach(struct worker *w)
{
	struct oplog *log = mmap(NULL, sizeof(*log), PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (log != MAP_FAILED)
		w->log = log;
}

static char *cur_line(struct worker *w)
{
	return w->log->line[(w->log->next - 1) % LOG_SLOTS];
}

void oplog_begin(struct worker *w, int op)
{
	char *l;

	w->log->next++;
	l = cur_line(w);
	snprintf(l, LOG_LINE, "%" PRIu64 " %s", w->nops, fuzz_ops[op].name);
}

/* Append " text" to the op's line (what it is about to do). */
void note(struct worker *w, const char *fmt, ...)
{
	char *l = cur_line(w);
	size_t n = strnlen(l, LOG_LINE - 1);
	va_list ap;

	if (n + 2 >= LOG_LINE)
		return;
	l[n++] = ' ';
	va_start(ap, fmt);
	vsnprintf(l + n, LOG_LINE - n, fmt, ap);
	va_end(ap);
}

void oplog_end(struct worker *w, int code)
{
	if (code == NOTHING)
		note(w, "=> -");
	else if (code)
		note(w, "=> %s", strerrorname_np(code) ?: "?");
	else
		note(w, "=> 0");
}

static int dump_one(const char *path, unsigned int last)
{
	struct oplog *log;
	uint64_t i, from;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	log = mmap(NULL, sizeof(*log), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (log == MAP_FAILED || log->magic != LOG_MAGIC)
		return -1;
	if (last > LOG_SLOTS)
		last = LOG_SLOTS;
	from = log->next > last ? log->next - last : 0;
	printf("--- %s: proc %d thread %d, thread seed 0x%" PRIx64
	       ", %" PRIu64 " ops begun; replay this thread alone:\n"
	       "    bzc-fuzz --seed %" PRIu64 " --worker %d.%d --ops %" PRIu64
	       "\n", path, log->proc, log->thread, log->seed, log->next,
	       log->run_seed, log->proc, log->thread, log->next);
	for (i = from; i < log->next; i++)
		printf("    %s\n", log->line[i % LOG_SLOTS]);
	munmap(log, sizeof(*log));
	return 0;
}

int oplog_dump(const char *dir, int proc, unsigned int last)
{
	struct dirent **ents;
	char path[4096], want[32];
	int n, i, found = 0;

	n = scandir(dir, &ents, NULL, versionsort);
	if (n < 0) {
		perror(dir);
		return 1;
	}
	snprintf(want, sizeof(want), "p%d-", proc);
	for (i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		size_t len = strlen(name);

		if (len > 4 && !strcmp(name + len - 4, ".log") && name[0] == 'p' &&
		    (proc < 0 || !strncmp(name, want, strlen(want)))) {
			snprintf(path, sizeof(path), "%s/%s", dir, name);
			if (!dump_one(path, last))
				found++;
		}
		free(ents[i]);
	}
	free(ents);
	return found ? 0 : 1;
}
