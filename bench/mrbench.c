// SPDX-License-Identifier: MIT
/*
 * Registration at scale (docs/BENCHMARKS.md, "Registration"): N MRs of
 * 4 KiB each, consecutive pages of one buffer, registered with the given
 * access, then deregistered; prints the time of each phase, the MRs per
 * second and the open fds before, after registering and after
 * deregistering.
 *   mrbench [N] [access] [touch]   (default 100000, LOCAL_WRITE|
 *           REMOTE_WRITE|REMOTE_READ; access as a number; touch: the
 *           buffer is written before, as an application fills its
 *           buffers, not only populated)
 * Run it as `prlimit --nofile=1024 mrbench` for issue 13's item 7.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU time of the process, user + system: what a phase costs whatever
 * else the machine runs (the wall time also counts waiting for a CPU) */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static int nfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n - 3; /* ., .. and the directory's own fd */
}

static int nmaps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	int n = 0, ch;

	while (f && (ch = fgetc(f)) != EOF)
		n += ch == '\n';
	if (f)
		fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	int access = argc > 2 ?
			     (int)strtol(argv[2], NULL, 0) :
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ;
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	struct ibv_mr **mr;
	struct ibv_pd *pd;
	double t0, t1, t2, c0, c1, c2;
	int fd0, fd1, maps0, maps1;
	uint8_t *buf;
	long i;

	if (!devs || !devs[0] || !(ctx = ibv_open_device(devs[0])) ||
	    !(pd = ibv_alloc_pd(ctx)) || ibv_query_device(ctx, &da)) {
		fprintf(stderr, "mrbench: no device\n");
		return 1;
	}
	buf = mmap(NULL, (size_t)n * 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	mr = calloc((size_t)n, sizeof(*mr));
	if (buf == MAP_FAILED || !mr)
		return 1;
	if (argc > 3 && !strcmp(argv[3], "touch"))
		memset(buf, 0x5a, (size_t)n * 4096);
	fd0 = nfds();
	maps0 = nmaps();
	c0 = cpu_s();
	t0 = now_s();
	for (i = 0; i < n; i++) {
		mr[i] = ibv_reg_mr(pd, buf + i * 4096, 4096, access);
		if (!mr[i]) {
			fprintf(stderr, "mrbench: MR %ld: %s\n", i,
				strerror(errno));
			break;
		}
	}
	t1 = now_s();
	c1 = cpu_s();
	fd1 = nfds();
	maps1 = nmaps();
	for (long j = 0; j < i; j++)
		ibv_dereg_mr(mr[j]);
	t2 = now_s();
	c2 = cpu_s();
	printf("max_mr %d access 0x%x MRs %ld/%ld reg %.3f s (%.0f/s) "
	       "dereg %.3f s (%.0f/s) cpu_reg %.3f s cpu_dereg %.3f s "
	       "fds %d -> %d -> %d mappings %d -> %d\n",
	       da.max_mr, access, i, n, t1 - t0, (double)i / (t1 - t0), t2 - t1,
	       (double)i / (t2 - t1), c1 - c0, c2 - c1, fd0, fd1, nfds(), maps0,
	       maps1);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	return i == n ? 0 : 2;
}
