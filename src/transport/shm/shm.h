/* SPDX-License-Identifier: MIT */
/*
 * softrnic — state of a same-host connection, seen from the initiator:
 * the target QP's segments mapped here and the target's MRs met so far.
 */
#ifndef SRN_SHM_TRANSPORT_H
#define SRN_SHM_TRANSPORT_H

#include "engine/transport.h"
#include "proto/srn_ctl_proto.h"

/* Target MRs mapped per connection: a hash table (open addressing) that
 * doubles from SRN_RMR_CACHE_MIN up to SRN_RMR_CACHE_MAX slots, then starts
 * over empty (shm_mr.c). Programs keep many buffers in flight (MPI's
 * rendezvous: one MR per message buffer); a small cache would map and
 * unmap one per operation. */
#define SRN_RMR_CACHE_MIN 32u
#define SRN_RMR_CACHE_MAX 4096u
#define SRN_INV_PENDING 16 /* srn_resp_inv_record */

/* A target MR mapped into this process. */
struct srn_rmr {
	uint32_t key; /* 0: free slot */
	uint32_t access;
	uint64_t iova;
	uint64_t length;
	void *map;
	size_t map_len;
	uint8_t *base; /* where iova is mapped, or its address in the owner */
	uint8_t *owner; /* iova's address in the owner */
	bool pvm; /* not mapped: reached with process_vm_readv/writev */
	bool ro; /* mapped read-only (srn_access_ro_shared): a receive
		  * buffer in it is written with process_vm_writev */
};

/* An XRC SRQ of the TGT's process mapped here (shm_xrc.c). */
#define SRN_XSRQ_CACHE 8
struct srn_xsrq {
	uint32_t srqn; /* 0: free slot */
	uint32_t pd_handle;
	struct srn_seg srq_seg, cq_seg;
	/* srq_seg's, cq_seg's: shared (shm_smap.c); NULL: not mapped */
	struct srn_shm_smap *srq_map, *cq_map;
	int chan_fd;
	struct srn_rq_view rqv;
	struct srn_cq_view cqv;
};

struct srn_peer {
	struct srn_qp *qp; /* ours */
	struct srn_pollable conn; /* to the target QP's listener */
	pid_t pid;
	uint32_t qpn;
	struct srn_seg qp_seg, cq_seg, tpt_seg, srq_seg;
	/* cq_seg's, tpt_seg's, srq_seg's: shared (shm_smap.c); NULL when
	 * the peer has no such segment */
	struct srn_shm_smap *cq_map, *tpt_map, *srq_map;
	struct srn_qp_shm *tqp;
	const struct srn_tpt_shm *tpt;
	uint32_t pd_handle;
	struct srn_rq_view rqv; /* the target's RQ, or its SRQ */
	bool has_srq;
	/* the last receive WQE taken from the target's RQ or SRQ: its ring
	 * position + 1, low 32 bits, for the CQEs (srn_cqe.rq_pos) */
	uint32_t rq_pos;
	struct srn_cq_view cqv;
	int chan_fd;
	int kick_fd;
	atomic_uint gone; /* SRN_PEER_* */
	bool datagram; /* a UD QP's destination (shm_ud.c): no connection,
			* the target's death fails nothing */
	/* The handshake (shm_ctl.c): until the target answered with its
	 * segments, the peer is pending and nothing above is mapped. */
	atomic_bool up; /* written under sq_lock, read by other threads */
	bool req_out; /* a CONNECT_REQ waits for its answer */
	bool deferred; /* the target answers once past INIT (its RTR) */
	bool broken; /* the answer could not be mapped: fail */
	int refused; /* the target's last refusal, logged once */
	uint64_t next_try_ns, backoff_ns;
	uint32_t mr_asked; /* key of the MR_REQ in flight (shm_mr.c), or 0 */
	struct srn_rmr *rmr; /* rmr_cap slots (a power of two), or NULL */
	unsigned rmr_cap, rmr_used;
	uint32_t inv_key[SRN_INV_PENDING]; /* keys we invalidated */
	unsigned inv_next;
	struct srn_xsrq *xsrq; /* XRC INI: SRN_XSRQ_CACHE slots, or NULL */
	unsigned xsrq_next;
	char desc[64]; /* once up */
	char desc_wait[64]; /* until then */
};

#define SRN_PEER_ALIVE 0u
#define SRN_PEER_CLOSED 1u /* orderly: BYE then hang-up */
#define SRN_PEER_DEAD 2u /* hang-up without BYE */

/* shm_ctl.c: a peer's life */
struct srn_peer *srn_shm_peer_new(struct srn_qp *qp, uint32_t dqpn,
				  bool datagram, int *err);
void srn_shm_peer_del(struct srn_peer *p);
/* shm_responder.c: memory reached only in the target process */
int srn_pvm_copy(struct srn_peer *p, const struct iovec *local, unsigned n,
		 const struct iovec *remote, bool write);
int srn_pvm_scatter(struct srn_peer *p, const struct iovec *dst, unsigned nd,
		    uint32_t pvm, const struct iovec *src, unsigned ns);

/* shm_ud.c: UD datagrams to QPs of this host */
int srn_shm_ud_send(struct srn_qp *qp, const struct srn_swqe *w,
		    const struct srn_ud_dest *d, enum ibv_wc_status *status,
		    enum srn_stall *stall);
void srn_shm_ud_close(struct srn_qp *qp);

/* responder.c: the target's side of each operation */
int srn_resp_mr(struct srn_peer *p, uint32_t key, uint64_t addr, uint64_t len,
		unsigned need_access, uint8_t **ptr_p);
int srn_resp_inv_check(struct srn_peer *p, const struct srn_swqe *w);
void srn_resp_inv_record(struct srn_peer *p, uint32_t key);
bool srn_resp_inv_pending(const struct srn_peer *p, uint32_t key);
int srn_resp_mr_any(struct srn_peer *p, uint32_t key, uint64_t addr,
		    uint64_t len, unsigned need_access, uint8_t **ptr_p,
		    bool *pvm_p);
int srn_resp_recv_sges(struct srn_peer *p, const struct srn_rwqe *rw,
		       struct iovec *iov, uint64_t *cap_p, uint32_t *pvm_p);
void srn_resp_cqe_fill(struct srn_peer *p, const struct srn_rwqe *rw,
		       const struct srn_swqe *w, enum ibv_wc_opcode opcode,
		       uint32_t byte_len, enum ibv_wc_status status,
		       struct srn_cqe *cqe);
/* Does the target's receive CQ take timestamps? Then its CQEs have no
 * room for a payload (no inline, bounce or datagram CQE). */
static inline bool srn_resp_cq_stamps(const struct srn_peer *p)
{
	/* relaxed: set by the owner before the segment was shared (as in
	 * srn_cq_post) */
	return __atomic_load_n(&p->cqv.shm->flags, __ATOMIC_RELAXED) &
	       SRN_CQF_TIMESTAMP;
}
bool srn_resp_inline_ok(const struct srn_peer *p, const struct srn_rwqe *rw,
			const struct srn_swqe *w);
int srn_resp_inline_check(struct srn_peer *p, const struct srn_rwqe *rw,
			  bool *odp_p);
struct srn_cqe_inl;
uint16_t srn_resp_inl_head(const struct srn_peer *p, const struct srn_rwqe *rw,
			   const struct srn_swqe *w, struct srn_cqe_inl *in);
void srn_resp_complete_inline(struct srn_peer *p, const struct srn_rwqe *rw,
			      const struct srn_swqe *w, const struct iovec *src,
			      unsigned ns);
void srn_resp_complete(struct srn_peer *p, const struct srn_rwqe *rw,
		       const struct srn_swqe *w, enum ibv_wc_opcode opcode,
		       uint32_t byte_len, enum ibv_wc_status status);
void srn_resp_error(struct srn_peer *p);
bool srn_resp_bounce_ok(const struct srn_peer *p, const struct srn_rwqe *rw,
			const struct srn_swqe *w, uint32_t pvm, uint64_t len);
enum ibv_wc_status
srn_resp_bounce(struct srn_peer *p, const struct srn_rwqe *rw,
		const struct srn_swqe *w, const struct iovec *dst, uint32_t pvm,
		const struct iovec *src, unsigned ns, uint32_t len, uint8_t sl);
int srn_resp_peek_recv(struct srn_peer *p, struct srn_rwqe *rw,
		       uint64_t *pos_p);
bool srn_resp_commit_recv(struct srn_peer *p, uint64_t pos);

/* shm_mr.c */
int srn_shm_mr_fetch(struct srn_peer *p, uint32_t key, struct srn_rmr **rmr_p);
void srn_peer_unmap_all(struct srn_peer *p);
/* The slots of peer's cache of mapped MRs: open addressing, linear
 * probing, key 0 free (shm_mr.c keeps it never full) */
static inline unsigned srn_rmr_hash(uint32_t key, unsigned cap)
{
	return (key * 2654435761u) & (cap - 1);
}

/* The cached mapping of target MR key, or NULL; inline: once per remote
 * access on the data path */
static inline struct srn_rmr *srn_rmr_lookup(struct srn_peer *p, uint32_t key)
{
	unsigned mask = p->rmr_cap - 1;

	if (!p->rmr_cap || !key)
		return NULL;
	for (unsigned i = srn_rmr_hash(key, p->rmr_cap);; i = (i + 1) & mask) {
		struct srn_rmr *m = &p->rmr[i];

		if (m->key == key)
			return m;
		if (!m->key)
			return NULL; /* never full: srn_rmr_slot grows it */
	}
}

/* shm_xrc.c */
int srn_shm_xrc_select(struct srn_peer *p, const struct srn_swqe *w,
		       enum ibv_wc_status *status, enum srn_stall *stall);
void srn_shm_xrc_free(struct srn_peer *p);

/* shm_direct.c */
int srn_shm_direct_map(struct srn_qp *qp, uint64_t addr, uint32_t rkey,
		       uint64_t len, unsigned need_access, void **map_p,
		       size_t *map_len_p, void **ptr_p);

/* shm_smap.c */
struct srn_shm_smap;
int srn_shm_smap_get(struct srn_shm_smap **map_p, struct srn_seg *seg_p, int fd,
		     pid_t pid, enum srn_seg_kind kind, size_t min_size,
		     int prot);
void srn_shm_smap_put(struct srn_shm_smap **map_p, struct srn_seg *seg_p);

/* shm_ctl.c */
int srn_shm_ctl_connect(struct srn_peer *p, uint32_t dqpn);
int srn_shm_ctl_retry(struct srn_peer *p);
int srn_shm_ctl_wait(struct srn_peer *p);

#endif /* SRN_SHM_TRANSPORT_H */
