// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: rsockets, options, names and rfcntl
 * (docs/rsockets.md). The options rdma-core's rsockets know are kept and
 * read back; those that size a connection (SO_SNDBUF, SO_RCVBUF,
 * RDMA_SQSIZE, RDMA_RQSIZE) count when it is made, the others are
 * remembered only (the transport underneath decides).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <string.h>

#include "rdmacm/rs.h"
#include "util/srn_compiler.h"

static int srn_rs_opt_int(const void *v, socklen_t len, int *out_p)
{
	if (!v || len < sizeof(int))
		return -EINVAL;
	memcpy(out_p, v, sizeof(int));
	return 0;
}

static int srn_rs_set_sol(struct srn_rs *rs, int name, const void *v,
			  socklen_t len)
{
	int i = 0, ret;

	if (name == SO_LINGER) {
		if (!v || len < sizeof(rs->linger))
			return -EINVAL;
		memcpy(&rs->linger, v, sizeof(rs->linger));
		return 0;
	}
	ret = srn_rs_opt_int(v, len, &i);
	if (ret)
		return ret;
	switch (name) {
	case SO_REUSEADDR:
		rs->reuseaddr = !!i;
		return 0;
	case SO_KEEPALIVE:
		rs->keepalive = !!i;
		return 0;
	case SO_SNDBUF:
		rs->sndbuf = i > 0 ? (uint32_t)i : SRN_RS_DEF_BUF;
		return 0;
	case SO_RCVBUF:
		rs->rcvbuf = i > 0 ? (uint32_t)i : SRN_RS_DEF_BUF;
		return 0;
	default:
		return -ENOPROTOOPT;
	}
}

static int srn_rs_set_rdma(struct srn_rs *rs, int name, const void *v,
			   socklen_t len)
{
	int i = 0, ret;

	if (name == RDMA_ROUTE) /* one path only: the route is resolved */
		return v && len ? 0 : -EINVAL;
	ret = srn_rs_opt_int(v, len, &i);
	if (ret)
		return ret;
	if (i < 0)
		return -EINVAL;
	switch (name) {
	case RDMA_SQSIZE:
		rs->sqsize = i;
		return 0;
	case RDMA_RQSIZE:
		rs->rqsize = i;
		return 0;
	case RDMA_INLINE:
		rs->inline_size = i;
		return 0;
	case RDMA_IOMAPSIZE:
		rs->iomapsize = i;
		return 0;
	default:
		return -ENOPROTOOPT;
	}
}

SRN_EXPORT int rsetsockopt(int socket, int level, int optname,
			   const void *optval, socklen_t optlen)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	int ret = -ENOPROTOOPT, i = 0;

	if (!rs)
		return -1;
	switch (level) {
	case SOL_SOCKET:
		ret = srn_rs_set_sol(rs, optname, optval, optlen);
		break;
	case IPPROTO_TCP:
		if (optname == TCP_NODELAY) {
			ret = srn_rs_opt_int(optval, optlen, &i);
			rs->nodelay = !!i;
		} else if (optname == TCP_KEEPIDLE ||
			   optname == TCP_KEEPINTVL || optname == TCP_KEEPCNT) {
			ret = srn_rs_opt_int(optval, optlen, &i);
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY)
			ret = srn_rs_opt_int(optval, optlen, &i);
		break;
	case SOL_RDMA:
		ret = srn_rs_set_rdma(rs, optname, optval, optlen);
		break;
	}
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : 0;
}

static int srn_rs_get_int(struct srn_rs *rs, int level, int name, int *v)
{
	switch (level << 8 | name) {
	case SOL_SOCKET << 8 | SO_REUSEADDR:
		*v = rs->reuseaddr;
		return 0;
	case SOL_SOCKET << 8 | SO_KEEPALIVE:
		*v = rs->keepalive;
		return 0;
	case SOL_SOCKET << 8 | SO_SNDBUF:
		*v = rs->sndbuf;
		return 0;
	case SOL_SOCKET << 8 | SO_RCVBUF:
		*v = rs->rcvbuf;
		return 0;
	case SOL_SOCKET << 8 | SO_ERROR:
		srn_rs_progress(rs);
		*v = rs->err;
		rs->err = 0;
		return 0;
	case SOL_SOCKET << 8 | SO_TYPE:
		*v = SOCK_STREAM;
		return 0;
	case IPPROTO_TCP << 8 | TCP_NODELAY:
		*v = rs->nodelay;
		return 0;
	case IPPROTO_TCP << 8 | TCP_MAXSEG: /* the most one message carries */
		*v = rs->peer_buf ? rs->peer_buf : SRN_RS_BUF_SIZE;
		return 0;
	case SOL_RDMA << 8 | RDMA_SQSIZE:
		*v = rs->qp ? rs->sq_depth : rs->sqsize;
		return 0;
	case SOL_RDMA << 8 | RDMA_RQSIZE:
		*v = rs->qp ? rs->nrbuf : rs->rqsize;
		return 0;
	case SOL_RDMA << 8 | RDMA_INLINE:
		*v = rs->inline_size;
		return 0;
	case SOL_RDMA << 8 | RDMA_IOMAPSIZE:
		*v = rs->iomapsize;
		return 0;
	default:
		return -ENOPROTOOPT;
	}
}

/* TCP_INFO, for programs that show it (iperf3): the state, the message
 * size as MSS, the credits as the congestion window; the rest 0. */
static int srn_rs_tcp_info(struct srn_rs *rs, void *optval, socklen_t *optlen)
{
	struct tcp_info ti = { 0 };
	socklen_t len = *optlen < sizeof(ti) ? *optlen : sizeof(ti);

	ti.tcpi_state = rs->state == SRN_RSS_CONNECTED ? TCP_ESTABLISHED :
			rs->state == SRN_RSS_LISTEN    ? TCP_LISTEN :
							 TCP_CLOSE;
	ti.tcpi_snd_mss = rs->peer_buf;
	ti.tcpi_rcv_mss = rs->rbuf_size;
	ti.tcpi_snd_cwnd = rs->credits;
	memcpy(optval, &ti, len);
	*optlen = len;
	return 0;
}

SRN_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval,
			   socklen_t *optlen)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	int ret, v = 0;

	if (!rs)
		return -1;
	if (!optval || !optlen) {
		ret = -EINVAL;
	} else if (level == SOL_SOCKET && optname == SO_LINGER) {
		ret = *optlen < sizeof(rs->linger) ? -EINVAL : 0;
		if (!ret) {
			memcpy(optval, &rs->linger, sizeof(rs->linger));
			*optlen = sizeof(rs->linger);
		}
	} else if (level == IPPROTO_TCP && optname == TCP_INFO) {
		ret = srn_rs_tcp_info(rs, optval, optlen);
	} else {
		ret = srn_rs_get_int(rs, level, optname, &v);
		if (!ret && *optlen < sizeof(int))
			ret = -EINVAL;
		if (!ret) {
			memcpy(optval, &v, sizeof(v));
			*optlen = sizeof(v);
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : 0;
}

SRN_EXPORT int rfcntl(int socket, int cmd, ...)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	int ret = 0;
	va_list ap;

	if (!rs)
		return -1;
	switch (cmd) {
	case F_GETFL:
		ret = O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
		break;
	case F_SETFL:
		va_start(ap, cmd);
		rs->nonblock = (va_arg(ap, int) & O_NONBLOCK) != 0;
		va_end(ap);
		break;
	default:
		ret = -ENOSYS;
	}
	pthread_mutex_unlock(&rs->lock);
	return ret < 0 ? srn_rs_fail(ret) : ret;
}

static int srn_rs_name(int socket, struct sockaddr *addr, socklen_t *addrlen,
		       bool peer)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	const struct sockaddr *sa;
	socklen_t len;
	int ret = 0;

	if (!rs)
		return -1;
	if (!addr || !addrlen) {
		ret = -EFAULT;
		goto out;
	}
	if (peer && rs->state != SRN_RSS_CONNECTED &&
	    rs->state != SRN_RSS_CONNECTING && rs->state != SRN_RSS_CLOSED) {
		ret = -ENOTCONN;
		goto out;
	}
	sa = peer ? rdma_get_peer_addr(rs->id) : rdma_get_local_addr(rs->id);
	len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					  sizeof(struct sockaddr_in);
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		memcpy(addr, &any, *addrlen < len ? *addrlen : len);
	} else {
		memcpy(addr, sa, *addrlen < len ? *addrlen : len);
	}
	*addrlen = len;
out:
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : 0;
}

SRN_EXPORT int rgetpeername(int socket, struct sockaddr *addr,
			    socklen_t *addrlen)
{
	return srn_rs_name(socket, addr, addrlen, true);
}

SRN_EXPORT int rgetsockname(int socket, struct sockaddr *addr,
			    socklen_t *addrlen)
{
	return srn_rs_name(socket, addr, addrlen, false);
}
