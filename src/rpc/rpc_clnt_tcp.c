// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the TCP CLIENT of srn_clnt_create (a server's port
 * given). It does what libtirpc's stream client does (one connection,
 * each call one record, RFC 5531 §11 record marking; replies of other
 * xids, such as a timed-out call's late one, skipped), with one
 * difference, as the UDP client (rpc_clnt_udp.c): the caller's thread
 * polls the stream for its reply for a short budget before it sleeps in
 * poll(2), so that a reply within the budget costs no wake-up, and a
 * server worker spinning on the stream (rpc_direct.c) answers a busy
 * caller without one either.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc_clnt.h"
#include "util/srn_compiler.h"

/* The reply poll: twice the last round trip, within these bounds (ns). */
#define SRN_RPC_TCP_SPIN_MIN 5000
#define SRN_RPC_TCP_SPIN_MAX 60000
#define SRN_RPC_TCP_BUF0 65536 /* first size of each buffer */

struct srn_rpc_tclnt {
	CLIENT cl;
	struct srn_rpc_cstate n;
	bool broken; /* the stream ended or failed: every call fails */
	int64_t spin_ns;
	struct rpc_err err;
	pthread_mutex_t lock;
	uint8_t *out; /* record mark, then the call */
	size_t out_cap;
	uint8_t *in; /* bytes read: fragments of the reply being assembled */
	size_t in_len, in_cap;
	size_t rec; /* bytes of the record so far, fragment marks removed */
};

static struct srn_rpc_tclnt *srn_rpc_tc(CLIENT *cl)
{
	return container_of(cl, struct srn_rpc_tclnt, cl);
}

static int srn_rpc_tclnt_grow(uint8_t **buf, size_t *cap, size_t want)
{
	size_t n = *cap ? *cap : SRN_RPC_TCP_BUF0;
	void *nb;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	nb = realloc(*buf, n);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = n;
	return 0;
}

/* The call record (mark, header, procedure, credential, verifier,
 * arguments) into tc->out, the buffer grown as the arguments need; its
 * length with the mark, or 0 when it cannot be encoded. */
static size_t srn_rpc_tclnt_encode(struct srn_rpc_tclnt *tc, rpcproc_t proc,
				   xdrproc_t xargs, void *argsp)
{
	uint32_t mark;
	XDR x;

	for (size_t cap = SRN_RPC_TCP_BUF0; cap <= 2 * SRN_RPC_NET_MAX;
	     cap *= 2) {
		if (srn_rpc_tclnt_grow(&tc->out, &tc->out_cap, cap))
			return 0;
		xdrmem_create(&x, (char *)tc->out + 4, (u_int)(cap - 4),
			      XDR_ENCODE);
		if (srn_rpc_xdr_call_head(&x, tc->n.xid, tc->n.prog, tc->n.vers,
					  proc, tc->cl.cl_auth) &&
		    xargs(&x, argsp)) {
			mark = htonl(0x80000000u | xdr_getpos(&x));
			memcpy(tc->out, &mark, 4);
			return 4 + (size_t)xdr_getpos(&x);
		}
		xdr_destroy(&x);
	}
	return 0;
}

/* Completes the record being assembled at the front of tc->in, fragment
 * marks removed: 1 (its tc->rec bytes at tc->in), 0 when more must be
 * read, -EPROTO for a record larger than any reply we take. */
static int srn_rpc_tclnt_record(struct srn_rpc_tclnt *tc)
{
	uint32_t mark, flen;

	for (;;) {
		if (tc->in_len - tc->rec < 4)
			return 0;
		memcpy(&mark, tc->in + tc->rec, 4);
		mark = ntohl(mark);
		flen = mark & 0x7fffffffu;
		if (tc->rec + (size_t)flen > SRN_RPC_NET_MAX)
			return -EPROTO;
		if (tc->in_len - tc->rec - 4 < flen)
			return 0;
		memmove(tc->in + tc->rec, tc->in + tc->rec + 4,
			tc->in_len - tc->rec - 4);
		tc->in_len -= 4;
		tc->rec += flen;
		if (mark & 0x80000000u)
			return 1;
	}
}

/* Drops the record just handled from the front of tc->in. */
static void srn_rpc_tclnt_consume(struct srn_rpc_tclnt *tc)
{
	memmove(tc->in, tc->in + tc->rec, tc->in_len - tc->rec);
	tc->in_len -= tc->rec;
	tc->rec = 0;
}

/* Reads what the stream has: 0, -EAGAIN for nothing, else -errno (the
 * stream ended: -ECONNRESET). */
static int srn_rpc_tclnt_read(struct srn_rpc_tclnt *tc)
{
	ssize_t k;

	if (srn_rpc_tclnt_grow(&tc->in, &tc->in_cap,
			       tc->in_len + SRN_RPC_TCP_BUF0))
		return -ENOMEM;
	k = recv(tc->n.fd, tc->in + tc->in_len, tc->in_cap - tc->in_len,
		 MSG_DONTWAIT);
	if (k > 0) {
		tc->in_len += (size_t)k;
		return 0;
	}
	if (k == 0)
		return -ECONNRESET;
	return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
}

/* The record at tc->in decoded into resp when it is the reply to the
 * current xid: its status; -1 for another call's reply (skipped). */
static int srn_rpc_tclnt_decode(struct srn_rpc_tclnt *tc, xdrproc_t xres,
				void *resp)
{
	uint32_t xid;
	struct rpc_msg r;
	XDR x;

	if (tc->rec < sizeof(xid))
		return -1;
	memcpy(&xid, tc->in, sizeof(xid));
	if (ntohl(xid) != tc->n.xid)
		return -1;
	memset(&r, 0, sizeof(r));
	r.acpted_rply.ar_verf = _null_auth;
	r.acpted_rply.ar_results.where = resp;
	r.acpted_rply.ar_results.proc = xres;
	xdrmem_create(&x, (char *)tc->in, (u_int)tc->rec, XDR_DECODE);
	if (!xdr_replymsg(&x, &r))
		return RPC_CANTDECODERES;
	_seterr_reply(&r, &tc->err);
	if (tc->err.re_status == RPC_SUCCESS &&
	    !AUTH_VALIDATE(tc->cl.cl_auth, &r.acpted_rply.ar_verf)) {
		tc->err.re_status = RPC_AUTHERROR;
		tc->err.re_why = AUTH_INVALIDRESP;
	}
	return tc->err.re_status;
}

/* 1 with *st_p set: the reply came, or the stream failed (RPC_CANTRECV,
 * and the client is broken); 0: not yet. */
static int srn_rpc_tclnt_take(struct srn_rpc_tclnt *tc, xdrproc_t xres,
			      void *resp, enum clnt_stat *st_p)
{
	int rc, st;

	for (;;) {
		rc = srn_rpc_tclnt_record(tc);
		if (rc == 0) {
			rc = srn_rpc_tclnt_read(tc);
			if (rc == -EAGAIN)
				return 0;
			if (rc == 0)
				continue;
		}
		if (rc < 0) {
			tc->broken = true;
			tc->err.re_errno = -rc;
			*st_p = RPC_CANTRECV;
			return 1;
		}
		st = srn_rpc_tclnt_decode(tc, xres, resp);
		srn_rpc_tclnt_consume(tc);
		if (st >= 0) {
			*st_p = (enum clnt_stat)st;
			return 1;
		}
	}
}

static int64_t srn_rpc_tns(struct timeval tv)
{
	return tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
}

/* Waits for the reply: polls for the budget, then sleeps in poll(2)
 * until it comes or the call's time is up. */
static enum clnt_stat srn_rpc_tclnt_wait(struct srn_rpc_tclnt *tc,
					 xdrproc_t xres, void *resp,
					 int64_t end)
{
	int64_t t0 = srn_rpc_now_ns(), now = t0;
	struct pollfd p = { .fd = tc->n.fd, .events = POLLIN };
	enum clnt_stat st = RPC_TIMEDOUT;

	while (!srn_rpc_tclnt_take(tc, xres, resp, &st)) {
		now = srn_rpc_now_ns();
		if (now >= end)
			break;
		if (now - t0 < tc->spin_ns)
			continue; /* the caller's own thread polls */
		poll(&p, 1, (int)((end - now) / 1000000 + 1));
	}
	now = 2 * (srn_rpc_now_ns() - t0);
	tc->spin_ns = now < SRN_RPC_TCP_SPIN_MIN ? SRN_RPC_TCP_SPIN_MIN :
		      now > SRN_RPC_TCP_SPIN_MAX ? SRN_RPC_TCP_SPIN_MAX :
						   now;
	return st;
}

static bool srn_rpc_tclnt_send(struct srn_rpc_tclnt *tc, size_t len)
{
	const uint8_t *p = tc->out;
	ssize_t k;

	while (len) {
		k = send(tc->n.fd, p, len, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			tc->err.re_errno = k < 0 ? errno : EPIPE;
			tc->broken = true;
			return false;
		}
		p += k;
		len -= (size_t)k;
	}
	return true;
}

static enum clnt_stat srn_rpc_tclnt_call(CLIENT *cl, rpcproc_t proc,
					 xdrproc_t xargs, void *argsp,
					 xdrproc_t xres, void *resp,
					 struct timeval tmo)
{
	struct srn_rpc_tclnt *tc = srn_rpc_tc(cl);
	enum clnt_stat st = RPC_CANTENCODEARGS;
	size_t len;

	pthread_mutex_lock(&tc->lock);
	if (tc->n.total_set)
		tmo = tc->n.total;
	memset(&tc->err, 0, sizeof(tc->err));
	tc->n.xid++;
	len = srn_rpc_tclnt_encode(tc, proc, xargs, argsp);
	if (tc->broken) {
		tc->err.re_errno = EPIPE;
		st = RPC_CANTSEND;
	} else if (len && !srn_rpc_tclnt_send(tc, len)) {
		st = RPC_CANTSEND;
	} else if (len) {
		st = srn_rpc_tclnt_wait(tc, xres, resp,
					srn_rpc_now_ns() + srn_rpc_tns(tmo));
	}
	tc->err.re_status = st;
	pthread_mutex_unlock(&tc->lock);
	return st;
}

static void srn_rpc_tclnt_abort(CLIENT *cl)
{
}

static void srn_rpc_tclnt_geterr(CLIENT *cl, struct rpc_err *e)
{
	*e = srn_rpc_tc(cl)->err;
}

static bool_t srn_rpc_tclnt_freeres(CLIENT *cl, xdrproc_t xres, void *resp)
{
	xdr_free(xres, resp);
	return TRUE;
}

static void srn_rpc_tclnt_destroy(CLIENT *cl)
{
	struct srn_rpc_tclnt *tc = srn_rpc_tc(cl);

	close(tc->n.fd);
	pthread_mutex_destroy(&tc->lock);
	free(tc->out);
	free(tc->in);
	free(tc);
}

/* Also sets the stream's send timeout to the call timeout: a server that
 * stops reading holds a caller no longer than a call may take. */
static bool_t srn_rpc_tclnt_control(CLIENT *cl, u_int rq, void *info)
{
	struct srn_rpc_tclnt *tc = srn_rpc_tc(cl);

	if (rq == CLSET_FD_CLOSE || rq == CLSET_FD_NCLOSE)
		return TRUE;
	if (!info || !srn_rpc_cstate_control(&tc->n, rq, info))
		return FALSE;
	if (rq == CLSET_TIMEOUT)
		setsockopt(tc->n.fd, SOL_SOCKET, SO_SNDTIMEO, &tc->n.total,
			   sizeof(tc->n.total));
	return TRUE;
}

static const struct clnt_ops srn_rpc_tclnt_ops = {
	.cl_call = srn_rpc_tclnt_call,
	.cl_abort = srn_rpc_tclnt_abort,
	.cl_geterr = srn_rpc_tclnt_geterr,
	.cl_freeres = srn_rpc_tclnt_freeres,
	.cl_destroy = srn_rpc_tclnt_destroy,
	.cl_control = srn_rpc_tclnt_control,
};

/* A connected stream (a refused or unreachable server fails here, as
 * libtirpc's clnttcp_create does: RPC_SYSTEMERROR with its errno). */
static int srn_rpc_tclnt_connect(const struct sockaddr_in *to)
{
	struct timeval tv = { 25, 0 };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

CLIENT *srn_rpc_clnt_tcp_create(const struct sockaddr_in *to, rpcprog_t prog,
				rpcvers_t vers)
{
	struct srn_rpc_tclnt *tc = calloc(1, sizeof(*tc));
	int fd = tc ? srn_rpc_tclnt_connect(to) : -ENOMEM;

	if (fd < 0) {
		free(tc);
		rpc_createerr.cf_stat = RPC_SYSTEMERROR;
		rpc_createerr.cf_error.re_errno = -fd;
		return NULL;
	}
	tc->n.fd = fd;
	tc->n.to = *to;
	tc->n.prog = prog;
	tc->n.vers = vers;
	tc->n.xid = (uint32_t)(getpid() ^ time(NULL)) * 2654435761u;
	tc->n.total.tv_sec = 25;
	tc->spin_ns = SRN_RPC_TCP_SPIN_MAX;
	pthread_mutex_init(&tc->lock, NULL);
	tc->cl.cl_ops = (struct clnt_ops *)&srn_rpc_tclnt_ops;
	tc->cl.cl_auth = srn_rpc_authnone();
	tc->cl.cl_netid = "tcp";
	tc->cl.cl_tp = "softrnic";
	return &tc->cl;
}
