// SPDX-License-Identifier: MIT
/*
 * softrnic — receive rings in shared memory (a QP's RQ or an SRQ).
 *
 * One producer: the owner's post_recv, under the queue's lock. Many
 * consumers: initiators in any process placing a SEND, and the owner when
 * it flushes. A WQE is valid when its owner_seq tag equals its position +
 * 1, so a consumer never reads prod. A consumer copies the WQE at cons,
 * then claims it with a CAS on cons; if the CAS fails somebody else took it
 * and the copy is dropped. The producer reuses a slot only after cons has
 * passed it, and reads cons only when the space it knows of is used up.
 *
 * A consumer works on a view whose geometry was validated once against
 * the segment size (srn_rq_view_init); it never trusts the live header.
 */
#include <errno.h>
#include <string.h>

#include "core/core.h"

uint32_t srn_rq_stride(uint32_t max_sge)
{
	return sizeof(struct srn_rwqe) + max_sge * sizeof(struct srn_rsge);
}

size_t srn_rq_bytes(uint32_t size, uint32_t max_sge)
{
	return (size_t)size * srn_rq_stride(max_sge);
}

void srn_rq_init(struct srn_rq_shm *rq, uint32_t size, uint32_t max_sge,
		 uint32_t wqe_off)
{
	rq->size = size;
	rq->max_sge = max_sge;
	rq->stride = srn_rq_stride(max_sge);
	rq->wqe_off = wqe_off;
}

int srn_rq_view_init(struct srn_rq_view *v, struct srn_rq_shm *rq,
		     void *seg_base, size_t seg_size)
{
	/* relaxed: the owner wrote the geometry (srn_rq_init) before it
	 * passed the segment (the socket orders that); a peer may change it
	 * since, so it is read once and checked here */
	uint32_t size = __atomic_load_n(&rq->size, __ATOMIC_RELAXED);
	uint32_t max_sge = __atomic_load_n(&rq->max_sge, __ATOMIC_RELAXED);
	uint32_t stride = __atomic_load_n(&rq->stride, __ATOMIC_RELAXED);
	uint32_t off = __atomic_load_n(&rq->wqe_off, __ATOMIC_RELAXED);

	if (!size || (size & (size - 1)) || size > 2 * SRN_MAX_QP_WR ||
	    max_sge > SRN_MAX_SGE || stride != srn_rq_stride(max_sge) ||
	    (uint64_t)off + (uint64_t)size * stride > seg_size)
		return -EPROTO;
	v->rq = rq;
	v->cons_seen = 0;
	v->polled_pos = 0;
	v->wqes = (uint8_t *)seg_base + off;
	v->mask = size - 1;
	v->stride = stride;
	v->max_sge = max_sge;
	return 0;
}

static struct srn_rwqe *srn_rq_slot(const struct srn_rq_view *v, uint64_t i)
{
	return (struct srn_rwqe *)(v->wqes + (i & v->mask) * v->stride);
}

/*
 * The owner's bound of cons from its receive completions (srn_cq_rq_polled:
 * the last polled CQE's ring position, as mlx5 advances its tail in
 * poll_cq), so that a post_recv on a full ring need not read cons, the
 * line every consumer writes. Only a position within the last lap below
 * prod p counts.
 */
static void srn_rq_polled_bound(struct srn_rq_view *v, uint64_t p)
{
	/* acquire: pairs with the release in srn_cq_rq_polled (the
	 * consumer's copy of the slot is done) */
	uint32_t pos = __atomic_load_n(&v->polled_pos, __ATOMIC_ACQUIRE);
	uint32_t back = (uint32_t)p - pos;

	if (pos && back <= v->mask + 1 && p - back > v->cons_seen)
		v->cons_seen = p - back;
}

/* Owner only, under its queue lock. -ENOMEM when full, -EINVAL when the
 * WR has too many SGEs. */
int srn_rq_post(struct srn_rq_view *v, const struct ibv_recv_wr *wr)
{
	struct srn_rq_shm *rq = v->rq;
	/* relaxed: only this function writes prod, under the queue lock */
	uint64_t p = __atomic_load_n(&rq->prod, __ATOMIC_RELAXED);
	struct srn_rwqe *w;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > v->max_sge)
		return -EINVAL;
	/* Read cons (a line the consumers write) only when the space known
	 * from the last read, and from the completions polled since, is
	 * used up. */
	if (p - v->cons_seen > v->mask)
		srn_rq_polled_bound(v, p);
	if (p - v->cons_seen > v->mask) {
		/* acquire: pairs with the CAS in srn_rq_commit (and the
		 * release in srn_qp_reset_queues), so the consumer's copy of
		 * the slot is done */
		v->cons_seen = __atomic_load_n(&rq->cons, __ATOMIC_ACQUIRE);
		if (p - v->cons_seen > v->mask)
			return -ENOMEM;
	}
	w = srn_rq_slot(v, p);
	/* relaxed: the slot is free (cons passed it); the release of
	 * owner_seq below publishes the entry */
	__atomic_store_n(&w->wr_id, wr->wr_id, __ATOMIC_RELAXED);
	__atomic_store_n(&w->num_sge, (uint32_t)wr->num_sge, __ATOMIC_RELAXED);
	for (int i = 0; i < wr->num_sge; i++) {
		/* relaxed: published by the release of owner_seq below */
		__atomic_store_n(&w->sge[i].addr, wr->sg_list[i].addr,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&w->sge[i].length, wr->sg_list[i].length,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&w->sge[i].lkey, wr->sg_list[i].lkey,
				 __ATOMIC_RELAXED);
	}
	/* release: pairs with the acquire of owner_seq in srn_rq_peek */
	__atomic_store_n(&w->owner_seq, (uint32_t)(p + 1), __ATOMIC_RELEASE);
	/* release: pairs with the acquire of prod in srn_rq_count */
	__atomic_store_n(&rq->prod, p + 1, __ATOMIC_RELEASE);
	return 0;
}

static int srn_rq_copy(const struct srn_rq_view *v, uint64_t i,
		       struct srn_rwqe *out)
{
	const struct srn_rwqe *w = srn_rq_slot(v, i);
	/* relaxed: after the acquire of owner_seq in srn_rq_peek; if the
	 * slot is reused meanwhile the copy is torn, and the CAS in
	 * srn_rq_commit fails and drops it */
	uint32_t n = __atomic_load_n(&w->num_sge, __ATOMIC_RELAXED);

	/* relaxed: as above */
	out->wr_id = __atomic_load_n(&w->wr_id, __ATOMIC_RELAXED);
	out->num_sge = n;
	if (n > v->max_sge)
		return -EPROTO;
	for (uint32_t k = 0; k < n; k++) {
		/* relaxed: as above */
		out->sge[k].addr =
			__atomic_load_n(&w->sge[k].addr, __ATOMIC_RELAXED);
		out->sge[k].length =
			__atomic_load_n(&w->sge[k].length, __ATOMIC_RELAXED);
		out->sge[k].lkey =
			__atomic_load_n(&w->sge[k].lkey, __ATOMIC_RELAXED);
	}
	return 0;
}

/*
 * Copies the next receive WQE into out (room for SRN_MAX_SGE SGEs) without
 * taking it; *pos_p is its position for srn_rq_commit(). Returns 0,
 * -EAGAIN when the ring is empty, -EPROTO when the ring or the entry is
 * corrupt (commit it anyway to skip it).
 */
int srn_rq_peek(const struct srn_rq_view *v, struct srn_rwqe *out,
		uint64_t *pos_p)
{
	struct srn_rq_shm *rq = v->rq;
	/* acquire: pairs with the CAS in srn_rq_commit (another consumer's
	 * claim) and the release in srn_qp_reset_queues */
	uint64_t c = __atomic_load_n(&rq->cons, __ATOMIC_ACQUIRE);

	for (;;) {
		const struct srn_rwqe *w = srn_rq_slot(v, c);
		uint64_t c2;

		/* acquire: pairs with the release in srn_rq_post; the tag
		 * saves reading prod, a line the owner writes */
		if (__atomic_load_n(&w->owner_seq, __ATOMIC_ACQUIRE) ==
		    (uint32_t)(c + 1)) {
			*pos_p = c;
			return srn_rq_copy(v, c, out);
		}
		/* not posted yet, or cons moved on and the slot was reused.
		 * acquire: pairs with the CAS in srn_rq_commit, as above */
		c2 = __atomic_load_n(&rq->cons, __ATOMIC_ACQUIRE);
		if (c2 == c) {
			*pos_p = c;
			return -EAGAIN;
		}
		c = c2;
	}
}

/* Takes the WQE at pos; false if somebody else took it first. */
bool srn_rq_commit(const struct srn_rq_view *v, uint64_t pos)
{
	/* acq_rel: the copy happened before the claim; pairs with the
	 * acquire of cons in srn_rq_post and srn_rq_peek. relaxed on
	 * failure: the copy is dropped, the caller peeks again */
	return __atomic_compare_exchange_n(&v->rq->cons, &pos, pos + 1, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* Takes the next receive WQE (peek + commit until it sticks); *rq_pos_p
 * (if not NULL): its ring position + 1, low 32 bits, for its CQE
 * (srn_cqe.rq_pos). */
int srn_rq_claim(const struct srn_rq_view *v, struct srn_rwqe *out,
		 uint32_t *rq_pos_p)
{
	uint64_t pos;
	int err;

	do {
		err = srn_rq_peek(v, out, &pos);
		if (err == -EAGAIN)
			return err;
	} while (!srn_rq_commit(v, pos));
	if (rq_pos_p)
		*rq_pos_p = (uint32_t)(pos + 1);
	return err;
}

uint32_t srn_rq_count(const struct srn_rq_view *v)
{
	/* acquire: pairs with the release of prod in srn_rq_post and with
	 * the CAS of cons in srn_rq_commit (a count: nothing is read after
	 * them, relaxed would do) */
	uint64_t p = __atomic_load_n(&v->rq->prod, __ATOMIC_ACQUIRE);
	uint64_t c = __atomic_load_n(&v->rq->cons, __ATOMIC_ACQUIRE);

	return (uint32_t)(p - c);
}
