// SPDX-License-Identifier: MIT
/*
 * softrnic — XRC over shared memory.
 *
 * An XRC INI QP connects to its TGT QP like RC (shm_ctl.c), but the TGT
 * has no receive queue: every request names an XRC SRQ of the TGT's
 * process (w->xrc_srqn). The first time it meets a number the initiator
 * asks the TGT's process for it (XSRQ_REQ on the attached connection,
 * answered here on the target side after checking the SRQ is in the TGT
 * QP's XRC domain) and maps the SRQ's ring and its CQ, once per process
 * however many connections use them (shm_smap.c, as RC's). Before each
 * request the peer's receive views and PD (p->rqv, p->cqv, p->pd_handle)
 * are pointed at that SRQ's, so the rest of the transport places SENDs
 * and checks keys as for an RC QP with an SRQ.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/shm/shm.h"

/* ---- target side ---- */

static void srn_shm_on_xsrq_req(struct srn_ctl_conn *c, const void *msg,
				size_t len, int *fds_in, unsigned *nfds_p)
{
	const struct srn_ctl_xsrq_req *req = msg;
	struct srn_qp *qp = srn_ctl_conn_qp(c);
	struct srn_ctl_xsrq_rep rep = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_XSRQ_REP, 0,
			 sizeof(rep) },
		.srqn = req->srqn,
	};
	struct srn_srq *srq = NULL;
	int fds[SRN_XSRQFD_NR];
	unsigned n = 0;
	int err = -EPERM;

	(void)len;
	(void)fds_in;
	(void)nfds_p;
	if (qp->xrcd) /* the progress lock keeps the SRQ (ibv_destroy_srq) */
		err = srn_srq_xrc_lookup(req->srqn, srn_xrcd_id(qp->xrcd),
					 &srq);
	if (!err && srq->ctx != qp->ctx)
		err = -EOPNOTSUPP;
	if (err) {
		rep.hdr.status = err;
		srn_ctl_sendmsg(srn_ctl_conn_fd(c), &rep, sizeof(rep), NULL, 0);
		return;
	}
	rep.pd_handle = srq->pd->handle;
	fds[n++] = srq->seg.fd;
	fds[n++] = srq->cq->seg.fd;
	rep.fd_mask = 1u << SRN_XSRQFD_SRQ | 1u << SRN_XSRQFD_CQ;
	if (srq->cq->chan) {
		fds[n++] = srq->cq->chan->ibch.fd;
		rep.fd_mask |= 1u << SRN_XSRQFD_CHANNEL;
	}
	if (srn_ctl_reply(srn_ctl_conn_fd(c), &rep.hdr, fds, n))
		srn_warn("QP 0x%06x: XRC SRQ reply failed",
			 qp->ibqpx.qp_base.qp_num);
}

__attribute__((constructor)) static void srn_shm_xrc_init(void)
{
	srn_ctl_handler_set(SRN_CTL_XSRQ_REQ, srn_shm_on_xsrq_req);
}

/* ---- initiator side ---- */

void srn_shm_xrc_free(struct srn_peer *p)
{
	if (!p->xsrq)
		return;
	for (unsigned i = 0; i < SRN_XSRQ_CACHE; i++) {
		struct srn_xsrq *x = &p->xsrq[i];

		srn_shm_smap_put(&x->srq_map, &x->srq_seg);
		srn_shm_smap_put(&x->cq_map, &x->cq_seg);
		if (x->chan_fd >= 0)
			close(x->chan_fd);
	}
	free(p->xsrq);
	p->xsrq = NULL;
}

static int srn_xsrq_check(const struct srn_ctl_xsrq_rep *r, ssize_t n,
			  uint32_t srqn, unsigned nfds)
{
	const uint32_t need = 1u << SRN_XSRQFD_SRQ | 1u << SRN_XSRQFD_CQ;

	if (n != (ssize_t)sizeof(*r) || r->hdr.magic != SRN_CTL_MAGIC ||
	    r->hdr.version != SRN_CTL_VERSION ||
	    r->hdr.type != SRN_CTL_XSRQ_REP || r->hdr.len != sizeof(*r) ||
	    r->srqn != srqn)
		return -EPROTO;
	if (r->hdr.status)
		return r->hdr.status < 0 && r->hdr.status > -4096 ?
			       r->hdr.status :
			       -EPROTO;
	if ((r->fd_mask & need) != need || (r->fd_mask >> SRN_XSRQFD_NR) ||
	    (unsigned)__builtin_popcount(r->fd_mask) != nfds)
		return -EPROTO;
	return 0;
}

/* Maps what the target sent into slot x; fds are consumed. */
static int srn_xsrq_map(struct srn_peer *p, struct srn_xsrq *x,
			const struct srn_ctl_xsrq_rep *r, int *fds)
{
	const int rw = PROT_READ | PROT_WRITE;
	struct srn_srq_shm *s;
	int err;

	x->chan_fd = (r->fd_mask & (1u << SRN_XSRQFD_CHANNEL)) ? fds[2] : -1;
	/* the SRQ and its CQ: this process's mapping of them if another
	 * connection has one (smap_get consumes the descriptor) */
	err = srn_shm_smap_get(&x->srq_map, &x->srq_seg, fds[0], p->pid,
			       SRN_SEG_SRQ, sizeof(struct srn_srq_shm), rw);
	if (err) {
		close(fds[1]);
		return err;
	}
	err = srn_shm_smap_get(&x->cq_map, &x->cq_seg, fds[1], p->pid,
			       SRN_SEG_CQ, sizeof(struct srn_cq_shm), rw);
	if (err)
		return err;
	s = x->srq_seg.addr;
	if (s->pd_handle != r->pd_handle)
		return -EPROTO;
	x->pd_handle = r->pd_handle;
	err = srn_rq_view_init(&x->rqv, &s->rq, s, x->srq_seg.size);
	if (!err)
		err = srn_cq_view_init(&x->cqv, x->cq_seg.addr, x->cq_seg.size,
				       x->chan_fd, p->kick_fd);
	if (!err)
		x->srqn = r->srqn;
	return err;
}

/* Asks the TGT's process for XRC SRQ srqn and maps it into a free slot;
 * an application thread, with no MR_REQ in flight on the connection. */
static int srn_xsrq_fetch(struct srn_peer *p, uint32_t srqn,
			  struct srn_xsrq **x_p)
{
	struct srn_ctl_xsrq_req req = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_XSRQ_REQ, 0,
			 sizeof(req) },
		.srqn = srqn,
	};
	struct srn_ctl_xsrq_rep rep;
	int fds[SRN_CTL_MAX_FDS];
	unsigned nfds = SRN_CTL_MAX_FDS;
	struct srn_xsrq *x;
	ssize_t n;
	int err;

	err = srn_ctl_sendmsg(p->conn.fd, &req, sizeof(req), NULL, 0);
	if (err)
		return err;
	n = srn_ctl_recvmsg(p->conn.fd, &rep, sizeof(rep), fds, &nfds);
	if (n < 0)
		return (int)n;
	err = srn_xsrq_check(&rep, n, srqn, nfds);
	x = &p->xsrq[p->xsrq_next++ % SRN_XSRQ_CACHE];
	srn_shm_smap_put(&x->srq_map, &x->srq_seg);
	srn_shm_smap_put(&x->cq_map, &x->cq_seg);
	if (x->chan_fd >= 0)
		close(x->chan_fd);
	memset(x, 0, sizeof(*x));
	x->srq_seg.fd = x->cq_seg.fd = x->chan_fd = -1;
	if (!err) {
		err = srn_xsrq_map(p, x, &rep, fds);
		nfds = 0; /* consumed */
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	*x_p = x;
	return err;
}

static struct srn_xsrq *srn_xsrq_find(struct srn_peer *p, uint32_t srqn)
{
	for (unsigned i = 0; i < SRN_XSRQ_CACHE; i++)
		if (p->xsrq[i].srqn && p->xsrq[i].srqn == srqn)
			return &p->xsrq[i];
	return NULL;
}

/*
 * Before a request of an XRC INI QP (sq_lock held): points the peer's
 * receive views and PD at the XRC SRQ w->xrc_srqn. 1: go on; 0: the
 * request fails (*status: the TGT has no such SRQ in its domain, which
 * a device NAKs as an invalid request); -EAGAIN: *stall (an application
 * thread must fetch it).
 */
int srn_shm_xrc_select(struct srn_peer *p, const struct srn_swqe *w,
		       enum ibv_wc_status *status, enum srn_stall *stall)
{
	struct srn_xsrq *x;
	int err;

	if (!p->xsrq) {
		p->xsrq = calloc(SRN_XSRQ_CACHE, sizeof(*p->xsrq));
		if (!p->xsrq) {
			*status = IBV_WC_LOC_QP_OP_ERR;
			return 0;
		}
		for (unsigned i = 0; i < SRN_XSRQ_CACHE; i++)
			p->xsrq[i].srq_seg.fd = p->xsrq[i].cq_seg.fd =
				p->xsrq[i].chan_fd = -1;
	}
	x = srn_xsrq_find(p, w->xrc_srqn);
	if (!x) {
		if (srn_in_progress_thread || p->mr_asked) {
			*stall = SRN_STALL_FETCH; /* the next post or poll */
			return -EAGAIN;
		}
		err = srn_xsrq_fetch(p, w->xrc_srqn, &x);
		if (err == -ENOENT || err == -EPERM || err == -EOPNOTSUPP) {
			*status = IBV_WC_REM_INV_REQ_ERR;
			srn_resp_error(p);
			return 0;
		}
		if (err) {
			*status = IBV_WC_RETRY_EXC_ERR;
			return 0;
		}
	}
	p->rqv = x->rqv;
	p->cqv = x->cqv;
	p->pd_handle = x->pd_handle;
	p->has_srq = true;
	return 1;
}
