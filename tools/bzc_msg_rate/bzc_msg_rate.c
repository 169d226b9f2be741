// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc_msg_rate: the small-message rate of one thread posting RDMA WRITEs
 * on an RC QP connected to another QP of the same device (loopback), with
 * the provider's queue locks and without them, under a thread domain
 * (ibv_alloc_td + ibv_alloc_parent_domain). Both modes run in one
 * process, in alternating rounds, and print side by side.
 *
 * --check runs the thread-domain API's error cases and a data check
 * instead of timing, and exits non-zero on the first failure: the pytest
 * suite (test_td.py) runs it.
 *
 * Plain libibverbs: it runs on any device that has thread domains.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

static struct {
	const char *dev;
	int gid_index;
	unsigned int size;	/* bytes per message */
	unsigned int batch;	/* WRs per ibv_post_send, the last signaled */
	double seconds;		/* per round and mode */
	int rounds;
	bool check;
} opt = {
	.dev = "bzc0",
	.size = 8,
	.batch = 16,
	.seconds = 2.0,
	.rounds = 3,
};

/* One QP pair, its CQ and its memory, with or without a thread domain. */
struct pair {
	struct ibv_context *ctx;
	struct ibv_pd *pd;		/* the PD, or the parent domain over it */
	struct ibv_pd *base_pd;
	struct ibv_td *td;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *mr;
	uint8_t *buf;			/* [0, size): source; [4096, ...): target */
};

#define TARGET_OFF 4096

static int fail(const char *what, int err)
{
	fprintf(stderr, "bzc_msg_rate: %s: %s\n", what, strerror(err));
	return err ? err : EIO;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest_qpn,
		      const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	int ret;

	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = opt.gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
				    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct ibv_qp *create_qp(struct pair *p)
{
	struct ibv_qp_init_attr a = {
		.send_cq = ibv_cq_ex_to_cq(p->cq),
		.recv_cq = ibv_cq_ex_to_cq(p->cq),
		.cap = { .max_send_wr = 256, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	return ibv_create_qp(p->pd, &a);
}

static void pair_destroy(struct pair *p)
{
	if (p->qa)
		ibv_destroy_qp(p->qa);
	if (p->qb)
		ibv_destroy_qp(p->qb);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(p->cq));
	if (p->pd != p->base_pd)
		ibv_dealloc_pd(p->pd);
	if (p->td)
		ibv_dealloc_td(p->td);
	if (p->base_pd)
		ibv_dealloc_pd(p->base_pd);
	free(p->buf);
	memset(p, 0, sizeof(*p));
}

/* The pair; with_td puts PD, CQ and both QPs under one thread domain. */
static int pair_create(struct pair *p, struct ibv_context *ctx, bool with_td)
{
	struct ibv_cq_init_attr_ex cqa = { .cqe = 512 };
	union ibv_gid gid;
	int ret;

	memset(p, 0, sizeof(*p));
	p->ctx = ctx;
	if (ibv_query_gid(ctx, 1, opt.gid_index, &gid))
		return fail("ibv_query_gid", errno);
	p->base_pd = ibv_alloc_pd(ctx);
	if (!p->base_pd)
		return fail("ibv_alloc_pd", errno);
	p->pd = p->base_pd;
	if (with_td) {
		struct ibv_td_init_attr ta = {};
		struct ibv_parent_domain_init_attr pa = {};

		p->td = ibv_alloc_td(ctx, &ta);
		if (!p->td)
			return fail("ibv_alloc_td", errno);
		pa.pd = p->base_pd;
		pa.td = p->td;
		p->pd = ibv_alloc_parent_domain(ctx, &pa);
		if (!p->pd) {
			p->pd = p->base_pd;
			return fail("ibv_alloc_parent_domain", errno);
		}
		cqa.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
		cqa.parent_domain = p->pd;
	}
	p->cq = ibv_create_cq_ex(ctx, &cqa);
	if (!p->cq)
		return fail("ibv_create_cq_ex", errno);
	p->buf = aligned_alloc(4096, 2 * TARGET_OFF);
	if (!p->buf)
		return fail("aligned_alloc", ENOMEM);
	memset(p->buf, 0, 2 * TARGET_OFF);
	p->mr = ibv_reg_mr(p->pd, p->buf, 2 * TARGET_OFF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!p->mr)
		return fail("ibv_reg_mr", errno);
	p->qa = create_qp(p);
	p->qb = p->qa ? create_qp(p) : NULL;
	if (!p->qb)
		return fail("ibv_create_qp", errno);
	ret = connect_qp(p->qa, p->qb->qp_num, &gid);
	if (!ret)
		ret = connect_qp(p->qb, p->qa->qp_num, &gid);
	if (ret)
		return fail("ibv_modify_qp", ret);
	return 0;
}

/*
 * One batch of opt.batch WRITEs of opt.size bytes from the source to the
 * target, the last signaled, and its completion. The source holds @stamp.
 */
static int write_batch(struct pair *p, uint64_t stamp)
{
	struct ibv_send_wr wr[64], *bad;
	struct ibv_sge sge = {
		.addr = (uintptr_t)p->buf, .length = opt.size,
		.lkey = p->mr->lkey,
	};
	struct ibv_poll_cq_attr pa = {};
	unsigned int i;
	int ret;

	memcpy(p->buf, &stamp, sizeof(stamp) < opt.size ? sizeof(stamp) :
							  opt.size);
	for (i = 0; i < opt.batch; i++) {
		wr[i] = (struct ibv_send_wr){
			.wr_id = stamp,
			.next = i + 1 < opt.batch ? &wr[i + 1] : NULL,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = i + 1 < opt.batch ? 0 : IBV_SEND_SIGNALED,
			.wr.rdma = {
				.remote_addr = (uintptr_t)p->buf + TARGET_OFF,
				.rkey = p->mr->rkey,
			},
		};
	}
	ret = ibv_post_send(p->qa, wr, &bad);
	if (ret)
		return fail("ibv_post_send", ret);
	while ((ret = ibv_start_poll(p->cq, &pa)) == ENOENT)
		;
	if (ret)
		return fail("ibv_start_poll", ret);
	if (p->cq->status != IBV_WC_SUCCESS || p->cq->wr_id != stamp) {
		fprintf(stderr, "bzc_msg_rate: completion %s, wr_id %" PRIu64
			" (expected %" PRIu64 ")\n",
			ibv_wc_status_str(p->cq->status), p->cq->wr_id, stamp);
		ibv_end_poll(p->cq);
		return EIO;
	}
	ibv_end_poll(p->cq);
	return 0;
}

/* Messages per second over opt.seconds. */
static int run_round(struct pair *p, double *rate)
{
	uint64_t n = 0;
	double t0 = now(), t;
	int ret;

	do {
		ret = write_batch(p, n + 1);
		if (ret)
			return ret;
		n++;
		t = now();
	} while (t - t0 < opt.seconds);
	*rate = (double)n * opt.batch / (t - t0);
	return 0;
}

static int expect(bool ok, const char *what)
{
	if (ok)
		return 0;
	fprintf(stderr, "bzc_msg_rate: check failed: %s\n", what);
	return EIO;
}

/* The thread-domain API's errors, then data through a pair on a TD. */
static int run_checks(struct ibv_context *ctx, struct ibv_context *other)
{
	struct ibv_td_init_attr ta = { .comp_mask = 1 };
	struct ibv_parent_domain_init_attr pa = {};
	struct ibv_td *td, *otd;
	struct ibv_pd *pd, *parent;
	struct pair p;
	uint64_t got, i;
	int ret = 0;

	errno = 0;
	td = ibv_alloc_td(ctx, &ta);
	ret |= expect(!td && errno == EINVAL, "unknown comp_mask is EINVAL");
	ta.comp_mask = 0;
	td = ibv_alloc_td(ctx, &ta);
	otd = ibv_alloc_td(other, &ta);
	pd = ibv_alloc_pd(ctx);
	if (!td || !otd || !pd)
		return fail("ibv_alloc_td/pd", errno);
	pa.pd = pd;
	pa.td = otd;
	errno = 0;
	parent = ibv_alloc_parent_domain(ctx, &pa);
	ret |= expect(!parent && errno == EINVAL,
		      "a thread domain of another context is EINVAL");
	pa.td = td;
	parent = ibv_alloc_parent_domain(ctx, &pa);
	if (!parent)
		return fail("ibv_alloc_parent_domain", errno);
	ret |= expect(ibv_dealloc_td(td) == EBUSY,
		      "dealloc of a TD a parent domain names is EBUSY");
	ret |= expect(!ibv_dealloc_pd(parent), "dealloc of the parent domain");
	ret |= expect(!ibv_dealloc_td(td), "dealloc of the TD once unused");
	ret |= expect(!ibv_dealloc_td(otd), "dealloc of the other TD");
	ret |= expect(!ibv_dealloc_pd(pd), "dealloc of the PD");
	if (ret)
		return ret;

	/* Data moves on a TD pair as on any: each batch's stamp arrives. */
	ret = pair_create(&p, ctx, true);
	for (i = 1; !ret && i <= 100; i++) {
		ret = write_batch(&p, i * 0x0101010101010101ULL);
		if (ret)
			break;
		memcpy(&got, p.buf + TARGET_OFF, sizeof(got));
		ret = expect(got == i * 0x0101010101010101ULL,
			     "the target holds the last batch's stamp");
	}
	pair_destroy(&p);
	if (!ret)
		printf("bzc_msg_rate: checks passed\n");
	return ret;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: bzc_msg_rate [-d DEV] [-g GID_INDEX] [-s BYTES] [-b BATCH]\n"
		"                    [-D SECONDS] [-r ROUNDS] [--check]\n");
	return 2;
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), opt.dev))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "check", no_argument, NULL, 'c' },
		{}
	};
	struct ibv_context *ctx, *other;
	double rate[2], sum[2] = {};
	struct pair p;
	int c, r, mode, ret;

	while ((c = getopt_long(argc, argv, "d:g:s:b:D:r:", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'd': opt.dev = optarg; break;
		case 'g': opt.gid_index = atoi(optarg); break;
		case 's': opt.size = strtoul(optarg, NULL, 0); break;
		case 'b': opt.batch = strtoul(optarg, NULL, 0); break;
		case 'D': opt.seconds = atof(optarg); break;
		case 'r': opt.rounds = atoi(optarg); break;
		case 'c': opt.check = true; break;
		default: return usage();
		}
	}
	if (optind != argc || !opt.size || opt.size > TARGET_OFF ||
	    !opt.batch || opt.batch > 64 || opt.rounds < 1)
		return usage();

	ctx = open_dev();
	other = open_dev();
	if (!ctx || !other) {
		fprintf(stderr, "bzc_msg_rate: cannot open %s\n", opt.dev);
		return 1;
	}
	if (opt.check) {
		ret = run_checks(ctx, other);
		goto out;
	}

	printf("# %s: %u-byte RDMA WRITEs, %u per post (last signaled), "
	       "%.1f s per round and mode, one thread\n",
	       opt.dev, opt.size, opt.batch, opt.seconds);
	printf("%-6s %16s %16s\n", "round", "locks [Mmsg/s]", "TD [Mmsg/s]");
	for (r = 0; r < opt.rounds; r++) {
		for (mode = 0; mode < 2; mode++) {
			ret = pair_create(&p, ctx, mode == 1);
			if (!ret)
				ret = run_round(&p, &rate[mode]);
			pair_destroy(&p);
			if (ret)
				goto out;
			sum[mode] += rate[mode];
		}
		printf("%-6d %16.4f %16.4f\n", r + 1, rate[0] / 1e6,
		       rate[1] / 1e6);
	}
	printf("%-6s %16.4f %16.4f\n", "mean", sum[0] / opt.rounds / 1e6,
	       sum[1] / opt.rounds / 1e6);
out:
	ibv_close_device(other);
	ibv_close_device(ctx);
	return ret ? 1 : 0;
}
