/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the connection manager's messages (librdmacm, docs/rdmacm.md).
 *
 * CM links: one stream connection from a process to the host's CM port
 * (SRN_CM_PORT_DEFAULT, SOFTRNIC_CM_PORT) carries the messages of every
 * rdma_cm connection that process makes to one rdma_cm port there (the
 * destination address, port space and port), as an IB CM's MADs of many
 * connections share QP1. Each message names the connection by the
 * sender's and the receiver's communication ids (local_id, remote_id: the
 * ids' own numbers, never 0; a REQ has no remote_id yet): REQ, then REP
 * or REJ back, RTU, and later DREQ/DREP either way; GONE says the sender's
 * id left without an answer (destroyed, or it gave up waiting), as closing
 * a connection of its own would. A side that waits for its peer's answer
 * (REP or REJ, RTU, DREP) gives up after SRN_CM_RESPONSE_MS without a
 * message; a side whose own application has not answered yet (REQ or REP
 * received) sends MRA every SRN_CM_MRA_MS meanwhile, as an IB CM sends
 * MRA. Every message is the same fixed-size struct below, integers in
 * network byte order, so a receiver reads whole SRN_CM_MSG_SIZE records
 * and checks each with srn_cm_msg_check before it looks at anything else.
 *
 * The process that accepted the link may not be the one listening on the
 * rdma_cm port its first REQ names: it then passes the link's fd with that
 * REQ to the abstract unix datagram socket SRN_CM_SOCK_FMT of that port
 * (SCM_RIGHTS, sender's credentials checked), or answers REJ with
 * SRN_CM_REJ_INVALID_SERVICE_ID when nobody listens there. A later REQ on
 * a link for a port its process does not listen on (any more) is answered
 * REJ SRN_CM_REJ_NOT_HERE: the active side dials the CM port again.
 */
#ifndef SRN_CM_PROTO_H
#define SRN_CM_PROTO_H

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define SRN_CM_MAGIC 0x4d43534eu /* "NSCM" */
#define SRN_CM_VERSION 4
#define SRN_CM_PORT_DEFAULT 4790
#define SRN_CM_RESPONSE_MS 4000 /* about an IB CM's response timeout */
#define SRN_CM_MRA_MS 1000
/* abstract name (leading NUL) of a listening rdma_cm port: port space
 * (RDMA_PS_*) and port number */
#define SRN_CM_SOCK_FMT "softrnic/cm/%u/%u"

enum srn_cm_msg_type {
	SRN_CM_REQ = 1,
	SRN_CM_REP = 2,
	SRN_CM_RTU = 3,
	SRN_CM_REJ = 4,
	SRN_CM_DREQ = 5,
	SRN_CM_DREP = 6,
	SRN_CM_MRA = 7, /* "received; my application has not answered yet" */
	SRN_CM_GONE = 8, /* the sender's id left the link unanswered */
	SRN_CM_MSG_NR,
};

/* Reject reasons, as the IB CM's (the event's status) */
enum srn_cm_rej_reason {
	SRN_CM_REJ_INVALID_SERVICE_ID = 8,
	SRN_CM_REJ_CONSUMER_DEFINED = 28,
	/* softrnic's own, never an event's status: this link's process does
	 * not listen on the port the REQ names; dial the CM port again */
	SRN_CM_REJ_NOT_HERE = 0x8000,
};

/*
 * SIDR (the UD port spaces, IBV_QPT_UD in the REQ): the REQ is a SIDR
 * REQ, the REP a SIDR REP (the QPN and Q_Key to send to) and the
 * connection closes after it; no RTU, no DREQ. A REJ is a SIDR REP with a
 * status, which the active side reports as UNREACHABLE with that status.
 */
enum srn_cm_sidr_status {
	SRN_CM_SIDR_UNSUPPORTED = 1, /* nobody listens on the port */
	SRN_CM_SIDR_REJECT = 2, /* rdma_reject */
};

/* Private data limits of the IB CM for each message (REQ of the RDMA
 * port spaces: 92 minus the 36-byte rdma_cm header; SIDR REQ: 216 minus
 * it; SIDR REP: 136) */
#define SRN_CM_PDATA_REQ 56
#define SRN_CM_PDATA_REQ_IB 92
#define SRN_CM_PDATA_SIDR_REQ 180
#define SRN_CM_PDATA_REP 196
#define SRN_CM_PDATA_SIDR_REP 136
#define SRN_CM_PDATA_REJ 148
#define SRN_CM_PDATA_MAX 196

/* Port spaces and QP types a REQ may name (<rdma/rdma_cma.h>, verbs.h) */
#define SRN_CM_PS_IB 0x013f
#define SRN_CM_PS_STREAM 0x0106 /* RDMA_PS_TCP */
#define SRN_CM_PS_UDP 0x0111
#define SRN_CM_PS_IPOIB 0x0002
#define SRN_CM_QPT_RC 2
#define SRN_CM_QPT_UD 4
#define SRN_CM_QPT_XRC_SEND 9 /* an XRC initiator; it connects to a TGT */

struct srn_cm_msg {
	uint32_t magic; /* SRN_CM_MAGIC */
	uint16_t version; /* SRN_CM_VERSION */
	uint8_t type; /* enum srn_cm_msg_type */
	uint8_t pdata_len; /* bytes of pdata[] used */
	uint32_t qpn; /* the sender's QP (REQ, REP), 24 bits */
	uint32_t psn; /* its first send PSN (REQ, REP), 24 bits */
	uint16_t dst_port; /* REQ: the rdma_cm port asked for */
	uint16_t src_port; /* REQ: the sender's rdma_cm port */
	uint16_t ps; /* REQ: port space (RDMA_PS_*) */
	uint8_t qp_type; /* REQ: IBV_QPT_RC or IBV_QPT_UD */
	uint8_t flags; /* none defined: 0 */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t retry_count; /* 0..7 */
	uint8_t rnr_retry_count; /* 0..7 */
	uint8_t flow_control;
	uint8_t srq;
	uint16_t reason; /* REJ: enum srn_cm_rej_reason or the consumer's */
	uint8_t gid[16]; /* REQ, REP: the sender's device GID */
	uint32_t qkey; /* UD REQ, REP: the sender's QP's Q_Key */
	uint32_t local_id; /* the sender's communication id, never 0 */
	uint32_t remote_id; /* the receiver's; 0 in a REQ, in a GONE or REJ
			     * sent before the sender heard the other's */
	uint8_t pdata[SRN_CM_PDATA_MAX];
};
static_assert(offsetof(struct srn_cm_msg, gid) == 32, "cm msg header");
static_assert(offsetof(struct srn_cm_msg, local_id) == 52, "cm msg ids");
static_assert(offsetof(struct srn_cm_msg, pdata) == 60, "cm msg pdata");
static_assert(sizeof(struct srn_cm_msg) == 256, "cm msg size");
#define SRN_CM_MSG_SIZE sizeof(struct srn_cm_msg)

/* The most private data a message of this type may carry, 0 if none. */
static inline unsigned int srn_cm_pdata_max(unsigned int type, unsigned int ps)
{
	switch (type) {
	case SRN_CM_REQ:
		if (ps == SRN_CM_PS_UDP || ps == SRN_CM_PS_IPOIB)
			return SRN_CM_PDATA_SIDR_REQ;
		return ps == SRN_CM_PS_IB ? SRN_CM_PDATA_REQ_IB :
					    SRN_CM_PDATA_REQ;
	case SRN_CM_REP:
		return SRN_CM_PDATA_REP;
	case SRN_CM_REJ:
		return SRN_CM_PDATA_REJ;
	default:
		return 0;
	}
}

/*
 * Checks a received message (len bytes at m, host-independent fields in
 * network order): 0 when it may be used, -EBADMSG otherwise. Everything a
 * receiver later reads is in range after this: type, lengths, QPN, PSN,
 * retry counts, reserved fields zero.
 */
static inline int srn_cm_msg_check(const struct srn_cm_msg *m, size_t len)
{
	uint32_t qpn, psn;
	unsigned int ps;

	if (len != SRN_CM_MSG_SIZE)
		return -EBADMSG;
	if (be32toh(m->magic) != SRN_CM_MAGIC ||
	    be16toh(m->version) != SRN_CM_VERSION)
		return -EBADMSG;
	if (m->type < SRN_CM_REQ || m->type >= SRN_CM_MSG_NR || m->flags)
		return -EBADMSG;
	ps = be16toh(m->ps);
	if (m->pdata_len > srn_cm_pdata_max(m->type, ps))
		return -EBADMSG;
	qpn = be32toh(m->qpn);
	psn = be32toh(m->psn);
	if (qpn > 0xffffffu || psn > 0xffffffu)
		return -EBADMSG;
	if (m->retry_count > 7 || m->rnr_retry_count > 7)
		return -EBADMSG;
	/* a REQ opens a connection: it names no receiver; the service's
	 * REJ to a REQ (no id of its own) names no sender */
	if (m->type == SRN_CM_REQ ? !m->local_id || m->remote_id :
				    !m->local_id && m->type != SRN_CM_REJ)
		return -EBADMSG;
	if (m->type == SRN_CM_REQ &&
	    (!m->dst_port ||
	     (m->qp_type != SRN_CM_QPT_RC && m->qp_type != SRN_CM_QPT_UD &&
	      m->qp_type != SRN_CM_QPT_XRC_SEND) ||
	     (ps != SRN_CM_PS_STREAM && ps != SRN_CM_PS_IB &&
	      ps != SRN_CM_PS_UDP && ps != SRN_CM_PS_IPOIB)))
		return -EBADMSG;
	return 0;
}

/*
 * softrnic stat: a query sent to a port's hand-off socket (just the
 * header, count 0, no fd), answered to the sender's own address with every
 * rdma_cm id of the process that owns the port. Only the owner's user or
 * root is answered (SCM_CREDENTIALS). Integers in host byte order (the
 * same host).
 */
#define SRN_CM_STAT_MAGIC 0x54534d43u /* "CMST" */
/* every process whose CM service runs also answers on this name */
#define SRN_CM_STAT_SOCK_FMT "softrnic/cm/pid/%d"
#define SRN_CM_STAT_VERSION 1
#define SRN_CM_STAT_MAX 64 /* ids in one answer */

struct srn_cm_stat_addr {
	uint16_t family; /* AF_INET, AF_INET6, 0 none */
	uint16_t port;
	uint8_t addr[16];
};
static_assert(sizeof(struct srn_cm_stat_addr) == 20, "stat addr size");

struct srn_cm_stat_id {
	uint32_t qpn; /* 0: no QP */
	uint16_t ps; /* RDMA_PS_* */
	uint8_t qp_type;
	uint8_t rsvd;
	char state[16]; /* the id's CM state, NUL-terminated */
	struct srn_cm_stat_addr src, dst;
};
static_assert(sizeof(struct srn_cm_stat_id) == 64, "stat id size");

struct srn_cm_stat_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t count; /* ids that follow (0 in a query) */
	uint32_t pid; /* the answering process */
	uint32_t more; /* ids left out (more than SRN_CM_STAT_MAX) */
};
static_assert(sizeof(struct srn_cm_stat_hdr) == 16, "stat hdr size");

struct srn_cm_stat_msg {
	struct srn_cm_stat_hdr hdr;
	struct srn_cm_stat_id id[SRN_CM_STAT_MAX];
};
static_assert(sizeof(struct srn_cm_stat_msg) == 16 + 64 * SRN_CM_STAT_MAX,
	      "stat msg size");

#endif /* SRN_CM_PROTO_H */
