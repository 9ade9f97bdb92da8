// SPDX-License-Identifier: MIT
/*
 * softrnic — the TCP transport's doorbell batching (docs/wire.md,
 * "Batching requests").
 *
 * Each request is a system call on the sending side and a TCP segment
 * through the kernel on both: for small messages that is nearly all the
 * cost (8 B SENDs across a veth: one sendmsg per request was ~90% of the
 * sender's CPU). A NIC fetches the WQEs a doorbell announced at its own
 * pace, several at a time; so does this transport:
 *
 * - one run of the requester gathers the small SENDs and WRITEs it
 *   executes (srn_tcp_batch_add) and sends them with one sendmsg when the
 *   run ends (srn_tcp_batch_end) or the batch is full;
 * - the doorbell may leave the WQEs just posted unsent (srn_tcp_defer)
 *   while the application is polling its CQs and answers to earlier
 *   requests are on their way: its next empty poll, or its next
 *   ibv_req_notify_cq / ibv_get_cq_event, runs them (the QP is on its
 *   context's retry list), and the progress thread's timer does at the
 *   latest SRN_REQ_DEFER_NS later. A QP with nothing in flight (a
 *   ping-pong) always sends at once.
 *
 * A batch lives within one run: nothing gathered is left when the run
 * ends, so a rewind (go back N), a change of link or a move to ERR never
 * finds one. A run that ends with the QP in ERR drops its batch: those
 * WQEs were behind the error and are flushed unexecuted.
 */
#include <errno.h>
#include <string.h>

#include "transport/tcp/tcp.h"

static void srn_tcp_batch_reset(struct srn_tcp_batch *b)
{
	b->link = NULL;
	b->nwqe = b->niov = 0;
}

/* Adds request h (iov[0] is h, iov[1..n-1] its payload) to the batch
 * when it qualifies; false: the caller sends it itself. sq_lock. */
bool srn_tcp_batch_add(struct srn_tcp_qp *tq, struct srn_tcp_link *l,
		       const struct srn_wire_hdr *h, const struct iovec *iov,
		       unsigned n)
{
	struct srn_tcp_batch *b = &tq->batch;

	if (h->len > SRN_TCP_BATCH_LEN || n > SRN_TCP_BATCH_IOV)
		return false;
	if (b->link &&
	    (b->link != l || b->nwqe == SRN_TCP_BATCH_WQES ||
	     b->niov + n > SRN_TCP_BATCH_IOV) &&
	    srn_tcp_batch_flush(tq))
		return false; /* the caller's send sees the broken link */
	b->link = l;
	b->hdr[b->nwqe] = *h;
	b->iov[b->niov].iov_base = &b->hdr[b->nwqe];
	b->iov[b->niov].iov_len = sizeof(*h);
	memcpy(&b->iov[b->niov + 1], iov + 1, (n - 1) * sizeof(*iov));
	b->nwqe++;
	b->niov += n;
	return true;
}

/* Sends the batch with one sendmsg (the last request carries the ACK we
 * owe). 0, or -errno when the link broke: those WQEs are in flight and
 * end as any request lost with its link (docs/wire.md). sq_lock. */
int srn_tcp_batch_flush(struct srn_tcp_qp *tq)
{
	struct srn_tcp_batch *b = &tq->batch;
	int err = 0;

	if (!b->link)
		return 0;
	if (b->nwqe)
		err = srn_tcp_link_request(b->link, &b->hdr[b->nwqe - 1],
					   b->iov, b->niov);
	if (err)
		srn_dbg("%s: %u gathered requests not sent: %s", tq->desc,
			b->nwqe, strerror(-err));
	srn_tcp_batch_reset(b);
	return err;
}

/* The requester's run ends: the batch goes, or is dropped (ERR). */
void srn_tcp_batch_end(struct srn_qp *qp, bool discard)
{
	struct srn_tcp_qp *tq = qp->tpriv;

	if (!tq || !tq->batch.link)
		return;
	if (discard)
		srn_tcp_batch_reset(&tq->batch);
	else
		srn_tcp_batch_flush(tq);
}

/*
 * The doorbell: may the WQEs just posted wait for the next ones? Only
 * small SENDs and WRITEs, fewer than a batch (and than a quarter of the
 * send queue), while requests are in flight (their answers bring the
 * application back to its CQ) and the application is polling. sq_lock.
 */
bool srn_tcp_defer(struct srn_qp *qp)
{
	struct srn_tcp_qp *tq = qp->tpriv;
	struct srn_sq *sq = &qp->sq;
	const struct srn_swqe *w;
	struct srn_tcp_link *l;

	/* relaxed: cons is the completer's (comp_lock); a hint of whether
	 * answers are still to come */
	if (!tq || sq->prod == sq->sent ||
	    sq->sent == __atomic_load_n(&sq->cons, __ATOMIC_RELAXED) ||
	    sq->prod - sq->sent >= SRN_TCP_BATCH_WQES ||
	    sq->prod - sq->sent >= sq->max_wr / 4)
		return false; /* nothing in flight, or a batch is ready (or
			       * would fill a small send queue) */
	/* acquire: pairs with the release of tq->link in srn_tcp_link_bind
	 * (or srn_tcp_connect_dial, srn_tcp_connect_wait) */
	l = __atomic_load_n(&tq->link, __ATOMIC_ACQUIRE);
	if (!l || !l->tx_started || !srn_progress_app_polling(SRN_REQ_DEFER_NS))
		return false;
	w = srn_sq_wqe(qp, sq->prod - 1);
	return w->total_len <= SRN_TCP_BATCH_LEN &&
	       !(srn_opcode_get(w->opcode)->flags &
		 (SRN_OP_LOCAL_WRITE | SRN_OP_LOCAL));
}
