// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: rsockets, waiting (docs/rsockets.md). A caller
 * that must wait blocks in the kernel, in poll(), on the fds that change
 * an rsocket: its rdma_cm event channel and its CQ's completion channel
 * (armed first). Nothing spins and no library thread is involved: rpoll
 * and rselect wait the same way, with the application's real fds in the
 * same poll().
 *
 * Threads asleep on one rsocket wake each other: cm_rsocket_wake.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "rdmacm/rs.h"
#include "util/srn_compiler.h"
#include "util/util.h"

static int64_t srn_rs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int srn_rs_left(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - srn_rs_now_ms();
	return left > 0 ? (int)left : 0;
}

/*
 * Arms rs's CQ and, unless something arrived meanwhile (then it returns
 * at once), fills p[] (3 entries) with the fds to wait on and puts this
 * thread on rs's sleepers (srn_rs_sleep_del takes it off): how many.
 */
static int srn_rs_wait_fds(struct srn_rs *rs, struct pollfd *p, bool *ready_p)
{
	int n = 0;

	*ready_p = false;
	do {
		srn_rs_arm(rs);
		if (srn_rs_progress(rs) > 0) {
			*ready_p = true;
			return 0;
		}
	} while (rs->cq && !rs->armed);
	p[n++] = (struct pollfd){ .fd = rs->ch->fd, .events = POLLIN };
	if (rs->cch)
		p[n++] = (struct pollfd){ .fd = rs->cch->fd, .events = POLLIN };
	return n + srn_rs_sleep_add(rs, &p[n]);
}

/* Sleeps (rs->lock dropped) until something may have changed for rs or
 * timeout_ms passed (-1: no limit). Callers look again after it. */
int srn_rs_block(struct srn_rs *rs, int timeout_ms)
{
	struct pollfd p[3];
	bool ready;
	int n = srn_rs_wait_fds(rs, p, &ready);

	if (ready)
		return 0;
	pthread_mutex_unlock(&rs->lock);
	n = poll(p, n, timeout_ms) < 0 ? -errno : 0;
	pthread_mutex_lock(&rs->lock);
	srn_rs_sleep_del(rs);
	srn_rs_sleep_done();
	return n;
}

/* Until one of events (or POLLERR/POLLHUP) holds for rs: 0, or
 * -ETIMEDOUT, -EINTR. */
int srn_rs_wait(struct srn_rs *rs, short events, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? -1 : srn_rs_now_ms() + timeout_ms;
	int ret;

	for (;;) {
		srn_rs_progress(rs);
		if (srn_rs_revents(rs) & (events | POLLERR | POLLHUP))
			return 0;
		if (deadline >= 0 && srn_rs_left(deadline) == 0)
			return -ETIMEDOUT;
		ret = srn_rs_block(rs, srn_rs_left(deadline));
		if (ret)
			return ret;
	}
}

/* Pass 1: the rsockets' events now; real fds are left to the kernel. */
static int srn_rs_poll_scan(struct pollfd *fds, nfds_t nfds)
{
	int ready = 0;
	nfds_t i;

	for (i = 0; i < nfds; i++) {
		struct srn_rs *rs = fds[i].fd >= 0 ? srn_rs_get(fds[i].fd) :
						     NULL;

		fds[i].revents = 0;
		if (!rs)
			continue;
		pthread_mutex_lock(&rs->lock);
		srn_rs_progress(rs);
		fds[i].revents = srn_rs_revents(rs) &
				 (fds[i].events | POLLERR | POLLHUP);
		pthread_mutex_unlock(&rs->lock);
		ready += fds[i].revents != 0;
	}
	return ready;
}

/* Pass 2: the kernel's set: the real fds and, unless one is ready
 * already (*ready_p), the rsockets' fds, armed (map[] says nfds + i for
 * rsocket i's); an rsocket that is ready by then (its own progress while
 * armed, or another thread's since pass 1) counts in *ready_p, and the
 * poll does not wait. One that made progress without turning ready (a send
 * completion, credits) adds no fd: the CQ was not left armed, so its
 * channel would not wake us; *again_p then asks the caller to look again
 * at once. Returns the set's size. */
static nfds_t srn_rs_poll_build(struct pollfd *fds, nfds_t nfds,
				struct pollfd *k, nfds_t *map, int *ready_p,
				bool *again_p)
{
	nfds_t i, n = 0;

	for (i = 0; i < nfds; i++) {
		struct srn_rs *rs = fds[i].fd >= 0 ? srn_rs_get(fds[i].fd) :
						     NULL;
		bool ready = false;
		int c;

		if (!rs) {
			map[n] = i;
			k[n++] = fds[i];
			continue;
		}
		if (*ready_p || *again_p)
			continue;
		pthread_mutex_lock(&rs->lock);
		c = srn_rs_wait_fds(rs, &k[n], &ready);
		/* not only after our own progress: another thread may have
		 * taken what we wait for since pass 1 dropped the lock */
		fds[i].revents = srn_rs_revents(rs) &
				 (fds[i].events | POLLERR | POLLHUP);
		*ready_p += fds[i].revents != 0;
		*again_p |= ready && !fds[i].revents;
		pthread_mutex_unlock(&rs->lock);
		while (c--)
			map[n++] = nfds + i;
	}
	return n;
}

/* After the kernel's poll: off the sleepers of every rsocket of the set,
 * and the real fds' events back into fds[]. */
static void srn_rs_poll_after(struct pollfd *fds, nfds_t nfds,
			      const struct pollfd *k, const nfds_t *map,
			      nfds_t n)
{
	nfds_t i;

	for (i = 0; i < n; i++) {
		struct srn_rs *rs;

		if (map[i] < nfds) {
			fds[map[i]].revents = k[i].revents;
			continue;
		}
		if (i && map[i] == map[i - 1])
			continue; /* this rsocket's next fd */
		rs = srn_rs_get(fds[map[i] - nfds].fd);
		if (!rs)
			continue;
		pthread_mutex_lock(&rs->lock);
		srn_rs_sleep_del(rs);
		pthread_mutex_unlock(&rs->lock);
	}
	srn_rs_sleep_done();
}

SRN_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	int64_t deadline = timeout < 0 ? -1 : srn_rs_now_ms() + timeout;
	struct pollfd *k = calloc(3 * nfds + 1, sizeof(*k));
	nfds_t *map = calloc(3 * nfds + 1, sizeof(*map));
	int ready, ret, err;
	nfds_t n, i;

	if (!k || !map) {
		free(k);
		free(map);
		return srn_rs_fail(-ENOMEM);
	}
	for (;;) {
		bool again = false;

		ready = srn_rs_poll_scan(fds, nfds);
		n = srn_rs_poll_build(fds, nfds, k, map, &ready, &again);
		ret = poll(k, n, ready || again ? 0 : srn_rs_left(deadline));
		err = errno;
		srn_rs_poll_after(fds, nfds, k, map, n);
		if (ret < 0) {
			errno = err;
			break;
		}
		for (ret = 0, i = 0; i < nfds; i++)
			ret += fds[i].revents != 0;
		/* none: an rsocket's fd woke us (look again), or time is up */
		if (ret || srn_rs_left(deadline) == 0)
			break;
	}
	free(k);
	free(map);
	return ret;
}

static int srn_rs_sel_fill(int nfds, fd_set *r, fd_set *w, fd_set *e,
			   struct pollfd *p)
{
	int fd, n = 0;

	for (fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	return n;
}

static int srn_rs_sel_set(fd_set *set, int fd, bool on)
{
	if (!set)
		return 0;
	if (!on) {
		FD_CLR(fd, set);
		return 0;
	}
	FD_SET(fd, set);
	return 1;
}

SRN_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		       fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *p;
	int n, i, ret, tmo = -1;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return srn_rs_fail(-EINVAL);
	p = calloc(nfds + 1, sizeof(*p));
	if (!p)
		return srn_rs_fail(-ENOMEM);
	if (timeout)
		tmo = timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000;
	n = srn_rs_sel_fill(nfds, readfds, writefds, exceptfds, p);
	ret = rpoll(p, n, tmo);
	if (ret < 0) {
		free(p);
		return ret;
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	for (ret = 0, i = 0; i < n; i++) {
		short rev = p[i].revents;

		ret += srn_rs_sel_set(readfds, p[i].fd,
				      (p[i].events & POLLIN) &&
					      (rev &
					       (POLLIN | POLLHUP | POLLERR)));
		ret += srn_rs_sel_set(writefds, p[i].fd,
				      (p[i].events & POLLOUT) &&
					      (rev & (POLLOUT | POLLERR)));
		ret += srn_rs_sel_set(exceptfds, p[i].fd,
				      (p[i].events & POLLPRI) &&
					      (rev & POLLPRI));
	}
	free(p);
	return ret;
}
