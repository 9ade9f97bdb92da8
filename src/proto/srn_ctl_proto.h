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
 * magic and version, and are length- and range-checked by the receiver.
 * See docs/architecture.md.
 */
#ifndef SRN_CTL_PROTO_H
#define SRN_CTL_PROTO_H

#include <assert.h>
#include <stdint.h>

#define SRN_CTL_MAGIC 0x4c43534eu /* "NSCL" */
#define SRN_CTL_VERSION 2 /* 2: ADOPT is transport-neutral */
#define SRN_CTL_SOCK_FMT "softrnic/qp/%06x" /* abstract: leading NUL */
#define SRN_CTL_MAX_FDS 16
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
};

struct srn_ctl_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type; /* enum srn_ctl_type */
	int32_t status; /* 0 or -errno, in replies */
	uint32_t len; /* bytes of the whole message */
};
static_assert(sizeof(struct srn_ctl_hdr) == 16, "ctl hdr size");

/* fd 0: the initiator's kick eventfd */
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
	uint8_t hello[24];
};
static_assert(sizeof(struct srn_ctl_adopt) == 48, "adopt size");

/* The largest message of this protocol: the receive buffer's size. */
#define SRN_CTL_MAX_MSG sizeof(struct srn_ctl_mr_rep)

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

#endif /* SRN_CTL_PROTO_H */
