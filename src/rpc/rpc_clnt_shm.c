// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the same-host CLIENT. Creating it finds the server by its
 * abstract unix socket (SRN_RPC_SOCK_FMT), receives the segment's memfd and
 * maps it (checked by srn_rpc_seg_map). A call claims a waiting worker,
 * encodes the call with libtirpc into the worker's receive slot (or its
 * auxiliary area), publishes it and waits for the reply in the transmit
 * slot (rpc_slot.c). The socket stays open: when it reports the server
 * gone, calls fail with RPC_CANTRECV instead of waiting out the timeout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc_clnt.h"
#include "util/srn_compiler.h"

struct srn_rpc_clnt {
	CLIENT cl;
	struct srn_rpc_cstate n; /* n.fd: the discovery socket */
	struct srn_rpc_seg seg;
	struct rpc_err err;
	pthread_mutex_t lock;
};

static struct srn_rpc_clnt *srn_rpc_ct(CLIENT *cl)
{
	return container_of(cl, struct srn_rpc_clnt, cl);
}

/* What a call's message is made of (srn_rpc_clnt_xdr_call). */
struct srn_rpc_call_args {
	struct srn_rpc_clnt *ct;
	rpcproc_t proc;
	xdrproc_t xargs;
	void *argsp;
};

/* The whole call message: header, credential, verifier, arguments. */
static bool_t srn_rpc_clnt_xdr_call(XDR *x, void *p)
{
	struct srn_rpc_call_args *a = p;
	struct srn_rpc_clnt *ct = a->ct;

	return srn_rpc_xdr_call_head(x, ct->n.xid, ct->n.prog, ct->n.vers,
				     a->proc, ct->cl.cl_auth) &&
	       a->xargs(x, a->argsp);
}

/* Encodes the call where it fits: the slot, else the aux area. */
static bool srn_rpc_clnt_encode(struct srn_rpc_call_args *a, unsigned i,
				unsigned slot, uint32_t *len_p, uint32_t *fl_p)
{
	struct srn_rpc_clnt *ct = a->ct;
	struct srn_rpc_worker *w = srn_rpc_seg_worker(&ct->seg, i);
	XDR x;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		if (pass == 0)
			xdrmem_create(&x, (char *)w->rx[slot].data,
				      SRN_RPC_SLOT_INLINE, XDR_ENCODE);
		else
			xdrmem_create(&x,
				      (char *)srn_rpc_seg_aux(&ct->seg, i, 0),
				      SRN_RPC_AUX_SIZE, XDR_ENCODE);
		if (srn_rpc_clnt_xdr_call(&x, a)) {
			*len_p = xdr_getpos(&x);
			*fl_p = pass ? SRN_RPC_SLOT_AUX : 0;
			return true;
		}
	}
	*len_p = 0; /* the worker drops an empty call and frees itself */
	*fl_p = 0;
	return false;
}

/* Still ours after decoding? (a reply overwritten meanwhile is not) */
static bool srn_rpc_clnt_reply_ok(struct srn_rpc_worker *w, uint32_t n,
				  uint32_t flags, uint32_t gen)
{
	/* full barrier: the decoding's loads before the checks; pairs with
	 * the barrier in srn_rpc_reply_shm */
	srn_smp_mb();
	if (flags & SRN_RPC_SLOT_AUX)
		/* relaxed: ordered by the fence above */
		return __atomic_load_n(&w->ctl.aux_gen, __ATOMIC_RELAXED) ==
		       gen;
	return srn_rpc_load_acquire(&w->tx[n & 1].seq) == n;
}

static enum clnt_stat srn_rpc_clnt_decode(struct srn_rpc_clnt *ct, unsigned i,
					  uint32_t n, xdrproc_t xres,
					  void *resp)
{
	struct srn_rpc_worker *w = srn_rpc_seg_worker(&ct->seg, i);
	struct srn_rpc_slot *s = &w->tx[n & 1];
	uint32_t len = s->len, flags = s->flags, gen = 0;
	uint8_t *buf = s->data;
	struct rpc_msg r;
	bool ok = false;
	int plain;
	XDR x;

	if (flags & SRN_RPC_SLOT_AUX) {
		buf = srn_rpc_seg_aux(&ct->seg, i, 1);
		gen = s->aux_gen;
	}
	if (len >
	    (flags & SRN_RPC_SLOT_AUX ? SRN_RPC_AUX_SIZE : SRN_RPC_SLOT_INLINE))
		return RPC_CANTDECODERES;
	xdrmem_create(&x, (char *)buf, len, XDR_DECODE);
	plain = srn_rpc_xdr_reply_plain(&x, ct->n.xid, xres, resp);
	if (plain < 0) {
		memset(&r, 0, sizeof(r));
		r.acpted_rply.ar_verf = _null_auth;
		r.acpted_rply.ar_results.where = resp;
		r.acpted_rply.ar_results.proc = xres;
		ok = xdr_replymsg(&x, &r);
	}
	if (!srn_rpc_clnt_reply_ok(w, n, flags, gen)) {
		xdr_free(xres, resp);
		return RPC_CANTRECV;
	}
	if (plain >= 0)
		return plain ? RPC_SUCCESS : RPC_CANTDECODERES;
	if (!ok || r.rm_xid != ct->n.xid)
		return RPC_CANTDECODERES;
	_seterr_reply(&r, &ct->err);
	return ct->err.re_status;
}

static long srn_rpc_ms(struct timeval tv)
{
	return tv.tv_sec * 1000L + tv.tv_usec / 1000;
}

static enum clnt_stat srn_rpc_clnt_call_locked(struct srn_rpc_clnt *ct,
					       rpcproc_t proc, xdrproc_t xargs,
					       void *argsp, xdrproc_t xres,
					       void *resp, long ms)
{
	struct srn_rpc_call_args a = { ct, proc, xargs, argsp };
	struct srn_rpc_ticket t;
	struct srn_rpc_worker *w;
	uint32_t len, flags;
	unsigned fl = 0;
	enum clnt_stat st;
	int i, rc;

	ct->n.xid++;
	i = srn_rpc_claim_spinning(&ct->seg, &t);
	/* only a call that fits a slot may queue behind a running one (the
	 * auxiliary area is the running call's) */
	if (i < 0 &&
	    xdr_sizeof((xdrproc_t)(void (*)(void))srn_rpc_clnt_xdr_call, &a) <=
		    SRN_RPC_SLOT_INLINE)
		fl = SRN_RPC_CLAIM_BEHIND;
	if (i < 0)
		i = srn_rpc_claim(&ct->seg, ct->n.fd, ms, fl, &t);
	if (i == -EAGAIN) {
		ct->err.re_errno = EAGAIN; /* the server's queue is full */
		return RPC_SYSTEMERROR;
	}
	if (i < 0)
		return i == -ETIMEDOUT ? RPC_TIMEDOUT : RPC_CANTSEND;
	w = srn_rpc_seg_worker(&ct->seg, (unsigned)i);
	if (!srn_rpc_clnt_encode(&a, (unsigned)i, t.slot, &len, &flags)) {
		srn_rpc_publish(w, &t, 0, 0);
		return RPC_CANTENCODEARGS;
	}
	srn_rpc_publish(w, &t, len, flags);
	rc = srn_rpc_reply_wait(w, t.n, ct->n.fd, ms);
	if (rc) {
		srn_rpc_reply_ack(w, t.n); /* abandoned: the slot is free */
		return rc == -ETIMEDOUT ? RPC_TIMEDOUT : RPC_CANTRECV;
	}
	st = srn_rpc_clnt_decode(ct, (unsigned)i, t.n, xres, resp);
	srn_rpc_reply_ack(w, t.n);
	return st;
}

static enum clnt_stat srn_rpc_clnt_call(CLIENT *cl, rpcproc_t proc,
					xdrproc_t xargs, void *argsp,
					xdrproc_t xres, void *resp,
					struct timeval tmo)
{
	struct srn_rpc_clnt *ct = srn_rpc_ct(cl);
	enum clnt_stat st;

	pthread_mutex_lock(&ct->lock);
	if (ct->n.total_set)
		tmo = ct->n.total;
	memset(&ct->err, 0, sizeof(ct->err));
	st = srn_rpc_clnt_call_locked(ct, proc, xargs, argsp, xres, resp,
				      srn_rpc_ms(tmo));
	ct->err.re_status = st;
	pthread_mutex_unlock(&ct->lock);
	return st;
}

static void srn_rpc_clnt_abort(CLIENT *cl)
{
}

static void srn_rpc_clnt_geterr(CLIENT *cl, struct rpc_err *e)
{
	*e = srn_rpc_ct(cl)->err;
}

static bool_t srn_rpc_clnt_freeres(CLIENT *cl, xdrproc_t xres, void *resp)
{
	xdr_free(xres, resp);
	return TRUE;
}

static void srn_rpc_clnt_destroy(CLIENT *cl)
{
	struct srn_rpc_clnt *ct = srn_rpc_ct(cl);

	if (cl->cl_auth)
		AUTH_DESTROY(cl->cl_auth);
	srn_rpc_seg_unmap(&ct->seg);
	close(ct->n.fd);
	pthread_mutex_destroy(&ct->lock);
	free(ct);
}

static bool_t srn_rpc_clnt_control(CLIENT *cl, u_int rq, void *info)
{
	struct srn_rpc_clnt *ct = srn_rpc_ct(cl);

	if (rq == CLSET_FD_CLOSE || rq == CLSET_FD_NCLOSE)
		return TRUE;
	if (!info || rq == CLGET_SERVER_ADDR) /* no address: this host's */
		return FALSE;
	return srn_rpc_cstate_control(&ct->n, rq, info);
}

static const struct clnt_ops srn_rpc_clnt_ops = {
	.cl_call = srn_rpc_clnt_call,
	.cl_abort = srn_rpc_clnt_abort,
	.cl_geterr = srn_rpc_clnt_geterr,
	.cl_freeres = srn_rpc_clnt_freeres,
	.cl_destroy = srn_rpc_clnt_destroy,
	.cl_control = srn_rpc_clnt_control,
};

/*
 * libtirpc 1.3.3's authnone_create reads its singleton before taking its
 * lock: two threads creating clients at once both allocate one, and one
 * leaks. Ours are created one at a time.
 */
AUTH *srn_rpc_authnone(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	AUTH *a;

	pthread_mutex_lock(&lock);
	a = authnone_create();
	pthread_mutex_unlock(&lock);
	return a;
}

/* Is the process at the other end of s a server we may send calls to:
 * our user's or root's (anyone may bind an abstract name first)? */
static bool srn_rpc_clnt_trusts(int s)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	return !getsockopt(s, SOL_SOCKET, SO_PEERCRED, &uc, &len) &&
	       len == sizeof(uc) && (uc.uid == geteuid() || uc.uid == 0);
}

/* Connects to the server's socket and receives the segment. */
static int srn_rpc_clnt_find(rpcprog_t prog, rpcvers_t vers, int *fd_p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char cbuf[CMSG_SPACE(sizeof(int))], byte;
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int s, n;

	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, SRN_RPC_SOCK_FMT,
		     (unsigned long)prog, (unsigned long)vers);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				n)) < 0 ||
	    !srn_rpc_clnt_trusts(s) || recvmsg(s, &mh, MSG_CMSG_CLOEXEC) != 1)
		goto fail;
	cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_level != SOL_SOCKET ||
	    cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len != CMSG_LEN(sizeof(int)))
		goto fail;
	memcpy(fd_p, CMSG_DATA(cm), sizeof(int));
	return s;
fail:
	close(s);
	return -ENOENT;
}

CLIENT *srn_rpc_clnt_shm_create(rpcprog_t prog, rpcvers_t vers)
{
	struct srn_rpc_clnt *ct = calloc(1, sizeof(*ct));
	int memfd = -1;

	if (!ct)
		goto fail;
	ct->n.fd = srn_rpc_clnt_find(prog, vers, &memfd);
	if (ct->n.fd < 0)
		goto fail;
	if (srn_rpc_seg_map(memfd, &ct->seg))
		goto fail_sock;
	close(memfd);
	ct->n.prog = prog;
	ct->n.vers = vers;
	ct->n.xid = (uint32_t)(getpid() ^ time(NULL)) * 2654435761u;
	ct->n.total.tv_sec = 25;
	pthread_mutex_init(&ct->lock, NULL);
	ct->cl.cl_ops = (struct clnt_ops *)&srn_rpc_clnt_ops;
	ct->cl.cl_auth = srn_rpc_authnone();
	ct->cl.cl_netid = "shm";
	ct->cl.cl_tp = "softrnic";
	return &ct->cl;
fail_sock:
	close(ct->n.fd);
	close(memfd);
fail:
	free(ct);
	rpc_createerr.cf_stat = RPC_PROGNOTREGISTERED;
	return NULL;
}
