// SPDX-License-Identifier: MIT
/*
 * softrnic — the send path of UD QPs. A UD QP has no connection: each WR
 * names its destination (AH, remote QPN, Q_Key), so at RTR the QP takes
 * these ops instead of a transport, and each datagram goes to the
 * transport that reaches its destination GID (the same choice as for a
 * connection: engine/transport.c), remembered for the next datagram to
 * the same GID. Datagrams never wait: they are delivered or dropped at
 * once, and complete in order under sq_lock.
 *
 * The state a transport keeps per UD QP (its receive path, the
 * destinations it has met) hangs off srn_ud_qp's slots, one per
 * registered transport (srn_ud_slot).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/transport.h"

struct srn_ud_qp {
	union ibv_gid last_gid; /* the last destination GID... */
	const struct srn_transport_ops *last; /* ...its transport (NULL:
					       * none yet, or none reaches) */
	unsigned last_index; /* ...and its place in the registry */
	bool have_last;
	void *slot[SRN_TRANSPORT_MAX];
};

/* Where the transport of this name keeps its state for UD QP qp. */
void **srn_ud_slot(struct srn_qp *qp, const char *transport)
{
	return &qp->ud->slot[srn_transport_index(transport)];
}

/* A new UD QP: its state, and every datagram transport ready to deliver
 * to it. 0 or -errno (the QP is then destroyed: srn_ud_destroy). */
int srn_ud_create(struct srn_qp *qp)
{
	qp->ud = calloc(1, sizeof(*qp->ud));
	if (!qp->ud)
		return -ENOMEM;
	return srn_transport_ud_open(qp);
}

/* After srn_transport_qp_destroy: nothing refers to the state any more. */
void srn_ud_destroy(struct srn_qp *qp)
{
	free(qp->ud);
	qp->ud = NULL;
}

static const struct srn_transport_ops *srn_ud_route(struct srn_qp *qp,
						    const union ibv_gid *dgid)
{
	struct srn_ud_qp *u = qp->ud;
	int err = 0;

	if (u->have_last && !memcmp(&u->last_gid, dgid, sizeof(*dgid)))
		return u->last;
	u->last = srn_transport_select_ud(dgid, &err);
	if (u->last) /* the name is looked up once per route, not per WR */
		u->last_index = srn_transport_index(u->last->name);
	u->last_gid = *dgid;
	u->have_last = true;
	return u->last;
}

static int srn_ud_execute(struct srn_qp *qp, const struct srn_swqe *w,
			  enum ibv_wc_status *status, enum srn_stall *stall)
{
	const struct srn_ah *ah = to_sah(w->ah);
	const struct srn_transport_ops *t;
	struct srn_ud_dest d;
	int err;

	*status = IBV_WC_SUCCESS;
	d.dgid = ah->attr.grh.dgid;
	d.qpn = w->remote_qpn & 0xffffff;
	/* a Q_Key with its MSB set is privileged: the QP's own is sent */
	d.qkey = (w->remote_qkey & 0x80000000u) ? qp->attr.qkey :
						  w->remote_qkey;
	t = srn_ud_route(qp, &d.dgid);
	if (!t)
		return 0; /* nothing reaches it: lost, as on a wire */
	d.slot = &qp->ud->slot[qp->ud->last_index];
	err = t->ud_send(qp, w, &d, status, stall);
	if (err != -EACCES)
		return err;
	/* the destination's process shares no memory with ours (another
	 * user's, or ours but not allowed to ptrace us): the datagram goes
	 * the mediated way, as another user's would */
	t = srn_transport_mediator_ud();
	if (!t)
		return 0; /* lost */
	d.slot = srn_ud_slot(qp, t->name);
	return t->ud_send(qp, w, &d, status, stall);
}

static int srn_ud_connect(struct srn_qp *qp, const struct ibv_qp_attr *attr)
{
	(void)qp;
	(void)attr;
	return 0;
}

/* RESET or destroy (sq_lock held): the transports forget the
 * destinations met so far. */
static void srn_ud_disconnect(struct srn_qp *qp)
{
	srn_transport_ud_close(qp);
	if (qp->ud)
		qp->ud->have_last = false;
}

static const char *srn_ud_describe(struct srn_qp *qp)
{
	(void)qp;
	return "datagrams";
}

static bool srn_ud_reaches(const union ibv_gid *dgid)
{
	(void)dgid;
	return true;
}

const struct srn_transport_ops srn_ud_ops = {
	.name = "ud",
	.reaches = srn_ud_reaches,
	.connect = srn_ud_connect,
	.disconnect = srn_ud_disconnect,
	.execute = srn_ud_execute,
	.describe = srn_ud_describe,
};
