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
#include <errno.h>
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
