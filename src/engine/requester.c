// SPDX-License-Identifier: MIT
/*
 * softrnic — the requester: runs a QP's send queue when the doorbell rings
 * (post_send), when a stall may have cleared (a kick from the target, the
 * application polling its CQ, the progress thread's timer), and when the
 * QP enters ERR (to flush). Always under the QP's sq_lock.
 *
 * WQEs execute in order; a stalled WQE (no receive WQE at the target, or
 * the target QP not ready) holds the ones behind it, as RC ordering
 * requires. Retries follow the QP's rnr_retry/min_rnr_timer and
 * retry_cnt/timeout; when they run out the WQE completes with
 * RNR_RETRY_EXC_ERR or RETRY_EXC_ERR and the QP moves to ERR.
 */
#include <errno.h>

#include "engine/engine.h"
#include "engine/transport.h"

const char *const srn_stall_names[] = {
	[SRN_STALL_NONE] = "none",
	[SRN_STALL_RNR] = "RNR",
	[SRN_STALL_NOT_READY] = "peer not ready",
	[SRN_STALL_CREDIT] = "max_rd_atomic in flight",
	[SRN_STALL_RNR_WAIT] = "RNR NAK timer",
	[SRN_STALL_FETCH] = "MR fetch",
};

/* IBTA RNR NAK timer encoding, in units of 10 us (0 means 655.36 ms). */
static const uint32_t srn_rnr_10us[32] = {
	65536, 1,    2,	   3,	 4,    6,     8,     12,    16,	   24,	  32,
	48,    64,   96,   128,	 192,  256,   384,   512,   768,   1024,  1536,
	2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

uint64_t srn_rnr_timer_ns(uint8_t min_rnr_timer)
{
	return (uint64_t)srn_rnr_10us[min_rnr_timer & 31] * 10000ull;
}

/* Local ACK timeout: 4.096 us * 2^timeout; 0 means wait forever. */
uint64_t srn_ack_timeout_ns(uint8_t timeout)
{
	return timeout ? 4096ull << (timeout & 31) : 0;
}

/* Does the QP need the requester again (sq_lock, or retry_lock for the
 * flags: see srn_qp_want_run)? */
static bool srn_req_wanted(const struct srn_qp *qp)
{
	/* relaxed: under retry_lock, which orders them with the store of a
	 * flag before srn_qp_want_run's lock; srn_req_run exchanges them
	 * with acquire */
	return qp->stall != SRN_STALL_NONE ||
	       atomic_load_explicit(&qp->pending_err, memory_order_relaxed) ||
	       atomic_load_explicit(&qp->pending_run, memory_order_relaxed);
}

/* sq_lock held: drops qp from the retry list unless it still needs a run
 * (a flag a handler set since, or a new stall). */
static void srn_req_retry_drop(struct srn_qp *qp)
{
	struct srn_context *ctx = qp->ctx;

	srn_lock(&ctx->retry_lock);
	if (!srn_req_wanted(qp))
		srn_qp_retry_del(ctx, qp);
	srn_unlock(&ctx->retry_lock);
}

static void srn_req_unstall(struct srn_qp *qp)
{
	if (qp->stall == SRN_STALL_NONE)
		return;
	qp->stall = SRN_STALL_NONE;
	/* relaxed: a count of stalled QPs, read as a hint by a transport's
	 * answers; qp->stall itself is under sq_lock */
	atomic_fetch_sub_explicit(&qp->ctx->nstalled, 1, memory_order_relaxed);
	srn_req_retry_drop(qp);
}

static void srn_req_stall_start(struct srn_qp *qp, enum srn_stall why,
				uint64_t now)
{
	bool rnr = why == SRN_STALL_RNR;

	qp->stall = why;
	/* relaxed: a count of stalled QPs, a hint (see srn_req_unstall) */
	atomic_fetch_add_explicit(&qp->ctx->nstalled, 1, memory_order_relaxed);
	srn_qp_want_run(qp);
	qp->stall_retries = rnr ? qp->attr.rnr_retry : qp->attr.retry_cnt;
	qp->stall_period_ns = rnr ? srn_rnr_timer_ns(qp->attr.min_rnr_timer) :
				    srn_ack_timeout_ns(qp->attr.timeout);
	if (why == SRN_STALL_CREDIT || why == SRN_STALL_RNR_WAIT)
		qp->stall_period_ns = 1000000ull; /* a net: answers or the
						   * transport's timer
						   * restart it */
	if (!qp->stall_period_ns) /* timeout 0: wait for the target forever */
		qp->stall_period_ns = 100000000ull;
	qp->stall_deadline_ns = now + qp->stall_period_ns;
	srn_progress_wake_at(qp->stall_deadline_ns);
}

static bool srn_req_retries_infinite(const struct srn_qp *qp)
{
	if (qp->stall == SRN_STALL_CREDIT || qp->stall == SRN_STALL_RNR_WAIT)
		return true; /* answers are on their way, or the transport
			      * counts the retries */
	if (qp->stall == SRN_STALL_RNR)
		return qp->attr.rnr_retry == 7;
	return qp->attr.timeout == 0;
}

/*
 * Records a stall of the head WQE. Returns true when the retries are used
 * up: the caller then fails the WQE with *status.
 */
static bool srn_req_stall(struct srn_qp *qp, enum srn_stall why,
			  enum ibv_wc_status *status)
{
	uint64_t now = srn_now_ns();

	if (qp->stall != why) { /* a new reason counts its own retries */
		srn_req_unstall(qp);
		srn_req_stall_start(qp, why, now);
		return false;
	}
	if (now < qp->stall_deadline_ns) { /* an early retry: free; the
					    * timer may have been taken by
					    * an earlier deadline */
		srn_progress_wake_at(qp->stall_deadline_ns);
		return false;
	}
	if (!srn_req_retries_infinite(qp) && qp->stall_retries-- == 0) {
		srn_dbg("QP 0x%06x: stall %s: retries used up",
			qp->ibqpx.qp_base.qp_num, srn_stall_names[why]);
		*status = why == SRN_STALL_RNR ? IBV_WC_RNR_RETRY_EXC_ERR :
						 IBV_WC_RETRY_EXC_ERR;
		srn_req_unstall(qp);
		return true;
	}
	qp->stall_deadline_ns = now + qp->stall_period_ns;
	srn_progress_wake_at(qp->stall_deadline_ns);
	return false;
}

/* ERR: every WQE not done yet, in flight or waiting, is flushed. */
static void srn_req_flush(struct srn_qp *qp)
{
	struct srn_sq *sq = &qp->sq;
	bool locked = srn_comp_lock(qp);
	/* relaxed: under comp_lock, as its writers (or sq_lock alone for a
	 * synchronous transport, which never sets it) */
	bool waiting = atomic_exchange_explicit(&qp->err_wait, false,
						memory_order_relaxed);

	for (uint64_t i = sq->cons; i != sq->prod; i++) {
		struct srn_swqe *w = srn_sq_wqe(qp, i);

		/* a failed WQE that waited for those ahead of it keeps its
		 * status if they all completed (cons reached it); if the QP
		 * went to ERR another way first, it is flushed */
		if (i >= sq->sent || !w->done ||
		    (waiting && i == qp->err_wait_pos && i != sq->cons)) {
			w->status = IBV_WC_WR_FLUSH_ERR;
			w->done = 1;
		}
	}
	/* release: pairs with the acquire of sent in srn_comp_send_done (and
	 * in a transport's receive side) */
	__atomic_store_n(&sq->sent, sq->prod, __ATOMIC_RELEASE);
	srn_comp_unlock(qp, locked);
	srn_comp_send_done(qp);
}

/* comp_lock: is a WQE ahead of the one at sent still unanswered? */
static bool srn_req_ahead_in_flight(struct srn_qp *qp)
{
	for (uint64_t i = qp->sq.cons; i != qp->sq.sent; i++)
		if (!srn_sq_wqe(qp, i)->done)
			return true;
	return false;
}

/*
 * Records the outcome of the WQE at sent and moves past it. A WQE that
 * failed here while WQEs ahead of it are still in flight waits for them
 * (returns true): as on a device, its error completion and the move to
 * ERR come once they are complete (srn_comp_send_done), so that they end
 * with their own outcome, not flushed.
 */
static bool srn_req_executed(struct srn_qp *qp, struct srn_swqe *w,
			     bool in_flight, enum ibv_wc_status status)
{
	bool locked = srn_comp_lock(qp), wait = false;

	/* an answer may already have marked an in-flight WQE done */
	if (!in_flight) {
		w->status = status;
		w->done = 1;
		wait = status != IBV_WC_SUCCESS && srn_req_ahead_in_flight(qp);
	}
	if (wait) {
		qp->err_wait_pos = qp->sq.sent;
		/* release: pairs with the acquire in srn_req_run; the
		 * completer reads it under comp_lock, as we write it */
		atomic_store_explicit(&qp->err_wait, true,
				      memory_order_release);
	}
	/* release: pairs with the acquire of sent in srn_comp_send_done (and
	 * in a transport's receive side) */
	__atomic_store_n(&qp->sq.sent, qp->sq.sent + 1, __ATOMIC_RELEASE);
	srn_comp_unlock(qp, locked);
	return wait;
}

/* What the transport gathered in this run goes out now, or is dropped
 * (discard: it is behind an error). */
static void srn_req_end_run(struct srn_qp *qp, bool discard)
{
	if (qp->tops && qp->tops->end_run)
		qp->tops->end_run(qp, discard);
}

/* Executes the WQE at sent; false when the queue must stop (stalled). */
static bool srn_req_step(struct srn_qp *qp, struct srn_swqe *w)
{
	enum ibv_wc_status status = IBV_WC_SUCCESS;
	enum srn_stall why = SRN_STALL_NONE;
	bool wait;
	int rc = 0;

	if (w->opcode == IBV_WR_BIND_MW)
		status = srn_mw_bind_exec(qp, w);
	else if (w->opcode == IBV_WR_LOCAL_INV)
		status = srn_mw_local_inv_exec(qp, w);
	else
		rc = qp->tops->execute(qp, w, &status, &why);

	if (rc == -EAGAIN && !srn_req_stall(qp, why, &status))
		return false;
	srn_req_unstall(qp);
	wait = srn_req_executed(qp, w, rc == -EINPROGRESS, status);
	if (status != IBV_WC_SUCCESS) {
		srn_req_end_run(qp, false); /* the WQEs ahead of it go */
		if (wait)
			return false; /* ERR once they are complete */
		srn_dbg("QP 0x%06x wr_id %llu failed: %s",
			qp->ibqpx.qp_base.qp_num, (unsigned long long)w->wr_id,
			srn_wc_status_str(status));
		srn_qp_error(qp); /* then srn_req_run's flush completes it */
	}
	return true;
}

/* The transport asks to send again from WQE pos on (go back N after an
 * RNR NAK): those WQEs went out but were dropped unanswered. */
static void srn_req_rewind(struct srn_qp *qp)
{
	struct srn_sq *sq = &qp->sq;
	uint64_t pos;
	bool locked;

	if (!qp->tops->rewind || !qp->tops->rewind(qp, &pos))
		return;
	locked = srn_comp_lock(qp);
	/* cons <= pos <= sent. release: pairs with the acquire of sent in
	 * srn_comp_send_done (and in a transport's receive side) */
	if (pos - sq->cons <= sq->sent - sq->cons)
		__atomic_store_n(&sq->sent, pos, __ATOMIC_RELEASE);
	srn_comp_unlock(qp, locked);
}

/* A handler asked for ERR (srn_qp_async_error/_fatal): sq_lock held. */
static void srn_req_take_error(struct srn_qp *qp)
{
	/* acq_rel: pairs with the release of pending_err in
	 * srn_qp_async_error, srn_qp_async_fatal and srn_progress_scan */
	unsigned why = atomic_exchange_explicit(&qp->pending_err, 0,
						memory_order_acq_rel);

	if (why & SRN_PENDING_FATAL)
		srn_qp_fatal(qp);
	else if (why)
		srn_qp_error(qp);
}

void srn_req_run(struct srn_qp *qp)
{
	struct srn_sq *sq = &qp->sq;

	qp->deferred = false; /* this run sends what the doorbell left */
	/* relaxed: the first loads only skip the exchanges when no flag is
	 * set (srn_req_take_error exchanges pending_err) */
	if (srn_unlikely(atomic_load_explicit(&qp->pending_err,
					      memory_order_relaxed)))
		srn_req_take_error(qp);
	/* acquire: pairs with the release of pending_run in the transport's
	 * RNR NAK handling, which wrote where to go back to for its rewind
	 * op (tops->rewind, called next); relaxed: the first load, as
	 * above */
	if (srn_unlikely(atomic_load_explicit(&qp->pending_run,
					      memory_order_relaxed)) &&
	    atomic_exchange_explicit(&qp->pending_run, 0,
				     memory_order_acquire) &&
	    qp->tops && srn_qp_state(qp) != IBV_QPS_ERR)
		srn_req_rewind(qp);
	while (sq->sent != sq->prod) {
		/* acquire: pairs with the release in srn_req_executed;
		 * only the move to ERR clears it (srn_req_flush, or RESET):
		 * nothing behind a failed WQE is executed */
		if (srn_qp_state(qp) == IBV_QPS_ERR || !qp->tops ||
		    atomic_load_explicit(&qp->err_wait, memory_order_acquire))
			break;
		/* relaxed: a hint, as above. An answer that arrived while we
		 * ran (an error NAK, the link lost) fails the QP before the
		 * next WQE goes out: nothing behind an error is executed */
		if (srn_unlikely(atomic_load_explicit(&qp->pending_err,
						      memory_order_relaxed))) {
			srn_req_end_run(qp, true);
			srn_req_take_error(qp);
			continue;
		}
		if (!srn_req_step(qp, srn_sq_wqe(qp, sq->sent))) {
			srn_req_end_run(qp, false);
			return;
		}
	}
	if (srn_qp_state(qp) == IBV_QPS_ERR) {
		srn_req_end_run(qp, true);
		srn_req_flush(qp);
	} else {
		srn_req_end_run(qp, false);
		if (srn_comp_send_done(qp))
			srn_qp_async_error(qp);
	}
	srn_req_unstall(qp);
}

/*
 * The doorbell (post_send, sq_lock held): runs the send queue, unless the
 * transport would rather send the new WQEs with the next ones (tcp_batch.c);
 * then the QP goes on the retry list, which the application's next empty
 * poll, its next wait for a completion event, or the progress thread's
 * timer (SRN_REQ_DEFER_NS at the latest) runs.
 */
void srn_req_doorbell(struct srn_qp *qp)
{
	/* relaxed: hints, as at the top of srn_req_run, which handles them */
	if (qp->tops && qp->tops->defer && qp->stall == SRN_STALL_NONE &&
	    srn_qp_state(qp) == IBV_QPS_RTS &&
	    !atomic_load_explicit(&qp->pending_err, memory_order_relaxed) &&
	    !atomic_load_explicit(&qp->pending_run, memory_order_relaxed) &&
	    qp->tops->defer(qp)) {
		if (!qp->deferred) {
			qp->deferred = true;
			srn_qp_want_run(qp);
			srn_progress_wake_at(srn_now_ns() + SRN_REQ_DEFER_NS);
		}
		return;
	}
	srn_req_run(qp);
}

/* The QP leaves its transport (RESET, destroy): sq_lock held. */
void srn_req_detach(struct srn_qp *qp)
{
	if (qp->tops)
		qp->tops->disconnect(qp);
	qp->tops = NULL;
	/* relaxed: sq_lock held, and no transport completes any more */
	atomic_store_explicit(&qp->err_wait, false, memory_order_relaxed);
	srn_req_unstall(qp);
	/* off the retry list for good before the QP is freed: after
	 * srn_qp_del no handler finds it to ask for a run */
	srn_lock(&qp->ctx->retry_lock);
	srn_qp_retry_del(qp->ctx, qp);
	srn_unlock(&qp->ctx->retry_lock);
}

/* retry_lock held: up to n QPs of the retry list, their sq_lock taken,
 * in batch (round robin: each QP looked at goes to the tail); how many
 * QPs could not be looked at now in *busy_p. */
static unsigned srn_req_retry_take(struct srn_context *ctx,
				   struct srn_qp **batch, unsigned n,
				   unsigned *busy_p)
{
	/* relaxed: under retry_lock, which guards the count's changes */
	unsigned left =
		atomic_load_explicit(&ctx->nretry, memory_order_relaxed);
	unsigned k = 0;

	for (; left && k < n; left--) {
		struct srn_qp *qp = srn_list_entry(ctx->retry_qps.next,
						   struct srn_qp, retry_link);

		srn_list_del(&qp->retry_link);
		srn_list_add_tail(&qp->retry_link, &ctx->retry_qps);
		if (srn_trylock(&qp->sq_lock))
			batch[k++] = qp; /* keeps sq_lock: not freed */
		else
			(*busy_p)++; /* its owner runs it anyway */
	}
	*busy_p += left;
	return k;
}

/*
 * Gives the send queues of ctx that need it (stalled, or a handler asked
 * for a run) a chance to move: only those, however many QPs ctx has.
 * Never blocks on a QP: a QP whose lock is taken is being run by its
 * owner anyway. Returns how many QPs could not be looked at now.
 */
unsigned srn_req_retry_stalled(struct srn_context *ctx)
{
	struct srn_qp *batch[16];
	unsigned n, busy = 0;
	bool fetch = false;

	srn_lock(&ctx->retry_lock);
	n = srn_req_retry_take(ctx, batch, SRN_ARRAY_SIZE(batch), &busy);
	srn_unlock(&ctx->retry_lock);
	for (unsigned i = 0; i < n; i++) {
		srn_req_run(batch[i]);
		fetch |= batch[i]->stall == SRN_STALL_FETCH;
		srn_req_retry_drop(batch[i]);
		srn_unlock(&batch[i]->sq_lock);
	}
	/* a fetch only an application thread may make: wake one that waits
	 * for a completion event to make it (srn_req_channel_work) */
	if (fetch && srn_in_progress_thread)
		srn_ctx_channels_poke(ctx);
	return busy;
}

/*
 * From the progress thread's handlers: the QP must go to ERR (its peer
 * died). Done by whoever runs the QP next (srn_req_run checks the flag):
 * the progress thread itself right after the handler, or the application.
 */
void srn_qp_async_error(struct srn_qp *qp)
{
	/* release: pairs with the acq_rel exchange in srn_req_take_error */
	atomic_fetch_or_explicit(&qp->pending_err, SRN_PENDING_ERR,
				 memory_order_release);
	srn_qp_want_run(qp);
	srn_progress_request_retry();
}

/* The same, because the QP's peer or its link was lost: the application
 * also gets IBV_EVENT_QP_FATAL, as from a device. */
void srn_qp_async_fatal(struct srn_qp *qp)
{
	/* release: pairs with the acq_rel exchange in srn_req_take_error */
	atomic_fetch_or_explicit(&qp->pending_err, SRN_PENDING_FATAL,
				 memory_order_release);
	srn_qp_want_run(qp);
	srn_progress_request_retry();
}

/* The progress thread's sweep retries stalled send queues. */
static struct srn_progress_hooks srn_req_hooks = {
	.sweep = srn_req_retry_stalled,
};

/* An application thread about to wait in ibv_get_cq_event runs the stalled
 * QPs, as its polling would: a fetch the progress thread could not make
 * (SRN_STALL_FETCH) is made here. */
static void srn_req_channel_work(struct srn_context *ctx)
{
	if (srn_req_retry_wanted(ctx))
		srn_req_retry_stalled(ctx);
}

__attribute__((constructor)) static void srn_req_init(void)
{
	srn_progress_hooks_add(&srn_req_hooks);
	srn_channel_work_set(srn_req_channel_work);
}
