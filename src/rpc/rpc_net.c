// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the receiver: the server's one library thread, blocked in
 * poll(2). It reads UDP datagrams and TCP records (record marking, RFC 5531
 * §11), claims a waiting worker and writes the call into its receive slot,
 * exactly as a same-host client does (rpc_slot.c); the worker replies on
 * the socket itself. It also answers same-host clients' discovery: the
 * segment's memfd over SCM_RIGHTS, to a peer of our own uid (SO_PEERCRED).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rpc/srn_rpc.h"
#include "util/util.h"

static int srn_rpc_bind_pair(struct srn_rpc_server *srv, unsigned short port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int one = 1;

	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (srv->attr.addr &&
	    inet_pton(AF_INET, srv->attr.addr, &sa.sin_addr) != 1)
		return -EINVAL;
	srv->ufd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	srv->tfd =
		socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (srv->ufd < 0 || srv->tfd < 0)
		return -errno;
	setsockopt(srv->tfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(srv->ufd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(srv->ufd, (struct sockaddr *)&sa, &len) < 0)
		return -errno;
	if (bind(srv->tfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(srv->tfd, 128) < 0)
		return -errno;
	srv->port = ntohs(sa.sin_port);
	return 0;
}

int srn_rpc_net_open(struct srn_rpc_server *srv)
{
	int rc = 0, tries;

	srv->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->efd < 0)
		return -errno;
	for (tries = 0; tries < 20; tries++) {
		rc = srn_rpc_bind_pair(srv, srv->attr.port);
		if (rc != -EADDRINUSE || srv->attr.port)
			break;
		close(srv->ufd); /* port 0: the UDP port's TCP twin is taken */
		close(srv->tfd);
		srv->ufd = srv->tfd = -1;
	}
	return rc;
}

static void srn_rpc_grow(struct srn_rpc_server *srv)
{
	if (srv->nstarted < srv->max_workers &&
	    srn_rpc_worker_start(srv, srv->nstarted) == 0) {
		srv->nstarted++;
		/* relaxed: a counter for `softrnic stat` */
		__atomic_store_n(&srv->seg.hdr->qstat.started, srv->nstarted,
				 __ATOMIC_RELAXED);
	}
}

/*
 * Claims a worker for a network call of len bytes. The receiver is one
 * caller of the queue; the calls behind it wait in the socket buffers, so
 * it asks for one more worker as soon as it finds none. A UDP call that
 * finds the queue full is dropped (its client retransmits); a TCP record
 * waits (the stream pushes back).
 */
static struct srn_rpc_worker *srn_rpc_net_claim(struct srn_rpc_server *srv,
						size_t len, int kind,
						unsigned *i_p,
						struct srn_rpc_ticket *t)
{
	unsigned fl = len <= SRN_RPC_SLOT_INLINE ? SRN_RPC_CLAIM_BEHIND : 0;
	int i = srn_rpc_claim(&srv->seg, -1, 0, fl, t);

	if (kind != SRN_RPC_FROM_UDP)
		fl |= SRN_RPC_CLAIM_NODROP;
	if (i < 0)
		srn_rpc_grow(srv);
	while (i < 0 && i != -EAGAIN && !srn_rpc_stopping(srv))
		i = srn_rpc_claim(&srv->seg, -1, 100, fl, t);
	if (i < 0)
		return NULL;
	*i_p = (unsigned)i;
	return srn_rpc_seg_worker(&srv->seg, (unsigned)i);
}

/* Hands one network call to a waiting worker (it holds a conn ref). */
int srn_rpc_hand_off(struct srn_rpc_server *srv, const uint8_t *msg, size_t len,
		     int kind, const struct sockaddr_storage *peer,
		     socklen_t peer_len, struct srn_rpc_conn *conn)
{
	struct srn_rpc_worker *w;
	struct srn_rpc_origin *o;
	uint32_t flags = SRN_RPC_SLOT_NET;
	struct srn_rpc_ticket t;
	unsigned i;

	if (len > SRN_RPC_AUX_SIZE)
		return -EMSGSIZE;
	if (!srn_rpc_net_is_call(msg, len))
		return -EPROTO;
	w = srn_rpc_net_claim(srv, len, kind, &i, &t);
	if (!w)
		return -EAGAIN;
	if (len <= SRN_RPC_SLOT_INLINE) {
		memcpy(w->rx[t.slot].data, msg, len);
	} else {
		memcpy(srv->wl[i].aux_in, msg, len);
		flags |= SRN_RPC_SLOT_AUX;
	}
	o = &srv->wl[i].org[t.slot];
	o->n = t.n;
	o->kind = kind;
	if (peer)
		memcpy(&o->peer, peer, peer_len);
	o->peer_len = peer_len;
	if (conn)
		/* relaxed: a reference count increment needs no order */
		__atomic_fetch_add(&conn->refs, 1, __ATOMIC_RELAXED);
	o->conn = conn;
	srn_rpc_publish(w, &t, (uint32_t)len, flags);
	return 0;
}

static void srn_rpc_udp_input(struct srn_rpc_server *srv)
{
	struct sockaddr_storage peer;
	socklen_t plen;
	ssize_t k;
	int burst;

	for (burst = 0; burst < 64; burst++) {
		plen = sizeof(peer);
		k = recvfrom(srv->ufd, srv->rxbuf, SRN_RPC_DGRAM_MAX,
			     MSG_DONTWAIT, (struct sockaddr *)&peer, &plen);
		if (k < 0)
			return;
		srn_rpc_hand_off(srv, srv->rxbuf, (size_t)k, SRN_RPC_FROM_UDP,
				 &peer, plen, NULL);
	}
}

static void srn_rpc_conn_add(struct srn_rpc_server *srv, int fd, bool unix_p)
{
	struct srn_rpc_conn *c;
	struct timeval tv = { 1, 0 };

	if (srv->nconns == SRN_RPC_MAX_CONNS || !(c = calloc(1, sizeof(*c)))) {
		close(fd);
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->fd = fd;
	c->unix_peer = unix_p;
	c->refs = 1;
	pthread_mutex_init(&c->wlock, NULL);
	pthread_mutex_init(&c->rdlock, NULL);
	srv->conns[srv->nconns++] = c;
}

static void srn_rpc_conn_drop(struct srn_rpc_server *srv, unsigned k)
{
	struct srn_rpc_conn *c = srv->conns[k];

	srv->conns[k] = srv->conns[--srv->nconns];
	shutdown(c->fd, SHUT_RDWR);
	srn_rpc_conn_put(c);
}

/* A same-host client gets the segment's memfd if it may ptrace us anyway
 * (srn_self_kin: our user, both dumpable, no Yama restriction) or is
 * root; another (a client of our user when we are not dumpable, say) is
 * closed and takes the network path (srn_clnt_create, "auto"). */
static void srn_rpc_unix_accept(struct srn_rpc_server *srv, int lfd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, byte = 'S';
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct ucred uc;
	socklen_t len = sizeof(uc);
	struct cmsghdr *cm;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 ||
	    (uc.uid != 0 && !srn_self_kin(uc.pid, uc.uid))) {
		close(fd);
		return;
	}
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &srv->segfd, sizeof(int));
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != 1) {
		close(fd);
		return;
	}
	srn_rpc_conn_add(srv, fd, true);
}

/* Removes a fragment header; hands off a complete record. 0 or -1. */
static int srn_rpc_tcp_records(struct srn_rpc_server *srv,
			       struct srn_rpc_conn *c)
{
	uint32_t mark, flen;

	for (;;) {
		if (c->len - c->msg < 4)
			return 0;
		memcpy(&mark, c->buf + c->msg, 4);
		mark = ntohl(mark);
		flen = mark & 0x7fffffffu;
		if (c->msg + (size_t)flen > SRN_RPC_NET_MAX)
			return -1; /* larger than any call we take */
		if (c->len - c->msg - 4 < flen)
			return 0;
		memmove(c->buf + c->msg, c->buf + c->msg + 4,
			c->len - c->msg - 4);
		c->len -= 4;
		c->msg += flen;
		if (!(mark & 0x80000000u))
			continue;
		srn_rpc_hand_off(srv, c->buf, c->msg, SRN_RPC_FROM_TCP, NULL, 0,
				 c);
		memmove(c->buf, c->buf + c->msg, c->len - c->msg);
		c->len -= c->msg;
		c->msg = 0;
	}
}

/* A same-host client found no free worker (a byte), or left (EOF). */
static int srn_rpc_unix_input(struct srn_rpc_server *srv,
			      struct srn_rpc_conn *c)
{
	char b[64];
	ssize_t k = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);

	if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
		return -1;
	if (k > 0)
		srn_rpc_grow(srv);
	return 0;
}

/* Reads what a TCP connection has; -1: drop the connection. */
static int srn_rpc_tcp_read(struct srn_rpc_server *srv, struct srn_rpc_conn *c)
{
	size_t want = c->len + 65536;
	ssize_t k;
	void *nb;

	if (want > SRN_RPC_NET_MAX + 65536 + 4)
		return -1;
	if (want > c->cap) {
		nb = realloc(c->buf, want);
		if (!nb)
			return -1;
		c->buf = nb;
		c->cap = want;
	}
	k = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
	if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
		return -1;
	if (k > 0)
		c->len += (size_t)k;
	return srn_rpc_tcp_records(srv, c);
}

/* A stream a worker reads (rpc_direct.c) is left to it: the receiver
 * reads one only under its rdlock. */
static int srn_rpc_tcp_input(struct srn_rpc_server *srv, struct srn_rpc_conn *c)
{
	int rc;

	if (c->unix_peer)
		return srn_rpc_unix_input(srv, c);
	if (pthread_mutex_trylock(&c->rdlock))
		return 0;
	rc = srn_rpc_tcp_read(srv, c);
	pthread_mutex_unlock(&c->rdlock);
	return rc;
}

enum {
	SRN_RPC_PFD_FIXED = 3
};

static unsigned srn_rpc_pollset(struct srn_rpc_server *srv, struct pollfd *p)
{
	unsigned n = 0, i;

	p[n++] = (struct pollfd){ .fd = srv->efd, .events = POLLIN };
	/* acquire: pairs with the release in srn_rpc_net_spin_leave */
	p[n++] = (struct pollfd){ .fd = __atomic_load_n(&srv->net_spinners,
							__ATOMIC_ACQUIRE) ?
						-1 :
						srv->ufd,
				  .events = POLLIN };
	p[n++] = (struct pollfd){ .fd = srv->tfd, .events = POLLIN };
	for (i = 0; i < srv->nprogs; i++)
		p[n++] = (struct pollfd){ .fd = srv->progs[i].lfd,
					  .events = POLLIN };
	for (i = 0; i < srv->nconns; i++)
		/* acquire: pairs with the release in srn_rpc_net_conn_own
		 * and srn_rpc_net_conn_disown (a worker reads the stream) */
		p[n++] = (struct pollfd){ .fd = __atomic_load_n(
							&srv->conns[i]->wowned,
							__ATOMIC_ACQUIRE) ?
							-1 :
							srv->conns[i]->fd,
					  .events = POLLIN };
	return n;
}

static void srn_rpc_net_events(struct srn_rpc_server *srv, struct pollfd *p)
{
	unsigned i, base = SRN_RPC_PFD_FIXED + srv->nprogs, nc = srv->nconns;
	int fd;

	if (p[1].revents)
		srn_rpc_udp_input(srv);
	if (p[2].revents) {
		fd = accept4(srv->tfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			srn_rpc_conn_add(srv, fd, false);
	}
	for (i = 0; i < srv->nprogs; i++)
		if (p[SRN_RPC_PFD_FIXED + i].revents)
			srn_rpc_unix_accept(srv, srv->progs[i].lfd);
	/* newest first, so dropping (which moves the last) stays correct */
	for (i = nc; i-- > 0;)
		if (p[base + i].revents &&
		    srn_rpc_tcp_input(srv, srv->conns[i]) < 0)
			srn_rpc_conn_drop(srv, i);
}

static void srn_rpc_net_kicked(struct srn_rpc_server *srv)
{
	uint64_t v;
	ssize_t k = read(srv->efd, &v, sizeof(v));

	(void)k;
}

void *srn_rpc_net_main(void *arg)
{
	struct srn_rpc_server *srv = arg;
	struct pollfd
		p[SRN_RPC_PFD_FIXED + SRN_RPC_MAX_PROGS + SRN_RPC_MAX_CONNS];
	unsigned n;

	while (!srn_rpc_stopping(srv)) {
		n = srn_rpc_pollset(srv, p);
		if (poll(p, n, -1) < 0)
			continue;
		if (p[0].revents) /* a stop, or a worker left the socket */
			srn_rpc_net_kicked(srv);
		if (srn_rpc_stopping(srv))
			break;
		srn_rpc_net_events(srv, p);
	}
	while (srv->nconns)
		srn_rpc_conn_drop(srv, srv->nconns - 1);
	return NULL;
}
