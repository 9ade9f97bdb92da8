// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the SVCXPRT each worker hands to the rpcgen dispatch
 * function: svc_getargs decodes from the call's message where it lies (a
 * slot, the auxiliary area or the receiver's copy), svc_sendreply and
 * svcerr_* encode with libtirpc's xdr_replymsg straight into the transmit
 * slot (same-host caller) or a buffer that goes out on the socket.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/srn_rpc.h"
#include "util/srn_compiler.h"

void srn_rpc_conn_put(struct srn_rpc_conn *c)
{
	/* acq_rel: the last user sees every other user's writes; pairs with
	 * this same fetch_sub in the other users of srn_rpc_conn_put */
	if (__atomic_fetch_sub(&c->refs, 1, __ATOMIC_ACQ_REL) != 1)
		return;
	close(c->fd);
	pthread_mutex_destroy(&c->wlock);
	pthread_mutex_destroy(&c->rdlock);
	free(c->buf);
	free(c);
}

static struct srn_rpc_wlocal *srn_rpc_wl(SVCXPRT *xprt)
{
	return xprt->xp_p1;
}

static bool_t srn_rpc_xp_recv(SVCXPRT *xprt, struct rpc_msg *msg)
{
	return FALSE; /* calls arrive through the slots, not svc_getreq */
}

static enum xprt_stat srn_rpc_xp_stat(SVCXPRT *xprt)
{
	return XPRT_IDLE;
}

static bool_t srn_rpc_xp_getargs(SVCXPRT *xprt, xdrproc_t proc, void *where)
{
	return proc(&srn_rpc_wl(xprt)->args, where);
}

static bool_t srn_rpc_xp_freeargs(SVCXPRT *xprt, xdrproc_t proc, void *where)
{
	XDR x;

	memset(&x, 0, sizeof(x));
	x.x_op = XDR_FREE;
	return proc(&x, where);
}

static void srn_rpc_xp_destroy(SVCXPRT *xprt)
{
	/* the worker owns its SVCXPRT; nothing to free here */
}

static bool_t srn_rpc_xp_control(SVCXPRT *xprt, const u_int rq, void *in)
{
	return FALSE;
}

/*
 * Before reusing a transmit slot (or the transmit aux area), the caller of
 * reply want (its last user) must be done with it (srn_rpc_reply_ack;
 * later acks of the same slot imply it): the worker waits (it may spin)
 * until then, unless that caller died, or for a second at most (a stopped
 * caller then finds its reply overwritten and fails the call).
 */
static void srn_rpc_tx_wait_ack(struct srn_rpc_wlocal *wl, uint32_t want,
				uint32_t pid)
{
	int64_t end = 0;
	unsigned k = 0;

	if (!want)
		return;
	while ((int32_t)(srn_rpc_ack_read(wl->w, want & 1) - want) < 0) {
		if ((++k & 1023) != 0) {
			__builtin_ia32_pause();
			continue;
		}
		if (!end)
			end = srn_rpc_now_ns() + 1000000000;
		if (srn_rpc_now_ns() > end ||
		    (pid && kill((pid_t)pid, 0) < 0 && errno == ESRCH))
			return;
		sched_yield();
	}
}

/* A reply to a same-host caller: inline if it fits, else the aux area. */
static bool_t srn_rpc_reply_shm(struct srn_rpc_wlocal *wl, struct rpc_msg *m)
{
	struct srn_rpc_worker *w = wl->w;
	struct srn_rpc_slot *s = &w->tx[wl->n & 1];
	uint32_t gen;
	XDR x;

	/* the ack is read in the line the reply then overwrites */
	srn_prefetch_write(s);
	srn_rpc_tx_wait_ack(wl, wl->tx_n[wl->n & 1], wl->tx_pid[wl->n & 1]);
	wl->tx_n[wl->n & 1] = wl->n;
	wl->tx_pid[wl->n & 1] = wl->owner;
	xdrmem_create(&x, (char *)s->data, SRN_RPC_SLOT_INLINE, XDR_ENCODE);
	if (srn_rpc_xdr_reply(&x, m)) {
		srn_rpc_reply_publish(w, wl->n, xdr_getpos(&x), 0);
		return TRUE;
	}
	/* a seqlock: the caller of an older reply still reading the area
	 * sees aux_gen move and drops what it read */
	srn_rpc_tx_wait_ack(wl, wl->aux_n, wl->aux_pid);
	wl->aux_n = wl->n;
	wl->aux_pid = wl->owner;
	gen = w->ctl.aux_gen + 1;
	/* relaxed: the fence below orders it before the area's stores */
	__atomic_store_n(&w->ctl.aux_gen, gen, __ATOMIC_RELAXED);
	/* full barrier: aux_gen (odd) before the area's stores; pairs with
	 * the barrier in srn_rpc_clnt_reply_ok */
	srn_smp_mb();
	xdrmem_create(&x, (char *)wl->aux_out, SRN_RPC_AUX_SIZE, XDR_ENCODE);
	if (!srn_rpc_xdr_reply(&x, m))
		return FALSE;
	/* release: the area before the even aux_gen; pairs with the barrier
	 * in srn_rpc_clnt_reply_ok */
	__atomic_store_n(&w->ctl.aux_gen, gen + 1, __ATOMIC_RELEASE);
	s->aux_gen = gen + 1;
	srn_rpc_reply_publish(w, wl->n, xdr_getpos(&x), SRN_RPC_SLOT_AUX);
	return TRUE;
}

static bool_t srn_rpc_send_all(int fd, const uint8_t *p, size_t len)
{
	ssize_t k;

	while (len) {
		k = send(fd, p, len, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return FALSE;
		p += k;
		len -= (size_t)k;
	}
	return TRUE;
}

/* A network reply: one datagram, or one TCP record (RFC 5531 §11). */
static bool_t srn_rpc_reply_net(struct srn_rpc_wlocal *wl, struct rpc_msg *m)
{
	struct srn_rpc_server *srv = wl->srv;
	uint32_t len, mark;
	bool_t ok;
	XDR x;

	xdrmem_create(&x, (char *)wl->netbuf + 4, SRN_RPC_NET_MAX, XDR_ENCODE);
	if (!srn_rpc_xdr_reply(&x, m))
		return FALSE;
	len = xdr_getpos(&x);
	if (wl->kind == SRN_RPC_FROM_UDP)
		return sendto(srv->ufd, wl->netbuf + 4, len, 0,
			      (struct sockaddr *)&wl->peer,
			      wl->peer_len) == (ssize_t)len;
	mark = htonl(0x80000000u | len);
	memcpy(wl->netbuf, &mark, 4);
	pthread_mutex_lock(&wl->conn->wlock);
	ok = srn_rpc_send_all(wl->conn->fd, wl->netbuf, len + 4);
	pthread_mutex_unlock(&wl->conn->wlock);
	return ok;
}

static bool_t srn_rpc_xp_reply(SVCXPRT *xprt, struct rpc_msg *m)
{
	struct srn_rpc_wlocal *wl = srn_rpc_wl(xprt);

	m->rm_xid = wl->xid;
	if (wl->kind == SRN_RPC_FROM_SHM)
		return srn_rpc_reply_shm(wl, m);
	return srn_rpc_reply_net(wl, m);
}

static const struct xp_ops srn_rpc_xp_ops = {
	.xp_recv = srn_rpc_xp_recv,
	.xp_stat = srn_rpc_xp_stat,
	.xp_getargs = srn_rpc_xp_getargs,
	.xp_reply = srn_rpc_xp_reply,
	.xp_freeargs = srn_rpc_xp_freeargs,
	.xp_destroy = srn_rpc_xp_destroy,
};

static const struct xp_ops2 srn_rpc_xp_ops2 = {
	.xp_control = srn_rpc_xp_control,
};

void srn_rpc_xprt_init(struct srn_rpc_wlocal *wl)
{
	SVCXPRT *x = &wl->xprt;

	memset(x, 0, sizeof(*x));
	x->xp_fd = wl->srv->ufd;
	x->xp_port = wl->srv->port;
	x->xp_ops = &srn_rpc_xp_ops;
	x->xp_ops2 = &srn_rpc_xp_ops2;
	x->xp_netid = "softrnic";
	x->xp_verf = _null_auth;
	x->xp_rtaddr.buf = &wl->peer;
	x->xp_rtaddr.maxlen = sizeof(wl->peer);
	x->xp_p1 = wl;
}
