// SPDX-License-Identifier: MIT
/*
 * Registration at scale (issue 13, item 7), counts only (the timing is
 * scripts/bench-mr.sh's): under RLIMIT_NOFILE 1024, 5,000 MRs of 4 KiB
 * with remote access register and deregister with the process's open fds
 * growing by a handful at most, not with the MRs; 2,000 read-only MRs
 * (REMOTE_READ alone: a sealed memfd each while descriptors allow) all
 * register, holding at most a quarter of the limit; max_mr is at least
 * 2^20 and honoured: that many MRs register, one more fails with ENOMEM,
 * and succeeds once one is deregistered.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define NRW 5000
#define NRO 2000
#define RW                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)

/* Open descriptors, counted without opening one (at the limit, opendir
 * would fail). */
static int nfds(void)
{
	struct rlimit rl;
	int n = 0;

	getrlimit(RLIMIT_NOFILE, &rl);
	for (int fd = 0; fd < (int)rl.rlim_cur; fd++)
		n += fcntl(fd, F_GETFD) != -1;
	return n;
}

/* n MRs of 4 KiB over consecutive pages of a new buffer; fds counted
 * after registering (*grow_p: growth). Returns how many registered. */
static int reg_pages(struct ibv_pd *pd, int n, int access, int *grow_p)
{
	uint8_t *buf = mmap(NULL, (size_t)n * 4096, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr **mr = calloc((size_t)n, sizeof(*mr));
	int fd0 = nfds(), i;

	if (buf == MAP_FAILED || !mr)
		return -1;
	for (i = 0; i < n; i++) {
		buf[(size_t)i * 4096] = (uint8_t)i;
		mr[i] = ibv_reg_mr(pd, buf + (size_t)i * 4096, 4096, access);
		if (!mr[i])
			break;
	}
	*grow_p = nfds() - fd0;
	for (int j = 0; j < i; j++)
		CHECK(!ibv_dereg_mr(mr[j]), "dereg %d", j);
	CHECK(nfds() <= fd0 + 2, "fds after deregistering: %d, were %d", nfds(),
	      fd0);
	CHECK(buf[4096] == 1 && buf[(size_t)(i - 1) * 4096] == (uint8_t)(i - 1),
	      "contents kept");
	free(mr);
	munmap(buf, (size_t)n * 4096);
	return i;
}

/* max MRs (on demand: nothing to map) register, one more does not. */
static void max_mr_honoured(struct ibv_pd *pd, int max)
{
	static uint8_t page[4096] __attribute__((aligned(4096)));
	int acc = IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr **mr = calloc((size_t)max, sizeof(*mr));
	struct ibv_mr *extra;
	int i;

	if (!mr) {
		CHECK(mr, "calloc");
		return;
	}
	for (i = 0; i < max; i++) {
		mr[i] = ibv_reg_mr(pd, page, sizeof(page), acc);
		if (!mr[i])
			break;
	}
	CHECK(i == max, "registered %d of max_mr %d: %s", i, max,
	      strerror(errno));
	errno = 0;
	extra = ibv_reg_mr(pd, page, sizeof(page), acc);
	CHECK(!extra && errno == ENOMEM, "MR past max_mr: %p, %s",
	      (void *)extra, strerror(errno));
	if (i > 0 && !ibv_dereg_mr(mr[i - 1])) {
		mr[i - 1] = ibv_reg_mr(pd, page, sizeof(page), acc);
		CHECK(mr[i - 1], "an MR after one was deregistered");
	}
	if (extra)
		ibv_dereg_mr(extra);
	for (int j = 0; j < i; j++)
		if (mr[j])
			ibv_dereg_mr(mr[j]);
	free(mr);
}

int main(void)
{
	struct rlimit rl = { 1024, 1024 };
	struct ibv_device **devs;
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int grow = 0, n;

	t_role = "mrscale";
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = 1024;
	CHECK(!setrlimit(RLIMIT_NOFILE, &rl), "RLIMIT_NOFILE 1024");
	devs = ibv_get_device_list(NULL);
	REQUIRE(devs && devs[0], "no device");
	ctx = ibv_open_device(devs[0]);
	REQUIRE(ctx && !ibv_query_device(ctx, &da), "open");
	pd = ibv_alloc_pd(ctx);
	REQUIRE(pd, "pd");
	CHECK(da.max_mr >= (1 << 20), "max_mr %d", da.max_mr);
	n = reg_pages(pd, NRW, RW, &grow);
	CHECK(n == NRW && grow <= 4,
	      "%d of %d MRs with remote access, fds grew by %d", n, NRW, grow);
	n = reg_pages(pd, NRO, IBV_ACCESS_REMOTE_READ, &grow);
	CHECK(n == NRO && grow <= 1024 / 4 + 4,
	      "%d of %d read-only MRs, fds grew by %d", n, NRO, grow);
	max_mr_honoured(pd, da.max_mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	return test_summary(t_failures ? 0 : 1, t_failures ? 1 : 0);
}
