// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: CM links, the CM's QP1 (docs/rdmacm.md, "The CM
 * protocol").
 *
 * A link is one stream connection between this process's CM service and
 * another process's. The active side dials the destination host's CM
 * port once per destination address, port space and rdma_cm port, and
 * every rdma_cm connection it makes there sends its messages on that link;
 * the passive side makes a link of each stream it accepted (cm_svc.c) and
 * answers on it. Messages name both ends' communication ids (an id's
 * serial, truncated to 32 bits), and one is delivered only to an id of
 * this link whose peer is the sender: one link's peer cannot touch
 * another's connections.
 *
 * A link that breaks takes every connection on it with it (each as if its
 * own connection had broken). One without ids is closed after
 * SRN_CM_LINK_IDLE_MS (we dialed it) or SRN_CM_LINK_IDLE_PASSIVE_MS.
 * Sends never block: what the socket does not take waits in the link's
 * queue (at most SRN_CM_LINK_TX_MAX bytes) until it can.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdmacm/cm.h"

static const struct srn_cm_link_up_ops *srn_cm_lup;

void srn_cm_link_set_up(const struct srn_cm_link_up_ops *ops)
{
	srn_cm_lup = ops;
}

static uint32_t srn_cm_comm(const struct srn_cm_id *cid)
{
	return (uint32_t)cid->serial;
}

/* Under srn_cm.lock: the hash bucket of a link's serial (made empty on
 * first use). */
static struct srn_list *srn_cm_link_bucket(uint64_t serial)
{
	struct srn_list *b =
		&srn_cm.link_hash[serial & (SRN_CM_LINK_BUCKETS - 1)];

	if (!b->next)
		srn_list_init(b);
	return b;
}

static struct srn_cm_link *srn_cm_link_new(int fd, bool active)
{
	struct srn_cm_link *lk = srn_cm_zalloc(sizeof(*lk));

	if (!lk)
		return NULL;
	lk->fd = fd;
	lk->active = active;
	lk->serial = srn_cm.next_serial++;
	srn_list_init(&lk->ids);
	srn_list_add_tail(&lk->link, &srn_cm.links);
	srn_list_add(&lk->hlink, srn_cm_link_bucket(lk->serial));
	lk->idle_ns = srn_now_ns();
	srn_cm.idle_links++;
	return lk;
}

/* Under srn_cm.lock: the link of an epoll handle, or NULL. */
static struct srn_cm_link *srn_cm_link_find(uint64_t serial)
{
	struct srn_list *pos, *b = srn_cm_link_bucket(serial);
	struct srn_cm_link *lk;

	srn_list_for_each(pos, b) {
		lk = srn_list_entry(pos, struct srn_cm_link, hlink);
		if (lk->serial == serial)
			return lk;
	}
	return NULL;
}

static void srn_cm_link_free(struct srn_cm_link *lk)
{
	if (lk->idle_ns)
		srn_cm.idle_links--;
	if (lk->refusing)
		srn_cm.refusing--;
	srn_list_del(&lk->link);
	srn_list_del(&lk->hlink);
	free(lk->tx);
	srn_cm_zfree(lk);
}

/* Closes the socket; the object stays until its last id left and its
 * reader (if running) is done. */
static void srn_cm_link_close_fd(struct srn_cm_link *lk)
{
	if (lk->fd < 0)
		return;
	epoll_ctl(srn_cm.epfd, EPOLL_CTL_DEL, lk->fd, NULL);
	close(lk->fd);
	lk->fd = -1;
	lk->dead = true;
}

/* Frees a dead link once nothing refers to it. */
static void srn_cm_link_reap(struct srn_cm_link *lk)
{
	if (lk->dead && !lk->nids && !lk->busy)
		srn_cm_link_free(lk);
}

/* The link broke or its peer lied (err): every id on it is lost. */
static void srn_cm_link_drop(struct srn_cm_link *lk, int err)
{
	struct srn_cm_id *cid;

	srn_dbg("rdmacm: CM link lost (%s): %u connection(s) on it",
		strerror(-err), lk->nids);
	bool was_busy = lk->busy;

	srn_cm_link_close_fd(lk);
	lk->busy = true; /* the ids' leaving must not free it meanwhile */
	while (!srn_list_empty(&lk->ids)) {
		cid = srn_list_entry(lk->ids.next, struct srn_cm_id, lklink);
		if (lk->dialing)
			srn_cm_lup->on_dial_failed(cid, err);
		else
			srn_cm_lup->on_lost(cid, err);
		if (cid->lk == lk) /* the id did not leave: make it */
			srn_cm_close_conn(cid);
	}
	lk->busy = was_busy;
	srn_cm_link_reap(lk);
}

/* epoll's interest in the link: only EPOLLOUT while dialing, EPOLLIN
 * after, and EPOLLOUT too while tx waits. */
static void srn_cm_link_events(struct srn_cm_link *lk)
{
	struct epoll_event ev = { .data.u64 = lk->serial << 2 |
					      SRN_CM_EP_CONN };

	ev.events = lk->dialing ? EPOLLOUT :
				  EPOLLIN | (lk->tx_len ? EPOLLOUT : 0);
	if (lk->fd < 0 || lk->corked || ev.events == lk->ev_mask)
		return;
	if (!epoll_ctl(srn_cm.epfd, EPOLL_CTL_MOD, lk->fd, &ev))
		lk->ev_mask = ev.events;
}

/* Queues len bytes the socket did not take: 0, or -ENOBUFS. */
static int srn_cm_link_queue(struct srn_cm_link *lk, const uint8_t *b,
			     size_t len)
{
	size_t cap = lk->tx_cap ? lk->tx_cap : 4096;
	uint8_t *n;

	if (lk->tx_off && lk->tx_off + lk->tx_len + len > lk->tx_cap) {
		memmove(lk->tx, lk->tx + lk->tx_off, lk->tx_len);
		lk->tx_off = 0; /* what was sent makes room, once */
	}
	while (cap < lk->tx_off + lk->tx_len + len)
		cap *= 2;
	if (cap > SRN_CM_LINK_TX_MAX)
		return -ENOBUFS;
	if (cap != lk->tx_cap) {
		n = realloc(lk->tx, cap);
		if (!n)
			return -ENOBUFS;
		lk->tx = n;
		lk->tx_cap = cap;
	}
	memcpy(lk->tx + lk->tx_off + lk->tx_len, b, len);
	lk->tx_len += len;
	srn_cm_link_events(lk);
	return 0;
}

/* Sends what waits in tx as far as the socket takes it. */
static void srn_cm_link_flush(struct srn_cm_link *lk)
{
	ssize_t n;

	while (lk->tx_len && lk->fd >= 0) {
		n = send(lk->fd, lk->tx + lk->tx_off, lk->tx_len,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* EAGAIN: later; an error: the reader sees it */
		lk->tx_off += (size_t)n;
		lk->tx_len -= (size_t)n;
	}
	if (!lk->tx_len && lk->tx) { /* an idle link holds no buffer */
		free(lk->tx);
		lk->tx = NULL;
		lk->tx_cap = lk->tx_off = 0;
	}
	srn_cm_link_events(lk);
}

/*
 * Sends m on lk, in order after what waits: 0, or -errno (the link is
 * dead, or its queue full). A send error leaves the link to its reader,
 * which hears the hang-up, so that no caller sees its id lost inside a
 * send.
 */
static int srn_cm_link_write(struct srn_cm_link *lk, const struct srn_cm_msg *m)
{
	const uint8_t *b = (const uint8_t *)m;
	size_t len = sizeof(*m);
	ssize_t n = 0;

	int err;

	if (lk->dead)
		return -ENOTCONN;
	if (!lk->tx_len && !lk->dialing && !lk->corked) {
		do
			n = send(lk->fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n == (ssize_t)len)
			return 0;
		if (n < 0 && errno != EAGAIN) {
			err = -errno;
			lk->stale = true; /* broken: no new ids join it */
			return err;
		}
		if (n < 0)
			n = 0;
	}
	err = srn_cm_link_queue(lk, b + n, len - (size_t)n);
	if (err) {
		/* a peer that reads nothing loses its link (its reader
		 * hears the hang-up), not single messages of it */
		lk->stale = true;
		shutdown(lk->fd, SHUT_RDWR);
	}
	return err;
}

/* Does m end the exchange of cid's connection (no GONE needed after)? */
static bool srn_cm_ends(const struct srn_cm_id *cid, const struct srn_cm_msg *m)
{
	return m->type == SRN_CM_REJ || m->type == SRN_CM_DREP ||
	       m->type == SRN_CM_DREQ || m->type == SRN_CM_GONE ||
	       (m->type == SRN_CM_REP && cid->id.qp_type == IBV_QPT_UD);
}

/* Sends m for cid to its peer (under srn_cm.lock): 0 or -errno. */
int srn_cm_send(struct srn_cm_id *cid, struct srn_cm_msg *m)
{
	int ret;

	if (!cid->lk)
		return -ENOTCONN;
	m->local_id = htobe32(srn_cm_comm(cid));
	m->remote_id = htobe32(cid->peer_comm);
	ret = srn_cm_link_write(cid->lk, m);
	if (!ret && srn_cm_ends(cid, m))
		cid->lk_quiet = true; /* the peer's exchange ends with it */
	return ret;
}

/* cid now sends and hears on lk (under srn_cm.lock). */
void srn_cm_link_attach(struct srn_cm_id *cid, struct srn_cm_link *lk)
{
	if (lk->idle_ns) {
		lk->idle_ns = 0;
		srn_cm.idle_links--;
	}
	cid->lk = lk;
	cid->lk_quiet = false;
	srn_list_add_tail(&cid->lklink, &lk->ids);
	lk->nids++;
}

/*
 * cid leaves its link (under srn_cm.lock): its peer hears GONE unless its
 * exchange already ended (srn_cm_send) or the link is dead, as if a
 * connection of the id's own had closed. The link idles when it was the
 * last.
 */
void srn_cm_close_conn(struct srn_cm_id *cid)
{
	struct srn_cm_link *lk = cid->lk;
	struct srn_cm_msg m;

	if (!lk)
		return;
	if (!cid->lk_quiet && !lk->dead) {
		srn_cm_msg_init(&m, SRN_CM_GONE);
		srn_cm_send(cid, &m);
	}
	srn_list_del(&cid->lklink);
	cid->lk = NULL;
	cid->peer_comm = 0;
	if (--lk->nids)
		return;
	if (lk->dead) {
		srn_cm_link_reap(lk);
		return;
	}
	lk->idle_ns = srn_now_ns();
	if (!srn_cm.idle_links++)
		srn_cm_svc_kick();
}

/* True while cid's link is still being dialed (its REQ waits in tx). */
bool srn_cm_link_waiting(const struct srn_cm_id *cid)
{
	return cid->lk && cid->lk->dialing;
}

/* The CM port of cid's destination, and the key of its link. */
static socklen_t srn_cm_link_dst(const struct srn_cm_id *cid,
				 struct sockaddr_storage *ss)
{
	struct sockaddr *sa = (struct sockaddr *)ss;

	memcpy(ss, &cid->id.route.addr.dst_storage, sizeof(*ss));
	*srn_cm_port_of(sa) = htobe16(srn_cm_service_port());
	if (sa->sa_family == AF_INET6) {
		((struct sockaddr_in6 *)ss)->sin6_flowinfo = 0;
		return sizeof(struct sockaddr_in6);
	}
	memset(((struct sockaddr_in *)ss)->sin_zero, 0,
	       sizeof(((struct sockaddr_in *)ss)->sin_zero));
	return sizeof(struct sockaddr_in);
}

/* A live link we dialed to this key, or NULL. */
static struct srn_cm_link *srn_cm_link_lookup(const struct sockaddr_storage *d,
					      socklen_t dlen, uint16_t ps,
					      uint16_t port)
{
	struct srn_list *pos;
	struct srn_cm_link *lk;

	srn_list_for_each(pos, &srn_cm.links) {
		lk = srn_list_entry(pos, struct srn_cm_link, link);
		if (lk->active && !lk->dead && !lk->stale && lk->ps == ps &&
		    lk->port == port && !memcmp(&lk->dst, d, dlen))
			return lk;
	}
	return NULL;
}

/* Starts a stream connection to d (non-blocking): a new link or -errno. */
static struct srn_cm_link *srn_cm_link_dial(const struct sockaddr_storage *d,
					    socklen_t dlen, int *err_p)
{
	const struct sockaddr *sa = (const struct sockaddr *)d;
	struct srn_cm_link *lk;
	int fd, one = 1, cnt = 2;

	fd = srn_socket(sa->sa_family,
			SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		*err_p = -errno;
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &cnt, sizeof(cnt));
	if (connect(fd, sa, dlen) && errno != EINPROGRESS) {
		*err_p = -errno;
		close(fd);
		return NULL;
	}
	lk = srn_cm_link_new(fd, true);
	if (!lk) {
		close(fd);
		*err_p = -ENOMEM;
		return NULL;
	}
	lk->dialing = true;
	lk->ev_mask = EPOLLOUT;
	*err_p = srn_cm_epoll_add(fd, lk->serial, SRN_CM_EP_CONN, EPOLLOUT);
	if (*err_p) {
		srn_cm_link_close_fd(lk);
		srn_cm_link_free(lk);
		return NULL;
	}
	return lk;
}

/*
 * The active side: cid joins the link to its destination's rdma_cm port,
 * dialed now if there is none (under srn_cm.lock). 0 or -errno. Its REQ
 * may be sent at once: it waits in the link's queue while it is dialed.
 */
int srn_cm_link_join(struct srn_cm_id *cid)
{
	struct sockaddr_storage d;
	socklen_t dlen = srn_cm_link_dst(cid, &d);
	uint16_t ps = (uint16_t)cid->id.ps;
	uint16_t port = be16toh(*srn_cm_port_of(&cid->id.route.addr.dst_addr));
	struct srn_cm_link *lk = srn_cm_link_lookup(&d, dlen, ps, port);
	int err;

	if (!lk) {
		lk = srn_cm_link_dial(&d, dlen, &err);
		if (!lk)
			return err;
		memcpy(&lk->dst, &d, sizeof(d));
		lk->ps = ps;
		lk->port = port;
	}
	cid->peer_comm = 0;
	srn_cm_link_attach(cid, lk);
	return 0;
}

/* Our dial finished: the queued REQs go, or every id on it fails. */
static void srn_cm_link_connected(struct srn_cm_link *lk)
{
	socklen_t sl = sizeof(int);
	int err = 0;

	getsockopt(lk->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
	if (err == ECONNRESET || err == EPIPE) {
		lk->dialing = false; /* taken, then reset: the ids dial again */
		srn_cm_link_drop(lk, -err);
		return;
	}
	if (err) {
		srn_cm_link_drop(lk, -err); /* still dialing: dial_failed */
		return;
	}
	lk->dialing = false;
	srn_cm_link_flush(lk); /* and EPOLLIN from now on */
}

/* Answers the message to on lk with a message of our own that names no
 * id of ours but `ours` (0 for the service's REJ). */
static void srn_cm_link_reply(struct srn_cm_link *lk,
			      const struct srn_cm_msg *to,
			      enum srn_cm_msg_type type, uint16_t reason,
			      uint32_t ours)
{
	struct srn_cm_msg m;

	srn_cm_msg_init(&m, type);
	m.reason = htobe16(reason);
	m.local_id = htobe32(ours);
	m.remote_id = to->local_id;
	srn_cm_link_write(lk, &m);
}

/* A REQ on a link we accepted: to our listener of its port, or REJ: "not
 * here" (the active side dials again), or, on a link whose first REQ
 * found nobody listening on the host, "invalid service id" as that one
 * got (the REQs the peer sent behind it). */
static void srn_cm_link_on_req(struct srn_cm_link *lk,
			       const struct srn_cm_msg *m)
{
	struct srn_cm_id *lid = NULL;
	uint16_t reason = SRN_CM_REJ_NOT_HERE;

	if (!lk->active)
		lid = srn_cm_listener_find(be16toh(m->ps),
					   be16toh(m->dst_port));
	if (lk->refusing)
		reason = SRN_CM_REJ_INVALID_SERVICE_ID;
	if (lid && lid->state == SRN_CMS_LISTEN)
		reason = srn_cm_lup->on_req(lid, lk, m) ?
				 SRN_CM_REJ_CONSUMER_DEFINED :
				 0;
	if (reason)
		srn_cm_link_reply(lk, m, SRN_CM_REJ, reason, 0);
}

/*
 * The id of this link that a message is for: the one its remote_id names,
 * if the sender is that id's peer (or the id has not heard its peer yet);
 * a GONE that names no receiver is for the id whose peer sent it. NULL
 * when none.
 */
static struct srn_cm_id *srn_cm_link_target(struct srn_cm_link *lk,
					    const struct srn_cm_msg *m)
{
	uint32_t to = be32toh(m->remote_id), from = be32toh(m->local_id);
	struct srn_list *pos;
	struct srn_cm_id *cid;

	if (to) {
		cid = srn_cm_id_find_comm(to);
		if (!cid || cid->lk != lk ||
		    (cid->peer_comm && cid->peer_comm != from))
			return NULL;
		return cid;
	}
	if (m->type != SRN_CM_GONE)
		return NULL;
	srn_list_for_each(pos, &lk->ids) {
		cid = srn_list_entry(pos, struct srn_cm_id, lklink);
		if (cid->peer_comm == from)
			return cid;
	}
	return NULL;
}

/* One whole, checked message on lk (under srn_cm.lock). */
static void srn_cm_link_msg(struct srn_cm_link *lk, const struct srn_cm_msg *m)
{
	struct srn_cm_id *cid;

	if (m->type == SRN_CM_REQ) {
		srn_cm_link_on_req(lk, m);
		return;
	}
	if (m->type == SRN_CM_REJ &&
	    (be16toh(m->reason) == SRN_CM_REJ_NOT_HERE ||
	     be16toh(m->reason) == SRN_CM_REJ_INVALID_SERVICE_ID))
		lk->stale = true; /* the port moved or has nobody: new REQs
				   * dial again (also when the id it answers
				   * is gone), to whoever serves it then */
	cid = srn_cm_link_target(lk, m);
	if (!cid) {
		/* for an id of ours that has left (its GONE crossed this):
		 * a side that waits for an answer gets one */
		if (m->type != SRN_CM_GONE && m->type != SRN_CM_REJ &&
		    m->type != SRN_CM_DREP && m->remote_id)
			srn_cm_link_reply(lk, m, SRN_CM_GONE, 0,
					  be32toh(m->remote_id));
		return;
	}
	if (!cid->peer_comm)
		cid->peer_comm = be32toh(m->local_id); /* 0: the service's */
	if (srn_cm_ends(cid, m) && m->type != SRN_CM_DREQ)
		cid->lk_quiet = true; /* its exchange ended with this */
	if (m->type == SRN_CM_GONE)
		srn_cm_lup->on_lost(cid, -ECONNRESET);
	else
		srn_cm_lup->on_msg(cid, m);
}

/* Bytes from lk's socket, each whole message handled as soon as it is
 * complete (lk->rx keeps a partial one). False once the link is dead. */
static bool srn_cm_link_feed(struct srn_cm_link *lk, const uint8_t *b, size_t n)
{
	struct srn_cm_msg m;
	size_t k;

	while (n && !lk->dead) {
		k = sizeof(lk->rx) - lk->rx_len;
		if (k > n)
			k = n;
		memcpy(lk->rx + lk->rx_len, b, k);
		lk->rx_len += k;
		b += k;
		n -= k;
		if (lk->rx_len < sizeof(lk->rx))
			break;
		lk->rx_len = 0;
		memcpy(&m, lk->rx, sizeof(m));
		if (srn_cm_msg_check(&m, sizeof(m))) {
			srn_cm_link_drop(lk, -EPROTO);
			return false;
		}
		srn_cm_link_msg(lk, &m);
	}
	return !lk->dead;
}

/*
 * Reads what arrived on lk: a few reads per wake-up, so that one busy
 * link does not hold the CM thread (epoll is level-triggered: the rest is
 * reported again). A read that returns less than it asked for emptied
 * the socket: no second read only to hear EAGAIN.
 */
static void srn_cm_link_on_in(struct srn_cm_link *lk)
{
	uint8_t buf[16 * SRN_CM_MSG_SIZE];
	ssize_t n;

	for (int i = 0; i < 4 && !lk->dead; i++) {
		n = recv(lk->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			srn_cm_link_drop(lk, n < 0 ? -errno : -ECONNRESET);
			return;
		}
		if (!srn_cm_link_feed(lk, buf, (size_t)n) ||
		    (size_t)n < sizeof(buf))
			return;
	}
}

/* epoll reported the link of this serial (the CM thread, under the lock). */
static void srn_cm_link_on_event(uint64_t serial, uint32_t events)
{
	struct srn_cm_link *lk = srn_cm_link_find(serial);

	if (!lk || lk->dead)
		return;
	lk->busy = true;
	if (lk->dialing) {
		srn_cm_link_connected(lk);
	} else {
		if (events & EPOLLOUT)
			srn_cm_link_flush(lk);
		if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			/* the answers to what one read brought (DREPs of a
			 * burst of DREQs) leave in one send */
			lk->corked = true;
			srn_cm_link_on_in(lk);
			lk->corked = false;
			srn_cm_link_flush(lk);
		}
	}
	lk->busy = false;
	srn_cm_link_reap(lk);
}

/*
 * A stream accepted on the CM port whose first REQ m is for our listener
 * lid (NULL: nobody on the host listens on its port): a link of ours from
 * now on, and the REQ its first message. 0, or -errno with fd untouched
 * (the caller rejects and closes it).
 */
static int srn_cm_link_on_stream(struct srn_cm_id *lid, int fd,
				 const struct srn_cm_msg *m)
{
	struct srn_cm_link *lk;
	socklen_t sl;
	int one = 1;

	/* the host daemon keeps no stream after its REQ; a process keeps a
	 * few refused ones (each closes SRN_CM_PARK_MS after it came) */
	if (!lid &&
	    (srn_hostd_mode() || srn_cm.refusing >= SRN_CM_REFUSING_MAX))
		return -EBUSY;
	lk = srn_cm_link_new(fd, false);
	if (!lk)
		return -ENOMEM;
	lk->ev_mask = EPOLLIN;
	if (srn_cm_epoll_add(fd, lk->serial, SRN_CM_EP_CONN, EPOLLIN)) {
		srn_cm_link_free(lk);
		return -ENOMEM;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	sl = sizeof(lk->local_sa);
	if (getsockname(fd, (struct sockaddr *)&lk->local_sa, &sl))
		memset(&lk->local_sa, 0, sizeof(lk->local_sa));
	sl = sizeof(lk->peer_sa);
	if (getpeername(fd, (struct sockaddr *)&lk->peer_sa, &sl))
		memset(&lk->peer_sa, 0, sizeof(lk->peer_sa));
	if (!lid) { /* nobody listens on its port: REJ, and to those behind */
		lk->refusing = true;
		srn_cm.refusing++;
		srn_cm_link_reply(lk, m, SRN_CM_REJ,
				  SRN_CM_REJ_INVALID_SERVICE_ID, 0);
	} else if (srn_cm_lup->on_req(lid, lk, m)) {
		srn_cm_link_reply(lk, m, SRN_CM_REJ,
				  SRN_CM_REJ_CONSUMER_DEFINED, 0);
	}
	return 0;
}

/* Closes links idle long enough, then cm_conn.c's timers. */
static void srn_cm_link_tick(uint64_t now_ns)
{
	struct srn_list *pos, *tmp;
	struct srn_cm_link *lk;
	uint64_t ms;

	if (srn_cm.idle_links) {
		srn_list_for_each_safe(pos, tmp, &srn_cm.links) {
			lk = srn_list_entry(pos, struct srn_cm_link, link);
			ms = lk->active	  ? SRN_CM_LINK_IDLE_MS :
			     lk->refusing ? SRN_CM_PARK_MS :
					    SRN_CM_LINK_IDLE_PASSIVE_MS;
			if (!lk->idle_ns || lk->busy ||
			    now_ns - lk->idle_ns < ms * 1000000ull)
				continue;
			srn_cm_link_close_fd(lk);
			srn_cm_link_free(lk);
		}
	}
	srn_cm_lup->on_tick(now_ns);
}

static const struct srn_cm_svc_up_ops srn_cm_link_svc_up = {
	.on_stream = srn_cm_link_on_stream,
	.on_link = srn_cm_link_on_event,
	.on_tick = srn_cm_link_tick,
};

__attribute__((constructor)) static void srn_cm_link_init(void)
{
	srn_cm_svc_set_up(&srn_cm_link_svc_up);
}
