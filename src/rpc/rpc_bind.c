// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — registration with rpcbind (libtirpc's pmap_set/pmap_unset,
 * which rpcbind serves as versions 2 to 4), on udp and tcp, when the
 * application asked for it and an rpcbind listens on this host.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rpc/pmap_clnt.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/srn_rpc.h"

/* Is something listening on 127.0.0.1:111? Connecting to nothing fails
 * at once on loopback, where libtirpc would wait for its timeout. */
static bool srn_rpc_bind_runs(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	sa.sin_port = htons(PMAPPORT);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

void srn_rpc_bind_set(struct srn_rpc_server *srv, bool on)
{
	unsigned i;

	if (!srv->attr.rpcbind || on == srv->bound)
		return;
	if (on && !srn_rpc_bind_runs())
		return;
	for (i = 0; i < srv->nprogs; i++) {
		struct srn_rpc_prog *p = &srv->progs[i];

		pmap_unset(p->prog, p->vers);
		if (!on)
			continue;
		pmap_set(p->prog, p->vers, IPPROTO_UDP, srv->port);
		pmap_set(p->prog, p->vers, IPPROTO_TCP, srv->port);
	}
	srv->bound = on;
}
