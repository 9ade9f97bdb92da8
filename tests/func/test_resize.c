// SPDX-License-Identifier: MIT
/*
 * ibv_resize_cq: an empty CQ grown and shrunk, the size limits; a CQ that
 * holds completions a peer wrote keeps them in order through a grow and a
 * shrink, and refuses (EINVAL) a size below what it holds; a CQ resized
 * again and again while the peer (another thread or process) SENDs into
 * it without pause loses no completion and duplicates none.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define T 10000

/* ---- limits and an empty CQ ---- */

static void basic_sizes(struct ibv_context *ctx, struct ibv_cq *cq, int max_cqe)
{
	static const int sizes[] = { 100, 1, 7, 4096, 3, 65536, 2 };

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		CHECK(!ibv_resize_cq(cq, sizes[i]), "resize to %d", sizes[i]);
		CHECK(cq->cqe >= sizes[i] && cq->cqe <= max_cqe + 1,
		      "cqe %d after resize to %d", cq->cqe, sizes[i]);
	}
	CHECK(ibv_resize_cq(cq, 0) == EINVAL, "cqe 0 refused");
	CHECK(ibv_resize_cq(cq, -5) == EINVAL, "negative cqe refused");
	CHECK(ibv_resize_cq(cq, max_cqe + 1) == EINVAL, "max_cqe+1 refused");
	CHECK(cq->cqe >= 2 && cq->cqe < 8, "refusals keep the size (%d)",
	      cq->cqe);
	CHECK(!ibv_resize_cq(cq, max_cqe) && cq->cqe >= max_cqe,
	      "resize to max_cqe (%d): cqe %d", max_cqe, cq->cqe);
	CHECK(!ibv_resize_cq(cq, 16) && cq->cqe >= 16 && cq->cqe < 64,
	      "back to 16: %d", cq->cqe);
	(void)ctx;
}

static int basic_role(struct chan *c, void *arg)
{
	struct ibv_device_attr da;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx;
	struct ibv_cq_init_attr_ex ax = { .cqe = 4,
					  .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!ibv_query_device(s.ctx, &da), "query_device");
	cq = ibv_create_cq(s.ctx, 4, NULL, NULL, 0);
	REQUIRE(cq, "create_cq");
	basic_sizes(s.ctx, cq, da.max_cqe);
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "still empty");
	CHECK(!ibv_destroy_cq(cq), "destroy");
	/* an extended CQ is the same CQ underneath */
	cqx = ibv_create_cq_ex(s.ctx, &ax);
	REQUIRE(cqx, "create_cq_ex");
	basic_sizes(s.ctx, ibv_cq_ex_to_cq(cqx), da.max_cqe);
	CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), "destroy ex");
	/* the QP's own CQ, in use by a connected QP */
	CHECK(!ibv_resize_cq(s.cq, 1000) && s.cq->cqe >= 1000, "QP's CQ");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- completions held through resizes ---- */
#define HOLD_N 40

static int hold_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	o.sig_all = true;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* receives posted */
	for (int i = 0; i < HOLD_N; i++) {
		s.buf[i] = (uint8_t)(i + 1);
		CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf + i, 1, s.mr->lkey,
				  0, 0, 0, i),
		      "send %d", i);
		/* the target's receive completion is in its CQ before our
		 * send completes (shm: written by us; tcp: before the ACK) */
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
			      wc.wr_id == (uint64_t)i,
		      "send completion %d", i);
	}
	chan_barrier(c); /* all HOLD_N are in the target's CQ */
	chan_barrier(c); /* the target is done */
	side_close(&s);
	return t_failures;
}

/* Polls k completions: receives first .. first+k-1, in order. */
static void hold_take(struct side *s, int first, int k)
{
	struct ibv_wc wc;

	for (int i = first; i < first + k; i++) {
		CHECK(ibv_poll_cq(s->cq, 1, &wc) == 1, "completion %d there",
		      i);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
			      wc.wr_id == (uint64_t)(100 + i) &&
			      wc.byte_len == 1 && s->buf[i * 64] == i + 1,
		      "completion %d: wr_id %llu status %d", i,
		      (unsigned long long)wc.wr_id, wc.status);
	}
}

static int hold_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	o.cq_size = 64;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < HOLD_N; i++)
		CHECK(!post_recv1(s.qp, s.buf + i * 64, 64, s.mr->lkey,
				  100 + i),
		      "recv %d", i);
	chan_barrier(c);
	chan_barrier(c); /* HOLD_N completions wait in our CQ */
	CHECK(ibv_resize_cq(s.cq, HOLD_N / 2) == EINVAL,
	      "shrink below the %d held", HOLD_N);
	CHECK(ibv_resize_cq(s.cq, 1) == EINVAL, "shrink to 1");
	CHECK(s.cq->cqe >= 64, "size kept after EINVAL: %d", s.cq->cqe);
	CHECK(!ibv_resize_cq(s.cq, 1000) && s.cq->cqe >= 1000, "grow");
	hold_take(&s, 0, 10);
	/* 30 left: a ring of 32 holds them */
	CHECK(!ibv_resize_cq(s.cq, 30) && s.cq->cqe >= 30 && s.cq->cqe < 64,
	      "shrink to what is held: %d", s.cq->cqe);
	CHECK(ibv_resize_cq(s.cq, 16) == EINVAL, "below the 30 held");
	CHECK(!ibv_resize_cq(s.cq, HOLD_N), "same order of size");
	hold_take(&s, 10, HOLD_N - 10);
	CHECK(ibv_poll_cq(s.cq, 1, &wc) == 0, "nothing more, nothing twice");
	CHECK(!ibv_resize_cq(s.cq, 1), "empty again: down to 1");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- resizes while the peer SENDs ---- */
#define LOAD_N 20000
#define LOAD_RECVS 32 /* receives posted at a time: the CQ's fill bound */
#define LOAD_WINDOW 32 /* the sender's unpolled sends */

static int load_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	int out = 0;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* receives posted */
	for (uint32_t i = 0; i < LOAD_N && !t_failures; i++) {
		struct ibv_sge sge = { (uintptr_t)s.buf, 8, s.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED,
					  .imm_data = htonl(i) },
				   *bad;

		if (out == LOAD_WINDOW) {
			CHECK(!poll_one(s.cq, &wc, T) &&
				      wc.status == IBV_WC_SUCCESS,
			      "send completion (%d)", wc.status);
			out--;
		}
		CHECK(!ibv_post_send(s.qp, &wr, &bad), "send %u", i);
		out++;
	}
	while (out-- > 0 && !t_failures)
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
		      "last send completions");
	chan_barrier(c); /* the target has them all */
	side_close(&s);
	return t_failures;
}

/* One receive completion: the next in order, seen once. */
static void load_check(struct side *s, const struct ibv_wc *wc, uint32_t *next,
		       uint8_t *seen)
{
	uint32_t imm = ntohl(wc->imm_data);

	CHECK(wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_RECV &&
		      (wc->wc_flags & IBV_WC_WITH_IMM),
	      "receive %u: status %d", *next, wc->status);
	CHECK(imm < LOAD_N && !seen[imm], "imm %u seen once", imm);
	CHECK(imm == *next, "in order: got %u, expected %u", imm, *next);
	if (imm < LOAD_N)
		seen[imm] = 1;
	(*next)++;
	CHECK(!post_recv1(s->qp, s->buf, 64, s->mr->lkey, 0), "re-post");
}

static int load_target(struct chan *c, void *arg)
{
	static const int sizes[] = { 32, 4096, 64, 65536, 128, 33, 1024 };
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc[16];
	uint8_t *seen = calloc(LOAD_N, 1);
	uint32_t next = 0;
	unsigned resizes = 0;
	double end;

	side_opts_default(&o);
	o.cq_size = 32;
	REQUIRE(seen && !side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < LOAD_RECVS; i++)
		CHECK(!post_recv1(s.qp, s.buf, 64, s.mr->lkey, 0), "recv");
	chan_barrier(c);
	end = now_s() + 50;
	while (next < LOAD_N && !t_failures && now_s() < end) {
		int n = ibv_poll_cq(s.cq, 1 + (int)(resizes % 16), wc);

		CHECK(n >= 0, "poll");
		for (int i = 0; i < n; i++)
			load_check(&s, &wc[i], &next, seen);
		/* after each batch, when the peer has room to send again: a
		 * resize per completion at most, so the peer makes progress
		 * whatever the machine's speed. Never below LOAD_RECVS: the
		 * CQ cannot overflow */
		if (n <= 0)
			continue;
		CHECK(!ibv_resize_cq(s.cq, sizes[resizes % 7]),
		      "resize %u to %d", resizes, sizes[resizes % 7]);
		resizes++;
	}
	CHECK(next == LOAD_N, "received %u of %d (%u resizes)", next, LOAD_N,
	      resizes);
	for (uint32_t i = 0; i < LOAD_N; i++)
		if (!seen[i]) {
			CHECK(seen[i], "imm %u never arrived", i);
			break;
		}
	CHECK(ibv_poll_cq(s.cq, 16, wc) == 0, "no extra completion");
	chan_barrier(c);
	free(seen);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("resize_empty+limits", basic_role, role_idle, NULL, m, pass, fail);
	RUN("resize_holding", hold_init, hold_target, NULL, m, pass, fail);
	RUN("resize_under_load", load_init, load_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
