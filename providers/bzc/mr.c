// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: memory regions.
 *
 * Registration is entirely the kernel's business (it pins the pages, or
 * attaches the dma-buf, and hands out the keys); the provider passes the
 * standard commands through and keeps no state of its own beyond struct
 * verbs_mr.
 */

#include <errno.h>
#include <stdlib.h>

#include <rdma/ib_user_ioctl_cmds.h>

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
 * ibv_reg_dmabuf_mr(): the core's REG_DMABUF_MR method, issued here rather
 * than through ibv_cmd_reg_dmabuf_mr(), whose arguments changed within
 * the provider ABI (rdma-core 54).  ibv_reg_dmabuf_mr() sets context, pd,
 * addr and length of the MR.
 */
struct ibv_mr *bzc_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access)
{
	uint64_t len = length;
	uint32_t ufd = (uint32_t)fd, uaccess = (uint32_t)access;
	uint32_t lkey = 0, rkey = 0;
	struct ib_uverbs_attr *handle;
	struct verbs_mr *vmr;
	struct bzc_cmd cmd;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

	bzc_cmd_init(&cmd, UVERBS_OBJECT_MR, UVERBS_METHOD_REG_DMABUF_MR);
	handle = bzc_cmd_add_idr_new(&cmd, UVERBS_ATTR_REG_DMABUF_MR_HANDLE);
	bzc_cmd_add_idr(&cmd, UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, pd->handle);
	bzc_cmd_add_ptr_in(&cmd, UVERBS_ATTR_REG_DMABUF_MR_OFFSET, &offset,
			   sizeof(offset));
	bzc_cmd_add_ptr_in(&cmd, UVERBS_ATTR_REG_DMABUF_MR_LENGTH, &len,
			   sizeof(len));
	bzc_cmd_add_ptr_in(&cmd, UVERBS_ATTR_REG_DMABUF_MR_IOVA, &iova,
			   sizeof(iova));
	bzc_cmd_add_ptr_in(&cmd, UVERBS_ATTR_REG_DMABUF_MR_FD, &ufd,
			   sizeof(ufd));
	bzc_cmd_add_ptr_in(&cmd, UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS,
			   &uaccess, sizeof(uaccess));
	bzc_cmd_add_ptr_out(&cmd, UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, &lkey,
			    sizeof(lkey));
	bzc_cmd_add_ptr_out(&cmd, UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, &rkey,
			    sizeof(rkey));
	ret = bzc_cmd_exec(pd->context, &cmd);
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}

	vmr->ibv_mr.handle = (uint32_t)handle->data;
	vmr->ibv_mr.lkey = lkey;
	vmr->ibv_mr.rkey = rkey;
	/* ibv_dereg_mr() must not re-enable fork on the buffer's range. */
	vmr->mr_type = IBV_MR_TYPE_DMABUF_MR;
	vmr->access = access;
	return &vmr->ibv_mr;
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

/*
 * ibv_advise_mr(): prefetching ranges of ODP MRs is the kernel's work
 * (the core's ADVISE_MR method); its errno comes back as the return value.
 */
int bzc_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		  uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	return ibv_cmd_advise_mr(pd, advice, flags, sg_list, num_sge);
}
