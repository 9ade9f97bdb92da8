// SPDX-License-Identifier: MIT
/*
 * softrnic — a peer's segments that many connections share (its context's
 * key table, a CQ or SRQ that many of its QPs use), mapped once per
 * process: a mapping per connection otherwise. With 1,024 QPs that send
 * to QPs of one receive CQ, that CQ's ring was mapped 1,024 times: every
 * connection faulted in its own page table entries for the same pages, and
 * each CQE posted through another QP's mapping missed the TLB.
 *
 * A mapping is found by the descriptor util/fdshare.c keeps for the open
 * file (the kernel says two descriptors are the same file), and counted by
 * the peers using it. The key only picks fdshare's candidate: a wrong one
 * shares nothing. Connection setup and teardown only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/shm/shm.h"

struct srn_shm_smap {
	int fd; /* from srn_fdshare_get: the file's identity here */
	enum srn_seg_kind kind;
	int prot;
	struct srn_seg seg;
	unsigned refs;
	struct srn_shm_smap *next;
};

static pthread_mutex_t srn_shm_smap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_shm_smap *srn_shm_smaps;

/* fdshare's key for a segment of process pid: one per file where fstat
 * tells them apart (an own hint slot for each CQ of the peer). */
static int32_t srn_shm_smap_key(int fd, pid_t pid, enum srn_seg_kind kind)
{
	struct stat st;
	uint32_t ino = fstat(fd, &st) ? 0 : (uint32_t)st.st_ino;

	return (int32_t)((uint32_t)pid ^ (0x5a5a5a5au + (uint32_t)kind) ^
			 ino * 0x9e3779b9u);
}

/* Under the lock: the mapping of the file fd (fdshare's), or a new one. */
static struct srn_shm_smap *srn_shm_smap_find(int fd, enum srn_seg_kind kind,
					      size_t min_size, int prot,
					      bool *found_p, int *err)
{
	struct srn_shm_smap *m;

	*found_p = true;
	for (m = srn_shm_smaps; m; m = m->next)
		if (m->fd == fd && m->kind == kind && m->prot == prot)
			return m;
	*found_p = false;
	m = calloc(1, sizeof(*m));
	*err = m ? srn_seg_map(&m->seg, fd, kind, min_size, prot) : -ENOMEM;
	if (*err) {
		free(m);
		return NULL;
	}
	m->fd = fd;
	m->kind = kind;
	m->prot = prot;
	m->seg.fd = -1; /* fdshare's */
	m->next = srn_shm_smaps;
	srn_shm_smaps = m;
	return m;
}

/*
 * Maps segment fd (consumed) of process pid into *seg_p: the mapping this
 * process already has of that file, or a new one. *map_p is given back
 * with srn_shm_smap_put. The segment's descriptor is not the caller's.
 */
int srn_shm_smap_get(struct srn_shm_smap **map_p, struct srn_seg *seg_p, int fd,
		     pid_t pid, enum srn_seg_kind kind, size_t min_size,
		     int prot)
{
	struct srn_shm_smap *m;
	bool found;
	int err = 0;

	fd = srn_fdshare_get(fd, srn_shm_smap_key(fd, pid, kind));
	pthread_mutex_lock(&srn_shm_smap_lock);
	m = srn_shm_smap_find(fd, kind, min_size, prot, &found, &err);
	if (m) {
		m->refs++;
		*map_p = m;
		*seg_p = m->seg;
	}
	pthread_mutex_unlock(&srn_shm_smap_lock);
	if (err || found) /* the mapping holds one reference to fd */
		srn_fdshare_put(fd);
	return err;
}

/* Gives back what srn_shm_smap_get mapped; the last user unmaps it. */
void srn_shm_smap_put(struct srn_shm_smap **map_p, struct srn_seg *seg_p)
{
	struct srn_shm_smap *m = *map_p, **pp;

	if (!m)
		return;
	*map_p = NULL;
	seg_p->addr = NULL;
	seg_p->size = 0;
	pthread_mutex_lock(&srn_shm_smap_lock);
	if (--m->refs == 0) {
		for (pp = &srn_shm_smaps; *pp != m; pp = &(*pp)->next)
			;
		*pp = m->next;
	} else {
		m = NULL;
	}
	pthread_mutex_unlock(&srn_shm_smap_lock);
	if (m) {
		srn_seg_unmap(&m->seg);
		srn_fdshare_put(m->fd);
		free(m);
	}
}
