/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * The private provider interface of libibverbs, as far as bzc uses it.
 *
 * Distributions install libibverbs.so with its private symbol version
 * (IBVERBS_PRIVATE_<PABI>) but not the header that describes it.  This file
 * is bzc's own description of that interface (IBVERBS_PRIVATE_34) for the
 * rdma-core releases of one layout class, chosen at configure time from
 * the installed release (BZC_RDMA_CORE_CLASS, top-level CMakeLists.txt):
 *   rdma-core-44.h  rdma-core 44 (Debian 12)
 *   rdma-core-45.h  rdma-core 45 to 56 (Debian 13: 56)
 * What is common to both is here; each class header says what differs and
 * pins the class's absolute layout.  Other releases do not configure: the
 * layouts changed while the PABI number stayed 34, and 57 changed the PABI.
 *
 * Everything here was written from the documented layout of rdma-core
 * v44.0 and v56.1 (libibverbs/driver.h, kern-abi.h, cmd*.c, device.c,
 * init.c).  Only what providers/bzc uses is declared; structures that
 * libibverbs reads from or writes to are declared in full, because a
 * partial declaration would silently shift every later member.  Where a
 * structure ends in a public one that grew (struct verbs_qp ends in
 * struct ibv_qp_ex), the public header of the installed release supplies
 * it, and the class header checks that it is the class's.
 *
 * How it is verified:
 *  - the _Static_asserts below pin sizes and offsets, against the public
 *    <infiniband/verbs.h> and <rdma/ib_user_verbs.h> where possible;
 *  - provider-abi/check_layout.c runs at build time against the installed
 *    libibverbs and checks every position libibverbs can be observed to
 *    read or write (see that file);
 *  - the provider itself is exercised through libibverbs against the real
 *    kernel device (tools/bzc-machine).
 *
 * In rdma-core itself this header would be replaced by
 * <infiniband/driver.h>; the provider source does not depend on anything
 * that differs between the two.
 */
#ifndef BZC_IBVERBS_PROVIDER_H
#define BZC_IBVERBS_PROVIDER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

/* The private ABI generation this file describes. */
#define BZC_IBVERBS_PABI_VERSION 34

#ifndef container_of
/* Pointer to the structure of type @type whose member @member is at @ptr. */
#define container_of(ptr, type, member)                                        \
	((type *)((uint8_t *)(ptr) - offsetof(type, member)))
#endif

/*
 * Opaque to providers that do not inspect sysfs: libibverbs allocates it,
 * passes it to alloc_device() and frees it itself.
 */
struct verbs_sysfs_dev;

/* ---------------------------------------------------------------------- */
/* Objects libibverbs shares with providers                                 */
/* ---------------------------------------------------------------------- */

/*
 * What kind of memory a struct verbs_mr describes.  ibv_rereg_mr() only
 * accepts IBV_MR_TYPE_MR, and ibv_dereg_mr() re-enables fork for the range
 * of an IBV_MR_TYPE_MR without IBV_ACCESS_ON_DEMAND.  Values are ABI.
 */
enum ibv_mr_type {
	IBV_MR_TYPE_MR,
	IBV_MR_TYPE_NULL_MR,
	IBV_MR_TYPE_IMPORTED_MR,
	IBV_MR_TYPE_DMABUF_MR,
};

/*
 * An MR as libibverbs sees it: the public ibv_mr followed by two fields
 * ibv_cmd_reg_mr() fills in (mr_type, access) and ibv_rereg_mr() /
 * ibv_dereg_mr() read.  The provider allocates it (possibly embedded in a
 * larger structure); dereg_mr() frees it.
 */
struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum ibv_mr_type mr_type;
	int access;
};

static inline struct verbs_mr *verbs_get_mr(struct ibv_mr *mr)
{
	return container_of(mr, struct verbs_mr, ibv_mr);
}

/*
 * A CQ seen either way: ibv_cq_ex begins with the members of ibv_cq, so a
 * provider allocates one verbs_cq and hands out &cq or &cq_ex.
 */
struct verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

/*
 * An XRC domain as libibverbs sees it: the public ibv_xrcd, then a mask
 * saying which later members are valid (VERBS_XRCD_HANDLE) and the
 * kernel's handle, which ibv_cmd_open_xrcd() fills in when the provider's
 * structure is big enough (its vxrcd_size argument) and the XRC commands
 * send to the kernel.
 */
enum verbs_xrcd_mask {
	VERBS_XRCD_HANDLE = 1 << 0,
};

struct verbs_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t comp_mask;		/* enum verbs_xrcd_mask */
	uint32_t handle;
};

/*
 * An SRQ as libibverbs sees it: the public ibv_srq, then what
 * ibv_cmd_create_srq_ex() records of its type: the XRC domain and the
 * SRQ number (XRC), the CQ (XRC and tag matching).
 */
struct verbs_srq {
	struct ibv_srq srq;
	enum ibv_srq_type srq_type;
	struct verbs_xrcd *xrcd;
	struct ibv_cq *cq;
	uint32_t srq_num;
};

/* verbs_qp.comp_mask bits.  Values are ABI: ibv_qp_to_qp_ex() tests QP_EX. */
enum verbs_qp_mask {
	VERBS_QP_XRCD = 1 << 0,
	VERBS_QP_EX = 1 << 1,
};

/*
 * A QP seen either way: ibv_qp_ex begins with an ibv_qp (qp_base), then the
 * library's comp_mask and the XRC domain.  The create helpers set comp_mask
 * to 0 (or VERBS_QP_XRCD); a provider that implements the ibv_wr_* API
 * sets VERBS_QP_EX afterwards, and ibv_qp_to_qp_ex() returns &qp_ex only
 * when it is set.
 */
struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;		/* enum verbs_qp_mask */
	struct verbs_xrcd *xrcd;
};

/* ---------------------------------------------------------------------- */
/* Device matching                                                          */
/* ---------------------------------------------------------------------- */

/*
 * Kinds of match table entries.  The values are part of the interface:
 * libibverbs compares verbs_match_ent.kind against them.  Only the two used
 * by bzc are named here.
 */
enum {
	/* terminates a match table */
	VERBS_MATCH_SENTINEL = 0,
	/* u.driver_id == the netlink RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID */
	VERBS_MATCH_DRIVER_ID = 3,
};

/* One row of a provider's match table (rdma-core 44 to 56 layout). */
struct verbs_match_ent {
	void *driver_data;		/* handed back through sysfs_dev->match */
	union {
		const char *modalias;	/* modalias / PCI kinds */
		uint64_t driver_id;	/* VERBS_MATCH_DRIVER_ID */
	} u;
	uint16_t vendor;		/* PCI kind only */
	uint16_t device;		/* PCI kind only */
	uint8_t kind;			/* VERBS_MATCH_* */
};

/* Table row matching every device whose kernel driver reports @_id. */
#define VERBS_DRIVER_ID(_id)                                                   \
	{                                                                      \
		.u.driver_id = (_id), .kind = VERBS_MATCH_DRIVER_ID,           \
	}

/* ---------------------------------------------------------------------- */
/* Provider and device objects                                              */
/* ---------------------------------------------------------------------- */

struct verbs_device;

/*
 * What a provider registers with verbs_register_driver_34().  libibverbs
 * walks match_table (or calls match_device), checks the uverbs ABI version
 * of the device against [match_min_abi_version, match_max_abi_version],
 * then calls alloc_device() once per matching device and alloc_context()
 * on every ibv_open_device().
 */
struct verbs_device_ops {
	const char *name;

	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	/* Only used by statically linked builds of rdma-core. */
	const struct verbs_device_ops **static_providers;

	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);

	/*
	 * Owns cmd_fd: on failure it must close it (directly, or through
	 * _verbs_init_and_alloc_context()/verbs_uninit_context()), set errno
	 * and return NULL.
	 */
	struct verbs_context *(*alloc_context)(struct ibv_device *device,
					       int cmd_fd,
					       void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device,
						int cmd_fd);

	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

/*
 * Stand-in for the doubly linked list node libibverbs threads through
 * every device (two pointers: next, prev).  Providers never touch it.
 */
struct bzc_pabi_list_node {
	struct bzc_pabi_list_node *next;
	struct bzc_pabi_list_node *prev;
};

/*
 * The per-device object.  alloc_device() returns one embedded in the
 * provider's own device structure; libibverbs then fills in ops, refcount,
 * the list node, sysfs and the public ibv_device strings itself.
 */
struct verbs_device {
	struct ibv_device device;	/* first: ibv_device * == verbs_device * */
	const struct verbs_device_ops *ops;
	atomic_int refcount;
	struct bzc_pabi_list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;		/* from the GET_CONTEXT ioctl */
};

static inline struct verbs_device *
verbs_get_device(const struct ibv_device *dev)
{
	return container_of(dev, struct verbs_device, device);
}

/*
 * Every operation a provider can implement, in the order of rdma-core 44 to
 * 56 (alphabetical).  verbs_set_ops() copies the non-NULL entries; entries
 * left NULL keep the library's defaults, which fail with EOPNOTSUPP (or do
 * nothing, for the void ones).  The order and count (76) are ABI.
 */
struct verbs_context_ops {
	int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
			 uint32_t flags, struct ibv_sge *sg_list,
			 uint32_t num_sges);
	struct ibv_dm *(*alloc_dm)(struct ibv_context *context,
				   struct ibv_alloc_dm_attr *attr);
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	struct ibv_mr *(*alloc_null_mr)(struct ibv_pd *pd);
	struct ibv_pd *(*alloc_parent_domain)(
		struct ibv_context *context,
		struct ibv_parent_domain_init_attr *attr);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	struct ibv_td *(*alloc_td)(struct ibv_context *context,
				   struct ibv_td_init_attr *init_attr);
	void (*async_event)(struct ibv_context *context,
			    struct ibv_async_event *event);
	int (*attach_counters_point_flow)(struct ibv_counters *counters,
					  struct ibv_counter_attach_attr *attr,
					  struct ibv_flow *flow);
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	struct ibv_counters *(*create_counters)(
		struct ibv_context *context,
		struct ibv_counters_init_attr *init_attr);
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
					  struct ibv_cq_init_attr_ex *init_attr);
	struct ibv_flow *(*create_flow)(struct ibv_qp *qp,
					struct ibv_flow_attr *flow_attr);
	struct ibv_flow_action *(*create_flow_action_esp)(
		struct ibv_context *context,
		struct ibv_flow_action_esp_attr *attr);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *attr);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(
		struct ibv_context *context,
		struct ibv_rwq_ind_table_init_attr *init_attr);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *context,
					 struct ibv_srq_init_attr_ex *attr);
	struct ibv_wq *(*create_wq)(struct ibv_context *context,
				    struct ibv_wq_init_attr *attr);
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	int (*dealloc_td)(struct ibv_td *td);
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
	int (*destroy_counters)(struct ibv_counters *counters);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*destroy_flow)(struct ibv_flow *flow);
	int (*destroy_flow_action)(struct ibv_flow_action *action);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *rwq_ind_table);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*destroy_wq)(struct ibv_wq *wq);
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
	void (*free_context)(struct ibv_context *context);
	int (*free_dm)(struct ibv_dm *dm);
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	struct ibv_dm *(*import_dm)(struct ibv_context *context,
				    uint32_t dm_handle);
	struct ibv_mr *(*import_mr)(struct ibv_pd *pd, uint32_t mr_handle);
	struct ibv_pd *(*import_pd)(struct ibv_context *context,
				    uint32_t pd_handle);
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
	int (*modify_flow_action_esp)(struct ibv_flow_action *action,
				      struct ibv_flow_action_esp_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask);
	int (*modify_qp_rate_limit)(struct ibv_qp *qp,
				    struct ibv_qp_rate_limit_attr *attr);
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
			  int srq_attr_mask);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *wq_attr);
	struct ibv_qp *(*open_qp)(struct ibv_context *context,
				  struct ibv_qp_open_attr *attr);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *attr);
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op,
			    struct ibv_ops_wr **bad_op);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *recv_wr,
			     struct ibv_recv_wr **bad_recv_wr);
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size);
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr);
	int (*query_qp_data_in_order)(struct ibv_qp *qp, enum ibv_wr_opcode op,
				      uint32_t flags);
	int (*query_rt_values)(struct ibv_context *context,
			       struct ibv_values_ex *values);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr);
	int (*read_counters)(struct ibv_counters *counters,
			     uint64_t *counters_value, uint32_t ncounters,
			     uint32_t flags);
	struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *pd, struct ibv_dm *dm,
				    uint64_t dm_offset, size_t length,
				    unsigned int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t hca_va, int access);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
			void *addr, size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	void (*unimport_dm)(struct ibv_dm *dm);
	void (*unimport_mr)(struct ibv_mr *mr);
	void (*unimport_pd)(struct ibv_pd *pd);
};

#define BZC_VERBS_CONTEXT_OPS_NUM 76

/* ---------------------------------------------------------------------- */
/* Registration and context life cycle (IBVERBS_PRIVATE_34)                 */
/* ---------------------------------------------------------------------- */

/*
 * Adds @ops to the library's provider list.  The PABI number is part of
 * the symbol name, so a plugin built for another generation fails to load
 * instead of misbehaving.
 */
void verbs_register_driver_34(const struct verbs_device_ops *ops);

/*
 * Registers @drv_struct when the plugin is dlopen()ed.  Upstream's macro
 * of the same name also emits an alias for statically linked rdma-core;
 * a plugin built outside rdma-core never is, so only the constructor is
 * needed and the plugin exports no symbols at all.
 */
#define PROVIDER_DRIVER(provider_name, drv_struct)                             \
	static __attribute__((constructor)) void                               \
	provider_name##_register_driver(void)                                  \
	{                                                                      \
		verbs_register_driver_34(&drv_struct);                         \
	}

/*
 * calloc()s @alloc_size bytes, initialises the struct verbs_context found
 * @context_offset bytes into them (the pointer value *is* the offset; use
 * the macro below), takes a device reference, installs the default ops and
 * records @driver_id for every ioctl header.  On failure closes cmd_fd,
 * sets errno and returns NULL.
 */
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id);

/* Typed wrapper: allocates *drv_ctx_ptr whose verbs_context is ctx_memb. */
#define verbs_init_and_alloc_context(ibdev, cmd_fd, drv_ctx_ptr, ctx_memb,     \
				     driver_id)                                \
	((__typeof__(drv_ctx_ptr))_verbs_init_and_alloc_context(               \
		ibdev, cmd_fd, sizeof(*(drv_ctx_ptr)),                         \
		&((__typeof__(drv_ctx_ptr))NULL)->ctx_memb, (driver_id)))

/*
 * Undoes _verbs_init_and_alloc_context() except the allocation: frees the
 * library's private part, closes cmd_fd and async_fd (when not -1) and
 * drops the device reference.  The caller frees its own structure.
 */
void verbs_uninit_context(struct verbs_context *context);

/* Installs the non-NULL entries of @ops; NULL entries keep the defaults. */
void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops);

/* ---------------------------------------------------------------------- */
/* Logging (IBVERBS_PRIVATE_34)                                             */
/* ---------------------------------------------------------------------- */

/*
 * libibverbs prints a message when its level is at most the number in
 * VERBS_LOG_LEVEL (read once, at library initialisation; unset: nothing
 * is printed), to the file VERBS_LOG_FILE names or else stderr.  @ctx is
 * not used by rdma-core 44, errno is preserved.
 */
enum {
	VERBS_LOG_LEVEL_NONE,
	VERBS_LOG_ERR,
	VERBS_LOG_WARN,
	VERBS_LOG_INFO,
	VERBS_LOG_DEBUG,
};

void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt,
		 ...) __attribute__((format(printf, 3, 4)));

/* The message is prefixed with the device name, as rdma-core's is. */
#define verbs_log(ctx, level, format, ...)                                     \
	__verbs_log(ctx, level, "%s: %s:%d: " format,                          \
		    (ctx)->context.device->name, __func__, __LINE__,           \
		    ##__VA_ARGS__)

#define verbs_err(ctx, format, ...)                                            \
	verbs_log(ctx, VERBS_LOG_ERR, format, ##__VA_ARGS__)
#define verbs_warn(ctx, format, ...)                                           \
	verbs_log(ctx, VERBS_LOG_WARN, format, ##__VA_ARGS__)
#define verbs_info(ctx, format, ...)                                           \
	verbs_log(ctx, VERBS_LOG_INFO, format, ##__VA_ARGS__)
#define verbs_debug(ctx, format, ...)                                          \
	verbs_log(ctx, VERBS_LOG_DEBUG, format, ##__VA_ARGS__)

/* ---------------------------------------------------------------------- */
/* Command helpers (IBVERBS_PRIVATE_34)                                     */
/* ---------------------------------------------------------------------- */

/*
 * Buffers of the write()-era commands: the uverbs command header followed
 * by the kernel's request structure.  A provider appends its driver data
 * directly behind and passes the total size; libibverbs sends everything
 * past sizeof(struct ibv_<cmd>) as the driver ("UHW") input, and everything
 * past sizeof(<core response>) of the response buffer as driver output.
 * Those sizeof()s are compiled into libibverbs, so these sizes are ABI.
 * The request structs end in flexible arrays; embedding them is the same
 * GNU C extension rdma-core relies on.
 */
struct ibv_get_context {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_get_context core_payload;
};

struct ibv_query_port {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_query_port core_payload;
};

struct ibv_alloc_pd {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_alloc_pd core_payload;
};

struct ibv_create_cq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_cq core_payload;
};

struct ibv_resize_cq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_resize_cq core_payload;
};

struct ibv_reg_mr {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_reg_mr core_payload;
};

struct ibv_rereg_mr {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_rereg_mr core_payload;
};

struct ibv_alloc_mw {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_alloc_mw core_payload;
};

struct ibv_create_qp {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_qp core_payload;
};

struct ibv_modify_qp {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_modify_qp core_payload;
};

struct ibv_query_qp {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_query_qp core_payload;
};

struct ibv_create_srq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_srq core_payload;
};

struct ibv_modify_srq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_modify_srq core_payload;
};

struct ibv_query_srq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_query_srq core_payload;
};

struct ibv_open_xrcd {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_open_xrcd core_payload;
};

struct ibv_create_xsrq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_xsrq core_payload;
};

struct ibv_open_qp {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_open_qp core_payload;
};

/*
 * The extended ("_ex") commands start with the command header followed by
 * the extended header; their driver data is 8-byte granular.
 */
struct ex_hdr {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
};

struct ibv_create_cq_ex {
	struct ex_hdr hdr;
	struct ib_uverbs_ex_create_cq core_payload;
};

struct ibv_create_qp_ex {
	struct ex_hdr hdr;
	struct ib_uverbs_ex_create_qp core_payload;
};

/*
 * All helpers return 0 or a positive errno value (errno is usually set
 * too, but not always, so callers use the return value).
 */

/*
 * GET_CONTEXT (ioctl when the kernel has it, else write()).  cmd_size and
 * resp_size include the driver data behind @cmd and @resp.  Sets
 * num_comp_vectors, and async_fd on the write() path.
 */
int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);

/*
 * libibverbs' ioctl command builder (cmd_ioctl.h), never built here:
 * bzc passes NULL where a provider may chain driver attributes.
 */
struct ibv_command_buffer;

/*
 * QUERY_CONTEXT (ioctl), for import_context: sets num_comp_vectors and
 * the core's optional-feature bits. @driver: NULL, or driver attributes.
 */
int ibv_cmd_query_context(struct ibv_context *ctx,
			  struct ibv_command_buffer *driver);

/*
 * QUERY_DEVICE / EX_QUERY_DEVICE into @attr (attr_size bytes, at least
 * sizeof(struct ibv_device_attr)).  Does not format attr->orig_attr.fw_ver:
 * the raw value is resp->base.fw_ver.  On entry *resp_size is the size of
 * @resp; on return the length the kernel filled.  EINVAL for an unknown
 * input->comp_mask.
 */
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size);

/* QUERY_PORT; @cmd is only used (and written) on the write() path. */
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct ibv_query_port *cmd, size_t cmd_size);

/* ALLOC_PD; on success sets pd->handle and pd->context. */
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct ibv_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);

/* Destroys pd->handle in the kernel; does not free @pd. */
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);

/*
 * CREATE_CQ (ioctl, else write()).  @cmd may be NULL (cmd_size 0) when the
 * provider sends no driver data; @resp must be at least the core response
 * and resp_size covers the driver data behind it.  Sets cq->context,
 * cq->handle and cq->cqe; the caller of the provider's create_cq
 * (ibv_create_cq()) initialises the rest with verbs_init_cq().
 */
int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size);

/*
 * Flags for the last argument of ibv_cmd_create_cq_ex(): with
 * TS_IGNORED_EX a completion-timestamp request may fall back to the
 * non-extended write() command, which cannot carry it.
 */
enum create_cq_cmd_flags {
	CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX = 1 << 0,
};

/*
 * CREATE_CQ for ibv_create_cq_ex(): as ibv_cmd_create_cq(), taking cqe,
 * channel, comp_vector and flags from @cq_attr.  Fails with EOPNOTSUPP for
 * a comp_mask other than IBV_CQ_INIT_ATTR_MASK_FLAGS | _PD.  Driver data in
 * the response starts at sizeof(struct ib_uverbs_ex_create_cq_resp).
 */
int ibv_cmd_create_cq_ex(struct ibv_context *context,
			 const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp,
			 size_t resp_size, uint32_t cmd_flags);

/* RESIZE_CQ (write()); @cmd is required.  Sets cq->cqe from the response. */
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		      size_t resp_size);

/*
 * Destroys cq->handle in the kernel, then waits until every completion and
 * async event the kernel reported for it has been acknowledged (so cq->mutex
 * and the event counters must be valid, if only zeroed).  Does not free
 * @cq.  EIO from a disassociated device counts as success only when
 * RDMAV_ALLOW_DISASSOC_DESTROY is set in the environment.
 */
int ibv_cmd_destroy_cq(struct ibv_cq *cq);

/*
 * REG_MR (write()); @cmd is required.  Sets handle, lkey, rkey and context
 * of vmr->ibv_mr and vmr->mr_type, vmr->access; the caller of the
 * provider's reg_mr (ibv_reg_mr()) sets pd, addr and length.
 */
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);

/*
 * REREG_MR (write()); @flags are enum ibv_rereg_mr_flags.  Sets lkey and
 * rkey (and the context with IBV_REREG_MR_CHANGE_PD); ibv_rereg_mr() sets
 * pd, addr and length.
 */
int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr,
		     size_t length, uint64_t hca_va, int access,
		     struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
		     size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp,
		     size_t resp_sz);

/* Destroys vmr->ibv_mr.handle in the kernel; does not free @vmr. */
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);

/*
 * QUERY_MR (ioctl): lkey, rkey, length and iova of the MR @mr_handle of
 * @pd's context into @vmr, for import_mr; sets its handle and marks it
 * imported.
 */
int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr,
		     uint32_t mr_handle);
/* The core's ADVISE_MR method on the PD; returns 0 or an errno value. */
int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		      uint32_t flags, struct ibv_sge *sg_list,
		      uint32_t num_sge);

/*
 * Device memory as libibverbs sees it: the public ibv_dm followed by the
 * kernel handle of the DM object, which the DM commands name.
 */
struct verbs_dm {
	struct ibv_dm dm;
	uint32_t handle;
};

/* A chain of driver attributes for an ioctl command; bzc passes NULL. */
struct ibv_command_buffer;

/* Destroys dm->handle in the kernel (ioctl); does not free @dm. */
int ibv_cmd_free_dm(struct verbs_dm *dm);

/*
 * DM_MR_REG (ioctl): an MR over [offset, offset + length) of @dm.  EINVAL
 * without IBV_ACCESS_ZERO_BASED.  Sets handle, context, lkey, rkey,
 * length, pd and addr (NULL: zero-based) of vmr->ibv_mr and vmr->mr_type.
 */
int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm,
		      uint64_t offset, size_t length, unsigned int access,
		      struct verbs_mr *vmr, struct ibv_command_buffer *link);

/*
 * ALLOC_MW (write()); @cmd is required.  Sets context, pd, rkey, handle
 * and type of @mw.
 */
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		     struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size);

/* Destroys mw->handle in the kernel (ioctl, else write()); no free. */
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);

/*
 * CREATE_QP for ibv_create_qp() (ioctl, else write()).  @cmd may be NULL
 * (cmd_size 0) without driver request data; @resp is the core response
 * followed by the driver data (resp_size covers both).  On the ioctl path
 * the caps come back through an attribute, not @resp: read them from
 * attr->cap, which the helper updates with what the kernel granted.  Sets
 * context, handle, qp_num, qp_context, pd, send_cq, recv_cq, srq, qp_type,
 * state (RESET), events_completed, mutex and cond of @qp.
 */
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
		      struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
		      size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
		      size_t resp_size);

/*
 * CREATE_QP for ibv_create_qp_ex(): as ibv_cmd_create_qp(), from
 * attr_ex->pd (IBV_QP_INIT_ATTR_PD is required) and updating attr_ex->cap.
 * EINVAL for a comp_mask bit outside PD, XRCD, CREATE_FLAGS,
 * MAX_TSO_HEADER, IND_TABLE, RX_HASH, SEND_OPS_FLAGS (it does not look at
 * send_ops_flags), or a create flag the library does not know.  Also sets
 * vqp->comp_mask (0 without XRCD).  Driver data in the response starts at
 * sizeof(struct ib_uverbs_ex_create_qp_resp).
 */
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			  struct ibv_qp_init_attr_ex *attr_ex,
			  struct ibv_create_qp_ex *cmd, size_t cmd_size,
			  struct ib_uverbs_ex_create_qp_resp *resp,
			  size_t resp_size);

/*
 * MODIFY_QP (write()); @cmd is required and filled from @attr for the bits
 * of @attr_mask.  EOPNOTSUPP for IBV_QP_RATE_LIMIT and later bits.  Does
 * not update qp->state; ibv_modify_qp() does that on success.
 */
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd,
		      size_t cmd_size);

/*
 * QUERY_QP (write()); @cmd is required.  Fills @attr and @init_attr (the
 * latter partly from @qp itself).  EOPNOTSUPP for IBV_QP_RATE_LIMIT and
 * later bits.
 */
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		     int attr_mask, struct ibv_qp_init_attr *init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size);

/*
 * Destroys qp->handle in the kernel, then waits until every async event
 * the kernel reported for it has been acknowledged (qp->mutex, cond and
 * events_completed must be valid).  Does not free @qp.  EIO from a
 * disassociated device counts as success as for ibv_cmd_destroy_cq().
 */
int ibv_cmd_destroy_qp(struct ibv_qp *qp);

/*
 * POST_SEND / POST_RECV (write()): the work requests of @wr marshalled into
 * the command.  With @wr NULL the command carries qp_handle, wr_count 0,
 * sge_count 0 and wqe_size sizeof(struct ib_uverbs_send_wr) (resp.
 * ib_uverbs_recv_wr), and *bad_wr is left alone on success (set to NULL on
 * failure): bzc's doorbells.
 */
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);

/*
 * CREATE_AH (write()).  @resp is the core response followed by the driver
 * data, resp_size covering both; the core response is 4 bytes, so driver
 * data there is 4-byte aligned.  Sets ah->handle and ah->context;
 * ibv_create_ah() sets ah->pd.
 */
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size);

/* Destroys ah->handle in the kernel; does not free @ah. */
int ibv_cmd_destroy_ah(struct ibv_ah *ah);

/* ATTACH_MCAST / DETACH_MCAST (write()) of qp->handle; no driver data. */
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);

/*
 * CREATE_SRQ of the basic type (ioctl, else write()).  @cmd may be NULL
 * (cmd_size 0) without driver request data; @resp is the core response
 * followed by the driver data (resp_size covers both).  Updates
 * attr->attr.max_wr and max_sge with what the kernel granted; sets
 * context, handle, mutex and cond of @srq (ibv_create_srq() sets the
 * rest).
 */
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp,
		       size_t resp_size);

/* MODIFY_SRQ (write()); @cmd is required and filled from @srq_attr. */
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size);

/* QUERY_SRQ (write()); @cmd is required.  Fills max_wr, max_sge, limit. */
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size);

/*
 * CREATE_SRQ of any type (ioctl, else CREATE_XSRQ or CREATE_SRQ by
 * write()); attr_ex->comp_mask must name the PD, and an XRC SRQ needs the
 * XRCD and the CQ.  @cmd may be NULL (cmd_size 0) without driver request
 * data; @resp as for ibv_cmd_create_srq().  Updates attr_ex->attr.max_wr
 * and max_sge; sets context, handle, mutex and cond of srq->srq, and
 * srq_type, xrcd, srq_num and cq of @srq as the type has them.  Does not
 * set srq->srq.pd, srq_context or events_completed.
 */
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex,
			  struct ibv_create_xsrq *cmd, size_t cmd_size,
			  struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size);

/*
 * OPEN_XRCD (write()): the XRC domain of attr->fd's file, created with
 * IBV_XRCD_INIT_ATTR_OFLAGS' O_CREAT (O_EXCL: only if it is new), or a
 * new unshared one for fd -1.  attr->comp_mask must have both FD and
 * OFLAGS.  @cmd is required (cmd_size at least sizeof(*cmd)); sets
 * xrcd->xrcd.context, and comp_mask and handle when vxrcd_size covers the
 * handle.
 */
int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd,
		      int vxrcd_size, struct ibv_xrcd_init_attr *attr,
		      struct ibv_open_xrcd *cmd, size_t cmd_size,
		      struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size);

/* CLOSE_XRCD of xrcd->handle (EBUSY while QPs or SRQs use it). */
int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd);

/*
 * OPEN_QP (write()): a handle in this context on the XRC TGT QP
 * attr->qp_num of the XRC domain attr->xrcd (comp_mask must have XRCD,
 * NUM and TYPE).  @cmd is required.  Sets the ibv_qp members of @qp
 * (no PD, CQs or SRQ; state IBV_QPS_UNKNOWN), and comp_mask and xrcd when
 * vqp_sz covers them.
 */
int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp,
		    int vqp_sz, struct ibv_qp_open_attr *attr,
		    struct ibv_open_qp *cmd, size_t cmd_size,
		    struct ib_uverbs_create_qp_resp *resp, size_t resp_size);

/*
 * Destroys srq->handle in the kernel (EBUSY while QPs use it), then waits
 * for the acknowledgement of every async event reported for it.  Does not
 * free @srq.
 */
int ibv_cmd_destroy_srq(struct ibv_srq *srq);

/* ---------------------------------------------------------------------- */
/* Compile-time checks                                                      */
/* ---------------------------------------------------------------------- */

#define BZC_PABI_ASSERT(expr) _Static_assert(expr, #expr)

/* verbs_device starts with the public ibv_device and is pointer aligned. */
BZC_PABI_ASSERT(offsetof(struct verbs_device, device) == 0);
BZC_PABI_ASSERT(offsetof(struct verbs_device, ops) ==
		sizeof(struct ibv_device));
BZC_PABI_ASSERT(offsetof(struct verbs_device, refcount) ==
		sizeof(struct ibv_device) + sizeof(void *));
BZC_PABI_ASSERT(sizeof(atomic_int) == sizeof(int));
BZC_PABI_ASSERT(sizeof(struct bzc_pabi_list_node) == 2 * sizeof(void *));
BZC_PABI_ASSERT(offsetof(struct verbs_device, sysfs) ==
		offsetof(struct verbs_device, entry) +
			sizeof(struct bzc_pabi_list_node));
BZC_PABI_ASSERT(offsetof(struct verbs_device, core_support) ==
		offsetof(struct verbs_device, sysfs) + sizeof(void *));

/* 76 function pointers and nothing else. */
BZC_PABI_ASSERT(sizeof(struct verbs_context_ops) ==
		BZC_VERBS_CONTEXT_OPS_NUM * sizeof(void (*)(void)));
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, unimport_pd) ==
		(BZC_VERBS_CONTEXT_OPS_NUM - 1) * sizeof(void (*)(void)));

/* verbs_device_ops: name, two u32, then seven pointers. */
BZC_PABI_ASSERT(offsetof(struct verbs_device_ops, match_min_abi_version) ==
		sizeof(void *));
BZC_PABI_ASSERT(offsetof(struct verbs_device_ops, match_table) ==
		sizeof(void *) + 2 * sizeof(uint32_t));
BZC_PABI_ASSERT(sizeof(struct verbs_device_ops) ==
		offsetof(struct verbs_device_ops, match_table) +
			7 * sizeof(void *));

/* verbs_match_ent: driver_id must be a full 64-bit slot. */
BZC_PABI_ASSERT(offsetof(struct verbs_match_ent, u) == sizeof(void *));
BZC_PABI_ASSERT(sizeof(((struct verbs_match_ent *)0)->u) == 8);

/* The command buffers carry no padding between header and request. */
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_cmd_hdr) == 8);
BZC_PABI_ASSERT(offsetof(struct ibv_get_context, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_get_context) == 8);
BZC_PABI_ASSERT(sizeof(struct ibv_get_context) == 16);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_get_context_resp) == 8);
BZC_PABI_ASSERT(offsetof(struct ibv_query_port, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_query_port) == 16);
BZC_PABI_ASSERT(sizeof(struct ibv_query_port) == 24);
BZC_PABI_ASSERT(offsetof(struct ibv_alloc_pd, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_alloc_pd) == 8);
BZC_PABI_ASSERT(sizeof(struct ibv_alloc_pd) == 16);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_alloc_pd_resp) == 4);
BZC_PABI_ASSERT(offsetof(struct ibv_create_cq, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_create_cq) == 32);
BZC_PABI_ASSERT(sizeof(struct ibv_create_cq) == 40);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_create_cq_resp) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_ex_cmd_hdr) == 16);
BZC_PABI_ASSERT(offsetof(struct ex_hdr, ex_hdr) == 8);
BZC_PABI_ASSERT(sizeof(struct ex_hdr) == 24);
BZC_PABI_ASSERT(offsetof(struct ibv_create_cq_ex, core_payload) == 24);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_ex_create_cq) == 32);
BZC_PABI_ASSERT(sizeof(struct ibv_create_cq_ex) == 56);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_ex_create_cq_resp) == 16);
BZC_PABI_ASSERT(offsetof(struct ibv_resize_cq, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_resize_cq) == 16);
BZC_PABI_ASSERT(sizeof(struct ibv_resize_cq) == 24);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_resize_cq_resp) == 8);
BZC_PABI_ASSERT(offsetof(struct ibv_reg_mr, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_reg_mr) == 40);
BZC_PABI_ASSERT(sizeof(struct ibv_reg_mr) == 48);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_reg_mr_resp) == 12);
BZC_PABI_ASSERT(offsetof(struct ibv_rereg_mr, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_rereg_mr) == 48);
BZC_PABI_ASSERT(sizeof(struct ibv_rereg_mr) == 56);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_rereg_mr_resp) == 8);
BZC_PABI_ASSERT(offsetof(struct ibv_alloc_mw, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_alloc_mw) == 16);
BZC_PABI_ASSERT(sizeof(struct ibv_alloc_mw) == 24);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_alloc_mw_resp) == 8);

BZC_PABI_ASSERT(offsetof(struct ibv_create_qp, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_create_qp) == 56);
BZC_PABI_ASSERT(sizeof(struct ibv_create_qp) == 64);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_create_qp_resp) == 32);
BZC_PABI_ASSERT(offsetof(struct ibv_create_qp_ex, core_payload) == 24);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_ex_create_qp) == 64);
BZC_PABI_ASSERT(sizeof(struct ibv_create_qp_ex) == 88);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_ex_create_qp_resp) == 40);
BZC_PABI_ASSERT(offsetof(struct ibv_modify_qp, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_modify_qp) == 112);
BZC_PABI_ASSERT(sizeof(struct ibv_modify_qp) == 120);
BZC_PABI_ASSERT(offsetof(struct ibv_query_qp, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_query_qp) == 16);
BZC_PABI_ASSERT(sizeof(struct ibv_query_qp) == 24);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_create_ah_resp) == 4);
BZC_PABI_ASSERT(offsetof(struct ibv_create_srq, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_create_srq) == 32);
BZC_PABI_ASSERT(sizeof(struct ibv_create_srq) == 40);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_create_srq_resp) == 16);
BZC_PABI_ASSERT(offsetof(struct ibv_modify_srq, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_modify_srq) == 16);
BZC_PABI_ASSERT(sizeof(struct ibv_modify_srq) == 24);
BZC_PABI_ASSERT(offsetof(struct ibv_query_srq, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_query_srq) == 16);
BZC_PABI_ASSERT(sizeof(struct ibv_query_srq) == 24);
BZC_PABI_ASSERT(offsetof(struct ibv_open_xrcd, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_open_xrcd) == 16);
BZC_PABI_ASSERT(sizeof(struct ibv_open_xrcd) == 24);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_open_xrcd_resp) == 4);
BZC_PABI_ASSERT(offsetof(struct ibv_create_xsrq, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_create_xsrq) == 48);
BZC_PABI_ASSERT(sizeof(struct ibv_create_xsrq) == 56);
BZC_PABI_ASSERT(offsetof(struct ibv_open_qp, core_payload) == 8);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_open_qp) == 32);
BZC_PABI_ASSERT(sizeof(struct ibv_open_qp) == 40);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_send_wr) == 56);
BZC_PABI_ASSERT(sizeof(struct ib_uverbs_recv_wr) == 16);

/*
 * verbs_qp: the union, then comp_mask and the XRC domain pointer.  The
 * ibv_qp fields the create helpers write must sit at the same offsets in
 * both views (libibverbs asserts qp_base is first).
 */
BZC_PABI_ASSERT(offsetof(struct verbs_qp, qp) == 0);
BZC_PABI_ASSERT(offsetof(struct verbs_qp, qp_ex) == 0);
BZC_PABI_ASSERT(offsetof(struct ibv_qp_ex, qp_base) == 0);
BZC_PABI_ASSERT(sizeof(struct ibv_qp_ex) >= sizeof(struct ibv_qp));
BZC_PABI_ASSERT(offsetof(struct verbs_qp, comp_mask) ==
		sizeof(struct ibv_qp_ex));
BZC_PABI_ASSERT(offsetof(struct verbs_qp, xrcd) ==
		(sizeof(struct ibv_qp_ex) + sizeof(uint32_t) +
		 sizeof(void *) - 1) / sizeof(void *) * sizeof(void *));

/* verbs_mr: two ints after the public MR; verbs_cq: nothing but the union. */
BZC_PABI_ASSERT(offsetof(struct verbs_mr, ibv_mr) == 0);
BZC_PABI_ASSERT(offsetof(struct verbs_mr, mr_type) == sizeof(struct ibv_mr));
BZC_PABI_ASSERT(sizeof(enum ibv_mr_type) == sizeof(int));
BZC_PABI_ASSERT(offsetof(struct verbs_mr, access) ==
		sizeof(struct ibv_mr) + sizeof(int));
BZC_PABI_ASSERT(offsetof(struct verbs_xrcd, xrcd) == 0);
BZC_PABI_ASSERT(offsetof(struct verbs_xrcd, comp_mask) ==
		sizeof(struct ibv_xrcd));
BZC_PABI_ASSERT(offsetof(struct verbs_xrcd, handle) ==
		sizeof(struct ibv_xrcd) + sizeof(uint32_t));
BZC_PABI_ASSERT(offsetof(struct verbs_srq, srq) == 0);
BZC_PABI_ASSERT(offsetof(struct verbs_srq, srq_type) ==
		sizeof(struct ibv_srq));
BZC_PABI_ASSERT(sizeof(enum ibv_srq_type) == sizeof(int));
BZC_PABI_ASSERT(sizeof(struct verbs_cq) == sizeof(struct ibv_cq_ex));
BZC_PABI_ASSERT(offsetof(struct verbs_cq, cq) == 0);
BZC_PABI_ASSERT(offsetof(struct verbs_cq, cq_ex) == 0);
BZC_PABI_ASSERT(offsetof(struct ibv_cq_ex, comp_events_completed) ==
		offsetof(struct ibv_cq, comp_events_completed));
BZC_PABI_ASSERT(offsetof(struct ibv_cq_ex, async_events_completed) ==
		offsetof(struct ibv_cq, async_events_completed));

/* Public verbs.h facts the provider relies on (verbs_get_ctx()). */
BZC_PABI_ASSERT(offsetof(struct verbs_context, context) +
			sizeof(struct ibv_context) ==
		sizeof(struct verbs_context));

#if defined(__x86_64__) && defined(__LP64__)
/*
 * Absolute layout on x86_64, the same in both classes: offsets obtained by
 * compiling the v44.0 definitions of these structures and printing
 * offsetof() of every member; driver.h and the public structures involved
 * did not change them up to v56.1.
 */
BZC_PABI_ASSERT(sizeof(struct ibv_device) == 664);
BZC_PABI_ASSERT(offsetof(struct verbs_device, refcount) == 672);
BZC_PABI_ASSERT(offsetof(struct verbs_device, entry) == 680);
BZC_PABI_ASSERT(offsetof(struct verbs_device, sysfs) == 696);
BZC_PABI_ASSERT(offsetof(struct verbs_device, core_support) == 704);
BZC_PABI_ASSERT(sizeof(struct verbs_device) == 712);
BZC_PABI_ASSERT(sizeof(struct verbs_context_ops) == 608);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, alloc_pd) == 40);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, dealloc_pd) == 208);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, free_context) == 312);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, query_device_ex) == 464);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, query_port) == 480);
BZC_PABI_ASSERT(sizeof(struct verbs_device_ops) == 72);
BZC_PABI_ASSERT(offsetof(struct verbs_device_ops, alloc_context) == 40);
BZC_PABI_ASSERT(offsetof(struct verbs_device_ops, alloc_device) == 56);
BZC_PABI_ASSERT(offsetof(struct verbs_device_ops, uninit_device) == 64);
BZC_PABI_ASSERT(offsetof(struct verbs_match_ent, kind) == 20);
BZC_PABI_ASSERT(sizeof(struct verbs_match_ent) == 24);
BZC_PABI_ASSERT(sizeof(struct ibv_mr) == 48);
BZC_PABI_ASSERT(sizeof(struct verbs_mr) == 56);
BZC_PABI_ASSERT(offsetof(struct verbs_dm, handle) == sizeof(struct ibv_dm));
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, cq_event) == 96);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, create_cq) == 120);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, create_cq_ex) == 128);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, dereg_mr) == 224);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, destroy_cq) == 248);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, poll_cq) == 424);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, reg_mr) == 544);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, req_notify_cq) == 552);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, rereg_mr) == 560);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, create_ah) == 104);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, create_qp) == 152);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, create_qp_ex) == 160);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, destroy_ah) == 232);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, destroy_qp) == 272);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, modify_qp) == 376);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, post_recv) == 432);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, post_send) == 440);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, query_qp) == 488);
BZC_PABI_ASSERT(sizeof(struct ibv_qp) == 160);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, resize_cq) == 568);
BZC_PABI_ASSERT(sizeof(struct ibv_xrcd) == 8);
BZC_PABI_ASSERT(sizeof(struct verbs_xrcd) == 16);
BZC_PABI_ASSERT(sizeof(struct ibv_srq) == 128);
BZC_PABI_ASSERT(offsetof(struct verbs_srq, xrcd) == 136);
BZC_PABI_ASSERT(offsetof(struct verbs_srq, cq) == 144);
BZC_PABI_ASSERT(offsetof(struct verbs_srq, srq_num) == 152);
BZC_PABI_ASSERT(sizeof(struct verbs_srq) == 160);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, close_xrcd) == 88);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, get_srq_num) == 328);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, open_qp) == 408);
BZC_PABI_ASSERT(offsetof(struct verbs_context_ops, open_xrcd) == 416);
#endif

/* What differs between the layout classes. */
#if BZC_RDMA_CORE_CLASS == 44
#include "rdma-core-44.h"
#elif BZC_RDMA_CORE_CLASS == 45
#include "rdma-core-45.h"
#else
#error "BZC_RDMA_CORE_CLASS must be 44 or 45 (set by CMakeLists.txt)"
#endif

#endif /* BZC_IBVERBS_PROVIDER_H */
