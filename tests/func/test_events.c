// SPDX-License-Identifier: MIT
/*
 * Completion channels and async events: a process blocked in
 * ibv_get_cq_event (or poll() on the channel fd) wakes when the peer
 * completes work into its armed CQ; solicited-only arming; the SRQ limit
 * event; CQ overflow raises IBV_EVENT_CQ_ERR.
 */
#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#define T 5000

static bool fd_readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* arg: NULL for 32 B SENDs, or the length (a small SEND's CQE carries
 * its payload on one host, and must still be unsolicited) */
static int ev_init(struct chan *c, void *arg)
{
	uint32_t len = arg ? *(const uint32_t *)arg : 32;
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* target armed and asleep in ibv_get_cq_event */
	usleep(20000);
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, len, s.mr->lkey, 0, 0, 0,
			  1),
	      "send 1");
	chan_barrier(c); /* target re-armed solicited-only */
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, len, s.mr->lkey, 0, 0, 0,
			  2),
	      "unsolicited send");
	chan_barrier(c); /* target saw no event */
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, len, s.mr->lkey, 0, 0,
			  IBV_SEND_SOLICITED, 3),
	      "solicited send");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int ev_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_cq *cq;
	void *cctx;
	struct ibv_wc wc;
	int fl;

	side_opts_default(&o);
	o.use_channel = true;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < 3; i++)
		CHECK(!post_recv1(s.qp, s.buf + i * 64, 64, s.mr->lkey, 10 + i),
		      "recv");
	CHECK(!ibv_req_notify_cq(s.cq, 0), "arm");
	CHECK(!fd_readable(s.ch->fd, 30), "no event before any completion");
	chan_barrier(c);
	/* blocks in the kernel until the peer's SEND completes into our CQ */
	CHECK(!ibv_get_cq_event(s.ch, &cq, &cctx), "get_cq_event");
	CHECK(cq == s.cq && cctx == &s, "event names our CQ");
	ibv_ack_cq_events(cq, 1);
	CHECK(ibv_poll_cq(s.cq, 1, &wc) == 1 && wc.wr_id == 10 &&
		      wc.status == IBV_WC_SUCCESS,
	      "first receive");
	/* solicited only: an unsolicited SEND completes without an event */
	CHECK(!ibv_req_notify_cq(s.cq, 1), "arm solicited");
	fl = fcntl(s.ch->fd, F_GETFL);
	fcntl(s.ch->fd, F_SETFL, fl | O_NONBLOCK);
	chan_barrier(c);
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 11, "second receive");
	CHECK(!fd_readable(s.ch->fd, 100), "unsolicited must not fire");
	CHECK(ibv_get_cq_event(s.ch, &cq, &cctx) == -1,
	      "non-blocking channel with no event");
	chan_barrier(c);
	CHECK(fd_readable(s.ch->fd, T), "solicited completion fires");
	CHECK(!ibv_get_cq_event(s.ch, &cq, &cctx) && cq == s.cq, "event 2");
	ibv_ack_cq_events(cq, 1);
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 12, "third receive");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- a target that polled, then stops ----
 * While an application polls, the library stops waking its progress
 * thread for every message (progress.c, the data set). Once it stops
 * polling, one-sided operations must still complete without it, and an
 * armed CQ must still fire. */
#define PP_ROUNDS 500

static int idle_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	o.sig_all = true;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* receives posted */
	for (int i = 0; i < PP_ROUNDS && !t_failures; i++) {
		CHECK(!post_recv1(s.qp, s.buf + 2048, 64, s.mr->lkey, 500 + i),
		      "recv");
		CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 8, s.mr->lkey, 0, 0,
				  0, i),
		      "send");
		for (int k = 0; k < 2 && !t_failures; k++)
			CHECK(!poll_one(s.cq, &wc, T) &&
				      wc.status == IBV_WC_SUCCESS,
			      "ping-pong %d", i);
	}
	chan_barrier(c); /* the target stops polling: it sleeps here */
	memset(s.buf, 0x5c, 256);
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 256, s.mr->lkey,
			  p.addr + 4096, p.rkey, 0, 1),
	      "write");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "write completes while the target sleeps");
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_READ, s.buf + 1024, 256, s.mr->lkey,
			  p.addr + 4096, p.rkey, 0, 2),
	      "read");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "read completes while the target sleeps");
	CHECK(!memcmp(s.buf, s.buf + 1024, 256), "read back what we wrote");
	chan_barrier(c); /* target armed and asleep in ibv_get_cq_event */
	usleep(20000);
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 8, s.mr->lkey, 0, 0, 0, 3),
	      "send to the sleeper");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "send wc");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int idle_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	void *cctx;

	side_opts_default(&o);
	o.use_channel = true; /* pongs unsignaled: only receives complete */
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(!post_recv1(s.qp, s.buf, 64, s.mr->lkey, 0), "recv");
	chan_barrier(c);
	for (int i = 0; i < PP_ROUNDS && !t_failures; i++) {
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_RECV,
		      "ping %d", i);
		CHECK(!post_recv1(s.qp, s.buf, 64, s.mr->lkey, i + 1), "recv");
		CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf + 64, 8, s.mr->lkey,
				  0, 0, 0, i),
		      "pong");
	}
	chan_barrier(c); /* no polling from here on */
	chan_barrier(c); /* the WRITE and READ were served without us */
	CHECK(s.buf[4096] == 0x5c && s.buf[4096 + 255] == 0x5c,
	      "the write landed");
	CHECK(!ibv_req_notify_cq(s.cq, 0), "arm");
	CHECK(ibv_poll_cq(s.cq, 1, &wc) == 0, "nothing yet");
	/* the SEND completes into our CQ while we sleep: the library must
	 * receive it without our polling */
	REQUIRE(fd_readable(s.ch->fd, T), "the event fires while we sleep");
	CHECK(!ibv_get_cq_event(s.ch, &cq, &cctx) && cq == s.cq,
	      "get_cq_event");
	ibv_ack_cq_events(cq, 1);
	CHECK(!poll_one(s.cq, &wc, T) && wc.opcode == IBV_WC_RECV,
	      "the send arrived");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- SRQ limit ---- */
static int srq_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	for (int i = 0; i < 5; i++) {
		CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 16, s.mr->lkey, 0,
				  0, IBV_SEND_SIGNALED, i),
		      "send");
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
		      "send wc");
	}
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int srq_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_srq_attr sa = { .srq_limit = 4 };
	struct ibv_async_event ev;
	struct ibv_wc wc;
	struct ibv_sge sge;
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

	side_opts_default(&o);
	o.use_srq = true;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	sge = (struct ibv_sge){ (uintptr_t)s.buf, 64, s.mr->lkey };
	for (int i = 0; i < 8; i++)
		CHECK(!ibv_post_srq_recv(s.srq, &wr, &bad), "srq recv");
	CHECK(!ibv_modify_srq(s.srq, &sa, IBV_SRQ_LIMIT), "arm limit");
	sa.srq_limit = 0;
	CHECK(!ibv_query_srq(s.srq, &sa) && sa.srq_limit == 4, "query srq");
	chan_barrier(c);
	CHECK(fd_readable(s.ctx->async_fd, T), "async event arrives");
	CHECK(!ibv_get_async_event(s.ctx, &ev), "get async event");
	CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
		      ev.element.srq == s.srq,
	      "event %s", ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	for (int i = 0; i < 5; i++)
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
			      wc.qp_num == s.qp->qp_num,
		      "srq completion %d", i);
	CHECK(!ibv_query_srq(s.srq, &sa) && sa.srq_limit == 0,
	      "the limit disarms when it fires");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- CQ overflow ---- */
static int overflow_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_async_event ev;
	struct ibv_wc wc[8];

	side_opts_default(&o);
	o.cq_size = 2;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < 4; i++)
		CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 8, s.mr->lkey,
				  p.addr, p.rkey, IBV_SEND_SIGNALED, i),
		      "write");
	CHECK(fd_readable(s.ctx->async_fd, T), "CQ error event");
	CHECK(ibv_poll_cq(s.cq, 8, wc) == 2, "the CQ held its 2 entries");
	CHECK(!ibv_get_async_event(s.ctx, &ev) &&
		      ev.event_type == IBV_EVENT_CQ_ERR &&
		      ev.element.cq == s.cq,
	      "IBV_EVENT_CQ_ERR");
	ibv_ack_async_event(&ev);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- blocking ping-pong: no lost wake-up ----
 * Both sides block in ibv_get_cq_event for every message, with the usual
 * pattern: poll, arm, poll again, then block. The arm (by the consumer)
 * and the completion (by the producer in the other role) race on every
 * round; if each side's store could pass its own later load, both would
 * miss the other and the consumer would sleep with a CQE in its ring.
 * A round that sees no event within 3 s fails (and says whether the
 * CQE was there). */
#define BLOCK_ROUNDS 3000

/* Waits, blocking, for one receive completion and posts a new receive. */
static int block_recv(struct side *s, uint64_t *events)
{
	struct ibv_wc wc;
	struct ibv_cq *cq;
	void *cctx;

	for (;;) {
		int n = ibv_poll_cq(s->cq, 1, &wc);

		if (n == 0) {
			REQUIRE(!ibv_req_notify_cq(s->cq, 0), "arm");
			n = ibv_poll_cq(s->cq, 1, &wc);
		}
		if (n == 1) {
			REQUIRE(wc.status == IBV_WC_SUCCESS, "status %d",
				wc.status);
			REQUIRE(!post_recv1(s->qp, s->buf, 64, s->mr->lkey, 1),
				"re-post");
			return 0;
		}
		REQUIRE(n == 0, "poll");
		if (!fd_readable(s->ch->fd, 3000)) {
			CHECK(0, "no event within 3 s; a CQE is %s",
			      ibv_poll_cq(s->cq, 1, &wc) == 1 ?
				      "in the ring: the wake-up was lost" :
				      "not there either");
			return -1;
		}
		REQUIRE(!ibv_get_cq_event(s->ch, &cq, &cctx), "get event");
		ibv_ack_cq_events(cq, 1);
		(*events)++;
	}
}

static int block_side(struct chan *c, bool first)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	uint64_t events = 0;

	side_opts_default(&o);
	o.use_channel = true;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < 4; i++)
		REQUIRE(!post_recv1(s.qp, s.buf, 64, s.mr->lkey, 1), "recv");
	chan_barrier(c);
	for (int i = 0; i < BLOCK_ROUNDS; i++) {
		if (first)
			REQUIRE(!post_send1(s.qp, IBV_WR_SEND, s.buf + 64, 8,
					    s.mr->lkey, 0, 0, 0, 2),
				"send %d", i);
		REQUIRE(!block_recv(&s, &events), "round %d", i);
		if (!first)
			REQUIRE(!post_send1(s.qp, IBV_WR_SEND, s.buf + 64, 8,
					    s.mr->lkey, 0, 0, 0, 2),
				"send %d", i);
	}
	CHECK(events > 0, "the rounds blocked at least once");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int block_init(struct chan *c, void *arg)
{
	return block_side(c, true);
}

static int block_target(struct chan *c, void *arg)
{
	return block_side(c, false);
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	uint32_t small = 8;
	int pass = 0, fail = 0;

	RUN("cq_events+solicited", ev_init, ev_target, NULL, m, pass, fail);
	RUN("cq_events+solicited_8B", ev_init, ev_target, &small, m, pass,
	    fail);
	RUN("polled_then_idle", idle_init, idle_target, NULL, m, pass, fail);
	RUN("srq_limit_event", srq_init, srq_target, NULL, m, pass, fail);
	RUN("cq_overflow_event", overflow_init, role_idle, NULL, m, pass, fail);
	RUN("blocking_pingpong", block_init, block_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
