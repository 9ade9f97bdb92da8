// SPDX-License-Identifier: MIT
/*
 * softrnic — the IBVERBS_PRIVATE_34 provider interface.
 *
 * rdma-core's provider libraries (libmlx5, libefa), which perftest links
 * directly, import these at load time with BIND_NOW; without them nothing
 * starts. softrnic is not a provider host: each entry fails cleanly
 * (EOPNOTSUPP, or NULL with errno) and is never reached for softrnic0.
 * Arguments are not declared: no stub reads them. ibv_query_gid_type, the
 * one private call programs make (ibv_devinfo), is real: device.c.
 */
#include <errno.h>
#include <stdbool.h>

#include "srn_compiler.h"

/* Provider constructors register their driver: ignored. */
SRN_EXPORT void verbs_register_driver_34(const void *ops);
SRN_EXPORT void verbs_register_driver_34(const void *ops)
{
}

SRN_EXPORT bool verbs_allow_disassociate_destroy(int ret);
SRN_EXPORT bool verbs_allow_disassociate_destroy(int ret)
{
	return false;
}

SRN_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
						void *link);
SRN_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
						void *link)
{
	return num_attrs;
}

/* The compat IBVERBS_1.1 driver registration of very old providers. */
SRN_EXPORT void ibv_register_driver(const char *name, void *init_func);
SRN_EXPORT void ibv_register_driver(const char *name, void *init_func)
{
}

#define SRN_PRIV_INT(name)                              \
	SRN_EXPORT int name(void);                      \
	SRN_EXPORT int name(void)                       \
	{                                               \
		return EOPNOTSUPP;                      \
	}
#define SRN_PRIV_PTR(name)                              \
	SRN_EXPORT void *name(void);                    \
	SRN_EXPORT void *name(void)                     \
	{                                               \
		errno = EOPNOTSUPP;                     \
		return NULL;                            \
	}
#define SRN_PRIV_VOID(name)                             \
	SRN_EXPORT void name(void);                     \
	SRN_EXPORT void name(void)                      \
	{                                               \
	}
SRN_PRIV_VOID(__verbs_log)
SRN_PRIV_PTR(_verbs_init_and_alloc_context)
SRN_PRIV_INT(execute_ioctl)
SRN_PRIV_INT(ibv_cmd_advise_mr)
SRN_PRIV_INT(ibv_cmd_alloc_dm)
SRN_PRIV_INT(ibv_cmd_alloc_mw)
SRN_PRIV_INT(ibv_cmd_alloc_pd)
SRN_PRIV_INT(ibv_cmd_attach_mcast)
SRN_PRIV_INT(ibv_cmd_close_xrcd)
SRN_PRIV_INT(ibv_cmd_create_ah)
SRN_PRIV_INT(ibv_cmd_create_counters)
SRN_PRIV_INT(ibv_cmd_create_cq)
SRN_PRIV_INT(ibv_cmd_create_cq_ex)
SRN_PRIV_INT(ibv_cmd_create_flow)
SRN_PRIV_INT(ibv_cmd_create_flow_action_esp)
SRN_PRIV_INT(ibv_cmd_create_qp)
SRN_PRIV_INT(ibv_cmd_create_qp_ex)
SRN_PRIV_INT(ibv_cmd_create_qp_ex2)
SRN_PRIV_INT(ibv_cmd_create_rwq_ind_table)
SRN_PRIV_INT(ibv_cmd_create_srq)
SRN_PRIV_INT(ibv_cmd_create_srq_ex)
SRN_PRIV_INT(ibv_cmd_create_wq)
SRN_PRIV_INT(ibv_cmd_dealloc_mw)
SRN_PRIV_INT(ibv_cmd_dealloc_pd)
SRN_PRIV_INT(ibv_cmd_dereg_mr)
SRN_PRIV_INT(ibv_cmd_destroy_ah)
SRN_PRIV_INT(ibv_cmd_destroy_counters)
SRN_PRIV_INT(ibv_cmd_destroy_cq)
SRN_PRIV_INT(ibv_cmd_destroy_flow)
SRN_PRIV_INT(ibv_cmd_destroy_flow_action)
SRN_PRIV_INT(ibv_cmd_destroy_qp)
SRN_PRIV_INT(ibv_cmd_destroy_rwq_ind_table)
SRN_PRIV_INT(ibv_cmd_destroy_srq)
SRN_PRIV_INT(ibv_cmd_destroy_wq)
SRN_PRIV_INT(ibv_cmd_detach_mcast)
SRN_PRIV_INT(ibv_cmd_free_dm)
SRN_PRIV_INT(ibv_cmd_get_context)
SRN_PRIV_INT(ibv_cmd_modify_cq)
SRN_PRIV_INT(ibv_cmd_modify_flow_action_esp)
SRN_PRIV_INT(ibv_cmd_modify_qp)
SRN_PRIV_INT(ibv_cmd_modify_qp_ex)
SRN_PRIV_INT(ibv_cmd_modify_srq)
SRN_PRIV_INT(ibv_cmd_modify_wq)
SRN_PRIV_INT(ibv_cmd_open_qp)
SRN_PRIV_INT(ibv_cmd_open_xrcd)
SRN_PRIV_INT(ibv_cmd_poll_cq)
SRN_PRIV_INT(ibv_cmd_post_recv)
SRN_PRIV_INT(ibv_cmd_post_send)
SRN_PRIV_INT(ibv_cmd_post_srq_recv)
SRN_PRIV_INT(ibv_cmd_query_context)
SRN_PRIV_INT(ibv_cmd_query_device_any)
SRN_PRIV_INT(ibv_cmd_query_mr)
SRN_PRIV_INT(ibv_cmd_query_port)
SRN_PRIV_INT(ibv_cmd_query_qp)
SRN_PRIV_INT(ibv_cmd_query_srq)
SRN_PRIV_INT(ibv_cmd_read_counters)
SRN_PRIV_INT(ibv_cmd_reg_dm_mr)
SRN_PRIV_INT(ibv_cmd_reg_dmabuf_mr)
SRN_PRIV_INT(ibv_cmd_reg_mr)
SRN_PRIV_INT(ibv_cmd_req_notify_cq)
SRN_PRIV_INT(ibv_cmd_rereg_mr)
SRN_PRIV_INT(ibv_cmd_resize_cq)
SRN_PRIV_INT(ibv_read_ibdev_sysfs_file)
SRN_PRIV_VOID(verbs_init_cq)
SRN_PRIV_PTR(verbs_open_device)
SRN_PRIV_VOID(verbs_set_ops)
SRN_PRIV_VOID(verbs_uninit_context)
