/* SPDX-License-Identifier: MIT */
/*
 * softrnic — UD datagrams between hosts: one UDP datagram per UD message,
 * to port 4791 of the destination GID's IPv4 address (or of the group's
 * IPv4 multicast address). A 48-byte header, then the payload (at most the
 * port MTU). All fields little-endian except imm (network order, as in
 * ibv_wc) and dgid; every field is checked by the receiver
 * (srn_udw_hdr_check). Not RoCEv2's BTH/DETH yet: see docs/wire.md.
 */
#ifndef SRN_UDP_PROTO_H
#define SRN_UDP_PROTO_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define SRN_UDW_MAGIC 0x55524e53u /* "SNRU" little endian */
#define SRN_UDW_VERSION 1
#define SRN_UDW_MCAST_QPN 0xffffffu /* dst_qpn of a multicast datagram */

enum srn_udw_op {
	SRN_UDW_SEND = 1,
	SRN_UDW_SEND_IMM = 2,
	SRN_UDW_NR
};

#define SRN_UDW_F_SOLICITED 0x1u
#define SRN_UDW_F_FORWARDED \
	0x2u /* handed from the process that got it
				  * to the one that owns dst_qpn (same
				  * host); src_ipv4 then says who sent it */
#define SRN_UDW_F_ALL 0x3u

struct srn_udw_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t opcode; /* enum srn_udw_op */
	uint8_t flags; /* SRN_UDW_F_* */
	uint8_t rsvd;
	uint32_t dst_qpn;
	uint32_t src_qpn;
	uint32_t qkey;
	uint32_t imm; /* network order */
	uint32_t len; /* payload bytes that follow */
	uint32_t src_ipv4; /* network order; forwarded datagrams only */
	uint8_t dgid[16]; /* the destination GID (the group's, multicast) */
};
static_assert(sizeof(struct srn_udw_hdr) == 48, "udw hdr size");
static_assert(offsetof(struct srn_udw_hdr, dgid) == 32, "udw dgid offset");

/* Forwarding between processes of a host: an abstract unix datagram
 * socket per UD QP */
#define SRN_UDW_FWD_FMT "softrnic/ud/%u"

#endif /* SRN_UDP_PROTO_H */
