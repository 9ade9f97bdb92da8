// SPDX-License-Identifier: MIT
/*
 * softrnic — the extended post-send API (ibv_qp_ex, ibv_wr_*): WQEs built
 * field by field straight into the send queue, the same WQE format and
 * checks as ibv_post_send (core/sq.h), posted as one batch.
 *
 * wr_start takes the QP's sq_lock; each opcode builder closes the WQE
 * before it (checks it) and opens the next slot; set_sge/set_inline_data
 * fill the open one. Nothing is visible to the requester until
 * wr_complete moves the producer index over the whole batch and rings
 * the doorbell; the first error in the batch (full queue, too many SGEs,
 * inline data too long, an opcode the QP was not created for) makes
 * wr_complete post nothing and return it, as wr_abort posts nothing.
 */
#include <errno.h>
#include <string.h>

#include "core/sq.h"
#include "engine/engine.h"
#include "verbs/verbs.h"

static inline struct srn_qp *to_sqpx(struct ibv_qp_ex *x)
{
	return container_of(x, struct srn_qp, ibqpx);
}

static void srn_bx_fail(struct srn_qp *qp, int err)
{
	if (!qp->bx_err)
		qp->bx_err = err;
}

/* Checks the open WQE, as srn_sq_check does for a posted WR. */
static void srn_bx_close(struct srn_qp *qp)
{
	const struct srn_swqe *w = qp->bx_cur;
	const struct srn_opcode_info *op;

	if (!w)
		return;
	qp->bx_cur = NULL;
	op = srn_opcode_get(w->opcode);
	if ((op->flags & SRN_OP_REMOTE_ATOMIC) &&
	    (w->num_sge != 1 || w->sge[0].length != 8))
		srn_bx_fail(qp, EINVAL);
	if (w->total_len > SRN_MAX_MSG_SZ)
		srn_bx_fail(qp, EINVAL);
	if (qp->ibqpx.qp_base.qp_type == IBV_QPT_UD &&
	    (!w->ah || w->total_len > SRN_UD_MTU))
		srn_bx_fail(qp, EINVAL); /* no address, or over the MTU */
}

/* Opens the next WQE of the batch for opcode (an IBV_QP_EX_WITH_* op). */
static struct srn_swqe *srn_bx_open(struct ibv_qp_ex *x, unsigned opcode,
				    uint64_t with)
{
	struct srn_qp *qp = to_sqpx(x);
	struct srn_sq *sq = &qp->sq;
	uint64_t pos = qp->bx_start + qp->bx_n;
	struct srn_swqe *w;

	srn_bx_close(qp);
	if (!(qp->send_ops_flags & with))
		srn_bx_fail(qp, EINVAL);
	/* acquire: pairs with the release in srn_comp_send_done */
	if (pos - __atomic_load_n(&sq->cons, __ATOMIC_ACQUIRE) >= sq->max_wr)
		srn_bx_fail(qp, ENOMEM);
	if (qp->bx_err)
		return NULL;
	w = srn_sq_slot(sq, pos);
	memset(w, 0, sizeof(*w));
	w->wr_id = x->wr_id;
	w->opcode = opcode;
	w->send_flags = x->wr_flags & ~(unsigned)IBV_SEND_INLINE;
	w->status = IBV_WC_SUCCESS;
	qp->bx_cur = w;
	qp->bx_n++;
	return w;
}

static void srn_wr_start(struct ibv_qp_ex *x)
{
	struct srn_qp *qp = to_sqpx(x);
	enum ibv_qp_state st;

	srn_lock(&qp->sq_lock);
	/* acquire: pairs with the release in srn_comp_send_done */
	srn_sq_rebase(&qp->sq, __atomic_load_n(&qp->sq.cons, __ATOMIC_ACQUIRE));
	qp->bx_start = qp->sq.prod;
	qp->bx_n = 0;
	qp->bx_err = 0;
	qp->bx_cur = NULL;
	st = srn_qp_state(qp);
	if (st != IBV_QPS_RTS && st != IBV_QPS_ERR && st != IBV_QPS_SQD)
		qp->bx_err = EINVAL;
}

static int srn_wr_complete(struct ibv_qp_ex *x)
{
	struct srn_qp *qp = to_sqpx(x);
	int err;

	srn_bx_close(qp);
	err = qp->bx_err;
	if (!err && qp->bx_n) {
		/* release: the WQEs are complete before their positions
		 * are, as in srn_sq_push (more than needed: prod is read
		 * only under sq_lock, whose acquire in srn_lock pairs with
		 * the release in srn_unlock) */
		__atomic_store_n(&qp->sq.prod, qp->bx_start + qp->bx_n,
				 __ATOMIC_RELEASE);
		srn_req_doorbell(qp);
	}
	qp->bx_n = 0;
	srn_unlock(&qp->sq_lock);
	return err;
}

static void srn_wr_abort(struct ibv_qp_ex *x)
{
	struct srn_qp *qp = to_sqpx(x);

	qp->bx_cur = NULL;
	qp->bx_n = 0;
	srn_unlock(&qp->sq_lock);
}

/* ---- opcodes ---- */

static void srn_wr_send(struct ibv_qp_ex *x)
{
	srn_bx_open(x, IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

static void srn_wr_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct srn_swqe *w = srn_bx_open(x, IBV_WR_SEND_WITH_IMM,
					 IBV_QP_EX_WITH_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

static void srn_wr_rdma(struct ibv_qp_ex *x, unsigned opcode, uint64_t with,
			uint32_t rkey, uint64_t raddr, __be32 imm)
{
	struct srn_swqe *w = srn_bx_open(x, opcode, with);

	if (!w)
		return;
	w->rkey = rkey;
	w->remote_addr = raddr;
	w->imm_data = imm;
	if (opcode != IBV_WR_RDMA_READ)
		srn_sq_prefetch_target(to_sqpx(x), raddr);
}

static void srn_wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey,
			      uint64_t raddr)
{
	srn_wr_rdma(x, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, rkey,
		    raddr, 0);
}

static void srn_wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey,
				  uint64_t raddr, __be32 imm)
{
	srn_wr_rdma(x, IBV_WR_RDMA_WRITE_WITH_IMM,
		    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, rkey, raddr, imm);
}

static void srn_wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr)
{
	srn_wr_rdma(x, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, rkey, raddr,
		    0);
}

static void srn_wr_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey,
				  uint64_t raddr, uint64_t compare,
				  uint64_t swap)
{
	struct srn_swqe *w = srn_bx_open(x, IBV_WR_ATOMIC_CMP_AND_SWP,
					 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);

	if (!w)
		return;
	w->rkey = rkey;
	w->remote_addr = raddr;
	w->compare_add = compare;
	w->swap = swap;
}

static void srn_wr_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey,
				    uint64_t raddr, uint64_t add)
{
	struct srn_swqe *w = srn_bx_open(x, IBV_WR_ATOMIC_FETCH_AND_ADD,
					 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);

	if (!w)
		return;
	w->rkey = rkey;
	w->remote_addr = raddr;
	w->compare_add = add;
}

/* Opcodes no QP of this device is created for (ibv_create_qp_ex refuses
 * their flags): a builder the application calls anyway fails the batch. */
static void srn_wr_refused(struct ibv_qp_ex *x)
{
	srn_bx_close(to_sqpx(x));
	srn_bx_fail(to_sqpx(x), EOPNOTSUPP);
}

static void srn_wr_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw,
			   uint32_t rkey, const struct ibv_mw_bind_info *bi)
{
	struct srn_swqe *w =
		srn_bx_open(x, IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW);

	if (!w)
		return;
	w->bind_mw = mw;
	w->bind_mr = bi->mr;
	w->bind_access = bi->mw_access_flags;
	w->remote_addr = bi->addr;
	w->total_len = bi->length;
	w->rkey = rkey;
}

static void srn_wr_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct srn_swqe *w =
		srn_bx_open(x, IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV);

	if (w)
		w->imm_data = rkey; /* invalidate_rkey */
}

static void srn_wr_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct srn_swqe *w = srn_bx_open(x, IBV_WR_SEND_WITH_INV,
					 IBV_QP_EX_WITH_SEND_WITH_INV);

	if (w)
		w->imm_data = rkey; /* invalidate_rkey */
}

static void srn_wr_send_tso(struct ibv_qp_ex *x, void *hdr, uint16_t hdr_sz,
			    uint16_t mss)
{
	srn_wr_refused(x);
}

static void srn_wr_atomic_write(struct ibv_qp_ex *x, uint32_t rkey,
				uint64_t raddr, const void *data)
{
	srn_wr_refused(x);
}

/* A UD WQE's destination; a connected QP has none (the spec leaves the
 * call undefined there: the batch fails). */
static void srn_wr_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah,
			       uint32_t qpn, uint32_t qkey)
{
	struct srn_qp *qp = to_sqpx(x);
	struct srn_swqe *w = qp->bx_cur;

	if (x->qp_base.qp_type != IBV_QPT_UD || !w || !ah) {
		srn_wr_refused(x);
		return;
	}
	w->ah = ah;
	w->remote_qpn = qpn;
	w->remote_qkey = qkey;
}

/* The XRC SRQ the WQE's message goes to: only an XRC INI QP has one. */
static void srn_wr_set_xrc_srqn(struct ibv_qp_ex *x, uint32_t srqn)
{
	struct srn_qp *qp = to_sqpx(x);
	struct srn_swqe *w = qp->bx_cur;

	if (x->qp_base.qp_type != IBV_QPT_XRC_SEND || !w) {
		srn_wr_refused(x);
		return;
	}
	w->xrc_srqn = srqn;
}

/* ---- data ---- */

static void srn_wr_set_sge_list(struct ibv_qp_ex *x, size_t n,
				const struct ibv_sge *sg)
{
	struct srn_qp *qp = to_sqpx(x);
	struct srn_swqe *w = qp->bx_cur;
	uint64_t total = 0;

	if (!w)
		return srn_bx_fail(qp, EINVAL);
	if (n > qp->cap.max_send_sge)
		return srn_bx_fail(qp, EINVAL);
	for (size_t i = 0; i < n; i++)
		total += sg[i].length;
	if (n)
		memcpy(w->sge, sg, n * sizeof(*sg));
	w->num_sge = (uint32_t)n;
	w->total_len = total;
	w->inline_len = 0;
}

static void srn_wr_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr,
			   uint32_t length)
{
	struct ibv_sge sge = { addr, length, lkey };

	srn_wr_set_sge_list(x, 1, &sge);
}

static void srn_wr_set_inline_data_list(struct ibv_qp_ex *x, size_t n,
					const struct ibv_data_buf *buf)
{
	struct srn_qp *qp = to_sqpx(x);
	struct srn_swqe *w = qp->bx_cur;
	const struct srn_opcode_info *op;
	uint64_t total = 0;
	uint8_t *inl;

	if (!w)
		return srn_bx_fail(qp, EINVAL);
	op = srn_opcode_get(w->opcode);
	for (size_t i = 0; i < n; i++)
		total += buf[i].length;
	if (!(op->flags & SRN_OP_INLINE_OK) || total > qp->cap.max_inline_data)
		return srn_bx_fail(qp, EINVAL);
	inl = srn_swqe_inline(w);
	for (size_t i = 0, off = 0; i < n; off += buf[i].length, i++)
		memcpy(inl + off, buf[i].addr, buf[i].length);
	w->inline_len = (uint32_t)total;
	w->total_len = total;
	w->num_sge = 0;
	w->send_flags |= IBV_SEND_INLINE;
}

static void srn_wr_set_inline_data(struct ibv_qp_ex *x, void *addr,
				   size_t length)
{
	struct ibv_data_buf b = { addr, length };

	srn_wr_set_inline_data_list(x, 1, &b);
}

/* ibv_create_qp_ex with send_ops_flags: the QP becomes extended. */
void srn_qpex_init(struct srn_qp *qp, uint64_t send_ops_flags)
{
	struct ibv_qp_ex *x = &qp->ibqpx;

	qp->send_ops_flags = send_ops_flags;
	x->wr_start = srn_wr_start;
	x->wr_complete = srn_wr_complete;
	x->wr_abort = srn_wr_abort;
	x->wr_send = srn_wr_send;
	x->wr_send_imm = srn_wr_send_imm;
	x->wr_rdma_write = srn_wr_rdma_write;
	x->wr_rdma_write_imm = srn_wr_rdma_write_imm;
	x->wr_rdma_read = srn_wr_rdma_read;
	x->wr_atomic_cmp_swp = srn_wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = srn_wr_atomic_fetch_add;
	x->wr_bind_mw = srn_wr_bind_mw;
	x->wr_local_inv = srn_wr_local_inv;
	x->wr_send_inv = srn_wr_send_inv;
	x->wr_send_tso = srn_wr_send_tso;
	x->wr_atomic_write = srn_wr_atomic_write;
	x->wr_set_ud_addr = srn_wr_set_ud_addr;
	x->wr_set_xrc_srqn = srn_wr_set_xrc_srqn;
	x->wr_set_sge = srn_wr_set_sge;
	x->wr_set_sge_list = srn_wr_set_sge_list;
	x->wr_set_inline_data = srn_wr_set_inline_data;
	x->wr_set_inline_data_list = srn_wr_set_inline_data_list;
}
