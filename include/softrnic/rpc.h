/* SPDX-License-Identifier: MIT */
/*
 * softrnic RPC: ONC-RPC (RFC 5531) served by softrnic, where the "NIC"
 * hands each call straight to a waiting worker thread (Lauberhorn in
 * software; docs/rpc.md).
 *
 * A server registers the dispatch functions rpcgen -M -m generates,
 * unmodified; they run on softrnic's own SVCXPRT (one per worker), so
 * svc_getargs, svc_sendreply, svcerr_* and svc_freeargs work as usual.
 * Network clients (libtirpc's clnt_create "udp"/"tcp", rpcinfo) reach the
 * server on its UDP and TCP port; clients on this host created with
 * srn_clnt_create(host, prog, vers, "shm" or "auto") write their calls
 * straight into a waiting worker's slot in shared memory.
 *
 * XDR and the ONC-RPC types come from libtirpc (pkg-config libtirpc);
 * link with pkg-config softrnic-rpc.
 */
#ifndef SOFTRNIC_RPC_H
#define SOFTRNIC_RPC_H

#include <rpc/rpc.h>

#ifdef __cplusplus
extern "C" {
#endif

struct srn_rpc_server_attr {
	const char *addr; /* address for network clients; NULL = any */
	unsigned short port; /* UDP and TCP port; 0 = a free port */
	unsigned min_workers; /* worker threads kept ready (0 = 1) */
	unsigned max_workers; /* upper bound (0 = number of CPUs) */
	int rpcbind; /* nonzero: register with rpcbind when it runs */
};

struct srn_rpc_server;

/* NULL and errno on failure. */
struct srn_rpc_server *
srn_rpc_server_create(const struct srn_rpc_server_attr *attr);
/* 0 or an errno value. */
int srn_rpc_server_register(struct srn_rpc_server *srv, rpcprog_t prog,
			    rpcvers_t vers,
			    void (*dispatch)(struct svc_req *, SVCXPRT *));
/* Serves (the calling thread is a worker) until stop; 0 or an errno. */
int srn_rpc_server_run(struct srn_rpc_server *srv);
/* Async-signal-safe: makes run return. */
void srn_rpc_server_stop(struct srn_rpc_server *srv);
void srn_rpc_server_destroy(struct srn_rpc_server *srv);
unsigned short srn_rpc_server_port(const struct srn_rpc_server *srv);

/*
 * A standard CLIENT. host: a name or address, optionally ":port"; nettype
 * "auto" (shared memory on this host, else TCP), "shm", "tcp" or "udp".
 * NULL on failure, with rpc_createerr set.
 */
CLIENT *srn_clnt_create(const char *host, rpcprog_t prog, rpcvers_t vers,
			const char *nettype);

#ifdef __cplusplus
}
#endif

#endif /* SOFTRNIC_RPC_H */
