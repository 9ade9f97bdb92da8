// SPDX-License-Identifier: MIT
/*
 * softrnic — shared receive queues. The ring is the same as a QP's RQ
 * (queue.c) in a segment of its own, so initiators of every QP attached to
 * the SRQ, in any process, take WQEs from it. The limit event: a consumer
 * that leaves fewer than srq_limit WQEs disarms the limit and kicks the
 * owner, whose progress thread raises IBV_EVENT_SRQ_LIMIT_REACHED.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

static int srn_srq_init(struct srn_srq *srq, uint32_t max_wr, uint32_t max_sge)
{
	uint32_t size = 1;
	size_t off = sizeof(struct srn_srq_shm);
	int err;

	while (size < max_wr)
		size <<= 1;
	err = srn_seg_create(&srq->seg, SRN_SEG_SRQ,
			     off + srn_rq_bytes(size, max_sge), srq->handle);
	if (err)
		return err;
	srq->shm = srq->seg.addr;
	srq->shm->pd_handle = srq->pd->handle;
	srq->shm->srq_handle = srq->handle;
	srn_rq_init(&srq->shm->rq, size, max_sge, off);
	err = srn_rq_view_init(&srq->rqv, &srq->shm->rq, srq->seg.addr,
			       srq->seg.size);
	if (err)
		srn_seg_unmap(&srq->seg);
	return err;
}

/* A new SRQ in ctx's list. 0 or -errno. */
int srn_srq_create(struct ibv_pd *ibpd, struct ibv_srq_init_attr *attr,
		   struct srn_srq **srq_p)
{
	struct srn_context *ctx = to_sctx(ibpd->context);
	struct ibv_srq_attr *a = &attr->attr;
	struct srn_srq *srq;
	int err = -EINVAL;

	if (!a->max_wr || a->max_wr > SRN_MAX_SRQ_WR ||
	    a->max_sge > SRN_MAX_SGE || a->srq_limit > a->max_wr)
		goto fail;
	err = -ENOMEM;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		goto fail;
	srq->ctx = ctx;
	srq->pd = to_spd(ibpd);
	srq->seg.fd = -1;
	srq->srqn_fd = -1;
	srn_list_init(&srq->xrc_link);
	srn_lock_init(&srq->lock);
	pthread_mutex_lock(&ctx->lock);
	if (ctx->nsrq >= SRN_MAX_SRQ) {
		pthread_mutex_unlock(&ctx->lock);
		free(srq);
		goto fail;
	}
	ctx->nsrq++;
	srq->handle = srn_ctx_new_handle(ctx);
	pthread_mutex_unlock(&ctx->lock);
	srq->max_wr = a->max_wr;
	srq->max_sge = a->max_sge ? a->max_sge : 1;
	err = srn_srq_init(srq, srq->max_wr, srq->max_sge);
	if (err) {
		pthread_mutex_lock(&ctx->lock);
		ctx->nsrq--;
		pthread_mutex_unlock(&ctx->lock);
		free(srq);
		goto fail;
	}
	srq->shm->rq.limit = a->srq_limit;
	srq->ibsrq.context = ibpd->context;
	srq->ibsrq.srq_context = attr->srq_context;
	srq->ibsrq.pd = ibpd;
	srq->ibsrq.handle = srq->handle;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	/* relaxed: a reference taken while the caller holds the PD; the
	 * count publishes nothing (the puts release it) */
	atomic_fetch_add_explicit(&srq->pd->refs, 1, memory_order_relaxed);
	pthread_mutex_lock(&ctx->lock);
	srn_list_add_tail(&srq->ctx_link, &ctx->srqs);
	pthread_mutex_unlock(&ctx->lock);
	a->max_wr = srq->max_wr;
	a->max_sge = srq->max_sge;
	*srq_p = srq;
	return 0;
fail:
	return err;
}

/* A new XRC SRQ (ibv_create_srq_ex, IBV_SRQT_XRC): an SRQ of the PD, with
 * its domain and CQ; no number yet (srn_srq_xrc_publish). 0 or -errno. */
int srn_srq_create_xrc(struct ibv_srq_init_attr_ex *attr,
		       struct srn_srq **srq_p)
{
	const uint32_t need = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	struct ibv_srq_init_attr a = { .srq_context = attr->srq_context,
				       .attr = attr->attr };
	int err;

	if ((attr->comp_mask & need) != need || !attr->pd || !attr->xrcd ||
	    !attr->cq)
		return -EINVAL;
	err = srn_srq_create(attr->pd, &a, srq_p);
	if (err)
		return err;
	(*srq_p)->xrcd = to_sxrcd(attr->xrcd);
	(*srq_p)->cq = to_scq(attr->cq);
	/* relaxed: references taken while the caller holds both; the
	 * counts publish nothing (the puts in srn_srq_destroy release) */
	atomic_fetch_add_explicit(&(*srq_p)->xrcd->refs, 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&(*srq_p)->cq->refs, 1, memory_order_relaxed);
	attr->attr = a.attr;
	return 0;
}

/* Unlinks an unused SRQ from its context. -EBUSY while QPs use it. */
int srn_srq_del(struct srn_srq *srq)
{
	struct srn_context *ctx = srq->ctx;

	/* acquire: pairs with the release of refs in srn_qp_get_refs (a
	 * QP's put) */
	if (atomic_load_explicit(&srq->refs, memory_order_acquire))
		return -EBUSY;
	pthread_mutex_lock(&ctx->lock);
	srn_list_del(&srq->ctx_link);
	ctx->nsrq--;
	pthread_mutex_unlock(&ctx->lock);
	if (srq->xrcd) { /* no request finds it any more */
		pthread_mutex_lock(&srn_xrc_lock);
		srn_list_del(&srq->xrc_link);
		pthread_mutex_unlock(&srn_xrc_lock);
	}
	return 0;
}

/* The inverse of srn_srq_create, after srn_srq_del. */
void srn_srq_destroy(struct srn_srq *srq)
{
	/* release: pairs with the acquire in ibv_dealloc_pd */
	atomic_fetch_sub_explicit(&srq->pd->refs, 1, memory_order_release);
	if (srq->xrcd) {
		/* release: pairs with the acquire in srn_close_xrcd and
		 * srn_cq_del */
		atomic_fetch_sub_explicit(&srq->xrcd->refs, 1,
					  memory_order_release);
		atomic_fetch_sub_explicit(&srq->cq->refs, 1,
					  memory_order_release);
	}
	if (srq->srqn_fd >= 0)
		close(srq->srqn_fd); /* the number is free again */
	srn_seg_unmap(&srq->seg);
	free(srq);
}

SRN_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
			      int mask)
{
	struct srn_srq *srq = to_ssrq(ibsrq);

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		return EOPNOTSUPP; /* peers map the ring: no resize */
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit > srq->max_wr)
			return EINVAL;
		/* release: pairs with the acquire in srn_srq_limit_consumed */
		__atomic_store_n(&srq->shm->rq.limit, attr->srq_limit,
				 __ATOMIC_RELEASE);
	}
	return 0;
}

SRN_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct srn_srq *srq = to_ssrq(ibsrq);

	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	/* acquire: pairs with the release in ibv_modify_srq and the CAS in
	 * srn_srq_limit_consumed (nothing is read after it: relaxed would
	 * do) */
	attr->srq_limit =
		__atomic_load_n(&srq->shm->rq.limit, __ATOMIC_ACQUIRE);
	return 0;
}

/* Posts receive WQEs (positive errno, *bad_wr set, as the verb). */
int srn_srq_post(struct srn_srq *srq, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad_wr)
{
	int err = 0;

	srn_lock(&srq->lock);
	for (; wr; wr = wr->next) {
		err = srn_rq_post(&srq->rqv, wr);
		if (err) {
			*bad_wr = wr;
			break;
		}
	}
	srn_unlock(&srq->lock);
	return -err;
}

/* After posting receives: did an initiator stall waiting for them? Clears
 * the flag. */
bool srn_srq_take_peer_waiting(struct srn_srq *srq)
{
	/* relaxed: the first load only skips the exchange when nobody
	 * waits. acq_rel: the exchange pairs with the release in
	 * srn_resp_peek_recv */
	return __atomic_load_n(&srq->shm->rq.peer_waiting, __ATOMIC_RELAXED) &&
	       __atomic_exchange_n(&srq->shm->rq.peer_waiting, 0,
				   __ATOMIC_ACQ_REL);
}

/* Consumer side, after taking a WQE from an SRQ. */
void srn_srq_limit_consumed(struct srn_rq_view *v, int owner_kick_fd)
{
	struct srn_rq_shm *rq = v->rq;
	/* acquire: pairs with the release in ibv_modify_srq (the arming) */
	uint32_t lim = __atomic_load_n(&rq->limit, __ATOMIC_ACQUIRE);

	if (!lim || srn_rq_count(v) >= lim)
		return;
	/* acq_rel: only one consumer fires the event per arming; pairs
	 * with the release in ibv_modify_srq and with this CAS in other
	 * consumers' srn_srq_limit_consumed. relaxed on failure: somebody
	 * else fired it, or the limit changed */
	if (!__atomic_compare_exchange_n(&rq->limit, &lim, 0, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	/* release: pairs with the exchange in srn_srq_check_limit */
	__atomic_store_n(&rq->limit_hit, 1, __ATOMIC_RELEASE);
	srn_kick_fd(owner_kick_fd);
}

/* Owner side, from the progress thread after a kick. */
void srn_srq_check_limit(struct srn_srq *srq)
{
	struct ibv_async_event ev;

	/* acq_rel: pairs with the release in srn_srq_limit_consumed (the
	 * release half pairs with nothing: relaxed would do for it) */
	if (!__atomic_exchange_n(&srq->shm->rq.limit_hit, 0, __ATOMIC_ACQ_REL))
		return;
	ev.element.srq = &srq->ibsrq;
	ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
	srn_async_event_post(srq->ctx, &ev);
}
