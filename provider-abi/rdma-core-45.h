/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * Layout class 45: rdma-core 45 to 56 (libibverbs 1.14.45.x to 1.14.56.x;
 * Debian 13 has 56, Ubuntu 24.04 50).
 *
 * Included by ibverbs_provider.h when CMakeLists.txt found one of these
 * releases.  Against class 44, for what bzc declares:
 *  - rdma-core 45 appended wr_flush to struct ibv_qp_ex, so struct
 *    verbs_qp's comp_mask (which ibv_qp_to_qp_ex() reads) and xrcd moved by
 *    one pointer;
 *  - rdma-core 53 added ibv_cmd_create_cq_ex2() and 54 gave
 *    ibv_cmd_reg_dmabuf_mr() a trailing struct ibv_command_buffer *; bzc
 *    calls neither, so neither is declared;
 *  - struct verbs_context_ops, verbs_device(_ops), verbs_match_ent,
 *    verbs_mr, verbs_cq and the command helpers bzc calls are unchanged.
 */
#ifndef BZC_IBVERBS_PROVIDER_H
#error "include ibverbs_provider.h, not this file"
#endif

/* The installed <infiniband/verbs.h> must be of this class. */
BZC_PABI_ASSERT(offsetof(struct ibv_qp_ex, wr_flush) + sizeof(void *) ==
		sizeof(struct ibv_qp_ex));

#if defined(__x86_64__) && defined(__LP64__)
BZC_PABI_ASSERT(sizeof(struct ibv_qp_ex) == 360);
BZC_PABI_ASSERT(offsetof(struct verbs_qp, comp_mask) == 360);
BZC_PABI_ASSERT(offsetof(struct verbs_qp, xrcd) == 368);
BZC_PABI_ASSERT(sizeof(struct verbs_qp) == 376);
#endif
