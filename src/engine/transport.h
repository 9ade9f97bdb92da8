/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the internal interface every transport implements, and the
 * registry that chooses one per QP.
 *
 * The engine is transport-independent: the requester (requester.c) takes
 * WQEs off the send queue in order and hands each to the QP's transport,
 * which either completes it (status) or reports a stall (retry later).
 * Everything else the engine, the CQ poll path, the control plane and QP
 * teardown need of a transport goes through these ops too, or through
 * the progress hooks a transport registers (engine.h). No file outside
 * src/transport/<name>/ names a transport.
 *
 * A transport registers itself when the library is loaded
 * (SRN_TRANSPORT_REGISTER). At RTR, srn_transport_select() picks, among
 * the transports that reach the destination GID, the one of lowest rank;
 * SOFTRNIC_TRANSPORT=<name> forces one. A peer QP of this host that
 * belongs to another user (root included) shares no memory with us: it
 * gets the mediated path of the transport that has one (connect_mediated,
 * mediate), whatever SOFTRNIC_TRANSPORT says (srn_transport_connect,
 * srn_ctl_peer_foreign).
 */
#ifndef SRN_TRANSPORT_H
#define SRN_TRANSPORT_H

#include "engine/engine.h"

#define SRN_TRANSPORT_MAX 4

/* Where a UD datagram goes (engine/ud.c fills it from the WR). */
struct srn_ud_dest {
	union ibv_gid dgid;
	uint32_t qpn; /* 0xffffff: the multicast group dgid */
	uint32_t qkey; /* the WR's, or the QP's when the WR's MSB is set */
	void **slot; /* the state of the sending transport for this QP
		      * (srn_ud_slot's, found once per route) */
};

struct srn_transport_ops {
	const char *name;
	/* auto choice: the lowest rank among those that reach the peer */
	unsigned rank;
	/* WQEs may complete later, from another thread (execute returns
	 * -EINPROGRESS): the completer then needs its own lock */
	bool async;
	/* Can this transport reach a QP at this GID? */
	bool (*reaches)(const union ibv_gid *dgid);
	/* INIT->RTR: attach to the peer QP (dest GID, QPN). 0 or -errno. */
	int (*connect)(struct srn_qp *qp, const struct ibv_qp_attr *attr);
	/* connect returns -EACCES, and only then, when the peer QP (of this
	 * host) belongs to another user; it has not attached to it. Not for
	 * an XRC TGT QP, which dials nobody. */
	bool connect_checks_owner;
	/* Detach; called with sq_lock held. Idempotent. */
	void (*disconnect)(struct srn_qp *qp);
	/*
	 * Executes one WQE. Returns 0 with *status set (the WQE is done), or
	 * -EAGAIN with *stall set when it must be retried later.
	 */
	int (*execute)(struct srn_qp *qp, const struct srn_swqe *wqe,
		       enum ibv_wc_status *status, enum srn_stall *stall);
	/* Optional: the requester's run ends (sq_lock held): what execute
	 * gathered goes now, or, with discard (the QP is in ERR: nothing
	 * behind an error may reach the target), is dropped; those WQEs are
	 * then flushed with the rest. */
	void (*end_run)(struct srn_qp *qp, bool discard);
	/* Optional: may the doorbell leave the WQEs just posted unsent for
	 * a moment, to go with the next ones (sq_lock held)? Only when the
	 * application is polling and answers are on their way, so that its
	 * next poll runs them (docs/wire.md, "Batching requests"). */
	bool (*defer)(struct srn_qp *qp);
	/* Optional: WQEs from *pos_p on must be executed again (they were
	 * dropped by the target after an RNR NAK); sq_lock held. */
	bool (*rewind)(struct srn_qp *qp, uint64_t *pos_p);
	/* Optional: ibv_query_qp, what the transport knows better (its
	 * PSNs); sq_lock held. */
	void (*query)(struct srn_qp *qp, struct ibv_qp_attr *attr);
	/* A short description of the connection, for softrnic stat. */
	const char *(*describe)(struct srn_qp *qp);
	/* Optional (absent: the peer's memory cannot be mapped here): a
	 * new mapping of the pages that hold [addr, addr + len) under rkey
	 * at the peer, checked for need_access; the caller owns *map_p
	 * (*map_len_p bytes, munmap) and addr is at *ptr_p in it. sq_lock
	 * held. 0 or -errno (docs: <softrnic/direct.h>). */
	int (*direct_map)(struct srn_qp *qp, uint64_t addr, uint32_t rkey,
			  uint64_t len, unsigned need_access, void **map_p,
			  size_t *map_len_p, void **ptr_p);

	/* ---- UD (all optional: a transport without ud_send carries no
	 * datagrams); engine/ud.c picks a transport per destination ---- */
	/* Sends datagram w to d now: 0 with *status (SUCCESS also when it
	 * is dropped on the way, as UD may), or -EAGAIN with *stall (only
	 * while a same-host destination is being looked up). sq_lock held. */
	int (*ud_send)(struct srn_qp *qp, const struct srn_swqe *w,
		       const struct srn_ud_dest *d, enum ibv_wc_status *status,
		       enum srn_stall *stall);
	/* A UD QP was created: get ready to deliver datagrams to it (every
	 * transport with ud_send; undone by qp_destroy). 0 or -errno. */
	int (*ud_open)(struct srn_qp *qp);
	/* The UD QP left its send path (RESET, destroy): drop what was
	 * kept for its destinations. sq_lock held. */
	void (*ud_close)(struct srn_qp *qp);
	/* ibv_attach_mcast / ibv_detach_mcast: deliver the group's
	 * datagrams to qp, or stop. 0 or -errno. */
	int (*mcast)(struct srn_qp *qp, const union ibv_gid *mgid, bool attach);

	/* ---- called for every registered transport, connected or not ---- */
	/* Optional: qp is being destroyed: drop the inbound links this
	 * transport accepted for it (qp->links) before it was connected. */
	void (*qp_destroy)(struct srn_qp *qp);
	/* Optional: qp reached RTR/RTS or had receive WQEs posted while a
	 * peer may wait for them (srn_ctl_kick_peers). */
	void (*kick)(struct srn_qp *qp);
	/* Optional: the control plane's hand-off (SRN_CTL_ADOPT): a
	 * connection for qp that another process of this host accepted,
	 * with the first message it read. 0: fd is the transport's now. */
	int (*adopt)(struct srn_qp *qp, int fd, const void *hello, size_t len);
	/* Optional, both or neither: the mediated path to a QP of this host
	 * that belongs to another user (docs/security.md). The link is a
	 * unix stream socket from that QP's control plane (srn_ctl_mediate),
	 * on which the target checks every access, as for a peer on
	 * another host; after connect_mediated, the QP uses the other ops
	 * as after connect. 0 or -errno. */
	int (*connect_mediated)(struct srn_qp *qp,
				const struct ibv_qp_attr *attr);
	/* The target's side: fd is a link to the process that owns QP
	 * src_qpn (the kernel said so), with the first message it sent.
	 * 0: fd is the transport's now. Progress lock held. */
	int (*mediate)(struct srn_qp *qp, int fd, uint32_t src_qpn,
		       const void *hello, size_t len);
	/* Optional: progress hooks (engine.h), added when registered. */
	struct srn_progress_hooks *hooks;
};

void srn_transport_register(const struct srn_transport_ops *ops);
bool srn_transport_allowed(const char *name);
const struct srn_transport_ops *srn_transport_select(const union ibv_gid *dgid,
						     int *err);
const struct srn_transport_ops *
srn_transport_select_ud(const union ibv_gid *dgid, int *err);
const struct srn_transport_ops *srn_transport_mediator_ud(void);
int srn_transport_ud_open(struct srn_qp *qp);
int srn_transport_mcast(struct srn_qp *qp, const union ibv_gid *mgid,
			bool attach);
void srn_transport_ud_close(struct srn_qp *qp);
unsigned srn_transport_index(const char *name);
/* engine/ud.c: the send path of every UD QP (it has no connection) */
extern const struct srn_transport_ops srn_ud_ops;
int srn_ud_create(struct srn_qp *qp);
void srn_ud_destroy(struct srn_qp *qp);
void **srn_ud_slot(struct srn_qp *qp, const char *transport);
void srn_transport_qp_destroy(struct srn_qp *qp);
void srn_transport_kick(struct srn_qp *qp);
int srn_transport_adopt(struct srn_qp *qp, int fd, const void *hello,
			size_t len);
bool srn_transport_checks_owner(const struct srn_transport_ops *t,
				const struct srn_qp *qp);
int srn_transport_connect(struct srn_qp *qp, const struct ibv_qp_attr *attr,
			  const struct srn_transport_ops *t, bool foreign,
			  const struct srn_transport_ops **t_p);
int srn_transport_mediate(struct srn_qp *qp, int fd, uint32_t src_qpn,
			  const void *hello, size_t len);

/* In a transport's file: register ops when the library is loaded. */
#define SRN_TRANSPORT_REGISTER(ops)                                        \
	__attribute__((constructor)) static void srn_transport_init_##ops( \
		void)                                                      \
	{                                                                  \
		srn_transport_register(&(ops));                            \
	}

#endif /* SRN_TRANSPORT_H */
