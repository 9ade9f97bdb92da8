// SPDX-License-Identifier: MIT
/*
 * softrnic — the host control plane (proto/srn_ctl_proto.h).
 *
 * Every QP listens on an abstract unix socket named after its QPN (which is
 * what makes QPNs unique on the host). The progress thread accepts, reads
 * each message and dispatches it: BYE, STAT_REQ and ADOPT (the host-wide
 * listener's hand-off, srn_transport_adopt) here, every other type to the
 * handler a transport registered for it (srn_ctl_handler_set). A peer that
 * attached to the QP (srn_ctl_conn_attach) and hangs up without BYE has
 * died: its QP's peer goes to ERR.
 *
 * Who is served (docs/security.md): a process of another user (the
 * kernel's SO_PEERCRED, not a message; root is not another user here) may
 * ask for one thing only, a mediated link (MEDIATE, srn_ctl_on_mediate):
 * a unix stream socket of ours that the network transport serves as it
 * serves a connection from another host, checking every access; no other
 * fd ever goes to it (srn_ctl_fds_ok). A process of our user or root is
 * served the rest: a peer attaches only if the kernel also vouches that
 * it owns the source QPN it claims, and that QPN is the QP's dest_qp_num;
 * before it has attached a connection may only ask to attach, say BYE,
 * ask for STAT, hand off a connection or ask for a mediated link
 * (srn_ctl_classify). The abstract socket has no file permissions: these
 * checks are all there is. Another user's connections are also capped,
 * given a deadline and rate-limited per uid (srn_ctl_foreign_admit).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "engine/transport.h"
#include "proto/srn_ctl_proto.h"

#define SRN_CTL_TIMEOUT_S 5
#define SRN_CTL_WARN_NS 1000000000ull /* refusals: one warning a second */

/*
 * Another user's connections (docs/security.md, "Same host: the control
 * socket", point 7): each may send one request, MEDIATE. Until it has, at most
 * SRN_CTL_FOREIGN_MAX of them are open in this process, at most
 * SRN_CTL_FOREIGN_PER_UID of one uid, each for SRN_CTL_FOREIGN_TIMEOUT_NS.
 * A connection that ends without a link served (refused, a bad message,
 * silent past its deadline, gone) costs its uid a token of a bucket of
 * SRN_CTL_REFUSE_BURST, one back every SRN_CTL_REFUSE_NS; while it is
 * empty, that uid's connections are closed as soon as accepted, unread.
 */
#define SRN_CTL_FOREIGN_MAX 64
#define SRN_CTL_FOREIGN_PER_UID 8
#define SRN_CTL_FOREIGN_TIMEOUT_NS 3000000000ull
#define SRN_CTL_REFUSE_BURST 16
#define SRN_CTL_REFUSE_NS (1000000000ull / 32) /* 32 a second */
#define SRN_CTL_UIDS 128 /* uids remembered at once */
#define SRN_CTL_PAUSE_NS 100000000ull /* out of fds: accept again then */

struct srn_ctl_conn {
	struct srn_pollable pl;
	struct srn_qp *qp; /* the target QP */
	int kick_fd; /* the initiator's progress kick */
	uint32_t src_qpn;
	pid_t pid; /* the peer process (SO_PEERCRED at accept) */
	uid_t uid;
	bool foreign; /* another user's (not root): MEDIATE only */
	bool connected; /* a peer QP attached (srn_ctl_conn_attach) */
	bool bye;
	bool served; /* a foreign conn's request was served (or the QP went) */
	struct srn_ctl_uid *fuid; /* a foreign conn's uid, until its close */
	struct srn_list flink; /* on srn_ctl_foreign while fuid is set */
	uint64_t deadline_ns; /* a foreign conn is closed then */
	/* a request the QP could not answer before RTR (srn_ctl_conn_defer),
	 * under srn_ctl_defer_lock; once the QP is there the conn goes on
	 * srn_ctl_ready and our progress thread dispatches it again
	 * (srn_ctl_work) */
	struct srn_list ready_link; /* on srn_ctl_ready, or empty */
	void *def_msg;
	size_t def_len;
	int def_fd;
};

/* Lock order: a QP's conn_lock, then this. */
static pthread_mutex_t srn_ctl_defer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_list srn_ctl_ready = SRN_LIST_INIT(srn_ctl_ready);
/* srn_ctl_ready has entries: our progress thread wakes on this eventfd
 * (its own: a kick of the progress thread would also sweep every QP) */
static struct srn_pollable srn_ctl_wake = { .fd = -1 };

/*
 * Another user's, by uid (progress lock, as all that follows). A slot is
 * free when no conn of its uid is open and its bucket is full again. The
 * bucket is a theoretical arrival time (GCRA): each refusal moves tat_ns
 * SRN_CTL_REFUSE_NS on from max(tat_ns, now); empty while tat_ns is
 * SRN_CTL_REFUSE_BURST refusals ahead of now.
 */
struct srn_ctl_uid {
	uid_t uid;
	unsigned conns;
	uint64_t tat_ns;
};

static struct srn_ctl_uid srn_ctl_uids[SRN_CTL_UIDS];
static unsigned srn_ctl_nforeign; /* foreign conns open */
static struct srn_list srn_ctl_foreign = SRN_LIST_INIT(srn_ctl_foreign);
/* listeners paused out of fds (their pl.link), accepting again at
 * srn_ctl_resume_ns */
static struct srn_list srn_ctl_paused = SRN_LIST_INIT(srn_ctl_paused);
static uint64_t srn_ctl_resume_ns;
/* what the caps did, for the debug log (srn_ctl_foreign_log) */
static struct {
	uint64_t capped, limited, expired, refused, logged_ns, sum;
} srn_ctl_fstat;

/* Set by transports when the library is loaded, read-only afterwards. */
static srn_ctl_handler_fn *srn_ctl_handlers[SRN_CTL_XSRQ_REP + 1];

int srn_ctl_handler_set(unsigned type, srn_ctl_handler_fn *fn)
{
	if (type >= SRN_ARRAY_SIZE(srn_ctl_handlers) || srn_ctl_handlers[type])
		return -EBUSY;
	srn_ctl_handlers[type] = fn;
	return 0;
}

struct srn_qp *srn_ctl_conn_qp(const struct srn_ctl_conn *c)
{
	return c->qp;
}

int srn_ctl_conn_fd(const struct srn_ctl_conn *c)
{
	return c->pl.fd;
}

static socklen_t srn_ctl_addr(struct sockaddr_un *sa, uint32_t qpn);

/* Progress thread only: may a refusal be logged at the warning level now?
 * (Whoever can connect could otherwise fill our stderr.) */
static bool srn_ctl_warn_ok(void)
{
	static uint64_t last_ns;
	uint64_t now = srn_now_ns();

	if (last_ns && now - last_ns < SRN_CTL_WARN_NS)
		return false;
	last_ns = now;
	return true;
}

#define srn_ctl_refused(...)                   \
	do {                                   \
		if (srn_ctl_warn_ok())         \
			srn_warn(__VA_ARGS__); \
		else                           \
			srn_dbg(__VA_ARGS__);  \
	} while (0)

/* The kernel's credentials of the process at the other end of fd (for a
 * socket that connected: of the process that called listen()). */
static int srn_ctl_peercred(int fd, struct ucred *cr)
{
	socklen_t len = sizeof(*cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &len))
		return -errno;
	return len == sizeof(*cr) ? 0 : -EPROTO;
}

/* Same host, same user: a process of our user, or root (who could ptrace
 * us anyway). Another user gets a mediated link only. */
static bool srn_ctl_uid_ok(uid_t peer)
{
	return peer == srn_euid || peer == 0;
}

/*
 * The credentials of the process that listens on QP qpn's control socket,
 * as the kernel knows them. A non-blocking connect: a listening unix
 * socket takes it into its backlog without its owner's help, so this
 * never waits for another process; a full backlog (-EAGAIN) leaves it
 * unverified for now.
 */
static int srn_ctl_owner(uint32_t qpn, struct ucred *cr_p)
{
	struct sockaddr_un sa;
	socklen_t len = srn_ctl_addr(&sa, qpn);
	struct ucred cr;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0);
	int err;

	if (fd < 0)
		return -errno;
	err = connect(fd, (struct sockaddr *)&sa, len) ? -errno : 0;
	if (err == -EINPROGRESS)
		err = -EAGAIN;
	if (!err)
		err = srn_ctl_peercred(fd, &cr);
	close(fd);
	if (!err)
		*cr_p = cr;
	return err;
}

/* May the process cr, which owns QP qpn, share memory with ours
 * (srn_self_kin)? Said at debug level when not. */
static bool srn_ctl_kin(const struct ucred *cr, uint32_t qpn)
{
	if (srn_self_kin(cr->pid, cr->uid))
		return true;
	srn_dbg("QP 0x%06x belongs to pid %d of uid %u, which shares no "
		"memory with us",
		qpn, (int)cr->pid, (unsigned)cr->uid);
	return false;
}

/*
 * Is the QP at (dgid, qpn) one of this host that belongs to another user
 * (root included: it is another user too), or to a process of ours that
 * may not ptrace us or we it (srn_self_kin)? Then it shares no memory with
 * ours: srn_transport_connect takes the mediated path. No such QP here:
 * false (the transport reports it). The backlog of a QP being dialed by
 * many may be full for a moment: asked again a few times.
 */
bool srn_ctl_peer_foreign(const union ibv_gid *dgid, uint32_t qpn)
{
	struct ucred cr;
	int err = -EAGAIN;

	if (!srn_gid_is_local(dgid))
		return false; /* qpn is another host's */
	for (int i = 0; i < 50 && err == -EAGAIN; i++) {
		if (i)
			usleep(10000);
		err = srn_ctl_owner(qpn, &cr);
	}
	return !err && !srn_ctl_kin(&cr, qpn);
}

/* Has the process at the other end of c closed its end (what it sent may
 * still be queued)? */
static bool srn_ctl_conn_gone(const struct srn_ctl_conn *c)
{
	struct pollfd pfd = { .fd = srn_ctl_conn_fd(c), .events = POLLRDHUP };

	return poll(&pfd, 1, 0) == 1 &&
	       (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * Did qp's own dial find pid listening on QP src_qpn's control socket?
 * Then the kernel has already said who owns src_qpn, and a connection
 * from pid that claims it needs no probe of its own: a connected pair of
 * QPs dials each other, so the second claim of every pair is checked
 * this way (the answer the probe would give, unless src_qpn's owner
 * destroyed it meanwhile and still claims it). The record goes when qp
 * leaves its peer (srn_ctl_undial).
 */
static bool srn_ctl_dialed_by(struct srn_qp *qp, uint32_t src_qpn, pid_t pid)
{
	/* relaxed: the value is all that is read (no data published with
	 * it); written by srn_ctl_dial_own and srn_ctl_undial */
	uint64_t d =
		atomic_load_explicit(&qp->ctl_dialed, memory_order_relaxed);

	return d && pid > 0 && (uint32_t)d == src_qpn &&
	       (pid_t)(uint32_t)(d >> 32) == pid;
}

/* Does the process at the other end of c own QP src_qpn (the kernel says
 * so)? 0, -EAGAIN (its backlog is full: not verified now) or -EPERM. A
 * claimer that has hung up already destroyed its QP (a request read
 * late): refused all the same, said at debug level only. */
static int srn_ctl_conn_owns(struct srn_ctl_conn *c, uint32_t src_qpn)
{
	uint32_t qpn = c->qp->ibqpx.qp_base.qp_num;
	struct ucred cr = { 0 };
	int err;

	if (srn_ctl_dialed_by(c->qp, src_qpn, c->pid))
		return 0;
	err = srn_ctl_owner(src_qpn, &cr);
	if (err == -EAGAIN)
		return -EAGAIN;
	if (err && srn_ctl_conn_gone(c))
		srn_dbg("QP 0x%06x: pid %d, gone, claimed QP 0x%06x, which "
			"nobody owns now: refused",
			qpn, (int)c->pid, src_qpn);
	else if (err)
		srn_ctl_refused("QP 0x%06x: pid %d claims QP 0x%06x, which "
				"nobody owns (%s): refused",
				qpn, (int)c->pid, src_qpn, strerror(-err));
	else if (cr.pid <= 0 || cr.pid != c->pid)
		srn_ctl_refused("QP 0x%06x: pid %d (uid %u) claims QP 0x%06x, "
				"owned by pid %d: refused",
				qpn, (int)c->pid, (unsigned)c->uid, src_qpn,
				(int)cr.pid);
	return err || cr.pid <= 0 || cr.pid != c->pid ? -EPERM : 0;
}

/*
 * May the peer of c attach as QP src_qpn? Only if qp is past INIT with
 * src_qpn as its dest_qp_num (any QPN for a UD QP; -EAGAIN before: not
 * ready, ask again), and the process at the other end of c owns src_qpn
 * (-EPERM otherwise).
 */
static int srn_ctl_conn_verify(struct srn_ctl_conn *c, uint32_t src_qpn)
{
	uint32_t qpn = c->qp->ibqpx.qp_base.qp_num, dest;
	enum ibv_qp_state st = srn_qp_state(c->qp);

	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT)
		return -EINPROGRESS; /* no RTR attributes yet */
	/* acquire: pairs with the release in srn_qp_apply_attr (written
	 * before the state we read, which pairs with srn_qp_set_state) */
	dest = __atomic_load_n(&c->qp->shm->dest_qpn, __ATOMIC_ACQUIRE);
	/* a UD QP takes datagrams from any QP (its Q_Key decides) */
	if (c->qp->ibqpx.qp_base.qp_type != IBV_QPT_UD && dest != src_qpn) {
		srn_ctl_refused("QP 0x%06x: pid %d says it is QP 0x%06x, but "
				"our peer is QP 0x%06x: refused",
				qpn, (int)c->pid, src_qpn, dest);
		return -EPERM;
	}
	return srn_ctl_conn_owns(c, src_qpn);
}

/*
 * A peer QP attaches to this conn, if srn_ctl_conn_verify lets it (-EAGAIN:
 * not now; -EPERM: never on this conn): kick_fd (ours then) wakes its
 * progress thread, and a hang-up without BYE means it died. Once per conn;
 * until then, the conn is served nothing (srn_ctl_classify).
 */
/* Under srn_ctl_defer_lock: c's deferred request is ready to be answered;
 * our progress thread will (srn_ctl_work). */
static void srn_ctl_defer_ready(struct srn_ctl_conn *c)
{
	if (!c->def_msg || !srn_list_empty(&c->ready_link))
		return;
	srn_list_add_tail(&c->ready_link, &srn_ctl_ready);
	srn_kick_fd(srn_ctl_wake.fd);
}

/* Drops c's deferred request, if any (progress lock). */
static void srn_ctl_defer_drop(struct srn_ctl_conn *c)
{
	void *m;
	int fd;

	pthread_mutex_lock(&srn_ctl_defer_lock);
	srn_list_del(&c->ready_link);
	srn_list_init(&c->ready_link);
	m = c->def_msg;
	fd = c->def_fd;
	c->def_msg = NULL;
	c->def_fd = -1;
	pthread_mutex_unlock(&srn_ctl_defer_lock);
	free(m);
	if (fd >= 0)
		close(fd);
}

/*
 * Progress lock, from a handler: c's QP cannot answer msg before it is
 * past INIT (srn_ctl_conn_attach said -EINPROGRESS). Keeps a copy of it,
 * and fd (-1: none), and dispatches it again when the QP gets there
 * (srn_ctl_kick_peers, then srn_ctl_work): the answer then follows on the
 * same connection. A later request replaces it.
 */
int srn_ctl_conn_defer(struct srn_ctl_conn *c, const void *msg, size_t len,
		       int fd)
{
	void *m = malloc(len);
	enum ibv_qp_state st;

	if (!m)
		return -ENOMEM;
	srn_ctl_defer_drop(c);
	memcpy(m, msg, len);
	pthread_mutex_lock(&srn_ctl_defer_lock);
	c->def_msg = m;
	c->def_len = len;
	c->def_fd = fd;
	/* the QP may have moved since srn_ctl_conn_attach looked: its
	 * srn_ctl_kick_peers either comes after this and sees def_msg, or
	 * came before and its state is visible here (through the lock) */
	st = srn_qp_state(c->qp);
	if (st != IBV_QPS_RESET && st != IBV_QPS_INIT)
		srn_ctl_defer_ready(c);
	pthread_mutex_unlock(&srn_ctl_defer_lock);
	srn_dbg("QP 0x%06x: a request of pid %d kept until RTR (%s)",
		c->qp->ibqpx.qp_base.qp_num, (int)c->pid,
		st != IBV_QPS_RESET && st != IBV_QPS_INIT ? "now" : "later");
	return 0;
}

int srn_ctl_conn_attach(struct srn_ctl_conn *c, uint32_t src_qpn, int kick_fd)
{
	int err;

	if (c->connected)
		return -EISCONN;
	if (!srn_self_kin(c->pid, c->uid)) {
		srn_ctl_refused("QP 0x%06x: pid %d of uid %u may not map our "
				"memory (it could not ptrace us): only a "
				"mediated link (docs/security.md)",
				c->qp->ibqpx.qp_base.qp_num, (int)c->pid,
				(unsigned)c->uid);
		return -EACCES;
	}
	err = srn_ctl_conn_verify(c, src_qpn);
	if (err)
		return err;
	/* kick_fd is read by srn_ctl_kick_peers under conn_lock */
	/* one descriptor per peer process (util/fdshare.c) */
	kick_fd = srn_fdshare_get(kick_fd, (int32_t)c->pid);
	pthread_mutex_lock(&c->qp->conn_lock);
	c->kick_fd = kick_fd;
	pthread_mutex_unlock(&c->qp->conn_lock);
	c->src_qpn = src_qpn;
	c->connected = true;
	return 0;
}

static socklen_t srn_ctl_addr(struct sockaddr_un *sa, uint32_t qpn)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
		     SRN_CTL_SOCK_FMT, qpn);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

/*
 * May fds go to the process at the other end of fd? To a process that
 * could ptrace ours anyway (srn_self_kin: our user's, dumpable, no Yama
 * restriction), anything; to any other (another user's, root included,
 * or our user's that may not ptrace us), sockets only (the mediated
 * link's end): never memory (a memfd), an eventfd or a file, whatever a
 * caller asks (docs/security.md). 0 or -EPERM.
 */
static int srn_ctl_fds_ok(int fd, const int *fds, unsigned nfds)
{
	struct ucred cr;
	struct stat st;

	if (srn_ctl_peercred(fd, &cr))
		return -EPERM; /* nobody we know of: nothing */
	if (srn_self_kin(cr.pid, cr.uid))
		return 0;
	for (unsigned i = 0; i < nfds; i++) {
		if (fstat(fds[i], &st) || !S_ISSOCK(st.st_mode)) {
			srn_err("a descriptor that is no socket was to go to "
				"pid %d of uid %u: not sent (docs/security.md)",
				(int)cr.pid, (unsigned)cr.uid);
			return -EPERM;
		}
	}
	return 0;
}

/* kin_seen: the caller found the process at the other end of fd kin
 * just now (srn_ctl_dial_own, srn_ctl_conn_attach); the kernel's
 * credentials of a connected socket never change, so srn_ctl_fds_ok's own
 * asking would only repeat that. */
static int srn_ctl_sendmsg_flags(int fd, const void *msg, size_t len,
				 const int *fds, unsigned nfds, int flags,
				 bool kin_seen)
{
	char cbuf[CMSG_SPACE(sizeof(int) * SRN_CTL_MAX_FDS)];
	struct iovec iov = { (void *)msg, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (nfds > SRN_CTL_MAX_FDS)
		return -EINVAL;
	if (nfds && !kin_seen && srn_ctl_fds_ok(fd, fds, nfds))
		return -EPERM;
	if (nfds) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL | flags) != (ssize_t)len)
		return errno ? -errno : -EPROTO;
	return 0;
}

int srn_ctl_sendmsg(int fd, const void *msg, size_t len, const int *fds,
		    unsigned nfds)
{
	return srn_ctl_sendmsg_flags(fd, msg, len, fds, nfds, 0, false);
}

/*
 * Sends a reply (h: its header, h->len its whole length) with fds. When
 * they may not go to the asker (srn_ctl_fds_ok: it may not ptrace us),
 * the reply goes without them, status -EACCES, so that the asker learns
 * it at once instead of waiting out its timeout. 0 or -errno.
 */
int srn_ctl_reply(int fd, struct srn_ctl_hdr *h, const int *fds, unsigned nfds)
{
	int err = srn_ctl_sendmsg(fd, h, h->len, fds, nfds);

	if (err != -EPERM || !nfds)
		return err;
	h->status = -EACCES;
	return srn_ctl_sendmsg(fd, h, h->len, NULL, 0);
}

/* As srn_ctl_reply, to an asker srn_ctl_conn_attach has just let attach
 * (it found it kin). */
int srn_ctl_reply_kin(int fd, struct srn_ctl_hdr *h, const int *fds,
		      unsigned nfds)
{
	return srn_ctl_sendmsg_flags(fd, h, h->len, fds, nfds, 0, true);
}

/* As srn_ctl_sendmsg, never waiting: -EAGAIN when the socket is full. */
int srn_ctl_trysendmsg(int fd, const void *msg, size_t len, const int *fds,
		       unsigned nfds)
{
	return srn_ctl_sendmsg_flags(fd, msg, len, fds, nfds, MSG_DONTWAIT,
				     false);
}

/* As srn_ctl_trysendmsg, right after srn_ctl_dial_own found the process
 * at the other end of fd kin. */
int srn_ctl_trysendmsg_kin(int fd, const void *msg, size_t len, const int *fds,
			   unsigned nfds)
{
	return srn_ctl_sendmsg_flags(fd, msg, len, fds, nfds, MSG_DONTWAIT,
				     true);
}

/*
 * Receives one message and the fds that came with it (*nfds in: room,
 * out: count). Truncated messages or fd lists are an error.
 *
 * A peer that closes its end while messages of ours are still unread in it
 * makes the kernel report ECONNRESET, once, ahead of the messages it sent
 * before closing (its BYE among them): they are still queued, so this
 * reads on. The reset is reported only together with the peer's close, so
 * the second read never blocks: a message, or 0 (the end, -ECONNRESET).
 */
static ssize_t srn_ctl_recvmsg_flags(int fd, void *msg, size_t len, int *fds,
				     unsigned *nfds, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int) * SRN_CTL_MAX_FDS)];
	struct iovec iov = { msg, len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	unsigned room = *nfds, got = 0;
	struct cmsghdr *cm;
	ssize_t n;

	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);
	if (n < 0 && errno == ECONNRESET) {
		mh.msg_controllen = sizeof(cbuf);
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);
	}
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		unsigned k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (unsigned i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
			if (got < room)
				fds[got++] = f;
			else
				close(f);
		}
	}
	*nfds = got;
	if (n == 0)
		return -ECONNRESET;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (unsigned i = 0; i < got; i++)
			close(fds[i]);
		*nfds = 0;
		return -EPROTO;
	}
	return n;
}

ssize_t srn_ctl_recvmsg(int fd, void *msg, size_t len, int *fds, unsigned *nfds)
{
	return srn_ctl_recvmsg_flags(fd, msg, len, fds, nfds, 0);
}

/* As srn_ctl_recvmsg, never waiting: -ETIMEDOUT when nothing is there. */
ssize_t srn_ctl_tryrecvmsg(int fd, void *msg, size_t len, int *fds,
			   unsigned *nfds)
{
	return srn_ctl_recvmsg_flags(fd, msg, len, fds, nfds, MSG_DONTWAIT);
}

void srn_ctl_bye(int fd)
{
	struct srn_ctl_hdr h = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_BYE, 0,
				 sizeof(h) };

	if (fd >= 0 && send(fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		srn_dbg("BYE on fd %d: %m", fd);
}

/* ---- target side ---- */

/* At most once a second, what the caps on other users' connections did
 * (debug level: srn_ctl_refused already warns about refusals). */
static void srn_ctl_foreign_log(uint64_t now)
{
	uint64_t sum = srn_ctl_fstat.capped + srn_ctl_fstat.limited +
		       srn_ctl_fstat.expired + srn_ctl_fstat.refused;

	if (sum == srn_ctl_fstat.sum ||
	    now - srn_ctl_fstat.logged_ns < SRN_CTL_WARN_NS)
		return;
	srn_ctl_fstat.sum = sum;
	srn_ctl_fstat.logged_ns = now;
	srn_dbg("control connections of other users: %u open, closed so "
		"far %llu unread over the caps, %llu unread rate-limited, "
		"%llu unserved (%llu of them silent past the deadline)",
		srn_ctl_nforeign, (unsigned long long)srn_ctl_fstat.capped,
		(unsigned long long)srn_ctl_fstat.limited,
		(unsigned long long)srn_ctl_fstat.refused,
		(unsigned long long)srn_ctl_fstat.expired);
}

/* uid's slot: its own, or a free one (NULL: none free). */
static struct srn_ctl_uid *srn_ctl_uid_slot(uid_t uid, uint64_t now)
{
	struct srn_ctl_uid *spare = NULL;

	for (unsigned i = 0; i < SRN_CTL_UIDS; i++) {
		struct srn_ctl_uid *u = &srn_ctl_uids[i];
		bool used = u->conns || u->tat_ns > now;

		if (used && u->uid == uid)
			return u;
		if (!used && !spare)
			spare = u;
	}
	if (spare)
		*spare = (struct srn_ctl_uid){ .uid = uid };
	return spare;
}

/*
 * May another user's connection from uid be served now? Its slot, or NULL
 * (over a cap, or its uid's bucket is empty): the caller closes it unread.
 */
static struct srn_ctl_uid *srn_ctl_foreign_admit(uid_t uid, uint64_t now)
{
	struct srn_ctl_uid *u = NULL;

	if (srn_ctl_nforeign < SRN_CTL_FOREIGN_MAX)
		u = srn_ctl_uid_slot(uid, now);
	if (!u || u->conns >= SRN_CTL_FOREIGN_PER_UID) {
		srn_ctl_fstat.capped++;
		u = NULL;
	} else if (u->tat_ns >=
		   now + SRN_CTL_REFUSE_BURST * SRN_CTL_REFUSE_NS) {
		srn_ctl_fstat.limited++;
		u = NULL;
	}
	srn_ctl_foreign_log(now);
	return u;
}

/* c, another user's, is served within the caps until its close. */
static void srn_ctl_foreign_add(struct srn_ctl_conn *c, struct srn_ctl_uid *u,
				uint64_t now)
{
	c->fuid = u;
	u->conns++;
	srn_ctl_nforeign++;
	c->deadline_ns = now + SRN_CTL_FOREIGN_TIMEOUT_NS;
	srn_list_add_tail(&c->flink, &srn_ctl_foreign);
	srn_progress_wake_at(c->deadline_ns); /* srn_ctl_hook_work */
}

/* c closes: out of the caps; a link not served costs its uid a token. */
static void srn_ctl_foreign_put(struct srn_ctl_conn *c)
{
	struct srn_ctl_uid *u = c->fuid;
	uint64_t now;

	if (!u)
		return;
	srn_list_del(&c->flink);
	c->fuid = NULL;
	u->conns--;
	srn_ctl_nforeign--;
	if (c->served)
		return;
	now = srn_now_ns();
	u->tat_ns = (u->tat_ns > now ? u->tat_ns : now) + SRN_CTL_REFUSE_NS;
	srn_ctl_fstat.refused++;
	srn_ctl_foreign_log(now);
}

static void srn_ctl_conn_close(struct srn_ctl_conn *c)
{
	srn_ctl_foreign_put(c);
	srn_ctl_defer_drop(c);
	srn_progress_del(&c->pl);
	pthread_mutex_lock(&c->qp->conn_lock);
	srn_list_del(&c->pl.link);
	pthread_mutex_unlock(&c->qp->conn_lock);
	close(c->pl.fd);
	srn_fdshare_put(c->kick_fd);
	free(c);
}

static void srn_ctl_on_stat(struct srn_ctl_conn *c)
{
	struct srn_qp *qp = c->qp;
	struct srn_ctl_stat_rep r = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_STAT_REP, 0,
			 sizeof(r) },
		.qpn = qp->ibqpx.qp_base.qp_num,
		.pid = (uint32_t)srn_pid,
		.state = srn_qp_state(qp),
		/* acquire: pairs with the release in srn_qp_apply_attr */
		.dest_qpn =
			__atomic_load_n(&qp->shm->dest_qpn, __ATOMIC_ACQUIRE),
	};
	/* tops and tpriv change under sq_lock; the progress lock we hold
	 * keeps a connection from being freed meanwhile */
	const struct srn_transport_ops *t = qp->tops;

	if (t) {
		snprintf(r.transport, sizeof(r.transport), "%s", t->name);
		snprintf(r.desc, sizeof(r.desc), "%s", t->describe(qp));
	}
	srn_ctl_sendmsg(c->pl.fd, &r, sizeof(r), NULL, 0);
}

/* The hand-off of a connection another process of our user accepted for
 * this QP (srn_ctl_classify checked the message). */
static void srn_ctl_on_adopt(struct srn_ctl_conn *c,
			     const struct srn_ctl_adopt *m, int *fds,
			     unsigned *nfds_p)
{
	if (!srn_transport_adopt(c->qp, fds[0], m->hello, m->hello_len))
		*nfds_p = 0; /* the transport owns the fd now */
}

/* Sends MEDIATE_REP: status, and the initiator's end fd (status 0). */
static void srn_ctl_mediate_rep(struct srn_ctl_conn *c, int status, int fd)
{
	struct srn_ctl_hdr h = { SRN_CTL_MAGIC, SRN_CTL_VERSION,
				 SRN_CTL_MEDIATE_REP, status, sizeof(h) };

	if (srn_ctl_sendmsg(c->pl.fd, &h, sizeof(h), &fd, status ? 0 : 1))
		srn_dbg("QP 0x%06x: MEDIATE_REP to pid %d not sent",
			c->qp->ibqpx.qp_base.qp_num, (int)c->pid);
}

/*
 * A mediated link for QP m->src_qpn, if the process at the other end of c
 * owns it (the kernel says so): a unix stream socket pair, one end to the
 * network transport with the hello, as a link whose peer is known by its
 * credentials (srn_transport_mediate: then the same checks as for any
 * link: our RTR attributes must name that QP, one link per QP, every
 * access checked here), the other end to the initiator. Nothing else is
 * ever served on c (srn_ctl_dispatch closes it).
 */
static void srn_ctl_on_mediate(struct srn_ctl_conn *c,
			       const struct srn_ctl_mediate *m)
{
	int sv[2], err = srn_ctl_conn_owns(c, m->src_qpn);

	c->served = err == -EAGAIN; /* not verified now: no refusal */
	if (err) {
		srn_ctl_mediate_rep(c, err, -1);
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0,
		       sv)) {
		srn_ctl_mediate_rep(c, -errno, -1);
		return;
	}
	err = srn_transport_mediate(c->qp, sv[0], m->src_qpn, m->hello,
				    m->hello_len);
	c->served = !err;
	if (err)
		close(sv[0]);
	srn_ctl_mediate_rep(c, err, sv[1]);
	close(sv[1]);
	srn_log(SRN_LOG_INFO,
		"QP 0x%06x: mediated link for QP 0x%06x of pid %d (uid %u): %s",
		c->qp->ibqpx.qp_base.qp_num, m->src_qpn, (int)c->pid,
		(unsigned)c->uid, err ? strerror(-err) : "up");
}

/* The initiator went away: without BYE, it crashed. A conn that never
 * attached (refused, pending, a probe, softrnic stat) touches no QP. */
static void srn_ctl_on_hangup(struct srn_ctl_conn *c)
{
	/* a UD QP has no peer: a sender that dies only stops sending */
	if (c->connected && !c->bye &&
	    c->qp->ibqpx.qp_base.qp_type != IBV_QPT_UD) {
		srn_warn("QP 0x%06x: peer QP 0x%06x (pid %d) died",
			 c->qp->ibqpx.qp_base.qp_num, c->src_qpn, (int)c->pid);
		if (c->qp->recv_cq) /* an XRC TGT QP has none */
			srn_cq_peer_died(c->qp->recv_cq);
		srn_qp_async_fatal(c->qp);
	}
	srn_ctl_conn_close(c);
}

/*
 * One message (srn_ctl_classify says what it may be). False when the conn
 * must be closed: a peer that has not attached and breaks the rules is
 * dropped (an attached one is only warned about: its hang-up would be
 * taken for its death).
 */
static bool srn_ctl_dispatch(struct srn_ctl_conn *c, const void *buf, size_t n,
			     int *fds, unsigned *nfds_p)
{
	const struct srn_ctl_hdr *h = buf; /* srn_ctl_on_conn's buffer */
	uint32_t qpn = c->qp->ibqpx.qp_base.qp_num;
	int t = srn_ctl_classify(buf, n, *nfds_p, qpn, c->connected);

	if (t >= 0 && c->foreign && t != SRN_CTL_MEDIATE) {
		srn_ctl_refused("QP 0x%06x: pid %d of uid %u, another user, "
				"may only ask for a mediated link: control "
				"message type %d refused",
				qpn, (int)c->pid, (unsigned)c->uid, t);
		return false;
	}
	if (t < 0) {
		srn_ctl_refused("QP 0x%06x: control message from pid %d "
				"rejected (%zu bytes, %u fds, type %u): %s",
				qpn, (int)c->pid, n, *nfds_p,
				n >= sizeof(*h) ? h->type : 0u, strerror(-t));
		return c->connected;
	}
	if (t == SRN_CTL_MEDIATE) {
		srn_ctl_on_mediate(c, buf);
		return false; /* one request per connection */
	} else if (t == SRN_CTL_ADOPT) {
		srn_ctl_on_adopt(c, buf, fds, nfds_p);
	} else if (t == SRN_CTL_STAT_REQ) {
		srn_ctl_on_stat(c);
	} else if (t == SRN_CTL_BYE) {
		c->bye = true;
		srn_dbg("QP 0x%06x: BYE from QP 0x%06x", qpn, c->src_qpn);
	} else if ((unsigned)t < SRN_ARRAY_SIZE(srn_ctl_handlers) &&
		   srn_ctl_handlers[t]) {
		srn_ctl_handlers[t](c, buf, n, fds, nfds_p);
	} else {
		srn_ctl_refused("QP 0x%06x: no handler for control message "
				"type %d",
				qpn, t);
		return c->connected;
	}
	return true;
}

/* Progress thread: a request, or the initiator went away. */
static void srn_ctl_on_conn(struct srn_pollable *pl, uint32_t events)
{
	struct srn_ctl_conn *c = container_of(pl, struct srn_ctl_conn, pl);
	uint64_t buf[SRN_CTL_MAX_MSG / sizeof(uint64_t) + 1];
	int fds[SRN_CTL_MAX_FDS];
	unsigned nfds = SRN_CTL_MAX_FDS;
	ssize_t n = srn_ctl_recvmsg(pl->fd, buf, sizeof(buf), fds, &nfds);
	bool keep;

	if (n < 0) {
		if (n != -ETIMEDOUT && n != -EINTR)
			srn_ctl_on_hangup(c);
		return;
	}
	keep = srn_ctl_dispatch(c, buf, (size_t)n, fds, &nfds);
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	if (!keep)
		srn_ctl_conn_close(c); /* never attached: no ERR */
}

/*
 * accept on listener pl failed with err. Out of fds or memory, pl would be
 * readable again at once: it is not listened to until SRN_CTL_PAUSE_NS
 * later (srn_ctl_hook_work), its queue waiting in the kernel meanwhile.
 */
static void srn_ctl_listen_pause(struct srn_pollable *pl, int err, uint64_t now)
{
	if (err != -EMFILE && err != -ENFILE && err != -ENOBUFS &&
	    err != -ENOMEM)
		return;
	if (!srn_list_empty(&pl->link) || srn_progress_mod(pl, 0))
		return;
	srn_list_add_tail(&pl->link, &srn_ctl_paused);
	srn_ctl_resume_ns = now + SRN_CTL_PAUSE_NS;
	srn_progress_wake_at(srn_ctl_resume_ns);
	srn_ctl_refused("control connections: %s: not accepted for %llu ms",
			strerror(-err),
			(unsigned long long)(SRN_CTL_PAUSE_NS / 1000000));
}

/*
 * A new connection to qp's socket. The kernel says whose process it is:
 * our user's or root's is served (srn_ctl_classify's rules), another
 * user's may only ask for a mediated link (srn_ctl_dispatch).
 */
static void srn_ctl_on_accept(struct srn_pollable *pl, uint32_t events)
{
	struct srn_qp *qp = pl->priv;
	struct srn_ctl_uid *fu = NULL;
	uint64_t now = srn_now_ns();
	struct srn_ctl_conn *c;
	struct ucred cr;
	int fd = accept4(pl->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	int err = fd < 0 ? -errno : srn_ctl_peercred(fd, &cr);

	if (fd < 0) {
		srn_ctl_listen_pause(pl, err, now);
		return;
	}
	if (!err && !srn_ctl_uid_ok(cr.uid)) {
		fu = srn_ctl_foreign_admit(cr.uid, now);
		if (!fu)
			err = -EUSERS; /* closed unread */
	}
	if (err) {
		srn_ctl_refused("QP 0x%06x: control connection refused: %s",
				qp->ibqpx.qp_base.qp_num, strerror(-err));
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->qp = qp;
	c->pid = cr.pid;
	c->uid = cr.uid;
	c->foreign = fu != NULL;
	if (fu)
		srn_ctl_foreign_add(c, fu, now);
	c->kick_fd = -1;
	c->def_fd = -1;
	srn_list_init(&c->ready_link);
	c->pl.fd = fd;
	c->pl.fn = srn_ctl_on_conn;
	c->pl.priv = c;
	pthread_mutex_lock(&qp->conn_lock);
	srn_list_add_tail(&c->pl.link, &qp->conns);
	pthread_mutex_unlock(&qp->conn_lock);
	if (srn_progress_add(&c->pl, EPOLLIN | EPOLLRDHUP))
		srn_ctl_conn_close(c);
}

/* Binds a free QPN on this host and listens on it. */
int srn_ctl_listen(struct srn_qp *qp)
{
	struct srn_pollable *pl = calloc(1, sizeof(*pl));
	struct sockaddr_un sa;
	uint32_t qpn = 0;
	int fd, err = -EADDRINUSE;

	if (!pl)
		return -ENOMEM;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		free(pl);
		return -errno;
	}
	qpn = srn_random_u32();
	for (int i = 0; i < 4096; i++) {
		socklen_t len;

		qpn = 0x100 + (qpn % (0xffffffu - 0x100));
		len = srn_ctl_addr(&sa, qpn);
		err = bind(fd, (struct sockaddr *)&sa, len) ? -errno : 0;
		if (err != -EADDRINUSE)
			break;
		qpn += 7919;
	}
	if (!err && listen(fd, 64))
		err = -errno;
	if (err) {
		close(fd);
		free(pl);
		return err;
	}
	qp->ibqpx.qp_base.qp_num = qpn;
	pl->fd = fd;
	pl->fn = srn_ctl_on_accept;
	pl->priv = qp;
	srn_list_init(&pl->link);
	qp->listener = pl;
	err = srn_progress_add(pl, EPOLLIN);
	if (err)
		srn_ctl_unlisten(qp);
	return err;
}

/* Reserves a host-unique XRC SRQ number: a bound abstract socket
 * (SRN_CTL_SRQ_SOCK_FMT) holds it until its fd is closed. The fd, or
 * -errno. */
int srn_ctl_srqn_reserve(uint32_t *srqn_p)
{
	struct sockaddr_un sa;
	uint32_t n = 0;
	int fd, err = -EADDRINUSE;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = srn_random_u32();
	for (int i = 0; i < 4096 && err == -EADDRINUSE; i++) {
		int k;

		n = 0x100 + (n % (0xffffffu - 0x100));
		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		k = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
			     SRN_CTL_SRQ_SOCK_FMT, n);
		err = bind(fd, (struct sockaddr *)&sa,
			   offsetof(struct sockaddr_un, sun_path) + 1 + k) ?
			      -errno :
			      0;
		if (err)
			n += 7919;
	}
	if (err) {
		close(fd);
		return err;
	}
	*srqn_p = n;
	return fd;
}

/* Closes the listener and every accepted connection (with BYE). */
void srn_ctl_unlisten(struct srn_qp *qp)
{
	struct srn_list *pos, *tmp;

	srn_progress_lock();
	if (qp->listener) {
		srn_list_del(&qp->listener->link); /* srn_ctl_paused */
		srn_progress_del(qp->listener);
		close(qp->listener->fd);
		free(qp->listener);
		qp->listener = NULL;
	}
	srn_list_for_each_safe(pos, tmp, &qp->conns) {
		struct srn_ctl_conn *c =
			container_of(pos, struct srn_ctl_conn, pl.link);

		srn_ctl_bye(c->pl.fd);
		c->served = true; /* our QP went: no refusal */
		srn_ctl_conn_close(c);
	}
	srn_progress_unlock();
}

/* Wakes the progress threads of the initiators connected to qp, and
 * tells the transports (their peers may wait for qp's receives). Requests
 * deferred until qp's RTR are answered by our progress thread. */
void srn_ctl_kick_peers(struct srn_qp *qp)
{
	enum ibv_qp_state st = srn_qp_state(qp);
	bool past_init = st != IBV_QPS_RESET && st != IBV_QPS_INIT;
	struct srn_list *pos, *tmp;

	pthread_mutex_lock(&qp->conn_lock);
	srn_list_for_each_safe(pos, tmp, &qp->conns) {
		struct srn_ctl_conn *c =
			container_of(pos, struct srn_ctl_conn, pl.link);

		if (c->kick_fd >= 0)
			srn_kick_fd(c->kick_fd);
		if (past_init) {
			pthread_mutex_lock(&srn_ctl_defer_lock);
			srn_ctl_defer_ready(c);
			pthread_mutex_unlock(&srn_ctl_defer_lock);
		}
	}
	pthread_mutex_unlock(&qp->conn_lock);
	srn_transport_kick(qp);
}

/* Progress thread (srn_ctl_wake): dispatches again the deferred requests
 * whose QP is now past INIT. */
static void srn_ctl_work(struct srn_pollable *pl, uint32_t events)
{
	struct srn_ctl_conn *c;
	uint64_t v;

	if (read(pl->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		srn_dbg("ctl wake read: %m");
	for (;;) {
		int fds[1];
		unsigned nfds;
		size_t len;
		void *m;
		bool keep;

		pthread_mutex_lock(&srn_ctl_defer_lock);
		c = srn_list_empty(&srn_ctl_ready) ?
			    NULL :
			    container_of(srn_ctl_ready.next,
					 struct srn_ctl_conn, ready_link);
		if (c) {
			srn_list_del(&c->ready_link);
			srn_list_init(&c->ready_link);
			m = c->def_msg;
			len = c->def_len;
			fds[0] = c->def_fd;
			c->def_msg = NULL;
			c->def_fd = -1;
		}
		pthread_mutex_unlock(&srn_ctl_defer_lock);
		if (!c)
			break;
		nfds = fds[0] >= 0;
		srn_dbg("QP 0x%06x: answering the kept request of pid %d",
			c->qp->ibqpx.qp_base.qp_num, (int)c->pid);
		keep = srn_ctl_dispatch(c, m, len, fds, &nfds);
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		free(m);
		if (!keep)
			srn_ctl_conn_close(c);
	}
}

/* The progress thread starts: its wake-up for deferred requests. */
static void srn_ctl_start(void)
{
	srn_ctl_wake.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	srn_ctl_wake.fn = srn_ctl_work;
	srn_list_init(&srn_ctl_wake.link);
	if (srn_ctl_wake.fd >= 0 && srn_progress_add(&srn_ctl_wake, EPOLLIN)) {
		close(srn_ctl_wake.fd);
		srn_ctl_wake.fd = -1;
	}
	if (srn_ctl_wake.fd < 0)
		srn_warn("control plane: no wake-up eventfd (%m): requests "
			 "to QPs before their RTR wait for the next one");
}

static void srn_ctl_stop(void)
{
	if (srn_ctl_wake.fd < 0)
		return;
	srn_progress_del(&srn_ctl_wake);
	close(srn_ctl_wake.fd);
	srn_ctl_wake.fd = -1;
}

/* Progress lock: listeners paused out of fds listen again when due. */
static void srn_ctl_resume(uint64_t now)
{
	struct srn_list *pos, *tmp;

	if (now < srn_ctl_resume_ns) {
		srn_progress_wake_at(srn_ctl_resume_ns);
		return;
	}
	srn_list_for_each_safe(pos, tmp, &srn_ctl_paused) {
		struct srn_pollable *pl =
			container_of(pos, struct srn_pollable, link);

		srn_list_del(&pl->link);
		if (srn_progress_mod(pl, EPOLLIN))
			srn_warn("a control socket listens no more: %m");
	}
}

/* Progress lock (the timer, a kick or an idle poll): other users'
 * connections that said nothing by their deadline are closed; the timer
 * is asked for the next deadline (srn_progress_wake_at keeps only the
 * earliest). */
static void srn_ctl_hook_work(bool idle)
{
	uint64_t now, next = 0;
	struct srn_list *pos, *tmp;

	if (srn_list_empty(&srn_ctl_foreign) && srn_list_empty(&srn_ctl_paused))
		return;
	now = srn_now_ns();
	if (!srn_list_empty(&srn_ctl_paused))
		srn_ctl_resume(now);
	srn_list_for_each_safe(pos, tmp, &srn_ctl_foreign) {
		struct srn_ctl_conn *c =
			container_of(pos, struct srn_ctl_conn, flink);

		if (c->deadline_ns > now) {
			if (!next || c->deadline_ns < next)
				next = c->deadline_ns;
			continue;
		}
		srn_ctl_refused("QP 0x%06x: pid %d of uid %u said nothing in "
				"%llu s: closed",
				c->qp->ibqpx.qp_base.qp_num, (int)c->pid,
				(unsigned)c->uid,
				SRN_CTL_FOREIGN_TIMEOUT_NS / 1000000000ull);
		srn_ctl_fstat.expired++;
		srn_ctl_conn_close(c);
	}
	if (next)
		srn_progress_wake_at(next);
}

static struct srn_progress_hooks srn_ctl_hooks = { .start = srn_ctl_start,
						   .stop = srn_ctl_stop,
						   .work = srn_ctl_hook_work };

/* In a forked child: the parent's connections are not ours to count
 * (the child's copies are never served: srn_progress_atfork_child). */
static void srn_ctl_atfork_child(void)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &srn_ctl_foreign) {
		struct srn_ctl_conn *c =
			container_of(pos, struct srn_ctl_conn, flink);

		srn_list_init(&c->flink);
		c->fuid = NULL;
	}
	srn_list_for_each_safe(pos, tmp, &srn_ctl_paused)
		srn_list_init(
			pos); /* a listener's pl.link (srn_ctl_unlisten) */
	srn_list_init(&srn_ctl_foreign);
	srn_list_init(&srn_ctl_paused);
	srn_ctl_nforeign = 0;
	memset(srn_ctl_uids, 0, sizeof(srn_ctl_uids));
}

__attribute__((constructor)) static void srn_ctl_init(void)
{
	srn_progress_hooks_add(&srn_ctl_hooks);
	pthread_atfork(NULL, NULL, srn_ctl_atfork_child);
}

/* A blocking connection to QP qpn's control socket, with send and receive
 * timeouts; *cr_p: the credentials of its owner. The fd, or -errno. */
static int srn_ctl_connect(uint32_t qpn, int timeout_s, struct ucred *cr_p)
{
	struct timeval tv = { timeout_s, 0 };
	struct sockaddr_un sa;
	socklen_t len = srn_ctl_addr(&sa, qpn);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int err;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	err = connect(fd, (struct sockaddr *)&sa, len) ? -errno : 0;
	if (!err)
		err = srn_ctl_peercred(fd, cr_p);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* Connects to the control socket of QP qpn on this host; a blocking
 * socket with send and receive timeouts. The fd, or -errno: -EACCES when
 * the QP belongs to another user, whose QPs serve us a mediated link only
 * (srn_ctl_mediate). */
int srn_ctl_dial(uint32_t qpn, int timeout_s)
{
	struct ucred cr;
	int fd = srn_ctl_connect(qpn, timeout_s, &cr);

	if (fd >= 0 && cr.uid != srn_euid && srn_euid != 0) {
		srn_err("QP 0x%06x belongs to pid %d of uid %u: processes of "
			"different users share nothing on this host but a "
			"mediated link (docs/security.md)",
			qpn, (int)cr.pid, (unsigned)cr.uid);
		close(fd);
		return -EACCES;
	}
	return fd;
}

/*
 * As srn_ctl_dial, for a QP that would share memory with the dialer: any
 * other user's QP (root's too, or root dialing another user's), or one of
 * a process of our user that may not ptrace us or we it (srn_self_kin:
 * one that is not dumpable, or under Yama's ptrace_scope >= 1) is -EACCES,
 * said at debug level only: the caller takes the mediated path instead
 * (srn_transport_connect). The dial itself asks the kernel who owns the
 * QP, so no separate probe is needed.
 */
int srn_ctl_dial_own(struct srn_qp *qp, uint32_t qpn, int timeout_s,
		     pid_t *pid_p)
{
	struct ucred cr;
	int fd = srn_ctl_connect(qpn, timeout_s, &cr);

	if (fd < 0)
		return fd;
	if (!srn_ctl_kin(&cr, qpn)) {
		close(fd);
		return -EACCES;
	}
	*pid_p = cr.pid;
	/* relaxed: a value on its own (srn_ctl_dialed_by reads it) */
	if (cr.pid > 0)
		atomic_store_explicit(&qp->ctl_dialed,
				      (uint64_t)(uint32_t)cr.pid << 32 | qpn,
				      memory_order_relaxed);
	return fd;
}

/* qp left the peer it dialed: its record of who owned it goes. */
void srn_ctl_undial(struct srn_qp *qp)
{
	/* relaxed: as in srn_ctl_dial_own */
	atomic_store_explicit(&qp->ctl_dialed, 0, memory_order_relaxed);
}

/* Receives MEDIATE_REP on s: the link's end, or -errno. */
static int srn_ctl_mediate_wait(int s, uint32_t qpn)
{
	struct srn_ctl_hdr h;
	int fds[SRN_CTL_MAX_FDS];
	unsigned nfds = SRN_CTL_MAX_FDS;
	ssize_t n = srn_ctl_recvmsg(s, &h, sizeof(h), fds, &nfds);
	int err = 0;

	if (n < 0)
		err = (int)n;
	else if (n != sizeof(h) || h.magic != SRN_CTL_MAGIC ||
		 h.version != SRN_CTL_VERSION ||
		 h.type != SRN_CTL_MEDIATE_REP || h.len != sizeof(h) ||
		 h.status > 0 || nfds != (h.status ? 0u : 1u))
		err = -EPROTO;
	else
		err = h.status;
	if (!err)
		return fds[0];
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	srn_dbg("QP 0x%06x: no mediated link: %s", qpn, strerror(-err));
	return err;
}

/* One MEDIATE request (srn_ctl_mediate): the link's end or -errno. */
static int srn_ctl_mediate_once(uint32_t qpn, uint32_t src_qpn,
				const void *hello, size_t len, int timeout_s)
{
	struct srn_ctl_mediate m = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_MEDIATE, 0,
			 sizeof(m) },
		.dst_qpn = qpn,
		.src_qpn = src_qpn,
		.hello_len = (uint32_t)len,
	};
	struct ucred cr;
	int s, fd;

	if (len > sizeof(m.hello))
		return -EINVAL;
	memcpy(m.hello, hello, len);
	s = srn_ctl_connect(qpn, timeout_s, &cr);
	if (s < 0)
		return s;
	fd = srn_ctl_sendmsg(s, &m, sizeof(m), NULL, 0);
	if (!fd)
		fd = srn_ctl_mediate_wait(s, qpn);
	close(s);
	/* the target made it non-blocking: our end is ours to set */
	if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		close(fd);
		return -errno;
	}
	return fd;
}

/*
 * Asks QP qpn of this host, another user's, for a mediated link: our QP
 * src_qpn (its owner checks with the kernel that we own it) says hello
 * (the transport's first message, len bytes). The link's end, a blocking
 * unix stream socket, or -errno (-ECONNREFUSED: no such QP). A connection
 * closed unanswered was over the target's caps on our user's connections
 * (others of ours are asking too, or flooding): asked again, waiting a
 * little longer each time, for timeout_s in all.
 */
int srn_ctl_mediate(uint32_t qpn, uint32_t src_qpn, const void *hello,
		    size_t len, int timeout_s)
{
	uint64_t end = srn_now_ns() + (uint64_t)timeout_s * 1000000000ull;
	useconds_t pause = 10000;
	int fd;

	for (;;) {
		fd = srn_ctl_mediate_once(qpn, src_qpn, hello, len, timeout_s);
		if ((fd != -ECONNRESET && fd != -EPIPE) ||
		    srn_now_ns() + pause * 1000ull >= end)
			return fd;
		srn_dbg("QP 0x%06x: MEDIATE closed unanswered: again in %u ms",
			qpn, (unsigned)(pause / 1000));
		usleep(pause);
		if (pause < 200000)
			pause *= 2;
	}
}

/* Passes a connection a transport accepted to the process that owns QP
 * qpn, with the first message read on it (hello). */
int srn_ctl_handoff(uint32_t qpn, int fd, const void *hello, size_t len)
{
	struct srn_ctl_adopt m = {
		.hdr = { SRN_CTL_MAGIC, SRN_CTL_VERSION, SRN_CTL_ADOPT, 0,
			 sizeof(m) },
		.dst_qpn = qpn,
		.hello_len = (uint32_t)len,
	};
	int s, err;

	if (len > sizeof(m.hello))
		return -EINVAL;
	memcpy(m.hello, hello, len);
	s = srn_ctl_dial(qpn, SRN_CTL_TIMEOUT_S);
	if (s < 0)
		return s;
	err = srn_ctl_sendmsg(s, &m, sizeof(m), &fd, 1);
	close(s);
	return err;
}
