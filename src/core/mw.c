// SPDX-License-Identifier: MIT
/*
 * softrnic — memory windows (type 1 and type 2B).
 *
 * A window owns a TPT index like an MR (its srn_mr slot, is_mw set); its
 * entry is published only while it is bound: the window's PD, access and
 * range, the key of the MR it is bound to and, for type 2, the QP it is
 * bound to. The checks at the target (srn_rkey_check) read them with the
 * MR's entry, so a window of a deregistered MR reaches nothing.
 *
 * Binds and local invalidations are send queue operations, executed by the
 * requester in order (srn_mw_bind_exec, srn_mw_local_inv_exec); a remote
 * invalidation (SEND_WITH_INV) is applied by srn_mw_remote_inv.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/core.h"

#define SRN_MW_ACCESS                                        \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |  \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE | \
	 IBV_ACCESS_ZERO_BASED)

static struct srn_mw *to_smw(struct ibv_mw *mw)
{
	return container_of(mw, struct srn_mw, ibmw);
}

int srn_mw_alloc(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw **mw_p)
{
	struct srn_context *ctx = to_sctx(pd->context);
	struct srn_mw *mw;
	int err;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return -EINVAL;
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return -ENOMEM;
	mw->slot.is_mw = true;
	mw->slot.pd = to_spd(pd);
	err = srn_tpt_slot_add(ctx, &mw->slot);
	if (err) {
		free(mw);
		return err;
	}
	mw->ibmw.context = pd->context;
	mw->ibmw.pd = pd;
	mw->ibmw.type = type;
	mw->ibmw.handle = mw->slot.index;
	mw->ibmw.rkey = SRN_KEY_MW_BIT |
			srn_key_tag(31 - 8 - SRN_MW_INDEX_BITS)
				<< (8 + SRN_MW_INDEX_BITS) |
			mw->slot.index << 8 | (srn_key_tag(8) & 0xff);
	/* relaxed: a reference taken while the caller holds the PD */
	atomic_fetch_add_explicit(&mw->slot.pd->refs, 1, memory_order_relaxed);
	*mw_p = &mw->ibmw;
	return 0;
}

/* Under ctx->lock: the window's MR is mr (NULL: unbound). */
static void srn_mw_set_mr(struct srn_mw *mw, struct srn_mr *mr)
{
	if (mw->bound_mr)
		mw->bound_mr->nbound--;
	mw->bound_mr = mr;
	if (mr)
		mr->nbound++;
}

int srn_mw_dealloc(struct ibv_mw *ibmw)
{
	struct srn_mw *mw = to_smw(ibmw);
	struct srn_context *ctx = to_sctx(ibmw->context);

	pthread_mutex_lock(&ctx->lock);
	srn_mw_set_mr(mw, NULL);
	pthread_mutex_unlock(&ctx->lock);
	srn_tpt_slot_del(ctx, &mw->slot);
	/* release: pairs with the acquire in ibv_dealloc_pd */
	atomic_fetch_sub_explicit(&mw->slot.pd->refs, 1, memory_order_release);
	free(mw);
	return 0;
}

/* The checks of a bind against the MR (IB spec 10.6.7.2, as rxe's
 * rxe_check_bind_mw): 0, or the reason it fails. */
static int srn_mw_bind_check(struct srn_qp *qp, struct srn_mw *mw,
			     const struct srn_swqe *w, struct srn_key_ref *mr)
{
	const struct srn_tpt_shm *tpt = srn_ctx_tpt(qp->ctx);
	struct ibv_mr *ibmr = w->bind_mr;

	if (mw->slot.pd != qp->pd ||
	    mw->ibmw.context != qp->ibqpx.qp_base.context)
		return -EPERM; /* the QP's PD must be the window's */
	if (w->bind_access & ~SRN_MW_ACCESS)
		return -EINVAL;
	if (mw->ibmw.type == IBV_MW_TYPE_2) {
		if (mw->key) /* a valid type 2 window is not bound again */
			return -EBUSY;
		if ((w->rkey ^ mw->ibmw.rkey) & ~0xffu)
			return -EINVAL; /* only the key byte may change */
		if (!w->total_len)
			return -EINVAL;
	} else if (w->bind_access & IBV_ACCESS_ZERO_BASED) {
		return -EINVAL; /* type 1 windows are not zero based */
	}
	if (!w->total_len)
		return 0; /* type 1 unbind */
	if (!ibmr || ibmr->context != mw->ibmw.context ||
	    srn_key_check(tpt, ibmr->lkey, mw->slot.pd->handle, 0,
			  w->remote_addr, w->total_len, mr) != SRN_KEY_OK)
		return -EINVAL; /* no such MR, another PD, out of its range */
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return -EACCES;
	if ((w->bind_access &
	     (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -EACCES; /* more than the MR allows */
	return 0;
}

/* Executes a BIND_MW WQE: remote_addr, total_len and rkey are the
 * window's address, length and new key, bind_access its access. */
enum ibv_wc_status srn_mw_bind_exec(struct srn_qp *qp, const struct srn_swqe *w)
{
	struct srn_context *ctx = qp->ctx;
	struct srn_mw *mw = w->bind_mw ? to_smw(w->bind_mw) : NULL;
	struct srn_tpt_entry e = { 0 };
	struct srn_key_ref mr = { 0 }; /* an unbind leaves it unset */
	int err;

	if (!mw || mw->ibmw.context != &ctx->vctx.context)
		return IBV_WC_MW_BIND_ERR;
	pthread_mutex_lock(&ctx->lock);
	err = srn_mw_bind_check(qp, mw, w, &mr);
	if (err) {
		pthread_mutex_unlock(&ctx->lock);
		srn_dbg("QP 0x%06x: bind of window 0x%x failed (%d)",
			qp->ibqpx.qp_base.qp_num, mw->ibmw.rkey, err);
		return IBV_WC_MW_BIND_ERR;
	}
	if (w->total_len) {
		e.key = w->rkey;
		e.pd_handle = mw->slot.pd->handle;
		e.access = w->bind_access & ~IBV_ACCESS_ZERO_BASED;
		e.flags = SRN_TPT_MW;
		if (mw->ibmw.type == IBV_MW_TYPE_2) {
			e.flags |= SRN_TPT_MW_TYPE2;
			e.qpn = qp->ibqpx.qp_base.qp_num;
		}
		e.iova = (w->bind_access & IBV_ACCESS_ZERO_BASED) ?
				 0 :
				 w->remote_addr;
		e.length = w->total_len;
		e.va = mr.va + (w->remote_addr - mr.iova);
		e.mr_key = mr.key;
	}
	srn_tpt_set_entry(ctx, mw->slot.index, &e);
	srn_mw_set_mr(mw,
		      e.key ? ctx->mr_by_index[srn_key_index(mr.key)] : NULL);
	mw->key = e.key;
	mw->ibmw.rkey = w->rkey;
	pthread_mutex_unlock(&ctx->lock);
	return IBV_WC_SUCCESS;
}

/* Under ctx->lock: invalidates the type 2 window of key (bound to QP qpn
 * unless qpn is 0). -EINVAL when key names no such window. */
static int srn_mw_invalidate(struct srn_context *ctx, uint32_t key,
			     uint32_t qpn)
{
	struct srn_mr *slot = ctx->mr_by_index[srn_key_index(key)];
	struct srn_tpt_entry e = { 0 };
	struct srn_mw *mw;

	if (!(key & SRN_KEY_MW_BIT) || !slot || !slot->is_mw)
		return -EINVAL; /* MRs are not invalidated */
	mw = container_of(slot, struct srn_mw, slot);
	if (mw->ibmw.type != IBV_MW_TYPE_2 || !mw->key || mw->key != key)
		return -EINVAL;
	if (qpn && srn_ctx_tpt(ctx)->entry[slot->index].qpn != qpn)
		return -EPERM;
	srn_tpt_set_entry(ctx, slot->index, &e);
	srn_mw_set_mr(mw, NULL);
	mw->key = 0;
	return 0;
}

/* Executes a LOCAL_INV WQE (the key in imm_data). */
enum ibv_wc_status srn_mw_local_inv_exec(struct srn_qp *qp,
					 const struct srn_swqe *w)
{
	struct srn_context *ctx = qp->ctx;
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = srn_mw_invalidate(ctx, w->imm_data, 0);
	pthread_mutex_unlock(&ctx->lock);
	return err ? IBV_WC_LOC_QP_OP_ERR : IBV_WC_SUCCESS;
}

/* A SEND_WITH_INV for QP qpn arrived: invalidates the window of key, which
 * must be a type 2 window bound to that QP. -errno otherwise. */
int srn_mw_remote_inv(struct srn_context *ctx, uint32_t key, uint32_t qpn)
{
	int err;

	pthread_mutex_lock(&ctx->lock);
	err = srn_mw_invalidate(ctx, key, qpn);
	pthread_mutex_unlock(&ctx->lock);
	return err;
}
