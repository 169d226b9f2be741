// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Run-time check of ibverbs_provider.h against the installed libibverbs.
 *
 * The static asserts in the header can only compare our declarations with
 * themselves and with public headers.  This program makes the real library
 * read and write through them and checks the results land where the
 * declarations say:
 *
 *  1. struct verbs_device: _verbs_init_and_alloc_context() takes a device
 *     reference (refcount must go 1 -> 2), verbs_uninit_context() drops it.
 *  2. The context_offset convention of _verbs_init_and_alloc_context().
 *  3. Default ops: with nothing installed, ops fail with EOPNOTSUPP.
 *  4. struct verbs_context_ops: 63 of the 76 entries are copied by
 *     verbs_set_ops() into public fields of struct verbs_context or
 *     struct ibv_context_ops.  Each slot gets a distinct fake value and
 *     each public field must receive the value of the right slot.
 *  5. The other 13 entries are only reachable through libibverbs entry
 *     points, so they get real functions and are called that way, with a
 *     context opened by ibv_open_device() (which also reads
 *     verbs_device.ops, .sysfs and verbs_device_ops.alloc_context).
 *  6. The command helpers (ibv_cmd_create_cq, _create_cq_ex, _resize_cq,
 *     _destroy_cq, _reg_mr, _rereg_mr, _dereg_mr, _alloc_mw, _dealloc_mw,
 *     _create_qp,
 *     _create_qp_ex2, _modify_qp, _query_qp, _destroy_qp, _post_send and
 *     _post_recv as doorbells, _modify_srq, _query_srq, _create_ah,
 *     _destroy_ah, _open_xrcd, _close_xrcd, _open_qp), the command
 *     structs and struct verbs_mr / verbs_cq / verbs_qp / verbs_xrcd.
 *     The context's cmd_fd is the write
 *     end of a pipe: the uverbs ioctl fails there with ENOTTY, so
 *     libibverbs falls back to write() and the command lands in the pipe,
 *     where every field is compared with what was passed in, including
 *     the response address and length the kernel would write to.  The
 *     "write" succeeds, so the helpers then read the response buffer,
 *     pre-filled here as the kernel would fill it, into the objects.
 *  7. verbs_device_ops.uninit_device: called by libibverbs when the last
 *     device reference goes away.
 *
 * It never touches a real device: with verbs_device.sysfs NULL,
 * ibv_open_device() passes cmd_fd -1 and the fake ops never reach the
 * kernel, and the commands of step 6 go to a pipe.  Exit status 0 means
 * every check passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibverbs_provider.h"

static int failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			failures++;                                            \
		}                                                              \
	} while (0)

/* Provider context with guard words on both sides of the verbs_context. */
struct test_context {
	uint64_t guard_before[3];
	struct verbs_context vctx;
	uint64_t guard_after;
};

#define GUARD 0x6275726e6f757421ULL

static struct verbs_device *test_vdev;
static int alloc_context_calls;
static int uninit_device_calls;
static int last_cmd_fd = -2;

/* Bit per invisible op, set when libibverbs calls it. */
enum {
	CALLED_CREATE_CQ_EX,
	CALLED_FREE_CONTEXT,
	CALLED_IMPORT_DM,
	CALLED_IMPORT_MR,
	CALLED_IMPORT_PD,
	CALLED_QUERY_ECE,
	CALLED_QUERY_PORT,
	CALLED_QUERY_QP_DATA_IN_ORDER,
	CALLED_REG_DMABUF_MR,
	CALLED_SET_ECE,
	CALLED_UNIMPORT_DM,
	CALLED_UNIMPORT_MR,
	CALLED_UNIMPORT_PD,
	CALLED_NUM,
};
static unsigned int called;

#define MARK(bit) (called |= 1U << (bit))

static struct ibv_cq_ex *t_create_cq_ex(struct ibv_context *context,
					struct ibv_cq_init_attr_ex *init_attr)
{
	MARK(CALLED_CREATE_CQ_EX);
	errno = ENOSPC;
	return NULL;
}

static void t_free_context(struct ibv_context *ibctx)
{
	struct test_context *ctx =
		container_of(ibctx, struct test_context, vctx.context);

	MARK(CALLED_FREE_CONTEXT);
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static struct ibv_dm *t_import_dm(struct ibv_context *context,
				  uint32_t dm_handle)
{
	if (dm_handle == 7)
		MARK(CALLED_IMPORT_DM);
	errno = ENOSPC;
	return NULL;
}

static struct ibv_mr *t_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	if (mr_handle == 6)
		MARK(CALLED_IMPORT_MR);
	errno = ENOSPC;
	return NULL;
}

static struct ibv_pd *t_import_pd(struct ibv_context *context,
				  uint32_t pd_handle)
{
	if (pd_handle == 5)
		MARK(CALLED_IMPORT_PD);
	errno = ENOSPC;
	return NULL;
}

static int t_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	MARK(CALLED_QUERY_ECE);
	return ENOSPC;
}

static int t_query_port(struct ibv_context *context, uint8_t port_num,
			struct ibv_port_attr *port_attr)
{
	if (port_num == 3)
		MARK(CALLED_QUERY_PORT);
	port_attr->state = IBV_PORT_ACTIVE;
	port_attr->gid_tbl_len = 77;
	return 0;
}

/*
 * Answers "in order" (bit 0): rdma-core 44 returns the op's value as it is,
 * 45 and later with flags 0 only whether bit 0 is set.
 */
static int t_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
				    uint32_t flags)
{
	if (op == IBV_WR_RDMA_WRITE && flags == 0)
		MARK(CALLED_QUERY_QP_DATA_IN_ORDER);
	return 1;
}

static struct ibv_mr *t_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				      size_t length, uint64_t iova, int fd,
				      int access)
{
	if (offset == 1 && length == 2 && iova == 3 && fd == 4 && access == 5)
		MARK(CALLED_REG_DMABUF_MR);
	errno = ENOSPC;
	return NULL;
}

static int t_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	MARK(CALLED_SET_ECE);
	return ENOSPC;
}

static void t_unimport_dm(struct ibv_dm *dm)
{
	MARK(CALLED_UNIMPORT_DM);
}

static void t_unimport_mr(struct ibv_mr *mr)
{
	MARK(CALLED_UNIMPORT_MR);
}

static void t_unimport_pd(struct ibv_pd *pd)
{
	MARK(CALLED_UNIMPORT_PD);
}

/* The 13 ops verbs_set_ops() stores only in the library's private copy. */
static const struct verbs_context_ops hidden_ops = {
	.create_cq_ex = t_create_cq_ex,
	.free_context = t_free_context,
	.import_dm = t_import_dm,
	.import_mr = t_import_mr,
	.import_pd = t_import_pd,
	.query_ece = t_query_ece,
	.query_port = t_query_port,
	.query_qp_data_in_order = t_query_qp_data_in_order,
	.reg_dmabuf_mr = t_reg_dmabuf_mr,
	.set_ece = t_set_ece,
	.unimport_dm = t_unimport_dm,
	.unimport_mr = t_unimport_mr,
	.unimport_pd = t_unimport_pd,
};

static struct verbs_context *t_alloc_context(struct ibv_device *ibdev,
					     int cmd_fd, void *private_data)
{
	struct test_context *ctx;

	alloc_context_calls++;
	last_cmd_fd = cmd_fd;
	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx, 0x627a);
	if (!ctx)
		return NULL;
	verbs_set_ops(&ctx->vctx, &hidden_ops);
	return &ctx->vctx;
}

static void t_uninit_device(struct verbs_device *vdev)
{
	CHECK(vdev == test_vdev);
	uninit_device_calls++;
	free(vdev);
}

static const struct verbs_device_ops test_dev_ops = {
	.name = "pabi_check",
	.match_min_abi_version = 1,
	.match_max_abi_version = 1,
	.alloc_context = t_alloc_context,
	.uninit_device = t_uninit_device,
};

/* Fake, never-called "function addresses" for the slot test. */
union ops_slots {
	struct verbs_context_ops ops;
	uintptr_t slot[BZC_VERBS_CONTEXT_OPS_NUM];
};
_Static_assert(sizeof(union ops_slots) == sizeof(struct verbs_context_ops),
	       "ops are not plain pointers");

#define SLOT_VALUE(member)                                                     \
	((uintptr_t)0x100000 +                                                 \
	 offsetof(struct verbs_context_ops, member) * 0x10)

/* Public field @pub must hold the value given to ops member @member. */
#define CHECK_SLOT(pub, member)                                                \
	do {                                                                   \
		uintptr_t got;                                                 \
		_Static_assert(sizeof(pub) == sizeof(uintptr_t), #pub);        \
		memcpy(&got, &(pub), sizeof(got));                             \
		if (got != SLOT_VALUE(member)) {                               \
			fprintf(stderr,                                        \
				"%s:%d: %s holds %#lx, expected ops.%s "       \
				"(%#lx)\n",                                    \
				__FILE__, __LINE__, #pub,                      \
				(unsigned long)got, #member,                   \
				(unsigned long)SLOT_VALUE(member));            \
			failures++;                                            \
		}                                                              \
	} while (0)

static void check_defaults(struct verbs_context *vctx)
{
	struct ibv_context *ibctx = &vctx->context;

	/* Nothing installed yet: the library's defaults answer. */
	CHECK(ibctx->ops.poll_cq(NULL, 0, NULL) == EOPNOTSUPP);
	CHECK(ibctx->ops.post_send(NULL, NULL, NULL) == EOPNOTSUPP);
	CHECK(ibctx->ops.req_notify_cq(NULL, 0) == EOPNOTSUPP);
	CHECK(vctx->query_device_ex(ibctx, NULL, NULL, 0) == EOPNOTSUPP);
	errno = 0;
	CHECK(vctx->create_qp_ex(ibctx, NULL) == NULL && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(vctx->alloc_dm(ibctx, NULL) == NULL && errno == EOPNOTSUPP);
}

static void check_visible_slots(struct verbs_context *vctx)
{
	struct ibv_context_ops *cops = &vctx->context.ops;
	union ops_slots u;
	unsigned int i;

	for (i = 0; i < BZC_VERBS_CONTEXT_OPS_NUM; i++)
		u.slot[i] = (uintptr_t)0x100000 + i * sizeof(void *) * 0x10;

	verbs_set_ops(vctx, &u.ops);

	/* Copied to struct verbs_context */
	CHECK_SLOT(vctx->advise_mr, advise_mr);
	CHECK_SLOT(vctx->alloc_dm, alloc_dm);
	CHECK_SLOT(vctx->alloc_null_mr, alloc_null_mr);
	CHECK_SLOT(vctx->alloc_parent_domain, alloc_parent_domain);
	CHECK_SLOT(vctx->alloc_td, alloc_td);
	CHECK_SLOT(vctx->attach_counters_point_flow,
		   attach_counters_point_flow);
	CHECK_SLOT(vctx->close_xrcd, close_xrcd);
	CHECK_SLOT(vctx->create_counters, create_counters);
	CHECK_SLOT(vctx->create_flow_action_esp, create_flow_action_esp);
	CHECK_SLOT(vctx->ibv_create_flow, create_flow);
	CHECK_SLOT(vctx->create_qp_ex, create_qp_ex);
	CHECK_SLOT(vctx->create_rwq_ind_table, create_rwq_ind_table);
	CHECK_SLOT(vctx->create_srq_ex, create_srq_ex);
	CHECK_SLOT(vctx->create_wq, create_wq);
	CHECK_SLOT(vctx->dealloc_td, dealloc_td);
	CHECK_SLOT(vctx->destroy_counters, destroy_counters);
	CHECK_SLOT(vctx->ibv_destroy_flow, destroy_flow);
	CHECK_SLOT(vctx->destroy_flow_action, destroy_flow_action);
	CHECK_SLOT(vctx->destroy_rwq_ind_table, destroy_rwq_ind_table);
	CHECK_SLOT(vctx->destroy_wq, destroy_wq);
	CHECK_SLOT(vctx->free_dm, free_dm);
	CHECK_SLOT(vctx->get_srq_num, get_srq_num);
	CHECK_SLOT(vctx->modify_cq, modify_cq);
	CHECK_SLOT(vctx->modify_flow_action_esp, modify_flow_action_esp);
	CHECK_SLOT(vctx->modify_qp_rate_limit, modify_qp_rate_limit);
	CHECK_SLOT(vctx->modify_wq, modify_wq);
	CHECK_SLOT(vctx->open_qp, open_qp);
	CHECK_SLOT(vctx->open_xrcd, open_xrcd);
	CHECK_SLOT(vctx->post_srq_ops, post_srq_ops);
	CHECK_SLOT(vctx->query_device_ex, query_device_ex);
	CHECK_SLOT(vctx->query_rt_values, query_rt_values);
	CHECK_SLOT(vctx->read_counters, read_counters);
	CHECK_SLOT(vctx->reg_dm_mr, reg_dm_mr);

	/* Copied to struct ibv_context_ops */
	CHECK_SLOT(cops->alloc_mw, alloc_mw);
	CHECK_SLOT(cops->bind_mw, bind_mw);
	CHECK_SLOT(cops->dealloc_mw, dealloc_mw);
	CHECK_SLOT(cops->poll_cq, poll_cq);
	CHECK_SLOT(cops->post_recv, post_recv);
	CHECK_SLOT(cops->post_send, post_send);
	CHECK_SLOT(cops->post_srq_recv, post_srq_recv);
	CHECK_SLOT(cops->req_notify_cq, req_notify_cq);

	/* Copied to the _compat_ pointers of struct ibv_context_ops */
	CHECK_SLOT(cops->_compat_alloc_pd, alloc_pd);
	CHECK_SLOT(cops->_compat_async_event, async_event);
	CHECK_SLOT(cops->_compat_attach_mcast, attach_mcast);
	CHECK_SLOT(cops->_compat_cq_event, cq_event);
	CHECK_SLOT(cops->_compat_create_ah, create_ah);
	CHECK_SLOT(cops->_compat_create_cq, create_cq);
	CHECK_SLOT(cops->_compat_create_qp, create_qp);
	CHECK_SLOT(cops->_compat_create_srq, create_srq);
	CHECK_SLOT(cops->_compat_dealloc_pd, dealloc_pd);
	CHECK_SLOT(cops->_compat_dereg_mr, dereg_mr);
	CHECK_SLOT(cops->_compat_destroy_ah, destroy_ah);
	CHECK_SLOT(cops->_compat_destroy_cq, destroy_cq);
	CHECK_SLOT(cops->_compat_destroy_qp, destroy_qp);
	CHECK_SLOT(cops->_compat_destroy_srq, destroy_srq);
	CHECK_SLOT(cops->_compat_detach_mcast, detach_mcast);
	CHECK_SLOT(cops->_compat_modify_qp, modify_qp);
	CHECK_SLOT(cops->_compat_modify_srq, modify_srq);
	CHECK_SLOT(cops->_compat_query_qp, query_qp);
	CHECK_SLOT(cops->_compat_query_srq, query_srq);
	CHECK_SLOT(cops->_compat_reg_mr, reg_mr);
	CHECK_SLOT(cops->_compat_rereg_mr, rereg_mr);
	CHECK_SLOT(cops->_compat_resize_cq, resize_cq);
}

/* Steps 1-4, on a context that is never opened or used. */
static void check_init_and_slots(void)
{
	struct test_context *ctx;
	unsigned int i;

	ctx = verbs_init_and_alloc_context(&test_vdev->device, -1, ctx, vctx,
					   0x627a);
	CHECK(ctx != NULL);
	if (!ctx)
		return;

	CHECK(atomic_load(&test_vdev->refcount) == 2);
	for (i = 0; i < 3; i++)
		CHECK(ctx->guard_before[i] == 0);
	CHECK(ctx->guard_after == 0);
	CHECK(ctx->vctx.context.device == &test_vdev->device);
	CHECK(ctx->vctx.context.cmd_fd == -1);
	CHECK(ctx->vctx.context.async_fd == -1);
	CHECK(ctx->vctx.sz == sizeof(struct verbs_context));
	CHECK(ctx->vctx.priv != NULL);
	CHECK(verbs_get_ctx(&ctx->vctx.context) == &ctx->vctx);

	ctx->guard_before[0] = ctx->guard_before[2] = GUARD;
	ctx->guard_after = GUARD;

	check_defaults(&ctx->vctx);
	check_visible_slots(&ctx->vctx);

	CHECK(ctx->guard_before[0] == GUARD && ctx->guard_before[2] == GUARD);
	CHECK(ctx->guard_after == GUARD);

	verbs_uninit_context(&ctx->vctx);
	CHECK(atomic_load(&test_vdev->refcount) == 1);
	free(ctx);
}

/* Step 5: the ops that only libibverbs' own entry points reach. */
static void check_hidden_ops(void)
{
	struct ibv_cq_init_attr_ex cq_attr = {};
	struct ibv_port_attr port_attr = {};
	struct ibv_ece ece = { .vendor_id = 1 };
	struct ibv_context *ibctx;
	struct ibv_pd pd = {};
	struct ibv_mr mr = {};
	struct ibv_dm dm = {};
	struct ibv_qp qp = {};
	unsigned int i;

	ibctx = ibv_open_device(&test_vdev->device);
	CHECK(ibctx != NULL);
	if (!ibctx)
		return;
	CHECK(alloc_context_calls == 1);
	CHECK(last_cmd_fd == -1);
	CHECK(atomic_load(&test_vdev->refcount) == 2);

	pd.context = mr.context = dm.context = qp.context = ibctx;

	CHECK(ibv_query_port(ibctx, 3, &port_attr) == 0);
	CHECK(port_attr.state == IBV_PORT_ACTIVE);
	CHECK(port_attr.gid_tbl_len == 77);

	errno = 0;
	CHECK(ibv_create_cq_ex(ibctx, &cq_attr) == NULL && errno == ENOSPC);
	CHECK(ibv_import_pd(ibctx, 5) == NULL);
	ibv_unimport_pd(&pd);
	CHECK(ibv_import_mr(&pd, 6) == NULL);
	ibv_unimport_mr(&mr);
	CHECK(ibv_import_dm(ibctx, 7) == NULL);
	ibv_unimport_dm(&dm);
	CHECK(ibv_query_ece(&qp, &ece) == ENOSPC);
	CHECK(ibv_set_ece(&qp, &ece) == ENOSPC);
	CHECK(ibv_query_qp_data_in_order(&qp, IBV_WR_RDMA_WRITE, 0) == 1);
	CHECK(ibv_reg_dmabuf_mr(&pd, 1, 2, 3, 4, 5) == NULL);

	CHECK(ibv_close_device(ibctx) == 0);
	CHECK(atomic_load(&test_vdev->refcount) == 1);

	for (i = 0; i < CALLED_NUM; i++) {
		if (!(called & (1U << i))) {
			fprintf(stderr, "hidden op #%u was not reached\n", i);
			failures++;
		}
	}
}

/* ---------------------------------------------------------------------- */
/* Step 6: command helpers                                                  */
/* ---------------------------------------------------------------------- */

static int cmd_pipe_rd = -1;

/* A context whose commands go to a pipe; NULL (and a failure) if none. */
static struct test_context *open_pipe_context(void)
{
	struct test_context *ctx;
	int fds[2];

	if (pipe(fds)) {
		perror("pipe");
		failures++;
		return NULL;
	}
	/* Reads never wait: a missing command shows up as EAGAIN. */
	if (fcntl(fds[0], F_SETFL, O_NONBLOCK)) {
		perror("fcntl");
		failures++;
	}
	cmd_pipe_rd = fds[0];

	/* Owns fds[1] from here on, and closes it on failure. */
	ctx = verbs_init_and_alloc_context(&test_vdev->device, fds[1], ctx,
					   vctx, 0x627a);
	CHECK(ctx != NULL);
	if (!ctx) {
		close(cmd_pipe_rd);
		return NULL;
	}
	return ctx;
}

static void close_pipe_context(struct test_context *ctx)
{
	char extra;

	/* Every command has been read: nothing may be left over. */
	CHECK(read(cmd_pipe_rd, &extra, 1) < 0 && errno == EAGAIN);
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
	close(cmd_pipe_rd);
	cmd_pipe_rd = -1;
}

/* The next command written, which must be exactly @len bytes. */
static void read_command(void *buf, size_t len)
{
	ssize_t n;

	memset(buf, 0xee, len);
	n = read(cmd_pipe_rd, buf, len + 1);
	if (n != (ssize_t)len) {
		fprintf(stderr, "command of %zd bytes, expected %zu\n", n, len);
		failures++;
	}
}

#define CHECK_WRITE_HDR(hdr, cmd, req_len, resp_len)                           \
	do {                                                                   \
		CHECK((hdr).command == (cmd));                                 \
		CHECK((hdr).in_words * 4U == (req_len));                       \
		CHECK((hdr).out_words * 4U == (resp_len));                     \
	} while (0)

/* Stand-in for 16 bytes of driver data behind a core response. */
struct drv_data {
	uint64_t word[2];
};

static void check_cq_commands(struct ibv_context *ibctx)
{
	struct ibv_comp_channel chan = { .context = ibctx, .fd = 9 };
	struct {
		struct ib_uverbs_create_cq_resp core;
		struct drv_data drv;
	} resp;
	struct {
		struct ib_uverbs_ex_create_cq_resp core;
		struct drv_data drv;
	} resp_ex;
	struct {
		struct ib_uverbs_resize_cq_resp core;
		struct drv_data drv;
	} resize_resp;
	struct ib_uverbs_create_cq_resp *legacy;
	struct ibv_cq_init_attr_ex attr = {};
	struct ibv_create_cq_ex wex;
	struct ibv_resize_cq rcmd;
	struct ibv_create_cq w;
	struct verbs_cq vcq;
	struct ibv_cq cq;
	int ret;

	/* ibv_cmd_create_cq(): no driver request, 16 bytes of response. */
	memset(&cq, 0, sizeof(cq));
	memset(&resp, 0, sizeof(resp));
	resp.core.cq_handle = 0x1234;
	resp.core.cqe = 77;
	ret = ibv_cmd_create_cq(ibctx, 33, &chan, 2, &cq, NULL, 0, &resp.core,
				sizeof(resp));
	CHECK(ret == 0);
	read_command(&w, sizeof(w));
	CHECK_WRITE_HDR(w.hdr, IB_USER_VERBS_CMD_CREATE_CQ, sizeof(w),
			sizeof(resp));
	/* The kernel writes the driver data right behind the core response. */
	CHECK(w.core_payload.response == (uintptr_t)&resp.core);
	CHECK(w.core_payload.user_handle == (uintptr_t)&cq);
	CHECK(w.core_payload.cqe == 33);
	CHECK(w.core_payload.comp_vector == 2);
	CHECK(w.core_payload.comp_channel == 9);
	CHECK(cq.context == ibctx);
	CHECK(cq.handle == 0x1234);
	CHECK(cq.cqe == 77);

	/* ibv_cmd_create_cq_ex(): refuses an unknown comp_mask first. */
	attr.cqe = 34;
	attr.channel = &chan;
	attr.comp_vector = 3;
	attr.comp_mask = 1U << 7;
	memset(&vcq, 0, sizeof(vcq));
	ret = ibv_cmd_create_cq_ex(ibctx, &attr, &vcq, NULL, 0, &resp_ex.core,
				   sizeof(resp_ex), 0);
	CHECK(ret == EOPNOTSUPP);

	/*
	 * Without flags it falls back to the plain CREATE_CQ command, whose
	 * shorter core response libibverbs places so that the driver data
	 * still lands behind the extended one.
	 */
	attr.comp_mask = 0;
	memset(&resp_ex, 0, sizeof(resp_ex));
	legacy = (struct ib_uverbs_create_cq_resp *)((uint8_t *)&resp_ex.drv -
						      sizeof(*legacy));
	legacy->cq_handle = 0x2345;
	legacy->cqe = 78;
	ret = ibv_cmd_create_cq_ex(ibctx, &attr, &vcq, NULL, 0, &resp_ex.core,
				   sizeof(resp_ex), 0);
	CHECK(ret == 0);
	read_command(&w, sizeof(w));
	CHECK_WRITE_HDR(w.hdr, IB_USER_VERBS_CMD_CREATE_CQ, sizeof(w),
			sizeof(*legacy) + sizeof(resp_ex.drv));
	CHECK(w.core_payload.response + sizeof(*legacy) ==
	      (uintptr_t)&resp_ex.drv);
	CHECK(w.core_payload.user_handle == (uintptr_t)&vcq.cq);
	CHECK(w.core_payload.cqe == 34);
	CHECK(w.core_payload.comp_vector == 3);
	CHECK(w.core_payload.comp_channel == 9);
	CHECK(vcq.cq.context == ibctx);
	CHECK(vcq.cq.handle == 0x2345);
	CHECK(vcq.cq.cqe == 78);

	/*
	 * A timestamp request needs the extended command unless cmd_flags
	 * (the last argument) says the timestamp may be dropped.
	 */
	attr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	ret = ibv_cmd_create_cq_ex(ibctx, &attr, &vcq, NULL, 0, &resp_ex.core,
				   sizeof(resp_ex), 0);
	CHECK(ret == 0);
	read_command(&wex, sizeof(wex));
	CHECK(wex.hdr.hdr.command ==
	      (IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_CREATE_CQ));
	CHECK(wex.hdr.hdr.in_words * 8U == sizeof(wex.core_payload));
	CHECK(wex.hdr.hdr.out_words * 8U == sizeof(resp_ex.core));
	CHECK(wex.hdr.ex_hdr.provider_in_words == 0);
	CHECK(wex.hdr.ex_hdr.provider_out_words * 8U == sizeof(resp_ex.drv));
	CHECK(wex.hdr.ex_hdr.response == (uintptr_t)&resp_ex.core);
	CHECK(wex.core_payload.user_handle == (uintptr_t)&vcq.cq);
	CHECK(wex.core_payload.cqe == 34);
	CHECK(wex.core_payload.comp_vector == 3);
	CHECK(wex.core_payload.comp_channel == 9);
	CHECK(wex.core_payload.comp_mask == 0);
	CHECK(wex.core_payload.flags == IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION);

	ret = ibv_cmd_create_cq_ex(ibctx, &attr, &vcq, NULL, 0, &resp_ex.core,
				   sizeof(resp_ex),
				   CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX);
	CHECK(ret == 0);
	read_command(&w, sizeof(w));
	CHECK(w.hdr.command == IB_USER_VERBS_CMD_CREATE_CQ);

	/* ibv_cmd_resize_cq(): the command buffer is the provider's. */
	memset(&rcmd, 0, sizeof(rcmd));
	memset(&resize_resp, 0, sizeof(resize_resp));
	resize_resp.core.cqe = 99;
	cq.handle = 0x55;
	ret = ibv_cmd_resize_cq(&cq, 40, &rcmd, sizeof(rcmd), &resize_resp.core,
				sizeof(resize_resp));
	CHECK(ret == 0);
	CHECK(cq.cqe == 99);
	read_command(&w, sizeof(rcmd));
	CHECK(memcmp(&w, &rcmd, sizeof(rcmd)) == 0);
	CHECK_WRITE_HDR(rcmd.hdr, IB_USER_VERBS_CMD_RESIZE_CQ, sizeof(rcmd),
			sizeof(resize_resp));
	CHECK(rcmd.core_payload.response == (uintptr_t)&resize_resp.core);
	CHECK(rcmd.core_payload.cq_handle == 0x55);
	CHECK(rcmd.core_payload.cqe == 40);
}

static void check_mr_commands(struct ibv_context *ibctx)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_pd pd = { .context = ibctx, .handle = 0x66 };
	struct ibv_pd pd2 = { .context = ibctx, .handle = 0x67 };
	struct {
		struct verbs_mr vmr;
		uint64_t guard;
	} m;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_dereg_mr core_payload;
	} dereg;
	struct ib_uverbs_rereg_mr_resp rresp;
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_rereg_mr rcmd;
	struct ibv_reg_mr cmd;
	uint8_t w[sizeof(struct ibv_rereg_mr)];
	int ret;

	/* ibv_cmd_reg_mr() */
	memset(&m, 0, sizeof(m));
	memset(&cmd, 0, sizeof(cmd));
	m.vmr.mr_type = IBV_MR_TYPE_DMABUF_MR;
	m.guard = GUARD;
	resp.mr_handle = 0x77;
	resp.lkey = 0x88;
	resp.rkey = 0x99;
	ret = ibv_cmd_reg_mr(&pd, (void *)0x10000, 0x2000, 0x30000, access,
			     &m.vmr, &cmd, sizeof(cmd), &resp, sizeof(resp));
	CHECK(ret == 0);
	read_command(w, sizeof(cmd));
	CHECK(memcmp(w, &cmd, sizeof(cmd)) == 0);
	CHECK_WRITE_HDR(cmd.hdr, IB_USER_VERBS_CMD_REG_MR, sizeof(cmd),
			sizeof(resp));
	CHECK(cmd.core_payload.response == (uintptr_t)&resp);
	CHECK(cmd.core_payload.start == 0x10000);
	CHECK(cmd.core_payload.length == 0x2000);
	CHECK(cmd.core_payload.hca_va == 0x30000);
	CHECK(cmd.core_payload.pd_handle == 0x66);
	CHECK(cmd.core_payload.access_flags == (uint32_t)access);
	CHECK(m.vmr.ibv_mr.context == ibctx);
	CHECK(m.vmr.ibv_mr.handle == 0x77);
	CHECK(m.vmr.ibv_mr.lkey == 0x88);
	CHECK(m.vmr.ibv_mr.rkey == 0x99);
	CHECK(m.vmr.mr_type == IBV_MR_TYPE_MR);
	CHECK(m.vmr.access == access);
	CHECK(m.guard == GUARD);

	/* ibv_cmd_rereg_mr() */
	memset(&rcmd, 0, sizeof(rcmd));
	rresp.lkey = 0xaa;
	rresp.rkey = 0xbb;
	ret = ibv_cmd_rereg_mr(&m.vmr,
			       IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS,
			       (void *)0x50000, 0x6000, 0x70000,
			       IBV_ACCESS_LOCAL_WRITE, &pd2, &rcmd, sizeof(rcmd),
			       &rresp, sizeof(rresp));
	CHECK(ret == 0);
	read_command(w, sizeof(rcmd));
	CHECK(memcmp(w, &rcmd, sizeof(rcmd)) == 0);
	CHECK_WRITE_HDR(rcmd.hdr, IB_USER_VERBS_CMD_REREG_MR, sizeof(rcmd),
			sizeof(rresp));
	CHECK(rcmd.core_payload.response == (uintptr_t)&rresp);
	CHECK(rcmd.core_payload.mr_handle == 0x77);
	CHECK(rcmd.core_payload.flags ==
	      (IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS));
	CHECK(rcmd.core_payload.start == 0x50000);
	CHECK(rcmd.core_payload.length == 0x6000);
	CHECK(rcmd.core_payload.hca_va == 0x70000);
	CHECK(rcmd.core_payload.pd_handle == 0x67);
	CHECK(rcmd.core_payload.access_flags == IBV_ACCESS_LOCAL_WRITE);
	CHECK(m.vmr.ibv_mr.lkey == 0xaa);
	CHECK(m.vmr.ibv_mr.rkey == 0xbb);
	CHECK(m.vmr.ibv_mr.handle == 0x77);
	CHECK(m.guard == GUARD);

	/* ibv_cmd_dereg_mr(): no response. */
	ret = ibv_cmd_dereg_mr(&m.vmr);
	CHECK(ret == 0);
	read_command(&dereg, sizeof(dereg));
	CHECK_WRITE_HDR(dereg.hdr, IB_USER_VERBS_CMD_DEREG_MR, sizeof(dereg),
			0);
	CHECK(dereg.core_payload.mr_handle == 0x77);
}

static void check_mw_commands(struct ibv_context *ibctx)
{
	struct ibv_pd pd = { .context = ibctx, .handle = 0x68 };
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_dealloc_mw core_payload;
	} dealloc;
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd;
	struct ibv_mw mw;
	uint8_t w[sizeof(struct ibv_alloc_mw)];
	int ret;

	/* ibv_cmd_alloc_mw() */
	memset(&mw, 0, sizeof(mw));
	memset(&cmd, 0xff, sizeof(cmd));
	resp.mw_handle = 0x79;
	resp.rkey = 0x1234;
	ret = ibv_cmd_alloc_mw(&pd, IBV_MW_TYPE_2, &mw, &cmd, sizeof(cmd),
			       &resp, sizeof(resp));
	CHECK(ret == 0);
	read_command(w, sizeof(cmd));
	CHECK(memcmp(w, &cmd, sizeof(cmd)) == 0);
	CHECK_WRITE_HDR(cmd.hdr, IB_USER_VERBS_CMD_ALLOC_MW, sizeof(cmd),
			sizeof(resp));
	CHECK(cmd.core_payload.response == (uintptr_t)&resp);
	CHECK(cmd.core_payload.pd_handle == 0x68);
	CHECK(cmd.core_payload.mw_type == IBV_MW_TYPE_2);
	CHECK(cmd.core_payload.reserved[0] == 0 &&
	      cmd.core_payload.reserved[2] == 0);
	CHECK(mw.context == ibctx);
	CHECK(mw.pd == &pd);
	CHECK(mw.rkey == 0x1234);
	CHECK(mw.handle == 0x79);
	CHECK(mw.type == IBV_MW_TYPE_2);

	/* ibv_cmd_dealloc_mw(): no response. */
	ret = ibv_cmd_dealloc_mw(&mw);
	CHECK(ret == 0);
	read_command(&dealloc, sizeof(dealloc));
	CHECK_WRITE_HDR(dealloc.hdr, IB_USER_VERBS_CMD_DEALLOC_MW,
			sizeof(dealloc), 0);
	CHECK(dealloc.core_payload.mw_handle == 0x79);
}

static void check_qp_create(struct ibv_context *ibctx)
{
	struct ibv_pd pd = { .context = ibctx, .handle = 0x31 };
	struct ibv_cq scq = { .context = ibctx, .handle = 0x32 };
	struct ibv_cq rcq = { .context = ibctx, .handle = 0x33 };
	struct {
		struct ib_uverbs_create_qp_resp core;
		struct drv_data drv;
	} resp;
	struct {
		struct ib_uverbs_ex_create_qp_resp core;
		struct drv_data drv;
	} resp_ex;
	struct ibv_qp_init_attr_ex attr_ex;
	struct ibv_qp_init_attr attr;
	struct ibv_create_qp_ex wex;
	struct ibv_create_qp w;
	struct {
		struct verbs_qp vqp;
		uint64_t guard;
	} q;
	size_t core_len;
	uint32_t *legacy;
	int ret;

	/*
	 * ibv_cmd_create_qp_ex2(): refuses comp_mask bits the library does
	 * not know, before sending anything.
	 */
	memset(&attr_ex, 0, sizeof(attr_ex));
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD | (1U << 20);
	attr_ex.pd = &pd;
	attr_ex.qp_type = IBV_QPT_RC;
	attr_ex.send_cq = &scq;
	attr_ex.recv_cq = &rcq;
	memset(&q, 0, sizeof(q));
	ret = ibv_cmd_create_qp_ex2(ibctx, &q.vqp, &attr_ex, NULL, 0,
				    &resp_ex.core, sizeof(resp_ex));
	CHECK(ret == EINVAL);

	/*
	 * With CREATE_FLAGS it needs the extended command, which falls back
	 * to the extended write() here.  That path zeroes the response
	 * before the "kernel" writes it, so the caps come back as 0.
	 */
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	attr_ex.create_flags = 0;
	attr_ex.send_ops_flags = IBV_QP_EX_WITH_SEND;
	attr_ex.qp_context = (void *)0x4321;
	attr_ex.cap.max_send_wr = 11;
	attr_ex.cap.max_recv_wr = 12;
	attr_ex.cap.max_send_sge = 3;
	attr_ex.cap.max_recv_sge = 4;
	attr_ex.cap.max_inline_data = 64;
	attr_ex.sq_sig_all = 1;
	memset(&q, 0xa5, sizeof(q));
	q.guard = GUARD;
	memset(&resp_ex, 0xee, sizeof(resp_ex));
	ret = ibv_cmd_create_qp_ex2(ibctx, &q.vqp, &attr_ex, NULL, 0,
				    &resp_ex.core, sizeof(resp_ex));
	CHECK(ret == 0);
	read_command(&wex, sizeof(wex));
	CHECK(wex.hdr.hdr.command ==
	      (IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_CREATE_QP));
	CHECK(wex.hdr.hdr.in_words * 8U == sizeof(wex.core_payload));
	CHECK(wex.hdr.hdr.out_words * 8U == sizeof(resp_ex.core));
	CHECK(wex.hdr.ex_hdr.provider_in_words == 0);
	CHECK(wex.hdr.ex_hdr.provider_out_words * 8U == sizeof(resp_ex.drv));
	CHECK(wex.hdr.ex_hdr.response == (uintptr_t)&resp_ex.core);
	CHECK(wex.core_payload.user_handle == (uintptr_t)&q.vqp.qp);
	CHECK(wex.core_payload.pd_handle == 0x31);
	CHECK(wex.core_payload.send_cq_handle == 0x32);
	CHECK(wex.core_payload.recv_cq_handle == 0x33);
	CHECK(wex.core_payload.max_send_wr == 11);
	CHECK(wex.core_payload.max_recv_wr == 12);
	CHECK(wex.core_payload.max_send_sge == 3);
	CHECK(wex.core_payload.max_recv_sge == 4);
	CHECK(wex.core_payload.max_inline_data == 64);
	CHECK(wex.core_payload.sq_sig_all == 1);
	CHECK(wex.core_payload.qp_type == IBV_QPT_RC);
	CHECK(wex.core_payload.is_srq == 0);
	CHECK(wex.core_payload.create_flags == 0);
	/* The helper copied the granted caps (zero here) into attr_ex. */
	CHECK(attr_ex.cap.max_send_wr == 0 && attr_ex.cap.max_inline_data == 0);
	CHECK(resp_ex.drv.word[0] == 0 && resp_ex.drv.word[1] == 0);
	/* ... and filled the QP, including verbs_qp.comp_mask. */
	CHECK(q.vqp.qp.context == ibctx);
	CHECK(q.vqp.qp.handle == 0);
	CHECK(q.vqp.qp.qp_context == (void *)0x4321);
	CHECK(q.vqp.qp.pd == &pd);
	CHECK(q.vqp.qp.send_cq == &scq);
	CHECK(q.vqp.qp.recv_cq == &rcq);
	CHECK(q.vqp.qp.srq == NULL);
	CHECK(q.vqp.qp.qp_type == IBV_QPT_RC);
	CHECK(q.vqp.qp.state == IBV_QPS_RESET);
	CHECK(q.vqp.qp.events_completed == 0);
	CHECK(q.vqp.comp_mask == 0);
	CHECK(q.guard == GUARD);
	pthread_mutex_destroy(&q.vqp.qp.mutex);
	pthread_cond_destroy(&q.vqp.qp.cond);

	/* ibv_qp_to_qp_ex() reads verbs_qp.comp_mask for VERBS_QP_EX. */
	CHECK(ibv_qp_to_qp_ex(&q.vqp.qp) == NULL);
	q.vqp.comp_mask = VERBS_QP_EX;
	CHECK(ibv_qp_to_qp_ex(&q.vqp.qp) == &q.vqp.qp_ex);

	/*
	 * ibv_cmd_create_qp(): the plain write() command.  This process
	 * never lists devices, so libibverbs' uverbs ABI version is unset
	 * and it uses the oldest response layout (qp_handle, qpn); the
	 * driver data must still land right behind it.
	 */
	memset(&attr, 0, sizeof(attr));
	attr.qp_context = (void *)0x5432;
	attr.send_cq = &scq;
	attr.recv_cq = &rcq;
	attr.qp_type = IBV_QPT_UD;
	attr.cap.max_send_wr = 21;
	attr.cap.max_recv_wr = 22;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 2;
	attr.cap.max_inline_data = 32;
	memset(&q, 0xa5, sizeof(q));
	q.guard = GUARD;
	memset(&resp, 0, sizeof(resp));
	legacy = (uint32_t *)((uint8_t *)&resp.drv - 2 * sizeof(uint32_t));
	legacy[0] = 0x3456;
	legacy[1] = 0x789;
	ret = ibv_cmd_create_qp(&pd, &q.vqp.qp, &attr, NULL, 0, &resp.core,
				sizeof(resp));
	CHECK(ret == 0);
	read_command(&w, sizeof(w));
	CHECK(w.hdr.command == IB_USER_VERBS_CMD_CREATE_QP);
	CHECK(w.hdr.in_words * 4U == sizeof(w));
	core_len = w.hdr.out_words * 4U - sizeof(resp.drv);
	CHECK(core_len == 2 * sizeof(uint32_t));
	CHECK(w.core_payload.response + core_len == (uintptr_t)&resp.drv);
	CHECK(w.core_payload.user_handle == (uintptr_t)&q.vqp.qp);
	CHECK(w.core_payload.pd_handle == 0x31);
	CHECK(w.core_payload.send_cq_handle == 0x32);
	CHECK(w.core_payload.recv_cq_handle == 0x33);
	CHECK(w.core_payload.max_send_wr == 21);
	CHECK(w.core_payload.max_recv_wr == 22);
	CHECK(w.core_payload.max_send_sge == 1);
	CHECK(w.core_payload.max_recv_sge == 2);
	CHECK(w.core_payload.max_inline_data == 32);
	CHECK(w.core_payload.qp_type == IBV_QPT_UD);
	CHECK(w.core_payload.is_srq == 0);
	CHECK(q.vqp.qp.context == ibctx);
	CHECK(q.vqp.qp.handle == 0x3456);
	CHECK(q.vqp.qp.qp_num == 0x789);
	CHECK(q.vqp.qp.qp_context == (void *)0x5432);
	CHECK(q.vqp.qp.pd == &pd);
	CHECK(q.vqp.qp.qp_type == IBV_QPT_UD);
	CHECK(q.vqp.qp.state == IBV_QPS_RESET);
	/* Only the ibv_qp part is the library's on this path. */
	CHECK(q.guard == GUARD);
	pthread_mutex_destroy(&q.vqp.qp.mutex);
	pthread_cond_destroy(&q.vqp.qp.cond);
}

/*
 * ibv_cmd_modify_srq() and ibv_cmd_query_srq(): write() commands in the
 * provider's buffers.  (The query response is the library's own.)
 */
static void check_srq_commands(struct ibv_context *ibctx)
{
	struct ibv_srq srq = { .context = ibctx, .handle = 0x57 };
	struct ibv_srq_attr attr = { .max_wr = 99, .srq_limit = 7 };
	struct ibv_modify_srq mcmd;
	struct ibv_query_srq qcmd;
	uint8_t w[sizeof(struct ibv_modify_srq)];

	memset(&mcmd, 0, sizeof(mcmd));
	CHECK(ibv_cmd_modify_srq(&srq, &attr, IBV_SRQ_LIMIT, &mcmd,
				 sizeof(mcmd)) == 0);
	read_command(w, sizeof(mcmd));
	CHECK(memcmp(w, &mcmd, sizeof(mcmd)) == 0);
	CHECK_WRITE_HDR(mcmd.hdr, IB_USER_VERBS_CMD_MODIFY_SRQ, sizeof(mcmd),
			0);
	CHECK(mcmd.core_payload.srq_handle == 0x57);
	CHECK(mcmd.core_payload.attr_mask == IBV_SRQ_LIMIT);
	CHECK(mcmd.core_payload.max_wr == 99);
	CHECK(mcmd.core_payload.srq_limit == 7);

	memset(&qcmd, 0, sizeof(qcmd));
	CHECK(ibv_cmd_query_srq(&srq, &attr, &qcmd, sizeof(qcmd)) == 0);
	read_command(w, sizeof(qcmd));
	CHECK(memcmp(w, &qcmd, sizeof(qcmd)) == 0);
	CHECK_WRITE_HDR(qcmd.hdr, IB_USER_VERBS_CMD_QUERY_SRQ, sizeof(qcmd),
			sizeof(struct ib_uverbs_query_srq_resp));
	CHECK(qcmd.core_payload.response != 0);
	CHECK(qcmd.core_payload.srq_handle == 0x57);
}

/*
 * ibv_cmd_open_xrcd(), ibv_cmd_open_qp() and ibv_cmd_close_xrcd():
 * write() commands in the provider's buffers, and what the first two set
 * in struct verbs_xrcd and struct verbs_qp from the (pre-filled)
 * responses.
 */
static void check_xrc_commands(struct ibv_context *ibctx)
{
	struct ibv_xrcd_init_attr xattr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = 9,
		.oflags = O_CREAT,
	};
	struct ib_uverbs_open_xrcd_resp xresp = { .xrcd_handle = 0x71 };
	struct ib_uverbs_create_qp_resp qresp = { .qp_handle = 0x72 };
	struct ibv_qp_open_attr qattr;
	struct ibv_open_xrcd xcmd;
	struct ibv_open_qp qcmd;
	struct verbs_xrcd xrcd;
	struct verbs_qp vqp;
	uint8_t w[sizeof(struct ibv_open_qp)];
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_close_xrcd core_payload;
	} ccmd;

	_Static_assert(sizeof(w) >= sizeof(xcmd) && sizeof(w) >= sizeof(ccmd),
		       "command buffer too small");
	memset(&xrcd, 0xa5, sizeof(xrcd));
	memset(&xcmd, 0, sizeof(xcmd));
	CHECK(ibv_cmd_open_xrcd(ibctx, &xrcd, sizeof(xrcd), &xattr, &xcmd,
				sizeof(xcmd), &xresp, sizeof(xresp)) == 0);
	read_command(w, sizeof(xcmd));
	CHECK(memcmp(w, &xcmd, sizeof(xcmd)) == 0);
	CHECK_WRITE_HDR(xcmd.hdr, IB_USER_VERBS_CMD_OPEN_XRCD, sizeof(xcmd),
			sizeof(xresp));
	CHECK(xcmd.core_payload.response == (uintptr_t)&xresp);
	CHECK(xcmd.core_payload.fd == 9);
	CHECK(xcmd.core_payload.oflags == O_CREAT);
	CHECK(xrcd.xrcd.context == ibctx);
	CHECK(xrcd.comp_mask == VERBS_XRCD_HANDLE);
	CHECK(xrcd.handle == 0x71);

	memset(&qattr, 0, sizeof(qattr));
	qattr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			  IBV_QP_OPEN_ATTR_TYPE;
	qattr.qp_num = 0x1234;
	qattr.xrcd = &xrcd.xrcd;
	qattr.qp_type = IBV_QPT_XRC_RECV;
	memset(&vqp, 0xa5, sizeof(vqp));
	memset(&qcmd, 0, sizeof(qcmd));
	CHECK(ibv_cmd_open_qp(ibctx, &vqp, sizeof(vqp), &qattr, &qcmd,
			      sizeof(qcmd), &qresp, sizeof(qresp)) == 0);
	read_command(w, sizeof(qcmd));
	CHECK(memcmp(w, &qcmd, sizeof(qcmd)) == 0);
	CHECK_WRITE_HDR(qcmd.hdr, IB_USER_VERBS_CMD_OPEN_QP, sizeof(qcmd),
			sizeof(qresp));
	CHECK(qcmd.core_payload.response == (uintptr_t)&qresp);
	CHECK(qcmd.core_payload.user_handle == (uintptr_t)&vqp);
	CHECK(qcmd.core_payload.pd_handle == 0x71);	/* the XRCD's */
	CHECK(qcmd.core_payload.qpn == 0x1234);
	CHECK(qcmd.core_payload.qp_type == IBV_QPT_XRC_RECV);
	CHECK(vqp.qp.context == ibctx);
	CHECK(vqp.qp.handle == 0x72);
	CHECK(vqp.qp.qp_num == 0x1234);
	CHECK(vqp.qp.qp_type == IBV_QPT_XRC_RECV);
	CHECK(vqp.qp.pd == NULL && vqp.qp.srq == NULL);
	CHECK(vqp.comp_mask == VERBS_QP_XRCD);
	CHECK(vqp.xrcd == &xrcd);
	pthread_cond_destroy(&vqp.qp.cond);
	pthread_mutex_destroy(&vqp.qp.mutex);

	CHECK(ibv_cmd_close_xrcd(&xrcd) == 0);
	read_command(w, sizeof(ccmd));
	memcpy(&ccmd, w, sizeof(ccmd));
	CHECK_WRITE_HDR(ccmd.hdr, IB_USER_VERBS_CMD_CLOSE_XRCD, sizeof(ccmd),
			0);
	CHECK(ccmd.core_payload.xrcd_handle == 0x71);
}

static void check_qp_commands(struct ibv_context *ibctx)
{
	struct ibv_cq scq = { .context = ibctx, .handle = 0x32 };
	struct ibv_qp qp = {
		.context = ibctx,
		.handle = 0x44,
		.qp_context = (void *)0x6543,
		.send_cq = &scq,
		.recv_cq = &scq,
		.qp_type = IBV_QPT_RC,
	};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send core_payload;
	} ps;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_recv core_payload;
	} pr;
	struct ibv_send_wr *bad_send = (struct ibv_send_wr *)&qp;
	struct ibv_recv_wr *bad_recv = (struct ibv_recv_wr *)&qp;
	struct ibv_qp_init_attr init_attr;
	struct ibv_modify_qp mcmd;
	struct ibv_query_qp qcmd;
	struct ibv_qp_attr attr;
	uint8_t w[sizeof(struct ibv_modify_qp)];
	int mask, ret;

	/* ibv_cmd_modify_qp(): the command buffer is the provider's. */
	memset(&attr, 0, sizeof(attr));
	memset(&mcmd, 0, sizeof(mcmd));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = 0x123;
	attr.rq_psn = 0x456;
	attr.max_dest_rd_atomic = 4;
	attr.min_rnr_timer = 12;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.port_num = 1;
	attr.ah_attr.grh.dgid.raw[15] = 9;
	attr.ah_attr.grh.sgid_index = 2;
	attr.ah_attr.grh.hop_limit = 64;
	mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
	       IBV_QP_MIN_RNR_TIMER;
	ret = ibv_cmd_modify_qp(&qp, &attr, mask, &mcmd, sizeof(mcmd));
	CHECK(ret == 0);
	read_command(w, sizeof(mcmd));
	CHECK(memcmp(w, &mcmd, sizeof(mcmd)) == 0);
	CHECK_WRITE_HDR(mcmd.hdr, IB_USER_VERBS_CMD_MODIFY_QP, sizeof(mcmd),
			0);
	CHECK(mcmd.core_payload.qp_handle == 0x44);
	CHECK(mcmd.core_payload.attr_mask == (uint32_t)mask);
	CHECK(mcmd.core_payload.qp_state == IBV_QPS_RTR);
	CHECK(mcmd.core_payload.path_mtu == IBV_MTU_1024);
	CHECK(mcmd.core_payload.dest_qp_num == 0x123);
	CHECK(mcmd.core_payload.rq_psn == 0x456);
	CHECK(mcmd.core_payload.max_dest_rd_atomic == 4);
	CHECK(mcmd.core_payload.min_rnr_timer == 12);
	CHECK(mcmd.core_payload.dest.is_global == 1);
	CHECK(mcmd.core_payload.dest.port_num == 1);
	CHECK(mcmd.core_payload.dest.dgid[15] == 9);
	CHECK(mcmd.core_payload.dest.sgid_index == 2);
	CHECK(mcmd.core_payload.dest.hop_limit == 64);
	/* The library's wrapper, not the helper, updates qp->state. */
	CHECK(qp.state == IBV_QPS_RESET);
	CHECK(ibv_cmd_modify_qp(&qp, &attr, IBV_QP_RATE_LIMIT, &mcmd,
				sizeof(mcmd)) == EOPNOTSUPP);

	/*
	 * ibv_cmd_query_qp(): the response is the library's own; only the
	 * command and what init_attr takes from the QP are checked.
	 */
	memset(&qcmd, 0, sizeof(qcmd));
	memset(&init_attr, 0, sizeof(init_attr));
	ret = ibv_cmd_query_qp(&qp, &attr, IBV_QP_STATE | IBV_QP_CAP,
			       &init_attr, &qcmd, sizeof(qcmd));
	CHECK(ret == 0);
	read_command(w, sizeof(qcmd));
	CHECK(memcmp(w, &qcmd, sizeof(qcmd)) == 0);
	CHECK_WRITE_HDR(qcmd.hdr, IB_USER_VERBS_CMD_QUERY_QP, sizeof(qcmd),
			sizeof(struct ib_uverbs_query_qp_resp));
	CHECK(qcmd.core_payload.response != 0);
	CHECK(qcmd.core_payload.qp_handle == 0x44);
	CHECK(qcmd.core_payload.attr_mask == (IBV_QP_STATE | IBV_QP_CAP));
	CHECK(init_attr.qp_context == (void *)0x6543);
	CHECK(init_attr.send_cq == &scq);
	CHECK(init_attr.qp_type == IBV_QPT_RC);

	/* The SQ doorbell: POST_SEND with no work requests at all. */
	ret = ibv_cmd_post_send(&qp, NULL, &bad_send);
	CHECK(ret == 0);
	CHECK(bad_send == (struct ibv_send_wr *)&qp);
	read_command(&ps, sizeof(ps));
	CHECK_WRITE_HDR(ps.hdr, IB_USER_VERBS_CMD_POST_SEND, sizeof(ps),
			sizeof(struct ib_uverbs_post_send_resp));
	CHECK(ps.core_payload.response != 0);
	CHECK(ps.core_payload.qp_handle == 0x44);
	CHECK(ps.core_payload.wr_count == 0);
	CHECK(ps.core_payload.sge_count == 0);
	CHECK(ps.core_payload.wqe_size == sizeof(struct ib_uverbs_send_wr));

	/* The RQ doorbell: POST_RECV with no work requests. */
	ret = ibv_cmd_post_recv(&qp, NULL, &bad_recv);
	CHECK(ret == 0);
	CHECK(bad_recv == (struct ibv_recv_wr *)&qp);
	read_command(&pr, sizeof(pr));
	CHECK_WRITE_HDR(pr.hdr, IB_USER_VERBS_CMD_POST_RECV, sizeof(pr),
			sizeof(struct ib_uverbs_post_recv_resp));
	CHECK(pr.core_payload.response != 0);
	CHECK(pr.core_payload.qp_handle == 0x44);
	CHECK(pr.core_payload.wr_count == 0);
	CHECK(pr.core_payload.sge_count == 0);
	CHECK(pr.core_payload.wqe_size == sizeof(struct ib_uverbs_recv_wr));
}

static void check_ah_commands(struct ibv_context *ibctx)
{
	struct ibv_pd pd = { .context = ibctx, .handle = 0x51 };
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_ah core_payload;
	} w;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_destroy_ah core_payload;
	} d;
	/* The driver data directly behind the 4-byte core response. */
	struct {
		struct ib_uverbs_create_ah_resp core;
		uint32_t drv[2];
	} resp;
	struct ibv_ah_attr attr;
	struct {
		struct ibv_ah ah;
		uint64_t guard;
	} a;
	int ret;

	_Static_assert(sizeof(resp) == 12, "AH response padding");

	memset(&attr, 0, sizeof(attr));
	attr.dlid = 0x10;
	attr.sl = 1;
	attr.static_rate = 2;
	attr.is_global = 1;
	attr.port_num = 1;
	attr.grh.dgid.raw[0] = 0xfe;
	attr.grh.dgid.raw[15] = 7;
	attr.grh.flow_label = 0x12345;
	attr.grh.sgid_index = 3;
	attr.grh.hop_limit = 63;
	attr.grh.traffic_class = 5;
	memset(&a, 0, sizeof(a));
	a.guard = GUARD;
	resp.core.ah_handle = 0x77;
	resp.drv[0] = 0x1111;
	resp.drv[1] = 0x2222;
	ret = ibv_cmd_create_ah(&pd, &a.ah, &attr, &resp.core, sizeof(resp));
	CHECK(ret == 0);
	read_command(&w, sizeof(w));
	CHECK_WRITE_HDR(w.hdr, IB_USER_VERBS_CMD_CREATE_AH, sizeof(w),
			sizeof(resp));
	CHECK(w.core_payload.response == (uintptr_t)&resp.core);
	CHECK(w.core_payload.user_handle == (uintptr_t)&a.ah);
	CHECK(w.core_payload.pd_handle == 0x51);
	CHECK(w.core_payload.attr.dlid == 0x10);
	CHECK(w.core_payload.attr.sl == 1);
	CHECK(w.core_payload.attr.static_rate == 2);
	CHECK(w.core_payload.attr.is_global == 1);
	CHECK(w.core_payload.attr.port_num == 1);
	CHECK(w.core_payload.attr.grh.dgid[0] == 0xfe);
	CHECK(w.core_payload.attr.grh.dgid[15] == 7);
	CHECK(w.core_payload.attr.grh.flow_label == 0x12345);
	CHECK(w.core_payload.attr.grh.sgid_index == 3);
	CHECK(w.core_payload.attr.grh.hop_limit == 63);
	CHECK(w.core_payload.attr.grh.traffic_class == 5);
	CHECK(a.ah.context == ibctx);
	CHECK(a.ah.handle == 0x77);
	CHECK(resp.drv[0] == 0x1111 && resp.drv[1] == 0x2222);
	CHECK(a.guard == GUARD);

	/* ibv_cmd_destroy_ah(): no response. */
	ret = ibv_cmd_destroy_ah(&a.ah);
	CHECK(ret == 0);
	read_command(&d, sizeof(d));
	CHECK_WRITE_HDR(d.hdr, IB_USER_VERBS_CMD_DESTROY_AH, sizeof(d), 0);
	CHECK(d.core_payload.ah_handle == 0x77);
}

static void check_commands(void)
{
	struct test_context *ctx;
	struct ibv_cq cq = {};
	struct ibv_qp qp = {};

	ctx = open_pipe_context();
	if (ctx) {
		check_cq_commands(&ctx->vctx.context);
		close_pipe_context(ctx);
	}

	ctx = open_pipe_context();
	if (ctx) {
		check_mr_commands(&ctx->vctx.context);
		check_mw_commands(&ctx->vctx.context);
		close_pipe_context(ctx);
	}

	ctx = open_pipe_context();
	if (ctx) {
		check_qp_create(&ctx->vctx.context);
		check_qp_commands(&ctx->vctx.context);
		check_srq_commands(&ctx->vctx.context);
		check_xrc_commands(&ctx->vctx.context);
		check_ah_commands(&ctx->vctx.context);
		close_pipe_context(ctx);
	}

	/*
	 * ibv_cmd_destroy_cq() waits on the kernel's event counts, which a
	 * pipe cannot supply: on cmd_fd -1 it must fail before that.
	 */
	ctx = verbs_init_and_alloc_context(&test_vdev->device, -1, ctx, vctx,
					   0x627a);
	CHECK(ctx != NULL);
	if (!ctx)
		return;
	cq.context = &ctx->vctx.context;
	cq.handle = 1;
	CHECK(ibv_cmd_destroy_cq(&cq) == EBADF);
	/* Likewise ibv_cmd_destroy_qp(), which waits for the QP's events. */
	qp.context = &ctx->vctx.context;
	qp.handle = 1;
	CHECK(ibv_cmd_destroy_qp(&qp) == EBADF);
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

/* Step 7: dropping the last reference calls uninit_device. */
static void check_release(void)
{
	struct ibv_device **list;

	list = calloc(2, sizeof(*list));
	if (!list) {
		failures++;
		return;
	}
	list[0] = &test_vdev->device;
	ibv_free_device_list(list);	/* puts one reference per entry */
	CHECK(uninit_device_calls == 1);
}

int main(void)
{
	/* What libibverbs' try_driver() does with alloc_device()'s result. */
	test_vdev = calloc(1, sizeof(*test_vdev));
	if (!test_vdev)
		return 2;
	test_vdev->ops = &test_dev_ops;
	atomic_init(&test_vdev->refcount, 1);

	check_init_and_slots();
	check_hidden_ops();
	check_commands();
	check_release();

	if (failures) {
		fprintf(stderr,
			"provider-abi: %d check(s) failed: ibverbs_provider.h does not match the installed libibverbs\n",
			failures);
		return 1;
	}
	printf("provider-abi: ibverbs_provider.h matches the installed libibverbs\n");
	return 0;
}
