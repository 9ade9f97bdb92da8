// SPDX-License-Identifier: MIT
/*
 * softrnic's rsockets: the API's behaviour and error cases
 * (docs/rsockets.md).
 *
 *   test_rsocket [NAME]   runs every case, or the one named
 *
 * Each case runs a listening rsocket and a client in this process (the
 * server side in a thread where it must block). Run once per transport
 * (SOFTRNIC_TRANSPORT=shm, tcp). Exit 0 when all pass. Nothing here
 * depends on the machine's speed: waits are for events, and the only
 * timed check is that rpoll waits at least its timeout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rsocket.h>

static int failures;
static uint16_t next_port;

#define CHECK(c)                                                         \
	do {                                                             \
		if (!(c)) {                                              \
			fprintf(stderr,                                  \
				"%s:%d: %s: check failed: %s "           \
				"(errno %d %s)\n",                       \
				__FILE__, __LINE__, __func__, #c, errno, \
				strerror(errno));                        \
			failures++;                                      \
			return -1;                                       \
		}                                                        \
	} while (0)

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An rsocket bound to a free port (*port_p), listening if asked: runs
 * of this test in parallel take turns for ports. */
static int bound(uint16_t *port_p, bool listen)
{
	struct sockaddr_in a;
	int fd = rsocket(AF_INET, SOCK_STREAM, 0), tries;

	if (fd < 0)
		return -1;
	for (tries = 0; tries < 100; tries++) {
		*port_p = next_port++;
		a = loopback(*port_p);
		if (!rbind(fd, (struct sockaddr *)&a, sizeof(a)))
			break;
		if (errno != EADDRINUSE)
			tries = 100;
	}
	if (tries == 100 || (listen && rlisten(fd, 4))) {
		rclose(fd);
		return -1;
	}
	return fd;
}

static int listener(uint16_t *port_p)
{
	return bound(port_p, true);
}

/*
 * A client rsocket connected to port (a non-blocking rconnect: as with
 * rdma-core's rsockets, the connection completes when the listener's
 * side calls raccept, which this thread does afterwards), blocking again.
 */
static int connect_to(uint16_t port)
{
	struct sockaddr_in a = loopback(port);
	int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	CHECK(c >= 0);
	CHECK(rconnect(c, (struct sockaddr *)&a, sizeof(a)) == -1 &&
	      errno == EINPROGRESS);
	return c;
}

static int connected(int c)
{
	struct pollfd p = { .fd = c, .events = POLLOUT };
	int err = -1;
	socklen_t len = sizeof(err);

	CHECK(rpoll(&p, 1, 10000) == 1 && p.revents == POLLOUT);
	CHECK(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
	CHECK(err == 0);
	CHECK(rfcntl(c, F_SETFL, 0) == 0);
	return 0;
}

/* A connected pair: *cli_p (rconnect) and *srv_p (raccept). */
static int pair(int *lfd_p, int *cli_p, int *srv_p)
{
	uint16_t port;
	int lfd = listener(&port), c;
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	CHECK(lfd >= 0);
	c = connect_to(port);
	CHECK(c >= 0);
	*srv_p = raccept(lfd, (struct sockaddr *)&a, &len);
	CHECK(*srv_p >= 0);
	CHECK(len == sizeof(a) && a.sin_family == AF_INET);
	CHECK(connected(c) == 0);
	*cli_p = c;
	*lfd_p = lfd;
	return 0;
}

static void unpair(int lfd, int c, int s)
{
	rclose(c);
	rclose(s);
	rclose(lfd);
}

static int t_badfd(void)
{
	char b[4];

	errno = 0;
	CHECK(rrecv(100000, b, sizeof(b), 0) == -1 && errno == EBADF);
	CHECK(rsend(-1, b, sizeof(b), 0) == -1 && errno == EBADF);
	CHECK(rclose(4095) == -1 && errno == EBADF);
	CHECK(rshutdown(4094, SHUT_RDWR) == -1 && errno == EBADF);
	CHECK(rsocket(AF_UNIX, SOCK_STREAM, 0) == -1 && errno == EAFNOSUPPORT);
	return 0;
}

/* A port nobody holds: one this process bound, then let go. (Not one
 * it keeps bound without listening: softrnic's CM then hands a REQ that
 * lands in another process to the port's socket, which nobody reads.) */
static uint16_t free_port(void)
{
	uint16_t port = 0;
	int hold = bound(&port, false);

	if (hold >= 0)
		rclose(hold);
	return port;
}

static int t_refused(void)
{
	struct sockaddr_in a = loopback(free_port());
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);

	CHECK(ntohs(a.sin_port) && fd >= 0);
	CHECK(rconnect(fd, (struct sockaddr *)&a, sizeof(a)) == -1);
	CHECK(errno == ECONNREFUSED);
	rclose(fd);
	return 0;
}

/* Non-blocking rconnect: EINPROGRESS, then POLLOUT and SO_ERROR. */
static int t_refused_nb(void)
{
	struct sockaddr_in a = loopback(free_port());
	int fd = rsocket(AF_INET, SOCK_STREAM, 0), err = -1;
	struct pollfd p;
	socklen_t len = sizeof(err);

	CHECK(fd >= 0);
	CHECK(rfcntl(fd, F_SETFL, rfcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
	CHECK(rfcntl(fd, F_GETFL) & O_NONBLOCK);
	CHECK(rconnect(fd, (struct sockaddr *)&a, sizeof(a)) == -1);
	/* the refusal may come at once, as Linux may say for loopback */
	CHECK(errno == EINPROGRESS || errno == ECONNREFUSED);
	if (errno == ECONNREFUSED) {
		rclose(fd);
		return 0;
	}
	p = (struct pollfd){ .fd = fd, .events = POLLOUT };
	CHECK(rpoll(&p, 1, 10000) == 1);
	CHECK(p.revents & (POLLERR | POLLHUP));
	CHECK(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
	CHECK(err == ECONNREFUSED);
	rclose(fd);
	return 0;
}

/* Non-blocking: raccept with nobody, rrecv with nothing: EAGAIN; rpoll
 * waits its timeout. */
static int t_eagain(void)
{
	int lfd, c, s;
	char b[8];
	struct pollfd p;
	int64_t t0;

	if (pair(&lfd, &c, &s))
		return -1;
	CHECK(rfcntl(lfd, F_SETFL, O_NONBLOCK) == 0);
	CHECK(raccept(lfd, NULL, NULL) == -1 && errno == EAGAIN);
	CHECK(rrecv(c, b, sizeof(b), MSG_DONTWAIT) == -1 && errno == EAGAIN);
	CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0);
	CHECK(rrecv(s, b, sizeof(b), 0) == -1 && errno == EAGAIN);
	p = (struct pollfd){ .fd = s, .events = POLLIN };
	t0 = now_ms();
	CHECK(rpoll(&p, 1, 200) == 0);
	CHECK(now_ms() - t0 >= 190);
	CHECK(rsend(c, "hello", 5, 0) == 5);
	CHECK(rpoll(&p, 1, 10000) == 1 && (p.revents & POLLIN));
	CHECK(rrecv(s, b, sizeof(b), 0) == 5 && !memcmp(b, "hello", 5));
	unpair(lfd, c, s);
	return 0;
}

/* The peer closes after sending: the data, then 0 (end of stream). */
static int t_peer_close(void)
{
	struct pollfd p;
	int lfd, c, s;
	char b[16];

	if (pair(&lfd, &c, &s))
		return -1;
	CHECK(rsend(c, "last words", 10, 0) == 10);
	CHECK(rclose(c) == 0);
	/* data first: readable, no hang-up while it is unread */
	p = (struct pollfd){ .fd = s, .events = POLLIN };
	CHECK(rpoll(&p, 1, 10000) == 1 && (p.revents & POLLIN));
	CHECK(!(p.revents & (POLLHUP | POLLERR)));
	CHECK(rrecv(s, b, sizeof(b), MSG_WAITALL) == 10);
	CHECK(!memcmp(b, "last words", 10));
	CHECK(rrecv(s, b, sizeof(b), 0) == 0);
	CHECK(rrecv(s, b, sizeof(b), 0) == 0);
	/* then the hang-up (events 0: it waits for POLLHUP alone) */
	p = (struct pollfd){ .fd = s, .events = 0 };
	CHECK(rpoll(&p, 1, 10000) == 1 && (p.revents & POLLHUP));
	rclose(s);
	rclose(lfd);
	return 0;
}

/* rshutdown(SHUT_WR): the peer reads 0, the other way still works. */
static int t_shutdown(void)
{
	int lfd, c, s;
	char b[16];

	if (pair(&lfd, &c, &s))
		return -1;
	CHECK(rshutdown(c, SHUT_WR) == 0);
	CHECK(rsend(c, "x", 1, 0) == -1 && errno == EPIPE);
	CHECK(rrecv(s, b, sizeof(b), 0) == 0);
	CHECK(rsend(s, "back", 4, 0) == 4);
	CHECK(rrecv(c, b, 4, MSG_WAITALL) == 4 && !memcmp(b, "back", 4));
	unpair(lfd, c, s);
	return 0;
}

#define BIG (4u << 20)

struct reader {
	int fd;
	uint8_t *buf;
	ssize_t got;
};

static void *slow_reader(void *arg)
{
	struct reader *r = arg;
	ssize_t n;

	r->got = 0;
	while (r->got < (ssize_t)BIG) {
		n = rrecv(r->fd, r->buf + r->got, 777, 0); /* small reads */
		if (n <= 0)
			break;
		r->got += n;
	}
	return NULL;
}

/*
 * Flow control: a non-blocking sender fills the window (EAGAIN, the
 * reader reads nothing yet), then a slow reader with small reads gets
 * every byte of 4 MiB, in order.
 */
static int t_flow(void)
{
	struct reader r;
	pthread_t th;
	uint8_t *src = malloc(BIG);
	size_t off = 0, i;
	ssize_t n;
	int lfd, c, s;

	CHECK(src);
	for (i = 0; i < BIG; i++)
		src[i] = (uint8_t)(i * 7 + i / 4096);
	if (pair(&lfd, &c, &s))
		return -1;
	for (;;) {
		n = rsend(c, src + off, 100000, MSG_DONTWAIT);
		if (n < 0)
			break;
		off += n;
		CHECK(off < BIG);
	}
	CHECK(errno == EAGAIN && off > 0);
	r.fd = s;
	r.buf = malloc(BIG);
	CHECK(r.buf);
	pthread_create(&th, NULL, slow_reader, &r);
	while (off < BIG) {
		n = rsend(c, src + off, BIG - off > 65536 ? 65536 : BIG - off,
			  0);
		CHECK(n > 0);
		off += n;
	}
	pthread_join(th, NULL);
	CHECK(r.got == (ssize_t)BIG);
	CHECK(!memcmp(r.buf, src, BIG));
	free(r.buf);
	free(src);
	unpair(lfd, c, s);
	return 0;
}

#define POLL_ROUNDS 300
#define POLL_CHUNK (64 * 1024)

/* The far side: reads each chunk in small pieces (its credits go back to
 * the sender while the sender waits in rpoll), then answers one byte. */
static void *chunk_echo(void *arg)
{
	int s = *(int *)arg;
	static uint8_t buf[4096];
	ssize_t n, got = 0;

	while ((n = rrecv(s, buf, sizeof(buf), 0)) > 0) {
		got += n;
		if (got >= POLL_CHUNK) {
			got -= POLL_CHUNK;
			if (rsend(s, "x", 1, 0) != 1)
				break;
		}
	}
	return NULL;
}

/*
 * rpoll for POLLIN on an rsocket that gets other completions meanwhile
 * (the peer's credits, our send completions): one taken while rpoll arms
 * the CQ is progress without POLLIN. rpoll must look again, not sleep in
 * poll() with no fd of that rsocket (it slept out its whole timeout, or
 * for ever with -1: iperf3's control connection hung so). Every answer
 * must wake it.
 */
static int t_poll_progress(void)
{
	static uint8_t chunk[POLL_CHUNK];
	pthread_t th;
	int lfd, c, s, i;
	char x;

	if (pair(&lfd, &c, &s))
		return -1;
	pthread_create(&th, NULL, chunk_echo, &s);
	for (i = 0; i < POLL_ROUNDS; i++) {
		struct pollfd f = { .fd = c, .events = POLLIN };

		if (rsend(c, chunk, sizeof(chunk), 0) != sizeof(chunk))
			break;
		if (rpoll(&f, 1, 60000) != 1 || rrecv(c, &x, 1, 0) != 1)
			break;
	}
	rshutdown(c, SHUT_WR);
	pthread_join(th, NULL);
	CHECK(i == POLL_ROUNDS);
	unpair(lfd, c, s);
	return 0;
}

struct pump {
	int c;
	int stop; /* the writer stops */
	int done; /* the writer has stopped */
};

/* Sends on c until told to stop: blocks for credits again and again. */
static void *pump_writer(void *arg)
{
	struct pump *p = arg;
	static uint8_t buf[16384];

	/* relaxed: a flag; the join orders the rest */
	while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
		if (rsend(p->c, buf, sizeof(buf), 0) <= 0)
			break;
	/* release: pairs with the acquire in t_two_waiters */
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Two threads wait on one rsocket: one sends (waits for credits), the
 * other waits in rpoll for the peer's answers and reads them. Whichever
 * takes the completions must wake the other: the credits taken by the
 * reading thread left the sending one asleep for ever.
 */
static int t_two_waiters(void)
{
	struct pump p = { 0 };
	pthread_t th, w;
	int lfd, c, s, i;
	int64_t until;
	char x;

	if (pair(&lfd, &c, &s))
		return -1;
	p.c = c;
	pthread_create(&th, NULL, chunk_echo, &s);
	pthread_create(&w, NULL, pump_writer, &p);
	for (i = 0; i < POLL_ROUNDS; i++) {
		struct pollfd f = { .fd = c, .events = POLLIN };

		if (rpoll(&f, 1, 60000) != 1 || rrecv(c, &x, 1, 0) != 1)
			break;
	}
	/* relaxed: a flag (see pump_writer) */
	__atomic_store_n(&p.stop, 1, __ATOMIC_RELAXED);
	until = now_ms() + 60000;
	/* acquire: pairs with the release in pump_writer */
	while (!__atomic_load_n(&p.done, __ATOMIC_ACQUIRE) && now_ms() < until)
		if (rrecv(c, &x, 1, MSG_DONTWAIT) < 0) /* the answers */
			usleep(1000);
	CHECK(i == POLL_ROUNDS);
	/* acquire: as above */
	CHECK(__atomic_load_n(&p.done, __ATOMIC_ACQUIRE));
	pthread_join(w, NULL);
	rshutdown(c, SHUT_WR);
	pthread_join(th, NULL);
	unpair(lfd, c, s);
	return 0;
}

#define STEAL_ROUNDS 3000

struct steal {
	int c, s;
	int stop; /* both helpers stop */
	int go; /* rounds the sender may send */
};

/* Takes c's completions again and again (rpoll for POLLOUT, no wait)
 * without reading: the data it takes is for the other thread. */
static void *steal_progress(void *arg)
{
	struct steal *st = arg;

	/* relaxed: a flag; the join orders the rest */
	while (!__atomic_load_n(&st->stop, __ATOMIC_RELAXED)) {
		struct pollfd f = { .fd = st->c, .events = POLLOUT };

		rpoll(&f, 1, 0);
	}
	return NULL;
}

/* One byte on s per round main allows, after a delay that varies, so
 * that it lands anywhere in main's rpoll. */
static void *steal_sender(void *arg)
{
	struct steal *st = arg;
	int sent = 0, spin;

	for (;;) {
		/* acquire: pairs with the release in t_poll_steal */
		while (__atomic_load_n(&st->go, __ATOMIC_ACQUIRE) == sent)
			if (__atomic_load_n(&st->stop, __ATOMIC_RELAXED))
				return NULL; /* relaxed: a flag */
		for (spin = (sent * 7919) % 4000; spin > 0; spin--)
			__asm__ volatile("" ::: "memory");
		if (rsend(st->s, "x", 1, 0) != 1)
			return NULL;
		sent++;
	}
}

/*
 * rpoll for POLLIN while another thread takes the rsocket's completions
 * all the time: data it takes after rpoll looked (pass 1) and before
 * rpoll sleeps (pass 2) must not be missed. rpoll slept on with the
 * data queued (found as a rare hang of two_waiters). No round may take
 * the whole 10 s.
 */
static int t_poll_steal(void)
{
	struct steal st = { 0 };
	pthread_t a, b;
	int lfd, i;
	char x;

	if (pair(&lfd, &st.c, &st.s))
		return -1;
	pthread_create(&a, NULL, steal_progress, &st);
	pthread_create(&b, NULL, steal_sender, &st);
	for (i = 0; i < STEAL_ROUNDS; i++) {
		struct pollfd f = { .fd = st.c, .events = POLLIN };

		/* release: pairs with the acquire in steal_sender */
		__atomic_store_n(&st.go, i + 1, __ATOMIC_RELEASE);
		if (rpoll(&f, 1, 10000) != 1 || rrecv(st.c, &x, 1, 0) != 1)
			break;
	}
	/* relaxed: a flag (see steal_progress) */
	__atomic_store_n(&st.stop, 1, __ATOMIC_RELAXED);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	CHECK(i == STEAL_ROUNDS);
	unpair(lfd, st.c, st.s);
	return 0;
}

/* Two connections one after the other on one listener, as rstream makes;
 * names; rselect; writev/readv. */
static int t_again(void)
{
	struct sockaddr_in a, b;
	socklen_t len;
	int lfd, c, s, round;
	char x[6] = { 0 };
	struct iovec v[2] = { { "abc", 3 }, { "def", 3 } };
	struct iovec w[2] = { { x, 2 }, { x + 2, 4 } };
	fd_set rd;
	struct timeval tv = { 10, 0 };

	if (pair(&lfd, &c, &s))
		return -1;
	for (round = 0; round < 2; round++) {
		len = sizeof(a);
		CHECK(rgetpeername(c, (struct sockaddr *)&a, &len) == 0);
		len = sizeof(b);
		CHECK(rgetsockname(lfd, (struct sockaddr *)&b, &len) == 0);
		CHECK(a.sin_port == b.sin_port);
		CHECK(rwritev(c, v, 2) == 6);
		FD_ZERO(&rd);
		FD_SET(s, &rd);
		CHECK(rselect(s + 1, &rd, NULL, NULL, &tv) == 1);
		CHECK(FD_ISSET(s, &rd));
		CHECK(rreadv(s, w, 2) > 0);
		rclose(c);
		rclose(s);
		if (round)
			break;
		c = connect_to(ntohs(b.sin_port));
		CHECK(c >= 0);
		s = raccept(lfd, NULL, NULL);
		CHECK(s >= 0);
		CHECK(connected(c) == 0);
	}
	CHECK(!memcmp(x, "abcdef", 6));
	rclose(lfd);
	return 0;
}

struct echo {
	int fd;
	ssize_t n;
};

/* A datagram rsocket's echo: one datagram back to its sender. */
static void *dgram_echo(void *arg)
{
	struct echo *e = arg;
	struct sockaddr_in from;
	socklen_t len = sizeof(from);
	char b[64];

	e->n = rrecvfrom(e->fd, b, sizeof(b), 0, (struct sockaddr *)&from,
			 &len);
	if (e->n > 0)
		e->n = rsendto(e->fd, b, e->n, 0, (struct sockaddr *)&from,
			       len);
	return NULL;
}

/* SOCK_DGRAM: rsendto a bound rsocket (found through rdma_cm), its
 * answer back to the (auto-bound) sender; EMSGSIZE; EAGAIN. */
static int t_dgram(void)
{
	struct echo e = { .fd = rsocket(AF_INET, SOCK_DGRAM, 0) };
	int c = rsocket(AF_INET, SOCK_DGRAM, 0);
	static char big[8192];
	struct sockaddr_in a;
	uint16_t port = 0;
	pthread_t th;
	char b[64];
	int tries;

	CHECK(e.fd >= 0 && c >= 0);
	for (tries = 0; tries < 100; tries++) {
		port = next_port++;
		a = loopback(port);
		if (!rbind(e.fd, (struct sockaddr *)&a, sizeof(a)))
			break;
	}
	CHECK(tries < 100);
	CHECK(rrecv(e.fd, b, sizeof(b), MSG_DONTWAIT) == -1 && errno == EAGAIN);
	pthread_create(&th, NULL, dgram_echo, &e);
	CHECK(rsendto(c, "ping", 4, 0, (struct sockaddr *)&a, sizeof(a)) == 4);
	CHECK(rrecv(c, b, sizeof(b), 0) == 4 && !memcmp(b, "ping", 4));
	pthread_join(th, NULL);
	CHECK(e.n == 4);
	CHECK(rsendto(c, big, sizeof(big), 0, (struct sockaddr *)&a,
		      sizeof(a)) == -1 &&
	      errno == EMSGSIZE);
	rclose(c);
	rclose(e.fd);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "badfd", t_badfd },
	{ "refused", t_refused },
	{ "refused_nb", t_refused_nb },
	{ "eagain", t_eagain },
	{ "peer_close", t_peer_close },
	{ "shutdown", t_shutdown },
	{ "flow", t_flow },
	{ "poll_progress", t_poll_progress },
	{ "two_waiters", t_two_waiters },
	{ "poll_steal", t_poll_steal },
	{ "again", t_again },
	{ "dgram", t_dgram },
};

int main(int argc, char **argv)
{
	size_t i;
	int ran = 0;

	next_port = 20000 + (getpid() % 200) * 100;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int f = failures;

		if (argc > 1 && strcmp(argv[1], cases[i].name))
			continue;
		ran++;
		cases[i].fn();
		printf("%s: %s\n", cases[i].name,
		       failures == f ? "ok" : "FAILED");
		fflush(stdout);
	}
	if (!ran) {
		fprintf(stderr, "no case %s\n", argv[1]);
		return 2;
	}
	return failures ? 1 : 0;
}
