/* SPDX-License-Identifier: MIT */
/* softrnic RPC — softrnic's own clients: same host (rpc_clnt_shm.c), UDP
 * (rpc_clnt_udp.c), TCP (rpc_clnt_tcp.c). */
#ifndef SRN_RPC_CLNT_H
#define SRN_RPC_CLNT_H

#include "rpc/srn_rpc.h"

CLIENT *srn_rpc_clnt_shm_create(rpcprog_t prog, rpcvers_t vers);
AUTH *srn_rpc_authnone(void);
CLIENT *srn_rpc_clnt_udp_create(const struct sockaddr_in *to, rpcprog_t prog,
				rpcvers_t vers);
CLIENT *srn_rpc_clnt_tcp_create(const struct sockaddr_in *to, rpcprog_t prog,
				rpcvers_t vers);

/* rpc_clnt_ctl.c: the state every client of ours has */
struct srn_rpc_cstate {
	int fd; /* its socket (CLGET_FD) */
	struct sockaddr_in to; /* the network clients' server */
	rpcprog_t prog;
	rpcvers_t vers;
	uint32_t xid;
	struct timeval total; /* CLSET_TIMEOUT's, when total_set */
	bool total_set;
};

bool srn_rpc_cstate_control(struct srn_rpc_cstate *n, u_int rq, void *info);

#endif /* SRN_RPC_CLNT_H */
