// SPDX-License-Identifier: MIT
/*
 * softrnic — the context verbs: ibv_open_device / ibv_close_device, the
 * ops table the inline verbs of <infiniband/verbs.h> dispatch through,
 * fork handling, and the interfaces this device does not offer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>

#include "engine/engine.h"
#include "verbs/verbs.h"

#undef ibv_query_port

static void srn_atfork_child(void)
{
	srn_self_atfork_child(); /* srn_pid too */
	srn_memreg_atfork_child();
	srn_progress_atfork_child();
}

static void srn_lib_init(void)
{
	srn_self_refresh();
	pthread_atfork(NULL, NULL, srn_atfork_child);
}

static pthread_once_t srn_lib_once = PTHREAD_ONCE_INIT;

static struct ibv_mw *srn_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_mw *mw;
	int err = srn_mw_alloc(pd, type, &mw);

	if (err) {
		errno = -err;
		return NULL;
	}
	return mw;
}

/* ibv_bind_mw (type 1): a BIND_MW work request on qp's send queue, with
 * the window's next key (as rxe, mw->rkey is the new key once posted). */
static int srn_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = { 0 }, *bad;
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	int err;

	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = mw_bind->bind_info;
	err = qp->context->ops.post_send(qp, &wr, &bad);
	if (!err)
		mw->rkey = rkey;
	return err;
}

static int srn_dealloc_mw(struct ibv_mw *mw)
{
	return -srn_mw_dealloc(mw);
}

static void srn_ctx_set_ops(struct srn_context *ctx)
{
	struct ibv_context_ops *ops = &ctx->vctx.context.ops;
	struct verbs_context *v = &ctx->vctx;

	ops->_compat_query_device = ibv_query_device;
	ops->_compat_query_port = ibv_query_port;
	ops->alloc_mw = srn_alloc_mw;
	ops->bind_mw = srn_bind_mw;
	ops->dealloc_mw = srn_dealloc_mw;
	srn_verbs_cq_ops(ops);
	srn_verbs_srq_ops(ops);
	srn_verbs_qp_ops(ops);

	v->query_port = srn_query_port;
	v->query_device_ex = srn_query_device_ex;
	v->advise_mr = srn_advise_mr;
	v->alloc_dm = srn_alloc_dm;
	v->free_dm = srn_free_dm;
	v->reg_dm_mr = srn_reg_dm_mr;
	v->alloc_td = srn_alloc_td;
	v->dealloc_td = srn_dealloc_td;
	v->alloc_parent_domain = srn_alloc_parent_domain;
	v->create_qp_ex = srn_create_qp_ex;
	v->create_cq_ex = srn_create_cq_ex;
	v->query_rt_values = srn_query_rt_values;
	v->open_xrcd = srn_open_xrcd;
	v->close_xrcd = srn_close_xrcd;
	v->create_srq_ex = srn_create_srq_ex;
	v->get_srq_num = srn_get_srq_num;
	v->open_qp = srn_open_qp;
	v->sz = sizeof(*v);
}

SRN_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct srn_context *ctx;
	int err;

	pthread_once(&srn_lib_once, srn_lib_init);
	if (device != &srn_device_get()->ibdev) {
		errno = ENODEV;
		return NULL;
	}
	err = srn_ctx_create(device, &ctx);
	if (err) {
		errno = -err;
		return NULL;
	}
	srn_ctx_set_ops(ctx);
	err = srn_progress_get();
	if (err) {
		srn_ctx_destroy(ctx);
		errno = -err;
		return NULL;
	}
	srn_progress_ctx_add(ctx);
	return &ctx->vctx.context;
}

SRN_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct srn_context *ctx;

	if (!context)
		return EINVAL;
	ctx = to_sctx(context);
	if (!srn_ctx_is_foreign(ctx)) {
		srn_progress_ctx_del(ctx);
		srn_progress_put();
	}
	srn_ctx_destroy(ctx);
	return 0;
}

/* ---- interfaces this device does not offer ---- */

SRN_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context,
					uint32_t pd_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
}

SRN_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
}

SRN_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context,
					uint32_t dm_handle)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
}

SRN_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

SRN_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

SRN_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					    size_t length, uint64_t iova,
					    int fd, int access)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp,
					  enum ibv_wr_opcode op, uint32_t flags)
{
	/* The initiator places data in order, byte by byte of each WR. */
	return flags ? 0 : 1;
}
