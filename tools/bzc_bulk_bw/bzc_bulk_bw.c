// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc_bulk_bw: bandwidth of bzc bulk channels (bzcdv_post_bulk), in the
 * style of perftest's ib_write_bw.
 *
 *   bzc_bulk_bw [opts]                 loopback: two channels, one process
 *   bzc_bulk_bw --server [opts]        wait for a client on TCP port -p
 *   bzc_bulk_bw [opts] HOST            client of a server on HOST
 *   bzc_bulk_bw --reg-bench [-s SIZE] [-n N]
 *                                      MR cache hit vs ibv_reg_mr+dereg
 *   bzc_bulk_bw --qp --server [opts]   a plain RC QP and MR (any device:
 *                                      rxe, a RoCE NIC, bzc), no channel
 *   bzc_bulk_bw --qp [opts] HOST       the client's channel carried on an
 *                                      RC QP to that server's QP
 *                                      (bzcdv_connect_bulk_chan_qp)
 *
 * The client (or the first loopback channel) posts the WRs; the far side
 * provides its address (GID and channel number), buffer address and rkey
 * over the TCP control connection, and learns the client's address in
 * return: the two channels connect to each other (bzcdv_connect_bulk_chan)
 * before any WR runs.  With --qp the two sides connect RC QPs instead
 * (QPN and GID over TCP, PSN 0, each side's port MTU) and the client's
 * channel sends its WRs as RDMA messages on its QP, so the server needs
 * no bzc at all.  --check verifies the moved data afterwards.
 */

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/bzcdv.h>
#include <infiniband/verbs.h>

#define MIN_ALL_SIZE (4ULL << 10)
#define DEFAULT_MAX (1ULL << 30)

enum mode { LOOPBACK, SERVER, CLIENT };

static struct {
	const char *dev;
	const char *host;
	const char *port;
	enum mode mode;
	uint64_t size;
	bool all;
	unsigned int iters;
	unsigned int depth;
	enum bzcdv_bulk_opcode op;
	bool cached;
	bool odp;		/* --odp: MRs with IBV_ACCESS_ON_DEMAND */
	bool warm;		/* --warm: one untimed WR first */
	bool check;
	bool events;
	bool reg_bench;
	bool qp;
	int gid_index;		/* -1: the first GID the port has */
} opt = {
	.dev = "bzc0",
	.port = "18515",
	.size = 1ULL << 20,
	.iters = 10,
	.depth = 4,
	.op = BZCDV_BULK_WRITE,
	.gid_index = -1,
};

/*
 * What each side tells the other over TCP (big-endian on the wire); the
 * client sends only its address (chan_num, gid).
 */
struct far_info {
	uint32_t chan_num;
	uint32_t rkey;
	uint64_t addr;
	uint64_t size;
	uint8_t gid[16];
};

/* Control messages from the client to the server. */
enum { MSG_CHECK = 1, MSG_DONE = 2, MSG_CLEAR = 3 };
struct ctl_msg {
	uint32_t type;
	uint32_t pad;
	uint64_t len;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "bzc_bulk_bw: %s: %s\n", what, strerror(err));
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The byte at offset i of the reference data: not periodic in pages. */
static uint8_t pat(uint64_t i)
{
	return (uint8_t)(((i * 2654435761u) >> 13) ^ (i >> 20) ^ 0x5a);
}

static void fill_pattern(uint8_t *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		p[i] = pat(i);
}

static bool check_pattern(const uint8_t *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != pat(i))
			return false;
	return true;
}

static int odp_access(void)
{
	return opt.odp ? IBV_ACCESS_ON_DEMAND : 0;
}

static void *alloc_buf(uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED)
		die("mmap", errno);
	return p;
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list", errno);
	for (i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), opt.dev))
			continue;
		/* A --qp server is a plain RC QP: any RDMA device. */
		if (!(opt.qp && opt.mode == SERVER) &&
		    !bzcdv_is_supported(list[i])) {
			fprintf(stderr, "bzc_bulk_bw: %s is not a bzc device\n",
				opt.dev);
			exit(1);
		}
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			die("ibv_open_device", errno);
	}
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "bzc_bulk_bw: no device %s\n", opt.dev);
		exit(1);
	}
	return ctx;
}

struct side {
	int gid_index;			/* the channel's address: this GID */
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;	/* with --events */
	struct ibv_cq *cq;
	struct bzcdv_bulk_chan *chan;
	uint8_t *buf;
	struct ibv_mr *mr;		/* NULL with --cached (lkey 0) */
	struct ibv_cq *qp_cq;		/* --qp: the QP and its CQ */
	struct ibv_qp *qp;
};

/* The channel's address: GID -g, or the first the port has. */
static void pick_gid(struct ibv_context *ctx, struct side *s)
{
	static const union ibv_gid zero;
	int i = opt.gid_index < 0 ? 0 : opt.gid_index;

	for (; i < 256; i++) {
		if (!ibv_query_gid(ctx, 1, i, &s->gid) &&
		    memcmp(&s->gid, &zero, sizeof(zero))) {
			s->gid_index = i;
			return;
		}
		if (opt.gid_index >= 0)
			break;
	}
	fprintf(stderr, "bzc_bulk_bw: %s has no %s GID\n", opt.dev,
		opt.gid_index < 0 ? "usable" : "such");
	exit(1);
}

/* Connect @s's channel to the channel @chan_num at @gid. */
static void connect_chan(struct side *s, const uint8_t *gid,
			 uint32_t chan_num)
{
	struct bzcdv_bulk_conn_attr attr = {
		.remote_chan = chan_num,
		.sgid_index = (uint8_t)s->gid_index,
	};
	int ret;

	memcpy(attr.remote_gid.raw, gid, sizeof(attr.remote_gid.raw));
	ret = bzcdv_connect_bulk_chan(s->chan, &attr);
	if (ret)
		die("bzcdv_connect_bulk_chan", ret);
}

/* --qp: an RC QP on @s's PD, in INIT. */
static void qp_create(struct ibv_context *ctx, struct side *s)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	s->qp_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!s->qp_cq)
		die("ibv_create_cq", errno);
	ia.send_cq = ia.recv_cq = s->qp_cq;
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		die("ibv_create_qp", errno);
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("ibv_modify_qp(INIT)", errno);
}

/* --qp: bring @s's QP to RTS addressed at QP @qpn behind @gid (PSNs 0). */
static void qp_connect(struct ibv_context *ctx, struct side *s,
		       const uint8_t *gid, uint32_t qpn)
{
	struct ibv_port_attr port;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.dest_qp_num = qpn,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.port_num = 1,
			.grh = { .sgid_index = (uint8_t)s->gid_index,
				 .hop_limit = 64 },
		},
	};

	if (ibv_query_port(ctx, 1, &port))
		die("ibv_query_port", errno);
	a.path_mtu = port.active_mtu;
	memcpy(a.ah_attr.grh.dgid.raw, gid, sizeof(a.ah_attr.grh.dgid.raw));
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("ibv_modify_qp(RTR)", errno);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("ibv_modify_qp(RTS)", errno);
}

static void side_init(struct ibv_context *ctx, struct side *s, uint64_t len,
		      bool reg)
{
	struct bzcdv_bulk_chan_init_attr attr = {};

	memset(s, 0, sizeof(*s));
	pick_gid(ctx, s);
	s->pd = ibv_alloc_pd(ctx);
	if (!s->pd)
		die("ibv_alloc_pd", errno);
	s->cc = NULL;
	if (opt.events) {
		s->cc = ibv_create_comp_channel(ctx);
		if (!s->cc)
			die("ibv_create_comp_channel", errno);
	}
	s->cq = ibv_create_cq(ctx, (int)opt.depth * 2 + 16, NULL, s->cc, 0);
	if (!s->cq)
		die("ibv_create_cq", errno);
	attr.pd = s->pd;
	attr.cq = s->cq;
	attr.depth = opt.depth;
	/* A --qp server has no channel: its device need not be bzc. */
	if (!(opt.qp && opt.mode == SERVER)) {
		s->chan = bzcdv_create_bulk_chan(ctx, &attr);
		if (!s->chan)
			die("bzcdv_create_bulk_chan", errno);
	}
	if (opt.qp)
		qp_create(ctx, s);
	s->buf = alloc_buf(len);
	if (reg) {
		s->mr = ibv_reg_mr(s->pd, s->buf, len,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ | odp_access());
		if (!s->mr)
			die("ibv_reg_mr", errno);
	}
}

static void side_fini(struct side *s, uint64_t len)
{
	int ret;

	if (s->mr && ibv_dereg_mr(s->mr))
		die("ibv_dereg_mr", errno);
	/* The channel holds the QP: it goes first. */
	ret = s->chan ? bzcdv_destroy_bulk_chan(s->chan) : 0;
	if (ret)
		die("bzcdv_destroy_bulk_chan", ret);
	if (s->qp && ibv_destroy_qp(s->qp))
		die("ibv_destroy_qp", errno);
	if (s->qp_cq)
		ibv_destroy_cq(s->qp_cq);
	ibv_destroy_cq(s->cq);
	if (s->cc)
		ibv_destroy_comp_channel(s->cc);
	ibv_dealloc_pd(s->pd);
	munmap(s->buf, len);
}

/*
 * --events: sleep until the CQ has a completion instead of polling, which
 * leaves the CPU to the device's workers. Arm, then poll again, so a
 * completion that came before the arm is not waited for. Returns what that
 * poll found (0 after an event).
 */
static int wait_cq_event(struct side *l, struct ibv_wc *wc, int max)
{
	struct ibv_cq *cq;
	void *ctx;
	int n;

	if (ibv_req_notify_cq(l->cq, 0))
		die("ibv_req_notify_cq", errno);
	n = ibv_poll_cq(l->cq, max, wc);
	if (n)
		return n;
	if (ibv_get_cq_event(l->cc, &cq, &ctx))
		die("ibv_get_cq_event", errno);
	ibv_ack_cq_events(cq, 1);
	return 0;
}

/* Run opt.iters WRs of @len bytes, opt.depth in flight; seconds taken. */
static double run_size(struct side *l, const struct far_info *far,
		       uint64_t len)
{
	struct bzcdv_sge sge = {
		.addr = (uintptr_t)l->buf,
		.length = len,
		.lkey = l->mr ? l->mr->lkey : 0,
	};
	struct bzcdv_bulk_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = opt.op,
		.remote_addr = far->addr,
		.rkey = far->rkey,
		.remote_chan = far->chan_num,
	};
	struct bzcdv_bulk_wr *bad;
	unsigned int posted = 0, done = 0;
	struct ibv_wc wc[16];
	double t0;
	int n, ret, i;

	/* --warm: the first touch of each page (ODP faults) goes untimed. */
	if (opt.warm) {
		unsigned int iters = opt.iters;

		opt.warm = false;
		opt.iters = 1;
		run_size(l, far, len);
		opt.iters = iters;
		opt.warm = true;
	}
	t0 = now();

	while (done < opt.iters) {
		while (posted < opt.iters && posted - done < opt.depth) {
			wr.wr_id = posted;
			ret = bzcdv_post_bulk(l->chan, &wr, &bad);
			if (ret == ENOMEM)
				break;
			if (ret)
				die("bzcdv_post_bulk", ret);
			posted++;
		}
		n = ibv_poll_cq(l->cq, 16, wc);
		if (!n && opt.events)
			n = wait_cq_event(l, wc, 16);
		if (n < 0)
			die("ibv_poll_cq", EIO);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr,
					"bzc_bulk_bw: WR %" PRIu64
					" failed: %s (%d)\n",
					wc[i].wr_id,
					ibv_wc_status_str(wc[i].status),
					wc[i].status);
				exit(1);
			}
		}
		done += (unsigned int)n;
	}
	return now() - t0;
}

static double memcpy_time(uint8_t *dst, const uint8_t *src, uint64_t len)
{
	double t0 = now();

	for (unsigned int i = 0; i < opt.iters; i++)
		memcpy(dst, src, len);
	return now() - t0;
}

static const char *op_name(void)
{
	switch (opt.op) {
	case BZCDV_BULK_READ:
		return "read";
	case BZCDV_BULK_COPY:
		return "copy";
	default:
		return "write";
	}
}

static void header(bool memcpy_col)
{
	printf("# bzc_bulk_bw: %s, device %s, %u iterations, depth %u%s\n",
	       op_name(), opt.dev, opt.iters, opt.depth,
	       opt.cached ? ", lkey 0 (MR cache)" : opt.odp ? ", ODP MRs" : "");
	printf("%-14s %-10s %-14s%s%s\n", "#bytes", "#iters", "BW[GB/s]",
	       memcpy_col ? " memcpy[GB/s]" : "", opt.check ? "  check" : "");
}

static void sizes(uint64_t *first, uint64_t *last)
{
	*first = opt.all ? MIN_ALL_SIZE : opt.size;
	*last = opt.all ? (opt.size > MIN_ALL_SIZE ? opt.size : DEFAULT_MAX) :
			  opt.size;
}

static int loopback(void)
{
	struct ibv_context *ctx = open_dev();
	uint64_t first, last, len;
	struct far_info far;
	struct side l, f;
	bool ok_all = true;

	sizes(&first, &last);
	side_init(ctx, &l, last, !opt.cached);
	/* COPY stays in one PD: the far range is the local channel's. */
	if (opt.op == BZCDV_BULK_COPY) {
		memset(&f, 0, sizeof(f));
		f.buf = alloc_buf(last);
		if (!opt.cached) {
			f.mr = ibv_reg_mr(l.pd, f.buf, last,
					  IBV_ACCESS_LOCAL_WRITE |
						  odp_access());
			if (!f.mr)
				die("ibv_reg_mr", errno);
		}
		far.chan_num = 0;
		far.rkey = f.mr ? f.mr->lkey : 0;
	} else {
		side_init(ctx, &f, last, true);
		far.chan_num = f.chan->chan_num;
		far.rkey = f.mr->rkey;
		connect_chan(&l, f.gid.raw, f.chan->chan_num);
		connect_chan(&f, l.gid.raw, l.chan->chan_num);
	}
	far.addr = (uintptr_t)f.buf;
	far.size = last;

	fill_pattern(opt.op == BZCDV_BULK_READ ? f.buf : l.buf, last);
	header(true);
	for (len = first; len <= last; len *= 2) {
		uint8_t *dst = opt.op == BZCDV_BULK_READ ? l.buf : f.buf;
		double t, tm;
		bool ok = true;

		if (opt.check)
			memset(dst, 0, len);
		t = run_size(&l, &far, len);
		if (opt.check)
			ok = check_pattern(dst, len);
		/* The same bytes the same way by the CPU, for comparison. */
		tm = memcpy_time(dst, opt.op == BZCDV_BULK_READ ? f.buf : l.buf,
				 len);
		printf("%-14" PRIu64 " %-10u %-14.3f %-12.3f%s\n", len,
		       opt.iters, (double)len * opt.iters / t / 1e9,
		       (double)len * opt.iters / tm / 1e9,
		       opt.check ? (ok ? "  ok" : "  FAILED") : "");
		fflush(stdout);
		ok_all = ok_all && ok;
		if (len > last / 2)
			break;
	}
	if (opt.op == BZCDV_BULK_COPY) {
		if (f.mr)
			ibv_dereg_mr(f.mr);
		munmap(f.buf, last);
	} else {
		side_fini(&f, last);
	}
	side_fini(&l, last);
	ibv_close_device(ctx);
	return ok_all ? 0 : 1;
}

static void xfer(int fd, void *p, size_t len, bool out)
{
	uint8_t *b = p;

	while (len) {
		ssize_t n = out ? send(fd, b, len, MSG_NOSIGNAL) :
				  recv(fd, b, len, 0);
		if (n <= 0)
			die(out ? "send" : "recv (peer closed?)",
			    n ? errno : EPIPE);
		b += n;
		len -= (size_t)n;
	}
}

static int tcp_connect_once(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -1, one = 1, ret;

	if (opt.mode == SERVER)
		hints.ai_flags = AI_PASSIVE;
	ret = getaddrinfo(opt.host, opt.port, &hints, &res);
	if (ret) {
		fprintf(stderr, "bzc_bulk_bw: %s: %s\n", opt.host ? opt.host : "*",
			gai_strerror(ret));
		exit(1);
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (opt.mode == SERVER) {
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				   sizeof(one));
			if (!bind(fd, ai->ai_addr, ai->ai_addrlen) &&
			    !listen(fd, 1)) {
				int c = accept(fd, NULL, NULL);

				close(fd);
				fd = c;
				break;
			}
		} else if (!connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			break;
		}
		close(fd);
		fd = -1;
	}
	ret = errno;
	freeaddrinfo(res);
	errno = ret;
	return fd;
}

/*
 * The server's socket, or the client's connection; a client retries for a
 * while, since the server may still be registering its buffer.
 */
static int tcp_connect(void)
{
	double end = now() + 30;
	int fd;

	for (;;) {
		fd = tcp_connect_once();
		if (fd >= 0)
			return fd;
		if (opt.mode == SERVER || errno != ECONNREFUSED || now() > end)
			break;
		usleep(200 * 1000);
	}
	die(opt.mode == SERVER ? "listen/accept" : "connect", errno);
	return -1;
}

static int server(void)
{
	struct ibv_context *ctx = open_dev();
	uint64_t first, last;
	struct far_info info, peer;
	struct ctl_msg msg;
	struct side s;
	uint32_t ok;
	int fd;

	sizes(&first, &last);
	side_init(ctx, &s, last, true);
	fill_pattern(s.buf, last);
	printf("# bzc_bulk_bw server: %s %u, %" PRIu64
	       " bytes, waiting on port %s\n", opt.qp ? "RC QP" : "channel",
	       opt.qp ? s.qp->qp_num : s.chan->chan_num, last, opt.port);
	fflush(stdout);
	fd = tcp_connect();
	/* --qp: a QP number where a channel number would be. */
	info.chan_num = htobe32(opt.qp ? s.qp->qp_num : s.chan->chan_num);
	info.rkey = htobe32(s.mr->rkey);
	info.addr = htobe64((uintptr_t)s.buf);
	info.size = htobe64(last);
	memcpy(info.gid, s.gid.raw, sizeof(info.gid));
	xfer(fd, &info, sizeof(info), true);
	/* Accept the client's channel, then tell it so. */
	xfer(fd, &peer, sizeof(peer), false);
	if (opt.qp)
		qp_connect(ctx, &s, peer.gid, be32toh(peer.chan_num));
	else
		connect_chan(&s, peer.gid, be32toh(peer.chan_num));
	ok = htobe32(1);
	xfer(fd, &ok, sizeof(ok), true);
	for (;;) {
		xfer(fd, &msg, sizeof(msg), false);
		if (be32toh(msg.type) == MSG_CLEAR)
			memset(s.buf, 0, be64toh(msg.len) < last ?
						 be64toh(msg.len) : last);
		else if (be32toh(msg.type) == MSG_CHECK)
			ok = htobe32(be64toh(msg.len) <= last &&
				     check_pattern(s.buf, be64toh(msg.len)));
		else
			break;
		ok = be32toh(msg.type) == MSG_CLEAR ? htobe32(1) : ok;
		xfer(fd, &ok, sizeof(ok), true);
	}
	close(fd);
	side_fini(&s, last);
	ibv_close_device(ctx);
	return 0;
}

static int client(void)
{
	struct ibv_context *ctx = open_dev();
	uint64_t first, last, len;
	struct far_info far, mine = {};
	struct ctl_msg msg = {};
	bool ok_all = true;
	struct side l;
	uint32_t res;
	int fd;

	if (opt.op == BZCDV_BULK_COPY) {
		fprintf(stderr, "bzc_bulk_bw: --op copy is local: run it in "
				"loopback mode\n");
		return 2;
	}
	sizes(&first, &last);
	fd = tcp_connect();
	xfer(fd, &far, sizeof(far), false);
	far.chan_num = be32toh(far.chan_num);
	far.rkey = be32toh(far.rkey);
	far.addr = be64toh(far.addr);
	far.size = be64toh(far.size);
	if (far.size < last) {
		fprintf(stderr, "bzc_bulk_bw: the server's buffer has %" PRIu64
				" bytes; give it -s %" PRIu64 "%s\n",
			far.size, last, opt.all ? " -a" : "");
		return 2;
	}
	side_init(ctx, &l, last, !opt.cached);
	/* Both channels name each other before anything runs. */
	mine.chan_num = htobe32(opt.qp ? l.qp->qp_num : l.chan->chan_num);
	memcpy(mine.gid, l.gid.raw, sizeof(mine.gid));
	if (opt.qp)		/* RTR before the server may send */
		qp_connect(ctx, &l, far.gid, far.chan_num);
	xfer(fd, &mine, sizeof(mine), true);
	xfer(fd, &res, sizeof(res), false);
	if (opt.qp) {
		int ret = bzcdv_connect_bulk_chan_qp(l.chan, l.qp);

		if (ret)
			die("bzcdv_connect_bulk_chan_qp", ret);
	} else {
		connect_chan(&l, far.gid, far.chan_num);
	}
	if (opt.op == BZCDV_BULK_WRITE)
		fill_pattern(l.buf, last);
	header(false);
	for (len = first; len <= last; len *= 2) {
		bool ok = true;
		double t;

		if (opt.check && opt.op == BZCDV_BULK_READ) {
			memset(l.buf, 0, len);
		} else if (opt.check) {
			/* the server starts with the pattern: clear it first */
			msg.type = htobe32(MSG_CLEAR);
			msg.len = htobe64(len);
			xfer(fd, &msg, sizeof(msg), true);
			xfer(fd, &res, sizeof(res), false);
		}
		t = run_size(&l, &far, len);
		if (opt.check && opt.op == BZCDV_BULK_READ) {
			ok = check_pattern(l.buf, len);
		} else if (opt.check) {
			msg.type = htobe32(MSG_CHECK);
			msg.len = htobe64(len);
			xfer(fd, &msg, sizeof(msg), true);
			xfer(fd, &res, sizeof(res), false);
			ok = be32toh(res) != 0;
		}
		/* Across hosts, MB/s matter: more digits. */
		printf("%-14" PRIu64 " %-10u %-14.*f%s\n", len, opt.iters,
		       opt.qp ? 6 : 3, (double)len * opt.iters / t / 1e9,
		       opt.check ? (ok ? "  ok" : "  FAILED") : "");
		fflush(stdout);
		ok_all = ok_all && ok;
		if (len > last / 2)
			break;
	}
	msg.type = htobe32(MSG_DONE);
	xfer(fd, &msg, sizeof(msg), true);
	close(fd);
	side_fini(&l, last);
	ibv_close_device(ctx);
	return ok_all ? 0 : 1;
}

/* ibv_reg_mr+ibv_dereg_mr of [buf, buf + len) `n` times: seconds each. */
static double reg_dereg(struct ibv_pd *pd, void *buf, uint64_t len,
			unsigned int access, unsigned int n)
{
	double t0 = now();
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, access);

		if (!mr)
			die(access & IBV_ACCESS_ON_DEMAND ? "ibv_reg_mr (ODP)" :
							    "ibv_reg_mr", errno);
		if (ibv_dereg_mr(mr))
			die("ibv_dereg_mr", errno);
	}
	return (now() - t0) / n;
}

/*
 * Registration cost: ibv_reg_mr+ibv_dereg_mr, pinned and ODP, against MR
 * cache hits. The first registration of each kind is timed apart: the
 * process's first ODP MR also sets up its MMU notifier (once per process,
 * mm_take_all_locks()), which is no part of what each later one costs.
 */
static int reg_bench(void)
{
	const unsigned int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_context *ctx = open_dev();
	uint64_t len = opt.size;
	struct bzcdv_mr_cache_stats st = {};
	struct bzcdv_mr_cached *cm;
	struct ibv_pd *pd;
	double t0, t_reg, t_odp, t_reg1, t_odp1, t_miss, t_hit;
	unsigned int i, hits = 0;
	uint8_t *buf;
	int ret;

	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", errno);
	buf = alloc_buf(len);
	memset(buf, 1, len);

	t_reg1 = reg_dereg(pd, buf, len, rw, 1);
	t_reg = reg_dereg(pd, buf, len, rw, opt.iters);
	/* An ODP MR pins nothing: its cost does not grow with the pages. */
	t_odp1 = reg_dereg(pd, buf, len, rw | IBV_ACCESS_ON_DEMAND, 1);
	t_odp = reg_dereg(pd, buf, len, rw | IBV_ACCESS_ON_DEMAND, opt.iters);

	t0 = now();
	cm = bzcdv_reg_mr_cached(pd, buf, len,
				 IBV_ACCESS_LOCAL_WRITE |
					 IBV_ACCESS_REMOTE_WRITE);
	if (!cm)
		die("bzcdv_reg_mr_cached", errno);
	ret = bzcdv_release_mr_cached(cm);
	if (ret)
		die("bzcdv_release_mr_cached", ret);
	t_miss = now() - t0;

	t0 = now();
	for (i = 0; i < opt.iters; i++) {
		cm = bzcdv_reg_mr_cached(pd, buf, len,
					 IBV_ACCESS_LOCAL_WRITE |
						 IBV_ACCESS_REMOTE_WRITE);
		if (!cm)
			die("bzcdv_reg_mr_cached", errno);
		hits += !!(cm->flags & BZCDV_MR_CACHED_HIT);
		ret = bzcdv_release_mr_cached(cm);
		if (ret)
			die("bzcdv_release_mr_cached", ret);
	}
	t_hit = (now() - t0) / opt.iters;
	ret = bzcdv_query_mr_cache(pd, &st);
	if (ret)
		die("bzcdv_query_mr_cache", ret);

	printf("# bzc_bulk_bw --reg-bench: %" PRIu64 " bytes, %u iterations, "
	       "device %s\n", len, opt.iters, opt.dev);
	printf("ibv_reg_mr+ibv_dereg_mr   %12.1f us  (the first: %.1f us)\n",
	       t_reg * 1e6, t_reg1 * 1e6);
	printf("the same, ODP             %12.1f us  (%.0fx cheaper; the first, "
	       "with the process's MMU notifier: %.1f us)\n",
	       t_odp * 1e6, t_odp > 0 ? t_reg / t_odp : 0.0, t_odp1 * 1e6);
	printf("reg_mr_cached (miss)      %12.1f us\n", t_miss * 1e6);
	printf("reg_mr_cached+release hit %12.1f us  (%u/%u hits, %.0fx faster "
	       "than reg+dereg)\n", t_hit * 1e6, hits, opt.iters,
	       t_hit > 0 ? t_reg / t_hit : 0.0);
	printf("cache: hits %" PRIu64 " misses %" PRIu64 " pinned %" PRIu64
	       " bytes in %" PRIu64 " entries\n", st.hits, st.misses,
	       st.pinned_bytes, st.entries);
	munmap(buf, len);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return hits == opt.iters ? 0 : 1;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end || !v) {
		fprintf(stderr, "bzc_bulk_bw: bad size '%s'\n", s);
		exit(2);
	}
	return v;
}

static void usage(void)
{
	printf("usage: bzc_bulk_bw [options] [HOST]\n"
	       "  (no HOST)        loopback: two channels in this process\n"
	       "  -S, --server     wait for a client (TCP port -p)\n"
	       "  HOST             client of the server on HOST\n"
	       "  -d, --dev NAME   device (bzc0)\n"
	       "  -p, --port N     TCP control port (18515)\n"
	       "  -s, --size N     bytes per WR, k/m/g suffixes (1m); with -a "
	       "the largest\n"
	       "  -a, --all        sizes 4k, 8k, ... up to -s (default 1g)\n"
	       "  -n, --iters N    WRs per size (10)\n"
	       "  -t, --depth N    WRs in flight (4)\n"
	       "  -o, --op OP      write | read | copy (loopback only)\n"
	       "  -g, --gid-index N  the channels' address (default: the "
	       "first GID)\n"
	       "  -c, --cached     local memory by address (lkey 0, MR cache)\n"
	       "  -O, --odp        MRs registered on demand (IBV_ACCESS_ON_DEMAND)\n"
	       "  -w, --warm       one untimed WR of each size first\n"
	       "  -C, --check      verify the data moved\n"
	       "  -e, --events     wait for completions on a completion channel "
	       "instead of polling\n"
	       "  -Q, --qp         connect RC QPs (server: any device, no "
	       "channel); the\n"
	       "                   client's channel runs on its QP "
	       "(bzcdv_connect_bulk_chan_qp)\n"
	       "  -R, --reg-bench  time MR cache hits against ibv_reg_mr+"
	       "ibv_dereg_mr of -s bytes (default 64m)\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "server", no_argument, NULL, 'S' },
		{ "dev", required_argument, NULL, 'd' },
		{ "port", required_argument, NULL, 'p' },
		{ "size", required_argument, NULL, 's' },
		{ "all", no_argument, NULL, 'a' },
		{ "iters", required_argument, NULL, 'n' },
		{ "depth", required_argument, NULL, 't' },
		{ "op", required_argument, NULL, 'o' },
		{ "gid-index", required_argument, NULL, 'g' },
		{ "cached", no_argument, NULL, 'c' },
		{ "odp", no_argument, NULL, 'O' },
		{ "warm", no_argument, NULL, 'w' },
		{ "check", no_argument, NULL, 'C' },
		{ "events", no_argument, NULL, 'e' },
		{ "reg-bench", no_argument, NULL, 'R' },
		{ "qp", no_argument, NULL, 'Q' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	bool size_set = false;
	int c;

	while ((c = getopt_long(argc, argv, "Sd:p:s:an:t:o:g:cOwCeQRh", lo,
				NULL)) != -1) {
		switch (c) {
		case 'S': opt.mode = SERVER; break;
		case 'd': opt.dev = optarg; break;
		case 'p': opt.port = optarg; break;
		case 's': opt.size = parse_size(optarg); size_set = true; break;
		case 'a': opt.all = true; break;
		case 'n': opt.iters = (unsigned int)atoi(optarg); break;
		case 't': opt.depth = (unsigned int)atoi(optarg); break;
		case 'o':
			if (!strcmp(optarg, "write"))
				opt.op = BZCDV_BULK_WRITE;
			else if (!strcmp(optarg, "read"))
				opt.op = BZCDV_BULK_READ;
			else if (!strcmp(optarg, "copy"))
				opt.op = BZCDV_BULK_COPY;
			else {
				fprintf(stderr, "bzc_bulk_bw: --op write|read|copy\n");
				return 2;
			}
			break;
		case 'g': opt.gid_index = atoi(optarg); break;
		case 'c': opt.cached = true; break;
		case 'O': opt.odp = true; break;
		case 'w': opt.warm = true; break;
		case 'C': opt.check = true; break;
		case 'e': opt.events = true; break;
		case 'R': opt.reg_bench = true; break;
		case 'Q': opt.qp = true; break;
		case 'h': usage(); return 0;
		default: usage(); return 2;
		}
	}
	if (!opt.iters || !opt.depth) {
		fprintf(stderr, "bzc_bulk_bw: -n and -t must be positive\n");
		return 2;
	}
	if (opt.all && !size_set)
		opt.size = DEFAULT_MAX;
	if (optind < argc) {
		if (opt.mode == SERVER) {
			usage();
			return 2;
		}
		opt.host = argv[optind];
		opt.mode = CLIENT;
	}
	if (opt.qp && opt.mode == LOOPBACK) {
		fprintf(stderr, "bzc_bulk_bw: --qp needs a server and a "
				"client\n");
		return 2;
	}
	if (opt.reg_bench) {
		if (!size_set)
			opt.size = 64ULL << 20;
		return reg_bench();
	}
	switch (opt.mode) {
	case SERVER:
		return server();
	case CLIENT:
		return client();
	default:
		return loopback();
	}
}
