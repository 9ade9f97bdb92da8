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

/*
 * Copies between local iovecs and one range of the target process that
 * could not be mapped (write: local -> remote). Needs ptrace permission
 * over the target (same user, no stricter Yama policy); -EACCES without.
 */
static int srn_pvm_copy(struct srn_peer *p, const struct iovec *local,
			unsigned n, const struct iovec *remote, bool write)
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
static int srn_pvm_scatter(struct srn_peer *p, const struct iovec *dst,
			   unsigned nd, uint32_t pvm_mask,
			   const struct iovec *src, unsigned ns)
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

static int srn_shm_send(struct srn_qp *qp, struct srn_peer *p,
			const struct srn_swqe *w, enum ibv_wc_status *status,
			enum srn_stall *stall)
{
	struct iovec src[SRN_MAX_SGE], dst[SRN_MAX_SGE];
	struct srn_rwqe_buf rb;
	uint32_t pvm = 0;
	unsigned ns;
	uint64_t pos, cap;
	int err, rerr;

	if (srn_local_iov(qp, w, 0, src, &ns)) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	if (w->opcode == IBV_WR_SEND_WITH_INV && srn_resp_inv_check(p, w))
		return srn_invalid_request(p, status);
	do {
		err = srn_resp_peek_recv(p, &rb.w, &pos);
		if (err == -EAGAIN) {
			*stall = SRN_STALL_RNR;
			return -EAGAIN;
		}
		rerr = err ? err :
			     srn_resp_recv_sges(p, &rb.w, dst, &cap, &pvm);
		if (rerr == -EAGAIN)
			return srn_remote_fail(p, rerr, status, stall);
	} while (!srn_resp_commit_recv(p, pos));
	if (rerr == -EACCES || rerr == -EPROTO)
		return srn_send_reject(p, &rb.w, w, IBV_WC_LOC_PROT_ERR,
				       status);
	if (rerr)
		return srn_remote_fail(p, rerr, status, stall);
	if (w->total_len > cap)
		return srn_send_reject(p, &rb.w, w, IBV_WC_LOC_LEN_ERR, status);
	if (!pvm)
		srn_iov_copy(dst, rb.w.num_sge, src, ns);
	else if (srn_pvm_scatter(p, dst, rb.w.num_sge, pvm, src, ns))
		return srn_send_reject(p, &rb.w, w, IBV_WC_LOC_PROT_ERR,
				       status);
	srn_resp_complete(p, &rb.w, w, IBV_WC_RECV, (uint32_t)w->total_len,
			  IBV_WC_SUCCESS);
	*status = IBV_WC_SUCCESS;
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
	case SRN_PEER_DEAD:
		*status = IBV_WC_RETRY_EXC_ERR;
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

static void srn_peer_free(struct srn_peer *p)
{
	srn_peer_unmap_all(p);
	srn_shm_xrc_free(p);
	srn_seg_unmap(&p->qp_seg);
	srn_seg_unmap(&p->cq_seg);
	srn_seg_unmap(&p->tpt_seg);
	srn_seg_unmap(&p->srq_seg);
	if (p->chan_fd >= 0)
		close(p->chan_fd);
	if (p->kick_fd >= 0)
		close(p->kick_fd);
	if (p->conn.fd >= 0)
		close(p->conn.fd);
	free(p);
}

/* Progress thread: the target's end of the connection hung up. Before the
 * handshake, that is no death of a peer: a device would only time out. */
static void srn_shm_on_hup(struct srn_pollable *pl, uint32_t events)
{
	struct srn_peer *p = pl->priv;
	struct srn_ctl_hdr h;
	/* acquire: pairs with the release in srn_shm_up */
	unsigned how = atomic_load_explicit(&p->up, memory_order_acquire) ?
			       SRN_PEER_DEAD :
			       SRN_PEER_CLOSED;

	while (recv(pl->fd, &h, sizeof(h), MSG_DONTWAIT) >= (ssize_t)sizeof(h))
		if (h.magic == SRN_CTL_MAGIC && h.type == SRN_CTL_BYE)
			how = SRN_PEER_CLOSED;
	srn_progress_del(pl);
	/* release: pairs with the acquire in srn_shm_execute */
	atomic_store_explicit(&p->gone, how, memory_order_release);
	if (how == SRN_PEER_DEAD) {
		srn_warn("QP 0x%06x: peer process %d (QP 0x%06x) died",
			 p->qp->ibqpx.qp_base.qp_num, (int)p->pid, p->qpn);
		srn_qp_async_fatal(p->qp);
	} else {
		srn_progress_request_retry(); /* what waits times out */
	}
}

/* Progress thread: the control connection to the target has news. Data
 * (edge-triggered EPOLLIN) is an answer to CONNECT_REQ or MR_REQ that the
 * retry of stalled send queues may be waiting for (srn_shm_ctl_retry,
 * srn_shm_mr_fetch): let it run. */
static void srn_shm_on_conn(struct srn_pollable *pl, uint32_t events)
{
	if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		srn_shm_on_hup(pl, events);
	else
		srn_progress_request_retry();
}

static int srn_shm_connect(struct srn_qp *qp, const struct ibv_qp_attr *attr)
{
	struct srn_peer *p;
	int err;

	if (qp->ibqpx.qp_base.qp_type == IBV_QPT_XRC_RECV)
		return 0; /* a TGT sends nothing: its INI connects to it */
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->qp = qp;
	p->qp_seg.fd = p->cq_seg.fd = p->tpt_seg.fd = p->srq_seg.fd = -1;
	p->chan_fd = p->kick_fd = p->conn.fd = -1;
	err = srn_shm_ctl_connect(p, attr->dest_qp_num);
	if (err) {
		srn_peer_free(p);
		return err;
	}
	p->conn.fn = srn_shm_on_conn;
	p->conn.priv = p;
	/* the target's answers wake the progress thread (srn_shm_on_conn) */
	err = srn_progress_add(&p->conn, EPOLLRDHUP | EPOLLIN | EPOLLET);
	if (err) {
		srn_peer_free(p);
		return err;
	}
	qp->tpriv = p;
	return 0;
}

static void srn_shm_disconnect(struct srn_qp *qp)
{
	struct srn_peer *p = qp->tpriv;

	if (!p)
		return;
	srn_progress_del(&p->conn);
	srn_ctl_bye(p->conn.fd);
	srn_peer_free(p);
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
	.disconnect = srn_shm_disconnect,
	.execute = srn_shm_execute,
	.describe = srn_shm_describe,
	.direct_map = srn_shm_direct_map,
};
SRN_TRANSPORT_REGISTER(srn_shm_transport_ops)
