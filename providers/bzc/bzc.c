// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: userspace verbs provider for the bzc bulk zero-copy RDMA device.
 * This file: device matching, context.  pd.c: protection and parent
 * domains.  dv_cmd.c, bulk.c, mr_cache.c:
 * the direct verbs of bzcdv.h (bulk channels, the MR cache).  cq.c:
 * completion queues.  mr.c: memory regions.  mw.c: memory windows.  qp.c:
 * queue pairs and the receive queue.  srq.c: shared receive queues.  wr.c:
 * the send queue (ibv_post_send and the ibv_wr_* API).  ring.c: mapping
 * the rings the kernel shares.  ah.c: address handles.
 *
 * The control path goes through the libibverbs ibv_cmd_* helpers, which
 * use the uverbs ioctl interface and fall back to write() on old kernels.
 * Verbs this provider does not implement yet are left NULL in bzc_ctx_ops:
 * libibverbs keeps its defaults for them, which fail with EOPNOTSUPP, so
 * applications and test suites see "not supported" rather than a crash.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/bzc_user_ioctl_cmds.h>
#include <rdma/bzc_user_ioctl_verbs.h>

#include "bzc.h"

__thread const char *bzc_refusal;

/*
 * bzc is out of tree and has no RDMA_DRIVER_* number, so its kernel
 * driver reports the private id BZC_RDMA_DRIVER_ID and this table matches
 * on it alone.  Matching by id needs the netlink device query (Linux 4.19+
 * with RDMA netlink); libibverbs' sysfs-only fallback cannot match bzc.
 */
static const struct verbs_match_ent bzc_match_table[] = {
	VERBS_DRIVER_ID(BZC_RDMA_DRIVER_ID),
	{},
};

static int bzc_query_device_ex(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw_ver;
	int ret;

	ret = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	/*
	 * The helper leaves the firmware string to the provider.  The kernel
	 * reports fw_ver as major << 32 | minor << 16 | sub_minor, as rxe
	 * and siw do.
	 */
	fw_ver = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw_ver >> 32) & 0xffff,
		 (unsigned int)(fw_ver >> 16) & 0xffff,
		 (unsigned int)fw_ver & 0xffff);

	return 0;
}

/*
 * The device clock is the kernel's CLOCK_MONOTONIC in nanoseconds (the
 * CQE timestamps, hca_core_clock 1 GHz), which this process reads itself.
 */
static int bzc_query_rt_values(struct ibv_context *context,
			       struct ibv_values_ex *values)
{
	uint32_t asked = values->comp_mask;

	values->comp_mask = 0;
	if (asked & IBV_VALUES_MASK_RAW_CLOCK) {
		if (clock_gettime(CLOCK_MONOTONIC, &values->raw_clock))
			return errno;
		values->comp_mask |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	return 0;
}

static int bzc_query_port(struct ibv_context *context, uint8_t port,
			  struct ibv_port_attr *attr)
{
	/* Only the write() fallback uses (and fills in) cmd. */
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

static void bzc_free_context(struct ibv_context *ibctx)
{
	struct bzc_context *ctx = to_bctx(ibctx);

	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

/*
 * Every op not listed keeps the libibverbs default (EOPNOTSUPP).  cq_event
 * keeps its default too, which does nothing: arming lives in the ring
 * header and needs no bookkeeping when an event is read.
 */
static const struct verbs_context_ops bzc_ctx_ops = {
	.alloc_dm = bzc_alloc_dm,
	.alloc_mw = bzc_alloc_mw,
	.alloc_parent_domain = bzc_alloc_parent_domain,
	.alloc_pd = bzc_alloc_pd,
	.alloc_td = bzc_alloc_td,
	.attach_mcast = ibv_cmd_attach_mcast,
	.bind_mw = bzc_bind_mw,
	.advise_mr = bzc_advise_mr,
	.close_xrcd = bzc_close_xrcd,
	.create_ah = bzc_create_ah,
	.create_cq = bzc_create_cq,
	.create_cq_ex = bzc_create_cq_ex,
	.create_qp = bzc_create_qp,
	.create_qp_ex = bzc_create_qp_ex,
	.create_srq = bzc_create_srq,
	.create_srq_ex = bzc_create_srq_ex,
	.dealloc_mw = bzc_dealloc_mw,
	.dealloc_pd = bzc_dealloc_pd,
	.dealloc_td = bzc_dealloc_td,
	.dereg_mr = bzc_dereg_mr,
	.destroy_ah = bzc_destroy_ah,
	.destroy_cq = bzc_destroy_cq,
	.destroy_qp = bzc_destroy_qp,
	.destroy_srq = bzc_destroy_srq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.free_context = bzc_free_context,
	.free_dm = bzc_free_dm,
	.get_srq_num = bzc_get_srq_num,
	.import_dm = bzc_import_dm,
	.import_mr = bzc_import_mr,
	.import_pd = bzc_import_pd,
	.modify_qp = bzc_modify_qp,
	.modify_srq = bzc_modify_srq,
	.open_qp = bzc_open_qp,
	.open_xrcd = bzc_open_xrcd,
	.poll_cq = bzc_poll_cq,
	.post_recv = bzc_post_recv,
	.post_send = bzc_post_send,
	.post_srq_recv = bzc_post_srq_recv,
	.query_device_ex = bzc_query_device_ex,
	.query_port = bzc_query_port,
	.query_qp = bzc_query_qp,
	.query_rt_values = bzc_query_rt_values,
	.query_srq = bzc_query_srq,
	.reg_dm_mr = bzc_reg_dm_mr,
	.reg_dmabuf_mr = bzc_reg_dmabuf_mr,
	.reg_mr = bzc_reg_mr,
	.req_notify_cq = bzc_req_notify_cq,
	.rereg_mr = bzc_rereg_mr,
	.resize_cq = bzc_resize_cq,
	.unimport_dm = bzc_unimport_dm,
	.unimport_mr = bzc_unimport_mr,
	.unimport_pd = bzc_unimport_pd,
};

/* What alloc and import share once the kernel has answered. */
static void bzc_context_ready(struct bzc_context *ctx,
			      const struct bzc_alloc_ucontext_resp *resp)
{
	/*
	 * resp is zeroed, so a kernel that returns less driver data leaves
	 * comp_mask 0.  Fields are only valid when their bit is set; bits
	 * this provider does not know describe fields beyond its struct.
	 */
	if (resp->comp_mask & BZC_ALLOC_UCTX_RESP_CAPS)
		ctx->caps = resp->caps;
	verbs_set_ops(&ctx->ibv_ctx, &bzc_ctx_ops);
}

static struct verbs_context *bzc_alloc_context(struct ibv_device *ibdev,
					       int cmd_fd,
					       void *private_data)
{
	struct ubzc_alloc_ucontext cmd = {};
	struct ubzc_alloc_ucontext_resp resp = {};
	struct bzc_context *ctx;
	int ret;

	/* Takes ownership of cmd_fd, and closes it if it fails. */
	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   BZC_RDMA_DRIVER_ID);
	if (!ctx)
		return NULL;

	/* The ring layout of bzc-abi.h: a kernel without it refuses. */
	cmd.drv_payload.comp_mask = BZC_ALLOC_UCTX_REQ_SPLIT_RING_HDR |
				    BZC_ALLOC_UCTX_REQ_CQE_TIMESTAMPS;

	ret = ibv_cmd_get_context(&ctx->ibv_ctx, &cmd.ibv_cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (ret) {
		/* Which errno reaches us depends on libibverbs' fallbacks. */
		verbs_err(&ctx->ibv_ctx,
			  "the kernel refused the context (%s); a bzc module of another release refuses this provider's ring layout (split ring headers, CQE timestamps)\n",
			  strerror(ret));
		goto err;
	}

	bzc_context_ready(ctx, &resp.drv_payload);
	return &ctx->ibv_ctx;

err:
	/* Closes cmd_fd and drops the device reference taken above. */
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	errno = ret;
	return NULL;
}

static struct verbs_device *bzc_device_alloc(struct verbs_sysfs_dev *sysfs_dev)
{
	struct bzc_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;

	return &dev->ibv_dev;
}

static void bzc_uninit_device(struct verbs_device *verbs_device)
{
	free(to_bdev(&verbs_device->device));
}

/*
 * ibv_import_device(): a context on a dup of another context's command
 * fd (this process's or one that passed it), the same kernel ucontext.
 * The core's QUERY_CONTEXT sets what GET_CONTEXT would; bzc's driver
 * attribute on it brings the capabilities. The rings' layout was agreed
 * when that ucontext was allocated, by a provider of this release or the
 * kernel would have refused it.
 */
static struct verbs_context *bzc_import_context(struct ibv_device *ibdev,
						int cmd_fd)
{
	struct bzc_alloc_ucontext_resp resp = {};
	struct bzc_context *ctx;
	struct bzc_cmd cmd;
	int ret;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   BZC_RDMA_DRIVER_ID);
	if (!ctx)
		return NULL;

	ret = ibv_cmd_query_context(&ctx->ibv_ctx.context, NULL);
	if (!ret) {
		bzc_cmd_init(&cmd, UVERBS_OBJECT_DEVICE,
			     UVERBS_METHOD_QUERY_CONTEXT);
		bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_QUERY_CONTEXT_RESP_UCTX,
				    &resp, sizeof(resp));
		ret = bzc_cmd_exec(&ctx->ibv_ctx.context, &cmd);
	}
	if (ret) {
		verbs_err(&ctx->ibv_ctx, "QUERY_CONTEXT failed: %s\n",
			  strerror(ret));
		verbs_uninit_context(&ctx->ibv_ctx);
		free(ctx);
		errno = ret;
		return NULL;
	}
	bzc_context_ready(ctx, &resp);
	return &ctx->ibv_ctx;
}

static const struct verbs_device_ops bzc_dev_ops = {
	.name = "bzc",
	/*
	 * The kernel never bumps its uverbs ABI version; new behaviour is
	 * negotiated with comp_mask and capability bits instead.
	 */
	.match_min_abi_version = BZC_UVERBS_ABI_VERSION,
	.match_max_abi_version = BZC_UVERBS_ABI_VERSION,
	.match_table = bzc_match_table,
	.alloc_device = bzc_device_alloc,
	.uninit_device = bzc_uninit_device,
	.alloc_context = bzc_alloc_context,
	.import_context = bzc_import_context,
};
PROVIDER_DRIVER(bzc, bzc_dev_ops);

/*
 * libbzc.so.1 and the plugin libbzc-rdmav34.so are one file, so an
 * application linking the former and libibverbs loading the latter share
 * bzc_dev_ops: a device is bzc's exactly when it uses these ops.
 */
bool bzc_is_bzc_device(struct ibv_device *ibdev)
{
	return ibdev && verbs_get_device(ibdev)->ops == &bzc_dev_ops;
}

BZC_EXPORT bool bzcdv_is_supported(struct ibv_device *device)
{
	return bzc_is_bzc_device(device);
}
