// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: memory windows.
 *
 * Allocation and deallocation are kernel commands.  Binding is work on
 * the send queue for both types: a type 2 window is bound by an
 * IBV_WR_BIND_MW work request (wr.c); ibv_bind_mw() binds a type 1
 * window by posting the same kind of WQE, marked as coming from the verb,
 * and gives the window its new rkey at once, as the verbs API says (the
 * consumer restores the old one if the bind completes in error).
 */

#include <errno.h>
#include <stdlib.h>

#include "bzc.h"

struct ibv_mw *bzc_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_alloc_mw cmd = {};
	struct ib_uverbs_alloc_mw_resp resp = {};
	struct ibv_mw *mw;
	int ret;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;

	/* No driver data in either direction; the kernel checks the type. */
	ret = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	return mw;
}

int bzc_dealloc_mw(struct ibv_mw *mw)
{
	int ret;

	ret = ibv_cmd_dealloc_mw(mw);
	if (ret)
		return ret;

	free(mw);
	return 0;
}

/*
 * ibv_bind_mw() has checked the type, the MR's PD and that a missing MR
 * comes with an empty range.  Zero-based windows are not supported.
 */
int bzc_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw,
		struct ibv_mw_bind *mw_bind)
{
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	int ret;

	if (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) {
		bzc_err(ibqp->context, "zero-based windows are not supported\n");
		errno = EINVAL;
		return EINVAL;
	}
	ret = bzc_post_bind_type1(to_bqp(ibqp), mw_bind, rkey);
	if (ret) {
		errno = ret;
		return ret;
	}
	mw->rkey = rkey;
	return 0;
}
