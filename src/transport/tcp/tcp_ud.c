// SPDX-License-Identifier: MIT
/*
 * softrnic — UD datagrams between hosts, the network transport's datagram
 * side (srn_udp_proto.h).
 *
 * Each process has one UDP socket on port 4791 (SO_REUSEPORT: every
 * process of the host has one), received on by the progress thread (not
 * in the data set: a polling application would pay a system call per
 * empty poll for sockets same-host traffic never uses). A
 * datagram names its destination QPN; the kernel gives it to one of the
 * host's sockets, and if that process does not own the QPN it forwards
 * the datagram to the owner's per-QP unix socket (SRN_UDW_FWD_FMT), once.
 * The owner checks the QP's state and Q_Key, takes a receive WQE (none:
 * the datagram is dropped, as UD does), writes the GRH and the payload
 * into it and a receive completion.
 *
 * SO_REUSEPORT shares the port within one user only. With the host
 * daemon (`softrnic daemon`, tcp_hostd.c) the daemon holds the port alone
 * and forwards every datagram; a process that finds the port taken and
 * the daemon's marker root's sends from an ephemeral port (receivers
 * take the sender's address, never its port). A QP's unix socket takes
 * forwarded datagrams with their sender's credentials: from root or our
 * user anything, from another user only what it sent from this host
 * (srn_udp_fwd_allowed): no user relays or forges another's datagrams.
 *
 * Multicast: a group GID maps to an IPv4 multicast address; the process
 * socket joins it while one of its QPs is attached, and every process
 * that joined gets each datagram (and loops its own back). A process
 * without the port (the daemon's) cannot attach (ENODEV): the daemon
 * joins no group. Sends never wait: a full socket buffer drops the
 * datagram.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport/tcp/srn_udp_proto.h"
#include "transport/tcp/tcp.h"

#define SRN_UDP_BATCH 8
#define SRN_UDP_BUF (sizeof(struct srn_udw_hdr) + SRN_UD_MTU)
#define SRN_UDP_GROUP_QPS 64
#define SRN_UDP_FWD_WAIT_MS 20
#define SRN_UDP_RCVBUF (16 << 20)
#define SRN_UDP_CTL CMSG_SPACE(sizeof(struct ucred))

/* A multicast group this process receives, and its attached QPs. */
struct srn_udp_group {
	struct srn_list link;
	union ibv_gid mgid;
	uint32_t ipv4; /* the group address, network order */
	unsigned nqp;
	struct srn_qp *qp[SRN_UDP_GROUP_QPS];
};

/* A UD QP's receive path here: its forwarding socket. */
struct srn_udp_qp {
	struct srn_pollable fwd;
};

/* progress lock: the socket, the groups, the receive buffers */
static struct srn_pollable srn_udp_sock = { .fd = -1 };
static int srn_udp_fwd_fd = -1; /* unbound unix datagram socket: forwards */
static bool srn_udp_bound; /* srn_udp_sock holds the port (not ephemeral) */
static struct srn_list srn_udp_groups = { &srn_udp_groups, &srn_udp_groups };
static uint8_t srn_udp_buf[SRN_UDP_BATCH][SRN_UDP_BUF];

/* ---- addresses ---- */

static bool srn_udp_gid_v4(const union ibv_gid *g, uint32_t *ip_p)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0,	   0,
					 0, 0, 0, 0, 0xff, 0xff };

	if (memcmp(g->raw, pfx, sizeof(pfx)))
		return false;
	memcpy(ip_p, g->raw + 12, 4);
	return true;
}

static void srn_udp_v4_gid(uint32_t ip, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	memcpy(g->raw + 12, &ip, 4);
}

/* The IPv4 group of a multicast GID: its own address when IPv4-mapped
 * (RoCEv2), else 239.x.y.z from its last three bytes. */
static uint32_t srn_udp_group_ip(const union ibv_gid *mgid)
{
	uint32_t ip;
	uint8_t b[4] = { 239, mgid->raw[13], mgid->raw[14], mgid->raw[15] };

	if (srn_udp_gid_v4(mgid, &ip))
		return ip;
	memcpy(&ip, b, 4);
	return ip;
}

static struct srn_udp_group *srn_udp_group_find(const uint8_t *mgid)
{
	struct srn_list *pos;

	srn_list_for_each(pos, &srn_udp_groups) {
		struct srn_udp_group *g =
			srn_list_entry(pos, struct srn_udp_group, link);

		if (!memcmp(g->mgid.raw, mgid, 16))
			return g;
	}
	return NULL;
}

/* ---- receive: into a QP ---- */

static int srn_udw_check(const struct srn_udw_hdr *h, size_t n)
{
	if (n < sizeof(*h) || h->magic != SRN_UDW_MAGIC ||
	    h->version != SRN_UDW_VERSION || !h->opcode ||
	    h->opcode >= SRN_UDW_NR || (h->flags & ~SRN_UDW_F_ALL) ||
	    h->len > SRN_UD_MTU || h->len != n - sizeof(*h) ||
	    h->dst_qpn > 0xffffff || h->src_qpn > 0xffffff)
		return -EPROTO;
	return 0;
}

/* The receive WQE rw of qp gets the GRH and the payload: its status. */
static enum ibv_wc_status srn_udp_place(struct srn_qp *qp,
					const struct srn_rwqe *rw,
					const uint8_t *grh, const uint8_t *data,
					uint32_t len)
{
	struct iovec dst[SRN_MAX_SGE];
	struct iovec src[2] = { { (void *)grh, SRN_GRH_LEN },
				{ (void *)data, len } };
	unsigned nd;
	uint64_t cap;

	if (srn_recv_iov(qp, rw, dst, &nd, &cap, SRN_GRH_LEN + (uint64_t)len))
		return IBV_WC_LOC_PROT_ERR;
	if (cap < SRN_GRH_LEN + (uint64_t)len)
		return IBV_WC_LOC_LEN_ERR;
	srn_iov_copy(dst, nd, src, 2);
	return IBV_WC_SUCCESS;
}

static void srn_udp_cqe(struct srn_qp *qp, const struct srn_rwqe *rw,
			uint32_t rq_pos, const struct srn_udw_hdr *h,
			uint8_t sl, enum ibv_wc_status st)
{
	struct srn_cqe q = {
		.wr_id = rw->wr_id,
		.rq_pos = rq_pos,
		.status = st,
		.opcode = IBV_WC_RECV,
		.qp_num = qp->ibqpx.qp_base.qp_num,
		.src_qp = h->src_qpn,
		.wc_flags = IBV_WC_GRH,
		.sl = sl,
	};

	if (st == IBV_WC_SUCCESS) {
		q.byte_len = SRN_GRH_LEN + h->len;
		if (h->opcode == SRN_UDW_SEND_IMM) {
			q.imm_data = h->imm;
			q.wc_flags |= IBV_WC_WITH_IMM;
		}
	} else {
		q.wc_flags = 0;
		q.vendor_err = st;
	}
	if (h->flags & SRN_UDW_F_SOLICITED)
		q.flags = SRN_CQE_SOLICITED;
	if (srn_cq_post(&qp->recv_cq->local, &q))
		srn_cq_check_overflow(qp->recv_cq);
}

/* One datagram for qp, from IPv4 address src_ip. Progress lock held. */
static void srn_udp_to_qp(struct srn_qp *qp, const struct srn_udw_hdr *h,
			  uint32_t src_ip)
{
	enum ibv_qp_state st = srn_qp_state(qp);
	struct srn_rq_view *v = qp->srq ? &qp->srq->rqv : &qp->rqv;
	union ibv_gid sgid, dgid;
	uint8_t grh[SRN_GRH_LEN], sl;
	struct srn_rwqe_buf rb;
	enum ibv_wc_status ws;
	uint32_t rq_pos;
	int err;

	srn_dbg("UD: datagram for QP 0x%06x from 0x%06x, %u bytes", h->dst_qpn,
		h->src_qpn, h->len);
	if (qp->ibqpx.qp_base.qp_type != IBV_QPT_UD ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return; /* not receiving: dropped */
	/* acquire: pairs with the release in srn_qp_apply_attr */
	if (h->qkey != __atomic_load_n(&qp->shm->qkey, __ATOMIC_ACQUIRE))
		return; /* wrong Q_Key: dropped */
	err = srn_rq_claim(v, &rb.w, &rq_pos);
	if (err == -EAGAIN)
		return; /* no receive WQE: dropped */
	if (qp->srq)
		srn_srq_limit_consumed(v, srn_progress_kick_fd());
	srn_udp_v4_gid(src_ip, &sgid);
	memcpy(dgid.raw, h->dgid, 16);
	sl = srn_grh_build(grh, &sgid, &dgid, h->len);
	ws = err ? IBV_WC_LOC_PROT_ERR :
		   srn_udp_place(qp, &rb.w, grh, (const uint8_t *)(h + 1),
				 h->len);
	srn_udp_cqe(qp, &rb.w, rq_pos, h, sl, ws);
}

/* The unix address of QP qpn's forwarding socket; its length. */
static socklen_t srn_udp_fwd_addr(struct sockaddr_un *sa, uint32_t qpn)
{
	int len;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	len = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
		       SRN_UDW_FWD_FMT, qpn);
	return offsetof(struct sockaddr_un, sun_path) + 1 + len;
}

/* A datagram for a QP of another process of this host: to its owner. */
static void srn_udp_forward(struct srn_udw_hdr *h, size_t n, uint32_t src_ip)
{
	struct sockaddr_un sa;
	socklen_t len = srn_udp_fwd_addr(&sa, h->dst_qpn);

	h->flags |= SRN_UDW_F_FORWARDED;
	h->src_ipv4 = src_ip;
	/* lost if the owner is gone or its queue is full: UD */
	sendto(srn_udp_fwd_fd, h, n, MSG_DONTWAIT, (struct sockaddr *)&sa, len);
}

/* One datagram received here (from the network, or forwarded from
 * another process of the host). Progress lock held. */
static void srn_udp_deliver(uint8_t *buf, size_t n, uint32_t from_ip,
			    bool forwarded)
{
	struct srn_udw_hdr *h = (struct srn_udw_hdr *)buf;
	const struct srn_udp_group *g;
	struct srn_qp *qp;
	uint32_t src_ip;

	if (srn_udw_check(h, n) ||
	    forwarded != !!(h->flags & SRN_UDW_F_FORWARDED)) {
		srn_dbg("UD: a datagram of %zu bytes dropped (malformed)", n);
		return; /* not ours, or forwarded twice: dropped */
	}
	src_ip = forwarded ? h->src_ipv4 : from_ip;
	if (h->dst_qpn == SRN_UDW_MCAST_QPN) {
		g = srn_udp_group_find(h->dgid);
		for (unsigned i = 0; g && i < g->nqp; i++)
			srn_udp_to_qp(g->qp[i], h, src_ip);
		return;
	}
	qp = srn_progress_find_qp(h->dst_qpn);
	if (qp)
		srn_udp_to_qp(qp, h, src_ip);
	else if (!forwarded)
		srn_udp_forward(h, n, src_ip);
}

/*
 * May a datagram forwarded to one of our QPs' unix sockets, n bytes at
 * buf, with the ancillary data of mh, be delivered? Only with the sender's
 * credentials (SO_PASSCRED: the kernel adds them): root's (the host
 * daemon) and our own user's may forward anything; another user's
 * process only what it sends itself from this host (src_ipv4 ours, as a
 * datagram it sent to the port from this host would say): it may not
 * relay, or forge, a datagram from another host.
 */
static bool srn_udp_fwd_allowed(struct msghdr *mh, const uint8_t *buf, size_t n)
{
	const struct srn_udw_hdr *h = (const struct srn_udw_hdr *)buf;
	struct ucred cr;

	if (n < sizeof(*h))
		return false; /* malformed: srn_udw_check would drop it */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET ||
		    c->cmsg_type != SCM_CREDENTIALS ||
		    c->cmsg_len < CMSG_LEN(sizeof(cr)))
			continue;
		memcpy(&cr, CMSG_DATA(c), sizeof(cr));
		/* the kernel reports the sender's real uid */
		if (cr.uid == 0 || cr.uid == geteuid() || cr.uid == getuid() ||
		    h->src_ipv4 == srn_device_get()->ipv4)
			return true;
		srn_dbg("UD: a datagram for QP 0x%06x forwarded by uid %u "
			"(pid %d) dropped: not ours nor root's",
			h->dst_qpn, (unsigned)cr.uid, (int)cr.pid);
		return false;
	}
	srn_dbg("UD: a forwarded datagram without credentials dropped");
	return false;
}

/* The i-th of a batch of msghdrs: buffer i, and the sender's address
 * (from the network) or its credentials (forwarded). */
static void srn_udp_msg_init(struct msghdr *m, struct iovec *iov, int i,
			     struct sockaddr_in *from, void *ctl,
			     bool forwarded)
{
	memset(m, 0, sizeof(*m));
	iov->iov_base = srn_udp_buf[i];
	iov->iov_len = SRN_UDP_BUF;
	m->msg_iov = iov;
	m->msg_iovlen = 1;
	if (forwarded) {
		m->msg_control = ctl;
		m->msg_controllen = SRN_UDP_CTL;
	} else {
		m->msg_name = from;
		m->msg_namelen = sizeof(*from);
	}
}

/* Takes what is queued on fd, a few batches at most (the rest wakes us
 * again): the process socket, or a QP's forwarding socket. */
static void srn_udp_drain(int fd, bool forwarded)
{
	struct mmsghdr mm[SRN_UDP_BATCH];
	struct iovec iov[SRN_UDP_BATCH];
	struct sockaddr_in from[SRN_UDP_BATCH];
	union {
		struct cmsghdr align;
		char buf[SRN_UDP_CTL];
	} ctl[SRN_UDP_BATCH];

	for (int round = 0; round < 4; round++) {
		int n;

		memset(mm, 0, sizeof(mm));
		for (int i = 0; i < SRN_UDP_BATCH; i++)
			srn_udp_msg_init(&mm[i].msg_hdr, &iov[i], i, &from[i],
					 ctl[i].buf, forwarded);
		n = recvmmsg(fd, mm, SRN_UDP_BATCH, MSG_DONTWAIT, NULL);
		for (int i = 0; i < n; i++) {
			struct msghdr *m = &mm[i].msg_hdr;

			if (m->msg_flags & MSG_TRUNC)
				continue;
			if (forwarded && !srn_udp_fwd_allowed(m, srn_udp_buf[i],
							      mm[i].msg_len))
				continue;
			srn_udp_deliver(srn_udp_buf[i], mm[i].msg_len,
					forwarded ? 0 : from[i].sin_addr.s_addr,
					forwarded);
		}
		if (n < SRN_UDP_BATCH)
			return;
	}
}

static void srn_udp_on_sock(struct srn_pollable *pl, uint32_t events)
{
	(void)events;
	srn_udp_drain(pl->fd, false);
}

static void srn_udp_on_fwd(struct srn_pollable *pl, uint32_t events)
{
	(void)events;
	srn_udp_drain(pl->fd, true);
}

/* ---- the process socket ---- */

/* The options every datagram socket of ours has: a receive buffer for
 * bursts, and multicast that only takes the groups it joined. */
static void srn_udp_sock_setup(int fd)
{
	struct in_addr ifa = { .s_addr = srn_device_get()->ipv4 };
	int one = 1, zero = 0, rcvbuf = SRN_UDP_RCVBUF;

	/* room for a burst of a send queue's datagrams (beyond rmem_max
	 * only with CAP_NET_ADMIN); what does not fit is lost, as UD may */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	/* only the groups this socket joined, looped back to this host */
	setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
	setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof(ifa));
}

/* A socket bound to UDP port port of every address: shared with this
 * user's other processes (SO_REUSEPORT; not SO_REUSEADDR, which would
 * let another user's process bind the port too), or an ephemeral port
 * (port 0) that only sends. fd or -errno. */
static int srn_udp_sock_open(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1;
	int fd = srn_socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);

	if (fd < 0)
		return -errno;
	if (port)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* The process's datagram socket: port 4791, the daemon's alone in daemon
 * mode; when another user (or the daemon) holds the port and the daemon's
 * marker is root's, an ephemeral one that sends (the daemon forwards what
 * comes for our QPs; receivers take only the source address, never the
 * port). fd or -errno (said). */
static int srn_udp_port_open(bool *bound_p)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(srn_tcp_port()),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	int fd, pid = -ENOENT;

	*bound_p = true;
	if (srn_hostd_mode()) {
		fd = srn_tcp_hostd_udp(&sa);
		if (fd < 0)
			srn_warn("host daemon: cannot hold UDP port %u: %s",
				 srn_tcp_port(), strerror(-fd));
		return fd;
	}
	fd = srn_udp_sock_open(srn_tcp_port());
	if (fd == -EADDRINUSE)
		pid = srn_hostd_pid();
	if (pid > 0) {
		srn_dbg("UDP port %u is held by the host daemon (pid %d): it "
			"forwards datagrams for our QPs",
			srn_tcp_port(), pid);
		*bound_p = false;
		return srn_udp_sock_open(0);
	}
	if (fd < 0)
		srn_warn("UDP port %u: %s; UD QPs of this process are "
			 "reachable from this host only",
			 srn_tcp_port(), strerror(-fd));
	return fd;
}

/* The socket that sends to other processes' QPs on this host: blocking
 * for at most SRN_UDP_FWD_WAIT_MS when the owner's queue is full (a
 * unix datagram queue is short), so a sender keeps pace with a receiver
 * that drains; the progress thread's forwards never wait (MSG_DONTWAIT). */
static int srn_udp_fwd_open(void)
{
	struct timeval tv = { 0, SRN_UDP_FWD_WAIT_MS * 1000 };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* With the progress thread: the process's datagram socket. Failure is
 * not fatal: UD QPs then reach only peers on this host. */
void srn_udp_start(void)
{
	int fd;

	srn_udp_fwd_fd = srn_udp_fwd_open();
	fd = srn_udp_port_open(&srn_udp_bound);
	if (fd < 0)
		return;
	srn_udp_sock_setup(fd);
	srn_udp_sock.fd = fd;
	srn_udp_sock.fn = srn_udp_on_sock;
	if (srn_progress_add(&srn_udp_sock, EPOLLIN)) {
		close(fd);
		srn_udp_sock.fd = -1;
	}
}

void srn_udp_stop(void)
{
	if (srn_udp_sock.fd >= 0) {
		/* what came for other processes of the host still goes */
		srn_progress_lock();
		srn_udp_drain(srn_udp_sock.fd, false);
		srn_progress_unlock();
		srn_progress_del(&srn_udp_sock);
		close(srn_udp_sock.fd);
		srn_udp_sock.fd = -1;
	}
	if (srn_udp_fwd_fd >= 0)
		close(srn_udp_fwd_fd);
	srn_udp_fwd_fd = -1;
}

/* ---- the transport's UD ops ---- */

static bool srn_udp_dest(const struct srn_ud_dest *d, struct sockaddr_in *sa)
{
	uint32_t ip;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(srn_tcp_port());
	if (d->qpn == SRN_UDW_MCAST_QPN) {
		sa->sin_addr.s_addr = srn_udp_group_ip(&d->dgid);
		return true;
	}
	if (!srn_udp_gid_v4(&d->dgid, &ip))
		return false; /* no IPv6 path yet: lost */
	sa->sin_addr.s_addr = ip;
	return true;
}

int srn_udp_ud_send(struct srn_qp *qp, const struct srn_swqe *w,
		    const struct srn_ud_dest *d, enum ibv_wc_status *status,
		    enum srn_stall *stall)
{
	struct srn_udw_hdr h = {
		.magic = SRN_UDW_MAGIC,
		.version = SRN_UDW_VERSION,
		.opcode = w->opcode == IBV_WR_SEND_WITH_IMM ? SRN_UDW_SEND_IMM :
							      SRN_UDW_SEND,
		.flags = (w->send_flags & IBV_SEND_SOLICITED) ?
				 SRN_UDW_F_SOLICITED :
				 0,
		.dst_qpn = d->qpn,
		.src_qpn = qp->ibqpx.qp_base.qp_num,
		.qkey = d->qkey,
		.imm = w->imm_data,
		.len = (uint32_t)w->total_len,
	};
	struct iovec iov[1 + SRN_MAX_SGE];
	struct msghdr mh = { .msg_iov = iov };
	struct sockaddr_in sa;
	struct sockaddr_un un;
	unsigned n;
	/* relaxed: set before any QP exists (srn_udp_start), cleared after
	 * the last is gone (srn_udp_stop) */
	int fd = __atomic_load_n(&srn_udp_sock.fd, __ATOMIC_RELAXED);

	(void)stall;
	*status = IBV_WC_SUCCESS;
	if (srn_local_iov(qp, w, 0, iov + 1, &n)) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	memcpy(h.dgid, d->dgid.raw, 16);
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	mh.msg_iovlen = 1 + n;
	if (d->qpn != SRN_UDW_MCAST_QPN && srn_gid_is_local(&d->dgid)) {
		/* this host: straight to the owner of the QPN */
		h.flags |= SRN_UDW_F_FORWARDED;
		h.src_ipv4 = srn_device_get()->ipv4;
		mh.msg_name = &un;
		mh.msg_namelen = srn_udp_fwd_addr(&un, d->qpn);
		fd = srn_udp_fwd_fd;
	} else if (srn_udp_dest(d, &sa)) {
		mh.msg_name = &sa;
		mh.msg_namelen = sizeof(sa);
	} else {
		return 0; /* no way out: lost, as on a wire */
	}
	if (fd < 0)
		return 0;
	if (mh.msg_name == &un) /* the owner's queue: wait a little */
		sendmsg(fd, &mh, 0);
	else
		sendmsg(fd, &mh, MSG_DONTWAIT); /* a full buffer drops it */
	return 0;
}

static struct srn_udp_qp **srn_udp_slot(struct srn_qp *qp)
{
	return (struct srn_udp_qp **)srn_ud_slot(qp, "tcp");
}

/* A new UD QP: its forwarding socket, named by its QPN. */
int srn_udp_ud_open(struct srn_qp *qp)
{
	struct sockaddr_un sa;
	socklen_t len = srn_udp_fwd_addr(&sa, qp->ibqpx.qp_base.qp_num);
	struct srn_udp_qp *u = calloc(1, sizeof(*u));
	int err, one = 1;

	if (!u)
		return -ENOMEM;
	u->fwd.fd =
		socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* every datagram carries its sender's credentials, from the first
	 * (set before the socket has a name): srn_udp_fwd_allowed */
	if (u->fwd.fd < 0 ||
	    setsockopt(u->fwd.fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) ||
	    bind(u->fwd.fd, (struct sockaddr *)&sa, len)) {
		err = -errno;
		if (u->fwd.fd >= 0)
			close(u->fwd.fd);
		free(u);
		return err;
	}
	u->fwd.fn = srn_udp_on_fwd;
	u->fwd.priv = qp;
	err = srn_progress_add(&u->fwd, EPOLLIN);
	if (err) {
		close(u->fwd.fd);
		free(u);
		return err;
	}
	*srn_udp_slot(qp) = u;
	return 0;
}

static void srn_udp_group_leave(struct srn_udp_group *g, struct srn_qp *qp)
{
	struct ip_mreqn mr = { .imr_multiaddr.s_addr = g->ipv4,
			       .imr_address.s_addr = srn_device_get()->ipv4 };

	for (unsigned i = 0; i < g->nqp; i++)
		if (g->qp[i] == qp)
			g->qp[i--] = g->qp[--g->nqp];
	if (g->nqp)
		return;
	if (srn_udp_sock.fd >= 0)
		setsockopt(srn_udp_sock.fd, IPPROTO_IP, IP_DROP_MEMBERSHIP, &mr,
			   sizeof(mr));
	srn_list_del(&g->link);
	free(g);
}

/* The QP is destroyed: its socket closes, it leaves every group. */
void srn_udp_qp_destroy(struct srn_qp *qp)
{
	struct srn_udp_qp *u;
	struct srn_list *pos, *tmp;

	if (!qp->ud)
		return;
	u = *srn_udp_slot(qp);
	srn_progress_lock();
	srn_list_for_each_safe(pos, tmp, &srn_udp_groups)
		srn_udp_group_leave(
			srn_list_entry(pos, struct srn_udp_group, link), qp);
	srn_progress_unlock();
	if (!u)
		return;
	srn_progress_del(&u->fwd);
	close(u->fwd.fd);
	free(u);
	*srn_udp_slot(qp) = NULL;
}

static int srn_udp_group_join(const union ibv_gid *mgid, struct srn_qp *qp)
{
	struct srn_udp_group *g = srn_udp_group_find(mgid->raw);
	struct ip_mreqn mr = { .imr_address.s_addr = srn_device_get()->ipv4 };

	if (g) {
		for (unsigned i = 0; i < g->nqp; i++)
			if (g->qp[i] == qp)
				return 0; /* already attached */
		if (g->nqp == SRN_UDP_GROUP_QPS)
			return -ENOMEM;
		g->qp[g->nqp++] = qp;
		return 0;
	}
	if (srn_udp_sock.fd < 0 || !srn_udp_bound)
		return -ENODEV; /* no socket on the port: the group's
				 * datagrams could not reach us */
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->mgid = *mgid;
	g->ipv4 = mr.imr_multiaddr.s_addr = srn_udp_group_ip(mgid);
	if (setsockopt(srn_udp_sock.fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
		       sizeof(mr))) {
		int err = -errno;

		free(g);
		return err;
	}
	g->qp[g->nqp++] = qp;
	srn_list_add_tail(&g->link, &srn_udp_groups);
	return 0;
}

/* ibv_attach_mcast / ibv_detach_mcast; progress lock held. */
int srn_udp_mcast(struct srn_qp *qp, const union ibv_gid *mgid, bool attach)
{
	struct srn_udp_group *g;

	if (attach)
		return srn_udp_group_join(mgid, qp);
	g = srn_udp_group_find(mgid->raw);
	if (!g)
		return -EINVAL; /* not attached */
	for (unsigned i = 0; i < g->nqp; i++)
		if (g->qp[i] == qp) {
			srn_udp_group_leave(g, qp);
			return 0;
		}
	return -EINVAL;
}
