/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the engine: what the NIC does with the core objects.
 *
 *   requester.c   runs a send queue at doorbell time, through the QP's
 *                 transport (transport.h)
 *   completer.c   send and flush completions
 *   qp_state.c    the QP state machine: the one writer of a QP's state
 *   progress.c    the per-process progress thread and its hooks
 *   ctl.c         the host control plane: one socket per QPN
 *   transport.c   the transport registry and path choice
 *
 * The engine calls the core (objects) and util; it reaches transports only
 * through struct srn_transport_ops and the hooks they register.
 */
#ifndef SRN_ENGINE_H
#define SRN_ENGINE_H

#include "core/core.h"

struct srn_ctl_hdr; /* proto/srn_ctl_proto.h */

/* ---- qp_state.c ---- */
extern const char *const srn_qp_state_names[];
int srn_qp_check_modify(enum ibv_qp_state cur, enum ibv_qp_state next,
			enum ibv_qp_type type, int mask);
void srn_qp_set_state(struct srn_qp *qp, enum ibv_qp_state next);
void srn_qp_error(struct srn_qp *qp);
void srn_qp_fatal(struct srn_qp *qp);
void srn_qp_flush_recv(struct srn_qp *qp);

/* The send queue's WQE number i (its slot). */
static inline struct srn_swqe *srn_sq_wqe(struct srn_qp *qp, uint64_t i)
{
	return srn_sq_slot(&qp->sq, i);
}

/* ---- requester.c ---- */
void srn_req_run(struct srn_qp *qp);
void srn_req_doorbell(struct srn_qp *qp);
/* WQEs the doorbell left unsent are run this long after at the latest */
#define SRN_REQ_DEFER_NS 1000000ull
void srn_req_detach(struct srn_qp *qp);
unsigned srn_req_retry_stalled(struct srn_context *ctx);

/* Are send queues of ctx waiting for a retry (a hint, for pollers)? */
static inline bool srn_req_retry_wanted(struct srn_context *ctx)
{
	/* relaxed: a hint; srn_req_retry_stalled takes the locks */
	return atomic_load_explicit(&ctx->nretry, memory_order_relaxed) != 0;
}

void srn_qp_async_error(struct srn_qp *qp);
void srn_qp_async_fatal(struct srn_qp *qp);
void srn_comp_send_cqe(struct srn_qp *qp, const struct srn_swqe *wqe,
		       enum ibv_wc_status status, struct srn_cqe *c);
void srn_comp_send_post(struct srn_qp *qp, const struct srn_cqe *c);
void srn_comp_recv_flush(struct srn_qp *qp, uint64_t wr_id);
bool srn_comp_send_done(struct srn_qp *qp);
bool srn_comp_lock(struct srn_qp *qp);
void srn_comp_unlock(struct srn_qp *qp, bool locked);
uint64_t srn_rnr_timer_ns(uint8_t min_rnr_timer);
uint64_t srn_ack_timeout_ns(uint8_t timeout);

/* ---- progress.c ---- */
struct srn_pollable;
/* events: the epoll events, or SRN_POLL_DIRECT: not asked, look (a data
 * set member called by a polling application, progress.c) */
typedef void srn_poll_fn(struct srn_pollable *p, uint32_t events);
#define SRN_POLL_DIRECT (1u << 27) /* no epoll event uses it */

struct srn_pollable {
	int fd;
	srn_poll_fn *fn;
	void *priv;
	struct srn_list link; /* owner's list (e.g. a QP's conns) */
	struct srn_list plink; /* the progress thread's live list */
	bool added;
	int reg_fd; /* the fd as srn_progress_add put it in its epoll set: an
		     * owner may set fd to -1 before srn_progress_del */
	bool data; /* in the data set (links of socket transports), see
		    * progress.c */
};

int srn_progress_get(void);
void srn_progress_put(void);
int srn_progress_add(struct srn_pollable *p, uint32_t events);
int srn_progress_add_data(struct srn_pollable *p, uint32_t events);
void srn_progress_data_rearm(void);
bool srn_progress_napi(void);
void srn_progress_del(struct srn_pollable *p);
void srn_progress_lock(void);
void srn_progress_unlock(void);
int srn_progress_kick_fd(void);
void srn_progress_kick(void);
void srn_progress_wake_at(uint64_t deadline_ns);
extern __thread bool srn_in_progress_thread;
void srn_progress_ctx_add(struct srn_context *ctx);
void srn_progress_ctx_del(struct srn_context *ctx);
void srn_progress_atfork_child(void);
void srn_progress_request_retry(void);
void srn_progress_poll_once(void);
bool srn_progress_app_polling(uint64_t ns);
/* Are there links in the data set, that a polling application should
 * receive from (srn_progress_poll_once)? A hint, without the lock. */
extern atomic_uint srn_progress_data_links;
static inline bool srn_progress_has_data(void)
{
	/* relaxed: a hint, written by srn_progress_ndata in progress.c
	 * under the progress lock; no data is published with it */
	return atomic_load_explicit(&srn_progress_data_links,
				    memory_order_relaxed) != 0;
}
int srn_progress_mod(struct srn_pollable *p, uint32_t events);
struct srn_qp *srn_progress_find_qp(uint32_t qpn);

/*
 * Hooks the engine's own blocks (the requester) and the layers above it
 * (transports) register with the progress engine. All optional. start and stop run under the progress thread's
 * reference lock (srn_progress_get/put), work under the progress lock.
 */
struct srn_progress_hooks {
	struct srn_list link;
	/* the progress thread starts (first context opened) / stopped */
	void (*start)(void);
	void (*stop)(void);
	/* deferred work: after a kick or the timer (idle false), or from an
	 * application thread polling an empty CQ (idle true) */
	void (*work)(bool idle);
	/* after handlers asked for it (srn_progress_request_retry), outside
	 * the progress lock: look at ctx's QPs; how many were busy */
	unsigned (*sweep)(struct srn_context *ctx);
};
void srn_progress_hooks_add(struct srn_progress_hooks *h);

/* ---- ctl.c: the host control plane (one socket per QPN) ---- */
struct srn_ctl_conn;
/* A transport's handler for a control message type: fds[*nfds_p] came
 * with it; the handler sets *nfds_p to 0 if it keeps them. */
typedef void srn_ctl_handler_fn(struct srn_ctl_conn *c, const void *msg,
				size_t len, int *fds, unsigned *nfds_p);
int srn_ctl_handler_set(unsigned type, srn_ctl_handler_fn *fn);
struct srn_qp *srn_ctl_conn_qp(const struct srn_ctl_conn *c);
int srn_ctl_conn_fd(const struct srn_ctl_conn *c);
int srn_ctl_conn_attach(struct srn_ctl_conn *c, uint32_t src_qpn, int kick_fd);
int srn_ctl_conn_defer(struct srn_ctl_conn *c, const void *msg, size_t len,
		       int fd);
int srn_ctl_listen(struct srn_qp *qp);
void srn_ctl_unlisten(struct srn_qp *qp);
int srn_ctl_srqn_reserve(uint32_t *srqn_p);
void srn_ctl_kick_peers(struct srn_qp *qp);
int srn_ctl_dial(uint32_t qpn, int timeout_s);
int srn_ctl_dial_own(struct srn_qp *qp, uint32_t qpn, int timeout_s,
		     pid_t *pid_p);
void srn_ctl_undial(struct srn_qp *qp);
bool srn_ctl_peer_foreign(const union ibv_gid *dgid, uint32_t qpn);
int srn_ctl_mediate(uint32_t qpn, uint32_t src_qpn, const void *hello,
		    size_t len, int timeout_s);
int srn_ctl_sendmsg(int fd, const void *msg, size_t len, const int *fds,
		    unsigned nfds);
int srn_ctl_reply(int fd, struct srn_ctl_hdr *h, const int *fds, unsigned nfds);
int srn_ctl_reply_kin(int fd, struct srn_ctl_hdr *h, const int *fds,
		      unsigned nfds);
ssize_t srn_ctl_recvmsg(int fd, void *msg, size_t len, int *fds,
			unsigned *nfds);
int srn_ctl_trysendmsg(int fd, const void *msg, size_t len, const int *fds,
		       unsigned nfds);
int srn_ctl_trysendmsg_kin(int fd, const void *msg, size_t len, const int *fds,
			   unsigned nfds);
ssize_t srn_ctl_tryrecvmsg(int fd, void *msg, size_t len, int *fds,
			   unsigned *nfds);
void srn_ctl_bye(int fd);
int srn_ctl_handoff(uint32_t qpn, int fd, const void *hello, size_t len);

#endif /* SRN_ENGINE_H */
