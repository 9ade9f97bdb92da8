// SPDX-License-Identifier: MIT
/*
 * softrnic — completions for the owner's side of a QP: send completions
 * into the send CQ and flushed receives into the receive CQ. (Receive
 * completions of placed SENDs are written by the initiator, responder.c.)
 */
#include "engine/engine.h"

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
