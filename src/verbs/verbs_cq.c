// SPDX-License-Identifier: MIT
/*
 * softrnic — the CQ verbs. Polling drains the CQ ring (core/cq.c); when it
 * is empty, the polling thread lends itself to the engine: it retries
 * stalled send queues and receives what the data set's sockets hold
 * (engine/progress.c), as a NIC's interrupt-less polling mode would.
 */
#include <errno.h>

#include "core/cq_poll.h"
#include "engine/engine.h"
#include "verbs/verbs.h"

SRN_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
					void *cq_context,
					struct ibv_comp_channel *channel,
					int comp_vector)
{
	struct srn_cq *cq;
	int err = srn_cq_create(context, cqe, cq_context, channel, comp_vector,
				&cq);

	if (err) {
		errno = -err;
		return NULL;
	}
	return (struct ibv_cq *)&cq->ibcq;
}

SRN_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct srn_cq *cq = to_scq(ibcq);
	int err;

	srn_progress_lock(); /* no progress handler looks at it after this */
	err = srn_cq_del(cq);
	srn_progress_unlock();
	if (err)
		return -err;
	srn_cq_destroy(cq);
	return 0;
}

static int srn_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct srn_cq *cq = to_scq(ibcq);
	int n;

	if (srn_unlikely(ne < 0 || srn_ctx_is_foreign(cq->ctx)))
		return -EINVAL;
	n = srn_cq_drain(cq, ne, wc);
	if (n == 0 && srn_req_retry_wanted(cq->ctx)) {
		/* the application's polling drives stalled send queues */
		srn_req_retry_stalled(cq->ctx);
		n = srn_cq_drain(cq, ne, wc);
	}
	if (n == 0 && srn_progress_has_data()) {
		/* busy polling: receive what the sockets have ourselves */
		srn_progress_poll_once();
		n = srn_cq_drain(cq, ne, wc);
	}
	/* relaxed: a hint; srn_cq_check_overflow reads it with acquire */
	if (srn_unlikely(__atomic_load_n(&cq->shm->overflow, __ATOMIC_RELAXED)))
		srn_cq_check_overflow(cq);
	if (n == 0 && srn_cq_repair_due(cq) && srn_cq_repair(cq))
		n = srn_cq_drain(cq, ne, wc);
	return n;
}

static int srn_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct srn_cq *cq = to_scq(ibcq);

	/* WQEs a doorbell left for the next poll go before the caller
	 * sleeps (srn_req_doorbell) */
	if (srn_req_retry_wanted(cq->ctx))
		srn_req_retry_stalled(cq->ctx);
	srn_cq_arm(cq, solicited_only);
	/* the caller is about to block: the progress thread must receive
	 * the messages that complete on this CQ (progress.c, data set) */
	srn_progress_data_rearm();
	return 0;
}

void srn_verbs_cq_ops(struct ibv_context_ops *ops)
{
	ops->poll_cq = srn_poll_cq;
	ops->req_notify_cq = srn_req_notify_cq;
}
