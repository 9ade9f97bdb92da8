// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: rsockets, threads asleep on one rsocket.
 *
 * Several threads may wait on one rsocket (one sends, one receives). The
 * one that takes the completions changes what the others wait for, and
 * their poll() would not see it (the channel's event is taken): so each
 * sleeping thread puts its own wake eventfd on the rsocket's list
 * (srn_rs_sleep_add, under rs->lock, before it drops the lock to sleep),
 * and srn_rs_progress writes to every fd listed once it has taken
 * anything (srn_rs_wake_sleepers, under rs->lock). A thread awake again
 * takes itself off every list, then empties its eventfd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdmacm/rs.h"
#include "util/util.h"

static pthread_key_t srn_rs_wake_key;
static pthread_once_t srn_rs_wake_once = PTHREAD_ONCE_INIT;
static __thread int srn_rs_my_wake = -1;

static void srn_rs_wake_close(void *fd)
{
	close((int)(intptr_t)fd - 1);
}

static void srn_rs_wake_key_init(void)
{
	pthread_key_create(&srn_rs_wake_key, srn_rs_wake_close);
}

/* This thread's wake eventfd (closed when the thread ends), or -1. */
static int srn_rs_my_wake_fd(void)
{
	if (srn_rs_my_wake >= 0)
		return srn_rs_my_wake;
	pthread_once(&srn_rs_wake_once, srn_rs_wake_key_init);
	srn_rs_my_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srn_rs_my_wake >= 0)
		pthread_setspecific(srn_rs_wake_key,
				    (void *)(intptr_t)(srn_rs_my_wake + 1));
	return srn_rs_my_wake;
}

/* rs->lock held: this thread sleeps on rs; *p gets its wake fd. 1, or 0
 * when it has none (then it is not woken by other threads' progress). */
int srn_rs_sleep_add(struct srn_rs *rs, struct pollfd *p)
{
	int fd = srn_rs_my_wake_fd();

	if (fd < 0)
		return 0;
	if (rs->nsleepers == rs->sleepers_cap) {
		uint32_t cap = rs->sleepers_cap ? 2 * rs->sleepers_cap : 4;
		int *t = realloc(rs->sleepers, cap * sizeof(*t));

		if (!t)
			return 0;
		rs->sleepers = t;
		rs->sleepers_cap = cap;
	}
	rs->sleepers[rs->nsleepers++] = fd;
	*p = (struct pollfd){ .fd = fd, .events = POLLIN };
	return 1;
}

/* rs->lock held: this thread is awake again (woken or not). */
void srn_rs_sleep_del(struct srn_rs *rs)
{
	uint32_t i;

	for (i = 0; i < rs->nsleepers; i++)
		if (rs->sleepers[i] == srn_rs_my_wake)
			rs->sleepers[i--] = rs->sleepers[--rs->nsleepers];
}

/* Once off every rsocket's list: a wake-up written since is spent. */
void srn_rs_sleep_done(void)
{
	uint64_t v;

	if (srn_rs_my_wake >= 0 && read(srn_rs_my_wake, &v, sizeof(v)) < 0 &&
	    errno != EAGAIN)
		srn_warn("rsockets: wake eventfd: %s", strerror(errno));
}

/* rs->lock held, after srn_rs_progress took something: every thread
 * asleep on rs looks again. */
void srn_rs_wake_sleepers(struct srn_rs *rs)
{
	uint64_t one = 1;
	uint32_t i;

	for (i = 0; i < rs->nsleepers; i++)
		if (write(rs->sleepers[i], &one, sizeof(one)) < 0 &&
		    errno != EAGAIN)
			srn_warn("rsockets: wake eventfd: %s", strerror(errno));
	rs->nsleepers = 0;
}
