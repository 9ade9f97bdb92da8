// SPDX-License-Identifier: MIT
/*
 * softrnic — the QP state machine (RC, UC, UD, XRC).
 *
 * srn_qp_check_modify() says whether a transition and its attribute mask
 * are legal (the same table the IB spec and the kernel's verbs core use);
 * srn_qp_set_state() is the only function that writes a QP's state.
 */
#include <errno.h>

#include "engine/engine.h"

const char *const srn_qp_state_names[] = {
	[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT",
	[IBV_QPS_RTR] = "RTR",	   [IBV_QPS_RTS] = "RTS",
	[IBV_QPS_SQD] = "SQD",	   [IBV_QPS_SQE] = "SQE",
	[IBV_QPS_ERR] = "ERR",	   [IBV_QPS_UNKNOWN] = "UNKNOWN",
};

struct srn_qp_trans {
	bool valid;
	int req;
	int opt;
};

#define S(x) IBV_QPS_##x
static const struct srn_qp_trans srn_rc_trans[IBV_QPS_ERR + 1]
					     [IBV_QPS_ERR + 1] = {
	[S(RESET)] = {
		[S(RESET)] = { true, 0, 0 },
		[S(INIT)] = { true, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_ACCESS_FLAGS, 0 },
	},
	[S(INIT)] = {
		[S(INIT)] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS },
		[S(RTR)] = { true, IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC |
					   IBV_QP_MIN_RNR_TIMER,
			     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				     IBV_QP_PKEY_INDEX },
	},
	[S(RTR)] = {
		[S(RTS)] = { true, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC,
			     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
				     IBV_QP_ACCESS_FLAGS |
				     IBV_QP_MIN_RNR_TIMER |
				     IBV_QP_PATH_MIG_STATE },
	},
	[S(RTS)] = {
		[S(RTS)] = { true, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
					      IBV_QP_ALT_PATH |
					      IBV_QP_PATH_MIG_STATE |
					      IBV_QP_MIN_RNR_TIMER },
		[S(SQD)] = { true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[S(SQD)] = {
		[S(RTS)] = { true, 0, IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
					      IBV_QP_ACCESS_FLAGS |
					      IBV_QP_MIN_RNR_TIMER |
					      IBV_QP_PATH_MIG_STATE },
		[S(SQD)] = { true, 0, IBV_QP_AV | IBV_QP_ALT_PATH |
					      IBV_QP_ACCESS_FLAGS |
					      IBV_QP_MIN_RNR_TIMER |
					      IBV_QP_PATH_MIG_STATE |
					      IBV_QP_MAX_QP_RD_ATOMIC |
					      IBV_QP_MAX_DEST_RD_ATOMIC |
					      IBV_QP_TIMEOUT |
					      IBV_QP_RETRY_CNT |
					      IBV_QP_RNR_RETRY |
					      IBV_QP_PKEY_INDEX | IBV_QP_PORT },
	},
};
/* UC: no acknowledgements, so no retry, timeout, RNR or RDMA-read
 * attributes (IB spec, the kernel's qp_state_table) */
static const struct srn_qp_trans srn_uc_trans[IBV_QPS_ERR + 1]
					     [IBV_QPS_ERR + 1] = {
	[S(RESET)] = {
		[S(RESET)] = { true, 0, 0 },
		[S(INIT)] = { true, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_ACCESS_FLAGS, 0 },
	},
	[S(INIT)] = {
		[S(INIT)] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS },
		[S(RTR)] = { true, IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
			     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				     IBV_QP_PKEY_INDEX },
	},
	[S(RTR)] = {
		[S(RTS)] = { true, IBV_QP_SQ_PSN,
			     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
				     IBV_QP_ACCESS_FLAGS |
				     IBV_QP_PATH_MIG_STATE },
	},
	[S(RTS)] = {
		[S(RTS)] = { true, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
					      IBV_QP_ALT_PATH |
					      IBV_QP_PATH_MIG_STATE },
		[S(SQD)] = { true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[S(SQD)] = {
		[S(RTS)] = { true, 0, IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
					      IBV_QP_ACCESS_FLAGS |
					      IBV_QP_PATH_MIG_STATE },
		[S(SQD)] = { true, 0, IBV_QP_AV | IBV_QP_ALT_PATH |
					      IBV_QP_ACCESS_FLAGS |
					      IBV_QP_PATH_MIG_STATE |
					      IBV_QP_PKEY_INDEX | IBV_QP_PORT },
	},
};
/* UD: no path (each WR names its address), a Q_Key instead of access
 * flags (IB spec, the kernel's qp_state_table) */
static const struct srn_qp_trans srn_ud_trans[IBV_QPS_ERR + 1]
					     [IBV_QPS_ERR + 1] = {
	[S(RESET)] = {
		[S(RESET)] = { true, 0, 0 },
		[S(INIT)] = { true, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_QKEY, 0 },
	},
	[S(INIT)] = {
		[S(INIT)] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					       IBV_QP_QKEY },
		[S(RTR)] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY },
	},
	[S(RTR)] = {
		[S(RTS)] = { true, IBV_QP_SQ_PSN,
			     IBV_QP_CUR_STATE | IBV_QP_QKEY },
	},
	[S(RTS)] = {
		[S(RTS)] = { true, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },
		[S(SQD)] = { true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[S(SQD)] = {
		[S(RTS)] = { true, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },
		[S(SQD)] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY },
	},
};
#undef S

static const struct srn_qp_trans *srn_qp_trans_get(enum ibv_qp_type type,
						   enum ibv_qp_state cur,
						   enum ibv_qp_state next)
{
	if (type == IBV_QPT_UD)
		return &srn_ud_trans[cur][next];
	if (type == IBV_QPT_UC)
		return &srn_uc_trans[cur][next];
	return &srn_rc_trans[cur][next];
}

/*
 * XRC: RC's table, less what the half a QP lacks (IB spec, the kernel's
 * qp_state_table): an INI QP has no responder (MAX_DEST_RD_ATOMIC,
 * MIN_RNR_TIMER), a TGT QP no requester (RETRY_CNT, RNR_RETRY,
 * MAX_QP_RD_ATOMIC). As the kernel's modify_qp_mask, those bits are
 * ignored when given (perftest gives them to both).
 */
static int srn_xrc_ignored(enum ibv_qp_type type)
{
	if (type == IBV_QPT_XRC_SEND)
		return IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
}

static struct srn_qp_trans srn_xrc_trans(enum ibv_qp_type type,
					 enum ibv_qp_state cur,
					 enum ibv_qp_state next)
{
	struct srn_qp_trans t = srn_rc_trans[cur][next];

	t.req &= ~srn_xrc_ignored(type);
	t.opt &= ~srn_xrc_ignored(type);
	return t;
}

/* 0 if moving a QP of this type from cur to next with this mask is
 * legal. */
int srn_qp_check_modify(enum ibv_qp_state cur, enum ibv_qp_state next,
			enum ibv_qp_type type, int mask)
{
	const struct srn_qp_trans *t;
	struct srn_qp_trans xt;

	if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD &&
	    type != IBV_QPT_XRC_SEND && type != IBV_QPT_XRC_RECV)
		return -EOPNOTSUPP;
	if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR)
		return -EINVAL;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		/* always allowed, with nothing but the state */
		return (mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE)) ? -EINVAL :
								     0;
	}
	if (type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV) {
		xt = srn_xrc_trans(type, cur, next);
		t = &xt;
		mask &= ~srn_xrc_ignored(type);
	} else {
		t = srn_qp_trans_get(type, cur, next);
	}
	if (!t->valid)
		return -EINVAL;
	if ((mask & t->req) != t->req)
		return -EINVAL;
	if (mask & ~(t->req | t->opt | IBV_QP_STATE))
		return -EINVAL;
	return 0;
}

/*
 * The one writer of a QP's state. Called with sq_lock and rq_lock held.
 * Publishes the state to peers (release, pairs with the acquire in the
 * initiator's state checks) and runs the side effects of entering ERR.
 */
void srn_qp_set_state(struct srn_qp *qp, enum ibv_qp_state next)
{
	enum ibv_qp_state cur = srn_qp_state(qp);

	if (cur == next)
		return;
	srn_dbg("QP 0x%06x %s -> %s", qp->ibqpx.qp_base.qp_num,
		srn_qp_state_names[cur], srn_qp_state_names[next]);
	/* release: pairs with the acquire in srn_qp_state (this process)
	 * and with the acquire of shm->state in a transport's execute op
	 * (peers) */
	__atomic_store_n(&qp->ibqpx.qp_base.state, next, __ATOMIC_RELEASE);
	__atomic_store_n(&qp->shm->state, (uint32_t)next, __ATOMIC_RELEASE);
	qp->attr.qp_state = next;
	if (next == IBV_QPS_ERR) {
		/* a failed WQE, which srn_comp_send_done held back until the QP
		 * is seen in ERR, completes now, ahead of the flushes: the
		 * error comes first in a shared CQ, as from a device */
		srn_comp_send_done(qp);
		srn_qp_flush_recv(qp);
	}
}

/* Completes every receive WQE still posted with WR_FLUSH_ERR. rq_lock held
 * (or the QP is unreachable). An SRQ's WQEs belong to the SRQ: not ours. */
void srn_qp_flush_recv(struct srn_qp *qp)
{
	struct srn_rwqe_buf b;

	if (qp->srq || !qp->rqv.rq)
		return; /* an SRQ's WQEs, or no RQ (XRC) */
	while (srn_rq_claim(&qp->rqv, &b.w, NULL) != -EAGAIN)
		srn_comp_recv_flush(qp, b.w.wr_id);
}

/* Moves the QP to ERR from the data path (requester or progress thread);
 * sq_lock held. */
void srn_qp_error(struct srn_qp *qp)
{
	srn_lock(&qp->rq_lock);
	srn_qp_set_state(qp, IBV_QPS_ERR);
	srn_unlock(&qp->rq_lock);
}

/* The QP's peer or link was lost: ERR, and IBV_EVENT_QP_FATAL, once until
 * the QP is reset (also when the requester saw the loss first and moved
 * the QP to ERR itself). sq_lock held. */
void srn_qp_fatal(struct srn_qp *qp)
{
	struct ibv_async_event ev = { .element.qp = &qp->ibqpx.qp_base,
				      .event_type = IBV_EVENT_QP_FATAL };

	if (qp->fatal_sent)
		return;
	qp->fatal_sent = true;
	if (srn_qp_state(qp) != IBV_QPS_ERR)
		srn_qp_error(qp);
	srn_async_event_post(qp->ctx, &ev);
}
