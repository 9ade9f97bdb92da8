// SPDX-License-Identifier: MIT
/*
 * The TCP limit for BENCHMARKS.md: a busy-polling TCP ping-pong.
 *   tcp_pingpong server PORT
 *   tcp_pingpong client HOST PORT [ITERS] [SIZE]
 * The client prints the one-way latency in ns (round trip / 2, mean over
 * ITERS after a warm-up). Both ends poll recv(MSG_DONTWAIT): no sleeping.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

static int setup(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char buf[65536];
	int fd;

	if (argc >= 3 && !strcmp(argv[1], "server")) {
		int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		sa.sin_port = htons(atoi(argv[2]));
		if (bind(l, (void *)&sa, sizeof(sa)) || listen(l, 1))
			return 1;
		fd = accept(l, NULL, NULL);
		setup(fd);
		for (;;) {
			xfer(fd, buf, 8, 0);
			xfer(fd, buf, 8, 1);
		}
	}
	if (argc >= 4 && !strcmp(argv[1], "client")) {
		long iters = argc > 4 ? atol(argv[4]) : 100000;
		size_t size = argc > 5 ? atol(argv[5]) : 8;
		struct timespec t0, t1;

		fd = socket(AF_INET, SOCK_STREAM, 0);
		inet_pton(AF_INET, argv[2], &sa.sin_addr);
		sa.sin_port = htons(atoi(argv[3]));
		if (connect(fd, (void *)&sa, sizeof(sa)))
			return 1;
		setup(fd);
		for (long i = 0; i < 1000; i++) {
			xfer(fd, buf, size, 1);
			xfer(fd, buf, size, 0);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long i = 0; i < iters; i++) {
			xfer(fd, buf, size, 1);
			xfer(fd, buf, size, 0);
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("%.0f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 +
				  (t1.tv_nsec - t0.tv_nsec)) / iters / 2);
		return 0;
	}
	fprintf(stderr, "usage: tcp_pingpong server PORT | client HOST PORT "
			"[ITERS] [SIZE]\n");
	return 2;
}
