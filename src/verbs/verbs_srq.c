// SPDX-License-Identifier: MIT
/*
 * softrnic — the SRQ verbs that reach beyond the SRQ object (core/srq.c):
 * create and destroy (serialised with the progress engine) and posting,
 * which wakes the initiators that stalled for want of a receive WQE.
 */
#include <errno.h>

#include "engine/engine.h"
#include "verbs/verbs.h"

SRN_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *ibpd,
					  struct ibv_srq_init_attr *attr)
{
	struct srn_srq *srq;
	int err = srn_srq_create(ibpd, attr, &srq);

	if (err) {
		errno = -err;
		return NULL;
	}
	return &srq->ibsrq;
}

/* ibv_create_srq_ex: a basic SRQ, or an XRC SRQ with its domain, CQ and
 * a host-unique number. */
struct ibv_srq *srn_create_srq_ex(struct ibv_context *context,
				  struct ibv_srq_init_attr_ex *attr)
{
	const uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	enum ibv_srq_type type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ?
					 attr->srq_type :
					 IBV_SRQT_BASIC;
	struct srn_srq *srq;
	uint32_t srqn;
	int err = 0, fd;

	if (attr->comp_mask & ~known)
		err = -EOPNOTSUPP;
	else if (type == IBV_SRQT_BASIC &&
		 (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd)
		return ibv_create_srq(attr->pd,
				      (struct ibv_srq_init_attr *)attr);
	else if (type == IBV_SRQT_BASIC)
		err = -EINVAL;
	else if (type != IBV_SRQT_XRC)
		err = -EOPNOTSUPP; /* tag matching */
	if (!err)
		err = srn_srq_create_xrc(attr, &srq);
	if (!err) {
		fd = srn_ctl_srqn_reserve(&srqn);
		if (fd < 0) {
			srn_srq_del(srq);
			srn_srq_destroy(srq);
			err = fd;
		}
	}
	if (err) {
		errno = -err;
		return NULL;
	}
	srn_srq_xrc_publish(srq, srqn, fd);
	return &srq->ibsrq;
}

int srn_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct srn_srq *srq = to_ssrq(ibsrq);

	if (!srq->xrcd)
		return EOPNOTSUPP; /* only an XRC SRQ has a number */
	*srq_num = srq->srqn;
	return 0;
}

SRN_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct srn_srq *srq = to_ssrq(ibsrq);
	int err;

	srn_progress_lock(); /* no progress handler looks at it after this */
	err = srn_srq_del(srq);
	srn_progress_unlock();
	if (err)
		return -err;
	srn_srq_destroy(srq);
	return 0;
}

/* Kicks the initiators of every QP attached to srq that wait for WQEs. */
static void srn_srq_wake_waiters(struct srn_srq *srq)
{
	struct srn_context *ctx = srq->ctx;
	struct srn_list *pos, *tmp;

	pthread_mutex_lock(&ctx->lock);
	srn_list_for_each_safe(pos, tmp, &ctx->qps) {
		struct srn_qp *qp =
			srn_list_entry(pos, struct srn_qp, ctx_link);

		if (qp->srq == srq ||
		    (srq->xrcd && qp->xrcd &&
		     srn_xrcd_id(qp->xrcd) == srn_xrcd_id(srq->xrcd)))
			srn_ctl_kick_peers(qp); /* an XRC SRQ: its TGT QPs' */
	}
	pthread_mutex_unlock(&ctx->lock);
}

static int srn_srq_post_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr)
{
	struct srn_srq *srq = to_ssrq(ibsrq);
	int err;

	if (srn_ctx_is_foreign(srq->ctx)) {
		*bad_wr = wr;
		return EINVAL;
	}
	err = srn_srq_post(srq, wr, bad_wr);
	/* a full barrier after srn_srq_post's unlock, a plain store (pairs
	 * with the seq_cst fence in srn_resp_peek_recv; see
	 * srn_qp_post_recv) */
	srn_smp_mb();
	if (srn_srq_take_peer_waiting(srq))
		srn_srq_wake_waiters(srq);
	return err;
}

void srn_verbs_srq_ops(struct ibv_context_ops *ops)
{
	ops->post_srq_recv = srn_srq_post_recv;
}
