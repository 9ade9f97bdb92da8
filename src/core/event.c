// SPDX-License-Identifier: MIT
/*
 * softrnic — completion channels.
 *
 * A channel's fd is an eventfd in semaphore mode: every completion event
 * fired into one of its CQs (by this process or by a peer that received
 * the fd at connection time) adds one, so the fd is pollable and each
 * ibv_get_cq_event() consumes exactly one event. Which CQ fired is read
 * from the CQs' event counters in shared memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/core.h"

static srn_channel_work_fn *srn_channel_work;

void srn_channel_work_set(srn_channel_work_fn *fn)
{
	/* release: pairs with the acquire in ibv_get_cq_event */
	__atomic_store_n(&srn_channel_work, fn, __ATOMIC_RELEASE);
}

/*
 * A QP of ctx stalled in the progress thread on work only an application
 * thread may do: a count without an event on every channel of the
 * context's CQs wakes a thread waiting in ibv_get_cq_event, whichever CQ
 * it waits for (an XRC INI QP has no receive CQ; xsrq_pingpong waits on
 * its XRC SRQ's), which does the work and waits again. A thread in
 * poll(2) on such a fd sees it readable once; its ibv_get_cq_event then
 * does the work and waits for a real event. Not under any QP's lock.
 */
void srn_ctx_channels_poke(struct srn_context *ctx)
{
	struct srn_comp_channel *done[8];
	unsigned n = 0, i;
	struct srn_list *pos;

	pthread_mutex_lock(&ctx->lock);
	srn_list_for_each(pos, &ctx->cqs) {
		struct srn_cq *cq =
			srn_list_entry(pos, struct srn_cq, ctx_link);

		if (!cq->chan)
			continue;
		for (i = 0; i < n && done[i] != cq->chan; i++)
			;
		if (i < n)
			continue; /* this channel had its count */
		if (n < SRN_ARRAY_SIZE(done))
			done[n++] = cq->chan;
		srn_channel_signal(cq->chan->ibch.fd);
	}
	pthread_mutex_unlock(&ctx->lock);
}

int srn_channel_signal(int chan_fd)
{
	uint64_t one = 1;

	if (write(chan_fd, &one, sizeof(one)) != sizeof(one))
		return -errno;
	return 0;
}

SRN_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *context)
{
	struct srn_comp_channel *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ibch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ibch.fd < 0) {
		free(ch);
		return NULL;
	}
	ch->ibch.context = context;
	ch->ibch.refcnt = 0;
	pthread_mutex_init(&ch->lock, NULL);
	srn_list_init(&ch->cqs);
	return &ch->ibch;
}

SRN_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct srn_comp_channel *ch =
		container_of(channel, struct srn_comp_channel, ibch);

	pthread_mutex_lock(&ch->lock);
	if (channel->refcnt) {
		pthread_mutex_unlock(&ch->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&ch->lock);
	close(channel->fd);
	free(ch);
	return 0;
}

/* Under ch->lock: a CQ of the channel with an event not yet handed out. */
static struct srn_cq *srn_channel_take(struct srn_comp_channel *ch)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &ch->cqs) {
		struct srn_cq *cq =
			srn_list_entry(pos, struct srn_cq, chan_link);
		/* acquire: pairs with the release in srn_cq_notify */
		uint64_t ev =
			__atomic_load_n(&cq->shm->events, __ATOMIC_ACQUIRE);

		if (ev != cq->events_seen) {
			cq->events_seen++;
			return cq;
		}
	}
	return NULL;
}

SRN_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel,
				struct ibv_cq **cq_p, void **cq_context_p)
{
	struct srn_comp_channel *ch =
		container_of(channel, struct srn_comp_channel, ibch);
	struct srn_context *ctx = to_sctx(channel->context);
	srn_channel_work_fn *work;
	struct srn_cq *cq;
	uint64_t v;

	for (;;) {
		/* acquire: pairs with the release in srn_channel_work_set */
		work = __atomic_load_n(&srn_channel_work, __ATOMIC_ACQUIRE);
		if (work && ctx)
			work(ctx); /* before sleeping: see srn_qp_channels_poke */
		if (read(channel->fd, &v, sizeof(v)) != sizeof(v))
			return -1; /* EAGAIN on a non-blocking channel */
		pthread_mutex_lock(&ch->lock);
		cq = srn_channel_take(ch);
		pthread_mutex_unlock(&ch->lock);
		if (cq)
			break;
		/* the event belonged to a CQ destroyed since, or a poke
		 * (srn_qp_channels_poke): wait again */
	}
	*cq_p = (struct ibv_cq *)&cq->ibcq;
	*cq_context_p = cq->ibcq.cq_context;
	return 0;
}

SRN_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
