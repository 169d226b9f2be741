// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * UD multicast: the groups of a device by MGID and the QPs attached to
 * each. A UD send to a multicast GID (DQPN 0xffffff) is delivered to every
 * QP attached to the group on the sending device (bzc_local.c) and goes
 * out once on the netdev (bzc_roce_tx.c); a multicast datagram from the
 * wire goes to every QP attached to its group (bzc_roce_rx.c). A group's
 * first attachment joins it on the netdev, its last detachment leaves it
 * (bzc_net.c), so the NIC's filter lets its frames in and IGMP/MLD tell
 * the switches. Groups hold no references on their QPs: a QP leaves every
 * group before its destruction waits for the senders that still hold it.
 */

#include <linux/jhash.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>
#include <linux/workqueue.h>
#include <rdma/ib_addr.h>

#include "bzc.h"

struct bzc_mcast_grp {
	struct hlist_node node;
	union ib_gid mgid;
	u32 nr;
	struct bzc_qp *qp[BZC_MAX_MCAST_QP_ATTACH];
	struct bzc_dev *bdev;
	struct work_struct leave;	/* bzc_mcast_leave_work() */
};

static u32 bzc_mgid_hash(const union ib_gid *mgid)
{
	return jhash(mgid->raw, sizeof(mgid->raw), 0);
}

void bzc_mcast_init(struct bzc_dev *bdev)
{
	mutex_init(&bdev->mc_mutex);
	spin_lock_init(&bdev->mc_lock);
	hash_init(bdev->mc_hash);
	atomic_set(&bdev->mc_leaving, 0);
}

/**
 * bzc_mcast_wait_leaves() - wait for the netdev leaves QP destruction queued
 * @bdev: the device, with every QP gone (no new leave can be queued)
 *
 * Before the device lets its netdev go. Sleeps.
 */
void bzc_mcast_wait_leaves(struct bzc_dev *bdev)
{
	wait_var_event(&bdev->mc_leaving, !atomic_read(&bdev->mc_leaving));
}

/*
 * Every QP is gone by now; free whatever a leak might have left (the
 * netdev, and its memberships, may be gone too).
 */
void bzc_mcast_cleanup(struct bzc_dev *bdev)
{
	struct bzc_mcast_grp *grp;
	struct hlist_node *tmp;
	int bkt;

	hash_for_each_safe(bdev->mc_hash, bkt, tmp, grp, node) {
		hash_del(&grp->node);
		kfree(grp);
	}
}

/* The group of `mgid`, or NULL. Under mc_lock or mc_mutex. */
static struct bzc_mcast_grp *bzc_mcast_find(struct bzc_dev *bdev,
					    const union ib_gid *mgid)
{
	struct bzc_mcast_grp *grp;

	hash_for_each_possible(bdev->mc_hash, grp, node, bzc_mgid_hash(mgid))
		if (!memcmp(grp->mgid.raw, mgid->raw, sizeof(mgid->raw)))
			return grp;
	return NULL;
}

static int bzc_mcast_index(const struct bzc_mcast_grp *grp,
			   const struct bzc_qp *qp)
{
	u32 i;

	for (i = 0; i < grp->nr; i++)
		if (grp->qp[i] == qp)
			return i;
	return -1;
}

/*
 * Take member `i` out of its group, mc_mutex held. Returns the group when
 * that was its last member: it is out of the table, and the caller leaves
 * it on the netdev and frees it once mc_mutex is dropped.
 */
static struct bzc_mcast_grp *bzc_mcast_remove(struct bzc_dev *bdev,
					      struct bzc_mcast_grp *grp, u32 i)
{
	bool last;

	spin_lock(&bdev->mc_lock);
	grp->qp[i]->mc_groups--;
	grp->qp[i] = grp->qp[--grp->nr];
	bdev->mc_attached--;
	last = !grp->nr;
	if (last) {
		hash_del(&grp->node);
		WRITE_ONCE(bdev->mc_groups, bdev->mc_groups - 1);
	}
	spin_unlock(&bdev->mc_lock);
	return last ? grp : NULL;
}

static void bzc_mcast_leave_work(struct work_struct *work)
{
	struct bzc_mcast_grp *grp = container_of(work, struct bzc_mcast_grp,
						 leave);
	struct bzc_dev *bdev = grp->bdev;

	bzc_net_mc_leave(bdev, &grp->mgid);
	kfree(grp);
	if (atomic_dec_and_test(&bdev->mc_leaving))
		wake_up_var(&bdev->mc_leaving);
}

static int bzc_mcast_check(struct ib_qp *ibqp, union ib_gid *gid)
{
	if (ibqp->qp_type != IB_QPT_UD ||
	    !rdma_is_multicast_addr((struct in6_addr *)gid->raw))
		return -EINVAL;
	return 0;
}

/*
 * Attaching twice is allowed; the QP still gets one copy of each message.
 * A group the netdev cannot join (no IPv4 or IPv6 on it) fails with the
 * join's errno.
 *
 * The netdev join and leave take RTNL, which the RDMA CM holds while it
 * takes its own locks, and those are held around ib_destroy_qp(): so RTNL
 * is never taken under mc_mutex. The join comes first, for every
 * attachment; a group keeps the one its creation made, and an attachment
 * that made no group leaves again.
 */
int bzc_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct bzc_dev *bdev = to_bdev(ibqp->device);
	struct bzc_qp *qp = to_bqp(ibqp);
	struct bzc_mcast_grp *grp, *new;
	int err, join_err;
	bool leave;

	err = bzc_mcast_check(ibqp, gid);
	if (err)
		return err;
	new = kzalloc(sizeof(*new), GFP_KERNEL);
	if (!new)
		return -ENOMEM;
	join_err = bzc_net_mc_join(bdev, gid);
	leave = !join_err;	/* until a new group keeps the join */

	mutex_lock(&bdev->mc_mutex);
	grp = bzc_mcast_find(bdev, gid);
	if (grp && bzc_mcast_index(grp, qp) >= 0)
		goto unlock;		/* already a member */
	err = -ENOMEM;
	if (bdev->mc_attached >= bdev->attr.max_total_mcast_qp_attach)
		goto unlock;
	if (!grp) {
		if (bdev->mc_groups >= bdev->attr.max_mcast_grp)
			goto unlock;
		err = join_err;
		if (err)
			goto unlock;
		grp = new;
		new = NULL;
		grp->mgid = *gid;
		grp->bdev = bdev;
		INIT_WORK(&grp->leave, bzc_mcast_leave_work);
		spin_lock(&bdev->mc_lock);
		hash_add(bdev->mc_hash, &grp->node, bzc_mgid_hash(gid));
		WRITE_ONCE(bdev->mc_groups, bdev->mc_groups + 1);
		spin_unlock(&bdev->mc_lock);
		leave = false;
	} else if (grp->nr >= bdev->attr.max_mcast_qp_attach) {
		goto unlock;
	}
	spin_lock(&bdev->mc_lock);
	grp->qp[grp->nr++] = qp;
	qp->mc_groups++;
	bdev->mc_attached++;
	spin_unlock(&bdev->mc_lock);
	err = 0;
unlock:
	mutex_unlock(&bdev->mc_mutex);
	if (leave)
		bzc_net_mc_leave(bdev, gid);
	kfree(new);
	return err;
}

int bzc_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct bzc_dev *bdev = to_bdev(ibqp->device);
	struct bzc_mcast_grp *grp, *gone = NULL;
	int err, i = -1;

	err = bzc_mcast_check(ibqp, gid);
	if (err)
		return err;
	mutex_lock(&bdev->mc_mutex);
	grp = bzc_mcast_find(bdev, gid);
	if (grp)
		i = bzc_mcast_index(grp, to_bqp(ibqp));
	if (i >= 0)
		gone = bzc_mcast_remove(bdev, grp, i);
	mutex_unlock(&bdev->mc_mutex);
	if (gone) {
		bzc_net_mc_leave(bdev, &gone->mgid);
		kfree(gone);
	}
	return i >= 0 ? 0 : -EINVAL;
}

/*
 * A QP being destroyed leaves every group it is still attached to. The
 * RDMA CM may hold its locks around this (rdma_destroy_qp()), so the
 * netdev leaves of the groups it empties, which take RTNL, run in a
 * worker.
 */
void bzc_mcast_detach_all(struct bzc_qp *qp)
{
	struct bzc_dev *bdev = to_bdev(qp->ibqp.device);
	struct bzc_mcast_grp *grp, *gone;
	struct hlist_node *tmp;
	int bkt, i;

	mutex_lock(&bdev->mc_mutex);
	if (qp->mc_groups) {
		hash_for_each_safe(bdev->mc_hash, bkt, tmp, grp, node) {
			i = bzc_mcast_index(grp, qp);
			if (i < 0)
				continue;
			gone = bzc_mcast_remove(bdev, grp, i);
			if (gone) {
				atomic_inc(&bdev->mc_leaving);
				schedule_work(&gone->leave);
			}
		}
	}
	mutex_unlock(&bdev->mc_mutex);
}

/*
 * The QPs attached to `mgid` into `qps` (room for BZC_MAX_MCAST_QP_ATTACH),
 * each with a reference (bzc_qp_put()); returns how many. Never sleeps.
 */
int bzc_mcast_members(struct bzc_dev *bdev, const union ib_gid *mgid,
		      struct bzc_qp **qps)
{
	struct bzc_mcast_grp *grp;
	int n = 0;
	u32 i;

	spin_lock(&bdev->mc_lock);
	grp = bzc_mcast_find(bdev, mgid);
	for (i = 0; grp && i < grp->nr; i++)
		if (refcount_inc_not_zero(&grp->qp[i]->refcnt))
			qps[n++] = grp->qp[i];
	spin_unlock(&bdev->mc_lock);
	return n;
}
