/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the wire protocol between hosts (TCP transport).
 *
 * Every message is a 40-byte header followed by len bytes of payload. One
 * TCP connection carries one RC QP pair, both ways: each side's requests
 * and its answers to the other's. Any message may also acknowledge the
 * other side's requests (SRN_WF_ACK, ack_psn). All fields are
 * little-endian; every one is checked by the receiver before it acts
 * (srn_wire_hdr_check). See docs/wire.md.
 */
#ifndef SRN_WIRE_PROTO_H
#define SRN_WIRE_PROTO_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define SRN_WIRE_MAGIC 0x57524e53u /* "SRNW" little endian */
#define SRN_WIRE_VERSION 5 /* 4: srqn (XRC); 5: HELLO carries rq_psn */
#define SRN_WIRE_MAX_PAYLOAD 0x80000000u /* = the port's max_msg_sz */

enum srn_wire_op {
	SRN_WOP_HELLO = 1, /* initiator -> target: which QP pair */
	SRN_WOP_HELLO_ACK, /* target -> initiator: status */
	SRN_WOP_SEND, /* request; payload = message */
	SRN_WOP_WRITE, /* request; payload = data for raddr/rkey */
	SRN_WOP_READ_REQ, /* request; no payload; len field = read length */
	SRN_WOP_ATOMIC, /* request; payload = struct srn_wire_atomic */
	SRN_WOP_ACK, /* response: status in aux; OK: every request up to
		      * and including psn is done; RNR: psn found no
		      * receive WQE and it and every later request were
		      * dropped (send them again after the time in rkey,
		      * IBTA min_rnr_timer encoding); else psn failed */
	SRN_WOP_READ_RESP, /* response; payload = the data read */
	SRN_WOP_ATOMIC_RESP, /* response; payload = the original value */
	SRN_WOP_BYE, /* either way: orderly close follows */
	SRN_WOP_NR
};

extern const char *const srn_wire_op_names[];

/* flags */
#define SRN_WF_IMM 0x1u /* aux carries immediate data (SEND, WRITE) */
#define SRN_WF_SOLICITED 0x2u
#define SRN_WF_CAS 0x4u /* ATOMIC: compare and swap, else fetch and add */
#define SRN_WF_ACK \
	0x8u /* ack_psn: the other side's requests up to and
			 * including it are done (cumulative) */
#define SRN_WF_INV 0x10u /* SEND: aux is a key to invalidate at the target */
#define SRN_WF_ALL 0x1fu

/* ACK status (aux of SRN_WOP_ACK) */
enum srn_wire_status {
	SRN_WS_OK = 0,
	SRN_WS_RNR, /* no receive WQE: go back to psn, retry later */
	SRN_WS_REM_ACCESS, /* key, PD, access or bounds */
	SRN_WS_REM_INV_REQ, /* opcode not allowed, length, alignment */
	SRN_WS_REM_OP, /* the responder failed otherwise */
	SRN_WS_NR
};

struct srn_wire_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t opcode; /* enum srn_wire_op */
	uint16_t flags; /* SRN_WF_* */
	uint32_t psn; /* request: its sequence number; response: the
		       * request's */
	uint32_t len; /* payload bytes that follow (READ_REQ: bytes asked) */
	uint32_t aux; /* immediate data, or status, or 0 */
	uint32_t rkey;
	uint64_t raddr;
	uint32_t ack_psn; /* with SRN_WF_ACK */
	uint32_t srqn; /* requests of an XRC INI QP: the XRC SRQ at the
			 * target (24 bits); else 0 */
};
static_assert(sizeof(struct srn_wire_hdr) == 40, "wire hdr size");
static_assert(offsetof(struct srn_wire_hdr, raddr) == 24, "raddr offset");
static_assert(offsetof(struct srn_wire_hdr, ack_psn) == 32, "ack offset");

/* The dialer's first message. rq_psn is the PSN its receive side expects
 * first (its RTR rq_psn): the target's sq_psn, if both were given the
 * PSNs the applications exchanged. The target takes it as the dialer's
 * proof of knowing that secret once it has an sq_psn (RTS). */
struct srn_wire_hello {
	uint8_t src_gid[16];
	uint32_t src_qpn;
	uint32_t dst_qpn;
	uint32_t rq_psn;
};
static_assert(sizeof(struct srn_wire_hello) == 28, "hello size");

struct srn_wire_atomic {
	uint64_t compare_add;
	uint64_t swap;
};
static_assert(sizeof(struct srn_wire_atomic) == 16, "atomic size");

#endif /* SRN_WIRE_PROTO_H */
