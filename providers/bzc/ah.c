// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: address handles.
 *
 * The kernel keeps the address (RoCE v2: the GRH is required) and returns
 * an index for it in struct bzc_create_ah_resp; a UD send WQE names its
 * destination by that index, which the kernel checks against the QP's PD
 * when it takes the WQE.  The provider keeps nothing else.
 */

#include <errno.h>
#include <stdlib.h>

#include "bzc.h"

struct ibv_ah *bzc_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ubzc_create_ah_resp resp = {};
	struct bzc_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;

	ret = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv_resp,
				sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}

	ah->ah_index = resp.drv_payload.ah_index;
	return &ah->ibv_ah;
}

int bzc_destroy_ah(struct ibv_ah *ibah)
{
	int ret;

	ret = ibv_cmd_destroy_ah(ibah);
	if (ret)
		return ret;

	free(to_bah(ibah));
	return 0;
}
