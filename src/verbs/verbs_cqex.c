// SPDX-License-Identifier: MIT
/*
 * softrnic — the extended CQ (ibv_create_cq_ex): the same ring as
 * ibv_poll_cq drains (core/cq.c), read one completion at a time through
 * ibv_start_poll / ibv_next_poll / ibv_end_poll and the ibv_wc_read_*
 * accessors. Between start_poll and end_poll the CQ's consumer lock is
 * held and the current CQE is read in place: producers cannot reuse its
 * slot before end_poll publishes the new consumer index.
 *
 * Completion timestamps: a CQ created with a timestamp flag asks every
 * producer (SRN_CQF_TIMESTAMP in its shared header) to stamp each CQE
 * with CLOCK_MONOTONIC when it writes it. The device clock is that clock
 * in ns (hca_core_clock 1,000,000 kHz, ibv_query_rt_values_ex); the
 * wallclock reading adds the current CLOCK_REALTIME - CLOCK_MONOTONIC.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <time.h>

#include "core/cq_poll.h"
#include "engine/engine.h"
#include "verbs/verbs.h"

#define SRN_CQEX_WC_FLAGS                                              \
	(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define SRN_CQEX_TS_FLAGS                      \
	(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define SRN_CQEX_CREATE_FLAGS \
	(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)

static inline struct srn_cq *to_scqx(struct ibv_cq_ex *c)
{
	return container_of(c, struct srn_cq, ibcq);
}

/* cq->lock held: the CQE at cons, if its producer published it. */
static bool srn_cqex_load(struct srn_cq *cq)
{
	const struct srn_cqe *c = &cq->ring[cq->cons & cq->mask];

	/* acquire: pairs with the release in srn_cq_post */
	if (__atomic_load_n(&c->owner_seq, __ATOMIC_ACQUIRE) !=
	    (uint32_t)(cq->cons + 1)) {
		cq->cur = NULL;
		return false;
	}
	if (c->flags & SRN_CQE_INLINE) { /* a small SEND's: placed now */
		srn_cq_inl_take(cq, c, &cq->cur_inl);
		c = &cq->cur_inl;
	}
	cq->cur = c;
	srn_cq_rq_polled(cq, c);
	cq->ibcq.wr_id = c->wr_id;
	cq->ibcq.status = c->status;
	/* a SEND_WITH_INV placed by a same-host initiator: the window goes
	 * before the application sees the completion (as srn_cq_drain) */
	if (srn_unlikely(c->wc_flags & IBV_WC_WITH_INV) &&
	    c->status == IBV_WC_SUCCESS)
		srn_mw_remote_inv(cq->ctx, c->imm_data, c->qp_num);
	return true;
}

/* An empty ring: let the polling thread drive the engine, as
 * ibv_poll_cq does (verbs_cq.c), without the consumer lock. */
static void srn_cqex_drive(struct srn_cq *cq)
{
	if (srn_req_retry_wanted(cq->ctx))
		srn_req_retry_stalled(cq->ctx);
	if (srn_progress_has_data())
		srn_progress_poll_once();
	/* relaxed: a hint; srn_cq_check_overflow reads it with acquire */
	if (srn_unlikely(__atomic_load_n(&cq->shm->overflow, __ATOMIC_RELAXED)))
		srn_cq_check_overflow(cq);
	if (srn_cq_repair_due(cq))
		srn_cq_repair(cq);
}

static int srn_cqex_start_poll(struct ibv_cq_ex *ibcq,
			       struct ibv_poll_cq_attr *attr)
{
	struct srn_cq *cq = to_scqx(ibcq);

	if (srn_unlikely(!attr || attr->comp_mask))
		return EINVAL;
	srn_lock(&cq->lock);
	if (srn_cqex_load(cq))
		return 0; /* the lock is held until end_poll */
	srn_unlock(&cq->lock);
	srn_cqex_drive(cq);
	srn_lock(&cq->lock);
	if (srn_cqex_load(cq))
		return 0;
	srn_unlock(&cq->lock);
	return ENOENT; /* no end_poll follows */
}

static int srn_cqex_next_poll(struct ibv_cq_ex *ibcq)
{
	struct srn_cq *cq = to_scqx(ibcq);

	if (cq->cur)
		cq->cons++;
	return srn_cqex_load(cq) ? 0 : ENOENT;
}

static void srn_cqex_end_poll(struct ibv_cq_ex *ibcq)
{
	struct srn_cq *cq = to_scqx(ibcq);

	if (cq->cur)
		cq->cons++;
	cq->cur = NULL;
	/* release: pairs with the acquire in srn_cq_post (the slots up to
	 * cons are free again) */
	__atomic_store_n(&cq->shm->cons, cq->cons, __ATOMIC_RELEASE);
	srn_unlock(&cq->lock);
}

#define SRN_CQEX_READ(name, type, expr)                          \
	static type srn_cqex_read_##name(struct ibv_cq_ex *ibcq) \
	{                                                        \
		const struct srn_cqe *c = to_scqx(ibcq)->cur;    \
                                                                 \
		return (type)(expr);                             \
	}

SRN_CQEX_READ(opcode, enum ibv_wc_opcode, c->opcode)
SRN_CQEX_READ(vendor_err, uint32_t, c->vendor_err)
SRN_CQEX_READ(byte_len, uint32_t, c->byte_len)
SRN_CQEX_READ(imm_data, __be32, c->imm_data)
SRN_CQEX_READ(qp_num, uint32_t, c->qp_num)
SRN_CQEX_READ(src_qp, uint32_t, c->src_qp)
SRN_CQEX_READ(wc_flags, unsigned int, c->wc_flags)
SRN_CQEX_READ(slid, uint32_t, c->slid)
SRN_CQEX_READ(sl, uint8_t, c->sl)
SRN_CQEX_READ(dlid_path_bits, uint8_t, c->dlid_path_bits)
SRN_CQEX_READ(completion_ts, uint64_t, c->ts)

static uint64_t srn_ts_ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t srn_cqex_read_completion_wallclock_ns(struct ibv_cq_ex *ibcq)
{
	const struct srn_cqe *c = to_scqx(ibcq)->cur;

	return c->ts + (srn_ts_ns(CLOCK_REALTIME) - srn_ts_ns(CLOCK_MONOTONIC));
}

static void srn_cqex_set_ops(struct srn_cq *cq)
{
	struct ibv_cq_ex *x = &cq->ibcq;

	x->start_poll = srn_cqex_start_poll;
	x->next_poll = srn_cqex_next_poll;
	x->end_poll = srn_cqex_end_poll;
	x->read_opcode = srn_cqex_read_opcode;
	x->read_vendor_err = srn_cqex_read_vendor_err;
	x->read_byte_len = srn_cqex_read_byte_len;
	x->read_imm_data = srn_cqex_read_imm_data;
	x->read_qp_num = srn_cqex_read_qp_num;
	x->read_src_qp = srn_cqex_read_src_qp;
	x->read_wc_flags = srn_cqex_read_wc_flags;
	x->read_slid = srn_cqex_read_slid;
	x->read_sl = srn_cqex_read_sl;
	x->read_dlid_path_bits = srn_cqex_read_dlid_path_bits;
	x->read_completion_ts = srn_cqex_read_completion_ts;
	x->read_completion_wallclock_ns = srn_cqex_read_completion_wallclock_ns;
}

static int srn_cqex_check(const struct ibv_cq_init_attr_ex *a)
{
	if (a->comp_mask &
	    ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
		return -EINVAL;
	if (a->wc_flags & ~(uint64_t)SRN_CQEX_WC_FLAGS)
		return -EOPNOTSUPP; /* CVLAN, FLOW_TAG, TM_INFO */
	if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (a->flags & ~(uint32_t)SRN_CQEX_CREATE_FLAGS))
		return -EOPNOTSUPP;
	if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!a->parent_domain || !to_spd(a->parent_domain)->parent_of))
		return -EINVAL; /* must be a parent domain */
	if (a->cqe > INT_MAX || a->comp_vector > INT_MAX)
		return -EINVAL;
	return 0;
}

struct ibv_cq_ex *srn_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *a)
{
	struct srn_cq *cq;
	int err = srn_cqex_check(a);

	if (!err)
		err = srn_cq_create(context, (int)a->cqe, a->cq_context,
				    a->channel, (int)a->comp_vector, &cq);
	if (err) {
		errno = -err;
		return NULL;
	}
	cq->wc_flags = a->wc_flags;
	if (a->wc_flags & SRN_CQEX_TS_FLAGS)
		/* relaxed: no producer knows the CQ yet (see srn_cq_post) */
		__atomic_store_n(&cq->shm->flags, SRN_CQF_TIMESTAMP,
				 __ATOMIC_RELAXED);
	srn_cqex_set_ops(cq);
	return &cq->ibcq;
}

/* ibv_query_rt_values_ex: the device clock is CLOCK_MONOTONIC. */
int srn_query_rt_values(struct ibv_context *context,
			struct ibv_values_ex *values)
{
	if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK)
		clock_gettime(CLOCK_MONOTONIC, &values->raw_clock);
	return 0;
}
