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
 * socket (SCM_RIGHTS, SRN_CTL_TCP_ADOPT) and forgets it.
 *
 * The responder runs in the progress thread: it checks each request (QP
 * state and access, key, PD, access, bounds), receives payloads straight
 * into the target's registered memory, writes receive completions, and
 * answers. A SEND with no receive WQE posted pauses the connection (TCP
 * then pushes back on the sender) until a receive is posted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "srn_ctl_proto.h"
#include "tcp.h"

struct srn_tcp_resp {
	struct srn_pollable pl; /* link: the QP's tcp_conns */
	struct srn_list paused_link;
	struct srn_qp *qp; /* NULL until HELLO */
	struct srn_wire_rx rx;
	struct srn_wire_hello hello;
	struct srn_rwqe_buf rb;
	bool have_rwqe, paused, bye;
	uint64_t rnr_deadline_ns; /* 0: not waiting for a receive */
	enum ibv_wc_status st; /* outcome at the target */
	uint32_t ws; /* answer to the initiator */
	uint8_t *ptr;
	struct srn_wire_atomic at;
};

static struct srn_pollable srn_tcp_listener = { .fd = -1 };
static struct srn_list srn_tcp_paused = SRN_LIST_INIT(srn_tcp_paused);

uint16_t srn_tcp_port(void)
{
	const char *e = getenv("SOFTRNIC_PORT");
	long v = e ? strtol(e, NULL, 10) : 0;

	return v > 0 && v < 65536 ? (uint16_t)v : SRN_TCP_PORT_DEFAULT;
}

static int srn_tcp_answer(struct srn_tcp_resp *c, unsigned op, uint32_t aux,
			  void *data, uint32_t len)
{
	struct srn_wire_hdr h;
	struct iovec iov[2] = { { &h, sizeof(h) }, { data, len } };

	srn_wire_hdr_init(&h, op, c->rx.hdr.psn, len);
	h.aux = aux;
	return srn_tcp_sendv(c->pl.fd, iov, len ? 2 : 1);
}

/* ---- requests: where the payload goes ---- */

static struct srn_rq_view *srn_tcp_rq(struct srn_qp *qp)
{
	return qp->srq ? &qp->srq->rqv : &qp->rqv;
}

/* No receive WQE: wait, as long as the requester's rnr_retry allows
 * (retries x our min_rnr_timer; 7 = forever). -EAGAIN: keep waiting. */
static int srn_tcp_rnr_wait(struct srn_tcp_resp *c)
{
	unsigned retry = (c->rx.hdr.flags & SRN_WF_RNR_MASK) >> SRN_WF_RNR_SHIFT;
	uint64_t now = srn_now_ns();

	if (retry == 7)
		return -EAGAIN;
	if (!c->rnr_deadline_ns) {
		c->rnr_deadline_ns = now + (retry + 1) *
				     srn_rnr_timer_ns(c->qp->attr.min_rnr_timer);
		srn_progress_wake_at(c->rnr_deadline_ns);
	}
	if (now < c->rnr_deadline_ns)
		return -EAGAIN;
	c->rnr_deadline_ns = 0;
	c->ws = SRN_WS_RNR; /* give up: the payload is dropped */
	return -ENOENT;
}

/* Takes a receive WQE for the current message; -EAGAIN: none posted
 * (wait), -ENOENT: none, and the requester's retries are over. */
static int srn_tcp_take_rwqe(struct srn_tcp_resp *c)
{
	struct srn_rq_view *v = srn_tcp_rq(c->qp);
	int err;

	if (c->have_rwqe)
		return 0;
	err = srn_rq_claim(v, &c->rb.w);
	if (err == -EAGAIN) {
		/* release: the owner's post_recv exchanges it and kicks us */
		__atomic_store_n(&v->rq->peer_waiting, SRN_WAIT_RNR,
				 __ATOMIC_RELEASE);
		err = srn_rq_claim(v, &c->rb.w);
	}
	if (err == -EAGAIN)
		return srn_tcp_rnr_wait(c);
	c->rnr_deadline_ns = 0;
	c->have_rwqe = true;
	if (err)
		c->st = IBV_WC_LOC_PROT_ERR;
	if (c->qp->srq)
		srn_srq_limit_consumed(v, srn_progress_kick_fd());
	return 0;
}

/* The target's own key check, into a pointer. */
static uint32_t srn_tcp_key(struct srn_tcp_resp *c, uint32_t key,
			    uint64_t addr, uint64_t len, unsigned acc,
			    uint8_t **ptr)
{
	struct srn_qp *qp = c->qp;
	struct srn_key_ref ref;

	if (!(qp->attr.qp_access_flags & acc))
		return SRN_WS_REM_INV_REQ;
	if (len && srn_key_check(srn_ctx_tpt(qp->ctx), key, qp->pd->handle,
				 acc, addr, len, &ref) != SRN_KEY_OK)
		return SRN_WS_REM_ACCESS;
	*ptr = len ? (uint8_t *)(uintptr_t)(ref.va + (addr - ref.iova)) : NULL;
	return SRN_WS_OK;
}

static int srn_tcp_send_sink(struct srn_tcp_resp *c,
			     const struct srn_wire_hdr *h, struct iovec *iov,
			     unsigned *niov)
{
	uint64_t cap = 0;
	int err = srn_tcp_take_rwqe(c);

	if (err == -ENOENT) {
		*niov = 0; /* RNR retries exceeded: drop the message */
		return 0;
	}
	if (err)
		return err;
	if (c->st != IBV_WC_SUCCESS) {
		c->ws = SRN_WS_REM_OP;
		return 0;
	}
	for (uint32_t i = 0; i < c->rb.w.num_sge; i++) {
		const struct srn_rsge *s = &c->rb.w.sge[i];
		struct srn_key_ref ref;

		if (s->length &&
		    srn_key_check(srn_ctx_tpt(c->qp->ctx), s->lkey,
				  c->qp->pd->handle, IBV_ACCESS_LOCAL_WRITE,
				  s->addr, s->length, &ref) != SRN_KEY_OK) {
			c->st = IBV_WC_LOC_PROT_ERR;
			c->ws = SRN_WS_REM_OP;
			*niov = 0;
			return 0;
		}
		iov[i].iov_base = s->length ? (void *)(uintptr_t)(
			ref.va + (s->addr - ref.iova)) : NULL;
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

static int srn_tcp_on_req_hdr(void *ctx, const struct srn_wire_hdr *h,
			      struct iovec *iov, unsigned *niov)
{
	struct srn_tcp_resp *c = ctx;
	enum ibv_qp_state st;

	if (!c->qp) {
		if (h->opcode != SRN_WOP_HELLO)
			return -EPROTO;
		iov[0].iov_base = &c->hello;
		iov[0].iov_len = sizeof(c->hello);
		*niov = 1;
		return 0;
	}
	if (h->opcode == SRN_WOP_BYE || h->opcode == SRN_WOP_HELLO)
		return h->opcode == SRN_WOP_BYE ? (c->bye = true, 0) : -EPROTO;
	st = srn_qp_state(c->qp);
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT)
		return -EAGAIN; /* not ready to receive: wait for RTR */
	if (st == IBV_QPS_ERR)
		return -ECONNABORTED; /* a device drops it: the sender fails */
	c->st = IBV_WC_SUCCESS;
	c->ws = SRN_WS_OK;
	switch (h->opcode) {
	case SRN_WOP_SEND:
		return srn_tcp_send_sink(c, h, iov, niov);
	case SRN_WOP_WRITE:
		c->ws = srn_tcp_key(c, h->rkey, h->raddr, h->len,
				    IBV_ACCESS_REMOTE_WRITE, &c->ptr);
		if (c->ws == SRN_WS_OK && (h->flags & SRN_WF_IMM)) {
			int err = srn_tcp_take_rwqe(c);

			if (err == -EAGAIN)
				return err;
		}
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

/* ---- requests: complete and answer ---- */

static void srn_tcp_recv_cqe(struct srn_tcp_resp *c,
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
	};

	if (c->st == IBV_WC_SUCCESS && (h->flags & SRN_WF_IMM)) {
		q.imm_data = h->aux;
		q.wc_flags = IBV_WC_WITH_IMM;
	}
	if (c->st != IBV_WC_SUCCESS)
		q.vendor_err = c->st;
	if (h->flags & SRN_WF_SOLICITED)
		q.flags = SRN_CQE_SOLICITED;
	c->have_rwqe = false;
	if (srn_cq_post(&c->qp->recv_cq->local, &q))
		srn_cq_check_overflow(c->qp->recv_cq);
}

static uint32_t srn_tcp_atomic(struct srn_tcp_resp *c,
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
		__atomic_compare_exchange_n(t, old, c->at.swap, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	} else {
		*old = __atomic_fetch_add(t, c->at.compare_add,
					  __ATOMIC_SEQ_CST);
	}
	return SRN_WS_OK;
}

static int srn_tcp_hello_done(struct srn_tcp_resp *c);

static int srn_tcp_on_req(void *ctx, const struct srn_wire_hdr *h)
{
	struct srn_tcp_resp *c = ctx;
	uint64_t old = 0;
	int err = 0;

	if (!c->qp)
		return srn_tcp_hello_done(c);
	switch (h->opcode) {
	case SRN_WOP_BYE:
		return 0;
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
			return srn_tcp_answer(c, SRN_WOP_READ_RESP, 0, c->ptr,
					      h->len);
		break;
	default:
		c->ws = srn_tcp_atomic(c, h, &old);
		if (c->ws == SRN_WS_OK)
			return srn_tcp_answer(c, SRN_WOP_ATOMIC_RESP, 0, &old,
					      sizeof(old));
		break;
	}
	err = srn_tcp_answer(c, SRN_WOP_ACK, c->ws, NULL, 0);
	if (c->ws != SRN_WS_OK && c->ws != SRN_WS_RNR)
		srn_qp_async_error(c->qp); /* a NAK: the responder fails too */
	return err;
}

static const struct srn_wire_sink srn_tcp_req_sink = {
	.on_hdr = srn_tcp_on_req_hdr,
	.on_msg = srn_tcp_on_req,
};

/* ---- connections ---- */

static void srn_tcp_resp_free(struct srn_tcp_resp *c)
{
	srn_progress_del(&c->pl);
	if (c->paused)
		srn_list_del(&c->paused_link);
	if (c->qp) {
		pthread_mutex_lock(&c->qp->conn_lock);
		srn_list_del(&c->pl.link);
		pthread_mutex_unlock(&c->qp->conn_lock);
	}
	if (c->pl.fd >= 0)
		close(c->pl.fd);
	atomic_fetch_sub_explicit(&srn_tcp_active, 1, memory_order_relaxed);
	free(c);
}

static void srn_tcp_on_request(struct srn_pollable *pl, uint32_t events)
{
	struct srn_tcp_resp *c = pl->priv;
	int err = srn_wire_recv(&c->rx, pl->fd, &srn_tcp_req_sink, c);

	if (err == -EAGAIN) { /* paused: stop reading until kicked */
		if (!c->paused) {
			c->paused = true;
			srn_list_add_tail(&c->paused_link, &srn_tcp_paused);
			srn_progress_mod(pl, EPOLLRDHUP);
		}
		return;
	}
	if (!err && !(events & (EPOLLHUP | EPOLLERR)))
		return;
	if (c->qp && !c->bye && err != -ECONNABORTED) {
		srn_warn("QP 0x%06x: peer QP 0x%06x went away (%s)",
			 c->qp->ibqpx.qp_base.qp_num, c->hello.src_qpn,
			 strerror(err ? -err : ECONNRESET));
		srn_qp_async_error(c->qp);
	}
	srn_tcp_resp_free(c);
}

/* Progress thread, after a kick: paused connections try again. */
void srn_tcp_resume_paused(void)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &srn_tcp_paused) {
		struct srn_tcp_resp *c =
			srn_list_entry(pos, struct srn_tcp_resp, paused_link);

		srn_list_del(&c->paused_link);
		c->paused = false;
		srn_progress_mod(&c->pl, EPOLLIN | EPOLLRDHUP);
		srn_tcp_on_request(&c->pl, 0);
	}
}

static struct srn_tcp_resp *srn_tcp_resp_new(int fd)
{
	struct srn_tcp_resp *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c)
		return NULL;
	atomic_fetch_add_explicit(&srn_tcp_active, 1, memory_order_relaxed);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->pl.fd = fd;
	c->pl.fn = srn_tcp_on_request;
	c->pl.priv = c;
	srn_list_init(&c->pl.link);
	srn_list_init(&c->paused_link);
	srn_wire_rx_init(&c->rx, true);
	return c;
}

static void srn_tcp_bind(struct srn_tcp_resp *c, struct srn_qp *qp)
{
	c->qp = qp;
	pthread_mutex_lock(&qp->conn_lock);
	srn_list_add_tail(&c->pl.link, &qp->tcp_conns);
	pthread_mutex_unlock(&qp->conn_lock);
}

/* HELLO arrived on a connection we accepted: ours, or hand it over. */
static int srn_tcp_hello_done(struct srn_tcp_resp *c)
{
	struct srn_qp *qp = srn_progress_find_qp(c->hello.dst_qpn);
	int err;

	if (qp) {
		srn_tcp_bind(c, qp);
		return srn_tcp_answer(c, SRN_WOP_HELLO_ACK, 0, NULL, 0);
	}
	err = srn_ctl_handoff(c->hello.dst_qpn, c->pl.fd, &c->hello,
			      sizeof(c->hello));
	if (err) {
		srn_tcp_answer(c, SRN_WOP_HELLO_ACK, ENOENT, NULL, 0);
		return -ECONNABORTED;
	}
	return -ECONNABORTED; /* the owner has it now: drop our copy */
}

/* The owner's side of a hand-over (ctl.c): fd and HELLO already read. */
int srn_tcp_adopt(struct srn_qp *qp, int fd,
		  const struct srn_wire_hello *hello)
{
	struct srn_tcp_resp *c = srn_tcp_resp_new(fd);
	int err;

	if (!c)
		return -ENOMEM;
	c->hello = *hello;
	c->rx.hdr.psn = 0;
	srn_tcp_bind(c, qp);
	err = srn_tcp_answer(c, SRN_WOP_HELLO_ACK, 0, NULL, 0);
	if (!err)
		err = srn_progress_add(&c->pl, EPOLLIN | EPOLLRDHUP);
	if (err)
		srn_tcp_resp_free(c);
	return err;
}

/* QP destroyed: its peers see BYE then the close. */
void srn_tcp_unlisten(struct srn_qp *qp)
{
	struct srn_list *pos, *tmp;

	srn_progress_lock();
	srn_list_for_each_safe(pos, tmp, &qp->tcp_conns) {
		struct srn_tcp_resp *c =
			container_of(pos, struct srn_tcp_resp, pl.link);
		struct srn_wire_hdr h;

		srn_wire_hdr_init(&h, SRN_WOP_BYE, 0, 0);
		send(c->pl.fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
		srn_tcp_resp_free(c);
	}
	srn_progress_unlock();
}

static void srn_tcp_on_accept(struct srn_pollable *pl, uint32_t events)
{
	int fd = accept4(pl->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct srn_tcp_resp *c;

	if (fd < 0)
		return;
	c = srn_tcp_resp_new(fd);
	if (!c) {
		close(fd);
		return;
	}
	if (srn_progress_add(&c->pl, EPOLLIN | EPOLLRDHUP))
		srn_tcp_resp_free(c);
}

/* With the progress thread: listen on the host-wide port. Failure is not
 * fatal (only same-host peers are then reachable). */
void srn_tcp_listen_start(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(srn_tcp_port()),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 128)) {
		srn_dbg("TCP port %u: %m; other hosts cannot reach us",
			srn_tcp_port());
		close(fd);
		return;
	}
	srn_tcp_listener.fd = fd;
	srn_tcp_listener.fn = srn_tcp_on_accept;
	if (srn_progress_add(&srn_tcp_listener, EPOLLIN)) {
		close(fd);
		srn_tcp_listener.fd = -1;
	}
}

void srn_tcp_listen_stop(void)
{
	if (srn_tcp_listener.fd < 0)
		return;
	srn_progress_del(&srn_tcp_listener);
	close(srn_tcp_listener.fd);
	srn_tcp_listener.fd = -1;
}
