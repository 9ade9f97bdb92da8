// SPDX-License-Identifier: MIT
/*
 * Streams of small requests, as a message-rate benchmark posts them: over
 * TCP the doorbell may leave WQEs unsent for the application's next poll
 * and one sendmsg then carries many (docs/wire.md, "Batching requests").
 * What must hold whatever the transport does:
 * - every WQE of a stream completes once, in order, and its bytes land;
 * - a WQE left for a poll that never comes still goes (the progress
 *   thread's timer), so a peer waiting for it is not stuck;
 * - an error in the middle: the WQEs ahead of it are executed, the ones
 *   behind it are flushed and never reach the target;
 * - over TCP, 16 small WRITEs posted as one list leave in one sendmsg:
 *   the process's TCP connection sends a segment or two for them, not 16
 *   (checked where the initiator is a process of its own).
 */
#include "harness.h"

#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define T 10000 /* ms: generous, tests never fail for slowness */
#define NW 3000 /* WRITEs in the stream */
#define NS 1000 /* SENDs in the stream */
#define WIN 48 /* WQEs in flight at most (the send queue holds 64) */
#define SLOT 8
#define RBUF (NW * SLOT) /* receive buffers start here */
#define ERR_BASE (RBUF + 64 * SLOT) /* the error case's slots */

static uint64_t value(unsigned i)
{
	return (uint64_t)i * 0x9e3779b97f4a7c15ull + 1;
}

/* The 8 B value in slot i of buf. */
static uint64_t slot(const uint8_t *buf, unsigned i)
{
	uint64_t v;

	memcpy(&v, buf + i * SLOT, SLOT);
	return v;
}

/* How many of slots 0..n-1 do not hold value(first + i). */
static unsigned slots_wrong(const uint8_t *buf, unsigned n, unsigned first)
{
	unsigned bad = 0;

	for (unsigned i = 0; i < n; i++)
		bad += slot(buf, i) != value(first + i);
	return bad;
}

/* Polls what has completed; each must be the next WQE, successful. */
static int stream_reap(struct side *s, unsigned *done, double end)
{
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(s->cq, 16, wc);

	REQUIRE(n >= 0 && now_s() < end, "poll: %d, %u done", n, *done);
	for (int i = 0; i < n; i++, (*done)++)
		REQUIRE(wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == *done,
			"completion %u: wr_id %lu %s", *done,
			(unsigned long)wc[i].wr_id,
			ibv_wc_status_str(wc[i].status));
	return 0;
}

/* n WQEs of opcode op (8 B each, WRITE i to slot i), WIN in flight. */
static int stream(struct side *s, const struct peer_info *p,
		  enum ibv_wr_opcode op, unsigned n)
{
	double end = now_s() + T / 1000.0;
	unsigned posted = 0, done = 0;

	for (unsigned i = 0; i < n; i++)
		memcpy(s->buf + i * SLOT, &(uint64_t){ value(i) }, SLOT);
	while (done < n) {
		if (posted < n && posted - done < WIN) {
			REQUIRE(!post_send1(s->qp, op, s->buf + posted * SLOT,
					    SLOT, s->mr->lkey,
					    p->addr + posted * SLOT, p->rkey,
					    IBV_SEND_SIGNALED, posted),
				"post %u", posted);
			posted++;
			continue;
		}
		if (stream_reap(s, &done, end))
			return t_failures;
	}
	return t_failures;
}

static int stream_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	stream(&s, &p, IBV_WR_RDMA_WRITE, NW);
	chan_barrier(c); /* the target checks the WRITEs */
	chan_barrier(c); /* its receives are posted */
	stream(&s, &p, IBV_WR_SEND, NS);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* Receives the SEND stream: in order, each with its bytes; receive
 * buffers are reposted as they complete. */
static int stream_recv(struct side *s, struct chan *c)
{
	double end = now_s() + T / 1000.0;
	unsigned posted = 0, done = 0;
	struct ibv_wc wc;

	for (; posted < 64; posted++)
		CHECK(!post_recv1(s->qp, s->buf + RBUF + posted % 64 * SLOT,
				  SLOT, s->mr->lkey, posted),
		      "recv %u", posted);
	chan_barrier(c);
	while (done < NS) {
		REQUIRE(!poll_one(s->cq, &wc, T) && now_s() < end, "receive %u",
			done);
		REQUIRE(wc.status == IBV_WC_SUCCESS && wc.wr_id == done &&
				wc.byte_len == SLOT &&
				slot(s->buf + RBUF, done % 64) == value(done),
			"receive %u: wr_id %lu %s len %u", done,
			(unsigned long)wc.wr_id, ibv_wc_status_str(wc.status),
			wc.byte_len);
		done++;
		if (posted < NS)
			REQUIRE(!post_recv1(s->qp,
					    s->buf + RBUF + posted % 64 * SLOT,
					    SLOT, s->mr->lkey, posted),
				"recv %u", posted);
		posted++;
	}
	return t_failures;
}

static int stream_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	unsigned bad;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	bad = slots_wrong(s.buf, NW, 0);
	CHECK(!bad, "%u of %u WRITEs did not land", bad, NW);
	stream_recv(&s, c);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* The data segments this process's established TCP connections have
 * sent (in a process of its own, its QP's link); -1: none. */
static long tcp_data_segs(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long sum = -1;

	while (d && (e = readdir(d))) {
		struct tcp_info ti;
		socklen_t l = sizeof(ti);
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' ||
		    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) ||
		    ti.tcpi_state != 1 /* ESTABLISHED */)
			continue;
		sum = (sum < 0 ? 0 : sum) + ti.tcpi_data_segs_out;
	}
	if (d)
		closedir(d);
	return sum;
}

/* 16 WRITEs as one list: all land; over TCP, in one sendmsg. */
static int list_init(struct chan *c, void *arg)
{
	const enum run_mode *m = arg;
	const char *tr = getenv("SOFTRNIC_TRANSPORT");
	struct ibv_send_wr wr[16], *bad;
	struct ibv_sge sge[16];
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	long before, after;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (unsigned i = 0; i < 16; i++) {
		memcpy(s.buf + i * SLOT, &(uint64_t){ value(300 + i) }, SLOT);
		sge[i] = (struct ibv_sge){ (uintptr_t)s.buf + i * SLOT, SLOT,
					   s.mr->lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = i,
			.next = i < 15 ? &wr[i + 1] : NULL,
			.sg_list = &sge[i],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { p.addr + i * SLOT, p.rkey },
		};
	}
	before = tcp_data_segs();
	REQUIRE(!ibv_post_send(s.qp, wr, &bad), "post the list");
	for (unsigned i = 0; i < 16; i++)
		REQUIRE(!poll_one(s.cq, &wc, T) &&
				wc.status == IBV_WC_SUCCESS && wc.wr_id == i,
			"completion %u", i);
	after = tcp_data_segs();
	if (*m == MODE_PROCESS && tr && !strcmp(tr, "tcp"))
		CHECK(before >= 0 && after - before <= 2,
		      "16 WRITEs posted as one list took %ld TCP segments",
		      after - before);
	chan_barrier(c); /* the target checks them */
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int list_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	unsigned bad;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	bad = slots_wrong(s.buf, 16, 300);
	CHECK(!bad, "%u of 16 WRITEs did not land", bad);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* WRITE i of the quiet case: slot i, value value(100 + i). */
static int quiet_write(struct side *s, const struct peer_info *p, unsigned i)
{
	memcpy(s->buf + i * SLOT, &(uint64_t){ value(100 + i) }, SLOT);
	return post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf + i * SLOT, SLOT,
			  s->mr->lkey, p->addr + i * SLOT, p->rkey,
			  IBV_SEND_SIGNALED, i);
}

/* Two WRITEs posted back to back by a polling application, which then
 * stops polling until the target has seen both land. */
static int quiet_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	int seen = 0;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (unsigned round = 0; round < 20; round++) {
		CHECK(ibv_poll_cq(s.cq, 1, &wc) == 0, "nothing to poll yet");
		REQUIRE(!quiet_write(&s, &p, 2 * round) &&
				!quiet_write(&s, &p, 2 * round + 1),
			"post round %u", round);
		chan_send(c, &round, sizeof(round));
		REQUIRE(!chan_recv(c, &seen, sizeof(seen)), "target");
		CHECK(seen, "round %u: the target never saw the second WRITE",
		      round);
		for (unsigned k = 0; k < 2; k++)
			REQUIRE(!poll_one(s.cq, &wc, T) &&
					wc.status == IBV_WC_SUCCESS &&
					wc.wr_id == 2 * round + k,
				"round %u: completion %u", round, k);
	}
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int quiet_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	unsigned round;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (unsigned r = 0; r < 20; r++) {
		double end = now_s() + T / 1000.0;
		volatile uint64_t *v;
		int seen;

		REQUIRE(!chan_recv(c, &round, sizeof(round)), "initiator");
		v = (volatile uint64_t *)(s.buf + (2 * round + 1) * SLOT);
		while (*v != value(100 + 2 * round + 1) && now_s() < end)
			usleep(100);
		seen = *v == value(100 + 2 * round + 1);
		chan_send(c, &seen, sizeof(seen));
	}
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* The error case: 8 WQEs posted one at a time; WQE bad_at fails (a bad
 * lkey, or a bad rkey for remote). */
struct err_cfg {
	unsigned bad_at;
	bool remote;
};

static int err_post(struct side *s, const struct peer_info *p,
		    const struct err_cfg *cfg, unsigned i)
{
	bool bad = i == cfg->bad_at;
	uint32_t lkey = bad && !cfg->remote ? s->mr->lkey ^ 0x5a5a00 :
					      s->mr->lkey;
	uint32_t rkey = bad && cfg->remote ? p->rkey ^ 0x5a5a00 : p->rkey;

	memcpy(s->buf + ERR_BASE + i * SLOT, &(uint64_t){ value(500 + i) },
	       SLOT);
	return post_send1(s->qp, IBV_WR_RDMA_WRITE,
			  s->buf + ERR_BASE + i * SLOT, SLOT, lkey,
			  p->addr + ERR_BASE + i * SLOT, rkey,
			  IBV_SEND_SIGNALED, i);
}

static int err_init(struct chan *c, void *arg)
{
	const struct err_cfg *cfg = arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(ibv_poll_cq(s.cq, 1, &wc) == 0, "nothing to poll yet");
	for (unsigned i = 0; i < 8; i++)
		REQUIRE(!err_post(&s, &p, cfg, i), "post %u", i);
	for (unsigned i = 0; i < 8; i++) {
		enum ibv_wc_status want =
			i < cfg->bad_at ? IBV_WC_SUCCESS :
			i > cfg->bad_at ? IBV_WC_WR_FLUSH_ERR :
			cfg->remote	? IBV_WC_REM_ACCESS_ERR :
					  IBV_WC_LOC_PROT_ERR;

		REQUIRE(!poll_one(s.cq, &wc, T), "completion %u", i);
		CHECK(wc.wr_id == i && wc.status == want,
		      "completion %u: wr_id %lu %s, want %s", i,
		      (unsigned long)wc.wr_id, ibv_wc_status_str(wc.status),
		      ibv_wc_status_str(want));
	}
	chan_barrier(c); /* the target looks at its memory */
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int err_target(struct chan *c, void *arg)
{
	const struct err_cfg *cfg = arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	for (unsigned i = 0; i < 8; i++) {
		uint64_t v = slot(s.buf + ERR_BASE, i);

		if (i < cfg->bad_at)
			CHECK(v == value(500 + i), "WRITE %u (ahead) missing",
			      i);
		else
			CHECK(v == 0, "WRITE %u (%s the error) executed", i,
			      i == cfg->bad_at ? "at" : "behind");
	}
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	struct err_cfg local = { .bad_at = 3 },
		       remote = { .bad_at = 3, .remote = true },
		       remote0 = { .bad_at = 0, .remote = true };
	int pass = 0, fail = 0;

	RUN("stream", stream_init, stream_target, NULL, m, pass, fail);
	RUN("quiet_after_post", quiet_init, quiet_target, NULL, m, pass, fail);
	RUN("list_one_sendmsg", list_init, list_target, &m, m, pass, fail);
	RUN("local_error_mid_batch", err_init, err_target, &local, m, pass,
	    fail);
	RUN("remote_error_mid_batch", err_init, err_target, &remote, m, pass,
	    fail);
	RUN("remote_error_first", err_init, err_target, &remote0, m, pass,
	    fail);
	return test_summary(pass, fail);
}
