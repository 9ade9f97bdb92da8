// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: connections (docs/rdmacm.md, "Connections").
 *
 *   active                                 passive
 *   rdma_connect: dial the CM port ──REQ──► CONNECT_REQUEST (child id)
 *                                           rdma_accept: QP to RTS
 *   QP to RTR, RTS; ESTABLISHED ◄──REP──── (or rdma_reject ──REJ──►
 *   (no QP: CONNECT_RESPONSE,                REJECTED)
 *    rdma_establish sends RTU)  ──RTU──►   ESTABLISHED
 *   rdma_disconnect: QP to ERR  ──DREQ─►   DISCONNECTED, DREP back
 *   DISCONNECTED                ◄─DREP──
 *
 * A connection lost before DISCONNECTED is DISCONNECTED once established,
 * UNREACHABLE or CONNECT_ERROR before.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdmacm/cm.h"

static void srn_cm_on_lost(struct srn_cm_id *cid, int err);
static void srn_cm_unreachable(struct srn_cm_id *cid, int err);

static uint8_t srn_cm_clamp(uint8_t v, int max)
{
	return v > max ? (uint8_t)max : v;
}

/* Our values into a REQ or REP. */
static void srn_cm_msg_fill(struct srn_cm_id *cid, struct srn_cm_msg *m,
			    const void *pdata, uint8_t plen)
{
	struct srn_cm_conn *c = &cid->conn;

	m->qpn = htobe32(c->qpn);
	m->psn = htobe32(c->psn);
	m->responder_resources = c->resp_res;
	m->initiator_depth = c->init_depth;
	m->retry_count = c->retry_count;
	m->rnr_retry_count = c->rnr_retry_count;
	m->flow_control = c->flow_control;
	m->srq = c->srq;
	memcpy(m->gid, srn_cm.gid.raw, 16);
	if (cid->id.qp_type == IBV_QPT_UD)
		m->qkey = htobe32(RDMA_UDP_QKEY);
	if (plen)
		memcpy(m->pdata, pdata, plen);
	m->pdata_len = plen;
}

/* The peer's values from a REQ or REP. */
static void srn_cm_msg_take(struct srn_cm_id *cid, const struct srn_cm_msg *m)
{
	struct srn_cm_conn *c = &cid->conn;

	c->peer_qpn = be32toh(m->qpn);
	c->peer_psn = be32toh(m->psn);
	c->peer_resp_res = m->responder_resources;
	c->peer_init_depth = m->initiator_depth;
	memcpy(c->peer_gid, m->gid, 16);
	memcpy(cid->id.route.addr.addr.ibaddr.dgid.raw, m->gid, 16);
	c->peer_known = true;
}

/* Our connection values from the application's (NULL: the defaults). */
static int srn_cm_param(struct srn_cm_id *cid, const struct rdma_conn_param *p,
			unsigned int pmax)
{
	struct srn_cm_conn *c = &cid->conn;
	int max_rr = srn_cm.dev_attr.max_qp_rd_atom;
	int max_id = srn_cm.dev_attr.max_qp_init_rd_atom;

	if (p && p->private_data_len > pmax)
		return -EINVAL;
	if (p && p->private_data_len && !p->private_data)
		return -EINVAL;
	c->qpn = cid->id.qp ? cid->id.qp->qp_num : (p ? p->qp_num : 0);
	if (!p) {
		c->resp_res = srn_cm_clamp(c->peer_known ? c->peer_init_depth :
							   (uint8_t)max_rr,
					   max_rr);
		c->init_depth = srn_cm_clamp(c->peer_known ? c->peer_resp_res :
							     (uint8_t)max_id,
					     max_id);
		c->retry_count = c->rnr_retry_count = SRN_CM_DEF_RETRY;
		return 0;
	}
	c->resp_res = srn_cm_clamp(p->responder_resources, max_rr);
	c->init_depth = srn_cm_clamp(p->initiator_depth, max_id);
	c->retry_count = srn_cm_clamp(p->retry_count, 7);
	c->rnr_retry_count = srn_cm_clamp(p->rnr_retry_count, 7);
	c->flow_control = p->flow_control;
	c->srq = p->srq || cid->id.srq;
	return 0;
}

static bool srn_cm_is_ud(const struct srn_cm_id *cid)
{
	return cid->id.qp_type == IBV_QPT_UD;
}

/* The REQ's private data limit: SIDR for UD, else by port space. */
static unsigned int srn_cm_req_pmax(const struct srn_cm_id *cid)
{
	if (srn_cm_is_ud(cid))
		return SRN_CM_PDATA_SIDR_REQ;
	return cid->id.ps == RDMA_PS_IB ? SRN_CM_PDATA_REQ_IB :
					  SRN_CM_PDATA_REQ;
}

/* The REQ of cid on the link to its destination's rdma_cm port (dialed
 * now if there is none; the REQ waits in it meanwhile): 0 or -errno. */
static int srn_cm_req_send(struct srn_cm_id *cid)
{
	struct srn_cm_msg m;
	int ret, tries = 2;

again:
	ret = srn_cm_link_join(cid);
	if (ret)
		return ret;
	srn_cm_msg_init(&m, SRN_CM_REQ);
	srn_cm_msg_fill(cid, &m, cid->req_pdata, cid->req_plen);
	m.src_port = rdma_get_src_port(&cid->id);
	m.dst_port = rdma_get_dst_port(&cid->id);
	m.ps = htobe16(cid->id.ps);
	m.qp_type = cid->id.qp_type;
	cid->heard_ns = srn_now_ns(); /* the response timer starts */
	ret = srn_cm_send(cid, &m);
	if (ret) {
		cid->lk_quiet = true; /* the peer never heard of us */
		srn_cm_close_conn(cid);
		/* a link that broke before the CM thread heard it is stale
		 * now: the REQ goes once more, on a new one */
		if (ret != -ENOBUFS && --tries)
			goto again;
	}
	return ret;
}

static int srn_cm_connect_locked(struct srn_cm_id *cid,
				 const struct rdma_conn_param *p)
{
	int ret;

	if (cid->id.qp_type != IBV_QPT_RC &&
	    cid->id.qp_type != IBV_QPT_XRC_SEND && !srn_cm_is_ud(cid))
		return -EOPNOTSUPP;
	if (cid->state != SRN_CMS_ROUTE_RESOLVED &&
	    cid->state != SRN_CMS_ADDR_RESOLVED)
		return -EINVAL;
	ret = srn_cm_param(cid, p, srn_cm_req_pmax(cid));
	if (ret)
		return ret;
	if (!cid->conn.psn)
		cid->conn.psn = srn_cm_random24();
	/* kept until the connection is up: sent with the REQ */
	cid->req_plen = p ? p->private_data_len : 0;
	if (cid->req_plen)
		memcpy(cid->req_pdata, p->private_data, cid->req_plen);
	cid->conn.peer_known = false;
	ret = srn_cm_req_send(cid);
	if (ret)
		return ret;
	srn_dbg("rdmacm: connect");
	cid->dials = 1;
	srn_cm_set_state(cid, SRN_CMS_CONNECTING);
	return 0;
}

SRN_EXPORT int rdma_connect(struct rdma_cm_id *id,
			    struct rdma_conn_param *conn_param)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret;

	if (!id)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_connect_locked(cid, conn_param);
	pthread_mutex_unlock(&srn_cm.lock);
	if (ret)
		return srn_cm_err(ret);
	return srn_cm_complete(cid);
}

/* A failed dial: nobody listens (REJECTED, as an IB CM's invalid service
 * id) or no way there (UNREACHABLE). */
static void srn_cm_dial_failed(struct srn_cm_id *cid, int err)
{
	srn_cm_close_conn(cid);
	srn_cm_set_state(cid, SRN_CMS_FAILED);
	srn_dbg("rdmacm: dial failed: %s", strerror(-err));
	if (err == -ECONNREFUSED && srn_cm_is_ud(cid))
		srn_cm_queue(cid, cid, RDMA_CM_EVENT_UNREACHABLE,
			     SRN_CM_SIDR_UNSUPPORTED, NULL);
	else if (err == -ECONNREFUSED)
		srn_cm_queue(cid, cid, RDMA_CM_EVENT_REJECTED,
			     SRN_CM_REJ_INVALID_SERVICE_ID, NULL);
	else
		srn_cm_queue(cid, cid, RDMA_CM_EVENT_UNREACHABLE, err, NULL);
}

/* Fills a child's addresses from its link's ends and the REQ. */
static void srn_cm_child_addr(struct srn_cm_id *c, struct srn_cm_id *lid,
			      const struct srn_cm_link *lk,
			      const struct srn_cm_msg *m)
{
	struct rdma_addr *ra = &c->id.route.addr;
	struct sockaddr_in6 *s6;
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	int i;

	for (i = 0; i < 2; i++) {
		struct sockaddr *sa = i ? &ra->dst_addr : &ra->src_addr;

		memcpy(sa, i ? &lk->peer_sa : &lk->local_sa,
		       sizeof(struct sockaddr_storage));
		s6 = (struct sockaddr_in6 *)sa;
		if (sa->sa_family == AF_INET6 &&
		    IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			memcpy(&s4.sin_addr, s6->sin6_addr.s6_addr + 12, 4);
			memset(sa, 0, sizeof(struct sockaddr_storage));
			memcpy(sa, &s4, sizeof(s4));
		}
		if (sa->sa_family == AF_INET6)
			s6->sin6_port = i ? m->src_port : htobe16(lid->port);
		else
			((struct sockaddr_in *)sa)->sin_port =
				i ? m->src_port : htobe16(lid->port);
	}
}

/*
 * A REQ for listener lid arrived on link lk (under srn_cm.lock): a child
 * id and CONNECT_REQUEST on the listener's channel. 0, or -errno (the
 * link answers REJ).
 */
static_assert(SRN_CM_QPT_RC == IBV_QPT_RC && SRN_CM_QPT_UD == IBV_QPT_UD &&
		      SRN_CM_QPT_XRC_SEND == IBV_QPT_XRC_SEND,
	      "a REQ's qp_type is the verbs value");

/* The QP type a listener must have for a REQ from a QP of this type: an
 * XRC initiator (INI) connects to a target (TGT) QP, the others to their
 * own type. */
static unsigned int srn_cm_peer_qp_type(unsigned int type)
{
	return type == IBV_QPT_XRC_SEND ? IBV_QPT_XRC_RECV : type;
}

static int srn_cm_on_req(struct srn_cm_id *lid, struct srn_cm_link *lk,
			 const struct srn_cm_msg *m)
{
	struct srn_cm_id *c;

	if (lid->pending >= lid->backlog ||
	    srn_cm_peer_qp_type(m->qp_type) != lid->id.qp_type)
		return -ECONNREFUSED;
	c = srn_cm_id_new(lid->sync ? NULL : lid->chan, lid->id.context,
			  lid->id.ps, lid->id.qp_type);
	if (!c)
		return -ENOMEM;
	c->listener = lid;
	srn_cm_set_state(c, SRN_CMS_REQ_RCVD);
	c->conn.psn = srn_cm_random24();
	c->ack_timeout = lid->ack_timeout;
	c->tos = lid->tos;
	srn_cm_id_set_verbs(c);
	srn_cm_child_addr(c, lid, lk, m);
	srn_cm_msg_take(c, m);
	c->conn.retry_count = m->retry_count;
	c->conn.rnr_retry_count = m->rnr_retry_count;
	/* what rdma_accept(id, NULL) and rdma_init_qp_attr before it use */
	c->conn.resp_res = srn_cm_clamp(m->initiator_depth,
					srn_cm.dev_attr.max_qp_rd_atom);
	c->conn.init_depth = srn_cm_clamp(m->responder_resources,
					  srn_cm.dev_attr.max_qp_init_rd_atom);
	if (srn_cm_queue(c, lid, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m)) {
		srn_list_del(&c->link);
		srn_list_del(&c->hlink);
		if (c->chan->private)
			srn_cm_chan_free(c->chan);
		srn_cm_zfree(c);
		return -ENOMEM;
	}
	srn_cm_link_attach(c, lk);
	c->peer_comm = be32toh(m->local_id);
	lid->pending++;
	return 0;
}

static int srn_cm_accept_locked(struct srn_cm_id *cid,
				const struct rdma_conn_param *p)
{
	struct srn_cm_msg m;
	int ret;

	if (cid->state != SRN_CMS_REQ_RCVD)
		return -EINVAL;
	ret = srn_cm_param(cid, p,
			   srn_cm_is_ud(cid) ? SRN_CM_PDATA_SIDR_REP :
					       SRN_CM_PDATA_REP);
	if (ret)
		return ret;
	if (srn_cm_is_ud(cid) && !cid->conn.qpn)
		return -EINVAL;
	if (cid->id.qp && !srn_cm_is_ud(cid)) {
		ret = srn_cm_qp_connect(cid);
		if (ret)
			return ret;
	}
	srn_cm_msg_init(&m, SRN_CM_REP);
	srn_cm_msg_fill(cid, &m, p ? p->private_data : NULL,
			p ? p->private_data_len : 0);
	ret = srn_cm_send(cid, &m);
	if (ret)
		return ret;
	if (srn_cm_is_ud(cid)) {
		/* the SIDR REP ends the exchange: no RTU, no events here */
		srn_cm_close_conn(cid);
		srn_cm_set_state(cid, SRN_CMS_ESTABLISHED);
		return 0;
	}
	srn_cm_set_state(cid, SRN_CMS_REP_SENT);
	return 0;
}

SRN_EXPORT int rdma_accept(struct rdma_cm_id *id,
			   struct rdma_conn_param *conn_param)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret;

	if (!id)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_accept_locked(cid, conn_param);
	pthread_mutex_unlock(&srn_cm.lock);
	if (ret)
		return srn_cm_err(ret);
	return srn_cm_is_ud(cid) ? 0 : srn_cm_complete(cid);
}

SRN_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			   uint8_t private_data_len)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	struct srn_cm_msg m;
	int ret = 0;

	if (!id || private_data_len > SRN_CM_PDATA_REJ ||
	    (private_data_len && !private_data))
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	if (cid->state != SRN_CMS_REQ_RCVD) {
		ret = -EINVAL;
	} else {
		srn_cm_msg_init(&m, SRN_CM_REJ);
		m.reason = htobe16(srn_cm_is_ud(cid) ?
					   SRN_CM_SIDR_REJECT :
					   SRN_CM_REJ_CONSUMER_DEFINED);
		if (private_data_len) /* NULL is fine without data */
			memcpy(m.pdata, private_data, private_data_len);
		m.pdata_len = private_data_len;
		srn_cm_send(cid, &m);
		srn_cm_close_conn(cid);
		srn_cm_set_state(cid, SRN_CMS_FAILED);
	}
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_cm_err(ret);
}

SRN_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			       uint8_t private_data_len)
{
	return rdma_reject(id, private_data, private_data_len);
}

/* The RTU: the active side's last step (under srn_cm.lock). */
static int srn_cm_send_rtu(struct srn_cm_id *cid)
{
	struct srn_cm_msg m;

	srn_cm_msg_init(&m, SRN_CM_RTU);
	srn_cm_set_state(cid, SRN_CMS_ESTABLISHED);
	return srn_cm_send(cid, &m);
}

SRN_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret = -EINVAL;

	if (!id)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	if (cid->state == SRN_CMS_REP_RCVD && !id->qp)
		ret = srn_cm_send_rtu(cid);
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_cm_err(ret);
}

static void srn_cm_disc_event(struct srn_cm_id *cid)
{
	srn_cm_set_state(cid, SRN_CMS_DISCONNECTED);
	if (cid->disc_reported)
		return;
	cid->disc_reported = true;
	srn_cm_queue(cid, cid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
}

static int srn_cm_disconnect_locked(struct srn_cm_id *cid, bool *wait_p)
{
	struct srn_cm_msg m;

	*wait_p = false;
	if (srn_cm_is_ud(cid))
		return -EINVAL; /* nothing to disconnect */
	srn_cm_qp_error(cid);
	switch (cid->state) {
	case SRN_CMS_ESTABLISHED:
	case SRN_CMS_REP_SENT:
	case SRN_CMS_REP_RCVD:
		srn_cm_msg_init(&m, SRN_CM_DREQ);
		if (srn_cm_send(cid, &m)) {
			srn_cm_close_conn(cid);
			srn_cm_disc_event(cid);
		} else {
			srn_cm_set_state(cid, SRN_CMS_DISCONNECTING);
		}
		*wait_p = true;
		return 0;
	case SRN_CMS_DISCONNECTING:
	case SRN_CMS_DISCONNECTED:
		return 0;
	default:
		return -EINVAL;
	}
}

SRN_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	bool wait;
	int ret;

	if (!id)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_disconnect_locked(cid, &wait);
	pthread_mutex_unlock(&srn_cm.lock);
	if (ret)
		return srn_cm_err(ret);
	return wait ? srn_cm_complete(cid) : 0;
}

/* The active side's REP: QP to RTS, RTU, ESTABLISHED; or, without a QP,
 * CONNECT_RESPONSE. */
static void srn_cm_on_rep(struct srn_cm_id *cid, const struct srn_cm_msg *m)
{
	srn_cm_msg_take(cid, m);
	if (srn_cm_is_ud(cid)) { /* SIDR: the QP is ready since created */
		srn_cm_close_conn(cid);
		srn_cm_set_state(cid, SRN_CMS_ESTABLISHED);
		srn_cm_queue(cid, cid, RDMA_CM_EVENT_ESTABLISHED, 0, m);
		return;
	}
	srn_cm_set_state(cid, SRN_CMS_REP_RCVD);
	if (!cid->id.qp) {
		srn_cm_queue(cid, cid, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m);
		return;
	}
	/* ESTABLISHED once the application thread that takes it has
	 * connected the QP and sent the RTU (srn_cm_act) */
	cid->rep_wait = true;
	srn_cm_queue_act(cid, RDMA_CM_EVENT_ESTABLISHED, 0, m,
			 SRN_CM_ACT_CONNECT);
}

/* The REP's work, in the application thread (under srn_cm.lock). */
static void srn_cm_act_connect(struct srn_cm_id *cid, struct srn_cm_event *e)
{
	struct srn_cm_msg rej;
	int ret = -ECONNRESET;

	cid->rep_wait = false;
	if (cid->state == SRN_CMS_REP_RCVD) {
		ret = srn_cm_qp_connect(cid);
		if (!ret)
			ret = srn_cm_send_rtu(cid);
		if (!ret)
			return;
		srn_cm_msg_init(&rej, SRN_CM_REJ);
		rej.reason = htobe16(SRN_CM_REJ_CONSUMER_DEFINED);
		srn_cm_send(cid, &rej);
		srn_cm_close_conn(cid);
		srn_cm_set_state(cid, SRN_CMS_FAILED);
	}
	srn_cm_qp_error(cid);
	e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
	e->ev.status = ret;
}

static void srn_cm_act(struct srn_cm_event *e)
{
	struct srn_cm_id *cid = container_of(e->ev.id, struct srn_cm_id, id);

	if (e->act == SRN_CM_ACT_CONNECT)
		srn_cm_act_connect(cid, e);
	else if (e->act == SRN_CM_ACT_QP_ERR)
		srn_cm_qp_error(cid);
	e->act = SRN_CM_ACT_NONE;
}

static void srn_cm_on_rej(struct srn_cm_id *cid, const struct srn_cm_msg *m)
{
	unsigned int reason = be16toh(m->reason);

	srn_cm_close_conn(cid);
	if (reason == SRN_CM_REJ_NOT_HERE) {
		/* the link's process no longer serves the port: the REQ
		 * goes again on a new link, to whoever serves it now */
		if (cid->state == SRN_CMS_CONNECTING &&
		    cid->dials < SRN_CM_DIAL_TRIES) {
			int err;

			cid->dials++;
			err = srn_cm_req_send(cid);
			if (err)
				srn_cm_unreachable(cid, err);
			return;
		}
		reason = SRN_CM_REJ_INVALID_SERVICE_ID;
	}
	if (cid->state == SRN_CMS_REQ_RCVD && cid->listener) {
		/* rejected before the application saw it: drop quietly */
		srn_cm_set_state(cid, SRN_CMS_FAILED);
		return;
	}
	srn_cm_set_state(cid, SRN_CMS_FAILED);
	if (srn_cm_is_ud(cid)) {
		/* a SIDR REP with a status; the QP stays as it is */
		srn_cm_queue(cid, cid, RDMA_CM_EVENT_UNREACHABLE,
			     reason == SRN_CM_REJ_INVALID_SERVICE_ID ?
				     SRN_CM_SIDR_UNSUPPORTED :
				     reason,
			     m);
		return;
	}
	srn_cm_queue_act(cid, RDMA_CM_EVENT_REJECTED, reason, m,
			 SRN_CM_ACT_QP_ERR);
}

/* A message on an established-or-becoming connection (under the lock). */
static void srn_cm_on_msg(struct srn_cm_id *cid, const struct srn_cm_msg *m)
{
	struct srn_cm_msg r;
	enum srn_cm_state s = cid->state;

	cid->heard_ns = srn_now_ns();
	if (m->type == SRN_CM_MRA)
		return; /* the peer lives; its application is slow */
	if (m->type == SRN_CM_REP && s == SRN_CMS_CONNECTING) {
		srn_cm_on_rep(cid, m);
	} else if (m->type == SRN_CM_REJ &&
		   (s == SRN_CMS_CONNECTING || s == SRN_CMS_REP_SENT ||
		    s == SRN_CMS_REQ_RCVD || s == SRN_CMS_REP_RCVD)) {
		srn_cm_on_rej(cid, m);
	} else if (m->type == SRN_CM_RTU && s == SRN_CMS_REP_SENT) {
		srn_cm_set_state(cid, SRN_CMS_ESTABLISHED);
		srn_cm_queue(cid, cid, RDMA_CM_EVENT_ESTABLISHED, 0, m);
	} else if (m->type == SRN_CM_DREQ &&
		   (s == SRN_CMS_ESTABLISHED || s == SRN_CMS_REP_SENT ||
		    s == SRN_CMS_REP_RCVD || s == SRN_CMS_DISCONNECTING)) {
		srn_cm_msg_init(&r, SRN_CM_DREP);
		srn_cm_send(cid, &r);
		srn_cm_disc_event(cid);
	} else if (m->type == SRN_CM_DREP && s == SRN_CMS_DISCONNECTING) {
		srn_cm_close_conn(cid);
		srn_cm_disc_event(cid);
	} else if (m->type != SRN_CM_DREQ && m->type != SRN_CM_DREP) {
		srn_dbg("rdmacm: message %u in state %s: connection dropped",
			m->type, srn_cm_state_names[s]);
		srn_cm_on_lost(cid, -EPROTO);
	}
}

static void srn_cm_unreachable(struct srn_cm_id *cid, int err)
{
	srn_cm_set_state(cid, SRN_CMS_FAILED);
	srn_cm_queue_act(cid, RDMA_CM_EVENT_UNREACHABLE, err, NULL,
			 srn_cm_is_ud(cid) ? SRN_CM_ACT_NONE :
					     SRN_CM_ACT_QP_ERR);
}

/*
 * A REQ's connection dropped before any answer: a listener of the CM port
 * that was closing (the kernel resets what it had queued), or one that
 * could not hand the REQ on in time (the owner's hand-off queue stayed
 * full: a loaded host). Dial again after a backoff that doubles, as an IB
 * CM sends its REQ again after a timeout. false when the tries are spent.
 */
static bool srn_cm_redial_later(struct srn_cm_id *cid, int err)
{
	unsigned int ms = SRN_CM_REDIAL_MIN_MS;

	if (cid->dials >= SRN_CM_DIAL_TRIES)
		return false;
	for (unsigned int i = 1; i < cid->dials && ms < SRN_CM_REDIAL_MAX_MS;
	     i++)
		ms *= 2;
	if (ms > SRN_CM_REDIAL_MAX_MS)
		ms = SRN_CM_REDIAL_MAX_MS;
	srn_dbg("rdmacm: REQ's connection lost (%s): dial %u in %u ms",
		strerror(-err), cid->dials + 1, ms);
	cid->redial_ns = srn_now_ns() + ms * 1000000ull;
	srn_cm.redials++;
	return true;
}

/* A redial that is due (under srn_cm.lock): true while it still waits. */
static bool srn_cm_redial_run(struct srn_cm_id *cid, uint64_t now_ns)
{
	int err;

	if (cid->state != SRN_CMS_CONNECTING) {
		cid->redial_ns = 0; /* given up meanwhile */
		return false;
	}
	if (now_ns < cid->redial_ns)
		return true;
	cid->redial_ns = 0;
	cid->dials++;
	err = srn_cm_req_send(cid);
	if (err)
		srn_cm_unreachable(cid, err);
	return false;
}

/* Our application has not answered the peer yet: an MRA now and then. */
static void srn_cm_mra_run(struct srn_cm_id *cid, uint64_t now_ns)
{
	struct srn_cm_msg m;

	if (!cid->lk || now_ns - cid->mra_ns < SRN_CM_MRA_MS * 1000000ull)
		return;
	srn_cm_msg_init(&m, SRN_CM_MRA);
	srn_cm_send(cid, &m); /* a broken connection shows as lost */
	cid->mra_ns = now_ns;
}

/*
 * The CM timer of cid (under srn_cm.lock): a side that waits for its
 * peer's answer gives up after SRN_CM_RESPONSE_MS of silence (a peer
 * stopped or gone without a reset); one whose application has not
 * answered yet sends MRA. false when the id has no timer any more.
 */
static bool srn_cm_timer_run(struct srn_cm_id *cid, uint64_t now_ns)
{
	bool silent = now_ns - cid->heard_ns > SRN_CM_RESPONSE_MS * 1000000ull;

	switch (cid->state) {
	case SRN_CMS_CONNECTING:
		if (!cid->lk || srn_cm_link_waiting(cid) || !silent)
			return true; /* a dial has its own timeouts */
		srn_dbg("rdmacm: no answer to the REQ");
		srn_cm_close_conn(cid);
		srn_cm_unreachable(cid, -ETIMEDOUT);
		return false;
	case SRN_CMS_REP_SENT:
	case SRN_CMS_DISCONNECTING:
		if (!silent)
			return true;
		srn_dbg("rdmacm: no answer in state %s",
			srn_cm_state_names[cid->state]);
		srn_cm_on_lost(cid, -ETIMEDOUT);
		return false;
	case SRN_CMS_REQ_RCVD:
	case SRN_CMS_REP_RCVD:
		srn_cm_mra_run(cid, now_ns);
		return cid->lk != NULL;
	default:
		return false;
	}
}

/* The CM thread's tick while ids wait to dial again or have a CM timer
 * (under srn_cm.lock). */
static void srn_cm_on_tick(uint64_t now_ns)
{
	struct srn_list *pos, *tmp;
	struct srn_cm_id *cid;
	unsigned int redials = 0, timed = 0;

	srn_list_for_each_safe(pos, tmp, &srn_cm.ids) {
		cid = srn_list_entry(pos, struct srn_cm_id, link);
		if (cid->redial_ns && srn_cm_redial_run(cid, now_ns))
			redials++;
		else if (srn_cm_timer_run(cid, now_ns))
			timed++;
	}
	/* ids destroyed meanwhile are forgotten here */
	srn_cm.redials = redials;
	srn_cm.timed = timed;
}

/* The CM connection closed or broke (under srn_cm.lock). */
static void srn_cm_on_lost(struct srn_cm_id *cid, int err)
{
	enum srn_cm_state s = cid->state;

	srn_cm_close_conn(cid);
	switch (s) {
	case SRN_CMS_CONNECTING:
		if (err != -EPROTO && srn_cm_redial_later(cid, err))
			break;
		srn_cm_unreachable(cid, err);
		break;
	case SRN_CMS_REP_SENT:
		srn_cm_set_state(cid, SRN_CMS_FAILED);
		srn_cm_queue_act(cid, RDMA_CM_EVENT_CONNECT_ERROR, err, NULL,
				 SRN_CM_ACT_QP_ERR);
		break;
	case SRN_CMS_REQ_RCVD:
		srn_cm_set_state(cid, SRN_CMS_FAILED);
		break;
	case SRN_CMS_REP_RCVD:
		if (cid->rep_wait) { /* its ESTABLISHED becomes CONNECT_ERROR */
			srn_cm_set_state(cid, SRN_CMS_FAILED);
			break;
		}
		srn_cm_disc_event(cid);
		break;
	case SRN_CMS_ESTABLISHED:
	case SRN_CMS_DISCONNECTING:
		srn_cm_disc_event(cid);
		break;
	default:
		break;
	}
}

static const struct srn_cm_link_up_ops srn_cm_conn_up = {
	.on_msg = srn_cm_on_msg,
	.on_lost = srn_cm_on_lost,
	.on_dial_failed = srn_cm_dial_failed,
	.on_tick = srn_cm_on_tick,
	.on_req = srn_cm_on_req,
};

__attribute__((constructor)) static void srn_cm_conn_init(void)
{
	srn_cm_set_act_fn(srn_cm_act);
	srn_cm_link_set_up(&srn_cm_conn_up);
}
