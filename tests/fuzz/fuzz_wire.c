// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the wire parser: arbitrary bytes, cut at arbitrary
 * points, fed as a request stream or a response stream. The parser must
 * never crash, read or write out of bounds, or hang; ASan and UBSan watch.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "wire.h"

static uint8_t dest[4096];

static int on_hdr(void *ctx, const struct srn_wire_hdr *h, struct iovec *iov,
		  unsigned *niov)
{
	/* as the transport does: point up to two destinations into a
	 * registered buffer, bounded by it; the rest is discarded */
	size_t a = h->len < 1000 ? h->len : 1000;
	size_t b = h->len - a < 3000 ? h->len - a : 3000;

	iov[0].iov_base = dest;
	iov[0].iov_len = a;
	iov[1].iov_base = dest + a;
	iov[1].iov_len = b;
	*niov = 2;
	return h->opcode == SRN_WOP_BYE ? -ECONNRESET : 0;
}

static int on_msg(void *ctx, const struct srn_wire_hdr *h)
{
	(*(unsigned *)ctx)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct srn_wire_sink sink = { on_hdr, on_msg };
	struct srn_wire_rx rx;
	unsigned msgs = 0;
	size_t off = 2;

	if (size < 2)
		return 0;
	srn_wire_rx_init(&rx, data[0] & 1);
	while (off < size) {
		size_t chunk = 1 + (data[1] ^ off) % 64;

		if (chunk > size - off)
			chunk = size - off;
		if (srn_wire_feed(&rx, data + off, chunk, &sink, &msgs) < 0)
			break;
		off += chunk;
	}
	return 0;
}
