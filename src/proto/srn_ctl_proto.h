/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the same-host control protocol.
 *
 * Every QP owns a listening SOCK_SEQPACKET socket in the abstract unix
 * namespace, named after its QPN (binding it is what makes the QPN unique
 * on the host). An initiator that moves its QP to RTR connects there, sends
 * CONNECT_REQ and receives the segments it needs as file descriptors
 * (SCM_RIGHTS). The connection then stays open: its hang-up tells either
 * side that the other died. MR_REQ asks for the memory behind an rkey or
 * lkey the first time the initiator meets it. BYE, sent before an orderly
 * close, tells the other side that the hang-up is no crash.
 *
 * All messages are little-endian host structs (same host only), carry a
 * magic and version, and are length- and range-checked by the receiver
 * (srn_ctl_classify, below, on the target side). The target serves a
 * connection only if the kernel vouches for its peer: same user or root
 * (SO_PEERCRED at accept; another user's may only send MEDIATE), and,
 * before anything but CONNECT_REQ, BYE, STAT_REQ, ADOPT or MEDIATE, the
 * process that owns the source QPN the QP's RTR attributes name. See
 * docs/architecture.md and docs/security.md.
 */
#ifndef SRN_CTL_PROTO_H
#define SRN_CTL_PROTO_H

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SRN_CTL_MAGIC 0x4c43534eu /* "NSCL" */
/* 2: ADOPT is transport-neutral; 3: XSRQ; 4: CONNECT_REP -EINPROGRESS,
 * then the answer once the target QP is past INIT */
#define SRN_CTL_VERSION 4
#define SRN_CTL_SOCK_FMT "softrnic/qp/%06x" /* abstract: leading NUL */
/* bound (not listening) while an XRC SRQ of that number exists: what makes
 * XRC SRQ numbers unique on the host */
#define SRN_CTL_SRQ_SOCK_FMT "softrnic/srq/%06x"
/* listening while `softrnic daemon` holds the host's port (root's: checked
 * with SO_PEERCRED); every connection to it is closed at once */
#define SRN_CTL_HOSTD_SOCK "softrnic/hostd"
#define SRN_CTL_MAX_FDS 16
#define SRN_CTL_QPN_MAX 0xffffffu /* QPNs are 24 bits; 0 is none */
#define SRN_MR_MAX_CHUNKS 16

enum srn_ctl_type {
	SRN_CTL_CONNECT_REQ = 1,
	SRN_CTL_CONNECT_REP = 2,
	SRN_CTL_MR_REQ = 3,
	SRN_CTL_MR_REP = 4,
	SRN_CTL_BYE = 5, /* orderly close: the QP is being destroyed */
	SRN_CTL_ADOPT = 6, /* a connection a transport accepted for this
			    * QP, + its fd (the host-wide listener's
			    * hand-off) */
	SRN_CTL_STAT_REQ = 7, /* softrnic stat: how is this QP connected? */
	SRN_CTL_STAT_REP = 8,
	SRN_CTL_XSRQ_REQ = 9, /* an XRC SRQ of the target's process, by
			       * number (XRC INI -> TGT connections) */
	SRN_CTL_XSRQ_REP = 10,
	SRN_CTL_MEDIATE = 11, /* a mediated link to this QP, for a peer QP
			       * of another user (docs/security.md) */
	SRN_CTL_MEDIATE_REP = 12, /* status; 0: + the initiator's end */
};

struct srn_ctl_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type; /* enum srn_ctl_type */
	int32_t status; /* 0 or -errno, in replies */
	uint32_t len; /* bytes of the whole message */
};
static_assert(sizeof(struct srn_ctl_hdr) == 16, "ctl hdr size");

/* fd 0: the initiator's kick eventfd. The target answers with the fds
 * (CONNECT_REP status 0) only when the process at the other end of the
 * connection owns src_qpn (the kernel's credentials, not src_pid) and
 * src_qpn is the target QP's dest_qp_num; -EAGAIN: the target QP is not at
 * RTR yet, ask again later on the same connection; -EPERM: refused. */
struct srn_ctl_connect_req {
	struct srn_ctl_hdr hdr;
	uint32_t src_qpn;
	uint32_t dst_qpn;
	uint32_t src_pid;
	uint32_t rsvd;
};
static_assert(sizeof(struct srn_ctl_connect_req) == 32, "conn req size");

/* The fds that follow a CONNECT_REP, in this order; optional ones are
 * present when their bit is set in fd_mask. */
enum srn_ctl_rep_fd {
	SRN_REPFD_QP = 0, /* QP segment */
	SRN_REPFD_CQ = 1, /* recv CQ segment */
	SRN_REPFD_TPT = 2, /* TPT segment of the QP's context */
	SRN_REPFD_KICK = 3, /* owner's kick eventfd */
	SRN_REPFD_CHANNEL = 4, /* recv CQ's completion channel (optional) */
	SRN_REPFD_SRQ = 5, /* SRQ segment (optional) */
	SRN_REPFD_NR
};

struct srn_ctl_connect_rep {
	struct srn_ctl_hdr hdr;
	uint32_t qpn;
	uint32_t fd_mask; /* bit i set: fd of enum srn_ctl_rep_fd i follows */
	uint32_t owner_pid;
	uint32_t rsvd;
};
static_assert(sizeof(struct srn_ctl_connect_rep) == 32, "conn rep size");

struct srn_ctl_mr_req {
	struct srn_ctl_hdr hdr;
	uint32_t key;
	uint32_t rsvd;
};
static_assert(sizeof(struct srn_ctl_mr_req) == 24, "mr req size");

/* XSRQ_REQ (only on an attached connection to an XRC TGT QP): the XRC SRQ
 * numbered srqn, which must be in the TGT QP's XRC domain. The answer's
 * status: 0 (fds follow), -ENOENT (no such SRQ), -EPERM (another domain's
 * or not a TGT QP), -EOPNOTSUPP (an SRQ of another context of the
 * process: its keys are in another TPT). */
struct srn_ctl_xsrq_req {
	struct srn_ctl_hdr hdr;
	uint32_t srqn;
	uint32_t rsvd;
};
static_assert(sizeof(struct srn_ctl_xsrq_req) == 24, "xsrq req size");

/* The fds that follow an XSRQ_REP, in this order (CHANNEL optional). */
enum srn_ctl_xsrq_fd {
	SRN_XSRQFD_SRQ = 0, /* SRQ segment */
	SRN_XSRQFD_CQ = 1, /* the SRQ's CQ segment */
	SRN_XSRQFD_CHANNEL = 2, /* that CQ's completion channel */
	SRN_XSRQFD_NR
};

struct srn_ctl_xsrq_rep {
	struct srn_ctl_hdr hdr;
	uint32_t srqn;
	uint32_t fd_mask; /* bit i set: fd of enum srn_ctl_xsrq_fd i */
	uint32_t pd_handle; /* the SRQ's PD: keys are checked against it */
	uint32_t rsvd;
};
static_assert(sizeof(struct srn_ctl_xsrq_rep) == 32, "xsrq rep size");

/* One piece of the page span of an MR, backed by one memfd (the fd with
 * the same index follows the message). */
struct srn_ctl_chunk {
	uint64_t span_off; /* from the page-aligned start of the MR */
	uint64_t len;
	uint64_t file_off;
};
static_assert(sizeof(struct srn_ctl_chunk) == 24, "chunk size");

struct srn_ctl_mr_rep {
	struct srn_ctl_hdr hdr;
	uint32_t key;
	uint32_t access;
	uint32_t pd_handle;
	uint32_t nchunks;
	uint64_t iova;
	uint64_t length;
	uint64_t page_off; /* offset of iova's byte within the page span */
	uint64_t span_len;
	/* nchunks == 0: the memory cannot be mapped (a thread's stack, a
	 * mapping that cannot be reopened); the peer reaches it with
	 * process_vm_readv/writev at owner_va (the owner's address of iova) */
	uint64_t owner_va;
	struct srn_ctl_chunk chunk[SRN_MR_MAX_CHUNKS];
};
static_assert(sizeof(struct srn_ctl_mr_rep) == 72 + 24 * SRN_MR_MAX_CHUNKS,
	      "mr rep size");

/* fd 0: the accepted socket; the first message the transport read on it
 * (its hello, opaque here) follows the header */
struct srn_ctl_adopt {
	struct srn_ctl_hdr hdr;
	uint32_t dst_qpn;
	uint32_t hello_len; /* bytes of hello used */
	uint8_t hello[32];
};
static_assert(sizeof(struct srn_ctl_adopt) == 56, "adopt size");

/*
 * A peer QP that cannot share memory with this one (another user's) asks
 * for a mediated link: the target checks that the sender owns src_qpn (the
 * kernel says so), makes a unix stream socket pair, hands one end and the
 * hello (the first message of the link, opaque here) to its network
 * transport as an accepted link, and answers MEDIATE_REP with the other
 * end (status 0) or without any fd (-errno). No fd comes with MEDIATE.
 */
struct srn_ctl_mediate {
	struct srn_ctl_hdr hdr;
	uint32_t dst_qpn;
	uint32_t src_qpn; /* the sender's QP, checked with the kernel */
	uint32_t hello_len; /* bytes of hello used */
	uint32_t reserved; /* 0 */
	uint8_t hello[32];
};
static_assert(sizeof(struct srn_ctl_mediate) == 64, "mediate size");

/* The largest message of this protocol: the receive buffer's size. */
#define SRN_CTL_MAX_MSG sizeof(struct srn_ctl_mr_rep)
static_assert(SRN_CTL_MAX_MSG >= sizeof(struct srn_ctl_adopt),
	      "max msg covers adopt");
static_assert(SRN_CTL_MAX_MSG >= sizeof(struct srn_ctl_mediate),
	      "max msg covers mediate");

/* The answer to SRN_CTL_STAT_REQ (a bare header). */
struct srn_ctl_stat_rep {
	struct srn_ctl_hdr hdr;
	uint32_t qpn;
	uint32_t pid;
	uint32_t state; /* enum ibv_qp_state */
	uint32_t dest_qpn;
	char transport[8]; /* the transport's name, or "" */
	char desc[64]; /* the transport's description of the peer */
};
static_assert(sizeof(struct srn_ctl_stat_rep) == 104, "stat rep size");
static_assert(SRN_CTL_MAX_MSG >= sizeof(struct srn_ctl_stat_rep),
	      "max msg covers stat rep");

/* srn_ctl_classify: the QPNs of a request that names some (CONNECT_REQ,
 * ADOPT, MEDIATE), of the right length; 0 or -EPROTO. */
static inline int srn_ctl_classify_qpns(const void *msg, unsigned type,
					uint32_t qpn)
{
	struct srn_ctl_connect_req cr;
	struct srn_ctl_mediate md;
	struct srn_ctl_adopt ad;

	if (type == SRN_CTL_CONNECT_REQ) {
		memcpy(&cr, msg, sizeof(cr));
		if (cr.dst_qpn != qpn || !cr.src_qpn ||
		    cr.src_qpn > SRN_CTL_QPN_MAX)
			return -EPROTO;
	} else if (type == SRN_CTL_ADOPT) {
		memcpy(&ad, msg, sizeof(ad));
		if (ad.dst_qpn != qpn || ad.hello_len > sizeof(ad.hello))
			return -EPROTO;
	} else if (type == SRN_CTL_MEDIATE) {
		memcpy(&md, msg, sizeof(md));
		if (md.dst_qpn != qpn || !md.src_qpn ||
		    md.src_qpn > SRN_CTL_QPN_MAX ||
		    md.hello_len > sizeof(md.hello) || md.reserved)
			return -EPROTO;
	}
	return 0;
}

/*
 * The target side's rules for a message received on a control connection
 * of QP qpn: the exact length of its type, the fds it may carry, and what a
 * connection that has not attached yet (no CONNECT_REQ accepted on it) may
 * send. Pure: no socket, no QP (tests/fuzz/fuzz_ctl.c). msg may be
 * unaligned. The type to dispatch, or -EBADMSG (not a message of this
 * protocol and version), -EPROTO (a request with the wrong length, fds,
 * status or QPN, or a reply or unknown type), -EPERM (not before attach).
 */
static inline int srn_ctl_classify(const void *msg, size_t len, unsigned nfds,
				   uint32_t qpn, bool attached)
{
	struct srn_ctl_hdr h;
	size_t want = sizeof(h);
	unsigned want_fds = 0;
	bool early = true; /* allowed before attach */

	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, msg, sizeof(h));
	if (h.magic != SRN_CTL_MAGIC || h.version != SRN_CTL_VERSION ||
	    h.len != len)
		return -EBADMSG;
	switch (h.type) {
	case SRN_CTL_CONNECT_REQ:
		want = sizeof(struct srn_ctl_connect_req);
		want_fds = 1;
		break;
	case SRN_CTL_ADOPT: /* a fresh connection of the host's listener */
		want = sizeof(struct srn_ctl_adopt);
		want_fds = 1;
		break;
	case SRN_CTL_MEDIATE: /* a link for a peer of another user */
		want = sizeof(struct srn_ctl_mediate);
		break;
	case SRN_CTL_MR_REQ: /* served only to the verified peer */
		want = sizeof(struct srn_ctl_mr_req);
		early = false;
		break;
	case SRN_CTL_XSRQ_REQ: /* the same */
		want = sizeof(struct srn_ctl_xsrq_req);
		early = false;
		break;
	case SRN_CTL_BYE:
	case SRN_CTL_STAT_REQ:
		break;
	default: /* replies and unknown types: never sent to a target */
		return -EPROTO;
	}
	if (len != want || nfds != want_fds || h.status)
		return -EPROTO;
	if (!attached && !early)
		return -EPERM;
	return srn_ctl_classify_qpns(msg, h.type, qpn) ?: h.type;
}

#endif /* SRN_CTL_PROTO_H */
