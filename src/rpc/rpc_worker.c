// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — a worker: waits on its receive slot (spin for an adaptive
 * budget, then futex), decodes the call with libtirpc, runs the rpcgen
 * dispatch function on its own SVCXPRT and sends the reply itself: into
 * its transmit slot for a same-host caller, on the socket for a network
 * one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/srn_rpc.h"

/*
 * A wake-up from the futex costs about 30 us here: while calls come closer
 * than that, a worker spins at least that long (twice the gap, 30 to
 * 50 us), so that a caller's hiccup (an interrupt, a page fault, a short
 * preemption) costs at most that much spinning, never a wake-up on top:
 * spinning up to the price of the alternative is never more than twice
 * the best choice made in hindsight. Calls further apart pay the wake-up
 * anyway: spin 2 us.
 */
#define SRN_RPC_WAKE_NS 30000

static int64_t srn_rpc_spin_budget(const struct srn_rpc_wlocal *wl)
{
	int64_t b;

	if (wl->gap_ns > SRN_RPC_WAKE_NS)
		b = 2000;
	else if (wl->gap_ns * 2 > 50000)
		b = 50000;
	else
		b = wl->gap_ns * 2 > SRN_RPC_WAKE_NS ? wl->gap_ns * 2 :
						       SRN_RPC_WAKE_NS;
	return b > wl->srv->spin_min_ns ? b : wl->srv->spin_min_ns;
}

/* Did the claimer die between its claim and its publish? */
static bool srn_rpc_claimer_dead(struct srn_rpc_wlocal *wl, int64_t since)
{
	/* relaxed: a hint; pairs with nothing (see srn_rpc_claim_one) */
	uint32_t pid = SRN_RPC_SCHED_PID(
		__atomic_load_n(srn_rpc_sched(wl->w), __ATOMIC_RELAXED));
	int64_t waited = srn_rpc_now_ns() - since;

	if (waited < 50000000)
		return false;
	if (!pid && wl->claimed)
		/* relaxed: a hint; the caller queued behind had not stored
		 * its pid when srn_rpc_worker_free copied it (a later one's
		 * only makes us wait longer) */
		pid = __atomic_load_n(&wl->w->ctl.owner_behind,
				      __ATOMIC_RELAXED);
	if (pid)
		return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
	return waited > 1000000000; /* died right after its claim */
}

/*
 * Claimed while about to sleep: the caller is writing, no wake comes, so
 * the worker yields until the call is there. -EAGAIN: the claimer died
 * before publishing (the worker skips call n).
 */
static int srn_rpc_worker_await_claimed(struct srn_rpc_wlocal *wl,
					struct srn_rpc_slot *s)
{
	int64_t since = srn_rpc_now_ns();
	unsigned k = 0;

	while (srn_rpc_load_acquire(&s->seq) != wl->n) {
		if (srn_rpc_stopping(wl->srv))
			return -EINTR;
		sched_yield();
		if ((++k & 255) == 0 && srn_rpc_claimer_dead(wl, since))
			return -EAGAIN;
	}
	return 0;
}

/*
 * Call n was queued behind the last one: its caller saw us RUNNING, so it
 * wakes us after its publish (srn_rpc_publish) if the slot's waiting word
 * says we wait; futex waits in 10 ms slices that also look after the
 * caller.
 */
static int srn_rpc_worker_await_behind(struct srn_rpc_wlocal *wl,
				       struct srn_rpc_slot *s)
{
	int64_t since = srn_rpc_now_ns();
	uint32_t v;

	int rc = 0;

	for (;;) {
		/* seq_cst: waiting before re-reading seq; pairs with the
		 * fence in srn_rpc_publish */
		__atomic_exchange_n(&s->waiting, 1, __ATOMIC_SEQ_CST);
		v = srn_rpc_load_acquire(&s->seq);
		if (v == wl->n)
			break;
		rc = srn_rpc_stopping(wl->srv) ? -EINTR : 0;
		if (!rc && srn_rpc_claimer_dead(wl, since))
			rc = -EAGAIN;
		if (rc)
			break;
		srn_rpc_futex_wait(&s->seq, v, 10000000);
	}
	/* relaxed: only this worker waits on its slot */
	__atomic_store_n(&s->waiting, 0, __ATOMIC_RELAXED);
	return rc;
}

/* After a futex timeout: a worker above min_workers, idle for 2 s, parks
 * (SLEEPING -> PARKED: claimed last, waits 1 s at a time). */
static void srn_rpc_worker_idle(struct srn_rpc_wlocal *wl)
{
	uint64_t cur = SRN_RPC_SCHED(SRN_RPC_SLEEPING, 0, 0, wl->n);

	if (++wl->idle_timeouts != 20 || wl->idx < wl->srv->min_workers)
		return;
	/* relaxed: only the state changes, no data is handed over; a
	 * claimer's CAS (srn_rpc_claim_one) fails and retries */
	if (__atomic_compare_exchange_n(
		    srn_rpc_sched(wl->w), &cur,
		    SRN_RPC_SCHED(SRN_RPC_PARKED, 0, 0, wl->n), false,
		    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		wl->w->cnt.stat.parks++;
}

/* SPINNING -> SLEEPING by CAS, then futex waits; a timeout is no call. */
static int srn_rpc_worker_sleep(struct srn_rpc_wlocal *wl,
				struct srn_rpc_slot *s)
{
	uint64_t *st = srn_rpc_sched(wl->w),
		 cur = SRN_RPC_SCHED(SRN_RPC_SPINNING, 0, 0, wl->n);
	uint32_t v;
	long tmo;

	/* acq_rel: pairs with the CAS in srn_rpc_claim_one (one of the two
	 * wins); acquire on failure, same pairing */
	if (!__atomic_compare_exchange_n(
		    st, &cur, SRN_RPC_SCHED(SRN_RPC_SLEEPING, 0, 0, wl->n),
		    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return srn_rpc_worker_await_claimed(wl, s);
	wl->w->cnt.stat.sleeps++;
	for (;;) {
		v = srn_rpc_load_acquire(&s->seq);
		if (v == wl->n) {
			wl->w->cnt.stat.wakeups++;
			return 0;
		}
		if (srn_rpc_stopping(wl->srv))
			return -EINTR;
		tmo = wl->idle_timeouts > 20 ? 1000000000 : 100000000;
		if (srn_rpc_futex_wait(&s->seq, v, tmo) != -ETIMEDOUT)
			continue;
		wl->w->cnt.stat.timeouts++;
		/* relaxed: claimed but not published after a whole timeout:
		 * a hint to look after the claimer */
		cur = __atomic_load_n(st, __ATOMIC_RELAXED);
		if (SRN_RPC_SCHED_STATE(cur) == SRN_RPC_RUNNING ||
		    SRN_RPC_SCHED_STATE(cur) == SRN_RPC_QUEUED)
			return srn_rpc_worker_await_claimed(wl, s);
		srn_rpc_worker_idle(wl);
	}
}

/*
 * Spins on the slot until end, and on the UDP socket too in network mode
 * (srn_rpc_net_take). 1: call wl->n is in its slot; 2: it is the datagram
 * the worker read; 0: none.
 */
static int srn_rpc_worker_spin(struct srn_rpc_wlocal *wl,
			       struct srn_rpc_slot *s, int64_t end)
{
	unsigned k = 0;

	do {
		if (srn_rpc_load_acquire(&s->seq) == wl->n)
			return 1;
		__builtin_ia32_pause();
		if ((++k & 15) == 0 && (wl->net_spinning || wl->net_conn) &&
		    srn_rpc_net_take(wl))
			return 2;
		if ((k & 63) == 0 && srn_rpc_stopping(wl->srv))
			return 0;
	} while ((k & 15) || (wl->seen_ns = srn_rpc_now_ns()) < end);
	return 0;
}

/*
 * 0: call wl->n is in its slot; 1: it is a datagram the worker read
 * itself; -EINTR: the server stops; -EAGAIN: its claimer died before
 * publishing it. A free worker does not sleep while the service's queue
 * holds a caller (srn_rpc_worker_free woke one, on its way to claim it):
 * it spins on, 200 us at most. It polls the UDP socket (or the stream of
 * its last call) only while it spins: before any wait it gives the socket
 * back to the receiver.
 */
static int srn_rpc_worker_wait(struct srn_rpc_wlocal *wl)
{
	struct srn_rpc_slot *s = &wl->w->rx[wl->slot];
	int64_t end;
	int got, rc;

	wl->seen_ns = srn_rpc_now_ns();
	end = wl->seen_ns + srn_rpc_spin_budget(wl);
	if (wl->net_poll && !wl->claimed)
		srn_rpc_net_spin_enter(wl);
	else
		srn_rpc_net_spin_leave(wl);
	got = srn_rpc_worker_spin(wl, s, end);
	if (!got && !wl->claimed && srn_rpc_queue_busy(&wl->srv->seg))
		got = srn_rpc_worker_spin(wl, s, end + 200000);
	if (got) {
		wl->w->cnt.stat.spins++;
		return got == 2 ? 1 : 0;
	}
	srn_rpc_net_spin_leave(wl);
	if (srn_rpc_stopping(wl->srv))
		return -EINTR;
	if (wl->claimed)
		rc = srn_rpc_worker_await_behind(wl, s);
	else
		rc = srn_rpc_worker_sleep(wl, s);
	wl->seen_ns = srn_rpc_now_ns();
	return rc;
}

static int srn_rpc_check_auth(struct srn_rpc_wlocal *wl, struct svc_req *req)
{
	struct opaque_auth *c = &req->rq_cred;
	struct authunix_parms *aup = wl->clntcred;
	XDR x;

	req->rq_clntcred = NULL;
	if (c->oa_flavor == AUTH_NONE)
		return 0;
	if (c->oa_flavor != AUTH_SYS)
		return AUTH_REJECTEDCRED;
	memset(aup, 0, sizeof(*aup));
	aup->aup_machname = wl->machname;
	aup->aup_gids = wl->gids;
	xdrmem_create(&x, c->oa_base, c->oa_length, XDR_DECODE);
	if (!xdr_authunix_parms(&x, aup))
		return AUTH_BADCRED;
	req->rq_clntcred = (caddr_t)aup;
	return 0;
}

/* Finds the program; the standard error replies when there is none. */
static void srn_rpc_dispatch(struct srn_rpc_wlocal *wl, struct svc_req *req)
{
	struct srn_rpc_server *srv = wl->srv;
	rpcvers_t lo = ~(rpcvers_t)0, hi = 0;
	bool prog_known = false;
	unsigned i;

	for (i = 0; i < srv->nprogs; i++) {
		if (srv->progs[i].prog != req->rq_prog)
			continue;
		if (srv->progs[i].vers == req->rq_vers) {
			srv->progs[i].dispatch(req, &wl->xprt);
			return;
		}
		prog_known = true;
		lo = srv->progs[i].vers < lo ? srv->progs[i].vers : lo;
		hi = srv->progs[i].vers > hi ? srv->progs[i].vers : hi;
	}
	if (prog_known)
		svcerr_progvers(&wl->xprt, lo, hi);
	else
		svcerr_noprog(&wl->xprt);
}

static void srn_rpc_reply_mismatch(struct srn_rpc_wlocal *wl)
{
	struct rpc_msg r;

	memset(&r, 0, sizeof(r));
	r.rm_direction = REPLY;
	r.rm_reply.rp_stat = MSG_DENIED;
	r.rjcted_rply.rj_stat = RPC_MISMATCH;
	r.rjcted_rply.rj_vers.low = RPC_MSG_VERSION;
	r.rjcted_rply.rj_vers.high = RPC_MSG_VERSION;
	SVC_REPLY(&wl->xprt, &r);
}

/* Where the message of call wl->n is, bounds-checked; NULL: drop it. */
static uint8_t *srn_rpc_call_buf(struct srn_rpc_wlocal *wl, uint32_t *len_p)
{
	struct srn_rpc_slot *s = &wl->w->rx[wl->slot];
	struct srn_rpc_origin *o = &wl->org[wl->slot];
	uint32_t len = s->len, flags = s->flags;

	wl->kind = SRN_RPC_FROM_SHM;
	wl->conn = NULL;
	if ((flags & SRN_RPC_SLOT_NET) && o->n == wl->n) {
		wl->kind = o->kind;
		wl->conn = o->conn;
		o->conn = NULL;
		memcpy(&wl->peer, &o->peer, o->peer_len);
		wl->peer_len = o->peer_len;
		wl->xprt.xp_rtaddr.len = o->peer_len;
		wl->xprt.xp_addrlen = (int)o->peer_len;
	}
	*len_p = len;
	if (flags & SRN_RPC_SLOT_AUX)
		return len <= SRN_RPC_AUX_SIZE ? wl->aux_in : NULL;
	return len <= SRN_RPC_SLOT_INLINE ? s->data : NULL;
}

/* Decodes and dispatches one call message (NULL: dropped). */
static void srn_rpc_worker_serve_msg(struct srn_rpc_wlocal *wl, uint8_t *buf,
				     uint32_t len)
{
	struct srn_rpc_call_hdr h;
	struct svc_req req;
	int why;

	wl->w->cnt.stat.calls++;
	if (!buf)
		goto out;
	xdrmem_create(&wl->args, (char *)buf, len, XDR_DECODE);
	why = srn_rpc_call_parse(&wl->args, &h, wl->cred);
	if (why < 0)
		goto out; /* malformed: dropped */
	wl->xid = h.xid;
	if (why == SRN_RPC_HDR_MISMATCH) {
		srn_rpc_reply_mismatch(wl);
		goto out;
	}
	memset(&req, 0, sizeof(req));
	req.rq_prog = h.prog;
	req.rq_vers = h.vers;
	req.rq_proc = h.proc;
	req.rq_cred = h.cred;
	req.rq_xprt = &wl->xprt;
	why = srn_rpc_check_auth(wl, &req);
	if (why)
		svcerr_auth(&wl->xprt, why);
	else
		srn_rpc_dispatch(wl, &req);
out:
	srn_rpc_net_conn_keep(wl);
	if (wl->conn)
		srn_rpc_conn_put(wl->conn);
	wl->conn = NULL;
}

/* The call in slot wl->n & 1. */
static void srn_rpc_worker_serve(struct srn_rpc_wlocal *wl)
{
	uint32_t len;
	uint8_t *buf = srn_rpc_call_buf(wl, &len);

	/* a hint (a pid to ask whether the caller lives), written with the
	 * call (srn_rpc_publish): the line the worker just read */
	wl->owner = wl->w->rx[wl->slot].pid;
	srn_rpc_worker_serve_msg(wl, buf, len);
}

/* The datagram or record the worker read itself (srn_rpc_net_take); it
 * answers on the socket, as for a call the receiver handed it. */
static void srn_rpc_worker_serve_dgram(struct srn_rpc_wlocal *wl)
{
	uint32_t len = (uint32_t)wl->pend_len;

	wl->kind = wl->pend_kind;
	wl->conn = wl->pend_conn; /* its reference: put once served */
	wl->pend_conn = NULL;
	wl->owner = 0;
	memcpy(&wl->peer, &wl->pend_peer, wl->pend_peer_len);
	wl->peer_len = wl->pend_peer_len;
	wl->xprt.xp_rtaddr.len = wl->pend_peer_len;
	wl->xprt.xp_addrlen = (int)wl->pend_peer_len;
	wl->pend_len = 0;
	wl->w->cnt.stat.direct++;
	srn_rpc_worker_serve_msg(wl, wl->dgram + wl->pend_off, len);
}

/* Serves call wl->n (dgram: the datagram the worker read for it); the
 * handler time feeds the dispatch policy; a long one gives the socket
 * back to the receiver. */
static void srn_rpc_worker_run_call(struct srn_rpc_wlocal *wl, bool dgram)
{
	/* when the call was found, to within a few spins: no clock read
	 * between a call's arrival and its reply */
	int64_t t = wl->seen_ns, d;
	uint32_t avg;

	if (wl->last_call_ns)
		wl->gap_ns = (7 * wl->gap_ns + t - wl->last_call_ns) / 8;
	wl->idle_timeouts = 0;
	if (dgram)
		srn_rpc_worker_serve_dgram(wl);
	else
		srn_rpc_worker_serve(wl);
	wl->net_poll = wl->kind; /* SHM (0): no socket to poll */
	if (wl->pend_len) /* read while a claimer took call n */
		srn_rpc_worker_serve_dgram(wl);
	wl->last_call_ns = srn_rpc_now_ns();
	d = wl->last_call_ns - t;
	if (d > SRN_RPC_SHORT_NS)
		srn_rpc_net_spin_pause(wl);
	/* relaxed: a hint for srn_rpc_short; only this worker writes it */
	avg = __atomic_load_n(&wl->w->ctl.svc_ns, __ATOMIC_RELAXED);
	d = (3 * (int64_t)avg + d) / 4;
	/* relaxed: as above */
	__atomic_store_n(&wl->w->ctl.svc_ns,
			 d > 0xffffffff ? 0xffffffffu : (uint32_t)d,
			 __ATOMIC_RELAXED);
}

void *srn_rpc_worker_main(void *arg)
{
	struct srn_rpc_wlocal *wl = arg;
	struct srn_rpc_server *srv = wl->srv;
	int rc;

	/* relaxed: nobody claims this worker before srn_rpc_worker_ready */
	wl->n = SRN_RPC_SCHED_N(
		__atomic_load_n(srn_rpc_sched(wl->w), __ATOMIC_RELAXED));
	wl->slot = 0;
	wl->claimed = false;
	srn_rpc_worker_ready(wl->w, wl->n);
	for (;;) {
		rc = srn_rpc_worker_wait(wl);
		if (rc < 0 && rc != -EAGAIN)
			break;
		if (rc >= 0)
			srn_rpc_worker_run_call(wl, rc == 1);
		else if (wl->pend_len) /* read for call n, whose claimer died */
			srn_rpc_worker_serve_dgram(wl);
		/* -EAGAIN: its claimer died; call n is skipped */
		wl->claimed = srn_rpc_worker_free(&srv->seg, wl->w, wl->n);
		/* a call queued behind is in the other slot; a free worker
		 * waits in rx[0] (SRN_RPC_SCHED) */
		wl->slot = wl->claimed ? 1 - wl->slot : 0;
		if (wl->claimed)
			wl->w->cnt.stat.behind++;
		wl->n++;
	}
	srn_rpc_net_spin_leave(wl);
	if (wl->pend_conn) /* read, never served: the server stops */
		srn_rpc_conn_put(wl->pend_conn);
	wl->pend_conn = NULL;
	/* relaxed: the thread ends; callers find the server gone by its
	 * socket, not by this state */
	__atomic_store_n(srn_rpc_sched(wl->w),
			 SRN_RPC_SCHED(SRN_RPC_OFF, 0, 0, wl->n),
			 __ATOMIC_RELAXED);
	return NULL;
}

int srn_rpc_worker_start(struct srn_rpc_server *srv, unsigned i)
{
	struct srn_rpc_wlocal *wl = &srv->wl[i];
	sigset_t all, old;
	int rc;

	if (!wl->netbuf) {
		wl->netbuf = malloc(SRN_RPC_NET_MAX + 4);
		if (!wl->netbuf)
			return -ENOMEM;
	}
	if (!wl->dgram) {
		wl->dgram = malloc(SRN_RPC_DGRAM_MAX);
		if (!wl->dgram)
			return -ENOMEM;
	}
	if (i == 0)
		return 0; /* the thread of srn_rpc_server_run */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&wl->tid, NULL, srn_rpc_worker_main, wl);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	pthread_setname_np(wl->tid, "srn-rpc-worker");
	wl->started = true;
	return 0;
}
