// SPDX-License-Identifier: MIT
/*
 * The kernel's limit for connection setup (docs/BENCHMARKS.md, engines):
 * what cmtime measures for rdma_cm, done with plain TCP on loopback.
 *   tcp_connrate N
 * A listener thread accepts N connections while the main thread connects
 * N sockets; then both sides close them. Prints two lines, the
 * microseconds per connection of connect+accept and of the closes:
 *   connect_us_per_conn X
 *   disconnect_us_per_conn Y
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int lfd, n;
static int *afd;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void *acceptor(void *arg)
{
	(void)arg;
	for (int i = 0; i < n; i++)
		afd[i] = accept(lfd, NULL, NULL);
	return NULL;
}

static int listen_any(struct sockaddr_in *sa)
{
	socklen_t len = sizeof(*sa);
	int one = 1;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa->sin_port = 0;
	if (bind(lfd, (struct sockaddr *)sa, sizeof(*sa)) ||
	    listen(lfd, 4096) || getsockname(lfd, (struct sockaddr *)sa, &len))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct rlimit rl = { 65536, 65536 };
	struct sockaddr_in sa;
	pthread_t t;
	double t0, t1, t2;
	int *cfd;

	n = argc > 1 ? atoi(argv[1]) : 1000;
	setrlimit(RLIMIT_NOFILE, &rl);
	cfd = calloc(n, sizeof(int));
	afd = calloc(n, sizeof(int));
	if (n < 1 || !cfd || !afd || listen_any(&sa)) {
		perror("tcp_connrate");
		return 1;
	}
	pthread_create(&t, NULL, acceptor, NULL);
	/* the acceptor waits in accept() before the clock starts: with one
	 * connection, its start-up (its first run on this CPU) was most of
	 * what was measured, up to milliseconds */
	usleep(20000);
	t0 = now_us();
	for (int i = 0; i < n; i++) {
		cfd[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(cfd[i], (struct sockaddr *)&sa, sizeof(sa))) {
			perror("connect");
			return 1;
		}
	}
	pthread_join(t, NULL);
	t1 = now_us();
	for (int i = 0; i < n; i++) {
		close(cfd[i]);
		close(afd[i]);
	}
	t2 = now_us();
	printf("connect_us_per_conn %.2f\n", (t1 - t0) / n);
	printf("disconnect_us_per_conn %.2f\n", (t2 - t1) / n);
	return 0;
}
