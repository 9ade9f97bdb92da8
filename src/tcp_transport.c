// SPDX-License-Identifier: MIT
/*
 * softrnic — the TCP transport, initiator side (docs/wire.md).
 *
 * At RTR the QP connects to the destination host's softrnic port and says
 * HELLO; the target's responder (tcp_responder.c) answers HELLO_ACK. Then
 * the application thread that rings the doorbell sends each request itself
 * (sendmsg straight from the registered buffers, no hand-off, no copy),
 * and the WQE stays in flight until the progress thread reads its response
 * (ACK, READ_RESP straight into the local buffers, ATOMIC_RESP) and
 * completes it in order.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp.h"
#include "transport.h"

struct srn_tcp_peer {
	struct srn_pollable pl; /* responses, hang-up */
	struct srn_qp *qp;
	uint32_t tx_psn; /* under sq_lock */
	uint64_t resp_pos; /* progress thread: SQ position answered next */
	struct srn_wire_rx rx;
	enum ibv_wc_status resp_status;
	atomic_uint gone;
	char desc[64];
};

static enum ibv_wc_status srn_tcp_status(uint32_t ws)
{
	static const enum ibv_wc_status map[SRN_WS_NR] = {
		[SRN_WS_OK] = IBV_WC_SUCCESS,
		[SRN_WS_RNR] = IBV_WC_RNR_RETRY_EXC_ERR,
		[SRN_WS_REM_ACCESS] = IBV_WC_REM_ACCESS_ERR,
		[SRN_WS_REM_INV_REQ] = IBV_WC_REM_INV_REQ_ERR,
		[SRN_WS_REM_OP] = IBV_WC_REM_OP_ERR,
	};

	return ws < SRN_WS_NR ? map[ws] : IBV_WC_REM_OP_ERR;
}

/* Sends the whole iovec list (blocking in the kernel when the socket is
 * full, never spinning). */
int srn_tcp_sendv(int fd, struct iovec *iov, unsigned n)
{
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n };

	while (mh.msg_iovlen) {
		ssize_t k = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (k < 0) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			poll(&p, 1, 1000);
			continue;
		}
		while (mh.msg_iovlen && (size_t)k >= mh.msg_iov->iov_len) {
			k -= mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + k;
			mh.msg_iov->iov_len -= k;
		}
	}
	return 0;
}

void srn_wire_hdr_init(struct srn_wire_hdr *h, unsigned op, uint32_t psn,
		       uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->magic = SRN_WIRE_MAGIC;
	h->version = SRN_WIRE_VERSION;
	h->opcode = op;
	h->psn = psn;
	h->len = len;
}

/* ---- requests ---- */

static void srn_tcp_req_hdr(const struct srn_swqe *w, struct srn_wire_hdr *h)
{
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM ||
		   w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	switch (w->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		srn_wire_hdr_init(h, SRN_WOP_SEND, w->psn, (uint32_t)w->total_len);
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		srn_wire_hdr_init(h, SRN_WOP_WRITE, w->psn,
				  (uint32_t)w->total_len);
		break;
	case IBV_WR_RDMA_READ:
		srn_wire_hdr_init(h, SRN_WOP_READ_REQ, w->psn,
				  (uint32_t)w->total_len);
		break;
	default:
		srn_wire_hdr_init(h, SRN_WOP_ATOMIC, w->psn,
				  sizeof(struct srn_wire_atomic));
		if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
			h->flags |= SRN_WF_CAS;
		break;
	}
	if (imm) {
		h->flags |= SRN_WF_IMM;
		h->aux = w->imm_data;
	}
	if (w->send_flags & IBV_SEND_SOLICITED)
		h->flags |= SRN_WF_SOLICITED;
	h->rkey = w->rkey;
	h->raddr = w->remote_addr;
}

static int srn_tcp_execute(struct srn_qp *qp, const struct srn_swqe *cw,
			   enum ibv_wc_status *status, enum srn_stall *stall)
{
	struct srn_tcp_peer *p = qp->tpriv;
	struct srn_swqe *w = (struct srn_swqe *)cw;
	const struct srn_opcode_info *op = srn_opcode_get(w->opcode);
	struct iovec iov[SRN_MAX_SGE + 2];
	struct srn_wire_atomic at;
	struct srn_wire_hdr h;
	unsigned n = 0;
	bool local_write = op->flags & SRN_OP_LOCAL_WRITE;

	if (atomic_load_explicit(&p->gone, memory_order_acquire)) {
		*status = IBV_WC_RETRY_EXC_ERR;
		return 0;
	}
	if (srn_local_iov(qp, w, local_write ? IBV_ACCESS_LOCAL_WRITE : 0,
			  iov + 1, &n)) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	/* release: the progress thread matches the answer against it
	 * (pairs with the acquire in srn_tcp_on_resp_hdr) */
	__atomic_store_n(&w->psn, p->tx_psn++, __ATOMIC_RELEASE);
	srn_tcp_req_hdr(w, &h);
	h.flags |= (qp->attr.rnr_retry & 7u) << SRN_WF_RNR_SHIFT;
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	if (local_write) { /* READ/atomic: only the request goes out */
		n = 0;
		if (op->flags & SRN_OP_REMOTE_ATOMIC) {
			at.compare_add = w->compare_add;
			at.swap = w->swap;
			iov[1].iov_base = &at;
			iov[1].iov_len = sizeof(at);
			n = 1;
		}
	}
	if (srn_tcp_sendv(qp->tcp_fd, iov, n + 1)) {
		*status = IBV_WC_RETRY_EXC_ERR; /* the connection broke */
		return 0;
	}
	return -EINPROGRESS;
}

/* ---- responses (progress thread) ---- */

static int srn_tcp_on_resp_hdr(void *ctx, const struct srn_wire_hdr *h,
			       struct iovec *iov, unsigned *niov)
{
	struct srn_tcp_peer *p = ctx;
	struct srn_qp *qp = p->qp;
	struct srn_swqe *w;

	if (h->opcode == SRN_WOP_BYE)
		return -ECONNRESET;
	/* The answer may come back before the requester has moved sent
	 * past the WQE: check against what was posted, and the psn. */
	if (p->resp_pos >= __atomic_load_n(&qp->sq.prod, __ATOMIC_ACQUIRE))
		return -EPROTO; /* an answer to nothing we asked */
	w = srn_sq_wqe(qp, p->resp_pos);
	/* acquire: pairs with the release in srn_tcp_execute */
	if (h->psn != __atomic_load_n(&w->psn, __ATOMIC_ACQUIRE))
		return -EPROTO;
	p->resp_status = IBV_WC_SUCCESS;
	if (h->opcode == SRN_WOP_ACK) {
		p->resp_status = srn_tcp_status(h->aux);
		return 0;
	}
	if ((h->opcode == SRN_WOP_READ_RESP &&
	     (w->opcode != IBV_WR_RDMA_READ || h->len != w->total_len)) ||
	    (h->opcode == SRN_WOP_ATOMIC_RESP &&
	     !(srn_opcode_get(w->opcode)->flags & SRN_OP_REMOTE_ATOMIC)))
		return -EPROTO;
	/* the local SGEs were checked when the request left; check again
	 * (an MR may have gone meanwhile) and land the data there */
	if (srn_local_iov(qp, w, IBV_ACCESS_LOCAL_WRITE, iov, niov)) {
		*niov = 0;
		p->resp_status = IBV_WC_LOC_PROT_ERR;
	}
	return 0;
}

static int srn_tcp_on_resp(void *ctx, const struct srn_wire_hdr *h)
{
	struct srn_tcp_peer *p = ctx;
	struct srn_qp *qp = p->qp;
	struct srn_swqe *w = srn_sq_wqe(qp, p->resp_pos);

	srn_lock(&qp->comp_lock);
	if (!w->done) { /* not flushed meanwhile */
		w->status = p->resp_status;
		w->done = 1;
	}
	srn_unlock(&qp->comp_lock);
	p->resp_pos++;
	srn_req_complete(qp);
	if (p->resp_status != IBV_WC_SUCCESS)
		srn_qp_async_error(qp);
	return 0;
}

static const struct srn_wire_sink srn_tcp_resp_sink = {
	.on_hdr = srn_tcp_on_resp_hdr,
	.on_msg = srn_tcp_on_resp,
};

static void srn_tcp_on_readable(struct srn_pollable *pl, uint32_t events)
{
	struct srn_tcp_peer *p = pl->priv;
	int err = srn_wire_recv(&p->rx, pl->fd, &srn_tcp_resp_sink, p);
	unsigned how;

	if (!err && !(events & (EPOLLHUP | EPOLLERR)))
		return;
	srn_progress_del(pl);
	/* BYE then end of stream: the peer QP was destroyed in order */
	how = err == -ECONNRESET && p->rx.hdr.opcode == SRN_WOP_BYE ?
		      SRN_TCP_CLOSED :
		      SRN_TCP_DEAD;
	/* release: pairs with the acquire in srn_tcp_execute */
	atomic_store_explicit(&p->gone, how, memory_order_release);
	if (how == SRN_TCP_DEAD)
		srn_warn("QP 0x%06x: connection to %s lost (%s)",
			 p->qp->ibqpx.qp_base.qp_num, p->desc,
			 strerror(err ? -err : ECONNRESET));
	/* Requests still unanswered never will be: like a device whose
	 * retries run out, the QP fails. A quiet QP whose peer left in
	 * order fails only when it next sends (RETRY_EXC_ERR). */
	if (how == SRN_TCP_DEAD ||
	    p->resp_pos != __atomic_load_n(&p->qp->sq.sent, __ATOMIC_ACQUIRE))
		srn_qp_async_error(p->qp);
}

/* ---- connection ---- */

static int srn_tcp_hello(int fd, struct srn_qp *qp, uint32_t dqpn)
{
	struct srn_wire_hello hello = { .src_qpn = qp->ibqpx.qp_base.qp_num,
					.dst_qpn = dqpn };
	struct srn_wire_hdr h, rep;
	struct iovec iov[2] = { { &h, sizeof(h) }, { &hello, sizeof(hello) } };
	size_t got = 0;

	memcpy(hello.src_gid, srn_device_get()->gid.raw, 16);
	srn_wire_hdr_init(&h, SRN_WOP_HELLO, 0, sizeof(hello));
	if (srn_tcp_sendv(fd, iov, 2))
		return -ECONNRESET;
	while (got < sizeof(rep)) {
		ssize_t k = recv(fd, (char *)&rep + got, sizeof(rep) - got, 0);

		if (k <= 0)
			return k == 0 ? -ECONNRESET : -errno;
		got += k;
	}
	if (srn_wire_hdr_check(&rep, false) != 0 ||
	    rep.opcode != SRN_WOP_HELLO_ACK)
		return -EPROTO;
	return rep.aux ? -(int)(rep.aux & 0xfff) : 0;
}

static int srn_tcp_dial(const union ibv_gid *dgid, uint32_t dqpn,
			struct srn_qp *qp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(srn_tcp_port()) };
	struct timeval tv = { 5, 0 };
	unsigned user_timeout_ms = SRN_TCP_USER_TIMEOUT_MS;
	int one = 1, fd, err;

	memcpy(&sa.sin_addr.s_addr, dgid->raw + 12, 4);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a peer host that vanishes without a reset: data unacknowledged
	 * for this long breaks the connection (then ERR, flush) */
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
		   sizeof(user_timeout_ms));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		err = -errno;
	else
		err = srn_tcp_hello(fd, qp, dqpn);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

static int srn_tcp_connect(struct srn_qp *qp, const struct ibv_qp_attr *attr)
{
	struct srn_tcp_peer *p = calloc(1, sizeof(*p));
	char ip[INET_ADDRSTRLEN];
	int fd = -ECONNRESET, err;

	if (!p)
		return -ENOMEM;
	/* a connection can land in a process that is just closing its
	 * listener: try a few times */
	for (int i = 0; i < 3 && (fd == -ECONNRESET || fd == -ECONNREFUSED);
	     i++)
		fd = srn_tcp_dial(&attr->ah_attr.grh.dgid, attr->dest_qp_num,
				  qp);
	inet_ntop(AF_INET, attr->ah_attr.grh.dgid.raw + 12, ip, sizeof(ip));
	if (fd < 0) {
		srn_err("QP 0x%06x: connecting to QP 0x%06x at %s:%u: %s",
			qp->ibqpx.qp_base.qp_num, attr->dest_qp_num, ip,
			srn_tcp_port(), strerror(-fd));
		free(p);
		return fd == -ENOENT ? -EINVAL : fd;
	}
	p->qp = qp;
	p->pl.fd = fd;
	p->pl.fn = srn_tcp_on_readable;
	p->pl.priv = p;
	srn_wire_rx_init(&p->rx, false);
	snprintf(p->desc, sizeof(p->desc), "tcp %s qpn 0x%06x", ip,
		 attr->dest_qp_num);
	qp->tcp_fd = fd;
	qp->tpriv = p;
	err = srn_progress_add(&p->pl, EPOLLIN | EPOLLRDHUP);
	if (err) {
		qp->tpriv = NULL;
		close(fd);
		free(p);
		return err;
	}
	atomic_fetch_add_explicit(&srn_tcp_active, 1, memory_order_relaxed);
	return 0;
}

static void srn_tcp_disconnect(struct srn_qp *qp)
{
	struct srn_tcp_peer *p = qp->tpriv;
	struct srn_wire_hdr h;

	if (!p)
		return;
	srn_progress_del(&p->pl);
	srn_wire_hdr_init(&h, SRN_WOP_BYE, 0, 0);
	send(p->pl.fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(p->pl.fd);
	free(p);
	qp->tpriv = NULL;
	qp->tcp_fd = -1;
	atomic_fetch_sub_explicit(&srn_tcp_active, 1, memory_order_relaxed);
}

static const char *srn_tcp_describe(struct srn_qp *qp)
{
	struct srn_tcp_peer *p = qp->tpriv;

	return p ? p->desc : "tcp (not connected)";
}

const struct srn_transport_ops srn_tcp_transport_ops = {
	.name = "tcp",
	.async = true,
	.connect = srn_tcp_connect,
	.disconnect = srn_tcp_disconnect,
	.execute = srn_tcp_execute,
	.describe = srn_tcp_describe,
};
