// SPDX-License-Identifier: MIT
/*
 * Faults: kill -9 of the peer process mid-transfer, SIGSTOP of a target.
 * Each case runs twice, the survivor's QP the one that dialed its link
 * and the one that accepted it. The statuses are those docs/wire.md
 * ("Errors and faults") and docs/architecture.md ("Errors") promise,
 * exactly, one completion per WR in order: a dead peer flushes every
 * outstanding WR (WR_FLUSH_ERR), the QP in ERR, IBV_EVENT_QP_FATAL, within
 * 1 s; a stopped one over TCP gets the oldest RETRY_EXC_ERR from the RC
 * ACK timer (the QP already in ERR), the rest WR_FLUSH_ERR, no async
 * event. Once the survivor destroys its objects, no shared memory of
 * softrnic is left mapped or open in it, nor anything in /dev/shm.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <poll.h>

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEPTH 64

/* Mappings of softrnic's segments (queues, CQs, TPT) or open fds of any of
 * its memfds, "srn-...": none once everything is destroyed. (Pages of a
 * deregistered MR stay memfd-backed while the application keeps them: that
 * is the application's memory, not a leak.) */
static int srn_leftovers(void)
{
	char line[512], path[300], target[256];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;
	DIR *d;
	struct dirent *e;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:srn-") && !strstr(line, "srn-mr");
	if (f)
		fclose(f);
	d = opendir("/proc/self/fd");
	while (d && (e = readdir(d))) {
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		k = readlink(path, target, sizeof(target) - 1);
		if (k > 0) {
			target[k] = 0;
			n += strstr(target, "/memfd:srn-") != NULL;
		}
	}
	if (d)
		closedir(d);
	return n;
}

static int dev_shm_leftovers(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strstr(e->d_name, "srn") || strstr(e->d_name, "softrnic");
	if (d)
		closedir(d);
	return n;
}

/* Which end dials the link (docs/wire.md, "Connections"; the same over
 * shared memory, docs/security.md): the QP with the smaller (GID, QPN).
 * One host, one GID: the smaller QPN. */
static bool qpn_dials(uint32_t mine, uint32_t peer)
{
	return mine <= peer;
}

/* Makes s's QP again until its number is in [lo, hi]: QPNs are random
 * (0x100 .. 0xfffffe), so a range of a quarter of them or more is hit
 * within 256 tries but once in 2^100. 0, or -1. */
static int qp_remake_within(struct side *s, const struct side_opts *o,
			    uint32_t lo, uint32_t hi)
{
	struct ibv_qp_init_attr ia = { 0 };

	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = o->max_send_wr;
	ia.cap.max_recv_wr = o->max_recv_wr;
	ia.cap.max_send_sge = o->max_sge;
	ia.cap.max_recv_sge = o->max_sge;
	ia.cap.max_inline_data = o->max_inline;
	for (int i = 0;
	     i < 256 && s->qp && (s->qp->qp_num < lo || s->qp->qp_num > hi);
	     i++) {
		struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

		ibv_destroy_qp(s->qp);
		s->qp = qp;
	}
	return s->qp && s->qp->qp_num >= lo && s->qp->qp_num <= hi ? 0 : -1;
}

/* side_pair, this end dialing (we_dial) or accepting, whatever the order
 * of the random QPNs: the child takes one in the middle of the range
 * (child_pair), and ours is then made again until it falls on the wanted
 * side of it (ranges of a quarter of the QPNs or more). */
static int side_pair_as(struct side *s, const struct side_opts *o,
			struct chan *c, struct peer_info *peer, bool we_dial)
{
	struct peer_info me;

	if (side_open(s, o) || chan_recv(c, peer, sizeof(*peer)))
		return -1;
	if (qp_remake_within(s, o, we_dial ? 0 : peer->qpn + 1,
			     we_dial ? peer->qpn : 0xffffff) ||
	    qpn_dials(s->qp->qp_num, peer->qpn) != we_dial)
		return -2;
	side_info(s, &me);
	if (chan_send(c, &me, sizeof(me)))
		return -3;
	if (side_connect(s, peer, o))
		return -4;
	chan_barrier(c); /* both sides are RTS */
	return 0;
}

/* The child's side_pair: its QPN in the middle quarter .. three quarters
 * of the range, so that the survivor's can fall on either side. */
static int child_pair(struct side *s, const struct side_opts *o, struct chan *c,
		      struct peer_info *peer)
{
	struct peer_info me;

	if (side_open(s, o) || qp_remake_within(s, o, 0x400000, 0xbfffff))
		return -1;
	side_info(s, &me);
	if (chan_send(c, &me, sizeof(me)) ||
	    chan_recv(c, peer, sizeof(*peer)) || side_connect(s, peer, o))
		return -1;
	chan_barrier(c); /* both sides are RTS */
	return 0;
}

/* The child: connects, then either posts no receive and sleeps (the
 * parent's SENDs stall behind RNR) or streams SENDs at the parent. */
static void child(int fd, bool streamer)
{
	struct chan c = { fd };
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	o.max_send_wr = DEPTH;
	t_role = "child";
	if (child_pair(&s, &o, &c, &p))
		_exit(2);
	chan_barrier(&c);
	for (uint64_t i = 0; streamer; i++) {
		struct ibv_wc wc;

		post_send1(s.qp, IBV_WR_SEND, s.buf, 64, s.mr->lkey, 0, 0,
			   IBV_SEND_SIGNALED, i);
		while (ibv_poll_cq(s.cq, 1, &wc) == 0)
			;
		usleep(200); /* keep the transfer going until the kill */
	}
	pause(); /* killed here */
	_exit(0);
}

static pid_t spawn(bool streamer, struct chan *c)
{
	int sv[2];
	pid_t pid;

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		child(sv[1], streamer);
	}
	close(sv[1]);
	c->fd = sv[0];
	return pid;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state) - 1;
	return a.qp_state;
}

/* Over TCP, whether this process dialed its link (an established socket
 * of its own to the softrnic port: 1) or accepted it (one from that
 * port: 0), as /proc/net/tcp shows its sockets; -1 if neither. */
static int tcp_we_dialed(void)
{
	const char *e = getenv("SOFTRNIC_PORT");
	unsigned port = e ? (unsigned)atoi(e) : 4791, lport, rport, st;
	char line[512], path[300], target[64];
	unsigned long ino, inos[64];
	int n = 0, dialed = -1;
	DIR *d = opendir("/proc/self/fd");
	FILE *f;
	struct dirent *de;

	while (d && (de = readdir(d)) && n < 64) {
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		k = readlink(path, target, sizeof(target) - 1);
		if (k <= 0)
			continue;
		target[k] = 0;
		n += sscanf(target, "socket:[%lu]", &inos[n]) == 1;
	}
	if (d)
		closedir(d);
	f = fopen("/proc/net/tcp", "r");
	while (f && fgets(line, sizeof(line), f)) {
		/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
		if (sscanf(line,
			   "%*d: %*x:%x %*x:%x %x %*s %*s %*s %*d %*d %lu",
			   &lport, &rport, &st, &ino) != 4 ||
		    st != 1) /* TCP_ESTABLISHED */
			continue;
		for (int i = 0; i < n; i++)
			if (inos[i] == ino && (rport == port || lport == port))
				dialed = rport == port;
	}
	if (f)
		fclose(f);
	return dialed;
}

/* Polls n completions of the send queue (wr_ids base .. base + n - 1, in
 * order, each once): the first with first_st, the others with rest_st,
 * nothing more after them; first_s: when the first arrived. A QP whose
 * first completion is an error is already in ERR when it is seen (the
 * requester moves it first). Every wait is generous: a slow machine
 * only makes things later. */
static void expect_wcs(struct side *s, int n, uint64_t base,
		       enum ibv_wc_status first_st, enum ibv_wc_status rest_st,
		       int first_ms, double *first_s)
{
	struct ibv_wc wc;

	for (int i = 0; i < n; i++) {
		enum ibv_wc_status want = i ? rest_st : first_st;

		if (poll_one(s->cq, &wc, i ? 5000 : first_ms)) {
			CHECK(0, "completion %d of %d missing", i + 1, n);
			return;
		}
		if (!i)
			*first_s = now_s();
		CHECK(wc.wr_id == base + i && wc.status == want,
		      "completion %d: wr_id %llu %s, want %llu %s", i + 1,
		      (unsigned long long)wc.wr_id,
		      ibv_wc_status_str(wc.status),
		      (unsigned long long)(base + i), ibv_wc_status_str(want));
		if (!i && want != IBV_WC_SUCCESS)
			CHECK(qp_state(s->qp) == IBV_QPS_ERR,
			      "QP in ERR when its first error is seen (%d)",
			      qp_state(s->qp));
	}
	CHECK(cq_empty_for(s->cq, 200), "a completion more than %d", n);
}

/* The survivor's QP went to ERR on its own: IBV_EVENT_QP_FATAL for it
 * must be waiting in its context (within 1 s), and nothing else. */
static void expect_qp_fatal(struct side *s)
{
	struct pollfd p = { .fd = s->ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	CHECK(poll(&p, 1, 1000) == 1, "an async event within 1 s");
	if (!(p.revents & POLLIN))
		return;
	CHECK(!ibv_get_async_event(s->ctx, &ev), "ibv_get_async_event");
	CHECK(ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == s->qp,
	      "IBV_EVENT_QP_FATAL for our QP (got %s)",
	      ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	p.revents = 0;
	CHECK(poll(&p, 1, 200) == 0, "one async event only");
}

/* An error the completion reports (RETRY_EXC_ERR) is no catastrophe: as
 * on a device, no IBV_EVENT_QP_FATAL (docs/wire.md, "Errors and
 * faults"), no other event either. */
static void expect_no_event(struct side *s)
{
	struct pollfd p = { .fd = s->ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	if (poll(&p, 1, 500) != 1)
		return;
	CHECK(ibv_get_async_event(s->ctx, &ev), "no async event (got %s)",
	      ibv_event_type_str(ev.event_type));
}

static const char *role_name(bool we_dial)
{
	return we_dial ? "survivor dialed" : "survivor accepted";
}

/* We send, the target dies with our 16 SENDs stalled (no receive posted):
 * a reset link or a dead peer flushes every outstanding WR (docs/wire.md
 * and docs/architecture.md, "Errors": WR_FLUSH_ERR, all of them), the QP
 * in ERR, IBV_EVENT_QP_FATAL. */
static int target_killed(bool we_dial)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct chan c;
	pid_t pid = spawn(false, &c);
	double t_kill, t_err = 0;
	int rc;

	side_opts_default(&o);
	o.max_send_wr = DEPTH;
	REQUIRE(!(rc = side_pair_as(&s, &o, &c, &p, we_dial)), "setup (%d)",
		rc);
	chan_barrier(&c);
	for (int i = 0; i < 16; i++)
		CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 64, s.mr->lkey, 0,
				  0, IBV_SEND_SIGNALED, i),
		      "post");
	usleep(50000);
	CHECK(cq_empty_for(s.cq, 1), "the SENDs wait for a receive");
	t_kill = now_s();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	expect_wcs(&s, 16, 0, IBV_WC_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR, 5000,
		   &t_err);
	CHECK(t_err && t_err - t_kill < 1.0, "first error after %.3f s",
	      t_err - t_kill);
	printf("  target killed (%s): 16 WRs flushed, first after %.1f ms\n",
	       role_name(we_dial), (t_err - t_kill) * 1e3);
	CHECK(qp_state(s.qp) == IBV_QPS_ERR, "QP in ERR");
	expect_qp_fatal(&s);
	close(c.fd);
	side_close(&s);
	CHECK(srn_leftovers() == 0, "softrnic memory still mapped");
	return t_failures;
}

/* Polls the n receives (wr_ids ok .. n - 1, in order, each once, after
 * the ok already seen): those that the peer's SENDs filled succeed, the
 * rest are flushed (WR_FLUSH_ERR). The number that succeeded; first_err:
 * when the first flush arrived. */
static int drain_recvs(struct side *s, int n, int ok, double *first_err)
{
	int errors = 0;
	struct ibv_wc wc;

	*first_err = 0;
	while (ok + errors < n && !poll_one(s->cq, &wc, 5000)) {
		CHECK(wc.wr_id == (uint64_t)(ok + errors),
		      "receive %d: wr_id %llu", ok + errors,
		      (unsigned long long)wc.wr_id);
		if (wc.status == IBV_WC_SUCCESS && !errors) {
			ok++;
			continue;
		}
		CHECK(wc.status == IBV_WC_WR_FLUSH_ERR,
		      "receive %d: %s after %d successes and %d flushes",
		      ok + errors, ibv_wc_status_str(wc.status), ok, errors);
		if (!errors++)
			*first_err = now_s();
	}
	CHECK(ok + errors == n, "every receive completes: %d ok, %d flushed",
	      ok, errors);
	CHECK(cq_empty_for(s->cq, 200), "a completion more than %d", n);
	return ok;
}

/* The peer streams SENDs at us and dies; our receives get flushed. */
static int initiator_killed(bool we_dial)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct chan c;
	pid_t pid = spawn(true, &c);
	double t_kill, t_err;
	struct ibv_wc wc;
	int ok, rc;

	side_opts_default(&o);
	o.max_recv_wr = 4096;
	o.cq_size = 8192;
	REQUIRE(!(rc = side_pair_as(&s, &o, &c, &p, we_dial)), "setup (%d)",
		rc);
	for (int i = 0; i < 4096; i++)
		CHECK(!post_recv1(s.qp, s.buf + (i % 64) * 64, 64, s.mr->lkey,
				  i),
		      "recv");
	chan_barrier(&c);
	/* mid-transfer: the first message is in (a peer that never sent
	 * anything is seen by nobody, as on a device: no traffic) */
	CHECK(!poll_one(s.cq, &wc, 10000) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 0,
	      "a first message within 10 s");
	usleep(50000);
	t_kill = now_s();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ok = drain_recvs(&s, 4096, 1, &t_err);
	CHECK(ok < 4096 && t_err - t_kill < 1.0, "flush after %.3f s",
	      t_err - t_kill);
	printf("  initiator killed (%s) after %d messages: %d receives "
	       "flushed, first after %.1f ms\n",
	       role_name(we_dial), ok, 4096 - ok, (t_err - t_kill) * 1e3);
	CHECK(qp_state(s.qp) == IBV_QPS_ERR, "QP in ERR");
	expect_qp_fatal(&s);
	close(c.fd);
	side_close(&s);
	CHECK(srn_leftovers() == 0, "softrnic memory still mapped");
	return t_failures;
}

/* 8 WRITEs to the stopped target, wr_ids 1 .. 8. Over shared memory a
 * WRITE needs no CPU of the target: they all complete, the QP stays in
 * RTS. Over TCP the target's kernel still acknowledges every byte, so no
 * TCP timer can fire: the RC ACK timer gives the oldest RETRY_EXC_ERR
 * after the QP's budget (timeout x (retry_cnt + 1), floored at 2 s), the
 * QP already in ERR, the 7 others WR_FLUSH_ERR, and no async event
 * (docs/wire.md, "Errors and faults"). */
static double writes_to_stopped(struct side *s, const struct peer_info *p,
				bool tcp)
{
	double t0 = now_s(), t1 = 0;

	for (int i = 1; i <= 8; i++)
		CHECK(!post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, 64,
				  s->mr->lkey, p->addr + 64 * i, p->rkey,
				  IBV_SEND_SIGNALED, i),
		      "write %d", i);
	if (tcp) {
		expect_wcs(s, 8, 1, IBV_WC_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR,
			   10000, &t1);
		CHECK(t1 - t0 >= 1.9, "not before the 2 s floor (%.2f s)",
		      t1 - t0);
		CHECK(qp_state(s->qp) == IBV_QPS_ERR, "QP in ERR");
		expect_no_event(s);
	} else {
		expect_wcs(s, 8, 1, IBV_WC_SUCCESS, IBV_WC_SUCCESS, 10000, &t1);
		CHECK(qp_state(s->qp) == IBV_QPS_RTS, "QP in RTS");
	}
	return t1 - t0;
}

/*
 * The target process is stopped (SIGSTOP) with our WRITEs on their way,
 * the stopped process the one that accepted the link (we_dial) or the one
 * that dialed it: both ends of a link must notice.
 */
static int target_stopped(bool we_dial)
{
	const char *t = getenv("SOFTRNIC_TRANSPORT");
	bool tcp = t && !strcmp(t, "tcp");
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct chan c;
	pid_t pid = spawn(false, &c);
	struct ibv_wc wc;
	double dt;
	int rc;

	side_opts_default(&o);
	o.timeout = 14; /* 67 ms */
	o.retry_cnt = 7; /* 8 x 67 ms = 0.54 s: the 2 s floor applies */
	REQUIRE(!(rc = side_pair_as(&s, &o, &c, &p, we_dial)), "setup (%d)",
		rc);
	chan_barrier(&c);
	/* a first WRITE while the target runs: over shared memory the first
	 * use of an rkey asks the target for its MR, which a stopped target
	 * cannot answer */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey,
			  p.addr, p.rkey, IBV_SEND_SIGNALED, 0),
	      "write");
	CHECK(!poll_one(s.cq, &wc, 5000) && wc.status == IBV_WC_SUCCESS,
	      "first write");
	if (tcp)
		CHECK(tcp_we_dialed() == we_dial, "%s, as forced (saw %d)",
		      role_name(we_dial), tcp_we_dialed());
	kill(pid, SIGSTOP);
	waitpid(pid, NULL, WUNTRACED); /* stopped for sure */
	dt = writes_to_stopped(&s, &p, tcp);
	printf("  target stopped (%s): first completion after %.2f s\n",
	       role_name(we_dial), dt);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(c.fd);
	side_close(&s);
	return t_failures;
}

/* Each case twice: the survivor's QP the one that dialed its link, then
 * the one that accepted it. */
int main(void)
{
	static const struct {
		const char *name;
		int (*fn)(bool we_dial);
	} cases[] = { { "target_killed", target_killed },
		      { "initiator_killed", initiator_killed },
		      { "target_stopped", target_stopped } };
	int pass = 0, fail = 0;

	t_role = "survivor";
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int d = 1; d >= 0; d--) {
			t_failures = 0;
			if (cases[i].fn(d))
				fail++;
			else
				pass++;
			printf("%s %s (%s)\n", t_failures ? "FAIL" : "ok  ",
			       cases[i].name, role_name(d));
		}
	}
	if (dev_shm_leftovers()) {
		fprintf(stderr, "FAIL: files left in /dev/shm\n");
		fail++;
	}
	return test_summary(pass, fail);
}
