/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the rsockets protocol (librdmacm's rsocket calls,
 * docs/rsockets.md).
 *
 * Both ends of an rsocket run softrnic's librdmacm. A stream rsocket is
 * one RC QP connected through rdma_cm (RDMA_PS_TCP). The private data of
 * rdma_connect and of rdma_accept is one struct srn_rs_hello each way:
 * how many receive buffers the sender posted for data (the peer's
 * initial credits) and their size (the most a message may carry).
 *
 * Every message is a SEND with immediate: the payload (0 .. the peer's
 * buf_size bytes) lands in the peer's next receive buffer, the immediate
 * (network byte order) says what it is and returns credits:
 *
 *   bits 31..28  kind (enum srn_rs_msg_kind)
 *   bits 27..16  zero
 *   bits 15..0   credits: receive buffers the sender freed for data since
 *                its last message (the peer may send that many more
 *                DATA or IOWRITE messages)
 *
 * DATA, IOMAP and IOUNMAP take one credit each; CREDIT and FIN take
 * none: the receiver posts SRN_RS_CTRL_SLOTS buffers beyond its credits
 * for them and reposts such a buffer as soon as it sees the message.
 *
 * riomap: IOMAP (payload struct srn_rs_iomap_msg) tells the peer where
 * the sender registered a buffer for remote writes; the peer's riowrite
 * is then an RDMA WRITE (no immediate, no receive buffer) straight into
 * it. IOUNMAP (same payload, only offset and len used) withdraws it.
 * A peer keeps at most SRN_RS_RMAP_MAX buffers mapped at a time (riomap
 * fails with ENOMEM beyond it); an IOMAP past it resets the connection.
 *
 * Credits: a receiver never returns more credits than the sender used,
 * so the sender's credits never exceed the bufs of the receiver's hello;
 * an immediate that would take them past it resets the connection.
 */
#ifndef SRN_RS_PROTO_H
#define SRN_RS_PROTO_H

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define SRN_RS_MAGIC 0x4b53524eu /* "NRSK" */
#define SRN_RS_VERSION 1
#define SRN_RS_CTRL_SLOTS 8 /* receive buffers kept for CREDIT/FIN */
#define SRN_RS_BUF_MIN 1024 /* smallest receive buffer a peer may ask */
#define SRN_RS_BUF_MAX (1u << 20)
#define SRN_RS_BUFS_MIN 2 /* data credits a peer gives at least */
#define SRN_RS_BUFS_MAX 4096
#define SRN_RS_CREDITS_MAX 0xffffu
#define SRN_RS_RMAP_MAX 1024 /* buffers a peer may have mapped (IOMAP) */

enum srn_rs_msg_kind {
	SRN_RS_DATA = 0, /* payload: stream bytes */
	SRN_RS_CREDIT = 1, /* no payload: credits only */
	SRN_RS_FIN = 2, /* no payload: the sender sends no more (shutdown) */
	SRN_RS_IOMAP = 3, /* payload: struct srn_rs_iomap_msg */
	SRN_RS_IOUNMAP = 4, /* payload: struct srn_rs_iomap_msg */
	SRN_RS_KIND_NR,
};

struct srn_rs_hello {
	uint32_t magic; /* SRN_RS_MAGIC */
	uint8_t version; /* SRN_RS_VERSION */
	uint8_t flags; /* none defined: 0 */
	uint16_t reserved; /* 0 */
	uint32_t bufs; /* receive buffers posted for data: initial credits */
	uint32_t buf_size; /* bytes per receive buffer */
};
static_assert(sizeof(struct srn_rs_hello) == 16, "rs hello size");
static_assert(sizeof(struct srn_rs_hello) <= 56, "fits a REQ's pdata");

/* IOMAP / IOUNMAP: a buffer of the sender open to RDMA WRITE; integers
 * in network byte order. */
struct srn_rs_iomap_msg {
	uint64_t offset; /* riomap's offset: riowrite's address for it */
	uint64_t addr; /* the virtual address to write to */
	uint64_t len;
	uint32_t rkey;
	uint32_t reserved; /* 0 */
};
static_assert(sizeof(struct srn_rs_iomap_msg) == 32, "rs iomap size");

/*
 * Datagram rsockets (SOCK_DGRAM): one UD QP per rsocket, Q_Key
 * RDMA_UDP_QKEY; its bound port is an rdma_cm port of RDMA_PS_UDP, and a
 * sender finds the QP behind an address with rdma_cm's SIDR exchange
 * (the receiver answers with its QP's number). Every datagram starts with
 * this header (after the 40-byte GRH the receiver sees): who sent it, so
 * that recvfrom can tell and the answer can go back. A wildcard address
 * is replaced by the GRH's source GID (an IPv4-mapped address).
 */
#define SRN_RS_DGRAM_MAGIC 0x4453524eu /* "NRSD" */
struct srn_rs_dgram_hdr {
	uint32_t magic; /* SRN_RS_DGRAM_MAGIC */
	uint8_t version; /* SRN_RS_VERSION */
	uint8_t family; /* 4 (IPv4) or 6 (IPv6) */
	uint16_t port; /* the sender's bound port */
	uint8_t addr[16]; /* its bound address (IPv4: the first 4 bytes) */
};
static_assert(sizeof(struct srn_rs_dgram_hdr) == 24, "rs dgram hdr size");

static inline uint32_t srn_rs_imm(enum srn_rs_msg_kind kind, uint32_t credits)
{
	return htobe32(((uint32_t)kind << 28) | (credits & 0xffffu));
}

/* Checks a peer's hello (len bytes): 0 when usable, -EPROTO otherwise. */
static inline int srn_rs_hello_check(const void *p, size_t len,
				     struct srn_rs_hello *h_p)
{
	const struct srn_rs_hello *h = p;

	if (!p || len < sizeof(*h))
		return -EPROTO;
	h_p->magic = be32toh(h->magic);
	h_p->version = h->version;
	h_p->flags = h->flags;
	h_p->reserved = be16toh(h->reserved);
	h_p->bufs = be32toh(h->bufs);
	h_p->buf_size = be32toh(h->buf_size);
	if (h_p->magic != SRN_RS_MAGIC || h_p->version != SRN_RS_VERSION ||
	    h_p->flags || h_p->reserved)
		return -EPROTO;
	if (h_p->bufs < SRN_RS_BUFS_MIN || h_p->bufs > SRN_RS_BUFS_MAX ||
	    h_p->buf_size < SRN_RS_BUF_MIN || h_p->buf_size > SRN_RS_BUF_MAX)
		return -EPROTO;
	return 0;
}

/* Splits a received immediate: -EPROTO for an unknown kind or bits set
 * that must be zero. */
static inline int srn_rs_imm_parse(uint32_t imm_be,
				   enum srn_rs_msg_kind *kind_p,
				   uint32_t *credits_p)
{
	uint32_t v = be32toh(imm_be);

	if (v & 0x0fff0000u || (v >> 28) >= SRN_RS_KIND_NR)
		return -EPROTO;
	*kind_p = (enum srn_rs_msg_kind)(v >> 28);
	*credits_p = v & 0xffffu;
	return 0;
}

#endif /* SRN_RS_PROTO_H */
