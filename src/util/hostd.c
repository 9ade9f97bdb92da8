// SPDX-License-Identifier: MIT
/*
 * softrnic — finding the optional host daemon (`softrnic daemon`,
 * docs/security.md), for every layer that listens on a host-wide port:
 * the transport's listener and the rdma_cm service (rdmacm/cm_hostd.c).
 *
 * The daemon runs with SOFTRNIC_DAEMON=1 and holds the abstract unix
 * socket SRN_CTL_HOSTD_SOCK, a marker: a process that finds a host-wide
 * port taken checks that a root process holds the marker (SO_PEERCRED)
 * and then relies on the daemon to hand its connections over instead of
 * warning that it is unreachable.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/srn_ctl_proto.h"
#include "util/util.h"

/* True in `softrnic daemon` (SOFTRNIC_DAEMON=1). */
bool srn_hostd_mode(void)
{
	const char *e = getenv("SOFTRNIC_DAEMON");

	return e && !strcmp(e, "1");
}

/* The marker's address; its length. */
socklen_t srn_hostd_addr(struct sockaddr_un *sa)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "%s",
		     SRN_CTL_HOSTD_SOCK);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* The pid of the root process that holds the marker (the host daemon),
 * or -errno: -ENOENT none, -EPERM one that is not root's. */
int srn_hostd_pid(void)
{
	struct sockaddr_un sa;
	socklen_t len = srn_hostd_addr(&sa), clen = sizeof(struct ucred);
	struct ucred cr = { 0 };
	int fd = srn_socket(AF_UNIX,
			    SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int err;

	if (fd < 0)
		return -errno;
	err = connect(fd, (struct sockaddr *)&sa, len) ? -errno : 0;
	if (!err && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &clen))
		err = -errno;
	close(fd);
	if (err == -ECONNREFUSED)
		err = -ENOENT;
	if (!err && (cr.uid != 0 || cr.pid <= 0))
		err = -EPERM;
	return err ? err : cr.pid;
}

#define SRN_HOSTD_FD0 3 /* SD_LISTEN_FDS_START */
#define SRN_HOSTD_PASSED_MAX 16 /* sockets systemd may pass us */

/* fd is a socket of this type (a stream one listening) and family
 * (AF_UNSPEC: IPv4 or IPv6) on port port. */
static bool srn_hostd_fd_is(int fd, int type, int family, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss), a = sizeof(int), b = sizeof(int);
	int v = 0, ty = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &ty, &b) || ty != type ||
	    (type == SOCK_STREAM &&
	     (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &a) || !v)) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl))
		return false;
	if (family != AF_UNSPEC && ss.ss_family != family)
		return false;
	if (ss.ss_family == AF_INET6)
		return be16toh(((struct sockaddr_in6 *)&ss)->sin6_port) == port;
	return ss.ss_family == AF_INET &&
	       be16toh(((struct sockaddr_in *)&ss)->sin_port) == port;
}

/*
 * A socket systemd passed (sd_listen_fds protocol: LISTEN_PID is us,
 * LISTEN_FDS of them from fd 3; softrnic.socket) of this type and family
 * on port port, told apart from the others by them, made non-blocking and
 * close-on-exec. The environment is left as it is. fd, -ENOENT when none
 * is, or -errno.
 */
int srn_hostd_passed_fd(int type, int family, uint16_t port)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
	long nfds = n ? strtol(n, NULL, 10) : 0;

	if (!pid || strtol(pid, NULL, 10) != getpid() || nfds < 1)
		return -ENOENT;
	if (nfds > SRN_HOSTD_PASSED_MAX)
		nfds = SRN_HOSTD_PASSED_MAX;
	for (int fd = SRN_HOSTD_FD0; fd < SRN_HOSTD_FD0 + nfds; fd++) {
		if (!srn_hostd_fd_is(fd, type, family, port))
			continue;
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ||
		    fcntl(fd, F_SETFD, FD_CLOEXEC))
			return -errno;
		return fd;
	}
	return -ENOENT;
}
