// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: device, port, user context and PD verbs.
 */
#include <linux/moduleparam.h>
#include <linux/rtnetlink.h>
#include <linux/sizes.h>
#include <linux/utsname.h>
#include <net/addrconf.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_mad.h>
#include <rdma/uverbs_ioctl.h>
#define UVERBS_MODULE_NAME bzc
#include <rdma/uverbs_named_ioctl.h>
#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"
#include "bzc_compat.h"

#define BZC_MAX_MR_SIZE		BIT_ULL(40)
#define BZC_MAX_QP_RD_ATOM	128
/* Any page size the CPU maps: pages are pinned, not DMA-mapped. */
#define BZC_PAGE_SIZE_CAP	(PAGE_SIZE | SZ_2M | SZ_1G)
#define BZC_VENDOR_PART_ID	0x627a
#define BZC_FW_VER		BIT_ULL(32)

/*
 * Object limits of a device: module parameters, read when a device is
 * created (`rdma link add`), so a device keeps the limits it reports. The
 * defaults, also the largest values accepted, are what the device model
 * sizes its tables and rings for, in the range of a mid-size RoCE NIC.
 * The parameters only lower them, say to test what happens at a limit.
 */
struct bzc_limit {
	unsigned int val;		/* 0: not set, the maximum */
	const unsigned int max;
};

static unsigned int bzc_limit(const struct bzc_limit *limit)
{
	return READ_ONCE(limit->val) ?: limit->max;
}

static int bzc_limit_set(const char *buf, const struct kernel_param *kp)
{
	struct bzc_limit *limit = kp->arg;
	unsigned int v;
	int err;

	err = kstrtouint(buf, 0, &v);
	if (err)
		return err;
	if (v < 1 || v > limit->max) {
		pr_info_ratelimited(BZC_DRV_NAME ": %s must be 1 to %u\n",
				    kp->name, limit->max);
		return -EINVAL;
	}
	WRITE_ONCE(limit->val, v);
	return 0;
}

static int bzc_limit_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%u\n", bzc_limit(kp->arg));
}

static const struct kernel_param_ops bzc_limit_ops = {
	.set = bzc_limit_set,
	.get = bzc_limit_get,
};

static struct bzc_limit bzc_max_qp = { .max = 65536 };
module_param_cb(max_qp, &bzc_limit_ops, &bzc_max_qp, 0644);
MODULE_PARM_DESC(max_qp, "QPs per device (at most and by default 65536)");

static struct bzc_limit bzc_max_qp_wr = { .max = 16384 };
module_param_cb(max_qp_wr, &bzc_limit_ops, &bzc_max_qp_wr, 0644);
MODULE_PARM_DESC(max_qp_wr,
		 "work requests per SQ, RQ and SRQ (at most and by default 16384)");

static struct bzc_limit bzc_max_cq = { .max = 65536 };
module_param_cb(max_cq, &bzc_limit_ops, &bzc_max_cq, 0644);
MODULE_PARM_DESC(max_cq, "CQs per device (at most and by default 65536)");

static struct bzc_limit bzc_max_cqe = { .max = 65535 };
module_param_cb(max_cqe, &bzc_limit_ops, &bzc_max_cqe, 0644);
MODULE_PARM_DESC(max_cqe, "entries per CQ (at most and by default 65535)");

static struct bzc_limit bzc_max_pd = { .max = 65536 };
module_param_cb(max_pd, &bzc_limit_ops, &bzc_max_pd, 0644);
MODULE_PARM_DESC(max_pd, "PDs per device (at most and by default 65536)");

/* MRs and windows share the key table: 196608 + 65536 = BZC_MAX_MR. */
static struct bzc_limit bzc_max_mr = { .max = 196608 };
module_param_cb(max_mr, &bzc_limit_ops, &bzc_max_mr, 0644);
MODULE_PARM_DESC(max_mr, "MRs per device (at most and by default 196608)");

static struct bzc_limit bzc_max_mw = { .max = 65536 };
module_param_cb(max_mw, &bzc_limit_ops, &bzc_max_mw, 0644);
MODULE_PARM_DESC(max_mw,
		 "memory windows per device (at most and by default 65536)");

static struct bzc_limit bzc_max_srq = { .max = 65536 };
module_param_cb(max_srq, &bzc_limit_ops, &bzc_max_srq, 0644);
MODULE_PARM_DESC(max_srq, "SRQs per device (at most and by default 65536)");

/* AH indexes are 16 bits, 0 unused. */
static struct bzc_limit bzc_max_ah = { .max = 65535 };
module_param_cb(max_ah, &bzc_limit_ops, &bzc_max_ah, 0644);
MODULE_PARM_DESC(max_ah,
		 "address handles per device (at most and by default 65535)");

/*
 * Device memory (bzc_dm.c): the device's whole on-NIC memory, shared by
 * every allocation on it, in KiB.
 */
static struct bzc_limit bzc_max_dm_kb = { .max = 65536 };
module_param_cb(max_dm_kb, &bzc_limit_ops, &bzc_max_dm_kb, 0644);
MODULE_PARM_DESC(max_dm_kb,
		 "device memory per device in KiB (at most and by default 65536)");

void bzc_init_device_attr(struct bzc_dev *bdev)
{
	struct ib_device_attr *a = &bdev->attr;

	/* major << 32 | minor << 16 | sub_minor, as the provider prints it */
	a->fw_ver = BZC_FW_VER;
	addrconf_addr_eui48((unsigned char *)&a->sys_image_guid,
			    bdev->ndev->dev_addr);
	a->max_mr_size = BZC_MAX_MR_SIZE;
	a->page_size_cap = BZC_PAGE_SIZE_CAP;
	a->vendor_id = 0xffffff;	/* no IEEE OUI: a software device */
	a->vendor_part_id = BZC_VENDOR_PART_ID;
	a->hw_ver = 1;
	a->max_qp = bzc_limit(&bzc_max_qp);
	a->max_qp_wr = bzc_limit(&bzc_max_qp_wr);
	a->device_cap_flags = IB_DEVICE_SYS_IMAGE_GUID |
			      IB_DEVICE_PORT_ACTIVE_EVENT |
			      IB_DEVICE_RC_RNR_NAK_GEN |
			      IB_DEVICE_MEM_WINDOW |
			      IB_DEVICE_MEM_WINDOW_TYPE_2B |
			      IB_DEVICE_MEM_MGT_EXTENSIONS |
			      IB_DEVICE_SRQ_RESIZE |
			      IB_DEVICE_XRC |
			      BZC_DEVICE_ATOMIC_WRITE |
			      BZC_DEVICE_FLUSH_GLOBAL;
	a->kernel_cap_flags = IBK_ALLOW_USER_UNREG | IBK_ON_DEMAND_PAGING;
	/*
	 * ODP (bzc_odp.c): explicit and implicit MRs, every operation of
	 * every transport the device has.
	 */
	a->odp_caps.general_caps = IB_ODP_SUPPORT | IB_ODP_SUPPORT_IMPLICIT;
	a->odp_caps.per_transport_caps.rc_odp_caps =
		IB_ODP_SUPPORT_SEND | IB_ODP_SUPPORT_RECV |
		IB_ODP_SUPPORT_WRITE | IB_ODP_SUPPORT_READ |
		IB_ODP_SUPPORT_ATOMIC | IB_ODP_SUPPORT_SRQ_RECV;
	a->odp_caps.per_transport_caps.uc_odp_caps =
		IB_ODP_SUPPORT_SEND | IB_ODP_SUPPORT_RECV |
		IB_ODP_SUPPORT_WRITE | IB_ODP_SUPPORT_SRQ_RECV;
	a->odp_caps.per_transport_caps.ud_odp_caps =
		IB_ODP_SUPPORT_SEND | IB_ODP_SUPPORT_RECV |
		IB_ODP_SUPPORT_SRQ_RECV;
	/* XRC receives always come from an SRQ. */
	a->odp_caps.per_transport_caps.xrc_odp_caps =
		IB_ODP_SUPPORT_SEND | IB_ODP_SUPPORT_WRITE |
		IB_ODP_SUPPORT_READ | IB_ODP_SUPPORT_ATOMIC |
		IB_ODP_SUPPORT_SRQ_RECV;
	a->max_send_sge = BZC_MAX_SGE;
	a->max_recv_sge = BZC_MAX_SGE;
	a->max_sge_rd = BZC_MAX_SGE;
	a->max_cq = bzc_limit(&bzc_max_cq);
	a->max_cqe = bzc_limit(&bzc_max_cqe);
	a->max_mr = bzc_limit(&bzc_max_mr);
	a->max_pd = bzc_limit(&bzc_max_pd);
	a->max_qp_rd_atom = BZC_MAX_QP_RD_ATOM;
	a->max_qp_init_rd_atom = BZC_MAX_QP_RD_ATOM;
	a->max_res_rd_atom = BZC_MAX_QP_RD_ATOM * a->max_qp;
	a->atomic_cap = IB_ATOMIC_HCA;
	/* SRQ rings are sized like RQ rings (and resized by a method). */
	a->max_srq = bzc_limit(&bzc_max_srq);
	a->max_srq_wr = a->max_qp_wr;
	a->max_srq_sge = BZC_MAX_SGE;
	a->max_ah = bzc_limit(&bzc_max_ah);
	a->max_mw = bzc_limit(&bzc_max_mw);
	a->max_fast_reg_page_list_len = BZC_MAX_FR_PAGES;
	a->max_pkeys = BZC_PKEY_TBL_LEN;
	a->max_mcast_grp = BZC_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = BZC_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = BZC_MAX_MCAST_ATTACH;
	a->local_ca_ack_delay = 15;
	/* Completion timestamps: CLOCK_MONOTONIC in ns, 64 bits. */
	a->hca_core_clock = NSEC_PER_SEC / 1000;	/* kHz */
	a->timestamp_mask = U64_MAX;
	a->max_dm_size = (u64)bzc_limit(&bzc_max_dm_kb) * SZ_1K;
}

/* Port state follows the netdev: ACTIVE while it is up with carrier. */
enum ib_port_state bzc_port_state(struct bzc_dev *bdev)
{
	struct net_device *ndev = bdev->ndev;

	return netif_running(ndev) && netif_carrier_ok(ndev) ?
		IB_PORT_ACTIVE : IB_PORT_DOWN;
}

static int bzc_query_device(struct ib_device *ibdev,
			    struct ib_device_attr *attr, struct ib_udata *udata)
{
	/* No driver data is defined for query_device. */
	if (udata->inlen || udata->outlen)
		return -EINVAL;

	*attr = to_bdev(ibdev)->attr;
	return 0;
}

static int bzc_query_port(struct ib_device *ibdev, u32 port_num,
			  struct ib_port_attr *attr)
{
	struct bzc_dev *bdev = to_bdev(ibdev);

	/* The core zeroed *attr and checked port_num. */
	attr->state = bzc_port_state(bdev);
	attr->phys_state = attr->state == IB_PORT_ACTIVE ?
		IB_PORT_PHYS_STATE_LINK_UP : IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = iboe_get_mtu(READ_ONCE(bdev->ndev->mtu));
	attr->gid_tbl_len = BZC_GID_TBL_LEN;
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->max_msg_sz = BZC_MAX_MSG_SZ;
	attr->pkey_tbl_len = BZC_PKEY_TBL_LEN;
	attr->max_vl_num = 1;
	/*
	 * Data moves memory to memory, not through the netdev, so the rate is
	 * the device's own nominal one rather than the netdev's link speed.
	 */
	attr->active_width = IB_WIDTH_4X;
	attr->active_speed = IB_SPEED_EDR;
	return 0;
}

static int bzc_get_port_immutable(struct ib_device *ibdev, u32 port_num,
				  struct ib_port_immutable *immutable)
{
	immutable->pkey_tbl_len = BZC_PKEY_TBL_LEN;
	immutable->gid_tbl_len = BZC_GID_TBL_LEN;
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer bzc_get_link_layer(struct ib_device *ibdev,
					       u32 port_num)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int bzc_query_pkey(struct ib_device *ibdev, u32 port_num, u16 index,
			  u16 *pkey)
{
	if (index >= BZC_PKEY_TBL_LEN)
		return -EINVAL;
	*pkey = BZC_DEFAULT_PKEY;
	return 0;
}

static void bzc_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	u64 fw = to_bdev(ibdev)->attr.fw_ver;

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%u.%u.%u",
		 (u32)(fw >> 32) & 0xffff, (u32)(fw >> 16) & 0xffff,
		 (u32)fw & 0xffff);
}

/* What a context learns at ALLOC_UCONTEXT and at QUERY_CONTEXT. */
static const struct bzc_alloc_ucontext_resp bzc_ucontext_resp = {
	.comp_mask = BZC_ALLOC_UCTX_RESP_CAPS,
	.caps = BZC_CAP_MMAP_ENTRIES | BZC_CAP_BULK | BZC_CAP_QP_DOORBELL |
		BZC_CAP_ATOMIC_WRITE | BZC_CAP_SRQ_RESIZE | BZC_CAP_DM |
		BZC_CAP_DM_EXPORT_DMABUF | BZC_CAP_DM_QUERY | BZC_CAP_XRC |
		(BZC_CORE_HAS_FLUSH ? BZC_CAP_FLUSH : 0),
};

static int bzc_alloc_ucontext(struct ib_ucontext *ibuc,
			      struct ib_udata *udata)
{
	struct bzc_alloc_ucontext_resp resp;
	struct bzc_alloc_ucontext_req req = {};
	int err;

	/* A longer request than we know must be zero past our struct. */
	if (udata->inlen > sizeof(req) &&
	    !ib_is_udata_cleared(udata, sizeof(req),
				 udata->inlen - sizeof(req)))
		return -EOPNOTSUPP;

	err = ib_copy_from_udata(&req, udata, min(udata->inlen, sizeof(req)));
	if (err)
		return err;
	if (req.comp_mask & ~(u64)BZC_ALLOC_UCTX_REQ_MASK_ALL)
		return -EOPNOTSUPP;
	/* A provider with the old ring layout would corrupt every ring. */
	if ((req.comp_mask & BZC_ALLOC_UCTX_REQ_MASK_ALL) !=
	    BZC_ALLOC_UCTX_REQ_MASK_ALL) {
		ibdev_info_ratelimited(ibuc->device,
				       "%s[%d]: provider predates this module's ring layout (split headers, CQE timestamps); update it\n",
				       current->comm, task_pid_nr(current));
		return -EOPNOTSUPP;
	}

	resp = bzc_ucontext_resp;
	return ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
}

/*
 * QUERY_CONTEXT, which ibv_import_device() sends on a dup of another
 * context's command fd: the core answers the generic fields, the
 * driver attribute (when asked for) the capabilities.
 */
static int bzc_query_ucontext(struct ib_ucontext *ibuc,
			      struct uverbs_attr_bundle *attrs)
{
	if (!uverbs_attr_is_valid(attrs, BZC_ATTR_QUERY_CONTEXT_RESP_UCTX))
		return 0;
	return uverbs_copy_to_struct_or_zero(attrs,
					     BZC_ATTR_QUERY_CONTEXT_RESP_UCTX,
					     &bzc_ucontext_resp,
					     sizeof(bzc_ucontext_resp));
}

ADD_UVERBS_ATTRIBUTES_SIMPLE(
	bzc_query_context, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_CONTEXT,
	UVERBS_ATTR_PTR_OUT(BZC_ATTR_QUERY_CONTEXT_RESP_UCTX,
			    UVERBS_ATTR_STRUCT(struct bzc_alloc_ucontext_resp,
					       caps),
			    UA_OPTIONAL));

const struct uapi_definition bzc_context_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &bzc_query_context),
	{},
};

static void bzc_dealloc_ucontext(struct ib_ucontext *ibuc)
{
}

/*
 * Hot unplug: the core revokes the process's mappings and objects; the
 * device model keeps no other per-context state that needs revoking.
 */
static void bzc_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

static int bzc_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibpd->device);
	int err;

	err = bzc_obj_get(bdev, &bdev->num_pd, bdev->attr.max_pd, "PD");
	if (err)
		return err;
	/* A process's PD caches pinned ranges of its memory. */
	err = udata ? bzc_mrc_create(to_bpd(ibpd)) : 0;
	if (err)
		bzc_obj_put(&bdev->num_pd);
	return err;
}

static int bzc_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	bzc_mrc_destroy(to_bpd(ibpd));
	bzc_obj_put(&to_bdev(ibpd->device)->num_pd);
	return 0;
}

/* Called once the device is unregistered and every user object is gone. */
static void bzc_dealloc_driver(struct ib_device *ibdev)
{
	struct bzc_dev *bdev = to_bdev(ibdev);

	bzc_mcast_wait_leaves(bdev);
	rtnl_lock();
	bzc_net_detach(bdev);
	rtnl_unlock();
	bzc_net_cleanup(bdev);
	WARN_ON(!xa_empty(&bdev->mr_xa) || !xa_empty(&bdev->qp_xa) ||
		!xa_empty(&bdev->ah_xa) || !xa_empty(&bdev->srq_xa));
	xa_destroy(&bdev->mr_xa);
	xa_destroy(&bdev->qp_xa);
	xa_destroy(&bdev->ah_xa);
	xa_destroy(&bdev->srq_xa);
	bzc_mcast_cleanup(bdev);
	bzc_stats_free(bdev);
	bzc_keys_free(bdev);
}

const struct ib_device_ops bzc_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = BZC_RDMA_DRIVER_ID,
	.uverbs_abi_ver = BZC_UVERBS_ABI_VERSION,

	.advise_mr = bzc_advise_mr,
	.alloc_dm = bzc_alloc_dm,
	.alloc_mw = bzc_alloc_mw,
	.alloc_pd = bzc_alloc_pd,
	.alloc_xrcd = bzc_alloc_xrcd,
	.create_ah = bzc_create_ah,
	.create_cq = bzc_create_cq_op,
	.create_qp = bzc_create_qp,
	.create_srq = bzc_create_srq,
	.create_user_ah = bzc_create_ah,
	.alloc_ucontext = bzc_alloc_ucontext,
	.alloc_hw_port_stats = bzc_alloc_hw_port_stats,
	.alloc_mr = bzc_alloc_mr,
	.attach_mcast = bzc_attach_mcast,
	.dealloc_dm = bzc_dealloc_dm,
	.dealloc_driver = bzc_dealloc_driver,
	.dealloc_mw = bzc_dealloc_mw,
	.dealloc_pd = bzc_dealloc_pd,
	.dealloc_ucontext = bzc_dealloc_ucontext,
	.dealloc_xrcd = bzc_dealloc_xrcd,
	.dereg_mr = bzc_dereg_mr,
	.destroy_ah = bzc_destroy_ah,
	.destroy_cq = bzc_destroy_cq,
	.destroy_qp = bzc_destroy_qp,
	.destroy_srq = bzc_destroy_srq,
	.detach_mcast = bzc_detach_mcast,
	.disassociate_ucontext = bzc_disassociate_ucontext,
	.get_dev_fw_str = bzc_get_dev_fw_str,
	.get_dma_mr = bzc_get_dma_mr,
	.get_hw_stats = bzc_get_hw_stats,
	.get_link_layer = bzc_get_link_layer,
	.get_port_immutable = bzc_get_port_immutable,
	.map_mr_sg = bzc_map_mr_sg,
	.mmap = bzc_mmap,
	.mmap_free = bzc_mmap_free,
	.modify_qp = bzc_modify_qp,
	.modify_srq = bzc_modify_srq,
	.poll_cq = bzc_poll_cq,
	.post_recv = bzc_post_recv,
	.post_send = bzc_post_send,
	.post_srq_recv = bzc_post_srq_recv,
	.query_ah = bzc_query_ah,
	.query_device = bzc_query_device,
	.query_pkey = bzc_query_pkey,
	.query_port = bzc_query_port,
	.query_qp = bzc_query_qp,
	.query_srq = bzc_query_srq,
	.query_ucontext = bzc_query_ucontext,
	.reg_dm_mr = bzc_reg_dm_mr,
	.reg_user_mr = bzc_reg_user_mr,
	.reg_user_mr_dmabuf = bzc_reg_user_mr_dmabuf_op,
	.rereg_user_mr = bzc_rereg_user_mr,
	.req_notify_cq = bzc_req_notify_cq,
	.resize_cq = bzc_resize_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, bzc_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, bzc_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, bzc_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, bzc_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, bzc_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, bzc_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, bzc_ucontext, ibuc),
	INIT_RDMA_OBJ_SIZE(ib_xrcd, bzc_xrcd, ibxrcd),
};
