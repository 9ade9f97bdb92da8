// SPDX-License-Identifier: MIT
/*
 * softrnic — a TCP link: one connection carrying one RC QP pair both ways
 * (docs/wire.md).
 *
 * Receive side: one parser per link; each message goes to the responder
 * (the peer's requests, tcp_responder.c) or to the requester (answers to
 * ours, tcp_transport.c). It runs under the progress lock, in the progress
 * thread or in an application thread that polls an empty CQ.
 *
 * Send side, under the link's tx_lock: the doorbell thread sends its
 * requests (blocking), the receive side queues answers in ansq (single
 * producer) and whoever holds tx_lock sends them, in order, before
 * anything else. Every request carries the acknowledgement of what the
 * peer asked us (SRN_WF_ACK). A bare ACK goes out only when nothing else
 * will carry it soon. It is held back when an application thread received
 * the request while polling, or when our side has sent requests since the
 * last batch (a conversation: our next request is likely near); it then
 * leaves with our next request, at the next empty poll, or after
 * SRN_TCP_ACK_DELAY_NS, whichever comes first. A target that only listens
 * acknowledges at once.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/tcp.h"

#define SRN_TCP_ACK_DELAY_NS 200000ull

/* under the progress lock */
static struct srn_list srn_tcp_work = SRN_LIST_INIT(srn_tcp_work);
static struct srn_list srn_tcp_paused = SRN_LIST_INIT(srn_tcp_paused);
static struct srn_list srn_tcp_links = SRN_LIST_INIT(srn_tcp_links);
static uint64_t srn_tcp_next_tick_ns;

static void srn_tcp_on_event(struct srn_pollable *pl, uint32_t events);

/* The halves above the link (set once, when the library is loaded). */
static const struct srn_tcp_up_ops *srn_tcp_up;

void srn_tcp_link_set_up(const struct srn_tcp_up_ops *up)
{
	srn_tcp_up = up;
}

/*
 * Every connection, dialed or accepted, notices a peer that vanished: data
 * unacknowledged for SRN_TCP_USER_TIMEOUT_MS breaks it (TCP_USER_TIMEOUT),
 * and an idle connection is probed (keepalive) after SRN_TCP_KEEPIDLE_S
 * and given up SRN_TCP_KEEPCNT probes later. A peer that is only stopped
 * still answers both from its kernel: the RC ACK timer catches that.
 */
void srn_tcp_sock_timeouts(int fd)
{
	unsigned user_timeout_ms = SRN_TCP_USER_TIMEOUT_MS;
	int one = 1, idle = SRN_TCP_KEEPIDLE_S, intvl = SRN_TCP_KEEPINTVL_S,
	    cnt = SRN_TCP_KEEPCNT;

	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
		   sizeof(user_timeout_ms));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

uint16_t srn_tcp_port(void)
{
	const char *e = getenv("SOFTRNIC_PORT");
	long v = e ? strtol(e, NULL, 10) : 0;

	return v > 0 && v < 65536 ? (uint16_t)v : SRN_TCP_PORT_DEFAULT;
}
static void srn_tcp_doom(struct srn_tcp_link *l);
static void srn_tcp_link_down(struct srn_tcp_link *l, int err);

struct srn_tcp_link *srn_tcp_link_new(int fd)
{
	struct srn_tcp_link *l = calloc(1, sizeof(*l));
	int one = 1;

	if (!l)
		return NULL;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	l->pl.fd = fd;
	l->pl.fn = srn_tcp_on_event;
	l->pl.priv = l;
	srn_list_init(&l->pl.link);
	srn_list_init(&l->work_link);
	srn_list_init(&l->paused_link);
	srn_list_init(&l->all_link);
	srn_wire_rx_init(&l->rx);
	l->rx.psn_free = true; /* until srn_tcp_link_own */
	srn_lock_init(&l->tx_lock);
	l->done_psn = UINT32_MAX; /* nothing asked yet */
	l->ack_sent = UINT32_MAX;

	return l;
}

/* "tcp <peer ip> qpn <peer qpn>", from the peer's HELLO fields ("tcp
 * mediated ..." for a mediated link). */
void srn_tcp_link_name(struct srn_tcp_link *l)
{
	char ip[INET_ADDRSTRLEN];

	if (l->mediated) {
		snprintf(l->desc, sizeof(l->desc),
			 "tcp mediated (another user) qpn 0x%06x",
			 l->hello.src_qpn);
		return;
	}
	inet_ntop(AF_INET, l->hello.src_gid + 12, ip, sizeof(ip));
	snprintf(l->desc, sizeof(l->desc), "tcp %s qpn 0x%06x", ip,
		 l->hello.src_qpn);
}

/* The epoll interest follows the pause and the send side's needs. Under
 * the progress lock. */
static void srn_tcp_link_events(struct srn_tcp_link *l)
{
	if (!l->pl.added)
		return;
	srn_progress_mod(&l->pl, EPOLLRDHUP | (l->paused ? 0 : EPOLLIN) |
					 (l->want_out ? EPOLLOUT : 0));
}

int srn_tcp_link_add(struct srn_tcp_link *l)
{
	int err = srn_progress_add_data(&l->pl, EPOLLIN | EPOLLRDHUP);

	if (err)
		return err;
	srn_progress_lock();
	if (srn_list_empty(&srn_tcp_links)) { /* the ACK timer starts */
		srn_tcp_next_tick_ns = srn_now_ns() + SRN_TCP_TICK_NS;
		srn_progress_wake_at(srn_tcp_next_tick_ns);
	}
	srn_list_add_tail(&l->all_link, &srn_tcp_links);
	srn_progress_unlock();
	return 0;
}

/* Our requests on l timed out: a sender blocked on it gives up. */
void srn_tcp_link_stop(struct srn_tcp_link *l)
{
	/* release: pairs with the acquire in srn_tcp_sendv_or */
	atomic_store_explicit(&l->stop, 1, memory_order_release);
}

/* Progress lock: may one more connection from ipv4 wait for its HELLO? */
bool srn_tcp_pre_hello_room(uint32_t ipv4)
{
	unsigned all = 0, same = 0;
	struct srn_list *pos;

	srn_list_for_each(pos, &srn_tcp_links) {
		struct srn_tcp_link *l =
			srn_list_entry(pos, struct srn_tcp_link, all_link);

		if (!l->accepted || l->qp)
			continue;
		all++;
		same += l->peer_ipv4 == ipv4;
	}
	return all < SRN_TCP_PRE_HELLO && same < SRN_TCP_PRE_HELLO_SRC;
}

/* Progress lock, from the timer or a kick: every SRN_TCP_TICK_NS, each
 * link's requester side checks its ACK timer (srn_tcp_req_tick), and an
 * accepted link that said no HELLO in SRN_TCP_HELLO_NS is closed. Runs
 * only while there are links: an idle process with none never wakes. */
void srn_tcp_watchdog(uint64_t now)
{
	struct srn_list *pos, *tmp;

	if (srn_list_empty(&srn_tcp_links))
		return;
	if (now >= srn_tcp_next_tick_ns) {
		srn_list_for_each_safe(pos, tmp, &srn_tcp_links) {
			struct srn_tcp_link *l = srn_list_entry(
				pos, struct srn_tcp_link, all_link);

			if (l->accepted && !l->qp &&
			    now - l->born_ns > SRN_TCP_HELLO_NS)
				srn_tcp_link_down(l, -ETIMEDOUT); /* no HELLO */
			else
				srn_tcp_up->req_tick(l, now);
		}
		srn_tcp_next_tick_ns = now + SRN_TCP_TICK_NS;
	}
	/* an earlier deadline may have taken the timer: ask again */
	srn_progress_wake_at(srn_tcp_next_tick_ns);
}

/* l stops being tq's peer link; ibv_query_qp keeps reporting where the
 * peer's requests got to. conn_lock held (every writer of peer_link
 * holds it). */
static void srn_tcp_peer_link_clear(struct srn_tcp_qp *tq,
				    struct srn_tcp_link *l)
{
	/* acquire: pairs with the release of done_psn in srn_tcp_link_done */
	uint32_t next = __atomic_load_n(&l->done_psn, __ATOMIC_ACQUIRE) + 1;

	/* release: pairs with the acquire in srn_tcp_query */
	__atomic_store_n(&tq->left_psn, 1ull << 32 | next, __ATOMIC_RELEASE);
	/* relaxed: conn_lock is held, as by every writer; a NULL publishes
	 * nothing */
	__atomic_store_n(&tq->peer_link, NULL, __ATOMIC_RELAXED);
}

void srn_tcp_link_free(struct srn_tcp_link *l)
{
	srn_progress_lock();
	srn_progress_del(&l->pl);
	srn_list_del(&l->paused_link);
	srn_list_del(&l->work_link);
	srn_list_del(&l->all_link);
	srn_progress_unlock();
	if (l->qp) {
		struct srn_tcp_qp *tq;

		pthread_mutex_lock(&l->qp->conn_lock);
		srn_list_del(&l->pl.link);
		tq = l->qp->tstate; /* conn_lock held */
		/* relaxed: conn_lock and the progress lock, which every writer
		 * of peer_link holds; the release in srn_tcp_link_own
		 * published what readers need, and nothing is published by
		 * clearing it */
		if (tq &&
		    __atomic_load_n(&tq->peer_link, __ATOMIC_RELAXED) == l)
			srn_tcp_peer_link_clear(tq, l);
		pthread_mutex_unlock(&l->qp->conn_lock);
	}
	if (l->pl.fd >= 0)
		close(l->pl.fd);

	free(l);
}

/* Does l's HELLO name the peer of QP tq's RTR attributes (its QPN and
 * GID), and does it come from that GID's address? A mediated link has no
 * address: the kernel vouched that its peer owns the QPN, on this host,
 * and it serves only a QP whose peer is another user's of this host
 * (tq->mediated), as only such a QP takes no other link. conn_lock
 * held. */
bool srn_tcp_link_matches(const struct srn_tcp_link *l,
			  const struct srn_tcp_qp *tq)
{
	if (l->hello.src_qpn != tq->dqpn ||
	    memcmp(l->hello.src_gid, tq->dgid, 16) ||
	    l->mediated != tq->mediated)
		return false;
	return l->mediated || !memcmp(&l->peer_ipv4, tq->dgid + 12, 4);
}

/* Where the peer's requests start on a new link of tq: the QP's rq_psn,
 * or, after a link that left in order (BYE), where that one stopped. */
static uint32_t srn_tcp_first_psn(struct srn_qp *qp, struct srn_tcp_qp *tq)
{
	/* acquire: pairs with the release in srn_tcp_peer_link_clear */
	uint64_t left = __atomic_load_n(&tq->left_psn, __ATOMIC_ACQUIRE);

	return left >> 32 ? (uint32_t)left : srn_qp_rx_get(qp).rq_psn;
}

/*
 * l becomes the link the QP's peer sends its requests on (and, on the side
 * that did not dial, where the QP's own requests go): the one link the QP
 * talks to. The peer's requests start at srn_tcp_first_psn: a PSN of the
 * QP's RTR is good once, so a replay of a departed link's stream is out of
 * sequence. conn_lock held, and the progress lock (no receive side runs
 * on l meanwhile).
 */
void srn_tcp_link_own(struct srn_tcp_link *l, struct srn_qp *qp,
		      struct srn_tcp_qp *tq)
{
	uint32_t next = srn_tcp_first_psn(qp, tq);

	l->done_psn = next - 1; /* nothing done yet */
	if (l->rx.psn_free) { /* no request parsed yet: they start here */
		l->rx.next_psn = next;
		l->rx.psn_free = false;
	}
	/* relaxed: tx_lock's, and nothing sends on l before it is owned */
	__atomic_store_n(&l->ack_sent, l->done_psn, __ATOMIC_RELAXED);
	/* release: pairs with the acquire of peer_link in
	 * srn_tcp_is_peer_link */
	__atomic_store_n(&tq->peer_link, l, __ATOMIC_RELEASE);
	if (tq->dialer)
		return; /* its requests go on the link it dialed */
	snprintf(tq->desc, sizeof(tq->desc), "%s", l->desc);
	/* release: the link is set up before it is seen; pairs with the
	 * acquire of tq->link in srn_tcp_execute */
	__atomic_store_n(&tq->link, l, __ATOMIC_RELEASE);
}

/* Links that wait for their QP to reach RTR, or to prove themselves, at
 * most (per QP). */
#define SRN_TCP_MAX_CANDIDATES 8

static unsigned srn_tcp_candidates(struct srn_qp *qp)
{
	struct srn_list *pos;
	unsigned n = 0;

	srn_list_for_each(pos, &qp->links)
		n++;
	return n;
}

/* Is qp in ERR or on its way there? Its links then wait for its next
 * RTR. Progress lock held: pending_err is set under it by every handler
 * that fails the QP on a link (srn_qp_async_error). */
static bool srn_tcp_qp_failing(struct srn_qp *qp)
{
	/* relaxed: the progress lock orders it (see above) */
	return srn_qp_state(qp) == IBV_QPS_ERR ||
	       atomic_load_explicit(&qp->pending_err, memory_order_relaxed);
}

/* May l claim QP qp (at RTR, attributes tq)? Its HELLO must name the
 * peer of the RTR attributes (srn_tcp_link_matches), and a QP that dialed
 * takes no link but its own, unless it is looped to itself (it dials and
 * accepts). conn_lock held. */
static bool srn_tcp_claim_ok(const struct srn_tcp_link *l,
			     const struct srn_qp *qp,
			     const struct srn_tcp_qp *tq)
{
	bool self = tq->dqpn == qp->ibqpx.qp_base.qp_num &&
		    !memcmp(tq->dgid, srn_device_get()->gid.raw, 16);

	return srn_tcp_link_matches(l, tq) && (!tq->dialer || self);
}

/*
 * Does l's HELLO prove that its sender knows the PSNs the applications
 * exchanged? It carries the dialer's rq_psn, which is our sq_psn: 1 if it
 * is, -EACCES if not, 0 while the QP has no sq_psn (before RTS; a
 * responder that only reaches RTR never has one: the first request's PSN
 * is the proof then, srn_tcp_link_prove). A mediated link needs no proof:
 * the kernel vouched for its peer.
 */
static int srn_tcp_hello_proof(const struct srn_tcp_link *l,
			       const struct srn_qp *qp)
{
	enum ibv_qp_state st = srn_qp_state(qp);

	if (l->mediated)
		return 1;
	if (st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE)
		return 0;
	return l->hello.rq_psn == (srn_qp_rx_get(qp).sq_psn & 0xffffff) ?
		       1 :
		       -EACCES;
}

/*
 * l proved itself: it becomes the QP's link (srn_tcp_link_own) and every
 * other candidate is shut down, so that its own receive side ends it (at
 * its next event), costing its socket alone. Returns the link l replaces
 * (a departed peer's, which the caller frees once conn_lock is dropped),
 * or NULL. conn_lock and the progress lock held.
 */
static struct srn_tcp_link *srn_tcp_link_take(struct srn_tcp_link *l,
					      struct srn_qp *qp,
					      struct srn_tcp_qp *tq)
{
	struct srn_tcp_link *old = tq->dialer ? NULL : tq->link;
	struct srn_list *pos;

	srn_tcp_link_own(l, qp, tq);
	srn_list_for_each(pos, &qp->links) {
		struct srn_tcp_link *c =
			container_of(pos, struct srn_tcp_link, pl.link);

		if (c != l && c != old && c != tq->link)
			shutdown(c->pl.fd, SHUT_RDWR);
	}
	return old;
}

/* After a link was taken (srn_tcp_link_take), conn_lock dropped: the link
 * it replaced is freed (nobody sends on it any more), and requests that
 * waited for a link are retried. */
static void srn_tcp_link_taken(struct srn_tcp_link *old, bool retry)
{
	if (old)
		srn_tcp_link_free(old);
	if (retry)
		srn_progress_request_retry();
}

/*
 * HELLO on l named QP qp. A QP at RTR keeps it as a candidate only if it
 * matches its RTR attributes (srn_tcp_claim_ok) and no link has proved
 * itself yet; at RTS its HELLO must also carry the proof
 * (srn_tcp_hello_proof), and then it is the QP's link at once. A second
 * claim, or a wrong one, is refused (-EACCES) and costs only its socket.
 * A QP not at RTR yet keeps it as a candidate (srn_tcp_connect_wait
 * decides), and so does a QP in ERR (or on its way there): its peer was
 * reset and came back first, and talks to the QP once it is reset and at
 * RTR again (its requests wait meanwhile, or time out as on a device).
 * Progress lock held.
 */
int srn_tcp_link_bind(struct srn_tcp_link *l, struct srn_qp *qp)
{
	struct srn_tcp_link *old = NULL;
	struct srn_tcp_qp *tq;
	bool retry = false;
	int err = 0, proof = 0;

	pthread_mutex_lock(&qp->conn_lock);
	tq = qp->tstate; /* conn_lock held */
	if (tq && srn_tcp_qp_failing(qp))
		tq = NULL; /* the link is for the QP's next RTR */
	if (tq && (tq->peer_link || !srn_tcp_claim_ok(l, qp, tq)))
		err = -EACCES;
	else if (tq && !tq->dialer && tq->link &&
		 srn_tcp_up->req_down(tq->link))
		err = -EACCES; /* our requests on the old link time out first */
	else if (tq && (proof = srn_tcp_hello_proof(l, qp)) < 0)
		err = -EACCES; /* it does not know our sq_psn */
	else if (!proof && srn_tcp_candidates(qp) >= SRN_TCP_MAX_CANDIDATES)
		err = -EBUSY;
	if (!err) {
		l->qp = qp;
		srn_list_add_tail(&l->pl.link, &qp->links);
		if (proof > 0)
			old = srn_tcp_link_take(l, qp, tq);
		retry = proof > 0 && !tq->dialer;
	}
	pthread_mutex_unlock(&qp->conn_lock);
	srn_tcp_link_taken(old, retry);
	return err;
}

/*
 * A request (psn) on l, a candidate of a QP at RTR or later. The first
 * request that carries exactly the PSN the QP expects
 * (srn_tcp_first_psn: the secret the applications exchanged) proves l
 * the peer's: it becomes the QP's link (0). A wrong PSN, a wrong HELLO
 * proof, or a request after another link proved itself closes l
 * (-EACCES): its socket, nothing else; the QP is not touched. -EAGAIN:
 * the QP is in ERR (or on its way), l waits for its next RTR. Progress
 * lock held.
 */
int srn_tcp_link_prove(struct srn_tcp_link *l, uint32_t psn)
{
	struct srn_qp *qp = l->qp;
	struct srn_tcp_link *old = NULL;
	struct srn_tcp_qp *tq;
	bool retry = false;
	int err = -EACCES;

	pthread_mutex_lock(&qp->conn_lock);
	tq = qp->tstate; /* conn_lock held */
	if (!tq || srn_tcp_qp_failing(qp)) {
		err = -EAGAIN;
	} else if (!tq->peer_link && srn_tcp_claim_ok(l, qp, tq) &&
		   srn_tcp_hello_proof(l, qp) >= 0 &&
		   psn == srn_tcp_first_psn(qp, tq)) {
		old = srn_tcp_link_take(l, qp, tq);
		retry = !tq->dialer;
		err = 0;
	}
	pthread_mutex_unlock(&qp->conn_lock);
	if (err == -EACCES)
		srn_log(SRN_LOG_INFO,
			"QP 0x%06x: closed %s: it did not prove to be the "
			"peer (request PSN 0x%06x)",
			qp->ibqpx.qp_base.qp_num, l->desc, psn & 0xffffff);
	srn_tcp_link_taken(old, retry);
	return err;
}

/* A candidate whose HELLO proof is wrong (srn_tcp_prove_hellos): off the
 * QP, then freed (not the QP's: its end touches nothing). Progress lock
 * held, not conn_lock. */
static void srn_tcp_refuse(struct srn_list *refused)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, refused) {
		struct srn_tcp_link *l =
			container_of(pos, struct srn_tcp_link, pl.link);

		srn_log(SRN_LOG_INFO,
			"QP 0x%06x: closed %s: its HELLO's rq_psn is not our "
			"sq_psn",
			l->qp->ibqpx.qp_base.qp_num, l->desc);
		srn_list_init(&l->pl.link);
		l->qp = NULL;
		srn_tcp_link_free(l);
	}
}

/*
 * qp reached RTS: it has an sq_psn, so its candidates' HELLOs can be
 * checked (srn_tcp_hello_proof). The first that proves itself becomes the
 * QP's link; those that carry a wrong proof are closed; the others (none
 * once a link is taken) wait. Progress lock held (the caller: modify_qp,
 * after the state changed).
 */
void srn_tcp_prove_hellos(struct srn_qp *qp)
{
	struct srn_list *pos, *tmp, refused = SRN_LIST_INIT(refused);
	struct srn_tcp_link *old = NULL;
	struct srn_tcp_qp *tq;
	bool retry = false;

	pthread_mutex_lock(&qp->conn_lock);
	tq = qp->tstate; /* conn_lock held */
	if (!tq || tq->peer_link || srn_tcp_qp_failing(qp)) {
		pthread_mutex_unlock(&qp->conn_lock);
		return; /* nothing to prove */
	}
	srn_list_for_each_safe(pos, tmp, &qp->links) {
		struct srn_tcp_link *l =
			container_of(pos, struct srn_tcp_link, pl.link);
		int proof;

		if (l == tq->link || tq->peer_link ||
		    !srn_tcp_claim_ok(l, qp, tq))
			continue;
		proof = srn_tcp_hello_proof(l, qp);
		if (proof < 0) {
			srn_list_del(&l->pl.link);
			srn_list_add_tail(&l->pl.link, &refused);
		} else if (proof > 0) {
			old = srn_tcp_link_take(l, qp, tq);
			retry = !tq->dialer;
		}
	}
	pthread_mutex_unlock(&qp->conn_lock);
	srn_tcp_refuse(&refused);
	srn_tcp_link_taken(old, retry);
}

/*
 * One sendmsg of at most SRN_TCP_SEND_CHUNK bytes of mh. Measured: 1 MiB
 * SENDs ran 1.9 GB/s as one call each and 2.6-2.8 GB/s in 128 KiB calls
 * (WRITEs 2.1 -> 2.3-2.5) across a veth. Likely why: one call holds the
 * socket through the whole copy, so the peer's TCP ACKs wait in the
 * backlog until it ends. iperf3 also writes 128 KiB at a time.
 */
static ssize_t srn_tcp_sendmsg_chunk(int fd, const struct msghdr *mh)
{
	struct msghdr m = *mh;
	struct iovec *cut = NULL;
	size_t tot = 0, len = 0;
	ssize_t k;

	for (size_t i = 0; i < m.msg_iovlen; i++) {
		if (tot + m.msg_iov[i].iov_len > SRN_TCP_SEND_CHUNK) {
			cut = &m.msg_iov[i];
			len = cut->iov_len;
			cut->iov_len = SRN_TCP_SEND_CHUNK - tot;
			m.msg_iovlen = i + 1;
			break;
		}
		tot += m.msg_iov[i].iov_len;
	}
	k = sendmsg(fd, &m, MSG_NOSIGNAL);
	if (cut)
		cut->iov_len = len;
	return k;
}

/* Sends the whole iovec list (blocking in the kernel when the socket is
 * full, never spinning). */
int srn_tcp_sendv(int fd, struct iovec *iov, unsigned n)
{
	return srn_tcp_sendv_or(fd, iov, n, NULL);
}

/* The same, but gives up (-ETIMEDOUT) once *stop is set while TCP pushes
 * back: a link whose requests timed out (srn_tcp_req_timeout) must not
 * hold its sender until the kernel's own timeout. */
int srn_tcp_sendv_or(int fd, struct iovec *iov, unsigned n,
		     const atomic_uint *stop)
{
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n };

	while (mh.msg_iovlen) {
		ssize_t k = srn_tcp_sendmsg_chunk(fd, &mh);

		if (k < 0) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			/* acquire: pairs with the release in
			 * srn_tcp_link_stop */
			if (stop &&
			    atomic_load_explicit(stop, memory_order_acquire))
				return -ETIMEDOUT;
			poll(&p, 1, SRN_TCP_SEND_WAIT_MS);
			continue;
		}
		while (mh.msg_iovlen && (size_t)k >= mh.msg_iov->iov_len) {
			k -= mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + k;
			mh.msg_iov->iov_len -= k;
		}
	}
	return 0;
}

/* ---- send side ---- */

/* What we may acknowledge now: every request handled, but never past an
 * answer still queued. tx_lock. */
static uint32_t srn_tcp_ack_value(struct srn_tcp_link *l)
{
	/* acquire: pairs with the releases in srn_tcp_link_done and
	 * srn_tcp_link_answer; done_psn first, so that the queue we then
	 * see holds every answer up to it */
	uint32_t a = __atomic_load_n(&l->done_psn, __ATOMIC_ACQUIRE);
	uint32_t tail = __atomic_load_n(&l->ansq_tail, __ATOMIC_ACQUIRE);

	if (l->ansq_head != tail) {
		uint32_t before = l->ansq[l->ansq_head % SRN_TCP_ANSQ].psn - 1;

		if ((int32_t)(before - a) < 0)
			a = before;
	}
	return a;
}

static void srn_tcp_answer_hdr(const struct srn_tcp_answer *a,
			       struct srn_wire_hdr *h)
{
	srn_wire_hdr_init(h, a->op, a->psn, a->op == SRN_WOP_ACK ? 0 : a->len);
	h->aux = a->status;
	h->rkey = a->rkey;
}

/* Sends the answer at the head of ansq from ans_off on. Blocking, or
 * -EAGAIN when the socket is full (the rest goes later). tx_lock. */
static int srn_tcp_send_answer(struct srn_tcp_link *l, bool block)
{
	struct srn_tcp_answer *a = &l->ansq[l->ansq_head % SRN_TCP_ANSQ];
	struct srn_wire_hdr h;
	struct iovec iov[2] = { { &h, sizeof(h) },
				{ (void *)a->data, a->len } };
	unsigned n = a->len && a->op != SRN_WOP_ACK ? 2 : 1;
	size_t off = l->ans_off;
	ssize_t k;

	if (a->op == SRN_WOP_ATOMIC_RESP)
		iov[1].iov_base = &a->val;
	srn_tcp_answer_hdr(a, &h);
	for (unsigned i = 0; i < n && off; i++) { /* skip what went */
		size_t s = off < iov[i].iov_len ? off : iov[i].iov_len;

		iov[i].iov_base = (char *)iov[i].iov_base + s;
		iov[i].iov_len -= s;
		off -= s;
	}
	if (block) {
		int err = srn_tcp_sendv_or(l->pl.fd, iov, n, &l->stop);

		if (err)
			return err;
	} else {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n };
		size_t left = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);

		k = sendmsg(l->pl.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0)
			return errno == EAGAIN || errno == EINTR ? -EAGAIN :
								   -errno;
		if ((size_t)k < left) {
			l->ans_off += (size_t)k;
			return -EAGAIN;
		}
	}
	l->ans_off = 0;
	/* an answer acknowledges every request up to its own */
	/* relaxed: tx_lock holders (us) read it plainly; srn_tcp_after_rx
	 * reads it as a hint */
	__atomic_store_n(&l->ack_sent,
			 a->op != SRN_WOP_ACK || a->status == SRN_WS_OK ?
				 a->psn :
				 a->psn - 1,
			 __ATOMIC_RELAXED);
	/* release: we are done with the slot; pairs with the acquire of
	 * ansq_head in srn_tcp_link_answer */
	__atomic_store_n(&l->ansq_head, l->ansq_head + 1, __ATOMIC_RELEASE);
	return 0;
}

/*
 * Sends every queued answer, then a bare ACK if one is owed and ack is
 * set. Blocking (the doorbell thread) or not (the receive side: -EAGAIN
 * when the socket is full). tx_lock.
 */
static int srn_tcp_drain(struct srn_tcp_link *l, bool block, bool ack)
{
	uint32_t a;

	/* acquire: pairs with the release in srn_tcp_link_answer */
	while (l->ansq_head !=
	       __atomic_load_n(&l->ansq_tail, __ATOMIC_ACQUIRE)) {
		int err = srn_tcp_send_answer(l, block);

		if (err)
			return err;
	}
	a = srn_tcp_ack_value(l);
	if (ack && a != l->ack_sent) {
		struct srn_wire_hdr h;
		ssize_t k;

		srn_wire_hdr_init(&h, SRN_WOP_ACK, a, 0);
		k = send(l->pl.fd, &h, sizeof(h),
			 MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
		if (k < 0)
			return errno == EAGAIN || errno == EINTR ? -EAGAIN :
								   -errno;
		if ((size_t)k < sizeof(h)) { /* a few bytes of room: finish */
			struct iovec rest = { (char *)&h + k, sizeof(h) - k };
			int err =
				srn_tcp_sendv_or(l->pl.fd, &rest, 1, &l->stop);

			if (err)
				return err;
		}
		/* relaxed: as in srn_tcp_send_answer */
		__atomic_store_n(&l->ack_sent, a, __ATOMIC_RELAXED);
	}
	return 0;
}

/* The doorbell thread, after it let go of tx_lock: answers the receive
 * side queued meanwhile are sent now (it could not take the lock). */
static void srn_tcp_tx_catch_up(struct srn_tcp_link *l)
{
	/* the caller's unlock of tx_lock is a plain store: a full barrier
	 * after it (pairs with the fence in srn_tcp_tx_kick) keeps the
	 * exchange below from passing it */
	srn_smp_mb();
	/* seq_cst: pairs with the seq_cst store in srn_tcp_tx_kick; one of
	 * the two sides is meant to see the other's work (but the other
	 * side's trylock is acquire, its failure load relaxed: see
	 * srn_tcp_tx_kick) */
	while (atomic_exchange_explicit(&l->tx_pending, 0,
					memory_order_seq_cst)) {
		srn_lock(&l->tx_lock);
		srn_tcp_drain(l, true, true);
		srn_unlock(&l->tx_lock);
	}
}

/* The doorbell thread sends a request (h, then the payload iovecs). */
int srn_tcp_link_request(struct srn_tcp_link *l, struct srn_wire_hdr *h,
			 struct iovec *iov, unsigned n)
{
	uint32_t a;
	int err;

	srn_lock(&l->tx_lock);
	err = srn_tcp_drain(l, true, false);
	if (!err) {
		a = srn_tcp_ack_value(l);
		if (a != l->ack_sent) {
			h->flags |= SRN_WF_ACK;
			h->ack_psn = a;
			/* relaxed: as in srn_tcp_send_answer */
			__atomic_store_n(&l->ack_sent, a, __ATOMIC_RELAXED);
		}
		err = srn_tcp_sendv_or(l->pl.fd, iov, n, &l->stop);
	}
	srn_unlock(&l->tx_lock);
	srn_tcp_tx_catch_up(l);
	return err;
}

/* Receive side: send what is due, now if the send side is free, else
 * leave it to the doorbell thread that holds it. Progress lock. */
static void srn_tcp_tx_kick(struct srn_tcp_link *l)
{
	bool out;
	int err;

	/* seq_cst: pairs with the seq_cst exchange in srn_tcp_tx_catch_up.
	 * The trylock after it reads the lock with a relaxed load when it
	 * fails, which C11 lets run ahead of this store: no fence keeps a
	 * failed trylock here and an empty exchange there from both
	 * happening */
	atomic_store_explicit(&l->tx_pending, 1, memory_order_seq_cst);
	/* a full barrier after the store (pairs with the one in
	 * srn_tcp_tx_catch_up): on x86 a seq_cst store is a locked
	 * instruction or a store and mfence, a full barrier already */
	srn_smp_mb_after_atomic();
	if (!srn_trylock(&l->tx_lock))
		return; /* srn_tcp_tx_catch_up will */
	/* relaxed: we hold tx_lock and drain below, which does what the
	 * flag asks; srn_tcp_tx_catch_up's exchange orders the rest */
	atomic_store_explicit(&l->tx_pending, 0, memory_order_relaxed);
	err = srn_tcp_drain(l, false, true);
	srn_unlock(&l->tx_lock);
	srn_tcp_tx_catch_up(l);
	out = err == -EAGAIN;
	if (out != l->want_out) {
		l->want_out = out;
		srn_tcp_link_events(l);
	}
}

/* Receive side, after a batch that took requests: answers go now; a bare
 * ACK may wait a little for a request to carry it (see the top of the
 * file). */
static void srn_tcp_after_rx(struct srn_tcp_link *l)
{
	/* relaxed: hints, read without tx_lock and rechecked under it (the
	 * rx side itself writes ansq_tail and done_psn) */
	bool answers = __atomic_load_n(&l->ansq_head, __ATOMIC_RELAXED) !=
		       __atomic_load_n(&l->ansq_tail, __ATOMIC_RELAXED);
	bool owed = __atomic_load_n(&l->done_psn, __ATOMIC_RELAXED) !=
		    __atomic_load_n(&l->ack_sent, __ATOMIC_RELAXED);
	uint32_t tx = __atomic_load_n(&l->tx_psn, __ATOMIC_RELAXED);
	bool talking = tx != l->rx_seen_tx_psn;

	l->rx_seen_tx_psn = tx;
	if (!answers && !owed && !l->want_out)
		return;
	if (!answers && !l->want_out && (!srn_in_progress_thread || talking)) {
		if (!l->on_work) {
			l->on_work = true;
			l->held_ns = srn_now_ns();
			srn_list_add_tail(&l->work_link, &srn_tcp_work);
			/* an application polls: it sends the ACK at its next
			 * empty poll, else the NAPI timer will */
			if (!srn_progress_napi())
				srn_progress_wake_at(l->held_ns +
						     SRN_TCP_ACK_DELAY_NS);
		}
		return;
	}
	srn_tcp_tx_kick(l);
}

/* The retry time of a link whose peer left in order is over. */
static void srn_tcp_doom(struct srn_tcp_link *l)
{
	srn_list_del(&l->work_link);
	l->on_work = false;
	l->doom_ns = 0;
	if (srn_tcp_up->req_down(l))
		srn_tcp_up->req_timeout(l);
}

/* Held-back ACKs go out: all of them when an application polls an empty
 * CQ (all), those held long enough at the timer. Progress lock. */
void srn_tcp_flush_work(bool all)
{
	uint64_t now = srn_now_ns();
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &srn_tcp_work) {
		struct srn_tcp_link *l =
			srn_list_entry(pos, struct srn_tcp_link, work_link);

		if (l->doom_ns) { /* the peer left with requests of ours
				   * unanswered: they time out, as on a
				   * device whose retries run out */
			if (now >= l->doom_ns)
				srn_tcp_doom(l);
			else /* an earlier deadline may have taken the timer */
				srn_progress_wake_at(l->doom_ns);
			continue;
		}
		if (!all && now - l->held_ns < SRN_TCP_ACK_DELAY_NS / 2) {
			/* young: a request may still carry it, or the next
			 * empty poll of an application that polls (else the
			 * NAPI timer looks again) */
			if (!srn_progress_napi())
				srn_progress_wake_at(l->held_ns +
						     SRN_TCP_ACK_DELAY_NS);
			continue;
		}
		srn_list_del(&l->work_link);
		l->on_work = false;
		srn_tcp_tx_kick(l);
	}
}

/* Receive side: queue an answer. -EPROTO: the peer has more READs and
 * atomics in flight than any QP may. */
int srn_tcp_link_answer(struct srn_tcp_link *l, const struct srn_tcp_answer *a)
{
	/* acquire: pairs with the release in srn_tcp_send_answer */
	uint32_t head = __atomic_load_n(&l->ansq_head, __ATOMIC_ACQUIRE);

	if (l->ansq_tail - head >= SRN_TCP_ANSQ)
		return -EPROTO;
	l->ansq[l->ansq_tail % SRN_TCP_ANSQ] = *a;
	/* release: pairs with the acquires of ansq_tail in srn_tcp_drain and
	 * srn_tcp_ack_value */
	__atomic_store_n(&l->ansq_tail, l->ansq_tail + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Receive side: request psn is handled (its answer, if any, queued). */
void srn_tcp_link_done(struct srn_tcp_link *l, uint32_t psn)
{
	/* release: pairs with the acquire in srn_tcp_ack_value */
	__atomic_store_n(&l->done_psn, psn, __ATOMIC_RELEASE);
}

/* Orderly close: what we owe the peer (answers, the ACK held back),
 * then BYE. Never waits for a peer that does not read. */
void srn_tcp_link_bye(struct srn_tcp_link *l)
{
	struct srn_wire_hdr h;

	srn_wire_hdr_init(&h, SRN_WOP_BYE, 0, 0);
	srn_lock(&l->tx_lock);
	if (!srn_tcp_drain(l, false, true))
		send(l->pl.fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
	srn_unlock(&l->tx_lock);
}

/* ---- receive side ---- */

static int srn_tcp_on_hdr(void *ctx, const struct srn_wire_hdr *h,
			  struct iovec *iov, unsigned *niov)
{
	struct srn_tcp_link *l = ctx;

	if (!l->qp || srn_wire_is_request(h->opcode) ||
	    h->opcode == SRN_WOP_HELLO || h->opcode == SRN_WOP_BYE)
		return srn_tcp_up->resp_on_hdr(l, h, iov, niov);
	return srn_tcp_up->req_on_hdr(l, h, iov, niov);
}

static int srn_tcp_on_msg(void *ctx, const struct srn_wire_hdr *h)
{
	struct srn_tcp_link *l = ctx;

	if (!l->qp || srn_wire_is_request(h->opcode) ||
	    h->opcode == SRN_WOP_HELLO)
		return srn_tcp_up->resp_on_msg(l, h);
	return srn_tcp_up->req_on_msg(l, h);
}

static int srn_tcp_on_ack(void *ctx, uint32_t psn)
{
	struct srn_tcp_link *l = ctx;

	return l->qp ? srn_tcp_up->req_on_ack(l, psn) : -EPROTO;
}

static const struct srn_wire_sink srn_tcp_sink = {
	.on_hdr = srn_tcp_on_hdr,
	.on_msg = srn_tcp_on_msg,
	.on_ack = srn_tcp_on_ack,
};

/* Our requests in flight on l, whose peer said BYE, fail when the QP's
 * retries (timeout, retry_cnt) would have run out. */
static void srn_tcp_doom_later(struct srn_tcp_link *l)
{
	struct srn_qp *qp = l->qp;
	uint64_t t = srn_ack_timeout_ns(srn_qp_rx_get(qp).timeout);

	if (!t)
		t = 100000000ull;
	l->doom_ns = srn_now_ns() + t * (srn_qp_rx_get(qp).retry_cnt + 1u);
	if (l->on_work)
		srn_list_del(&l->work_link);
	l->on_work = true;
	srn_list_add_tail(&l->work_link, &srn_tcp_work);
	srn_progress_wake_at(l->doom_ns);
}

/* The connection is over: BYE then end of stream, or anything else. */
static void srn_tcp_link_down(struct srn_tcp_link *l, int err)
{
	unsigned how = l->bye ? SRN_TCP_CLOSED : SRN_TCP_DEAD;
	struct srn_qp *qp = l->qp;
	struct srn_tcp_qp *tq;
	bool keep = false, own;

	srn_progress_del(&l->pl);
	/* release: pairs with the acquire of gone in srn_tcp_execute and
	 * srn_tcp_connect_wait */
	atomic_store_explicit(&l->gone, how, memory_order_release);
	if (err == -ESHUTDOWN) {
		/* a request reached our QP in ERR: end the connection (FIN,
		 * no BYE) so that the peer fails its QP now, instead of
		 * waiting for answers that will never come */
		srn_dbg("QP 0x%06x in ERR: ending its link %s",
			qp ? qp->ibqpx.qp_base.qp_num : 0, l->desc);
		shutdown(l->pl.fd, SHUT_RDWR);
		err = -ECONNABORTED;
	}
	if (qp) {
		pthread_mutex_lock(&qp->conn_lock);
		tq = qp->tstate; /* conn_lock held */
		/* relaxed: every writer of tq->link and tq->peer_link holds
		 * conn_lock, as we do */
		keep = tq && __atomic_load_n(&tq->link, __ATOMIC_RELAXED) == l;
		own = keep || (tq && __atomic_load_n(&tq->peer_link,
						     __ATOMIC_RELAXED) == l);
		if (own && how == SRN_TCP_CLOSED && tq->peer_link == l)
			/* the peer left in order: a new link may claim its
			 * place */
			srn_tcp_peer_link_clear(tq, l);
		pthread_mutex_unlock(&qp->conn_lock);
		/* only the loss of the QP's own link touches the QP: another
		 * (a candidate, a refused claim) costs its socket alone */
		if (own && how == SRN_TCP_DEAD && err != -ECONNABORTED) {
			srn_warn("QP 0x%06x: connection to QP 0x%06x (%s) "
				 "lost: %s",
				 qp->ibqpx.qp_base.qp_num, l->hello.src_qpn,
				 l->desc, strerror(err ? -err : ECONNRESET));
			srn_qp_async_fatal(qp);
		} else if (keep && srn_tcp_up->req_down(l)) {
			srn_tcp_doom_later(l);
		}
	}
	if (!keep) /* the QP's own link is freed by srn_tcp_disconnect */
		srn_tcp_link_free(l);
}

static void srn_tcp_pause(struct srn_tcp_link *l)
{
	if (l->paused)
		return;
	l->paused = true;
	srn_list_add_tail(&l->paused_link, &srn_tcp_paused);
	srn_tcp_link_events(l);
}

/* Progress lock: the socket is readable or writable, or was hung up; or
 * SRN_POLL_DIRECT: a polling application looks (no event known). */
static void srn_tcp_on_event(struct srn_pollable *pl, uint32_t events)
{
	struct srn_tcp_link *l = pl->priv;
	uint32_t done = l->done_psn, tail = l->ansq_tail;
	int err;

	if ((events & EPOLLOUT) || ((events & SRN_POLL_DIRECT) && l->want_out))
		srn_tcp_tx_kick(l);
	if (l->paused) {
		/* what we wait to place can never be answered now */
		if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
			srn_tcp_link_down(l, -ECONNRESET);
		return;
	}
	err = srn_wire_recv(&l->rx, pl->fd, &srn_tcp_sink, l);
	if (err == -EAGAIN) /* paused: stop reading until kicked */
		srn_tcp_pause(l);
	if (err == -EAGAIN || (!err && !(events & (EPOLLHUP | EPOLLERR)))) {
		/* requests handled, or NAKed (RNR): answer */
		if (l->done_psn != done || l->ansq_tail != tail)
			srn_tcp_after_rx(l);
		return;
	}
	srn_tcp_link_down(l, err);
}

/* Progress thread, after a kick or the timer: paused links try again. */
void srn_tcp_resume_paused(void)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &srn_tcp_paused) {
		struct srn_tcp_link *l =
			srn_list_entry(pos, struct srn_tcp_link, paused_link);

		srn_list_del(&l->paused_link);
		l->paused = false;
		srn_tcp_link_events(l);
		srn_tcp_on_event(&l->pl, 0);
	}
}
