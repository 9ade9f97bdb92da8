// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the ONC-RPC message headers (RFC 5531) of the common
 * cases, through libtirpc's in-line buffer access (XDR_INLINE, IXDR_*),
 * as libtirpc's own xdr_callmsg does: a call header with AUTH_NONE
 * credential and verifier (both ways), an accepted and successful reply
 * with an empty verifier. Everything else goes through libtirpc's
 * xdr_callhdr / AUTH_MARSHALL / xdr_opaque_auth / xdr_replymsg. On the
 * same host a round trip encodes and decodes these headers once each
 * way; the general walk over struct rpc_msg, and authnone_marshal's lock,
 * cost about 100 ns of it each here (docs/BENCHMARKS.md).
 */
#include <errno.h>
#include <string.h>

#include "rpc/srn_rpc.h"

#define SRN_RPC_HDR_WORDS 6
/* AUTH_NONE's credential and verifier: flavor 0, length 0, twice */
#define SRN_RPC_NONE_WORDS 4

/* Are auth's credential and verifier both AUTH_NONE and empty? Their
 * encoding is then four zero words (RFC 5531), which AUTH_MARSHALL would
 * write through libtirpc's locked authnone_marshal (a mutex per call). */
static bool srn_rpc_auth_none(const AUTH *auth)
{
	return auth->ah_cred.oa_flavor == AUTH_NONE &&
	       auth->ah_cred.oa_length == 0 &&
	       auth->ah_verf.oa_flavor == AUTH_NONE &&
	       auth->ah_verf.oa_length == 0;
}

/* A call's header, procedure number, credential and verifier (the
 * arguments follow). */
bool_t srn_rpc_xdr_call_head(XDR *x, uint32_t xid, rpcprog_t prog,
			     rpcvers_t vers, rpcproc_t proc, AUTH *auth)
{
	bool none = srn_rpc_auth_none(auth);
	int32_t *p = XDR_INLINE(
		x, (SRN_RPC_HDR_WORDS + (none ? SRN_RPC_NONE_WORDS : 0)) *
			   BYTES_PER_XDR_UNIT);
	struct rpc_msg m;

	if (p) {
		IXDR_PUT_U_INT32(p, xid);
		IXDR_PUT_ENUM(p, CALL);
		IXDR_PUT_U_INT32(p, RPC_MSG_VERSION);
		IXDR_PUT_U_INT32(p, prog);
		IXDR_PUT_U_INT32(p, vers);
		IXDR_PUT_U_INT32(p, proc);
		if (!none)
			return AUTH_MARSHALL(auth, x);
		IXDR_PUT_ENUM(p, AUTH_NONE); /* credential */
		IXDR_PUT_U_INT32(p, 0);
		IXDR_PUT_ENUM(p, AUTH_NONE); /* verifier */
		IXDR_PUT_U_INT32(p, 0);
		return TRUE;
	}
	memset(&m, 0, sizeof(m));
	m.rm_xid = xid;
	m.rm_direction = CALL;
	m.rm_call.cb_rpcvers = RPC_MSG_VERSION;
	m.rm_call.cb_prog = prog;
	m.rm_call.cb_vers = vers;
	return xdr_callhdr(x, &m) && xdr_u_int32_t(x, &proc) &&
	       AUTH_MARSHALL(auth, x);
}

/* The rest of a call header with AUTH_NONE credential and verifier, in
 * place at fixed offsets (the common case). false: not that case; x is
 * where it was. */
static bool srn_rpc_call_parse_none(XDR *x, struct srn_rpc_call_hdr *h)
{
	int32_t *p =
		XDR_INLINE(x, (3 + SRN_RPC_NONE_WORDS) * BYTES_PER_XDR_UNIT);

	if (!p)
		return false;
	if (p[3] || p[4] || p[5] || p[6]) {
		/* a credential or verifier: back to the procedure number */
		xdr_setpos(x, xdr_getpos(x) - (3 + SRN_RPC_NONE_WORDS) *
						      BYTES_PER_XDR_UNIT);
		return false;
	}
	h->prog = IXDR_GET_U_INT32(p);
	h->vers = IXDR_GET_U_INT32(p);
	h->proc = IXDR_GET_U_INT32(p);
	h->cred = _null_auth;
	h->verf = _null_auth;
	return true;
}

/*
 * Decodes the header of the call message x holds (RFC 5531: xid, CALL,
 * RPC version, program, version, procedure, credential, verifier), in
 * place where libtirpc's in-line access allows, else with its XDR
 * routines; bodies (2 * MAX_AUTH_BYTES) receives the credential's and
 * the verifier's bodies. 0: *h is the call and x is at its arguments;
 * SRN_RPC_HDR_MISMATCH: a call of another RPC version (h->xid is set,
 * for the RPC_MISMATCH reply); -EBADMSG: anything else (not a call, cut
 * short, an oversized body): dropped.
 */
int srn_rpc_call_parse(XDR *x, struct srn_rpc_call_hdr *h, char *bodies)
{
	int32_t *p = XDR_INLINE(x, 3 * BYTES_PER_XDR_UNIT);

	if (!p)
		return -EBADMSG;
	h->xid = IXDR_GET_U_INT32(p);
	if (IXDR_GET_ENUM(p, enum msg_type) != CALL)
		return -EBADMSG;
	if (IXDR_GET_U_INT32(p) != RPC_MSG_VERSION)
		return SRN_RPC_HDR_MISMATCH;
	if (srn_rpc_call_parse_none(x, h))
		return 0;
	h->cred.oa_base = bodies;
	h->verf.oa_base = bodies + MAX_AUTH_BYTES;
	if (!xdr_u_int32_t(x, &h->prog) || !xdr_u_int32_t(x, &h->vers) ||
	    !xdr_u_int32_t(x, &h->proc) || !xdr_opaque_auth(x, &h->cred) ||
	    !xdr_opaque_auth(x, &h->verf))
		return -EBADMSG;
	return 0;
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
