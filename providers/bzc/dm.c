// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: device memory (ibv_alloc_dm).
 *
 * The kernel allocates the memory and says where to map it from the
 * uverbs fd (BZC_ATTR_ALLOC_DM_RESP_MMAP_OFFSET, a driver attribute of the
 * core's DM_ALLOC method), as hardware providers map on-NIC memory; the
 * copies to and from it are then plain memcpy().  They go in 4-byte
 * units, the access granule of on-NIC memory, so code written for bzc
 * keeps working on hardware.  A DM MR (ibv_reg_dm_mr) is the kernel's
 * business alone and always zero-based.  bzcdv_export_dm() makes a
 * dma-buf of it.
 *
 * ibv_import_dm(): a DM that another context on the same ucontext
 * (ibv_import_device()) allocated.  The kernel says its length and
 * mmap offset (BZC_METHOD_DM_QUERY) and the import maps the same memory,
 * so copies, DM MRs and exports work on it as on the original.
 * ibv_unimport_dm() unmaps it; the DM stays with its owner, who frees
 * it.  ibv_free_dm() on an imported DM frees the kernel object too.
 */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/bzc_user_ioctl_cmds.h>

#include "bzc.h"

/* Offsets and lengths of ibv_memcpy_to/from_dm() are multiples of this. */
#define BZC_DM_ACCESS_UNIT 4

struct bzc_dm {
	struct verbs_dm vdm;
	void *map;
	size_t map_len;
	uint64_t length;
};

static struct bzc_dm *to_bzc_dm(struct ibv_dm *ibdm)
{
	return container_of(ibdm, struct bzc_dm, vdm.dm);
}

static int bzc_dm_range_ok(struct bzc_dm *dm, uint64_t offset, size_t length)
{
	return !(offset % BZC_DM_ACCESS_UNIT) &&
	       !(length % BZC_DM_ACCESS_UNIT) &&
	       offset <= dm->length && length <= dm->length - offset;
}

static int bzc_memcpy_to_dm(struct ibv_dm *ibdm, uint64_t dm_offset,
			    const void *host_addr, size_t length)
{
	struct bzc_dm *dm = to_bzc_dm(ibdm);

	if (!bzc_dm_range_ok(dm, dm_offset, length))
		return EINVAL;
	memcpy((char *)dm->map + dm_offset, host_addr, length);
	return 0;
}

static int bzc_memcpy_from_dm(void *host_addr, struct ibv_dm *ibdm,
			      uint64_t dm_offset, size_t length)
{
	struct bzc_dm *dm = to_bzc_dm(ibdm);

	if (!bzc_dm_range_ok(dm, dm_offset, length))
		return EINVAL;
	memcpy(host_addr, (char *)dm->map + dm_offset, length);
	return 0;
}

/*
 * Maps the DM @handle of @context, @length bytes at the uverbs fd's
 * @mmap_offset, and fills in the verbs part; 0 or an errno value.
 */
static int bzc_dm_map(struct bzc_dm *dm, struct ibv_context *context,
		      uint32_t handle, uint64_t length, uint64_t mmap_offset)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	dm->vdm.handle = handle;
	dm->vdm.dm.context = context;
	dm->vdm.dm.handle = handle;
	/* Checked before rounding up, so the rounding cannot wrap. */
	if (!length || length > SIZE_MAX - page)
		return EINVAL;
	dm->length = length;
	dm->map_len = (length + page - 1) & ~(page - 1);
	dm->map = mmap(NULL, dm->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       context->cmd_fd, (off_t)mmap_offset);
	if (dm->map == MAP_FAILED)
		return errno;

	dm->vdm.dm.memcpy_to_dm = bzc_memcpy_to_dm;
	dm->vdm.dm.memcpy_from_dm = bzc_memcpy_from_dm;
	return 0;
}

struct ibv_dm *bzc_alloc_dm(struct ibv_context *context,
			    struct ibv_alloc_dm_attr *attr)
{
	struct ib_uverbs_attr *handle;
	uint64_t length = attr->length;
	uint32_t align = attr->log_align_req;
	uint64_t mmap_offset = 0;
	struct bzc_cmd cmd;
	struct bzc_dm *dm;
	int ret;

	if (!(to_bctx(context)->caps & BZC_CAP_DM)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* No comp_mask bit is defined; the kernel checks the rest. */
	if (attr->comp_mask || !attr->length) {
		errno = EINVAL;
		return NULL;
	}

	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return NULL;

	bzc_cmd_init(&cmd, UVERBS_OBJECT_DM, UVERBS_METHOD_DM_ALLOC);
	handle = bzc_cmd_add_idr_new(&cmd, UVERBS_ATTR_ALLOC_DM_HANDLE);
	bzc_cmd_add_ptr_in(&cmd, UVERBS_ATTR_ALLOC_DM_LENGTH, &length,
			   sizeof(length));
	bzc_cmd_add_ptr_in(&cmd, UVERBS_ATTR_ALLOC_DM_ALIGNMENT, &align,
			   sizeof(align));
	bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_ALLOC_DM_RESP_MMAP_OFFSET,
			    &mmap_offset, sizeof(mmap_offset));
	ret = bzc_cmd_exec(context, &cmd);
	if (ret)
		goto err_free;

	ret = bzc_dm_map(dm, context, (uint32_t)handle->data, attr->length,
			 mmap_offset);
	if (ret) {
		ibv_cmd_free_dm(&dm->vdm);
		goto err_free;
	}
	return &dm->vdm.dm;

err_free:
	free(dm);
	errno = ret;
	return NULL;
}

int bzc_free_dm(struct ibv_dm *ibdm)
{
	struct bzc_dm *dm = to_bzc_dm(ibdm);
	int ret;

	/* EBUSY while MRs of it exist: the DM stays usable. */
	ret = ibv_cmd_free_dm(&dm->vdm);
	if (ret)
		return ret;

	munmap(dm->map, dm->map_len);
	free(dm);
	return 0;
}

/*
 * ibv_import_dm(): the DM @dm_handle of @context's ucontext.  A handle
 * that names no object is ENOENT, one that names another kind of object
 * EINVAL: the kernel's lookup says which.
 */
struct ibv_dm *bzc_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	struct bzc_dm_query_resp resp = {};
	struct bzc_cmd cmd;
	struct bzc_dm *dm;
	int ret;

	if (!(to_bctx(context)->caps & BZC_CAP_DM_QUERY)) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return NULL;

	bzc_cmd_init(&cmd, UVERBS_OBJECT_DM, BZC_METHOD_DM_QUERY);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_DM_QUERY_HANDLE, dm_handle);
	bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_DM_QUERY_RESP, &resp, sizeof(resp));
	ret = bzc_cmd_exec(context, &cmd);
	if (!ret)
		ret = bzc_dm_map(dm, context, dm_handle, resp.length,
				 resp.mmap_offset);
	if (ret) {
		free(dm);
		errno = ret;
		return NULL;
	}
	return &dm->vdm.dm;
}

/* Only this context's view goes; the DM stays allocated for its owner. */
void bzc_unimport_dm(struct ibv_dm *ibdm)
{
	struct bzc_dm *dm = to_bzc_dm(ibdm);

	munmap(dm->map, dm->map_len);
	free(dm);
}

struct ibv_mr *bzc_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
			     uint64_t dm_offset, size_t length,
			     unsigned int access)
{
	struct bzc_dm *dm = to_bzc_dm(ibdm);
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

	ret = ibv_cmd_reg_dm_mr(pd, &dm->vdm, dm_offset, length, access, vmr,
				NULL);
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

BZC_EXPORT int bzcdv_export_dm(struct ibv_dm *ibdm,
			       struct bzcdv_export_dm_attr *attr)
{
	struct ibv_context *context = ibdm ? ibdm->context : NULL;
	struct bzc_cmd cmd;
	int32_t fd = -1;
	int ret;

	if (!context || !bzc_is_bzc_device(context->device) ||
	    !(to_bctx(context)->caps & BZC_CAP_DM_EXPORT_DMABUF))
		return EOPNOTSUPP;
	if (!attr || attr->comp_mask & ~(uint64_t)BZCDV_EXPORT_DM_ATTR_MASK_ALL)
		return EINVAL;

	bzc_cmd_init(&cmd, UVERBS_OBJECT_DM, BZC_METHOD_DM_EXPORT_DMABUF);
	bzc_cmd_add_idr(&cmd, BZC_ATTR_DM_EXPORT_DMABUF_HANDLE,
			to_bzc_dm(ibdm)->vdm.handle);
	bzc_cmd_add_ptr_out(&cmd, BZC_ATTR_DM_EXPORT_DMABUF_RESP_FD, &fd,
			    sizeof(fd));
	ret = bzc_cmd_exec(context, &cmd);
	if (ret)
		return ret;
	attr->fd = fd;
	return 0;
}
