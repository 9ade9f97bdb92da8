// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: CM links (docs/rdmacm.md, "The CM protocol").
 *
 *   test_cm_link [NAME]   runs every case, or the one named
 *
 * A listener and clients in this process, and for "not_here" a forked
 * listening process. "link_isolation" runs first, so that the ids it
 * names are all the ids this process has. Run once per transport
 * (SOFTRNIC_TRANSPORT=shm, tcp). Exit 0 when all pass.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cm_util.h"

static uint16_t cm_port(void)
{
	const char *e = getenv("SOFTRNIC_CM_PORT");

	return e ? (uint16_t)atoi(e) : 4790;
}

/* Adds to ino[] (n_p of max) the inodes of established TCP connections
 * from or to the CM port listed in a /proc/net/tcp{,6} file. */
static void cm_inodes(const char *path, unsigned long *ino, int *n_p, int max)
{
	char line[512];
	unsigned int lport, rport, st;
	unsigned long inode;
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line,
			   " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%x %x %*s %*s "
			   "%*s %*s %*s %lu",
			   &lport, &rport, &st, &inode) != 4)
			continue;
		if (st == 1 && (lport == cm_port() || rport == cm_port()) &&
		    *n_p < max)
			ino[(*n_p)++] = inode;
	}
	fclose(f);
}

/* How many established CM-port connections this process holds. */
static int cm_conns(void)
{
	unsigned long ino[4096], v;
	int n = 0, count = 0;
	char path[64], target[64];
	ssize_t len;

	cm_inodes("/proc/net/tcp", ino, &n, 4096);
	cm_inodes("/proc/net/tcp6", ino, &n, 4096);
	for (int fd = 0; fd < 4096; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		if (sscanf(target, "socket:[%lu]", &v) != 1)
			continue;
		for (int i = 0; i < n; i++)
			count += ino[i] == v;
	}
	return count;
}

/*
 * CM links: 8 connections to one listener share one stream connection
 * (this process holds both of its ends: 2, not 16), and it is closed once
 * no connection uses it (SRN_CM_LINK_IDLE_MS, SRN_CM_LINK_IDLE_PASSIVE_MS).
 */
static int t_links(void)
{
	struct side srv = { 0 }, cli[8] = { 0 };
	struct rdma_cm_id *child[8];
	struct rdma_cm_event *ev;
	int i, tag = 0, left = -1;

	for (i = 0; i < 100 && cm_conns(); i++)
		usleep(100000); /* the earlier cases' links close first */
	CHECK(!cm_conns());
	CHECK(!listen_on(&srv, 0, &tag));
	for (i = 0; i < 8; i++) {
		CHECK(!client_to(&cli[i], srv.port));
		CHECK(!make_qp(cli[i].id));
		CHECK(!rdma_connect(cli[i].id, NULL));
	}
	for (i = 0; i < 8; i++) {
		ev = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		CHECK(ev);
		child[i] = ev->id;
		rdma_ack_cm_event(ev);
		CHECK(!make_qp(child[i]) && !rdma_accept(child[i], NULL));
	}
	for (i = 0; i < 8; i++) /* each takes the REP and sends the RTU */
		CHECK(!expect(cli[i].ch, RDMA_CM_EVENT_ESTABLISHED));
	for (i = 0; i < 8; i++)
		CHECK(!expect(srv.ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(cm_conns() == 2);
	for (i = 0; i < 8; i++) {
		CHECK(!rdma_disconnect(cli[i].id));
		CHECK(!expect(cli[i].ch, RDMA_CM_EVENT_DISCONNECTED));
		CHECK(!expect(srv.ch, RDMA_CM_EVENT_DISCONNECTED));
		rdma_destroy_qp(child[i]);
		rdma_destroy_id(child[i]);
		teardown(&cli[i]);
	}
	for (i = 0; i < 100 && left; i++) { /* up to 10 s */
		left = cm_conns();
		usleep(100000);
	}
	CHECK(left == 0);
	teardown(&srv);
	return 0;
}

/* The next event on ch within ms, or NULL (acked: only its type is
 * left in *type_p). */
static int event_within(struct rdma_event_channel *ch, int ms, int *type_p)
{
	struct pollfd pf = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pf, 1, ms) != 1 || rdma_get_cm_event(ch, &ev))
		return 0;
	*type_p = ev->event;
	rdma_ack_cm_event(ev);
	return 1;
}

static void raw_msg(struct srn_cm_msg *m, unsigned int type, uint32_t from,
		    uint32_t to)
{
	memset(m, 0, sizeof(*m));
	m->magic = htobe32(SRN_CM_MAGIC);
	m->version = htobe16(SRN_CM_VERSION);
	m->type = type;
	m->local_id = htobe32(from);
	m->remote_id = htobe32(to);
	m->ps = htobe16(SRN_CM_PS_STREAM);
	m->qp_type = SRN_CM_QPT_RC;
}

/* A stream connection of our own to the CM port with one REQ for port. */
static int raw_peer(uint16_t port)
{
	struct sockaddr_in sa = loopback(cm_port());
	struct srn_cm_msg m;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	raw_msg(&m, SRN_CM_REQ, 77, 0);
	m.qpn = htobe32(0x123);
	m.dst_port = htobe16(port);
	m.src_port = htobe16(40000);
	m.retry_count = m.rnr_retry_count = 7;
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != sizeof(m)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A peer on a link of its own names other connections' ids: DREQ, GONE,
 * REJ, RTU and MRA from and to every id number a fresh process gives out
 * first, so also as the connection's own peer would. None
 * of it reaches a connection on another link: both of its ends stay
 * established and carry a SEND afterwards.
 */
static int t_link_isolation(void)
{
	static const uint8_t types[] = { SRN_CM_DREQ, SRN_CM_GONE, SRN_CM_REJ,
					 SRN_CM_RTU, SRN_CM_MRA };
	struct side srv = { 0 }, cli = { 0 };
	struct srn_cm_msg m[64];
	struct rdma_cm_event *ev;
	int fd, tag = 0, type = -1, got;
	uint32_t from;

	CHECK(!request(&srv, &cli, tag));
	CHECK(!make_qp(srv.child));
	CHECK(!rdma_accept(srv.child, NULL));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(!expect(srv.ch, RDMA_CM_EVENT_ESTABLISHED));
	fd = raw_peer(srv.port);
	CHECK(fd >= 0);
	ev = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(ev); /* the attacker's own connection, not accepted */
	rdma_ack_cm_event(ev);
	/* every pair of the first 64 id numbers as sender and receiver:
	 * all the ids of a fresh process (ctest runs this case alone) */
	for (unsigned int t = 0; t < sizeof(types); t++) {
		for (from = 1; from <= 64; from++) {
			for (int k = 0; k < 64; k++)
				raw_msg(&m[k], types[t], from, 1 + k);
			CHECK(send(fd, m, sizeof(m), MSG_NOSIGNAL) ==
			      sizeof(m));
		}
	}
	got = event_within(cli.ch, 300, &type) ||
	      event_within(srv.ch, 300, &type);
	if (got)
		fprintf(stderr, "event %s\n", rdma_event_str(type));
	CHECK(!got);
	CHECK(!send_one(&srv, &cli));
	close(fd);
	CHECK(!rdma_disconnect(cli.id));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_DISCONNECTED));
	CHECK(!expect(srv.ch, RDMA_CM_EVENT_DISCONNECTED));
	teardown(&cli);
	teardown(&srv);
	return 0;
}

/* not_here's first listener: one connection, then it stops listening on
 * the port but lives on (its link to the parent stays open). */
static int not_here_child(uint16_t port, int ready_fd)
{
	struct side srv = { 0 };

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed parent leaves none */
	if (listen_on(&srv, port, NULL))
		return 1;
	if (write(ready_fd, "x", 1) != 1)
		return 1;
	if (serve_one(&srv))
		return 1;
	teardown(&srv);
	if (write(ready_fd, "x", 1) != 1)
		return 1;
	pause();
	return 0;
}

/*
 * A port that moved: process A served port P, and our link to it is still
 * open when A stops listening and we listen on P ourselves. A REQ for P
 * on that link is answered "not here", and goes again on a new link to
 * whoever serves P now: it is established, not rejected.
 */
static int t_not_here(void)
{
	uint16_t port = 20000 + (getpid() + 7000) % 10000;
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_cm_event *ev;
	int pfd[2], tag = 0;
	char c;
	pid_t pid;

	CHECK(!pipe(pfd));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(not_here_child(port, pfd[1]));
	CHECK(read(pfd[0], &c, 1) == 1);
	CHECK(!client_to(&cli, port));
	CHECK(!make_qp(cli.id));
	CHECK(!rdma_connect(cli.id, NULL));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(!rdma_disconnect(cli.id));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_DISCONNECTED));
	teardown(&cli); /* the link idles (SRN_CM_LINK_IDLE_MS) */
	CHECK(read(pfd[0], &c, 1) == 1); /* A no longer listens on P */
	CHECK(!listen_on(&srv, port, &tag));
	CHECK(!client_to(&cli, port));
	CHECK(!make_qp(cli.id));
	CHECK(!rdma_connect(cli.id, NULL));
	ev = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(ev);
	srv.child = ev->id;
	rdma_ack_cm_event(ev);
	CHECK(!make_qp(srv.child) && !rdma_accept(srv.child, NULL));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_ESTABLISHED));
	teardown(&cli);
	teardown(&srv);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(pfd[0]);
	close(pfd[1]);
	return 0;
}

/*
 * 64 REQs at once to a port nobody listens on (this process has a CM port
 * listener, for another port): they share one link, and all are REJECTED
 * with status 8 (invalid service id) like the first, not one per dial
 * (which ran out of dials: UNREACHABLE).
 */
static int t_nobody_many(void)
{
	struct side mine = { 0 }, cli[64] = { 0 };
	uint16_t port = 20000 + (getpid() + 3000) % 10000;
	struct rdma_cm_event *ev;
	int i, tag = 0;

	CHECK(!listen_on(&mine, 0, &tag)); /* our CM port is open */
	for (i = 0; i < 64; i++) {
		CHECK(!client_to(&cli[i], port));
		CHECK(!make_qp(cli[i].id));
		CHECK(!rdma_connect(cli[i].id, NULL));
	}
	for (i = 0; i < 64; i++) {
		ev = next_event(cli[i].ch, RDMA_CM_EVENT_REJECTED);
		CHECK(ev);
		CHECK(ev->status == 8);
		rdma_ack_cm_event(ev);
	}
	for (i = 0; i < 64; i++)
		teardown(&cli[i]);
	teardown(&mine);
	return 0;
}

/* Is the peer's end of fd closed (EOF)? Waits up to ms for a byte. */
static int peer_closed(int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	ssize_t n;
	char c;

	if (poll(&pf, 1, ms) != 1)
		return 0;
	n = recv(fd, &c, 1, MSG_DONTWAIT); /* EOF, or a reset (our REQ
					    * after the close) */
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

/* A second REQ (id 78) on fd: answered with a REJ (the stream was kept as
 * a refusing link), or not (closed)? */
static int second_rej(int fd, uint16_t port)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	struct srn_cm_msg m;

	raw_msg(&m, SRN_CM_REQ, 78, 0);
	m.dst_port = htobe16(port);
	m.retry_count = m.rnr_retry_count = 7;
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != sizeof(m) ||
	    poll(&pf, 1, 2000) != 1 ||
	    recv(fd, &m, sizeof(m), MSG_WAITALL) != sizeof(m))
		return 0;
	return m.type == SRN_CM_REJ && be32toh(m.remote_id) == 78;
}

/*
 * Streams whose REQ found nobody listening are kept to answer the REQs
 * behind theirs, but at most 64 at a time (SRN_CM_REFUSING_MAX) and each
 * for about SRN_CM_PARK_MS: 100 such streams each get their REJ, at most
 * 64 of them answer a second REQ, and all are closed soon.
 */
static int t_refusing_cap(void)
{
	struct side mine = { 0 };
	uint16_t port = 20000 + (getpid() + 4000) % 10000;
	struct srn_cm_msg r;
	int fd[100], kept = 0, i, tag = 0;

	CHECK(!listen_on(&mine, 0, &tag)); /* our CM port is open */
	for (i = 0; i < 100; i++) {
		fd[i] = raw_peer(port);
		CHECK(fd[i] >= 0);
	}
	for (i = 0; i < 100; i++) {
		CHECK(recv(fd[i], &r, sizeof(r), MSG_WAITALL) == sizeof(r));
		CHECK(r.type == SRN_CM_REJ && be16toh(r.reason) == 8 &&
		      be32toh(r.remote_id) == 77);
	}
	for (i = 0; i < 100; i++)
		kept += second_rej(fd[i], port);
	fprintf(stderr, "refusing_cap: %d of 100 kept\n", kept);
	CHECK(kept <= 64);
	for (i = 0; i < 100; i++) {
		CHECK(peer_closed(fd[i], 10000));
		close(fd[i]);
	}
	teardown(&mine);
	return 0;
}

/*
 * A peer that sends and never reads: each of its messages (an RTU for an
 * id that is not there) is answered, the answers pile up, and once more
 * than SRN_CM_LINK_TX_MAX waits its link is shut down, instead of being
 * kept (a queue without end) or thinned. Its connection request goes
 * with it; a real connection is made afterwards.
 */
static int t_stalled_peer(void)
{
	struct side srv = { 0 }, cli = { 0 };
	struct timeval tv = { .tv_sec = 10 };
	struct pollfd pf = { .events = POLLIN };
	struct rdma_cm_event *ev;
	struct srn_cm_msg m[64];
	long sent = 0, got = 0;
	int fd, tag = 0, ended = 0;
	char buf[65536];
	ssize_t n;

	CHECK(!listen_on(&srv, 0, &tag));
	fd = raw_peer(srv.port);
	CHECK(fd >= 0);
	ev = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(ev);
	srv.child = ev->id;
	rdma_ack_cm_event(ev);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	for (int k = 0; k < 64; k++)
		raw_msg(&m[k], SRN_CM_RTU, 77, 0x7fffff00u + k);
	while (sent < 160000 &&
	       send(fd, m, sizeof(m), MSG_NOSIGNAL) == sizeof(m))
		sent += 64;
	pf.fd = fd;
	while (!ended && poll(&pf, 1, 10000) == 1) { /* EOF or reset */
		n = recv(fd, buf, sizeof(buf), 0);
		if (n > 0)
			got += n;
		else
			ended = 1;
	}
	fprintf(stderr, "stalled_peer: %ld messages sent, %ld answers read\n",
		sent, got / (long)sizeof(m[0]));
	CHECK(ended);
	CHECK(got < sent * (long)sizeof(m[0]));
	close(fd);
	teardown(&srv);
	CHECK(!request(&srv, &cli, tag)); /* the CM still serves */
	CHECK(!make_qp(srv.child) && !rdma_accept(srv.child, NULL));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_ESTABLISHED));
	teardown(&cli);
	teardown(&srv);
	return 0;
}

static const struct cm_case cases[] = {
	{ "link_isolation", t_link_isolation }, /* first: see above */
	{ "not_here", t_not_here },
	{ "nobody_many", t_nobody_many },
	{ "refusing_cap", t_refusing_cap },
	{ "stalled_peer", t_stalled_peer },
	{ "links", t_links },
};

int main(int argc, char **argv)
{
	return cm_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc,
			    argv);
}
