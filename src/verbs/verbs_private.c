// SPDX-License-Identifier: MIT
/*
 * softrnic — stubs for rdma-core's private provider interface
 * (IBVERBS_PRIVATE_34), plus the compat ibv_register_driver (IBVERBS_1.1).
 *
 * The provider libraries libmlx5 and libefa, which perftest links directly,
 * import these symbols and are linked -z now, so they only load if every
 * one of them exists. softrnic hosts no providers, so each stub fails
 * cleanly and none is reached for softrnic0:
 *  - int stubs return EOPNOTSUPP (the ibv_cmd_* convention: a positive
 *    errno value);
 *  - pointer stubs return NULL and set errno to EOPNOTSUPP;
 *  - void stubs do nothing.
 * The only private call made by programs, ibv_query_gid_type (used by
 * ibv_devinfo), is real and lives in device.c.
 *
 * rdma-core's driver.h is not installed, so the prototypes below follow
 * its shape: public types from <infiniband/verbs.h>, incomplete structs
 * for rdma-core's private objects, and void * for the kernel command and
 * response buffers. The ABI only needs each symbol to exist with the right
 * kind (function or data) and be callable.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "util/srn_compiler.h"

/* Stubs ignore their arguments by design. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* rdma-core's private object types: only ever passed by pointer. */
struct ibv_command_buffer;
struct verbs_context_ops;
struct verbs_counters;
struct verbs_cq;
struct verbs_device_ops;
struct verbs_dm;
struct verbs_flow_action;
struct verbs_mr;
struct verbs_qp;
struct verbs_srq;
struct verbs_sysfs_dev;
struct verbs_xrcd;

/*
 * Data, not a function: libmlx5 reads it through its GOT to decide whether
 * EIO from a destroy command counts as success. Always false here.
 */
SRN_EXPORT bool verbs_allow_disassociate_destroy;

/* Called by the libmlx5/libefa constructors: softrnic ignores them. */
SRN_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops);
SRN_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
}

/* Compat registration of providers older than rdma-core: ignored too. */
SRN_EXPORT void ibv_register_driver(const char *name, void *init_func);
SRN_EXPORT void ibv_register_driver(const char *name, void *init_func)
{
}

/* Counts attributes, not an error code: return the count unchanged. */
SRN_EXPORT unsigned int
__ioctl_final_num_attrs(unsigned int num_attrs,
			struct ibv_command_buffer *link);
SRN_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
						struct ibv_command_buffer *link)
{
	return num_attrs;
}

/*
 * Reads a file like ibv_read_sysfs_file: the contract is a length or -1,
 * so a positive EOPNOTSUPP would read as a 95-byte success. Fail as -1.
 */
SRN_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					 struct verbs_sysfs_dev *sysfs_dev,
					 const char *fnfmt, ...);
SRN_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					 struct verbs_sysfs_dev *sysfs_dev,
					 const char *fnfmt, ...)
{
	errno = EOPNOTSUPP;
	return -1;
}

/* Each macro declares and defines one exported stub. */
#define SRN_STUB_INT(name, params)  \
	SRN_EXPORT int name params; \
	SRN_EXPORT int name params  \
	{                           \
		return EOPNOTSUPP;  \
	}

#define SRN_STUB_PTR(type, name, params) \
	SRN_EXPORT type *name params;    \
	SRN_EXPORT type *name params     \
	{                                \
		errno = EOPNOTSUPP;      \
		return NULL;             \
	}

#define SRN_STUB_VOID(name, params)  \
	SRN_EXPORT void name params; \
	SRN_EXPORT void name params  \
	{                            \
	}

/* clang-format would take the "*" in these macro arguments for products. */
/* clang-format off */
/* Context and command-buffer plumbing. */
SRN_STUB_VOID(__verbs_log, (struct verbs_context *ctx, uint32_t level,
			    const char *fmt, ...))
SRN_STUB_PTR(void, _verbs_init_and_alloc_context,
	     (struct ibv_device *device, int cmd_fd, size_t alloc_size,
	      struct verbs_context *context_offset, uint32_t driver_id))
SRN_STUB_PTR(struct ibv_context, verbs_open_device,
	     (struct ibv_device *device, void *private_data))
SRN_STUB_VOID(verbs_set_ops, (struct verbs_context *vctx,
			      const struct verbs_context_ops *ops))
SRN_STUB_VOID(verbs_uninit_context, (struct verbs_context *context))
SRN_STUB_VOID(verbs_init_cq,
	      (struct ibv_cq *cq, struct ibv_context *context,
	       struct ibv_comp_channel *channel, void *cq_context))
SRN_STUB_INT(execute_ioctl,
	     (struct ibv_context *context, struct ibv_command_buffer *cmd))
SRN_STUB_INT(ibv_cmd_get_context,
	     (struct verbs_context *context, void *cmd, size_t cmd_size,
	      void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_query_context,
	     (struct ibv_context *ctx, struct ibv_command_buffer *driver))
SRN_STUB_INT(ibv_cmd_query_device_any,
	     (struct ibv_context *context,
	      const struct ibv_query_device_ex_input *input,
	      struct ibv_device_attr_ex *attr, size_t attr_size, void *resp,
	      size_t *resp_size))
SRN_STUB_INT(ibv_cmd_query_port,
	     (struct ibv_context *context, uint8_t port_num,
	      struct ibv_port_attr *port_attr, void *cmd, size_t cmd_size))

/* Protection domains, XRC domains, memory regions and windows. */
SRN_STUB_INT(ibv_cmd_alloc_pd,
	     (struct ibv_context *context, struct ibv_pd *pd, void *cmd,
	      size_t cmd_size, void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_dealloc_pd, (struct ibv_pd *pd))
SRN_STUB_INT(ibv_cmd_open_xrcd,
	     (struct ibv_context *context, struct verbs_xrcd *xrcd,
	      int vxrcd_size, struct ibv_xrcd_init_attr *attr, void *cmd,
	      size_t cmd_size, void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_close_xrcd, (struct verbs_xrcd *xrcd))
SRN_STUB_INT(ibv_cmd_reg_mr,
	     (struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
	      int access, struct verbs_mr *vmr, void *cmd, size_t cmd_size,
	      void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_rereg_mr,
	     (struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length,
	      uint64_t hca_va, int access, struct ibv_pd *pd, void *cmd,
	      size_t cmd_sz, void *resp, size_t resp_sz))
SRN_STUB_INT(ibv_cmd_dereg_mr, (struct verbs_mr *vmr))
SRN_STUB_INT(ibv_cmd_query_mr,
	     (struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle))
SRN_STUB_INT(ibv_cmd_advise_mr,
	     (struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
	      uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge))
SRN_STUB_INT(ibv_cmd_reg_dmabuf_mr,
	     (struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
	      int fd, int access, struct verbs_mr *vmr))
SRN_STUB_INT(ibv_cmd_alloc_mw,
	     (struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw,
	      void *cmd, size_t cmd_size, void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_dealloc_mw, (struct ibv_mw *mw))

/* Device memory. */
SRN_STUB_INT(ibv_cmd_alloc_dm,
	     (struct ibv_context *ctx, const struct ibv_alloc_dm_attr *dm_attr,
	      struct verbs_dm *dm, struct ibv_command_buffer *link))
SRN_STUB_INT(ibv_cmd_free_dm, (struct verbs_dm *dm))
SRN_STUB_INT(ibv_cmd_reg_dm_mr,
	     (struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset,
	      size_t length, unsigned int access, struct verbs_mr *vmr,
	      struct ibv_command_buffer *link))

/* Completion queues. */
SRN_STUB_INT(ibv_cmd_create_cq, (struct ibv_context *context, int cqe,
				 struct ibv_comp_channel *channel,
				 int comp_vector, struct ibv_cq *cq, void *cmd,
				 size_t cmd_size, void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_create_cq_ex,
	     (struct ibv_context *context,
	      const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq,
	      void *cmd, size_t cmd_size, void *resp, size_t resp_size,
	      uint32_t cmd_flags))
SRN_STUB_INT(ibv_cmd_poll_cq, (struct ibv_cq *cq, int ne, struct ibv_wc *wc))
SRN_STUB_INT(ibv_cmd_req_notify_cq, (struct ibv_cq *cq, int solicited_only))
SRN_STUB_INT(ibv_cmd_resize_cq, (struct ibv_cq *cq, int cqe, void *cmd,
				 size_t cmd_size, void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_destroy_cq, (struct ibv_cq *cq))
SRN_STUB_INT(ibv_cmd_modify_cq,
	     (struct ibv_cq *cq, struct ibv_modify_cq_attr *attr, void *cmd,
	      size_t cmd_size))

/* Shared receive queues. */
SRN_STUB_INT(ibv_cmd_create_srq,
	     (struct ibv_pd *pd, struct ibv_srq *srq,
	      struct ibv_srq_init_attr *attr, void *cmd, size_t cmd_size,
	      void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_create_srq_ex,
	     (struct ibv_context *context, struct verbs_srq *srq,
	      struct ibv_srq_init_attr_ex *attr_ex, void *cmd, size_t cmd_size,
	      void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_modify_srq,
	     (struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
	      int srq_attr_mask, void *cmd, size_t cmd_size))
SRN_STUB_INT(ibv_cmd_query_srq,
	     (struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, void *cmd,
	      size_t cmd_size))
SRN_STUB_INT(ibv_cmd_destroy_srq, (struct ibv_srq *srq))
SRN_STUB_INT(ibv_cmd_post_srq_recv,
	     (struct ibv_srq *srq, struct ibv_recv_wr *wr,
	      struct ibv_recv_wr **bad_wr))

/* Queue pairs. */
SRN_STUB_INT(ibv_cmd_create_qp, (struct ibv_pd *pd, struct ibv_qp *qp,
				 struct ibv_qp_init_attr *attr, void *cmd,
				 size_t cmd_size, void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_create_qp_ex,
	     (struct ibv_context *context, struct verbs_qp *qp,
	      struct ibv_qp_init_attr_ex *attr_ex, void *cmd, size_t cmd_size,
	      void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_create_qp_ex2,
	     (struct ibv_context *context, struct verbs_qp *qp,
	      struct ibv_qp_init_attr_ex *qp_attr, void *cmd, size_t cmd_size,
	      void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_open_qp,
	     (struct ibv_context *context, struct verbs_qp *qp, int vqp_sz,
	      struct ibv_qp_open_attr *attr, void *cmd, size_t cmd_size,
	      void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_query_qp,
	     (struct ibv_qp *qp, struct ibv_qp_attr *qp_attr, int attr_mask,
	      struct ibv_qp_init_attr *qp_init_attr, void *cmd,
	      size_t cmd_size))
SRN_STUB_INT(ibv_cmd_modify_qp, (struct ibv_qp *qp, struct ibv_qp_attr *attr,
				 int attr_mask, void *cmd, size_t cmd_size))
SRN_STUB_INT(ibv_cmd_modify_qp_ex,
	     (struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
	      void *cmd, size_t cmd_size, void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_destroy_qp, (struct ibv_qp *qp))
SRN_STUB_INT(ibv_cmd_post_send, (struct ibv_qp *ibqp, struct ibv_send_wr *wr,
				 struct ibv_send_wr **bad_wr))
SRN_STUB_INT(ibv_cmd_post_recv, (struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
				 struct ibv_recv_wr **bad_wr))

/* Address handles and multicast. */
SRN_STUB_INT(ibv_cmd_create_ah,
	     (struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
	      void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_destroy_ah, (struct ibv_ah *ah))
SRN_STUB_INT(ibv_cmd_attach_mcast,
	     (struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid))
SRN_STUB_INT(ibv_cmd_detach_mcast,
	     (struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid))

/* Flow steering, flow actions, work queues and indirection tables. */
SRN_STUB_INT(ibv_cmd_create_flow,
	     (struct ibv_qp *qp, struct ibv_flow *flow_id,
	      struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size))
SRN_STUB_INT(ibv_cmd_destroy_flow, (struct ibv_flow *flow_id))
SRN_STUB_INT(ibv_cmd_create_flow_action_esp,
	     (struct ibv_context *ctx, struct ibv_flow_action_esp_attr *attr,
	      struct verbs_flow_action *flow_action,
	      struct ibv_command_buffer *driver))
SRN_STUB_INT(ibv_cmd_modify_flow_action_esp,
	     (struct verbs_flow_action *flow_action,
	      struct ibv_flow_action_esp_attr *attr,
	      struct ibv_command_buffer *driver))
SRN_STUB_INT(ibv_cmd_destroy_flow_action, (struct verbs_flow_action *action))
SRN_STUB_INT(ibv_cmd_create_wq,
	     (struct ibv_context *context,
	      struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq,
	      void *cmd, size_t cmd_size, void *resp, size_t resp_size))
SRN_STUB_INT(ibv_cmd_modify_wq, (struct ibv_wq *wq, struct ibv_wq_attr *attr,
				 void *cmd, size_t cmd_size))
SRN_STUB_INT(ibv_cmd_destroy_wq, (struct ibv_wq *wq))
SRN_STUB_INT(ibv_cmd_create_rwq_ind_table,
	     (struct ibv_context *context,
	      struct ibv_rwq_ind_table_init_attr *init_attr,
	      struct ibv_rwq_ind_table *rwq_ind_table, void *resp,
	      size_t resp_size))
SRN_STUB_INT(ibv_cmd_destroy_rwq_ind_table,
	     (struct ibv_rwq_ind_table *rwq_ind_table))

/* Counters. */
SRN_STUB_INT(ibv_cmd_create_counters, (struct ibv_context *context,
				       struct ibv_counters_init_attr *init_attr,
				       struct verbs_counters *vcounters,
				       struct ibv_command_buffer *link))
SRN_STUB_INT(ibv_cmd_destroy_counters, (struct verbs_counters *vcounters))
SRN_STUB_INT(ibv_cmd_read_counters,
	     (struct verbs_counters *vcounters, uint64_t *counters_value,
	      uint32_t ncounters, uint32_t flags,
	      struct ibv_command_buffer *link))
/* clang-format on */
