// SPDX-License-Identifier: MIT
/*
 * softrnic — the TCP transport, target side: the host-wide listener and the
 * responder.
 *
 * Every process that has the device open listens on the softrnic port
 * (SOFTRNIC_PORT, default 4791) with SO_REUSEPORT, so the kernel spreads
 * incoming connections over them and no daemon is needed. The process
 * that accepts reads HELLO: if it owns the destination QP it answers;
 * otherwise it passes the socket to the owner over the QP's abstract unix
 * socket (SCM_RIGHTS, SRN_CTL_ADOPT) and forgets it. Where several users
 * must be reachable, the optional host daemon holds the port alone and
 * hands every connection over that way (tcp_hostd.c).
 *
 * The responder runs on a link's receive side (tcp_link.c): it checks
 * each request (QP state and access, key, PD, access, bounds), receives
 * payloads straight into the target's registered memory, writes receive
 * completions, and queues answers (READ_RESP, ATOMIC_RESP, NAK) for the
 * link's send side; plain successes are acknowledged cumulatively. A SEND
 * with no receive WQE posted pauses the link (TCP then pushes back on the
 * sender) until a receive is posted.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/srn_ctl_proto.h"
#include "transport/tcp/tcp.h"

static struct srn_pollable srn_tcp_listener = { .fd = -1 };

/* Sends HELLO_ACK (before anything else can use the link). */
static int srn_tcp_hello_ack(struct srn_tcp_link *l, uint32_t err)
{
	struct srn_wire_hdr h;
	struct iovec iov = { &h, sizeof(h) };

	srn_wire_hdr_init(&h, SRN_WOP_HELLO_ACK, 0, 0);
	h.aux = err;
	return srn_tcp_sendv(l->pl.fd, &iov, 1);
}

/* Queues the answer to the current request: data, or a NAK. */
static int srn_tcp_answer(struct srn_tcp_link *c, unsigned op, const void *data,
			  uint32_t len, uint64_t val)
{
	struct srn_tcp_answer a = { .op = (uint8_t)op,
				    .psn = c->rx.hdr.psn,
				    .data = data,
				    .len = len,
				    .val = val };

	if (op == SRN_WOP_ACK)
		a.status = c->ws;
	if (op == SRN_WOP_ACK && c->ws == SRN_WS_RNR)
		a.rkey = srn_qp_rx_get(c->qp).min_rnr_timer;
	if (op == SRN_WOP_ATOMIC_RESP)
		a.len = sizeof(a.val);
	return srn_tcp_link_answer(c, &a);
}

/* ---- requests: where the payload goes ---- */

/* An XRC TGT QP: the XRC SRQ of its domain the request names (NULL:
 * none; the request is invalid). Other QPs: NULL. */
static struct srn_srq *srn_tcp_xsrq(struct srn_tcp_link *c,
				    const struct srn_wire_hdr *h)
{
	struct srn_srq *s;

	if (!c->qp->xrcd ||
	    srn_srq_xrc_lookup(h->srqn, srn_xrcd_id(c->qp->xrcd), &s))
		return NULL;
	return s;
}

/* Where receives, keys and receive completions of the current request
 * are: the QP's, or, on an XRC TGT QP, the named SRQ's (its PD, its
 * context's key table, its CQ). */
static struct srn_rq_view *srn_tcp_rq(struct srn_tcp_link *c)
{
	if (c->qp->xrcd)
		return c->xsrq ? &c->xsrq->rqv : NULL;
	return c->qp->srq ? &c->qp->srq->rqv : &c->qp->rqv;
}

static uint32_t srn_tcp_pd_handle(struct srn_tcp_link *c)
{
	return c->xsrq ? c->xsrq->pd->handle : c->qp->pd->handle;
}

static const struct srn_tpt_shm *srn_tcp_tpt(struct srn_tcp_link *c)
{
	return srn_ctx_tpt(c->xsrq ? c->xsrq->ctx : c->qp->ctx);
}

static struct srn_cq *srn_tcp_recv_cq(struct srn_tcp_link *c)
{
	return c->xsrq ? c->xsrq->cq : c->qp->recv_cq;
}

/* Takes a receive WQE for the current message; -ENOENT: none posted
 * (the request is dropped and NAKed, RNR), or, on an XRC TGT QP, no SRQ
 * of its domain by that number (NAKed as an invalid request). */
static int srn_tcp_take_rwqe(struct srn_tcp_link *c)
{
	struct srn_rq_view *v = srn_tcp_rq(c);
	int err;

	if (c->have_rwqe)
		return 0;
	if (!v) {
		c->ws = SRN_WS_REM_INV_REQ;
		return -ENOENT;
	}
	err = srn_rq_claim(v, &c->rb.w, &c->rq_pos);
	if (err == -EAGAIN) { /* the requester goes back and retries */
		c->ws = SRN_WS_RNR;
		return -ENOENT;
	}
	c->have_rwqe = true;
	if (err)
		c->st = IBV_WC_LOC_PROT_ERR;
	if (c->qp->srq || c->xsrq)
		srn_srq_limit_consumed(v, srn_progress_kick_fd());
	return 0;
}

/* The target's own key check, into a pointer. */
static uint32_t srn_tcp_key(struct srn_tcp_link *c, uint32_t key, uint64_t addr,
			    uint64_t len, unsigned acc, uint8_t **ptr)
{
	struct srn_qp *qp = c->qp;
	struct srn_key_ref ref;

	if (!(srn_qp_rx_get(qp).access & acc) || (qp->xrcd && !c->xsrq))
		return SRN_WS_REM_INV_REQ;
	if (len && srn_rkey_check(srn_tcp_tpt(c), key, srn_tcp_pd_handle(c),
				  qp->ibqpx.qp_base.qp_num, acc, addr, len,
				  &ref) != SRN_KEY_OK)
		return SRN_WS_REM_ACCESS;
	*ptr = len ? (uint8_t *)(uintptr_t)(ref.va + (addr - ref.iova)) : NULL;
	/* an ODP MR (or a window on one): nothing mapped there is a remote
	 * access error, as a device's unresolved page fault */
	if (len && (ref.map_access & IBV_ACCESS_ON_DEMAND) &&
	    srn_odp_fault((uintptr_t)*ptr, len, acc != IBV_ACCESS_REMOTE_READ))
		return SRN_WS_REM_ACCESS;
	return SRN_WS_OK;
}

static int srn_tcp_send_sink(struct srn_tcp_link *c,
			     const struct srn_wire_hdr *h, struct iovec *iov,
			     unsigned *niov)
{
	uint64_t cap = 0;
	int err = srn_tcp_take_rwqe(c);

	if (err == -ENOENT) {
		*niov = 0; /* RNR: drop the message */
		return 0;
	}
	if (c->st != IBV_WC_SUCCESS) {
		c->ws = SRN_WS_REM_OP;
		return 0;
	}
	/* SEND_WITH_INV: the window (type 2, bound to this QP) is invalid
	 * before the receive completes and before any later request */
	if ((h->flags & SRN_WF_INV) &&
	    srn_mw_remote_inv(c->qp->ctx, h->aux,
			      c->qp->ibqpx.qp_base.qp_num)) {
		c->st = IBV_WC_REM_INV_REQ_ERR;
		c->ws = SRN_WS_REM_INV_REQ;
		*niov = 0;
		return 0;
	}
	for (uint32_t i = 0; i < c->rb.w.num_sge; i++) {
		const struct srn_rsge *s = &c->rb.w.sge[i];
		uint64_t w = h->len > cap ? h->len - cap : 0;
		struct srn_key_ref ref;

		if (s->length &&
		    (srn_key_check(srn_tcp_tpt(c), s->lkey,
				   srn_tcp_pd_handle(c), IBV_ACCESS_LOCAL_WRITE,
				   s->addr, s->length, &ref) != SRN_KEY_OK ||
		     srn_key_fault(&ref, s->addr, w < s->length ? w : s->length,
				   true))) {
			c->st = IBV_WC_LOC_PROT_ERR;
			c->ws = SRN_WS_REM_OP;
			*niov = 0;
			return 0;
		}
		iov[i].iov_base =
			s->length ? (void *)(uintptr_t)(ref.va +
							(s->addr - ref.iova)) :
				    NULL;
		iov[i].iov_len = s->length;
		cap += s->length;
	}
	*niov = c->rb.w.num_sge;
	if (h->len > cap) {
		c->st = IBV_WC_LOC_LEN_ERR;
		c->ws = SRN_WS_REM_INV_REQ;
		*niov = 0;
	}
	return 0;
}

/* Is c the link the peer of its QP sends requests on (the only one)? */
static bool srn_tcp_is_peer_link(struct srn_tcp_link *c)
{
	/* acquire: pairs with the release of tstate in srn_tcp_connect (or
	 * srn_tcp_connect_wait); tq is freed only under the progress lock,
	 * which we hold */
	struct srn_tcp_qp *tq =
		__atomic_load_n(&c->qp->tstate, __ATOMIC_ACQUIRE);

	/* acquire: pairs with the release of peer_link in srn_tcp_link_own */
	return tq && __atomic_load_n(&tq->peer_link, __ATOMIC_ACQUIRE) == c;
}

/* A request in sequence: where its payload goes (or what it asks). */
static int srn_tcp_resp_place(struct srn_tcp_link *c,
			      const struct srn_wire_hdr *h, struct iovec *iov,
			      unsigned *niov)
{
	c->st = IBV_WC_SUCCESS;
	c->ws = SRN_WS_OK;
	c->xsrq = srn_tcp_xsrq(c, h);
	if (h->srqn && !c->qp->xrcd) /* only an XRC TGT takes an SRQ's */
		c->ws = SRN_WS_REM_INV_REQ;
	if (c->ws != SRN_WS_OK)
		return 0;
	switch (h->opcode) {
	case SRN_WOP_SEND:
		return srn_tcp_send_sink(c, h, iov, niov);
	case SRN_WOP_WRITE:
		c->ws = srn_tcp_key(c, h->rkey, h->raddr, h->len,
				    IBV_ACCESS_REMOTE_WRITE, &c->ptr);
		if (c->ws == SRN_WS_OK && (h->flags & SRN_WF_IMM))
			srn_tcp_take_rwqe(c); /* none: ws RNR */
		if (c->ws == SRN_WS_OK) {
			iov[0].iov_base = c->ptr;
			iov[0].iov_len = h->len;
			*niov = 1;
		}
		return 0;
	case SRN_WOP_READ_REQ:
		c->ws = srn_tcp_key(c, h->rkey, h->raddr, h->len,
				    IBV_ACCESS_REMOTE_READ, &c->ptr);
		return 0;
	default: /* ATOMIC */
		iov[0].iov_base = &c->at;
		iov[0].iov_len = sizeof(c->at);
		*niov = 1;
		return 0;
	}
}

int srn_tcp_resp_on_hdr(struct srn_tcp_link *c, const struct srn_wire_hdr *h,
			struct iovec *iov, unsigned *niov)
{
	enum ibv_qp_state st;

	if (!c->qp) {
		if (h->opcode != SRN_WOP_HELLO)
			return -EPROTO;
		iov[0].iov_base = &c->hello;
		iov[0].iov_len = sizeof(c->hello);
		*niov = 1;
		return 0;
	}
	if (h->opcode == SRN_WOP_BYE) {
		c->bye = true; /* the peer QP is gone, in order */
		return -ECONNRESET;
	}
	if (h->opcode == SRN_WOP_HELLO)
		return -EPROTO;
	st = srn_qp_state(c->qp);
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT)
		return -EAGAIN; /* not ready to receive: wait for RTR */
	if (!srn_tcp_is_peer_link(c)) {
		/* a candidate: its first request must carry the PSN we
		 * expect (else it is closed, and only it); in ERR it waits
		 * for the QP's next RTR */
		int err = srn_tcp_link_prove(c, h->psn);

		if (err)
			return err;
	}
	if (c->nak_err) {
		/* after an error NAK nothing more is executed (our QP is on
		 * its way to ERR, or there): the sender flushes what follows.
		 * Not ending the link here keeps the NAK from being lost to
		 * a reset */
		c->skip = true;
		return 0;
	}
	if (st == IBV_QPS_ERR)
		return -ESHUTDOWN; /* the link ends: the sender learns it */
	if (h->psn != c->done_psn + 1) { /* a retransmission, or later */
		if (!c->nak_rnr)
			return -EPROTO;
		c->skip = true; /* after our RNR NAK: go back N */
		return 0;
	}
	c->skip = false;
	return srn_tcp_resp_place(c, h, iov, niov);
}

/* ---- requests: complete and answer ---- */

static void srn_tcp_recv_cqe(struct srn_tcp_link *c,
			     const struct srn_wire_hdr *h,
			     enum ibv_wc_opcode opcode)
{
	struct srn_cqe q = {
		.wr_id = c->rb.w.wr_id,
		.status = c->st,
		.opcode = opcode,
		.byte_len = c->st == IBV_WC_SUCCESS ? h->len : 0,
		.qp_num = c->qp->ibqpx.qp_base.qp_num,
		.src_qp = c->hello.src_qpn,
		/* the owner's post_recv then need not read cons (an XRC
		 * SRQ's owner is not told: srn_qp_rq_on_cq) */
		.rq_pos = c->rq_pos,
	};

	if (c->st == IBV_WC_SUCCESS && (h->flags & SRN_WF_IMM)) {
		q.imm_data = h->aux;
		q.wc_flags = IBV_WC_WITH_IMM;
	}
	if (c->st == IBV_WC_SUCCESS && (h->flags & SRN_WF_INV)) {
		q.imm_data = h->aux; /* invalidated_rkey */
		q.wc_flags = IBV_WC_WITH_INV;
	}
	if (c->st != IBV_WC_SUCCESS)
		q.vendor_err = c->st;
	if (h->flags & SRN_WF_SOLICITED)
		q.flags = SRN_CQE_SOLICITED;
	c->have_rwqe = false;
	if (srn_cq_post(&srn_tcp_recv_cq(c)->local, &q))
		srn_cq_check_overflow(srn_tcp_recv_cq(c));
}

static uint32_t srn_tcp_atomic(struct srn_tcp_link *c,
			       const struct srn_wire_hdr *h, uint64_t *old)
{
	uint32_t ws;
	uint64_t *t;

	if (h->raddr & 7)
		return SRN_WS_REM_INV_REQ;
	ws = srn_tcp_key(c, h->rkey, h->raddr, 8, IBV_ACCESS_REMOTE_ATOMIC,
			 &c->ptr);
	if (ws != SRN_WS_OK)
		return ws;
	t = (uint64_t *)c->ptr;
	if (h->flags & SRN_WF_CAS) {
		*old = c->at.compare_add;
		/* seq_cst (success and failure): pairs with the same
		 * operations of other initiators on this word (srn_tcp_atomic
		 * for other links, another transport's initiators); the RMW
		 * makes them atomic, the order is more than IB promises */
		__atomic_compare_exchange_n(t, old, c->at.swap, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	} else {
		/* seq_cst: as above; pairs with the same operations of other
		 * initiators (srn_tcp_atomic for other links) */
		*old = __atomic_fetch_add(t, c->at.compare_add,
					  __ATOMIC_SEQ_CST);
	}
	return SRN_WS_OK;
}

static int srn_tcp_hello_done(struct srn_tcp_link *c);

int srn_tcp_resp_on_msg(struct srn_tcp_link *c, const struct srn_wire_hdr *h)
{
	uint64_t old = 0;
	int err = 0;

	if (!c->qp)
		return srn_tcp_hello_done(c);
	if (c->skip)
		return 0; /* dropped: the requester sends it again */
	c->nak_rnr = false;
	c->xsrq = srn_tcp_xsrq(c, h); /* still there? */
	if (c->qp->xrcd && !c->xsrq && c->have_rwqe)
		c->have_rwqe = false; /* its SRQ went: nowhere to complete */
	switch (h->opcode) {
	case SRN_WOP_SEND:
		if (c->have_rwqe)
			srn_tcp_recv_cqe(c, h, IBV_WC_RECV);
		break;
	case SRN_WOP_WRITE:
		if ((h->flags & SRN_WF_IMM) && c->have_rwqe)
			srn_tcp_recv_cqe(c, h, IBV_WC_RECV_RDMA_WITH_IMM);
		break;
	case SRN_WOP_READ_REQ:
		if (c->ws == SRN_WS_OK)
			err = srn_tcp_answer(c, SRN_WOP_READ_RESP, c->ptr,
					     h->len, 0);
		break;
	default:
		if (c->ws == SRN_WS_OK) /* else refused at its header */
			c->ws = srn_tcp_atomic(c, h, &old);
		if (c->ws == SRN_WS_OK)
			err = srn_tcp_answer(c, SRN_WOP_ATOMIC_RESP, NULL, 0,
					     old);
		break;
	}
	if (c->ws != SRN_WS_OK && c->qp->ibqpx.qp_base.qp_type == IBV_QPT_UC)
		/* UC: what fails here (a key, no receive WQE, too long) drops
		 * the message; the sender is not told and our QP goes on */
		c->ws = SRN_WS_OK;
	if (!err && c->ws != SRN_WS_OK)
		err = srn_tcp_answer(c, SRN_WOP_ACK, NULL, 0, 0); /* a NAK */
	if (err)
		return err;
	if (c->ws == SRN_WS_RNR) { /* not done: drop what follows */
		c->nak_rnr = true;
		return 0;
	}
	srn_tcp_link_done(c, h->psn);
	if (c->ws != SRN_WS_OK) {
		c->nak_err = true; /* drop every later request */
		srn_qp_async_error(c->qp); /* a NAK: the responder fails too */
	}
	return 0;
}

/* ---- connections ---- */

/* The address an accepted connection came from (srn_tcp_link_matches). */
static void srn_tcp_peer_addr(struct srn_tcp_link *c)
{
	struct sockaddr_in sa;
	socklen_t n = sizeof(sa);

	if (!getpeername(c->pl.fd, (struct sockaddr *)&sa, &n) &&
	    sa.sin_family == AF_INET)
		c->peer_ipv4 = sa.sin_addr.s_addr;
}

/* HELLO on c names our QP qp: it takes c (and we say so), or refuses. */
static int srn_tcp_hello_take(struct srn_tcp_link *c, struct srn_qp *qp)
{
	int err;

	srn_tcp_link_name(c);
	err = srn_tcp_link_bind(c, qp);
	if (err) {
		srn_log(SRN_LOG_INFO,
			"QP 0x%06x: refused %s (%s): not the peer its RTR "
			"attributes name, a second link, or a wrong proof",
			qp->ibqpx.qp_base.qp_num, c->desc, strerror(-err));
		srn_tcp_hello_ack(c, -err);
		return -ECONNABORTED; /* costs only this socket */
	}
	return srn_tcp_hello_ack(c, 0);
}

/* HELLO arrived on a connection we accepted: ours, or hand it over. */
static int srn_tcp_hello_done(struct srn_tcp_link *c)
{
	struct srn_qp *qp = srn_progress_find_qp(c->hello.dst_qpn);
	int err;

	if (qp)
		return srn_tcp_hello_take(c, qp);
	err = srn_ctl_handoff(c->hello.dst_qpn, c->pl.fd, &c->hello,
			      sizeof(c->hello));
	if (err)
		srn_tcp_hello_ack(c, ENOENT);
	return -ECONNABORTED; /* the owner has it now: drop our copy */
}

/* May qp take a mediated link? Not while it is connected to a peer by
 * other means (another transport, or a link that is not mediated): only a
 * QP whose peer is another user's has one. Before RTR, or in ERR, it
 * keeps it as a candidate (srn_tcp_link_bind). */
static bool srn_tcp_mediated_ok(struct srn_qp *qp)
{
	enum ibv_qp_state st = srn_qp_state(qp);
	struct srn_tcp_qp *tq;
	bool ok;

	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_ERR)
		return true;
	pthread_mutex_lock(&qp->conn_lock);
	tq = qp->tstate; /* conn_lock held */
	ok = tq && tq->mediated;
	pthread_mutex_unlock(&qp->conn_lock);
	return ok;
}

/* A link for qp whose HELLO was read elsewhere: a hand-over, or mediated
 * (its peer known by the kernel's credentials, not an address). */
static int srn_tcp_adopt_link(struct srn_qp *qp, int fd,
			      const struct srn_wire_hello *hello, bool mediated)
{
	struct srn_tcp_link *c;
	int err;

	c = srn_tcp_link_new(fd);
	if (!c)
		return -ENOMEM;
	c->hello = *hello;
	c->mediated = mediated;
	if (!mediated)
		srn_tcp_peer_addr(c);
	err = srn_tcp_link_add(c);
	if (!err && srn_tcp_hello_take(c, qp))
		err = -EACCES;
	if (err) {
		c->pl.fd = -1; /* the caller closes it */
		srn_tcp_link_free(c);
		return err;
	}
	return 0;
}

/* The owner's side of a hand-over (engine/ctl.c): fd and HELLO already
 * read. -ENOPROTOOPT: not a HELLO of ours. Progress lock held. */
int srn_tcp_adopt(struct srn_qp *qp, int fd, const void *hello, size_t len)
{
	struct srn_wire_hello h;

	if (len != sizeof(h))
		return -ENOPROTOOPT;
	memcpy(&h, hello, len);
	return srn_tcp_adopt_link(qp, fd, &h, false);
}

/* The target's side of a mediated link (engine/ctl.c checked with the
 * kernel that the process at the other end of fd owns QP src_qpn): the
 * HELLO must say so, and name qp. Progress lock held. */
int srn_tcp_mediate(struct srn_qp *qp, int fd, uint32_t src_qpn,
		    const void *hello, size_t len)
{
	struct srn_wire_hello h;

	if (len != sizeof(h))
		return -EPROTO;
	memcpy(&h, hello, len);
	if (h.src_qpn != src_qpn || h.dst_qpn != qp->ibqpx.qp_base.qp_num)
		return -EPERM;
	if (!srn_tcp_mediated_ok(qp))
		return -EACCES;
	return srn_tcp_adopt_link(qp, fd, &h, true);
}

/* QP destroyed: its peers see BYE then the close. Its own request link
 * goes in srn_tcp_disconnect. */
void srn_tcp_qp_destroy(struct srn_qp *qp)
{
	struct srn_list *pos, *tmp;

	srn_progress_lock();
	srn_list_for_each_safe(pos, tmp, &qp->links) {
		struct srn_tcp_link *c =
			container_of(pos, struct srn_tcp_link, pl.link);
		/* acquire: pairs with the release of tstate in
		 * srn_tcp_connect (or srn_tcp_connect_wait) */
		struct srn_tcp_qp *tq =
			__atomic_load_n(&qp->tstate, __ATOMIC_ACQUIRE);

		/* acquire: pairs with the release of tq->link in
		 * srn_tcp_link_bind (or srn_tcp_connect_dial) */
		if (tq && __atomic_load_n(&tq->link, __ATOMIC_ACQUIRE) == c)
			continue;
		srn_tcp_link_bye(c);
		srn_tcp_link_free(c);
	}
	srn_progress_unlock();
}

static uint64_t srn_tcp_listen_paused_until; /* progress lock */

/* Out of fds (or memory): stop listening for a while instead of waking
 * for the same connection again and again (srn_tcp_listen_resume). */
static void srn_tcp_listen_pause(int err)
{
	uint64_t until = srn_now_ns() + SRN_TCP_ACCEPT_PAUSE_NS;

	if (!srn_tcp_listen_paused_until)
		srn_warn("TCP listener: %s; accepting again in %llu ms",
			 strerror(err),
			 (unsigned long long)(SRN_TCP_ACCEPT_PAUSE_NS /
					      1000000));
	srn_tcp_listen_paused_until = until;
	srn_progress_mod(&srn_tcp_listener, 0);
	srn_progress_wake_at(until);
}

/* From the progress work hook: listen again once the pause is over. */
static void srn_tcp_listen_resume(uint64_t now)
{
	if (!srn_tcp_listen_paused_until || srn_tcp_listener.fd < 0)
		return;
	if (now < srn_tcp_listen_paused_until) {
		srn_progress_wake_at(srn_tcp_listen_paused_until);
		return;
	}
	srn_tcp_listen_paused_until = 0;
	srn_progress_mod(&srn_tcp_listener, EPOLLIN);
}

/* A connection: kept if there is room for one more waiting for its HELLO
 * (per source and in all), else closed at once. */
static void srn_tcp_accepted(int fd, uint32_t ipv4)
{
	struct srn_tcp_link *c;

	if (!srn_tcp_pre_hello_room(ipv4)) {
		close(fd);
		return;
	}
	srn_tcp_sock_timeouts(fd);
	c = srn_tcp_link_new(fd);
	if (!c) {
		close(fd);
		return;
	}
	c->peer_ipv4 = ipv4;
	c->accepted = true;
	c->born_ns = srn_now_ns();
	if (srn_tcp_link_add(c))
		srn_tcp_link_free(c);
}

/* An fd kept in reserve (progress lock): out of fds, it is given up for
 * a moment to accept a queued connection and close it at once, so the
 * queue drains (each refused) instead of waiting for fds to free. */
static int srn_tcp_spare_fd = -1;

/* Out of fds: refuses the next queued connection with the spare fd. 0,
 * or -errno when that was not possible either. */
static int srn_tcp_refuse_one(int lfd)
{
	int fd;

	if (srn_tcp_spare_fd < 0)
		return -EMFILE;
	close(srn_tcp_spare_fd);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	srn_tcp_spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? 0 : -errno;
}

/* The listener is readable: takes what is queued, a batch at a time. */
static void srn_tcp_on_accept(struct srn_pollable *pl, uint32_t events)
{
	for (int i = 0; i < SRN_TCP_ACCEPT_BATCH; i++) {
		struct sockaddr_in sa = { 0 };
		socklen_t n = sizeof(sa);
		int fd = accept4(pl->fd, (struct sockaddr *)&sa, &n,
				 SOCK_CLOEXEC | SOCK_NONBLOCK);
		int err = fd < 0 ? errno : 0;

		if ((err == EMFILE || err == ENFILE) &&
		    !srn_tcp_refuse_one(pl->fd))
			continue; /* out of fds: refused, look again */
		if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
		    err == ENOMEM)
			srn_tcp_listen_pause(err);
		if (err)
			return;
		srn_tcp_accepted(fd, sa.sin_addr.s_addr);
	}
}

/* The address to listen on: SOFTRNIC_BIND, else the GID's (network
 * order). Peers dial a QP's GID address, so nothing else is needed. */
static uint32_t srn_tcp_bind_addr(void)
{
	const char *env = getenv("SOFTRNIC_BIND");
	struct in_addr a;

	if (env && inet_pton(AF_INET, env, &a) == 1)
		return a.s_addr;
	if (env)
		srn_warn("SOFTRNIC_BIND=%s is not an IPv4 address; ignored",
			 env);
	return srn_device_get()->ipv4;
}

/* The socket to listen on, or -errno: shared with the host's other
 * processes of our user (SO_REUSEPORT), or the daemon's alone. */
static int srn_tcp_listen_fd(const struct sockaddr_in *sa)
{
	int one = 1, fd, err;

	if (srn_hostd_mode())
		return srn_tcp_hostd_listen(sa);
	fd = srn_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) ||
	    listen(fd, SOMAXCONN)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* We could not listen (err): say so, unless the host daemon (root's,
 * tcp_hostd.c) holds the port: it hands our connections over. */
static void srn_tcp_listen_failed(const char *ip, int err)
{
	int pid = -ENOENT;

	if (err == -EADDRINUSE && !srn_hostd_mode())
		pid = srn_hostd_pid();
	if (pid > 0) {
		srn_dbg("TCP %s:%u is held by the host daemon (pid %d): it "
			"hands connections for our QPs over",
			ip, srn_tcp_port(), pid);
		return;
	}
	srn_warn("TCP %s:%u: %s; %s", ip, srn_tcp_port(), strerror(-err),
		 srn_hostd_mode() ? "the host daemon cannot serve" :
				    "QPs of this process are reachable "
				    "from this host only");
}

/* With the progress thread: listen on the host-wide port, on the GID's
 * address, when TCP may be used at all (not with SOFTRNIC_TRANSPORT=shm).
 * Failure is not fatal (only same-host peers are then reachable). The
 * daemon holds the UDP port too and forwards each datagram to its QP's
 * owner (tcp_ud.c). */
static void srn_tcp_listen_start(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(srn_tcp_port()),
				  .sin_addr.s_addr = srn_tcp_bind_addr() };
	char ip[INET_ADDRSTRLEN];
	int fd;

	srn_udp_start(); /* datagrams: whatever carries connections */
	if (!srn_transport_allowed("tcp"))
		return;
	inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
	fd = srn_tcp_listen_fd(&sa);
	if (fd < 0) {
		srn_tcp_listen_failed(ip, fd);
		return;
	}
	srn_dbg("listening on TCP %s:%u", ip, srn_tcp_port());
	srn_tcp_listener.fd = fd;
	if (srn_tcp_spare_fd < 0)
		srn_tcp_spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	srn_tcp_listener.fn = srn_tcp_on_accept;
	if (srn_progress_add(&srn_tcp_listener, EPOLLIN)) {
		close(fd);
		srn_tcp_listener.fd = -1;
		return;
	}
	if (srn_hostd_mode() && (fd = srn_tcp_hostd_mark_start()))
		srn_warn("host daemon: marker socket @%s: %s",
			 SRN_CTL_HOSTD_SOCK, strerror(-fd));
}

static void srn_tcp_listen_stop(void)
{
	srn_udp_stop();
	srn_tcp_hostd_mark_stop();
	if (srn_tcp_listener.fd < 0)
		return;
	srn_progress_del(&srn_tcp_listener);
	close(srn_tcp_listener.fd);
	srn_tcp_listener.fd = -1;
	srn_tcp_listen_paused_until = 0;
	if (srn_tcp_spare_fd >= 0)
		close(srn_tcp_spare_fd);
	srn_tcp_spare_fd = -1;
}

/* qp reached RTR or RTS: our own responder may wait for it. At RTS its
 * candidates' HELLOs can be checked (srn_tcp_prove_hellos). modify_qp,
 * both QP locks held. */
void srn_tcp_kick(struct srn_qp *qp)
{
	struct srn_tcp_qp *tq;
	bool any, prove;

	pthread_mutex_lock(&qp->conn_lock);
	any = !srn_list_empty(&qp->links);
	tq = qp->tstate; /* conn_lock held */
	prove = any && tq && !tq->peer_link && srn_qp_state(qp) == IBV_QPS_RTS;
	pthread_mutex_unlock(&qp->conn_lock);
	if (prove) {
		srn_progress_lock();
		srn_tcp_prove_hellos(qp);
		srn_progress_unlock();
	}
	if (any)
		srn_progress_kick();
}

static void srn_tcp_work(bool idle)
{
	if (!idle) {
		uint64_t now = srn_now_ns();

		srn_tcp_resume_paused(); /* RNR deadlines */
		srn_tcp_watchdog(now); /* the RC ACK timer, HELLO deadlines */
		srn_tcp_listen_resume(now);
	}
	srn_tcp_flush_work(idle); /* ACKs held back */
}

struct srn_progress_hooks srn_tcp_hooks = {
	.start = srn_tcp_listen_start,
	.stop = srn_tcp_listen_stop,
	.work = srn_tcp_work,
};
