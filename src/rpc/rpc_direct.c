// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — network calls a worker reads itself. A worker that spins
 * after a UDP call polls the service's UDP socket too, and after a TCP
 * call the stream that call came on; a call it reads becomes its own next
 * call (srn_rpc_claim_self): no hand-off by the receiver and no wake-up on
 * either side, so a busy network caller gets near the latency of a
 * busy-polling server. The receiver (rpc_net.c) leaves the UDP socket out
 * of its poll set while any worker polls it, and a stream while the worker
 * that holds it does (the stream's rdlock: one reader at a time).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/srn_rpc.h"

/*
 * Decodes the call header's fixed words (xid, direction, RPC version,
 * program, version, procedure) with libtirpc: anything that is not a call
 * is dropped here, without waking a worker.
 */
bool srn_rpc_net_is_call(const uint8_t *msg, size_t len)
{
	uint32_t w[6];
	unsigned i;
	XDR x;

	xdrmem_create(&x, (char *)msg, (u_int)len, XDR_DECODE);
	for (i = 0; i < 6; i++)
		if (!xdr_u_int32_t(&x, &w[i]))
			return false;
	return w[1] == CALL;
}

/*
 * A spinning worker whose last call came over UDP polls the socket itself
 * (srn_rpc_net_take): a call it reads is its own, with no hand-off and no
 * wake-up on either side. While any worker does, the receiver leaves the
 * socket out of its poll set (a wake-up per datagram on the server's
 * cores for nothing); the last worker to stop kicks it back.
 */
/* Gives the stream back to the receiver, and kicks it to poll it again. */
static void srn_rpc_net_conn_disown(struct srn_rpc_wlocal *wl)
{
	uint64_t one = 1;
	ssize_t k;

	if (!wl->net_owned)
		return;
	wl->net_owned = false;
	/* release: pairs with the acquire in srn_rpc_pollset */
	__atomic_store_n(&wl->net_conn->wowned, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&wl->net_conn->rdlock);
	k = write(wl->srv->efd, &one, sizeof(one));
	(void)k;
}

/* Drops the worker's stream: given back, and its reference put. */
void srn_rpc_net_conn_drop(struct srn_rpc_wlocal *wl)
{
	srn_rpc_net_conn_disown(wl);
	if (wl->net_conn)
		srn_rpc_conn_put(wl->net_conn);
	wl->net_conn = NULL;
}

/*
 * The stream of the TCP call just served (wl->conn, before its call's
 * reference goes): the worker keeps a reference of its own, so that it may
 * read that stream while it spins next (srn_rpc_net_conn_own).
 */
void srn_rpc_net_conn_keep(struct srn_rpc_wlocal *wl)
{
	struct srn_rpc_conn *c = wl->conn;

	if (!c || wl->kind != SRN_RPC_FROM_TCP || c == wl->net_conn)
		return;
	srn_rpc_net_conn_drop(wl);
	/* relaxed: a reference count increment needs no order */
	__atomic_fetch_add(&c->refs, 1, __ATOMIC_RELAXED);
	wl->net_conn = c;
}

/* The worker becomes the stream's reader, unless the receiver reads it or
 * holds part of a record of it (c->len, under rdlock). */
static void srn_rpc_net_conn_own(struct srn_rpc_wlocal *wl)
{
	struct srn_rpc_conn *c = wl->net_conn;

	if (!c || wl->net_owned || pthread_mutex_trylock(&c->rdlock))
		return;
	if (c->len) {
		pthread_mutex_unlock(&c->rdlock);
		return;
	}
	/* release: pairs with the acquire in srn_rpc_pollset */
	__atomic_store_n(&c->wowned, 1, __ATOMIC_RELEASE);
	wl->net_owned = true;
}

static void srn_rpc_net_udp_leave(struct srn_rpc_wlocal *wl)
{
	uint64_t one = 1;
	ssize_t k;

	if (!wl->net_spinning)
		return;
	wl->net_spinning = false;
	/* release: pairs with the acquire in srn_rpc_pollset; the kick
	 * below wakes a receiver that polls without the socket */
	if (__atomic_sub_fetch(&wl->srv->net_spinners, 1, __ATOMIC_RELEASE))
		return;
	k = write(wl->srv->efd, &one, sizeof(one));
	(void)k;
}

/*
 * A spinning worker whose last call came over UDP polls the socket itself
 * (srn_rpc_net_take): a call it reads is its own, with no hand-off and no
 * wake-up on either side. While any worker does, the receiver leaves the
 * socket out of its poll set (a wake-up per datagram on the server's
 * cores for nothing); the last worker to stop kicks it back. After a TCP
 * call it reads that call's stream instead.
 */
void srn_rpc_net_spin_enter(struct srn_rpc_wlocal *wl)
{
	if (wl->net_poll == SRN_RPC_FROM_TCP) {
		srn_rpc_net_udp_leave(wl);
		srn_rpc_net_conn_own(wl);
		return;
	}
	srn_rpc_net_conn_drop(wl);
	if (wl->net_spinning)
		return;
	wl->net_spinning = true;
	/* relaxed: the receiver only drops the socket from its next poll
	 * set; a datagram waits in the socket for whoever reads it */
	__atomic_fetch_add(&wl->srv->net_spinners, 1, __ATOMIC_RELAXED);
}

void srn_rpc_net_spin_leave(struct srn_rpc_wlocal *wl)
{
	srn_rpc_net_conn_drop(wl);
	srn_rpc_net_udp_leave(wl);
}

/* After a long handler: the socket or stream goes back to the receiver,
 * but the worker may take it again when it next spins. */
void srn_rpc_net_spin_pause(struct srn_rpc_wlocal *wl)
{
	srn_rpc_net_conn_disown(wl);
	srn_rpc_net_udp_leave(wl);
}

/*
 * One whole record (a single, last fragment) that the stream holds, read
 * by the worker. Anything else (fragments, a record larger than the
 * buffer, the stream's end or an error) gives the stream back to the
 * receiver, which assembles records and drops connections; a record not
 * all there yet waits. 1: it is the worker's call n (in wl->dgram).
 */
static int srn_rpc_net_take_record(struct srn_rpc_wlocal *wl)
{
	struct srn_rpc_conn *c = wl->net_conn;
	ssize_t k = recv(c->fd, wl->dgram, SRN_RPC_DGRAM_MAX,
			 MSG_PEEK | MSG_DONTWAIT);
	uint32_t mark, flen;

	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (k <= 0)
		goto give_back;
	if (k < 4)
		return 0;
	memcpy(&mark, wl->dgram, 4);
	mark = ntohl(mark);
	flen = mark & 0x7fffffffu;
	if (!(mark & 0x80000000u) || flen > SRN_RPC_DGRAM_MAX - 4)
		goto give_back;
	if ((size_t)k < 4 + (size_t)flen)
		return 0;
	if (recv(c->fd, wl->dgram, 4 + (size_t)flen, MSG_DONTWAIT) !=
	    (ssize_t)(4 + flen))
		goto give_back;
	if (!srn_rpc_net_is_call(wl->dgram + 4, flen))
		return 0; /* not a call: dropped, as the receiver does */
	wl->pend_len = flen;
	wl->pend_off = 4;
	wl->pend_kind = SRN_RPC_FROM_TCP;
	wl->pend_peer_len = 0;
	/* relaxed: a reference count increment needs no order */
	__atomic_fetch_add(&c->refs, 1, __ATOMIC_RELAXED);
	wl->pend_conn = c;
	return srn_rpc_claim_self(wl->w, wl->n) ? 1 : 0;
give_back: /* until a call of it comes through the receiver again */
	srn_rpc_net_conn_drop(wl);
	return 0;
}

/*
 * 1: the worker read a call from the UDP socket (or its stream) and made
 * it its call n (srn_rpc_claim_self); it is in wl->dgram, pend_len bytes
 * from pend_off. 0: none, or a same-host caller claimed call n first: the
 * call waits in wl->dgram until that call is served (srn_rpc_worker_main).
 */
int srn_rpc_net_take(struct srn_rpc_wlocal *wl)
{
	ssize_t k;

	if (wl->pend_len)
		return 0;
	if (wl->net_conn) {
		srn_rpc_net_conn_own(wl); /* the receiver may have held it */
		return wl->net_owned ? srn_rpc_net_take_record(wl) : 0;
	}
	wl->pend_peer_len = sizeof(wl->pend_peer);
	k = recvfrom(wl->srv->ufd, wl->dgram, SRN_RPC_DGRAM_MAX, MSG_DONTWAIT,
		     (struct sockaddr *)&wl->pend_peer, &wl->pend_peer_len);
	if (k <= 0 || !srn_rpc_net_is_call(wl->dgram, (size_t)k))
		return 0; /* nothing, or not a call: dropped */
	wl->pend_len = (size_t)k;
	wl->pend_off = 0;
	wl->pend_kind = SRN_RPC_FROM_UDP;
	wl->pend_conn = NULL;
	return srn_rpc_claim_self(wl->w, wl->n) ? 1 : 0;
}
