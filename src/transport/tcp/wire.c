// SPDX-License-Identifier: MIT
/*
 * softrnic — the wire protocol's receive side: header checks and a parser
 * that resumes at any byte boundary. Payloads go straight to where the
 * consumer points them (registered memory, via recvmsg iovecs), or are
 * discarded; nothing is copied through an intermediate buffer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tcp/wire.h"

const char *const srn_wire_op_names[] = {
	[SRN_WOP_HELLO] = "HELLO",
	[SRN_WOP_HELLO_ACK] = "HELLO_ACK",
	[SRN_WOP_SEND] = "SEND",
	[SRN_WOP_WRITE] = "WRITE",
	[SRN_WOP_READ_REQ] = "READ_REQ",
	[SRN_WOP_ATOMIC] = "ATOMIC",
	[SRN_WOP_ACK] = "ACK",
	[SRN_WOP_READ_RESP] = "READ_RESP",
	[SRN_WOP_ATOMIC_RESP] = "ATOMIC_RESP",
	[SRN_WOP_BYE] = "BYE",
};

/* The operations that take a request sequence number. */
bool srn_wire_is_request(unsigned op)
{
	return op == SRN_WOP_SEND || op == SRN_WOP_WRITE ||
	       op == SRN_WOP_READ_REQ || op == SRN_WOP_ATOMIC;
}

/* The payload length a valid header announces, or -EPROTO. */
static int64_t srn_wire_payload_len(const struct srn_wire_hdr *h)
{
	switch (h->opcode) {
	case SRN_WOP_HELLO:
		return h->len == sizeof(struct srn_wire_hello) ?
			       (int64_t)h->len :
			       -EPROTO;
	case SRN_WOP_ATOMIC:
		return h->len == sizeof(struct srn_wire_atomic) ?
			       (int64_t)h->len :
			       -EPROTO;
	case SRN_WOP_ATOMIC_RESP:
		return h->len == 8 ? 8 : -EPROTO;
	case SRN_WOP_SEND:
	case SRN_WOP_WRITE:
	case SRN_WOP_READ_RESP:
		return h->len <= SRN_WIRE_MAX_PAYLOAD ? (int64_t)h->len :
							-EPROTO;
	case SRN_WOP_READ_REQ: /* len is the amount asked for */
		return h->len <= SRN_WIRE_MAX_PAYLOAD ? 0 : -EPROTO;
	case SRN_WOP_ACK:
		return h->aux < SRN_WS_NR && !h->len ? 0 : -EPROTO;
	default: /* HELLO_ACK, BYE */
		return h->len ? -EPROTO : 0;
	}
}

/*
 * Static checks of a header: magic, version, opcode, flags, reserved
 * bits, lengths. Whether the message makes sense where it arrives (a
 * response to nothing, HELLO twice) is for the transport to check.
 * Returns the payload length that follows, or -EPROTO.
 */
int64_t srn_wire_hdr_check(const struct srn_wire_hdr *h)
{
	if (h->magic != SRN_WIRE_MAGIC || h->version != SRN_WIRE_VERSION)
		return -EPROTO;
	if (!h->opcode || h->opcode >= SRN_WOP_NR)
		return -EPROTO;
	if (h->flags & ~SRN_WF_ALL)
		return -EPROTO;
	if (h->srqn > 0xffffffu || (h->srqn && !srn_wire_is_request(h->opcode)))
		return -EPROTO; /* an XRC SRQ number names a request's SRQ */
	if ((h->flags & SRN_WF_ACK) ? h->opcode == SRN_WOP_HELLO ||
					      h->opcode == SRN_WOP_HELLO_ACK :
				      h->ack_psn != 0)
		return -EPROTO;
	return srn_wire_payload_len(h);
}

void srn_wire_rx_init(struct srn_wire_rx *rx)
{
	rx->hdr_have = 0;
	rx->next_psn = 0;
	rx->psn_free = false;
	rx->payload_left = 0;
	rx->niov = rx->iov_idx = 0;
	rx->iov_off = 0;
	rx->hdr_checked = rx->sink_ready = false;
	rx->stage_off = rx->stage_len = 0;
}

/* A complete header: check it and its sequence number (once), then ask
 * the sink where its payload goes (again after a pause). */
static int srn_wire_rx_hdr(struct srn_wire_rx *rx,
			   const struct srn_wire_sink *s, void *ctx)
{
	int64_t len;
	int err;

	if (!rx->hdr_checked) {
		len = srn_wire_hdr_check(&rx->hdr);
		if (len < 0)
			return (int)len;
		if (srn_wire_is_request(rx->hdr.opcode)) {
			/* TCP neither loses nor reorders: a request is the
			 * next one, or a retransmission (go back N after an
			 * RNR NAK; the responder checks which) */
			if (!rx->psn_free &&
			    (int32_t)(rx->hdr.psn - rx->next_psn) > 0)
				return -EPROTO;
			rx->psn_free = false;
			rx->next_psn = rx->hdr.psn + 1;
		}
		rx->hdr_checked = true;
		rx->payload_left = (uint64_t)len;
		if ((rx->hdr.flags & SRN_WF_ACK) && s->on_ack &&
		    (err = s->on_ack(ctx, rx->hdr.ack_psn)))
			return err;
	}
	rx->niov = 0;
	rx->iov_idx = 0;
	rx->iov_off = 0;
	err = s->on_hdr(ctx, &rx->hdr, rx->iov, &rx->niov);
	if (err)
		return err;
	if (rx->niov > SRN_WIRE_MAX_IOV)
		return -EINVAL;
	rx->sink_ready = true;
	return 0;
}

/* Where the next payload byte goes: *dst (NULL: discard) and how many
 * bytes may go there at most. */
static size_t srn_wire_rx_dst(struct srn_wire_rx *rx, uint8_t **dst)
{
	while (rx->iov_idx < rx->niov &&
	       rx->iov_off == rx->iov[rx->iov_idx].iov_len) {
		rx->iov_idx++;
		rx->iov_off = 0;
	}
	if (rx->iov_idx == rx->niov) {
		*dst = NULL;
		return rx->payload_left;
	}
	*dst = (uint8_t *)rx->iov[rx->iov_idx].iov_base + rx->iov_off;
	/* a destination may be larger than the payload (a receive WQE
	 * bigger than the message): never past the payload's end */
	return rx->iov[rx->iov_idx].iov_len - rx->iov_off < rx->payload_left ?
		       rx->iov[rx->iov_idx].iov_len - rx->iov_off :
		       rx->payload_left;
}

static void srn_wire_rx_advance(struct srn_wire_rx *rx, bool discard, size_t n)
{
	rx->payload_left -= n;
	if (!discard)
		rx->iov_off += n;
}

static int srn_wire_rx_done(struct srn_wire_rx *rx,
			    const struct srn_wire_sink *s, void *ctx)
{
	rx->hdr_have = 0;
	rx->hdr_checked = false;
	rx->sink_ready = false;
	return s->on_msg(ctx, &rx->hdr);
}

/* After a pause: ask the sink again where the payload goes. */
static int srn_wire_rx_resume(struct srn_wire_rx *rx,
			      const struct srn_wire_sink *s, void *ctx)
{
	int err = srn_wire_rx_hdr(rx, s, ctx);

	if (!err && !rx->payload_left)
		err = srn_wire_rx_done(rx, s, ctx);
	return err;
}

/*
 * Feeds n bytes of the stream. Returns 0 with *used_p = n, -EAGAIN when
 * the sink paused the parser (*used_p bytes were consumed; feed the rest
 * later), or another -errno: a protocol violation or the sink refused,
 * and the connection must be dropped.
 */
int srn_wire_feed(struct srn_wire_rx *rx, const uint8_t *buf, size_t n,
		  const struct srn_wire_sink *s, void *ctx, size_t *used_p)
{
	size_t used = 0;
	int err = 0;

	if (rx->hdr_have == sizeof(rx->hdr) && !rx->sink_ready)
		err = srn_wire_rx_resume(rx, s, ctx);
	while (!err && used < n) {
		if (rx->hdr_have < sizeof(rx->hdr)) {
			size_t k = sizeof(rx->hdr) - rx->hdr_have;

			k = k < n - used ? k : n - used;
			memcpy((uint8_t *)&rx->hdr + rx->hdr_have, buf + used,
			       k);
			rx->hdr_have += k;
			used += k;
			if (rx->hdr_have < sizeof(rx->hdr))
				break;
			err = srn_wire_rx_hdr(rx, s, ctx);
		} else {
			uint8_t *dst;
			size_t k = srn_wire_rx_dst(rx, &dst);

			k = k < n - used ? k : n - used;
			if (dst)
				memcpy(dst, buf + used, k);
			srn_wire_rx_advance(rx, !dst, k);
			used += k;
		}
		if (!err && rx->hdr_have == sizeof(rx->hdr) &&
		    !rx->payload_left)
			err = srn_wire_rx_done(rx, s, ctx);
	}
	*used_p = used;
	return err;
}

/* A large payload goes from the socket straight into its destination. */
static bool srn_wire_rx_direct(struct srn_wire_rx *rx, uint8_t **dst, size_t *k)
{
	if (!rx->sink_ready || rx->payload_left < SRN_WIRE_DIRECT_MIN)
		return false;
	*k = srn_wire_rx_dst(rx, dst);
	return *dst && *k >= SRN_WIRE_DIRECT_MIN;
}

/* Parses what is staged; -EAGAIN: paused, the rest stays staged. */
static int srn_wire_rx_staged(struct srn_wire_rx *rx,
			      const struct srn_wire_sink *s, void *ctx)
{
	size_t used = 0;
	int err = srn_wire_feed(rx, rx->stage + rx->stage_off,
				rx->stage_len - rx->stage_off, s, ctx, &used);

	rx->stage_off += (uint32_t)used;
	return err;
}

/*
 * Reads what the socket has and runs the parser over it: headers and
 * small payloads with one recv into the stage (then copied), large
 * payloads with recv straight into their destination. Returns 0 when the
 * socket has nothing more for now (a short read counts as that: epoll is
 * level-triggered), -EAGAIN when the sink paused the parser (call again
 * later), -ECONNRESET at end of stream, or another -errno on error.
 */
int srn_wire_recv(struct srn_wire_rx *rx, int fd, const struct srn_wire_sink *s,
		  void *ctx)
{
	for (;;) {
		bool direct, drained;
		uint8_t *dst;
		size_t k = 0;
		ssize_t got;
		int err;

		if (rx->stage_off < rx->stage_len ||
		    (rx->hdr_have == sizeof(rx->hdr) && !rx->sink_ready)) {
			err = srn_wire_rx_staged(rx, s, ctx);
			if (err)
				return err;
		}
		direct = srn_wire_rx_direct(rx, &dst, &k);
		if (!direct) {
			dst = rx->stage;
			k = sizeof(rx->stage);
		}
		got = recv(fd, dst, k, MSG_DONTWAIT);
		if (got == 0)
			return -ECONNRESET;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		drained = (size_t)got < k;
		if (direct) {
			srn_wire_rx_advance(rx, false, (size_t)got);
			if (!rx->payload_left &&
			    (err = srn_wire_rx_done(rx, s, ctx)))
				return err;
		} else {
			rx->stage_off = 0;
			rx->stage_len = (uint32_t)got;
			if ((err = srn_wire_rx_staged(rx, s, ctx)))
				return err;
		}
		if (drained)
			return 0;
	}
}

/* A header with every field but op, psn and len zero. */
void srn_wire_hdr_init(struct srn_wire_hdr *h, unsigned op, uint32_t psn,
		       uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->magic = SRN_WIRE_MAGIC;
	h->version = SRN_WIRE_VERSION;
	h->opcode = op;
	h->psn = psn;
	h->len = len;
}
