// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the slot hand-off (docs/rpc.md; model: tests/rpc/slot.pml).
 *
 * A caller (a same-host client's own thread, or the server's receiver for
 * network calls) is the NIC: it claims a waiting worker by CAS on the
 * worker's state, writes call number n into receive slot n & 1 and
 * publishes it with one release store of the slot's seq; it wakes the
 * worker only if the CAS saw it SLEEPING or PARKED. The worker answers
 * in transmit slot n & 1 the same way. The claim is the hand-shake that
 * closes the spin->sleep race: a worker goes to sleep only by its own CAS
 * SPINNING -> SLEEPING, so a caller either sees SLEEPING (and wakes it)
 * or has made it RUNNING first (and the worker keeps polling).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rpc/srn_rpc.h"
#include "util/srn_compiler.h"

int64_t srn_rpc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint32_t srn_rpc_load_acquire(const uint32_t *word)
{
	/* acquire: pairs with the release in srn_rpc_publish,
	 * srn_rpc_reply_publish or srn_rpc_worker_free */
	return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

/* 0, or -ETIMEDOUT / -EAGAIN / -EINTR (all mean: look again). */
int srn_rpc_futex_wait(uint32_t *word, uint32_t val, long timeout_ns)
{
	struct timespec ts = { timeout_ns / 1000000000,
			       timeout_ns % 1000000000 };

	if (syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0) == 0)
		return 0;
	return -errno;
}

void srn_rpc_futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static size_t srn_rpc_seg_size(unsigned nworkers)
{
	return sizeof(struct srn_rpc_seg_hdr) +
	       (size_t)nworkers * sizeof(struct srn_rpc_worker) +
	       (size_t)nworkers * 2 * SRN_RPC_AUX_SIZE;
}

int srn_rpc_seg_create(unsigned nworkers, int *fd_p, struct srn_rpc_seg *seg)
{
	size_t size = srn_rpc_seg_size(nworkers);
	struct srn_rpc_seg_hdr *h;
	int fd, rc;

	fd = memfd_create("softrnic-rpc", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0)
		goto fail;
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		goto fail;
	h->magic = SRN_RPC_MAGIC;
	h->version = SRN_RPC_VERSION;
	h->size = size;
	h->owner_pid = (uint32_t)getpid();
	h->nworkers = nworkers;
	h->worker_off = sizeof(*h);
	h->worker_size = sizeof(struct srn_rpc_worker);
	h->aux_off = h->worker_off + (uint64_t)nworkers * h->worker_size;
	h->aux_size = SRN_RPC_AUX_SIZE;
	seg->hdr = h;
	seg->size = size;
	seg->nworkers = nworkers;
	*fd_p = fd;
	return 0;
fail:
	rc = -errno;
	close(fd);
	return rc;
}

/* Maps a server's segment; every field used later is checked here. */
int srn_rpc_seg_map(int fd, struct srn_rpc_seg *seg)
{
	struct srn_rpc_seg_hdr *h;
	struct stat st;
	uint64_t n;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((size_t)st.st_size < sizeof(*h))
		return -EPROTO;
	h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	if (h == MAP_FAILED)
		return -errno;
	n = h->nworkers;
	if (h->magic != SRN_RPC_MAGIC || h->version != SRN_RPC_VERSION ||
	    h->size != (uint64_t)st.st_size || n == 0 ||
	    n > SRN_RPC_MAX_WORKERS || h->worker_off != sizeof(*h) ||
	    h->worker_size != sizeof(struct srn_rpc_worker) ||
	    h->aux_size != SRN_RPC_AUX_SIZE ||
	    h->aux_off != h->worker_off + n * h->worker_size ||
	    srn_rpc_seg_size((unsigned)n) != h->size) {
		munmap(h, (size_t)st.st_size);
		return -EPROTO;
	}
	seg->hdr = h;
	seg->size = (size_t)st.st_size;
	seg->nworkers = (unsigned)n;
	return 0;
}

void srn_rpc_seg_unmap(struct srn_rpc_seg *seg)
{
	if (seg->hdr)
		munmap(seg->hdr, seg->size);
	seg->hdr = NULL;
}

struct srn_rpc_worker *srn_rpc_seg_worker(const struct srn_rpc_seg *seg,
					  unsigned i)
{
	return (struct srn_rpc_worker *)((char *)seg->hdr +
					 seg->hdr->worker_off) +
	       i;
}

/* dir 0: calls (receive), 1: replies (transmit). */
uint8_t *srn_rpc_seg_aux(const struct srn_rpc_seg *seg, unsigned i, int dir)
{
	return (uint8_t *)seg->hdr + sizeof(struct srn_rpc_seg_hdr) +
	       (size_t)seg->nworkers * sizeof(struct srn_rpc_worker) +
	       (2 * (size_t)i + (size_t)dir) * SRN_RPC_AUX_SIZE;
}

/* One pass: the first worker in state want that we take by CAS. */
static int srn_rpc_claim_pass(const struct srn_rpc_seg *seg, uint32_t want)
{
	unsigned i;

	for (i = 0; i < seg->nworkers; i++) {
		uint32_t *st = &srn_rpc_seg_worker(seg, i)->ctl.state;
		uint32_t cur = want;

		/* relaxed: a hint; the CAS below decides */
		if (__atomic_load_n(st, __ATOMIC_RELAXED) != want)
			continue;
		/* acq_rel: pairs with the release in srn_rpc_worker_free
		 * (we read ctl.next after it) and with the CAS in
		 * srn_rpc_worker_sleep; acquire on failure, same pairing */
		if (!__atomic_compare_exchange_n(st, &cur, SRN_RPC_RUNNING,
						 false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			continue;
		/* relaxed: a hint for srn_rpc_worker_await_claimed, which
		 * only asks whether this process still lives */
		__atomic_store_n(&srn_rpc_seg_worker(seg, i)->ctl.owner,
				 (uint32_t)getpid(), __ATOMIC_RELAXED);
		return (int)i;
	}
	return -1;
}

static int srn_rpc_claim_any(const struct srn_rpc_seg *seg, uint32_t *old_p)
{
	static const uint32_t order[] = { SRN_RPC_SPINNING, SRN_RPC_SLEEPING,
					  SRN_RPC_PARKED };
	unsigned k;
	int i;

	for (k = 0; k < 3; k++) {
		i = srn_rpc_claim_pass(seg, order[k]);
		if (i >= 0) {
			*old_p = order[k];
			return i;
		}
	}
	return -1;
}

static bool srn_rpc_peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (fd < 0)
		return false;
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLIN));
}

/*
 * Claims a waiting worker: a spinning one first, then a sleeping one, a
 * parked one last. With none free, sleeps on the segment's idle_seq until
 * a worker frees itself (srn_rpc_worker_free) or timeout_ms passes.
 * Returns the worker's index, -ETIMEDOUT, or -EPIPE when alive_fd (the
 * server's socket, -1 for none) reports the server gone. Before its first
 * wait, a caller with a socket sends a byte on it: the server's receiver
 * then starts another worker if it may (srn_rpc_unix_input).
 */
int srn_rpc_claim(const struct srn_rpc_seg *seg, int alive_fd, long timeout_ms,
		  uint32_t *old_p)
{
	struct srn_rpc_seg_hdr *h = seg->hdr;
	int64_t end = srn_rpc_now_ns() + timeout_ms * 1000000;
	unsigned asked = 0;
	uint32_t seen;
	int i;

	for (;;) {
		/* acquire: pairs with the release in srn_rpc_worker_free */
		seen = __atomic_load_n(&h->idle_seq, __ATOMIC_ACQUIRE);
		i = srn_rpc_claim_any(seg, old_p);
		if (i >= 0)
			return i;
		if (srn_rpc_peer_gone(alive_fd))
			return -EPIPE;
		if (srn_rpc_now_ns() >= end)
			return -ETIMEDOUT;
		if (alive_fd >= 0 && !asked++)
			/* a same-host caller asks the server for a worker */
			send(alive_fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		/* seq_cst: the store of waiters before the re-scan; pairs
		 * with the fence in srn_rpc_worker_free */
		__atomic_fetch_add(&h->waiters, 1, __ATOMIC_SEQ_CST);
		i = srn_rpc_claim_any(seg, old_p);
		if (i < 0)
			srn_rpc_futex_wait(&h->idle_seq, seen, 10000000);
		/* relaxed: a counter; the futex word carries the order */
		__atomic_fetch_sub(&h->waiters, 1, __ATOMIC_RELAXED);
		if (i >= 0)
			return i;
	}
}

/* The caller wrote call n into rx[n & 1]; hand it to the worker. */
void srn_rpc_publish(struct srn_rpc_worker *w, uint32_t n, uint32_t len,
		     uint32_t flags, uint32_t old_state)
{
	struct srn_rpc_slot *s = &w->rx[n & 1];

	s->len = len;
	s->flags = flags;
	/* release: the message before seq; pairs with the acquire in
	 * srn_rpc_load_acquire (srn_rpc_worker_wait) */
	__atomic_store_n(&s->seq, n, __ATOMIC_RELEASE);
	if (old_state != SRN_RPC_SPINNING)
		srn_rpc_futex_wake(&s->seq);
}

/*
 * The worker is done with call next - 1: it makes itself claimable again
 * and wakes one caller waiting for a free worker, if any.
 */
void srn_rpc_worker_free(const struct srn_rpc_seg *seg,
			 struct srn_rpc_worker *w, uint32_t next)
{
	struct srn_rpc_seg_hdr *h = seg->hdr;

	w->ctl.next = next;
	/* relaxed: a hint, see srn_rpc_claim_pass */
	__atomic_store_n(&w->ctl.owner, 0, __ATOMIC_RELAXED);
	/* release: next before the state; pairs with the acq_rel CAS in
	 * srn_rpc_claim_pass */
	__atomic_store_n(&w->ctl.state, SRN_RPC_SPINNING, __ATOMIC_RELEASE);
	/* full barrier: the state store before reading waiters; pairs with
	 * the fetch_add in srn_rpc_claim */
	srn_smp_mb();
	/* relaxed: ordered by the fence above */
	if (__atomic_load_n(&h->waiters, __ATOMIC_RELAXED) == 0)
		return;
	/* release: pairs with the acquire load of idle_seq in srn_rpc_claim */
	__atomic_fetch_add(&h->idle_seq, 1, __ATOMIC_RELEASE);
	srn_rpc_futex_wake(&h->idle_seq);
}

/* The worker wrote reply n into tx[n & 1]. */
void srn_rpc_reply_publish(struct srn_rpc_worker *w, uint32_t n, uint32_t len,
			   uint32_t flags)
{
	struct srn_rpc_slot *s = &w->tx[n & 1];

	s->len = len;
	s->flags = flags;
	/* release: the reply before seq; pairs with the acquire in
	 * srn_rpc_load_acquire (srn_rpc_reply_wait) */
	__atomic_store_n(&s->seq, n, __ATOMIC_RELEASE);
	/* full barrier: seq before reading waiting; pairs with the exchange
	 * in srn_rpc_reply_wait */
	srn_smp_mb();
	/* relaxed: ordered by the fence above */
	if (__atomic_load_n(&s->waiting, __ATOMIC_RELAXED))
		srn_rpc_futex_wake(&s->seq);
}

/* The caller is done with reply n: the worker may reuse its slot. */
void srn_rpc_reply_ack(struct srn_rpc_worker *w, uint32_t n)
{
	/* release: our reads of the reply before the ack; pairs with the
	 * acquire in srn_rpc_load_acquire (srn_rpc_tx_wait_ack) */
	__atomic_store_n(&w->tx[n & 1].ack, n, __ATOMIC_RELEASE);
}

/*
 * The caller of call n waits for its reply: a short spin (the caller's
 * own thread), then futex waits in 10 ms slices that also look at the
 * server's socket. 0, -ETIMEDOUT, or -EPIPE (server gone).
 */
int srn_rpc_reply_wait(struct srn_rpc_worker *w, uint32_t n, int alive_fd,
		       long timeout_ms)
{
	struct srn_rpc_slot *s = &w->tx[n & 1];
	int64_t now = srn_rpc_now_ns(), spin_end = now + 20000;
	int64_t end = now + timeout_ms * 1000000;
	uint32_t cur;

	while (srn_rpc_now_ns() < spin_end)
		if (srn_rpc_load_acquire(&s->seq) == n)
			return 0;
	for (;;) {
		/* seq_cst: waiting before re-reading seq; pairs with the
		 * fence in srn_rpc_reply_publish */
		__atomic_exchange_n(&s->waiting, 1, __ATOMIC_SEQ_CST);
		cur = srn_rpc_load_acquire(&s->seq);
		if (cur == n)
			return 0;
		if (srn_rpc_peer_gone(alive_fd))
			return -EPIPE;
		now = srn_rpc_now_ns();
		if (now >= end)
			return -ETIMEDOUT;
		srn_rpc_futex_wait(&s->seq, cur,
				   end - now < 10000000 ? end - now : 10000000);
	}
}
