// SPDX-License-Identifier: MIT
/*
 * The TCP limit for BENCHMARKS.md: a busy-polling TCP ping-pong.
 *   tcp_pingpong server PORT
 *   tcp_pingpong client HOST PORT [ITERS] [SIZE]
 * The client prints the one-way latency in ns (round trip / 2) over ITERS
 * after a warm-up, as two numbers: the median ("typical", as perftest's
 * t_typical) and the mean. Both ends poll recv(MSG_DONTWAIT): no sleeping.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void xfer(int fd, char *buf, size_t n, int dir)
{
	size_t done = 0;

	while (done < n) {
		ssize_t k = dir ? send(fd, buf + done, n - done, 0) :
				  recv(fd, buf + done, n - done, MSG_DONTWAIT);

		if (k > 0)
			done += k;
		else if (k == 0)
			exit(0);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

static int setup(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* tcp_pingpong server PORT: echoes forever (exits when the client goes). */
static int server(const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char buf[65536];
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
	int fd;

	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_port = htons(atoi(port));
	if (bind(l, (void *)&sa, sizeof(sa)) || listen(l, 1))
		return 1;
	fd = accept(l, NULL, NULL);
	setup(fd);
	for (;;) {
		uint32_t size;

		xfer(fd, (char *)&size, sizeof(size), 0);
		if (size > sizeof(buf))
			return 1;
		for (;;) {
			xfer(fd, buf, size, 0);
			xfer(fd, buf, size, 1);
		}
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char buf[65536];
	int fd;

	if (argc >= 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "client")) {
		long iters = argc > 4 ? atol(argv[4]) : 100000;
		uint32_t size = argc > 5 ? atol(argv[5]) : 8;
		uint64_t *rtt, sum = 0;

		fd = socket(AF_INET, SOCK_STREAM, 0);
		inet_pton(AF_INET, argv[2], &sa.sin_addr);
		sa.sin_port = htons(atoi(argv[3]));
		if (connect(fd, (void *)&sa, sizeof(sa)))
			return 1;
		setup(fd);
		rtt = calloc(iters > 0 ? iters : 1, sizeof(*rtt));
		if (!rtt || iters <= 0 || size > sizeof(buf))
			return 1;
		xfer(fd, (char *)&size, sizeof(size), 1);
		for (long i = 0; i < 1000; i++) {
			xfer(fd, buf, size, 1);
			xfer(fd, buf, size, 0);
		}
		for (long i = 0; i < iters; i++) {
			uint64_t t0 = now_ns();

			xfer(fd, buf, size, 1);
			xfer(fd, buf, size, 0);
			rtt[i] = now_ns() - t0;
			sum += rtt[i];
		}
		qsort(rtt, iters, sizeof(*rtt), cmp_u64);
		printf("%.0f %.0f\n", rtt[iters / 2] / 2.0,
		       (double)sum / iters / 2);
		return 0;
	}
	fprintf(stderr, "usage: tcp_pingpong server PORT | client HOST PORT "
			"[ITERS] [SIZE]\n");
	return 2;
}
