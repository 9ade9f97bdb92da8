/* SPDX-License-Identifier: MIT */
/*
 * softrnic's librdmacm: rsockets, internal declarations (docs/rsockets.md).
 *
 * An rsocket is an rdma_cm id of its own event channel; the channel's fd
 * is the rsocket's number. A connected stream rsocket has an RC QP, one
 * CQ with a completion channel, receive buffers posted for the peer's
 * messages and send buffers its own are copied into (the protocol:
 * proto/srn_rs_proto.h). Everything goes through the public rdma_* and
 * ibv_* calls, so it works over every transport. The files, bottom up:
 * cm_rsocket_core.c (table, resources, completions, CM events),
 * cm_rsocket_poll.c (waiting, rpoll, rselect), cm_rsocket.c (sockets and
 * connections), cm_rsocket_io.c (data calls, riomap), cm_rsocket_opt.c
 * (options, names, rfcntl).
 */
#ifndef SRN_RDMACM_RS_H
#define SRN_RDMACM_RS_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "proto/srn_rs_proto.h"

/* The state of an rsocket; srn_rs_state_names[] names them. */
enum srn_rs_state {
	SRN_RSS_INIT, /* rsocket() */
	SRN_RSS_BOUND, /* rbind */
	SRN_RSS_LISTEN,
	SRN_RSS_ADDR, /* rconnect: address being resolved */
	SRN_RSS_ROUTE, /* route being resolved */
	SRN_RSS_CONNECTING, /* REQ sent, or accepted: ESTABLISHED awaited */
	SRN_RSS_CONNECTED,
	SRN_RSS_CLOSED, /* the peer disconnected (or the connection broke) */
	SRN_RSS_FAILED, /* rconnect failed: err */
	SRN_RSS_NR,
};
extern const char *const srn_rs_state_names[SRN_RSS_NR];

#define SRN_RS_BUF_SIZE (32u * 1024) /* bytes per receive buffer */
#define SRN_RS_DEF_BUF (256u * 1024) /* SO_RCVBUF / SO_SNDBUF default */
#define SRN_RS_RESOLVE_MS 2000
#define SRN_RS_WR_SEND (1ull << 63) /* wr_id: a send (else a receive) */
#define SRN_RS_WR_CTRL (1ull << 62) /* wr_id: a send without a buffer */

/* A buffer the application mapped for riowrite (riomap). */
struct srn_rs_iomap {
	void *addr;
	size_t len;
	off_t offset;
	struct ibv_mr *mr; /* open to the peer's RDMA WRITE */
};

/* A buffer the peer mapped (its IOMAP): where riowrite writes. */
struct srn_rs_rmap {
	uint64_t offset, addr, len;
	uint32_t rkey;
};

/* A datagram rsocket's destination, resolved (SIDR) once. */
struct srn_rs_dest {
	struct sockaddr_storage addr;
	struct ibv_ah *ah;
	uint32_t qpn, qkey;
};

struct srn_rs {
	int fd; /* the rsocket's number: ch->fd */
	bool dgram; /* SOCK_DGRAM: a UD QP (cm_rsocket_dgram.c) */
	/* a datagram rsocket's rdma_cm events (SIDR requests), set by
	 * cm_rsocket_dgram.c: the core calls up only through it */
	void (*on_cm)(struct srn_rs *rs, struct rdma_cm_event *ev);
	pthread_mutex_t lock;
	enum srn_rs_state state;
	int domain;
	int err; /* SO_ERROR, positive errno */
	bool nonblock; /* O_NONBLOCK (rfcntl) */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	/* options */
	int reuseaddr, nodelay, keepalive, inline_size;
	struct linger linger;
	uint32_t sndbuf, rcvbuf; /* SO_SNDBUF, SO_RCVBUF: bytes */
	uint32_t sqsize, rqsize; /* RDMA_SQSIZE, RDMA_RQSIZE: 0 default */
	uint32_t iomapsize; /* RDMA_IOMAPSIZE */
	/* the connection's resources */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	bool armed; /* CQ notification requested, no event taken */
	/* the wake eventfds of the threads asleep on this rsocket: the
	 * thread that takes its completions or events wakes the others
	 * (cm_rsocket_poll.c) */
	int *sleepers;
	uint32_t nsleepers, sleepers_cap;
	/* receiving: nrbuf buffers of rbuf_size, rbufs of them for data */
	uint8_t *rbuf;
	size_t rbuf_len; /* the mapping */
	struct ibv_mr *rmr;
	uint32_t nrbuf, rbufs, rbuf_size;
	uint32_t *rq_idx, *rq_len; /* data received, oldest first: ring */
	uint32_t rq_head, rq_cnt;
	uint32_t rq_off; /* bytes of the oldest buffer already read */
	uint32_t owed; /* credits freed, not yet returned */
	uint32_t peer_view; /* credits the peer holds (granted - used) */
	/* sending: nsbuf slots of peer_buf bytes, used in order */
	uint8_t *sbuf;
	size_t sbuf_len;
	struct ibv_mr *smr;
	uint32_t nsbuf, s_head, s_used;
	uint32_t sq_depth, sq_out; /* send WRs posted, not completed */
	uint32_t credits; /* DATA messages the peer can take now */
	uint32_t peer_bufs; /* its hello's bufs: credits never exceed it */
	uint32_t peer_buf; /* the peer's receive buffer size */
	bool fin_sent, fin_rcvd, shut_rd, shut_wr;
	bool fin_wanted; /* FIN to send once the send queue has room */
	struct srn_rs_iomap *iomap; /* riomap'ed buffers */
	uint32_t niomap;
	struct srn_rs_rmap *rmap; /* the peer's */
	uint32_t nrmap;
	/* datagrams */
	struct srn_rs_dest *dests;
	uint32_t ndests;
	int conn_dest; /* rconnect's destination, -1 */
	struct rdma_event_channel *rch; /* address resolution's */
};

/* cm_rsocket_core.c */
int srn_rs_fail(int neg_errno);
struct srn_rs *srn_rs_alloc(int domain);
struct srn_rs *srn_rs_new(int domain);
int srn_rs_nonblock_fd(int fd);
int srn_rs_map(struct ibv_pd *pd, size_t len, int access, uint8_t **buf_p,
	       size_t *len_p, struct ibv_mr **mr_p);
int srn_rs_post_recv(struct srn_rs *rs, uint32_t idx);
struct srn_rs *srn_rs_child(const struct srn_rs *lrs, struct rdma_cm_id *id);
int srn_rs_insert(struct srn_rs *rs);
struct srn_rs *srn_rs_get(int fd);
struct srn_rs *srn_rs_lock_fd(int fd);
void srn_rs_remove(struct srn_rs *rs);
void srn_rs_free(struct srn_rs *rs);
int srn_rs_setup(struct srn_rs *rs);
void srn_rs_hello_make(const struct srn_rs *rs, struct srn_rs_hello *h);
int srn_rs_peer(struct srn_rs *rs, const void *pdata, size_t len);
int srn_rs_progress(struct srn_rs *rs);
int srn_rs_cm_step(struct srn_rs *rs);
int srn_rs_post_write(struct srn_rs *rs, const struct srn_rs_rmap *m,
		      uint64_t offset, const void *buf, size_t len);
int srn_rs_post_ctrl(struct srn_rs *rs, enum srn_rs_msg_kind kind);
int srn_rs_post_data(struct srn_rs *rs, enum srn_rs_msg_kind kind,
		     const void *head, size_t head_len, const struct iovec *iov,
		     int iovcnt, size_t len);
size_t srn_rs_read(struct srn_rs *rs, const struct iovec *iov, int iovcnt,
		   size_t len, bool peek);
short srn_rs_revents(struct srn_rs *rs);
bool srn_rs_can_send(const struct srn_rs *rs);
bool srn_rs_slot_free(const struct srn_rs *rs);
int srn_rs_arm(struct srn_rs *rs);
void srn_rs_drain_cch(struct srn_rs *rs);

void srn_rs_release_head(struct srn_rs *rs);

/* cm_rsocket_poll.c */
int srn_rs_block(struct srn_rs *rs, int timeout_ms);

/* cm_rsocket_wake.c */
int srn_rs_sleep_add(struct srn_rs *rs, struct pollfd *p);
void srn_rs_sleep_del(struct srn_rs *rs);
void srn_rs_sleep_done(void);
void srn_rs_wake_sleepers(struct srn_rs *rs);
int srn_rs_wait(struct srn_rs *rs, short events, int timeout_ms);

/* cm_rsocket_dgram.c */
struct srn_rs *srn_rs_dg_new(int domain);
int srn_rs_dg_bind(struct srn_rs *rs, const struct sockaddr *addr);
int srn_rs_dg_connect(struct srn_rs *rs, const struct sockaddr *addr);
ssize_t srn_rs_dg_sendto(struct srn_rs *rs, const struct iovec *iov, int iovcnt,
			 int flags, const struct sockaddr *to);
ssize_t srn_rs_dg_recvfrom(struct srn_rs *rs, const struct iovec *iov,
			   int iovcnt, int flags, struct sockaddr *from,
			   socklen_t *fromlen);

#endif /* SRN_RDMACM_RS_H */
