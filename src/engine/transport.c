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

static const struct srn_transport_ops *
srn_transport_best(const union ibv_gid *dgid)
{
	const struct srn_transport_ops *best = NULL;

	for (unsigned i = 0; i < srn_ntransports; i++) {
		const struct srn_transport_ops *t = srn_transports[i];

		if (t->reaches(dgid) && (!best || t->rank < best->rank))
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

const struct srn_transport_ops *srn_transport_select(const union ibv_gid *dgid,
						     int *err)
{
	const char *force = getenv("SOFTRNIC_TRANSPORT");
	const struct srn_transport_ops *t;

	if (!force || !strcmp(force, "auto")) {
		t = srn_transport_best(dgid);
		if (!t) {
			srn_err("no transport reaches the destination");
			*err = -EHOSTUNREACH;
		}
		return t;
	}
	t = srn_transport_by_name(force);
	if (!t) {
		srn_err("SOFTRNIC_TRANSPORT=%s: unknown transport", force);
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
