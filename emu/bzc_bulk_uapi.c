// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: the driver-namespace uverbs objects and methods of bulk transfers
 * (kernel-headers/rdma/bzc_user_ioctl_cmds.h): the device's bulk
 * capabilities and MR cache counters, bulk channels and their connection,
 * cached MRs.
 */
#define UVERBS_MODULE_NAME bzc
#include <rdma/uverbs_named_ioctl.h>
#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"

static int UVERBS_HANDLER(BZC_METHOD_QUERY_BULK_CAPS)(
	struct uverbs_attr_bundle *attrs)
{
	struct bzc_bulk_caps caps;

	bzc_bulk_caps(&caps);
	return uverbs_copy_to_struct_or_zero(attrs,
					     BZC_ATTR_QUERY_BULK_CAPS_RESP,
					     &caps, sizeof(caps));
}

static int UVERBS_HANDLER(BZC_METHOD_QUERY_MR_CACHE)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_pd *pd = uverbs_attr_get_obj(attrs,
					       BZC_ATTR_QUERY_MR_CACHE_PD_HANDLE);
	struct bzc_mr_cache_stats st;

	bzc_mrc_stats(to_bpd(pd), &st);
	return uverbs_copy_to_struct_or_zero(attrs, BZC_ATTR_QUERY_MR_CACHE_RESP,
					     &st, sizeof(st));
}

static int UVERBS_HANDLER(BZC_METHOD_BULK_CHAN_CREATE)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_uobject *uobj =
		uverbs_attr_get_uobject(attrs, BZC_ATTR_BULK_CHAN_CREATE_HANDLE);
	struct ib_pd *pd =
		uverbs_attr_get_obj(attrs, BZC_ATTR_BULK_CHAN_CREATE_PD_HANDLE);
	struct ib_cq *cq =
		uverbs_attr_get_obj(attrs, BZC_ATTR_BULK_CHAN_CREATE_CQ_HANDLE);
	struct bzc_bulk_chan_create_resp resp = {};
	struct bzc_bulk_chan_create_cmd cmd;
	struct bzc_bulk_chan *chan;
	struct ib_cq *rcq = NULL;
	int err;

	if (uverbs_attr_is_valid(attrs, BZC_ATTR_BULK_CHAN_CREATE_RECV_CQ_HANDLE))
		rcq = uverbs_attr_get_obj(attrs,
					  BZC_ATTR_BULK_CHAN_CREATE_RECV_CQ_HANDLE);
	err = uverbs_copy_from_or_zero(&cmd, attrs,
				       BZC_ATTR_BULK_CHAN_CREATE_CMD);
	if (err)
		return err;
	if (cmd.comp_mask & ~(u64)BZC_BULK_CHAN_CREATE_MASK_ALL)
		return -EOPNOTSUPP;
	if (cq->device != pd->device || (rcq && rcq->device != pd->device))
		return -EINVAL;

	chan = bzc_bulk_chan_create(to_bpd(pd), to_bcq(cq),
				    rcq ? to_bcq(rcq) : NULL, cmd.depth,
				    &attrs->driver_udata, &resp);
	if (IS_ERR(chan))
		return PTR_ERR(chan);
	uobj->object = chan;
	uverbs_finalize_uobj_create(attrs, BZC_ATTR_BULK_CHAN_CREATE_HANDLE);
	return uverbs_copy_to_struct_or_zero(attrs,
					     BZC_ATTR_BULK_CHAN_CREATE_RESP,
					     &resp, sizeof(resp));
}

static int UVERBS_HANDLER(BZC_METHOD_BULK_CHAN_DOORBELL)(
	struct uverbs_attr_bundle *attrs)
{
	return bzc_bulk_doorbell(uverbs_attr_get_obj(attrs,
				 BZC_ATTR_BULK_CHAN_DOORBELL_HANDLE));
}

static int UVERBS_HANDLER(BZC_METHOD_BULK_CHAN_CONNECT)(
	struct uverbs_attr_bundle *attrs)
{
	struct bzc_bulk_chan *chan =
		uverbs_attr_get_obj(attrs, BZC_ATTR_BULK_CHAN_CONNECT_HANDLE);
	struct bzc_bulk_chan_connect_cmd cmd;
	union ib_gid gid;
	int err;

	err = uverbs_copy_from_or_zero(&cmd, attrs,
				       BZC_ATTR_BULK_CHAN_CONNECT_CMD);
	if (err)
		return err;
	if (cmd.comp_mask & ~(u64)BZC_BULK_CHAN_CONNECT_MASK_ALL)
		return -EOPNOTSUPP;
	memcpy(gid.raw, cmd.remote_gid, sizeof(gid.raw));
	return bzc_bulk_chan_connect(chan, &gid, cmd.remote_chan,
				     cmd.sgid_index);
}

static int UVERBS_HANDLER(BZC_METHOD_BULK_CHAN_CONNECT_QP)(
	struct uverbs_attr_bundle *attrs)
{
	struct bzc_bulk_chan *chan =
		uverbs_attr_get_obj(attrs, BZC_ATTR_BULK_CHAN_CONNECT_QP_HANDLE);
	struct ib_qp *qp =
		uverbs_attr_get_obj(attrs,
				    BZC_ATTR_BULK_CHAN_CONNECT_QP_QP_HANDLE);

	return bzc_bulk_chan_connect_qp(chan, qp);
}

static int bzc_bulk_chan_cleanup(struct ib_uobject *uobj,
				 enum rdma_remove_reason why,
				 struct uverbs_attr_bundle *attrs)
{
	bzc_bulk_chan_destroy(uobj->object);
	return 0;
}

static int UVERBS_HANDLER(BZC_METHOD_CACHED_MR_REG)(
	struct uverbs_attr_bundle *attrs)
{
	struct ib_uobject *uobj =
		uverbs_attr_get_uobject(attrs, BZC_ATTR_CACHED_MR_REG_HANDLE);
	struct ib_pd *pd =
		uverbs_attr_get_obj(attrs, BZC_ATTR_CACHED_MR_REG_PD_HANDLE);
	struct bzc_cached_mr_reg_resp resp = {};
	struct bzc_cached_mr_reg_cmd cmd;
	struct bzc_mr *mr;
	bool hit;
	int err;

	err = uverbs_copy_from_or_zero(&cmd, attrs, BZC_ATTR_CACHED_MR_REG_CMD);
	if (err)
		return err;
	if (cmd.comp_mask & ~(u64)BZC_CACHED_MR_REG_MASK_ALL)
		return -EOPNOTSUPP;
	/* The cache pins its creator's memory: not for a forked child. */
	if (!bzc_mrc_owned_by_current(to_bpd(pd)))
		return -EPERM;

	mr = bzc_cached_mr_create(to_bpd(pd), cmd.addr, cmd.length,
				  cmd.access, &hit);
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	atomic_inc(&pd->usecnt);
	uobj->object = mr;
	uverbs_finalize_uobj_create(attrs, BZC_ATTR_CACHED_MR_REG_HANDLE);

	resp.lkey = mr->ibmr.lkey;
	resp.rkey = mr->ibmr.rkey;
	resp.flags = hit ? BZC_CACHED_MR_HIT : 0;
	return uverbs_copy_to_struct_or_zero(attrs, BZC_ATTR_CACHED_MR_REG_RESP,
					     &resp, sizeof(resp));
}

static int bzc_cached_mr_cleanup(struct ib_uobject *uobj,
				 enum rdma_remove_reason why,
				 struct uverbs_attr_bundle *attrs)
{
	struct bzc_mr *mr = uobj->object;
	struct ib_pd *pd = mr->ibmr.pd;

	bzc_cached_mr_destroy(mr);
	atomic_dec(&pd->usecnt);
	return 0;
}

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_QUERY_BULK_CAPS,
	UVERBS_ATTR_PTR_OUT(BZC_ATTR_QUERY_BULK_CAPS_RESP,
			    UVERBS_ATTR_STRUCT(struct bzc_bulk_caps, workers),
			    UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_QUERY_MR_CACHE,
	UVERBS_ATTR_IDR(BZC_ATTR_QUERY_MR_CACHE_PD_HANDLE, UVERBS_OBJECT_PD,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(BZC_ATTR_QUERY_MR_CACHE_RESP,
			    UVERBS_ATTR_STRUCT(struct bzc_mr_cache_stats,
					       entries),
			    UA_MANDATORY));

DECLARE_UVERBS_GLOBAL_METHODS(BZC_OBJECT_DEVICE,
			      &UVERBS_METHOD(BZC_METHOD_QUERY_BULK_CAPS),
			      &UVERBS_METHOD(BZC_METHOD_QUERY_MR_CACHE));

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_BULK_CHAN_CREATE,
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_CREATE_HANDLE, BZC_OBJECT_BULK_CHAN,
			UVERBS_ACCESS_NEW, UA_MANDATORY),
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_CREATE_PD_HANDLE, UVERBS_OBJECT_PD,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_CREATE_CQ_HANDLE, UVERBS_OBJECT_CQ,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_CREATE_RECV_CQ_HANDLE,
			UVERBS_OBJECT_CQ, UVERBS_ACCESS_READ, UA_OPTIONAL),
	UVERBS_ATTR_PTR_IN(BZC_ATTR_BULK_CHAN_CREATE_CMD,
			   UVERBS_ATTR_STRUCT(struct bzc_bulk_chan_create_cmd,
					      depth),
			   UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(BZC_ATTR_BULK_CHAN_CREATE_RESP,
			    UVERBS_ATTR_STRUCT(struct bzc_bulk_chan_create_resp,
					       chan_num),
			    UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD_DESTROY(
	BZC_METHOD_BULK_CHAN_DESTROY,
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_DESTROY_HANDLE, BZC_OBJECT_BULK_CHAN,
			UVERBS_ACCESS_DESTROY, UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_BULK_CHAN_DOORBELL,
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_DOORBELL_HANDLE, BZC_OBJECT_BULK_CHAN,
			UVERBS_ACCESS_READ, UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_BULK_CHAN_CONNECT,
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_CONNECT_HANDLE, BZC_OBJECT_BULK_CHAN,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_IN(BZC_ATTR_BULK_CHAN_CONNECT_CMD,
			   UVERBS_ATTR_STRUCT(struct bzc_bulk_chan_connect_cmd,
					      sgid_index),
			   UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_BULK_CHAN_CONNECT_QP,
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_CONNECT_QP_HANDLE,
			BZC_OBJECT_BULK_CHAN, UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_IDR(BZC_ATTR_BULK_CHAN_CONNECT_QP_QP_HANDLE,
			UVERBS_OBJECT_QP, UVERBS_ACCESS_READ, UA_MANDATORY));

DECLARE_UVERBS_NAMED_OBJECT(BZC_OBJECT_BULK_CHAN,
			    UVERBS_TYPE_ALLOC_IDR(bzc_bulk_chan_cleanup),
			    &UVERBS_METHOD(BZC_METHOD_BULK_CHAN_CREATE),
			    &UVERBS_METHOD(BZC_METHOD_BULK_CHAN_DESTROY),
			    &UVERBS_METHOD(BZC_METHOD_BULK_CHAN_DOORBELL),
			    &UVERBS_METHOD(BZC_METHOD_BULK_CHAN_CONNECT),
			    &UVERBS_METHOD(BZC_METHOD_BULK_CHAN_CONNECT_QP));

DECLARE_UVERBS_NAMED_METHOD(
	BZC_METHOD_CACHED_MR_REG,
	UVERBS_ATTR_IDR(BZC_ATTR_CACHED_MR_REG_HANDLE, BZC_OBJECT_CACHED_MR,
			UVERBS_ACCESS_NEW, UA_MANDATORY),
	UVERBS_ATTR_IDR(BZC_ATTR_CACHED_MR_REG_PD_HANDLE, UVERBS_OBJECT_PD,
			UVERBS_ACCESS_READ, UA_MANDATORY),
	UVERBS_ATTR_PTR_IN(BZC_ATTR_CACHED_MR_REG_CMD,
			   UVERBS_ATTR_STRUCT(struct bzc_cached_mr_reg_cmd,
					      access),
			   UA_MANDATORY),
	UVERBS_ATTR_PTR_OUT(BZC_ATTR_CACHED_MR_REG_RESP,
			    UVERBS_ATTR_STRUCT(struct bzc_cached_mr_reg_resp,
					       flags),
			    UA_MANDATORY));

DECLARE_UVERBS_NAMED_METHOD_DESTROY(
	BZC_METHOD_CACHED_MR_RELEASE,
	UVERBS_ATTR_IDR(BZC_ATTR_CACHED_MR_RELEASE_HANDLE, BZC_OBJECT_CACHED_MR,
			UVERBS_ACCESS_DESTROY, UA_MANDATORY));

DECLARE_UVERBS_NAMED_OBJECT(BZC_OBJECT_CACHED_MR,
			    UVERBS_TYPE_ALLOC_IDR(bzc_cached_mr_cleanup),
			    &UVERBS_METHOD(BZC_METHOD_CACHED_MR_REG),
			    &UVERBS_METHOD(BZC_METHOD_CACHED_MR_RELEASE));

const struct uapi_definition bzc_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE_NAMED(BZC_OBJECT_DEVICE),
	UAPI_DEF_CHAIN_OBJ_TREE_NAMED(BZC_OBJECT_BULK_CHAN),
	UAPI_DEF_CHAIN_OBJ_TREE_NAMED(BZC_OBJECT_CACHED_MR),
	UAPI_DEF_CHAIN(bzc_qp_uapi_defs),
	UAPI_DEF_CHAIN(bzc_srq_uapi_defs),
	UAPI_DEF_CHAIN(bzc_context_uapi_defs),
	UAPI_DEF_CHAIN(bzc_dm_uapi_defs),
	{},
};
