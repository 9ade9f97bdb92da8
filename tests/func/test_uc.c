// SPDX-License-Identifier: MIT
/*
 * UC (unreliable connected) QPs: the UC state rules (no retry, timeout,
 * RNR or RDMA-read attributes; with them the transition fails), SEND,
 * SEND with immediate, WRITE and WRITE with immediate arrive; READ and
 * atomics are refused at post; and what the target cannot take (a bad
 * rkey, no receive WQE, no remote write access) is dropped there while
 * the sender completes with success and both QPs stay in RTS, so the
 * next message gets through.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#define T 5000

static int state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? -1 : (int)a.qp_state;
}

static void rules(struct side *s)
{
	struct ibv_qp_init_attr ia = { .send_cq = s->cq,
				       .recv_cq = s->cq,
				       .qp_type = IBV_QPT_UC,
				       .cap = { 4, 4, 1, 1, 0 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	CHECK(qp, "create a UC QP");
	if (!qp)
		return;
	CHECK(!ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS),
	      "RESET -> INIT");
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = s->qp->qp_num;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	ibv_query_gid(s->ctx, 1, 0, &a.ah_attr.grh.dgid);
	CHECK(ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				    IBV_QP_MAX_DEST_RD_ATOMIC) == EINVAL,
	      "RTR with an RDMA-read attribute");
	CHECK(state_of(qp) == IBV_QPS_INIT, "still INIT");
	ibv_destroy_qp(qp);
}

static int uc_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	o.uc = true;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(s.qp->qp_type == IBV_QPT_UC, "a UC QP");
	rules(&s);
	CHECK(post_send1(s.qp, IBV_WR_RDMA_READ, s.buf, 8, s.mr->lkey, p.addr,
			 p.rkey, IBV_SEND_SIGNALED, 1) == EINVAL,
	      "READ refused at post");
	CHECK(post_send1(s.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, s.buf, 8,
			 s.mr->lkey, p.addr, p.rkey, IBV_SEND_SIGNALED,
			 1) == EINVAL,
	      "atomic refused at post");
	chan_barrier(c); /* 1: one receive is posted */
	memcpy(s.buf, "uc-send", 7);
	memcpy(s.buf + 64, "uc-write", 8);
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 7, s.mr->lkey, 0, 0,
			  IBV_SEND_SIGNALED, 2),
	      "send");
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf + 64, 8, s.mr->lkey,
			  p.addr + 64, p.rkey, IBV_SEND_SIGNALED, 3),
	      "write");
	/* dropped at the target, success here */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf + 64, 8, s.mr->lkey,
			  p.addr + 256, p.rkey ^ 0x4000, IBV_SEND_SIGNALED, 4),
	      "write, bad rkey");
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 7, s.mr->lkey, 0, 0,
			  IBV_SEND_SIGNALED, 5),
	      "send, no receive WQE");
	for (uint64_t id = 2; id <= 5; id++)
		CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == id &&
			      wc.status == IBV_WC_SUCCESS,
		      "wr %llu: %s", (unsigned long long)id,
		      ibv_wc_status_str(wc.status));
	CHECK(state_of(s.qp) == IBV_QPS_RTS, "the sender stays in RTS");
	chan_barrier(c); /* 2: the target checked, posted one more */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf + 64, 8,
			  s.mr->lkey, p.addr + 512, p.rkey, IBV_SEND_SIGNALED,
			  6),
	      "write with imm after the drops");
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 6 &&
		      wc.status == IBV_WC_SUCCESS,
	      "write imm: %s", ibv_wc_status_str(wc.status));
	chan_barrier(c); /* 3 */
	side_close(&s);
	return t_failures;
}

static int uc_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	o.uc = true;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(!post_recv1(s.qp, s.buf + 4096, 64, s.mr->lkey, 10), "recv");
	chan_barrier(c); /* 1 */
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 10 &&
		      wc.status == IBV_WC_SUCCESS && wc.byte_len == 7,
	      "the SEND");
	CHECK(!memcmp(s.buf + 4096, "uc-send", 7), "SEND data");
	CHECK(cq_empty_for(s.cq, 200), "the dropped SEND left no completion");
	CHECK(!memcmp(s.buf + 64, "uc-write", 8), "WRITE data");
	CHECK(s.buf[256] == 0, "the bad-rkey WRITE was dropped");
	CHECK(state_of(s.qp) == IBV_QPS_RTS, "the target stays in RTS");
	CHECK(!post_recv1(s.qp, s.buf + 8192, 64, s.mr->lkey, 11), "recv");
	chan_barrier(c); /* 2 */
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 11 &&
		      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM,
	      "write with imm completion");
	CHECK(!memcmp(s.buf + 512, "uc-write", 8), "WRITE with imm data");
	chan_barrier(c); /* 3 */
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("uc", uc_init, uc_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
