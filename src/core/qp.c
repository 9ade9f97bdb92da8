// SPDX-License-Identifier: MIT
/*
 * softrnic — the QP object: its memory, queues, attributes and the WQE
 * format. A QP has a private send queue (run by the engine's requester at
 * doorbell time) and a receive queue in its shared segment, where
 * initiators take WQEs directly. Only RC is offered for now. The verbs
 * (verbs/verbs_qp.c) put the object, the engine and the transports
 * together; the state machine is the engine's (engine/qp_state.c).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "core/core.h"

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
	/* as a device reports it: all the WQE space an inline WR can use
	 * (its SGE list's too), which may exceed what was asked (Soft-RoCE
	 * does the same) */
	stride = sq->stride - offsetof(struct srn_swqe, sge);
	qp->cap.max_inline_data =
		(uint32_t)(stride < SRN_MAX_INLINE ? stride : SRN_MAX_INLINE);
	sq->max_wr = qp->cap.max_send_wr;
	sq->size = srn_pow2(sq->max_wr ? sq->max_wr : 1);
	sq->buf = srn_pd_buf_alloc(qp->pd, (size_t)sq->size * sq->stride,
				   &sq->buf_custom);
	return sq->buf ? 0 : -ENOMEM;
}

static int srn_qp_seg_init(struct srn_qp *qp, enum ibv_qp_type type)
{
	size_t off = sizeof(struct srn_qp_shm);
	uint32_t size = srn_pow2(qp->cap.max_recv_wr ? qp->cap.max_recv_wr : 1);
	bool rq = !qp->srq && srn_qp_has_rq(type);
	size_t bytes =
		off + (rq ? srn_rq_bytes(size, qp->cap.max_recv_sge) : 0);
	int err = srn_seg_create(&qp->seg, SRN_SEG_QP, bytes, 0);

	if (err)
		return err;
	qp->shm = qp->seg.addr;
	qp->shm->state = IBV_QPS_RESET;
	qp->shm->pd_handle = qp->pd ? qp->pd->handle : 0;
	qp->shm->has_srq = !!qp->srq;
	qp->shm->recv_cq_handle = qp->recv_cq ? qp->recv_cq->handle : 0;
	qp->shm->qp_type = type;
	if (!rq)
		return 0; /* XRC: receives go to the SRQ a request names */
	/* the ring holds a power of two: that many may be posted, and the
	 * capability says so (as devices round up) */
	if (qp->cap.max_recv_wr)
		qp->cap.max_recv_wr = size;
	srn_rq_init(&qp->shm->rq, size, qp->cap.max_recv_sge, off);
	return srn_rq_view_init(&qp->rqv, &qp->shm->rq, qp->seg.addr,
				qp->seg.size);
}

static void srn_qp_free(struct srn_qp *qp)
{
	if (qp->seg.addr)
		srn_seg_unmap(&qp->seg);
	srn_pd_buf_free(qp->pd, qp->sq.buf, qp->sq.buf_custom);
	free(qp);
}

/* the fields every post touches fill two cache lines (struct srn_qp) */
static_assert(offsetof(struct srn_qp, sq) + sizeof(struct srn_sq) <=
		      offsetof(struct srn_qp, ctx) + 128,
	      "the data path's fields of a QP span more than two lines");

static struct srn_qp *srn_qp_alloc(struct srn_context *ctx,
				   struct ibv_qp_init_attr_ex *a, int *err)
{
	/* aligned: its data path's fields are two whole cache lines */
	struct srn_qp *qp = aligned_alloc(_Alignof(struct srn_qp),
					  SRN_ALIGN_UP(sizeof(*qp), 64));

	if (!qp) {
		*err = -ENOMEM;
		return NULL;
	}
	memset(qp, 0, sizeof(*qp));
	qp->ctx = ctx;
	qp->seg.fd = -1;
	qp->cap = a->cap;
	if (a->qp_type == IBV_QPT_XRC_RECV) { /* no PD, CQ or queues */
		qp->xrcd = to_sxrcd(a->xrcd);
		memset(&qp->cap, 0, sizeof(qp->cap));
	} else {
		qp->pd = to_spd(a->pd);
		qp->send_cq = to_scq(a->send_cq);
	}
	if (a->qp_type != IBV_QPT_XRC_RECV && a->qp_type != IBV_QPT_XRC_SEND)
		qp->recv_cq = to_scq(a->recv_cq);
	qp->srq = a->srq && qp->recv_cq ? to_ssrq(a->srq) : NULL;
	if (!srn_qp_has_rq(a->qp_type)) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	} else if (qp->srq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	} else if (!qp->cap.max_recv_sge) {
		qp->cap.max_recv_sge = 1;
	}
	if (!qp->cap.max_send_sge && a->qp_type != IBV_QPT_XRC_RECV)
		qp->cap.max_send_sge = 1;
	qp->sq_sig_all = a->sq_sig_all;
	srn_lock_init(&qp->sq_lock);
	srn_lock_init(&qp->rq_lock);
	srn_lock_init(&qp->comp_lock);
	srn_list_init(&qp->conns);
	srn_list_init(&qp->links);
	pthread_mutex_init(&qp->conn_lock, NULL);
	srn_list_init(&qp->ctx_link);
	srn_list_init(&qp->retry_link);
	*err = srn_sq_init(qp);
	if (!*err)
		*err = srn_qp_seg_init(qp, a->qp_type);
	if (*err) {
		srn_qp_free(qp);
		return NULL;
	}
	return qp;
}

/* The ibv_wr_* opcodes a QP of this type runs (send_ops_flags). */
uint64_t srn_qp_send_ops(enum ibv_qp_type type)
{
	if (type == IBV_QPT_XRC_RECV)
		return 0; /* no send queue */
	if (type == IBV_QPT_XRC_SEND)
		return SRN_QP_SEND_OPS_XRC;
	if (type == IBV_QPT_UD)
		return SRN_QP_SEND_OPS_UD;
	return type == IBV_QPT_UC ? SRN_QP_SEND_OPS_UC : SRN_QP_SEND_OPS_RC;
}

/* The same as a mask of enum ibv_wr_opcode, for ibv_post_send. */
static uint32_t srn_qp_wr_ops(enum ibv_qp_type type)
{
	uint32_t ops = 1u << IBV_WR_SEND | 1u << IBV_WR_SEND_WITH_IMM;

	if (type == IBV_QPT_XRC_RECV)
		return 0;
	if (type == IBV_QPT_XRC_SEND) /* RC's remote operations */
		return ops | 1u << IBV_WR_RDMA_WRITE |
		       1u << IBV_WR_RDMA_WRITE_WITH_IMM |
		       1u << IBV_WR_RDMA_READ |
		       1u << IBV_WR_ATOMIC_CMP_AND_SWP |
		       1u << IBV_WR_ATOMIC_FETCH_AND_ADD;
	if (type == IBV_QPT_UD)
		return ops; /* datagrams: SEND only */
	ops |= 1u << IBV_WR_RDMA_WRITE | 1u << IBV_WR_RDMA_WRITE_WITH_IMM;
	if (type == IBV_QPT_RC)
		ops |= 1u << IBV_WR_RDMA_READ |
		       1u << IBV_WR_ATOMIC_CMP_AND_SWP |
		       1u << IBV_WR_ATOMIC_FETCH_AND_ADD |
		       1u << IBV_WR_LOCAL_INV | 1u << IBV_WR_BIND_MW |
		       1u << IBV_WR_SEND_WITH_INV;
	return ops;
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
	qp->wr_ops = srn_qp_wr_ops(a->qp_type);
	/* relaxed: RESET (0) already, from calloc; atomic because the
	 * QP's control socket may already be served, and the progress
	 * thread reads the state (pairs with the acquire in srn_qp_state,
	 * from srn_ctl_conn_verify) */
	__atomic_store_n(&q->state, IBV_QPS_RESET, __ATOMIC_RELAXED);
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
	if (delta > 0) {
		/* relaxed: references taken while the caller holds the
		 * objects; the counts publish nothing (the puts release) */
		if (qp->xrcd)
			atomic_fetch_add_explicit(&qp->xrcd->refs, 1,
						  memory_order_relaxed);
		if (qp->pd) /* relaxed: as above */
			atomic_fetch_add_explicit(&qp->pd->refs, 1,
						  memory_order_relaxed);
		if (qp->send_cq) /* relaxed: as above */
			atomic_fetch_add_explicit(&qp->send_cq->refs, 1,
						  memory_order_relaxed);
		if (qp->recv_cq) /* relaxed: as above */
			atomic_fetch_add_explicit(&qp->recv_cq->refs, 1,
						  memory_order_relaxed);
		if (qp->srq) /* relaxed: as above */
			atomic_fetch_add_explicit(&qp->srq->refs, 1,
						  memory_order_relaxed);
		return;
	}
	/* release: our use of each object is over before its count drops;
	 * pairs with the acquire of refs in ibv_dealloc_pd, srn_cq_del,
	 * srn_srq_del and srn_close_xrcd */
	if (qp->xrcd)
		atomic_fetch_sub_explicit(&qp->xrcd->refs, 1,
					  memory_order_release);
	if (qp->pd) /* release: as above */
		atomic_fetch_sub_explicit(&qp->pd->refs, 1,
					  memory_order_release);
	if (qp->send_cq) /* release: as above */
		atomic_fetch_sub_explicit(&qp->send_cq->refs, 1,
					  memory_order_release);
	if (qp->recv_cq) /* release: as above */
		atomic_fetch_sub_explicit(&qp->recv_cq->refs, 1,
					  memory_order_release);
	if (qp->srq) /* release: pairs with the acquire in srn_srq_del */
		atomic_fetch_sub_explicit(&qp->srq->refs, 1,
					  memory_order_release);
}

/* A new QP object, counted against the context's limit; no QPN yet (the
 * control plane binds one, engine/ctl.c). 0 or -errno. */
int srn_qp_create(struct srn_context *ctx, struct ibv_qp_init_attr_ex *a,
		  struct srn_qp **qp_p)
{
	int err = -EINVAL;

	if (a->comp_mask &
	    ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
	      IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_XRCD))
		err = -EOPNOTSUPP;
	else if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
		 a->create_flags)
		err = -EOPNOTSUPP; /* none of the creation flags is offered */
	else if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC &&
		 a->qp_type != IBV_QPT_UD && a->qp_type != IBV_QPT_XRC_SEND &&
		 a->qp_type != IBV_QPT_XRC_RECV)
		err = -EOPNOTSUPP;
	else if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
		 (a->send_ops_flags & ~srn_qp_send_ops(a->qp_type)))
		err = -EOPNOTSUPP; /* an opcode this QP type cannot run */
	else if (a->qp_type == IBV_QPT_XRC_RECV)
		err = (a->comp_mask & IBV_QP_INIT_ATTR_XRCD) && a->xrcd ?
			      0 :
			      -EINVAL;
	else if (a->qp_type == IBV_QPT_XRC_SEND)
		err = a->pd && a->send_cq ? srn_qp_check_cap(&a->cap, true) :
					    -EINVAL;
	else if (a->pd && a->send_cq && a->recv_cq)
		err = srn_qp_check_cap(&a->cap, a->srq);
	if (err)
		return err;
	pthread_mutex_lock(&ctx->lock);
	err = ctx->nqp >= SRN_MAX_QP ? -ENOMEM : 0;
	if (!err && ++ctx->nqp >= SRN_QP_PREFETCH_MIN)
		/* relaxed: a hint for posts (srn_sq_prefetch) */
		atomic_store_explicit(&ctx->many_qps, true,
				      memory_order_relaxed);
	pthread_mutex_unlock(&ctx->lock);
	if (err)
		return err;
	*qp_p = srn_qp_alloc(ctx, a, &err);
	if (!*qp_p) {
		pthread_mutex_lock(&ctx->lock);
		ctx->nqp--;
		pthread_mutex_unlock(&ctx->lock);
	}
	return err;
}

/* The ring qp's receives take WQEs from and complete on its recv CQ: its
 * own, or its SRQ's (not XRC: an XRC SRQ's receives complete on the
 * SRQ's CQ); NULL if none. That CQ passes their positions to the ring
 * (srn_cq_rq_attach): any WQE taken is a lower bound of cons, since an
 * SRQ's consumers take its WQEs in ring order too (srn_rq_commit). */
static struct srn_rq_view *srn_qp_rq_on_cq(struct srn_qp *qp)
{
	if (!qp->recv_cq || qp->xrcd)
		return NULL;
	if (qp->srq)
		return qp->srq->xrcd ? NULL : &qp->srq->rqv;
	return qp->rqv.rq ? &qp->rqv : NULL;
}

/* The QP has its QPN: it becomes the application's, and the context's. */
void srn_qp_add(struct srn_qp *qp, struct ibv_qp_init_attr_ex *a)
{
	struct srn_context *ctx = qp->ctx;
	struct srn_rq_view *v;

	qp->shm->hdr.id = qp->ibqpx.qp_base.qp_num;
	srn_qp_init_public(qp, a);
	srn_qp_get_refs(qp, 1);
	qp->held = true;
	v = srn_qp_rq_on_cq(qp);
	if (v)
		srn_cq_rq_attach(qp->recv_cq, qp->ibqpx.qp_base.qp_num, v);
	pthread_mutex_lock(&ctx->lock);
	srn_list_add_tail(&qp->ctx_link, &ctx->qps);
	pthread_mutex_unlock(&ctx->lock);
}

/* Unlinks the QP from its context: nobody finds it any more. */
void srn_qp_del(struct srn_qp *qp)
{
	struct srn_context *ctx = qp->ctx;

	if (srn_qp_rq_on_cq(qp))
		srn_cq_rq_detach(qp->recv_cq, qp->ibqpx.qp_base.qp_num);
	pthread_mutex_lock(&ctx->lock);
	srn_list_del(&qp->ctx_link);
	pthread_mutex_unlock(&ctx->lock);
}

/* retry_lock held: qp leaves its context's retry list (if it is on it). */
void srn_qp_retry_del(struct srn_context *ctx, struct srn_qp *qp)
{
	if (srn_list_empty(&qp->retry_link))
		return;
	srn_list_del(&qp->retry_link);
	/* relaxed: a hint for srn_poll_cq; the list is under retry_lock */
	atomic_fetch_sub_explicit(&ctx->nretry, 1, memory_order_relaxed);
}

/*
 * Any thread: the requester must run qp at its next retry (the progress
 * thread's sweep, or the application's poll of an empty CQ): its send
 * queue stalled, or a handler set pending_run or pending_err (release)
 * before calling this. The flag is stored before the lock is taken here,
 * so srn_req_retry_drop either sees it or dropped the QP before we add
 * it again.
 */
void srn_qp_want_run(struct srn_qp *qp)
{
	struct srn_context *ctx = qp->ctx;

	srn_lock(&ctx->retry_lock);
	if (srn_list_empty(&qp->retry_link)) {
		srn_list_add_tail(&qp->retry_link, &ctx->retry_qps);
		/* relaxed: a hint, as in srn_qp_retry_del */
		atomic_fetch_add_explicit(&ctx->nretry, 1,
					  memory_order_relaxed);
	}
	srn_unlock(&ctx->retry_lock);
}

/* The inverse of srn_qp_create (after srn_qp_del if it was added). */
void srn_qp_destroy(struct srn_qp *qp)
{
	struct srn_context *ctx = qp->ctx;

	if (qp->held)
		srn_qp_get_refs(qp, -1);
	pthread_mutex_lock(&ctx->lock);
	ctx->nqp--;
	pthread_mutex_unlock(&ctx->lock);
	srn_qp_free(qp);
}

int srn_qp_check_attr(const struct ibv_qp_attr *a, int mask)
{
	/* the flags of enum ibv_access_flags: only the REMOTE_* ones mean
	 * something for a QP; the MR-only ones are accepted and kept, as
	 * devices do (rdma-core's own tests pass an MR's flags here) */
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
			IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB |
			IBV_ACCESS_OPTIONAL_RANGE;

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

/* Both QP locks held: qp->rx from qp->attr, for the receive side. */
void srn_qp_publish_rx(struct srn_qp *qp)
{
	/* relaxed: pairs with the relaxed loads in srn_qp_rx_get; each
	 * field stands alone */
	__atomic_store_n(&qp->rx.access, (uint32_t)qp->attr.qp_access_flags,
			 __ATOMIC_RELAXED);
	/* relaxed: as above */
	__atomic_store_n(&qp->rx.rq_psn, qp->attr.rq_psn, __ATOMIC_RELAXED);
	/* relaxed: as above */
	__atomic_store_n(&qp->rx.sq_psn, qp->attr.sq_psn, __ATOMIC_RELAXED);
	/* relaxed: as above */
	__atomic_store_n(&qp->rx.min_rnr_timer, qp->attr.min_rnr_timer,
			 __ATOMIC_RELAXED);
	/* relaxed: as above */
	__atomic_store_n(&qp->rx.timeout, qp->attr.timeout, __ATOMIC_RELAXED);
	/* relaxed: as above */
	__atomic_store_n(&qp->rx.retry_cnt, qp->attr.retry_cnt,
			 __ATOMIC_RELAXED);
}

void srn_qp_apply_attr(struct srn_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr *q = &qp->attr;

#define SRN_COPY(bit, field)                 \
	do {                                 \
		if (mask & (bit))            \
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
	SRN_COPY(IBV_QP_QKEY, qkey);
#undef SRN_COPY
	/* release: pairs with the acquire in srn_udp_to_qp (the Q_Key
	 * check of a datagram); it publishes nothing else */
	if (mask & IBV_QP_QKEY)
		__atomic_store_n(&qp->shm->qkey, a->qkey, __ATOMIC_RELEASE);
	/* release: pairs with the acquire in srn_target_allows (peers check
	 * it); it publishes nothing else */
	if (mask & IBV_QP_ACCESS_FLAGS)
		__atomic_store_n(&qp->shm->qp_access_flags, a->qp_access_flags,
				 __ATOMIC_RELEASE);
	/* release: pairs with the acquire in srn_ctl_on_stat; it publishes
	 * nothing else */
	if (mask & IBV_QP_DEST_QPN)
		__atomic_store_n(&qp->shm->dest_qpn, a->dest_qp_num,
				 __ATOMIC_RELEASE);
}

/* Back to RESET: empty queues (the connection is gone). Both locks held. */
void srn_qp_reset_queues(struct srn_qp *qp)
{
	qp->fatal_sent = false;
	/* errors asked for before the reset (a peer's err_req, a handler's
	 * pending_err) were for the old connection: a reset QP forgets them,
	 * as a device's responder has moved to ERR before its NAK leaves.
	 * relaxed: both are read and cleared under sq_lock, held here and by
	 * srn_progress_scan (err_req to pending_err); the progress lock of
	 * the transport's disconnect, just done, kept its handlers out */
	__atomic_store_n(&qp->shm->err_req, 0, __ATOMIC_RELAXED);
	atomic_store_explicit(&qp->pending_err, 0, memory_order_relaxed);
	atomic_store_explicit(&qp->pending_run, 0, memory_order_relaxed);
	qp->sq.prod = qp->sq.sent = qp->sq.cons = qp->sq.base = 0;
	if (!qp->srq && qp->rqv.rq) {
		/* relaxed: only srn_rq_post writes prod, under rq_lock (held) */
		uint64_t p =
			__atomic_load_n(&qp->shm->rq.prod, __ATOMIC_RELAXED);
		/* nobody is connected any more: drop what was posted.
		 * release: pairs with the acquire of cons in srn_rq_post and
		 * srn_rq_peek */
		__atomic_store_n(&qp->shm->rq.cons, p, __ATOMIC_RELEASE);
	}
}

void srn_qp_query(struct srn_qp *qp, struct ibv_qp_attr *attr,
		  struct ibv_qp_init_attr *init)
{
	struct ibv_qp *ibqp = &qp->ibqpx.qp_base;

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
}
