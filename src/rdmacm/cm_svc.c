// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: the CM service of a process.
 *
 * One thread (srn-cm) blocks in epoll on: the host-wide stream listener
 * (port SOFTRNIC_CM_PORT, default 4790, SO_REUSEPORT so that every
 * listening process of the host has one; open while this process has a
 * listening id), connections accepted there whose REQ is not read yet,
 * every CM link (cm_link.c), and each listening id's hand-off socket (the
 * abstract unix datagram socket "softrnic/cm/<ps>/<port>").
 *
 * The kernel gives an incoming connection to any of the processes
 * listening on the CM port. That process reads the first REQ (and not a
 * byte more: the link's later REQs stay in the socket for whoever takes
 * it) and, when it listens on the rdma_cm port the REQ names, makes the
 * connection a CM link of its own; when it does not
 * listen on the rdma_cm port the REQ names, it passes the connection's fd
 * with the REQ to the port's hand-off socket (SCM_RIGHTS), or answers REJ
 * (invalid service id) when nobody does. The receiver takes hand-offs
 * only from its own user or root (SCM_CREDENTIALS).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rdmacm/cm.h"

/* A connection accepted on the stream listener whose REQ is not complete
 * yet, or whose REQ waits for its port to be listened on (parked): in
 * srn_cm.pending. */
struct srn_cm_pend {
	struct srn_list link;
	uint64_t serial;
	int fd;
	size_t len;
	uint64_t deadline_ns; /* parked until then at most */
	uint64_t read_by_ns; /* not parked: closed unless whole by then */
	uint8_t rx[SRN_CM_MSG_SIZE] __attribute__((aligned(8))); /* a msg */
	uint8_t src[16]; /* the peer's address (IPv4 mapped to IPv6) */
	bool local; /* handed to this process: its port is ours */
};

static const struct srn_cm_svc_up_ops *srn_cm_up;

void srn_cm_svc_set_up(const struct srn_cm_svc_up_ops *ops)
{
	srn_cm_up = ops;
}

/* Wakes the CM thread to look at its timers again (a link went idle). */
void srn_cm_svc_kick(void)
{
	uint64_t one = 1;

	if (srn_cm.kick_fd >= 0 && write(srn_cm.kick_fd, &one, sizeof(one)) < 0)
		srn_dbg("rdmacm: CM thread kick: %s", strerror(errno));
}

uint16_t srn_cm_service_port(void)
{
	const char *env = getenv("SOFTRNIC_CM_PORT");
	long p = env ? strtol(env, NULL, 10) : 0;

	return p > 0 && p < 65536 ? (uint16_t)p : SRN_CM_PORT_DEFAULT;
}

void srn_cm_msg_init(struct srn_cm_msg *m, enum srn_cm_msg_type type)
{
	memset(m, 0, sizeof(*m));
	m->magic = htobe32(SRN_CM_MAGIC);
	m->version = htobe16(SRN_CM_VERSION);
	m->type = type;
}

static int srn_cm_write(int fd, const struct srn_cm_msg *m)
{
	ssize_t n = send(fd, m, sizeof(*m), MSG_NOSIGNAL);

	if (n == (ssize_t)sizeof(*m))
		return 0;
	return n < 0 ? -errno : -EIO; /* a fresh socket takes 256 bytes */
}

int srn_cm_epoll_add(int fd, uint64_t serial, enum srn_cm_ep_kind k,
		     uint32_t events)
{
	struct epoll_event ev = { .events = events };
	int ret = srn_cm_svc_start();

	if (ret)
		return ret;
	ev.data.u64 = serial << 2 | k;
	return epoll_ctl(srn_cm.epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* SO_REUSEPORT when share; SO_REUSEADDR always (the connections of an
 * earlier listener in TIME_WAIT do not keep the daemon off the port). */
static void srn_cm_listen_opts(int fd, bool share)
{
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (share)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
}

/*
 * A stream socket listening on the CM port: shared with the host's other
 * listening processes of our user (SO_REUSEPORT) when share, else alone
 * (the host daemon's, cm_hostd.c). IPv6 with IPv4 mapped when the host
 * has IPv6, else IPv4. fd or -errno.
 */
int srn_cm_listen_open(bool share)
{
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint16_t port = htobe16(srn_cm_service_port());
	int fd, zero = 0, ret;

	sa6.sin6_port = sa.sin_port = port;
	fd = srn_socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		srn_cm_listen_opts(fd, share);
		if (!bind(fd, (struct sockaddr *)&sa6, sizeof(sa6)))
			goto bound;
		close(fd);
	}
	/* no IPv6 on this host */
	fd = srn_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	srn_cm_listen_opts(fd, share);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto fail;
bound:
	if (listen(fd, 1024))
		goto fail;
	return fd;
fail:
	ret = -errno;
	close(fd);
	return ret;
}

/* The listener's socket could not be opened (err): fine when the host
 * daemon (root's, cm_hostd.c) holds the port, which hands our REQs over;
 * -errno otherwise (warned). */
static int srn_cm_listen_failed(int err)
{
	int pid = -ENOENT;

	if (err == -EADDRINUSE && !srn_hostd_mode())
		pid = srn_hostd_pid();
	if (pid > 0) {
		srn_dbg("rdmacm: the CM port %u is held by the host daemon "
			"(pid %d): it hands our REQs over",
			srn_cm_service_port(), pid);
		return 0;
	}
	srn_warn("rdmacm: cannot listen on the CM port %u: %s",
		 srn_cm_service_port(), strerror(-err));
	return err;
}

/* One more listening id: the stream listener is open while there is one
 * (under srn_cm.lock). */
int srn_cm_listen_get(void)
{
	int fd, ret;

	if (srn_cm.listeners++ || srn_cm.lfd >= 0)
		return 0;
	fd = srn_cm_listen_open(true);
	if (fd < 0) {
		ret = srn_cm_listen_failed(fd);
		if (ret)
			srn_cm.listeners--;
		return ret; /* 0: the daemon's port, our bound ports suffice */
	}
	ret = srn_cm_listen_adopt(fd);
	if (ret)
		srn_cm.listeners--;
	return ret;
}

/* The stream listener is fd from now on (under srn_cm.lock): 0, or
 * -errno and fd closed. */
int srn_cm_listen_adopt(int fd)
{
	int ret = srn_cm_epoll_add(fd, 0, SRN_CM_EP_LISTEN, EPOLLIN);

	if (ret) {
		close(fd);
		return ret;
	}
	srn_cm.lfd = fd;
	return 0;
}

/* The stream listener stays open once opened, until the process ends:
 * closing a SO_REUSEPORT listener resets the connections the kernel had
 * queued on it, and an application that listens again on its port soon
 * (perftest does) finds it still there. */
void srn_cm_listen_put(void)
{
	srn_cm.listeners--;
}

/* Answers the REQ req on an accepted stream fd with a REJ, and closes it
 * (REQs the peer sent after it on that link are lost with it: the peer
 * dials again for them). */
static void srn_cm_reject_fd(int fd, const struct srn_cm_msg *req,
			     uint16_t reason)
{
	struct srn_cm_msg m;

	srn_cm_msg_init(&m, SRN_CM_REJ);
	m.reason = htobe16(reason);
	m.remote_id = req->local_id;
	srn_cm_write(fd, &m);
	close(fd);
}

/* Nobody listens on the port the first REQ m of stream fd names: the REJ
 * (invalid service id), and the stream stays a link that answers the
 * REQs its peer sent behind m alike, so they need no dial each. */
static void srn_cm_refuse_fd(int fd, const struct srn_cm_msg *m)
{
	if (srn_cm_up->on_stream(NULL, fd, m))
		srn_cm_reject_fd(fd, m, SRN_CM_REJ_INVALID_SERVICE_ID);
}

/*
 * Passes an accepted connection and its REQ to the process listening on
 * the rdma_cm port the REQ names: 0, -ECONNREFUSED when nobody listens
 * there, another -errno when it could not take it in time (its queue of
 * SRN_CM_HANDOFF_MS stayed full: the caller drops the connection and the
 * active side dials again).
 */
static int srn_cm_handoff(int fd, const struct srn_cm_msg *m)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_usec = SRN_CM_HANDOFF_MS * 1000 };
	struct cmsghdr *c;
	int s, len, ret = 0;

	len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
		       SRN_CM_SOCK_FMT, be16toh(m->ps), be16toh(m->dst_port));
	mh.msg_name = &sa;
	mh.msg_namelen = offsetof(struct sockaddr_un, sun_path) + 1 + len;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	/* a datagram queue holds few messages (net.unix.max_dgram_qlen):
	 * wait a little for the listener's CM thread to drain it */
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (sendmsg(s, &mh, MSG_NOSIGNAL) < 0)
		ret = errno == ENOENT ? -ECONNREFUSED : -errno;
	close(s);
	return ret;
}

/* A whole REQ arrived on an accepted connection: ours, or hand it off. */
/*
 * A whole REQ arrived on an accepted connection: ours, or hand it off.
 * When nobody listens on its port, it waits SRN_CM_PARK_MS for a listener
 * (an application that listens again on the same port) before the REJ:
 * -EAGAIN, the caller keeps it and calls again. 0 when it is done with.
 */
static int srn_cm_dispatch_req(int fd, const struct srn_cm_msg *m,
			       bool last_try)
{
	struct srn_cm_id *lid;
	int ret;

	if (srn_cm_msg_check(m, sizeof(*m)) || m->type != SRN_CM_REQ) {
		close(fd);
		return 0;
	}
	lid = srn_cm_listener_find(be16toh(m->ps), be16toh(m->dst_port));
	if (lid) {
		if (srn_cm_up->on_stream(lid, fd, m))
			srn_cm_reject_fd(fd, m, SRN_CM_REJ_CONSUMER_DEFINED);
		return 0;
	}
	ret = srn_cm_handoff(fd, m);
	if (ret == -ECONNREFUSED && !last_try)
		return -EAGAIN;
	srn_dbg("rdmacm: REQ for port %u handed off: %s", be16toh(m->dst_port),
		strerror(-ret));
	if (ret == -ECONNREFUSED)
		srn_cm_refuse_fd(fd, m);
	else
		close(fd); /* handed off, or the active side dials again */
	return 0;
}

/* A REQ handed to this process for a port it holds but does not listen
 * on (yet): to its listener if it has one now, else -EAGAIN, and on the
 * last try the REJ. Never handed off again: the port is ours. */
static int srn_cm_dispatch_local(int fd, const struct srn_cm_msg *m,
				 bool last_try)
{
	struct srn_cm_id *lid;

	lid = srn_cm_listener_find(be16toh(m->ps), be16toh(m->dst_port));
	if (lid) {
		if (srn_cm_up->on_stream(lid, fd, m))
			srn_cm_reject_fd(fd, m, SRN_CM_REJ_CONSUMER_DEFINED);
		return 0;
	}
	if (!last_try)
		return -EAGAIN;
	srn_cm_refuse_fd(fd, m);
	return 0;
}

/* An accepted connection that sent no whole REQ in SRN_CM_REQ_WAIT_MS:
 * closed (each one costs an fd and a place of SRN_CM_PEND_MAX). */
static void srn_cm_pend_drop(struct srn_cm_pend *p)
{
	epoll_ctl(srn_cm.epfd, EPOLL_CTL_DEL, p->fd, NULL);
	close(p->fd);
	srn_list_del(&p->link);
	srn_cm.npending--;
	srn_cm_zfree(p);
}

/* Parked REQs: try again; the thread's next wait is short while any is
 * left. Connections whose REQ is late are closed. */
static int srn_cm_retry_parked(void)
{
	struct srn_list *pos, *tmp;
	struct srn_cm_pend *p;
	uint64_t now = srn_now_ns();
	int left = 0;

	srn_list_for_each_safe(pos, tmp, &srn_cm.pending) {
		p = srn_list_entry(pos, struct srn_cm_pend, link);
		if (!p->deadline_ns) {
			if (now >= p->read_by_ns) /* no whole REQ in time */
				srn_cm_pend_drop(p);
			continue;
		}
		if ((p->local ? srn_cm_dispatch_local : srn_cm_dispatch_req)(
			    p->fd, (struct srn_cm_msg *)p->rx,
			    now >= p->deadline_ns) == -EAGAIN) {
			left++;
			continue;
		}
		srn_list_del(&p->link);
		srn_cm.npending--;
		srn_cm_zfree(p);
	}
	return left;
}

static void srn_cm_on_pend(uint64_t serial)
{
	struct srn_list *pos;
	struct srn_cm_pend *p = NULL;
	ssize_t n;

	srn_list_for_each(pos, &srn_cm.pending) {
		p = srn_list_entry(pos, struct srn_cm_pend, link);
		if (p->serial == serial)
			break;
		p = NULL;
	}
	if (!p)
		return;
	n = recv(p->fd, p->rx + p->len, sizeof(p->rx) - p->len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && (p->len += n) < sizeof(p->rx))
		return;
	epoll_ctl(srn_cm.epfd, EPOLL_CTL_DEL, p->fd, NULL);
	if (n > 0 && srn_cm_dispatch_req(p->fd, (struct srn_cm_msg *)p->rx,
					 false) == -EAGAIN) {
		p->deadline_ns = srn_now_ns() + SRN_CM_PARK_MS * 1000000ull;
		return; /* parked */
	}
	if (n <= 0)
		close(p->fd);
	srn_list_del(&p->link);
	srn_cm.npending--;
	srn_cm_zfree(p);
}

/* Stops or resumes taking connections from the stream listener: the
 * kernel keeps them queued meanwhile (its backlog), so a burst of
 * connections (cmtime's thousand) waits rather than being reset. */
static void srn_cm_accept_pause(bool pause)
{
	struct epoll_event ev = { .events = pause ? 0 : EPOLLIN,
				  .data.u64 = SRN_CM_EP_LISTEN };

	if (srn_cm.lfd < 0 || srn_cm.accept_paused == pause)
		return;
	if (!epoll_ctl(srn_cm.epfd, EPOLL_CTL_MOD, srn_cm.lfd, &ev))
		srn_cm.accept_paused = pause;
}

/* The host daemon serves every user of the host: one source may hold
 * SRN_CM_PEND_SRC of the places for connections whose REQ is not read
 * yet, so that a silent peer cannot stall the others' connections. */
static bool srn_cm_src_room(const uint8_t *src)
{
	struct srn_list *pos;
	struct srn_cm_pend *p;
	unsigned int same = 0;

	if (!srn_hostd_mode())
		return true;
	srn_list_for_each(pos, &srn_cm.pending) {
		p = srn_list_entry(pos, struct srn_cm_pend, link);
		same += !p->deadline_ns && !memcmp(p->src, src, 16);
	}
	return same < SRN_CM_PEND_SRC;
}

/* The peer's address of an accepted connection as 16 bytes (IPv4 mapped
 * to IPv6). */
static void srn_cm_src_of(const struct sockaddr_storage *ss, uint8_t *src)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

	memset(src, 0, 16);
	if (ss->ss_family == AF_INET6) {
		memcpy(src, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	} else if (ss->ss_family == AF_INET) {
		src[10] = src[11] = 0xff;
		memcpy(src + 12, &sin->sin_addr, 4);
	}
}

/* A connection just accepted: waits for its REQ (at most
 * SRN_CM_REQ_WAIT_MS), or is closed at once when its source has no room.
 * 0, or -errno when it could not be kept. */
static int srn_cm_pend_new(int fd, const struct sockaddr_storage *ss)
{
	struct srn_cm_pend *p;
	uint8_t src[16];

	srn_cm_src_of(ss, src);
	if (!srn_cm_src_room(src))
		return -EBUSY;
	p = srn_cm_zalloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->fd = fd;
	memcpy(p->src, src, sizeof(src));
	p->read_by_ns = srn_now_ns() + SRN_CM_REQ_WAIT_MS * 1000000ull;
	p->serial = srn_cm.next_serial++;
	srn_cm.npending++;
	srn_list_add_tail(&p->link, &srn_cm.pending);
	if (srn_cm_epoll_add(fd, p->serial, SRN_CM_EP_PEND, EPOLLIN)) {
		srn_list_del(&p->link);
		srn_cm.npending--;
		srn_cm_zfree(p);
		return -ENOMEM;
	}
	return 0;
}

/* Accepted connections whose REQ is not read yet are capped (silent ones
 * cost an fd each, and are closed after SRN_CM_REQ_WAIT_MS); at the cap,
 * or out of fds, accepting pauses until they are fewer (srn_cm_thread). */
static void srn_cm_on_accept(void)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd;

	while (srn_cm.npending < SRN_CM_PEND_MAX) {
		sl = sizeof(ss);
		fd = accept4(srn_cm.lfd, (struct sockaddr *)&ss, &sl,
			     SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				srn_cm_accept_pause(true);
			return;
		}
		if (srn_cm_pend_new(fd, &ss))
			close(fd);
	}
	srn_cm_accept_pause(true);
}

/* softrnic stat's query (SRN_CM_STAT_MAGIC): this process's ids, sent
 * back to the asker's address. */
static void srn_cm_stat_answer(int ufd, const void *q, ssize_t n,
			       const struct sockaddr_un *from, socklen_t flen)
{
	const struct srn_cm_stat_hdr *req = q;
	struct srn_cm_stat_msg *m;

	if (n != (ssize_t)sizeof(*req) || req->version != SRN_CM_STAT_VERSION ||
	    req->count || flen <= offsetof(struct sockaddr_un, sun_path))
		return;
	m = calloc(1, sizeof(*m));
	if (!m)
		return;
	srn_cm_stat_fill(m);
	sendto(ufd, m, sizeof(m->hdr) + m->hdr.count * sizeof(m->id[0]),
	       MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)from,
	       flen);
	free(m);
}

/* The fd and the sender's credentials a datagram carried (-1, -1: none). */
static void srn_cm_unix_cmsgs(struct msghdr *mh, int *fd_p, uid_t *uid_p)
{
	struct ucred cred;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)) && *fd_p < 0) {
			memcpy(fd_p, CMSG_DATA(c), sizeof(int));
		} else if (c->cmsg_type == SCM_CREDENTIALS &&
			   c->cmsg_len == CMSG_LEN(sizeof(cred))) {
			memcpy(&cred, CMSG_DATA(c), sizeof(cred));
			*uid_p = cred.uid;
		}
	}
}

/*
 * A REQ handed to a port this process has bound but does not listen on
 * yet: it waits SRN_CM_PARK_MS for the listen (perftest -R binds a new id
 * to the port, then listens; a REQ in between must not be refused), then
 * gets the REJ (srn_cm_dispatch_local).
 */
static void srn_cm_park_local(int fd, const struct srn_cm_msg *m)
{
	struct srn_cm_pend *p;

	if (srn_cm.npending >= SRN_CM_PEND_MAX ||
	    !(p = srn_cm_zalloc(sizeof(*p)))) {
		srn_cm_refuse_fd(fd, m);
		return;
	}
	p->fd = fd;
	p->local = true;
	p->serial = srn_cm.next_serial++;
	p->len = sizeof(*m);
	memcpy(p->rx, m, sizeof(*m));
	p->deadline_ns = srn_now_ns() + SRN_CM_PARK_MS * 1000000ull;
	srn_cm.npending++;
	srn_list_add_tail(&p->link, &srn_cm.pending);
}

/* Receives one datagram on a bound port's unix socket (lid) or on the
 * process's stat socket (lid NULL): a hand-off (a REQ and its
 * connection), or softrnic stat's query. */
static void srn_cm_on_unix(int ufd, struct srn_cm_id *lid)
{
	char cbuf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
	union {
		struct srn_cm_msg m;
		struct srn_cm_stat_hdr stat;
	} u;
	struct sockaddr_un from;
	struct iovec iov = { .iov_base = &u, .iov_len = sizeof(u) };
	struct msghdr mh = { .msg_name = &from,
			     .msg_namelen = sizeof(from),
			     .msg_iov = &iov,
			     .msg_iovlen = 1 };
	uid_t uid = (uid_t)-1;
	int fd = -1;
	ssize_t n;

	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	n = recvmsg(ufd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return;
	srn_cm_unix_cmsgs(&mh, &fd, &uid);
	if ((mh.msg_flags & MSG_CTRUNC) || (uid != getuid() && uid != 0) ||
	    (fd >= 0 && !lid)) {
		if (fd >= 0)
			close(fd);
		return; /* another user's: nothing, not even a REJ */
	}
	if (fd < 0) {
		if (n >= 4 && u.stat.magic == SRN_CM_STAT_MAGIC)
			srn_cm_stat_answer(ufd, &u.stat, n, &from,
					   mh.msg_namelen);
		return;
	}
	if (srn_cm_msg_check(&u.m, n) || u.m.type != SRN_CM_REQ)
		close(fd);
	else if (lid->state != SRN_CMS_LISTEN) /* bound, not listening yet */
		srn_cm_park_local(fd, &u.m);
	else if (srn_cm_up->on_stream(lid, fd, &u.m))
		srn_cm_reject_fd(fd, &u.m, SRN_CM_REJ_CONSUMER_DEFINED);
}

/* The kick eventfd: reset it; the tick after the events does the rest. */
static void srn_cm_kicked(void)
{
	uint64_t v;

	if (read(srn_cm.kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		srn_dbg("rdmacm: CM thread kick: %s", strerror(errno));
}

static void srn_cm_handle(uint64_t data, uint32_t events)
{
	struct srn_cm_id *cid;

	switch (data & 3) {
	case SRN_CM_EP_LISTEN:
		if (data >> 2 == SRN_CM_EP_KICK_SERIAL)
			srn_cm_kicked();
		else if (data >> 2 == SRN_CM_EP_STAT_SERIAL)
			srn_cm_on_unix(srn_cm.stat_fd, NULL);
		else if (srn_cm.lfd >= 0)
			srn_cm_on_accept();
		return;
	case SRN_CM_EP_PEND:
		srn_cm_on_pend(data >> 2);
		return;
	case SRN_CM_EP_UNIX:
		cid = srn_cm_id_find(data >> 2);
		if (cid && cid->unix_fd >= 0)
			srn_cm_on_unix(cid->unix_fd, cid);
		return;
	default:
		srn_cm_up->on_link(data >> 2, events);
	}
}

/* How often the ids' timers are walked while any runs (under
 * srn_cm.lock): redials are looked for as often as parked REQs. */
static uint64_t srn_cm_tick_period_ns(void)
{
	return (srn_cm.redials ? SRN_CM_PARK_POLL_MS : SRN_CM_TIMER_TICK_MS) *
	       1000000ull;
}

/* Walks the ids' timers when a period has passed since the last walk,
 * not at every wake-up: with many ids connecting (all timed) the walk
 * at each event made connection setup quadratic. Under srn_cm.lock. */
static void srn_cm_tick(uint64_t now_ns)
{
	if (!srn_cm.redials && !srn_cm.timed && !srn_cm.idle_links)
		return;
	if (now_ns - srn_cm.tick_ns < srn_cm_tick_period_ns())
		return;
	srn_cm.tick_ns = now_ns;
	srn_cm_up->on_tick(now_ns);
}

/* How long the CM thread may sleep: for ever when nothing is timed, else
 * until the next walk of the timers is due. Under srn_cm.lock: the first
 * timer an application starts after it was read kicks the thread
 * (srn_cm_timer_arm). */
static int srn_cm_wait_ms(int parked, uint64_t now_ns)
{
	if (parked || srn_cm.accept_paused)
		return SRN_CM_PARK_POLL_MS;
	if (srn_cm.redials || srn_cm.timed || srn_cm.idle_links) {
		uint64_t due = srn_cm.tick_ns + srn_cm_tick_period_ns();

		return due > now_ns ? (int)((due - now_ns + 999999) / 1000000) :
				      0;
	}
	/* connections waiting for their REQ: their deadline */
	return srn_cm.npending ? SRN_CM_TIMER_TICK_MS : -1;
}

static void *srn_cm_thread(void *arg)
{
	struct srn_cm_sig sig[SRN_ARRAY_SIZE(srn_cm.sig)];
	struct epoll_event ev[16];
	int n, i, parked = 0, wait_ms;
	unsigned int nsig;
	uint64_t now_ns;

	(void)arg;
	/* named by itself: one prctl, where naming it from the starting
	 * thread writes /proc/self/task/TID/comm (20 us of a first
	 * rdma_connect) */
	pthread_setname_np(pthread_self(), "srn-cm");
	pthread_mutex_lock(&srn_cm.lock);
	wait_ms = srn_cm_wait_ms(0, srn_now_ns());
	pthread_mutex_unlock(&srn_cm.lock);
	for (;;) {
		n = epoll_wait(srn_cm.epfd, ev, SRN_ARRAY_SIZE(ev), wait_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		pthread_mutex_lock(&srn_cm.lock);
		srn_cm.sig_defer = true;
		for (i = 0; i < n; i++)
			srn_cm_handle(ev[i].data.u64, ev[i].events);
		parked = srn_cm_retry_parked();
		now_ns = srn_now_ns();
		srn_cm_tick(now_ns);
		/* paused at the cap: resume at half of it; out of fds: try
		 * again after SRN_CM_PARK_POLL_MS */
		if (srn_cm.accept_paused &&
		    (srn_cm.npending < SRN_CM_PEND_MAX / 2 || !n))
			srn_cm_accept_pause(false);
		srn_cm.sig_defer = false;
		nsig = srn_cm_signal_take(sig);
		wait_ms = srn_cm_wait_ms(parked, now_ns);
		pthread_mutex_unlock(&srn_cm.lock);
		srn_cm_signal_give(sig, nsig);
	}
	srn_err("rdmacm: the CM thread stops: %s", strerror(errno));
	return NULL;
}

/* The process's stat socket (best effort: softrnic stat then finds this
 * process only through its bound ports). */
static void srn_cm_stat_open(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = SRN_CM_EP_STAT_SERIAL << 2 |
					      SRN_CM_EP_LISTEN };
	int fd, one = 1, len;

	if (srn_cm.stat_fd >= 0)
		return;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
		       SRN_CM_STAT_SOCK_FMT, (int)getpid());
	if (bind(fd, (struct sockaddr *)&sa,
		 offsetof(struct sockaddr_un, sun_path) + 1 + len) ||
	    epoll_ctl(srn_cm.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		return;
	}
	srn_cm.stat_fd = fd;
}

/* Starts the CM thread once (under srn_cm.lock). */
/* The eventfd that wakes the CM thread when a timer starts. */
static int srn_cm_kick_open(void)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = SRN_CM_EP_KICK_SERIAL << 2 |
					      SRN_CM_EP_LISTEN };
	int fd;

	if (srn_cm.kick_fd >= 0)
		return 0;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (epoll_ctl(srn_cm.epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		return -errno;
	}
	srn_cm.kick_fd = fd;
	return 0;
}

int srn_cm_svc_start(void)
{
	pthread_attr_t a;
	pthread_t t;
	int ret;

	if (srn_cm.thread_up)
		return 0;
	if (srn_cm.epfd < 0)
		srn_cm.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srn_cm.epfd < 0)
		return -errno;
	srn_cm_stat_open();
	ret = srn_cm_kick_open();
	if (ret)
		return ret;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	ret = -pthread_create(&t, &a, srn_cm_thread, NULL);
	pthread_attr_destroy(&a);
	if (ret)
		return ret;
	srn_cm.thread_up = true;
	return 0;
}
