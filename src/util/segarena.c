// SPDX-License-Identifier: MIT
/*
 * softrnic — where small QP segments are mapped: slots of reserved
 * address space, given back a chunk at a time.
 *
 * Every connection maps two QP segments in each process (its own and the
 * peer's) and unmaps them when it ends. Unmapping a page that was touched
 * costs a TLB invalidation, which under nested virtualisation (this
 * project's machines) takes tens of microseconds: it was the largest cost
 * of cmtime's disconnects (docs/BENCHMARKS.md, "Connection setup"). The
 * kernel still flushes once per mapping (x86 flushes at every VMA's end,
 * and each segment is a file, so a VMA, of its own), but one call over
 * many of them costs about half as much a page as one munmap each (39
 * against 80 us, 2,048 one-page memfds on this machine).
 *
 * So a QP segment of up to SRN_SEGA_MAX_PAGES is mapped (MAP_FIXED) at the
 * next free page of a chunk, a reserved PROT_NONE range of
 * SRN_SEGA_CHUNK_PAGES. A segment given back stays mapped, unused, until
 * no segment of its chunk is in use; then all are given back with one mmap
 * of PROT_NONE over them: the chunk stays reserved (no other mapping can
 * land in it) and is reused. Connections that come and go one at a time
 * gain nothing; a burst of them (cmtime's 1,000) gives back 256 at once.
 * At most SRN_SEGA_DEAD_MAX pages wait so (a chunk with a live QP keeps
 * its dead neighbours); past that a slot is given back alone, as before.
 * A segment waiting there is no longer used by anyone here; it only keeps
 * its file (the peer's memory) until the chunk goes. Connection setup and
 * teardown only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "util/util.h"

#define SRN_SEGA_PAGE 4096ul
#define SRN_SEGA_CHUNK_PAGES 256u /* 1 MiB of address space */
#define SRN_SEGA_MAX_PAGES 16u /* larger segments: mmap of their own */
#define SRN_SEGA_DEAD_MAX 8192u /* pages mapped but unused, process-wide */

struct srn_sega_chunk {
	char *base;
	unsigned next; /* first page never handed out */
	unsigned live; /* pages of segments in use */
	unsigned dead; /* pages given back, still mapped */
	struct srn_sega_chunk *link;
};

static pthread_mutex_t srn_sega_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_sega_chunk *srn_sega_chunks; /* the current one first */
static unsigned srn_sega_dead;
static pthread_once_t srn_sega_once = PTHREAD_ONCE_INIT;

/* The child has none of the slots (MADV_DONTFORK): it starts afresh and
 * never touches the parent's addresses (the list is leaked there). */
static void srn_sega_atfork_child(void)
{
	pthread_mutex_init(&srn_sega_lock, NULL);
	srn_sega_chunks = NULL;
	srn_sega_dead = 0;
}

static void srn_sega_init(void)
{
	pthread_atfork(NULL, NULL, srn_sega_atfork_child);
}

/* Puts [addr, addr + pages) back to reserved, unmapped address space. */
static int srn_sega_reserve(char *addr, unsigned pages)
{
	void *p = mmap(addr, pages * SRN_SEGA_PAGE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		       -1, 0);

	return p == MAP_FAILED ? -errno : 0;
}

/* Under the lock: a chunk with room for pages, the current one first. */
static struct srn_sega_chunk *srn_sega_room(unsigned pages)
{
	struct srn_sega_chunk *c;
	void *p;

	for (c = srn_sega_chunks; c; c = c->link)
		if (c->next + pages <= SRN_SEGA_CHUNK_PAGES)
			return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	p = mmap(NULL, SRN_SEGA_CHUNK_PAGES * SRN_SEGA_PAGE, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(c);
		return NULL;
	}
	c->base = p;
	c->link = srn_sega_chunks;
	srn_sega_chunks = c;
	return c;
}

/*
 * Maps size bytes of fd (prot, flags: MAP_SHARED and what the caller
 * adds) in a chunk: the address, or
 * NULL when the segment is not for a chunk or none has room (the caller
 * maps it itself); MAP_FAILED with errno when the mapping failed.
 */
void *srn_sega_map(size_t size, int prot, int fd, int flags)
{
	unsigned pages = (unsigned)((size + SRN_SEGA_PAGE - 1) / SRN_SEGA_PAGE);
	struct srn_sega_chunk *c;
	void *p = NULL;

	if (!size || size > SRN_SEGA_MAX_PAGES * SRN_SEGA_PAGE ||
	    size % SRN_SEGA_PAGE)
		return NULL;
	pthread_once(&srn_sega_once, srn_sega_init);
	pthread_mutex_lock(&srn_sega_lock);
	c = srn_sega_room(pages);
	if (c) {
		p = mmap(c->base + c->next * SRN_SEGA_PAGE, size, prot,
			 flags | MAP_FIXED, fd, 0);
		if (p != MAP_FAILED) {
			c->next += pages;
			c->live += pages;
		}
	}
	pthread_mutex_unlock(&srn_sega_lock);
	return p;
}

/* Under the lock: the chunk holding addr, or NULL. */
static struct srn_sega_chunk *srn_sega_find(const char *addr)
{
	struct srn_sega_chunk *c;

	for (c = srn_sega_chunks; c; c = c->link)
		if (addr >= c->base &&
		    addr < c->base + SRN_SEGA_CHUNK_PAGES * SRN_SEGA_PAGE)
			return c;
	return NULL;
}

/* Under the lock: chunk c has no live segment: what it handed out is given
 * back at once (nothing of softrnic stays mapped once its objects are
 * gone: func_fault_kill), and it is reused from 0. */
static void srn_sega_maybe_flush(struct srn_sega_chunk *c)
{
	if (c->live || !c->next)
		return;
	if (srn_sega_reserve(c->base, c->next))
		return; /* left as it is: tried again at the next release */
	srn_sega_dead -= c->dead;
	c->dead = 0;
	c->next = 0;
}

/*
 * Gives back a segment srn_sega_map mapped: true, or false when addr is
 * not in a chunk (the caller unmaps it).
 */
bool srn_sega_unmap(void *addr, size_t size)
{
	unsigned pages = (unsigned)((size + SRN_SEGA_PAGE - 1) / SRN_SEGA_PAGE);
	struct srn_sega_chunk *c;
	bool alone;

	pthread_mutex_lock(&srn_sega_lock);
	c = srn_sega_find(addr);
	if (c) {
		c->live -= pages;
		alone = srn_sega_dead + pages > SRN_SEGA_DEAD_MAX;
		if (alone && srn_sega_reserve(addr, pages))
			alone = false; /* kept mapped: counted as dead */
		if (!alone) {
			c->dead += pages;
			srn_sega_dead += pages;
		}
		srn_sega_maybe_flush(c);
	}
	pthread_mutex_unlock(&srn_sega_lock);
	return c != NULL;
}
