// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the target side of the same-host control protocol:
 * srn_ctl_classify (proto/srn_ctl_proto.h), the pure function that decides
 * what engine/ctl.c dispatches for a message received on a QP's control
 * socket (its bytes, its length, how many fds came with it, whether the
 * connection has attached). ASan and UBSan watch it read only the bytes it
 * was given, unaligned; an independent, table-driven statement of the
 * rules (docs/shm-layout.md) checks every verdict, and the invariants the
 * handlers rely on abort when broken.
 *
 * Input: byte 0 chooses the mode and context (bit 0: structure-aware,
 * bits 1-2: fds, bit 3: attached); then, raw: the message itself;
 * structure-aware: a type, mutation bits and a length delta, then the
 * fields after the header. The structure-aware mode builds a valid header
 * for the type and breaks only what the mutation bits say, so the fuzzer
 * reaches the checks behind the header's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "proto/srn_ctl_proto.h"

#define QPN 0x123456u

struct rule {
	size_t len;
	unsigned fds;
	bool early; /* allowed before attach */
};

static const struct rule rules[SRN_CTL_XSRQ_REP + 1] = {
	[SRN_CTL_CONNECT_REQ] = { 32, 1, true },
	[SRN_CTL_MR_REQ] = { 24, 0, false },
	[SRN_CTL_BYE] = { 16, 0, true },
	[SRN_CTL_ADOPT] = { 56, 1, true },
	[SRN_CTL_STAT_REQ] = { 16, 0, true },
	[SRN_CTL_XSRQ_REQ] = { 24, 0, false },
};

static uint32_t rd32(const uint8_t *p, size_t off)
{
	uint32_t v;

	memcpy(&v, p + off, sizeof(v));
	return v;
}

/* The rules again, written from the protocol's table, not from the code. */
static int oracle(const uint8_t *m, size_t len, unsigned nfds, bool attached)
{
	const struct rule *r;
	uint16_t type, version;

	if (len < 16)
		return -EBADMSG;
	memcpy(&version, m + 4, 2);
	memcpy(&type, m + 6, 2);
	if (rd32(m, 0) != SRN_CTL_MAGIC || version != SRN_CTL_VERSION ||
	    rd32(m, 12) != len)
		return -EBADMSG;
	r = type < sizeof(rules) / sizeof(rules[0]) ? &rules[type] : NULL;
	if (!r || !r->len)
		return -EPROTO;
	if (len != r->len || nfds != r->fds || rd32(m, 8))
		return -EPROTO;
	if (!attached && !r->early)
		return -EPERM;
	if (type == SRN_CTL_CONNECT_REQ &&
	    (rd32(m, 20) != QPN || !rd32(m, 16) || rd32(m, 16) > 0xffffff))
		return -EPROTO;
	if (type == SRN_CTL_ADOPT && (rd32(m, 16) != QPN || rd32(m, 20) > 32))
		return -EPROTO;
	return type;
}

static void verdict(const uint8_t *m, size_t len, unsigned nfds, bool att)
{
	int got = srn_ctl_classify(m, len, nfds, QPN, att);
	int want = oracle(m, len, nfds, att);

	if (got != want) {
		fprintf(stderr,
			"classify %d, rules say %d (len %zu fds %u%s)\n", got,
			want, len, nfds, att ? " attached" : "");
		abort();
	}
	/* what the handlers take for granted once a type is dispatched */
	if (got > 0 && (len > SRN_CTL_MAX_MSG || len != rules[got].len ||
			nfds != rules[got].fds || (!att && !rules[got].early)))
		abort();
}

/* Structure-aware: a valid header for in[0]'s type, broken on purpose
 * only where in[1]'s bits say, the rest of the fields from in[3...]. */
static void structured(const uint8_t *in, size_t n, unsigned nfds, bool att)
{
	static const uint16_t types[] = { 0, 1, 2, 3,  4,  5,	  6,
					  7, 8, 9, 10, 11, 0xffff };
	uint8_t buf[SRN_CTL_MAX_MSG + 17];
	struct srn_ctl_hdr h = { SRN_CTL_MAGIC, SRN_CTL_VERSION, 0, 0, 0 };
	uint8_t bits, delta;
	size_t len;

	if (n < 3)
		return;
	h.type = types[in[0] % (sizeof(types) / sizeof(types[0]))];
	bits = in[1];
	delta = in[2];
	len = h.type < sizeof(rules) / sizeof(rules[0]) && rules[h.type].len ?
		      rules[h.type].len :
		      16 + delta % 64;
	if (bits & 1) /* a wrong length, within the buffer */
		len = (len + (int8_t)delta) % (sizeof(buf) - 1);
	h.len = (uint32_t)len;
	if (bits & 2)
		h.magic ^= 1u << (delta % 32);
	if (bits & 4)
		h.version++;
	if (bits & 8)
		h.status = -(int32_t)(delta + 1);
	if (bits & 16)
		h.len ^= 1u << (delta % 12);
	memset(buf, 0, sizeof(buf));
	memcpy(buf + 16, in + 3,
	       n - 3 < sizeof(buf) - 16 ? n - 3 : sizeof(buf) - 16);
	if (!(bits & 32)) { /* the QPN fields right, unless asked */
		uint32_t q = QPN;

		memcpy(buf + (h.type == SRN_CTL_CONNECT_REQ ? 20 : 16), &q, 4);
	}
	memcpy(buf, &h, sizeof(h));
	verdict(buf, len, nfds, att);
	memmove(buf + 1, buf, len); /* the same, unaligned */
	verdict(buf + 1, len, nfds, att);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned nfds;
	bool att;

	if (size < 1)
		return 0;
	nfds = (data[0] >> 1) & 3;
	att = data[0] & 8;
	if (data[0] & 1)
		structured(data + 1, size - 1, nfds, att);
	else
		verdict(data + 1, size - 1, nfds, att); /* raw, unaligned */
	return 0;
}
