// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: event sequences and error cases (docs/rdmacm.md).
 *
 *   test_cm [NAME]   runs every case, or the one named
 *
 * Each case runs a listener and a client in this process (two event
 * channels; the CM thread does the work), except "handoff", which forks a
 * second listening process: REQs for its port that land on this
 * process's CM listener must be handed over ("timers" forks too). Run
 * once per transport
 * (SOFTRNIC_TRANSPORT=shm, tcp). Exit 0 when all pass.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "cm_util.h"

static int timer_peer_fd = -1; /* t_timers: the peer's "established" */

static int t_connect(void)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_conn_param p = { .private_data = "world",
				     .private_data_len = 5,
				     .responder_resources = 1,
				     .initiator_depth = 1 };
	struct rdma_cm_event *ev;
	int tag = 0;

	CHECK(!request(&srv, &cli, tag));
	CHECK(!make_qp(srv.child));
	CHECK(!rdma_accept(srv.child, &p));
	ev = next_event(cli.ch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(ev);
	CHECK(ev->param.conn.private_data_len >= 5 &&
	      !memcmp(ev->param.conn.private_data, "world", 5));
	CHECK(ev->param.conn.qp_num == srv.child->qp->qp_num);
	rdma_ack_cm_event(ev);
	CHECK(!expect(srv.ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(!send_one(&srv, &cli));
	/* disconnect: both sides hear of it */
	CHECK(!rdma_disconnect(cli.id));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_DISCONNECTED));
	CHECK(!expect(srv.ch, RDMA_CM_EVENT_DISCONNECTED));
	CHECK(!rdma_disconnect(srv.child)); /* already: no error */
	teardown(&cli);
	teardown(&srv);
	return 0;
}

static int t_reject(void)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_cm_event *ev;
	int tag = 0;

	CHECK(!request(&srv, &cli, tag));
	CHECK(!rdma_reject(srv.child, "nope", 4));
	ev = next_event(cli.ch, RDMA_CM_EVENT_REJECTED);
	CHECK(ev);
	CHECK(ev->status == 28); /* consumer reject */
	CHECK(ev->param.conn.private_data_len >= 4 &&
	      !memcmp(ev->param.conn.private_data, "nope", 4));
	rdma_ack_cm_event(ev);
	teardown(&cli);
	teardown(&srv);
	return 0;
}

/* A second listener on the CM port (same address, SO_REUSEPORT, as
 * softrnic's) that resets the connections the kernel gives it, up to
 * RESETS of them: a process whose listener closes with REQs queued. */
#define RESETS 6
struct resetter {
	int fd, resets; /* resets: read once the thread is joined */
	atomic_int stop;
};

static void *reset_some(void *arg)
{
	struct resetter *r = arg;
	struct pollfd pf = { .fd = r->fd, .events = POLLIN };
	struct linger lg = { 1, 0 };

	/* relaxed: a flag alone (the join orders the rest) */
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed) &&
	       r->resets < RESETS) {
		int c;

		if (poll(&pf, 1, 50) != 1)
			continue;
		c = accept(r->fd, NULL, NULL);
		if (c < 0)
			continue;
		setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(c); /* RST */
		r->resets++;
	}
	close(r->fd); /* leaves the group; what it had queued is reset */
	return NULL;
}

static int resetter_open(struct resetter *r)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
	const char *e = getenv("SOFTRNIC_CM_PORT");
	int one = 1, zero = 0;

	sa.sin6_port = htons(e ? atoi(e) : 4790);
	r->fd = socket(AF_INET6, SOCK_STREAM, 0);
	CHECK(r->fd >= 0);
	setsockopt(r->fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	setsockopt(r->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	CHECK(!bind(r->fd, (struct sockaddr *)&sa, sizeof(sa)));
	CHECK(!listen(r->fd, 64));
	return 0;
}

/* REQs whose connection is reset before any answer are sent again (after
 * a backoff), so every one of 20 connections reaches the listener while
 * another listener of the CM port resets what it gets. Each goes to
 * another loopback address (127.0.0.1, .2, ...), so that each dials a CM
 * link of its own. */
static int t_redial(void)
{
	struct resetter r = { .fd = -1 };
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_cm_event *ev;
	pthread_t t;

	CHECK(!listen_on(&srv, 0, NULL)); /* softrnic's CM port listener */
	CHECK(!resetter_open(&r));
	CHECK(!pthread_create(&t, NULL, reset_some, &r));
	for (int i = 0; i < 20; i++) {
		struct sockaddr_in sa = loopback(srv.port);

		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK + i);
		CHECK(!client_via(&cli, sa, RDMA_PS_TCP));
		CHECK(!make_qp(cli.id));
		CHECK(!rdma_connect(cli.id, NULL));
		ev = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		CHECK(ev);
		srv.child = ev->id;
		rdma_ack_cm_event(ev);
		CHECK(!rdma_reject(srv.child, NULL, 0));
		CHECK(!expect(cli.ch, RDMA_CM_EVENT_REJECTED));
		rdma_destroy_id(srv.child);
		srv.child = NULL;
		teardown(&cli);
	}
	/* relaxed: as in reset_some */
	atomic_store_explicit(&r.stop, 1, memory_order_relaxed);
	CHECK(!pthread_join(t, NULL));
	fprintf(stderr, "redial: %d connections reset on the way\n", r.resets);
	CHECK(r.resets > 0); /* else nothing was tested: the odds are 1e-6 */
	teardown(&srv);
	return 0;
}

/* A port nobody listens on: REJECTED (invalid service id, 8), so a
 * client may retry. First case run: no CM listener in this process. */
static int t_nobody(void)
{
	struct side cli = { 0 };
	struct rdma_cm_event *ev;

	CHECK(!client_to(&cli, 9));
	CHECK(!make_qp(cli.id));
	CHECK(!rdma_connect(cli.id, NULL));
	ev = next_event(cli.ch, RDMA_CM_EVENT_REJECTED);
	CHECK(ev);
	CHECK(ev->status == 8);
	rdma_ack_cm_event(ev);
	teardown(&cli);
	return 0;
}

/* The same while this process listens elsewhere: the REQ reaches our CM
 * port, waits for a listener of its port, and is rejected. */
static int t_nobody_listening(void)
{
	struct side srv = { 0 };
	int tag = 0;

	CHECK(!listen_on(&srv, 0, &tag));
	CHECK(!t_nobody());
	teardown(&srv);
	return 0;
}

static int t_nonblock(void)
{
	struct side cli = { 0 };
	struct rdma_cm_event *ev;
	struct sockaddr_in sa = loopback(1);
	struct pollfd pf;
	int fl;

	cli.ch = rdma_create_event_channel();
	CHECK(cli.ch);
	fl = fcntl(cli.ch->fd, F_GETFL);
	CHECK(!fcntl(cli.ch->fd, F_SETFL, fl | O_NONBLOCK));
	CHECK(!rdma_create_id(cli.ch, &cli.id, NULL, RDMA_PS_TCP));
	errno = 0;
	CHECK(rdma_get_cm_event(cli.ch, &ev) == -1 && errno == EAGAIN);
	pf = (struct pollfd){ .fd = cli.ch->fd, .events = POLLIN };
	CHECK(poll(&pf, 1, 0) == 0);
	CHECK(!rdma_resolve_addr(cli.id, NULL, (struct sockaddr *)&sa, 100));
	CHECK(poll(&pf, 1, 5000) == 1); /* readable: an event waits */
	CHECK(!rdma_get_cm_event(cli.ch, &ev));
	CHECK(ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	CHECK(rdma_get_cm_event(cli.ch, &ev) == -1 && errno == EAGAIN);
	teardown(&cli);
	return 0;
}

static void *destroy_thread(void *arg)
{
	rdma_destroy_id(arg);
	return NULL;
}

/* rdma_destroy_id waits until the id's events are acked. */
static int t_destroy_waits(void)
{
	struct side cli = { 0 };
	struct rdma_cm_event *ev;
	struct sockaddr_in sa = loopback(1);
	pthread_t t;
	int ret;

	cli.ch = rdma_create_event_channel();
	CHECK(cli.ch);
	CHECK(!rdma_create_id(cli.ch, &cli.id, NULL, RDMA_PS_TCP));
	CHECK(!rdma_resolve_addr(cli.id, NULL, (struct sockaddr *)&sa, 100));
	ev = next_event(cli.ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(ev);
	CHECK(!pthread_create(&t, NULL, destroy_thread, cli.id));
	usleep(200000);
	ret = pthread_tryjoin_np(t, NULL);
	rdma_ack_cm_event(ev);
	if (ret == 0) {
		fprintf(stderr, "rdma_destroy_id returned before the ack\n");
		failures++;
		return -1;
	}
	CHECK(!pthread_join(t, NULL));
	cli.id = NULL;
	teardown(&cli);
	return 0;
}

struct reader {
	struct rdma_event_channel *ch;
	pid_t tid;
	int returned; /* written once the reader's call returns */
};

static void *reader_thread(void *arg)
{
	struct reader *r = arg;
	struct rdma_cm_event *ev;

	__atomic_store_n(&r->tid, gettid(), __ATOMIC_RELEASE);
	rdma_get_cm_event(r->ch, &ev); /* must never return here */
	__atomic_store_n(&r->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Whether thread tid sleeps in read(2) on fd, and fd has no count left. */
static int reader_asleep(pid_t tid, int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	char path[64], buf[128];
	long nr = -1, arg0 = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	if (sscanf(buf, "%ld %lx", &nr, &arg0) != 2)
		return 0;
	return nr == 0 /* read on x86_64 */ && arg0 == fd &&
	       poll(&pf, 1, 0) == 0;
}

/*
 * rping's CM thread sits in rdma_get_cm_event while its main thread
 * destroys the id (dropping an event whose count the reader already took)
 * and then the channel. As on the kernel's fd, the reader must sleep on:
 * never see a closed fd (rping exits 255 on "Bad file descriptor"), never
 * touch freed memory.
 */
static int t_reader_outlives(void)
{
	struct sockaddr_in sa = loopback(1);
	struct reader r = { 0 };
	struct rdma_cm_id *id;
	pthread_t t;
	int fd, i;

	r.ch = rdma_create_event_channel();
	CHECK(r.ch);
	fd = r.ch->fd;
	CHECK(!rdma_create_id(r.ch, &id, NULL, RDMA_PS_TCP));
	CHECK(!rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 100));
	{
		struct pollfd pf = { .fd = fd, .events = POLLIN };

		CHECK(poll(&pf, 1, 10000) == 1); /* ADDR_RESOLVED queued */
	}
	CHECK(!rdma_destroy_id(id)); /* drops it; its count stays */
	CHECK(!pthread_create(&t, NULL, reader_thread, &r));
	for (i = 0; i < 10000; i++) {
		pid_t tid = __atomic_load_n(&r.tid, __ATOMIC_ACQUIRE);

		if (tid && reader_asleep(tid, fd))
			break;
		usleep(1000);
	}
	CHECK(i < 10000); /* took the stale count, asleep again */
	rdma_destroy_event_channel(r.ch);
	CHECK(fcntl(fd, F_GETFD) >= 0); /* not closed under the reader */
	CHECK(eventfd_write(fd, 1) == 0); /* a stray wake-up */
	usleep(100000);
	CHECK(!__atomic_load_n(&r.returned, __ATOMIC_ACQUIRE));
	CHECK(pthread_detach(t) == 0); /* asleep for ever, as on the kernel */
	return 0;
}

/* An application-made QP: CONNECT_RESPONSE, rdma_init_qp_attr for INIT,
 * RTR and RTS, rdma_establish; the server sees ESTABLISHED. */
static int t_own_qp(void)
{
	struct side srv = { 0 }, cli = { 0 };
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC };
	struct rdma_conn_param p = { .responder_resources = 1,
				     .initiator_depth = 1 };
	struct ibv_qp_attr qa;
	struct rdma_cm_event *ev;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	int mask, tag = 0;
	enum ibv_qp_state st[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };

	CHECK(!listen_on(&srv, 0, &tag));
	CHECK(!client_to(&cli, srv.port));
	cq = ibv_create_cq(cli.id->verbs, 8, NULL, NULL, 0);
	a.send_cq = a.recv_cq = cq;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	pd = ibv_alloc_pd(cli.id->verbs);
	qp = pd ? ibv_create_qp(pd, &a) : NULL;
	CHECK(cq && qp);
	p.qp_num = qp->qp_num;
	CHECK(!rdma_connect(cli.id, &p));
	ev = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(ev);
	srv.child = ev->id;
	CHECK(ev->param.conn.qp_num == qp->qp_num);
	rdma_ack_cm_event(ev);
	CHECK(!make_qp(srv.child));
	CHECK(!rdma_accept(srv.child, NULL));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_CONNECT_RESPONSE));
	for (int i = 0; i < 3; i++) {
		qa.qp_state = st[i];
		CHECK(!rdma_init_qp_attr(cli.id, &qa, &mask));
		CHECK(!ibv_modify_qp(qp, &qa, mask));
	}
	CHECK(!rdma_establish(cli.id));
	CHECK(!expect(srv.ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(!rdma_disconnect(srv.child));
	CHECK(!expect(srv.ch, RDMA_CM_EVENT_DISCONNECTED));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_DISCONNECTED));
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	teardown(&cli);
	teardown(&srv);
	return 0;
}

/* rdma_migrate_id: the id's next events come on the new channel. */
static int t_migrate(void)
{
	struct side cli = { 0 };
	struct rdma_event_channel *ch2 = rdma_create_event_channel();
	struct sockaddr_in sa = loopback(1);
	struct pollfd pf = { .events = POLLIN };

	cli.ch = rdma_create_event_channel();
	CHECK(cli.ch && ch2);
	CHECK(!rdma_create_id(cli.ch, &cli.id, NULL, RDMA_PS_TCP));
	CHECK(!rdma_migrate_id(cli.id, ch2));
	CHECK(cli.id->channel == ch2);
	CHECK(!rdma_resolve_addr(cli.id, NULL, (struct sockaddr *)&sa, 100));
	CHECK(!expect(ch2, RDMA_CM_EVENT_ADDR_RESOLVED));
	pf.fd = cli.ch->fd;
	CHECK(poll(&pf, 1, 0) == 0);
	rdma_destroy_id(cli.id);
	cli.id = NULL;
	rdma_destroy_event_channel(ch2);
	teardown(&cli);
	return 0;
}

/* The forked listener: accepts n connections, waits for each to be
 * disconnected by the client; exit 0 when all went so. */
static int handoff_child(uint16_t port, int n, int ready_fd)
{
	struct side srv = { 0 };
	int tag = 0;

	if (listen_on(&srv, port, &tag))
		return 1;
	if (write(ready_fd, "x", 1) != 1)
		return 1;
	for (int i = 0; i < n; i++) {
		if (serve_one(&srv))
			return 1;
		rdma_destroy_qp(srv.child);
		rdma_destroy_id(srv.child);
		srv.child = NULL;
	}
	teardown(&srv);
	return failures ? 1 : 0;
}

/* Two listening processes share the CM port: REQs for the child's port
 * that the kernel gives to us are handed to it. */
static int t_handoff(void)
{
	struct side mine = { 0 }, cli = { 0 };
	uint16_t port = 20000 + getpid() % 10000;
	int pfd[2], st, tag = 0, n = 16;
	char c;
	pid_t pid;

	CHECK(!listen_on(&mine, 0, &tag));
	CHECK(!pipe(pfd));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(handoff_child(port, n, pfd[1]));
	CHECK(read(pfd[0], &c, 1) == 1);
	for (int i = 0; i < n; i++) {
		CHECK(!client_to(&cli, port));
		CHECK(!make_qp(cli.id));
		CHECK(!rdma_connect(cli.id, NULL));
		CHECK(!expect(cli.ch, RDMA_CM_EVENT_ESTABLISHED));
		CHECK(!rdma_disconnect(cli.id));
		CHECK(!expect(cli.ch, RDMA_CM_EVENT_DISCONNECTED));
		teardown(&cli);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(pfd[0]);
	close(pfd[1]);
	teardown(&mine);
	return 0;
}

/* A peer process for the CM timer cases: it listens on port; with
 * delay_s it accepts the first request that late and then waits for the
 * disconnect; without, it does nothing more (the parent stops it). */
static int timer_child(uint16_t port, int delay_s, int ready_fd)
{
	struct side srv = { 0 };
	struct rdma_cm_event *ev;

	if (listen_on(&srv, port, NULL) || write(ready_fd, "x", 1) != 1)
		return 1;
	if (!delay_s)
		pause();
	ev = next_event(srv.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (!ev)
		return 1;
	srv.child = ev->id;
	rdma_ack_cm_event(ev);
	sleep(delay_s); /* a slow application: its CM sends MRA meanwhile */
	if (make_qp(srv.child) || rdma_accept(srv.child, NULL) ||
	    expect(srv.ch, RDMA_CM_EVENT_ESTABLISHED) ||
	    write(ready_fd, "x", 1) != 1)
		return 1;
	pause(); /* stopped, then killed, by the parent */
	return 0;
}

static pid_t timer_peer(uint16_t port, int delay_s)
{
	int pfd[2];
	char c;
	pid_t pid;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid == 0)
		_exit(timer_child(port, delay_s, pfd[1]));
	if (pid > 0 && read(pfd[0], &c, 1) != 1)
		pid = -1;
	close(pfd[1]);
	if (delay_s && pid > 0)
		timer_peer_fd = pfd[0]; /* its second byte: established */
	else
		close(pfd[0]);
	return pid;
}

/*
 * CM timers (SRN_CM_RESPONSE_MS, 4 s): a peer whose application takes 6 s
 * to accept keeps the connection alive with MRAs and it is established;
 * once that peer is stopped (SIGSTOP: no reset, no answer), a disconnect
 * still ends in DISCONNECTED; and a REQ to a stopped listener ends in
 * UNREACHABLE with ETIMEDOUT instead of waiting for ever.
 */
static int t_timers(void)
{
	uint16_t port = 21000 + getpid() % 9000;
	struct side cli = { 0 };
	struct rdma_cm_event *ev;
	pid_t pid = timer_peer(port, 6);
	char c;

	CHECK(pid > 0);
	CHECK(!client_to(&cli, port));
	CHECK(!make_qp(cli.id));
	CHECK(!rdma_connect(cli.id, NULL));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_ESTABLISHED));
	CHECK(read(timer_peer_fd, &c, 1) == 1);
	close(timer_peer_fd);
	kill(pid, SIGSTOP);
	CHECK(!rdma_disconnect(cli.id));
	CHECK(!expect(cli.ch, RDMA_CM_EVENT_DISCONNECTED));
	teardown(&cli);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	pid = timer_peer(port + 1, 0);
	CHECK(pid > 0);
	kill(pid, SIGSTOP);
	CHECK(!client_to(&cli, port + 1));
	CHECK(!make_qp(cli.id));
	CHECK(!rdma_connect(cli.id, NULL));
	ev = next_event(cli.ch, RDMA_CM_EVENT_UNREACHABLE);
	CHECK(ev);
	CHECK(ev->status == -ETIMEDOUT);
	rdma_ack_cm_event(ev);
	teardown(&cli);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}

/* A port bound by another process that does not listen on it: the REQ
 * handed to that process is rejected at once (not left unread there). */
static int t_bound_only(void)
{
	struct side mine = { 0 }, cli = { 0 };
	uint16_t port = 20000 + (getpid() + 5000) % 10000;
	int pfd[2], qfd[2], st, tag = 0;
	struct rdma_cm_event *ev;
	char c;
	pid_t pid;

	CHECK(!listen_on(&mine, 0, &tag)); /* our CM port is open */
	CHECK(!pipe(pfd) && !pipe(qfd));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct sockaddr_in sa = loopback(port);
		struct rdma_cm_id *id;

		if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
		    rdma_bind_addr(id, (struct sockaddr *)&sa) ||
		    write(pfd[1], "x", 1) != 1)
			_exit(1);
		_exit(read(qfd[0], &c, 1) == 1 ? 0 : 1); /* until told */
	}
	CHECK(read(pfd[0], &c, 1) == 1);
	CHECK(!client_to(&cli, port));
	CHECK(!make_qp(cli.id));
	CHECK(!rdma_connect(cli.id, NULL));
	ev = next_event(cli.ch, RDMA_CM_EVENT_REJECTED);
	CHECK(ev);
	if (ev) {
		CHECK(ev->status == 8); /* invalid service id */
		rdma_ack_cm_event(ev);
	}
	teardown(&cli);
	CHECK(write(qfd[1], "x", 1) == 1);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(pfd[0]);
	close(pfd[1]);
	close(qfd[0]);
	close(qfd[1]);
	teardown(&mine);
	return 0;
}

/* Synchronous ids: rdma_getaddrinfo, rdma_create_ep, rdma_get_request. */
static void *ep_server(void *arg)
{
	struct rdma_cm_id *listen = arg, *id;
	struct ibv_wc wc;
	char buf[16];
	struct ibv_mr *mr;

	if (rdma_get_request(listen, &id))
		return "get_request";
	mr = rdma_reg_msgs(id, buf, sizeof(buf));
	if (!mr || rdma_post_recv(id, NULL, buf, sizeof(buf), mr) ||
	    rdma_accept(id, NULL) || rdma_get_recv_comp(id, &wc) != 1 ||
	    wc.status || strcmp(buf, "sync"))
		return "accept or receive";
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	return NULL;
}

static int t_ep(void)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr a = { .sq_sig_all = 1 };
	struct rdma_cm_id *listen, *id;
	char port[8], buf[16] = "sync";
	struct ibv_mr *mr;
	struct ibv_wc wc;
	pthread_t t;
	void *err;

	a.cap.max_send_wr = a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	snprintf(port, sizeof(port), "%d", 30000 + getpid() % 10000);
	hints.ai_flags = RAI_PASSIVE;
	CHECK(!rdma_getaddrinfo("127.0.0.1", port, &hints, &res));
	CHECK(!rdma_create_ep(&listen, res, NULL, &a));
	rdma_freeaddrinfo(res);
	CHECK(!rdma_listen(listen, 1));
	CHECK(!pthread_create(&t, NULL, ep_server, listen));
	hints.ai_flags = 0;
	CHECK(!rdma_getaddrinfo("127.0.0.1", port, &hints, &res));
	CHECK(res->ai_qp_type == IBV_QPT_RC && res->ai_dst_addr);
	CHECK(!rdma_create_ep(&id, res, NULL, &a));
	rdma_freeaddrinfo(res);
	mr = rdma_reg_msgs(id, buf, sizeof(buf));
	CHECK(mr);
	CHECK(!rdma_connect(id, NULL));
	CHECK(!rdma_post_send(id, NULL, buf, sizeof(buf), mr, 0));
	CHECK(rdma_get_send_comp(id, &wc) == 1 && !wc.status);
	CHECK(!pthread_join(t, &err));
	if (err)
		fprintf(stderr, "ep server: %s\n", (char *)err);
	CHECK(!err);
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen);
	return 0;
}

/* XRC through rdma_cm: the passive id's QP is an XRC TGT QP and
 * rdma_create_srq gives it an XRC SRQ of the device's XRC domain, whose
 * number the accept carries; the client's INI QP sends to that SRQ. */
static void *xrc_server(void *arg)
{
	struct rdma_cm_id *listen = arg, *id;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 1, .max_sge = 1 } };
	struct rdma_conn_param p = { 0 };
	uint32_t srqn, be_srqn;
	struct ibv_wc wc;
	char buf[16];
	struct ibv_mr *mr;

	if (rdma_get_request(listen, &id))
		return "get_request";
	if (!id->qp || id->qp->qp_type != IBV_QPT_XRC_RECV)
		return "the request's QP is not an XRC TGT QP";
	if (rdma_create_srq(id, NULL, &sa) || !id->srq ||
	    ibv_get_srq_num(id->srq, &srqn))
		return "XRC SRQ";
	be_srqn = htonl(srqn);
	p.private_data = &be_srqn;
	p.private_data_len = sizeof(be_srqn);
	mr = rdma_reg_msgs(id, buf, sizeof(buf));
	if (!mr || rdma_post_recv(id, NULL, buf, sizeof(buf), mr) ||
	    rdma_accept(id, &p) || rdma_get_recv_comp(id, &wc) != 1 ||
	    wc.status || strcmp(buf, "xrc"))
		return "accept or receive on the SRQ";
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	return NULL;
}

/* A client id of the given QP type connects to port: 0 or -errno. */
static int xrc_client(const char *port, enum ibv_qp_type type,
		      struct rdma_cm_id **id_p)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_IB,
				       .ai_qp_type = type },
			     *res;
	struct ibv_qp_init_attr a = { .sq_sig_all = 1 };

	a.cap.max_send_wr = a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	CHECK(!rdma_getaddrinfo("127.0.0.1", port, &hints, &res));
	CHECK(!rdma_create_ep(id_p, res, NULL, &a));
	rdma_freeaddrinfo(res);
	CHECK((*id_p)->qp && (*id_p)->qp->qp_type == type);
	return rdma_connect(*id_p, NULL) ? -errno : 0;
}

static int t_xrc(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE,
				       .ai_port_space = RDMA_PS_IB,
				       .ai_qp_type = IBV_QPT_XRC_RECV },
			     *res;
	struct ibv_qp_init_attr a = { 0 };
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE };
	struct ibv_send_wr *bad;
	struct rdma_cm_id *listen, *id;
	char port[8], buf[16] = "xrc";
	struct ibv_sge sge = { (uintptr_t)buf, sizeof(buf), 0 };
	struct ibv_wc wc;
	pthread_t t;
	void *err;

	a.cap.max_send_wr = a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	snprintf(port, sizeof(port), "%d", 20000 + getpid() % 10000);
	CHECK(!rdma_getaddrinfo("127.0.0.1", port, &hints, &res));
	CHECK(!rdma_create_ep(&listen, res, NULL, &a));
	rdma_freeaddrinfo(res);
	CHECK(!rdma_listen(listen, 1));
	/* an RC initiator is no peer for an XRC TGT: rejected */
	CHECK(xrc_client(port, IBV_QPT_RC, &id) == -ECONNREFUSED);
	rdma_destroy_ep(id);
	CHECK(!pthread_create(&t, NULL, xrc_server, listen));
	CHECK(!xrc_client(port, IBV_QPT_XRC_SEND, &id));
	CHECK(id->event && id->event->param.conn.private_data_len >= 4);
	memcpy(&wr.qp_type.xrc.remote_srqn, id->event->param.conn.private_data,
	       4);
	wr.qp_type.xrc.remote_srqn = ntohl(wr.qp_type.xrc.remote_srqn);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	CHECK(!ibv_post_send(id->qp, &wr, &bad));
	CHECK(rdma_get_send_comp(id, &wc) == 1 && !wc.status);
	CHECK(!pthread_join(t, &err));
	if (err)
		fprintf(stderr, "xrc server: %s\n", (char *)err);
	CHECK(!err);
	rdma_disconnect(id);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen);
	return 0;
}

/* UD: a QP made by rdma_create_qp is ready to send (RTS, RDMA_UDP_QKEY). */
static int make_ud_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_UD, .sq_sig_all = 1 };
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;

	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	CHECK(!rdma_create_qp(id, NULL, &a));
	CHECK(!ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_QKEY, &ia));
	CHECK(qa.qp_state == IBV_QPS_RTS && qa.qkey == RDMA_UDP_QKEY);
	return 0;
}

/* The next completion on cq within ms milliseconds: 1, or 0 (none). */
static int poll_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	for (int i = 0; i < ms; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		usleep(1000);
	}
	return 0;
}

/* A UD message: the 40-byte GRH, then the payload. */
struct ud_buf {
	char grh[40];
	char data[24];
};

/* One datagram from id to (ah, qpn) with RDMA_UDP_QKEY (as
 * rdma_post_ud_send sends), received by rid (its recv posted here); its
 * source QP checked. */
static int ud_send_one(struct rdma_cm_id *id, struct ibv_ah *ah, uint32_t qpn,
		       struct rdma_cm_id *rid, const char *msg)
{
	struct ud_buf rb = { 0 }, sb = { 0 };
	struct ibv_mr *rmr = rdma_reg_msgs(rid, &rb, sizeof(rb));
	struct ibv_mr *smr = rdma_reg_msgs(id, &sb, sizeof(sb));
	struct ibv_wc wc;

	CHECK(rmr && smr);
	snprintf(sb.data, sizeof(sb.data), "%s", msg);
	CHECK(!rdma_post_recv(rid, NULL, &rb, sizeof(rb), rmr));
	CHECK(!rdma_post_ud_send(id, NULL, sb.data, sizeof(sb.data), smr, 0, ah,
				 qpn));
	CHECK(poll_wc(id->send_cq, &wc, 5000) == 1 && !wc.status);
	CHECK(poll_wc(rid->recv_cq, &wc, 5000) == 1 && !wc.status);
	CHECK(wc.src_qp == id->qp->qp_num && (wc.wc_flags & IBV_WC_GRH));
	CHECK(!strcmp(rb.data, msg));
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	return 0;
}

/* A SIDR request with private data up to CONNECT_REQUEST (param.ud). */
static int ud_request(struct side *srv, struct side *cli, int ctx_tag)
{
	char pd[180];
	struct rdma_conn_param p = { .private_data = pd,
				     .private_data_len = sizeof(pd) + 1 };
	struct rdma_cm_event *ev;

	memset(pd, 'h', sizeof(pd));
	CHECK(!listen_ps(srv, 0, &ctx_tag, RDMA_PS_UDP));
	CHECK(!client_ps(cli, srv->port, RDMA_PS_UDP));
	CHECK(cli->id->qp_type == IBV_QPT_UD);
	CHECK(!make_ud_qp(cli->id));
	CHECK(rdma_connect(cli->id, &p) == -1 && errno == EINVAL);
	p.private_data_len = sizeof(pd); /* a SIDR REQ's most */
	CHECK(!rdma_connect(cli->id, &p));
	ev = next_event(srv->ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(ev);
	srv->child = ev->id;
	CHECK(ev->listen_id == srv->id && ev->id->qp_type == IBV_QPT_UD);
	CHECK(ev->param.ud.private_data_len == sizeof(pd) &&
	      !memcmp(ev->param.ud.private_data, pd, sizeof(pd)));
	CHECK(ev->param.ud.qp_num == cli->id->qp->qp_num);
	CHECK(ev->param.ud.qkey == RDMA_UDP_QKEY);
	rdma_ack_cm_event(ev);
	return 0;
}

/* No event on ch for 200 ms. */
static int quiet(struct rdma_event_channel *ch)
{
	struct pollfd pf = { .fd = ch->fd, .events = POLLIN };

	CHECK(poll(&pf, 1, 200) == 0);
	return 0;
}

/* The server answers a datagram to the address its GRH names. */
static int sidr_reply(struct side *srv, struct side *cli, struct ibv_ah *ah)
{
	struct ud_buf rb = { 0 }, sb = { 0 };
	struct ibv_mr *mr = rdma_reg_msgs(srv->child, &rb, sizeof(rb));
	struct ibv_mr *smr = rdma_reg_msgs(cli->id, &sb, sizeof(sb));
	struct ibv_ah *back;
	struct ibv_wc wc;

	CHECK(mr && smr);
	CHECK(!rdma_post_recv(srv->child, NULL, &rb, sizeof(rb), mr));
	strcpy(sb.data, "again");
	CHECK(!rdma_post_ud_send(cli->id, NULL, sb.data, 8, smr, 0, ah,
				 srv->child->qp->qp_num));
	CHECK(poll_wc(cli->id->send_cq, &wc, 5000) == 1 && !wc.status);
	CHECK(poll_wc(srv->child->recv_cq, &wc, 5000) == 1 && !wc.status);
	back = ibv_create_ah_from_wc(srv->child->pd, &wc,
				     (struct ibv_grh *)rb.grh, 1);
	CHECK(back);
	CHECK(!ud_send_one(srv->child, back, cli->id->qp->qp_num, cli->id,
			   "reply"));
	ibv_destroy_ah(back);
	rdma_dereg_mr(mr);
	rdma_dereg_mr(smr);
	return 0;
}

/* SIDR: REQ with private data, REP with the QPN and Q_Key in
 * ESTABLISHED's param.ud, whose AH reaches the server's QP (and the GRH
 * the way back); no ESTABLISHED on the passive side, no DISCONNECTED. */
static int t_sidr(void)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_conn_param p = { .private_data = "world",
				     .private_data_len = 5 };
	struct rdma_cm_event *ev;
	struct ibv_ah *ah;
	int tag = 0;

	CHECK(!ud_request(&srv, &cli, tag));
	CHECK(!make_ud_qp(srv.child));
	CHECK(!rdma_accept(srv.child, &p));
	ev = next_event(cli.ch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(ev);
	CHECK(ev->param.ud.private_data_len >= 5 &&
	      !memcmp(ev->param.ud.private_data, "world", 5));
	CHECK(ev->param.ud.qp_num == srv.child->qp->qp_num);
	CHECK(ev->param.ud.qkey == RDMA_UDP_QKEY);
	CHECK(ev->param.ud.ah_attr.is_global &&
	      ev->param.ud.ah_attr.port_num == 1);
	ah = ibv_create_ah(cli.id->pd, &ev->param.ud.ah_attr);
	CHECK(ah);
	CHECK(!ud_send_one(cli.id, ah, ev->param.ud.qp_num, srv.child,
			   "over SIDR"));
	rdma_ack_cm_event(ev);
	CHECK(!sidr_reply(&srv, &cli, ah));
	ibv_destroy_ah(ah);
	CHECK(!quiet(srv.ch) && !quiet(cli.ch)); /* no passive ESTABLISHED */
	errno = 0;
	CHECK(rdma_disconnect(cli.id) == -1 && errno == EINVAL);
	teardown(&cli);
	CHECK(!quiet(srv.ch)); /* no DISCONNECTED for UD */
	teardown(&srv);
	return 0;
}

/* rdma_reject of a SIDR REQ: UNREACHABLE with the SIDR status 2 (reject)
 * and the private data, as the kernel's rdma_cm reports it. */
static int t_sidr_reject(void)
{
	struct side srv = { 0 }, cli = { 0 };
	struct rdma_cm_event *ev;
	int tag = 0;

	CHECK(!ud_request(&srv, &cli, tag));
	CHECK(!rdma_reject(srv.child, "nope", 4));
	ev = next_event(cli.ch, RDMA_CM_EVENT_UNREACHABLE);
	CHECK(ev);
	CHECK(ev->status == 2);
	CHECK(ev->param.ud.private_data_len >= 4 &&
	      !memcmp(ev->param.ud.private_data, "nope", 4));
	rdma_ack_cm_event(ev);
	teardown(&cli);
	teardown(&srv);
	return 0;
}

/* A SIDR REQ to a port nobody listens on: UNREACHABLE, status 1 (the
 * SIDR REP's "unsupported"). */
static int t_sidr_nobody(void)
{
	struct side cli = { 0 };
	struct rdma_cm_event *ev;

	CHECK(!client_ps(&cli, 9, RDMA_PS_UDP));
	CHECK(!make_ud_qp(cli.id));
	CHECK(!rdma_connect(cli.id, NULL));
	ev = next_event(cli.ch, RDMA_CM_EVENT_UNREACHABLE);
	CHECK(ev);
	CHECK(ev->status == 1);
	rdma_ack_cm_event(ev);
	teardown(&cli);
	return 0;
}

/* A UD id bound to 127.0.0.1 whose address resolves to the group. */
static int mc_member(struct side *s, const struct sockaddr_in *grp)
{
	struct sockaddr_in src = loopback(0);

	s->ch = rdma_create_event_channel();
	CHECK(s->ch);
	CHECK(!rdma_create_id(s->ch, &s->id, s, RDMA_PS_UDP));
	CHECK(!rdma_resolve_addr(s->id, (struct sockaddr *)&src,
				 (struct sockaddr *)grp, 2000));
	CHECK(!expect(s->ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(!make_ud_qp(s->id));
	return 0;
}

/* rdma_join_multicast: MULTICAST_JOIN with the group's AH (MGID
 * ::ffff:239.x.y.z), QPN 0xffffff, the Q_Key and the join's context; a
 * send-only member's datagram reaches the full member; after
 * rdma_leave_multicast it does not. */
static int t_mcast(void)
{
	struct side rcv = { 0 }, snd = { 0 };
	struct sockaddr_in grp = { .sin_family = AF_INET };
	struct rdma_cm_join_mc_attr_ex mx = { 0 };
	struct ud_buf rb = { 0 }, sb = { 0 };
	struct rdma_cm_event *ev;
	struct ibv_mr *rmr, *smr;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	int ctx;
	uint8_t mgid[16] = { [10] = 0xff, [11] = 0xff, 239, 3 };

	/* a group of this process's own: tests in parallel do not mix */
	mgid[14] = (uint8_t)(getpid() >> 8);
	mgid[15] = (uint8_t)getpid();
	memcpy(&grp.sin_addr, mgid + 12, 4);
	CHECK(!mc_member(&rcv, &grp) && !mc_member(&snd, &grp));
	CHECK(!rdma_join_multicast(rcv.id, (struct sockaddr *)&grp, &ctx));
	ev = next_event(rcv.ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	CHECK(ev);
	CHECK(ev->param.ud.private_data == &ctx && !ev->status);
	CHECK(ev->param.ud.qp_num == 0xffffff);
	CHECK(ev->param.ud.qkey == RDMA_UDP_QKEY);
	CHECK(!memcmp(ev->param.ud.ah_attr.grh.dgid.raw, mgid, 16));
	rdma_ack_cm_event(ev);
	CHECK(rdma_join_multicast(rcv.id, (struct sockaddr *)&grp, NULL) ==
		      -1 &&
	      errno == EADDRINUSE);
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
		       RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mx.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	mx.addr = (struct sockaddr *)&grp;
	CHECK(!rdma_join_multicast_ex(snd.id, &mx, NULL));
	ev = next_event(snd.ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	CHECK(ev);
	ah = ibv_create_ah(snd.id->pd, &ev->param.ud.ah_attr);
	CHECK(ah);
	rdma_ack_cm_event(ev);
	CHECK(!ud_send_one(snd.id, ah, 0xffffff, rcv.id, "to the group"));
	/* left: the next datagram is not received */
	CHECK(!rdma_leave_multicast(rcv.id, (struct sockaddr *)&grp));
	CHECK(rdma_leave_multicast(rcv.id, (struct sockaddr *)&grp) == -1 &&
	      errno == EADDRNOTAVAIL);
	rmr = rdma_reg_msgs(rcv.id, &rb, sizeof(rb));
	smr = rdma_reg_msgs(snd.id, &sb, sizeof(sb));
	CHECK(rmr && smr);
	CHECK(!rdma_post_recv(rcv.id, NULL, &rb, sizeof(rb), rmr));
	CHECK(!rdma_post_ud_send(snd.id, NULL, sb.data, 8, smr, 0, ah,
				 0xffffff));
	CHECK(poll_wc(snd.id->send_cq, &wc, 5000) == 1 && !wc.status);
	CHECK(poll_wc(rcv.id->recv_cq, &wc, 300) == 0);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	ibv_destroy_ah(ah);
	CHECK(!rdma_leave_multicast(snd.id, (struct sockaddr *)&grp));
	teardown(&snd);
	teardown(&rcv);
	return 0;
}

static const struct cm_case cases[] = {
	{ "nobody", t_nobody }, /* first: no CM listener in this process */
	{ "nonblock", t_nonblock },
	{ "destroy_waits", t_destroy_waits },
	{ "reader_outlives", t_reader_outlives },
	{ "migrate", t_migrate },
	{ "connect", t_connect },
	{ "reject", t_reject },
	{ "redial", t_redial },
	{ "own_qp", t_own_qp },
	{ "nobody_listening", t_nobody_listening },
	{ "ep", t_ep },
	{ "xrc", t_xrc },
	{ "handoff", t_handoff },
	{ "timers", t_timers },
	{ "bound_only", t_bound_only },
	{ "sidr", t_sidr },
	{ "sidr_reject", t_sidr_reject },
	{ "sidr_nobody", t_sidr_nobody },
	{ "mcast", t_mcast },
};

int main(int argc, char **argv)
{
	return cm_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc,
			    argv);
}
