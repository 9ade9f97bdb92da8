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
 *                                      echo of SIZE bytes; ADDR: PORT, PATH
 *   bench_rpc spin N SIZE              a busy-polling shared-memory server
 *                                      thread (CPU 0) and client (CPU 1):
 *                                      SIZE bytes each way, no XDR
 *   bench_rpc line N                   a cache line's round trip, CPU 0-1
 *
 * Prints "p50_us p99_us calls_per_s" (per-call clock_gettime).
 * BENCH_RPC_PROG=N: the softrnic server and client use program number N
 * (two services on one host).
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

static void report(double *lat, long n, double total_us)
{
	qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
	printf("%.2f %.2f %.0f\n", lat[n / 2], lat[n * 99 / 100],
	       n / (total_us / 1e6));
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
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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

static CLIENT *bench_client(const char *kind, const char *addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct timeval wait = { 1, 0 };
	int sock = RPC_ANYSOCK;
	char host[64];

	sin.sin_port = htons((unsigned short)atoi(addr));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!strcmp(kind, "tirpc-udp"))
		return clntudp_create(&sin, CALC_PROG, CALC_VERS, wait, &sock);
	if (!strcmp(kind, "tirpc-tcp"))
		return clnttcp_create(&sin, CALC_PROG, CALC_VERS, &sock, 0, 0);
	if (!strcmp(kind, "tirpc-unix")) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", addr);
		return clntunix_create(&sun, CALC_PROG, CALC_VERS, &sock, 0, 0);
	}
	snprintf(host, sizeof(host), "127.0.0.1:%s", addr);
	return srn_clnt_create(host, prog, CALC_VERS, kind);
}

static void gap_wait(long gap_us)
{
	struct timespec ts = { gap_us / 1000000, gap_us % 1000000 * 1000 };

	if (gap_us > 0)
		nanosleep(&ts, NULL);
}

static int call(const char *kind, const char *addr, long n, long size,
		long gap_us)
{
	struct timeval tmo = { 5, 0 };
	CLIENT *cl = bench_client(kind, addr);
	double *lat = calloc((size_t)n, sizeof(double)), t0, t;
	calc_blob in = { 0 }, out;
	enum clnt_stat st;
	long i, warm = n / 10 + 10;

	if (!cl || !lat) {
		clnt_pcreateerror(kind);
		return 1;
	}
	if (size > 0) {
		in.calc_blob_len = (u_int)size;
		in.calc_blob_val = calloc(1, (size_t)size);
	}
	for (i = -warm, t0 = 0; i < n; i++) {
		if (i == 0)
			t0 = now_us();
		t = now_us();
		memset(&out, 0, sizeof(out));
		st = size < 0 ?
			     clnt_call(cl, NULLPROC, (xdrproc_t)xdr_void, NULL,
				       (xdrproc_t)xdr_void, NULL, tmo) :
			     calc_echo_1(&in, &out, cl);
		if (st != RPC_SUCCESS) {
			clnt_perror(cl, kind);
			return 1;
		}
		if (size >= 0)
			clnt_freeres(cl, (xdrproc_t)xdr_calc_blob,
				     (char *)&out);
		if (i >= 0)
			lat[i] = now_us() - t;
		gap_wait(gap_us);
	}
	report(lat, n, now_us() - t0);
	clnt_destroy(cl);
	return 0;
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
	report(lat, n, now_us() - t0);
	return 0; /* the server thread spins on; exit ends it */
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
	fprintf(stderr, "usage: see bench/bench_rpc.c\n");
	return 2;
}
