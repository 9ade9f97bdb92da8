/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the CQ's consumer fast path, inline: ibv_poll_cq drains the
 * ring here (verbs/verbs_cq.c includes it); the rest of the CQ is
 * core/cq.c.
 */
#ifndef SRN_CORE_CQ_POLL_H
#define SRN_CORE_CQ_POLL_H

#include "core/core.h"

static inline void srn_cqe_to_wc(const struct srn_cqe *c, struct ibv_wc *wc)
{
	wc->wr_id = c->wr_id;
	wc->status = c->status;
	wc->opcode = c->opcode;
	wc->vendor_err = c->vendor_err;
	wc->byte_len = c->byte_len;
	wc->imm_data = c->imm_data;
	wc->qp_num = c->qp_num;
	wc->src_qp = c->src_qp;
	wc->wc_flags = c->wc_flags;
	wc->pkey_index = c->pkey_index;
	wc->slid = c->slid;
	wc->sl = c->sl;
	wc->dlid_path_bits = c->dlid_path_bits;
}

/* A receive CQE that names the ring position it took (rq_pos): its QP's
 * post_recv may count that WQE consumed (srn_rq_post). cq->lock held. */
static inline void srn_cq_rq_polled(struct srn_cq *cq, const struct srn_cqe *c)
{
	uint32_t pos = c->rq_pos;

	if (!pos)
		return;
	for (unsigned i = 0; i < cq->nrqs; i++) {
		if (cq->rqs[i].qpn != c->qp_num)
			continue;
		/* release: the consumer's copy of the WQE, ordered before
		 * this CQE (whose tag we acquired), before the position;
		 * pairs with the acquire in srn_rq_post */
		__atomic_store_n(&cq->rqs[i].v->polled_pos, pos,
				 __ATOMIC_RELEASE);
		return;
	}
}

/* Takes up to ne completions off the ring. */
static inline int srn_cq_drain(struct srn_cq *cq, int ne, struct ibv_wc *wc)
{
	int n = 0;

	srn_lock(&cq->lock);
	for (; n < ne; n++) {
		const struct srn_cqe *c = &cq->ring[cq->cons & cq->mask];

		/* acquire: pairs with the release in srn_cq_post */
		if (__atomic_load_n(&c->owner_seq, __ATOMIC_ACQUIRE) !=
		    (uint32_t)(cq->cons + 1))
			break;
		if (c->flags & SRN_CQE_INLINE) { /* a small SEND's */
			struct srn_cqe t;

			srn_cq_inl_take(cq, c, &t);
			srn_cqe_to_wc(&t, &wc[n]);
		} else {
			srn_cqe_to_wc(c, &wc[n]);
		}
		srn_cq_rq_polled(cq, c);
		cq->cons++;
	}
	if (n) /* release: pairs with the acquire in srn_cq_post */
		__atomic_store_n(&cq->shm->cons, cq->cons, __ATOMIC_RELEASE);
	srn_unlock(&cq->lock);
	/* a SEND_WITH_INV placed by a same-host initiator, which cannot
	 * write our TPT: the window is invalidated here, before the
	 * application sees the completion (docs/shm-layout.md) */
	for (int i = 0; i < n; i++)
		if (srn_unlikely(wc[i].wc_flags & IBV_WC_WITH_INV) &&
		    wc[i].status == IBV_WC_SUCCESS)
			srn_mw_remote_inv(cq->ctx, wc[i].invalidated_rkey,
					  wc[i].qp_num);
	return n;
}

/* Did a producer of this CQ die (then srn_cq_repair may skip the slot it
 * abandoned)? */
static inline bool srn_cq_repair_due(const struct srn_cq *cq)
{
	/* relaxed: the deadline set by srn_cq_peer_died, a plain value */
	return srn_unlikely(
		__atomic_load_n(&cq->repair_after_ns, __ATOMIC_RELAXED) != 0);
}

#endif /* SRN_CORE_CQ_POLL_H */
