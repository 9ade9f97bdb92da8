/* SPDX-License-Identifier: MIT */
/* softrnic RPC — softrnic's own clients: same host (rpc_clnt_shm.c), UDP
 * (rpc_clnt_udp.c). */
#ifndef SRN_RPC_CLNT_H
#define SRN_RPC_CLNT_H

#include "rpc/srn_rpc.h"

CLIENT *srn_rpc_clnt_shm_create(rpcprog_t prog, rpcvers_t vers);
AUTH *srn_rpc_authnone(void);
CLIENT *srn_rpc_clnt_udp_create(const struct sockaddr_in *to, rpcprog_t prog,
				rpcvers_t vers);

#endif /* SRN_RPC_CLNT_H */
