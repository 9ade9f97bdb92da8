// SPDX-License-Identifier: MIT
/*
 * A target QP that reaches RTR late, or never: the initiator is at RTS and
 * posts while its peer is still at INIT. As on a device, its requests go
 * unanswered until the target is ready: they complete (successfully) once
 * it is, within the retry budget (retry_cnt x timeout), or fail with
 * RETRY_EXC_ERR when it never is. Over shared memory the target does not
 * even let the initiator map anything before it is at RTR (it answers
 * CONNECT_REQ with -EAGAIN, docs/security.md); the initiator asks again
 * from its application threads (post, poll) and, when they sleep in
 * ibv_get_cq_event, from its progress thread.
 */
#include "harness.h"

#include <poll.h>
#include <unistd.h>

#define T 5000

enum scen {
	S_LATE,
	S_LATE_ASLEEP,
	S_NEVER,
	S_NEVER_ASLEEP,
};

static const char *const scen_names[] = {
	[S_LATE] = "target_rtr_late->SUCCESS",
	[S_LATE_ASLEEP] = "target_rtr_late+initiator_asleep->SUCCESS",
	[S_NEVER] = "target_never_rtr->RETRY_EXC_ERR",
	[S_NEVER_ASLEEP] = "target_never_rtr+initiator_asleep->RETRY_EXC_ERR",
};

static bool scen_late(enum scen s)
{
	return s == S_LATE || s == S_LATE_ASLEEP;
}

static bool scen_asleep(enum scen s)
{
	return s == S_LATE_ASLEEP || s == S_NEVER_ASLEEP;
}

static void scen_opts(enum scen s, struct side_opts *o, bool target)
{
	side_opts_default(o);
	if (target)
		return;
	o->use_channel = scen_asleep(s);
	if (scen_late(s)) {
		o->timeout = 16; /* 268 ms x 7: ~1.9 s, the target needs 0.2 */
	} else {
		o->timeout = 12; /* 16.8 ms x 3 */
		o->retry_cnt = 3;
	}
}

/* Opens s and exchanges the QP numbers; no state change yet. */
static int open_swap(struct side *s, const struct side_opts *o, struct chan *c,
		     struct peer_info *peer)
{
	struct peer_info me;

	if (side_open(s, o))
		return -1;
	side_info(s, &me);
	return chan_send(c, &me, sizeof(me)) ||
			       chan_recv(c, peer, sizeof(*peer)) ?
		       -1 :
		       0;
}

/* Sleeps until the CQ's first completion event (the CQ was armed right
 * after posting and nothing of ours polls meanwhile: only the progress
 * thread can move the send queue). */
static int sleep_event(struct side *s)
{
	struct pollfd pf = { .fd = s->ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *cq_ctx;

	if (poll(&pf, 1, T) != 1 || ibv_get_cq_event(s->ch, &cq, &cq_ctx))
		return -1;
	ibv_ack_cq_events(cq, 1);
	return 0;
}

static void expect(struct side *s, enum ibv_wc_status st, uint64_t id)
{
	struct ibv_wc wc;

	if (poll_one(s->cq, &wc, T)) {
		CHECK(0, "wr_id %llu: no completion", (unsigned long long)id);
		return;
	}
	CHECK(wc.status == st && wc.wr_id == id,
	      "wr_id %llu: got %s wr_id %llu", (unsigned long long)id,
	      ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
}

/* The target is at INIT; the initiator has posted. */
static void initiator_wait(struct side *s, enum scen sc, struct chan *c)
{
	bool asleep = scen_asleep(sc);

	if (asleep)
		CHECK(!ibv_req_notify_cq(s->cq, 0), "arm");
	if (scen_late(sc)) {
		if (asleep)
			usleep(200000);
		else
			CHECK(cq_empty_for(s->cq, 200), "completed before the "
							"target was ready");
		chan_barrier(c); /* the target may go to RTR now */
	}
	if (asleep)
		CHECK(!sleep_event(s), "no completion event");
}

static int initiator(struct chan *c, void *arg)
{
	enum scen sc = (enum scen)(long)arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	double t0;

	scen_opts(sc, &o, false);
	REQUIRE(!open_swap(&s, &o, c, &p), "setup");
	chan_barrier(c); /* the target is at INIT */
	REQUIRE(!side_init(&s, &o) && !side_rtr_rts(&s, &p, &o),
		"RTR/RTS must not wait for the target");
	memset(s.buf, 0xa5, 4096);
	/* the WRITE first: once the target sees the SEND, both are placed */
	REQUIRE(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 4096, s.mr->lkey,
			    p.addr + 8192, p.rkey, IBV_SEND_SIGNALED, 1) &&
			!post_send1(s.qp, IBV_WR_SEND, s.buf, 256, s.mr->lkey,
				    0, 0, IBV_SEND_SIGNALED, 2),
		"post");
	t0 = now_s();
	initiator_wait(&s, sc, c);
	if (scen_late(sc)) {
		expect(&s, IBV_WC_SUCCESS, 1);
		expect(&s, IBV_WC_SUCCESS, 2);
	} else {
		expect(&s, IBV_WC_RETRY_EXC_ERR, 1);
		CHECK(now_s() - t0 > 0.04 && now_s() - t0 < 3,
		      "RETRY_EXC_ERR after %.3f s, budget 4 x 16.8 ms",
		      now_s() - t0);
		expect(&s, IBV_WC_WR_FLUSH_ERR, 2);
	}
	chan_barrier(c); /* done */
	side_close(&s);
	return t_failures;
}

static int target(struct chan *c, void *arg)
{
	enum scen sc = (enum scen)(long)arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	scen_opts(sc, &o, true);
	REQUIRE(!open_swap(&s, &o, c, &p), "setup");
	REQUIRE(!side_init(&s, &o), "INIT");
	REQUIRE(!post_recv1(s.qp, s.buf, 4096, s.mr->lkey, 7), "post_recv");
	chan_barrier(c); /* at INIT */
	if (scen_late(sc)) {
		chan_barrier(c); /* the initiator posted 0.2 s ago */
		REQUIRE(!side_rtr_rts(&s, &p, &o), "RTR/RTS");
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
			      wc.wr_id == 7 && wc.byte_len == 256,
		      "receive: %s", ibv_wc_status_str(wc.status));
		CHECK(s.buf[0] == 0xa5 && s.buf[255] == 0xa5, "SEND data");
		CHECK(s.buf[8192] == 0xa5 && s.buf[8192 + 4095] == 0xa5,
		      "WRITE data");
	} else {
		CHECK(cq_empty_for(s.cq, 50), "a receive completed at INIT");
	}
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	for (long sc = S_LATE; sc <= S_NEVER_ASLEEP; sc++)
		RUN(scen_names[sc], initiator, target, (void *)sc, m, pass,
		    fail);
	return test_summary(pass, fail);
}
