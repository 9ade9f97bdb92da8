/* SPDX-License-Identifier: MIT */
/* softrnic — the TCP transport's internal interfaces (docs/wire.md). */
#ifndef SRN_TCP_H
#define SRN_TCP_H

#include <poll.h>
#include <sys/uio.h>

#include "engine/transport.h"
#include "transport/tcp/wire.h"

#define SRN_TCP_PORT_DEFAULT 4791
#define SRN_TCP_USER_TIMEOUT_MS 5000 /* unacknowledged data: peer gone */
#define SRN_TCP_KEEPIDLE_S 2 /* idle connections: first probe after... */
#define SRN_TCP_KEEPINTVL_S 1 /* ...then one a second... */
#define SRN_TCP_KEEPCNT 3 /* ...and gone after 3 unanswered: ~5 s */
/* The RC ACK timer looks at every link this often (while there are
 * links), and never gives up on a request before SRN_TCP_ACK_FLOOR_NS
 * (a QP's own budget, timeout x (retry_cnt + 1), can be milliseconds:
 * shorter than a scheduling hiccup of a loaded machine). */
#define SRN_TCP_TICK_NS 250000000ull
/* Hostile connections are cheap: one that has not said a valid HELLO
 * within SRN_TCP_HELLO_NS is closed, and no more than SRN_TCP_PRE_HELLO
 * (SRN_TCP_PRE_HELLO_SRC from one address) wait for their HELLO at once;
 * the listener takes at most SRN_TCP_ACCEPT_BATCH per wake-up, and out of
 * fds it stops for SRN_TCP_ACCEPT_PAUSE_NS instead of spinning. */
#define SRN_TCP_HELLO_NS 3000000000ull
#define SRN_TCP_PRE_HELLO 256
#define SRN_TCP_PRE_HELLO_SRC 16
#define SRN_TCP_ACCEPT_BATCH 64
#define SRN_TCP_ACCEPT_PAUSE_NS 100000000ull
#define SRN_TCP_ACK_FLOOR_NS 2000000000ull
#define SRN_TCP_SEND_CHUNK (128u << 10) /* bytes per sendmsg, at most */
/* A sender that TCP pushes back looks this often whether to give up
 * (SO_SNDTIMEO of dialed links, poll of accepted ones). */
#define SRN_TCP_SEND_WAIT_MS 250

/* How the other end went away. */
#define SRN_TCP_ALIVE 0u
#define SRN_TCP_CLOSED 1u /* BYE, then end of stream */
#define SRN_TCP_DEAD 2u /* reset, error, or end of stream without BYE */

/* An answer waiting to be sent: READ_RESP, ATOMIC_RESP, or a NAK (ACK
 * with an error status). */
struct srn_tcp_answer {
	uint8_t op;
	uint32_t psn;
	uint32_t status; /* NAK */
	uint32_t rkey; /* NAK RNR: the time to wait (min_rnr_timer) */
	const uint8_t *data; /* READ_RESP: straight from the MR */
	uint32_t len;
	uint64_t val; /* ATOMIC_RESP */
};

/* Answers in flight at most: the requester keeps its READs and atomics
 * in flight within max_rd_atomic (<= SRN_MAX_RD_ATOM); one NAK (after a
 * NAK the responder drops requests until the requester goes back). */
#define SRN_TCP_ANSQ (SRN_MAX_RD_ATOM * 2)

/*
 * One TCP connection = one RC QP pair, both ways (docs/wire.md). The
 * receive side (parser, responder, answers to our requests) runs under the
 * progress lock, in the progress thread or in an application thread that
 * polls. The socket's send side is tx_lock's: the doorbell thread sends
 * requests, blocking; the receive side queues answers (ansq, single
 * producer) that whoever holds tx_lock sends, and acknowledges.
 */
struct srn_tcp_link {
	struct srn_pollable pl; /* pl.link: on the QP's links */
	struct srn_list work_link; /* on srn_tcp_work: ack or answers due */
	struct srn_list paused_link;
	struct srn_list all_link; /* on srn_tcp_links (progress lock) */
	uint32_t peer_ipv4; /* accepted: the address it came from (network
			     * order) */
	bool accepted; /* we accepted it (it must say HELLO in time) */
	/* a mediated link (a unix stream socket from the peer's or our
	 * control plane, docs/security.md): the kernel vouched that its
	 * peer owns hello.src_qpn, on this host; no address to check */
	bool mediated;
	uint64_t born_ns; /* when it was accepted */
	bool tx_started; /* our requests began at the QP's sq_psn */
	struct srn_qp *qp; /* NULL until HELLO (accepted links) */
	struct srn_wire_rx rx;
	struct srn_wire_hello hello; /* the peer's (accepted links) */
	bool paused, bye, on_work, want_out;
	uint64_t held_ns; /* when an ACK was held back (on_work) */
	uint64_t doom_ns; /* BYE came with requests of ours unanswered:
			   * they fail then (on_work) */
	atomic_uint gone; /* SRN_TCP_* */
	atomic_uint stop; /* our requests timed out: senders give up */
	char desc[64];
	/* requester: our requests and their answers */
	uint32_t tx_psn; /* next request psn; sq_lock, release */
	uint64_t resp_pos; /* rx: SQ position answered next... */
	uint32_t resp_psn; /* ...and its psn */
	enum ibv_wc_status resp_status;
	/* the RC ACK timer (srn_tcp_req_tick), progress lock */
	uint32_t rx_answers; /* answers, ACKs and NAKs received */
	uint32_t tick_answers; /* rx_answers at the last tick */
	uint64_t wait_since_ns; /* requests unanswered since; 0: none */
	/* responder: the peer's requests */
	struct srn_rwqe_buf rb;
	uint32_t rq_pos; /* rb's ring position + 1, for its CQE (rq_pos) */
	bool have_rwqe;
	/* an XRC TGT's current request: the XRC SRQ it names (looked up
	 * again for each of its steps, under the progress lock), or NULL */
	struct srn_srq *xsrq;
	bool nak_rnr; /* we NAKed done_psn + 1 (RNR): later requests are
		       * dropped until it comes again */
	bool nak_err; /* we NAKed a request with an error: every later one
		       * is dropped, unexecuted (as by a QP in ERR) */
	bool skip; /* the current request is dropped */
	enum ibv_wc_status st; /* outcome at the target */
	uint32_t ws; /* answer to the initiator */
	uint8_t *ptr;
	struct srn_wire_atomic at;
	uint32_t done_psn; /* last request handled; rx, release */
	uint32_t rx_seen_tx_psn; /* tx_psn at the last receive batch */
	/* transmit */
	struct srn_lock tx_lock;
	atomic_uint tx_pending; /* answers or an ACK wait for tx_lock */
	uint32_t ack_sent; /* tx_lock */
	uint32_t ansq_head; /* tx_lock; release */
	uint32_t ansq_tail; /* rx; release */
	size_t ans_off; /* bytes of ansq[head] sent; tx_lock */
	struct srn_tcp_answer ansq[SRN_TCP_ANSQ];
};

/* qp->tpriv of a QP on the tcp transport */
/*
 * Requests gathered by one run of the requester (tcp_batch.c): sent with
 * one sendmsg when the run ends, or when the batch is full. Only requests
 * that need no answer but an ACK (SEND, WRITE) and carry at most
 * SRN_TCP_BATCH_LEN bytes are gathered. sq_lock.
 */
#define SRN_TCP_BATCH_WQES 16
#define SRN_TCP_BATCH_IOV 48
#define SRN_TCP_BATCH_LEN 4096u
struct srn_tcp_batch {
	struct srn_tcp_link *link; /* where they go; NULL: empty */
	unsigned nwqe, niov;
	struct srn_wire_hdr hdr[SRN_TCP_BATCH_WQES];
	struct iovec iov[SRN_TCP_BATCH_IOV];
};

struct srn_tcp_qp {
	struct srn_tcp_batch batch;
	struct srn_tcp_link *link; /* requests go here; NULL while waiting
				    * for the peer to connect (conn_lock
				    * writes, release) */
	struct srn_tcp_link *peer_link; /* the peer's requests come here,
					 * and only here: the link it dialed
					 * or ours (conn_lock and progress
					 * lock write, release) */
	bool dialer; /* we connect; else the peer connects to us */
	bool mediated; /* the peer is another user's QP of this host: its
			* link is a mediated one (srn_tcp_connect_mediated) */
	/* a peer link ended: 1 << 32 | the next PSN it would have sent
	 * (0: none did; atomic, for ibv_query_qp) */
	uint64_t left_psn;
	uint8_t dgid[16];
	uint32_t dqpn;
	atomic_uint rd_out; /* READs and atomics in flight */
	/* RNR NAK: the receive side (progress lock) counts the retries and
	 * asks the requester (sq_lock) to go back to rewind_pos/psn after
	 * rnr_until_ns */
	uint32_t rnr_psn, rnr_left;
	bool rnr_seen;
	uint64_t rnr_until_ns; /* relaxed atomics: both sides */
	uint64_t rewind_pos; /* set before the release of qp->pending_run */
	uint32_t rewind_psn;
	char desc[64];
};

uint16_t srn_tcp_port(void);
void srn_tcp_sock_timeouts(int fd);
int srn_tcp_sendv(int fd, struct iovec *iov, unsigned n);
int srn_tcp_sendv_or(int fd, struct iovec *iov, unsigned n,
		     const atomic_uint *stop);
void srn_tcp_link_stop(struct srn_tcp_link *l);

/* tcp_batch.c: gathering requests */
bool srn_tcp_batch_add(struct srn_tcp_qp *tq, struct srn_tcp_link *l,
		       const struct srn_wire_hdr *h, const struct iovec *iov,
		       unsigned n);
int srn_tcp_batch_flush(struct srn_tcp_qp *tq);
void srn_tcp_batch_end(struct srn_qp *qp, bool discard);
bool srn_tcp_defer(struct srn_qp *qp);

/* The host daemon (tcp_hostd.c) */
struct sockaddr_in;
int srn_tcp_hostd_listen(const struct sockaddr_in *sa);
int srn_tcp_hostd_udp(const struct sockaddr_in *sa);
int srn_tcp_hostd_mark_start(void);
void srn_tcp_hostd_mark_stop(void);

/*
 * What a link's receive side hands up (tcp_link.c dispatches through it):
 * requests to the responder (tcp_responder.c), answers and ACKs to the
 * requester (tcp_transport.c). tcp_transport.c sets it when the library is
 * loaded.
 */
struct srn_tcp_up_ops {
	int (*resp_on_hdr)(struct srn_tcp_link *l, const struct srn_wire_hdr *h,
			   struct iovec *iov, unsigned *niov);
	int (*resp_on_msg)(struct srn_tcp_link *l,
			   const struct srn_wire_hdr *h);
	int (*req_on_hdr)(struct srn_tcp_link *l, const struct srn_wire_hdr *h,
			  struct iovec *iov, unsigned *niov);
	int (*req_on_msg)(struct srn_tcp_link *l, const struct srn_wire_hdr *h);
	int (*req_on_ack)(struct srn_tcp_link *l, uint32_t psn);
	/* the peer left: fail our requests in flight (true: some were) */
	bool (*req_down)(struct srn_tcp_link *l);
	/* our requests on l got no answer in time: the oldest fails with
	 * RETRY_EXC_ERR, the QP goes to ERR */
	void (*req_timeout)(struct srn_tcp_link *l);
	/* the ACK timer's tick (every SRN_TCP_TICK_NS while links exist) */
	void (*req_tick)(struct srn_tcp_link *l, uint64_t now);
};

/* tcp_link.c: connections, their receive dispatch and their send side */
void srn_tcp_link_set_up(const struct srn_tcp_up_ops *up);
struct srn_tcp_link *srn_tcp_link_new(int fd);
void srn_tcp_link_free(struct srn_tcp_link *l);
void srn_tcp_link_name(struct srn_tcp_link *l);
int srn_tcp_link_add(struct srn_tcp_link *l);
int srn_tcp_link_bind(struct srn_tcp_link *l, struct srn_qp *qp);
void srn_tcp_link_own(struct srn_tcp_link *l, struct srn_qp *qp,
		      struct srn_tcp_qp *tq);
bool srn_tcp_link_matches(const struct srn_tcp_link *l,
			  const struct srn_tcp_qp *tq);
int srn_tcp_link_prove(struct srn_tcp_link *l, uint32_t psn);
void srn_tcp_prove_hellos(struct srn_qp *qp);
void srn_tcp_link_bye(struct srn_tcp_link *l);
int srn_tcp_link_request(struct srn_tcp_link *l, struct srn_wire_hdr *h,
			 struct iovec *iov, unsigned n);
int srn_tcp_link_answer(struct srn_tcp_link *l, const struct srn_tcp_answer *a);
void srn_tcp_link_done(struct srn_tcp_link *l, uint32_t psn);
void srn_tcp_flush_work(bool all);
void srn_tcp_watchdog(uint64_t now);
bool srn_tcp_pre_hello_room(uint32_t ipv4);
void srn_tcp_resume_paused(void);

/* tcp_transport.c: the requester's side of a link */
int srn_tcp_req_on_ack(struct srn_tcp_link *l, uint32_t psn);
int srn_tcp_req_on_hdr(struct srn_tcp_link *l, const struct srn_wire_hdr *h,
		       struct iovec *iov, unsigned *niov);
int srn_tcp_req_on_msg(struct srn_tcp_link *l, const struct srn_wire_hdr *h);
bool srn_tcp_req_down(struct srn_tcp_link *l);

/* tcp_responder.c: the host-wide listener and the responder */
int srn_tcp_resp_on_hdr(struct srn_tcp_link *l, const struct srn_wire_hdr *h,
			struct iovec *iov, unsigned *niov);
int srn_tcp_resp_on_msg(struct srn_tcp_link *l, const struct srn_wire_hdr *h);
int srn_tcp_adopt(struct srn_qp *qp, int fd, const void *hello, size_t len);
int srn_tcp_mediate(struct srn_qp *qp, int fd, uint32_t src_qpn,
		    const void *hello, size_t len);
void srn_tcp_qp_destroy(struct srn_qp *qp);
void srn_tcp_kick(struct srn_qp *qp);
extern struct srn_progress_hooks srn_tcp_hooks;

/* tcp_ud.c: UD datagrams over UDP (srn_udp_proto.h) */
void srn_udp_start(void);
void srn_udp_stop(void);
int srn_udp_ud_send(struct srn_qp *qp, const struct srn_swqe *w,
		    const struct srn_ud_dest *d, enum ibv_wc_status *status,
		    enum srn_stall *stall);
int srn_udp_ud_open(struct srn_qp *qp);
void srn_udp_qp_destroy(struct srn_qp *qp);
int srn_udp_mcast(struct srn_qp *qp, const union ibv_gid *mgid, bool attach);

#endif /* SRN_TCP_H */
