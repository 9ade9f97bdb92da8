// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — what softrnic's clients (rpc_clnt_shm.c, rpc_clnt_udp.c,
 * rpc_clnt_tcp.c) share: the clnt_control requests of libtirpc's own
 * clients that concern a socket, a program, an xid and the timeout.
 */
#define _GNU_SOURCE
#include <string.h>

#include "rpc/rpc_clnt.h"

/* One request; false for those this state does not answer. */
bool srn_rpc_cstate_control(struct srn_rpc_cstate *n, u_int rq, void *info)
{
	switch (rq) {
	case CLSET_TIMEOUT:
		n->total = *(struct timeval *)info;
		n->total_set = true;
		return true;
	case CLGET_TIMEOUT:
		*(struct timeval *)info = n->total;
		return true;
	case CLGET_SERVER_ADDR:
		memcpy(info, &n->to, sizeof(n->to));
		return true;
	case CLGET_FD:
		*(int *)info = n->fd;
		return true;
	case CLGET_XID:
		*(uint32_t *)info = n->xid;
		return true;
	case CLSET_XID:
		n->xid = *(uint32_t *)info - 1;
		return true;
	case CLGET_PROG:
		*(rpcprog_t *)info = n->prog;
		return true;
	case CLGET_VERS:
		*(rpcvers_t *)info = n->vers;
		return true;
	case CLSET_PROG:
		n->prog = *(rpcprog_t *)info;
		return true;
	case CLSET_VERS:
		n->vers = *(rpcvers_t *)info;
		return true;
	}
	return false;
}
