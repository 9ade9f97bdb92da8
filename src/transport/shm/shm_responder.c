// SPDX-License-Identifier: MIT
/*
 * softrnic — the responder: what the target NIC would do for an incoming
 * request, performed by the initiator on the target's shared memory.
 *
 * Every check reads only the target's segments (TPT, QP, queues), never
 * trusts them unchecked, and happens before any side effect, in the order
 * a device applies them: key, PD, access, bounds. Errors are reported to
 * the target by writing its CQ and asking its progress thread to move its
 * QP to ERR (srn_resp_error).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/uio.h>

#include "transport/shm/shm.h"

static struct srn_rmr *srn_rmr_find(struct srn_peer *p,
				    const struct srn_key_ref *ref)
{
	struct srn_rmr *m = srn_rmr_lookup(p, ref->map_key);

	/* the same key with other attributes: re-registered, fetch anew */
	if (m && m->iova == ref->map_iova && m->length == ref->map_length &&
	    m->access == ref->map_access)
		return m;
	return NULL;
}

/* A SEND_WITH_INV's key must name a valid type 2 window of the target
 * bound to its QP (as rxe's invalidate): 0, or -EINVAL. */
int srn_resp_inv_check(struct srn_peer *p, const struct srn_swqe *w)
{
	struct srn_key_ref ref;

	if (srn_tpt_lookup(p->tpt, w->imm_data, &ref) ||
	    !(ref.flags & SRN_TPT_MW_TYPE2) || ref.qpn != p->qpn ||
	    srn_resp_inv_pending(p, w->imm_data))
		return -EINVAL;
	return 0;
}

/* Keys this peer invalidated that the target may not have applied yet
 * (it does when it polls the receive completion): only this peer could
 * use them (a type 2 window serves the QP it is bound to), so a short
 * list here suffices; the newest SRN_INV_PENDING are kept. */
void srn_resp_inv_record(struct srn_peer *p, uint32_t key)
{
	p->inv_key[p->inv_next++ % SRN_INV_PENDING] = key;
}

bool srn_resp_inv_pending(const struct srn_peer *p, uint32_t key)
{
	for (unsigned i = 0; i < SRN_INV_PENDING; i++)
		if (p->inv_key[i] == key)
			return true;
	return false;
}

/*
 * Resolves [addr, addr+len) under key at the target to a pointer: local,
 * or in the target process when *pvm_p (process_vm_readv/writev).
 * -EACCES when a check fails, -EAGAIN when the MR cannot be fetched from
 * this thread (retry later), other -errno when the target cannot be asked.
 */
int srn_resp_mr_any(struct srn_peer *p, uint32_t key, uint64_t addr,
		    uint64_t len, unsigned need_access, uint8_t **ptr_p,
		    bool *pvm_p)
{
	struct srn_key_ref ref;
	enum srn_key_err ke;
	struct srn_rmr *m;
	int err;

	/* a remote access may use a window's key (of this QP, for type 2);
	 * a receive buffer needs an MR's */
	if (need_access & SRN_ACCESS_REMOTE) /* fills ref.map_* */
		ke = srn_rkey_check(p->tpt, key, p->pd_handle, p->qpn,
				    need_access, addr, len, &ref);
	else
		ke = srn_key_check(p->tpt, key, p->pd_handle, need_access, addr,
				   len, &ref);
	if (ke == SRN_KEY_OK && (ref.flags & SRN_TPT_MW) &&
	    srn_resp_inv_pending(p, key))
		ke = SRN_KEY_BAD_KEY; /* invalidated by our SEND_WITH_INV */
	if (ke != SRN_KEY_OK) {
		srn_dbg("QP 0x%06x: key 0x%x at the target: %s",
			p->qp->ibqpx.qp_base.qp_num, key,
			srn_key_err_names[ke]);
		return -EACCES;
	}
	if (!(need_access & SRN_ACCESS_REMOTE)) { /* an MR maps itself */
		ref.map_key = ref.key;
		ref.map_access = ref.access;
		ref.map_iova = ref.iova;
		ref.map_length = ref.length;
		ref.map_va = ref.va;
	}
	m = srn_rmr_find(p, &ref);
	if (!m) {
		err = srn_shm_mr_fetch(p, ref.map_key, &m);
		if (err)
			return err;
		if (m->iova != ref.map_iova || m->length != ref.map_length)
			return -EACCES; /* re-registered meanwhile */
	}
	/* the window's first byte is at ref.va in the owner, which is
	 * m->base + (ref.va - ref.map_va) here. A read-only mapping is only
	 * read here: a receive buffer in it (LOCAL_WRITE; remote writes were
	 * refused by the key check) is written in the owner */
	*pvm_p = m->pvm || (m->ro && (need_access & SRN_ACCESS_WRITES));
	*ptr_p = (*pvm_p ? m->owner : m->base) + (ref.va - ref.map_va) +
		 (addr - ref.iova);
	return 0;
}

/* The same, for users that need the memory mapped here (receive buffers,
 * atomics): an MR only reachable with process_vm_* is refused. */
int srn_resp_mr(struct srn_peer *p, uint32_t key, uint64_t addr, uint64_t len,
		unsigned need_access, uint8_t **ptr_p)
{
	bool pvm;
	int err = srn_resp_mr_any(p, key, addr, len, need_access, ptr_p, &pvm);

	return !err && pvm ? -EACCES : err;
}

/* Resolves the SGEs of a receive WQE taken at the target into iovecs
 * (LOCAL_WRITE in the target QP's PD); *cap_p is their total length. Bit
 * i of *pvm_p: SGE i is an address in the target process (an ODP MR, or
 * memory that cannot be mapped), for process_vm_writev. */
int srn_resp_recv_sges(struct srn_peer *p, const struct srn_rwqe *rw,
		       struct iovec *iov, uint64_t *cap_p, uint32_t *pvm_p)
{
	uint32_t pvm_mask = 0;
	uint64_t cap = 0;
	uint8_t *ptr;
	bool pvm;
	int err;

	for (uint32_t i = 0; i < rw->num_sge; i++) {
		const struct srn_rsge *s = &rw->sge[i];

		iov[i].iov_base = NULL;
		iov[i].iov_len = s->length;
		if (s->length) {
			err = srn_resp_mr_any(p, s->lkey, s->addr, s->length,
					      IBV_ACCESS_LOCAL_WRITE, &ptr,
					      &pvm);
			if (err)
				return err;
			iov[i].iov_base = ptr;
			pvm_mask |= (uint32_t)pvm << i;
		}
		cap += s->length;
	}
	*cap_p = cap;
	*pvm_p = pvm_mask;
	return 0;
}

/* Looks at the next receive WQE of the target without taking it. */
int srn_resp_peek_recv(struct srn_peer *p, struct srn_rwqe *rw, uint64_t *pos_p)
{
	int err = srn_rq_peek(&p->rqv, rw, pos_p);

	if (err == -EAGAIN) {
		/* release: pairs with the acq_rel exchange in
		 * srn_qp_take_peer_waiting / srn_srq_take_peer_waiting (after
		 * a post_recv), which then kicks us */
		__atomic_store_n(&p->rqv.rq->peer_waiting, SRN_WAIT_RNR,
				 __ATOMIC_RELEASE);
		/* seq_cst: pairs with srn_smp_mb_after_atomic in the owner's
		 * post_recv (srn_qp_post_recv, srn_srq_post_recv). Both sides
		 * store (the flag here, prod there) then load what the other
		 * stored: without a full barrier on each, a receive posted
		 * between the peek and the flag could be missed here while
		 * the owner misses the flag, and nobody kicks us */
		srn_smp_mb();
		/* a receive posted between the peek and the flag would
		 * leave us waiting: look once more */
		err = srn_rq_peek(&p->rqv, rw, pos_p);
	}
	return err;
}

bool srn_resp_commit_recv(struct srn_peer *p, uint64_t pos)
{
	if (!srn_rq_commit(&p->rqv, pos))
		return false;
	/* the CQE of this receive names the WQE it took: the owner's
	 * post_recv then need not read cons (srn_rq_polled_bound; the
	 * owner of an XRC SRQ is not told, srn_qp_rq_on_cq) */
	p->rq_pos = (uint32_t)(pos + 1);
	if (p->has_srq)
		srn_srq_limit_consumed(&p->rqv, p->kick_fd);
	return true;
}

/* The receive CQE for rw, consumed by w; not yet posted. */
void srn_resp_cqe_fill(struct srn_peer *p, const struct srn_rwqe *rw,
		       const struct srn_swqe *w, enum ibv_wc_opcode opcode,
		       uint32_t byte_len, enum ibv_wc_status status,
		       struct srn_cqe *cqe)
{
	const struct srn_opcode_info *op = srn_opcode_get(w->opcode);
	struct srn_cqe *c = cqe; /* filled in place: no copy on the way */

	*c = (struct srn_cqe){
		.wr_id = rw->wr_id,
		.status = status,
		.opcode = opcode,
		.byte_len = byte_len,
		.qp_num = p->qpn,
		.src_qp = p->qp->ibqpx.qp_base.qp_num,
		.rq_pos = p->rq_pos,
	};
	if (status == IBV_WC_SUCCESS && op && (op->flags & SRN_OP_HAS_IMM)) {
		c->imm_data = w->imm_data;
		c->wc_flags |= IBV_WC_WITH_IMM;
	}
	if (status == IBV_WC_SUCCESS && op && (op->flags & SRN_OP_INV)) {
		/* the target's poll invalidates the window (srn_cq_drain);
		 * until then this peer refuses the key itself */
		srn_resp_inv_record(p, w->imm_data);
		c->imm_data = w->imm_data; /* invalidated_rkey, host order */
		c->wc_flags |= IBV_WC_WITH_INV;
	}
	if (status == IBV_WC_SUCCESS && p->datagram)
		c->wc_flags |= IBV_WC_GRH; /* the GRH starts the buffer */
	if (status != IBV_WC_SUCCESS)
		c->vendor_err = status;
	if (w->send_flags & IBV_SEND_SOLICITED)
		c->flags |= SRN_CQE_SOLICITED;
}

void srn_resp_complete(struct srn_peer *p, const struct srn_rwqe *rw,
		       const struct srn_swqe *w, enum ibv_wc_opcode opcode,
		       uint32_t byte_len, enum ibv_wc_status status)
{
	struct srn_cqe c;

	srn_resp_cqe_fill(p, rw, w, opcode, byte_len, status, &c);
	srn_cq_post(&p->cqv, &c);
}

/*
 * May the SEND w into rw go as an inline receive CQE (struct srn_cqe_inl)?
 * A small SEND (not WITH_INV) on a connection (not UD, not XRC), whose
 * first receive SGE holds it, to a CQ that takes no timestamps.
 */
bool srn_resp_inline_ok(const struct srn_peer *p, const struct srn_rwqe *rw,
			const struct srn_swqe *w)
{
	if (!w->total_len || w->total_len > SRN_CQE_INL_MAX || p->datagram ||
	    p->xsrq || !rw->num_sge || rw->sge[0].length < w->total_len)
		return false;
	if (w->opcode != IBV_WR_SEND && w->opcode != IBV_WR_SEND_WITH_IMM)
		return false;
	return !srn_resp_cq_stamps(p);
}

/*
 * The receive WQE rw of an inline receive CQE: each SGE a LOCAL_WRITE MR
 * of the target QP's PD that holds it, the checks srn_resp_recv_sges
 * makes (key, PD, access, bounds), without resolving the memory: the
 * target's poll places the bytes, after its own check. 0 or -EACCES;
 * *odp_p: an SGE is an ODP MR's, whose pages may be missing (only
 * process_vm_* reaches it without a fault), so no inline CQE.
 */
int srn_resp_inline_check(struct srn_peer *p, const struct srn_rwqe *rw,
			  bool *odp_p)
{
	struct srn_key_ref ref;
	enum srn_key_err ke;

	*odp_p = false;
	for (uint32_t i = 0; i < rw->num_sge; i++) {
		const struct srn_rsge *s = &rw->sge[i];

		if (!s->length)
			continue;
		ke = srn_key_check(p->tpt, s->lkey, p->pd_handle,
				   IBV_ACCESS_LOCAL_WRITE, s->addr, s->length,
				   &ref);
		if (ke != SRN_KEY_OK) {
			srn_dbg("QP 0x%06x: key 0x%x at the target: %s",
				p->qp->ibqpx.qp_base.qp_num, s->lkey,
				srn_key_err_names[ke]);
			return -EACCES;
		}
		*odp_p |= !!(ref.access & IBV_ACCESS_ON_DEMAND);
	}
	return 0;
}

/* The fields of an inline or bounce receive CQE (struct srn_cqe_inl) for
 * the SEND w into rw but its payload: returns its flags but the length. */
uint16_t srn_resp_inl_head(const struct srn_peer *p, const struct srn_rwqe *rw,
			   const struct srn_swqe *w, struct srn_cqe_inl *in)
{
	uint16_t flags = SRN_CQE_INLINE;

	*in = (struct srn_cqe_inl){
		.wr_id = rw->wr_id,
		.addr = rw->sge[0].addr,
		.lkey = rw->sge[0].lkey,
		.src_qp = p->qp->ibqpx.qp_base.qp_num,
		.qp_num = p->qpn,
		.rq_pos = p->rq_pos,
	};
	if (w->opcode == IBV_WR_SEND_WITH_IMM) {
		in->imm_data = w->imm_data;
		flags |= SRN_CQE_INL_IMM;
	}
	if (w->send_flags & IBV_SEND_SOLICITED)
		flags |= SRN_CQE_SOLICITED;
	return flags;
}

/* The receive CQE of rw with the SEND's payload (src, ns) in it, posted:
 * the target's poll places the bytes (srn_cq_inl_take). */
void srn_resp_complete_inline(struct srn_peer *p, const struct srn_rwqe *rw,
			      const struct srn_swqe *w, const struct iovec *src,
			      unsigned ns)
{
	union {
		struct srn_cqe cqe;
		struct srn_cqe_inl inl;
	} u;
	struct iovec to[2];
	uint16_t flags = srn_resp_inl_head(p, rw, w, &u.inl);

	/* the payload's w->total_len bytes; the rest stays zero */
	if (ns == 1) { /* one SGE or inline data: no list walk */
		uint32_t len = (uint32_t)w->total_len, head = len;

		if (head > sizeof(u.inl.data))
			head = sizeof(u.inl.data);
		memcpy(u.inl.data, src->iov_base, head);
		memcpy(u.inl.data2, (const uint8_t *)src->iov_base + head,
		       len - head);
	} else {
		to[0] = (struct iovec){ u.inl.data, sizeof(u.inl.data) };
		to[1] = (struct iovec){ u.inl.data2, sizeof(u.inl.data2) };
		srn_iov_copy(to, 2, src, ns);
	}
	u.inl.flags = flags | (uint16_t)(w->total_len << SRN_CQE_INL_LEN_SHIFT);
	srn_cq_post(&p->cqv, &u.cqe);
}

/*
 * May the len bytes of the SEND w (a datagram's GRH included) into rw go
 * through the CQ's bounce slot (SRN_CQE_BOUNCE)? When its first SGE, which
 * holds them, lives only in the target process (pvm: an MR without a
 * remote right is never shared), is not an ODP MR's (the owner's poll
 * could fault on missing pages), and they fit a slot; a SEND or
 * SEND_WITH_IMM (WITH_INV has its own CQE fields), not to an XRC SRQ, on a
 * CQ without timestamps (the inline layout has no room for one).
 */
bool srn_resp_bounce_ok(const struct srn_peer *p, const struct srn_rwqe *rw,
			const struct srn_swqe *w, uint32_t pvm, uint64_t len)
{
	struct srn_key_ref ref;

	if (!(pvm & 1u) || !p->cqv.bounce || p->xsrq || !rw->num_sge ||
	    len > SRN_CQ_BOUNCE_SIZE || rw->sge[0].length < len ||
	    (w->opcode != IBV_WR_SEND && w->opcode != IBV_WR_SEND_WITH_IMM) ||
	    srn_resp_cq_stamps(p))
		return false;
	return !srn_tpt_lookup(p->tpt, rw->sge[0].lkey, &ref) &&
	       !(ref.access & IBV_ACCESS_ON_DEMAND);
}

/* The bounce CQE of rw: its bytes are in slot b of the CQ's slots. */
static void srn_resp_bounce_cqe(struct srn_peer *p, const struct srn_rwqe *rw,
				const struct srn_swqe *w, uint32_t len,
				uint32_t b, uint8_t sl, struct srn_cqe_inl *in)
{
	struct srn_cqe_bnc bnc = { .len = len, .slot = b, .sl = sl };
	uint16_t flags = srn_resp_inl_head(p, rw, w, in) | SRN_CQE_BOUNCE;

	memcpy(in->data, &bnc, sizeof(bnc));
	if (p->datagram)
		flags |= SRN_CQE_DGRAM;
	in->flags = flags;
}

/* The bytes into dst (process_vm_writev for the SGEs in pvm) and a plain
 * CQE: published in the claimed slot, or posted (slot NULL). */
static enum ibv_wc_status
srn_resp_bounce_pvm(struct srn_peer *p, const struct srn_rwqe *rw,
		    const struct srn_swqe *w, const struct iovec *dst,
		    uint32_t pvm, const struct iovec *src, unsigned ns,
		    uint32_t len, uint8_t sl, struct srn_cqe *slot,
		    uint64_t pos)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct srn_cqe c;

	if (srn_pvm_scatter(p, dst, rw->num_sge, pvm, src, ns))
		st = IBV_WC_LOC_PROT_ERR;
	srn_resp_cqe_fill(p, rw, w, IBV_WC_RECV, st == IBV_WC_SUCCESS ? len : 0,
			  st, &c);
	c.sl = sl;
	if (slot)
		srn_cq_publish(&p->cqv, slot, pos, &c);
	else
		srn_cq_post(&p->cqv, &c);
	return st;
}

/*
 * Completes the receive rw of w (srn_resp_bounce_ok said yes) with the len
 * bytes of src (ns iovecs; a datagram's GRH first): into the CQ's bounce
 * slot of the CQE it claims, which the target's poll copies to the buffer
 * (srn_cq_inl_take). When that slot is still in use (the target is
 * SRN_CQ_BOUNCE_SLOTS completions behind), the bytes go into dst (the
 * receive SGEs, pvm marking those in the target only) with
 * process_vm_writev and the CQE is a plain one; that is known before the
 * claim but for a race, so that a claimed CQE is published soon (the
 * owner's repair after a peer's death skips only long-empty ones).
 * Returns the receive's status; its CQE is posted (unless the CQ
 * overflowed: then the owner loses this CQE, and the bytes are not placed
 * either).
 */
enum ibv_wc_status
srn_resp_bounce(struct srn_peer *p, const struct srn_rwqe *rw,
		const struct srn_swqe *w, const struct iovec *dst, uint32_t pvm,
		const struct iovec *src, unsigned ns, uint32_t len, uint8_t sl)
{
	union {
		struct srn_cqe cqe;
		struct srn_cqe_inl inl;
	} u;
	struct iovec to = { NULL, len };
	struct srn_cqe *slot;
	uint64_t pos;

	if (!srn_cq_bounce_slot(&p->cqv, srn_cq_prod_hint(&p->cqv)))
		return srn_resp_bounce_pvm(p, rw, w, dst, pvm, src, ns, len, sl,
					   NULL, 0);
	if (srn_cq_claim(&p->cqv, &pos, &slot))
		return IBV_WC_SUCCESS;
	to.iov_base = srn_cq_bounce_slot(&p->cqv, pos);
	if (!to.iov_base) /* other producers took the room meanwhile */
		return srn_resp_bounce_pvm(p, rw, w, dst, pvm, src, ns, len, sl,
					   slot, pos);
	srn_iov_copy(&to, 1, src, ns);
	srn_resp_bounce_cqe(p, rw, w, len,
			    (uint32_t)(pos % SRN_CQ_BOUNCE_SLOTS), sl, &u.inl);
	srn_cq_publish(&p->cqv, slot, pos, &u.cqe);
	return IBV_WC_SUCCESS;
}

/* Asks the target to move its QP to ERR, as the responder of a device does
 * after a NAK for an access or length violation (RC; a UC responder drops
 * the message and goes on). */
void srn_resp_error(struct srn_peer *p)
{
	if (p->qp->ibqpx.qp_base.qp_type == IBV_QPT_UC)
		return; /* UC: a bad message is dropped, the QP goes on */
	/* release: pairs with the acq_rel exchange in srn_progress_scan
	 * (the owner's progress thread) */
	__atomic_fetch_or(&p->tqp->err_req, SRN_ERRREQ_REMOTE,
			  __ATOMIC_RELEASE);
	srn_kick_fd(p->kick_fd);
}

/* ---- memory that lives only in the target process ---- */

/*
 * Copies between local iovecs and one range of the target process that
 * could not be mapped (write: local -> remote). Needs ptrace permission
 * over the target (same user, no stricter Yama policy); -EACCES without.
 */
int srn_pvm_copy(struct srn_peer *p, const struct iovec *local, unsigned n,
		 const struct iovec *remote, bool write)
{
	ssize_t k = write ? process_vm_writev(p->pid, local, n, remote, 1, 0) :
			    process_vm_readv(p->pid, local, n, remote, 1, 0);

	if (k == (ssize_t)remote->iov_len)
		return 0;
	if (k < 0 && errno == ESRCH)
		return -ECONNRESET; /* the target is gone */
	return -EACCES;
}

/* Scatters src over the receive SGEs dst; those marked in pvm_mask live
 * only in the target process and are written with process_vm_writev. */
int srn_pvm_scatter(struct srn_peer *p, const struct iovec *dst, unsigned nd,
		    uint32_t pvm_mask, const struct iovec *src, unsigned ns)
{
	unsigned si = 0;
	size_t soff = 0;

	for (unsigned di = 0; di < nd && si < ns; di++) {
		struct iovec part[SRN_MAX_SGE], d = dst[di];
		size_t need = d.iov_len;
		unsigned np = 0;

		while (need && si < ns && np < SRN_MAX_SGE) {
			size_t k = src[si].iov_len - soff;

			k = k < need ? k : need;
			part[np++] =
				(struct iovec){ (char *)src[si].iov_base + soff,
						k };
			need -= k;
			soff += k;
			if (soff == src[si].iov_len) {
				si++;
				soff = 0;
			}
		}
		d.iov_len -= need;
		if (!(pvm_mask & (1u << di)))
			srn_iov_copy(&d, 1, part, np);
		else if (d.iov_len && srn_pvm_copy(p, part, np, &d, true))
			return -EACCES;
	}
	return 0;
}
