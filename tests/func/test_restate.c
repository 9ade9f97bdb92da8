// SPDX-License-Identifier: MIT
/*
 * A connected RC pair that went to ERR is brought back one side at a
 * time: each QP goes RESET -> INIT, then RTR, then RTS with the same
 * attributes as before (peer QPN, PSNs), in every interleaving of the two
 * sides' three steps (the first side may be back in RTS while the other
 * is still in ERR, as rdma-core's test_mr_rereg_* do). A device has no
 * connection to lose: once both are in RTS again, they talk both ways.
 */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define T 5000
#define MSG 64

/* The steps of one side, in its order. */
enum step {
	STEP_RESET, /* RESET, then INIT */
	STEP_RTR,
	STEP_RTS,
	STEP_NR
};

/* Which side takes each of the six steps: bit i set = the initiator's
 * turn at step i (three bits set: every interleaving of 3 + 3). With
 * wait_err the sides start once both saw their QP in ERR; without, as soon
 * as the initiator has its error completion (the target's QP may not have
 * moved to ERR yet: its reset must forget that error). */
struct restate_case {
	unsigned order;
	bool wait_err;
	char name[40];
};

#define NORDERS 20
#define NCASES (2 * NORDERS)
static struct restate_case cases[NCASES];

static unsigned popcount6(unsigned v)
{
	unsigned n = 0;

	for (int i = 0; i < 6; i++)
		n += (v >> i) & 1;
	return n;
}

static void cases_make(void)
{
	unsigned k = 0;

	for (unsigned v = 0; v < 64 && k < NORDERS; v++) {
		char seq[7];

		if (popcount6(v) != 3)
			continue;
		for (int i = 0; i < 6; i++) /* I: initiator, T: target */
			seq[i] = (v >> i) & 1 ? 'I' : 'T';
		seq[6] = 0;
		for (int w = 0; w < 2; w++) {
			struct restate_case *rc = &cases[k + w * NORDERS];

			rc->order = v;
			rc->wait_err = !w;
			snprintf(rc->name, sizeof(rc->name), "restate_%s%s",
				 w ? "nowait_" : "", seq);
		}
		k++;
	}
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return IBV_QPS_UNKNOWN;
	return a.qp_state;
}

/* Waits (bounded) for qp to reach ERR. */
static bool wait_err(struct ibv_qp *qp)
{
	for (int i = 0; i < 500; i++) {
		if (qp_state(qp) == IBV_QPS_ERR)
			return true;
		usleep(10000);
	}
	return false;
}

static int do_step(struct side *s, enum step st, const struct peer_info *p,
		   const struct side_opts *o)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	switch (st) {
	case STEP_RESET:
		if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE))
			return -1;
		return side_init(s, o);
	case STEP_RTR:
	case STEP_RTS:
		/* side_rtr_rts does both; RTR alone is its first half */
		break;
	default:
		return -1;
	}
	if (st == STEP_RTS) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = o->timeout;
		a.retry_cnt = o->retry_cnt;
		a.rnr_retry = o->rnr_retry;
		a.sq_psn = o->psn;
		a.max_rd_atomic = 16;
		return ibv_modify_qp(s->qp, &a,
				     IBV_QP_STATE | IBV_QP_SQ_PSN |
					     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC) ?
			       -1 :
			       0;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = p->qpn;
	a.rq_psn = o->psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	return ibv_modify_qp(s->qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER) ?
		       -1 :
		       0;
}

/* One completion of opcode op, successful. */
static bool got(struct side *s, enum ibv_wc_opcode op, const char *what)
{
	struct ibv_wc wc;

	if (poll_one(s->cq, &wc, T)) {
		CHECK(0, "%s: no completion", what);
		return false;
	}
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == op,
	      "%s: %s (opcode %d)", what, ibv_wc_status_str(wc.status),
	      wc.opcode);
	return wc.status == IBV_WC_SUCCESS;
}

/*
 * Both ways, after the pair is back: a SEND each way, then a WRITE each
 * way, each checked at the target. The buffer: [0, MSG) what is sent,
 * [MSG, 2 MSG) the receive buffer, [2 MSG, 3 MSG) where WRITEs land.
 */
static void traffic(struct side *s, struct chan *c, const struct peer_info *p,
		    bool me_first, int round)
{
	char want[MSG];

	CHECK(!post_recv1(s->qp, s->buf + MSG, MSG, s->mr->lkey, 1),
	      "post_recv");
	chan_barrier(c);
	for (int turn = 0; turn < 2; turn++) {
		bool mine = (turn == 0) == me_first;

		memset(want, 0, sizeof(want));
		snprintf(want, sizeof(want), "round %d turn %d", round, turn);
		if (mine) {
			memcpy(s->buf, want, MSG);
			CHECK(!post_send1(s->qp, IBV_WR_SEND, s->buf, MSG,
					  s->mr->lkey, 0, 0, IBV_SEND_SIGNALED,
					  2),
			      "post SEND");
			got(s, IBV_WC_SEND, "SEND");
			CHECK(!post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, MSG,
					  s->mr->lkey, p->addr + 2 * MSG,
					  p->rkey, IBV_SEND_SIGNALED, 3),
			      "post WRITE");
			got(s, IBV_WC_RDMA_WRITE, "WRITE");
			chan_barrier(c);
		} else {
			if (got(s, IBV_WC_RECV, "receive"))
				CHECK(!memcmp(s->buf + MSG, want, MSG),
				      "SEND payload");
			chan_barrier(c); /* the WRITE is done */
			CHECK(!memcmp(s->buf + 2 * MSG, want, MSG),
			      "WRITE payload");
		}
	}
}

/* The initiator puts both QPs in ERR: a WRITE with a bad rkey fails with
 * REM_ACCESS_ERR here and moves the target's QP to ERR. */
static void both_to_err(struct side *s, struct chan *c,
			const struct peer_info *p, bool initiator, bool wait)
{
	if (initiator) {
		struct ibv_wc wc;

		CHECK(!post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, 8,
				  s->mr->lkey, p->addr, p->rkey + 0x1000,
				  IBV_SEND_SIGNALED, 9),
		      "post bad WRITE");
		CHECK(!poll_one(s->cq, &wc, T) &&
			      wc.status == IBV_WC_REM_ACCESS_ERR,
		      "bad rkey: REM_ACCESS_ERR");
	}
	if (wait || initiator)
		CHECK(wait_err(s->qp), "QP in ERR");
	chan_barrier(c);
}

static int restate_role(struct chan *c, const struct restate_case *rc,
			bool initiator)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	unsigned next = 0; /* my next step */

	side_opts_default(&o);
	o.psn = 0x1234;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	traffic(&s, c, &p, initiator, 0);
	both_to_err(&s, c, &p, initiator, rc->wait_err);
	for (int i = 0; i < 6; i++) {
		bool mine = ((rc->order >> i) & 1) == initiator;

		if (mine) {
			CHECK(!do_step(&s, (enum step)next, &p, &o),
			      "step %u: %s", next, strerror(errno));
			next++;
		}
		chan_barrier(c);
	}
	CHECK(qp_state(s.qp) == IBV_QPS_RTS, "back in RTS");
	traffic(&s, c, &p, initiator, 1);
	traffic(&s, c, &p, !initiator, 2);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int restate_init(struct chan *c, void *arg)
{
	return restate_role(c, arg, true);
}

static int restate_target(struct chan *c, void *arg)
{
	return restate_role(c, arg, false);
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	cases_make();
	for (int i = 0; i < NCASES; i++)
		RUN(cases[i].name, restate_init, restate_target, &cases[i], m,
		    pass, fail);
	return test_summary(pass, fail);
}
