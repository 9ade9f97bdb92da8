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
 *
 * ibv_resize_cq re-lays the ring inside the same segment, which every
 * process maps whole (sized for the largest ring): see "Resize" below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

static uint32_t srn_roundup_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

/* A ring of size entries at off fits the segment? */
static bool srn_cq_geo_ok(uint32_t size, uint32_t off, size_t seg_size)
{
	return size && !(size & (size - 1)) && size <= SRN_CQ_MAX_ENTRIES &&
	       off >= sizeof(struct srn_cq_shm) && off % 64 == 0 &&
	       (uint64_t)off + (uint64_t)size * sizeof(struct srn_cqe) <=
		       seg_size;
}

int srn_cq_view_init(struct srn_cq_view *v, void *seg_addr, size_t seg_size,
		     int chan_fd, int kick_fd)
{
	struct srn_cq_shm *shm = seg_addr;
	/* acquire: pairs with the release of gen in srn_cq_relayout, so
	 * size is at least as new as gen (an older gen with a newer size is
	 * caught by srn_cq_view_geo) */
	uint32_t gen = __atomic_load_n(&shm->gen, __ATOMIC_ACQUIRE);
	/* relaxed: ordered by the acquire of gen above; the owner wrote
	 * cqe_off before it passed the segment (the socket orders that). A
	 * peer may change them since, so they are read once and checked */
	uint32_t size = __atomic_load_n(&shm->size, __ATOMIC_RELAXED);
	/* relaxed: as size */
	uint32_t off = __atomic_load_n(&shm->cqe_off, __ATOMIC_RELAXED);

	if (!srn_cq_geo_ok(size, off, seg_size))
		return -EPROTO;
	v->shm = shm;
	v->ring = (struct srn_cqe *)((char *)seg_addr + off);
	v->seg_size = seg_size;
	v->geo = (uint64_t)gen << 32 | (size - 1);
	v->owner = false;
	v->chan_fd = chan_fd;
	v->kick_fd = kick_fd;
	v->cons_seen = 0;
	v->bounce = off == sizeof(struct srn_cq_shm) &&
				    seg_size >= SRN_CQ_SEG_SIZE ?
			    (uint8_t *)seg_addr + SRN_CQ_BOUNCE_OFF :
			    NULL;
	return 0;
}

/*
 * The ring's mask for a producer that just read prod (acquire) without
 * SRN_CQ_PROD_RESIZING: the view's, or, when the owner resized the ring
 * since, the new one read from the segment and checked. If the caller's
 * CAS from that prod then succeeds, no resize began in between, so the
 * gen it read here is the one published with that prod. The cached pair
 * (gen, mask) is always read as a pair by one thread: size is acquired
 * after gen, both stored with release by srn_cq_relayout (size first), so
 * a pair never holds an older gen with a newer size that a producer could
 * still use with a successful CAS.
 */
static int srn_cq_view_geo(struct srn_cq_view *v, uint32_t *mask_p)
{
	/* relaxed: the view's producers only share it as a cache; a stale
	 * value is caught by the gen check below */
	uint64_t geo = __atomic_load_n(&v->geo, __ATOMIC_RELAXED);
	uint32_t gen, size, off;

	if (v->owner) {
		/* written by srn_cq_relayout before its release of prod,
		 * which the caller's acquire of prod pairs with */
		*mask_p = (uint32_t)geo;
		return 0;
	}
	/* acquire: pairs with the release of gen in srn_cq_relayout: the
	 * size read below is at least that generation's (see above) */
	gen = __atomic_load_n(&v->shm->gen, __ATOMIC_ACQUIRE);
	if (srn_likely(gen == (uint32_t)(geo >> 32))) {
		*mask_p = (uint32_t)geo;
		return 0;
	}
	/* acquire: pairs with the release of size in srn_cq_relayout, so
	 * that a size of a later resize read here happens after every CAS
	 * that resize's srn_cq_block observed (see above) */
	size = __atomic_load_n(&v->shm->size, __ATOMIC_ACQUIRE);
	off = (uint32_t)((char *)v->ring - (char *)v->shm);
	if (!srn_cq_geo_ok(size, off, v->seg_size))
		return -EPROTO;
	/* relaxed: a cache (see above) */
	__atomic_store_n(&v->geo, (uint64_t)gen << 32 | (size - 1),
			 __ATOMIC_RELAXED);
	*mask_p = size - 1;
	return 0;
}

static void srn_cq_notify(const struct srn_cq_view *v, const struct srn_cqe *c)
{
	struct srn_cq_shm *shm = v->shm;
	/* acquire: pairs with the release in srn_cq_arm */
	uint32_t arm = __atomic_load_n(&shm->arm, __ATOMIC_ACQUIRE);

	if (arm == SRN_CQ_ARM_NONE)
		return;
	/* an inline CQE (struct srn_cqe_inl) is a successful receive */
	if (arm == SRN_CQ_ARM_SOLICITED &&
	    ((c->flags & SRN_CQE_INLINE) || c->status == IBV_WC_SUCCESS) &&
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

#define SRN_CQ_RESIZE_WAIT_NS 2000000000ull /* 2 s */
/* the owner's wait for reserved slots, shorter: producers blocked by the
 * resize meanwhile give up only after SRN_CQ_RESIZE_WAIT_NS */
#define SRN_CQ_PUBLISH_WAIT_NS 1000000000ull /* 1 s */

/* A producer's wait for a resize: its deadline, and the gen it started at */
struct srn_cq_wait {
	uint64_t deadline;
	uint32_t gen;
};

/* The owner is resizing the ring (*p_p has SRN_CQ_PROD_RESIZING): sleep
 * until it stores the new prod, then *p_p is that. The 2 s bound restarts
 * whenever gen moved (the owner finished a resize, or gave one up: it is
 * alive, only busy resizing); -ETIMEDOUT past it (an owner stopped or dead
 * in the middle of a resize, or a peer that wrote garbage). */
static int srn_cq_wait_resize(struct srn_cq_view *v, uint64_t *p_p,
			      struct srn_cq_wait *w)
{
	uint64_t now = srn_now_ns();
	/* the high half of prod, where the flag is (little-endian) */
	uint32_t *hi = (uint32_t *)&v->shm->prod + 1;
	/* relaxed: only compared, a sign of the owner's progress; the
	 * geometry is read after the acquire of prod (srn_cq_view_geo) */
	uint32_t gen = __atomic_load_n(&v->shm->gen, __ATOMIC_RELAXED);

	if (!w->deadline || gen != w->gen) {
		w->deadline = now + SRN_CQ_RESIZE_WAIT_NS;
		w->gen = gen;
	}
	if (now >= w->deadline)
		return -ETIMEDOUT;
	srn_futex_wait_shared(hi, (uint32_t)(*p_p >> 32), w->deadline - now);
	/* acquire: pairs with the release of prod in srn_cq_relayout (or
	 * srn_cq_unblock), so the new geometry is visible */
	*p_p = __atomic_load_n(&v->shm->prod, __ATOMIC_ACQUIRE);
	return 0;
}

/* The ring is full (or the owner never finished a resize): flag the
 * overflow, kick the owner. */
static int srn_cq_overflowed(struct srn_cq_view *v, int err)
{
	/* release: pairs with the acquire in srn_cq_check_overflow (the flag
	 * publishes nothing else) */
	__atomic_store_n(&v->shm->overflow, 1, __ATOMIC_RELEASE);
	if (v->kick_fd >= 0)
		srn_kick_fd(v->kick_fd);
	return err;
}

/*
 * Where a producer that read prod as p stands, given the ring's mask: 0
 * room, -ENOSPC full, -EAGAIN p is stale (cons is past it: other
 * producers filled slots and the owner drained them since p was read, so
 * p - cons would wrap and look full): read prod again.
 */
int srn_cq_room(struct srn_cq_view *v, uint64_t p, uint32_t mask)
{
	/* acquire: a lower bound of cons shared by this process's producers;
	 * pairs with the release of cons_seen in srn_cq_room and
	 * srn_cq_bounce_slot, made after an acquire of cons: the owner's
	 * reads of the slots up to it happened before our write of one */
	uint64_t c = __atomic_load_n(&v->cons_seen, __ATOMIC_ACQUIRE);

	if ((int64_t)(p - c) < 0)
		return -EAGAIN;
	if (p - c <= mask)
		return 0;
	/* the known space is used up: read cons, a line the owner writes.
	 * acquire: pairs with the release of cons in srn_cq_drain (and
	 * srn_cq_repair, srn_cq_relayout), so its reads of the slots are
	 * over */
	c = __atomic_load_n(&v->shm->cons, __ATOMIC_ACQUIRE);
	/* release: pairs with the acquire of cons_seen in srn_cq_room and
	 * srn_cq_bounce_slot */
	__atomic_store_n(&v->cons_seen, c, __ATOMIC_RELEASE);
	if ((int64_t)(p - c) < 0)
		return -EAGAIN;
	return p - c > mask ? -ENOSPC : 0;
}

/* prod read again this often in a row, cons always past it: the owner (or
 * whoever else maps the segment) wrote garbage */
#define SRN_CQ_STALE_MAX 100000

/* Reserves a slot for a producer: 0 with its position in *p_p and the
 * ring's mask for it in *mask_p, or -ENOSPC (overflow flagged, the owner
 * kicked), or -EPROTO (the segment's header is garbage). */
static int srn_cq_reserve(struct srn_cq_view *v, uint64_t *p_p,
			  uint32_t *mask_p)
{
	struct srn_cq_shm *shm = v->shm;
	/* acquire: pairs with the release of prod in srn_cq_relayout (the
	 * geometry read by srn_cq_view_geo) */
	uint64_t p = __atomic_load_n(&shm->prod, __ATOMIC_ACQUIRE);
	struct srn_cq_wait w = { 0, 0 };
	unsigned stale = 0;
	uint32_t mask;
	int err;

	for (;;) {
		if (srn_unlikely(p & SRN_CQ_PROD_RESIZING)) {
			err = srn_cq_wait_resize(v, &p, &w);
			if (err)
				return srn_cq_overflowed(v, -ENOSPC);
			continue;
		}
		err = srn_cq_view_geo(v, &mask);
		if (!err)
			err = srn_cq_room(v, p, mask);
		if (srn_unlikely(err == -EAGAIN)) {
			if (++stale > SRN_CQ_STALE_MAX)
				return -EPROTO;
			/* acquire: pairs with the release of prod in
			 * srn_cq_relayout, as above */
			p = __atomic_load_n(&shm->prod, __ATOMIC_ACQUIRE);
			continue;
		}
		if (err)
			return err == -ENOSPC ? srn_cq_overflowed(v, err) : err;
		/* acq_rel: pairs with this CAS in other producers' srn_cq_post,
		 * with the acquire of prod in srn_cq_repair and with the CAS
		 * in srn_cq_block; acquire on failure: p is the new guess and
		 * may be the one srn_cq_relayout released with a new ring */
		if (__atomic_compare_exchange_n(&shm->prod, &p, p + 1, true,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			break;
	}
	*p_p = p;
	*mask_p = mask;
	return 0;
}

int srn_cq_claim(struct srn_cq_view *v, uint64_t *p_p, struct srn_cqe **slot_p)
{
	uint32_t mask;
	int err = srn_cq_reserve(v, p_p, &mask);

	if (!err)
		*slot_p = &v->ring[*p_p & mask];
	return err;
}

/*
 * The bounce slot of the CQE at position p (claimed), or NULL: the CQE
 * that had this slot SRN_CQ_BOUNCE_SLOTS positions before is not consumed
 * yet, or the segment has no slots. cons only grows (a resize or a clean
 * moves it forward and places every bounce CQE it moves: srn_cq_unbounce),
 * so a lower bound of it that says "consumed" is right.
 */
uint8_t *srn_cq_bounce_slot(struct srn_cq_view *v, uint64_t p)
{
	/* acquire: pairs with the release of cons_seen below and in
	 * srn_cq_room, made by another producer of this view after it
	 * acquired cons: the owner's copy out of the slot happened before
	 * our copy into it */
	uint64_t c = __atomic_load_n(&v->cons_seen, __ATOMIC_ACQUIRE);

	if (!v->bounce)
		return NULL;
	if (p - c >= SRN_CQ_BOUNCE_SLOTS) {
		/* acquire: pairs with the release of cons in srn_cq_drain
		 * (and srn_cq_relayout, srn_cq_clean): the owner's copy out
		 * of the slot is over. release: pairs with the acquire of
		 * cons_seen in srn_cq_room and srn_cq_bounce_slot */
		c = __atomic_load_n(&v->shm->cons, __ATOMIC_ACQUIRE);
		__atomic_store_n(&v->cons_seen, c, __ATOMIC_RELEASE);
		if (p - c >= SRN_CQ_BOUNCE_SLOTS)
			return NULL;
	}
	return v->bounce + (p % SRN_CQ_BOUNCE_SLOTS) * SRN_CQ_BOUNCE_SIZE;
}

/* Where the next CQE would go, as far as this view knows: a guess for
 * srn_cq_bounce_slot before a claim. */
uint64_t srn_cq_prod_hint(const struct srn_cq_view *v)
{
	/* relaxed: a guess, checked again after the claim */
	return __atomic_load_n(&v->shm->prod, __ATOMIC_RELAXED) &
	       ~SRN_CQ_PROD_RESIZING;
}

int srn_cq_post(struct srn_cq_view *v, const struct srn_cqe *cqe)
{
	struct srn_cqe *slot;
	uint64_t p;
	int err = srn_cq_claim(v, &p, &slot);

	if (err)
		return err;
	srn_cq_publish(v, slot, p, cqe);
	return 0;
}

void srn_cq_publish(struct srn_cq_view *v, struct srn_cqe *slot, uint64_t p,
		    const struct srn_cqe *cqe)
{
	memcpy(slot, cqe, offsetof(struct srn_cqe, owner_seq));
	/* relaxed: set by the owner before the segment was shared (the
	 * socket that passed it orders that) */
	if (__atomic_load_n(&v->shm->flags, __ATOMIC_RELAXED) &
	    SRN_CQF_TIMESTAMP)
		slot->ts = srn_now_ns();
	/* release: pairs with the acquire of owner_seq in srn_cq_drain (and
	 * srn_cq_repair, srn_cq_wait_published): the CQE is written before
	 * its tag */
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

/* The empty slot at cons: has it been empty since SRN_CQ_REPAIR_NS ago?
 * cq->lock held. */
static bool srn_cq_repair_stuck(struct srn_cq *cq)
{
	uint64_t now = srn_now_ns();

	if (cq->repair_pos != cq->cons + 1) { /* + 1: 0 is "none" */
		cq->repair_pos = cq->cons + 1;
		cq->repair_seen_ns = now;
		return false;
	}
	return now - cq->repair_seen_ns >= SRN_CQ_REPAIR_NS;
}

/*
 * After a peer died: a slot reserved (prod moved past it) but still empty
 * long after the death, and found empty at every poll for as long again,
 * was abandoned by the dead producer. Skip it, or every completion behind
 * it, the flushes included, would stay invisible. A live producer between
 * its claim and its publish (a bounce copy, a process_vm_writev) is not
 * skipped: it publishes long before.
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
	if ((__atomic_load_n(&cq->shm->prod, __ATOMIC_ACQUIRE) &
	     ~SRN_CQ_PROD_RESIZING) > cq->cons &&
	    __atomic_load_n(&cq->ring[cq->cons & cq->mask].owner_seq,
			    __ATOMIC_ACQUIRE) != (uint32_t)(cq->cons + 1) &&
	    srn_cq_repair_stuck(cq)) {
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

/* The segment holds the largest ring whatever the CQ's size (sparse: a
 * page is allocated when a CQE is first written in it), so that a resize
 * changes no mapping. */
static int srn_cq_init(struct srn_cq *cq, uint32_t size)
{
	int err = srn_seg_create(&cq->seg, SRN_SEG_CQ, SRN_CQ_SEG_SIZE,
				 cq->handle);

	if (err)
		return err;
	cq->shm = cq->seg.addr;
	cq->shm->size = size;
	cq->shm->cqe_off = sizeof(struct srn_cq_shm);
	cq->ring = (struct srn_cqe *)((char *)cq->seg.addr +
				      sizeof(struct srn_cq_shm));
	cq->mask = size - 1;
	srn_lock_init(&cq->lock);
	err = srn_cq_view_init(&cq->local, cq->seg.addr, cq->seg.size, -1, -1);
	cq->local.owner = true;
	return err;
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

/* QP qpn's receives complete here and take WQEs of ring v (its own or
 * its SRQ's): the CQEs' rq_pos will be passed to v (srn_cq_rq_polled), if
 * there is room; else the ring's post_recv reads cons, as before. Several
 * QPs of one SRQ may pass positions to it, in any order, from several
 * CQs: each is a lower bound of its cons. */
void srn_cq_rq_attach(struct srn_cq *cq, uint32_t qpn, struct srn_rq_view *v)
{
	srn_lock(&cq->lock);
	if (cq->nrqs < SRN_CQ_RQS)
		cq->rqs[cq->nrqs++] = (struct srn_cq_rq){ qpn, v };
	srn_unlock(&cq->lock);
}

/* The inverse of srn_cq_rq_attach (the QP goes): under the lock, so no
 * poll uses its view after this. */
void srn_cq_rq_detach(struct srn_cq *cq, uint32_t qpn)
{
	srn_lock(&cq->lock);
	for (unsigned i = 0; i < cq->nrqs; i++) {
		if (cq->rqs[i].qpn != qpn)
			continue;
		cq->rqs[i] = cq->rqs[--cq->nrqs];
		break;
	}
	srn_unlock(&cq->lock);
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

/*
 * Resize. Peers keep the whole segment mapped (srn_cq_init sized it for
 * the largest ring), so only the ring's geometry changes. The owner, under
 * cq->lock (so no poll runs): blocks new reservations (srn_cq_block),
 * waits for the reserved slots to be published (srn_cq_wait_published),
 * copies the CQEs in [cons, prod) out, zeroes the ring, writes them back
 * at new positions, then publishes cons, size, gen and prod
 * (srn_cq_relayout). Producers that find the ring blocked sleep on prod
 * (srn_cq_wait_resize), bounded.
 */

/* Sets SRN_CQ_PROD_RESIZING: no reservation succeeds after this. *x_p is
 * the first position not reserved. -EIO when prod is out of the ring's
 * bounds (a peer wrote garbage). */
static int srn_cq_block(struct srn_cq *cq, uint64_t *x_p)
{
	/* acquire: pairs with the CAS of prod in srn_cq_reserve */
	uint64_t p = __atomic_load_n(&cq->shm->prod, __ATOMIC_ACQUIRE);

	do {
		/* only the owner sets the flag, and under cq->lock */
		if ((p & SRN_CQ_PROD_RESIZING) || p < cq->cons ||
		    p - cq->cons > (uint64_t)cq->mask + 1)
			return -EIO;
		/* acq_rel: pairs with the CAS in srn_cq_reserve: every
		 * reservation before this one is below p, none after it
		 * succeeds. acquire on failure: p is checked again */
	} while (!__atomic_compare_exchange_n(
		&cq->shm->prod, &p, p | SRN_CQ_PROD_RESIZING, false,
		__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	*x_p = p;
	return 0;
}

/* Opens reservations again at position p with a new generation (after a
 * resize, or a resize given up: waiting producers see the owner moves)
 * and wakes the producers that sleep in srn_cq_wait_resize (any
 * process). */
static void srn_cq_unblock(struct srn_cq *cq, uint64_t p)
{
	/* relaxed: the owner's own view, written only here (its gen is the
	 * owner's count of generations) */
	uint32_t gen =
		(uint32_t)(__atomic_load_n(&cq->local.geo, __ATOMIC_RELAXED) >>
			   32) +
		1;

	/* relaxed: the release of prod below publishes it to this
	 * process's producers (srn_cq_view_geo) */
	__atomic_store_n(&cq->local.geo, (uint64_t)gen << 32 | cq->mask,
			 __ATOMIC_RELAXED);
	/* release: pairs with the acquire of gen in srn_cq_view_init and
	 * srn_cq_view_geo (size, stored before, comes with it) */
	__atomic_store_n(&cq->shm->gen, gen, __ATOMIC_RELEASE);
	/* release: pairs with the acquire of prod in srn_cq_reserve and
	 * srn_cq_wait_resize: the ring, cons, size and gen come first */
	__atomic_store_n(&cq->shm->prod, p, __ATOMIC_RELEASE);
	srn_futex_wake_shared((uint32_t *)&cq->shm->prod + 1);
}

/* Waits until every slot reserved below x is published: its producer is
 * copying 64 bytes, it holds no lock and waits for nothing, so this
 * sleeps briefly (backoff from 1 us). -EAGAIN after 1 s: a producer
 * stopped or dead between its reservation and its tag (poll_cq skips the
 * slot of a dead one, srn_cq_repair; the application may try again). */
static int srn_cq_wait_published(struct srn_cq *cq, uint64_t x)
{
	uint64_t deadline = 0, now;
	long pause = 1000;

	for (uint64_t i = cq->cons; i != x;) {
		struct timespec ts = { 0, pause };

		/* acquire: pairs with the release of owner_seq in
		 * srn_cq_post: the CQE is complete before it is copied */
		if (__atomic_load_n(&cq->ring[i & cq->mask].owner_seq,
				    __ATOMIC_ACQUIRE) == (uint32_t)(i + 1)) {
			i++;
			continue;
		}
		now = srn_now_ns();
		if (!deadline)
			deadline = now + SRN_CQ_PUBLISH_WAIT_NS;
		if (now >= deadline)
			return -EAGAIN;
		nanosleep(&ts, NULL);
		if (pause < 1000000)
			pause *= 2;
	}
	return 0;
}

/* The first position of the new ring: past every value prod had (x), so
 * a producer's CAS from an old value fails; and such that no position of
 * the new ring's first lap has the tag 0 that its zeroed slots hold. */
static uint64_t srn_cq_new_base(uint64_t x, uint32_t size)
{
	uint64_t base = x + 1;

	if ((uint64_t)(uint32_t)base + size >= (1ull << 32))
		base = (base | 0xffffffffull) + 1;
	return base;
}

/* Zeroes the first entries slots: no stale tag can match a position. The
 * pages go back to the kernel (the part of a larger old ring too). */
static void srn_cq_zero(struct srn_cq *cq, uint32_t entries)
{
	size_t len = (size_t)entries * sizeof(struct srn_cqe);
	off_t off = (char *)cq->ring - (char *)cq->seg.addr;

	if (fallocate(cq->seg.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      off, (off_t)len))
		memset(cq->ring, 0, len);
}

/* A bounce CQE in the ring is placed now and becomes the plain CQE it
 * stands for (its slot is then free): before a resize or a clean moves it
 * to another position, whose bounce slot is another. cq->lock held. */
static void srn_cq_unbounce(struct srn_cq *cq, struct srn_cqe *c)
{
	struct srn_cqe out;

	/* relaxed: the entry is published (the caller acquired its tag);
	 * read once here */
	if ((__atomic_load_n(&c->flags, __ATOMIC_RELAXED) &
	     (SRN_CQE_INLINE | SRN_CQE_BOUNCE)) !=
	    (SRN_CQE_INLINE | SRN_CQE_BOUNCE))
		return;
	srn_cq_inl_take(cq, c, &out);
	memcpy(c, &out, offsetof(struct srn_cqe, owner_seq));
}

/* Moves the n = x - cons CQEs into a ring of size entries, in order, and
 * publishes it. Reservations are blocked at x, all published. */
static int srn_cq_relayout(struct srn_cq *cq, uint64_t x, uint32_t size)
{
	uint64_t n = x - cq->cons, base = srn_cq_new_base(x, size);
	uint32_t old = cq->mask + 1;
	struct srn_cqe *tmp = NULL;

	if (n && !(tmp = malloc(n * sizeof(*tmp))))
		return -ENOMEM;
	for (uint64_t j = 0; j < n; j++) {
		srn_cq_unbounce(cq, &cq->ring[(cq->cons + j) & cq->mask]);
		tmp[j] = cq->ring[(cq->cons + j) & cq->mask];
	}
	srn_cq_zero(cq, old > size ? old : size);
	for (uint64_t j = 0; j < n; j++) {
		struct srn_cqe *slot = &cq->ring[(base + j) & (size - 1)];

		memcpy(slot, &tmp[j], offsetof(struct srn_cqe, owner_seq));
		/* relaxed: the consumer is this thread (cq->lock held) and
		 * the release of prod in srn_cq_unblock orders it for all */
		__atomic_store_n(&slot->owner_seq, (uint32_t)(base + j + 1),
				 __ATOMIC_RELAXED);
	}
	free(tmp);
	cq->cons = base;
	cq->mask = size - 1;
	/* release: pairs with the acquire of cons in srn_cq_reserve */
	__atomic_store_n(&cq->shm->cons, base, __ATOMIC_RELEASE);
	/* release: pairs with the acquire of size in srn_cq_view_geo */
	__atomic_store_n(&cq->shm->size, size, __ATOMIC_RELEASE);
	cq->ibcq.cqe = (int)size;
	srn_cq_unblock(cq, base + n);
	return 0;
}

/* ibv_resize_cq: at least cqe entries (a power of two). 0, -EINVAL (out
 * of range, or fewer entries than the CQ holds), -EAGAIN, -ENOMEM, -EIO. */
int srn_cq_resize(struct srn_cq *cq, int cqe)
{
	uint32_t size;
	uint64_t x;
	int err;

	if (cqe < 1 || cqe > SRN_MAX_CQE)
		return -EINVAL;
	size = srn_roundup_pow2((uint32_t)cqe);
	srn_lock(&cq->lock);
	/* acquire: pairs with the CAS of prod in srn_cq_reserve. Too many
	 * already: no need to stop the producers to say so */
	if ((__atomic_load_n(&cq->shm->prod, __ATOMIC_ACQUIRE) &
	     ~SRN_CQ_PROD_RESIZING) -
		    cq->cons >
	    size) {
		err = -EINVAL;
		goto out;
	}
	err = srn_cq_block(cq, &x);
	if (err)
		goto out;
	/* reserved counts: those CQEs are being written */
	if (x - cq->cons > size)
		err = -EINVAL;
	if (!err)
		err = srn_cq_wait_published(cq, x);
	if (!err)
		err = srn_cq_relayout(cq, x, size);
	if (err)
		srn_cq_unblock(cq, x);
out:
	srn_unlock(&cq->lock);
	return err;
}

SRN_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (!cq)
		return EINVAL;
	return -srn_cq_resize(to_scq(cq), cqe);
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
		srn_cq_unbounce(cq, c);
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

/*
 * Where the payload of an inline CQE is (*src_p, *len_p): in the CQE, or,
 * with SRN_CQE_BOUNCE, in the CQ's bounce slot it names (struct
 * srn_cqe_bnc; a datagram's sl in out). false: a slot or length out of
 * bounds. What a peer wrote is read once.
 */
static bool srn_cq_inl_src(struct srn_cq *cq, const struct srn_cqe_inl *in,
			   uint16_t flags, const uint8_t **src_p,
			   uint32_t *len_p, struct srn_cqe *out)
{
	/* read once, through volatile: a peer may rewrite it meanwhile */
	const volatile uint8_t *v = in->data;
	struct srn_cqe_bnc bnc;
	uint8_t raw[sizeof(bnc)];

	if (flags & SRN_CQE_DGRAM)
		out->wc_flags |= IBV_WC_GRH;
	if (!(flags & SRN_CQE_BOUNCE)) {
		*src_p = NULL; /* data, then data2 */
		*len_p = flags >> SRN_CQE_INL_LEN_SHIFT;
		if (!(flags & SRN_CQE_DGRAM))
			return *len_p <= SRN_CQE_INL_MAX;
		out->sl = SRN_WC_SL_ROCE_IPV4;
		return *len_p <= SRN_CQE_DGRAM_MAX;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = v[i];
	memcpy(&bnc, raw, sizeof(bnc));
	if (!cq->local.bounce || bnc.slot >= SRN_CQ_BOUNCE_SLOTS ||
	    bnc.len > SRN_CQ_BOUNCE_SIZE)
		return false;
	*src_p = cq->local.bounce + (size_t)bnc.slot * SRN_CQ_BOUNCE_SIZE;
	*len_p = bnc.len;
	out->sl = bnc.sl;
	return true;
}

/* Writes the len payload bytes of the inline CQE in (from src, or from
 * the CQE itself when NULL) to dst, after the GRH it stands for when it is
 * a datagram's that carries its addresses (SRN_CQE_DGRAM, no bounce). */
static void srn_cq_inl_place(struct srn_cq *cq, const struct srn_cqe_inl *in,
			     uint16_t flags, const uint8_t *src, uint32_t len,
			     uint8_t *dst)
{
	/* read once, through volatile: a peer may rewrite them meanwhile,
	 * and the GRH cached for them must be theirs */
	const volatile uint32_t *v = (const volatile uint32_t *)in->data2;
	struct srn_cqe_dgram_ips ips;
	uint32_t head;

	if (src) {
		memcpy(dst, src, len);
		return;
	}
	if (flags & SRN_CQE_DGRAM) {
		ips.sip = v[0];
		ips.dip = v[1];
		if (cq->grh_len != len + 1 || cq->grh_ips.sip != ips.sip ||
		    cq->grh_ips.dip != ips.dip) {
			srn_grh_build_v4(cq->grh, ips.sip, ips.dip, len);
			cq->grh_ips = ips;
			cq->grh_len = len + 1;
		}
		memcpy(dst, cq->grh, SRN_GRH_LEN);
		dst += SRN_GRH_LEN;
	}
	head = len < sizeof(in->data) ? len : sizeof(in->data);
	memcpy(dst, in->data, head);
	memcpy(dst + head, in->data2, len - head);
}

/*
 * An inline receive CQE (struct srn_cqe_inl, from a same-host initiator):
 * its payload (in the CQE, or in the bounce slot it names) goes to the
 * receive SGE it names once our own TPT says that key is an MR of ours
 * with LOCAL_WRITE that holds the bytes (and not an ODP one, whose pages
 * may be missing: initiators place into those with process_vm_writev,
 * which cannot fault); *out gets the completion it stands for. One that
 * fails the checks (a peer that lies, or an MR deregistered under a posted
 * receive) completes with IBV_WC_LOC_PROT_ERR and places nothing. What a
 * peer wrote is read once. cq->lock held.
 */
void srn_cq_inl_take(struct srn_cq *cq, const struct srn_cqe *c,
		     struct srn_cqe *out)
{
	const struct srn_cqe_inl *in = (const struct srn_cqe_inl *)c;
	/* relaxed: each read once, after the acquire of owner_seq (the
	 * caller's); a peer may rewrite them meanwhile */
	uint16_t flags = __atomic_load_n(&in->flags, __ATOMIC_RELAXED);
	uint64_t addr = __atomic_load_n(&in->addr, __ATOMIC_RELAXED);
	const uint8_t *src;
	struct srn_key_ref ref;
	uint32_t len, span;

	*out = (struct srn_cqe){
		.wr_id = in->wr_id,
		.opcode = IBV_WC_RECV,
		.qp_num = in->qp_num,
		.src_qp = in->src_qp,
		.flags = flags & SRN_CQE_SOLICITED,
		.rq_pos = in->rq_pos,
	};
	if (!srn_cq_inl_src(cq, in, flags, &src, &len, out))
		goto bad;
	span = len + (!src && (flags & SRN_CQE_DGRAM) ? SRN_GRH_LEN : 0);
	/* relaxed: as above */
	if (srn_tpt_lookup(srn_ctx_tpt(cq->ctx),
			   __atomic_load_n(&in->lkey, __ATOMIC_RELAXED),
			   &ref) ||
	    (ref.flags & SRN_TPT_MW) ||
	    (ref.access & IBV_ACCESS_ON_DEMAND) || /* pages may be missing */
	    srn_key_check_span(&ref, IBV_ACCESS_LOCAL_WRITE, addr, span) !=
		    SRN_KEY_OK)
		goto bad;
	srn_cq_inl_place(cq, in, flags, src, len,
			 (uint8_t *)(uintptr_t)(ref.va + (addr - ref.iova)));
	out->status = IBV_WC_SUCCESS;
	out->byte_len = span;
	if (flags & SRN_CQE_INL_IMM) {
		out->imm_data = in->imm_data;
		out->wc_flags |= IBV_WC_WITH_IMM;
	}
	return;
bad:
	out->status = out->vendor_err = IBV_WC_LOC_PROT_ERR;
	out->wc_flags = 0;
	out->sl = 0;
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
