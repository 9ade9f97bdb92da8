// SPDX-License-Identifier: MIT
/*
 * The wire parser: a stream of valid messages parses the same however it
 * is cut (every split point, byte by byte); every invalid field is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "unit_check.h"


struct got {
	unsigned msgs;
	uint8_t data[256];
	size_t len;
	unsigned ops[8];
};

static int on_hdr(void *ctx, const struct srn_wire_hdr *h, struct iovec *iov,
		  unsigned *niov)
{
	struct got *g = ctx;

	/* split the payload over two destinations, the rest discarded */
	iov[0].iov_base = g->data + g->len;
	iov[0].iov_len = h->len > 3 ? 3 : h->len;
	iov[1].iov_base = g->data + g->len + 3;
	iov[1].iov_len = h->len > 3 ? (h->len - 3 > 20 ? 20 : h->len - 3) : 0;
	*niov = 2;
	g->len += iov[0].iov_len + iov[1].iov_len;
	return 0;
}

static int on_msg(void *ctx, const struct srn_wire_hdr *h)
{
	struct got *g = ctx;

	if (g->msgs < 8)
		g->ops[g->msgs] = h->opcode;
	g->msgs++;
	return 0;
}

static const struct srn_wire_sink sink = { on_hdr, on_msg };

static size_t put(uint8_t *buf, uint8_t op, uint32_t psn, const void *p,
		  uint32_t len)
{
	struct srn_wire_hdr h = { SRN_WIRE_MAGIC, SRN_WIRE_VERSION, op, 0,
				  psn, len, 0, 0, 0 };

	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), p, len);
	return sizeof(h) + len;
}

static size_t make_stream(uint8_t *buf)
{
	struct srn_wire_hello hello = { .src_qpn = 1, .dst_qpn = 2 };
	struct srn_wire_atomic at = { 1, 2 };
	const char *msg = "0123456789abcdefghijklmnopqrstuvwxyz"; /* 36 */
	size_t n = 0;

	n += put(buf + n, SRN_WOP_HELLO, 0, &hello, sizeof(hello));
	n += put(buf + n, SRN_WOP_SEND, 0, msg, 36);
	n += put(buf + n, SRN_WOP_WRITE, 1, msg, 5);
	n += put(buf + n, SRN_WOP_READ_REQ, 2, NULL, 0);
	n += put(buf + n, SRN_WOP_ATOMIC, 3, &at, sizeof(at));
	n += put(buf + n, SRN_WOP_SEND, 4, NULL, 0);
	return n;
}

static void check_result(const struct got *g)
{
	CHECK(g->msgs == 6);
	CHECK(g->ops[0] == SRN_WOP_HELLO && g->ops[1] == SRN_WOP_SEND &&
	      g->ops[4] == SRN_WOP_ATOMIC && g->ops[5] == SRN_WOP_SEND);
	/* hello (23 of 24 kept), send (23 of 36), write (5), atomic (16) */
	CHECK(g->len == 23 + 23 + 5 + 16);
	CHECK(!memcmp(g->data + 23, "0123456789abcdefghijklm", 23));
	CHECK(!memcmp(g->data + 46, "01234", 5));
}

static void test_splits(void)
{
	uint8_t buf[1024];
	size_t n = make_stream(buf);

	for (size_t cut = 0; cut <= n; cut++) {
		struct srn_wire_rx rx;
		struct got g = { 0 };

		srn_wire_rx_init(&rx, true);
		CHECK(srn_wire_feed(&rx, buf, cut, &sink, &g) == (ssize_t)cut);
		CHECK(srn_wire_feed(&rx, buf + cut, n - cut, &sink, &g) ==
		      (ssize_t)(n - cut));
		check_result(&g);
	}
	{ /* byte by byte */
		struct srn_wire_rx rx;
		struct got g = { 0 };

		srn_wire_rx_init(&rx, true);
		for (size_t i = 0; i < n; i++)
			CHECK(srn_wire_feed(&rx, buf + i, 1, &sink, &g) == 1);
		check_result(&g);
	}
}

static int refused(struct srn_wire_hdr h, bool requests)
{
	struct srn_wire_rx rx;
	struct got g = { 0 };

	srn_wire_rx_init(&rx, requests);
	return srn_wire_feed(&rx, (uint8_t *)&h, sizeof(h), &sink, &g) < 0;
}

static void test_invalid(void)
{
	struct srn_wire_hdr ok = { SRN_WIRE_MAGIC, SRN_WIRE_VERSION,
				   SRN_WOP_WRITE, 0, 0, 0, 0, 0, 0 }, h;

	CHECK(!refused(ok, true));
	h = ok, h.magic ^= 1;
	CHECK(refused(h, true));
	h = ok, h.version = 2;
	CHECK(refused(h, true));
	h = ok, h.opcode = 0;
	CHECK(refused(h, true));
	h = ok, h.opcode = SRN_WOP_NR;
	CHECK(refused(h, true));
	h = ok, h.flags = 0x80;
	CHECK(refused(h, true));
	h = ok, h.psn = 5; /* out of sequence */
	CHECK(refused(h, true));
	h = ok, h.len = SRN_WIRE_MAX_PAYLOAD + 1;
	CHECK(refused(h, true));
	CHECK(refused(ok, false)); /* a request on a response stream */
	h = ok, h.opcode = SRN_WOP_ACK, h.aux = SRN_WS_NR;
	CHECK(refused(h, false));
	h.aux = SRN_WS_RNR;
	CHECK(!refused(h, false));
	h = ok, h.opcode = SRN_WOP_ATOMIC, h.len = 15;
	CHECK(refused(h, true));
	h = ok, h.opcode = SRN_WOP_ATOMIC_RESP, h.len = 9;
	CHECK(refused(h, false));
	h = ok, h.opcode = SRN_WOP_BYE, h.len = 1;
	CHECK(refused(h, true));
	CHECK(srn_wire_op_names[SRN_WOP_READ_RESP] &&
	      !strcmp(srn_wire_op_names[SRN_WOP_READ_RESP], "READ_RESP"));
}

int main(void)
{
	test_splits();
	test_invalid();
	return unit_summary();
}
