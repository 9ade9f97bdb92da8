// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the UDP CLIENT of srn_clnt_create (a server's port
 * given). It does what libtirpc's datagram client does (a connected UDP
 * socket, the call encoded by libtirpc, retransmission every retry
 * interval until the total timeout, replies of other xids ignored), with
 * one difference: the caller's thread polls the socket for its reply for
 * a short budget before it sleeps in poll(2). That is the application
 * polling for its own reply, bounded, as the same-host client does: a
 * reply within the budget costs no wake-up, and a server worker that
 * spins on the socket (rpc_direct.c) then answers a busy caller at close
 * to the speed of a busy-polling UDP ping-pong.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc_clnt.h"
#include "util/srn_compiler.h"

/* A UDP message's largest payload this client sends or takes. */
#define SRN_RPC_UDP_MAX 65000
/* The reply poll: twice the last round trip, within these bounds (ns). */
#define SRN_RPC_UDP_SPIN_MIN 5000
#define SRN_RPC_UDP_SPIN_MAX 60000

struct srn_rpc_uclnt {
	CLIENT cl;
	struct srn_rpc_cstate n;
	struct timeval retry;
	int64_t spin_ns; /* the reply poll's budget */
	struct rpc_err err;
	pthread_mutex_t lock;
	uint8_t out[SRN_RPC_UDP_MAX], in[SRN_RPC_UDP_MAX];
};

static struct srn_rpc_uclnt *srn_rpc_uc(CLIENT *cl)
{
	return container_of(cl, struct srn_rpc_uclnt, cl);
}

/* The call message (header, procedure, credential, verifier, arguments)
 * into uc->out; its length, or 0 when it does not fit. */
static u_int srn_rpc_uclnt_encode(struct srn_rpc_uclnt *uc, rpcproc_t proc,
				  xdrproc_t xargs, void *argsp)
{
	XDR x;

	xdrmem_create(&x, (char *)uc->out, sizeof(uc->out), XDR_ENCODE);
	if (!srn_rpc_xdr_call_head(&x, uc->n.xid, uc->n.prog, uc->n.vers, proc,
				   uc->cl.cl_auth) ||
	    !xargs(&x, argsp))
		return 0;
	return xdr_getpos(&x);
}

/* A reply to the current xid, decoded into resp: its status; -1 when the
 * message is another call's (or not a reply), to be ignored. */
static int srn_rpc_uclnt_decode(struct srn_rpc_uclnt *uc, size_t len,
				xdrproc_t xres, void *resp)
{
	uint32_t xid;
	struct rpc_msg r;
	XDR x;

	if (len < sizeof(xid))
		return -1;
	memcpy(&xid, uc->in, sizeof(xid));
	if (ntohl(xid) != uc->n.xid)
		return -1;
	memset(&r, 0, sizeof(r));
	r.acpted_rply.ar_verf = _null_auth;
	r.acpted_rply.ar_results.where = resp;
	r.acpted_rply.ar_results.proc = xres;
	xdrmem_create(&x, (char *)uc->in, (u_int)len, XDR_DECODE);
	if (!xdr_replymsg(&x, &r))
		return RPC_CANTDECODERES;
	_seterr_reply(&r, &uc->err);
	if (uc->err.re_status == RPC_SUCCESS &&
	    !AUTH_VALIDATE(uc->cl.cl_auth, &r.acpted_rply.ar_verf)) {
		uc->err.re_status = RPC_AUTHERROR;
		uc->err.re_why = AUTH_INVALIDRESP;
	}
	return uc->err.re_status;
}

static int64_t srn_rpc_ns(struct timeval tv)
{
	return tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
}

/*
 * One receive: 1 with *st_p set when the reply came, 0 when nothing (or
 * something else) came, -1 with *st_p set on a socket error (a refused
 * port: nobody listens there).
 */
static int srn_rpc_uclnt_recv(struct srn_rpc_uclnt *uc, xdrproc_t xres,
			      void *resp, enum clnt_stat *st_p)
{
	ssize_t k = recv(uc->n.fd, uc->in, sizeof(uc->in), MSG_DONTWAIT);
	int st;

	if (k < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		uc->err.re_errno = errno;
		*st_p = RPC_CANTRECV;
		return -1;
	}
	st = srn_rpc_uclnt_decode(uc, (size_t)k, xres, resp);
	if (st < 0)
		return 0;
	*st_p = (enum clnt_stat)st;
	return 1;
}

/* Waits for the reply: polls for the budget, then sleeps in poll(2)
 * until the next retransmission or the end. */
static enum clnt_stat srn_rpc_uclnt_wait(struct srn_rpc_uclnt *uc, size_t len,
					 xdrproc_t xres, void *resp,
					 int64_t end)
{
	int64_t t0 = srn_rpc_now_ns(), now = t0, resend;
	struct pollfd p = { .fd = uc->n.fd, .events = POLLIN };
	enum clnt_stat st = RPC_TIMEDOUT;
	int rc;

	resend = t0 + srn_rpc_ns(uc->retry);
	while (now < end) {
		rc = srn_rpc_uclnt_recv(uc, xres, resp, &st);
		if (rc)
			break;
		now = srn_rpc_now_ns();
		if (now >= resend) {
			send(uc->n.fd, uc->out, len, 0); /* lost: once more */
			resend = now + srn_rpc_ns(uc->retry);
		}
		if (now - t0 < uc->spin_ns)
			continue; /* the caller's own thread polls */
		poll(&p, 1,
		     (int)(((resend < end ? resend : end) - now) / 1000000 +
			   1));
		now = srn_rpc_now_ns();
	}
	now = 2 * (srn_rpc_now_ns() - t0);
	uc->spin_ns = now < SRN_RPC_UDP_SPIN_MIN ? SRN_RPC_UDP_SPIN_MIN :
		      now > SRN_RPC_UDP_SPIN_MAX ? SRN_RPC_UDP_SPIN_MAX :
						   now;
	return st;
}

static enum clnt_stat srn_rpc_uclnt_call(CLIENT *cl, rpcproc_t proc,
					 xdrproc_t xargs, void *argsp,
					 xdrproc_t xres, void *resp,
					 struct timeval tmo)
{
	struct srn_rpc_uclnt *uc = srn_rpc_uc(cl);
	enum clnt_stat st = RPC_CANTENCODEARGS;
	u_int len;

	pthread_mutex_lock(&uc->lock);
	if (uc->n.total_set)
		tmo = uc->n.total;
	memset(&uc->err, 0, sizeof(uc->err));
	uc->n.xid++;
	len = srn_rpc_uclnt_encode(uc, proc, xargs, argsp);
	if (len && send(uc->n.fd, uc->out, len, 0) != (ssize_t)len) {
		uc->err.re_errno = errno;
		st = RPC_CANTSEND;
	} else if (len) {
		st = srn_rpc_uclnt_wait(uc, len, xres, resp,
					srn_rpc_now_ns() + srn_rpc_ns(tmo));
	}
	uc->err.re_status = st;
	pthread_mutex_unlock(&uc->lock);
	return st;
}

static void srn_rpc_uclnt_abort(CLIENT *cl)
{
}

static void srn_rpc_uclnt_geterr(CLIENT *cl, struct rpc_err *e)
{
	*e = srn_rpc_uc(cl)->err;
}

static bool_t srn_rpc_uclnt_freeres(CLIENT *cl, xdrproc_t xres, void *resp)
{
	xdr_free(xres, resp);
	return TRUE;
}

static void srn_rpc_uclnt_destroy(CLIENT *cl)
{
	struct srn_rpc_uclnt *uc = srn_rpc_uc(cl);

	close(uc->n.fd);
	pthread_mutex_destroy(&uc->lock);
	free(uc);
}

/* The requests libtirpc's datagram client answers that concern us. */
static bool_t srn_rpc_uclnt_control(CLIENT *cl, u_int rq, void *info)
{
	struct srn_rpc_uclnt *uc = srn_rpc_uc(cl);

	if (!info && rq != CLSET_FD_CLOSE && rq != CLSET_FD_NCLOSE)
		return FALSE;
	switch (rq) {
	case CLSET_RETRY_TIMEOUT:
		uc->retry = *(struct timeval *)info;
		return TRUE;
	case CLGET_RETRY_TIMEOUT:
		*(struct timeval *)info = uc->retry;
		return TRUE;
	case CLSET_FD_CLOSE:
	case CLSET_FD_NCLOSE:
		return TRUE;
	}
	return srn_rpc_cstate_control(&uc->n, rq, info);
}

static const struct clnt_ops srn_rpc_uclnt_ops = {
	.cl_call = srn_rpc_uclnt_call,
	.cl_abort = srn_rpc_uclnt_abort,
	.cl_geterr = srn_rpc_uclnt_geterr,
	.cl_freeres = srn_rpc_uclnt_freeres,
	.cl_destroy = srn_rpc_uclnt_destroy,
	.cl_control = srn_rpc_uclnt_control,
};

CLIENT *srn_rpc_clnt_udp_create(const struct sockaddr_in *to, rpcprog_t prog,
				rpcvers_t vers)
{
	struct srn_rpc_uclnt *uc = calloc(1, sizeof(*uc));

	if (!uc)
		goto fail;
	uc->n.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (uc->n.fd < 0 ||
	    connect(uc->n.fd, (const struct sockaddr *)to, sizeof(*to)) < 0) {
		rpc_createerr.cf_error.re_errno = errno;
		if (uc->n.fd >= 0)
			close(uc->n.fd);
		goto fail;
	}
	uc->n.to = *to;
	uc->n.prog = prog;
	uc->n.vers = vers;
	uc->n.xid = (uint32_t)(getpid() ^ time(NULL)) * 2654435761u;
	uc->n.total.tv_sec = 25;
	uc->retry.tv_sec = 1;
	uc->spin_ns = SRN_RPC_UDP_SPIN_MAX;
	pthread_mutex_init(&uc->lock, NULL);
	uc->cl.cl_ops = (struct clnt_ops *)&srn_rpc_uclnt_ops;
	uc->cl.cl_auth = srn_rpc_authnone();
	uc->cl.cl_netid = "udp";
	uc->cl.cl_tp = "softrnic";
	return &uc->cl;
fail:
	free(uc);
	rpc_createerr.cf_stat = RPC_SYSTEMERROR;
	return NULL;
}
