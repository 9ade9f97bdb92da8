// SPDX-License-Identifier: MIT
/*
 * softrnic — unpredictable numbers: keys, QPNs, PSNs, SRQ numbers.
 *
 * Drawn from the kernel's CSPRNG 64 words at a time per thread, so that a
 * connection's QPN, PSN and keys cost no system call each (cmtime's 1,000
 * connections made three getrandom calls apiece). No number says anything
 * of another (the state of a linear generator such as xorshift follows
 * from a few of its outputs, and with it every later number: the ReDMArk
 * attacks predicted QPNs and PSNs). A child of fork draws afresh, so it
 * never repeats its parent's numbers. Without getrandom (it does not fail
 * on Linux >= 3.17 for 256 bytes) the clock and a counter stand in, with
 * a warning.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#include "util/util.h"

#define SRN_RANDOM_POOL 64

static unsigned srn_random_forks; /* children of fork: this one's number */
static pthread_once_t srn_random_once = PTHREAD_ONCE_INIT;

static void srn_random_atfork_child(void)
{
	/* relaxed: the child has one thread when this runs */
	__atomic_add_fetch(&srn_random_forks, 1, __ATOMIC_RELAXED);
}

static void srn_random_init(void)
{
	pthread_atfork(NULL, NULL, srn_random_atfork_child);
}

/* Fills buf from the kernel's CSPRNG; 0 or -errno. */
static int srn_random_fill(void *buf, size_t len)
{
	ssize_t n;

	do
		n = getrandom(buf, len, 0);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

uint32_t srn_random_u32(void)
{
	static __thread uint32_t pool[SRN_RANDOM_POOL];
	static __thread unsigned left, seq, gen;
	unsigned forks;

	pthread_once(&srn_random_once, srn_random_init);
	/* relaxed: written only in a child of fork, before any other thread */
	forks = __atomic_load_n(&srn_random_forks, __ATOMIC_RELAXED);
	if (!left || gen != forks) {
		int err = srn_random_fill(pool, sizeof(pool));

		if (err) {
			srn_warn("getrandom: %s: keys and QPNs are predictable",
				 strerror(-err));
			for (unsigned i = 0; i < SRN_RANDOM_POOL; i++)
				pool[i] =
					(uint32_t)(srn_now_ns() * 2654435761u) ^
					++seq;
		}
		left = SRN_RANDOM_POOL;
		gen = forks;
	}
	return pool[--left];
}
