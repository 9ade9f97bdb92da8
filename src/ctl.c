// SPDX-License-Identifier: MIT
/*
 * softrnic — the same-host control plane (srn_ctl_proto.h).
 *
 * Target side: every QP listens on an abstract unix socket named after its
 * QPN; the progress thread accepts, answers CONNECT_REQ and MR_REQ with
 * file descriptors, and watches the connection for the initiator's death.
 * Initiator side: srn_ctl_connect() runs in the application thread that
 * moves its QP to RTR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "shm_transport.h"
#include "tcp.h"
#include "transport.h"

#define SRN_CTL_TIMEOUT_S 5

struct srn_ctl_conn {
	struct srn_pollable pl;
	struct srn_qp *qp; /* the target QP */
	int kick_fd; /* the initiator's progress kick */
	uint32_t src_qpn;
	bool connected; /* CONNECT_REQ answered */
	bool bye;
};

static socklen_t srn_ctl_addr(struct sockaddr_un *sa, uint32_t qpn)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
		     SRN_CTL_SOCK_FMT, qpn);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

int srn_ctl_sendmsg(int fd, const void *msg, size_t len, const int *fds,
		    unsigned nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * SRN_CTL_MAX_FDS)];
	struct iovec iov = { (void *)msg, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (nfds > SRN_CTL_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)len)
		return errno ? -errno : -EPROTO;
	return 0;
}

/* Receives one message and the fds that came with it (*nfds in: room,
 * out: count). Truncated messages or fd lists are an error. */
ssize_t srn_ctl_recvmsg(int fd, void *msg, size_t len, int *fds,
			unsigned *nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * SRN_CTL_MAX_FDS)];
	struct iovec iov = { msg, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	unsigned room = *nfds, got = 0;
	struct cmsghdr *cm;
	ssize_t n;

	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		unsigned k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (unsigned i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
			if (got < room)
				fds[got++] = f;
			else
				close(f);
		}
	}
	*nfds = got;
	if (n == 0)
		return -ECONNRESET;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (unsigned i = 0; i < got; i++)
			close(fds[i]);
		*nfds = 0;
		return -EPROTO;
	}
	return n;
}

void srn_ctl_bye(int fd)
{
	struct srn_ctl_hdr h = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_BYE, 0,
				 sizeof(h) };

	if (fd >= 0 && send(fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		srn_dbg("BYE on fd %d: %m", fd);
}

/* ---- target side ---- */

static void srn_ctl_conn_close(struct srn_ctl_conn *c)
{
	srn_progress_del(&c->pl);
	pthread_mutex_lock(&c->qp->conn_lock);
	srn_list_del(&c->pl.link);
	pthread_mutex_unlock(&c->qp->conn_lock);
	close(c->pl.fd);
	if (c->kick_fd >= 0)
		close(c->kick_fd);
	free(c);
}

static void srn_ctl_on_connect(struct srn_ctl_conn *c,
			       const struct srn_ctl_connect_req *req, int fd)
{
	struct srn_qp *qp = c->qp;
	struct srn_ctl_connect_rep rep = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_CONNECT_REP, 0,
			 sizeof(rep) },
		.qpn = qp->ibqpx.qp_base.qp_num,
		.owner_pid = (uint32_t)srn_pid,
	};
	int fds[SRN_REPFD_NR];
	unsigned n = 0;

	if (req->dst_qpn != rep.qpn || fd < 0 || c->connected) {
		rep.hdr.status = -EINVAL;
		if (fd >= 0)
			close(fd);
		srn_ctl_sendmsg(c->pl.fd, &rep, sizeof(rep), NULL, 0);
		return;
	}
	/* kick_fd is read by srn_ctl_kick_peers under conn_lock */
	pthread_mutex_lock(&qp->conn_lock);
	c->kick_fd = fd;
	pthread_mutex_unlock(&qp->conn_lock);
	c->src_qpn = req->src_qpn;
	c->connected = true;
	fds[n++] = qp->seg.fd;
	fds[n++] = qp->recv_cq->seg.fd;
	fds[n++] = qp->ctx->tpt_seg.fd;
	fds[n++] = srn_progress_kick_fd();
	rep.fd_mask = (1u << SRN_REPFD_QP) | (1u << SRN_REPFD_CQ) |
		      (1u << SRN_REPFD_TPT) | (1u << SRN_REPFD_KICK);
	if (qp->recv_cq->chan) {
		fds[n++] = qp->recv_cq->chan->ibch.fd;
		rep.fd_mask |= 1u << SRN_REPFD_CHANNEL;
	}
	if (qp->srq) {
		fds[n++] = qp->srq->seg.fd;
		rep.fd_mask |= 1u << SRN_REPFD_SRQ;
	}
	if (srn_ctl_sendmsg(c->pl.fd, &rep, sizeof(rep), fds, n))
		srn_warn("QP 0x%06x: connect reply failed", rep.qpn);
}

static void srn_ctl_on_mr_req(struct srn_ctl_conn *c,
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
	err = srn_mr_export(c->qp->ctx, req->key, &ref, &reg);
	if (err) {
		rep.hdr.status = err;
		srn_ctl_sendmsg(c->pl.fd, &rep, sizeof(rep), NULL, 0);
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
	srn_ctl_sendmsg(c->pl.fd, &rep, sizeof(rep), fds, reg.npieces);
	for (unsigned i = 0; i < reg.npieces; i++)
		close(fds[i]);
}

static void srn_ctl_on_stat(struct srn_ctl_conn *c)
{
	struct srn_qp *qp = c->qp;
	struct srn_ctl_stat_rep r = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_STAT_REP, 0,
			 sizeof(r) },
		.qpn = qp->ibqpx.qp_base.qp_num,
		.pid = (uint32_t)srn_pid,
		.state = srn_qp_state(qp),
		.dest_qpn = __atomic_load_n(&qp->shm->dest_qpn,
					    __ATOMIC_ACQUIRE),
	};
	/* tops and tpriv change under sq_lock; the progress lock we hold
	 * keeps a connection from being freed meanwhile */
	const struct srn_transport_ops *t = qp->tops;

	if (t) {
		snprintf(r.transport, sizeof(r.transport), "%s", t->name);
		snprintf(r.desc, sizeof(r.desc), "%s", t->describe(qp));
	}
	srn_ctl_sendmsg(c->pl.fd, &r, sizeof(r), NULL, 0);
}

/* Progress thread: a request, or the initiator went away. */
static void srn_ctl_on_conn(struct srn_pollable *pl, uint32_t events)
{
	struct srn_ctl_conn *c = container_of(pl, struct srn_ctl_conn, pl);
	union {
		struct srn_ctl_hdr h;
		struct srn_ctl_connect_req conn;
		struct srn_ctl_mr_req mr;
		struct srn_ctl_tcp_adopt adopt;
	} m;
	int fds[SRN_CTL_MAX_FDS];
	unsigned nfds = SRN_CTL_MAX_FDS;
	ssize_t n = srn_ctl_recvmsg(pl->fd, &m, sizeof(m), fds, &nfds);

	if (n < 0) { /* hang-up: without BYE, the initiator crashed */
		if (n != -ETIMEDOUT && n != -EINTR) {
			if (c->connected && !c->bye) {
				srn_warn("QP 0x%06x: peer QP 0x%06x died",
					 c->qp->ibqpx.qp_base.qp_num,
					 c->src_qpn);
				srn_cq_peer_died(c->qp->recv_cq);
				srn_qp_async_error(c->qp);
			}
			srn_ctl_conn_close(c);
		}
		return;
	}
	if (n < (ssize_t)sizeof(m.h) || m.h.magic != SRN_CTL_MAGIC ||
	    m.h.version != SRN_CTL_VERSION || m.h.len != (uint32_t)n) {
		srn_warn("control message rejected (%zd bytes)", n);
	} else if (m.h.type == SRN_CTL_CONNECT_REQ && n == sizeof(m.conn)) {
		srn_ctl_on_connect(c, &m.conn, nfds == 1 ? fds[0] : -1);
		nfds = nfds == 1 ? 0 : nfds;
	} else if (m.h.type == SRN_CTL_MR_REQ && n == sizeof(m.mr)) {
		srn_ctl_on_mr_req(c, &m.mr);
	} else if (m.h.type == SRN_CTL_TCP_ADOPT && n == sizeof(m.adopt) &&
		   nfds == 1 &&
		   m.adopt.dst_qpn == c->qp->ibqpx.qp_base.qp_num) {
		struct srn_wire_hello hello;

		memcpy(&hello, m.adopt.hello, sizeof(hello));
		if (!srn_tcp_adopt(c->qp, fds[0], &hello))
			nfds = 0; /* the responder owns the fd now */
	} else if (m.h.type == SRN_CTL_STAT_REQ && n == sizeof(m.h)) {
		srn_ctl_on_stat(c);
	} else if (m.h.type == SRN_CTL_BYE) {
		c->bye = true;
		srn_dbg("QP 0x%06x: BYE from QP 0x%06x", c->qp->ibqpx.qp_base.qp_num, c->src_qpn);
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
}

static void srn_ctl_on_accept(struct srn_pollable *pl, uint32_t events)
{
	struct srn_qp *qp = pl->priv;
	struct srn_ctl_conn *c;
	int fd = accept4(pl->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->qp = qp;
	c->kick_fd = -1;
	c->pl.fd = fd;
	c->pl.fn = srn_ctl_on_conn;
	c->pl.priv = c;
	pthread_mutex_lock(&qp->conn_lock);
	srn_list_add_tail(&c->pl.link, &qp->conns);
	pthread_mutex_unlock(&qp->conn_lock);
	if (srn_progress_add(&c->pl, EPOLLIN | EPOLLRDHUP))
		srn_ctl_conn_close(c);
}

/* Binds a free QPN on this host and listens on it. */
int srn_ctl_listen(struct srn_qp *qp)
{
	struct srn_pollable *pl = calloc(1, sizeof(*pl));
	struct sockaddr_un sa;
	uint32_t qpn = 0;
	int fd, err = -EADDRINUSE;

	if (!pl)
		return -ENOMEM;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		free(pl);
		return -errno;
	}
	if (getrandom(&qpn, sizeof(qpn), 0) != sizeof(qpn))
		qpn = (uint32_t)srn_now_ns();
	for (int i = 0; i < 4096; i++) {
		socklen_t len;

		qpn = 0x100 + (qpn % (0xffffffu - 0x100));
		len = srn_ctl_addr(&sa, qpn);
		err = bind(fd, (struct sockaddr *)&sa, len) ? -errno : 0;
		if (err != -EADDRINUSE)
			break;
		qpn += 7919;
	}
	if (!err && listen(fd, 64))
		err = -errno;
	if (err) {
		close(fd);
		free(pl);
		return err;
	}
	qp->ibqpx.qp_base.qp_num = qpn;
	pl->fd = fd;
	pl->fn = srn_ctl_on_accept;
	pl->priv = qp;
	srn_list_init(&pl->link);
	qp->listener = pl;
	err = srn_progress_add(pl, EPOLLIN);
	if (err)
		srn_ctl_unlisten(qp);
	return err;
}

/* Closes the listener and every accepted connection (with BYE). */
void srn_ctl_unlisten(struct srn_qp *qp)
{
	struct srn_list *pos, *tmp;

	srn_progress_lock();
	if (qp->listener) {
		srn_progress_del(qp->listener);
		close(qp->listener->fd);
		free(qp->listener);
		qp->listener = NULL;
	}
	srn_list_for_each_safe(pos, tmp, &qp->conns) {
		struct srn_ctl_conn *c =
			container_of(pos, struct srn_ctl_conn, pl.link);

		srn_ctl_bye(c->pl.fd);
		srn_ctl_conn_close(c);
	}
	srn_progress_unlock();
}

/* Wakes the progress threads of the initiators connected to qp. */
void srn_ctl_kick_peers(struct srn_qp *qp)
{
	struct srn_list *pos, *tmp;

	pthread_mutex_lock(&qp->conn_lock);
	srn_list_for_each_safe(pos, tmp, &qp->conns) {
		struct srn_ctl_conn *c =
			container_of(pos, struct srn_ctl_conn, pl.link);

		if (c->kick_fd >= 0)
			srn_kick_fd(c->kick_fd);
	}
	if (!srn_list_empty(&qp->tcp_conns))
		srn_progress_kick(); /* our own responder may be waiting */
	pthread_mutex_unlock(&qp->conn_lock);
}

/* ---- initiator side ---- */

static int srn_ctl_check_rep(const struct srn_ctl_connect_rep *r, ssize_t n,
			     uint32_t dqpn, unsigned nfds)
{
	const uint32_t need = (1u << SRN_REPFD_QP) | (1u << SRN_REPFD_CQ) |
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

/* Maps what the target sent; fds are consumed. */
static int srn_ctl_map_target(struct srn_peer *p,
			      const struct srn_ctl_connect_rep *r, int *fds)
{
	int f[SRN_REPFD_NR], err;
	unsigned k = 0;

	for (int i = 0; i < SRN_REPFD_NR; i++)
		f[i] = (r->fd_mask & (1u << i)) ? fds[k++] : -1;
	p->chan_fd = f[SRN_REPFD_CHANNEL];
	p->kick_fd = f[SRN_REPFD_KICK];
	err = srn_seg_map(&p->qp_seg, f[SRN_REPFD_QP], SRN_SEG_QP,
			  sizeof(struct srn_qp_shm), PROT_READ | PROT_WRITE);
	if (err)
		return err;
	f[SRN_REPFD_QP] = -1;
	err = srn_seg_map(&p->cq_seg, f[SRN_REPFD_CQ], SRN_SEG_CQ,
			  sizeof(struct srn_cq_shm), PROT_READ | PROT_WRITE);
	if (err)
		return err;
	f[SRN_REPFD_CQ] = -1;
	err = srn_seg_map(&p->tpt_seg, f[SRN_REPFD_TPT], SRN_SEG_TPT,
			  sizeof(struct srn_tpt_shm), PROT_READ);
	if (err)
		return err;
	f[SRN_REPFD_TPT] = -1;
	if (f[SRN_REPFD_SRQ] >= 0) {
		err = srn_seg_map(&p->srq_seg, f[SRN_REPFD_SRQ], SRN_SEG_SRQ,
				  sizeof(struct srn_srq_shm),
				  PROT_READ | PROT_WRITE);
		if (err)
			return err;
		f[SRN_REPFD_SRQ] = -1;
	}
	return 0;
}

static int srn_ctl_views(struct srn_peer *p, uint32_t dqpn)
{
	struct srn_qp_shm *t = p->qp_seg.addr;
	int err;

	p->tqp = t;
	p->tpt = p->tpt_seg.addr;
	p->qpn = dqpn;
	p->pd_handle = __atomic_load_n(&t->pd_handle, __ATOMIC_RELAXED);
	p->has_srq = __atomic_load_n(&t->has_srq, __ATOMIC_RELAXED);
	if (t->hdr.id != dqpn || p->has_srq != (p->srq_seg.addr != NULL))
		return -EPROTO;
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

static int srn_ctl_handshake(struct srn_peer *p, uint32_t dqpn)
{
	struct srn_ctl_connect_req req = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_CONNECT_REQ, 0,
			 sizeof(req) },
		.src_qpn = p->qp->ibqpx.qp_base.qp_num,
		.dst_qpn = dqpn,
		.src_pid = (uint32_t)srn_pid,
	};
	struct srn_ctl_connect_rep rep;
	int kick = srn_progress_kick_fd(), fds[SRN_CTL_MAX_FDS], err;
	unsigned nfds = SRN_CTL_MAX_FDS;
	ssize_t n;

	err = srn_ctl_sendmsg(p->conn.fd, &req, sizeof(req), &kick, 1);
	if (err)
		return err;
	n = srn_ctl_recvmsg(p->conn.fd, &rep, sizeof(rep), fds, &nfds);
	err = n < 0 ? (int)n : srn_ctl_check_rep(&rep, n, dqpn, nfds);
	if (!err) {
		p->pid = rep.owner_pid;
		err = srn_ctl_map_target(p, &rep, fds);
		nfds = 0; /* consumed (mapped or closed below by the peer) */
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	return err ? err : srn_ctl_views(p, dqpn);
}

int srn_ctl_connect(struct srn_peer *p, uint32_t dqpn)
{
	struct timeval tv = { SRN_CTL_TIMEOUT_S, 0 };
	struct sockaddr_un sa;
	socklen_t len = srn_ctl_addr(&sa, dqpn);
	int err;

	p->conn.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (p->conn.fd < 0)
		return -errno;
	setsockopt(p->conn.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(p->conn.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(p->conn.fd, (struct sockaddr *)&sa, len)) {
		err = -errno;
		srn_err("QP 0x%06x: no QP 0x%06x on this host (%s)",
			p->qp->ibqpx.qp_base.qp_num, dqpn, strerror(-err));
		return err == -ECONNREFUSED || err == -ENOENT ? -EINVAL : err;
	}
	err = srn_ctl_handshake(p, dqpn);
	if (err) {
		srn_err("QP 0x%06x: connecting to QP 0x%06x failed: %s",
			p->qp->ibqpx.qp_base.qp_num, dqpn, strerror(-err));
		return err;
	}
	snprintf(p->desc, sizeof(p->desc), "shm pid %d qpn 0x%06x",
		 (int)p->pid, dqpn);
	return 0;
}

/* Passes an accepted TCP connection to the process that owns QP qpn. */
int srn_ctl_handoff(uint32_t qpn, int fd, const void *hello, size_t len)
{
	struct srn_ctl_tcp_adopt m = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_TCP_ADOPT, 0,
			 sizeof(m) },
		.dst_qpn = qpn,
	};
	struct sockaddr_un sa;
	socklen_t salen = srn_ctl_addr(&sa, qpn);
	int s, err;

	if (len != sizeof(m.hello))
		return -EINVAL;
	memcpy(m.hello, hello, len);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	err = connect(s, (struct sockaddr *)&sa, salen) ? -errno : 0;
	if (!err)
		err = srn_ctl_sendmsg(s, &m, sizeof(m), &fd, 1);
	close(s);
	return err;
}
