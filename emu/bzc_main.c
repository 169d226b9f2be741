// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: module entry, `rdma link add/delete`, and the netdev that carries
 * each device's port.
 */
#include <linux/module.h>
#include <linux/if_vlan.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>
#include <rdma/rdma_netlink.h>

#include "bzc.h"

static void bzc_dispatch_port_event(struct bzc_dev *bdev,
				    enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &bdev->ibdev,
		.element.port_num = BZC_PORT,
		.event = type,
	};

	ib_dispatch_event(&ev);
}

/*
 * Serializes `rdma link add`: the check that a netdev carries no bzc device
 * yet and the registration of the new one. The core calls newlink without
 * RTNL (nldev_newlink() holds only its link_ops_rwsem, for reading, so adds
 * run in parallel), and ib_register_device() takes RTNL itself (the RoCE GID
 * rescan), so this lock is taken before RTNL and never by the netdev
 * notifier, which runs under RTNL.
 */
static DEFINE_MUTEX(bzc_link_mutex);

/*
 * Report a port state change exactly once. RTNL orders this against the
 * netdev events that change the state.
 */
static void bzc_update_port_state(struct bzc_dev *bdev)
{
	enum ib_port_state state;

	ASSERT_RTNL();
	state = bzc_port_state(bdev);
	if (state == bdev->port_state)
		return;
	bdev->port_state = state;
	bzc_dispatch_port_event(bdev, state == IB_PORT_ACTIVE ?
				IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR);
	dev_info(&bdev->ibdev.dev, "port %u %s on %s\n", BZC_PORT,
		 state == IB_PORT_ACTIVE ? "active" : "down",
		 netdev_name(bdev->ndev));
}

static int bzc_dev_add(const char *ibdev_name, struct net_device *ndev)
{
	struct bzc_dev *bdev;
	int err;

	bdev = ib_alloc_device(bzc_dev, ibdev);
	if (!bdev)
		return -ENOMEM;

	bdev->ndev = ndev;
	err = bzc_stats_init(bdev);
	if (err)
		goto err_dealloc;
	/* The limits first: they size the key table. */
	bzc_init_device_attr(bdev);
	err = bzc_keys_init(bdev);
	if (err)
		goto err_dealloc;
	err = bzc_net_init(bdev);
	if (err)
		goto err_dealloc;
	xa_init_flags(&bdev->mr_xa, XA_FLAGS_ALLOC1);
	xa_init_flags(&bdev->qp_xa, XA_FLAGS_ALLOC);
	xa_init_flags(&bdev->ah_xa, XA_FLAGS_ALLOC1);
	xa_init_flags(&bdev->srq_xa, XA_FLAGS_ALLOC1);
	bzc_mcast_init(bdev);
	ib_set_device_ops(&bdev->ibdev, &bzc_dev_ops);

	bdev->ibdev.node_type = RDMA_NODE_IB_CA;
	bdev->ibdev.phys_port_cnt = 1;
	bdev->ibdev.num_comp_vectors = 1;
	bdev->ibdev.local_dma_lkey = 0;
	/* The SQ and RQ doorbells are the (otherwise unused) post commands. */
	bdev->ibdev.uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				       BIT_ULL(IB_USER_VERBS_CMD_POST_RECV);
	/* Bulk channels and cached MRs: driver-namespace uverbs objects. */
	bdev->ibdev.driver_def = bzc_uapi_defs;
	addrconf_addr_eui48((unsigned char *)&bdev->ibdev.node_guid,
			    ndev->dev_addr);
	strscpy(bdev->ibdev.node_desc, "bzc bulk zero-copy device",
		sizeof(bdev->ibdev.node_desc));

	err = ib_device_set_netdev(&bdev->ibdev, ndev, BZC_PORT);
	if (err)
		goto err_dealloc;

	/* Nothing reported yet: bzc_sync_port_state() reports the state. */
	bdev->port_state = IB_PORT_DOWN;

	/*
	 * No DMA device: the core stores kernel virtual addresses in SGEs.
	 * Once registered, the device may be unregistered (and freed) by
	 * `rdma link delete` or the netdev going away at any time: bdev must
	 * not be touched after this without a reference.
	 */
	err = ib_register_device(&bdev->ibdev, ibdev_name, NULL);
	if (err)
		goto err_dealloc;
	return 0;

err_dealloc:
	bzc_stats_free(bdev);	/* NULL if dealloc_driver freed them */
	bzc_keys_free(bdev);
	ib_dealloc_device(&bdev->ibdev);
	return err;
}

/*
 * Start taking the netdev's RoCE v2 packets for the device just registered
 * on @ndev, and report its port state. The netdev notifier finds a device
 * only once it is registered, so events before that were not seen; under
 * RTNL no event can slip between reading the state here and the notifier's
 * next update, and a netdev still registered here will tell the notifier
 * when it goes, which detaches. The reference keeps a device that is being
 * removed meanwhile alive until we are done.
 */
static void bzc_attach_and_sync(struct net_device *ndev)
{
	struct ib_device *ibdev;

	rtnl_lock();
	ibdev = ib_device_get_by_netdev(ndev, BZC_RDMA_DRIVER_ID);
	if (ibdev) {
		/* Checked before the device was added; a race costs the wire. */
		if (ndev->reg_state == NETREG_REGISTERED)
			bzc_net_attach(to_bdev(ibdev));
		bzc_update_port_state(to_bdev(ibdev));
		ib_device_put(ibdev);
	}
	rtnl_unlock();
}

static int bzc_newlink(const char *ibdev_name, struct net_device *ndev)
{
	struct ib_device *exists;
	int err;

	if (is_vlan_dev(ndev)) {
		pr_err(BZC_DRV_NAME ": %s is a VLAN; add the device on its real netdev\n",
		       netdev_name(ndev));
		return -EPERM;
	}

	mutex_lock(&bzc_link_mutex);
	exists = ib_device_get_by_netdev(ndev, BZC_RDMA_DRIVER_ID);
	if (exists) {
		pr_err(BZC_DRV_NAME ": %s already carries %s\n",
		       netdev_name(ndev), dev_name(&exists->dev));
		ib_device_put(exists);
		err = -EEXIST;
		goto out;
	}

	/* The device takes its packets off the netdev with an rx_handler. */
	rtnl_lock();
	err = bzc_net_take_over(ndev);
	rtnl_unlock();
	if (err) {
		pr_err(BZC_DRV_NAME ": %s has a receive handler already (a bridge, bond or macvlan port?)\n",
		       netdev_name(ndev));
		goto out;
	}

	err = bzc_dev_add(ibdev_name, ndev);
	if (!err)
		bzc_attach_and_sync(ndev);
out:
	mutex_unlock(&bzc_link_mutex);
	return err;
}

static struct rdma_link_ops bzc_link_ops = {
	.type = BZC_DRV_NAME,
	.newlink = bzc_newlink,
};

static int bzc_netdev_event(struct notifier_block *nb, unsigned long event,
			    void *arg)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(arg);
	struct ib_device *ibdev;
	struct bzc_dev *bdev;

	ibdev = ib_device_get_by_netdev(ndev, BZC_RDMA_DRIVER_ID);
	if (!ibdev)
		return NOTIFY_DONE;
	bdev = to_bdev(ibdev);

	switch (event) {
	case NETDEV_UNREGISTER:
		/* The netdev goes away: so does the device (as with rxe). */
		bzc_net_detach(bdev);
		ib_unregister_device_queued(ibdev);
		break;
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		bzc_update_port_state(bdev);
		break;
	default:
		break;
	}

	ib_device_put(ibdev);
	return NOTIFY_DONE;
}

static struct notifier_block bzc_netdev_notifier = {
	.notifier_call = bzc_netdev_event,
};

static int __init bzc_init(void)
{
	int err;

	/* Bulk lanes and copy helpers: spread over the CPUs. */
	bzc_wq = alloc_workqueue("bzc", WQ_UNBOUND | WQ_HIGHPRI, 0);
	if (!bzc_wq)
		return -ENOMEM;
	/*
	 * QP workers and the receive worker: on the CPU that kicked them (a
	 * doorbell, a packet, a timer), not woken on another one, which in a
	 * guest may wait for its vCPU to be scheduled; CPU intensive, so a
	 * long pass never holds the others on that CPU back. Kernel
	 * consumers' WQEs run here, so writeback over NVMe-oF or NFS/RDMA
	 * that memory reclaim waits for does: WQ_MEM_RECLAIM, a rescuer for
	 * when no new worker can be made.
	 */
	bzc_cpu_wq = alloc_workqueue("bzc_cpu", WQ_HIGHPRI | WQ_CPU_INTENSIVE |
				     WQ_MEM_RECLAIM, 0);
	if (!bzc_cpu_wq) {
		err = -ENOMEM;
		goto err_wq;
	}

	err = bzc_dmabuf_init();
	if (err)
		goto err_cpu_wq;

	err = register_netdevice_notifier(&bzc_netdev_notifier);
	if (err)
		goto err_dmabuf;

	rdma_link_register(&bzc_link_ops);
	return 0;

err_dmabuf:
	bzc_dmabuf_exit();
err_cpu_wq:
	destroy_workqueue(bzc_cpu_wq);
err_wq:
	destroy_workqueue(bzc_wq);
	return err;
}

static void __exit bzc_exit(void)
{
	rdma_link_unregister(&bzc_link_ops);
	ib_unregister_driver(BZC_RDMA_DRIVER_ID);
	unregister_netdevice_notifier(&bzc_netdev_notifier);
	bzc_dmabuf_exit();
	destroy_workqueue(bzc_cpu_wq);
	destroy_workqueue(bzc_wq);
}

module_init(bzc_init);
module_exit(bzc_exit);

MODULE_AUTHOR("The bzc developers");
MODULE_DESCRIPTION("bzc: software bulk zero-copy RDMA device");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_ALIAS_RDMA_LINK(BZC_DRV_NAME);
