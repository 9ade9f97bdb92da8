// SPDX-License-Identifier: MIT
/*
 * softrnic — descriptors received from peers that may be one open file.
 *
 * Every control connection brings the peer process's progress kick
 * eventfd again (SCM_RIGHTS makes a new descriptor each time), so a
 * process with thousands of connected QPs would hold thousands of
 * descriptors of a few eventfds. srn_fdshare_get keeps one: when the
 * kernel says (kcmp KCMP_FILE) that a new descriptor is the same open
 * file as the one last kept for that peer, the new one is closed and the
 * kept one counted again. The key (the peer's pid) only picks the
 * candidate: a wrong key finds nothing to share, and nothing is shared
 * that the kernel does not call the same file. Connection setup and
 * teardown only; the data path just uses the descriptor.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/kcmp.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

#define SRN_FDSHARE_HINTS 256
#define SRN_FDSHARE_WAYS 4 /* keys whose hints share a slot's bucket */

struct srn_fdshare_hint {
	int32_t key;
	int fd; /* -1: none */
};

static pthread_mutex_t srn_fdshare_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *srn_fdshare_refs; /* by descriptor number */
static size_t srn_fdshare_nrefs;
static struct srn_fdshare_hint srn_fdshare_hint[SRN_FDSHARE_HINTS]
					       [SRN_FDSHARE_WAYS];
static bool srn_fdshare_ready;

/* Under the lock: are a and b the same open file? */
static bool srn_fdshare_same(int a, int b)
{
	return syscall(SYS_kcmp, srn_pid, srn_pid, KCMP_FILE, a, b) == 0;
}

/* Under the lock: room for descriptor fd in the table. */
static int srn_fdshare_grow(int fd)
{
	size_t n = srn_fdshare_nrefs ? srn_fdshare_nrefs : 64;
	uint32_t *r;

	if ((size_t)fd < srn_fdshare_nrefs)
		return 0;
	while (n <= (size_t)fd)
		n *= 2;
	r = realloc(srn_fdshare_refs, n * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (size_t i = srn_fdshare_nrefs; i < n; i++)
		r[i] = 0;
	srn_fdshare_refs = r;
	srn_fdshare_nrefs = n;
	return 0;
}

/*
 * Under the lock: the hint for key, or the way of its bucket to put it in
 * (a free one, else the first). Keys of one bucket each keep a way: with
 * one hint per slot, two keys of a slot (a peer's kick eventfd and one of
 * its CQ segments) replaced each other at every connection, and each
 * connection then kept a descriptor and mapped a CQ of its own.
 */
static struct srn_fdshare_hint *srn_fdshare_hint_of(int32_t key)
{
	struct srn_fdshare_hint *b, *h = NULL;

	if (!srn_fdshare_ready) {
		for (int i = 0; i < SRN_FDSHARE_HINTS; i++)
			for (int w = 0; w < SRN_FDSHARE_WAYS; w++)
				srn_fdshare_hint[i][w].fd = -1;
		srn_fdshare_ready = true;
	}
	b = srn_fdshare_hint[(uint32_t)key % SRN_FDSHARE_HINTS];
	for (int w = 0; w < SRN_FDSHARE_WAYS; w++) {
		if (b[w].fd >= 0 && b[w].key == key)
			return &b[w];
		if (b[w].fd < 0 && !h)
			h = &b[w];
	}
	return h ? h : &b[0];
}

/*
 * Takes fd (received from the peer known by key): returns the descriptor
 * to use and to give back with srn_fdshare_put, fd itself or one already
 * kept for the same file (fd is then closed).
 */
int srn_fdshare_get(int fd, int32_t key)
{
	struct srn_fdshare_hint *h;
	int keep = fd;

	if (fd < 0)
		return fd;
	pthread_mutex_lock(&srn_fdshare_lock);
	h = srn_fdshare_hint_of(key);
	if (h->fd >= 0 && h->key == key && h->fd != fd &&
	    srn_fdshare_same(h->fd, fd)) {
		keep = h->fd;
		srn_fdshare_refs[keep]++;
	} else if (srn_fdshare_grow(fd)) {
		keep = -1; /* unshared: srn_fdshare_put closes it */
	} else {
		srn_fdshare_refs[fd] = 1;
		h->key = key;
		h->fd = fd;
	}
	pthread_mutex_unlock(&srn_fdshare_lock);
	if (keep != fd && keep >= 0)
		close(fd);
	return keep < 0 ? fd : keep;
}

/* Gives back a descriptor srn_fdshare_get returned; the last closes it. */
void srn_fdshare_put(int fd)
{
	bool last = true;

	if (fd < 0)
		return;
	pthread_mutex_lock(&srn_fdshare_lock);
	if ((size_t)fd < srn_fdshare_nrefs && srn_fdshare_refs[fd]) {
		last = --srn_fdshare_refs[fd] == 0;
		for (int i = 0; last && i < SRN_FDSHARE_HINTS; i++)
			for (int w = 0; w < SRN_FDSHARE_WAYS; w++)
				if (srn_fdshare_hint[i][w].fd == fd)
					srn_fdshare_hint[i][w].fd = -1;
	}
	if (last)
		close(fd); /* under the lock: the number is not reused before */
	pthread_mutex_unlock(&srn_fdshare_lock);
}
