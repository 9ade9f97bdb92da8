/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the verbs layer: the library's ABI surface. The ibv_* entry
 * points that reach beyond one core object, the context's ops table, the
 * private stubs and the utilities rdma-core exports. It may call every
 * layer below (engine, core, util); nothing calls it.
 *
 *   verbs_context.c  open/close device, the ops table, fork
 *   verbs_qp.c       QP create/modify/query/destroy, post_send/post_recv
 *   verbs_cq.c       CQ create/destroy, poll_cq, req_notify_cq
 *   verbs_cqex.c     the extended CQ: create_cq_ex, start/next/end_poll,
 *                    the read_* accessors, the device clock
 *   verbs_qpex.c     the extended post-send API: ibv_wr_* builders
 *   verbs_direct.c   softrnic's direct-access extension
 *   verbs_srq.c      SRQ create/destroy, post_srq_recv
 *   verbs_util.c     rdma-core's exported utilities
 *   verbs_private.c  the IBVERBS_PRIVATE_34 stubs
 */
#ifndef SRN_VERBS_H
#define SRN_VERBS_H

#include "core/core.h"

/* each file fills in its part of the context's ops */
void srn_verbs_qp_ops(struct ibv_context_ops *ops);
void srn_verbs_cq_ops(struct ibv_context_ops *ops);
void srn_verbs_srq_ops(struct ibv_context_ops *ops);
struct ibv_qp *srn_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *attr);
struct ibv_cq_ex *srn_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *srn_open_qp(struct ibv_context *context,
			   struct ibv_qp_open_attr *attr);
struct ibv_srq *srn_create_srq_ex(struct ibv_context *context,
				  struct ibv_srq_init_attr_ex *attr);
int srn_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
void srn_qpex_init(struct srn_qp *qp, uint64_t send_ops_flags);
int srn_query_rt_values(struct ibv_context *context,
			struct ibv_values_ex *values);

#endif /* SRN_VERBS_H */
