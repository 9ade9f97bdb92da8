/* SPDX-License-Identifier: MIT */
/*
 * softrnic — layout of everything that lives in shared memory.
 *
 * Every object a peer process may touch is a memfd "segment" that starts
 * with struct srn_seg_hdr. Segments are passed between processes with
 * SCM_RIGHTS (see srn_ctl_proto.h) and never named in /dev/shm, so nothing
 * outlives the processes that map them.
 *
 * Rules: fixed-width types only, offsets (never pointers), sizes are
 * static_asserted, and a reader bounds-checks everything it reads from a
 * segment another process can write. See docs/shm-layout.md.
 */
#ifndef SRN_SHM_PROTO_H
#define SRN_SHM_PROTO_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define SRN_SHM_MAGIC 0x314e5253u /* "SRN1" little endian */
/* 2: TPT entries of memory windows; 3: the QP's type and Q_Key; 4: a TPT
 * of 2^21 entries (MR keys of 21 index bits); 5: resizable CQs (the CQ
 * segment holds the largest ring, srn_cq_shm.gen, SRN_CQ_PROD_RESIZING);
 * 6: a small SEND's payload in its receive CQE (struct srn_cqe_inl);
 * 7: bounce slots after the CQ's ring (SRN_CQE_BOUNCE);
 * 8: a small datagram in its receive CQE (SRN_CQE_DGRAM without BOUNCE) */
#define SRN_SHM_VERSION 8

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	      "shared memory is little-endian (futex on half of a word)");

enum srn_seg_kind {
	SRN_SEG_QP = 1,
	SRN_SEG_CQ = 2,
	SRN_SEG_SRQ = 3,
	SRN_SEG_TPT = 4,
};

/* First 64 bytes of every segment. Written once by the owner at creation. */
struct srn_seg_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t kind; /* enum srn_seg_kind */
	uint64_t size; /* total bytes of the segment */
	uint32_t owner_pid;
	uint32_t id; /* QPN, CQ/SRQ handle, or context handle */
	uint8_t rsvd[40];
};
static_assert(sizeof(struct srn_seg_hdr) == 64, "seg hdr size");

/* ------------------------------------------------------------------ */
/* Receive queue (RQ of a QP, or an SRQ).                              */
/*                                                                    */
/* Single producer (the owner's post_recv, under its rq lock), many   */
/* consumers (initiators in any process, and the owner when flushing) */
/* that claim entries by CAS on cons.                                 */

struct srn_rsge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};
static_assert(sizeof(struct srn_rsge) == 16, "rsge size");

struct srn_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	/* position + 1 (mod 2^32), stored last by the owner with release:
	 * the entry is valid for the consumer at that position */
	uint32_t owner_seq;
	struct srn_rsge sge[]; /* max_sge entries, see srn_rq_shm.stride */
};
static_assert(sizeof(struct srn_rwqe) == 16, "rwqe hdr size");

/* peer_waiting values: why an initiator stalled on this queue */
#define SRN_WAIT_RNR 1u

struct srn_rq_shm {
	uint32_t size; /* entries, power of two */
	uint32_t stride; /* bytes per WQE */
	uint32_t max_sge;
	uint32_t wqe_off; /* offset of WQE 0 from the segment start */
	uint8_t rsvd0[48];
	/* Written by the owner only: release, pairs with the acquire in
	 * srn_rq_count() (consumers go by owner_seq, not prod). */
	_Alignas(64) uint64_t prod;
	/* Claimed with acq_rel CAS by any consumer. */
	_Alignas(64) uint64_t cons;
	/* Set by a stalled initiator (release), exchanged to 0 by the owner
	 * after a post_recv (acq_rel), who then kicks the waiter. */
	_Alignas(64) uint32_t peer_waiting;
	/* SRQ only: limit armed (owner writes), limit hit (consumer sets). */
	uint32_t limit;
	uint32_t limit_hit;
	uint8_t rsvd1[52];
};
static_assert(sizeof(struct srn_rq_shm) == 256, "rq shm size");
static_assert(offsetof(struct srn_rq_shm, prod) == 64, "rq prod offset");
static_assert(offsetof(struct srn_rq_shm, cons) == 128, "rq cons offset");

/* ------------------------------------------------------------------ */
/* QP segment: what a peer needs to see of a QP.                       */

/* err_req bits: an initiator asks the owner to move the QP to ERR. */
#define SRN_ERRREQ_REMOTE 1u

struct srn_qp_shm {
	struct srn_seg_hdr hdr;
	/* Owner writes (release) in srn_qp_set_state(); peers acquire. */
	uint32_t state; /* enum ibv_qp_state */
	uint32_t qp_access_flags;
	uint32_t pd_handle;
	uint32_t has_srq;
	uint32_t recv_cq_handle;
	uint32_t dest_qpn; /* the peer QP this one is connected to */
	uint32_t qp_type; /* enum ibv_qp_type, set at creation */
	/* UD: datagrams must carry it (owner writes with release in
	 * srn_qp_apply_attr; senders acquire) */
	uint32_t qkey;
	uint8_t rsvd0[32];
	/* Set by a peer (release) to ask for ERR; owner exchanges it. */
	_Alignas(64) uint32_t err_req;
	uint8_t rsvd1[60];
	struct srn_rq_shm rq; /* unused when has_srq */
	/* WQEs follow at rq.wqe_off */
};
static_assert(sizeof(struct srn_qp_shm) == 448, "qp shm size");
static_assert(offsetof(struct srn_qp_shm, rq) == 192, "qp rq offset");

struct srn_srq_shm {
	struct srn_seg_hdr hdr;
	uint32_t pd_handle;
	uint32_t srq_handle;
	uint8_t rsvd[56];
	struct srn_rq_shm rq;
};
static_assert(sizeof(struct srn_srq_shm) == 384, "srq shm size");

/* ------------------------------------------------------------------ */
/* Completion queue: many producers (any process), one consumer (the   */
/* owner's poll_cq). A CQE is valid when owner_seq == position + 1     */
/* (mod 2^32): the owner tag changes on every lap of the ring.         */

#define SRN_CQE_SOLICITED 0x1u
/* struct srn_cqe_inl: a small SEND's payload is in the CQE itself */
#define SRN_CQE_INLINE 0x2u
#define SRN_CQE_INL_IMM 0x4u /* ... and it carries an immediate */
#define SRN_CQE_INL_LEN_SHIFT 8 /* ... of (flags >> 8) bytes */
/* struct srn_cqe_inl whose payload is in the CQ's bounce slot named in
 * data (struct srn_cqe_bnc), not in the CQE */
#define SRN_CQE_BOUNCE 0x8u
/* A datagram's receive (IBV_WC_GRH): with SRN_CQE_BOUNCE the GRH starts
 * the slot's bytes; without, the payload is in data and the owner builds
 * the GRH from the IPv4 addresses in data2 (struct srn_cqe_inl) */
#define SRN_CQE_DGRAM 0x10u

struct srn_cqe {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data; /* network byte order, as in ibv_wc */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint16_t flags; /* SRN_CQE_* */
	/* CLOCK_MONOTONIC ns when the CQE was written, if the CQ asked for
	 * timestamps (SRN_CQF_TIMESTAMP), else 0 */
	uint64_t ts;
	/* A receive that took a WQE of its QP's ring or SRQ: that WQE's
	 * ring position + 1, low 32 bits, written after the WQE was
	 * claimed (srn_rq_commit); 0: none. The owner's poll passes it to
	 * its post_recv as a bound of the ring's cons (srn_cq_rq_polled),
	 * so that post_recv need not read cons, a line every consumer
	 * writes. */
	uint32_t rq_pos;
	/* Written last by the producer with release; the consumer's acquire
	 * load of it pairs with that and makes the fields above visible. */
	uint32_t owner_seq;
};
static_assert(sizeof(struct srn_cqe) == 64, "cqe size");
static_assert(offsetof(struct srn_cqe, ts) == 48, "cqe ts offset");
static_assert(offsetof(struct srn_cqe, rq_pos) == 56, "cqe rq_pos offset");

/*
 * A successful receive of a SEND of at most SRN_CQE_INL_MAX bytes (RC, UC;
 * one receive SGE holds it; the CQ takes no timestamps) may come with its
 * payload in the CQE, as a device scatters a small message to its CQE: the
 * initiator then writes one line of the target's instead of two (the CQE
 * and the receive buffer, which the target reads next), and the owner's
 * poll copies the bytes to the receive SGE named here, after it checked
 * that key, its LOCAL_WRITE and the bounds in its own TPT. wr_id, qp_num,
 * flags, rq_pos and owner_seq are where struct srn_cqe has them; the rest
 * is implied (IBV_WC_RECV, IBV_WC_SUCCESS, no vendor error, pkey_index,
 * slid, sl or path bits).
 */
#define SRN_CQE_INL_MAX 22
struct srn_cqe_inl {
	uint64_t wr_id;
	uint64_t addr; /* the receive SGE's address ... */
	uint32_t lkey; /* ... and key (the target's) */
	uint32_t imm_data; /* with SRN_CQE_INL_IMM, network byte order */
	uint32_t src_qp;
	uint32_t qp_num;
	uint8_t data[14]; /* payload bytes 0..13 */
	uint16_t flags; /* SRN_CQE_INLINE | length << SRN_CQE_INL_LEN_SHIFT */
	uint8_t data2[8]; /* payload bytes 14..21 */
	uint32_t rq_pos;
	uint32_t owner_seq;
};
static_assert(sizeof(struct srn_cqe_inl) == sizeof(struct srn_cqe),
	      "inline cqe size");
static_assert(offsetof(struct srn_cqe_inl, qp_num) ==
			      offsetof(struct srn_cqe, qp_num) &&
		      offsetof(struct srn_cqe_inl, flags) ==
			      offsetof(struct srn_cqe, flags) &&
		      offsetof(struct srn_cqe_inl, rq_pos) ==
			      offsetof(struct srn_cqe, rq_pos),
	      "inline cqe: the fields both formats share");
static_assert(sizeof(((struct srn_cqe_inl *)0)->data) +
			      sizeof(((struct srn_cqe_inl *)0)->data2) ==
		      SRN_CQE_INL_MAX,
	      "inline cqe payload");

/*
 * A datagram of at most SRN_CQE_DGRAM_MAX bytes between IPv4 GIDs (UD; its
 * GRH and payload fit the receive's first SGE; the CQ takes no timestamps)
 * may come as an inline CQE flagged SRN_CQE_DGRAM: its payload in data,
 * the source and destination IPv4 addresses of its GRH (network byte
 * order) in data2; the owner's poll checks the SGE as for any inline CQE,
 * writes the GRH RoCEv2 would have carried and the payload after it, and
 * reports SRN_GRH_LEN + length bytes, IBV_WC_GRH and the IPv4 header type.
 */
#define SRN_CQE_DGRAM_MAX 14
struct srn_cqe_dgram_ips {
	uint32_t sip; /* network byte order */
	uint32_t dip;
};
static_assert(SRN_CQE_DGRAM_MAX <= sizeof(((struct srn_cqe_inl *)0)->data),
	      "inline datagram payload");
static_assert(sizeof(struct srn_cqe_dgram_ips) ==
		      sizeof(((struct srn_cqe_inl *)0)->data2),
	      "inline datagram addresses");

/*
 * A receive whose buffer the initiator may not map (an MR without a remote
 * right unless SOFTRNIC_LOCAL_MR=shared, a receive buffer in a read-only
 * MR, memory that could not be remapped) takes the bounce path when the
 * bytes to place (a datagram's GRH first) fit the receive WQE's first SGE
 * and one slot: the initiator copies them into the CQ's bounce slot
 * (position of the CQE mod SRN_CQ_BOUNCE_SLOTS, used only while the CQE
 * that had that slot before was consumed) and posts an srn_cqe_inl with
 * SRN_CQE_INLINE | SRN_CQE_BOUNCE whose data holds struct srn_cqe_bnc; the
 * owner's poll checks the SGE in its own TPT, as for an inline CQE, and
 * copies the slot there.
 */
#define SRN_CQ_BOUNCE_SLOTS 256u
#define SRN_CQ_BOUNCE_SIZE 8192u
struct srn_cqe_bnc {
	uint32_t len; /* bytes in the slot (GRH included) */
	uint32_t slot; /* < SRN_CQ_BOUNCE_SLOTS */
	uint8_t sl; /* a datagram's service level */
	uint8_t rsvd[3];
};
static_assert(sizeof(struct srn_cqe_bnc) <=
		      sizeof(((struct srn_cqe_inl *)0)->data),
	      "bounce cqe data");

/* srn_cq_shm.flags */
#define SRN_CQF_TIMESTAMP 1u /* producers stamp every CQE (srn_cqe.ts) */

/* The largest ring: every CQ segment is sized for it (a sparse memfd:
 * pages are allocated as CQEs are written), so a resize never changes
 * the segment and every peer's mapping stays valid. */
#define SRN_CQ_MAX_ENTRIES (1u << 22)
/* srn_cq_shm.prod bit 63: the owner is resizing the ring. Producers
 * reserve nothing while it is set; they wait (futex on the high half of
 * prod, bounded) for the owner to store the new prod, which never equals
 * one seen before the resize (positions only grow), so a producer's CAS
 * from a value read before the resize always fails. */
#define SRN_CQ_PROD_RESIZING (1ull << 63)

#define SRN_CQ_ARM_NONE 0u
#define SRN_CQ_ARM_NEXT 1u
#define SRN_CQ_ARM_SOLICITED 2u

struct srn_cq_shm {
	struct srn_seg_hdr hdr;
	uint32_t size; /* entries, power of two */
	uint32_t cqe_off;
	uint32_t flags; /* SRN_CQF_*: set by the owner before it is shared */
	/* Ring generation: the owner's resize (srn_cq_relayout) stores size,
	 * then gen with release, then prod with release. A producer that
	 * finds gen changed re-reads and re-validates size (srn_cq_view_geo).
	 * cqe_off never changes. */
	uint32_t gen;
	uint8_t rsvd0[48];
	/* Reserved by producers with an acq_rel CAS in srn_cq_post(); bit 63
	 * is SRN_CQ_PROD_RESIZING, bits 0..62 the position. */
	_Alignas(64) uint64_t prod;
	/* Advanced by the owner's poll (release); producers acquire it to
	 * check for space. */
	_Alignas(64) uint64_t cons;
	/* Armed by req_notify_cq (release); a producer that fires the event
	 * exchanges it to NONE (acq_rel), so each arm fires once. */
	_Alignas(64) uint32_t arm;
	uint32_t overflow; /* set by a producer that found the ring full */
	uint64_t events; /* completion events fired (producer fetch_add) */
	uint8_t rsvd1[48];
	/* CQEs follow at cqe_off */
};
static_assert(sizeof(struct srn_cq_shm) == 320, "cq shm size");
static_assert(offsetof(struct srn_cq_shm, gen) == 76, "cq gen offset");
static_assert(offsetof(struct srn_cq_shm, prod) == 128, "cq prod offset");
static_assert(offsetof(struct srn_cq_shm, cons) == 192, "cq cons offset");
static_assert(offsetof(struct srn_cq_shm, arm) == 256, "cq arm offset");
/* The bounce slots follow the largest ring (the segment's cqe_off is
 * always sizeof(struct srn_cq_shm)). */
#define SRN_CQ_BOUNCE_OFF            \
	(sizeof(struct srn_cq_shm) + \
	 (size_t)SRN_CQ_MAX_ENTRIES * sizeof(struct srn_cqe))
#define SRN_CQ_SEG_SIZE \
	(SRN_CQ_BOUNCE_OFF + (size_t)SRN_CQ_BOUNCE_SLOTS * SRN_CQ_BOUNCE_SIZE)

/* ------------------------------------------------------------------ */
/* Translation and protection table, one per context. The owner maps it */
/* writable and seals it against further writable mappings; peers map   */
/* it read-only and check an entry before every access to an MR.        */

#define SRN_TPT_ENTRIES (1u << 21)
#define SRN_KEY_INDEX_BITS 21
#define SRN_KEY_INDEX_MASK ((1u << SRN_KEY_INDEX_BITS) - 1)
/* Memory windows have the indexes 1 .. 2^14 - 1, MRs those above. */
#define SRN_MW_INDEX_BITS 14
#define SRN_MW_INDEX_MASK ((1u << SRN_MW_INDEX_BITS) - 1)
/* A memory window's key: bit 31 set, the index in bits 8..21 and the low
 * byte the consumer's key (ibv_inc_rkey changes it at each bind); an MR's
 * key has bit 31 clear and its index in the low 21 bits. */
#define SRN_KEY_MW_BIT 0x80000000u

static inline uint32_t srn_key_index(uint32_t key)
{
	return (key & SRN_KEY_MW_BIT) ? (key >> 8) & SRN_MW_INDEX_MASK :
					key & SRN_KEY_INDEX_MASK;
}

/* srn_tpt_entry.flags */
#define SRN_TPT_MW 0x1u /* a memory window, bound to MR mr_key */
#define SRN_TPT_MW_TYPE2 0x2u /* ... of type 2: only QP qpn may use it */

struct srn_tpt_entry {
	/* 0 when free. Written last with release at registration and
	 * cleared first at deregistration; readers acquire. */
	uint32_t key;
	uint32_t pd_handle;
	uint32_t access; /* IBV_ACCESS_* */
	uint32_t flags; /* SRN_TPT_* */
	uint64_t iova; /* first byte the key covers */
	uint64_t length;
	uint64_t va; /* owner's virtual address of iova */
	uint32_t mr_key; /* a window: the key of its MR (checked valid) */
	uint32_t qpn; /* a type 2 window: the QP it is bound to */
	uint8_t rsvd1[16];
};
static_assert(sizeof(struct srn_tpt_entry) == 64, "tpt entry size");
static_assert(offsetof(struct srn_tpt_entry, mr_key) == 40, "tpt mr_key off");

struct srn_tpt_shm {
	struct srn_seg_hdr hdr;
	uint32_t nentries;
	uint8_t rsvd[60];
	struct srn_tpt_entry entry[SRN_TPT_ENTRIES];
};
static_assert(offsetof(struct srn_tpt_shm, entry) == 128, "tpt entry off");

#endif /* SRN_SHM_PROTO_H */
