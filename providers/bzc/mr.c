// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: memory regions.
 *
 * Registration is entirely the kernel's business (it pins the pages and
 * hands out the keys); the provider passes the standard commands through
 * and keeps no state of its own beyond struct verbs_mr.
 */

#include <errno.h>
#include <stdlib.h>

#include "bzc.h"

struct ibv_mr *bzc_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  uint64_t hca_va, int access)
{
	struct ibv_reg_mr cmd = {};
	struct ib_uverbs_reg_mr_resp resp = {};
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

	/* No driver data in either direction. */
	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}

	return &vmr->ibv_mr;
}

/*
 * ibv_import_mr(): the MR @mr_handle of @pd's ucontext, its keys and
 * range read back from the kernel (QUERY_MR); an unknown handle is the
 * kernel's error (ENOENT or EINVAL).
 */
struct ibv_mr *bzc_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	ret = ibv_cmd_query_mr(pd, vmr, mr_handle);
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

/* Only this process's view goes; the MR stays registered for its owner. */
void bzc_unimport_mr(struct ibv_mr *mr)
{
	free(container_of(mr, struct verbs_mr, ibv_mr));
}

/*
 * Returns 0 or an errno value (and sets errno): ibv_rereg_mr() turns any
 * failure of this op into IBV_REREG_MR_ERR_CMD (the old MR stays valid)
 * and updates mr->pd, addr and length itself on success.  It has already
 * refused unknown flags, and access without IBV_REREG_MR_CHANGE_ACCESS.
 */
int bzc_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		 void *addr, size_t length, int access)
{
	struct ibv_rereg_mr cmd = {};
	struct ib_uverbs_rereg_mr_resp resp = {};
	int ret;

	/* A new range is addressed by its virtual address, as ibv_reg_mr. */
	ret = ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr,
			       access, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		errno = ret;
		return ret;
	}

	/* ibv_dereg_mr() reads it to decide whether to re-enable fork. */
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		vmr->access = access;

	return 0;
}

int bzc_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;

	free(vmr);
	return 0;
}
