// SPDX-License-Identifier: MIT
/*
 * softrnic — the TCP transport, requester side (docs/wire.md).
 *
 * One connection per QP pair (tcp_link.c). At RTR the QP whose (GID, QPN)
 * is the smaller one connects to the other's host port and says HELLO; the
 * other QP waits for that connection (its requests stall until it comes,
 * as they would for a peer not yet at RTR). The application thread that
 * rings the doorbell sends each request itself (sendmsg straight from the
 * registered buffers, no hand-off, no copy), and the WQE stays in flight
 * until its answer arrives: an ACK (cumulative, often carried by the peer's
 * own next request), READ_RESP straight into the local buffers, or
 * ATOMIC_RESP. WQEs complete in order.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/tcp/tcp.h"

static enum ibv_wc_status srn_tcp_status(uint32_t ws)
{
	static const enum ibv_wc_status map[SRN_WS_NR] = {
		[SRN_WS_OK] = IBV_WC_SUCCESS,
		[SRN_WS_RNR] = IBV_WC_RNR_RETRY_EXC_ERR,
		[SRN_WS_REM_ACCESS] = IBV_WC_REM_ACCESS_ERR,
		[SRN_WS_REM_INV_REQ] = IBV_WC_REM_INV_REQ_ERR,
		[SRN_WS_REM_OP] = IBV_WC_REM_OP_ERR,
	};

	return ws < SRN_WS_NR ? map[ws] : IBV_WC_REM_OP_ERR;
}

/* ---- requests ---- */

static void srn_tcp_req_hdr(const struct srn_swqe *w, struct srn_wire_hdr *h)
{
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM ||
		   w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	switch (w->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		srn_wire_hdr_init(h, SRN_WOP_SEND, w->psn,
				  (uint32_t)w->total_len);
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		srn_wire_hdr_init(h, SRN_WOP_WRITE, w->psn,
				  (uint32_t)w->total_len);
		break;
	case IBV_WR_RDMA_READ:
		srn_wire_hdr_init(h, SRN_WOP_READ_REQ, w->psn,
				  (uint32_t)w->total_len);
		break;
	default:
		srn_wire_hdr_init(h, SRN_WOP_ATOMIC, w->psn,
				  sizeof(struct srn_wire_atomic));
		if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
			h->flags |= SRN_WF_CAS;
		break;
	}
	if (imm) {
		h->flags |= SRN_WF_IMM;
		h->aux = w->imm_data;
	}
	if (w->opcode == IBV_WR_SEND_WITH_INV) {
		h->flags |= SRN_WF_INV;
		h->aux = w->imm_data;
	}
	if (w->send_flags & IBV_SEND_SOLICITED)
		h->flags |= SRN_WF_SOLICITED;
	h->rkey = w->rkey;
	h->raddr = w->remote_addr;
	h->srqn = w->xrc_srqn & 0xffffffu; /* 0 but for an XRC INI QP */
}

static bool srn_tcp_wants_answer(const struct srn_swqe *w)
{
	return srn_opcode_get(w->opcode)->flags & SRN_OP_LOCAL_WRITE;
}

/* May a READ or atomic go now? At most max_rd_atomic in flight. */
static bool srn_tcp_credit(struct srn_qp *qp, struct srn_tcp_qp *tq)
{
	unsigned max = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;

	/* acquire: pairs with the release of rd_out in srn_tcp_req_on_msg
	 * (a count: nothing is read after it that needs it) */
	return atomic_load_explicit(&tq->rd_out, memory_order_acquire) < max;
}

/* The payload of a READ or atomic request: the operands, or nothing. */
static unsigned srn_tcp_atomic_iov(const struct srn_swqe *w,
				   struct srn_wire_atomic *at,
				   struct iovec *iov)
{
	if (!(srn_opcode_get(w->opcode)->flags & SRN_OP_REMOTE_ATOMIC))
		return 0;
	at->compare_add = w->compare_add;
	at->swap = w->swap;
	iov->iov_base = at;
	iov->iov_len = sizeof(*at);
	return 1;
}

/* After an RNR NAK the target's timer must run out before we send
 * again. */
static bool srn_tcp_rnr_waiting(struct srn_tcp_qp *tq)
{
	/* relaxed: the receive side's srn_tcp_rnr_nak sets it, before the
	 * release of pending_run that made us go back */
	uint64_t until = __atomic_load_n(&tq->rnr_until_ns, __ATOMIC_RELAXED);

	if (srn_likely(!until))
		return false;
	if (srn_now_ns() < until) {
		srn_progress_wake_at(until);
		return true;
	}
	/* relaxed: a deadline, nothing is published with it */
	__atomic_store_n(&tq->rnr_until_ns, 0, __ATOMIC_RELAXED);
	return false;
}

/* srn_tcp_execute, once the WQE may go: numbers it and sends it (its
 * local SGEs are in iov[1..n]). -EINPROGRESS, or -EAGAIN with *stall. */
static int srn_tcp_send_request(struct srn_tcp_qp *tq, struct srn_tcp_link *l,
				struct srn_swqe *w, bool answer,
				struct iovec *iov, unsigned n,
				enum srn_stall *stall)
{
	struct srn_wire_atomic at;
	struct srn_wire_hdr h;

	/* release: the receive side matches answers against them (pairs
	 * with the acquires of tx_psn and w->psn in srn_tcp_acked and
	 * srn_tcp_answer_head); only sq_lock holders write tx_psn */
	__atomic_store_n(&w->psn, l->tx_psn, __ATOMIC_RELEASE);
	__atomic_store_n(&l->tx_psn, l->tx_psn + 1, __ATOMIC_RELEASE);
	srn_tcp_req_hdr(w, &h);
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	if (answer) { /* READ/atomic: only the request goes out */
		n = srn_tcp_atomic_iov(w, &at, iov + 1);
		/* relaxed: a count of READs and atomics in flight (credit);
		 * srn_tcp_credit reads it, under sq_lock as we are */
		atomic_fetch_add_explicit(&tq->rd_out, 1, memory_order_relaxed);
	}
	if (!answer && srn_tcp_batch_add(tq, l, &h, iov, n + 1))
		return -EINPROGRESS; /* goes when the run ends */
	if (srn_tcp_batch_flush(tq) ||
	    srn_tcp_link_request(l, &h, iov, n + 1)) {
		/* the connection broke: the receive side will tell whether
		 * the peer crashed (ERR now) or left in order (this WQE then
		 * times out, RETRY_EXC_ERR) */
		if (answer) /* relaxed: undoes the count above */
			atomic_fetch_sub_explicit(&tq->rd_out, 1,
						  memory_order_relaxed);
		*stall = SRN_STALL_NOT_READY;
		return -EAGAIN;
	}
	return -EINPROGRESS;
}

/* Our first request on l: PSNs on the wire continue from the QP's sq_psn
 * (set at RTS), which the peer was given as its rq_psn. sq_lock held. */
static void srn_tcp_tx_start(struct srn_qp *qp, struct srn_tcp_link *l)
{
	l->tx_started = true;
	l->resp_psn = qp->attr.sq_psn; /* the first answer we expect */
	/* release: resp_psn is set before the receive side can use it;
	 * pairs with the acquire of tx_psn in srn_tcp_acked and
	 * srn_tcp_answer_head */
	__atomic_store_n(&l->tx_psn, qp->attr.sq_psn, __ATOMIC_RELEASE);
}

static int srn_tcp_execute(struct srn_qp *qp, const struct srn_swqe *cw,
			   enum ibv_wc_status *status, enum srn_stall *stall)
{
	struct srn_tcp_qp *tq = qp->tpriv;
	/* acquire: pairs with the release of tq->link in srn_tcp_link_bind
	 * (or srn_tcp_connect_dial, srn_tcp_connect_wait) */
	struct srn_tcp_link *l = __atomic_load_n(&tq->link, __ATOMIC_ACQUIRE);
	struct srn_swqe *w = (struct srn_swqe *)cw;
	struct iovec iov[SRN_MAX_SGE + 2];
	bool answer = srn_tcp_wants_answer(w);
	unsigned n = 0;

	if (!l) { /* the peer has not connected to us yet */
		*stall = SRN_STALL_NOT_READY;
		return -EAGAIN;
	}
	/* acquire: pairs with the release in srn_tcp_link_down */
	switch (atomic_load_explicit(&l->gone, memory_order_acquire)) {
	case SRN_TCP_CLOSED: /* the peer QP is gone: nobody will answer, */
		*stall = SRN_STALL_NOT_READY; /* RETRY_EXC_ERR in the end */
		return -EAGAIN;
	case SRN_TCP_DEAD: /* the peer crashed: ERR and QP_FATAL now, as
			    * srn_tcp_link_down is about to ask, so that
			    * every WR is flushed whichever comes first */
		srn_qp_fatal(qp);
		*status = IBV_WC_WR_FLUSH_ERR;
		return 0;
	}
	if (srn_local_iov(qp, w, answer ? IBV_ACCESS_LOCAL_WRITE : 0, iov + 1,
			  &n)) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	if (answer && !srn_tcp_credit(qp, tq)) {
		*stall = SRN_STALL_CREDIT;
		return -EAGAIN;
	}
	if (srn_tcp_rnr_waiting(tq)) {
		*stall = SRN_STALL_RNR_WAIT;
		return -EAGAIN;
	}
	if (srn_unlikely(!l->tx_started))
		srn_tcp_tx_start(qp, l);
	return srn_tcp_send_request(tq, l, w, answer, iov, n, stall);
}

/* ---- answers (receive side, progress lock) ---- */

static void srn_tcp_wqe_done(struct srn_qp *qp, struct srn_swqe *w,
			     enum ibv_wc_status status)
{
	srn_lock(&qp->comp_lock);
	if (!w->done) { /* not flushed meanwhile */
		w->status = status;
		w->done = 1;
	}
	srn_unlock(&qp->comp_lock);
}

/* Is this link where the QP's requests go? Answers come only there. */
static bool srn_tcp_is_req_link(struct srn_tcp_link *l)
{
	/* acquire: pairs with the releases of tstate in srn_tcp_connect and
	 * srn_tcp_connect_wait (tq is freed only under the progress lock,
	 * which we hold) */
	struct srn_tcp_qp *tq =
		__atomic_load_n(&l->qp->tstate, __ATOMIC_ACQUIRE);

	/* acquire: pairs with the release of tq->link in srn_tcp_link_bind
	 * (or srn_tcp_connect_dial, srn_tcp_connect_wait) */
	return tq && __atomic_load_n(&tq->link, __ATOMIC_ACQUIRE) == l;
}

/* Every request up to and including psn is done at the target: their
 * WQEs complete, in order. A READ or atomic cannot be acknowledged this
 * way (its answer carries data). */
static int srn_tcp_acked(struct srn_tcp_link *l, uint32_t psn)
{
	struct srn_qp *qp = l->qp;
	/* acquire: pairs with the release of tx_psn in srn_tcp_send_request
	 * (and srn_tcp_rewind): the WQEs sent are visible */
	uint32_t last = __atomic_load_n(&l->tx_psn, __ATOMIC_ACQUIRE) - 1;

	if ((int32_t)(psn - (l->resp_psn - 1)) < 0 || (int32_t)(last - psn) < 0)
		return -EPROTO; /* acknowledges what we never sent */
	if (psn == l->resp_psn - 1)
		return 0;
	while (l->resp_psn != psn + 1) {
		struct srn_swqe *w = srn_sq_wqe(qp, l->resp_pos);

		/* acquire: pairs with the release of w->psn in
		 * srn_tcp_send_request */
		if (__atomic_load_n(&w->psn, __ATOMIC_ACQUIRE) != l->resp_psn ||
		    srn_tcp_wants_answer(w))
			return -EPROTO;
		srn_tcp_wqe_done(qp, w, IBV_WC_SUCCESS);
		l->resp_pos++;
		l->resp_psn++;
	}
	if (srn_comp_send_done(qp)) /* a failed WQE waited for these */
		srn_qp_async_error(qp);
	return 0;
}

int srn_tcp_req_on_ack(struct srn_tcp_link *l, uint32_t psn)
{
	if (!srn_tcp_is_req_link(l))
		return -EPROTO;
	l->rx_answers++; /* the ACK timer: the peer is answering */
	return srn_tcp_acked(l, psn);
}

/* An answer that is the WQE's own (READ_RESP, ATOMIC_RESP, a NAK): the
 * requests before it are done, and this one is the next WQE. */
static int srn_tcp_answer_head(struct srn_tcp_link *l,
			       const struct srn_wire_hdr *h,
			       struct srn_swqe **w_p)
{
	/* acquire: pairs with the release of tx_psn in srn_tcp_send_request
	 * (and srn_tcp_rewind) */
	uint32_t last = __atomic_load_n(&l->tx_psn, __ATOMIC_ACQUIRE) - 1;
	int err = srn_tcp_acked(l, h->psn - 1);
	struct srn_swqe *w;

	if (err)
		return err;
	/* a PSN we sent: its WQE is in flight, so its slot stays put (an
	 * empty send queue may move its slots: srn_sq_rebase) */
	if ((int32_t)(last - h->psn) < 0 || h->psn != l->resp_psn)
		return -EPROTO;
	w = srn_sq_wqe(l->qp, l->resp_pos);
	/* acquire: pairs with the release of w->psn in srn_tcp_send_request */
	if (__atomic_load_n(&w->psn, __ATOMIC_ACQUIRE) != h->psn)
		return -EPROTO;
	*w_p = w;
	return 0;
}

int srn_tcp_req_on_hdr(struct srn_tcp_link *l, const struct srn_wire_hdr *h,
		       struct iovec *iov, unsigned *niov)
{
	struct srn_swqe *w;
	int err;

	if (!srn_tcp_is_req_link(l) || h->opcode == SRN_WOP_HELLO_ACK)
		return -EPROTO;
	if (h->opcode == SRN_WOP_ACK && h->aux == SRN_WS_OK)
		return srn_tcp_acked(l, h->psn);
	err = srn_tcp_answer_head(l, h, &w);
	if (err)
		return err;
	if (h->opcode == SRN_WOP_ACK) { /* a NAK */
		l->resp_status = srn_tcp_status(h->aux);
		return 0;
	}
	if ((h->opcode == SRN_WOP_READ_RESP &&
	     (w->opcode != IBV_WR_RDMA_READ || h->len != w->total_len)) ||
	    (h->opcode == SRN_WOP_ATOMIC_RESP &&
	     !(srn_opcode_get(w->opcode)->flags & SRN_OP_REMOTE_ATOMIC)))
		return -EPROTO;
	l->resp_status = IBV_WC_SUCCESS;
	/* the local SGEs were checked when the request left; check again
	 * (an MR may have gone meanwhile) and land the data there */
	if (srn_local_iov(l->qp, w, IBV_ACCESS_LOCAL_WRITE, iov, niov)) {
		*niov = 0;
		l->resp_status = IBV_WC_LOC_PROT_ERR;
	}
	return 0;
}

/*
 * Receive side: the target found no receive WQE for our head request and
 * dropped it and everything after it. True: the requester goes back and
 * sends them again after the target's timer (h->rkey); false: the QP's
 * rnr_retry is used up (7: never), the WQE fails.
 */
static bool srn_tcp_rnr_nak(struct srn_tcp_link *l,
			    const struct srn_wire_hdr *h)
{
	struct srn_qp *qp = l->qp;
	/* acquire: pairs with the releases of tstate in srn_tcp_connect and
	 * srn_tcp_connect_wait (see srn_tcp_is_req_link) */
	struct srn_tcp_qp *tq = __atomic_load_n(&qp->tstate, __ATOMIC_ACQUIRE);
	unsigned retry = qp->attr.rnr_retry;

	if (!tq->rnr_seen || tq->rnr_psn != h->psn) { /* a new WQE */
		tq->rnr_seen = true;
		tq->rnr_psn = h->psn;
		tq->rnr_left = retry;
	}
	if (retry != 7) {
		if (!tq->rnr_left)
			return false;
		tq->rnr_left--;
	}
	/* relaxed: published by the release of pending_run below */
	__atomic_store_n(&tq->rnr_until_ns,
			 srn_now_ns() + srn_rnr_timer_ns((uint8_t)h->rkey),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&tq->rewind_pos, l->resp_pos, __ATOMIC_RELAXED);
	__atomic_store_n(&tq->rewind_psn, l->resp_psn, __ATOMIC_RELAXED);
	/* release: pairs with the acquire exchange in srn_req_run, which
	 * then calls srn_tcp_rewind */
	atomic_store_explicit(&qp->pending_run, 1, memory_order_release);
	srn_qp_want_run(qp);
	srn_progress_request_retry();
	return true;
}

/* sq_lock, after srn_req_run took qp->pending_run: go back to the WQE the
 * target NAKed (RNR). */
static bool srn_tcp_rewind(struct srn_qp *qp, uint64_t *pos_p)
{
	struct srn_tcp_qp *tq = qp->tpriv;
	/* acquire: pairs with the release of tq->link in srn_tcp_link_bind
	 * (or srn_tcp_connect_dial, srn_tcp_connect_wait) */
	struct srn_tcp_link *l = __atomic_load_n(&tq->link, __ATOMIC_ACQUIRE);
	uint64_t pos;

	if (!l)
		return false;
	/* relaxed: srn_tcp_rnr_nak wrote it before the release of
	 * pending_run that srn_req_run acquired before calling us */
	pos = __atomic_load_n(&tq->rewind_pos, __ATOMIC_RELAXED);
	if (qp->sq.sent - pos > qp->sq.size)
		return false; /* not ours to go back to */
	for (uint64_t i = pos; i != qp->sq.sent; i++) /* dropped unanswered */
		if (srn_tcp_wants_answer(srn_sq_wqe(qp, i)))
			/* relaxed: srn_tcp_send_request's count, undone */
			atomic_fetch_sub_explicit(&tq->rd_out, 1,
						  memory_order_relaxed);
	/* release: pairs with the acquire of tx_psn in srn_tcp_acked and
	 * srn_tcp_answer_head. relaxed: rewind_psn, as rewind_pos above */
	__atomic_store_n(&l->tx_psn,
			 __atomic_load_n(&tq->rewind_psn, __ATOMIC_RELAXED),
			 __ATOMIC_RELEASE);
	*pos_p = pos;
	return true;
}

int srn_tcp_req_on_msg(struct srn_tcp_link *l, const struct srn_wire_hdr *h)
{
	struct srn_qp *qp = l->qp;
	struct srn_swqe *w;
	bool answer;

	l->rx_answers++; /* the ACK timer: the peer is answering */
	if (h->opcode == SRN_WOP_ACK && h->aux == SRN_WS_OK)
		return 0; /* done in srn_tcp_req_on_hdr */
	if (h->opcode == SRN_WOP_ACK && h->aux == SRN_WS_RNR &&
	    srn_tcp_rnr_nak(l, h))
		return 0; /* not done: sent again later */
	w = srn_sq_wqe(qp, l->resp_pos);
	/* read before the WQE is done: from then on the completer may free
	 * its slot and a post reuse it */
	answer = srn_tcp_wants_answer(w);
	srn_tcp_wqe_done(qp, w, l->resp_status);
	l->resp_pos++;
	l->resp_psn++;
	if (answer) {
		/* acquire: pairs with the releases of tstate in
		 * srn_tcp_connect and srn_tcp_connect_wait */
		struct srn_tcp_qp *tq =
			__atomic_load_n(&qp->tstate, __ATOMIC_ACQUIRE);

		/* release: pairs with the acquire in srn_tcp_credit. relaxed:
		 * nstalled is a hint (srn_req_unstall) */
		atomic_fetch_sub_explicit(&tq->rd_out, 1, memory_order_release);
		if (atomic_load_explicit(&qp->ctx->nstalled,
					 memory_order_relaxed))
			srn_progress_request_retry(); /* a credit stall */
	}
	if (srn_comp_send_done(qp) || l->resp_status != IBV_WC_SUCCESS)
		srn_qp_async_error(qp);
	return 0;
}

/* The link went away: are requests of ours still unanswered? They never
 * will be; the caller fails the QP (at once, or when its retries would
 * have run out). */
bool srn_tcp_req_down(struct srn_tcp_link *l)
{
	/* acquire: pairs with the release of sent in srn_req_executed (and
	 * srn_req_flush, srn_req_rewind) */
	return srn_tcp_is_req_link(l) &&
	       l->resp_pos !=
		       __atomic_load_n(&l->qp->sq.sent, __ATOMIC_ACQUIRE);
}

/* Our requests on l got no answer in time (the peer left in order and
 * its retry time ran out, or the ACK timer): as on a device whose retries
 * ran out, the oldest completes with RETRY_EXC_ERR and the QP goes to ERR,
 * which flushes the rest. Progress lock. */
static void srn_tcp_req_timeout(struct srn_tcp_link *l)
{
	struct srn_qp *qp = l->qp;

	srn_tcp_wqe_done(qp, srn_sq_wqe(qp, l->resp_pos), IBV_WC_RETRY_EXC_ERR);
	l->resp_pos++;
	l->resp_psn++;
	srn_tcp_link_stop(l); /* a sender blocked on l gives up */
	/* completed once the requester has moved the QP to ERR (it flushes
	 * the rest; srn_comp_send_done holds an error back until then) */
	srn_qp_async_error(qp);
}

/*
 * The RC ACK timer, at every tick of srn_tcp_watchdog: requests of ours
 * that got no answer at all (no ACK, NAK or response) for the QP's budget,
 * timeout x (retry_cnt + 1), at least SRN_TCP_ACK_FLOOR_NS, time out. A
 * stopped peer's kernel still acknowledges TCP segments and answers
 * keepalives: only this notices it. timeout 0 waits forever (the spec's
 * infinite timeout). Progress lock.
 */
static void srn_tcp_req_tick(struct srn_tcp_link *l, uint64_t now)
{
	struct srn_qp *qp = l->qp;
	uint64_t budget;

	if (!qp || !srn_tcp_req_down(l)) {
		l->wait_since_ns = 0; /* nothing of ours in flight here */
		return;
	}
	if (!l->wait_since_ns || l->rx_answers != l->tick_answers) {
		l->wait_since_ns = now; /* waiting starts, or goes on */
		l->tick_answers = l->rx_answers;
		return;
	}
	budget = srn_ack_timeout_ns(qp->attr.timeout) *
		 (qp->attr.retry_cnt + 1u);
	if (!budget || now - l->wait_since_ns < budget ||
	    now - l->wait_since_ns < SRN_TCP_ACK_FLOOR_NS)
		return;
	srn_warn("QP 0x%06x: no answer from %s for %.1f s: retries exhausted",
		 qp->ibqpx.qp_base.qp_num, l->desc,
		 (now - l->wait_since_ns) / 1e9);
	l->wait_since_ns = 0;
	srn_tcp_req_timeout(l);
}

/* ---- connection ---- */

/* Our HELLO to QP dqpn, with our rq_psn: the target's sq_psn, our proof
 * of knowing the PSNs (srn_tcp_hello_proof). */
static void srn_tcp_hello_init(struct srn_wire_hello *hello, struct srn_qp *qp,
			       uint32_t dqpn)
{
	memset(hello, 0, sizeof(*hello));
	hello->src_qpn = qp->ibqpx.qp_base.qp_num;
	hello->dst_qpn = dqpn;
	hello->rq_psn = srn_qp_rx_get(qp).rq_psn & 0xffffff;
	memcpy(hello->src_gid, srn_device_get()->gid.raw, 16);
}

/* The peer's HELLO_ACK: 0, or -errno (its refusal, or no answer). */
static int srn_tcp_hello_wait(int fd)
{
	struct srn_wire_hdr rep;
	size_t got = 0;

	while (got < sizeof(rep)) {
		ssize_t k = recv(fd, (char *)&rep + got, sizeof(rep) - got, 0);

		if (k <= 0)
			return k == 0 ? -ECONNRESET : -errno;
		got += k;
	}
	if (srn_wire_hdr_check(&rep) != 0 || rep.opcode != SRN_WOP_HELLO_ACK)
		return -EPROTO;
	return rep.aux ? -(int)(rep.aux & 0xfff) : 0;
}

static int srn_tcp_hello(int fd, struct srn_qp *qp, uint32_t dqpn)
{
	struct srn_wire_hello hello;
	struct srn_wire_hdr h;
	struct iovec iov[2] = { { &h, sizeof(h) }, { &hello, sizeof(hello) } };

	srn_tcp_hello_init(&hello, qp, dqpn);
	srn_wire_hdr_init(&h, SRN_WOP_HELLO, 0, sizeof(hello));
	if (srn_tcp_sendv(fd, iov, 2))
		return -ECONNRESET;
	return srn_tcp_hello_wait(fd);
}

/*
 * The mediated path to QP dqpn of this host, another user's: its control
 * plane gives us a unix stream socket (engine/ctl.c) after the kernel
 * told it that we own our QPN; our HELLO goes with the request, its
 * HELLO_ACK comes on the link. No TCP socket, no address: the same
 * messages, the same checks at the target (docs/wire.md). TCP's own
 * options (keepalive, user timeout, no delay) do not apply to a unix
 * socket: a peer that dies closes its end, one that stops is caught by
 * the RC ACK timer (srn_tcp_req_tick). The fd, or -errno.
 */
static int srn_tcp_dial_mediated(uint32_t dqpn, struct srn_qp *qp)
{
	struct timeval tv = { 5, 0 }, wait = { 0, SRN_TCP_SEND_WAIT_MS * 1000 };
	struct srn_wire_hello hello;
	int fd, err;

	srn_tcp_hello_init(&hello, qp, dqpn);
	fd = srn_ctl_mediate(dqpn, hello.src_qpn, &hello, sizeof(hello), 5);
	if (fd < 0)
		return fd;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	err = srn_tcp_hello_wait(fd);
	if (err) {
		close(fd);
		return err;
	}
	/* as a dialed TCP link: sends block while the peer does not read,
	 * looking every SRN_TCP_SEND_WAIT_MS whether to give up */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
	return fd;
}

static int srn_tcp_dial(const union ibv_gid *dgid, uint32_t dqpn,
			struct srn_qp *qp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(srn_tcp_port()) },
			   self = { .sin_family = AF_INET,
				    .sin_addr.s_addr = srn_device_get()->ipv4 };
	struct timeval tv = { 5, 0 }, wait = { 0, SRN_TCP_SEND_WAIT_MS * 1000 };
	int fd, err;

	memcpy(&sa.sin_addr.s_addr, dgid->raw + 12, 4);
	fd = srn_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a peer host that vanishes: the connection breaks (then ERR) */
	srn_tcp_sock_timeouts(fd);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* from our GID's address, as a RoCE packet would be: the peer
	 * checks it (srn_tcp_link_matches); a GID address that is not
	 * local leaves the choice to the kernel */
	bind(fd, (struct sockaddr *)&self, sizeof(self));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		err = -errno;
	else
		err = srn_tcp_hello(fd, qp, dqpn);
	if (err) {
		close(fd);
		return err;
	}
	/* from now on sends block as long as TCP pushes back, looking every
	 * SRN_TCP_SEND_WAIT_MS whether to give up (srn_tcp_sendv_or) */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
	return fd;
}

/* Who connects: the QP with the smaller (GID, QPN); both if it is one QP
 * looped to itself. */
static bool srn_tcp_we_dial(struct srn_qp *qp, const struct ibv_qp_attr *a)
{
	int c = memcmp(srn_device_get()->gid.raw, a->ah_attr.grh.dgid.raw, 16);

	return c < 0 || (c == 0 && qp->ibqpx.qp_base.qp_num <= a->dest_qp_num);
}

/* A QP connected to itself: it dials and accepts. */
static bool srn_tcp_self(struct srn_qp *qp, const struct srn_tcp_qp *tq)
{
	return tq->dqpn == qp->ibqpx.qp_base.qp_num &&
	       !memcmp(tq->dgid, srn_device_get()->gid.raw, 16);
}

static int srn_tcp_connect_dial(struct srn_qp *qp, struct srn_tcp_qp *tq,
				const struct ibv_qp_attr *attr)
{
	struct srn_tcp_link *l;
	char ip[INET_ADDRSTRLEN];
	int fd = -ECONNRESET, err;

	/* a connection can land in a process that is just closing its
	 * listener: try a few times */
	for (int i = 0; i < 5 && (fd == -ECONNRESET || fd == -ECONNREFUSED ||
				  fd == -EACCES);
	     i++) {
		if (fd == -EACCES) /* the peer's old link, left in order, may
				    * not be gone yet: its BYE races us */
			usleep(20000);
		fd = tq->mediated ?
			     srn_tcp_dial_mediated(attr->dest_qp_num, qp) :
			     srn_tcp_dial(&attr->ah_attr.grh.dgid,
					  attr->dest_qp_num, qp);
	}
	inet_ntop(AF_INET, attr->ah_attr.grh.dgid.raw + 12, ip, sizeof(ip));
	if (fd < 0) {
		srn_err("QP 0x%06x: connecting to QP 0x%06x at %s:%u%s: %s",
			qp->ibqpx.qp_base.qp_num, attr->dest_qp_num, ip,
			srn_tcp_port(), tq->mediated ? " (mediated)" : "",
			strerror(-fd));
		return fd == -ENOENT || fd == -ECONNREFUSED ? -EINVAL : fd;
	}
	l = srn_tcp_link_new(fd);
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	l->mediated = tq->mediated;
	memcpy(l->hello.src_gid, tq->dgid, 16);
	l->hello.src_qpn = tq->dqpn;
	srn_tcp_link_name(l);
	snprintf(tq->desc, sizeof(tq->desc), "%s", l->desc);
	l->qp = qp;
	srn_progress_lock(); /* srn_tcp_link_own: no receive side runs */
	pthread_mutex_lock(&qp->conn_lock);
	srn_list_add_tail(&l->pl.link, &qp->links);
	/* release: the link is set up before it is seen; pairs with the
	 * acquire of tq->link in srn_tcp_execute and srn_tcp_is_req_link */
	__atomic_store_n(&tq->link, l, __ATOMIC_RELEASE);
	/* the peer's requests come back on the link we dialed; a QP looped
	 * to itself receives them on the link it accepts (srn_tcp_link_bind) */
	if (!srn_tcp_self(qp, tq))
		srn_tcp_link_own(l, qp, tq);
	pthread_mutex_unlock(&qp->conn_lock);
	srn_progress_unlock();
	err = srn_tcp_link_add(l);
	if (err) {
		pthread_mutex_lock(&qp->conn_lock);
		/* release: pairs with the acquire of tq->link in
		 * srn_tcp_execute (a NULL publishes nothing) */
		__atomic_store_n(&tq->link, NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&qp->conn_lock);
		srn_tcp_link_free(l);
	}
	return err;
}

/*
 * The peer connects to us: its connection may be here already, among the
 * candidates that arrived before our RTR. Those that match our RTR
 * attributes (srn_tcp_link_matches) stay candidates until one proves
 * itself (its HELLO at our RTS, or its first request's PSN:
 * srn_tcp_link_prove), but a mediated one, whose peer the kernel vouched
 * for, is the QP's link at once; the others are closed, costing nothing
 * but their sockets.
 */
static void srn_tcp_connect_wait(struct srn_qp *qp, struct srn_tcp_qp *tq)
{
	struct srn_list *pos, *tmp, refused = SRN_LIST_INIT(refused);
	bool owned;

	snprintf(tq->desc, sizeof(tq->desc),
		 "tcp (waiting for qpn 0x%06x to connect)", tq->dqpn);
	srn_progress_lock(); /* srn_tcp_link_own: no receive side runs */
	pthread_mutex_lock(&qp->conn_lock);
	/* release: tq is set up before the receive side sees it; pairs
	 * with the acquire of tstate in srn_tcp_is_req_link */
	__atomic_store_n(&qp->tstate, tq, __ATOMIC_RELEASE);
	srn_list_for_each_safe(pos, tmp, &qp->links) {
		struct srn_tcp_link *l =
			container_of(pos, struct srn_tcp_link, pl.link);

		/* acquire: pairs with the release in srn_tcp_link_down */
		if (!tq->peer_link && srn_tcp_link_matches(l, tq) &&
		    !atomic_load_explicit(&l->gone, memory_order_acquire)) {
			if (l->mediated)
				srn_tcp_link_own(l, qp, tq);
			continue;
		}
		srn_list_del(&l->pl.link);
		srn_list_add_tail(&l->pl.link, &refused);
	}
	/* read while conn_lock is held, as by every writer of peer_link: the
	 * receive side may set it as soon as the locks are dropped */
	owned = tq->peer_link != NULL;
	pthread_mutex_unlock(&qp->conn_lock);
	srn_list_for_each_safe(pos, tmp, &refused) {
		struct srn_tcp_link *l =
			container_of(pos, struct srn_tcp_link, pl.link);

		srn_list_init(&l->pl.link);
		l->qp = NULL; /* not the QP's: its end touches nothing */
		srn_tcp_link_free(l);
	}
	srn_progress_unlock();
	if (owned)
		srn_progress_request_retry(); /* its requests can go now */
}

static int srn_tcp_connect_as(struct srn_qp *qp, const struct ibv_qp_attr *attr,
			      bool mediated)
{
	struct srn_tcp_qp *tq = calloc(1, sizeof(*tq));
	int err = 0;

	if (!tq)
		return -ENOMEM;
	memcpy(tq->dgid, attr->ah_attr.grh.dgid.raw, 16);
	tq->dqpn = attr->dest_qp_num;
	tq->mediated = mediated;
	tq->dialer = srn_tcp_we_dial(qp, attr);
	qp->tpriv = tq;
	if (tq->dialer) {
		pthread_mutex_lock(&qp->conn_lock);
		/* release: pairs with the acquire of tstate in
		 * srn_tcp_is_req_link */
		__atomic_store_n(&qp->tstate, tq, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&qp->conn_lock);
		err = srn_tcp_connect_dial(qp, tq, attr);
	} else {
		srn_tcp_connect_wait(qp, tq);
	}
	if (err) {
		srn_progress_lock(); /* no receive side looks at tq now */
		pthread_mutex_lock(&qp->conn_lock);
		/* release: pairs with the acquire of tstate in
		 * srn_tcp_is_req_link (a NULL publishes nothing) */
		__atomic_store_n(&qp->tstate, NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&qp->conn_lock);
		srn_progress_unlock();
		qp->tpriv = NULL;
		free(tq);
	}
	return err;
}

static int srn_tcp_connect(struct srn_qp *qp, const struct ibv_qp_attr *attr)
{
	return srn_tcp_connect_as(qp, attr, false);
}

/* The peer QP is another user's, on this host: the same protocol, over a
 * mediated link (srn_tcp_dial_mediated, srn_tcp_mediate). */
static int srn_tcp_connect_mediated(struct srn_qp *qp,
				    const struct ibv_qp_attr *attr)
{
	return srn_tcp_connect_as(qp, attr, true);
}

static void srn_tcp_disconnect(struct srn_qp *qp)
{
	struct srn_tcp_qp *tq = qp->tpriv;
	struct srn_tcp_link *l, *p;

	if (!tq)
		return;
	srn_progress_lock(); /* no receive side runs on the link now */
	pthread_mutex_lock(&qp->conn_lock);
	l = tq->link;
	p = tq->peer_link; /* another link only for a QP looped to itself */
	/* release: pairs with the acquire of tstate in srn_tcp_is_req_link
	 * (a NULL publishes nothing; the progress lock we hold keeps the
	 * receive side out) */
	__atomic_store_n(&qp->tstate, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&qp->conn_lock);
	if (l) {
		srn_tcp_link_bye(l);
		srn_tcp_link_free(l);
	}
	if (p && p != l) {
		srn_tcp_link_bye(p);
		srn_tcp_link_free(p);
	}
	srn_progress_unlock();
	free(tq);
	qp->tpriv = NULL;
}

/* ibv_query_qp: the PSNs where the link is now, 24 bits (sq_lock held). */
static void srn_tcp_query(struct srn_qp *qp, struct ibv_qp_attr *attr)
{
	struct srn_tcp_qp *tq = qp->tpriv;
	struct srn_tcp_link *l, *p;
	uint64_t left;

	if (!tq)
		return;
	/* a link is freed only by srn_tcp_disconnect, under sq_lock as we
	 * are, or by the progress thread: read under the progress lock */
	srn_progress_lock();
	/* acquire: pairs with the release of tq->link in srn_tcp_link_own
	 * (or srn_tcp_connect_dial) */
	l = __atomic_load_n(&tq->link, __ATOMIC_ACQUIRE);
	/* acquire: pairs with the release of peer_link in srn_tcp_link_own */
	p = __atomic_load_n(&tq->peer_link, __ATOMIC_ACQUIRE);
	/* acquire: pairs with the release in srn_tcp_peer_link_clear */
	left = __atomic_load_n(&tq->left_psn, __ATOMIC_ACQUIRE);
	if (l && l->tx_started)
		/* acquire: pairs with the release of tx_psn in
		 * srn_tcp_send_request */
		attr->sq_psn = __atomic_load_n(&l->tx_psn, __ATOMIC_ACQUIRE) &
			       0xffffff;
	if (p)
		/* acquire: pairs with the release of done_psn in
		 * srn_tcp_link_done */
		attr->rq_psn =
			(__atomic_load_n(&p->done_psn, __ATOMIC_ACQUIRE) + 1) &
			0xffffff;
	else if (left) /* the peer left: where it got to */
		attr->rq_psn = (uint32_t)left & 0xffffff;
	srn_progress_unlock();
}

static const char *srn_tcp_describe(struct srn_qp *qp)
{
	struct srn_tcp_qp *tq = qp->tpriv;

	return tq ? tq->desc : "tcp (not connected)";
}

/* Any destination: this host (forced, for tests) or another. */
static bool srn_tcp_reaches(const union ibv_gid *dgid)
{
	return true;
}

static void srn_tcp_qp_gone(struct srn_qp *qp)
{
	srn_udp_qp_destroy(qp);
	srn_tcp_qp_destroy(qp);
}

static const struct srn_transport_ops srn_tcp_transport_ops = {
	.name = "tcp",
	.rank = 1,
	.async = true,
	.reaches = srn_tcp_reaches,
	.connect = srn_tcp_connect,
	.disconnect = srn_tcp_disconnect,
	.execute = srn_tcp_execute,
	.rewind = srn_tcp_rewind,
	.end_run = srn_tcp_batch_end,
	.defer = srn_tcp_defer,
	.describe = srn_tcp_describe,
	.query = srn_tcp_query,
	.qp_destroy = srn_tcp_qp_gone,
	.ud_send = srn_udp_ud_send,
	.ud_open = srn_udp_ud_open,
	.mcast = srn_udp_mcast,
	.kick = srn_tcp_kick,
	.adopt = srn_tcp_adopt,
	.connect_mediated = srn_tcp_connect_mediated,
	.mediate = srn_tcp_mediate,
	.hooks = &srn_tcp_hooks,
};

static const struct srn_tcp_up_ops srn_tcp_up_ops = {
	.resp_on_hdr = srn_tcp_resp_on_hdr,
	.resp_on_msg = srn_tcp_resp_on_msg,
	.req_on_hdr = srn_tcp_req_on_hdr,
	.req_on_msg = srn_tcp_req_on_msg,
	.req_on_ack = srn_tcp_req_on_ack,
	.req_down = srn_tcp_req_down,
	.req_timeout = srn_tcp_req_timeout,
	.req_tick = srn_tcp_req_tick,
};

/* When the library is loaded: the link's upcalls, then the transport. */
__attribute__((constructor)) static void srn_tcp_init(void)
{
	srn_tcp_link_set_up(&srn_tcp_up_ops);
	srn_transport_register(&srn_tcp_transport_ops);
}
