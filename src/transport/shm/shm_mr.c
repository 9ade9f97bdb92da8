// SPDX-License-Identifier: MIT
/*
 * softrnic — the target MRs a same-host initiator has met: fetched from the
 * target over its control socket (MR_REQ, answered in shm_ctl.c, only once
 * the connection's handshake passed), mapped here and cached per
 * connection (struct srn_peer's rmr[]).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/shm/shm.h"

static void srn_rmr_unmap(struct srn_rmr *m)
{
	if (m->key && m->map)
		munmap(m->map, m->map_len);
	memset(m, 0, sizeof(*m));
}

void srn_peer_unmap_all(struct srn_peer *p)
{
	for (unsigned i = 0; i < p->rmr_cap; i++)
		srn_rmr_unmap(&p->rmr[i]);
	free(p->rmr);
	p->rmr = NULL;
	p->rmr_cap = p->rmr_used = 0;
}

/* Moves the mappings into a table of cap slots (a power of two). */
static int srn_rmr_rehash(struct srn_peer *p, unsigned cap)
{
	struct srn_rmr *old = p->rmr, *t = calloc(cap, sizeof(*t));
	unsigned ocap = p->rmr_cap;

	if (!t)
		return -ENOMEM;
	for (unsigned j = 0; j < ocap; j++) {
		unsigned i = srn_rmr_hash(old[j].key, cap);

		if (!old[j].key)
			continue;
		while (t[i].key)
			i = (i + 1) & (cap - 1);
		t[i] = old[j];
	}
	free(old);
	p->rmr = t;
	p->rmr_cap = cap;
	return 0;
}

/*
 * The slot for key: its old one (unmapped: the target answered anew), or
 * a free one. The table stays at most 3/4 full: it doubles, and at
 * SRN_RMR_CACHE_MAX every mapping goes and it starts over.
 */
static struct srn_rmr *srn_rmr_slot(struct srn_peer *p, uint32_t key)
{
	struct srn_rmr *m = srn_rmr_lookup(p, key);
	unsigned i;

	if (m) {
		srn_rmr_unmap(m); /* keeps the probe chain: key is set again */
		m->key = key;
		return m;
	}
	if ((p->rmr_used + 1) * 4 > p->rmr_cap * 3) {
		unsigned cap = p->rmr_cap ? p->rmr_cap * 2 : SRN_RMR_CACHE_MIN;

		if (cap > SRN_RMR_CACHE_MAX) {
			srn_peer_unmap_all(p);
			cap = SRN_RMR_CACHE_MIN;
		}
		if (srn_rmr_rehash(p, cap))
			return NULL;
	}
	i = srn_rmr_hash(key, p->rmr_cap);
	while (p->rmr[i].key)
		i = (i + 1) & (p->rmr_cap - 1);
	p->rmr_used++;
	p->rmr[i].key = key;
	return &p->rmr[i];
}

static int srn_rep_check(const struct srn_ctl_mr_rep *r, ssize_t len,
			 uint32_t key, unsigned nfds)
{
	if (len != (ssize_t)sizeof(*r) || r->hdr.magic != SRN_CTL_MAGIC ||
	    r->hdr.version != SRN_CTL_VERSION ||
	    r->hdr.type != SRN_CTL_MR_REP || r->hdr.len != sizeof(*r))
		return -EPROTO;
	if (r->hdr.status)
		return r->hdr.status < 0 && r->hdr.status > -4096 ?
			       r->hdr.status :
			       -EPROTO;
	if (!r->nchunks) /* reached with process_vm_*: nothing to map (an
			  * implicit ODP MR starts at address 0) */
		return r->key == key && r->length && !nfds &&
				       r->owner_va + (r->length - 1) >=
					       r->owner_va ?
			       0 :
			       -EPROTO;
	if (r->key != key || r->nchunks > SRN_MR_MAX_CHUNKS ||
	    r->nchunks != nfds || r->page_off >= 4096 ||
	    r->span_len > SRN_MAX_MR_SIZE + 8192 || r->span_len % 4096 ||
	    r->length > r->span_len - r->page_off)
		return -EPROTO;
	for (unsigned i = 0; i < r->nchunks; i++) {
		const struct srn_ctl_chunk *c = &r->chunk[i];

		if (c->span_off % 4096 || c->len % 4096 || !c->len ||
		    c->span_off > r->span_len ||
		    c->len > r->span_len - c->span_off || c->file_off % 4096)
			return -EPROTO;
	}
	return 0;
}

static int srn_rmr_map(struct srn_rmr *m, const struct srn_ctl_mr_rep *r,
		       const int *fds)
{
	int prot = PROT_READ;
	uint8_t *base;

	if (!r->nchunks) {
		m->key = r->key;
		m->access = r->access;
		m->iova = r->iova;
		m->length = r->length;
		m->map = NULL;
		m->base = (uint8_t *)(uintptr_t)r->owner_va;
		m->owner = m->base;
		m->pvm = true;
		m->ro = false;
		return 0;
	}
	m->pvm = false;
	/* a read-only MR's memfds are sealed and sent O_RDONLY: a writable
	 * mapping would fail anyway */
	m->ro = srn_access_ro_shared(r->access);
	if (!m->ro &&
	    (r->access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_ATOMIC)))
		prot |= PROT_WRITE;
	base = mmap(NULL, r->span_len, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	for (unsigned i = 0; i < r->nchunks; i++) {
		if (mmap(base + r->chunk[i].span_off, r->chunk[i].len, prot,
			 MAP_SHARED | MAP_FIXED, fds[i],
			 r->chunk[i].file_off) == MAP_FAILED) {
			int err = -errno;

			munmap(base, r->span_len);
			return err;
		}
	}
	madvise(base, r->span_len, MADV_DONTFORK);
	m->key = r->key;
	m->access = r->access;
	m->iova = r->iova;
	m->length = r->length;
	m->map = base;
	m->map_len = r->span_len;
	m->base = base + r->page_off;
	m->owner = (uint8_t *)(uintptr_t)r->owner_va;
	return 0;
}

/* Sends MR_REQ for key; never waits (-EAGAIN: the socket is full now). */
static int srn_mr_ask(struct srn_peer *p, uint32_t key)
{
	struct srn_ctl_mr_req req = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_MR_REQ, 0,
			 sizeof(req) },
		.key = key,
	};
	struct pollfd pf = { .fd = p->conn.fd, .events = POLLOUT };
	int err;

	if (poll(&pf, 1, 0) != 1)
		return -EAGAIN;
	err = srn_ctl_sendmsg(p->conn.fd, &req, sizeof(req), NULL, 0);
	if (!err)
		p->mr_asked = key;
	return err;
}

/*
 * Takes the answer to the MR_REQ in flight (key p->mr_asked) and maps it
 * into a cache slot (*rmr_p); waits for it (up to the socket's timeout)
 * only if may_wait. -EINPROGRESS: not there yet, still due.
 */
static int srn_mr_take(struct srn_peer *p, bool may_wait,
		       struct srn_rmr **rmr_p)
{
	struct pollfd pf = { .fd = p->conn.fd, .events = POLLIN };
	struct srn_ctl_mr_rep rep;
	int fds[SRN_CTL_MAX_FDS];
	unsigned nfds = SRN_CTL_MAX_FDS;
	struct srn_rmr *m;
	ssize_t n;
	int err;

	if (!may_wait && poll(&pf, 1, 0) != 1)
		return -EINPROGRESS;
	n = srn_ctl_recvmsg(p->conn.fd, &rep, sizeof(rep), fds, &nfds);
	if (n == -ETIMEDOUT || n == -EINTR)
		return -EINPROGRESS;
	if (n < 0)
		return (int)n;
	err = srn_rep_check(&rep, n, p->mr_asked, nfds);
	m = srn_rmr_slot(p, p->mr_asked);
	p->mr_asked = 0;
	if (!m && !err)
		err = -ENOMEM;
	if (!err)
		err = srn_rmr_map(m, &rep, fds);
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	if (err == -ENOENT || err == -EACCES)
		err = -EACCES; /* not there, or not shared with peers */
	*rmr_p = m;
	return err;
}

/*
 * Asks the target for the memory behind key and maps it. An application
 * thread waits for the answer (the target's progress thread gives it
 * without waiting for anyone); the progress thread never waits for a peer:
 * it asks and returns -EAGAIN (the requester stalls FETCH), and the
 * answer's arrival triggers its next retry (srn_shm_on_conn), which takes
 * it here. One MR_REQ in flight at a time, under sq_lock.
 */
int srn_shm_mr_fetch(struct srn_peer *p, uint32_t key, struct srn_rmr **rmr_p)
{
	bool may_wait = !srn_in_progress_thread;
	uint32_t asked = p->mr_asked;
	int err;

	/* an answer that does not come within the socket's timeout (a
	 * target too busy or stopped) is a stall, as a device's unanswered
	 * request: counted by retry_cnt x timeout, taken when it comes */
	if (asked) { /* the answer to an earlier question comes first */
		err = srn_mr_take(p, may_wait, rmr_p);
		if (err == -EINPROGRESS)
			return -EAGAIN;
		if (asked == key)
			return err;
	}
	err = srn_mr_ask(p, key);
	if (err || !may_wait)
		return err ? err : -EAGAIN;
	err = srn_mr_take(p, true, rmr_p);
	return err == -EINPROGRESS ? -EAGAIN : err;
}
