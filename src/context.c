// SPDX-License-Identifier: MIT
/*
 * softrnic — device contexts (ibv_open_device / ibv_close_device), the
 * async event queue, and fork handling.
 *
 * The context embeds the whole struct verbs_context, so the inline verbs
 * of <infiniband/verbs.h> dispatch straight into this library.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "srn.h"

#undef ibv_query_port

pid_t srn_pid;

/* provided by the object files */
int srn_query_device_ex(struct ibv_context *context,
			const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size);
int srn_query_port(struct ibv_context *context, uint8_t port_num,
		   struct ibv_port_attr *attr, size_t attr_len);
int srn_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int srn_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int srn_srq_post_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
struct ibv_qp *srn_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *attr);

static void srn_atfork_child(void)
{
	srn_pid = getpid();
	srn_memreg_atfork_child();
	srn_progress_atfork_child();
}

static void srn_lib_init(void)
{
	srn_pid = getpid();
	pthread_atfork(NULL, NULL, srn_atfork_child);
}

static pthread_once_t srn_lib_once = PTHREAD_ONCE_INIT;

/* A context opened by our parent before fork(): the child must not touch
 * its queues (they are not even mapped in the child). */
bool srn_ctx_is_foreign(const struct srn_context *ctx)
{
	return ctx->owner_pid != srn_pid;
}

uint32_t srn_ctx_new_handle(struct srn_context *ctx)
{
	return ++ctx->next_handle;
}

static struct ibv_mw *srn_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int srn_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind)
{
	return EOPNOTSUPP;
}

static int srn_dealloc_mw(struct ibv_mw *mw)
{
	return EOPNOTSUPP;
}

static struct ibv_xrcd *srn_open_xrcd(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int srn_close_xrcd(struct ibv_xrcd *xrcd)
{
	return EOPNOTSUPP;
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
	ops->poll_cq = srn_poll_cq;
	ops->req_notify_cq = srn_req_notify_cq;
	ops->post_srq_recv = srn_srq_post_recv;
	ops->post_send = srn_qp_post_send;
	ops->post_recv = srn_qp_post_recv;

	v->query_port = srn_query_port;
	v->query_device_ex = srn_query_device_ex;
	v->create_qp_ex = srn_create_qp_ex;
	v->open_xrcd = srn_open_xrcd;
	v->close_xrcd = srn_close_xrcd;
	v->sz = sizeof(*v);
}

static int srn_ctx_init(struct srn_context *ctx, struct ibv_device *device)
{
	struct ibv_context *ic = &ctx->vctx.context;
	int err;

	ctx->owner_pid = srn_pid;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->async_lock, NULL);
	srn_list_init(&ctx->qps);
	srn_list_init(&ctx->cqs);
	srn_list_init(&ctx->srqs);
	srn_list_init(&ctx->async_events);
	srn_list_init(&ctx->link);
	ic->device = device;
	ic->num_comp_vectors = 1;
	ic->abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&ic->mutex, NULL);
	ic->cmd_fd = eventfd(0, EFD_CLOEXEC);
	ic->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ic->cmd_fd < 0 || ic->async_fd < 0)
		return -errno;
	srn_ctx_set_ops(ctx);
	err = srn_tpt_init(ctx);
	if (err)
		return err;
	return srn_progress_get();
}

static void srn_ctx_free(struct srn_context *ctx)
{
	struct ibv_context *ic = &ctx->vctx.context;

	if (ic->cmd_fd >= 0)
		close(ic->cmd_fd);
	if (ic->async_fd >= 0)
		close(ic->async_fd);
	srn_tpt_fini(ctx);
	free(ctx);
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
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->vctx.context.cmd_fd = -1;
	ctx->vctx.context.async_fd = -1;
	ctx->tpt_seg.fd = -1;
	err = srn_ctx_init(ctx, device);
	if (err) {
		srn_ctx_free(ctx);
		errno = -err;
		return NULL;
	}
	ctx->handle = (uint32_t)ctx->tpt_seg.fd; /* unique while open */
	srn_progress_ctx_add(ctx);
	return &ctx->vctx.context;
}

SRN_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct srn_context *ctx;
	struct srn_list *pos, *tmp;

	if (!context)
		return EINVAL;
	ctx = to_sctx(context);
	if (!srn_ctx_is_foreign(ctx)) {
		srn_progress_ctx_del(ctx);
		srn_progress_put();
	}
	srn_list_for_each_safe(pos, tmp, &ctx->async_events)
		free(srn_list_entry(pos, struct srn_async_event, link));
	srn_ctx_free(ctx);
	return 0;
}

void srn_async_event_post(struct srn_context *ctx,
			  const struct ibv_async_event *ev)
{
	struct srn_async_event *e = calloc(1, sizeof(*e));
	uint64_t one = 1;

	if (!e) {
		srn_err("async event %d lost: no memory", ev->event_type);
		return;
	}
	e->ev = *ev;
	pthread_mutex_lock(&ctx->async_lock);
	srn_list_add_tail(&e->link, &ctx->async_events);
	pthread_mutex_unlock(&ctx->async_lock);
	if (write(ctx->vctx.context.async_fd, &one, sizeof(one)) < 0)
		srn_err("async event signal: %m");
}

SRN_EXPORT int ibv_get_async_event(struct ibv_context *context,
				   struct ibv_async_event *event)
{
	struct srn_context *ctx = to_sctx(context);
	struct srn_async_event *e = NULL;
	uint64_t v;

	if (read(context->async_fd, &v, sizeof(v)) != sizeof(v))
		return -1; /* errno from read: EAGAIN when non-blocking */
	pthread_mutex_lock(&ctx->async_lock);
	if (!srn_list_empty(&ctx->async_events)) {
		e = srn_list_entry(ctx->async_events.next,
				   struct srn_async_event, link);
		srn_list_del(&e->link);
	}
	pthread_mutex_unlock(&ctx->async_lock);
	if (!e) {
		errno = EAGAIN;
		return -1;
	}
	*event = e->ev;
	free(e);
	return 0;
}

SRN_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	/* Events are copied out, nothing to release. */
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

SRN_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd,
					uint32_t mr_handle)
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

SRN_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				uint16_t lid)
{
	return EOPNOTSUPP; /* multicast needs UD QPs */
}

SRN_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				uint16_t lid)
{
	return EOPNOTSUPP;
}

SRN_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd,
					    uint64_t offset, size_t length,
					    uint64_t iova, int fd, int access)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SRN_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp,
					  enum ibv_wr_opcode op,
					  uint32_t flags)
{
	/* The initiator places data in order, byte by byte of each WR. */
	return flags ? 0 : 1;
}
