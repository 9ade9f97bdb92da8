// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — network calls a worker reads itself. A worker that spins
 * after a UDP call polls the service's UDP socket too, and a call it reads
 * becomes its own next call (srn_rpc_claim_self): no hand-off by the
 * receiver and no wake-up on either side, so a busy network caller gets
 * near the latency of a busy-polling UDP server. The receiver (rpc_net.c)
 * leaves the socket out of its poll set while any worker polls it.
 */
#define _GNU_SOURCE
#include <stdint.h>
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
void srn_rpc_net_spin_enter(struct srn_rpc_wlocal *wl)
{
	if (wl->net_spinning)
		return;
	wl->net_spinning = true;
	/* relaxed: the receiver only drops the socket from its next poll
	 * set; a datagram waits in the socket for whoever reads it */
	__atomic_fetch_add(&wl->srv->net_spinners, 1, __ATOMIC_RELAXED);
}

void srn_rpc_net_spin_leave(struct srn_rpc_wlocal *wl)
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
 * 1: the worker read a call from the UDP socket and made it its call n
 * (srn_rpc_claim_self); it is in wl->dgram, pend_len bytes. 0: none, or a
 * same-host caller claimed call n first: the datagram waits in wl->dgram
 * until that call is served (srn_rpc_worker_main).
 */
int srn_rpc_net_take(struct srn_rpc_wlocal *wl)
{
	ssize_t k;

	if (wl->pend_len)
		return 0;
	wl->pend_peer_len = sizeof(wl->pend_peer);
	k = recvfrom(wl->srv->ufd, wl->dgram, SRN_RPC_DGRAM_MAX, MSG_DONTWAIT,
		     (struct sockaddr *)&wl->pend_peer, &wl->pend_peer_len);
	if (k <= 0 || !srn_rpc_net_is_call(wl->dgram, (size_t)k))
		return 0; /* nothing, or not a call: dropped */
	wl->pend_len = (size_t)k;
	return srn_rpc_claim_self(wl->w, wl->n) ? 1 : 0;
}
