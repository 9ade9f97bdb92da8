// SPDX-License-Identifier: MIT
/*
 * Keys are unpredictable (issue 13, item 2): knowing some of a process's
 * rkeys gives no other. An MR's key is its TPT index under a random tag
 * (bits 21..30), a memory window's a random tag (bits 22..30) over its
 * index and a random low byte. Checks:
 *  - each tag bit, read over consecutive MRs (and windows), is not a short
 *    linear recurrence: its linear complexity (Berlekamp-Massey over
 *    GF(2)) over 256 keys stays near 128, as for random bits, where any
 *    linear generator of a small state (xorshift, an LFSR) stays at or
 *    below its state's size (64);
 *  - a child of fork draws other tags than its parent after the fork
 *    (its thread's state of the generator is a copy of the parent's).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WIN 256 /* keys per window */
#define NWIN 2
#define NKEYS (WIN * NWIN)
#define LC_MIN 100 /* random: ~128; P(< 100) ~ 2^-56 */
#define NFORK 64

/* The linear complexity of the n bits s[0..n-1] (Berlekamp-Massey). */
static int linear_complexity(const uint8_t *s, int n)
{
	uint8_t b[NKEYS] = { 1 }, c[NKEYS] = { 1 }, t[NKEYS];
	int l = 0, m = -1;

	for (int i = 0; i < n; i++) {
		uint8_t d = s[i];

		for (int j = 1; j <= l; j++)
			d ^= c[j] & s[i - j];
		if (!d)
			continue;
		memcpy(t, c, sizeof(t));
		for (int j = 0; j + i - m < n; j++)
			c[j + i - m] ^= b[j];
		if (2 * l <= i) {
			l = i + 1 - l;
			m = i;
			memcpy(b, t, sizeof(b));
		}
	}
	return l;
}

/* Bits lo..lo+nbits-1 of keys[], each checked window by window. */
static void check_bits(const char *what, const uint32_t *keys, int lo,
		       int nbits)
{
	uint8_t s[WIN];

	for (int bit = lo; bit < lo + nbits; bit++) {
		for (int w = 0; w < NWIN; w++) {
			for (int i = 0; i < WIN; i++)
				s[i] = (keys[w * WIN + i] >> bit) & 1;
			int lc = linear_complexity(s, WIN);

			CHECK(lc >= LC_MIN,
			      "%s key bit %d, keys %d..%d: linear complexity "
			      "%d of %d (a linear generator's output)",
			      what, bit, w * WIN, w * WIN + WIN - 1, lc, WIN);
		}
	}
}

static void mr_keys(struct ibv_pd *pd, void *buf)
{
	static struct ibv_mr *mr[NKEYS];
	static uint32_t key[NKEYS];
	int i;

	for (i = 0; i < NKEYS; i++) {
		mr[i] = ibv_reg_mr(pd, buf, 4096,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE);
		if (!mr[i])
			break;
		key[i] = mr[i]->rkey;
	}
	CHECK(i == NKEYS, "registered %d of %d MRs", i, NKEYS);
	if (i == NKEYS)
		check_bits("MR", key, 21, 10);
	while (i-- > 0)
		ibv_dereg_mr(mr[i]);
}

static void mw_keys(struct ibv_pd *pd)
{
	static struct ibv_mw *mw[NKEYS];
	static uint32_t key[NKEYS];
	int i;

	for (i = 0; i < NKEYS; i++) {
		mw[i] = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		if (!mw[i])
			break;
		key[i] = mw[i]->rkey;
	}
	CHECK(i == NKEYS, "allocated %d of %d windows", i, NKEYS);
	if (i == NKEYS) {
		check_bits("MW", key, 22, 9);
		check_bits("MW", key, 0, 8);
	}
	while (i-- > 0)
		ibv_dealloc_mw(mw[i]);
}

/* NFORK MR keys' tags into tag[] (0 on failure). */
static void tags_after(struct ibv_pd *pd, void *buf, uint32_t *tag)
{
	for (int i = 0; i < NFORK; i++) {
		struct ibv_mr *mr =
			ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);

		tag[i] = mr ? mr->lkey >> 21 : 0;
		if (mr)
			ibv_dereg_mr(mr);
	}
}

/* The child of fork: NFORK tags from a context of its own, to fd. */
static void child_tags(int fd)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx = devs && devs[0] ? ibv_open_device(devs[0]) :
						    NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	uint32_t tag[NFORK];
	void *buf;

	if (!pd || posix_memalign(&buf, 4096, 4096))
		_exit(2);
	tags_after(pd, buf, tag);
	_exit(write(fd, tag, sizeof(tag)) != sizeof(tag));
}

/* After fork, the parent and its child (in a context of its own) each
 * register NFORK MRs: their tags must differ. */
static void fork_keys(struct ibv_pd *pd, void *buf)
{
	uint32_t mine[NFORK], theirs[NFORK];
	int p[2], same = 0, st;
	pid_t pid;

	/* the parent's thread has drawn tags before the fork */
	ibv_dereg_mr(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE));
	if (pipe(p) || (pid = fork()) < 0) {
		CHECK(0, "pipe or fork");
		return;
	}
	if (!pid)
		child_tags(p[1]);
	tags_after(pd, buf, mine);
	CHECK(read(p[0], theirs, sizeof(theirs)) == sizeof(theirs),
	      "child's tags");
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st),
	      "child");
	for (int i = 0; i < NFORK; i++) {
		CHECK(mine[i] && theirs[i], "MR %d after fork", i);
		same += mine[i] == theirs[i];
	}
	/* 64 draws of 10 bits: a few equal by chance, not most */
	CHECK(same < NFORK / 4, "%d of %d tags equal in parent and child", same,
	      NFORK);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	void *buf;

	t_role = "keys";
	devs = ibv_get_device_list(NULL);
	REQUIRE(devs && devs[0], "no device");
	ctx = ibv_open_device(devs[0]);
	REQUIRE(ctx, "open");
	pd = ibv_alloc_pd(ctx);
	REQUIRE(pd && !posix_memalign(&buf, 4096, 4096), "pd");
	mr_keys(pd, buf);
	mw_keys(pd);
	fork_keys(pd, buf);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	free(buf);
	return test_summary(t_failures ? 0 : 1, t_failures ? 1 : 0);
}
