// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: rdma_getaddrinfo, the synchronous "ep" calls,
 * options, migration, multicast (the id's QP attached to the group's GID)
 * and ECE (accepted and ignored).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmacm/cm.h"

SRN_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	struct rdma_addrinfo *next;

	for (; res; res = next) {
		next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
	}
}

static int srn_cm_ai_copy(struct rdma_addrinfo *rai, const struct addrinfo *ai,
			  const struct rdma_addrinfo *hints)
{
	struct sockaddr **dst = (rai->ai_flags & RAI_PASSIVE) ?
					&rai->ai_src_addr :
					&rai->ai_dst_addr;
	socklen_t *len = (rai->ai_flags & RAI_PASSIVE) ? &rai->ai_src_len :
							 &rai->ai_dst_len;

	*dst = malloc(ai->ai_addrlen);
	if (!*dst)
		return -ENOMEM;
	memcpy(*dst, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	if (!(rai->ai_flags & RAI_PASSIVE) && hints && hints->ai_src_addr &&
	    hints->ai_src_len) {
		rai->ai_src_addr = malloc(hints->ai_src_len);
		if (!rai->ai_src_addr)
			return -ENOMEM;
		memcpy(rai->ai_src_addr, hints->ai_src_addr, hints->ai_src_len);
		rai->ai_src_len = hints->ai_src_len;
	}
	if (hints && hints->ai_connect_len && hints->ai_connect) {
		rai->ai_connect = malloc(hints->ai_connect_len);
		if (!rai->ai_connect)
			return -ENOMEM;
		memcpy(rai->ai_connect, hints->ai_connect,
		       hints->ai_connect_len);
		rai->ai_connect_len = hints->ai_connect_len;
	}
	return 0;
}

static void srn_cm_ai_types(struct rdma_addrinfo *rai,
			    const struct rdma_addrinfo *hints)
{
	rai->ai_port_space = RDMA_PS_TCP;
	rai->ai_qp_type = IBV_QPT_RC;
	if (!hints)
		return;
	if (hints->ai_port_space)
		rai->ai_port_space = hints->ai_port_space;
	if (hints->ai_qp_type)
		rai->ai_qp_type = hints->ai_qp_type;
	if (!hints->ai_qp_type && hints->ai_port_space == RDMA_PS_UDP)
		rai->ai_qp_type = IBV_QPT_UD;
	if (!hints->ai_port_space && hints->ai_qp_type == IBV_QPT_UD)
		rai->ai_port_space = RDMA_PS_UDP;
}

static int srn_cm_ai_dup(struct sockaddr **to_p, socklen_t *len_p,
			 const struct sockaddr *from, socklen_t len)
{
	if (!len || !from)
		return 0;
	*to_p = malloc(len);
	if (!*to_p)
		return -ENOMEM;
	memcpy(*to_p, from, len);
	*len_p = len;
	return 0;
}

/* Neither node nor service: the hints' addresses themselves (pyverbs'
 * AddrInfo(src=...) gives its source so). */
static int srn_cm_ai_hints(const struct rdma_addrinfo *hints,
			   struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *rai = calloc(1, sizeof(*rai));
	const struct sockaddr *sa = hints->ai_src_addr ? hints->ai_src_addr :
							 hints->ai_dst_addr;
	int ret;

	if (!rai)
		return srn_cm_err(-ENOMEM);
	rai->ai_flags = hints->ai_flags;
	rai->ai_family = sa->sa_family;
	srn_cm_ai_types(rai, hints);
	ret = srn_cm_ai_dup(&rai->ai_src_addr, &rai->ai_src_len,
			    hints->ai_src_addr, hints->ai_src_len);
	if (!ret)
		ret = srn_cm_ai_dup(&rai->ai_dst_addr, &rai->ai_dst_len,
				    hints->ai_dst_addr, hints->ai_dst_len);
	if (ret) {
		rdma_freeaddrinfo(rai);
		return srn_cm_err(ret);
	}
	*res = rai;
	return 0;
}

/* Returns 0, a getaddrinfo code (EAI_*), or -1 with errno, as rdma-core. */
SRN_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				const struct rdma_addrinfo *hints,
				struct rdma_addrinfo **res)
{
	struct addrinfo h = { .ai_socktype = SOCK_STREAM }, *ai;
	struct rdma_addrinfo *rai;
	int ret;

	if (res && !node && !service && hints &&
	    ((hints->ai_src_addr && hints->ai_src_len) ||
	     (hints->ai_dst_addr && hints->ai_dst_len)))
		return srn_cm_ai_hints(hints, res);
	if (!res || (!node && !service))
		return srn_cm_err(-EINVAL);
	if (hints) {
		if (hints->ai_family == AF_IB)
			return EAI_FAMILY;
		h.ai_family = hints->ai_family;
		if (hints->ai_flags & RAI_PASSIVE)
			h.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
	}
	ret = getaddrinfo(node, service, &h, &ai);
	if (ret)
		return ret;
	rai = calloc(1, sizeof(*rai));
	if (!rai) {
		freeaddrinfo(ai);
		return srn_cm_err(-ENOMEM);
	}
	rai->ai_flags = hints ? hints->ai_flags : 0;
	rai->ai_family = ai->ai_family;
	srn_cm_ai_types(rai, hints);
	ret = srn_cm_ai_copy(rai, ai, hints);
	freeaddrinfo(ai);
	if (ret) {
		rdma_freeaddrinfo(rai);
		return srn_cm_err(ret);
	}
	*res = rai;
	return 0;
}

static int srn_cm_ep_passive(struct srn_cm_id *cid, struct rdma_addrinfo *res,
			     struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (rdma_bind_addr(&cid->id, res->ai_src_addr))
		return -1;
	if (attr) {
		cid->ep_attr = malloc(sizeof(*attr));
		if (!cid->ep_attr)
			return srn_cm_err(-ENOMEM);
		*cid->ep_attr = *attr;
		cid->ep_pd = pd;
	}
	return 0;
}

SRN_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			      struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	struct srn_cm_id *cid;
	int ret;

	if (!id || !res)
		return srn_cm_err(-EINVAL);
	if (rdma_create_id(NULL, &cm_id, NULL, res->ai_port_space))
		return -1;
	cid = container_of(cm_id, struct srn_cm_id, id);
	if (res->ai_qp_type)
		cm_id->qp_type = res->ai_qp_type;
	if (qp_init_attr)
		qp_init_attr->qp_type = cm_id->qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = srn_cm_ep_passive(cid, res, pd, qp_init_attr);
		if (ret)
			goto fail;
		*id = cm_id;
		return 0;
	}
	ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr,
				2000);
	if (!ret)
		ret = rdma_resolve_route(cm_id, 2000);
	if (!ret && qp_init_attr)
		ret = rdma_create_qp(cm_id, pd, qp_init_attr);
	if (ret)
		goto fail;
	*id = cm_id;
	return 0;
fail:
	ret = errno;
	rdma_destroy_id(cm_id);
	errno = ret;
	return -1;
}

SRN_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

SRN_EXPORT int rdma_get_request(struct rdma_cm_id *listen,
				struct rdma_cm_id **id)
{
	struct srn_cm_id *lid = container_of(listen, struct srn_cm_id, id);
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr a;
	int err;

	if (!listen || !id || !lid->sync)
		return srn_cm_err(-EINVAL);
	if (srn_cm_complete(lid))
		return -1;
	ev = listen->event;
	listen->event = NULL;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		return srn_cm_err(-EINVAL);
	}
	if (lid->ep_attr) {
		a = *lid->ep_attr;
		if (rdma_create_qp(ev->id, lid->ep_pd, &a)) {
			err = errno;
			rdma_reject(ev->id, NULL, 0);
			rdma_ack_cm_event(ev);
			errno = err;
			return -1;
		}
	}
	*id = ev->id;
	(*id)->event = ev;
	return 0;
}

SRN_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
			       void *optval, size_t optlen)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);

	if (!id || !optval)
		return srn_cm_err(-EINVAL);
	if (level != RDMA_OPTION_ID)
		return srn_cm_err(level == RDMA_OPTION_IB ? -EOPNOTSUPP :
							    -ENOSYS);
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			return srn_cm_err(-EINVAL);
		cid->tos = *(uint8_t *)optval;
		return 0;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t) || *(uint8_t *)optval > 31)
			return srn_cm_err(-EINVAL);
		cid->ack_timeout = *(uint8_t *)optval;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
	case RDMA_OPTION_ID_AFONLY:
		return optlen == sizeof(int) ? 0 : srn_cm_err(-EINVAL);
	default:
		return srn_cm_err(-ENOSYS);
	}
}

/* Moves cid's queued events to channel c (under srn_cm.lock). */
static void srn_cm_move_events(struct srn_cm_id *cid, struct srn_cm_chan *c)
{
	struct srn_list *pos, *tmp;
	struct srn_cm_event *e;
	uint64_t one = 1;

	srn_list_for_each_safe(pos, tmp, &cid->chan->events) {
		e = srn_list_entry(pos, struct srn_cm_event, link);
		if (e->owner != cid)
			continue;
		srn_list_del(pos);
		srn_list_add_tail(pos, &c->events);
		if (write(c->ch.fd, &one, sizeof(one)) != sizeof(one))
			srn_warn("rdmacm: cannot signal the event channel");
	}
}

SRN_EXPORT int rdma_migrate_id(struct rdma_cm_id *id,
			       struct rdma_event_channel *channel)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	struct srn_cm_chan *c, *old;

	if (!id)
		return srn_cm_err(-EINVAL);
	c = channel ? container_of(channel, struct srn_cm_chan, ch) :
		      srn_cm_chan_new(true);
	if (!c)
		return srn_cm_err(-ENOMEM);
	pthread_mutex_lock(&srn_cm.lock);
	while (cid->acked != cid->reported)
		pthread_cond_wait(&cid->cond, &srn_cm.lock);
	old = cid->chan;
	srn_cm_move_events(cid, c);
	cid->chan = c;
	cid->id.channel = &c->ch;
	cid->sync = !channel;
	if (old->private)
		srn_cm_chan_free(old);
	pthread_mutex_unlock(&srn_cm.lock);
	return 0;
}

SRN_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	return id ? 0 : srn_cm_err(-EINVAL);
}

/* The group's GID: an IPv4 group mapped (::ffff:a.b.c.d, as RoCEv2), an
 * IPv6 group itself; -EINVAL for anything but a multicast address. */
static int srn_cm_mgid(const struct sockaddr *sa, union ibv_gid *mgid)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

	memset(mgid, 0, sizeof(*mgid));
	if (sa->sa_family == AF_INET &&
	    IN_MULTICAST(be32toh(s4->sin_addr.s_addr))) {
		mgid->raw[10] = mgid->raw[11] = 0xff;
		memcpy(mgid->raw + 12, &s4->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_MULTICAST(&s6->sin6_addr)) {
		memcpy(mgid->raw, &s6->sin6_addr, 16);
		return 0;
	}
	return -EINVAL;
}

static struct srn_cm_mc *srn_cm_mc_find(struct srn_cm_id *cid,
					const union ibv_gid *mgid)
{
	struct srn_list *pos;
	struct srn_cm_mc *mc;

	srn_list_for_each(pos, &cid->mcs) {
		mc = srn_list_entry(pos, struct srn_cm_mc, link);
		if (!memcmp(mc->mgid.raw, mgid->raw, 16))
			return mc;
	}
	return NULL;
}

/* MULTICAST_JOIN: the group's address vector, QPN 0xffffff, the Q_Key,
 * and the join's context as private_data (as rdma-core). */
static int srn_cm_mc_event(struct srn_cm_id *cid, struct srn_cm_mc *mc)
{
	struct rdma_ud_param *u;
	struct srn_cm_event *e;
	int ret = srn_cm_queue(cid, cid, RDMA_CM_EVENT_MULTICAST_JOIN, 0, NULL);

	if (ret)
		return ret;
	e = srn_list_entry(cid->chan->events.prev, struct srn_cm_event, link);
	u = &e->ev.param.ud;
	u->private_data = mc->context;
	srn_cm_ud_ah(cid, mc->mgid.raw, &u->ah_attr);
	u->qp_num = 0xffffff;
	u->qkey = RDMA_UDP_QKEY;
	return 0;
}

static int srn_cm_join_locked(struct srn_cm_id *cid, const struct sockaddr *sa,
			      bool send_only, void *context)
{
	union ibv_gid mgid;
	struct srn_cm_mc *mc;
	int ret, len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						   sizeof(struct sockaddr_in);

	if (cid->id.qp_type != IBV_QPT_UD ||
	    (cid->state != SRN_CMS_BOUND &&
	     cid->state != SRN_CMS_ADDR_RESOLVED))
		return -EINVAL;
	ret = srn_cm_mgid(sa, &mgid);
	if (ret)
		return ret;
	if (srn_cm_mc_find(cid, &mgid))
		return -EADDRINUSE;
	mc = srn_cm_zalloc(sizeof(*mc));
	if (!mc)
		return -ENOMEM;
	memcpy(&mc->addr, sa, len);
	mc->mgid = mgid;
	mc->context = context;
	if (cid->id.qp && !send_only) {
		ret = -ibv_attach_mcast(cid->id.qp, &mgid, 0);
		mc->attached = !ret;
	}
	if (!ret)
		ret = srn_cm_mc_event(cid, mc);
	if (ret) {
		if (mc->attached)
			ibv_detach_mcast(cid->id.qp, &mgid, 0);
		srn_cm_zfree(mc);
		return ret;
	}
	srn_list_add_tail(&mc->link, &cid->mcs);
	return 0;
}

static int srn_cm_join(struct rdma_cm_id *id, const struct sockaddr *sa,
		       bool send_only, void *context)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret;

	if (!id || !sa)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_join_locked(cid, sa, send_only, context);
	pthread_mutex_unlock(&srn_cm.lock);
	if (ret)
		return srn_cm_err(ret);
	return srn_cm_complete(cid);
}

SRN_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				   void *context)
{
	return srn_cm_join(id, addr, false, context);
}

SRN_EXPORT int
rdma_join_multicast_ex(struct rdma_cm_id *id,
		       struct rdma_cm_join_mc_attr_ex *mc_join_attr,
		       void *context)
{
	struct rdma_cm_join_mc_attr_ex *a = mc_join_attr;
	uint32_t need = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
			RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;

	if (!a || (a->comp_mask & need) != need ||
	    a->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED ||
	    (a->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	     a->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER))
		return srn_cm_err(-EINVAL);
	return srn_cm_join(id, a->addr,
			   a->join_flags ==
				   RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
			   context);
}

SRN_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id,
				    struct sockaddr *addr)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	union ibv_gid mgid;
	struct srn_cm_mc *mc;
	int ret;

	if (!id || !addr)
		return srn_cm_err(-EINVAL);
	ret = srn_cm_mgid(addr, &mgid);
	if (ret)
		return srn_cm_err(-EADDRNOTAVAIL);
	pthread_mutex_lock(&srn_cm.lock);
	mc = srn_cm_mc_find(cid, &mgid);
	if (mc) {
		if (mc->attached && id->qp)
			ibv_detach_mcast(id->qp, &mgid, 0);
		srn_list_del(&mc->link);
		srn_cm_zfree(mc);
	}
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_cm_err(mc ? 0 : -EADDRNOTAVAIL);
}

SRN_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return id && ece ? 0 : srn_cm_err(-EINVAL);
}

SRN_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece)
		return srn_cm_err(-EINVAL);
	memset(ece, 0, sizeof(*ece)); /* no enhanced connection options */
	return 0;
}
