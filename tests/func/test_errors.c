// SPDX-License-Identifier: MIT
/*
 * Every error path a real RC device reports, through the verbs API:
 * completion statuses at both ends, QP state changes, flushes, and the
 * errno of verbs that refuse their arguments.
 */
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define T 5000

enum scen {
	S_BAD_LKEY,
	S_BAD_RKEY,
	S_BOUNDS,
	S_WRITE_RO_MR,
	S_READ_NO_LOCAL_WRITE,
	S_QP_NO_REMOTE_WRITE,
	S_LEN_ERR,
	S_RNR_EXC,
	S_RNR_RECOVER,
	S_RECV_BAD_LKEY_SMALL,
	S_RECV_BAD_LKEY,
	S_RECV_BAD_SGE2,
	S_FULL_SQ,
};

static const char *const scen_names[] = {
	[S_BAD_LKEY] = "bad_lkey->LOC_PROT_ERR",
	[S_BAD_RKEY] = "bad_rkey->REM_ACCESS_ERR",
	[S_BOUNDS] = "out_of_bounds->REM_ACCESS_ERR",
	[S_WRITE_RO_MR] = "write_readonly_mr->REM_ACCESS_ERR",
	[S_READ_NO_LOCAL_WRITE] = "read_into_readonly->LOC_PROT_ERR",
	[S_QP_NO_REMOTE_WRITE] = "qp_access->REM_INV_REQ_ERR",
	[S_LEN_ERR] = "send_too_long->LOC_LEN_ERR",
	[S_RNR_EXC] = "no_recv->RNR_RETRY_EXC_ERR",
	[S_RNR_RECOVER] = "rnr_then_recv->SUCCESS",
	[S_RECV_BAD_LKEY_SMALL] = "small_send_recv_bad_lkey->REM_OP_ERR",
	[S_RECV_BAD_LKEY] = "send_recv_bad_lkey->REM_OP_ERR",
	[S_RECV_BAD_SGE2] = "small_send_recv_bad_second_sge->REM_OP_ERR",
	[S_FULL_SQ] = "full_sq->ENOMEM",
};

static void scen_opts(enum scen s, struct side_opts *o, bool target)
{
	side_opts_default(o);
	if (target && s == S_WRITE_RO_MR)
		o->mr_access = IBV_ACCESS_REMOTE_READ;
	if (!target && s == S_READ_NO_LOCAL_WRITE)
		o->mr_access = 0;
	if (target && s == S_QP_NO_REMOTE_WRITE)
		o->qp_access = IBV_ACCESS_REMOTE_READ;
	if (!target && s == S_RNR_EXC) {
		o->rnr_retry = 1;
		o->min_rnr_timer = 12; /* 0.64 ms */
	}
	if (!target && s == S_FULL_SQ)
		o->max_send_wr = 4;
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

static void expect_wc(struct ibv_cq *cq, enum ibv_wc_status st, uint64_t id,
		      const char *what)
{
	struct ibv_wc wc;

	if (poll_one(cq, &wc, T)) {
		CHECK(0, "%s: no completion", what);
		return;
	}
	CHECK(wc.status == st && wc.wr_id == id, "%s: got %s wr_id %llu", what,
	      ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
}

/* After an error the QP is in ERR and later WRs are flushed. */
static void expect_flushed_after(struct side *s)
{
	CHECK(wait_err(s->qp), "initiator QP not in ERR");
	CHECK(!post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, 8, s->mr->lkey, 0,
			  0, IBV_SEND_SIGNALED, 99),
	      "post in ERR must be accepted");
	expect_wc(s->cq, IBV_WC_WR_FLUSH_ERR, 99, "flush after error");
}

static int remote_op(struct side *s, const struct peer_info *p, enum scen sc)
{
	switch (sc) {
	case S_BAD_LKEY:
		return post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, 64,
				  s->mr->lkey ^ 0x5a5a0000, p->addr, p->rkey,
				  IBV_SEND_SIGNALED, 1);
	case S_BAD_RKEY:
		return post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, 64,
				  s->mr->lkey, p->addr, p->rkey ^ 0x12340000,
				  IBV_SEND_SIGNALED, 1);
	case S_BOUNDS:
		return post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, 64,
				  s->mr->lkey, p->addr + (1 << 20) - 32,
				  p->rkey, IBV_SEND_SIGNALED, 1);
	case S_WRITE_RO_MR:
	case S_QP_NO_REMOTE_WRITE:
		return post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, 64,
				  s->mr->lkey, p->addr, p->rkey,
				  IBV_SEND_SIGNALED, 1);
	case S_READ_NO_LOCAL_WRITE:
		return post_send1(s->qp, IBV_WR_RDMA_READ, s->buf, 64,
				  s->mr->lkey, p->addr, p->rkey,
				  IBV_SEND_SIGNALED, 1);
	case S_RECV_BAD_LKEY_SMALL:
	case S_RECV_BAD_SGE2: /* small: its payload would ride in the CQE */
		return post_send1(s->qp, IBV_WR_SEND, s->buf, 8, s->mr->lkey, 0,
				  0, IBV_SEND_SIGNALED, 1);
	default:
		return post_send1(s->qp, IBV_WR_SEND, s->buf, 256, s->mr->lkey,
				  0, 0, IBV_SEND_SIGNALED, 1);
	}
}

static const enum ibv_wc_status init_status[] = {
	[S_BAD_LKEY] = IBV_WC_LOC_PROT_ERR,
	[S_BAD_RKEY] = IBV_WC_REM_ACCESS_ERR,
	[S_BOUNDS] = IBV_WC_REM_ACCESS_ERR,
	[S_WRITE_RO_MR] = IBV_WC_REM_ACCESS_ERR,
	[S_READ_NO_LOCAL_WRITE] = IBV_WC_LOC_PROT_ERR,
	[S_QP_NO_REMOTE_WRITE] = IBV_WC_REM_INV_REQ_ERR,
	[S_LEN_ERR] = IBV_WC_REM_INV_REQ_ERR,
	[S_RNR_EXC] = IBV_WC_RNR_RETRY_EXC_ERR,
	[S_RNR_RECOVER] = IBV_WC_SUCCESS,
	[S_RECV_BAD_LKEY_SMALL] = IBV_WC_REM_OP_ERR,
	[S_RECV_BAD_LKEY] = IBV_WC_REM_OP_ERR,
	[S_RECV_BAD_SGE2] = IBV_WC_REM_OP_ERR,
};

static int full_sq(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, 8, s->mr->lkey };
	struct ibv_send_wr wr[6], *bad = NULL;

	/* The target posts no receive: the first SEND stalls (RNR, retried
	 * forever) and the queue fills behind it. */
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 6; i++) {
		wr[i].wr_id = i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 5 ? &wr[i + 1] : NULL;
	}
	CHECK(ibv_post_send(s->qp, wr, &bad) == ENOMEM, "6 WRs on a 4-deep SQ");
	CHECK(bad == &wr[4], "bad_wr must point at the first refused WR");
	CHECK(cq_empty_for(s->cq, 100), "stalled sends must not complete");
	return 0;
}

static int err_init(struct chan *c, void *arg)
{
	enum scen sc = (enum scen)(uintptr_t)arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;

	scen_opts(sc, &o, false);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* target is ready (receives posted or not) */
	if (sc == S_FULL_SQ) {
		full_sq(&s);
	} else {
		CHECK(!remote_op(&s, &p, sc), "post");
		if (sc == S_RNR_RECOVER) {
			CHECK(cq_empty_for(s.cq, 50), "RNR must stall");
			chan_barrier(c); /* target posts its receive now */
			/* and we do not poll for a while: the retries run
			 * without us, in the progress thread */
			usleep(100000);
		}
		expect_wc(s.cq, init_status[sc], 1, scen_names[sc]);
		if (init_status[sc] != IBV_WC_SUCCESS)
			expect_flushed_after(&s);
	}
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* A receive of two SGEs whose second key is bad (wr_id 10). */
static int recv_bad_second(struct side *s)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)s->buf, 100, s->mr->lkey },
		{ (uintptr_t)s->buf + 100, 100, s->mr->lkey ^ 0x5a5a0000 },
	};
	struct ibv_recv_wr wr = { .wr_id = 10, .sg_list = sge, .num_sge = 2 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

static int err_target(struct chan *c, void *arg)
{
	enum scen sc = (enum scen)(uintptr_t)arg;
	bool remote_err = sc == S_BAD_RKEY || sc == S_BOUNDS ||
			  sc == S_WRITE_RO_MR || sc == S_QP_NO_REMOTE_WRITE;
	struct side_opts o;
	struct side s;
	struct peer_info p;

	scen_opts(sc, &o, true);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	if (sc == S_LEN_ERR)
		CHECK(!post_recv1(s.qp, s.buf, 100, s.mr->lkey, 7), "recv");
	if (remote_err)
		CHECK(!post_recv1(s.qp, s.buf, 100, s.mr->lkey, 8), "recv");
	if (sc == S_RECV_BAD_LKEY_SMALL || sc == S_RECV_BAD_LKEY)
		CHECK(!post_recv1(s.qp, s.buf, 512, s.mr->lkey ^ 0x5a5a0000,
				  10),
		      "recv with a bad lkey");
	if (sc == S_RECV_BAD_SGE2)
		CHECK(!recv_bad_second(&s), "recv, second SGE's key bad");
	chan_barrier(c);
	if (sc == S_RNR_RECOVER) {
		chan_barrier(c);
		CHECK(!post_recv1(s.qp, s.buf, 4096, s.mr->lkey, 9), "recv");
		expect_wc(s.cq, IBV_WC_SUCCESS, 9, "late receive");
	}
	if (sc == S_LEN_ERR) {
		expect_wc(s.cq, IBV_WC_LOC_LEN_ERR, 7, "target LOC_LEN_ERR");
		CHECK(wait_err(s.qp), "target QP must go to ERR");
	}
	if (remote_err) {
		/* the responder's error moves the target QP to ERR too */
		CHECK(wait_err(s.qp), "target QP must go to ERR");
		expect_wc(s.cq, IBV_WC_WR_FLUSH_ERR, 8, "target recv flushed");
	}
	if (sc == S_RECV_BAD_LKEY_SMALL || sc == S_RECV_BAD_LKEY ||
	    sc == S_RECV_BAD_SGE2) {
		/* the receive's keys are checked (all of its SGEs, as the
		 * bytes could go to any) before anything is placed */
		expect_wc(s.cq, IBV_WC_LOC_PROT_ERR, 10, "target LOC_PROT_ERR");
		CHECK(wait_err(s.qp), "target QP must go to ERR");
		CHECK(s.buf[0] == 0, "nothing placed");
	}
	if (sc == S_BAD_LKEY || sc == S_READ_NO_LOCAL_WRITE)
		CHECK(qp_state(s.qp) == IBV_QPS_RTS,
		      "a local error must not touch the target");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* verbs_errno: ibv_reg_mr's refusals. */
static void verbs_errno_mr(struct side *sp)
{
	struct side s = *sp;

	errno = 0;
	CHECK(!ibv_reg_mr(s.pd, s.buf, 4096, IBV_ACCESS_REMOTE_WRITE) &&
		      errno == EINVAL,
	      "REMOTE_WRITE without LOCAL_WRITE: errno %d", errno);
	errno = 0;
	CHECK(!ibv_reg_mr(s.pd, s.buf, 4096, IBV_ACCESS_REMOTE_ATOMIC) &&
		      errno == EINVAL,
	      "REMOTE_ATOMIC without LOCAL_WRITE: errno %d", errno);
	{
		struct ibv_mr *mr = ibv_reg_mr(
			s.pd, s.buf, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);

		CHECK(mr != NULL, "relaxed ordering must be accepted");
		if (mr)
			ibv_dereg_mr(mr);
	}
	errno = 0;
	CHECK(!ibv_reg_mr(s.pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE) &&
		      errno == EFAULT,
	      "unmapped memory: errno %d", errno);
}

/* verbs_errno: the post verbs and modify_qp out of state. */
static void verbs_errno_qp(struct side *sp)
{
	struct side s = *sp;
	struct ibv_qp_attr a;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;
	struct ibv_sge sge;

	/* post_recv in RESET, post_send before RTS */
	sge = (struct ibv_sge){ (uintptr_t)s.buf, 8, s.mr->lkey };
	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	CHECK(ibv_post_recv(s.qp, &rwr, &rbad) == EINVAL && rbad == &rwr,
	      "post_recv in RESET");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	CHECK(ibv_modify_qp(s.qp, &a, IBV_QP_STATE) == EINVAL,
	      "RESET->RTR must be refused");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	CHECK(ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PORT) == EINVAL,
	      "RESET->INIT without all required attributes");
	CHECK(ibv_modify_qp(s.qp, &a,
			    IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				    IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN) ==
		      EINVAL,
	      "RESET->INIT with an attribute it does not take");
	CHECK(!ibv_modify_qp(s.qp, &a,
			     IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				     IBV_QP_ACCESS_FLAGS),
	      "RESET->INIT");
	CHECK(s.qp->state == IBV_QPS_INIT, "qp->state follows modify_qp");
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	CHECK(ibv_post_send(s.qp, &wr, &bad) == EINVAL && bad == &wr,
	      "post_send in INIT");
	CHECK(!ibv_post_recv(s.qp, &rwr, &rbad), "post_recv in INIT is fine");
	wr.num_sge = 100;
	bad = NULL;
	CHECK(ibv_post_send(s.qp, &wr, &bad) == EINVAL && bad == &wr,
	      "too many SGEs");
}

/* verbs_errno: objects in use, and create calls beyond the limits. */
static void verbs_errno_objects(struct side *sp)
{
	struct side s = *sp;

	CHECK(ibv_dealloc_pd(s.pd) == EBUSY, "PD in use");
	CHECK(ibv_destroy_cq(s.cq) == EBUSY, "CQ in use");
	{
		struct ibv_qp_init_attr ia = { .send_cq = s.cq,
					       .recv_cq = s.cq,
					       .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr =
								1 << 30 } };

		errno = 0;
		CHECK(!ibv_create_qp(s.pd, &ia) && errno == EINVAL,
		      "max_send_wr above the device limit");
		ia.cap.max_send_wr = 1;
		ia.qp_type = IBV_QPT_RAW_PACKET;
		errno = 0;
		CHECK(!ibv_create_qp(s.pd, &ia) && errno == EOPNOTSUPP,
		      "raw packet QPs are not offered");
	}
	errno = 0;
	CHECK(!ibv_create_cq(s.ctx, 0, NULL, NULL, 0) && errno == EINVAL,
	      "CQ of 0 entries");
}

/* Verbs that refuse their arguments, with the errno real verbs give. */
static int verbs_errno(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;

	side_opts_default(&o);
	REQUIRE(!side_open(&s, &o), "open");
	verbs_errno_mr(&s);
	verbs_errno_qp(&s);
	verbs_errno_objects(&s);
	side_close(&s);
	chan_barrier(c);
	return t_failures;
}

static int nothing(struct chan *c, void *arg)
{
	chan_barrier(c);
	return 0;
}

/* ---- the peer QP is destroyed (its process lives on): what we send
 * gets no answer, so it fails as on a device whose retries run out:
 * RETRY_EXC_ERR after timeout x (retry_cnt + 1), not at once (programs
 * such as ibv_srq_pingpong exit with a send still outstanding). */
static int gone_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	double t0, dt;

	side_opts_default(&o);
	o.timeout = 12; /* 16.8 ms */
	o.retry_cnt = 2; /* 3 x 16.8 ms = 50 ms */
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* the target destroyed its QP */
	t0 = now_s();
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 64, s.mr->lkey, 0, 0,
			  IBV_SEND_SIGNALED, 1),
	      "send");
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 1 &&
		      wc.status == IBV_WC_RETRY_EXC_ERR,
	      "send to a destroyed QP: %s", ibv_wc_status_str(wc.status));
	dt = now_s() - t0;
	/* never earlier than the retries allow (a slow machine only makes
	 * it later) */
	CHECK(dt >= 0.040, "failed after %.3f s, before the retries ran out",
	      dt);
	CHECK(wait_err(s.qp), "initiator QP not in ERR");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int gone_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(!ibv_destroy_qp(s.qp), "destroy QP");
	s.qp = NULL;
	usleep(20000); /* the hang-up reaches the peer */
	chan_barrier(c);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* The target moves its QP to ERR: a request that reaches it must not
 * vanish. Over TCP the target ends the link, so the initiator learns it
 * at once; over shared memory the target never answers and the retries
 * run out (RETRY_EXC_ERR). Either way: an error completion soon, and the
 * initiator's QP in ERR. */
static int err_peer_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	o.timeout = 12; /* 16.8 ms */
	o.retry_cnt = 2; /* 3 x 16.8 ms = 50 ms */
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* the target's QP is in ERR */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey,
			  p.addr, p.rkey, IBV_SEND_SIGNALED, 1),
	      "write");
	CHECK(!poll_one(s.cq, &wc, 2000) && wc.wr_id == 1 &&
		      wc.status != IBV_WC_SUCCESS,
	      "a WRITE to a QP in ERR fails within 2 s (%s)",
	      ibv_wc_status_str(wc.status));
	CHECK(wait_err(s.qp), "initiator QP not in ERR");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int err_peer_target(struct chan *c, void *arg)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(!ibv_modify_qp(s.qp, &a, IBV_QP_STATE), "to ERR");
	chan_barrier(c);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* Three WRITEs in one list, the first with a bad rkey: as on an RC
 * device, the first fails with REM_ACCESS_ERR, the two behind it are
 * flushed and never executed at the target, both QPs end in ERR. The same
 * on every transport. */
static int list_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_sge sge[3];
	struct ibv_send_wr wr[3], *bad;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memset(wr, 0, sizeof(wr));
	memset(s.buf, 'X', 3 * 64);
	for (int i = 0; i < 3; i++) {
		sge[i] = (struct ibv_sge){ (uintptr_t)s.buf + i * 64, 64,
					   s.mr->lkey };
		wr[i].wr_id = i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = p.addr + i * 64;
		wr[i].wr.rdma.rkey = i ? p.rkey : p.rkey ^ 0x5a5a00;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	CHECK(!ibv_post_send(s.qp, wr, &bad), "post the list");
	for (int i = 0; i < 3; i++) {
		enum ibv_wc_status want = i ? IBV_WC_WR_FLUSH_ERR :
					      IBV_WC_REM_ACCESS_ERR;

		CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == (uint64_t)i &&
			      wc.status == want,
		      "WR %d: %s (want %s)", i, ibv_wc_status_str(wc.status),
		      ibv_wc_status_str(want));
		if (!i) /* an error completion is seen only in ERR */
			CHECK(qp_state(s.qp) == IBV_QPS_ERR,
			      "QP in state %d at its error completion",
			      qp_state(s.qp));
	}
	CHECK(wait_err(s.qp), "initiator QP not in ERR");
	chan_barrier(c);
	chan_barrier(c); /* the target looked */
	side_close(&s);
	return t_failures;
}

static int list_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	bool clean = true;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memset(s.buf, 0, 3 * 64);
	chan_barrier(c); /* the initiator saw its completions */
	for (int i = 0; i < 3 * 64; i++)
		clean &= s.buf[i] == 0;
	CHECK(clean, "no WRITE behind the failed one reached the target");
	CHECK(wait_err(s.qp), "target QP not in ERR");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	for (unsigned i = 0; i <= S_FULL_SQ; i++)
		RUN(scen_names[i], err_init, err_target, (void *)(uintptr_t)i,
		    m, pass, fail);
	RUN("peer_qp_destroyed->RETRY_EXC_ERR", gone_init, gone_target, NULL, m,
	    pass, fail);
	RUN("request_to_qp_in_err", err_peer_init, err_peer_target, NULL, m,
	    pass, fail);
	RUN("bad_rkey_then_two->flushed_unexecuted", list_init, list_target,
	    NULL, m, pass, fail);
	RUN("verbs_errno", verbs_errno, nothing, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
