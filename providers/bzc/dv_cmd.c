// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Method calls in the bzc driver namespace (kernel-headers/rdma/
 * bzc_user_ioctl_cmds.h) on the uverbs ioctl interface, built from the
 * public <rdma/rdma_user_ioctl_cmds.h> structs: a header naming object and
 * method, then one struct ib_uverbs_attr per attribute.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <rdma/bzc_user_ioctl_verbs.h>

#include "bzc.h"

void bzc_cmd_init(struct bzc_cmd *cmd, uint16_t object_id, uint16_t method_id)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->hdr.object_id = object_id;
	cmd->hdr.method_id = method_id;
	/* The core refuses a driver-namespace call carrying another id. */
	cmd->hdr.driver_id = BZC_RDMA_DRIVER_ID;
}

static struct ib_uverbs_attr *bzc_cmd_next(struct bzc_cmd *cmd,
					   uint16_t attr_id)
{
	struct ib_uverbs_attr *attr;

	/* The callers are fixed sequences; running out is a bug here. */
	if (cmd->hdr.num_attrs >= BZC_CMD_MAX_ATTRS)
		abort();
	attr = &cmd->attrs[cmd->hdr.num_attrs++];
	attr->attr_id = attr_id;
	/* Every attribute this library sends is one the method needs. */
	attr->flags = UVERBS_ATTR_F_MANDATORY;
	return attr;
}

void bzc_cmd_add_idr(struct bzc_cmd *cmd, uint16_t attr_id, uint32_t handle)
{
	/* IDR attributes: len 0, the handle in data. */
	bzc_cmd_next(cmd, attr_id)->data = handle;
}

struct ib_uverbs_attr *bzc_cmd_add_idr_new(struct bzc_cmd *cmd,
					   uint16_t attr_id)
{
	return bzc_cmd_next(cmd, attr_id);
}

void bzc_cmd_add_ptr_in(struct bzc_cmd *cmd, uint16_t attr_id,
			const void *ptr, size_t len)
{
	struct ib_uverbs_attr *attr = bzc_cmd_next(cmd, attr_id);

	attr->len = (uint16_t)len;
	/* Up to 8 bytes travel inline in data, longer ones by pointer. */
	if (len <= sizeof(attr->data))
		memcpy(&attr->data, ptr, len);
	else
		attr->data = (uintptr_t)ptr;
}

void bzc_cmd_add_ptr_out(struct bzc_cmd *cmd, uint16_t attr_id, void *ptr,
			 size_t len)
{
	struct ib_uverbs_attr *attr = bzc_cmd_next(cmd, attr_id);

	attr->len = (uint16_t)len;
	attr->data = (uintptr_t)ptr;
}

int bzc_cmd_exec(struct ibv_context *context, struct bzc_cmd *cmd)
{
	cmd->hdr.length = (uint16_t)(sizeof(cmd->hdr) +
				     cmd->hdr.num_attrs *
					     sizeof(cmd->attrs[0]));
	if (ioctl(context->cmd_fd, RDMA_VERBS_IOCTL, &cmd->hdr))
		return errno;
	return 0;
}

int bzc_check_bulk(struct ibv_context *context)
{
	if (!context || !bzc_is_bzc_device(context->device))
		return EOPNOTSUPP;
	if (!(to_bctx(context)->caps & BZC_CAP_BULK))
		return EOPNOTSUPP;
	return 0;
}
