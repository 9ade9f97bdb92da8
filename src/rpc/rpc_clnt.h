/* SPDX-License-Identifier: MIT */
/* softrnic RPC — the same-host client (rpc_clnt_shm.c). */
#ifndef SRN_RPC_CLNT_H
#define SRN_RPC_CLNT_H

#include "rpc/srn_rpc.h"

CLIENT *srn_rpc_clnt_shm_create(rpcprog_t prog, rpcvers_t vers);

#endif /* SRN_RPC_CLNT_H */
