// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the wire parser: arbitrary bytes, cut at arbitrary
 * points, with a sink that pauses now and then. The parser must
 * never crash, read or write out of bounds, or hang; ASan and UBSan watch.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "transport/tcp/wire.h"

static uint8_t dest[4096];

static int on_hdr(void *ctx, const struct srn_wire_hdr *h, struct iovec *iov,
		  unsigned *niov)
{
	/* as the transport does: point up to two destinations into a
	 * registered buffer, bounded by it; the rest is discarded. The
	 * second may be larger than the payload (a receive WQE larger
	 * than the message): the parser must stop at the payload's end */
	size_t a = h->len < 1000 ? h->len : 1000;
	size_t b = 3000;

	iov[0].iov_base = dest;
	iov[0].iov_len = a;
	iov[1].iov_base = dest + a;
	iov[1].iov_len = b;
	*niov = 2;
	if (h->opcode == SRN_WOP_SEND && (h->psn & 1) &&
	    !(*(unsigned *)ctx & 1))
		return -EAGAIN; /* pause now and then */
	return h->opcode == SRN_WOP_BYE ? -ECONNRESET : 0;
}

static int on_ack(void *ctx, uint32_t psn)
{
	return psn == 0xdead ? -EPROTO : 0;
}

static int on_msg(void *ctx, const struct srn_wire_hdr *h)
{
	(*(unsigned *)ctx) += 2;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct srn_wire_sink sink = { on_hdr, on_msg, on_ack };
	static struct srn_wire_rx rx;
	unsigned msgs = 0, pauses = 0;
	size_t off = 2;

	if (size < 2)
		return 0;
	srn_wire_rx_init(&rx);
	while (off < size) {
		size_t chunk = 1 + (data[1] ^ off) % 64, used = 0;
		int err;

		if (chunk > size - off)
			chunk = size - off;
		err = srn_wire_feed(&rx, data + off, chunk, &sink, &msgs,
				    &used);
		if (used > chunk || rx.payload_left > SRN_WIRE_MAX_PAYLOAD)
			__builtin_trap(); /* overran, or the payload wrapped */
		off += used;
		if (err == -EAGAIN) {
			msgs |= 1; /* the next try goes through */
			if (++pauses > size)
				__builtin_trap(); /* no progress: a hang */
			continue;
		}
		msgs &= ~1u;
		if (err)
			break;
	}
	return 0;
}
