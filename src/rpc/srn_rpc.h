/* SPDX-License-Identifier: MIT */
/*
 * softrnic RPC — internals shared by the server, the client and the
 * hand-off (docs/rpc.md). The hand-off itself (claim a worker, publish a
 * call, wait for it, answer) is in rpc_slot.c; its Promela model is
 * tests/rpc/slot.pml.
 */
#ifndef SRN_RPC_H
#define SRN_RPC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <softrnic/rpc.h>

#include "proto/srn_rpc_proto.h"

#define SRN_RPC_MAX_PROGS 16
#define SRN_RPC_MAX_CONNS 256
#define SRN_RPC_NET_MAX (SRN_RPC_AUX_SIZE) /* largest network message */

/* rpc_slot.c: the hand-off over a mapped segment */
struct srn_rpc_seg {
	struct srn_rpc_seg_hdr *hdr;
	size_t size;
	unsigned nworkers;
};

int srn_rpc_seg_create(unsigned nworkers, int *fd_p, struct srn_rpc_seg *seg);
int srn_rpc_seg_map(int fd, struct srn_rpc_seg *seg);
void srn_rpc_seg_unmap(struct srn_rpc_seg *seg);
/* Inline: several times on every call and reply. */
static inline struct srn_rpc_worker *
srn_rpc_seg_worker(const struct srn_rpc_seg *seg, unsigned i)
{
	return (struct srn_rpc_worker *)((char *)seg->hdr +
					 seg->hdr->worker_off) +
	       i;
}
uint8_t *srn_rpc_seg_aux(const struct srn_rpc_seg *seg, unsigned i, int dir);
int srn_rpc_futex_wait(uint32_t *word, uint32_t val, long timeout_ns);
void srn_rpc_futex_wake(uint32_t *word);
/* srn_rpc_claim's flags */
#define SRN_RPC_CLAIM_BEHIND 1u /* may queue behind a running worker */
#define SRN_RPC_CLAIM_NODROP 2u /* wait even when the queue is full */
/* What a claim gives its caller: the call number, the receive slot the
 * call goes in, and the state the worker was claimed in. */
struct srn_rpc_ticket {
	uint32_t n;
	unsigned slot;
	uint32_t old;
};
uint64_t *srn_rpc_sched(struct srn_rpc_worker *w);
int srn_rpc_claim_spinning(const struct srn_rpc_seg *seg,
			   struct srn_rpc_ticket *t);
int srn_rpc_claim(const struct srn_rpc_seg *seg, int alive_fd, long timeout_ms,
		  unsigned flags, struct srn_rpc_ticket *t);
void srn_rpc_publish(struct srn_rpc_worker *w, const struct srn_rpc_ticket *t,
		     uint32_t len, uint32_t flags);
void srn_rpc_worker_ready(struct srn_rpc_worker *w, uint32_t n);
bool srn_rpc_claim_self(struct srn_rpc_worker *w, uint32_t n);
bool srn_rpc_queue_busy(const struct srn_rpc_seg *seg);
bool srn_rpc_worker_free(const struct srn_rpc_seg *seg,
			 struct srn_rpc_worker *w, uint32_t n);
void srn_rpc_reply_publish(struct srn_rpc_worker *w, uint32_t n, uint32_t len,
			   uint32_t flags);
int srn_rpc_reply_wait(struct srn_rpc_worker *w, uint32_t n, int alive_fd,
		       long timeout_ms);

static inline uint32_t srn_rpc_load_acquire(const uint32_t *word)
{
	/* acquire: pairs with the release in srn_rpc_publish,
	 * srn_rpc_reply_publish or srn_rpc_worker_free */
	return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

/* The caller is done with reply n: the worker may reuse its slot. */
static inline void srn_rpc_reply_ack(struct srn_rpc_worker *w, uint32_t n)
{
	/* release: our reads of the reply before the ack; pairs with the
	 * acquire in srn_rpc_ack_read */
	__atomic_store_n(&w->tx[n & 1].ack, n, __ATOMIC_RELEASE);
}

/* The last acknowledged reply of transmit slot i (the ack stays in the
 * transmit slot: on the receive slot, which the worker reads anyway, it
 * made a round trip 0.15 us slower here, measured). */
static inline uint32_t srn_rpc_ack_read(const struct srn_rpc_worker *w,
					unsigned i)
{
	/* acquire: pairs with the release in srn_rpc_reply_ack (the
	 * caller's reads of the reply before we overwrite it) */
	return __atomic_load_n(&w->tx[i & 1].ack, __ATOMIC_ACQUIRE);
}
int64_t srn_rpc_now_ns(void);

/* rpc_msg.c: message headers, common cases in line */
bool_t srn_rpc_xdr_call_head(XDR *x, uint32_t xid, rpcprog_t prog,
			     rpcvers_t vers, rpcproc_t proc, AUTH *auth);
/* A call message's header, as srn_rpc_call_parse reads it. */
struct srn_rpc_call_hdr {
	uint32_t xid;
	uint32_t prog;
	uint32_t vers;
	uint32_t proc;
	struct opaque_auth cred;
	struct opaque_auth verf;
};
#define SRN_RPC_HDR_MISMATCH 1 /* srn_rpc_call_parse: another RPC version */
int srn_rpc_call_parse(XDR *x, struct srn_rpc_call_hdr *h, char *bodies);
bool_t srn_rpc_xdr_reply(XDR *x, struct rpc_msg *m);
int srn_rpc_xdr_reply_plain(XDR *x, uint32_t xid, xdrproc_t xres, void *resp);

/* rpc_server.c */
struct srn_rpc_prog {
	rpcprog_t prog;
	rpcvers_t vers;
	void (*dispatch)(struct svc_req *, SVCXPRT *);
	int lfd; /* abstract unix socket of same-host clients */
};

enum srn_rpc_origin_kind {
	SRN_RPC_FROM_SHM = 0,
	SRN_RPC_FROM_UDP = 1,
	SRN_RPC_FROM_TCP = 2,
};

struct srn_rpc_conn {
	int fd;
	bool unix_peer; /* a same-host client's discovery socket */
	pthread_mutex_t wlock; /* workers' replies on a TCP stream */
	/* who reads the stream: the receiver, or one spinning worker that
	 * holds it (rpc_direct.c); wowned says so to the receiver's poll */
	pthread_mutex_t rdlock;
	uint32_t wowned;
	uint32_t refs; /* the receiver's, a worker's, one per call in flight */
	uint8_t *buf; /* bytes read, the record being assembled first */
	size_t len, cap;
	size_t msg; /* bytes of the record, fragment headers removed */
};

/* Where a network call came from (the receiver writes it per slot). */
struct srn_rpc_origin {
	uint32_t n; /* the call number it belongs to */
	int kind; /* enum srn_rpc_origin_kind */
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct srn_rpc_conn *conn;
};

/* The largest UDP datagram read (the receiver's and a worker's buffer). */
#define SRN_RPC_DGRAM_MAX 65536

struct srn_rpc_wlocal {
	struct srn_rpc_server *srv;
	unsigned idx;
	struct srn_rpc_worker *w;
	uint8_t *aux_in, *aux_out;
	SVCXPRT xprt;
	/* the call being served */
	uint32_t n, xid;
	int kind; /* enum srn_rpc_origin_kind */
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct srn_rpc_conn *conn;
	XDR args;
	uint8_t *netbuf; /* network replies are encoded here */
	char cred[2 * MAX_AUTH_BYTES]; /* credential and verifier bodies */
	struct authunix_parms clntcred[1];
	char machname[MAX_MACHINE_NAME + 1];
	gid_t gids[NGRPS];
	struct srn_rpc_origin org[2]; /* per receive slot */
	unsigned slot; /* the receive slot of call n */
	uint32_t tx_n[2], tx_pid[2]; /* last same-host reply per slot */
	uint32_t aux_n, aux_pid; /* last same-host reply in the aux area */
	uint32_t owner; /* the claimer of the call being served */
	bool claimed; /* call n is already claimed (queued behind) */
	/* network calls read by the worker itself (rpc_direct.c) */
	int net_poll; /* its last call's origin: poll that socket or stream */
	bool net_spinning; /* counted in srv->net_spinners */
	struct srn_rpc_conn *net_conn; /* a TCP stream it may read (a ref) */
	bool net_owned; /* it holds net_conn's rdlock: it reads the stream */
	uint8_t *dgram; /* a datagram (or a TCP record) read while spinning */
	size_t pend_len; /* held while call n (a claimer's) is served */
	size_t pend_off; /* where the call starts in dgram */
	int pend_kind; /* enum srn_rpc_origin_kind */
	struct srn_rpc_conn *pend_conn; /* its stream (a ref), or NULL */
	struct sockaddr_storage pend_peer;
	socklen_t pend_peer_len;
	/* spin budget */
	int64_t last_call_ns, gap_ns;
	int64_t seen_ns; /* the clock when a call was last looked for */
	unsigned idle_timeouts;
	pthread_t tid;
	bool started;
};

struct srn_rpc_server {
	struct srn_rpc_server_attr attr;
	char addr[64];
	int ufd, tfd, efd;
	unsigned short port;
	int segfd;
	struct srn_rpc_seg seg;
	struct srn_rpc_prog progs[SRN_RPC_MAX_PROGS];
	unsigned nprogs;
	struct srn_rpc_wlocal *wl;
	unsigned max_workers, min_workers, nstarted;
	struct srn_rpc_conn *conns[SRN_RPC_MAX_CONNS];
	unsigned nconns;
	uint8_t *rxbuf; /* the receiver's datagram buffer */
	pthread_t rx_tid;
	bool rx_started, bound;
	uint32_t stop; /* set once by srn_rpc_server_stop */
	uint32_t net_spinners; /* workers polling ufd: the receiver leaves it */
	int64_t spin_min_ns; /* SOFTRNIC_RPC_SPIN_US: a worker spins at least this */
	uint32_t running;
};

/* rpc_worker.c */
int srn_rpc_worker_start(struct srn_rpc_server *srv, unsigned i);
void *srn_rpc_worker_main(void *arg);
void srn_rpc_worker_init(struct srn_rpc_wlocal *wl);

/* rpc_xprt.c: softrnic's SVCXPRT */
void srn_rpc_xprt_init(struct srn_rpc_wlocal *wl);
void srn_rpc_conn_put(struct srn_rpc_conn *c);

/* rpc_direct.c: network calls a spinning worker reads itself */
bool srn_rpc_net_is_call(const uint8_t *msg, size_t len);
void srn_rpc_net_spin_enter(struct srn_rpc_wlocal *wl);
void srn_rpc_net_spin_leave(struct srn_rpc_wlocal *wl);
void srn_rpc_net_spin_pause(struct srn_rpc_wlocal *wl);
int srn_rpc_net_take(struct srn_rpc_wlocal *wl);
void srn_rpc_net_conn_keep(struct srn_rpc_wlocal *wl);
void srn_rpc_net_conn_drop(struct srn_rpc_wlocal *wl);

/* rpc_net.c: the receiver ("NIC" for network calls) */
int srn_rpc_net_open(struct srn_rpc_server *srv);
void *srn_rpc_net_main(void *arg);
int srn_rpc_hand_off(struct srn_rpc_server *srv, const uint8_t *msg, size_t len,
		     int kind, const struct sockaddr_storage *peer,
		     socklen_t peer_len, struct srn_rpc_conn *conn);

/* rpc_bind.c */
void srn_rpc_bind_set(struct srn_rpc_server *srv, bool on);

static inline bool srn_rpc_stopping(struct srn_rpc_server *srv)
{
	/* acquire: pairs with the release in srn_rpc_server_stop */
	return __atomic_load_n(&srv->stop, __ATOMIC_ACQUIRE) != 0;
}

#endif /* SRN_RPC_H */
