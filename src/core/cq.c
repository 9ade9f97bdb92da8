// SPDX-License-Identifier: MIT
/*
 * softrnic — completion queues.
 *
 * A CQ is a ring of 64-byte CQEs in a memfd segment. Any process that
 * completes work into it (the owner for its sends, peers for the
 * receives they place) is a producer: it reserves a slot with a CAS on
 * prod, fills the CQE and publishes it by storing owner_seq = position+1
 * with release. The owner's poll_cq is the single consumer: it takes a
 * CQE when its owner_seq matches, and publishes cons so producers see the
 * free space. No lock is shared between producers; no system call is
 * made unless the CQ is armed and has a completion channel.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

static uint32_t srn_roundup_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

int srn_cq_view_init(struct srn_cq_view *v, void *seg_addr, size_t seg_size,
		     int chan_fd, int kick_fd)
{
	struct srn_cq_shm *shm = seg_addr;
	/* relaxed: the owner wrote the geometry before it passed the
	 * segment (the socket orders that); a peer may change it since, so
	 * it is read once and checked here */
	uint32_t size = __atomic_load_n(&shm->size, __ATOMIC_RELAXED);
	uint32_t off = __atomic_load_n(&shm->cqe_off, __ATOMIC_RELAXED);

	if (!size || (size & (size - 1)) || size > SRN_MAX_CQE + 1 ||
	    off < sizeof(*shm) || off % 64 ||
	    (uint64_t)off + (uint64_t)size * sizeof(struct srn_cqe) > seg_size)
		return -EPROTO;
	v->shm = shm;
	v->ring = (struct srn_cqe *)((char *)seg_addr + off);
	v->mask = size - 1;
	v->chan_fd = chan_fd;
	v->kick_fd = kick_fd;
	v->cons_seen = 0;
	return 0;
}

static void srn_cq_notify(const struct srn_cq_view *v, const struct srn_cqe *c)
{
	struct srn_cq_shm *shm = v->shm;
	/* acquire: pairs with the release in srn_cq_arm */
	uint32_t arm = __atomic_load_n(&shm->arm, __ATOMIC_ACQUIRE);

	if (arm == SRN_CQ_ARM_NONE)
		return;
	if (arm == SRN_CQ_ARM_SOLICITED && c->status == IBV_WC_SUCCESS &&
	    !(c->flags & SRN_CQE_SOLICITED))
		return;
	/* acq_rel: one producer wins the arm; pairs with the release in
	 * srn_cq_arm and with this CAS in other producers' srn_cq_notify.
	 * relaxed on failure: another producer fired the event */
	if (!__atomic_compare_exchange_n(&shm->arm, &arm, SRN_CQ_ARM_NONE,
					 false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	/* release: pairs with the acquire in srn_channel_take (called by
	 * ibv_get_cq_event) */
	__atomic_fetch_add(&shm->events, 1, __ATOMIC_RELEASE);
	if (v->chan_fd >= 0)
		srn_channel_signal(v->chan_fd);
}

/* Posts one CQE; -ENOSPC (and the overflow flag) when the ring is full. */
/* Reserves a slot for a producer: 0 with its position in *p_p, or
 * -ENOSPC (overflow flagged, the owner kicked). */
static int srn_cq_reserve(struct srn_cq_view *v, uint64_t *p_p)
{
	struct srn_cq_shm *shm = v->shm;
	/* relaxed: only the CAS's first guess; the CAS below re-reads prod */
	uint64_t p = __atomic_load_n(&shm->prod, __ATOMIC_RELAXED);

	for (;;) {
		/* relaxed: a hint shared by this process's producers, a lower
		 * bound of cons; the acquire of cons below is what orders */
		uint64_t c = __atomic_load_n(&v->cons_seen, __ATOMIC_RELAXED);

		if (srn_unlikely((int64_t)(p - c) < 0)) {
			/* another producer saw cons past our stale guess of
			 * prod: guess again (p - c would wrap and look full).
			 * relaxed: only the CAS's guess, as above */
			p = __atomic_load_n(&shm->prod, __ATOMIC_RELAXED);
			continue;
		}
		if (p - c > v->mask) {
			/* the known space is used up: read cons, a line the
			 * owner writes. acquire: pairs with the release of
			 * cons in srn_cq_drain (and srn_cq_repair), so its
			 * reads of the slots are over. relaxed: cons_seen is
			 * only a hint (see above) */
			c = __atomic_load_n(&shm->cons, __ATOMIC_ACQUIRE);
			__atomic_store_n(&v->cons_seen, c, __ATOMIC_RELAXED);
		}
		if (p - c > v->mask) {
			/* release: pairs with the acquire in
			 * srn_cq_check_overflow (the flag publishes nothing
			 * else) */
			__atomic_store_n(&shm->overflow, 1, __ATOMIC_RELEASE);
			if (v->kick_fd >= 0)
				srn_kick_fd(v->kick_fd);
			return -ENOSPC;
		}
		/* acq_rel: pairs with this CAS in other producers' srn_cq_post
		 * and with the acquire of prod in srn_cq_repair; relaxed on
		 * failure: p is the new guess, the space is checked again */
		if (__atomic_compare_exchange_n(&shm->prod, &p, p + 1, true,
						__ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			break;
	}
	*p_p = p;
	return 0;
}

int srn_cq_post(struct srn_cq_view *v, const struct srn_cqe *cqe)
{
	struct srn_cqe *slot;
	uint64_t p;
	int err = srn_cq_reserve(v, &p);

	if (err)
		return err;
	slot = &v->ring[p & v->mask];
	memcpy(slot, cqe, offsetof(struct srn_cqe, owner_seq));
	/* relaxed: set by the owner before the segment was shared (the
	 * socket that passed it orders that) */
	if (__atomic_load_n(&v->shm->flags, __ATOMIC_RELAXED) &
	    SRN_CQF_TIMESTAMP)
		slot->ts = srn_now_ns();
	/* release: pairs with the acquire of owner_seq in srn_cq_drain (and
	 * srn_cq_repair): the CQE is written before its tag */
	__atomic_store_n(&slot->owner_seq, (uint32_t)(p + 1), __ATOMIC_RELEASE);
	if (v->chan_fd >= 0) {
		/* seq_cst: pairs with the fence in srn_cq_arm. Each side
		 * stores (the tag here, arm there) then loads what the other
		 * stored (arm in srn_cq_notify, the tag in the owner's next
		 * poll): without a fence on both, both loads can miss and the
		 * event is lost. Only CQs with a channel get events, so only
		 * they pay for it. */
		srn_smp_mb();
	}
	srn_cq_notify(v, cqe);
	return 0;
}

void srn_cq_check_overflow(struct srn_cq *cq)
{
	struct ibv_async_event ev;

	/* acquire: pairs with the release in srn_cq_post. acq_rel: the
	 * exchange pairs with itself in srn_cq_check_overflow on another
	 * thread, so that one thread reports (relaxed would do: nothing
	 * else is published with the flag) */
	if (!__atomic_load_n(&cq->shm->overflow, __ATOMIC_ACQUIRE) ||
	    __atomic_exchange_n(&cq->overflow_reported, 1, __ATOMIC_ACQ_REL))
		return;
	srn_err("CQ %u overflowed: completions were lost", cq->handle);
	ev.element.cq = (struct ibv_cq *)&cq->ibcq;
	ev.event_type = IBV_EVENT_CQ_ERR;
	srn_async_event_post(cq->ctx, &ev);
}

#define SRN_CQ_REPAIR_NS 50000000ull /* 50 ms */

/* A peer process writing into this CQ died (progress thread). */
void srn_cq_peer_died(struct srn_cq *cq)
{
	uint64_t zero = 0;

	/* relaxed (success and failure): a deadline, the first death sets
	 * it; nothing is published with it, srn_cq_repair works under
	 * cq->lock */
	__atomic_compare_exchange_n(&cq->repair_after_ns, &zero,
				    srn_now_ns() + SRN_CQ_REPAIR_NS, false,
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/*
 * After a peer died: a slot reserved (prod moved past it) but still empty
 * long after the death was abandoned by the dead producer. Skip it, or
 * every completion behind it, the flushes included, would stay invisible.
 */
bool srn_cq_repair(struct srn_cq *cq)
{
	/* relaxed: the deadline set by srn_cq_peer_died, a plain value */
	uint64_t after =
		__atomic_load_n(&cq->repair_after_ns, __ATOMIC_RELAXED);
	bool skipped = false;

	if (!after || srn_now_ns() < after)
		return false;
	srn_lock(&cq->lock);
	/* acquire: pairs with the CAS of prod in srn_cq_post, then with the
	 * release of owner_seq in srn_cq_post */
	if (__atomic_load_n(&cq->shm->prod, __ATOMIC_ACQUIRE) > cq->cons &&
	    __atomic_load_n(&cq->ring[cq->cons & cq->mask].owner_seq,
			    __ATOMIC_ACQUIRE) != (uint32_t)(cq->cons + 1)) {
		srn_warn("CQ %u: skipping a completion slot abandoned by a "
			 "dead peer",
			 cq->handle);
		cq->cons++;
		/* release: pairs with the acquire of cons in srn_cq_post */
		__atomic_store_n(&cq->shm->cons, cq->cons, __ATOMIC_RELEASE);
		skipped = true;
	}
	srn_unlock(&cq->lock);
	return skipped;
}

static int srn_cq_init(struct srn_cq *cq, uint32_t size)
{
	size_t bytes = sizeof(struct srn_cq_shm) +
		       (size_t)size * sizeof(struct srn_cqe);
	int err = srn_seg_create(&cq->seg, SRN_SEG_CQ, bytes, cq->handle);

	if (err)
		return err;
	cq->shm = cq->seg.addr;
	cq->shm->size = size;
	cq->shm->cqe_off = sizeof(struct srn_cq_shm);
	cq->ring = (struct srn_cqe *)((char *)cq->seg.addr +
				      sizeof(struct srn_cq_shm));
	cq->mask = size - 1;
	srn_lock_init(&cq->lock);
	return srn_cq_view_init(&cq->local, cq->seg.addr, cq->seg.size, -1, -1);
}

/* A new CQ of at least cqe entries, in ctx's list. 0 or -errno. */
int srn_cq_create(struct ibv_context *context, int cqe, void *cq_context,
		  struct ibv_comp_channel *channel, int comp_vector,
		  struct srn_cq **cq_p)
{
	struct srn_context *ctx = to_sctx(context);
	struct srn_cq *cq;
	int err = -EINVAL;

	if (cqe < 1 || cqe > SRN_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors)
		goto fail;
	err = -ENOMEM;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		goto fail;
	cq->ctx = ctx;
	cq->seg.fd = -1;
	pthread_mutex_lock(&ctx->lock);
	if (ctx->ncq >= SRN_MAX_CQ) {
		pthread_mutex_unlock(&ctx->lock);
		free(cq);
		goto fail;
	}
	ctx->ncq++;
	cq->handle = srn_ctx_new_handle(ctx);
	pthread_mutex_unlock(&ctx->lock);
	err = srn_cq_init(cq, srn_roundup_pow2((uint32_t)cqe));
	if (err) {
		pthread_mutex_lock(&ctx->lock);
		ctx->ncq--;
		pthread_mutex_unlock(&ctx->lock);
		free(cq);
		goto fail;
	}
	cq->ibcq.context = context;
	cq->ibcq.channel = channel;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.cqe = (int)cq->mask + 1;
	cq->ibcq.handle = cq->handle;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	srn_list_init(&cq->chan_link);
	if (channel) {
		cq->chan = container_of(channel, struct srn_comp_channel, ibch);
		cq->local.chan_fd = channel->fd;
		pthread_mutex_lock(&cq->chan->lock);
		srn_list_add_tail(&cq->chan_link, &cq->chan->cqs);
		channel->refcnt++;
		pthread_mutex_unlock(&cq->chan->lock);
	}
	pthread_mutex_lock(&ctx->lock);
	srn_list_add_tail(&cq->ctx_link, &ctx->cqs);
	pthread_mutex_unlock(&ctx->lock);
	*cq_p = cq;
	return 0;
fail:
	return err;
}

/* Unlinks an unused CQ from its context: nobody finds it any more.
 * -EBUSY while QPs or SRQs use it. */
int srn_cq_del(struct srn_cq *cq)
{
	struct srn_context *ctx = cq->ctx;

	/* acquire: pairs with the release of refs in srn_qp_get_refs (a
	 * QP's put) and srn_srq_destroy (an XRC SRQ's) */
	if (atomic_load_explicit(&cq->refs, memory_order_acquire))
		return -EBUSY;
	pthread_mutex_lock(&ctx->lock);
	srn_list_del(&cq->ctx_link);
	ctx->ncq--;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

/* The inverse of srn_cq_create, after srn_cq_del. */
void srn_cq_destroy(struct srn_cq *cq)
{
	if (cq->chan) {
		pthread_mutex_lock(&cq->chan->lock);
		srn_list_del(&cq->chan_link);
		cq->chan->ibch.refcnt--;
		pthread_mutex_unlock(&cq->chan->lock);
	}
	srn_seg_unmap(&cq->seg);
	free(cq);
}

SRN_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	/* Peers hold the ring mapped; resizing it in place is not offered. */
	return EOPNOTSUPP;
}

/*
 * A QP went to RESET: its completions still in the ring are removed, as a
 * device's driver does (the application that resets a QP to reuse it must
 * not see its old flushed work). The published entries [cons, end) are
 * compacted toward end, keeping their order; producers only write at end
 * and beyond, so they are not disturbed.
 */
void srn_cq_clean(struct srn_cq *cq, uint32_t qpn)
{
	uint64_t end, dst;

	srn_lock(&cq->lock);
	end = cq->cons;
	/* acquire: pairs with the release in srn_cq_post */
	while (end - cq->cons <= cq->mask &&
	       __atomic_load_n(&cq->ring[end & cq->mask].owner_seq,
			       __ATOMIC_ACQUIRE) == (uint32_t)(end + 1))
		end++;
	dst = end;
	for (uint64_t i = end; i-- > cq->cons;) {
		struct srn_cqe *c = &cq->ring[i & cq->mask];

		if (c->qp_num == qpn)
			continue;
		dst--;
		if (dst != i)
			memcpy(&cq->ring[dst & cq->mask], c,
			       offsetof(struct srn_cqe, owner_seq));
	}
	cq->cons = dst;
	/* release: pairs with the acquire in srn_cq_post (the slots up to
	 * cons are free again) */
	__atomic_store_n(&cq->shm->cons, cq->cons, __ATOMIC_RELEASE);
	srn_unlock(&cq->lock);
}

/* ibv_req_notify_cq: the next completion (or the next solicited one)
 * signals the CQ's channel. */
void srn_cq_arm(struct srn_cq *cq, bool solicited_only)
{
	/* release: pairs with the acquire in srn_cq_notify */
	__atomic_store_n(&cq->shm->arm,
			 solicited_only ? SRN_CQ_ARM_SOLICITED :
					  SRN_CQ_ARM_NEXT,
			 __ATOMIC_RELEASE);
	/* seq_cst: pairs with the fence in srn_cq_post: the application's
	 * poll after arming sees a CQE published before the producer could
	 * see the arm (tests/unit/test_races.c) */
	srn_smp_mb();
}
