// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: the host daemon's side of the CM port.
 *
 * By default every listening process holds the CM port (SOFTRNIC_CM_PORT,
 * default 4790) with SO_REUSEPORT (cm_svc.c), which the kernel allows
 * only among the processes of one user: a second user's rdma_listen is
 * not reachable from other hosts. `softrnic daemon` (tools/, as root)
 * loads this library with SOFTRNIC_DAEMON=1: its CM service then holds
 * the port alone (no SO_REUSEPORT, or the socket systemd passed, found
 * among LISTEN_FDS by its port), reads each connection's REQ (SIDR REQ
 * for the UD port spaces) with the service's checks, deadline and caps,
 * and, since the daemon listens on no rdma_cm port, hands every
 * connection to the process that holds the port the REQ names (its
 * abstract hand-off socket SRN_CM_SOCK_FMT, which takes root's hand-offs)
 * or answers REJ when nobody does: the daemon is on the CM's first message
 * only, never on the connection afterwards.
 *
 * A process whose listener finds the port taken checks the daemon's
 * marker (util/hostd.c, root's by SO_PEERCRED) and relies on it; its
 * bound ports' hand-off sockets are what the daemon finds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdmacm/cm.h"

/* The daemon's CM listener: systemd's socket, else the port bound alone.
 * 0 or -errno (said). */
static int srn_cm_hostd_start(void)
{
	/* the CM port's socket among those systemd passed; the transport's
	 * listener takes its own when the device opens, after us */
	int fd = srn_hostd_passed_fd(SOCK_STREAM, AF_UNSPEC,
				     srn_cm_service_port()),
	    ret;

	if (fd == -ENOENT)
		fd = srn_cm_listen_open(false);
	if (fd < 0) {
		srn_warn("host daemon: cannot hold the CM port %u: %s",
			 srn_cm_service_port(), strerror(-fd));
		return fd;
	}
	pthread_mutex_lock(&srn_cm.lock);
	ret = srn_cm_listen_adopt(fd);
	if (!ret)
		srn_cm.listeners++; /* for ever: it never listens on a port */
	pthread_mutex_unlock(&srn_cm.lock);
	if (ret)
		srn_warn("host daemon: CM service: %s", strerror(-ret));
	else
		srn_dbg("host daemon: holds the CM port %u",
			srn_cm_service_port());
	return ret;
}

/* Loaded by `softrnic daemon` (SOFTRNIC_DAEMON=1): hold the CM port at
 * once; the daemon checks that it does (tools/softrnic.c). */
__attribute__((constructor)) static void srn_cm_hostd_init(void)
{
	if (srn_hostd_mode())
		srn_cm_hostd_start();
}
