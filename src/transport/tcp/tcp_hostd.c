// SPDX-License-Identifier: MIT
/*
 * softrnic — the host daemon's side of the host-wide listener.
 *
 * By default every process listens on the softrnic port with SO_REUSEPORT
 * (tcp_responder.c), which the kernel allows only among processes of one
 * user: a second user's processes cannot listen and are reachable from
 * this host only. `softrnic daemon` (tools/, as root) opens the device with
 * SOFTRNIC_DAEMON=1: its listener then holds the port alone (no
 * SO_REUSEPORT, or the socket systemd passed, sd_listen_fds protocol), and
 * since the daemon owns no QP, the responder hands every connection that
 * says HELLO to the owner of its QP (srn_ctl_handoff, which root may do
 * for any user) and closes its own copy: the daemon is on the control
 * path only, never on the data path.
 *
 * The daemon also listens on the abstract unix socket SRN_CTL_HOSTD_SOCK,
 * a marker that says nothing (every connection is closed at once): a
 * process that finds the port (or the rdma_cm port, which the daemon's
 * librdmacm holds: rdmacm/cm_hostd.c) taken checks that a root process
 * holds the marker (SO_PEERCRED, util/hostd.c) and then relies on the
 * daemon instead of warning that it is unreachable (docs/security.md). Under systemd both are the
 * socket unit's (softrnic.socket, dist/systemd/), so they exist before the
 * daemon runs and the first connection to either starts it.
 *
 * UD datagrams (tcp_ud.c): the daemon also holds UDP port 4791 alone (no
 * SO_REUSEADDR nor SO_REUSEPORT, or the datagram socket systemd passed),
 * checks each datagram's header and forwards it to its QP's owner's
 * unix socket, as any process of the host does for a QPN it does not
 * own; the owner accepts it since root forwarded it. Unlike connections,
 * datagrams do pass through the daemon (one copy each), but it delivers
 * none into a QP of another process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/srn_ctl_proto.h"
#include "transport/tcp/tcp.h"
#include "util/util.h"

#define SRN_HOSTD_LISTEN_FD 3 /* SD_LISTEN_FDS_START */
#define SRN_HOSTD_MARK_BATCH 16

static struct srn_pollable srn_hostd_mark = { .fd = -1 };

static int srn_hostd_mark_inherited = -1; /* systemd's second socket */

/* fd is a listening socket of that domain and type. */
static bool srn_hostd_is_listener(int fd, int domain, int type)
{
	int v = 0, dom = 0, ty = 0;
	socklen_t a = sizeof(v), b = sizeof(dom), c = sizeof(ty);

	return !getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &a) && v &&
	       !getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &b) &&
	       dom == domain && !getsockopt(fd, SOL_SOCKET, SO_TYPE, &ty, &c) &&
	       ty == type &&
	       !fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) &&
	       !fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* The sockets systemd passed (sd_listen_fds protocol: LISTEN_PID is us,
 * LISTEN_FDS of them from fd 3; softrnic.socket): the port, an IPv4
 * listening stream socket, and optionally the marker, a listening unix
 * seqpacket socket (a third one, the CM port's, is librdmacm's, which
 * took it before the device opened). The port's fd; -ENOENT when nothing was passed,
 * -EBADF when fd 3 is not such a socket. */
static int srn_hostd_inherited(void)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
	long nfds = n ? strtol(n, NULL, 10) : 0;
	int fd = SRN_HOSTD_LISTEN_FD;

	if (!pid || strtol(pid, NULL, 10) != getpid() || nfds < 1)
		return -ENOENT;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (nfds >= 2 && srn_hostd_is_listener(fd + 1, AF_UNIX, SOCK_SEQPACKET))
		srn_hostd_mark_inherited = fd + 1;
	if (!srn_hostd_is_listener(fd, AF_INET, SOCK_STREAM))
		return -EBADF;
	return fd;
}

/* The daemon's listening socket: the one systemd passed, else sa bound
 * without SO_REUSEPORT (no other process may share the port). fd or
 * -errno. */
int srn_tcp_hostd_listen(const struct sockaddr_in *sa)
{
	int one = 1, fd = srn_hostd_inherited();

	if (fd >= 0 || fd != -ENOENT) {
		if (fd < 0)
			srn_warn("socket activation: fd %d is not a listening "
				 "IPv4 TCP socket",
				 SRN_HOSTD_LISTEN_FD);
		return fd;
	}
	fd = srn_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) ||
	    listen(fd, SOMAXCONN)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* The daemon's UDP socket (tcp_ud.c): the one systemd passed, else sa
 * bound alone (neither SO_REUSEADDR nor SO_REUSEPORT: no process of any
 * user may share the port, so every datagram from other hosts is the
 * daemon's to forward). fd or -errno. */
int srn_tcp_hostd_udp(const struct sockaddr_in *sa)
{
	/* ListenDatagram= in softrnic.socket; before srn_hostd_inherited
	 * takes LISTEN_FDS away */
	int fd = srn_hostd_passed_fd(SOCK_DGRAM, AF_INET, ntohs(sa->sin_port));

	if (fd != -ENOENT)
		return fd;
	fd = srn_socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* A connection to the marker: closed at once (it only says "here"). */
static void srn_hostd_on_mark(struct srn_pollable *pl, uint32_t events)
{
	(void)events;
	for (int i = 0; i < SRN_HOSTD_MARK_BATCH; i++) {
		int fd = accept4(pl->fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			return;
		close(fd);
	}
}

/* The daemon, once it listens: bind and listen on the marker. */
int srn_tcp_hostd_mark_start(void)
{
	struct sockaddr_un sa;
	socklen_t len = srn_hostd_addr(&sa);
	int fd = srn_hostd_mark_inherited;

	if (fd < 0)
		fd = srn_socket(AF_UNIX,
				SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
				0);
	if (fd < 0)
		return -errno;
	if (fd != srn_hostd_mark_inherited &&
	    (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 64))) {
		int err = -errno;

		close(fd);
		return err;
	}
	srn_hostd_mark.fd = fd;
	srn_hostd_mark.fn = srn_hostd_on_mark;
	if (srn_progress_add(&srn_hostd_mark, EPOLLIN)) {
		close(fd);
		srn_hostd_mark.fd = -1;
		return -ENOMEM;
	}
	return 0;
}

void srn_tcp_hostd_mark_stop(void)
{
	if (srn_hostd_mark.fd < 0)
		return;
	srn_progress_del(&srn_hostd_mark);
	close(srn_hostd_mark.fd);
	srn_hostd_mark.fd = srn_hostd_mark_inherited = -1;
}
