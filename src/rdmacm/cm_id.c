// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: binding, address and route resolution, listening,
 * destroying ids. Any address of this host, loopback
 * included, maps to it; a destination is reachable when the kernel has a
 * route to it (a datagram socket connected to it tells the source
 * address too).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdmacm/cm.h"

static int srn_cm_ps_ok(enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UC ||
		       qp_type == IBV_QPT_UD || qp_type == IBV_QPT_XRC_SEND ||
		       qp_type == IBV_QPT_XRC_RECV;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		return qp_type == IBV_QPT_UD;
	default:
		return 0;
	}
}

SRN_EXPORT int rdma_create_id(struct rdma_event_channel *channel,
			      struct rdma_cm_id **id, void *context,
			      enum rdma_port_space ps)
{
	enum ibv_qp_type t = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ?
				     IBV_QPT_UD :
				     IBV_QPT_RC;
	struct srn_cm_chan *c = NULL;
	struct srn_cm_id *cid;
	int ret;

	if (!id || !srn_cm_ps_ok(ps, t))
		return srn_cm_err(-EINVAL);
	ret = srn_cm_device();
	if (ret)
		return srn_cm_err(ret);
	if (channel)
		c = container_of(channel, struct srn_cm_chan, ch);
	pthread_mutex_lock(&srn_cm.lock);
	cid = srn_cm_id_new(c, context, ps, t);
	pthread_mutex_unlock(&srn_cm.lock);
	if (!cid)
		return srn_cm_err(-ENOMEM);
	*id = &cid->id;
	return 0;
}

/* Unlinks cid from everything (under srn_cm.lock), waits for its events
 * to be acked, and frees it. */
static void srn_cm_id_free(struct srn_cm_id *cid)
{
	while (cid->acked != cid->reported)
		pthread_cond_wait(&cid->cond, &srn_cm.lock);
	srn_list_del(&cid->link);
	srn_list_del(&cid->hlink);
	if (cid->chan && cid->chan->private)
		srn_cm_chan_free(cid->chan);
	free(cid->id.route.path_rec);
	free(cid->ep_attr);
	pthread_cond_destroy(&cid->cond);
	srn_cm_zfree(cid);
}

/* Drops children of a listener that were never given out (REJ). */
static void srn_cm_drop_children(struct srn_cm_id *lid)
{
	struct srn_list *pos, *tmp;
	struct srn_cm_id *c;
	struct srn_cm_msg m;

	srn_list_for_each_safe(pos, tmp, &srn_cm.ids) {
		c = srn_list_entry(pos, struct srn_cm_id, link);
		if (c->listener != lid)
			continue;
		srn_dbg("rdmacm: listener of port %u gone: REQ rejected",
			lid->port);
		srn_cm_msg_init(&m, SRN_CM_REJ);
		m.reason = htobe16(SRN_CM_REJ_INVALID_SERVICE_ID);
		srn_cm_send(c, &m);
		srn_cm_purge(c);
		srn_cm_id_unlink(c);
		srn_cm_id_free(c);
	}
}

/* Closes what cid holds on the host: its connection (a DREQ first when
 * connected), its port (under srn_cm.lock). */
void srn_cm_id_unlink(struct srn_cm_id *cid)
{
	struct srn_cm_msg m;

	if (cid->id.qp_type != IBV_QPT_UD &&
	    (cid->state == SRN_CMS_ESTABLISHED ||
	     cid->state == SRN_CMS_REP_SENT ||
	     cid->state == SRN_CMS_REP_RCVD)) {
		srn_cm_msg_init(&m, SRN_CM_DREQ);
		srn_cm_send(cid, &m);
	}
	srn_cm_close_conn(cid);
	if (cid->state == SRN_CMS_LISTEN) {
		srn_cm_drop_children(cid);
		srn_cm_listen_put();
	}
	if (cid->unix_fd >= 0)
		close(cid->unix_fd);
	cid->unix_fd = -1;
	srn_cm_set_state(cid, SRN_CMS_IDLE);
}

SRN_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);

	if (!id)
		return srn_cm_err(-EINVAL);
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&srn_cm.lock);
	srn_dbg("rdmacm: destroy id (state %s, port %u)",
		srn_cm_state_names[cid->state], cid->port);
	srn_cm_id_unlink(cid);
	srn_cm_mc_drop(cid, true);
	srn_cm_purge(cid);
	srn_cm_id_free(cid);
	pthread_mutex_unlock(&srn_cm.lock);
	return 0;
}

static int srn_cm_addr_len(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (sa->sa_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	return -EAFNOSUPPORT;
}

static bool srn_cm_addr_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(
		&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

static bool srn_cm_addr_mcast(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(be32toh(
			((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	return IN6_IS_ADDR_MULTICAST(
		&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* Is sa (port ignored) an address of this host? 0 or -EADDRNOTAVAIL. */
static int srn_cm_addr_local(const struct sockaddr *sa)
{
	struct sockaddr_storage ss;
	int fd, ret = 0, len = srn_cm_addr_len(sa);

	if (len < 0)
		return len;
	memcpy(&ss, sa, len);
	*srn_cm_port_of((struct sockaddr *)&ss) = 0;
	fd = srn_socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&ss, len))
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * Takes the rdma_cm port for cid (under srn_cm.lock): the abstract name
 * of (port space, port) is unique on the host; port 0 picks a free one.
 */
int srn_cm_bind_port(struct srn_cm_id *cid, uint16_t port)
{
	struct sockaddr_un_abs {
		sa_family_t fam;
		char path[108];
	} sa = { .fam = AF_UNIX };
	int fd, i, len, one = 1;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	for (i = 0; i < 64; i++) {
		uint16_t p = port ? port : 32768 + srn_cm_random24() % 28232;

		len = snprintf(sa.path + 1, sizeof(sa.path) - 1,
			       SRN_CM_SOCK_FMT, (unsigned int)cid->id.ps, p);
		if (!bind(fd, (struct sockaddr *)&sa,
			  offsetof(struct sockaddr_un_abs, path) + 1 + len)) {
			/* read from now on, so that a REQ handed off while
			 * the port is bound but not listening is rejected
			 * (srn_cm_on_unix) rather than left unread */
			len = srn_cm_epoll_add(fd, cid->serial, SRN_CM_EP_UNIX,
					       EPOLLIN);
			if (len)
				break;
			cid->unix_fd = fd;
			cid->port = p;
			return 0;
		}
		if (errno != EADDRINUSE || port)
			break;
	}
	len = len < 0 ? len : -errno;
	close(fd);
	return len;
}

static int srn_cm_bind_locked(struct srn_cm_id *cid, struct sockaddr *addr)
{
	struct sockaddr *src = (struct sockaddr *)&cid->id.route.addr.src_addr;
	int len = srn_cm_addr_len(addr), ret;

	if (len < 0)
		return len;
	if (cid->state != SRN_CMS_IDLE)
		return -EINVAL;
	if (!srn_cm_addr_any(addr)) {
		ret = srn_cm_addr_local(addr);
		if (ret)
			return ret;
	}
	ret = srn_cm_bind_port(cid, be16toh(*srn_cm_port_of(addr)));
	if (ret)
		return ret;
	memcpy(src, addr, len);
	*srn_cm_port_of(src) = htobe16(cid->port);
	if (!srn_cm_addr_any(addr))
		srn_cm_id_set_verbs(cid);
	srn_cm_set_state(cid, SRN_CMS_BOUND);
	return 0;
}

SRN_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret;

	if (!id || !addr)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_bind_locked(cid, addr);
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_cm_err(ret);
}

/*
 * Finds the source address the kernel would use towards dst (port
 * ignored): 0, or -ENETUNREACH (or another -errno) when there is no route.
 */
static int srn_cm_route_src(const struct sockaddr *dst,
			    struct sockaddr_storage *src)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(*src);
	int fd, ret = 0, len = srn_cm_addr_len(dst);

	if (len < 0)
		return len;
	memcpy(&ss, dst, len);
	*srn_cm_port_of((struct sockaddr *)&ss) =
		htobe16(srn_cm_service_port());
	fd = srn_socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, len) ||
	    getsockname(fd, (struct sockaddr *)src, &sl))
		ret = -errno;
	close(fd);
	return ret;
}

static int srn_cm_resolve_locked(struct srn_cm_id *cid, struct sockaddr *src,
				 struct sockaddr *dst)
{
	struct rdma_addr *ra = &cid->id.route.addr;
	struct sockaddr_storage s;
	int len = srn_cm_addr_len(dst), ret;

	if (len < 0)
		return len;
	if (cid->state == SRN_CMS_IDLE && src && src->sa_family) {
		ret = srn_cm_bind_locked(cid, src);
		if (ret)
			return ret;
	}
	if (cid->state != SRN_CMS_IDLE && cid->state != SRN_CMS_BOUND)
		return -EINVAL;
	/* a bound id's group needs no route (multicast, mckey -b) */
	ret = cid->state == SRN_CMS_BOUND && srn_cm_addr_mcast(dst) ?
		      0 :
		      srn_cm_route_src(dst, &s);
	if (!ret && cid->state == SRN_CMS_IDLE) {
		memcpy(&ra->src_addr, &s, sizeof(s));
		*srn_cm_port_of((struct sockaddr *)&ra->src_addr) =
			htobe16(32768 + srn_cm_random24() % 28232);
	}
	memcpy(&ra->dst_addr, dst, len);
	if (ret)
		return srn_cm_queue(cid, cid, RDMA_CM_EVENT_ADDR_ERROR, ret,
				    NULL);
	srn_cm_id_set_verbs(cid);
	/* the peer's device GID replaces this at REQ/REP */
	if (dst->sa_family == AF_INET) {
		uint8_t *g = ra->addr.ibaddr.dgid.raw;

		memset(g, 0, 10);
		g[10] = g[11] = 0xff;
		memcpy(g + 12, &((struct sockaddr_in *)dst)->sin_addr, 4);
	} else {
		memcpy(ra->addr.ibaddr.dgid.raw,
		       &((struct sockaddr_in6 *)dst)->sin6_addr, 16);
	}
	srn_cm_set_state(cid, SRN_CMS_ADDR_RESOLVED);
	return srn_cm_queue(cid, cid, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL);
}

SRN_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id,
				 struct sockaddr *src_addr,
				 struct sockaddr *dst_addr, int timeout_ms)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret;

	if (!id || !dst_addr)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_resolve_locked(cid, src_addr, dst_addr);
	pthread_mutex_unlock(&srn_cm.lock);
	if (ret)
		return srn_cm_err(ret);
	return srn_cm_complete(cid);
}

static int srn_cm_route_locked(struct srn_cm_id *cid)
{
	struct rdma_route *r = &cid->id.route;
	struct ibv_sa_path_rec *p;

	if (cid->state != SRN_CMS_ADDR_RESOLVED &&
	    cid->state != SRN_CMS_ROUTE_RESOLVED)
		return -EINVAL;
	if (!r->path_rec) {
		r->path_rec = calloc(1, sizeof(*p));
		if (!r->path_rec)
			return -ENOMEM;
	}
	p = r->path_rec;
	p->sgid = r->addr.addr.ibaddr.sgid;
	p->dgid = r->addr.addr.ibaddr.dgid;
	p->pkey = r->addr.addr.ibaddr.pkey;
	p->mtu = srn_cm.mtu;
	p->hop_limit = 64;
	p->traffic_class = cid->tos;
	p->reversible = 1;
	p->numb_path = 1;
	p->packet_life_time = cid->ack_timeout > 0 ? cid->ack_timeout - 1 : 0;
	r->num_paths = 1;
	srn_cm_set_state(cid, SRN_CMS_ROUTE_RESOLVED);
	return srn_cm_queue(cid, cid, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL);
}

SRN_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret;

	if (!id)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_route_locked(cid);
	pthread_mutex_unlock(&srn_cm.lock);
	if (ret)
		return srn_cm_err(ret);
	return srn_cm_complete(cid);
}

static int srn_cm_listen_locked(struct srn_cm_id *cid, int backlog)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	int ret;

	if (cid->id.qp_type != IBV_QPT_RC && cid->id.qp_type != IBV_QPT_UD &&
	    cid->id.qp_type != IBV_QPT_XRC_RECV)
		return -EOPNOTSUPP;
	if (cid->state == SRN_CMS_IDLE) {
		ret = srn_cm_bind_locked(cid, (struct sockaddr *)&any);
		if (ret)
			return ret;
	}
	if (cid->state != SRN_CMS_BOUND)
		return -EINVAL;
	ret = srn_cm_listen_get();
	if (ret)
		return ret;
	srn_dbg("rdmacm: listen on port %u", cid->port);
	cid->backlog = backlog > 0 ? backlog : 1024;
	srn_cm_set_state(cid, SRN_CMS_LISTEN);
	return 0;
}

SRN_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret;

	if (!id)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_listen_locked(cid, backlog);
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_cm_err(ret);
}

SRN_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return *srn_cm_port_of((struct sockaddr *)&id->route.addr.src_addr);
}

SRN_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return *srn_cm_port_of((struct sockaddr *)&id->route.addr.dst_addr);
}
