// SPDX-License-Identifier: MIT
/*
 * softrnic — the shared-memory transport's control messages
 * (proto/srn_ctl_proto.h), carried by the host control plane
 * (engine/ctl.c).
 *
 * Target side (progress thread): CONNECT_REQ is answered with the target
 * QP's segments (QP, receive CQ, key table, SRQ) and kick fds once the
 * control plane has let the peer attach (srn_ctl_conn_attach: the kernel
 * vouches that it owns the QPN our QP names as its peer), else with the
 * refusal (-EINPROGRESS: we are not at RTR yet, the control plane keeps
 * the request and it comes back here then; -EAGAIN; -EPERM). MR_REQ (only
 * on an attached connection) with the memfds of an MR.
 *
 * Initiator side: srn_shm_ctl_connect() dials the target at RTR and asks,
 * without waiting; the answer is taken when it arrives (srn_shm_on_conn)
 * or when the QP first needs its peer (srn_shm_ctl_retry, from execute).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/shm/shm.h"

#define SRN_SHM_CTL_TIMEOUT_S 5
/* a pending connection asks again after this, doubling up to the max */
#define SRN_SHM_RETRY_MIN_NS 50000ull
#define SRN_SHM_RETRY_MAX_NS 10000000ull

/* ---- target side ---- */

static void srn_shm_on_connect(struct srn_ctl_conn *c,
			       const struct srn_ctl_connect_req *req, int fd)
{
	struct srn_qp *qp = srn_ctl_conn_qp(c);
	struct srn_ctl_connect_rep rep = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_CONNECT_REP, 0,
			 sizeof(rep) },
		.qpn = qp->ibqpx.qp_base.qp_num,
		.owner_pid = (uint32_t)srn_pid,
	};
	int fds[SRN_REPFD_NR];
	unsigned n = 0;
	int err = srn_ctl_conn_attach(c, req->src_qpn, fd);

	/* not past INIT: answered again, on this connection, once it is
	 * (the control plane keeps the request and its fd) */
	if (err == -EINPROGRESS &&
	    srn_ctl_conn_defer(c, req, sizeof(*req), fd) == 0)
		fd = -1;
	else if (err == -EINPROGRESS)
		err = -EAGAIN; /* out of memory: ask again */
	if (err) { /* nothing but the verdict */
		rep.hdr.status = err == -EISCONN ? -EINVAL : err;
		if (fd >= 0)
			close(fd);
		srn_ctl_sendmsg(srn_ctl_conn_fd(c), &rep, sizeof(rep), NULL, 0);
		return;
	}
	fds[n++] = qp->seg.fd;
	if (qp->recv_cq) /* an XRC TGT has none (shm_xrc.c) */
		fds[n++] = qp->recv_cq->seg.fd;
	fds[n++] = qp->ctx->tpt_seg.fd;
	fds[n++] = srn_progress_kick_fd();
	rep.fd_mask = (1u << SRN_REPFD_QP) | (1u << SRN_REPFD_TPT) |
		      (1u << SRN_REPFD_KICK);
	if (qp->recv_cq)
		rep.fd_mask |= 1u << SRN_REPFD_CQ;
	if (qp->recv_cq && qp->recv_cq->chan) {
		fds[n++] = qp->recv_cq->chan->ibch.fd;
		rep.fd_mask |= 1u << SRN_REPFD_CHANNEL;
	}
	if (qp->srq) {
		fds[n++] = qp->srq->seg.fd;
		rep.fd_mask |= 1u << SRN_REPFD_SRQ;
	}
	/* attached: found kin just now */
	err = srn_ctl_reply_kin(srn_ctl_conn_fd(c), &rep.hdr, fds, n);
	if (err == -EPIPE || err == -ECONNRESET) /* the asker is gone */
		srn_dbg("QP 0x%06x: connect reply: %s", rep.qpn,
			strerror(-err));
	else if (err)
		srn_warn("QP 0x%06x: connect reply failed: %s", rep.qpn,
			 strerror(-err));
}

static void srn_shm_on_mr_req(struct srn_ctl_conn *c,
			      const struct srn_ctl_mr_req *req)
{
	struct srn_ctl_mr_rep rep;
	struct srn_key_ref ref;
	struct srn_memreg reg;
	int fds[SRN_MR_MAX_CHUNKS];
	int err;

	memset(&rep, 0, sizeof(rep));
	rep.hdr = (struct srn_ctl_hdr){ SRN_CTL_MAGIC, SRN_CTL_VERSION,
					SRN_CTL_MR_REP, 0, sizeof(rep) };
	rep.key = req->key;
	err = srn_mr_export(srn_ctl_conn_qp(c)->ctx, req->key, &ref, &reg);
	if (err) {
		rep.hdr.status = err;
		srn_ctl_sendmsg(srn_ctl_conn_fd(c), &rep, sizeof(rep), NULL, 0);
		return;
	}
	rep.access = ref.access;
	rep.pd_handle = ref.pd_handle;
	rep.owner_va = ref.va;
	rep.iova = ref.iova;
	rep.length = ref.length;
	rep.page_off = reg.npieces ? ref.va - reg.span_start : 0;
	rep.span_len = reg.span_len;
	rep.nchunks = reg.npieces;
	for (unsigned i = 0; i < reg.npieces; i++) {
		rep.chunk[i].span_off = reg.piece[i].span_off;
		rep.chunk[i].len = reg.piece[i].len;
		rep.chunk[i].file_off = reg.piece[i].file_off;
		fds[i] = reg.piece[i].fd;
	}
	srn_ctl_reply(srn_ctl_conn_fd(c), &rep.hdr, fds, reg.npieces);
	for (unsigned i = 0; i < reg.npieces; i++)
		close(fds[i]);
}

/* The control plane checked the message (srn_ctl_classify): its length,
 * its one fd for CONNECT_REQ, and that MR_REQ comes on an attached conn. */
static void srn_shm_on_msg(struct srn_ctl_conn *c, const void *msg, size_t len,
			   int *fds, unsigned *nfds_p)
{
	const struct srn_ctl_hdr *h = msg;

	if (h->type == SRN_CTL_CONNECT_REQ) {
		srn_shm_on_connect(c, msg, fds[0]);
		*nfds_p = 0; /* kept or closed by srn_shm_on_connect */
	} else if (h->type == SRN_CTL_MR_REQ) {
		srn_shm_on_mr_req(c, msg);
	}
}

__attribute__((constructor)) static void srn_shm_ctl_init(void)
{
	srn_ctl_handler_set(SRN_CTL_CONNECT_REQ, srn_shm_on_msg);
	srn_ctl_handler_set(SRN_CTL_MR_REQ, srn_shm_on_msg);
}

/* ---- initiator side ---- */

static int srn_shm_check_rep(const struct srn_ctl_connect_rep *r, ssize_t n,
			     uint32_t dqpn, unsigned nfds, bool xrc)
{
	/* an XRC TGT has no CQ: its SRQs' come with each (shm_xrc.c) */
	const uint32_t need = (1u << SRN_REPFD_QP) |
			      (xrc ? 0 : 1u << SRN_REPFD_CQ) |
			      (1u << SRN_REPFD_TPT) | (1u << SRN_REPFD_KICK);

	if (n != (ssize_t)sizeof(*r) || r->hdr.magic != SRN_CTL_MAGIC ||
	    r->hdr.version != SRN_CTL_VERSION ||
	    r->hdr.type != SRN_CTL_CONNECT_REP || r->hdr.len != sizeof(*r))
		return -EPROTO;
	if (r->hdr.status)
		return r->hdr.status < 0 && r->hdr.status > -4096 ?
			       r->hdr.status :
			       -EPROTO;
	if (r->qpn != dqpn || (r->fd_mask & need) != need ||
	    (r->fd_mask >> SRN_REPFD_NR) ||
	    (unsigned)__builtin_popcount(r->fd_mask) != nfds)
		return -EPROTO;
	return 0;
}

/* Maps one segment the target sent; f[i] is ours (-1) once mapped. The
 * mapping outlives the descriptor, which is closed at once: a peer costs
 * no fd per segment (the target QP's own segment: no other peer maps
 * it; those peers share are in shm_smap.c). */
static int srn_shm_map_one(struct srn_seg *seg, int *f, int i,
			   enum srn_seg_kind kind, size_t size, int prot)
{
	int err = srn_seg_map(seg, f[i], kind, size, prot);

	if (!err) {
		f[i] = -1;
		close(seg->fd);
		seg->fd = -1;
	}
	return err;
}

/* Every connection to a process brings its kick eventfd, and every one to
 * a QP of a CQ that has a channel that channel's eventfd: one descriptor of
 * each is kept (util/fdshare.c), keyed by the owner's pid (and CQ). */
static void srn_shm_share_fds(struct srn_peer *p)
{
	const struct srn_seg_hdr *cq = p->cq_seg.addr;
	/* relaxed: a hint only (a wrong one shares nothing); written once by
	 * the owner (srn_seg_create) before it passed the segment */
	uint32_t id = cq ? __atomic_load_n(&cq->id, __ATOMIC_RELAXED) : 0;

	p->kick_fd = srn_fdshare_get(p->kick_fd, (int32_t)p->pid);
	p->chan_fd = srn_fdshare_get(
		p->chan_fd, (int32_t)(p->pid + 0x9e3779b9u * (id + 1)));
}

/* Maps what the target sent; fds are consumed (mapped, kept or closed). */
static int srn_shm_map_target(struct srn_peer *p,
			      const struct srn_ctl_connect_rep *r, int *fds)
{
	const int rw = PROT_READ | PROT_WRITE;
	int f[SRN_REPFD_NR], err;
	unsigned k = 0;

	for (int i = 0; i < SRN_REPFD_NR; i++)
		f[i] = (r->fd_mask & (1u << i)) ? fds[k++] : -1;
	p->chan_fd = f[SRN_REPFD_CHANNEL];
	p->kick_fd = f[SRN_REPFD_KICK];
	f[SRN_REPFD_CHANNEL] = f[SRN_REPFD_KICK] = -1; /* the peer's now */
	err = srn_shm_map_one(&p->qp_seg, f, SRN_REPFD_QP, SRN_SEG_QP,
			      sizeof(struct srn_qp_shm), rw);
	/* the segments other connections to that process may use too (its
	 * context's TPT, the receive CQ, the SRQ) are mapped once here */
	if (!err && f[SRN_REPFD_CQ] >= 0) {
		err = srn_shm_smap_get(&p->cq_map, &p->cq_seg, f[SRN_REPFD_CQ],
				       p->pid, SRN_SEG_CQ,
				       sizeof(struct srn_cq_shm), rw);
		f[SRN_REPFD_CQ] = -1; /* consumed */
	}
	if (!err) {
		err = srn_shm_smap_get(&p->tpt_map, &p->tpt_seg,
				       f[SRN_REPFD_TPT], p->pid, SRN_SEG_TPT,
				       sizeof(struct srn_tpt_shm), PROT_READ);
		f[SRN_REPFD_TPT] = -1;
	}
	if (!err && f[SRN_REPFD_SRQ] >= 0) {
		err = srn_shm_smap_get(&p->srq_map, &p->srq_seg,
				       f[SRN_REPFD_SRQ], p->pid, SRN_SEG_SRQ,
				       sizeof(struct srn_srq_shm), rw);
		f[SRN_REPFD_SRQ] = -1;
	}
	for (int i = 0; i < SRN_REPFD_NR; i++)
		if (f[i] >= 0)
			close(f[i]);
	srn_shm_share_fds(p);
	return err;
}

static int srn_shm_views(struct srn_peer *p, uint32_t dqpn)
{
	struct srn_qp_shm *t = p->qp_seg.addr;
	int err;

	p->tqp = t;
	p->tpt = p->tpt_seg.addr;
	p->qpn = dqpn;
	/* relaxed: written once by the owner (srn_qp_create) before it
	 * passed the segment (the socket orders that); checked below */
	p->pd_handle = __atomic_load_n(&t->pd_handle, __ATOMIC_RELAXED);
	p->has_srq = __atomic_load_n(&t->has_srq, __ATOMIC_RELAXED);
	if (t->hdr.id != dqpn || p->has_srq != (p->srq_seg.addr != NULL))
		return -EPROTO;
	if (p->qp->ibqpx.qp_base.qp_type == IBV_QPT_XRC_SEND)
		/* relaxed: as pd_handle; the views come per request */
		return __atomic_load_n(&t->qp_type, __ATOMIC_RELAXED) ==
				       IBV_QPT_XRC_RECV ?
			       0 :
			       -EPROTO;
	if (p->has_srq) {
		struct srn_srq_shm *s = p->srq_seg.addr;

		if (s->pd_handle != p->pd_handle)
			return -EPROTO;
		err = srn_rq_view_init(&p->rqv, &s->rq, s, p->srq_seg.size);
	} else {
		err = srn_rq_view_init(&p->rqv, &t->rq, t, p->qp_seg.size);
	}
	if (err)
		return err;
	return srn_cq_view_init(&p->cqv, p->cq_seg.addr, p->cq_seg.size,
				p->chan_fd, p->kick_fd);
}

/* Sends CONNECT_REQ with our progress thread's kick eventfd. Never waits
 * (the progress thread may be the caller): -EAGAIN when the socket cannot
 * take it now. kin_seen: right after the dial, which found the target's
 * process kin (srn_ctl_trysendmsg need not ask again). */
static int srn_shm_send_req(struct srn_peer *p, bool kin_seen)
{
	struct srn_ctl_connect_req req = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_CONNECT_REQ, 0,
			 sizeof(req) },
		.src_qpn = p->qp->ibqpx.qp_base.qp_num,
		.dst_qpn = p->qpn,
		.src_pid = (uint32_t)srn_pid,
	};
	int kick = srn_progress_kick_fd();

	return kin_seen ? srn_ctl_trysendmsg_kin(p->conn.fd, &req, sizeof(req),
						 &kick, 1) :
			  srn_ctl_trysendmsg(p->conn.fd, &req, sizeof(req),
					     &kick, 1);
}

/*
 * Takes the answer to our CONNECT_REQ; waits for it (up to the socket's
 * timeout) only if may_wait. -EINPROGRESS: not there yet, or the target
 * keeps our request until its RTR (p->deferred): still awaited. Else the
 * target's verdict: 0 (its segments are mapped here: the peer is
 * up), its refusal (-EAGAIN, -EPERM) or a failure; p->broken when mapping
 * failed half-way (the peer cannot be used any more).
 */
static int srn_shm_take_rep(struct srn_peer *p, bool may_wait)
{
	struct srn_ctl_connect_rep rep;
	int fds[SRN_CTL_MAX_FDS], err;
	unsigned nfds = SRN_CTL_MAX_FDS;
	ssize_t n;

	n = may_wait ?
		    srn_ctl_recvmsg(p->conn.fd, &rep, sizeof(rep), fds, &nfds) :
		    srn_ctl_tryrecvmsg(p->conn.fd, &rep, sizeof(rep), fds,
				       &nfds);
	if (n == -ETIMEDOUT || n == -EINTR)
		return -EINPROGRESS;
	p->req_out = false;
	err = n < 0 ? (int)n :
		      srn_shm_check_rep(&rep, n, p->qpn, nfds,
					p->qp->ibqpx.qp_base.qp_type ==
						IBV_QPT_XRC_SEND);
	/* -EINPROGRESS: the target is not past INIT and answers again once
	 * it is (its RTR); until then nothing to send, nothing to wait for */
	p->deferred = err == -EINPROGRESS;
	srn_dbg("QP 0x%06x: QP 0x%06x answered: %s",
		p->qp->ibqpx.qp_base.qp_num, p->qpn, strerror(-err));
	/* the kernel said who listens (the dial): the process whose memory
	 * process_vm_writev may reach is that one, not whom it names */
	if (!err && rep.owner_pid != (uint32_t)p->pid) {
		srn_warn("QP 0x%06x: QP 0x%06x's process %d says it is %u: "
			 "refused",
			 p->qp->ibqpx.qp_base.qp_num, p->qpn, (int)p->pid,
			 rep.owner_pid);
		err = -EPROTO;
		p->broken = true;
	}
	if (!err) {
		err = srn_shm_map_target(p, &rep, fds);
		nfds = 0; /* consumed */
		if (!err)
			err = srn_shm_views(p, p->qpn);
		p->broken = err != 0;
		if (err)
			srn_warn("QP 0x%06x: QP 0x%06x's segments: %s",
				 p->qp->ibqpx.qp_base.qp_num, p->qpn,
				 strerror(-err));
	} else if (err == -EACCES) {
		/* final: its process shares no memory with ours (the two
		 * judged srn_self_kin differently; docs/security.md) */
		p->broken = true;
		srn_warn("QP 0x%06x: QP 0x%06x shares no memory with this "
			 "process: no shm path to it (docs/security.md)",
			 p->qp->ibqpx.qp_base.qp_num, p->qpn);
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	return err;
}

/* The target said no (or nothing useful): ask again later, less often. */
static void srn_shm_refused(struct srn_peer *p, int err, uint64_t now)
{
	if (err != p->refused) { /* once per reason */
		if (err == -EPERM)
			srn_warn("QP 0x%06x: QP 0x%06x does not take us as "
				 "its peer: asking again",
				 p->qp->ibqpx.qp_base.qp_num, p->qpn);
		else
			srn_dbg("QP 0x%06x: QP 0x%06x not ready (%s)",
				p->qp->ibqpx.qp_base.qp_num, p->qpn,
				strerror(-err));
		p->refused = err;
	}
	p->backoff_ns = p->backoff_ns ? p->backoff_ns * 2 :
					SRN_SHM_RETRY_MIN_NS;
	if (p->backoff_ns > SRN_SHM_RETRY_MAX_NS)
		p->backoff_ns = SRN_SHM_RETRY_MAX_NS;
	p->next_try_ns = now + p->backoff_ns;
}

/* Under sq_lock: the handshake is done; tell the other threads. */
static void srn_shm_up(struct srn_peer *p)
{
	snprintf(p->desc, sizeof(p->desc), "shm pid %d qpn 0x%06x", (int)p->pid,
		 p->qpn);
	/* release: pairs with the acquire in srn_shm_describe and
	 * srn_shm_on_hup (desc and the mapped segments are complete) */
	atomic_store_explicit(&p->up, true, memory_order_release);
}

/*
 * The handshake, from its pending state, under sq_lock: asks the target
 * (again: at most once per backoff period, and not while it keeps our
 * request until its RTR) and takes its answer. An application thread
 * waits for the answer to a request (the target's progress thread gives it
 * without waiting for anyone), and for a kept one's only if wait_kept; the
 * progress thread never waits: it leaves the answer for its next retry,
 * which the answer's arrival triggers (srn_shm_on_conn). 0: the peer is
 * up; -EAGAIN: not yet; other: the target's segments could not be mapped
 * (p->broken).
 */
static int srn_shm_ctl_ask(struct srn_peer *p, bool wait_kept)
{
	bool app = !srn_in_progress_thread;
	uint64_t now = srn_now_ns();
	int err;

	if (p->broken)
		return -EPROTO;
	if (!p->req_out && !p->deferred) {
		if (now < p->next_try_ns)
			return -EAGAIN;
		err = srn_shm_send_req(p, false);
		if (err) {
			srn_shm_refused(p, err, now);
			return -EAGAIN;
		}
		p->req_out = true;
	}
	err = srn_shm_take_rep(p, app && (!p->deferred || wait_kept));
	if (err == -EINPROGRESS && p->deferred && app && wait_kept)
		err = srn_shm_take_rep(p, true); /* kept: the second answer */
	if (err == -EINPROGRESS)
		return -EAGAIN;
	if (!err)
		srn_shm_up(p);
	else if (!p->broken)
		srn_shm_refused(p, err, now);
	return p->broken || !err ? err : -EAGAIN;
}

int srn_shm_ctl_retry(struct srn_peer *p)
{
	return srn_shm_ctl_ask(p, false);
}

/* As srn_shm_ctl_retry, for an application thread that needs the peer now
 * (srn_direct_map): a request the target keeps until its RTR is waited for
 * too, up to the socket's timeout. */
int srn_shm_ctl_wait(struct srn_peer *p)
{
	return srn_shm_ctl_ask(p, true);
}

/*
 * INIT->RTR, in the application thread: dial the target QP and ask. Only a
 * missing target, another user's, or segments that cannot be mapped fail
 * the transition; a target that is not ready yet (or refuses for now)
 * leaves the connection pending and the requester asks again.
 */
int srn_shm_ctl_connect(struct srn_peer *p, uint32_t dqpn)
{
	int err;

	p->qpn = dqpn;
	snprintf(p->desc_wait, sizeof(p->desc_wait),
		 "shm qpn 0x%06x (not ready: connecting)", dqpn);
	/* a peer shares memory: its process must be one that may ptrace
	 * ours anyway (srn_self_kin; the mediated path otherwise,
	 * srn_transport_connect, or for a datagram srn_ud_execute's) */
	p->conn.fd =
		srn_ctl_dial_own(p->qp, dqpn, SRN_SHM_CTL_TIMEOUT_S, &p->pid);
	if (p->conn.fd < 0) {
		err = p->conn.fd;
		if (err == -EACCES) /* another user's (said at debug level) */
			return err;
		srn_err("QP 0x%06x: no QP 0x%06x on this host (%s)",
			p->qp->ibqpx.qp_base.qp_num, dqpn, strerror(-err));
		return err == -ECONNREFUSED || err == -ENOENT ? -EINVAL : err;
	}
	/* ask, and take the answer when the QP first needs its peer
	 * (srn_shm_ctl_retry): RTR waits for no other process */
	err = srn_shm_send_req(p, true);
	if (err)
		srn_shm_refused(p, err, srn_now_ns());
	else
		p->req_out = true;
	return 0;
}

/* ---- a peer's life ---- */

static void srn_peer_free(struct srn_peer *p)
{
	srn_peer_unmap_all(p);
	srn_shm_xrc_free(p);
	srn_seg_unmap(&p->qp_seg);
	srn_shm_smap_put(&p->cq_map, &p->cq_seg);
	srn_shm_smap_put(&p->tpt_map, &p->tpt_seg);
	srn_shm_smap_put(&p->srq_map, &p->srq_seg);
	srn_fdshare_put(p->chan_fd);
	srn_fdshare_put(p->kick_fd);
	if (p->conn.fd >= 0)
		close(p->conn.fd);
	free(p);
}

/* Progress thread: the target's end of the connection hung up. Before the
 * handshake, that is no death of a peer: a device would only time out. */
static void srn_shm_on_hup(struct srn_pollable *pl, uint32_t events)
{
	struct srn_peer *p = pl->priv;
	struct srn_ctl_hdr h;
	/* acquire: pairs with the release in srn_shm_up */
	unsigned how = atomic_load_explicit(&p->up, memory_order_acquire) ?
			       SRN_PEER_DEAD :
			       SRN_PEER_CLOSED;

	/* every message the target sent before closing is still queued: a
	 * reset (it closed with messages of ours unread) is reported ahead of
	 * them, once, and hides none (srn_ctl_recvmsg) */
	for (bool reset = false;;) {
		ssize_t n = recv(pl->fd, &h, sizeof(h), MSG_DONTWAIT);

		if (n < 0 && errno == ECONNRESET && !reset) {
			reset = true;
			continue;
		}
		if (n < (ssize_t)sizeof(h))
			break;
		if (h.magic == SRN_CTL_MAGIC && h.type == SRN_CTL_BYE)
			how = SRN_PEER_CLOSED;
	}
	srn_progress_del(pl);
	/* release: pairs with the acquire in srn_shm_execute */
	atomic_store_explicit(&p->gone, how, memory_order_release);
	if (how == SRN_PEER_DEAD && p->datagram) {
		srn_dbg("QP 0x%06x: datagram destination QP 0x%06x gone",
			p->qp->ibqpx.qp_base.qp_num, p->qpn);
	} else if (how == SRN_PEER_DEAD) {
		srn_warn("QP 0x%06x: peer process %d (QP 0x%06x) died",
			 p->qp->ibqpx.qp_base.qp_num, (int)p->pid, p->qpn);
		srn_qp_async_fatal(p->qp);
	} else {
		srn_progress_request_retry(); /* what waits times out */
	}
}

/* Progress thread: the control connection to the target has news. Data
 * (edge-triggered EPOLLIN) is an answer to CONNECT_REQ or MR_REQ that the
 * retry of stalled send queues may be waiting for (srn_shm_ctl_retry,
 * srn_shm_mr_fetch): let it run. */
static void srn_shm_on_conn(struct srn_pollable *pl, uint32_t events)
{
	struct srn_peer *p = pl->priv;
	struct srn_qp *qp = p->qp;
	bool hup = events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);
	bool stalled = false;

	/* take the answer now, if nobody holds the send queue (the peer is
	 * freed only after srn_progress_del, which waits for us); one that
	 * came before a close is then taken first, so that a refusal or a
	 * lie is reported as such. If an application thread holds it (it
	 * may be waiting for that answer itself), a hang-up is handled at
	 * once all the same: the thread may then see the close instead of
	 * the answer, and fails the handshake as for a peer that died */
	if (srn_trylock(&qp->sq_lock)) {
		/* acquire: pairs with the release in srn_shm_up */
		if ((events & EPOLLIN) &&
		    !atomic_load_explicit(&p->up, memory_order_acquire) &&
		    (p->req_out || p->deferred))
			srn_shm_ctl_retry(p);
		stalled = qp->stall != SRN_STALL_NONE;
		srn_unlock(&qp->sq_lock);
	} else if (!hup) {
		srn_progress_request_retry(); /* the holder, or the sweep */
		return;
	}
	if (hup)
		srn_shm_on_hup(pl, events);
	else if (stalled) /* it may wait for this (handshake, MR_REP, ...) */
		srn_progress_request_retry();
}

/* A peer: the control connection to QP dqpn of this host, dialed and
 * asked (its answer may come later: srn_shm_ctl_retry). NULL and *err on
 * failure. */
struct srn_peer *srn_shm_peer_new(struct srn_qp *qp, uint32_t dqpn,
				  bool datagram, int *err)
{
	struct srn_peer *p = calloc(1, sizeof(*p));

	*err = -ENOMEM;
	if (!p)
		return NULL;
	p->qp = qp;
	p->datagram = datagram;
	p->qp_seg.fd = p->cq_seg.fd = p->tpt_seg.fd = p->srq_seg.fd = -1;
	p->chan_fd = p->kick_fd = p->conn.fd = -1;
	*err = srn_shm_ctl_connect(p, dqpn);
	if (*err) {
		srn_peer_free(p);
		return NULL;
	}
	p->conn.fn = srn_shm_on_conn;
	p->conn.priv = p;
	/* the target's answers wake the progress thread (srn_shm_on_conn) */
	*err = srn_progress_add(&p->conn, EPOLLRDHUP | EPOLLIN | EPOLLET);
	if (*err) {
		srn_peer_free(p);
		return NULL;
	}
	return p;
}

/* The inverse: BYE, then the connection closes. */
void srn_shm_peer_del(struct srn_peer *p)
{
	srn_progress_del(&p->conn);
	srn_ctl_bye(p->conn.fd);
	srn_peer_free(p);
}
