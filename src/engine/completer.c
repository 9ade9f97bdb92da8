// SPDX-License-Identifier: MIT
/*
 * softrnic — completions for the owner's side of a QP: send completions
 * into the send CQ, in order, each once its slot is free and an error only
 * once the QP is in ERR, and flushed receives into the receive CQ. (Receive
 * completions of placed SENDs are written by the initiator, responder.c.)
 */
#include "engine/engine.h"
#include "engine/transport.h"

static bool srn_wqe_signaled(const struct srn_qp *qp, const struct srn_swqe *w)
{
	return qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED);
}

/* A synchronous transport completes only under sq_lock: no other lock. */
bool srn_comp_lock(struct srn_qp *qp)
{
	bool async = qp->tops && qp->tops->async;

	if (async)
		srn_lock(&qp->comp_lock);
	return async;
}

void srn_comp_unlock(struct srn_qp *qp, bool locked)
{
	if (locked)
		srn_unlock(&qp->comp_lock);
}

/*
 * Completes, in order, the executed WQEs whose outcome is known: a CQE for
 * each signaled or failed one. Any thread; takes comp_lock. True when the
 * next WQE failed at the requester and waited for those ahead of it, now
 * complete (srn_req_executed): the caller then moves the QP to ERR
 * (srn_qp_async_error; not from here, which the requester calls).
 */
bool srn_comp_send_done(struct srn_qp *qp)
{
	struct srn_sq *sq = &qp->sq;
	bool locked = srn_comp_lock(qp), fail = false;

	/* acquire: pairs with the release of sent in srn_req_executed (and
	 * srn_req_flush, srn_req_rewind): the WQEs' outcome is visible */
	while (sq->cons != __atomic_load_n(&sq->sent, __ATOMIC_ACQUIRE)) {
		struct srn_swqe *w = srn_sq_wqe(qp, sq->cons);

		struct srn_cqe c;
		bool post;

		/* an error is seen only once the QP is in ERR: whoever
		 * records one moves the QP there (srn_qp_error, or
		 * srn_qp_async_error for the requester), and entering ERR
		 * completes again (srn_req_flush) */
		if (!w->done || (w->status != IBV_WC_SUCCESS &&
				 srn_qp_state(qp) != IBV_QPS_ERR)) {
			/* a WQE that failed at the requester waited for
			 * those ahead of it (srn_req_executed): now ERR.
			 * relaxed: under comp_lock, as its writers; it stays
			 * set (nothing behind runs) until ERR clears it */
			if (w->done && sq->cons == qp->err_wait_pos &&
			    atomic_load_explicit(&qp->err_wait,
						 memory_order_relaxed))
				fail = true;
			break;
		}
		post = w->status != IBV_WC_SUCCESS || srn_wqe_signaled(qp, w);
		if (post)
			srn_comp_send_cqe(qp, w, w->status, &c);
		/* release: the slot is free before its completion can be
		 * seen (an application that polls it may post at once);
		 * pairs with the acquire of cons in srn_sq_check (called by
		 * srn_sq_push) */
		__atomic_store_n(&sq->cons, sq->cons + 1, __ATOMIC_RELEASE);
		if (post)
			srn_comp_send_post(qp, &c);
	}
	srn_comp_unlock(qp, locked);
	return fail;
}

/* The send completion of wqe, built while its slot is still ours. */
void srn_comp_send_cqe(struct srn_qp *qp, const struct srn_swqe *wqe,
		       enum ibv_wc_status status, struct srn_cqe *c)
{
	const struct srn_opcode_info *op = srn_opcode_get(wqe->opcode);

	*c = (struct srn_cqe){
		.wr_id = wqe->wr_id,
		.status = status,
		.opcode = op ? op->wc_opcode : IBV_WC_SEND,
		.qp_num = qp->ibqpx.qp_base.qp_num,
		.byte_len = (wqe->opcode == IBV_WR_RDMA_READ ||
			     (op && (op->flags & SRN_OP_REMOTE_ATOMIC))) ?
				    (uint32_t)wqe->total_len :
				    0,
	};
	if (status != IBV_WC_SUCCESS)
		c->vendor_err = status;
}

/* Posts a send completion built by srn_comp_send_cqe. */
void srn_comp_send_post(struct srn_qp *qp, const struct srn_cqe *c)
{
	if (srn_cq_post(&qp->send_cq->local, c))
		srn_cq_check_overflow(qp->send_cq);
}

void srn_comp_recv_flush(struct srn_qp *qp, uint64_t wr_id)
{
	struct srn_cqe c = {
		.wr_id = wr_id,
		.status = IBV_WC_WR_FLUSH_ERR,
		.opcode = IBV_WC_RECV,
		.vendor_err = IBV_WC_WR_FLUSH_ERR,
		.qp_num = qp->ibqpx.qp_base.qp_num,
	};

	if (srn_cq_post(&qp->recv_cq->local, &c))
		srn_cq_check_overflow(qp->recv_cq);
}
