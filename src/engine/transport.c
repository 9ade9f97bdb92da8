// SPDX-License-Identifier: MIT
/*
 * softrnic — the transport registry and path choice. Transports register
 * themselves when the library is loaded (SRN_TRANSPORT_REGISTER, before
 * any thread of ours runs); the table is read-only afterwards.
 *
 * At RTR a QP takes, among the transports that reach its destination GID,
 * the one of lowest rank (the same-host transport where it reaches, else
 * a network transport).
 * SOFTRNIC_TRANSPORT=<name> forces one (tests, debugging); "auto" is the
 * default.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/transport.h"

static const struct srn_transport_ops *srn_transports[SRN_TRANSPORT_MAX];
static unsigned srn_ntransports;

void srn_transport_register(const struct srn_transport_ops *ops)
{
	if (srn_ntransports == SRN_TRANSPORT_MAX) {
		srn_err("transport %s: the registry is full", ops->name);
		return;
	}
	srn_transports[srn_ntransports++] = ops;
	if (ops->hooks)
		srn_progress_hooks_add(ops->hooks);
}

static const struct srn_transport_ops *srn_transport_by_name(const char *name)
{
	for (unsigned i = 0; i < srn_ntransports; i++)
		if (!strcmp(srn_transports[i]->name, name))
			return srn_transports[i];
	return NULL;
}

/* Does t carry this kind of traffic: connections, or datagrams (ud)? */
static bool srn_transport_can(const struct srn_transport_ops *t, bool ud)
{
	return ud ? t->ud_send != NULL : t->connect != NULL;
}

static const struct srn_transport_ops *
srn_transport_best(const union ibv_gid *dgid, bool ud)
{
	const struct srn_transport_ops *best = NULL;

	for (unsigned i = 0; i < srn_ntransports; i++) {
		const struct srn_transport_ops *t = srn_transports[i];

		if (srn_transport_can(t, ud) && t->reaches(dgid) &&
		    (!best || t->rank < best->rank))
			best = t;
	}
	return best;
}

/* May transport name be used at all (SOFTRNIC_TRANSPORT forces another)? A
 * transport that may not sets up nothing (no listener, no socket). */
bool srn_transport_allowed(const char *name)
{
	const char *force = getenv("SOFTRNIC_TRANSPORT");

	return !force || !strcmp(force, "auto") || !strcmp(force, name);
}

static const struct srn_transport_ops *
srn_transport_pick(const union ibv_gid *dgid, bool ud, int *err)
{
	const char *force = getenv("SOFTRNIC_TRANSPORT");
	const struct srn_transport_ops *t;

	if (!force || !strcmp(force, "auto")) {
		t = srn_transport_best(dgid, ud);
		if (!t) {
			srn_err("no transport reaches the destination");
			*err = -EHOSTUNREACH;
		}
		return t;
	}
	t = srn_transport_by_name(force);
	/* datagrams take the forced transport where it can carry them,
	 * else their own path (a group, a transport without datagrams) */
	if (ud && t && (!t->ud_send || !t->reaches(dgid)))
		return srn_transport_best(dgid, ud);
	if (!t || !srn_transport_can(t, ud)) {
		srn_err("SOFTRNIC_TRANSPORT=%s: unknown transport%s", force,
			t ? " for datagrams" : "");
		*err = -EINVAL;
		return NULL;
	}
	if (!t->reaches(dgid)) {
		srn_err("SOFTRNIC_TRANSPORT=%s: the destination is out of its "
			"reach",
			force);
		*err = -EHOSTUNREACH;
		return NULL;
	}
	return t;
}

/* The transport an RC or UC QP's connection takes at RTR. */
const struct srn_transport_ops *srn_transport_select(const union ibv_gid *dgid,
						     int *err)
{
	return srn_transport_pick(dgid, false, err);
}

/* The transport a datagram to dgid takes (engine/ud.c caches it). */
const struct srn_transport_ops *
srn_transport_select_ud(const union ibv_gid *dgid, int *err)
{
	return srn_transport_pick(dgid, true, err);
}

/* A new UD QP: every datagram transport gets ready to deliver to it
 * (SOFTRNIC_TRANSPORT forces the path of connections; a datagram takes
 * the forced transport only if it carries datagrams). */
int srn_transport_ud_open(struct srn_qp *qp)
{
	for (unsigned i = 0; i < srn_ntransports; i++) {
		const struct srn_transport_ops *t = srn_transports[i];
		int err;

		if (!t->ud_open)
			continue;
		err = t->ud_open(qp);
		if (err)
			return err;
	}
	return 0;
}

/* The UD QP leaves its send path: every transport forgets the
 * destinations it met (sq_lock held). */
void srn_transport_ud_close(struct srn_qp *qp)
{
	for (unsigned i = 0; i < srn_ntransports; i++)
		if (srn_transports[i]->ud_close)
			srn_transports[i]->ud_close(qp);
}

/* The place in the registry of the transport of this name (srn_ud_slot). */
unsigned srn_transport_index(const char *name)
{
	for (unsigned i = 0; i < srn_ntransports; i++)
		if (!strcmp(srn_transports[i]->name, name))
			return i;
	return SRN_TRANSPORT_MAX - 1; /* not registered: never asked */
}

/* Multicast membership: every datagram transport joins or leaves (the
 * group's datagrams may come by any of them). */
int srn_transport_mcast(struct srn_qp *qp, const union ibv_gid *mgid,
			bool attach)
{
	int ret = -EOPNOTSUPP;

	for (unsigned i = 0; i < srn_ntransports; i++) {
		const struct srn_transport_ops *t = srn_transports[i];
		int err;

		if (!t->mcast)
			continue;
		err = t->mcast(qp, mgid, attach);
		if (err && attach)
			return err;
		if (!err || ret == -EOPNOTSUPP)
			ret = err;
	}
	return ret;
}

/* Every transport drops what it accepted for qp, connected or not. */
void srn_transport_qp_destroy(struct srn_qp *qp)
{
	for (unsigned i = 0; i < srn_ntransports; i++)
		if (srn_transports[i]->qp_destroy)
			srn_transports[i]->qp_destroy(qp);
}

/* qp's peers may be waiting for it: every transport looks. */
void srn_transport_kick(struct srn_qp *qp)
{
	for (unsigned i = 0; i < srn_ntransports; i++)
		if (srn_transports[i]->kick)
			srn_transports[i]->kick(qp);
}

/* The control plane's hand-off: the first transport that knows the hello
 * takes the connection (0), else -ENOPROTOOPT. */
int srn_transport_adopt(struct srn_qp *qp, int fd, const void *hello,
			size_t len)
{
	for (unsigned i = 0; i < srn_ntransports; i++) {
		const struct srn_transport_ops *t = srn_transports[i];
		int err;

		if (!t->adopt)
			continue;
		err = t->adopt(qp, fd, hello, len);
		if (err != -ENOPROTOOPT)
			return err;
	}
	return -ENOPROTOOPT;
}

/* The transport that has a mediated path (connect_mediated), or NULL. */
static const struct srn_transport_ops *srn_transport_mediator(void)
{
	for (unsigned i = 0; i < srn_ntransports; i++)
		if (srn_transports[i]->connect_mediated &&
		    srn_transports[i]->mediate)
			return srn_transports[i];
	return NULL;
}

/* The transport whose datagrams reach a QP of this host without sharing
 * memory with its process (the one with a mediated path), or NULL. */
const struct srn_transport_ops *srn_transport_mediator_ud(void)
{
	const struct srn_transport_ops *t = srn_transport_mediator();

	return t && t->ud_send && srn_transport_allowed(t->name) ? t : NULL;
}

/* qp's peer QP belongs to another user: the mediated path. 0 or -errno. */
static int srn_transport_connect_foreign(struct srn_qp *qp,
					 const struct ibv_qp_attr *attr,
					 const struct srn_transport_ops **t_p)
{
	const struct srn_transport_ops *t = srn_transport_mediator();
	int err;

	if (!t) {
		srn_err("QP 0x%06x belongs to another user: no transport has "
			"a mediated path to it",
			attr->dest_qp_num);
		return -EACCES;
	}
	srn_dbg("QP 0x%06x: peer QP 0x%06x belongs to another user: mediated "
		"path (%s)",
		qp->ibqpx.qp_base.qp_num, attr->dest_qp_num, t->name);
	err = t->connect_mediated(qp, attr);
	if (!err)
		*t_p = t;
	return err;
}

/* Does t's connect find out itself whether qp's peer QP is another
 * user's (-EACCES)? Else the caller asks first (srn_ctl_peer_foreign). */
bool srn_transport_checks_owner(const struct srn_transport_ops *t,
				const struct srn_qp *qp)
{
	return t->connect_checks_owner &&
	       qp->ibqpx.qp_base.qp_type != IBV_QPT_XRC_RECV;
}

/*
 * INIT->RTR: connects qp to its peer through t (srn_transport_select's
 * choice); *t_p: the transport it took. A peer QP of this host that
 * belongs to another user (foreign: root included, no process ever maps
 * another user's memory) gets the mediated path, whatever
 * SOFTRNIC_TRANSPORT says (it uses no network socket). Who owns the peer
 * QP is learnt from t's own dial where it checks (one control connection
 * per RTR: srn_transport_checks_owner), else the caller found out before
 * (foreign). 0 or -errno.
 */
int srn_transport_connect(struct srn_qp *qp, const struct ibv_qp_attr *attr,
			  const struct srn_transport_ops *t, bool foreign,
			  const struct srn_transport_ops **t_p)
{
	int err;

	if (foreign)
		return srn_transport_connect_foreign(qp, attr, t_p);
	err = t->connect(qp, attr);
	if (err == -EACCES && srn_transport_checks_owner(t, qp))
		return srn_transport_connect_foreign(qp, attr, t_p);
	if (!err)
		*t_p = t;
	return err;
}

/* The control plane's mediated link (srn_ctl_on_mediate): to the
 * transport that has a mediated path, or -ENOPROTOOPT. */
int srn_transport_mediate(struct srn_qp *qp, int fd, uint32_t src_qpn,
			  const void *hello, size_t len)
{
	const struct srn_transport_ops *t = srn_transport_mediator();

	return t ? t->mediate(qp, fd, src_qpn, hello, len) : -ENOPROTOOPT;
}
