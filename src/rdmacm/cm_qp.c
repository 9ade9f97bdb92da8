// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: QPs and SRQs on ids, and their attributes.
 *
 * rdma_create_qp moves the QP to INIT; rdma_accept and the active side's
 * REP move it through INIT (again, with the access the connection
 * grants), RTR and RTS with the QPNs and PSNs the two sides exchanged
 * (rdma_init_qp_attr gives the same attributes to applications that make
 * their own QPs). Access, as an IB CM grants it: REMOTE_WRITE, plus
 * REMOTE_READ and REMOTE_ATOMIC when this side accepts RDMA reads
 * (responder resources > 0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "rdmacm/cm.h"

static int srn_cm_qp_access(struct srn_cm_id *cid)
{
	if (!cid->conn.peer_known)
		return 0;
	return IBV_ACCESS_REMOTE_WRITE |
	       (cid->conn.resp_res ?
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC :
			0);
}

static int srn_cm_attr_init(struct srn_cm_id *cid, struct ibv_qp_attr *a,
			    int *mask)
{
	a->pkey_index = 0;
	a->port_num = 1;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (cid->id.qp_type == IBV_QPT_UD) {
		a->qkey = RDMA_UDP_QKEY;
		*mask |= IBV_QP_QKEY;
	} else {
		a->qp_access_flags = srn_cm_qp_access(cid);
		*mask |= IBV_QP_ACCESS_FLAGS;
	}
	return 0;
}

static int srn_cm_attr_rtr(struct srn_cm_id *cid, struct ibv_qp_attr *a,
			   int *mask)
{
	struct srn_cm_conn *c = &cid->conn;

	*mask = IBV_QP_STATE;
	if (cid->id.qp_type == IBV_QPT_UD)
		return 0;
	if (!c->peer_known)
		return -EINVAL;
	a->path_mtu = srn_cm.mtu;
	a->dest_qp_num = c->peer_qpn;
	a->rq_psn = c->peer_psn;
	a->max_dest_rd_atomic = c->resp_res ? c->resp_res : 1;
	a->min_rnr_timer = SRN_CM_MIN_RNR_TIMER;
	memset(&a->ah_attr, 0, sizeof(a->ah_attr));
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	memcpy(a->ah_attr.grh.dgid.raw, c->peer_gid, 16);
	a->ah_attr.grh.sgid_index = 0;
	a->ah_attr.grh.hop_limit = 64;
	a->ah_attr.grh.traffic_class = cid->tos;
	*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return 0;
}

static int srn_cm_attr_rts(struct srn_cm_id *cid, struct ibv_qp_attr *a,
			   int *mask)
{
	struct srn_cm_conn *c = &cid->conn;

	*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	a->sq_psn = c->psn;
	if (cid->id.qp_type == IBV_QPT_UD)
		return 0;
	if (!c->peer_known)
		return -EINVAL;
	a->timeout = cid->ack_timeout;
	a->retry_cnt = c->retry_count;
	a->rnr_retry = c->rnr_retry_count;
	a->max_rd_atomic = c->init_depth ? c->init_depth : 1;
	*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		 IBV_QP_MAX_QP_RD_ATOMIC;
	return 0;
}

/* The attributes for a->qp_state (INIT, RTR or RTS) under srn_cm.lock. */
int srn_cm_qp_attr(struct srn_cm_id *cid, struct ibv_qp_attr *a, int *mask)
{
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		return srn_cm_attr_init(cid, a, mask);
	case IBV_QPS_RTR:
		return srn_cm_attr_rtr(cid, a, mask);
	case IBV_QPS_RTS:
		return srn_cm_attr_rts(cid, a, mask);
	default:
		return -EINVAL;
	}
}

SRN_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id,
				 struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	int ret;

	if (!id || !qp_attr || !qp_attr_mask)
		return srn_cm_err(-EINVAL);
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_qp_attr(cid, qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_cm_err(ret);
}

static int srn_cm_qp_to(struct srn_cm_id *cid, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };
	int mask, ret;

	ret = srn_cm_qp_attr(cid, &a, &mask);
	if (ret)
		return ret;
	return -ibv_modify_qp(cid->id.qp, &a, mask);
}

/* INIT (again, with the connection's access), RTR, RTS. */
int srn_cm_qp_connect(struct srn_cm_id *cid)
{
	int ret = srn_cm_qp_to(cid, IBV_QPS_INIT);

	if (!ret)
		ret = srn_cm_qp_to(cid, IBV_QPS_RTR);
	if (!ret)
		ret = srn_cm_qp_to(cid, IBV_QPS_RTS);
	if (ret)
		srn_warn("rdmacm: QP %u does not connect: %s",
			 cid->id.qp->qp_num, strerror(-ret));
	return ret;
}

void srn_cm_qp_error(struct srn_cm_id *cid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	if (cid->id.qp)
		ibv_modify_qp(cid->id.qp, &a, IBV_QP_STATE);
}

/* CQs (and their channels) for a QP the application gave none: context
 * id, as <rdma/rdma_verbs.h> expects. */
static int srn_cm_make_cqs(struct rdma_cm_id *id, uint32_t scqe, uint32_t rcqe)
{
	struct ibv_comp_channel *sch, *rch;

	sch = ibv_create_comp_channel(id->verbs);
	rch = ibv_create_comp_channel(id->verbs);
	id->send_cq_channel = sch;
	id->recv_cq_channel = rch;
	if (sch)
		id->send_cq =
			ibv_create_cq(id->verbs, scqe ? scqe : 1, id, sch, 0);
	if (rch)
		id->recv_cq =
			ibv_create_cq(id->verbs, rcqe ? rcqe : 1, id, rch, 0);
	if (id->send_cq && id->recv_cq)
		return 0;
	if (id->send_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->recv_cq)
		ibv_destroy_cq(id->recv_cq);
	if (sch)
		ibv_destroy_comp_channel(sch);
	if (rch)
		ibv_destroy_comp_channel(rch);
	id->send_cq = id->recv_cq = NULL;
	id->send_cq_channel = id->recv_cq_channel = NULL;
	return -ENOMEM;
}

/* The CQs the library made for the id, once neither its QP nor its SRQ
 * (an XRC SRQ completes on the id's receive CQ) uses them. */
static void srn_cm_free_cqs(struct srn_cm_id *cid)
{
	struct rdma_cm_id *id = &cid->id;

	if (!cid->own_cqs || id->qp || id->srq)
		return;
	if (id->send_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->recv_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->send_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	if (id->recv_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	id->send_cq = id->recv_cq = NULL;
	id->send_cq_channel = id->recv_cq_channel = NULL;
	cid->own_cqs = false;
}

static struct ibv_pd *srn_cm_default_pd(void)
{
	pthread_mutex_lock(&srn_cm.lock);
	if (!srn_cm.pd && srn_cm.ctx)
		srn_cm.pd = ibv_alloc_pd(srn_cm.ctx);
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_cm.pd;
}

/* The device's XRC domain, as rdma-core's librdmacm keeps one per device
 * for XRC ids (an anonymous one, open for the life of the process). */
static struct ibv_xrcd *srn_cm_default_xrcd(void)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};

	pthread_mutex_lock(&srn_cm.lock);
	if (!srn_cm.xrcd && srn_cm.ctx)
		srn_cm.xrcd = ibv_open_xrcd(srn_cm.ctx, &a);
	pthread_mutex_unlock(&srn_cm.lock);
	return srn_cm.xrcd;
}

/* An id's default CQs, unless it has them. */
static int srn_cm_want_cqs(struct srn_cm_id *cid, uint32_t scqe, uint32_t rcqe)
{
	int ret;

	if (cid->id.send_cq)
		return 0;
	ret = srn_cm_make_cqs(&cid->id, scqe, rcqe);
	if (!ret)
		cid->own_cqs = true;
	return ret;
}

/* The QP is made: INIT (RC), or ready to send (UD). */
static int srn_cm_qp_ready(struct srn_cm_id *cid)
{
	int ret;

	pthread_mutex_lock(&srn_cm.lock);
	if (!cid->conn.psn)
		cid->conn.psn = srn_cm_random24();
	ret = srn_cm_qp_to(cid, IBV_QPS_INIT);
	if (!ret && cid->id.qp_type == IBV_QPT_UD)
		ret = srn_cm_qp_to(cid, IBV_QPS_RTR);
	if (!ret && cid->id.qp_type == IBV_QPT_UD)
		ret = srn_cm_qp_to(cid, IBV_QPS_RTS);
	pthread_mutex_unlock(&srn_cm.lock);
	return ret;
}

SRN_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id,
				 struct ibv_qp_init_attr_ex *attr)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr || !id->verbs || id->qp)
		return srn_cm_err(-EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : srn_cm_default_pd();
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (!attr->pd || attr->pd->context != id->verbs)
		return srn_cm_err(-EINVAL);
	if (attr->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = srn_cm_default_xrcd();
		if (!attr->xrcd)
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if (id->srq && !attr->srq && attr->qp_type != IBV_QPT_XRC_RECV)
		attr->srq = id->srq;
	if (!attr->send_cq || !attr->recv_cq) {
		ret = srn_cm_want_cqs(cid, attr->cap.max_send_wr,
				      attr->cap.max_recv_wr);
		if (ret)
			return srn_cm_err(ret);
		if (!attr->send_cq)
			attr->send_cq = id->send_cq;
		if (!attr->recv_cq)
			attr->recv_cq = id->recv_cq;
	}
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = -errno;
		srn_cm_free_cqs(cid);
		return srn_cm_err(ret ? ret : -ENOMEM);
	}
	id->qp = qp;
	id->pd = attr->pd;
	ret = srn_cm_qp_ready(cid);
	if (ret) {
		ibv_destroy_qp(qp);
		id->qp = NULL;
		srn_cm_free_cqs(cid);
		return srn_cm_err(ret);
	}
	return 0;
}

SRN_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax;
	int ret;

	if (!qp_init_attr)
		return srn_cm_err(-EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, qp_init_attr, sizeof(*qp_init_attr));
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd;
	ret = rdma_create_qp_ex(id, &ax);
	if (!ret) {
		/* the caps as created, as ibv_create_qp writes them back */
		memcpy(qp_init_attr, &ax, sizeof(*qp_init_attr));
	}
	return ret;
}

/* Detaches cid's QP from the groups it joined (under srn_cm.lock); with
 * free_them, forgets the groups too (the id goes away). */
void srn_cm_mc_drop(struct srn_cm_id *cid, bool free_them)
{
	struct srn_list *pos, *tmp;
	struct srn_cm_mc *mc;

	srn_list_for_each_safe(pos, tmp, &cid->mcs) {
		mc = srn_list_entry(pos, struct srn_cm_mc, link);
		if (mc->attached && cid->id.qp)
			ibv_detach_mcast(cid->id.qp, &mc->mgid, 0);
		mc->attached = false;
		if (!free_them)
			continue;
		srn_list_del(pos);
		srn_cm_zfree(mc);
	}
}

SRN_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);

	if (!id || !id->qp)
		return;
	pthread_mutex_lock(&srn_cm.lock);
	srn_cm_mc_drop(cid, false);
	pthread_mutex_unlock(&srn_cm.lock);
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	srn_cm_free_cqs(cid);
}

/* An XRC SRQ's defaults: the device's XRC domain, the id's receive CQ. */
static int srn_cm_srq_xrc(struct srn_cm_id *cid,
			  struct ibv_srq_init_attr_ex *attr)
{
	int ret;

	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
		attr->xrcd = srn_cm_default_xrcd();
		if (!attr->xrcd)
			return -errno;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
		ret = srn_cm_want_cqs(cid, 0, attr->attr.max_wr);
		if (ret)
			return ret;
		attr->cq = cid->id.recv_cq;
	}
	attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	return 0;
}

SRN_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id,
				  struct ibv_srq_init_attr_ex *attr)
{
	struct srn_cm_id *cid = container_of(id, struct srn_cm_id, id);
	struct ibv_srq *srq;
	int ret;

	if (!id || !attr || !id->verbs || id->srq)
		return srn_cm_err(-EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : srn_cm_default_pd();
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		attr->srq_type = IBV_SRQT_BASIC;
	attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
	if (attr->srq_type == IBV_SRQT_XRC) {
		ret = srn_cm_srq_xrc(cid, attr);
		if (ret)
			return srn_cm_err(ret);
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		ret = -errno;
		srn_cm_free_cqs(cid);
		return srn_cm_err(ret ? ret : -ENOMEM);
	}
	id->srq = srq;
	id->pd = attr->pd;
	return 0;
}

SRN_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int ret;

	if (!id || !attr)
		return srn_cm_err(-EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, attr, sizeof(*attr));
	ax.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	ax.pd = pd;
	ax.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC :
							IBV_SRQT_BASIC;
	ret = rdma_create_srq_ex(id, &ax);
	if (!ret)
		memcpy(attr, &ax, sizeof(*attr));
	return ret;
}

SRN_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	srn_cm_free_cqs(container_of(id, struct srn_cm_id, id));
}
