/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the internal interface every transport implements.
 *
 * The requester (requester.c) is transport-independent: it takes WQEs off
 * the send queue in order and hands each to the QP's transport, which
 * either completes it (status) or reports a stall (retry later). The
 * transport is chosen per QP at RTR from the destination GID.
 */
#ifndef SRN_TRANSPORT_H
#define SRN_TRANSPORT_H

#include "srn.h"

struct srn_transport_ops {
	const char *name;
	/* WQEs may complete later, from another thread (execute returns
	 * -EINPROGRESS): the completer then needs its own lock */
	bool async;
	/* INIT->RTR: attach to the peer QP (dest GID, QPN). 0 or -errno. */
	int (*connect)(struct srn_qp *qp, const struct ibv_qp_attr *attr);
	/* Detach; called with sq_lock held. Idempotent. */
	void (*disconnect)(struct srn_qp *qp);
	/*
	 * Executes one WQE. Returns 0 with *status set (the WQE is done), or
	 * -EAGAIN with *stall set when it must be retried later.
	 */
	int (*execute)(struct srn_qp *qp, const struct srn_swqe *wqe,
		       enum ibv_wc_status *status, enum srn_stall *stall);
	/* Optional: WQEs from *pos_p on must be executed again (they were
	 * dropped by the target after an RNR NAK); sq_lock held. */
	bool (*rewind)(struct srn_qp *qp, uint64_t *pos_p);
	/* A short description of the connection, for devinfo/stats. */
	const char *(*describe)(struct srn_qp *qp);
};

extern const struct srn_transport_ops srn_shm_transport_ops;
extern const struct srn_transport_ops srn_tcp_transport_ops;

const struct srn_transport_ops *srn_transport_select(const union ibv_gid *dgid,
						     int *err);

/* ctl.c: the same-host control plane */
int srn_ctl_listen(struct srn_qp *qp);
void srn_ctl_unlisten(struct srn_qp *qp);

#endif /* SRN_TRANSPORT_H */
