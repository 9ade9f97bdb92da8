// SPDX-License-Identifier: MIT
/*
 * softrnic RPC benchmark helper (scripts/bench-rpc.sh, docs/BENCHMARKS.md).
 * The calc service (examples/rpc/calc.x, rpcgen's code unmodified):
 *
 *   bench_rpc srv-srn PORT             softrnic server, one worker
 *   bench_rpc srv-tirpc udp|tcp PORT   libtirpc's svc_run server
 *   bench_rpc srv-tirpc unix PATH
 *   bench_rpc call KIND ADDR N SIZE [GAP_US]
 *                                      N calls, closed loop (or GAP_US
 *                                      apart; calls/s counts the gaps);
 *                                      KIND: shm, tcp, udp (srn_clnt_create),
 *                                      tirpc-udp, tirpc-tcp, tirpc-unix;
 *                                      SIZE -1: the null procedure, else an
 *                                      echo of SIZE bytes; ADDR: PORT,
 *                                      IPV4:PORT, or PATH (unix)
 *   bench_rpc spin N SIZE              a busy-polling shared-memory server
 *                                      thread (CPU 0) and client (CPU 1):
 *                                      SIZE bytes each way, no XDR
 *   bench_rpc line N                   a cache line's round trip, CPU 0-1
 *   bench_rpc futex N SIZE             as spin, but both sides block in
 *                                      futex (no spinning)
 *   bench_rpc srv-udpspin PORT         a busy-polling UDP echo server
 *   bench_rpc udpspin ADDR N SIZE      its busy-polling client
 *
 * Prints "p50_us p99_us calls_per_s" (per-call clock_gettime).
 * BENCH_RPC_PROG=N: the softrnic server and client use program number N
 * (two services on one host). BENCH_RPC_SECS=S (call): call for S seconds
 * after the warm-up instead of N calls (latencies of the first N), so
 * that two clients started together overlap for their whole run.
 * BENCH_RPC_THREADS=T (call): T client threads, each with its own CLIENT,
 * N calls each; latencies pooled, calls/s summed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <softrnic/rpc.h>

#include "calc.h"

void calc_prog_1(struct svc_req *rqstp, SVCXPRT *transp);

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* p50 and p99 of the n latencies in lat, and the rate of calls in total_us */
static void report(double *lat, long n, long calls, double total_us)
{
	qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
	printf("%.2f %.2f %.0f\n", lat[n / 2], lat[n * 99 / 100],
	       calls / (total_us / 1e6));
}

static rpcprog_t prog = CALC_PROG;

static int srv_srn(unsigned short port)
{
	struct srn_rpc_server_attr a = { .port = port,
					 .min_workers = 1,
					 .max_workers = 1 };
	struct srn_rpc_server *s = srn_rpc_server_create(&a);

	/* rpcgen's dispatch looks at the procedure only: any program number
	 * serves the calc service (a second service on the host) */
	if (!s || srn_rpc_server_register(s, prog, CALC_VERS, calc_prog_1))
		return 1;
	return srn_rpc_server_run(s);
}

static int srv_tirpc(const char *kind, const char *addr)
{
	SVCXPRT *x;

	if (!strcmp(kind, "unix")) {
		unlink(addr);
		x = svcunix_create(RPC_ANYSOCK, 0, 0, (char *)addr);
	} else {
		struct sockaddr_in sin = { .sin_family = AF_INET };
		int fd = socket(AF_INET,
				strcmp(kind, "udp") ? SOCK_STREAM : SOCK_DGRAM,
				0),
		    one = 1;

		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		sin.sin_port = htons((unsigned short)atoi(addr));
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
		    (strcmp(kind, "udp") && listen(fd, 16)))
			return 1;
		x = strcmp(kind, "udp") ? svctcp_create(fd, 0, 0) :
					  svcudp_create(fd);
	}
	/* protocol 0: not registered with rpcbind */
	if (!x || !svc_register(x, CALC_PROG, CALC_VERS, calc_prog_1, 0))
		return 1;
	svc_run();
	return 1;
}

/* "PORT" (this host, 127.0.0.1) or "IPV4:PORT" */
static void bench_addr(const char *addr, struct sockaddr_in *sin)
{
	const char *colon = strchr(addr, ':');
	char ip[32] = "127.0.0.1";

	if (colon && colon - addr < (long)sizeof(ip)) {
		memcpy(ip, addr, (size_t)(colon - addr));
		ip[colon - addr] = 0;
		addr = colon + 1;
	}
	sin->sin_family = AF_INET;
	sin->sin_port = htons((unsigned short)atoi(addr));
	inet_pton(AF_INET, ip, &sin->sin_addr);
}

static CLIENT *bench_client(const char *kind, const char *addr)
{
	struct sockaddr_in sin;
	struct timeval wait = { 1, 0 };
	int sock = RPC_ANYSOCK;
	char host[64];

	bench_addr(addr, &sin);
	if (!strcmp(kind, "tirpc-udp"))
		return clntudp_create(&sin, CALC_PROG, CALC_VERS, wait, &sock);
	if (!strcmp(kind, "tirpc-tcp"))
		return clnttcp_create(&sin, CALC_PROG, CALC_VERS, &sock, 0, 0);
	if (!strcmp(kind, "tirpc-unix")) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", addr);
		return clntunix_create(&sun, CALC_PROG, CALC_VERS, &sock, 0, 0);
	}
	snprintf(host, sizeof(host), "%s%s",
		 strchr(addr, ':') ? "" : "127.0.0.1:", addr);
	return srn_clnt_create(host, prog, CALC_VERS, kind);
}

static void gap_wait(long gap_us)
{
	struct timespec ts = { gap_us / 1000000, gap_us % 1000000 * 1000 };

	if (gap_us > 0)
		nanosleep(&ts, NULL);
}

/* One client thread's closed loop (several run side by side with
 * BENCH_RPC_THREADS): its latencies, calls and time. */
struct call_job {
	const char *kind;
	const char *addr;
	long n, size, gap_us;
	double *lat;
	long calls; /* timed calls made */
	double total_us;
	int rc;
};

static void *call_loop(void *arg)
{
	struct call_job *j = arg;
	struct timeval tmo = { 5, 0 };
	CLIENT *cl = bench_client(j->kind, j->addr);
	const char *e = getenv("BENCH_RPC_SECS");
	double secs = e ? atof(e) : 0, t0 = 0, t;
	calc_blob in = { 0 }, out;
	enum clnt_stat st;
	long i, warm = j->n / 10 + 10;

	j->rc = 1;
	if (!cl) {
		clnt_pcreateerror(j->kind);
		return NULL;
	}
	if (j->size > 0) {
		in.calc_blob_len = (u_int)j->size;
		in.calc_blob_val = calloc(1, (size_t)j->size);
	}
	for (i = -warm; secs > 0 || i < j->n; i++) {
		if (i == 0)
			t0 = now_us();
		if (secs > 0 && i > 0 && now_us() - t0 >= secs * 1e6)
			break;
		t = now_us();
		memset(&out, 0, sizeof(out));
		st = j->size < 0 ?
			     clnt_call(cl, NULLPROC, (xdrproc_t)xdr_void, NULL,
				       (xdrproc_t)xdr_void, NULL, tmo) :
			     calc_echo_1(&in, &out, cl);
		if (st != RPC_SUCCESS) {
			clnt_perror(cl, j->kind);
			return NULL;
		}
		if (j->size >= 0)
			clnt_freeres(cl, (xdrproc_t)xdr_calc_blob,
				     (char *)&out);
		if (i >= 0 && i < j->n)
			j->lat[i] = now_us() - t;
		gap_wait(j->gap_us);
	}
	j->calls = i;
	j->total_us = now_us() - t0;
	clnt_destroy(cl);
	free(in.calc_blob_val);
	j->rc = 0;
	return NULL;
}

/* BENCH_RPC_THREADS (default 1) client threads, each with its own
 * CLIENT, call side by side; the latencies of all of them pooled, the
 * calls/s summed. */
static int call(const char *kind, const char *addr, long n, long size,
		long gap_us)
{
	const char *e = getenv("BENCH_RPC_THREADS");
	long k, nt = e ? atol(e) : 1, m = 0, calls = 0;
	struct call_job *j;
	pthread_t *th;
	double *all, rate = 0;
	int rc = 0;

	nt = nt < 1 ? 1 : nt > 64 ? 64 : nt;
	j = calloc((size_t)nt, sizeof(*j));
	th = calloc((size_t)nt, sizeof(*th));
	all = calloc((size_t)(nt * n), sizeof(double));
	if (!j || !th || !all)
		return 1;
	for (k = 0; k < nt; k++) {
		j[k] = (struct call_job){ .kind = kind,
					  .addr = addr,
					  .n = n,
					  .size = size,
					  .gap_us = gap_us };
		j[k].lat = all + k * n;
		pthread_create(&th[k], NULL, call_loop, &j[k]);
	}
	for (k = 0; k < nt; k++) {
		pthread_join(th[k], NULL);
		rc |= j[k].rc;
		/* this thread's timed latencies, packed after the others' */
		memmove(all + m, j[k].lat,
			sizeof(double) *
				(size_t)(j[k].calls < n ? j[k].calls : n));
		m += j[k].calls < n ? j[k].calls : n;
		calls += j[k].calls;
		rate += j[k].total_us > 0 ? j[k].calls / (j[k].total_us / 1e6) :
					    0;
	}
	if (!rc && m > 0) {
		qsort(all, (size_t)m, sizeof(*all), cmp_double);
		printf("%.2f %.2f %.0f\n", all[m / 2], all[m * 99 / 100], rate);
	}
	free(all);
	free(th);
	free(j);
	return rc || !calls;
}

/* The busy-polling server's request and reply lines (no XDR, no RPC). */
struct spin_box {
	_Alignas(128) volatile uint32_t req;
	uint8_t rdata[1024];
	_Alignas(128) volatile uint32_t rep;
	uint8_t pdata[1024];
};

static struct spin_box box;
static long spin_size;

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *spin_server(void *arg)
{
	uint32_t k;

	pin(0);
	for (k = 1;; k++) {
		/* acquire: pairs with the release in spin_client */
		while (__atomic_load_n(&box.req, __ATOMIC_ACQUIRE) != k)
			__builtin_ia32_pause();
		if (arg)
			memcpy(box.pdata, box.rdata, (size_t)spin_size);
		/* release: pairs with the acquire in spin_client */
		__atomic_store_n(&box.rep, k, __ATOMIC_RELEASE);
		if (k == (uint32_t)-1)
			break;
	}
	return NULL;
}

static int spin_client(long n, long size, bool payload)
{
	uint8_t buf[1024] = { 0 };
	double *lat = calloc((size_t)n, sizeof(double)), t0 = 0, t;
	pthread_t th;
	long i, warm = n / 10;
	uint32_t k = 0;

	spin_size = size;
	pthread_create(&th, NULL, spin_server, payload ? (void *)1 : NULL);
	pin(1);
	for (i = -warm; i < n; i++) {
		if (i == 0)
			t0 = now_us();
		t = now_us();
		if (payload)
			memcpy(box.rdata, buf, (size_t)size);
		/* release: pairs with the acquire in spin_server */
		__atomic_store_n(&box.req, ++k, __ATOMIC_RELEASE);
		/* acquire: pairs with the release in spin_server */
		while (__atomic_load_n(&box.rep, __ATOMIC_ACQUIRE) != k)
			__builtin_ia32_pause();
		if (payload)
			memcpy(buf, box.pdata, (size_t)size);
		if (i >= 0)
			lat[i] = now_us() - t;
	}
	report(lat, n, n, now_us() - t0);
	return 0; /* the server thread spins on; exit ends it */
}

static void futex_wait_on(volatile uint32_t *w, uint32_t v)
{
	syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void futex_wake_on(volatile uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* The blocking variant: the server thread sleeps in futex for each
 * request, the client in futex for each reply (no spinning at all). */
static void *futex_server(void *arg)
{
	uint32_t k;

	pin(0);
	for (k = 1;; k++) {
		/* acquire: pairs with the release in futex_client */
		while (__atomic_load_n(&box.req, __ATOMIC_ACQUIRE) != k)
			futex_wait_on(&box.req, k - 1);
		memcpy(box.pdata, box.rdata, (size_t)spin_size);
		/* release: pairs with the acquire in futex_client */
		__atomic_store_n(&box.rep, k, __ATOMIC_RELEASE);
		futex_wake_on(&box.rep);
	}
	return NULL;
}

static int futex_client(long n, long size)
{
	double *lat = calloc((size_t)n, sizeof(double)), t0 = 0, t;
	uint8_t buf[1024] = { 0 };
	pthread_t th;
	long i, warm = n / 10;
	uint32_t k = 0;

	spin_size = size;
	pthread_create(&th, NULL, futex_server, NULL);
	pin(1);
	for (i = -warm; i < n; i++) {
		if (i == 0)
			t0 = now_us();
		t = now_us();
		memcpy(box.rdata, buf, (size_t)size);
		/* release: pairs with the acquire in futex_server */
		__atomic_store_n(&box.req, ++k, __ATOMIC_RELEASE);
		futex_wake_on(&box.req);
		/* acquire: pairs with the release in futex_server */
		while (__atomic_load_n(&box.rep, __ATOMIC_ACQUIRE) != k)
			futex_wait_on(&box.rep, k - 1);
		memcpy(buf, box.pdata, (size_t)size);
		if (i >= 0)
			lat[i] = now_us() - t;
	}
	report(lat, n, n, now_us() - t0);
	return 0;
}

/* A busy-polling UDP echo server (the network's software limit). */
static int udpspin_server(const char *addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET }, peer;
	socklen_t len;
	char buf[2048];
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t k;

	sin.sin_port = htons((unsigned short)atoi(addr));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)))
		return 1;
	for (;;) {
		len = sizeof(peer);
		k = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
			     (struct sockaddr *)&peer, &len);
		if (k > 0)
			sendto(fd, buf, (size_t)k, 0, (struct sockaddr *)&peer,
			       len);
	}
}

static int udpspin_client(const char *addr, long n, long size)
{
	double *lat = calloc((size_t)n, sizeof(double)), t0 = 0, t;
	struct sockaddr_in sin;
	char buf[2048] = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	long i, warm = n / 10;

	bench_addr(addr, &sin);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		return 1;
	for (i = -warm; i < n; i++) {
		if (i == 0)
			t0 = now_us();
		t = now_us();
		if (send(fd, buf, (size_t)size, 0) != size)
			return 1;
		while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
			__builtin_ia32_pause();
		if (i >= 0)
			lat[i] = now_us() - t;
	}
	report(lat, n, n, now_us() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	if (getenv("BENCH_RPC_PROG"))
		prog = strtoul(getenv("BENCH_RPC_PROG"), NULL, 0);
	if (!strcmp(m, "srv-srn") && argc > 2)
		return srv_srn((unsigned short)atoi(argv[2]));
	if (!strcmp(m, "srv-tirpc") && argc > 3)
		return srv_tirpc(argv[2], argv[3]);
	if (!strcmp(m, "call") && argc > 5)
		return call(argv[2], argv[3], atol(argv[4]), atol(argv[5]),
			    argc > 6 ? atol(argv[6]) : 0);
	if (!strcmp(m, "spin") && argc > 3)
		return spin_client(atol(argv[2]), atol(argv[3]), true);
	if (!strcmp(m, "line") && argc > 2)
		return spin_client(atol(argv[2]), 0, false);
	if (!strcmp(m, "futex") && argc > 3)
		return futex_client(atol(argv[2]), atol(argv[3]));
	if (!strcmp(m, "srv-udpspin") && argc > 2)
		return udpspin_server(argv[2]);
	if (!strcmp(m, "udpspin") && argc > 4)
		return udpspin_client(argv[2], atol(argv[3]), atol(argv[4]));
	fprintf(stderr, "usage: see bench/bench_rpc.c\n");
	return 2;
}
