// SPDX-License-Identifier: MIT
/*
 * The machine's own limits, for BENCHMARKS.md:
 *   linebench line [rounds]     one-way latency of a cache line bouncing
 *                               between two processes pinned to cores 0, 1
 *   linebench memcpy SIZE [MiB] single-thread memcpy bandwidth (MB/s) of
 *                               a SIZE-byte buffer, warm
 * Prints one number: ns for line, MB/s (10^6) for memcpy.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static int line(long rounds)
{
	volatile uint64_t *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	double t0, t1;
	pid_t pid;

	if (l == MAP_FAILED)
		return 1;
	*l = 0;
	pid = fork();
	if (pid == 0) {
		pin(1);
		for (uint64_t i = 1; i <= (uint64_t)rounds * 2; i += 2) {
			while (__atomic_load_n(l, __ATOMIC_ACQUIRE) != i)
				;
			__atomic_store_n(l, i + 1, __ATOMIC_RELEASE);
		}
		_exit(0);
	}
	pin(0);
	usleep(10000);
	t0 = now();
	for (uint64_t i = 0; i < (uint64_t)rounds * 2; i += 2) {
		__atomic_store_n(l, i + 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(l, __ATOMIC_ACQUIRE) != i + 2)
			;
	}
	t1 = now();
	waitpid(pid, NULL, 0);
	printf("%.1f\n", (t1 - t0) / (rounds * 2.0) * 1e9);
	return 0;
}

static int copy(size_t size, size_t total_mib)
{
	char *a = aligned_alloc(4096, size), *b = aligned_alloc(4096, size);
	size_t iters = (total_mib << 20) / size;
	double t0;

	pin(0);
	memset(a, 1, size);
	memset(b, 2, size);
	for (int i = 0; i < 10; i++)
		memcpy(b, a, size);
	t0 = now();
	for (size_t i = 0; i < iters; i++) {
		memcpy(i & 1 ? a : b, i & 1 ? b : a, size);
		__asm__ volatile("" ::: "memory");
	}
	printf("%.0f\n", (double)iters * size / (now() - t0) / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "line"))
		return line(argc > 2 ? atol(argv[2]) : 1000000);
	if (argc >= 3 && !strcmp(argv[1], "memcpy"))
		return copy(strtoul(argv[2], NULL, 0),
			    argc > 3 ? strtoul(argv[3], NULL, 0) : 4096);
	fprintf(stderr, "usage: linebench line [rounds] | memcpy SIZE [MiB]\n");
	return 2;
}
