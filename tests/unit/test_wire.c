// SPDX-License-Identifier: MIT
/*
 * The wire parser: a stream of valid messages, both ways, parses the same
 * however it is cut (every split point, byte by byte) or read from a
 * socket; a sink may pause it; every invalid field is refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tcp/wire.h"
#include "unit_check.h"

struct got {
	unsigned msgs, acks, pauses;
	uint32_t last_ack;
	uint8_t data[256];
	size_t len;
	unsigned ops[16];
	bool pause_sends; /* on_hdr refuses each SEND once (-EAGAIN) */
};

static int on_hdr(void *ctx, const struct srn_wire_hdr *h, struct iovec *iov,
		  unsigned *niov)
{
	struct got *g = ctx;

	if (g->pause_sends && h->opcode == SRN_WOP_SEND && !g->pauses++)
		return -EAGAIN;
	g->pauses = 0;
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

	if (g->msgs < 16)
		g->ops[g->msgs] = h->opcode;
	g->msgs++;
	return 0;
}

static int on_ack(void *ctx, uint32_t psn)
{
	struct got *g = ctx;

	g->acks++;
	g->last_ack = psn;
	return 0;
}

static const struct srn_wire_sink sink = { on_hdr, on_msg, on_ack };

static size_t put_ack(uint8_t *buf, uint8_t op, uint32_t psn, const void *p,
		      uint32_t len, uint32_t ack)
{
	struct srn_wire_hdr h = { .magic = SRN_WIRE_MAGIC,
				  .version = SRN_WIRE_VERSION,
				  .opcode = op,
				  .psn = psn,
				  .len = len };

	if (ack != UINT32_MAX) {
		h.flags = SRN_WF_ACK;
		h.ack_psn = ack;
	}
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), p, len);
	return sizeof(h) + len;
}

static size_t put(uint8_t *buf, uint8_t op, uint32_t psn, const void *p,
		  uint32_t len)
{
	return put_ack(buf, op, psn, p, len, UINT32_MAX);
}

static size_t make_stream(uint8_t *buf)
{
	struct srn_wire_hello hello = { .src_qpn = 1, .dst_qpn = 2 };
	struct srn_wire_atomic at = { 1, 2 };
	const char *msg = "0123456789abcdefghijklmnopqrstuvwxyz"; /* 36 */
	size_t n = 0;

	n += put(buf + n, SRN_WOP_HELLO, 0, &hello, sizeof(hello));
	n += put(buf + n, SRN_WOP_SEND, 0, msg, 36);
	n += put_ack(buf + n, SRN_WOP_WRITE, 1, msg, 5, 6); /* piggyback */
	n += put(buf + n, SRN_WOP_ACK, 9, NULL, 0); /* answers, the other */
	n += put(buf + n, SRN_WOP_READ_RESP, 10, msg + 30, 6); /* way */
	n += put(buf + n, SRN_WOP_READ_REQ, 2, NULL, 0);
	n += put(buf + n, SRN_WOP_ATOMIC, 3, &at, sizeof(at));
	n += put_ack(buf + n, SRN_WOP_SEND, 4, NULL, 0, 11);
	return n;
}

static void check_result(const struct got *g)
{
	CHECK(g->msgs == 8);
	CHECK(g->ops[0] == SRN_WOP_HELLO && g->ops[1] == SRN_WOP_SEND &&
	      g->ops[3] == SRN_WOP_ACK && g->ops[4] == SRN_WOP_READ_RESP &&
	      g->ops[6] == SRN_WOP_ATOMIC && g->ops[7] == SRN_WOP_SEND);
	CHECK(g->acks == 2 && g->last_ack == 11);
	/* hello (23 of 28 kept), send (23 of 36), write (5), read resp
	 * (6), atomic (16) */
	CHECK(g->len == 23 + 23 + 5 + 6 + 16);
	CHECK(!memcmp(g->data + 23, "0123456789abcdefghijklm", 23));
	CHECK(!memcmp(g->data + 46, "01234", 5));
	CHECK(!memcmp(g->data + 51, "uvwxyz", 6));
}

/* Feeds all of buf, resuming after every pause. */
static void feed_all(struct srn_wire_rx *rx, const uint8_t *buf, size_t n,
		     struct got *g)
{
	size_t off = 0, used;
	int err, rounds = 0;

	while ((err = srn_wire_feed(rx, buf + off, n - off, &sink, g, &used)) ==
		       -EAGAIN &&
	       rounds++ < 100)
		off += used;
	CHECK(err == 0);
	CHECK(off + used == n);
}

static void test_splits(void)
{
	uint8_t buf[1024];
	size_t n = make_stream(buf);

	for (size_t cut = 0; cut <= n; cut++) {
		struct srn_wire_rx rx;
		struct got g = { 0 };

		srn_wire_rx_init(&rx);
		g.pause_sends = cut & 1; /* and every other one pauses */
		feed_all(&rx, buf, cut, &g);
		feed_all(&rx, buf + cut, n - cut, &g);
		check_result(&g);
	}
	{ /* byte by byte */
		struct srn_wire_rx rx;
		struct got g = { 0 };

		srn_wire_rx_init(&rx);
		for (size_t i = 0; i < n; i++)
			feed_all(&rx, buf + i, 1, &g);
		check_result(&g);
	}
}

/* The same stream from a socket, plus a payload large enough to go
 * straight into its destination; a paused parser keeps what it staged. */
static int big_hdr(void *ctx, const struct srn_wire_hdr *h, struct iovec *iov,
		   unsigned *niov)
{
	if (h->opcode != SRN_WOP_WRITE || h->len < 4096)
		return on_hdr(ctx, h, iov, niov);
	iov[0].iov_base = ((struct got *)ctx)->data + 200; /* unused */
	iov[0].iov_len = 0;
	iov[1].iov_base = *(uint8_t **)((struct got *)ctx + 1);
	iov[1].iov_len = h->len;
	*niov = 2;
	return 0;
}

static void test_socket(void)
{
	static uint8_t big[65536], dst[65536];
	static const struct srn_wire_sink bsink = { big_hdr, on_msg, on_ack };
	struct {
		struct got g;
		uint8_t *dst;
	} c = { .dst = dst };
	uint8_t buf[1024];
	size_t n = make_stream(buf);
	struct srn_wire_rx rx;
	int sv[2], sz = 1 << 20, err, rounds = 0;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	CHECK(write(sv[0], buf, n) == (ssize_t)n);
	{
		struct srn_wire_hdr h = { .magic = SRN_WIRE_MAGIC,
					  .version = SRN_WIRE_VERSION,
					  .opcode = SRN_WOP_WRITE,
					  .psn = 5,
					  .len = sizeof(big) };

		CHECK(write(sv[0], &h, sizeof(h)) == sizeof(h));
		CHECK(write(sv[0], big, sizeof(big)) == sizeof(big));
	}
	srn_wire_rx_init(&rx);
	c.g.pause_sends = true;
	while ((err = srn_wire_recv(&rx, sv[1], &bsink, &c.g)) == -EAGAIN &&
	       rounds++ < 100)
		;
	while (!err && c.g.msgs < 9 && rounds++ < 100)
		err = srn_wire_recv(&rx, sv[1], &bsink, &c.g);
	CHECK(err == 0 && c.g.msgs == 9);
	CHECK(!memcmp(dst, big, sizeof(big)));
	c.g.msgs = 8;
	check_result(&c.g);
	close(sv[0]);
	CHECK(srn_wire_recv(&rx, sv[1], &bsink, &c.g) == -ECONNRESET);
	close(sv[1]);
}

static int refused(struct srn_wire_hdr h)
{
	struct srn_wire_rx rx;
	struct got g = { 0 };
	size_t used;

	srn_wire_rx_init(&rx);
	return srn_wire_feed(&rx, (uint8_t *)&h, sizeof(h), &sink, &g, &used) <
	       0;
}

/* HELLO is 28 bytes since version 5 (its rq_psn): 24, version 4's, is
 * refused. */
static void test_hello_len(void)
{
	struct srn_wire_hdr h = { .magic = SRN_WIRE_MAGIC,
				  .version = SRN_WIRE_VERSION,
				  .opcode = SRN_WOP_HELLO,
				  .len = sizeof(struct srn_wire_hello) };

	CHECK(h.len == 28 && !refused(h));
	h.len = 24;
	CHECK(refused(h));
}

static void test_invalid(void)
{
	struct srn_wire_hdr ok = { .magic = SRN_WIRE_MAGIC,
				   .version = SRN_WIRE_VERSION,
				   .opcode = SRN_WOP_WRITE },
			    h;

	CHECK(!refused(ok));
	h = ok, h.magic ^= 1;
	CHECK(refused(h));
	h = ok, h.version = 1;
	CHECK(refused(h));
	h = ok, h.opcode = 0;
	CHECK(refused(h));
	h = ok, h.opcode = SRN_WOP_NR;
	CHECK(refused(h));
	h = ok, h.flags = 0x80;
	CHECK(refused(h));
	h = ok, h.srqn = 1u << 24; /* over 24 bits */
	CHECK(refused(h));
	h = ok, h.ack_psn = 3; /* without SRN_WF_ACK */
	CHECK(refused(h));
	h = ok, h.flags = SRN_WF_ACK, h.ack_psn = 3;
	CHECK(!refused(h));
	h = ok, h.opcode = SRN_WOP_HELLO, h.len = 28, h.flags = SRN_WF_ACK;
	CHECK(refused(h));
	h = ok, h.psn = 5; /* out of sequence */
	CHECK(refused(h));
	{ /* before its owner anchors it, the first request may start
	   * anywhere; the next ones follow it */
		struct srn_wire_rx rx;
		struct got g = { 0 };
		size_t used;

		srn_wire_rx_init(&rx);
		rx.psn_free = true;
		h = ok, h.psn = 0xabcdef;
		CHECK(srn_wire_feed(&rx, (uint8_t *)&h, sizeof(h), &sink, &g,
				    &used) >= 0);
		h.psn = 0xabcdef + 2; /* one skipped */
		CHECK(srn_wire_feed(&rx, (uint8_t *)&h, sizeof(h), &sink, &g,
				    &used) < 0);
	}
	h = ok, h.len = SRN_WIRE_MAX_PAYLOAD + 1;
	CHECK(refused(h));
	h = ok, h.opcode = SRN_WOP_ACK, h.aux = SRN_WS_NR;
	CHECK(refused(h));
	h.aux = SRN_WS_RNR;
	CHECK(!refused(h));
	h = ok, h.opcode = SRN_WOP_ACK, h.psn = 77; /* answers: any psn */
	CHECK(!refused(h));
	h = ok, h.opcode = SRN_WOP_ATOMIC, h.len = 15;
	CHECK(refused(h));
	h = ok, h.opcode = SRN_WOP_ATOMIC_RESP, h.len = 9;
	CHECK(refused(h));
	h = ok, h.opcode = SRN_WOP_BYE, h.len = 1;
	CHECK(refused(h));
	CHECK(srn_wire_op_names[SRN_WOP_READ_RESP] &&
	      !strcmp(srn_wire_op_names[SRN_WOP_READ_RESP], "READ_RESP"));
}

/* A destination larger than the payload (a receive WQE bigger than the
 * message) takes the payload only: the next message, in the same buffer,
 * is parsed as such. */
static uint8_t wide_buf[256];

static int wide_hdr(void *ctx, const struct srn_wire_hdr *h, struct iovec *iov,
		    unsigned *niov)
{
	iov[0].iov_base = wide_buf;
	iov[0].iov_len = sizeof(wide_buf);
	*niov = 1;
	return 0;
}

static void test_wide_dest(void)
{
	static const struct srn_wire_sink wide = { wide_hdr, on_msg, on_ack };
	uint8_t buf[512];
	struct srn_wire_rx rx;
	struct got g = { 0 };
	size_t n = 0, used;

	n += put(buf + n, SRN_WOP_SEND, 0, "abcd", 4);
	n += put(buf + n, SRN_WOP_SEND, 1, "efgh", 4);
	memset(wide_buf, 0, sizeof(wide_buf));
	srn_wire_rx_init(&rx);
	CHECK(srn_wire_feed(&rx, buf, n, &wide, &g, &used) == 0);
	CHECK(used == n && g.msgs == 2);
	CHECK(!memcmp(wide_buf, "efgh", 4) && wide_buf[4] == 0);
	CHECK(rx.payload_left == 0 && rx.hdr_have == 0);
}

/* Go back N: after requests 0-3, request 1 may come again (the responder
 * NAKed it, RNR); a request beyond the next one never may. */
static void test_retransmit(void)
{
	uint8_t buf[1024];
	struct srn_wire_rx rx;
	struct got g = { 0 };
	size_t n = 0, used;

	for (uint32_t psn = 0; psn < 4; psn++)
		n += put(buf + n, SRN_WOP_SEND, psn, "abcd", 4);
	n += put(buf + n, SRN_WOP_SEND, 1, "abcd", 4); /* again */
	n += put(buf + n, SRN_WOP_SEND, 2, "abcd", 4);
	srn_wire_rx_init(&rx);
	feed_all(&rx, buf, n, &g);
	CHECK(g.msgs == 6);
	n = put(buf, SRN_WOP_SEND, 4, "abcd", 4); /* skips 3 */
	CHECK(srn_wire_feed(&rx, buf, n, &sink, &g, &used) == -EPROTO);
	srn_wire_rx_init(&rx);
	n = put(buf, SRN_WOP_SEND, 0, "abcd", 4);
	n += put(buf + n, SRN_WOP_SEND, 0, "abcd", 4); /* a repeat is legal */
	n += put(buf + n, SRN_WOP_SEND, 2, "abcd", 4); /* a gap is not */
	g.msgs = 0;
	CHECK(srn_wire_feed(&rx, buf, n, &sink, &g, &used) == -EPROTO);
	CHECK(g.msgs == 2);
}

int main(void)
{
	test_splits();
	test_retransmit();
	test_wide_dest();
	test_socket();
	test_invalid();
	test_hello_len();
	return unit_summary();
}
