// SPDX-License-Identifier: MIT
/*
 * Post after poll: a send completion the application has seen means its
 * slot in the send queue is free. A send queue of depth 4 (and 1), every
 * WR signaled, is filled, then each completion polled is answered at once
 * by one more WR: ibv_post_send must never fail (ENOMEM would mean the
 * completion was seen before the slot was freed). Every WR completes
 * once, in order, with IBV_WC_SUCCESS. RDMA WRITE, SEND (the target keeps
 * receives posted ahead) and RDMA READ, each also with the CQ armed before
 * every poll: a completion then fires an event between its publication and
 * the return of the thread that posted it, which widens the window where a
 * completion seen before its slot is freed would show (over TCP, the
 * progress thread completes while the application polls).
 *
 * The loop ends after PP_MAX_WR WRs or PP_SECS seconds (SRN_POSTPOLL_SECS
 * overrides), whichever comes first: a slow machine runs fewer WRs, never
 * fails for it.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>

#define T 10000 /* ms without any completion: a hang */
#define PP_MAX_WR 200000
#define PP_SECS 0.4
#define PP_LEN 8 /* bytes per WR */
#define PP_RQ 256 /* receives the target keeps posted */

struct pp_case {
	const char *name;
	enum ibv_wr_opcode op;
	int depth; /* max_send_wr */
	bool armed; /* the CQ is armed before each poll: a completion then
		     * also fires an event, as in an application that waits
		     * on its channel when idle */
};

static double pp_secs(void)
{
	const char *e = getenv("SRN_POSTPOLL_SECS");

	return e && atof(e) > 0 ? atof(e) : PP_SECS;
}

static int pp_post(struct side *s, const struct pp_case *k,
		   const struct peer_info *p, uint64_t id)
{
	bool rd = k->op == IBV_WR_RDMA_READ;

	/* WRITE and SEND take buf[0..8) to the target's buf[0..8) (a SEND:
	 * its receive buffer); READ brings the target's buf[128..136) to
	 * buf[64..72) */
	return post_send1(s->qp, k->op, rd ? s->buf + 64 : s->buf, PP_LEN,
			  s->mr->lkey, p->addr + (rd ? 128 : 0), p->rkey,
			  IBV_SEND_SIGNALED, id);
}

/* Spins until one completion; -1 after T ms without one. */
static int pp_poll1(struct ibv_cq *cq, bool armed, struct ibv_wc *wc)
{
	double end = now_s() + T / 1000.0;
	int n;

	if (armed && ibv_req_notify_cq(cq, 0))
		return -1;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		if (now_s() > end)
			return -1;
		sched_yield();
	}
	return n == 1 ? 0 : -1;
}

/* Fills the send queue, then answers each completion with one WR at once.
 * Returns the WRs posted in *total. */
static int pp_loop(struct side *s, const struct pp_case *k,
		   const struct peer_info *p, uint64_t *total)
{
	double end = now_s() + pp_secs();
	uint64_t posted = 0, done = 0;
	struct ibv_wc wc;
	bool more = true;
	int err = 0;

	for (int i = 0; i < k->depth; i++, posted++)
		REQUIRE(!pp_post(s, k, p, posted), "fill WR %d of %d", i,
			k->depth);
	while (done < posted) {
		REQUIRE(!pp_poll1(s->cq, k->armed, &wc),
			"no completion for WR %llu", (unsigned long long)done);
		if (more) /* at once: nothing between poll and post */
			err = pp_post(s, k, p, posted);
		REQUIRE(wc.status == IBV_WC_SUCCESS, "WR %llu: %s",
			(unsigned long long)wc.wr_id,
			ibv_wc_status_str(wc.status));
		REQUIRE(wc.wr_id == done, "completion %llu has wr_id %llu",
			(unsigned long long)done, (unsigned long long)wc.wr_id);
		done++;
		if (more) {
			REQUIRE(!err,
				"post right after completion %llu: %s (send "
				"queue of %d)",
				(unsigned long long)wc.wr_id, strerror(err),
				k->depth);
			posted++;
		}
		more = posted < PP_MAX_WR && now_s() < end;
	}
	CHECK(cq_empty_for(s->cq, 20), "a completion beyond the last WR");
	*total = posted;
	return t_failures;
}

/* Takes and acknowledges the events the armed CQ fired (how many is not
 * the point here). */
static void pp_drain_events(struct side *s)
{
	struct ibv_cq *cq;
	void *cq_ctx;
	unsigned n = 0;
	int fl = fcntl(s->ch->fd, F_GETFL);

	CHECK(fl >= 0 && !fcntl(s->ch->fd, F_SETFL, fl | O_NONBLOCK),
	      "non-blocking channel");
	while (!ibv_get_cq_event(s->ch, &cq, &cq_ctx))
		n++;
	if (n)
		ibv_ack_cq_events(s->cq, n);
}

static int pp_init(struct chan *c, void *arg)
{
	const struct pp_case *k = arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	uint64_t total = 0;

	side_opts_default(&o);
	o.max_send_wr = k->depth;
	o.use_channel = k->armed;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memcpy(s.buf, "postpoll", PP_LEN);
	chan_barrier(c); /* the target's data is in place */
	pp_loop(&s, k, &p, &total);
	printf("[%s] %llu WRs through a send queue of %d\n", t_role,
	       (unsigned long long)total, k->depth);
	/* the target waits for the count either way */
	CHECK(!chan_send(c, &total, sizeof(total)), "send the count");
	chan_barrier(c);
	if (k->armed)
		pp_drain_events(&s);
	if (k->op == IBV_WR_RDMA_READ)
		CHECK(!memcmp(s.buf + 64, "postpoll", PP_LEN), "read data");
	side_close(&s);
	return t_failures;
}

/* Reposts each receive as it completes, until the initiator's count of
 * SENDs has arrived. */
static int pp_serve_recvs(struct side *s, struct chan *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	uint64_t got = 0, total = UINT64_MAX;
	double idle_end = now_s() + T / 1000.0;
	struct ibv_wc wc;

	for (int i = 0; i < PP_RQ; i++)
		REQUIRE(!post_recv1(s->qp, s->buf, 64, s->mr->lkey, i),
			"receive %d ahead", i);
	while (got < total) {
		if (ibv_poll_cq(s->cq, 1, &wc) == 1) {
			REQUIRE(wc.status == IBV_WC_SUCCESS &&
					wc.opcode == IBV_WC_RECV &&
					wc.byte_len == PP_LEN,
				"receive %llu: %s, opcode %d, %u bytes",
				(unsigned long long)got,
				ibv_wc_status_str(wc.status), wc.opcode,
				wc.byte_len);
			got++;
			REQUIRE(!post_recv1(s->qp, s->buf, 64, s->mr->lkey,
					    wc.wr_id),
				"repost receive");
			idle_end = now_s() + T / 1000.0;
			continue;
		}
		if (total == UINT64_MAX && poll(&pfd, 1, 0) == 1)
			REQUIRE(!chan_recv(c, &total, sizeof(total)), "count");
		REQUIRE(now_s() < idle_end,
			"no receive for %d ms (%llu of %llu)", T,
			(unsigned long long)got, (unsigned long long)total);
		sched_yield();
	}
	return t_failures;
}

static int pp_target(struct chan *c, void *arg)
{
	const struct pp_case *k = arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	uint64_t total;

	side_opts_default(&o);
	o.max_recv_wr = PP_RQ;
	o.cq_size = 2 * PP_RQ;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memcpy(s.buf + 128, "postpoll", PP_LEN);
	chan_barrier(c);
	if (k->op == IBV_WR_SEND)
		pp_serve_recvs(&s, c);
	else
		CHECK(!chan_recv(c, &total, sizeof(total)), "count");
	chan_barrier(c);
	if (k->op != IBV_WR_RDMA_READ)
		CHECK(!memcmp(s.buf, "postpoll", PP_LEN), "data at the target");
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;
	static const struct pp_case cases[] = {
		{ "write_depth4", IBV_WR_RDMA_WRITE, 4, false },
		{ "write_depth1", IBV_WR_RDMA_WRITE, 1, false },
		{ "send_depth4", IBV_WR_SEND, 4, false },
		{ "send_depth1", IBV_WR_SEND, 1, false },
		{ "read_depth4", IBV_WR_RDMA_READ, 4, false },
		{ "read_depth1", IBV_WR_RDMA_READ, 1, false },
		{ "write_depth4_armed", IBV_WR_RDMA_WRITE, 4, true },
		{ "write_depth1_armed", IBV_WR_RDMA_WRITE, 1, true },
		{ "send_depth4_armed", IBV_WR_SEND, 4, true },
		{ "send_depth1_armed", IBV_WR_SEND, 1, true },
		{ "read_depth4_armed", IBV_WR_RDMA_READ, 4, true },
		{ "read_depth1_armed", IBV_WR_RDMA_READ, 1, true },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		RUN(cases[i].name, pp_init, pp_target, (void *)&cases[i], m,
		    pass, fail);
	return test_summary(pass, fail);
}
