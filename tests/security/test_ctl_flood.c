// SPDX-License-Identifier: MIT
/*
 * Another user floods a QP's control socket (docs/security.md, "Another
 * user on the same host", issue 13): a root pair (initiator and target,
 * the victim) moves checked data over the same-host path while a process
 * of nobody opens NCONN connections to the victim QP's control socket:
 * first silent ones, then ones that send garbage or ask for a mediated
 * link claiming a QPN nobody does not own (the initiator's).
 *
 *   - the victim's descriptors never exceed their count before the flood
 *     plus the per-uid cap (8) and a little slack (sampled all along)
 *   - every connection of the flood is closed by the victim (the silent
 *     ones by their deadline; waited for generously)
 *   - of the refused requests, not many more are answered than the
 *     refusal bucket allows in the time they took (the rest are closed
 *     unread)
 *   - the pair's data arrive unchanged, every round trip
 *   - right after the flood (its refusal bucket still empty: the MEDIATE
 *     is asked again), nobody still connects a QP to a new QP of the
 *     victim's process over the mediated path, and its WRITE lands
 *
 * And out of fds (scenario emfile): a process whose fds ran out has
 * connections queued on its QP's control socket: its CPU time over 2 s
 * stays well under the time (the listener pauses rather than spinning).
 *
 * Needs root (exit 77 otherwise). Usage: test_ctl_flood
 */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <stdlib.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/srn_ctl_proto.h"

#define T 10000
#define LEN 4096
#define NOBODY 65534
#define NCONN 500
#define NCONN_A 250 /* last, refused requests; silent before */
/* refused requests answered at most: the bucket (16, 32 a second) and
 * those already admitted under the cap when it ran empty */
#define ANSWERED_MAX(s) (16 + CAP_PER_UID + 4 + (uint32_t)(32 * (s)))
#define CAP_PER_UID 8 /* SRN_CTL_FOREIGN_PER_UID in ctl.c */
#define SLACK 8 /* the victim's own short-lived sockets */
#define CLOSE_WAIT_S 30.0 /* the deadline is 3 s */
#define OPEN_WAIT_S 30.0
#define REFILL_S 2 /* the refusal bucket refills in 0.5 s */

struct flood_rep {
	uint32_t opened, closed, idle, idle_closed, asked, answered;
	uint32_t burst_answered; /* of the last NCONN_A */
	double burst_s; /* the last NCONN_A took this long */
};

/* fds made before the fork of the flooder and the roles */
static struct {
	int xchan[2]; /* target <-> flooder (nobody) */
	int to_fl[2]; /* initiator -> flooder: the QPNs */
	int from_fl[2]; /* flooder -> initiator: struct flood_rep */
} g;

static int become_nobody(void)
{
	gid_t gr = NOBODY;

	if (setgroups(1, &gr) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		return -1;
	return 0;
}

static int fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* One connection to QP qpn's control socket, the backlog waited for. */
static int flood_connect(uint32_t qpn, double until)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
			 SRN_CTL_SOCK_FMT, qpn);
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + n;

	while (now_s() < until) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);

		if (fd < 0)
			return -1;
		if (!connect(fd, (struct sockaddr *)&sa, len))
			return fd;
		close(fd);
		if (errno != EAGAIN)
			return -1;
		usleep(1000); /* the backlog is full: the victim accepts */
	}
	return -1;
}

enum flood_mode {
	SILENT,
	GARBAGE,
	MEDIATE
};

/* Connection i says nothing, garbage, or MEDIATE as QP claim. */
static void flood_say(int fd, unsigned i, enum flood_mode mode, uint32_t victim,
		      uint32_t claim)
{
	struct srn_ctl_mediate m = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_MEDIATE, 0,
			 sizeof(m) },
		.dst_qpn = victim,
		.src_qpn = claim,
	};
	char junk[100];

	if (mode == GARBAGE) {
		for (unsigned k = 0; k < sizeof(junk); k++)
			junk[k] = (char)(i * 31 + k * 7);
		send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
	} else if (mode == MEDIATE) {
		send(fd, &m, sizeof(m), MSG_NOSIGNAL);
	}
}

/* Reads what came on p (an answer: counted), or closes it. */
static void flood_read(struct pollfd *p, enum flood_mode mode, bool *ans,
		       struct flood_rep *r)
{
	char buf[512];

	if (recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
		r->answered += mode == MEDIATE && !*ans;
		*ans = true;
		return; /* the close follows */
	}
	close(p->fd);
	p->fd = -1;
	r->closed++;
	r->idle_closed += mode == SILENT;
}

/* Waits until the victim has closed each of fds[n]. */
static void flood_wait(const int *fds, const enum flood_mode *modes, unsigned n,
		       struct flood_rep *r)
{
	struct pollfd *p = calloc(n, sizeof(*p));
	bool *ans = calloc(n, sizeof(*ans));
	double until = now_s() + CLOSE_WAIT_S;
	unsigned open = n;

	for (unsigned i = 0; p && i < n; i++)
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	while (p && ans && open && now_s() < until) {
		if (poll(p, n, 1000) <= 0)
			continue;
		for (unsigned i = 0; i < n; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			flood_read(&p[i], modes[i], &ans[i], r);
			open -= p[i].fd < 0;
		}
	}
	for (unsigned i = 0; p && i < n; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	free(p);
	free(ans);
}

/* n connections, silent or refused requests, until the victim has closed
 * them all. */
static void flood_phase(uint32_t victim, uint32_t claim, unsigned n,
			bool silent, struct flood_rep *r)
{
	static enum flood_mode modes[NCONN];
	static int fds[NCONN];
	double until = now_s() + OPEN_WAIT_S;
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		int fd = flood_connect(victim, until);

		if (fd < 0)
			break;
		modes[k] = silent ? SILENT : (enum flood_mode)(GARBAGE + i % 2);
		flood_say(fd, i, modes[k], victim, claim);
		r->idle += modes[k] == SILENT;
		r->asked += modes[k] == MEDIATE;
		fds[k++] = fd;
	}
	r->opened += k;
	flood_wait(fds, modes, k, r);
}

/* Silent ones first (the caps, the deadline), then, the refusal bucket
 * full again, refused requests only, as fast as they are taken: how many
 * are answered shows the bucket. */
static void flood(uint32_t victim, uint32_t claim, struct flood_rep *r)
{
	uint32_t before;
	double t0;

	flood_phase(victim, claim, NCONN - NCONN_A, true, r);
	sleep(REFILL_S);
	before = r->answered;
	t0 = now_s();
	flood_phase(victim, claim, NCONN_A, false, r);
	r->burst_s = now_s() - t0;
	r->burst_answered = r->answered - before;
}

/*
 * Opens s with a QPN in the lower half (low) or the upper half of their
 * range, then connects it to the other role through c. The smaller QPN
 * dials: nobody's, which asks the victim for a mediated link (MEDIATE).
 */
static int half_pair(struct side *s, const struct side_opts *o, struct chan *c,
		     struct peer_info *p, bool low)
{
	struct peer_info me;

	for (int i = 0;; i++) {
		REQUIRE(i < 64 && !side_open(s, o), "open");
		if ((s->qp->qp_num < 0x800000) == low)
			break;
		side_close(s);
	}
	side_info(s, &me);
	REQUIRE(!chan_send(c, &me, sizeof(me)) && !chan_recv(c, p, sizeof(*p)),
		"exchange");
	REQUIRE(!side_connect(s, p, o), "connect");
	return 0;
}

/* After the flood, nobody's QP connects to the victim process's new QP
 * and WRITEs into it. */
static int flooder_pair(struct chan *c)
{
	struct side_opts o;
	struct peer_info p;
	struct ibv_wc wc;
	struct side s;

	side_opts_default(&o);
	o.buf_len = LEN;
	REQUIRE(!half_pair(&s, &o, c, &p, true),
		"nobody's pair after the flood");
	memset(s.buf, 0x3c, LEN);
	REQUIRE(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, LEN, s.mr->lkey,
			    p.addr, p.rkey, IBV_SEND_SIGNALED, 1),
		"post");
	REQUIRE(!poll_one(s.cq, &wc, T), "no completion");
	CHECK(wc.status == IBV_WC_SUCCESS, "WRITE after the flood: %s",
	      ibv_wc_status_str(wc.status));
	chan_barrier(c); /* the target looks */
	side_close(&s);
	return t_failures;
}

/* The process of nobody: floods, reports, then pairs. */
static int flooder(void)
{
	struct chan c = { g.xchan[1] };
	struct flood_rep r = { 0 };
	uint32_t q[2];

	t_role = "nobody";
	if (become_nobody() || read(g.to_fl[0], q, sizeof(q)) != sizeof(q))
		return 1;
	flood(q[0], q[1], &r);
	if (write(g.from_fl[1], &r, sizeof(r)) != sizeof(r))
		return 1;
	return flooder_pair(&c);
}

/* One checked round trip: WRITE pattern i, READ it back, compare. */
static int round_trip(struct side *s, const struct peer_info *p, uint32_t i)
{
	struct ibv_wc wc;

	for (uint32_t k = 0; k < LEN; k++)
		s->buf[k] = (uint8_t)(i + k);
	memset(s->buf + LEN, 0, LEN);
	REQUIRE(!post_send1(s->qp, IBV_WR_RDMA_WRITE, s->buf, LEN, s->mr->lkey,
			    p->addr, p->rkey, 0, 1) &&
			!post_send1(s->qp, IBV_WR_RDMA_READ, s->buf + LEN, LEN,
				    s->mr->lkey, p->addr, p->rkey,
				    IBV_SEND_SIGNALED, 2),
		"post");
	REQUIRE(!poll_one(s->cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
		"round trip %u: %s", i, ibv_wc_status_str(wc.status));
	REQUIRE(!memcmp(s->buf, s->buf + LEN, LEN), "round trip %u: data", i);
	return 0;
}

/* The pair runs (checked) and the victim's fds are counted until the
 * flooder reports. */
static int pair_during_flood(struct side *s, const struct peer_info *p,
			     pid_t victim, struct flood_rep *r, uint32_t *i_p)
{
	struct pollfd pf = { .fd = g.from_fl[0], .events = POLLIN };
	int base = fd_count(victim), max = base;
	double until = now_s() + OPEN_WAIT_S + CLOSE_WAIT_S + 10;

	REQUIRE(base > 0, "no /proc/%d/fd", (int)victim);
	while (!poll(&pf, 1, 0) && now_s() < until) {
		int n = fd_count(victim);

		if (n > max)
			max = n;
		REQUIRE(!round_trip(s, p, (*i_p)++), "pair");
	}
	REQUIRE(read(g.from_fl[0], r, sizeof(*r)) == sizeof(*r), "report");
	printf("flood: %u opened (%u silent), %u closed by the victim (%u "
	       "silent); victim fds %d before, at most %d during; %u round "
	       "trips\n",
	       r->opened, r->idle, r->closed, r->idle_closed, base, max, *i_p);
	CHECK(max <= base + CAP_PER_UID + SLACK,
	      "the victim held %d fds, %d before the flood", max, base);
	printf("flood: last %u refused requests in %.2f s: %u of their "
	       "MEDIATEs answered (at most %u allowed); %u of %u in all\n",
	       NCONN_A, r->burst_s, r->burst_answered, ANSWERED_MAX(r->burst_s),
	       r->answered, r->asked);
	CHECK(r->burst_answered <= ANSWERED_MAX(r->burst_s),
	      "the refusals were not rate-limited");
	CHECK(r->opened == NCONN, "%u of %u connections made", r->opened,
	      NCONN);
	CHECK(r->closed == r->opened && r->idle_closed == r->idle,
	      "the victim left %u connections open (%u silent)",
	      r->opened - r->closed, r->idle - r->idle_closed);
	return t_failures;
}

static int initiator(struct chan *c, void *arg)
{
	struct flood_rep r = { 0 };
	struct side_opts o;
	struct peer_info p;
	uint32_t i = 0, q[2];
	int32_t victim;
	struct side s;

	side_opts_default(&o);
	o.buf_len = 2 * LEN;
	REQUIRE(!side_pair(&s, &o, c, &p), "pair");
	REQUIRE(!chan_recv(c, &victim, sizeof(victim)), "victim pid");
	q[0] = p.qpn; /* the victim's QP */
	q[1] = s.qp->qp_num; /* root's: nobody does not own it */
	REQUIRE(write(g.to_fl[1], q, sizeof(q)) == sizeof(q), "to flooder");
	pair_during_flood(&s, &p, victim, &r, &i);
	REQUIRE(!round_trip(&s, &p, i), "pair after the flood");
	REQUIRE(!chan_send(c, &i, sizeof(i)), "last pattern");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* The victim: serves the pair, then a QP of nobody. */
static int target(struct chan *c, void *arg)
{
	struct chan x = { g.xchan[0] };
	int32_t pid = getpid();
	struct side_opts o;
	struct peer_info p;
	struct side s, s2;
	uint32_t i, bad = 0;

	side_opts_default(&o);
	o.buf_len = LEN;
	REQUIRE(!side_pair(&s, &o, c, &p), "pair");
	REQUIRE(!chan_send(c, &pid, sizeof(pid)), "pid");
	REQUIRE(!chan_recv(c, &i, sizeof(i)), "last pattern");
	for (uint32_t k = 0; k < LEN; k++)
		bad += s.buf[k] != (uint8_t)(i + k);
	CHECK(!bad, "%u bytes differ from the last WRITE", bad);
	chan_barrier(c);
	REQUIRE(!half_pair(&s2, &o, &x, &p, false),
		"nobody's pair after the flood");
	chan_barrier(&x); /* its WRITE is done */
	bad = 0;
	for (uint32_t k = 0; k < LEN; k++)
		bad += s2.buf[k] != 0x3c;
	CHECK(!bad, "nobody's WRITE after the flood: %u bytes missing", bad);
	side_close(&s2);
	side_close(&s);
	return t_failures;
}

/* CPU seconds pid has used (utime + stime of /proc/<pid>/stat). */
static double cpu_s(pid_t pid)
{
	unsigned long ut = 0, st = 0;
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* then state, fields 4..13, utime, stime */
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%lu %lu",
			 &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The victim of scenario emfile: a QP, then no fd left; waits. */
static void emfile_victim(int to, int from)
{
	struct rlimit rl = { 0 };
	struct side_opts o;
	struct side s;
	uint32_t qpn;
	char x;

	side_opts_default(&o);
	o.buf_len = LEN;
	if (side_open(&s, &o))
		_exit(1);
	qpn = s.qp->qp_num;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = 256;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		_exit(1);
	while (open("/dev/null", O_RDONLY) >= 0)
		;
	if (write(to, &qpn, sizeof(qpn)) != sizeof(qpn))
		_exit(1);
	if (read(from, &x, 1) < 0) /* until the test is done */
		_exit(1);
	_exit(0);
}

/* Connections queue on the control socket of a process out of fds. */
static int emfile(void)
{
	int to[2], from[2], fds[8], failed = 0;
	double c0, c1, t0;
	uint32_t qpn;
	pid_t pid;

	if (pipe(to) || pipe(from))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(to[0]);
		close(from[1]); /* its read ends when we close ours */
		emfile_victim(to[1], from[0]);
	}
	close(to[1]);
	close(from[0]);
	if (read(to[0], &qpn, sizeof(qpn)) != sizeof(qpn)) {
		printf("FAIL emfile: no victim\n");
		return 1;
	}
	for (unsigned i = 0; i < 8; i++)
		fds[i] = flood_connect(qpn, now_s() + 10);
	c0 = cpu_s(pid);
	t0 = now_s();
	sleep(2);
	c1 = cpu_s(pid);
	t0 = now_s() - t0;
	printf("emfile: the victim used %.2f s of CPU in %.2f s\n", c1 - c0,
	       t0);
	if (c0 < 0 || fds[7] < 0 || c1 - c0 > t0 / 4) {
		printf("FAIL emfile: the victim spins out of fds\n");
		failed = 1;
	} else {
		printf("ok   emfile\n");
	}
	for (unsigned i = 0; i < 8; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	close(from[1]);
	waitpid(pid, NULL, 0);
	close(to[0]);
	return failed;
}

int main(void)
{
	int st = 0, failed, efail;
	pid_t fl;

	if (geteuid() != 0) {
		printf("skip: needs root (the flood runs as nobody)\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	efail = emfile(); /* first: its victim forks from no verbs */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, g.xchan) || pipe(g.to_fl) ||
	    pipe(g.from_fl))
		return 1;
	fflush(NULL);
	fl = fork();
	if (fl == 0)
		_exit(flooder() ? 1 : 0);
	/* the flooder's ends: its exit is then seen (EOF) */
	close(g.xchan[1]);
	close(g.to_fl[0]);
	close(g.from_fl[1]);
	failed = run_roles("ctl_flood", initiator, target, NULL,
			   MODE_PROCESS) != 0;
	close(g.to_fl[1]); /* a flooder still waiting for QPNs gives up */
	close(g.xchan[0]);
	waitpid(fl, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("FAIL nobody's flood or pair after it (status 0x%x)\n",
		       st);
		failed++;
	}
	return test_summary(!failed + !efail, failed + efail);
}
