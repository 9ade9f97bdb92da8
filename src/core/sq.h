/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the post verbs' fast path on the QP object, inline: a WR is
 * checked and copied into the send queue (srn_sq_push) and, after posting
 * receives, a stalled initiator is looked for. Only the verbs layer's
 * post_send/post_recv include this (verbs/verbs_qp.c); the rest of the QP
 * object is core/qp.c.
 */
#ifndef SRN_CORE_SQ_H
#define SRN_CORE_SQ_H

#include <string.h>

#include "core/core.h"

/*
 * With many QPs a post finds the lines of its data cold (the QP's turn
 * comes once every QP-count posts): their loads start before sq_lock.
 * A WRITE's target is guessed from the QP's last WRITE (pf_delta, written
 * by the same-host transport that executed it; 0: no guess). A prefetch
 * never faults, so a wrong guess costs nothing but the load. With few QPs
 * (SRN_QP_PREFETCH_MIN) nothing is prefetched.
 */
static inline bool srn_sq_prefetching(const struct srn_qp *qp)
{
	/* relaxed: a hint (struct srn_context) */
	return atomic_load_explicit(&qp->ctx->many_qps, memory_order_relaxed);
}

static inline void srn_sq_prefetch_target(struct srn_qp *qp, uint64_t raddr)
{
	uint64_t delta;

	if (!srn_sq_prefetching(qp))
		return;
	/* relaxed: a hint (see struct srn_qp) */
	delta = __atomic_load_n(&qp->pf_delta, __ATOMIC_RELAXED);
	if (delta)
		__builtin_prefetch((const void *)(uintptr_t)(raddr + delta), 1);
}

static inline void srn_sq_prefetch(struct srn_qp *qp,
				   const struct ibv_send_wr *wr)
{
	if (!srn_sq_prefetching(qp))
		return;
	if (wr->num_sge > 0)
		__builtin_prefetch((const void *)(uintptr_t)wr->sg_list[0].addr,
				   0);
	if (wr->opcode == IBV_WR_RDMA_WRITE ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		srn_sq_prefetch_target(qp, wr->wr.rdma.remote_addr);
}

/* Checks a WR like a device does (positive errno); its length in
 * *total_p. */
static inline int srn_sq_check(const struct srn_qp *qp,
			       const struct ibv_send_wr *wr,
			       const struct srn_opcode_info *op, uint64_t cons,
			       uint64_t *total_p)
{
	uint64_t total = 0;

	if (!op || !(qp->wr_ops & (1u << (wr->opcode & 31))) ||
	    wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	if (qp->sq.prod - cons >= qp->sq.max_wr)
		return ENOMEM;
	if (op->flags & SRN_OP_LOCAL) { /* no data: SGEs are ignored */
		*total_p = wr->opcode == IBV_WR_BIND_MW ?
				   wr->bind_mw.bind_info.length :
				   0;
		return 0;
	}
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    (!(op->flags & SRN_OP_INLINE_OK) ||
	     total > qp->cap.max_inline_data))
		return EINVAL;
	if ((op->flags & SRN_OP_REMOTE_ATOMIC) &&
	    (wr->num_sge != 1 || wr->sg_list[0].length != 8))
		return EINVAL;
	if (total > SRN_MAX_MSG_SZ)
		return EINVAL;
	if (qp->ibqpx.qp_base.qp_type == IBV_QPT_UD &&
	    (!wr->wr.ud.ah || total > SRN_UD_MTU))
		return EINVAL; /* a datagram fits the port MTU */
	*total_p = total;
	return 0;
}

/* The WR's data: copied inline, or its SGE list. */
static inline void srn_sq_fill_data(const struct srn_qp *qp, struct srn_swqe *w,
				    const struct ibv_send_wr *wr)
{
	uint8_t *inl;

	if (wr->send_flags & IBV_SEND_INLINE) {
		inl = srn_swqe_inline(w);
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(inl + w->inline_len,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			w->inline_len += wr->sg_list[i].length;
		}
		w->num_sge = 0;
	} else if (wr->num_sge) {
		memcpy(w->sge, wr->sg_list, wr->num_sge * sizeof(w->sge[0]));
	}
}

/* Copies a WR into the send queue after checking it like a device does
 * (positive errno: the verb's convention). sq_lock held. */
static inline int srn_sq_push(struct srn_qp *qp, const struct ibv_send_wr *wr)
{
	const struct srn_opcode_info *op = srn_opcode_get(wr->opcode);
	struct srn_sq *sq = &qp->sq;
	/* acquire: pairs with the release in srn_comp_send_done (the slots
	 * before cons are free) */
	uint64_t cons = __atomic_load_n(&sq->cons, __ATOMIC_ACQUIRE);
	struct srn_swqe *w;
	uint64_t total;
	int err = srn_sq_check(qp, wr, op, cons, &total);

	if (err)
		return err;
	srn_sq_rebase(sq, cons);
	w = srn_sq_slot(sq, sq->prod);
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->num_sge = wr->num_sge;
	w->imm_data = wr->imm_data;
	w->total_len = total;
	w->inline_len = 0;
	w->done = 0;
	w->status = IBV_WC_SUCCESS;
	w->xrc_srqn = qp->ibqpx.qp_base.qp_type == IBV_QPT_XRC_SEND ?
			      wr->qp_type.xrc.remote_srqn :
			      0;
	if (wr->opcode == IBV_WR_BIND_MW) {
		w->num_sge = 0;
		w->bind_mw = wr->bind_mw.mw;
		w->bind_mr = wr->bind_mw.bind_info.mr;
		w->bind_access = wr->bind_mw.bind_info.mw_access_flags;
		w->remote_addr = wr->bind_mw.bind_info.addr;
		w->rkey = wr->bind_mw.rkey;
		w->send_flags &= ~IBV_SEND_INLINE;
	} else if (wr->opcode == IBV_WR_LOCAL_INV) {
		w->num_sge = 0;
		w->send_flags &= ~IBV_SEND_INLINE;
	} else if (qp->ibqpx.qp_base.qp_type == IBV_QPT_UD) {
		w->ah = wr->wr.ud.ah;
		w->remote_qpn = wr->wr.ud.remote_qpn;
		w->remote_qkey = wr->wr.ud.remote_qkey;
	} else if (op->flags & SRN_OP_REMOTE_ATOMIC) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	}
	srn_sq_fill_data(qp, w, wr);
	/* release: the WQE is complete before its position is. No load of
	 * prod pairs with it (more than needed): prod is read only under
	 * sq_lock (srn_req_run, srn_req_flush), which orders the WQE; the
	 * lock's acquire in srn_lock pairs with the release in srn_unlock */
	__atomic_store_n(&sq->prod, sq->prod + 1, __ATOMIC_RELEASE);
	return 0;
}

/* After posting receives: did an initiator stall waiting for them (it
 * then needs a kick)? Clears the flag. */
static inline bool srn_qp_take_peer_waiting(struct srn_qp *qp)
{
	/* relaxed: the first load only skips the exchange when nobody
	 * waits. acq_rel: the exchange pairs with the release in the
	 * initiator's stall (srn_resp_peek_recv) */
	return __atomic_load_n(&qp->shm->rq.peer_waiting, __ATOMIC_RELAXED) &&
	       __atomic_exchange_n(&qp->shm->rq.peer_waiting, 0,
				   __ATOMIC_ACQ_REL);
}

#endif /* SRN_CORE_SQ_H */
