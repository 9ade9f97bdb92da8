// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the slot hand-off (docs/rpc.md; model: tests/rpc/slot.pml).
 *
 * A caller (a same-host client's own thread, or the server's receiver for
 * network calls) is the NIC: it claims a worker by CAS on the worker's
 * state and call number (one word), writes call number n into receive
 * slot n & 1 and publishes it with one release store of the slot's seq;
 * it wakes the worker only if the CAS did not see it SPINNING. The worker
 * answers in transmit slot n & 1 the same way. The claim is the
 * hand-shake that closes the spin->sleep race: a worker goes to sleep only
 * by its own CAS SPINNING -> SLEEPING, so a caller either sees SLEEPING
 * (and wakes it) or has made it RUNNING first (and the worker keeps
 * polling). A caller may also queue behind a RUNNING worker (its other
 * receive slot); callers that find no worker wait in a bounded queue.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
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

static uint32_t srn_rpc_pid;
static pthread_once_t srn_rpc_pid_once = PTHREAD_ONCE_INIT;

static void srn_rpc_pid_forget(void)
{
	srn_rpc_pid = 0;
}

static void srn_rpc_pid_init(void)
{
	pthread_atfork(NULL, NULL, srn_rpc_pid_forget);
}

/* getpid(2), without its system call on every call (forget it in a
 * fork's child). */
static uint32_t srn_rpc_self(void)
{
	/* relaxed: every thread of the process stores the same value, and
	 * only after the fork handler is in place */
	uint32_t pid = __atomic_load_n(&srn_rpc_pid, __ATOMIC_RELAXED);

	if (srn_likely(pid))
		return pid;
	pthread_once(&srn_rpc_pid_once, srn_rpc_pid_init);
	pid = (uint32_t)getpid();
	/* relaxed: as above */
	__atomic_store_n(&srn_rpc_pid, pid, __ATOMIC_RELAXED);
	return pid;
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

/* dir 0: calls (receive), 1: replies (transmit). */
uint8_t *srn_rpc_seg_aux(const struct srn_rpc_seg *seg, unsigned i, int dir)
{
	return (uint8_t *)seg->hdr + sizeof(struct srn_rpc_seg_hdr) +
	       (size_t)seg->nworkers * sizeof(struct srn_rpc_worker) +
	       (2 * (size_t)i + (size_t)dir) * SRN_RPC_AUX_SIZE;
}

/* Worker w's sched word (SRN_RPC_SCHED), in the head of rx[0]. */
uint64_t *srn_rpc_sched(struct srn_rpc_worker *w)
{
	return &w->rx[0].sched;
}

/* The worker's sched word, as a claimer sees it (a hint; CAS decides). */
static uint64_t srn_rpc_sched_peek(struct srn_rpc_worker *w)
{
	/* relaxed: a hint; the CAS in srn_rpc_claim_one decides */
	return __atomic_load_n(srn_rpc_sched(w), __ATOMIC_RELAXED);
}

/*
 * Takes worker w if it is in state want: a free worker (SPINNING, SLEEPING,
 * PARKED) becomes RUNNING(n, rx[0], our pid) and the caller makes call n
 * in rx[0]; a RUNNING(n, slot) one becomes QUEUED(n, slot) and the caller
 * makes call n + 1 in rx[1 - slot].
 */
static bool srn_rpc_claim_one(struct srn_rpc_worker *w, uint32_t want,
			      struct srn_rpc_ticket *t, bool *raced_p)
{
	bool behind = want == SRN_RPC_RUNNING;
	uint64_t cur, next;
	uint32_t n;
	unsigned slot;

	srn_prefetch_write(srn_rpc_sched(w)); /* the CAS below writes it */
	cur = srn_rpc_sched_peek(w);
	n = SRN_RPC_SCHED_N(cur);
	slot = SRN_RPC_SCHED_SLOT(cur);
	if (SRN_RPC_SCHED_STATE(cur) != want)
		return false;
	next = behind ? SRN_RPC_SCHED(SRN_RPC_QUEUED, slot,
				      SRN_RPC_SCHED_PID(cur), n) :
			SRN_RPC_SCHED(SRN_RPC_RUNNING, 0, srn_rpc_self(), n);
	/* acq_rel: pairs with the release in srn_rpc_worker_free and
	 * srn_rpc_worker_ready (the slot is free after it) and with the
	 * CAS in srn_rpc_worker_sleep; acquire on failure, same pairing */
	if (!__atomic_compare_exchange_n(srn_rpc_sched(w), &cur, next, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		*raced_p = true; /* it moved meanwhile: worth a new look */
		return false;
	}
	if (behind)
		/* relaxed: a hint for srn_rpc_claimer_dead, which only asks
		 * whether this process still lives */
		__atomic_store_n(&w->ctl.owner_behind, srn_rpc_self(),
				 __ATOMIC_RELAXED);
	t->n = behind ? n + 1 : n;
	t->slot = behind ? 1 - slot : 0;
	t->old = want;
	return true;
}

/* Is worker w serving calls that are short enough to queue behind? */
static bool srn_rpc_short(const struct srn_rpc_worker *w)
{
	/* relaxed: a hint written by srn_rpc_worker_main */
	return __atomic_load_n(&w->ctl.svc_ns, __ATOMIC_RELAXED) <
	       SRN_RPC_SHORT_NS;
}

/* Claims a worker in state want (for RUNNING: one whose handlers are
 * short); its index, or -1 (*raced_p: one was in that state but moved
 * before the claim). */
static int srn_rpc_claim_state(const struct srn_rpc_seg *seg, uint32_t want,
			       struct srn_rpc_ticket *t, bool *raced_p)
{
	struct srn_rpc_worker *w;
	unsigned i;

	for (i = 0; i < seg->nworkers; i++) {
		w = srn_rpc_seg_worker(seg, i);
		if (want == SRN_RPC_RUNNING && !srn_rpc_short(w))
			continue;
		if (srn_rpc_claim_one(w, want, t, raced_p))
			return (int)i;
	}
	return -1;
}

/* The first step of the dispatch policy alone, without waiting: a
 * spinning worker (the common case, tried before a caller works out
 * whether its call may queue behind); a second look if one moved under
 * the claim. Its index (*t, as srn_rpc_claim), or -1. */
int srn_rpc_claim_spinning(const struct srn_rpc_seg *seg,
			   struct srn_rpc_ticket *t)
{
	bool raced = false;
	int i = srn_rpc_claim_state(seg, SRN_RPC_SPINNING, t, &raced);

	if (i < 0 && raced)
		i = srn_rpc_claim_state(seg, SRN_RPC_SPINNING, t, &raced);
	return i;
}

/*
 * The dispatch policy: a spinning worker; else queue behind a running
 * worker whose handlers are short (flag SRN_RPC_CLAIM_BEHIND: the call
 * fits its slot, the auxiliary area is the running call's); else wake a
 * sleeping worker; a parked one last.
 */
static int srn_rpc_claim_any(const struct srn_rpc_seg *seg, unsigned flags,
			     struct srn_rpc_ticket *t)
{
	static const uint32_t order[] = { SRN_RPC_SPINNING, SRN_RPC_RUNNING,
					  SRN_RPC_SLEEPING, SRN_RPC_PARKED };
	unsigned k, pass;
	bool raced = true;
	int i;

	/* a worker that moved under a claim (RUNNING -> SPINNING as it
	 * finished) is claimable in its new state: look again, a few times */
	for (pass = 0; pass < 4 && raced; pass++) {
		raced = false;
		for (k = 0; k < 4; k++) {
			if (order[k] == SRN_RPC_RUNNING &&
			    !(flags & SRN_RPC_CLAIM_BEHIND))
				continue;
			i = srn_rpc_claim_state(seg, order[k], t, &raced);
			if (i >= 0)
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

/* Takes a free entry of the queue for pid: its index, or -1. */
static int srn_rpc_queue_take(struct srn_rpc_seg_hdr *h, uint32_t pid)
{
	uint32_t zero;
	unsigned k;

	for (k = 0; k < SRN_RPC_QUEUE_LEN; k++) {
		zero = 0;
		/* seq_cst: the entry before the re-scan; pairs with the
		 * fence in srn_rpc_worker_free; relaxed on failure (the
		 * entry is someone else's, nothing is read) */
		if (__atomic_compare_exchange_n(&h->queue[k], &zero, pid, false,
						__ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED))
			return (int)k;
	}
	return -1;
}

/* Frees the entries of dead processes (killed while queued). */
static void srn_rpc_queue_reap(struct srn_rpc_seg_hdr *h)
{
	uint32_t pid;
	unsigned k;

	for (k = 0; k < SRN_RPC_QUEUE_LEN; k++) {
		/* relaxed: the CAS below decides */
		pid = __atomic_load_n(&h->queue[k], __ATOMIC_RELAXED);
		if (pid && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			/* relaxed: nobody waits for a dead caller's entry */
			__atomic_compare_exchange_n(&h->queue[k], &pid, 0,
						    false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
	}
}

/* Callers in the queue (as the fence before it lets us see them). */
static unsigned srn_rpc_queue_count(const struct srn_rpc_seg_hdr *h)
{
	unsigned k, n = 0;

	for (k = 0; k < SRN_RPC_QUEUE_LEN; k++)
		/* relaxed: ordered by the caller's fence or CAS */
		n += __atomic_load_n(&h->queue[k], __ATOMIC_RELAXED) != 0;
	return n;
}

/* Does a caller wait in the queue? (a hint for srn_rpc_worker_wait) */
bool srn_rpc_queue_busy(const struct srn_rpc_seg *seg)
{
	return srn_rpc_queue_count(seg->hdr) != 0;
}

/*
 * Joins the service's queue: the entry's index, or -1 when the queue is
 * full (the call is dropped and counted). A caller with a socket asks the
 * server for one more worker when the queue reaches half (unless all are
 * started).
 */
static int srn_rpc_queue_join(const struct srn_rpc_seg *seg, int alive_fd)
{
	struct srn_rpc_seg_hdr *h = seg->hdr;
	uint32_t pid = srn_rpc_self(), started;
	int k = srn_rpc_queue_take(h, pid);

	if (k < 0) {
		srn_rpc_queue_reap(h);
		k = srn_rpc_queue_take(h, pid);
	}
	if (k < 0) {
		/* relaxed: a counter */
		__atomic_fetch_add(&h->qstat.dropped, 1, __ATOMIC_RELAXED);
		return -1;
	}
	/* relaxed: a counter */
	__atomic_fetch_add(&h->qstat.queued, 1, __ATOMIC_RELAXED);
	/* relaxed: a hint (a request too many is ignored) */
	started = __atomic_load_n(&h->qstat.started, __ATOMIC_RELAXED);
	if (alive_fd >= 0 && started < h->nworkers &&
	    srn_rpc_queue_count(h) >= SRN_RPC_QUEUE_LEN / 2 &&
	    send(alive_fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
		/* relaxed: a counter */
		__atomic_fetch_add(&h->qstat.grows, 1, __ATOMIC_RELAXED);
	return k;
}

static void srn_rpc_queue_leave(struct srn_rpc_seg_hdr *h, int k)
{
	if (k >= 0)
		/* relaxed: the entry hands nothing over */
		__atomic_store_n(&h->queue[k], 0, __ATOMIC_RELAXED);
}

/*
 * Claims a worker by the dispatch policy (srn_rpc_claim_any). With none,
 * waits in the service's bounded queue: sleeps on the segment's idle_seq
 * until a worker frees itself (srn_rpc_worker_free) or timeout_ms passes.
 * Returns the worker's index (*t: the call number and receive slot to
 * use, the state it was claimed in), -ETIMEDOUT, -EAGAIN (the queue is full: the
 * call is dropped and counted; SRN_RPC_CLAIM_NODROP: wait outside the
 * queue instead), or -EPIPE when alive_fd (the server's socket, -1 for
 * none) reports the server gone.
 */
int srn_rpc_claim(const struct srn_rpc_seg *seg, int alive_fd, long timeout_ms,
		  unsigned flags, struct srn_rpc_ticket *t)
{
	struct srn_rpc_seg_hdr *h = seg->hdr;
	int64_t end = 0;
	int i, q = -2; /* -2: not in the queue yet */
	uint32_t seen;

	for (;;) {
		/* acquire: pairs with the release in srn_rpc_worker_free */
		seen = __atomic_load_n(&h->idle_seq, __ATOMIC_ACQUIRE);
		i = srn_rpc_claim_any(seg, flags, t);
		if (i >= 0)
			break;
		if (!end)
			end = srn_rpc_now_ns() + timeout_ms * 1000000;
		i = srn_rpc_peer_gone(alive_fd) ? -EPIPE : -ETIMEDOUT;
		if (i == -EPIPE || srn_rpc_now_ns() >= end)
			break;
		if (q == -2) {
			q = srn_rpc_queue_join(seg, alive_fd);
			i = -EAGAIN;
			if (q < 0 && !(flags & SRN_RPC_CLAIM_NODROP))
				break;
			continue; /* re-scan after joining */
		}
		srn_rpc_futex_wait(&h->idle_seq, seen, 10000000);
	}
	srn_rpc_queue_leave(h, q);
	return i;
}

/*
 * The caller wrote call t->n into rx[t->slot]; hand it to the worker. It
 * wakes the worker unless the claim saw it spinning: a sleeper, or a
 * worker that may wait in futex for a call queued behind
 * (srn_rpc_worker_wait).
 */
void srn_rpc_publish(struct srn_rpc_worker *w, const struct srn_rpc_ticket *t,
		     uint32_t len, uint32_t flags)
{
	struct srn_rpc_slot *s = &w->rx[t->slot];

	s->len = len;
	s->flags = flags;
	s->pid = srn_rpc_self();
	/* release: the message before seq; pairs with the acquire in
	 * srn_rpc_load_acquire (srn_rpc_worker_wait) */
	__atomic_store_n(&s->seq, t->n, __ATOMIC_RELEASE);
	if (t->old == SRN_RPC_SPINNING)
		return;
	if (t->old == SRN_RPC_RUNNING) {
		/* full barrier: seq before reading waiting; pairs with the
		 * exchange in srn_rpc_worker_await_behind */
		srn_smp_mb();
		/* relaxed: ordered by the fence above */
		if (!__atomic_load_n(&s->waiting, __ATOMIC_RELAXED))
			return;
	}
	srn_rpc_futex_wake(&s->seq);
}

/*
 * A spinning worker that read a network call from the socket itself makes
 * it call n: SPINNING(n) -> RUNNING(n), as a claimer would. false: a
 * caller claimed call n first (the worker serves that one first).
 */
bool srn_rpc_claim_self(struct srn_rpc_worker *w, uint32_t n)
{
	uint64_t cur = SRN_RPC_SCHED(SRN_RPC_SPINNING, 0, 0, n);

	/* acq_rel: pairs with the CAS in srn_rpc_claim_one (one of the two
	 * wins) and the release in srn_rpc_worker_free; acquire on failure,
	 * same pairing */
	return __atomic_compare_exchange_n(
		srn_rpc_sched(w), &cur,
		SRN_RPC_SCHED(SRN_RPC_RUNNING, 0, srn_rpc_self(), n), false,
		__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* A worker (re)starts: free, waiting for call n in rx[0]. */
void srn_rpc_worker_ready(struct srn_rpc_worker *w, uint32_t n)
{
	/* release: pairs with the acq_rel CAS in srn_rpc_claim_one */
	__atomic_store_n(srn_rpc_sched(w),
			 SRN_RPC_SCHED(SRN_RPC_SPINNING, 0, 0, n),
			 __ATOMIC_RELEASE);
}

/*
 * The worker is done with call n. If a caller queued call n + 1 behind it
 * (QUEUED), it stays RUNNING for that call: returns true. Else it makes
 * itself claimable for call n + 1 and wakes one caller of the queue, if
 * any: returns false.
 */
bool srn_rpc_worker_free(const struct srn_rpc_seg *seg,
			 struct srn_rpc_worker *w, uint32_t n)
{
	struct srn_rpc_seg_hdr *h = seg->hdr;
	/* relaxed: only a claimer queueing behind changes the word now
	 * (RUNNING -> QUEUED); the CAS below decides */
	uint64_t cur = __atomic_load_n(srn_rpc_sched(w), __ATOMIC_RELAXED);
	uint32_t pid;

	while (SRN_RPC_SCHED_STATE(cur) != SRN_RPC_QUEUED) {
		/* release: our reads of the call's slot before the state;
		 * pairs with the acq_rel CAS in srn_rpc_claim_one; acquire
		 * on failure: pairs with that CAS (QUEUED) */
		if (__atomic_compare_exchange_n(
			    srn_rpc_sched(w), &cur,
			    SRN_RPC_SCHED(SRN_RPC_SPINNING, 0, 0, n + 1), false,
			    __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
			break;
	}
	if (SRN_RPC_SCHED_STATE(cur) == SRN_RPC_QUEUED) {
		/* QUEUED(n): no claimer changes it; the behind caller's pid
		 * (a hint, relaxed; 0 if not stored yet) becomes call
		 * n + 1's */
		pid = __atomic_load_n(&w->ctl.owner_behind, __ATOMIC_RELAXED);
		/* release: pairs with the acq_rel CAS in srn_rpc_claim_one
		 * (a caller queueing call n + 2 behind this one) */
		__atomic_store_n(srn_rpc_sched(w),
				 SRN_RPC_SCHED(SRN_RPC_RUNNING,
					       1 - SRN_RPC_SCHED_SLOT(cur), pid,
					       n + 1),
				 __ATOMIC_RELEASE);
		return true;
	}
	/* full barrier: the state before reading the queue; pairs with the
	 * CAS in srn_rpc_queue_take */
	srn_smp_mb();
	if (srn_rpc_queue_count(h) == 0)
		return false;
	/* release: pairs with the acquire load of idle_seq in srn_rpc_claim */
	__atomic_fetch_add(&h->idle_seq, 1, __ATOMIC_RELEASE);
	srn_rpc_futex_wake(&h->idle_seq);
	return false;
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
		/* the callers of n and n + 2 may both wait on this word */
		syscall(SYS_futex, &s->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
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
	unsigned k = 0;
	uint32_t cur;
	int rc;

	do {
		if (srn_rpc_load_acquire(&s->seq) == n)
			return 0;
		__builtin_ia32_pause();
	} while ((++k & 31) || srn_rpc_now_ns() < spin_end);
	/* seq_cst: waiting before re-reading seq; pairs with the fence in
	 * srn_rpc_reply_publish */
	__atomic_fetch_add(&s->waiting, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		cur = srn_rpc_load_acquire(&s->seq);
		rc = 0;
		if (cur == n)
			break;
		rc = -EPIPE;
		if (srn_rpc_peer_gone(alive_fd))
			break;
		now = srn_rpc_now_ns();
		rc = -ETIMEDOUT;
		if (now >= end)
			break;
		srn_rpc_futex_wait(&s->seq, cur,
				   end - now < 10000000 ? end - now : 10000000);
	}
	/* relaxed: a count of waiters; a late wake is harmless */
	__atomic_fetch_sub(&s->waiting, 1, __ATOMIC_RELAXED);
	return rc;
}
