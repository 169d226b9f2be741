// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: address handles. A UD send WQE names its AH by index; the index is
 * checked against the QP's PD on every use, so a process cannot reach
 * another PD's (or process's) AH through its ring.
 */
#include <rdma/ib_cache.h>

#include "bzc.h"

#define BZC_MAX_AH_INDEX (SZ_64K - 1)

int bzc_av_from_attr(struct bzc_av *av, const struct rdma_ah_attr *attr)
{
	const struct ib_global_route *grh;

	/* RoCE: every address carries a GRH naming the destination GID. */
	if (!(rdma_ah_get_ah_flags(attr) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(attr);
	if (grh->sgid_index >= BZC_GID_TBL_LEN)
		return -EINVAL;

	av->dgid = grh->dgid;
	av->flow_label = grh->flow_label;
	av->sgid_index = grh->sgid_index;
	av->hop_limit = grh->hop_limit;
	av->traffic_class = grh->traffic_class;
	av->sl = rdma_ah_get_sl(attr);
	if (attr->type == RDMA_AH_ATTR_TYPE_ROCE)
		memcpy(av->dmac, attr->roce.dmac, ETH_ALEN);
	return 0;
}

void bzc_av_to_attr(const struct bzc_av *av, struct rdma_ah_attr *attr)
{
	union ib_gid dgid = av->dgid;	/* rdma_ah_set_grh() takes non-const */

	attr->type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_grh(attr, &dgid, av->flow_label, av->sgid_index,
			av->hop_limit, av->traffic_class);
	rdma_ah_set_sl(attr, av->sl);
	rdma_ah_set_port_num(attr, BZC_PORT);
	memcpy(attr->roce.dmac, av->dmac, ETH_ALEN);
}

int bzc_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		  struct ib_udata *udata)
{
	struct bzc_dev *bdev = to_bdev(ibah->device);
	struct bzc_ah *ah = to_bah(ibah);
	struct bzc_create_ah_resp resp = {};
	int err;

	err = bzc_av_from_attr(&ah->av, init_attr->ah_attr);
	if (err)
		return err;
	err = bzc_obj_get(bdev, &bdev->num_ah, bdev->attr.max_ah, "AH");
	if (err)
		return err;

	err = xa_alloc_cyclic(&bdev->ah_xa, &ah->index, ah,
			      XA_LIMIT(1, BZC_MAX_AH_INDEX), &bdev->ah_next,
			      GFP_ATOMIC);
	if (err < 0) {
		err = err == -EBUSY ? -ENOMEM : err;
		goto err_count;
	}

	if (udata) {
		resp.ah_index = ah->index;
		err = ib_copy_to_udata(udata, &resp,
				       min(udata->outlen, sizeof(resp)));
		if (err) {
			xa_erase(&bdev->ah_xa, ah->index);
			goto err_count;
		}
	}
	return 0;

err_count:
	bzc_obj_put(&bdev->num_ah);
	return err;
}

int bzc_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct bzc_ah *ah = to_bah(ibah);

	xa_erase(&to_bdev(ibah->device)->ah_xa, ah->index);
	bzc_obj_put(&to_bdev(ibah->device)->num_ah);
	return 0;
}

int bzc_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	bzc_av_to_attr(&to_bah(ibah)->av, attr);
	return 0;
}

/* Copy the address of AH `index` if it belongs to `pd`. */
bool bzc_ah_get_av(struct bzc_dev *bdev, u32 index, struct ib_pd *pd,
		   struct bzc_av *av)
{
	struct bzc_ah *ah;
	bool found = false;

	xa_lock(&bdev->ah_xa);
	ah = xa_load(&bdev->ah_xa, index);
	if (ah && ah->ibah.pd == pd) {
		*av = ah->av;
		found = true;
	}
	xa_unlock(&bdev->ah_xa);
	return found;
}
