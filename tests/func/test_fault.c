// SPDX-License-Identifier: MIT
/*
 * Faults: kill -9 of the peer process mid-transfer. The survivor's QP must
 * go to ERR and every outstanding WR complete with an error within 1 s; no
 * hang; and once the survivor destroys its objects, no shared memory of
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
	if (side_pair(&s, &o, &c, &p))
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

/* Drains the CQ until n completions arrived or 5 s passed; returns the
 * number of errors and the time the first error arrived. */
static int drain(struct ibv_cq *cq, int n, int *ok, double *first_err)
{
	double end = now_s() + 5;
	int errors = 0;

	*ok = 0;
	*first_err = 0;
	while (*ok + errors < n && now_s() < end) {
		struct ibv_wc wc;

		if (ibv_poll_cq(cq, 1, &wc) != 1) {
			usleep(1000);
			continue;
		}
		if (wc.status == IBV_WC_SUCCESS) {
			(*ok)++;
			continue;
		}
		if (!errors)
			*first_err = now_s();
		CHECK(wc.status == IBV_WC_WR_FLUSH_ERR ||
			      wc.status == IBV_WC_RETRY_EXC_ERR,
		      "error status %s", ibv_wc_status_str(wc.status));
		errors++;
	}
	return errors;
}

/* The survivor's QP went to ERR on its own: IBV_EVENT_QP_FATAL for it
 * must be waiting in its context (within 1 s). */
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
}

/* We send, the target dies with our SENDs stalled (no receive posted). */
static int target_killed(void)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct chan c;
	pid_t pid = spawn(false, &c);
	double t_kill, t_err;
	int ok, errors;

	side_opts_default(&o);
	o.max_send_wr = DEPTH;
	REQUIRE(!side_pair(&s, &o, &c, &p), "setup");
	chan_barrier(&c);
	for (int i = 0; i < 16; i++)
		CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 64, s.mr->lkey, 0,
				  0, IBV_SEND_SIGNALED, i),
		      "post");
	usleep(50000);
	t_kill = now_s();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	errors = drain(s.cq, 16, &ok, &t_err);
	CHECK(errors == 16 && ok == 0, "16 stalled sends: %d errors, %d ok",
	      errors, ok);
	CHECK(errors && t_err - t_kill < 1.0, "first error after %.3f s",
	      t_err - t_kill);
	printf("  target killed: %d WRs failed, first after %.1f ms\n", errors,
	       (t_err - t_kill) * 1e3);
	CHECK(s.qp->state == IBV_QPS_ERR, "QP in ERR");
	expect_qp_fatal(&s);
	close(c.fd);
	side_close(&s);
	CHECK(srn_leftovers() == 0, "softrnic memory still mapped");
	return t_failures;
}

/* The peer streams SENDs at us and dies; our receives get flushed. */
static int initiator_killed(void)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct chan c;
	pid_t pid = spawn(true, &c);
	double t_kill, t_err;
	int ok = 0, errors;

	side_opts_default(&o);
	o.max_recv_wr = 4096;
	o.cq_size = 8192;
	REQUIRE(!side_pair(&s, &o, &c, &p), "setup");
	for (int i = 0; i < 4096; i++)
		CHECK(!post_recv1(s.qp, s.buf + (i % 64) * 64, 64, s.mr->lkey,
				  i),
		      "recv");
	chan_barrier(&c);
	usleep(50000); /* mid-transfer */
	t_kill = now_s();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	errors = drain(s.cq, 4096, &ok, &t_err);
	CHECK(ok + errors == 4096, "every receive completes: %d ok, %d errors",
	      ok, errors);
	CHECK(errors > 0 && t_err - t_kill < 1.0, "flush after %.3f s",
	      t_err - t_kill);
	printf("  initiator killed after %d messages: %d receives flushed, "
	       "first after %.1f ms\n",
	       ok, errors, (t_err - t_kill) * 1e3);
	expect_qp_fatal(&s);
	close(c.fd);
	side_close(&s);
	CHECK(srn_leftovers() == 0, "softrnic memory still mapped");
	return t_failures;
}

/*
 * The target process is stopped (SIGSTOP) with our WRITE on its way. Over
 * shared memory a WRITE needs no CPU of the target: it completes. Over
 * TCP the target's kernel still acknowledges every byte, so no TCP timer
 * can fire: the RC ACK timer must give RETRY_EXC_ERR after the QP's
 * budget (timeout x (retry_cnt + 1), floored at 2 s), the QP in ERR.
 */
static int target_stopped(void)
{
	const char *t = getenv("SOFTRNIC_TRANSPORT");
	bool tcp = t && !strcmp(t, "tcp");
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct chan c;
	pid_t pid = spawn(false, &c);
	struct ibv_wc wc;
	double t0, dt;

	side_opts_default(&o);
	o.timeout = 14; /* 67 ms */
	o.retry_cnt = 7; /* 8 x 67 ms = 0.54 s: the 2 s floor applies */
	REQUIRE(!side_pair(&s, &o, &c, &p), "setup");
	chan_barrier(&c);
	/* a first WRITE while the target runs: over shared memory the first
	 * use of an rkey asks the target for its MR, which a stopped target
	 * cannot answer */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey,
			  p.addr, p.rkey, IBV_SEND_SIGNALED, 0),
	      "write");
	CHECK(!poll_one(s.cq, &wc, 5000) && wc.status == IBV_WC_SUCCESS,
	      "first write");
	kill(pid, SIGSTOP);
	waitpid(pid, NULL, WUNTRACED); /* stopped for sure */
	t0 = now_s();
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey,
			  p.addr, p.rkey, IBV_SEND_SIGNALED, 1),
	      "write");
	CHECK(!poll_one(s.cq, &wc, 10000), "a completion within 10 s");
	dt = now_s() - t0;
	if (tcp) {
		CHECK(wc.status == IBV_WC_RETRY_EXC_ERR,
		      "RETRY_EXC_ERR from a stopped target (%s)",
		      ibv_wc_status_str(wc.status));
		CHECK(dt >= 1.9, "not before the 2 s floor (%.2f s)", dt);
		CHECK(s.qp->state == IBV_QPS_ERR, "QP in ERR");
	} else {
		CHECK(wc.status == IBV_WC_SUCCESS,
		      "a one-sided WRITE needs no target CPU (%s)",
		      ibv_wc_status_str(wc.status));
	}
	printf("  target stopped: %s after %.2f s\n",
	       ibv_wc_status_str(wc.status), dt);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(c.fd);
	side_close(&s);
	return t_failures;
}

int main(void)
{
	int pass = 0, fail = 0;

	t_role = "survivor";
	if (target_killed())
		fail++;
	else
		pass++;
	printf("%s target_killed\n", t_failures ? "FAIL" : "ok  ");
	t_failures = 0;
	if (initiator_killed())
		fail++;
	else
		pass++;
	printf("%s initiator_killed\n", t_failures ? "FAIL" : "ok  ");
	t_failures = 0;
	if (target_stopped())
		fail++;
	else
		pass++;
	printf("%s target_stopped\n", t_failures ? "FAIL" : "ok  ");
	if (dev_shm_leftovers()) {
		fprintf(stderr, "FAIL: files left in /dev/shm\n");
		fail++;
	}
	return test_summary(pass, fail);
}
