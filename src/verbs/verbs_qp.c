// SPDX-License-Identifier: MIT
/*
 * softrnic — the QP verbs: create, modify, query, destroy, post_send and
 * post_recv. Each puts together the QP object (core/qp.c), the engine
 * (state machine, requester, control plane) and, through the registry,
 * the QP's transport.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sq.h"
#include "engine/transport.h"
#include "verbs/verbs.h"

struct ibv_qp *srn_create_qp_ex(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *a)
{
	struct srn_qp *qp;
	int err = srn_qp_create(to_sctx(context), a, &qp);

	if (!err) {
		err = srn_ctl_listen(qp); /* binds the QPN */
		if (!err && a->qp_type == IBV_QPT_UD)
			err = srn_ud_create(qp);
		if (err && qp->ud) {
			srn_ctl_unlisten(qp);
			srn_transport_qp_destroy(qp);
			srn_ud_destroy(qp);
		}
		if (err)
			srn_qp_destroy(qp);
	}
	if (err) {
		errno = -err;
		return NULL;
	}
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		srn_qpex_init(qp, a->send_ops_flags);
	srn_qp_add(qp, a);
	return &qp->ibqpx.qp_base;
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

SRN_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct srn_qp *qp = to_sqp(ibqp);

	/* extended: created with send_ops_flags (srn_qpex_init) */
	return qp->ibqpx.wr_start ? &qp->ibqpx : NULL;
}

/* ibv_open_qp: another handle on an XRC TGT QP of this context, in the
 * same XRC domain. The handle is the QP itself; the QP lives until every
 * handle is destroyed (its creator's included). */
struct ibv_qp *srn_open_qp(struct ibv_context *context,
			   struct ibv_qp_open_attr *attr)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			      IBV_QP_OPEN_ATTR_TYPE;
	struct srn_context *ctx = to_sctx(context);
	struct srn_qp *found = NULL;
	struct srn_list *pos;

	if (!attr || (attr->comp_mask & need) != need ||
	    attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED || !attr->xrcd ||
	    attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&ctx->lock);
	srn_list_for_each(pos, &ctx->qps) {
		struct srn_qp *qp =
			srn_list_entry(pos, struct srn_qp, ctx_link);

		if (qp->ibqpx.qp_base.qp_num == attr->qp_num && qp->xrcd &&
		    srn_xrcd_id(qp->xrcd) ==
			    srn_xrcd_id(to_sxrcd(attr->xrcd))) {
			found = qp;
			pthread_mutex_lock(&srn_xrc_lock);
			qp->opens++;
			pthread_mutex_unlock(&srn_xrc_lock);
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	if (!found) {
		errno = ENOENT;
		return NULL;
	}
	return &found->ibqpx.qp_base;
}

/* An XRC TGT QP opened more than once: drops one handle. */
static bool srn_qp_close_handle(struct srn_qp *qp)
{
	bool more = false;

	if (!qp->xrcd)
		return false;
	pthread_mutex_lock(&srn_xrc_lock);
	if (qp->opens) {
		qp->opens--;
		more = true;
	}
	pthread_mutex_unlock(&srn_xrc_lock);
	return more;
}

SRN_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct srn_qp *qp = to_sqp(ibqp);

	if (srn_qp_close_handle(qp))
		return 0; /* other handles still use it */
	srn_ctl_unlisten(qp); /* peers see the hang-up */
	srn_transport_qp_destroy(qp);
	/* unlink first: whoever still finds the QP holds ctx->lock or the
	 * progress lock and takes sq_lock before they are dropped */
	srn_progress_lock();
	srn_qp_del(qp);
	srn_progress_unlock();
	srn_lock(&qp->sq_lock);
	srn_req_detach(qp);
	srn_unlock(&qp->sq_lock);
	srn_ud_destroy(qp);
	srn_qp_destroy(qp);
	return 0;
}

/* INIT->RTR attaches the QP to the transport that reaches its peer. */
static int srn_qp_attach(struct srn_qp *qp, const struct ibv_qp_attr *attr)
{
	const struct srn_transport_ops *t = NULL;
	bool foreign;
	int err;

	if (qp->ibqpx.qp_base.qp_type == IBV_QPT_UD) {
		qp->tops = &srn_ud_ops; /* each datagram chooses its own */
		return 0;
	}
	t = srn_transport_select(&attr->ah_attr.grh.dgid, &err);
	if (!t)
		return err;
	/* where the transport's dial cannot tell whether the peer QP is
	 * another user's, ask first (a probe of its control socket) */
	foreign = !srn_transport_checks_owner(t, qp) &&
		  srn_ctl_peer_foreign(&attr->ah_attr.grh.dgid,
				       attr->dest_qp_num);
	err = srn_transport_connect(qp, attr, t, foreign, &t);
	if (!err)
		qp->tops = t;
	return err;
}

static int srn_qp_transition(struct srn_qp *qp, enum ibv_qp_state cur,
			     enum ibv_qp_state next,
			     const struct ibv_qp_attr *attr)
{
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		int err = srn_qp_attach(qp, attr);

		if (err)
			return err;
	}
	if (next == IBV_QPS_RESET) {
		srn_req_detach(qp);
		srn_qp_reset_queues(qp);
		/* its old completions go too (as libmlx5's cq clean) */
		if (qp->send_cq) /* an XRC TGT QP has no CQ */
			srn_cq_clean(qp->send_cq, qp->ibqpx.qp_base.qp_num);
		if (qp->recv_cq && qp->recv_cq != qp->send_cq)
			srn_cq_clean(qp->recv_cq, qp->ibqpx.qp_base.qp_num);
	}
	srn_qp_set_state(qp, next);
	if (next == IBV_QPS_RTR || next == IBV_QPS_RTS)
		srn_ctl_kick_peers(qp); /* initiators waiting for us */
	if (next == IBV_QPS_ERR)
		srn_req_run(qp); /* flush the send queue */
	return 0;
}

/* Both QP locks held. */
static int srn_qp_modify(struct srn_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	enum ibv_qp_state cur, next;
	struct ibv_qp_attr old;
	int err;

	cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : srn_qp_state(qp);
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if ((mask & IBV_QP_CUR_STATE) && cur != srn_qp_state(qp) &&
	    srn_qp_state(qp) != IBV_QPS_ERR)
		return -EINVAL;
	err = srn_qp_check_modify(cur, next, qp->ibqpx.qp_base.qp_type, mask);
	if (!err)
		err = srn_qp_check_attr(attr, mask);
	if (err)
		return err;
	old = qp->attr;
	srn_qp_apply_attr(qp, attr, mask);
	srn_qp_publish_rx(qp); /* before the transport connects at RTR */
	err = srn_qp_transition(qp, srn_qp_state(qp), next, attr);
	if (err) {
		qp->attr = old;
		srn_qp_publish_rx(qp);
	}
	return err;
}

SRN_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			     int mask)
{
	struct srn_qp *qp = to_sqp(ibqp);
	int err;

	if (!attr || srn_ctx_is_foreign(qp->ctx))
		return EINVAL;
	srn_lock(&qp->sq_lock);
	srn_lock(&qp->rq_lock);
	err = srn_qp_modify(qp, attr, mask);
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
	srn_qp_query(qp, attr, init);
	srn_lock(&qp->sq_lock);
	if (qp->tops && qp->tops->query)
		qp->tops->query(qp, attr);
	srn_unlock(&qp->sq_lock);
	return 0;
}

static int srn_qp_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			    struct ibv_send_wr **bad_wr)
{
	struct srn_qp *qp = to_sqp(ibqp);
	enum ibv_qp_state st;
	int err = 0;

	if (srn_unlikely(srn_ctx_is_foreign(qp->ctx) || !qp->send_cq)) {
		*bad_wr = wr; /* an XRC TGT QP has no send queue */
		return EINVAL;
	}
	srn_sq_prefetch(qp, wr);
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
	srn_req_doorbell(qp);
	srn_unlock(&qp->sq_lock);
	return err;
}

static int srn_qp_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			    struct ibv_recv_wr **bad_wr)
{
	struct srn_qp *qp = to_sqp(ibqp);
	enum ibv_qp_state st;
	int err = 0;

	/* an SRQ's QP, or an XRC QP: no receive queue of its own */
	if (srn_unlikely(qp->srq || !qp->rqv.rq ||
			 srn_ctx_is_foreign(qp->ctx))) {
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
	/* a full barrier (the unlock is a plain store): the ring's new
	 * WQEs are visible before we look for a waiting initiator (pairs
	 * with the seq_cst fence in srn_resp_peek_recv) */
	srn_smp_mb();
	if (srn_qp_take_peer_waiting(qp))
		srn_ctl_kick_peers(qp);
	return err;
}

/* A multicast GID: ff00::/8, or IPv4-mapped 224.0.0.0/4 (RoCEv2). */
static bool srn_gid_is_mcast(const union ibv_gid *g)
{
	static const uint8_t v4[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};

	if (g->raw[0] == 0xff)
		return true;
	return !memcmp(g->raw, v4, sizeof(v4)) && (g->raw[12] & 0xf0) == 0xe0;
}

static int srn_qp_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
			bool attach)
{
	struct srn_qp *qp = to_sqp(ibqp);
	int err;

	if (!gid || ibqp->qp_type != IBV_QPT_UD || !srn_gid_is_mcast(gid))
		return EINVAL;
	if (srn_ctx_is_foreign(qp->ctx))
		return EINVAL;
	srn_progress_lock(); /* the receive side looks groups up under it */
	err = srn_transport_mcast(qp, gid, attach);
	srn_progress_unlock();
	return -err;
}

SRN_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				uint16_t lid)
{
	(void)lid; /* RoCE: no LIDs */
	return srn_qp_mcast(qp, gid, true);
}

SRN_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				uint16_t lid)
{
	(void)lid;
	return srn_qp_mcast(qp, gid, false);
}

void srn_verbs_qp_ops(struct ibv_context_ops *ops)
{
	ops->post_send = srn_qp_post_send;
	ops->post_recv = srn_qp_post_recv;
}
