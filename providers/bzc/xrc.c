// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: XRC domains.
 *
 * An XRC domain groups XRC SRQs and XRC TGT QPs; processes share one by
 * opening it through the same file (ibv_open_xrcd() with the file's fd),
 * which the kernel's uverbs core keeps track of, so the provider only
 * passes the commands on.  The XRC queues themselves are in srq.c (XRC
 * SRQs), qp.c (INI and TGT QPs, ibv_open_qp()) and wr.c (the remote SRQ
 * number of each send).
 */

#include <errno.h>
#include <stdlib.h>

#include "bzc.h"

/* Whether the kernel driver behind @context has XRC. */
bool bzc_has_xrc(struct ibv_context *context)
{
	return to_bctx(context)->caps & BZC_CAP_XRC;
}

struct ibv_xrcd *bzc_open_xrcd(struct ibv_context *context,
			       struct ibv_xrcd_init_attr *attr)
{
	struct ib_uverbs_open_xrcd_resp resp;
	struct ibv_open_xrcd cmd = {};
	struct bzc_xrcd *xrcd;
	int ret;

	if (!bzc_has_xrc(context)) {
		bzc_err(context, "this kernel has no XRC\n");
		errno = EOPNOTSUPP;
		return NULL;
	}
	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd)
		return NULL;
	ret = ibv_cmd_open_xrcd(context, &xrcd->vxrcd, sizeof(xrcd->vxrcd),
				attr, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(xrcd);
		errno = ret;
		return NULL;
	}
	return &xrcd->vxrcd.xrcd;
}

/* EBUSY while XRC SRQs or TGT QPs of this process use it. */
int bzc_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct bzc_xrcd *xrcd = to_bxrcd(ibxrcd);
	int ret;

	ret = ibv_cmd_close_xrcd(&xrcd->vxrcd);
	if (ret)
		return ret;
	free(xrcd);
	return 0;
}
