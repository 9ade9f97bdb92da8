// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: rsockets, sockets and connections
 * (docs/rsockets.md): rsocket, rbind, rlisten, raccept, rconnect,
 * rshutdown, rclose. Stream rsockets only; SOCK_DGRAM is not offered
 * (EPROTONOSUPPORT).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>

#include "rdmacm/rs.h"
#include "util/srn_compiler.h"
#include "util/util.h"

#define SRN_RS_CLOSE_MS 5000 /* rclose waits this long for sends */

SRN_EXPORT int rsocket(int domain, int type, int protocol)
{
	int flags = type & (SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct srn_rs *rs;
	int ret;

	if (domain != AF_INET && domain != AF_INET6)
		return srn_rs_fail(-EAFNOSUPPORT);
	type &= ~flags;
	if (type == SOCK_STREAM && protocol && protocol != IPPROTO_TCP)
		return srn_rs_fail(-EPROTONOSUPPORT);
	if (type == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP)
		return srn_rs_fail(-EPROTONOSUPPORT);
	if (type == SOCK_STREAM)
		rs = srn_rs_new(domain);
	else if (type == SOCK_DGRAM)
		rs = srn_rs_dg_new(domain);
	else
		return srn_rs_fail(-EPROTONOSUPPORT);
	if (!rs)
		return -1;
	rs->nonblock = flags & SOCK_NONBLOCK;
	ret = srn_rs_insert(rs);
	if (ret) {
		srn_rs_free(rs);
		return srn_rs_fail(ret);
	}
	return rs->fd;
}

static int srn_rs_addr_ok(const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return -EFAULT;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return 0;
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		return 0;
	return addr->sa_family == AF_INET || addr->sa_family == AF_INET6 ?
		       -EINVAL :
		       -EAFNOSUPPORT;
}

SRN_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	int ret;

	if (!rs)
		return -1;
	ret = srn_rs_addr_ok(addr, addrlen);
	if (!ret && rs->dgram) {
		ret = srn_rs_dg_bind(rs, addr);
		goto out;
	}
	if (!ret && rs->state != SRN_RSS_INIT)
		ret = -EINVAL;
	if (!ret && rs->reuseaddr)
		rdma_set_option(rs->id, RDMA_OPTION_ID,
				RDMA_OPTION_ID_REUSEADDR, &rs->reuseaddr,
				sizeof(rs->reuseaddr));
	if (!ret && rdma_bind_addr(rs->id, (struct sockaddr *)addr))
		ret = -errno;
	if (!ret)
		rs->state = SRN_RSS_BOUND;
out:
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : 0;
}

SRN_EXPORT int rlisten(int socket, int backlog)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	struct sockaddr_in any = { .sin_family = AF_INET };
	int ret = 0;

	if (!rs)
		return -1;
	if (rs->dgram)
		ret = -EOPNOTSUPP;
	else if (rs->state == SRN_RSS_INIT &&
		 rdma_bind_addr(rs->id, (struct sockaddr *)&any))
		ret = -errno;
	else if (rs->state != SRN_RSS_INIT && rs->state != SRN_RSS_BOUND &&
		 rs->state != SRN_RSS_LISTEN)
		ret = -EINVAL;
	if (!ret && rs->state != SRN_RSS_LISTEN &&
	    rdma_listen(rs->id, backlog > 0 ? backlog : 1))
		ret = -errno;
	if (!ret)
		rs->state = SRN_RSS_LISTEN;
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : 0;
}

static void srn_rs_addr_out(const struct sockaddr *sa, struct sockaddr *addr,
			    socklen_t *addrlen)
{
	socklen_t len = sa->sa_family == AF_INET6 ?
				sizeof(struct sockaddr_in6) :
				sizeof(struct sockaddr_in);

	if (!addr || !addrlen)
		return;
	memcpy(addr, sa, *addrlen < len ? *addrlen : len);
	*addrlen = len;
}

/* The rsocket of a connection request: resources, hello, rdma_accept. */
static int srn_rs_accept_one(struct srn_rs *lrs, struct rdma_cm_id *id,
			     const struct srn_rs_hello *peer)
{
	struct rdma_conn_param p = { 0 };
	struct srn_rs_hello h;
	struct srn_rs *rs = srn_rs_child(lrs, id);
	int ret;

	if (!rs) {
		ret = -errno;
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return ret;
	}
	ret = srn_rs_setup(rs);
	if (!ret)
		ret = srn_rs_peer(rs, peer, sizeof(*peer));
	if (ret)
		goto fail;
	srn_rs_hello_make(rs, &h);
	p.private_data = &h;
	p.private_data_len = sizeof(h);
	p.retry_count = 7;
	p.rnr_retry_count = 7;
	rs->state = SRN_RSS_CONNECTING;
	if (rdma_accept(id, &p)) {
		ret = -errno;
		goto fail;
	}
	ret = srn_rs_insert(rs);
	if (ret)
		goto fail;
	return rs->fd;
fail:
	rdma_reject(id, NULL, 0);
	srn_rs_free(rs); /* the id with it */
	return ret;
}

/* Takes one connection request of listener lrs: the new rsocket's
 * number, -EAGAIN when none waits, or -errno. */
static int srn_rs_accept_try(struct srn_rs *lrs)
{
	struct rdma_cm_event *ev;
	struct srn_rs_hello h, raw;
	struct rdma_cm_id *id;
	int ret;

	if (rdma_get_cm_event(lrs->ch, &ev))
		return errno == EAGAIN ? -EAGAIN : -errno;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		return -EAGAIN;
	}
	id = ev->id;
	ret = srn_rs_hello_check(ev->param.conn.private_data,
				 ev->param.conn.private_data_len, &h);
	if (!ret)
		memcpy(&raw, ev->param.conn.private_data, sizeof(raw));
	rdma_ack_cm_event(ev);
	if (ret) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
	} else {
		ret = srn_rs_accept_one(lrs, id, &raw);
	}
	if (ret < 0) {
		srn_warn("raccept: connection request refused: %s",
			 strerror(-ret));
		return -ECONNABORTED;
	}
	return ret;
}

SRN_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct srn_rs *lrs = srn_rs_lock_fd(socket), *rs;
	int ret;

	if (!lrs)
		return -1;
	if (lrs->state != SRN_RSS_LISTEN || lrs->dgram) {
		pthread_mutex_unlock(&lrs->lock);
		return srn_rs_fail(-EINVAL);
	}
	for (;;) {
		ret = srn_rs_accept_try(lrs);
		if (ret != -EAGAIN && ret != -ECONNABORTED)
			break;
		if (lrs->nonblock)
			break;
		ret = srn_rs_block(lrs, -1);
		if (ret)
			break;
	}
	pthread_mutex_unlock(&lrs->lock);
	if (ret < 0)
		return srn_rs_fail(ret);
	rs = srn_rs_get(ret);
	if (rs)
		srn_rs_addr_out(rdma_get_peer_addr(rs->id), addr, addrlen);
	return ret;
}

/* Starts the connection: address resolution, from there on the CM
 * events drive it (srn_rs_progress). */
static int srn_rs_connect_start(struct srn_rs *rs, const struct sockaddr *addr)
{
	struct sockaddr *src = NULL;

	switch (rs->state) {
	case SRN_RSS_BOUND:
		src = rdma_get_local_addr(rs->id);
		/* fall through */
	case SRN_RSS_INIT:
		break;
	case SRN_RSS_ADDR:
	case SRN_RSS_ROUTE:
	case SRN_RSS_CONNECTING:
		return -EALREADY;
	case SRN_RSS_CONNECTED:
	case SRN_RSS_CLOSED:
		return -EISCONN;
	default:
		return -EINVAL;
	}
	if (rdma_resolve_addr(rs->id, src, (struct sockaddr *)addr,
			      SRN_RS_RESOLVE_MS))
		return -errno;
	rs->state = SRN_RSS_ADDR;
	return 0;
}

SRN_EXPORT int rconnect(int socket, const struct sockaddr *addr,
			socklen_t addrlen)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	int ret;

	if (!rs)
		return -1;
	ret = srn_rs_addr_ok(addr, addrlen);
	if (!ret && rs->dgram) {
		ret = srn_rs_dg_connect(rs, addr);
		goto out;
	}
	if (!ret && rs->state == SRN_RSS_FAILED) {
		ret = -rs->err; /* the outcome of a non-blocking rconnect */
		rs->err = 0;
		goto out;
	}
	if (!ret)
		ret = srn_rs_connect_start(rs, addr);
	/* address and route resolution are local and bounded: waited for
	 * also when non-blocking, so the REQ is out when this returns */
	while (!ret &&
	       (rs->state == SRN_RSS_ADDR || rs->state == SRN_RSS_ROUTE))
		ret = srn_rs_block(rs, -1);
	if (!ret && rs->nonblock && rs->state == SRN_RSS_FAILED) {
		ret = -rs->err;
		rs->err = 0;
	}
	if (ret || rs->nonblock) {
		ret = ret ? ret : -EINPROGRESS;
		goto out;
	}
	ret = srn_rs_wait(rs, POLLOUT, -1);
	if (!ret && rs->state == SRN_RSS_FAILED) {
		ret = -rs->err;
		rs->err = 0;
	}
out:
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : 0;
}

SRN_EXPORT int rshutdown(int socket, int how)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	int ret = 0;

	if (!rs)
		return -1;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		ret = -EINVAL;
	else if (rs->state != SRN_RSS_CONNECTED &&
		 rs->state != SRN_RSS_CONNECTING && rs->state != SRN_RSS_CLOSED)
		ret = -ENOTCONN;
	if (!ret && how != SHUT_WR)
		rs->shut_rd = true;
	if (!ret && how != SHUT_RD && !rs->shut_wr) {
		rs->shut_wr = true;
		rs->fin_wanted = !rs->fin_sent;
		srn_rs_progress(rs);
	}
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : 0;
}

/* Before the connection goes: the FIN out, every send completed (the
 * peer holds the data), then the disconnect. */
static void srn_rs_drain(struct srn_rs *rs)
{
	int tmo = rs->linger.l_onoff ? rs->linger.l_linger * 1000 :
				       SRN_RS_CLOSE_MS;
	struct timespec t0, t;

	if (rs->state != SRN_RSS_CONNECTED && rs->state != SRN_RSS_CONNECTING)
		return;
	if (!rs->fin_sent)
		rs->fin_wanted = true;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (rs->state == SRN_RSS_CONNECTED ||
	       rs->state == SRN_RSS_CONNECTING) {
		srn_rs_progress(rs);
		if (!rs->fin_wanted && !rs->sq_out)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
				    (t.tv_nsec - t0.tv_nsec) / 1000000 >=
			    tmo ||
		    srn_rs_block(rs, 100))
			break;
	}
	rdma_disconnect(rs->id);
}

SRN_EXPORT int rclose(int socket)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);

	if (!rs)
		return -1;
	srn_rs_remove(rs);
	srn_rs_drain(rs);
	pthread_mutex_unlock(&rs->lock);
	srn_rs_free(rs);
	return 0;
}
