// SPDX-License-Identifier: MIT
/*
 * softrnic — device contexts and their async event queue. The context
 * embeds the whole struct verbs_context, so the inline verbs of
 * <infiniband/verbs.h> dispatch straight into this library (the ops are
 * the verbs layer's, verbs/verbs_context.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/core.h"

#undef ibv_query_port

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

static int srn_ctx_init(struct srn_context *ctx, struct ibv_device *device)
{
	struct ibv_context *ic = &ctx->vctx.context;

	ctx->owner_pid = srn_pid;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->async_lock, NULL);
	srn_list_init(&ctx->qps);
	srn_list_init(&ctx->cqs);
	srn_list_init(&ctx->srqs);
	srn_list_init(&ctx->async_events);
	srn_list_init(&ctx->link);
	srn_lock_init(&ctx->retry_lock);
	srn_list_init(&ctx->retry_qps);
	ic->device = device;
	ic->num_comp_vectors = 1;
	ic->abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&ic->mutex, NULL);
	ic->cmd_fd = eventfd(0, EFD_CLOEXEC);
	ic->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ic->cmd_fd < 0 || ic->async_fd < 0)
		return -errno;
	return srn_tpt_init(ctx);
}

/* The inverse of srn_ctx_create. */
void srn_ctx_destroy(struct srn_context *ctx)
{
	struct ibv_context *ic = &ctx->vctx.context;
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &ctx->async_events)
		free(srn_list_entry(pos, struct srn_async_event, link));
	if (ic->cmd_fd >= 0)
		close(ic->cmd_fd);
	if (ic->async_fd >= 0)
		close(ic->async_fd);
	srn_tpt_fini(ctx);
	free(ctx);
}

/* A new context of device (its key table made, no queue yet); the verbs
 * layer fills in the ops. 0 or -errno. */
int srn_ctx_create(struct ibv_device *device, struct srn_context **ctx_p)
{
	struct srn_context *ctx = calloc(1, sizeof(*ctx));
	int err;

	if (!ctx)
		return -ENOMEM;
	ctx->vctx.context.cmd_fd = -1;
	ctx->vctx.context.async_fd = -1;
	ctx->tpt_seg.fd = -1;
	err = srn_ctx_init(ctx, device);
	if (err) {
		srn_ctx_destroy(ctx);
		return err;
	}
	ctx->handle = (uint32_t)ctx->tpt_seg.fd; /* unique while open */
	*ctx_p = ctx;
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
