// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * cma_bw: bandwidth of process_vm_writev() between two processes (Linux
 * cross-memory attach, the single-copy path MPI and UCX use inside a host),
 * the baseline bzc's bulk transfers are compared with.
 *
 *   cma_bw [-s BYTES] [-n ITERS]
 *
 * The parent owns the destination buffer; a forked child writes its own
 * source buffer into it ITERS times. Both buffers are faulted in first.
 * Prints one line: bytes, iterations, GB/s (10^9 bytes per second), and
 * whether the data arrived intact. Exit status 0 only if it did.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fill(unsigned char *buf, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 131 + seed);
}

/* Child: write `src` into the parent's `dst` iters times; print the rate. */
static int writer(pid_t parent, void *dst, size_t len, int iters)
{
	unsigned char *src = malloc(len);
	struct iovec l, r;
	double t0, t;
	int i;

	if (!src)
		return 1;
	fill(src, len, 7);
	l.iov_base = src;
	r.iov_base = dst;
	t0 = now();
	for (i = 0; i < iters; i++) {
		size_t done = 0;

		while (done < len) {
			ssize_t n;

			l.iov_base = src + done;
			l.iov_len = len - done;
			r.iov_base = (char *)dst + done;
			r.iov_len = len - done;
			n = process_vm_writev(parent, &l, 1, &r, 1, 0);
			if (n <= 0) {
				fprintf(stderr, "cma_bw: process_vm_writev: %s\n",
					strerror(errno));
				return 1;
			}
			done += n;
		}
	}
	t = now() - t0;
	printf("cma_bw: %zu bytes x %d: %.3f GB/s", len, iters,
	       (double)len * iters / t / 1e9);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	size_t len = 256UL << 20;
	unsigned char *dst, *want;
	int iters = 4, opt, status;
	pid_t child;

	while ((opt = getopt(argc, argv, "s:n:")) != -1) {
		if (opt == 's')
			len = strtoull(optarg, NULL, 0);
		else if (opt == 'n')
			iters = atoi(optarg);
		else {
			fprintf(stderr, "usage: cma_bw [-s BYTES] [-n ITERS]\n");
			return 2;
		}
	}
	dst = malloc(len);
	want = malloc(len);
	if (!dst || !want || !len || iters < 1) {
		fprintf(stderr, "cma_bw: bad size or out of memory\n");
		return 2;
	}
	memset(dst, 0, len);
	fill(want, len, 7);

	child = fork();
	if (child < 0)
		return 1;
	if (!child)
		_exit(writer(getppid(), dst, len, iters));
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "cma_bw: the writer failed\n");
		return 1;
	}
	if (memcmp(dst, want, len)) {
		printf(", data CORRUPT\n");
		return 1;
	}
	printf(", data intact\n");
	return 0;
}
