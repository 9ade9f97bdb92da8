/* SPDX-License-Identifier: MIT */
/*
 * softrnic's librdmacm: internal declarations (docs/rdmacm.md).
 *
 * The layer sits above verbs: it uses only the public verbs API of
 * softrnic's libibverbs (ibv_*), util/ and proto/. One process-wide lock
 * (srn_cm.lock) guards every id, channel queue and connection; one CM
 * thread (cm_svc.c) blocks in epoll on the CM's sockets.
 */
#ifndef SRN_RDMACM_CM_H
#define SRN_RDMACM_CM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "proto/srn_cm_proto.h"
#include "util/util.h"

/* The state of an id; srn_cm_state_names[] names them. */
enum srn_cm_state {
	SRN_CMS_IDLE,
	SRN_CMS_BOUND, /* rdma_bind_addr */
	SRN_CMS_ADDR_RESOLVED,
	SRN_CMS_ROUTE_RESOLVED,
	SRN_CMS_LISTEN,
	SRN_CMS_CONNECTING, /* active: REQ on its way, REP awaited */
	SRN_CMS_REQ_RCVD, /* passive child: CONNECT_REQUEST, not answered */
	SRN_CMS_REP_SENT, /* passive: REP sent, RTU awaited */
	SRN_CMS_REP_RCVD, /* active without QP: CONNECT_RESPONSE given */
	SRN_CMS_ESTABLISHED,
	SRN_CMS_DISCONNECTING, /* DREQ sent, DREP awaited */
	SRN_CMS_DISCONNECTED,
	SRN_CMS_FAILED, /* rejected, unreachable, connection lost */
	SRN_CMS_NR,
};
extern const char *const srn_cm_state_names[SRN_CMS_NR];

/* An event channel: the ABI's { int fd } (an eventfd in semaphore mode,
 * one count per queued event) and its queue. */
struct srn_cm_chan {
	struct rdma_event_channel ch;
	struct srn_list events; /* struct srn_cm_event, oldest first */
	bool private; /* a synchronous id's own channel */
	unsigned int readers; /* threads inside rdma_get_cm_event */
	bool dead; /* destroyed while readers were inside: the last frees */
};

struct srn_cm_id;
struct srn_cm_link;

/*
 * Work an event brings to the application thread that takes it
 * (rdma_get_cm_event), as rdma-core's librdmacm does: the CM thread never
 * calls verbs, so it never writes softrnic's objects (which live in the
 * application's heap, see srn_cm_zalloc); srn_cm_act_names[] names them.
 */
enum srn_cm_act {
	SRN_CM_ACT_NONE,
	SRN_CM_ACT_CONNECT, /* the REP: QP to RTR and RTS, RTU; or
			     * CONNECT_ERROR */
	SRN_CM_ACT_QP_ERR, /* rejected or lost: the id's QP to ERR */
	SRN_CM_ACT_NR,
};
extern const char *const srn_cm_act_names[SRN_CM_ACT_NR];

struct srn_cm_event {
	struct rdma_cm_event ev; /* what the application sees */
	struct srn_list link;
	struct srn_cm_id *owner; /* counts this event (the listener for
				  * CONNECT_REQUEST) */
	enum srn_cm_act act;
	uint8_t pdata[SRN_CM_PDATA_MAX];
};

/* Values negotiated for a connection (this side's view). */
struct srn_cm_conn {
	uint32_t qpn; /* ours: id->qp or conn_param->qp_num */
	uint32_t psn; /* our first send PSN */
	uint32_t peer_qpn;
	uint32_t peer_psn;
	uint8_t peer_gid[16];
	uint8_t resp_res; /* max_dest_rd_atomic */
	uint8_t init_depth; /* max_rd_atomic */
	uint8_t peer_resp_res, peer_init_depth;
	uint8_t retry_count, rnr_retry_count;
	uint8_t flow_control, srq;
	bool peer_known; /* REQ or REP received */
};

struct srn_cm_id {
	struct rdma_cm_id id; /* first: what the application sees */
	struct srn_list link; /* srn_cm.ids */
	struct srn_list hlink; /* srn_cm.by_serial[serial % buckets] */
	uint64_t serial; /* the epoll handle (ids may go away meanwhile) */
	enum srn_cm_state state;
	struct srn_cm_chan *chan;
	struct srn_cm_id *listener; /* child: its listener until accepted */
	bool sync; /* created without a channel: calls wait */
	bool disc_reported; /* DISCONNECTED given once */
	bool rep_wait; /* REP taken, its ESTABLISHED not yet fetched */
	struct srn_cm_link *lk; /* the CM link its messages take, NULL */
	struct srn_list lklink; /* lk->ids */
	uint32_t peer_comm; /* the peer id's communication id, 0 unknown */
	bool lk_quiet; /* the peer needs no GONE from us (cm_link.c) */
	uint8_t dials; /* links tried for this REQ */
	uint64_t redial_ns; /* CONNECTING between dials: dial again then */
	uint64_t heard_ns; /* the peer's last message (or the timer's start) */
	uint64_t mra_ns; /* our last MRA (or the timer's start) */
	unsigned int reported, acked; /* events given out / acked */
	pthread_cond_t cond; /* acked caught up with reported */
	int unix_fd; /* bound port's hand-off socket, -1 */
	int backlog, pending; /* listener: REQs not yet delivered */
	uint16_t port; /* bound rdma_cm port, host order; 0 none */
	uint8_t req_pdata[SRN_CM_PDATA_SIDR_REQ]; /* rdma_connect's, for
						   * the REQ */
	uint8_t req_plen;
	struct srn_cm_conn conn;
	uint8_t tos, ack_timeout;
	bool own_cqs; /* rdma_create_qp made the CQs */
	struct ibv_qp_init_attr *ep_attr; /* rdma_create_ep's, passive */
	struct ibv_pd *ep_pd;
	struct srn_list mcs; /* struct srn_cm_mc: groups joined */
};

/*
 * A CM link (cm_link.c): one stream connection to another process's CM
 * service, which carries the messages of every rdma_cm connection
 * between the two to one rdma_cm port (proto/srn_cm_proto.h). The active
 * side keys it by destination address, port space and port.
 */
struct srn_cm_link {
	struct srn_list link; /* srn_cm.links */
	struct srn_list hlink; /* srn_cm.link_hash[serial % buckets] */
	uint64_t serial; /* its epoll handle */
	int fd;
	bool active; /* we dialed it */
	bool dialing; /* connect() in progress */
	bool stale; /* its peer does not serve the key's port, or the link
		     * broke: no new ids */
	bool refusing; /* accepted for a REQ nobody listened for */
	bool dead; /* lost or closed: sends fail, ids leave */
	bool busy; /* its reader runs: the reader frees it if dead */
	bool corked; /* its reader runs: sends wait in tx until it is done */
	uint32_t ev_mask; /* the events epoll watches for it */
	struct sockaddr_storage dst; /* active: the CM port dialed */
	uint16_t ps, port; /* active: the rdma_cm port space and port */
	struct sockaddr_storage local_sa, peer_sa; /* passive: its ends */
	struct srn_list ids; /* struct srn_cm_id.lklink */
	unsigned int nids;
	uint64_t idle_ns; /* no ids since then (0: it has some) */
	size_t rx_len; /* bytes of a partial message in rx */
	uint8_t rx[SRN_CM_MSG_SIZE] __attribute__((aligned(8)));
	uint8_t *tx; /* tx_len bytes from tx_off: the socket's next ones */
	size_t tx_off, tx_len, tx_cap;
};

/* A multicast group an id joined (rdma_join_multicast). */
struct srn_cm_mc {
	struct srn_list link; /* srn_cm_id.mcs */
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	void *context;
	bool attached; /* the id's QP is attached to mgid */
};

#define SRN_CM_ID_BUCKETS 1024 /* a power of two */
#define SRN_CM_LINK_BUCKETS 256 /* a power of two */

struct srn_cm_global {
	pthread_mutex_t lock;
	struct srn_list ids;
	struct srn_list by_serial[SRN_CM_ID_BUCKETS]; /* for the CM thread */
	uint64_t next_serial;
	int epfd; /* the CM thread's */
	bool thread_up;
	int lfd; /* the host-wide stream listener, -1 */
	bool accept_paused; /* lfd out of the epoll set for now */
	int stat_fd; /* "softrnic/cm/pid/<pid>": softrnic stat asks here */
	int listeners; /* ids listening: the listener's users */
	struct srn_list pending; /* accepted, REQ not read yet or parked */
	struct srn_list links; /* struct srn_cm_link */
	struct srn_list link_hash[SRN_CM_LINK_BUCKETS]; /* by serial */
	unsigned int idle_links; /* links without ids (at most) */
	unsigned int refusing; /* links kept to refuse REQs (cm_link.c) */
	unsigned int npending;
	unsigned int redials; /* ids waiting to dial again (at most) */
	unsigned int timed; /* ids with a CM timer running (at most) */
	uint64_t tick_ns; /* the CM thread's last walk of the ids' timers */
	int kick_fd; /* eventfd: wakes the CM thread for a new timer */
	/* channels the CM thread signals once it has dropped the lock
	 * (srn_cm_signal): their events and each one's count */
	bool sig_defer;
	unsigned int nsig;
	struct srn_cm_sig {
		struct srn_cm_chan *chan;
		uint64_t count;
	} sig[16];
	struct ibv_context *ctx; /* softrnic0, opened once */
	struct ibv_pd *pd; /* the default PD */
	struct ibv_xrcd *xrcd; /* XRC ids' domain, opened on first use */
	struct ibv_device_attr dev_attr;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};
extern struct srn_cm_global srn_cm;

/* epoll data: serial << 2 | kind */
enum srn_cm_ep_kind {
	SRN_CM_EP_CONN = 0, /* a CM link */
	SRN_CM_EP_UNIX = 1, /* a listener's hand-off socket */
	SRN_CM_EP_LISTEN = 2, /* the stream listener (serial 0), the stat
			       * socket (serial SRN_CM_EP_STAT_SERIAL),
			       * the kick eventfd (SRN_CM_EP_KICK_SERIAL) */
	SRN_CM_EP_PEND = 3, /* an accepted connection, REQ not read */
#define SRN_CM_EP_STAT_SERIAL 1
#define SRN_CM_EP_KICK_SERIAL 2
};

#define SRN_CM_DEF_RETRY 7
#define SRN_CM_HANDOFF_MS 500 /* a hand-off waits this long at most */
#define SRN_CM_DIAL_TRIES 10 /* dials of a REQ whose connection drops */
#define SRN_CM_REDIAL_MIN_MS 10 /* the first redial waits this long, */
#define SRN_CM_REDIAL_MAX_MS 200 /* each next one twice, up to this */
#define SRN_CM_PARK_MS 500 /* a REQ waits this long for its listener */
#define SRN_CM_PARK_POLL_MS 10 /* and looks for it this often */
#define SRN_CM_TIMER_TICK_MS 250 /* CM timers' granularity */
#define SRN_CM_PEND_MAX 512 /* accepted connections without a whole REQ */
#define SRN_CM_PEND_SRC 64 /* of them from one address (host daemon) */
#define SRN_CM_REQ_WAIT_MS 3000 /* an accepted connection's REQ, at most */
#define SRN_CM_LINK_IDLE_MS 1000 /* a link we dialed, without ids, closes */
#define SRN_CM_LINK_IDLE_PASSIVE_MS 3000 /* one we accepted (later) */
#define SRN_CM_LINK_TX_MAX (16u << 20) /* bytes a link may queue */
#define SRN_CM_REFUSING_MAX 64 /* refusing links a process keeps */
/* RTR's min_rnr_timer: 0 (655.36 ms), what the kernel's IB CM gives RC and
 * XRC TGT QPs, so that a receiver late by a scheduling delay is retried,
 * not failed with RNR_RETRY_EXC_ERR after a few ms */
#define SRN_CM_MIN_RNR_TIMER 0
#define SRN_CM_DEF_TIMEOUT 14

/* The port field (network order) of an IPv4 or IPv6 address. */
static inline uint16_t *srn_cm_port_of(struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return &((struct sockaddr_in6 *)sa)->sin6_port;
	return &((struct sockaddr_in *)sa)->sin_port;
}

/* cm_core.c */
void srn_cm_set_state(struct srn_cm_id *cid, enum srn_cm_state next);
void *srn_cm_zalloc(size_t size);
void srn_cm_zfree(void *ptr);
unsigned int srn_cm_signal_take(struct srn_cm_sig *out);
void srn_cm_signal_give(const struct srn_cm_sig *sig, unsigned int n);
void srn_cm_stat_fill(struct srn_cm_stat_msg *m);
struct srn_cm_id *srn_cm_listener_find(unsigned int ps, uint16_t port);
int srn_cm_queue(struct srn_cm_id *cid, struct srn_cm_id *owner,
		 enum rdma_cm_event_type type, int status,
		 const struct srn_cm_msg *m);
void srn_cm_ud_ah(struct srn_cm_id *cid, const uint8_t *gid,
		  struct ibv_ah_attr *ah);
int srn_cm_queue_act(struct srn_cm_id *cid, enum rdma_cm_event_type type,
		     int status, const struct srn_cm_msg *m,
		     enum srn_cm_act act);
void srn_cm_set_act_fn(void (*fn)(struct srn_cm_event *e));
void srn_cm_purge(struct srn_cm_id *cid);
int srn_cm_complete(struct srn_cm_id *cid);
struct srn_cm_chan *srn_cm_chan_new(bool private);
void srn_cm_chan_free(struct srn_cm_chan *c);

/* cm_id.c */
int srn_cm_err(int neg_errno);
int srn_cm_device(void);
struct srn_cm_id *srn_cm_id_new(struct srn_cm_chan *c, void *context,
				enum rdma_port_space ps,
				enum ibv_qp_type qp_type);
struct srn_cm_id *srn_cm_id_find(uint64_t serial);
struct srn_cm_id *srn_cm_id_find_comm(uint32_t comm);
void srn_cm_id_set_verbs(struct srn_cm_id *cid);
uint32_t srn_cm_random24(void);
void srn_cm_id_unlink(struct srn_cm_id *cid);
int srn_cm_bind_port(struct srn_cm_id *cid, uint16_t port);

/* cm_svc.c; it calls up into cm_link.c only through these (set once by
 * cm_link.c's constructor), so that calls point down */
struct srn_cm_svc_up_ops {
	/* a whole first REQ m on an accepted stream fd, for listener lid
	 * (NULL: nobody listens on its port, answer REJ): 0 (fd is a link
	 * now) or -errno (the caller rejects and closes) */
	int (*on_stream)(struct srn_cm_id *lid, int fd,
			 const struct srn_cm_msg *m);
	void (*on_link)(uint64_t serial, uint32_t events);
	/* while srn_cm.redials, srn_cm.timed or srn_cm.idle_links */
	void (*on_tick)(uint64_t now_ns);
};
void srn_cm_svc_set_up(const struct srn_cm_svc_up_ops *ops);
int srn_cm_svc_start(void);
void srn_cm_svc_kick(void);
int srn_cm_listen_get(void);
int srn_cm_listen_open(bool share);
int srn_cm_listen_adopt(int fd);
void srn_cm_listen_put(void);
int srn_cm_epoll_add(int fd, uint64_t serial, enum srn_cm_ep_kind k,
		     uint32_t events);
void srn_cm_msg_init(struct srn_cm_msg *m, enum srn_cm_msg_type type);
uint16_t srn_cm_service_port(void);

/* cm_link.c; it calls up into cm_conn.c only through these (set once by
 * cm_conn.c's constructor) */
struct srn_cm_link_up_ops {
	void (*on_msg)(struct srn_cm_id *cid, const struct srn_cm_msg *m);
	void (*on_lost)(struct srn_cm_id *cid, int err);
	void (*on_dial_failed)(struct srn_cm_id *cid, int err);
	/* a REQ for listener lid on lk: 0, or -errno (lk answers REJ) */
	int (*on_req)(struct srn_cm_id *lid, struct srn_cm_link *lk,
		      const struct srn_cm_msg *m);
	void (*on_tick)(uint64_t now_ns);
};
void srn_cm_link_set_up(const struct srn_cm_link_up_ops *ops);
int srn_cm_link_join(struct srn_cm_id *cid);
void srn_cm_link_attach(struct srn_cm_id *cid, struct srn_cm_link *lk);
void srn_cm_close_conn(struct srn_cm_id *cid);
int srn_cm_send(struct srn_cm_id *cid, struct srn_cm_msg *m);
bool srn_cm_link_waiting(const struct srn_cm_id *cid);

/* cm_qp.c */
int srn_cm_qp_attr(struct srn_cm_id *cid, struct ibv_qp_attr *a, int *mask);
int srn_cm_qp_connect(struct srn_cm_id *cid);
void srn_cm_qp_error(struct srn_cm_id *cid);
void srn_cm_mc_drop(struct srn_cm_id *cid, bool free_them);

#endif /* SRN_RDMACM_CM_H */
