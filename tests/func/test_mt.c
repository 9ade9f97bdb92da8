// SPDX-License-Identifier: MIT
/*
 * Concurrency: several threads posting and polling on their own QPs at
 * once, all completing into one CQ at the target (many producers, one
 * ring); and one QP shared by several threads. Every message is counted
 * and checked. Run under TSan in CI.
 */
#include "harness.h"

#include <pthread.h>
#include <stdlib.h>

#define T 10000
#define NQP 4
#define NMSG 2000

struct mt_conn {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct peer_info peer;
	int failures;
	int id;
};

static struct ibv_qp *mk_qp(struct ibv_pd *pd, struct ibv_cq *cq, int depth)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = depth,
			 .max_recv_wr = depth,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &ia);
}

/* Per thread: SENDs, each carrying (thread, sequence), one CQE each. */
static void *sender(void *arg)
{
	struct mt_conn *m = arg;
	struct ibv_wc wc;

	t_role = "sender";
	for (uint32_t i = 0; i < NMSG; i++) {
		uint32_t *msg = (uint32_t *)(m->buf + (i % 16) * 64);

		msg[0] = m->id;
		msg[1] = i;
		if (post_send1(m->qp, IBV_WR_SEND, msg, 8, m->mr->lkey, 0, 0,
			       IBV_SEND_SIGNALED, i)) {
			m->failures++;
			break;
		}
		if (poll_one(m->cq, &wc, T) || wc.status != IBV_WC_SUCCESS) {
			m->failures++;
			break;
		}
	}
	return NULL;
}

static int connect_qp(struct ibv_qp *qp, struct ibv_context *ctx,
		      const struct peer_info *peer)
{
	struct side s = { .ctx = ctx, .qp = qp };
	struct side_opts o;

	side_opts_default(&o);
	return side_connect(&s, peer, &o);
}

static void exchange(struct chan *c, struct ibv_context *ctx,
		     struct ibv_qp **qps, uint32_t rkey, uint8_t *buf,
		     struct peer_info *peers)
{
	for (int i = 0; i < NQP; i++) {
		struct peer_info me = { .qpn = qps[i]->qp_num,
					.rkey = rkey,
					.addr = (uintptr_t)buf };

		ibv_query_gid(ctx, 1, 0, &me.gid);
		chan_send(c, &me, sizeof(me));
	}
	for (int i = 0; i < NQP; i++)
		chan_recv(c, &peers[i], sizeof(peers[i]));
}

static int mt_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct mt_conn m[NQP];
	struct ibv_qp *qps[NQP];
	struct peer_info peers[NQP];
	pthread_t th[NQP];

	side_opts_default(&o);
	REQUIRE(!side_open(&s, &o), "open");
	for (int i = 0; i < NQP; i++) {
		m[i] = (struct mt_conn){ .id = i,
					 .mr = s.mr,
					 .buf = s.buf + i * 4096 };
		m[i].cq = ibv_create_cq(s.ctx, 64, NULL, NULL, 0);
		qps[i] = m[i].qp = mk_qp(s.pd, m[i].cq, 32);
		REQUIRE(m[i].cq && m[i].qp, "qp %d", i);
	}
	exchange(c, s.ctx, qps, s.mr->rkey, s.buf, peers);
	for (int i = 0; i < NQP; i++)
		REQUIRE(!connect_qp(qps[i], s.ctx, &peers[i]), "connect");
	chan_barrier(c); /* all connected, receives posted */
	for (int i = 0; i < NQP; i++)
		pthread_create(&th[i], NULL, sender, &m[i]);
	for (int i = 0; i < NQP; i++) {
		pthread_join(th[i], NULL);
		CHECK(!m[i].failures, "sender %d failed", i);
	}
	chan_barrier(c);
	for (int i = 0; i < NQP; i++) {
		ibv_destroy_qp(m[i].qp);
		ibv_destroy_cq(m[i].cq);
	}
	side_close(&s);
	return t_failures;
}

/* Target: NQP QPs, one CQ for all, receives re-posted as they complete. */
static int mt_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct ibv_qp *qps[NQP];
	struct peer_info peers[NQP];
	uint32_t next[NQP] = { 0 };
	int got = 0;

	side_opts_default(&o);
	o.cq_size = 4096;
	REQUIRE(!side_open(&s, &o), "open");
	for (int i = 0; i < NQP; i++) {
		qps[i] = mk_qp(s.pd, s.cq, 512);
		REQUIRE(qps[i], "qp");
	}
	exchange(c, s.ctx, qps, s.mr->rkey, s.buf, peers);
	for (int i = 0; i < NQP; i++) {
		REQUIRE(!connect_qp(qps[i], s.ctx, &peers[i]), "connect");
		for (int k = 0; k < 512; k++)
			CHECK(!post_recv1(qps[i], s.buf + (i * 512 + k) * 64,
					  64, s.mr->lkey,
					  (uint64_t)i << 32 | k),
			      "recv");
	}
	chan_barrier(c);
	while (got < NQP * NMSG) {
		struct ibv_wc wc;
		uint32_t q, k, *msg;

		if (poll_one(s.cq, &wc, T)) {
			CHECK(0, "only %d of %d messages arrived", got,
			      NQP * NMSG);
			break;
		}
		q = wc.wr_id >> 32;
		k = (uint32_t)wc.wr_id;
		msg = (uint32_t *)(s.buf + (q * 512 + k) * 64);
		CHECK(wc.status == IBV_WC_SUCCESS && q < NQP &&
			      wc.qp_num == qps[q]->qp_num && msg[0] == q &&
			      msg[1] == next[q],
		      "message %u/%u on QP %u, expected %u", msg[0], msg[1], q,
		      next[q]);
		next[q]++; /* RC: in order per QP */
		got++;
		post_recv1(qps[q], msg, 64, s.mr->lkey, wc.wr_id);
	}
	chan_barrier(c);
	for (int i = 0; i < NQP; i++)
		ibv_destroy_qp(qps[i]);
	side_close(&s);
	return t_failures;
}

/* ---- one QP, several posting threads ---- */
struct shared_qp {
	struct side *s;
	struct peer_info *p;
	int id;
	int failures;
};

static void *writer(void *arg)
{
	struct shared_qp *w = arg;

	for (int i = 0; i < NMSG; i++) {
		/* each thread writes its own slot; every 100th is signaled */
		if (post_send1(w->s->qp, IBV_WR_RDMA_WRITE,
			       w->s->buf + w->id * 8, 8, w->s->mr->lkey,
			       w->p->addr + w->id * 8, w->p->rkey,
			       i % 100 == 99 ? IBV_SEND_SIGNALED : 0, w->id)) {
			w->failures++;
			sched_yield(); /* queue full for a moment: retry */
			i--;
			if (w->failures > 1000000)
				break;
			continue;
		}
		*(uint64_t *)(w->s->buf + w->id * 8) = i + 1;
	}
	return NULL;
}

static int shared_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct shared_qp w[NQP];
	pthread_t th[NQP];
	struct ibv_wc wc;
	int signaled = 0;

	side_opts_default(&o);
	o.max_send_wr = 1024;
	o.cq_size = 1024;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < NQP; i++) {
		w[i] = (struct shared_qp){ &s, &p, i, 0 };
		*(uint64_t *)(s.buf + i * 8) = 0;
		pthread_create(&th[i], NULL, writer, &w[i]);
	}
	for (int i = 0; i < NQP; i++)
		pthread_join(th[i], NULL);
	while (!poll_one(s.cq, &wc, 200)) {
		CHECK(wc.status == IBV_WC_SUCCESS, "wc %s",
		      ibv_wc_status_str(wc.status));
		signaled++;
	}
	CHECK(signaled == NQP * NMSG / 100, "%d signaled completions",
	      signaled);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int shared_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	for (int i = 0; i < NQP; i++) /* the last write of each thread */
		CHECK(*(uint64_t *)(s.buf + i * 8) == NMSG - 1 ||
			      *(uint64_t *)(s.buf + i * 8) == NMSG,
		      "slot %d = %llu", i,
		      (unsigned long long)*(uint64_t *)(s.buf + i * 8));
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("threads_on_own_qps_one_target_cq", mt_init, mt_target, NULL, m,
	    pass, fail);
	RUN("threads_on_one_qp", shared_init, shared_target, NULL, m, pass,
	    fail);
	return test_summary(pass, fail);
}
