/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * Layout class 44: rdma-core 44 (libibverbs 1.14.44.x, Debian 12).
 *
 * Included by ibverbs_provider.h when CMakeLists.txt found this release.
 * struct ibv_qp_ex has no wr_flush yet, so struct verbs_qp's comp_mask (which
 * ibv_qp_to_qp_ex() reads) and xrcd sit 8 bytes earlier than in class 45.
 */
#ifndef BZC_IBVERBS_PROVIDER_H
#error "include ibverbs_provider.h, not this file"
#endif

/* The installed <infiniband/verbs.h> must be of this class. */
BZC_PABI_ASSERT(offsetof(struct ibv_qp_ex, wr_atomic_write) + sizeof(void *) ==
		sizeof(struct ibv_qp_ex));

#if defined(__x86_64__) && defined(__LP64__)
BZC_PABI_ASSERT(sizeof(struct ibv_qp_ex) == 352);
BZC_PABI_ASSERT(offsetof(struct verbs_qp, comp_mask) == 352);
BZC_PABI_ASSERT(offsetof(struct verbs_qp, xrcd) == 360);
BZC_PABI_ASSERT(sizeof(struct verbs_qp) == 368);
#endif
