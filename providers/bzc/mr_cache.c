// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The MR cache (bzcdv.h): registrations by address served from a PD's
 * kernel cache of pinned ranges, and that cache's counters.  The kernel
 * keeps the pages pinned after a release and drops them when the process
 * unmaps the memory, so a registration here costs a lookup on a hit.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/bzc_user_ioctl_cmds.h>
#include <rdma/bzc_user_ioctl_verbs.h>

#include "bzc.h"

#define BZC_CACHED_ACCESS_KNOWN                                                \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

_Static_assert((int)BZCDV_MR_CACHED_HIT == BZC_CACHED_MR_HIT,
	       "BZCDV_MR_CACHED_HIT differs from BZC_CACHED_MR_HIT");
/* ibv_access_flags are passed to the kernel as ib_uverbs_access_flags. */
_Static_assert((int)IBV_ACCESS_LOCAL_WRITE == IB_UVERBS_ACCESS_LOCAL_WRITE &&
		       (int)IBV_ACCESS_REMOTE_WRITE ==
			       IB_UVERBS_ACCESS_REMOTE_WRITE &&
		       (int)IBV_ACCESS_REMOTE_READ ==
			       IB_UVERBS_ACCESS_REMOTE_READ &&
		       (int)IBV_ACCESS_REMOTE_ATOMIC ==
			       IB_UVERBS_ACCESS_REMOTE_ATOMIC,
	       "ibv and uverbs access flags differ");

static struct bzc_mr_cached *to_bmr_cached(struct bzcdv_mr_cached *mr)
{
	return container_of(mr, struct bzc_mr_cached, dv);
}

BZC_EXPORT struct bzcdv_mr_cached *
bzcdv_reg_mr_cached(struct ibv_pd *pd, void *addr, size_t length,
		    unsigned int access)
{
	struct bzc_cached_mr_reg_resp resp = {};
	struct bzc_cached_mr_reg_cmd rcmd = {};
	struct ib_uverbs_attr *handle;
	struct bzc_mr_cached *mr;
	struct bzc_cmd cmd;
	int ret;

	ret = pd ? bzc_check_bulk(pd->context) : EINVAL;
	if (!ret && (!length || (access & ~(unsigned int)BZC_CACHED_ACCESS_KNOWN) ||
		     (uintptr_t)addr + length < (uintptr_t)addr))
		ret = EINVAL;
	if (ret) {
		errno = ret;
		return NULL;
	}

	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}

	rcmd.comp_mask = 0;
	rcmd.addr = (uintptr_t)addr;
	rcmd.length = length;
	rcmd.access = access;
	bzc_cmd_init(&cmd, BZC_OBJECT_CACHED_MR, BZC_METHOD_CACHED_MR_REG);
	handle = bzc_cmd_add_idr_new(&cmd, BZC_ATTR_CACHED_MR_REG_HANDLE);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_CACHED_MR_REG_PD_HANDLE, pd->handle);
	bzc_cmd_add_ptr_in(&cmd, BZC_ATTR_CACHED_MR_REG_CMD, &rcmd,
			   sizeof(rcmd));
	bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_CACHED_MR_REG_RESP, &resp,
			    sizeof(resp));
	ret = bzc_cmd_exec(pd->context, &cmd);
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}

	mr->handle = (uint32_t)handle->data;
	mr->context = pd->context;
	mr->dv.pd = pd;
	mr->dv.addr = addr;
	mr->dv.length = length;
	mr->dv.lkey = resp.lkey;
	mr->dv.rkey = resp.rkey;
	mr->dv.flags = resp.flags & BZC_CACHED_MR_HIT;
	return &mr->dv;
}

BZC_EXPORT int bzcdv_release_mr_cached(struct bzcdv_mr_cached *dv)
{
	struct bzc_mr_cached *mr = to_bmr_cached(dv);
	struct bzc_cmd cmd;
	int ret;

	bzc_cmd_init(&cmd, BZC_OBJECT_CACHED_MR, BZC_METHOD_CACHED_MR_RELEASE);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_CACHED_MR_RELEASE_HANDLE, mr->handle);
	ret = bzc_cmd_exec(mr->context, &cmd);
	if (!bzc_destroyed(ret))
		return ret;
	free(mr);
	return 0;
}

BZC_EXPORT int bzcdv_query_mr_cache(struct ibv_pd *pd,
				    struct bzcdv_mr_cache_stats *stats)
{
	struct bzc_mr_cache_stats kstats = {};
	struct bzc_cmd cmd;
	int ret;

	ret = pd ? bzc_check_bulk(pd->context) : EINVAL;
	if (ret)
		return ret;
	if (!stats)
		return EINVAL;

	bzc_cmd_init(&cmd, BZC_OBJECT_DEVICE, BZC_METHOD_QUERY_MR_CACHE);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_QUERY_MR_CACHE_PD_HANDLE, pd->handle);
	bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_QUERY_MR_CACHE_RESP, &kstats,
			    sizeof(kstats));
	ret = bzc_cmd_exec(pd->context, &cmd);
	if (ret)
		return ret;

	stats->hits = kstats.hits;
	stats->misses = kstats.misses;
	stats->evictions = kstats.evictions;
	stats->invalidations = kstats.invalidations;
	stats->pinned_bytes = kstats.pinned_bytes;
	stats->entries = kstats.entries;
	/* No optional fields exist yet: none was filled in. */
	stats->comp_mask &= BZCDV_MR_CACHE_STATS_MASK_ALL;
	return 0;
}
