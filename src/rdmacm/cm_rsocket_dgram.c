// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: datagram rsockets (SOCK_DGRAM, docs/rsockets.md).
 *
 * One UD QP per rsocket (Q_Key RDMA_UDP_QKEY), moved to RTS by hand. Its
 * port is an rdma_cm port of RDMA_PS_UDP on which the rsocket listens, so
 * that a sender can find its QP: the sender's first datagram to an
 * address resolves it with rdma_cm (address, route, SIDR), answered here
 * from the rsocket's event channel with the QP's number; the AH is kept.
 * Each datagram carries a struct srn_rs_dgram_hdr (proto/srn_rs_proto.h)
 * naming its sender. As with UDP, nothing is retransmitted: a datagram
 * that finds no receive buffer is lost.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/rs.h"
#include "util/srn_compiler.h"
#include "util/util.h"

#define SRN_RS_GRH 40
#define SRN_RS_DGRAM_MTU 4096 /* header + data, at most */
#define SRN_RS_DGRAM_MAX (SRN_RS_DGRAM_MTU - sizeof(struct srn_rs_dgram_hdr))
#define SRN_RS_DGRAM_BUFS 256
#define SRN_RS_DGRAM_SLOTS 64
#define SRN_RS_QKEY 0x01234567u /* RDMA_UDP_QKEY */

static int srn_rs_dg_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qkey = SRN_RS_QKEY };

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		return -EIO;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -EIO;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) ? -EIO : 0;
}

static int srn_rs_dg_qp(struct srn_rs *rs, struct ibv_context *ctx)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_UD, .sq_sig_all = 1 };

	rs->pd = ibv_alloc_pd(ctx);
	rs->cch = ibv_create_comp_channel(ctx);
	if (!rs->pd || !rs->cch || srn_rs_nonblock_fd(rs->cch->fd))
		return -ENOMEM;
	rs->cq = ibv_create_cq(ctx, rs->sq_depth + rs->nrbuf, rs, rs->cch, 0);
	if (!rs->cq)
		return -ENOMEM;
	a.send_cq = rs->cq;
	a.recv_cq = rs->cq;
	a.cap.max_send_wr = rs->sq_depth;
	a.cap.max_recv_wr = rs->nrbuf;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	rs->qp = ibv_create_qp(rs->pd, &a);
	if (!rs->qp)
		return -(errno ? errno : ENOMEM);
	return srn_rs_dg_rts(rs->qp);
}

/* The UD QP, its buffers posted, on softrnic's device. */
static int srn_rs_dg_setup(struct srn_rs *rs)
{
	struct ibv_context **devs = rdma_get_devices(NULL);
	uint32_t i;
	int ret;

	if (!devs || !devs[0]) {
		rdma_free_devices(devs);
		return -ENODEV;
	}
	rs->rbuf_size = SRN_RS_GRH + SRN_RS_DGRAM_MTU;
	rs->nrbuf = rs->rbufs = SRN_RS_DGRAM_BUFS;
	rs->nsbuf = SRN_RS_DGRAM_SLOTS;
	rs->sq_depth = rs->nsbuf;
	rs->peer_buf = SRN_RS_DGRAM_MTU;
	ret = srn_rs_dg_qp(rs, devs[0]);
	rdma_free_devices(devs);
	if (!ret)
		ret = srn_rs_map(rs->pd, (size_t)rs->nrbuf * rs->rbuf_size,
				 IBV_ACCESS_LOCAL_WRITE, &rs->rbuf,
				 &rs->rbuf_len, &rs->rmr);
	if (!ret)
		ret = srn_rs_map(rs->pd, (size_t)rs->nsbuf * rs->peer_buf, 0,
				 &rs->sbuf, &rs->sbuf_len, &rs->smr);
	rs->rq_idx = calloc(rs->nrbuf, sizeof(*rs->rq_idx));
	rs->rq_len = calloc(rs->nrbuf, sizeof(*rs->rq_len));
	if (!ret && (!rs->rq_idx || !rs->rq_len))
		ret = -ENOMEM;
	for (i = 0; !ret && i < rs->nrbuf; i++)
		ret = srn_rs_post_recv(rs, i);
	return ret;
}

/* A SIDR request for our port: answered with our QP's number. */
static void srn_rs_dg_on_cm(struct srn_rs *rs, struct rdma_cm_event *ev)
{
	struct rdma_conn_param p = { .qp_num = rs->qp->qp_num };
	struct rdma_cm_id *id = ev->id;

	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return;
	if (rdma_accept(id, &p))
		srn_warn("rsocket %d: SIDR answer failed: %s", rs->fd,
			 strerror(errno));
	rdma_destroy_id(id);
}

struct srn_rs *srn_rs_dg_new(int domain)
{
	struct srn_rs *rs = srn_rs_alloc(domain);
	int ret;

	if (!rs)
		return NULL;
	rs->dgram = true;
	rs->on_cm = srn_rs_dg_on_cm;
	rs->rch = rdma_create_event_channel();
	ret = rs->rch ? srn_rs_nonblock_fd(rs->rch->fd) : -ENOMEM;
	if (!ret && rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_UDP))
		ret = -errno;
	if (!ret)
		ret = srn_rs_dg_setup(rs);
	if (ret) {
		srn_rs_free(rs);
		errno = -ret;
		return NULL;
	}
	return rs;
}

/* rbind: the port, listened on for SIDR requests. */
int srn_rs_dg_bind(struct srn_rs *rs, const struct sockaddr *addr)
{
	if (rs->state != SRN_RSS_INIT)
		return -EINVAL;
	if (rdma_bind_addr(rs->id, (struct sockaddr *)addr) ||
	    rdma_listen(rs->id, 128))
		return -errno;
	rs->state = SRN_RSS_BOUND;
	return 0;
}

static int srn_rs_dg_autobind(struct srn_rs *rs)
{
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in any = { .sin_family = AF_INET };

	if (rs->state != SRN_RSS_INIT)
		return 0;
	return srn_rs_dg_bind(rs, rs->domain == AF_INET6 ?
					  (struct sockaddr *)&any6 :
					  (struct sockaddr *)&any);
}

static bool srn_rs_dg_same(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return !memcmp(a, b, sizeof(struct sockaddr_in));
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16) &&
	       ((const struct sockaddr_in6 *)a)->sin6_port ==
		       ((const struct sockaddr_in6 *)b)->sin6_port;
}

/* The next event of the resolving id; SIDR requests for our own port are
 * answered meanwhile (two rsockets may resolve each other). */
static int srn_rs_dg_event(struct srn_rs *rs, enum rdma_cm_event_type want,
			   struct rdma_cm_event **ev_p)
{
	struct pollfd p[2] = { { .fd = rs->rch->fd, .events = POLLIN },
			       { .fd = rs->ch->fd, .events = POLLIN } };
	int i;

	for (i = 0; i < 100; i++) {
		while (srn_rs_cm_step(rs))
			;
		if (!rdma_get_cm_event(rs->rch, ev_p)) {
			enum rdma_cm_event_type got = (*ev_p)->event;

			if (got == want)
				return 0;
			rdma_ack_cm_event(*ev_p);
			return got == RDMA_CM_EVENT_ADDR_ERROR ? -EHOSTUNREACH :
								 -ECONNREFUSED;
		}
		pthread_mutex_unlock(&rs->lock);
		poll(p, 2, 100);
		pthread_mutex_lock(&rs->lock);
	}
	return -ETIMEDOUT;
}

static int srn_rs_dg_sidr(struct srn_rs *rs, struct rdma_cm_id *id,
			  struct srn_rs_dest *d)
{
	struct rdma_conn_param p = { .qp_num = rs->qp->qp_num };
	struct rdma_cm_event *ev;
	int ret;

	if (rdma_connect(id, &p))
		return -errno;
	ret = srn_rs_dg_event(rs, RDMA_CM_EVENT_ESTABLISHED, &ev);
	if (ret)
		return ret;
	d->ah = ibv_create_ah(rs->pd, &ev->param.ud.ah_attr);
	d->qpn = ev->param.ud.qp_num;
	d->qkey = ev->param.ud.qkey;
	rdma_ack_cm_event(ev);
	return d->ah ? 0 : -ENOMEM;
}

/* The destination to, resolved once: its index in rs->dests. */
static int srn_rs_dg_dest(struct srn_rs *rs, const struct sockaddr *to)
{
	struct srn_rs_dest d = { 0 }, *t;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint32_t i;
	int ret;

	for (i = 0; i < rs->ndests; i++)
		if (srn_rs_dg_same((struct sockaddr *)&rs->dests[i].addr, to))
			return i;
	if (rdma_create_id(rs->rch, &id, rs, RDMA_PS_UDP))
		return -errno;
	ret = rdma_resolve_addr(id, NULL, (struct sockaddr *)to,
				SRN_RS_RESOLVE_MS) ?
		      -errno :
		      srn_rs_dg_event(rs, RDMA_CM_EVENT_ADDR_RESOLVED, &ev);
	if (!ret) {
		rdma_ack_cm_event(ev);
		ret = rdma_resolve_route(id, SRN_RS_RESOLVE_MS) ?
			      -errno :
			      srn_rs_dg_event(rs, RDMA_CM_EVENT_ROUTE_RESOLVED,
					      &ev);
	}
	if (!ret) {
		rdma_ack_cm_event(ev);
		ret = srn_rs_dg_sidr(rs, id, &d);
	}
	rdma_destroy_id(id);
	t = ret ? NULL : realloc(rs->dests, (rs->ndests + 1) * sizeof(*t));
	if (!t) {
		if (d.ah)
			ibv_destroy_ah(d.ah);
		return ret ? ret : -ENOMEM;
	}
	memcpy(&d.addr, to,
	       to->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in));
	rs->dests = t;
	t[rs->ndests] = d;
	return rs->ndests++;
}

int srn_rs_dg_connect(struct srn_rs *rs, const struct sockaddr *addr)
{
	int ret = srn_rs_dg_autobind(rs);

	if (!ret)
		ret = srn_rs_dg_dest(rs, addr);
	if (ret < 0)
		return ret;
	rs->conn_dest = ret;
	return 0;
}

static void srn_rs_dg_hdr(struct srn_rs *rs, struct srn_rs_dgram_hdr *h)
{
	const struct sockaddr *me = rdma_get_local_addr(rs->id);

	memset(h, 0, sizeof(*h));
	h->magic = htobe32(SRN_RS_DGRAM_MAGIC);
	h->version = SRN_RS_VERSION;
	h->port = rdma_get_src_port(rs->id); /* network order */
	if (me->sa_family == AF_INET6) {
		h->family = 6;
		memcpy(h->addr, &((const struct sockaddr_in6 *)me)->sin6_addr,
		       16);
	} else {
		h->family = 4;
		memcpy(h->addr, &((const struct sockaddr_in *)me)->sin_addr, 4);
	}
}

static int srn_rs_dg_post(struct srn_rs *rs, const struct srn_rs_dest *d,
			  const struct iovec *iov, int iovcnt, size_t len)
{
	uint32_t slot = rs->s_head % rs->nsbuf;
	uint8_t *p = rs->sbuf + (size_t)slot * rs->peer_buf;
	struct ibv_sge sge = { .addr = (uintptr_t)p, .lkey = rs->smr->lkey };
	struct ibv_send_wr wr = { .wr_id = SRN_RS_WR_SEND | slot,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND };
	struct ibv_send_wr *bad;
	size_t off = sizeof(struct srn_rs_dgram_hdr);
	int i;

	srn_rs_dg_hdr(rs, (struct srn_rs_dgram_hdr *)p);
	for (i = 0; i < iovcnt; i++) {
		memcpy(p + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	sge.length = off;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = d->qkey;
	if (ibv_post_send(rs->qp, &wr, &bad))
		return -EIO;
	rs->s_head++;
	rs->s_used++;
	rs->sq_out++;
	return 0;
}

ssize_t srn_rs_dg_sendto(struct srn_rs *rs, const struct iovec *iov, int iovcnt,
			 int flags, const struct sockaddr *to)
{
	size_t len = 0;
	int i, d, ret;

	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > SRN_RS_DGRAM_MAX)
		return -EMSGSIZE;
	ret = srn_rs_dg_autobind(rs);
	if (ret)
		return ret;
	d = to ? srn_rs_dg_dest(rs, to) : rs->conn_dest;
	if (d < 0)
		return to ? d : -EDESTADDRREQ;
	for (;;) {
		srn_rs_progress(rs);
		if (rs->s_used < rs->nsbuf && rs->sq_out < rs->sq_depth)
			break;
		if (rs->nonblock || (flags & MSG_DONTWAIT))
			return -EAGAIN;
		ret = srn_rs_wait(rs, POLLOUT, -1);
		if (ret)
			return ret;
	}
	ret = srn_rs_dg_post(rs, &rs->dests[d], iov, iovcnt, len);
	return ret ? ret : (ssize_t)len;
}

/* The sender of a datagram: its header, the GRH's source for a wildcard
 * address. */
static void srn_rs_dg_from(const uint8_t *grh, const struct srn_rs_dgram_hdr *h,
			   struct sockaddr *from, socklen_t *fromlen)
{
	static const uint8_t zero[16];
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t len = sizeof(*s4);

	if (!from || !fromlen)
		return;
	if (h->family == 6) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = h->port;
		memcpy(&s6->sin6_addr,
		       memcmp(h->addr, zero, 16) ? h->addr : grh + 8, 16);
		len = sizeof(*s6);
	} else {
		s4->sin_family = AF_INET;
		s4->sin_port = h->port;
		/* RoCEv2's GRH of an IPv4 packet: its IPv4 header in the last
		 * 20 bytes (source at 32); else an IPv4-mapped source GID */
		memcpy(&s4->sin_addr,
		       memcmp(h->addr, zero, 4) ? h->addr :
		       grh[20] == 0x45		? grh + 32 :
						  grh + 8 + 12,
		       4);
	}
	memcpy(from, &ss, *fromlen < len ? *fromlen : len);
	*fromlen = len;
}

/* The oldest datagram into iov (the rest of it is dropped, as UDP's). */
static ssize_t srn_rs_dg_take(struct srn_rs *rs, const struct iovec *iov,
			      int iovcnt, bool peek, struct sockaddr *from,
			      socklen_t *fromlen)
{
	uint32_t idx = rs->rq_idx[rs->rq_head], len = rs->rq_len[rs->rq_head];
	const uint8_t *p = rs->rbuf + (size_t)idx * rs->rbuf_size;
	struct srn_rs_dgram_hdr h;
	size_t off = SRN_RS_GRH + sizeof(h), n = 0, c;
	int i;

	if (len < off)
		goto drop;
	memcpy(&h, p + SRN_RS_GRH, sizeof(h));
	if (be32toh(h.magic) != SRN_RS_DGRAM_MAGIC ||
	    h.version != SRN_RS_VERSION || (h.family != 4 && h.family != 6))
		goto drop;
	for (i = 0; i < iovcnt && off < len; i++) {
		c = iov[i].iov_len < len - off ? iov[i].iov_len : len - off;
		memcpy(iov[i].iov_base, p + off, c);
		off += c;
		n += c;
	}
	srn_rs_dg_from(p, &h, from, fromlen);
	if (!peek)
		srn_rs_release_head(rs);
	return n;
drop:
	srn_warn("rsocket %d: bad datagram dropped", rs->fd);
	srn_rs_release_head(rs);
	return -EAGAIN;
}

ssize_t srn_rs_dg_recvfrom(struct srn_rs *rs, const struct iovec *iov,
			   int iovcnt, int flags, struct sockaddr *from,
			   socklen_t *fromlen)
{
	ssize_t ret;

	for (;;) {
		srn_rs_progress(rs);
		if (rs->rq_cnt) {
			ret = srn_rs_dg_take(rs, iov, iovcnt, flags & MSG_PEEK,
					     from, fromlen);
			if (ret != -EAGAIN)
				return ret;
			continue;
		}
		if (rs->nonblock || (flags & MSG_DONTWAIT))
			return -EAGAIN;
		ret = srn_rs_wait(rs, POLLIN, -1);
		if (ret)
			return ret;
	}
}
