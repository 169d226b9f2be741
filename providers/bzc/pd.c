// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * bzc: protection domains and parent domains.
 *
 * A parent domain (ibv_alloc_parent_domain) is a PD as far as the kernel
 * is concerned: it carries its protection domain's handle, so QPs, SRQs,
 * MRs and AHs created on it belong to that PD. What it adds is the
 * application's pd_context and allocators. bzc's queues are rings the
 * kernel allocates and maps (ring.c), so the provider has no buffers of
 * its own to allocate and never calls them (nor keeps pd_context, which
 * only they would be given); the API allows that. A CQ may
 * name a parent domain (IBV_CQ_INIT_ATTR_MASK_PD) for the same reason,
 * and gets the same ring.
 *
 * A thread domain (ibv_alloc_td) exists only here, in the provider: a
 * parent domain that names one makes the QPs and CQs created on it
 * single-threaded, so posting and polling take no provider lock. The
 * kernel side needs no change: bzc has no doorbell pages to hand out per
 * thread, the one resource hardware providers tie to a thread domain.
 */

#include <errno.h>
#include <stdlib.h>

#include "bzc.h"

struct ibv_pd *bzc_alloc_pd(struct ibv_context *context)
{
	struct ibv_alloc_pd cmd = {};
	struct ib_uverbs_alloc_pd_resp resp = {};
	struct bzc_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;

	ret = ibv_cmd_alloc_pd(context, &pd->ibpd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(pd);
		/* The helper returns the errno; make sure the caller sees it. */
		errno = ret;
		return NULL;
	}
	atomic_init(&pd->parents, 0);
	return &pd->ibpd;
}

/*
 * ibv_import_pd(): the PD @pd_handle of @context's ucontext, made by
 * another context on the same command fd. Nothing is asked of the
 * kernel: a wrong handle fails at the first use (EINVAL), as a
 * destroyed PD would.
 */
struct ibv_pd *bzc_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	struct bzc_pd *pd;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	pd->ibpd.context = context;
	pd->ibpd.handle = pd_handle;
	atomic_init(&pd->parents, 0);
	return &pd->ibpd;
}

/* Only this process's view goes; the PD stays with its owner. */
void bzc_unimport_pd(struct ibv_pd *ibpd)
{
	free(to_bpd(ibpd));
}

/* A thread domain; no comp_mask bit is defined, any is EINVAL. */
struct ibv_td *bzc_alloc_td(struct ibv_context *context,
			    struct ibv_td_init_attr *attr)
{
	struct bzc_td *td;

	if (attr->comp_mask) {
		bzc_err(context, "unknown comp_mask bits %#x\n",
			attr->comp_mask);
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td)
		return NULL;
	td->ibtd.context = context;
	atomic_init(&td->parents, 0);
	return &td->ibtd;
}

/* EBUSY while a parent domain names the thread domain. */
int bzc_dealloc_td(struct ibv_td *ibtd)
{
	struct bzc_td *td = to_btd(ibtd);

	if (atomic_load(&td->parents))
		return EBUSY;
	free(td);
	return 0;
}

/* Queues created on @ibpd skip the provider's locks. */
bool bzc_pd_single_threaded(struct ibv_pd *ibpd)
{
	return to_bpd(ibpd)->td;
}

/*
 * A parent domain over attr->pd, a PD (not a parent domain) of @context,
 * with attr->td, a thread domain of @context, if given. EINVAL for unknown
 * comp_mask bits, a missing or foreign PD or a foreign thread domain.
 */
struct ibv_pd *bzc_alloc_parent_domain(struct ibv_context *context,
				       struct ibv_parent_domain_init_attr *attr)
{
	struct bzc_pd *parent, *pd;

	if (attr->comp_mask & ~(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)) {
		bzc_err(context, "unknown comp_mask bits %#x\n",
			attr->comp_mask &
				~(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				  IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT));
		errno = EINVAL;
		return NULL;
	}
	if (!attr->pd || attr->pd->context != context ||
	    (attr->td && attr->td->context != context)) {
		bzc_err(context, "%s\n",
			attr->pd && attr->pd->context == context ?
				"thread domain of another context" :
				"no PD of this context");
		errno = EINVAL;
		return NULL;
	}
	pd = to_bpd(attr->pd);
	if (pd->protection) {		/* a parent domain of a parent domain */
		bzc_err(context, "a parent domain cannot be nested\n");
		errno = EINVAL;
		return NULL;
	}

	parent = calloc(1, sizeof(*parent));
	if (!parent)
		return NULL;
	parent->ibpd.context = context;
	parent->ibpd.handle = pd->ibpd.handle;
	parent->protection = pd;
	/* PD and thread domain stay until their parent domains are gone. */
	atomic_fetch_add(&pd->parents, 1);
	if (attr->td) {
		parent->td = to_btd(attr->td);
		atomic_fetch_add(&parent->td->parents, 1);
	}
	return &parent->ibpd;
}

/*
 * A parent domain is only freed. A PD is released in the kernel, unless
 * parent domains still use it: EBUSY, as when QPs or MRs still do.
 */
int bzc_dealloc_pd(struct ibv_pd *ibpd)
{
	struct bzc_pd *pd = to_bpd(ibpd);
	int ret;

	if (pd->protection) {
		atomic_fetch_sub(&pd->protection->parents, 1);
		if (pd->td)
			atomic_fetch_sub(&pd->td->parents, 1);
		free(pd);
		return 0;
	}
	if (atomic_load(&pd->parents))
		return EBUSY;

	ret = ibv_cmd_dealloc_pd(ibpd);
	if (ret)
		return ret;
	free(pd);
	return 0;
}
