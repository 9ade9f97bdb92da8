// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the ONC-RPC message headers (RFC 5531) of the common
 * cases, through libtirpc's in-line buffer access (XDR_INLINE, IXDR_*),
 * as libtirpc's own xdr_callmsg does: a call header, an accepted and
 * successful reply with an empty verifier. Everything else goes through
 * libtirpc's xdr_callhdr / xdr_replymsg. On the same host a round trip
 * encodes and decodes these headers once each way; the general walk over
 * struct rpc_msg cost about 100 ns of it here (docs/BENCHMARKS.md).
 */
#include <string.h>

#include "rpc/srn_rpc.h"

#define SRN_RPC_HDR_WORDS 6

/* A call's header and procedure number (the credential and verifier
 * follow: AUTH_MARSHALL). */
bool_t srn_rpc_xdr_call_head(XDR *x, uint32_t xid, rpcprog_t prog,
			     rpcvers_t vers, rpcproc_t proc)
{
	int32_t *p = XDR_INLINE(x, SRN_RPC_HDR_WORDS * BYTES_PER_XDR_UNIT);
	struct rpc_msg m;

	if (p) {
		IXDR_PUT_U_INT32(p, xid);
		IXDR_PUT_ENUM(p, CALL);
		IXDR_PUT_U_INT32(p, RPC_MSG_VERSION);
		IXDR_PUT_U_INT32(p, prog);
		IXDR_PUT_U_INT32(p, vers);
		IXDR_PUT_U_INT32(p, proc);
		return TRUE;
	}
	memset(&m, 0, sizeof(m));
	m.rm_xid = xid;
	m.rm_direction = CALL;
	m.rm_call.cb_rpcvers = RPC_MSG_VERSION;
	m.rm_call.cb_prog = prog;
	m.rm_call.cb_vers = vers;
	return xdr_callhdr(x, &m) && xdr_u_int32_t(x, &proc);
}

/* Is m an accepted, successful reply with an empty verifier? */
static bool srn_rpc_reply_plain(const struct rpc_msg *m)
{
	return m->rm_direction == REPLY &&
	       m->rm_reply.rp_stat == MSG_ACCEPTED &&
	       m->acpted_rply.ar_stat == SUCCESS &&
	       m->acpted_rply.ar_verf.oa_length == 0;
}

/* Encodes reply m (xdr_replymsg's result). */
bool_t srn_rpc_xdr_reply(XDR *x, struct rpc_msg *m)
{
	int32_t *p;

	if (!srn_rpc_reply_plain(m))
		return xdr_replymsg(x, m);
	p = XDR_INLINE(x, SRN_RPC_HDR_WORDS * BYTES_PER_XDR_UNIT);
	if (!p)
		return xdr_replymsg(x, m);
	IXDR_PUT_U_INT32(p, m->rm_xid);
	IXDR_PUT_ENUM(p, REPLY);
	IXDR_PUT_ENUM(p, MSG_ACCEPTED);
	IXDR_PUT_ENUM(p, m->acpted_rply.ar_verf.oa_flavor);
	IXDR_PUT_U_INT32(p, 0);
	IXDR_PUT_ENUM(p, SUCCESS);
	return m->acpted_rply.ar_results.proc(x,
					      m->acpted_rply.ar_results.where);
}

/*
 * Decodes a reply to call xid that is accepted, successful and carries an
 * empty AUTH_NONE verifier: 1 (its results decoded into resp), 0 (they
 * did not decode). -1: not that case; x is where it was (decode it with
 * xdr_replymsg).
 */
int srn_rpc_xdr_reply_plain(XDR *x, uint32_t xid, xdrproc_t xres, void *resp)
{
	u_int pos = xdr_getpos(x);
	int32_t *p = XDR_INLINE(x, SRN_RPC_HDR_WORDS * BYTES_PER_XDR_UNIT);

	if (!p)
		return -1;
	if (IXDR_GET_U_INT32(p) != xid || IXDR_GET_ENUM(p, int) != REPLY ||
	    IXDR_GET_ENUM(p, int) != MSG_ACCEPTED ||
	    IXDR_GET_ENUM(p, int) != AUTH_NONE || IXDR_GET_U_INT32(p) != 0 ||
	    IXDR_GET_ENUM(p, int) != SUCCESS) {
		xdr_setpos(x, pos);
		return -1;
	}
	return xres(x, resp) ? 1 : 0;
}
