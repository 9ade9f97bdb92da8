// SPDX-License-Identifier: MIT
/*
 * softrnic — the per-process progress thread.
 *
 * It sleeps in epoll_wait() and wakes only for control-path work: peers
 * connecting and asking for MRs (ctl.c), peers hanging up, kicks (a peer
 * asked us to move a QP to ERR, raise an SRQ limit or CQ overflow event,
 * or told us that receives were posted for a stalled send queue), and the
 * retry timer of stalled send queues. The data path never goes through it.
 *
 * Links of a transport that receives on sockets are the exception:
 * their messages arrive on sockets. They sit in a second epoll set, the
 * data set, nested in the progress thread's
 * with EPOLLONESHOT. An application thread polling an empty CQ receives
 * from the data set itself (srn_progress_poll_once). When the progress
 * thread wakes for the data set while an application has just polled
 * (within SRN_PROG_POLLED_NS), waking it for each message only takes the
 * CPU from that application. As NAPI masks a NIC's interrupt, the progress
 * thread then receives what is there and leaves the data set disarmed; it
 * looks again every SRN_PROG_NAPI_NS and re-arms the set once no
 * application has polled for half that long. ibv_req_notify_cq re-arms it
 * at once, since its caller is about to block. So a message that arrives
 * while no application polls waits 1.5 x SRN_PROG_NAPI_NS (15 ms) at most,
 * and only if an application polled shortly before.
 *
 * The progress lock (recursive) serialises its handlers with the removal
 * of pollables by application threads; handlers never touch a QP's locks.
 * Work on QPs (retries, moving to ERR) runs after the progress lock is
 * dropped, under the context-list lock. Lock order:
 * progress lock -> ctx->lock -> conn_lock, and
 * ctx-list lock -> ctx->lock -> qp sq_lock (trylock only) -> qp rq_lock.
 * The live list has a leaf lock of its own (live_lock): adding a pollable
 * never waits for a handler (an application thread creating a QP while
 * the progress thread serves a connection), only removing one does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "engine/engine.h"

__thread bool srn_in_progress_thread;

/* The NAPI check period. Each check wakes the progress thread on a
 * polling application's core: at 2 ms, the 99th percentile of 8 B
 * ib_send_lat across hosts was 13-15 us; at 10 ms, 4-6 us. */
#define SRN_PROG_NAPI_NS 10000000ull
#define SRN_PROG_POLLED_NS 20000ull
#define SRN_PROG_DIRECT 4 /* links read directly by a polling application */

static bool srn_progress_live(const struct srn_pollable *p);
static bool srn_progress_live_since(const struct srn_pollable *p, uint64_t gen);

static struct {
	pthread_mutex_t lock; /* recursive: the progress lock */
	pthread_mutex_t ref_lock;
	pthread_mutex_t wake_lock;
	pthread_mutex_t ctxs_lock; /* the context list */
	pthread_mutex_t live_lock; /* leaf: live and ndata */
	unsigned refs;
	bool retry_pending; /* under the progress lock */
	atomic_bool data_off; /* the data set is disarmed; progress lock
			       * writes, read as a hint */
	uint64_t app_poll_ns; /* last poll of an empty CQ; relaxed */
	pthread_t thread;
	int epfd, data_epfd, kick_fd, timer_fd;
	bool stop;
	uint64_t next_wake_ns;
	struct srn_list ctxs;
	struct srn_list live; /* pollables in an epoll set, data set first;
			       * an entry is added before its registration
			       * and removed after it */
	uint64_t del_gen; /* pollables taken off live (progress lock) */
	bool del_lost; /* an EPOLL_CTL_DEL failed (progress lock) */
	unsigned ndata; /* of them in the data set */
	struct srn_list hooks; /* struct srn_progress_hooks */
	struct srn_pollable kick, timer, data;
} srn_prog = {
	.ref_lock = PTHREAD_MUTEX_INITIALIZER,
	.wake_lock = PTHREAD_MUTEX_INITIALIZER,
	.ctxs_lock = PTHREAD_MUTEX_INITIALIZER,
	.live_lock = PTHREAD_MUTEX_INITIALIZER,
	.epfd = -1,
	.data_epfd = -1,
	.kick_fd = -1,
	.timer_fd = -1,
	.ctxs = SRN_LIST_INIT(srn_prog.ctxs),
	.live = SRN_LIST_INIT(srn_prog.live),
	.hooks = SRN_LIST_INIT(srn_prog.hooks),
};

static pthread_once_t srn_prog_once = PTHREAD_ONCE_INIT;

static void srn_prog_lock_init(void)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&srn_prog.lock, &a);
	pthread_mutexattr_destroy(&a);
	/* the handlers (under the progress lock) write into pollables that
	 * application threads allocated, maybe next to memory they register:
	 * no handler runs while core/memreg.c remaps such pages */
	srn_memreg_set_quiesce(srn_progress_lock, srn_progress_unlock);
}

void srn_progress_lock(void)
{
	pthread_once(&srn_prog_once, srn_prog_lock_init);
	pthread_mutex_lock(&srn_prog.lock);
}

void srn_progress_unlock(void)
{
	pthread_mutex_unlock(&srn_prog.lock);
}

int srn_progress_kick_fd(void)
{
	return srn_prog.kick_fd;
}

void srn_progress_kick(void)
{
	srn_kick_fd(srn_prog.kick_fd);
}

/* live_lock: the data set grows or shrinks. */
static void srn_progress_ndata(int delta)
{
	srn_prog.ndata += delta;
	/* relaxed: a hint for srn_progress_has_data (no data is published) */
	atomic_store_explicit(&srn_progress_data_links, srn_prog.ndata,
			      memory_order_relaxed);
}

/* The data set's size, read without the lock (srn_progress_has_data). */
atomic_uint srn_progress_data_links;

/*
 * Registers hooks (a transport, when the library is loaded: before any
 * thread of ours runs, so the list needs no lock; it is read-only once a
 * context is open).
 */
void srn_progress_hooks_add(struct srn_progress_hooks *h)
{
	srn_list_add_tail(&h->link, &srn_prog.hooks);
}

/* Progress lock: the hooks' deferred work. */
static void srn_progress_hooks_work(bool idle)
{
	struct srn_list *pos;

	srn_list_for_each(pos, &srn_prog.hooks) {
		struct srn_progress_hooks *h =
			srn_list_entry(pos, struct srn_progress_hooks, link);

		if (h->work)
			h->work(idle);
	}
}

/* Outside the progress lock, under the context-list lock: the hooks'
 * sweep of ctx; how many QPs they could not look at now. */
static unsigned srn_progress_hooks_sweep(struct srn_context *ctx)
{
	struct srn_list *pos;
	unsigned busy = 0;

	srn_list_for_each(pos, &srn_prog.hooks) {
		struct srn_progress_hooks *h =
			srn_list_entry(pos, struct srn_progress_hooks, link);

		if (h->sweep)
			busy += h->sweep(ctx);
	}
	return busy;
}

/* The progress thread starts (start true) or has stopped. */
static void srn_progress_hooks_run(bool start)
{
	struct srn_list *pos;

	srn_list_for_each(pos, &srn_prog.hooks) {
		struct srn_progress_hooks *h =
			srn_list_entry(pos, struct srn_progress_hooks, link);

		if (start && h->start)
			h->start();
		else if (!start && h->stop)
			h->stop();
	}
}

static int srn_progress_epfd(const struct srn_pollable *p)
{
	return p->data ? srn_prog.data_epfd : srn_prog.epfd;
}

/* p joins (in) or leaves the live list; live_lock. */
static void srn_progress_live_set(struct srn_pollable *p, bool in)
{
	pthread_mutex_lock(&srn_prog.live_lock);
	if (!in)
		srn_list_del(&p->plink);
	else if (p->data) /* the data set first: srn_progress_run_direct */
		srn_list_add(&p->plink, &srn_prog.live);
	else
		srn_list_add_tail(&p->plink, &srn_prog.live);
	if (p->data)
		srn_progress_ndata(in ? 1 : -1);
	pthread_mutex_unlock(&srn_prog.live_lock);
}

/*
 * Registers p. Not under the progress lock: a handler may run meanwhile,
 * and p is live before its registration, so an event for it is never
 * taken for a stale one; p's owner does not delete it concurrently.
 */
int srn_progress_add(struct srn_pollable *p, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = p };

	pthread_once(&srn_prog_once, srn_prog_lock_init);
	/* before the registration: a handler that runs for p as soon as it
	 * is registered may delete it (srn_progress_del reads these; the
	 * epoll_ctl below orders them before any event for p) */
	p->reg_fd = p->fd;
	p->added = true;
	srn_progress_live_set(p, true);
	if (epoll_ctl(srn_progress_epfd(p), EPOLL_CTL_ADD, p->fd, &ev)) {
		int err = -errno;

		/* as srn_progress_del: an application's direct poll may have
		 * picked p from the live list meanwhile; the new generation
		 * makes it look again before it calls p (the caller frees p) */
		srn_progress_lock();
		srn_progress_live_set(p, false);
		srn_prog.del_gen++;
		p->added = false;
		srn_progress_unlock();
		return err;
	}
	return 0; /* p may be gone already: not touched again */
}

/* A link of a socket transport: it goes in the data set (see the top). */
int srn_progress_add_data(struct srn_pollable *p, uint32_t events)
{
	p->data = true;
	return srn_progress_add(p, events);
}

int srn_progress_mod(struct srn_pollable *p, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = p };

	return epoll_ctl(srn_progress_epfd(p), EPOLL_CTL_MOD, p->fd, &ev) ?
		       -errno :
		       0;
}

/* Listen to the data set again (progress lock). */
static void srn_progress_data_arm(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
				  .data.ptr = &srn_prog.data };

	if (srn_prog.data_epfd >= 0 &&
	    !epoll_ctl(srn_prog.epfd, EPOLL_CTL_MOD, srn_prog.data_epfd, &ev))
		/* relaxed: written under the progress lock, read outside it
		 * only as a hint (srn_progress_data_rearm) */
		atomic_store_explicit(&srn_prog.data_off, false,
				      memory_order_relaxed);
}

/* An application is about to block (ibv_req_notify_cq): the progress
 * thread must receive for it. */
void srn_progress_data_rearm(void)
{
	/* relaxed: a hint, checked again under the progress lock */
	if (!atomic_load_explicit(&srn_prog.data_off, memory_order_relaxed))
		return;
	srn_progress_lock();
	/* relaxed: the lock orders it; its writers hold the lock */
	if (atomic_load_explicit(&srn_prog.data_off, memory_order_relaxed))
		srn_progress_data_arm();
	srn_progress_unlock();
}

/* A QP of this process by number, or NULL. The caller holds the progress
 * lock, which keeps the QP from being destroyed meanwhile. */
struct srn_qp *srn_progress_find_qp(uint32_t qpn)
{
	struct srn_list *cpos, *ctmp, *pos, *tmp;
	struct srn_qp *found = NULL;

	pthread_mutex_lock(&srn_prog.ctxs_lock);
	srn_list_for_each_safe(cpos, ctmp, &srn_prog.ctxs) {
		struct srn_context *ctx =
			srn_list_entry(cpos, struct srn_context, link);

		pthread_mutex_lock(&ctx->lock);
		srn_list_for_each_safe(pos, tmp, &ctx->qps) {
			struct srn_qp *qp =
				srn_list_entry(pos, struct srn_qp, ctx_link);

			if (qp->ibqpx.qp_base.qp_num == qpn)
				found = qp;
		}
		pthread_mutex_unlock(&ctx->lock);
	}
	pthread_mutex_unlock(&srn_prog.ctxs_lock);
	return found;
}

/* Idempotent; once it returns, p's handler is not running and won't. */
void srn_progress_del(struct srn_pollable *p)
{
	srn_progress_lock();
	if (p->added) {
		/* a registration that cannot be taken back (its fd closed
		 * while a copy of the file lives on) may still report p:
		 * from then on every event is checked against the live list */
		if (epoll_ctl(srn_progress_epfd(p), EPOLL_CTL_DEL, p->reg_fd,
			      NULL)) {
			srn_dbg("progress: fd %d not taken out of its epoll set: %m",
				p->reg_fd);
			srn_prog.del_lost = true;
		}
		srn_progress_live_set(p, false);
		srn_prog.del_gen++;
	}
	p->added = false;
	srn_progress_unlock();
}

/* Wakes the progress thread at deadline_ns, or earlier. One timer holds
 * the earliest deadline asked for since it last fired; when it fires,
 * every waiter that is not due yet must ask again (its deadline may have
 * been dropped for the earlier one). */
void srn_progress_wake_at(uint64_t deadline_ns)
{
	struct itimerspec its = { 0 };
	/* relaxed: a hint read without the lock, so that a deadline no
	 * earlier than the armed one (a send queue retrying before its
	 * stall is due, again and again) costs no process-wide lock; a
	 * stale value only sends us to the locked check below. Written
	 * under wake_lock (here and in srn_progress_on_timer) */
	uint64_t armed =
		__atomic_load_n(&srn_prog.next_wake_ns, __ATOMIC_RELAXED);

	if (armed && deadline_ns >= armed)
		return;
	pthread_mutex_lock(&srn_prog.wake_lock);
	if (srn_prog.timer_fd >= 0 &&
	    (!srn_prog.next_wake_ns || deadline_ns < srn_prog.next_wake_ns)) {
		/* relaxed: under wake_lock; the load above is a hint */
		__atomic_store_n(&srn_prog.next_wake_ns, deadline_ns,
				 __ATOMIC_RELAXED);
		if (!deadline_ns)
			deadline_ns = 1;
		its.it_value.tv_sec = deadline_ns / 1000000000ull;
		its.it_value.tv_nsec = deadline_ns % 1000000000ull;
		timerfd_settime(srn_prog.timer_fd, TFD_TIMER_ABSTIME, &its,
				NULL);
	}
	pthread_mutex_unlock(&srn_prog.wake_lock);
}

/* Under the context-list lock: what peers asked of ctx's objects. A QP
 * whose sq_lock is taken is looked at again soon (busy): the request moves
 * to pending_err under sq_lock, so that a reset (srn_qp_reset_queues)
 * forgets it whole. */
static unsigned srn_progress_scan(struct srn_context *ctx)
{
	struct srn_list *pos, *tmp;
	unsigned busy = 0;

	pthread_mutex_lock(&ctx->lock);
	srn_list_for_each_safe(pos, tmp, &ctx->qps) {
		struct srn_qp *qp =
			srn_list_entry(pos, struct srn_qp, ctx_link);

		/* relaxed: the first load only skips the rest when no peer
		 * asked */
		if (!__atomic_load_n(&qp->shm->err_req, __ATOMIC_RELAXED))
			continue;
		if (!srn_trylock(&qp->sq_lock)) {
			busy++;
			continue;
		}
		/* acq_rel: the exchange pairs with the release in
		 * srn_resp_error (a peer). release: pending_err pairs with
		 * the acq_rel exchange in srn_req_take_error */
		if (__atomic_exchange_n(&qp->shm->err_req, 0,
					__ATOMIC_ACQ_REL)) {
			atomic_fetch_or_explicit(&qp->pending_err,
						 SRN_PENDING_ERR,
						 memory_order_release);
			srn_qp_want_run(qp); /* the sweep below runs it */
		}
		srn_unlock(&qp->sq_lock);
	}
	srn_list_for_each_safe(pos, tmp, &ctx->srqs)
		srn_srq_check_limit(
			srn_list_entry(pos, struct srn_srq, ctx_link));
	srn_list_for_each_safe(pos, tmp, &ctx->cqs)
		srn_cq_check_overflow(
			srn_list_entry(pos, struct srn_cq, ctx_link));
	pthread_mutex_unlock(&ctx->lock);
	return busy;
}

/* Outside the progress lock: scans every context and runs the send
 * queues that are stalled or must go to ERR. */
static void srn_progress_retry_all(void)
{
	struct srn_list *pos, *tmp;
	unsigned busy = 0;

	pthread_mutex_lock(&srn_prog.ctxs_lock);
	srn_list_for_each_safe(pos, tmp, &srn_prog.ctxs) {
		struct srn_context *ctx =
			srn_list_entry(pos, struct srn_context, link);

		busy += srn_progress_scan(ctx);
		busy += srn_progress_hooks_sweep(ctx);
	}
	pthread_mutex_unlock(&srn_prog.ctxs_lock);
	if (busy) /* somebody held a QP: look again soon */
		srn_progress_wake_at(srn_now_ns() + 1000000);
}

/*
 * From an application thread polling an empty CQ while socket links are
 * open: run the handlers of whatever the sockets have now, here, instead of
 * waiting for the progress thread to wake up (tens of microseconds). One
 * non-blocking epoll_wait, or with a few links a non-blocking recv on each
 * (one system call instead of two when a message is there, as a
 * busy-polling socket application would); skipped when the progress thread
 * is busy.
 */
static void srn_progress_run_direct(void)
{
	struct srn_pollable *ps[SRN_PROG_DIRECT];
	struct srn_list *pos, *tmp;
	uint64_t gen = srn_prog.del_gen;
	unsigned n = 0;

	pthread_mutex_lock(&srn_prog.live_lock);
	srn_list_for_each_safe(pos, tmp, &srn_prog.live) {
		struct srn_pollable *p =
			srn_list_entry(pos, struct srn_pollable, plink);

		if (!p->data || n == SRN_PROG_DIRECT)
			break; /* the data set comes first */
		ps[n++] = p;
	}
	pthread_mutex_unlock(&srn_prog.live_lock);
	for (unsigned i = 0; i < n; i++) /* a handler may free another */
		if (srn_progress_live_since(ps[i], gen))
			ps[i]->fn(ps[i], SRN_POLL_DIRECT);
}

/* Under the progress lock: runs the handlers of the data set's ready
 * sockets; how many there were. */
static int srn_progress_run_data(void)
{
	struct epoll_event ev[8];
	uint64_t gen = srn_prog.del_gen;
	int n = srn_prog.data_epfd >= 0 ?
			epoll_wait(srn_prog.data_epfd, ev, 8, 0) :
			0;

	for (int i = 0; i < n; i++) {
		struct srn_pollable *p = ev[i].data.ptr;

		/* an earlier handler may free it */
		if (srn_progress_live_since(p, gen))
			p->fn(p, ev[i].events);
	}
	return n > 0 ? n : 0;
}

void srn_progress_poll_once(void)
{
	bool retry;

	/* relaxed: a hint for srn_progress_on_data and the timer */
	__atomic_store_n(&srn_prog.app_poll_ns, srn_now_ns(), __ATOMIC_RELAXED);
	if (pthread_mutex_trylock(&srn_prog.lock))
		return;
	srn_progress_hooks_work(true); /* we are idle: held-back ACKs go */
	/* relaxed: a hint (srn_progress_ndata), as for has_data */
	if (atomic_load_explicit(&srn_progress_data_links,
				 memory_order_relaxed) <= SRN_PROG_DIRECT)
		srn_progress_run_direct();
	else
		srn_progress_run_data();
	retry = srn_prog.retry_pending;
	pthread_mutex_unlock(&srn_prog.lock);
	if (retry)
		srn_progress_kick(); /* the progress thread does those */
}

/* From a handler: have srn_progress_retry_all run once the handler is
 * done and the progress lock dropped. */
void srn_progress_request_retry(void)
{
	srn_progress_lock();
	srn_prog.retry_pending = true;
	srn_progress_unlock();
}

static void srn_progress_on_kick(struct srn_pollable *p, uint32_t events)
{
	uint64_t v;

	if (read(p->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		srn_dbg("kick read: %m");
	srn_progress_hooks_work(false);
	srn_prog.retry_pending = true;
}

/* Has an application polled an empty CQ within the last ns? */
static bool srn_progress_app_polled(uint64_t now, uint64_t ns)
{
	/* relaxed: a timestamp hint (see srn_progress_poll_once) */
	return now - __atomic_load_n(&srn_prog.app_poll_ns, __ATOMIC_RELAXED) <
	       ns;
}

/* Has an application polled an empty CQ within the last ns? A hint,
 * without the lock. */
bool srn_progress_app_polling(uint64_t ns)
{
	return srn_progress_app_polled(srn_now_ns(), ns);
}

/* Progress lock: is the data set disarmed (an application polls)? */
bool srn_progress_napi(void)
{
	/* relaxed: its writers hold the progress lock, as we do */
	return atomic_load_explicit(&srn_prog.data_off, memory_order_relaxed);
}

/* The data set has ready sockets (see the top). */
static void srn_progress_on_data(struct srn_pollable *p, uint32_t events)
{
	uint64_t now = srn_now_ns();

	srn_progress_run_data();
	if (srn_progress_app_polled(now, SRN_PROG_POLLED_NS)) {
		/* relaxed: under the progress lock; a hint outside it */
		atomic_store_explicit(&srn_prog.data_off, true,
				      memory_order_relaxed);
		srn_progress_wake_at(now + SRN_PROG_NAPI_NS);
		return;
	}
	srn_progress_data_arm();
}

static void srn_progress_on_timer(struct srn_pollable *p, uint32_t events)
{
	uint64_t v;

	if (read(p->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		srn_dbg("timer read: %m");
	pthread_mutex_lock(&srn_prog.wake_lock);
	/* relaxed: under wake_lock (srn_progress_wake_at reads it without
	 * as a hint) */
	__atomic_store_n(&srn_prog.next_wake_ns, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&srn_prog.wake_lock);
	srn_progress_hooks_work(false); /* deadlines, ACKs held back */
	if (srn_progress_napi()) { /* still polled? else listen again */
		uint64_t now = srn_now_ns();

		if (srn_progress_app_polled(now, SRN_PROG_NAPI_NS / 2))
			srn_progress_wake_at(now + SRN_PROG_NAPI_NS);
		else
			srn_progress_data_arm();
	}
	srn_prog.retry_pending = true;
}

/* Under the progress lock: p is still registered (not freed since
 * epoll_wait returned it). */
static bool srn_progress_live(const struct srn_pollable *p)
{
	struct srn_list *pos, *tmp;
	bool found = false;

	pthread_mutex_lock(&srn_prog.live_lock);
	srn_list_for_each_safe(pos, tmp, &srn_prog.live)
		if (srn_list_entry(pos, struct srn_pollable, plink) == p) {
			found = true;
			break;
		}
	pthread_mutex_unlock(&srn_prog.live_lock);
	return found;
}

/*
 * Progress lock: p, which an epoll set returned, is still registered. The
 * set cannot return a pollable deleted before the epoll_wait began, so if
 * none was deleted since gen was read (under the lock, before that
 * epoll_wait), p is live without a walk of the list; unless a deletion
 * ever failed to take a pollable out of its set (srn_progress_del).
 */
static bool srn_progress_live_since(const struct srn_pollable *p, uint64_t gen)
{
	return (srn_prog.del_gen == gen && !srn_prog.del_lost) ||
	       srn_progress_live(p);
}

static void *srn_progress_main(void *arg)
{
	struct epoll_event ev;
	uint64_t gen = 0;
	bool retry;

	srn_in_progress_thread = true;
	for (;;) {
		/* one event at a time: a handler may free other pollables */
		int n = epoll_wait(srn_prog.epfd, &ev, 1, -1);

		srn_progress_lock();
		if (srn_prog.stop) {
			srn_progress_unlock();
			return NULL;
		}
		if (n == 1 && srn_progress_live_since(ev.data.ptr, gen)) {
			struct srn_pollable *p = ev.data.ptr;

			p->fn(p, ev.events);
		}
		retry = srn_prog.retry_pending;
		srn_prog.retry_pending = false;
		gen = srn_prog.del_gen; /* before the next epoll_wait */
		srn_progress_unlock();
		if (retry)
			srn_progress_retry_all();
	}
}

static int srn_progress_start(void)
{
	srn_prog.epfd = epoll_create1(EPOLL_CLOEXEC);
	srn_prog.data_epfd = epoll_create1(EPOLL_CLOEXEC);
	srn_prog.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	srn_prog.timer_fd =
		timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (srn_prog.epfd < 0 || srn_prog.data_epfd < 0 ||
	    srn_prog.kick_fd < 0 || srn_prog.timer_fd < 0)
		return -errno;
	srn_prog.kick = (struct srn_pollable){ .fd = srn_prog.kick_fd,
					       .fn = srn_progress_on_kick };
	srn_prog.timer = (struct srn_pollable){ .fd = srn_prog.timer_fd,
						.fn = srn_progress_on_timer };
	srn_prog.data = (struct srn_pollable){ .fd = srn_prog.data_epfd,
					       .fn = srn_progress_on_data };
	if (srn_progress_add(&srn_prog.kick, EPOLLIN) ||
	    srn_progress_add(&srn_prog.timer, EPOLLIN) ||
	    srn_progress_add(&srn_prog.data, EPOLLIN | EPOLLONESHOT))
		return -errno;
	/* relaxed: the progress thread does not run yet (pthread_create
	 * below orders this for it); others read it only as a hint */
	atomic_store_explicit(&srn_prog.data_off, false, memory_order_relaxed);
	srn_prog.stop = false;
	srn_prog.next_wake_ns = 0;
	srn_progress_hooks_run(true); /* e.g. a host-wide listener */
	return -pthread_create(&srn_prog.thread, NULL, srn_progress_main, NULL);
}

static void srn_progress_close_fds(void)
{
	if (srn_prog.epfd >= 0)
		close(srn_prog.epfd);
	if (srn_prog.data_epfd >= 0)
		close(srn_prog.data_epfd);
	if (srn_prog.kick_fd >= 0)
		close(srn_prog.kick_fd);
	if (srn_prog.timer_fd >= 0)
		close(srn_prog.timer_fd);
	srn_prog.epfd = srn_prog.data_epfd = -1;
	srn_prog.kick_fd = srn_prog.timer_fd = -1;
}

int srn_progress_get(void)
{
	int err = 0;

	pthread_once(&srn_prog_once, srn_prog_lock_init);
	pthread_mutex_lock(&srn_prog.ref_lock);
	if (srn_prog.refs == 0) {
		err = srn_progress_start();
		if (err)
			srn_progress_close_fds();
	}
	if (!err)
		srn_prog.refs++;
	pthread_mutex_unlock(&srn_prog.ref_lock);
	return err;
}

void srn_progress_put(void)
{
	pthread_mutex_lock(&srn_prog.ref_lock);
	if (--srn_prog.refs == 0) {
		srn_progress_lock();
		srn_prog.stop = true;
		srn_progress_unlock();
		srn_progress_kick();
		pthread_join(srn_prog.thread, NULL);
		srn_progress_hooks_run(false);
		srn_progress_del(&srn_prog.kick);
		srn_progress_del(&srn_prog.timer);
		srn_progress_del(&srn_prog.data);
		srn_progress_close_fds();
	}
	pthread_mutex_unlock(&srn_prog.ref_lock);
}

void srn_progress_ctx_add(struct srn_context *ctx)
{
	pthread_mutex_lock(&srn_prog.ctxs_lock);
	srn_list_add_tail(&ctx->link, &srn_prog.ctxs);
	pthread_mutex_unlock(&srn_prog.ctxs_lock);
}

void srn_progress_ctx_del(struct srn_context *ctx)
{
	pthread_mutex_lock(&srn_prog.ctxs_lock);
	srn_list_del(&ctx->link);
	pthread_mutex_unlock(&srn_prog.ctxs_lock);
}

/* In a forked child: no progress thread runs here. Forget the parent's
 * (its fds stay open: the application may still hold the objects). */
void srn_progress_atfork_child(void)
{
	struct srn_list *pos, *tmp;

	/* Close the sockets the child inherited, or the parent's peers would
	 * not see the hang-up when the parent dies. The child's copies of the
	 * objects get fd -1. */
	srn_list_for_each_safe(pos, tmp, &srn_prog.live) {
		struct srn_pollable *p =
			srn_list_entry(pos, struct srn_pollable, plink);

		if (p != &srn_prog.kick && p != &srn_prog.timer &&
		    p != &srn_prog.data) {
			close(p->fd);
			p->fd = -1;
		}
		p->added = false;
		srn_list_init(&p->plink);
	}
	srn_list_init(&srn_prog.live);
	srn_prog.ndata = 0;
	/* relaxed: in the child, one thread runs */
	atomic_store_explicit(&srn_progress_data_links, 0,
			      memory_order_relaxed);
	srn_progress_close_fds();
	srn_prog_lock_init();
	pthread_mutex_init(&srn_prog.ref_lock, NULL);
	pthread_mutex_init(&srn_prog.wake_lock, NULL);
	pthread_mutex_init(&srn_prog.ctxs_lock, NULL);
	pthread_mutex_init(&srn_prog.live_lock, NULL);
	srn_prog.refs = 0;
	srn_list_init(&srn_prog.ctxs);
}
