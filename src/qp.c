// SPDX-License-Identifier: MIT
/*
 * softrnic — queue pairs: create, modify, query, destroy, and the post
 * verbs. A QP has a private send queue (run by the requester at doorbell
 * time) and a receive queue in its shared segment, where initiators take
 * WQEs directly. Only RC is offered for now.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "srn.h"
#include "tcp.h"
#include "transport.h"

static int srn_qp_check_cap(const struct ibv_qp_cap *cap, bool has_srq)
{
	if (cap->max_send_wr > SRN_MAX_QP_WR ||
	    cap->max_send_sge > SRN_MAX_SGE ||
	    cap->max_inline_data > SRN_MAX_INLINE)
		return -EINVAL;
	if (!has_srq && (cap->max_recv_wr > SRN_MAX_QP_WR ||
			 cap->max_recv_sge > SRN_MAX_SGE))
		return -EINVAL;
	return 0;
}

static uint32_t srn_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

static int srn_sq_init(struct srn_qp *qp)
{
	struct srn_sq *sq = &qp->sq;
	size_t stride = sizeof(struct srn_swqe) +
			qp->cap.max_send_sge * sizeof(struct ibv_sge) +
			qp->cap.max_inline_data;

	sq->stride = SRN_ALIGN_UP(stride, (size_t)64);
	sq->max_wr = qp->cap.max_send_wr;
	sq->size = srn_pow2(sq->max_wr ? sq->max_wr : 1);
	sq->buf = calloc(sq->size, sq->stride);
	return sq->buf ? 0 : -ENOMEM;
}

static int srn_qp_seg_init(struct srn_qp *qp)
{
	size_t off = sizeof(struct srn_qp_shm);
	uint32_t size = srn_pow2(qp->cap.max_recv_wr ? qp->cap.max_recv_wr : 1);
	size_t bytes = off + (qp->srq ? 0 :
				srn_rq_bytes(size, qp->cap.max_recv_sge));
	int err = srn_seg_create(&qp->seg, SRN_SEG_QP, bytes, 0);

	if (err)
		return err;
	qp->shm = qp->seg.addr;
	qp->shm->state = IBV_QPS_RESET;
	qp->shm->pd_handle = qp->pd->handle;
	qp->shm->has_srq = !!qp->srq;
	qp->shm->recv_cq_handle = qp->recv_cq->handle;
	if (qp->srq)
		return 0;
	srn_rq_init(&qp->shm->rq, size, qp->cap.max_recv_sge, off);
	return srn_rq_view_init(&qp->rqv, &qp->shm->rq, qp->seg.addr,
				qp->seg.size);
}

static void srn_qp_free(struct srn_qp *qp)
{
	if (qp->seg.addr)
		srn_seg_unmap(&qp->seg);
	free(qp->sq.buf);
	free(qp);
}

static struct srn_qp *srn_qp_alloc(struct srn_context *ctx,
				   struct ibv_qp_init_attr_ex *a, int *err)
{
	struct srn_qp *qp = calloc(1, sizeof(*qp));

	if (!qp) {
		*err = -ENOMEM;
		return NULL;
	}
	qp->ctx = ctx;
	qp->seg.fd = -1;
	qp->pd = to_spd(a->pd);
	qp->send_cq = to_scq(a->send_cq);
	qp->recv_cq = to_scq(a->recv_cq);
	qp->srq = a->srq ? to_ssrq(a->srq) : NULL;
	qp->cap = a->cap;
	if (qp->srq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	} else if (!qp->cap.max_recv_sge) {
		qp->cap.max_recv_sge = 1;
	}
	if (!qp->cap.max_send_sge)
		qp->cap.max_send_sge = 1;
	qp->sq_sig_all = a->sq_sig_all;
	srn_lock_init(&qp->sq_lock);
	srn_lock_init(&qp->rq_lock);
	srn_lock_init(&qp->comp_lock);
	srn_list_init(&qp->conns);
	srn_list_init(&qp->tcp_conns);
	pthread_mutex_init(&qp->conn_lock, NULL);
	srn_list_init(&qp->ctx_link);
	*err = srn_sq_init(qp);
	if (!*err)
		*err = srn_qp_seg_init(qp);
	if (*err) {
		srn_qp_free(qp);
		return NULL;
	}
	return qp;
}

static void srn_qp_init_public(struct srn_qp *qp, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp *q = &qp->ibqpx.qp_base;

	q->context = &qp->ctx->vctx.context;
	q->qp_context = a->qp_context;
	q->pd = a->pd;
	q->send_cq = a->send_cq;
	q->recv_cq = a->recv_cq;
	q->srq = a->srq;
	q->qp_type = a->qp_type;
	q->state = IBV_QPS_RESET;
	q->handle = q->qp_num;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_4096;
	qp->attr.port_num = 1;
	qp->attr.cap = qp->cap;
	a->cap = qp->cap;
}

static void srn_qp_get_refs(struct srn_qp *qp, int delta)
{
	/* release on put: pairs with the acquire in the owners' destroy */
	if (delta > 0) {
		atomic_fetch_add_explicit(&qp->pd->refs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&qp->send_cq->refs, 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&qp->recv_cq->refs, 1,
					  memory_order_relaxed);
		if (qp->srq)
			atomic_fetch_add_explicit(&qp->srq->refs, 1,
						  memory_order_relaxed);
		return;
	}
	atomic_fetch_sub_explicit(&qp->pd->refs, 1, memory_order_release);
	atomic_fetch_sub_explicit(&qp->send_cq->refs, 1, memory_order_release);
	atomic_fetch_sub_explicit(&qp->recv_cq->refs, 1, memory_order_release);
	if (qp->srq)
		atomic_fetch_sub_explicit(&qp->srq->refs, 1,
					  memory_order_release);
}

struct ibv_qp *srn_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *a);
struct ibv_qp *srn_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *a)
{
	struct srn_context *ctx = to_sctx(context);
	struct srn_qp *qp;
	int err = -EINVAL;

	if (a->comp_mask & ~IBV_QP_INIT_ATTR_PD)
		err = -EOPNOTSUPP;
	else if (a->qp_type != IBV_QPT_RC)
		err = -EOPNOTSUPP;
	else if (a->pd && a->send_cq && a->recv_cq)
		err = srn_qp_check_cap(&a->cap, a->srq);
	if (err)
		goto fail;
	pthread_mutex_lock(&ctx->lock);
	err = ctx->nqp >= SRN_MAX_QP ? -ENOMEM : 0;
	if (!err)
		ctx->nqp++;
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		goto fail;
	qp = srn_qp_alloc(ctx, a, &err);
	if (qp && (err = srn_ctl_listen(qp))) {
		srn_qp_free(qp);
		qp = NULL;
	}
	if (!qp) {
		pthread_mutex_lock(&ctx->lock);
		ctx->nqp--;
		pthread_mutex_unlock(&ctx->lock);
		goto fail;
	}
	qp->shm->hdr.id = qp->ibqpx.qp_base.qp_num;
	srn_qp_init_public(qp, a);
	srn_qp_get_refs(qp, 1);
	pthread_mutex_lock(&ctx->lock);
	srn_list_add_tail(&qp->ctx_link, &ctx->qps);
	pthread_mutex_unlock(&ctx->lock);
	return &qp->ibqpx.qp_base;
fail:
	errno = -err;
	return NULL;
}

SRN_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
					struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	memcpy(&a, attr, sizeof(*attr));
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	qp = srn_create_qp_ex(pd->context, &a);
	if (qp)
		attr->cap = a.cap;
	return qp;
}

SRN_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	/* The ibv_wr_* API is not offered yet (create_qp_ex refuses
	 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS), so no QP is extended. */
	return NULL;
}

SRN_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct srn_qp *qp = to_sqp(ibqp);
	struct srn_context *ctx = qp->ctx;

	srn_ctl_unlisten(qp); /* peers see the hang-up */
	srn_tcp_unlisten(qp);
	/* unlink first: whoever still finds the QP holds ctx->lock or the
	 * progress lock and takes sq_lock before they are dropped */
	srn_progress_lock();
	pthread_mutex_lock(&ctx->lock);
	srn_list_del(&qp->ctx_link);
	ctx->nqp--;
	pthread_mutex_unlock(&ctx->lock);
	srn_progress_unlock();
	srn_lock(&qp->sq_lock);
	if (qp->tops)
		qp->tops->disconnect(qp);
	qp->tops = NULL;
	if (qp->stall)
		atomic_fetch_sub_explicit(&ctx->nstalled, 1,
					  memory_order_relaxed);
	qp->stall = SRN_STALL_NONE;
	srn_unlock(&qp->sq_lock);
	srn_qp_get_refs(qp, -1);
	srn_qp_free(qp);
	return 0;
}

static int srn_qp_check_attr(const struct ibv_qp_attr *a, int mask)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return -EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return -EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) && (a->qp_access_flags & ~acc))
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return -EINVAL;
	if ((mask & IBV_QP_AV) &&
	    (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index != 0 ||
	     (a->ah_attr.port_num && a->ah_attr.port_num != 1)))
		return -EINVAL; /* RoCE: every path needs a GRH */
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    a->max_rd_atomic > SRN_MAX_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > SRN_MAX_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return -EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return -EINVAL;
	return 0;
}

static void srn_qp_apply_attr(struct srn_qp *qp, const struct ibv_qp_attr *a,
			      int mask)
{
	struct ibv_qp_attr *q = &qp->attr;

#define SRN_COPY(bit, field)          \
	do {                          \
		if (mask & (bit))     \
			q->field = a->field; \
	} while (0)
	SRN_COPY(IBV_QP_ACCESS_FLAGS, qp_access_flags);
	SRN_COPY(IBV_QP_PKEY_INDEX, pkey_index);
	SRN_COPY(IBV_QP_PORT, port_num);
	SRN_COPY(IBV_QP_AV, ah_attr);
	SRN_COPY(IBV_QP_PATH_MTU, path_mtu);
	SRN_COPY(IBV_QP_TIMEOUT, timeout);
	SRN_COPY(IBV_QP_RETRY_CNT, retry_cnt);
	SRN_COPY(IBV_QP_RNR_RETRY, rnr_retry);
	SRN_COPY(IBV_QP_RQ_PSN, rq_psn);
	SRN_COPY(IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
	SRN_COPY(IBV_QP_MIN_RNR_TIMER, min_rnr_timer);
	SRN_COPY(IBV_QP_SQ_PSN, sq_psn);
	SRN_COPY(IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
	SRN_COPY(IBV_QP_DEST_QPN, dest_qp_num);
	SRN_COPY(IBV_QP_ALT_PATH, alt_ah_attr);
	SRN_COPY(IBV_QP_PATH_MIG_STATE, path_mig_state);
	SRN_COPY(IBV_QP_EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
#undef SRN_COPY
	if (mask & IBV_QP_ACCESS_FLAGS) /* release: peers check it */
		__atomic_store_n(&qp->shm->qp_access_flags,
				 a->qp_access_flags, __ATOMIC_RELEASE);
	if (mask & IBV_QP_DEST_QPN)
		__atomic_store_n(&qp->shm->dest_qpn, a->dest_qp_num,
				 __ATOMIC_RELEASE);
}

/* Back to RESET: empty queues, no connection. Both locks held. */
static void srn_qp_reset(struct srn_qp *qp)
{
	if (qp->tops)
		qp->tops->disconnect(qp);
	qp->tops = NULL;
	if (qp->stall)
		atomic_fetch_sub_explicit(&qp->ctx->nstalled, 1,
					  memory_order_relaxed);
	qp->stall = SRN_STALL_NONE;
	qp->sq.prod = qp->sq.sent = qp->sq.cons = 0;
	if (!qp->srq) {
		uint64_t p = __atomic_load_n(&qp->shm->rq.prod,
					     __ATOMIC_RELAXED);
		/* nobody is connected any more: drop what was posted */
		__atomic_store_n(&qp->shm->rq.cons, p, __ATOMIC_RELEASE);
	}
}

static int srn_qp_transition(struct srn_qp *qp, enum ibv_qp_state cur,
			     enum ibv_qp_state next,
			     const struct ibv_qp_attr *attr)
{
	int err = 0;

	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		const struct srn_transport_ops *t =
			srn_transport_select(&attr->ah_attr.grh.dgid, &err);

		if (!t)
			return err;
		err = t->connect(qp, attr);
		if (err)
			return err;
		qp->tops = t;
	}
	if (next == IBV_QPS_RESET)
		srn_qp_reset(qp);
	srn_qp_set_state(qp, next);
	if (next == IBV_QPS_RTR || next == IBV_QPS_RTS)
		srn_ctl_kick_peers(qp); /* initiators waiting for us */
	if (next == IBV_QPS_ERR)
		srn_req_run(qp); /* flush the send queue */
	return 0;
}

SRN_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			     int mask)
{
	struct srn_qp *qp = to_sqp(ibqp);
	enum ibv_qp_state cur, next;
	int err;

	if (!attr || srn_ctx_is_foreign(qp->ctx))
		return EINVAL;
	srn_lock(&qp->sq_lock);
	srn_lock(&qp->rq_lock);
	cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state :
					  srn_qp_state(qp);
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if ((mask & IBV_QP_CUR_STATE) && cur != srn_qp_state(qp) &&
	    srn_qp_state(qp) != IBV_QPS_ERR)
		err = -EINVAL;
	else
		err = srn_qp_check_modify(cur, next, ibqp->qp_type, mask);
	if (!err)
		err = srn_qp_check_attr(attr, mask);
	if (!err) {
		struct ibv_qp_attr old = qp->attr;

		srn_qp_apply_attr(qp, attr, mask);
		err = srn_qp_transition(qp, srn_qp_state(qp), next, attr);
		if (err)
			qp->attr = old;
	}
	srn_unlock(&qp->rq_lock);
	srn_unlock(&qp->sq_lock);
	return -err;
}

SRN_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			    int mask, struct ibv_qp_init_attr *init)
{
	struct srn_qp *qp = to_sqp(ibqp);

	if (!attr || !init)
		return EINVAL;
	srn_lock(&qp->sq_lock);
	*attr = qp->attr;
	attr->qp_state = srn_qp_state(qp);
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	srn_unlock(&qp->sq_lock);
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->qp_type = ibqp->qp_type;
	init->sq_sig_all = qp->sq_sig_all;
	return 0;
}

/* Completes every receive WQE still posted with WR_FLUSH_ERR. rq_lock held
 * (or the QP is unreachable). An SRQ's WQEs belong to the SRQ: not ours. */
void srn_qp_flush_recv(struct srn_qp *qp)
{
	struct srn_rwqe_buf b;

	if (qp->srq)
		return;
	while (srn_rq_claim(&qp->rqv, &b.w) != -EAGAIN)
		srn_comp_recv_flush(qp, b.w.wr_id);
}

/* Copies a WR into the send queue after checking it like a device does. */
static int srn_sq_push(struct srn_qp *qp, const struct ibv_send_wr *wr)
{
	const struct srn_opcode_info *op = srn_opcode_get(wr->opcode);
	struct srn_sq *sq = &qp->sq;
	struct srn_swqe *w;
	uint64_t total = 0;
	uint8_t *inl;

	if (!op || wr->num_sge < 0 ||
	    (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	/* acquire: pairs with the release in srn_req_complete */
	if (sq->prod - __atomic_load_n(&sq->cons, __ATOMIC_ACQUIRE) >=
	    sq->max_wr)
		return ENOMEM;
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
	w = (struct srn_swqe *)(sq->buf + (sq->prod & (sq->size - 1)) *
						  sq->stride);
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->num_sge = wr->num_sge;
	w->imm_data = wr->imm_data;
	w->total_len = total;
	w->inline_len = 0;
	w->done = 0;
	w->status = IBV_WC_SUCCESS;
	if (op->flags & SRN_OP_REMOTE_ATOMIC) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		inl = (uint8_t *)&w->sge[qp->cap.max_send_sge];
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
	/* release: the WQE is complete before its position is (pairs with
	 * the acquire in the TCP response handler) */
	__atomic_store_n(&sq->prod, sq->prod + 1, __ATOMIC_RELEASE);
	return 0;
}

int srn_qp_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr)
{
	struct srn_qp *qp = to_sqp(ibqp);
	enum ibv_qp_state st;
	int err = 0;

	if (srn_unlikely(srn_ctx_is_foreign(qp->ctx))) {
		*bad_wr = wr;
		return EINVAL;
	}
	srn_lock(&qp->sq_lock);
	st = srn_qp_state(qp);
	if (srn_unlikely(st != IBV_QPS_RTS && st != IBV_QPS_ERR &&
			 st != IBV_QPS_SQD)) {
		*bad_wr = wr;
		srn_unlock(&qp->sq_lock);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		err = srn_sq_push(qp, wr);
		if (srn_unlikely(err)) {
			*bad_wr = wr;
			break;
		}
	}
	srn_req_run(qp); /* the doorbell */
	srn_unlock(&qp->sq_lock);
	return err;
}

int srn_qp_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr)
{
	struct srn_qp *qp = to_sqp(ibqp);
	enum ibv_qp_state st;
	int err = 0;

	if (srn_unlikely(qp->srq || srn_ctx_is_foreign(qp->ctx))) {
		*bad_wr = wr;
		return EINVAL;
	}
	srn_lock(&qp->rq_lock);
	st = srn_qp_state(qp);
	if (srn_unlikely(st == IBV_QPS_RESET)) {
		*bad_wr = wr;
		srn_unlock(&qp->rq_lock);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		err = -srn_rq_post(&qp->rqv, wr);
		if (srn_unlikely(err)) {
			*bad_wr = wr;
			break;
		}
	}
	if (srn_unlikely(st == IBV_QPS_ERR))
		srn_qp_flush_recv(qp);
	srn_unlock(&qp->rq_lock);
	/* acq_rel: pairs with the release in the initiator's stall */
	if (__atomic_load_n(&qp->shm->rq.peer_waiting, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&qp->shm->rq.peer_waiting, 0, __ATOMIC_ACQ_REL))
		srn_ctl_kick_peers(qp);
	return err;
}

/* Moves the QP to ERR from the data path (requester or progress thread);
 * sq_lock held. */
void srn_qp_error(struct srn_qp *qp)
{
	srn_lock(&qp->rq_lock);
	srn_qp_set_state(qp, IBV_QPS_ERR);
	srn_unlock(&qp->rq_lock);
}
