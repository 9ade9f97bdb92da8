// SPDX-License-Identifier: MIT
/*
 * ibv_rereg_mr: its argument errors; the keys stay; a new translation is
 * where a peer's WRITE lands from then on (not the old buffer, which a
 * same-host peer had mapped); new access rights are enforced at the target
 * (READ allowed, WRITE refused with REM_ACCESS_ERR); a new PD is too (a
 * QP of the old PD gets REM_ACCESS_ERR). A QP reset for reuse loses its
 * old completions from its CQ.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>

#define T 5000
#define RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

struct rr_info {
	uint32_t rkey;
	uint64_t a, b;
};

static int wr1(struct side *s, enum ibv_wr_opcode op, uint64_t raddr,
	       uint32_t rkey, int len)
{
	struct ibv_wc wc;

	if (post_send1(s->qp, op, s->buf, (uint32_t)len, s->mr->lkey, raddr,
		       rkey, IBV_SEND_SIGNALED, 7) ||
	    poll_one(s->cq, &wc, T))
		return -1;
	return wc.status;
}

static int rr_init(struct chan *c, void *arg)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct rr_info d;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, &d, sizeof(d)), "MR");
	memcpy(s.buf, "one", 3);
	CHECK(wr1(&s, IBV_WR_RDMA_WRITE, d.a, d.rkey, 3) == IBV_WC_SUCCESS,
	      "write to A");
	chan_barrier(c); /* 1: A written */
	chan_barrier(c); /* 2: the MR moved to B */
	memcpy(s.buf, "two", 3);
	CHECK(wr1(&s, IBV_WR_RDMA_WRITE, d.b, d.rkey, 3) == IBV_WC_SUCCESS,
	      "write to B with the same rkey");
	chan_barrier(c); /* 3: B written */
	chan_barrier(c); /* 4: read-only now */
	CHECK(wr1(&s, IBV_WR_RDMA_READ, d.b, d.rkey, 3) == IBV_WC_SUCCESS &&
		      !memcmp(s.buf, "two", 3),
	      "read after the access change");
	CHECK(wr1(&s, IBV_WR_RDMA_WRITE, d.b, d.rkey, 3) ==
		      IBV_WC_REM_ACCESS_ERR,
	      "write refused after the access change");
	/* in ERR: a flushed completion waits in the CQ; RESET removes it */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 3, s.mr->lkey, d.b,
			  d.rkey, IBV_SEND_SIGNALED, 8),
	      "post in ERR");
	CHECK(!ibv_modify_qp(s.qp, &a, IBV_QP_STATE), "to RESET");
	CHECK(ibv_poll_cq(s.cq, 1, &wc) == 0, "no old completion after RESET");
	chan_barrier(c); /* 5 */
	side_close(&s);
	return t_failures;
}

static void rereg_errors(struct side *s, struct ibv_mr *mr)
{
	CHECK(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT &&
		      errno == EINVAL,
	      "no flag");
	CHECK(ibv_rereg_mr(mr, 1 << 6, NULL, NULL, 0, 0) ==
		      IBV_REREG_MR_ERR_INPUT,
	      "unknown flag");
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0) ==
		      IBV_REREG_MR_ERR_INPUT,
	      "no PD");
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_REMOTE_WRITE) == IBV_REREG_MR_ERR_INPUT,
	      "remote write without local write");
}

static int rr_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct rr_info d;
	uint8_t *a, *b;
	struct ibv_mr *mr;
	uint32_t lkey;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	a = s.buf + 65536;
	b = s.buf + 3 * 65536;
	mr = ibv_reg_mr(s.pd, a, 4096, RW);
	REQUIRE(mr, "MR");
	lkey = mr->lkey;
	rereg_errors(&s, mr);
	d = (struct rr_info){ mr->rkey, (uintptr_t)a, (uintptr_t)b };
	chan_send(c, &d, sizeof(d));
	chan_barrier(c); /* 1 */
	CHECK(!ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, 4096,
			    0),
	      "rereg to B: %s", strerror(errno));
	chan_barrier(c); /* 2 */
	chan_barrier(c); /* 3 */
	CHECK(!memcmp(a, "one", 3) && !memcmp(b, "two", 3),
	      "the second WRITE went to the new buffer only");
	CHECK(mr->lkey == lkey && mr->rkey == d.rkey && mr->addr == b,
	      "keys kept, address moved");
	CHECK(!ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
	      "rereg access");
	chan_barrier(c); /* 4 */
	chan_barrier(c); /* 5 */
	ibv_dereg_mr(mr);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("rereg_mr", rr_init, rr_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
