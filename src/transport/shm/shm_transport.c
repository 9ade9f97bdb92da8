// SPDX-License-Identifier: MIT
/*
 * softrnic — the same-host transport.
 *
 * At RTR the initiator maps the target QP's segments (shm_ctl.c), or, if
 * the target is not at RTR yet, when it is (the connection stays pending
 * and the send queue stalls "peer not ready" meanwhile). From then on
 * every operation is executed by the initiator itself, at doorbell time:
 * RDMA WRITE/READ and atomics are loads and stores into the target's
 * registered memory mapped here; SEND takes the target's next receive WQE
 * from its ring, copies the payload straight into that buffer and writes
 * the CQE into the target's CQ. One copy, no system call, no help from any
 * thread of the target.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/shm/shm.h"
#include "engine/transport.h"

/* Maps an error of srn_resp_mr to the requester's completion status. */
static int srn_remote_fail(struct srn_peer *p, int err,
			   enum ibv_wc_status *status, enum srn_stall *stall)
{
	if (err == -EAGAIN) { /* only an application thread may fetch */
		*stall = SRN_STALL_FETCH;
		return -EAGAIN;
	}
	if (err == -EACCES) {
		*status = IBV_WC_REM_ACCESS_ERR;
		srn_resp_error(p);
	} else {
		srn_dbg("QP 0x%06x: QP 0x%06x's MR: %s",
			p->qp->ibqpx.qp_base.qp_num, p->qpn, strerror(-err));
		*status = IBV_WC_RETRY_EXC_ERR;
	}
	return 0;
}

static bool srn_target_allows(struct srn_peer *p, unsigned acc)
{
	/* acquire: pairs with the release in srn_qp_apply_attr */
	return (__atomic_load_n(&p->tqp->qp_access_flags, __ATOMIC_ACQUIRE) &
		acc) == acc;
}

static int srn_invalid_request(struct srn_peer *p, enum ibv_wc_status *status)
{
	*status = IBV_WC_REM_INV_REQ_ERR;
	srn_resp_error(p);
	return 0;
}

/* ---- operations ---- */

static int srn_shm_write(struct srn_qp *qp, struct srn_peer *p,
			 const struct srn_swqe *w, enum ibv_wc_status *status,
			 enum srn_stall *stall)
{
	bool imm = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	struct srn_rwqe_buf rb;
	struct iovec src[SRN_MAX_SGE], dst;
	unsigned ns;
	uint8_t *ptr = NULL;
	bool pvm = false;
	uint64_t pos;
	int err;

	if (srn_local_iov(qp, w, 0, src, &ns)) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	if (!srn_target_allows(p, IBV_ACCESS_REMOTE_WRITE))
		return srn_invalid_request(p, status);
	if (w->total_len) {
		err = srn_resp_mr_any(p, w->rkey, w->remote_addr, w->total_len,
				      IBV_ACCESS_REMOTE_WRITE, &ptr, &pvm);
		if (err)
			return srn_remote_fail(p, err, status, stall);
	}
	if (imm) {
		do {
			if (srn_resp_peek_recv(p, &rb.w, &pos) == -EAGAIN) {
				*stall = SRN_STALL_RNR;
				return -EAGAIN;
			}
		} while (!srn_resp_commit_recv(p, pos));
	}
	dst.iov_base = ptr;
	dst.iov_len = w->total_len;
	/* relaxed: a hint for the next post's prefetch (srn_sq_prefetch) */
	if (ptr && !pvm)
		__atomic_store_n(&qp->pf_delta,
				 (uint64_t)(uintptr_t)ptr - w->remote_addr,
				 __ATOMIC_RELAXED);
	if (pvm)
		err = srn_pvm_copy(p, src, ns, &dst, true);
	else
		srn_iov_copy(&dst, 1, src, ns);
	if (pvm && err)
		return srn_remote_fail(p, err, status, stall);
	if (imm)
		srn_resp_complete(p, &rb.w, w, IBV_WC_RECV_RDMA_WITH_IMM,
				  (uint32_t)w->total_len, IBV_WC_SUCCESS);
	*status = IBV_WC_SUCCESS;
	return 0;
}

/* A receive WQE that cannot take the SEND: complete it in error at the
 * target and fail the request. */
static int srn_send_reject(struct srn_peer *p, const struct srn_rwqe *rw,
			   const struct srn_swqe *w, enum ibv_wc_status tstat,
			   enum ibv_wc_status *status)
{
	srn_resp_complete(p, rw, w, IBV_WC_RECV, 0, tstat);
	srn_resp_error(p);
	*status = tstat == IBV_WC_LOC_LEN_ERR ? IBV_WC_REM_INV_REQ_ERR :
						IBV_WC_REM_OP_ERR;
	return 0;
}

/* Takes the target's next receive WQE for the SEND w into *rb: *small
 * when it goes as an inline receive CQE (its SGEs only checked), else its
 * SGEs resolved into dst (*cap_p, *pvm_p). Returns 0 with the checks'
 * result in *rerr_p (-EAGAIN: an MR to fetch first, the WQE stays), or
 * -EAGAIN when there is no WQE (RNR). */
static int srn_shm_take_recv(struct srn_peer *p, const struct srn_swqe *w,
			     struct srn_rwqe_buf *rb, struct iovec *dst,
			     uint64_t *cap_p, uint32_t *pvm_p, bool *small,
			     int *rerr_p)
{
	uint64_t pos;
	int err, rerr;
	bool odp;

	do {
		err = srn_resp_peek_recv(p, &rb->w, &pos);
		if (err == -EAGAIN)
			return err;
		*small = !err && srn_resp_inline_ok(p, &rb->w, w);
		rerr = err;
		if (*small) {
			rerr = srn_resp_inline_check(p, &rb->w, &odp);
			*small = !odp; /* ODP: placed here */
		}
		if (!err && !*small)
			rerr = srn_resp_recv_sges(p, &rb->w, dst, cap_p, pvm_p);
		if (rerr == -EAGAIN)
			break; /* an MR to fetch: the WQE stays */
	} while (!srn_resp_commit_recv(p, pos));
	*rerr_p = rerr;
	return 0;
}

static int srn_shm_send(struct srn_qp *qp, struct srn_peer *p,
			const struct srn_swqe *w, enum ibv_wc_status *status,
			enum srn_stall *stall)
{
	struct iovec src[SRN_MAX_SGE], dst[SRN_MAX_SGE];
	struct srn_rwqe_buf rb;
	uint32_t pvm = 0;
	uint64_t cap = 0;
	unsigned ns;
	bool small;
	int rerr;

	if (srn_local_iov(qp, w, 0, src, &ns)) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	if (w->opcode == IBV_WR_SEND_WITH_INV && srn_resp_inv_check(p, w))
		return srn_invalid_request(p, status);
	if (srn_shm_take_recv(p, w, &rb, dst, &cap, &pvm, &small, &rerr)) {
		*stall = SRN_STALL_RNR;
		return -EAGAIN;
	}
	if (rerr == -EACCES || rerr == -EPROTO)
		return srn_send_reject(p, &rb.w, w, IBV_WC_LOC_PROT_ERR,
				       status);
	if (rerr)
		return srn_remote_fail(p, rerr, status, stall);
	*status = IBV_WC_SUCCESS;
	if (small) {
		srn_resp_complete_inline(p, &rb.w, w, src, ns);
		return 0;
	}
	if (w->total_len > cap)
		return srn_send_reject(p, &rb.w, w, IBV_WC_LOC_LEN_ERR, status);
	if (!pvm) {
		srn_iov_copy(dst, rb.w.num_sge, src, ns);
	} else if (srn_resp_bounce_ok(p, &rb.w, w, pvm, w->total_len)) {
		/* its receive CQE is posted there */
		if (srn_resp_bounce(p, &rb.w, w, dst, pvm, src, ns,
				    (uint32_t)w->total_len,
				    0) != IBV_WC_SUCCESS) {
			srn_resp_error(p);
			*status = IBV_WC_REM_OP_ERR;
		}
		return 0;
	} else if (srn_pvm_scatter(p, dst, rb.w.num_sge, pvm, src, ns))
		return srn_send_reject(p, &rb.w, w, IBV_WC_LOC_PROT_ERR,
				       status);
	srn_resp_complete(p, &rb.w, w, IBV_WC_RECV, (uint32_t)w->total_len,
			  IBV_WC_SUCCESS);
	return 0;
}

static int srn_shm_read(struct srn_qp *qp, struct srn_peer *p,
			const struct srn_swqe *w, enum ibv_wc_status *status,
			enum srn_stall *stall)
{
	struct iovec dst[SRN_MAX_SGE], src;
	unsigned nd;
	uint8_t *ptr = NULL;
	bool pvm = false;
	int err;

	if (srn_local_iov(qp, w, IBV_ACCESS_LOCAL_WRITE, dst, &nd)) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	if (!srn_target_allows(p, IBV_ACCESS_REMOTE_READ))
		return srn_invalid_request(p, status);
	if (w->total_len) {
		err = srn_resp_mr_any(p, w->rkey, w->remote_addr, w->total_len,
				      IBV_ACCESS_REMOTE_READ, &ptr, &pvm);
		if (err)
			return srn_remote_fail(p, err, status, stall);
	}
	src.iov_base = ptr;
	src.iov_len = w->total_len;
	if (pvm) {
		err = srn_pvm_copy(p, dst, nd, &src, false);
		if (err)
			return srn_remote_fail(p, err, status, stall);
	} else {
		srn_iov_copy(dst, nd, &src, 1);
	}
	*status = IBV_WC_SUCCESS;
	return 0;
}

static int srn_shm_atomic(struct srn_qp *qp, struct srn_peer *p,
			  const struct srn_swqe *w, enum ibv_wc_status *status,
			  enum srn_stall *stall)
{
	struct iovec dst[SRN_MAX_SGE];
	uint64_t *target, old;
	uint8_t *ptr;
	unsigned nd;
	int err;

	if (srn_local_iov(qp, w, IBV_ACCESS_LOCAL_WRITE, dst, &nd) || nd != 1 ||
	    dst[0].iov_len != 8) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	if (!srn_target_allows(p, IBV_ACCESS_REMOTE_ATOMIC) ||
	    (w->remote_addr & 7))
		return srn_invalid_request(p, status);
	err = srn_resp_mr(p, w->rkey, w->remote_addr, 8,
			  IBV_ACCESS_REMOTE_ATOMIC, &ptr);
	if (err)
		return srn_remote_fail(p, err, status, stall);
	target = (uint64_t *)ptr;
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		old = w->compare_add;
		/* seq_cst (success and failure): pairs with the same
		 * operations of other initiators on this word (srn_shm_atomic
		 * in other processes, another transport's responder); the
		 * RMW makes them atomic, the order is more than IB promises */
		__atomic_compare_exchange_n(target, &old, w->swap, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	} else {
		/* seq_cst: as above; pairs with the same operations of other
		 * initiators (srn_shm_atomic in other processes) */
		old = __atomic_fetch_add(target, w->compare_add,
					 __ATOMIC_SEQ_CST);
	}
	memcpy(dst[0].iov_base, &old, 8);
	*status = IBV_WC_SUCCESS;
	return 0;
}

/* The target has not let us in yet: ask again (srn_shm_ctl_retry). Until
 * it does, a device's requests would go unanswered: the stall counts
 * retry_cnt x timeout, then RETRY_EXC_ERR, from whichever thread retries. */
static int srn_shm_pending(struct srn_peer *p, enum ibv_wc_status *status,
			   enum srn_stall *stall)
{
	int err = srn_shm_ctl_retry(p);

	if (err == -EAGAIN) {
		*stall = SRN_STALL_NOT_READY;
		return -EAGAIN;
	}
	if (err) {
		*status = IBV_WC_RETRY_EXC_ERR;
		return 0;
	}
	return 1; /* up: go on */
}

/* UC has no acknowledgements: a message the target cannot take (a bad
 * key, no receive WQE, too long) is dropped there, and the sender
 * completes as if it had arrived; its QP and the target's go on. */
static int srn_shm_uc(struct srn_qp *qp, int rc, enum ibv_wc_status *status,
		      enum srn_stall *stall)
{
	if (qp->ibqpx.qp_base.qp_type != IBV_QPT_UC)
		return rc;
	if (rc == -EAGAIN && *stall == SRN_STALL_RNR) {
		*status = IBV_WC_SUCCESS;
		return 0;
	}
	if (!rc &&
	    (*status == IBV_WC_REM_ACCESS_ERR ||
	     *status == IBV_WC_REM_INV_REQ_ERR || *status == IBV_WC_REM_OP_ERR))
		*status = IBV_WC_SUCCESS;
	return rc;
}

static int srn_shm_execute(struct srn_qp *qp, const struct srn_swqe *w,
			   enum ibv_wc_status *status, enum srn_stall *stall)
{
	struct srn_peer *p = qp->tpriv;
	uint32_t tst;

	/* acquire: pairs with the release in srn_shm_on_hup */
	switch (atomic_load_explicit(&p->gone, memory_order_acquire)) {
	case SRN_PEER_CLOSED: /* the peer QP was destroyed: nobody answers;
			       * a device retries, then RETRY_EXC_ERR */
		*stall = SRN_STALL_NOT_READY;
		return -EAGAIN;
	case SRN_PEER_DEAD: /* the peer crashed: ERR and QP_FATAL now, as
			     * srn_shm_on_hup is about to ask, so that every
			     * WR is flushed whichever comes first */
		srn_qp_fatal(qp);
		*status = IBV_WC_WR_FLUSH_ERR;
		return 0;
	}
	/* relaxed: written under sq_lock, which we hold (srn_shm_up) */
	if (srn_unlikely(!atomic_load_explicit(&p->up, memory_order_relaxed))) {
		int rc = srn_shm_pending(p, status, stall);

		if (rc <= 0)
			return rc;
	}
	/* acquire: pairs with the release in srn_qp_set_state */
	tst = __atomic_load_n(&p->tqp->state, __ATOMIC_ACQUIRE);
	if (srn_unlikely(tst != IBV_QPS_RTR && tst != IBV_QPS_RTS &&
			 tst != IBV_QPS_SQD)) {
		*stall = SRN_STALL_NOT_READY; /* a device would drop it */
		return -EAGAIN;
	}
	if (qp->ibqpx.qp_base.qp_type == IBV_QPT_XRC_SEND) {
		int rc = srn_shm_xrc_select(p, w, status, stall);

		if (rc <= 0)
			return rc;
	}
	switch (w->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return srn_shm_uc(qp, srn_shm_write(qp, p, w, status, stall),
				  status, stall);
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		return srn_shm_uc(qp, srn_shm_send(qp, p, w, status, stall),
				  status, stall);
	case IBV_WR_RDMA_READ:
		return srn_shm_read(qp, p, w, status, stall);
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return srn_shm_atomic(qp, p, w, status, stall);
	default:
		*status = IBV_WC_LOC_QP_OP_ERR;
		return 0;
	}
}

/* ---- connection ---- */

static int srn_shm_connect(struct srn_qp *qp, const struct ibv_qp_attr *attr)
{
	struct srn_peer *p;
	int err;

	if (qp->ibqpx.qp_base.qp_type == IBV_QPT_XRC_RECV)
		return 0; /* a TGT sends nothing: its INI connects to it */
	p = srn_shm_peer_new(qp, attr->dest_qp_num, false, &err);
	if (!p)
		return err;
	qp->tpriv = p;
	return 0;
}

static void srn_shm_disconnect(struct srn_qp *qp)
{
	struct srn_peer *p = qp->tpriv;

	if (!p)
		return;
	srn_ctl_undial(qp);
	srn_shm_peer_del(p);
	qp->tpriv = NULL;
}

static const char *srn_shm_describe(struct srn_qp *qp)
{
	struct srn_peer *p = qp->tpriv;

	if (!p)
		return "shm (not connected)";
	/* acquire: pairs with the release in srn_shm_up (desc is written) */
	return atomic_load_explicit(&p->up, memory_order_acquire) ?
		       p->desc :
		       p->desc_wait;
}

/* Same host only: the peer's GID is one of this host's. */
static bool srn_shm_reaches(const union ibv_gid *dgid)
{
	return srn_gid_is_local(dgid);
}

static const struct srn_transport_ops srn_shm_transport_ops = {
	.name = "shm",
	.rank = 0, /* preferred wherever it reaches */
	.reaches = srn_shm_reaches,
	.connect = srn_shm_connect,
	.connect_checks_owner = true, /* srn_shm_ctl_connect's dial */
	.disconnect = srn_shm_disconnect,
	.execute = srn_shm_execute,
	.describe = srn_shm_describe,
	.direct_map = srn_shm_direct_map,
	.ud_send = srn_shm_ud_send,
	.ud_close = srn_shm_ud_close,
};
SRN_TRANSPORT_REGISTER(srn_shm_transport_ops)
