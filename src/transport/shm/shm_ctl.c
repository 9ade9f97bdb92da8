// SPDX-License-Identifier: MIT
/*
 * softrnic — the shared-memory transport's control messages
 * (proto/srn_ctl_proto.h), carried by the host control plane
 * (engine/ctl.c).
 *
 * Target side (progress thread): CONNECT_REQ is answered with the target
 * QP's segments (QP, receive CQ, key table, SRQ) and kick fds; MR_REQ with
 * the memfds of an MR. Initiator side: srn_shm_ctl_connect() runs in the
 * application thread that moves its QP to RTR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/shm/shm.h"

#define SRN_SHM_CTL_TIMEOUT_S 5

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

	if (req->dst_qpn != rep.qpn || fd < 0 ||
	    srn_ctl_conn_attach(c, req->src_qpn, fd)) {
		rep.hdr.status = -EINVAL;
		if (fd >= 0)
			close(fd);
		srn_ctl_sendmsg(srn_ctl_conn_fd(c), &rep, sizeof(rep), NULL, 0);
		return;
	}
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
	if (srn_ctl_sendmsg(srn_ctl_conn_fd(c), &rep, sizeof(rep), fds, n))
		srn_warn("QP 0x%06x: connect reply failed", rep.qpn);
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
	srn_ctl_sendmsg(srn_ctl_conn_fd(c), &rep, sizeof(rep), fds,
			reg.npieces);
	for (unsigned i = 0; i < reg.npieces; i++)
		close(fds[i]);
}

static void srn_shm_on_msg(struct srn_ctl_conn *c, const void *msg, size_t len,
			   int *fds, unsigned *nfds_p)
{
	const struct srn_ctl_hdr *h = msg;

	if (h->type == SRN_CTL_CONNECT_REQ &&
	    len == sizeof(struct srn_ctl_connect_req)) {
		srn_shm_on_connect(c, msg, *nfds_p == 1 ? fds[0] : -1);
		if (*nfds_p == 1)
			*nfds_p = 0; /* kept or closed by srn_shm_on_connect */
	} else if (h->type == SRN_CTL_MR_REQ &&
		   len == sizeof(struct srn_ctl_mr_req)) {
		srn_shm_on_mr_req(c, msg);
	} else {
		srn_warn("control message rejected (type %u, %zu bytes)",
			 h->type, len);
	}
}

__attribute__((constructor)) static void srn_shm_ctl_init(void)
{
	srn_ctl_handler_set(SRN_CTL_CONNECT_REQ, srn_shm_on_msg);
	srn_ctl_handler_set(SRN_CTL_MR_REQ, srn_shm_on_msg);
}

/* ---- initiator side ---- */

static int srn_shm_check_rep(const struct srn_ctl_connect_rep *r, ssize_t n,
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
static int srn_shm_map_target(struct srn_peer *p,
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

static int srn_shm_handshake(struct srn_peer *p, uint32_t dqpn)
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
	err = n < 0 ? (int)n : srn_shm_check_rep(&rep, n, dqpn, nfds);
	if (!err) {
		p->pid = rep.owner_pid;
		err = srn_shm_map_target(p, &rep, fds);
		nfds = 0; /* consumed (mapped or closed below by the peer) */
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	return err ? err : srn_shm_views(p, dqpn);
}

int srn_shm_ctl_connect(struct srn_peer *p, uint32_t dqpn)
{
	int err;

	p->conn.fd = srn_ctl_dial(dqpn, SRN_SHM_CTL_TIMEOUT_S);
	if (p->conn.fd < 0) {
		err = p->conn.fd;
		srn_err("QP 0x%06x: no QP 0x%06x on this host (%s)",
			p->qp->ibqpx.qp_base.qp_num, dqpn, strerror(-err));
		return err == -ECONNREFUSED || err == -ENOENT ? -EINVAL : err;
	}
	err = srn_shm_handshake(p, dqpn);
	if (err) {
		srn_err("QP 0x%06x: connecting to QP 0x%06x failed: %s",
			p->qp->ibqpx.qp_base.qp_num, dqpn, strerror(-err));
		return err;
	}
	snprintf(p->desc, sizeof(p->desc), "shm pid %d qpn 0x%06x", (int)p->pid,
		 dqpn);
	return 0;
}
