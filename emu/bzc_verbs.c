// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: device, port, user context and PD verbs.
 */
#include <linux/sizes.h>
#include <linux/utsname.h>
#include <net/addrconf.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_mad.h>
#include <rdma/uverbs_ioctl.h>

#include "bzc.h"

/*
 * Limits of the software device. They are what the device model sizes its
 * tables and rings for, in the same range as a mid-size RoCE NIC.
 */
#define BZC_MAX_QP		SZ_64K
#define BZC_MAX_QP_WR		SZ_16K
#define BZC_MAX_CQ		SZ_64K
#define BZC_MAX_MR_SIZE		(1ULL << 40)
#define BZC_MAX_PD		SZ_64K
#define BZC_MAX_QP_RD_ATOM	128
#define BZC_MAX_AH		SZ_64K
#define BZC_MAX_SRQ		SZ_64K
/* Any page size the CPU maps: pages are pinned, not DMA-mapped. */
#define BZC_PAGE_SIZE_CAP	(PAGE_SIZE | SZ_2M | SZ_1G)
#define BZC_VENDOR_PART_ID	0x627a
#define BZC_FW_VER		(1ULL << 32)

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
	a->max_qp = BZC_MAX_QP;
	a->max_qp_wr = BZC_MAX_QP_WR;
	a->device_cap_flags = IB_DEVICE_SYS_IMAGE_GUID |
			      IB_DEVICE_PORT_ACTIVE_EVENT |
			      IB_DEVICE_RC_RNR_NAK_GEN |
			      IB_DEVICE_MEM_WINDOW |
			      IB_DEVICE_MEM_WINDOW_TYPE_2B;
	a->kernel_cap_flags = IBK_ALLOW_USER_UNREG;
	a->max_send_sge = BZC_MAX_SGE;
	a->max_recv_sge = BZC_MAX_SGE;
	a->max_sge_rd = BZC_MAX_SGE;
	a->max_cq = BZC_MAX_CQ;
	a->max_cqe = BZC_MAX_CQE;
	a->max_mr = BZC_MAX_MR;
	a->max_pd = BZC_MAX_PD;
	a->max_qp_rd_atom = BZC_MAX_QP_RD_ATOM;
	a->max_qp_init_rd_atom = BZC_MAX_QP_RD_ATOM;
	a->max_res_rd_atom = BZC_MAX_QP_RD_ATOM * BZC_MAX_QP;
	a->atomic_cap = IB_ATOMIC_HCA;
	/* SRQ rings are sized like RQ rings; they are not resizable. */
	a->max_srq = BZC_MAX_SRQ;
	a->max_srq_wr = BZC_MAX_QP_WR;
	a->max_srq_sge = BZC_MAX_SGE;
	a->max_ah = BZC_MAX_AH;
	a->max_mw = BZC_MAX_MW;	/* shares the key table with the MRs */
	a->max_pkeys = BZC_PKEY_TBL_LEN;
	a->max_mcast_grp = BZC_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = BZC_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = BZC_MAX_MCAST_ATTACH;
	a->local_ca_ack_delay = 15;
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

static int bzc_alloc_ucontext(struct ib_ucontext *ibuc,
			      struct ib_udata *udata)
{
	struct bzc_alloc_ucontext_resp resp = {
		.comp_mask = BZC_ALLOC_UCTX_RESP_CAPS,
		.caps = BZC_CAP_MMAP_ENTRIES | BZC_CAP_BULK |
			BZC_CAP_QP_DOORBELL,
	};
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

	return ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
}

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
	/* A process's PD caches pinned ranges of its memory. */
	return udata ? bzc_mrc_create(to_bpd(ibpd)) : 0;
}

static int bzc_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	bzc_mrc_destroy(to_bpd(ibpd));
	return 0;
}

/* Called once the device is unregistered and every user object is gone. */
static void bzc_dealloc_driver(struct ib_device *ibdev)
{
	struct bzc_dev *bdev = to_bdev(ibdev);

	WARN_ON(!xa_empty(&bdev->mr_xa) || !xa_empty(&bdev->qp_xa) ||
		!xa_empty(&bdev->ah_xa));
	xa_destroy(&bdev->mr_xa);
	xa_destroy(&bdev->qp_xa);
	xa_destroy(&bdev->ah_xa);
	bzc_mcast_cleanup(bdev);
	bzc_stats_free(bdev);
	bzc_keys_free(bdev);
}

const struct ib_device_ops bzc_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = BZC_RDMA_DRIVER_ID,
	.uverbs_abi_ver = BZC_UVERBS_ABI_VERSION,

	.alloc_mw = bzc_alloc_mw,
	.alloc_pd = bzc_alloc_pd,
	.create_ah = bzc_create_ah,
	.create_cq = bzc_create_cq,
	.create_qp = bzc_create_qp,
	.create_srq = bzc_create_srq,
	.create_user_ah = bzc_create_ah,
	.alloc_ucontext = bzc_alloc_ucontext,
	.alloc_hw_port_stats = bzc_alloc_hw_port_stats,
	.attach_mcast = bzc_attach_mcast,
	.dealloc_driver = bzc_dealloc_driver,
	.dealloc_mw = bzc_dealloc_mw,
	.dealloc_pd = bzc_dealloc_pd,
	.dealloc_ucontext = bzc_dealloc_ucontext,
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
	.mmap = bzc_mmap,
	.mmap_free = bzc_mmap_free,
	.modify_qp = bzc_modify_qp,
	.modify_srq = bzc_modify_srq,
	.poll_cq = bzc_poll_cq,
	.post_recv = bzc_post_recv,
	.post_send = bzc_post_send,
	.query_ah = bzc_query_ah,
	.query_device = bzc_query_device,
	.query_pkey = bzc_query_pkey,
	.query_port = bzc_query_port,
	.query_qp = bzc_query_qp,
	.query_srq = bzc_query_srq,
	.reg_user_mr = bzc_reg_user_mr,
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
};
