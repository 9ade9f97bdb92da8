// SPDX-License-Identifier: MIT
/*
 * softrnic — UD datagrams to QPs of this host, placed by the sender (the
 * target's CPU is not needed, as for an RC SEND).
 *
 * A UD QP keeps up to SRN_SHM_UD_PEERS destinations (srn_peer, the same
 * mapped view of a target QP that an RC connection has, made with a
 * CONNECT_REQ the target accepts from any QP of a process the kernel
 * vouches for), the oldest evicted first. A datagram checks the target's
 * type, state and Q_Key, takes a receive WQE from its ring, writes the
 * GRH and the payload into its buffer and the receive CQE into its CQ.
 * Whatever fails at the target (no receive WQE, a wrong Q_Key, a target
 * that is not ready or gone) drops the datagram; the sender completes
 * with success, as UD does. Nothing here waits for the target except the
 * first handshake with it, in an application thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "transport/shm/shm.h"

#define SRN_SHM_UD_PEERS 16

struct srn_shm_ud {
	struct srn_peer *peer[SRN_SHM_UD_PEERS];
	unsigned next; /* the slot taken next (the oldest) */
	unsigned hit; /* the slot found last: looked at first */
	/* the GRH built last: datagrams of one length to one GID share it */
	union ibv_gid grh_dgid;
	uint32_t grh_len; /* its payload length; 0: none built */
	uint8_t grh_sl;
	uint8_t grh[SRN_GRH_LEN];
	/* the QPN last found to share no memory with us, not dialed again
	 * until then (its datagrams take the mediated path: -EACCES) */
	uint32_t foreign_qpn;
	uint64_t foreign_until_ns;
};

#define SRN_SHM_UD_FOREIGN_NS 1000000000ull

static struct srn_shm_ud *srn_shm_ud_get(void **slot)
{
	struct srn_shm_ud **u = (struct srn_shm_ud **)slot;

	if (!*u)
		*u = calloc(1, sizeof(**u));
	return *u;
}

/* Slot i's peer if it is QP dqpn's and still there; a gone one is
 * dropped (a new QP may have its QPN). */
static struct srn_peer *srn_shm_ud_at(struct srn_shm_ud *u, unsigned i,
				      uint32_t dqpn)
{
	struct srn_peer *p = u->peer[i];

	if (!p || p->qpn != dqpn)
		return NULL;
	/* acquire: pairs with the release in srn_shm_on_hup */
	if (!atomic_load_explicit(&p->gone, memory_order_acquire))
		return p;
	srn_shm_peer_del(p);
	u->peer[i] = NULL;
	return NULL;
}

/* The peer for QP dqpn: met before and still there, or a new one (the
 * oldest goes). NULL: none can be made now (the datagram is lost), or
 * *err_p -EACCES: its process shares no memory with ours. */
static struct srn_peer *srn_shm_ud_peer(struct srn_qp *qp, struct srn_shm_ud *u,
					uint32_t dqpn, int *err_p)
{
	struct srn_peer *p = srn_shm_ud_at(u, u->hit, dqpn);
	uint64_t now;
	int err;

	if (p)
		return p;
	for (unsigned i = 0; i < SRN_SHM_UD_PEERS; i++) {
		p = srn_shm_ud_at(u, i, dqpn);
		if (p) {
			u->hit = i;
			return p;
		}
	}
	now = srn_now_ns();
	if (dqpn == u->foreign_qpn && now < u->foreign_until_ns) {
		*err_p = -EACCES;
		return NULL;
	}
	p = srn_shm_peer_new(qp, dqpn, true, &err);
	if (!p && err == -EACCES) {
		u->foreign_qpn = dqpn;
		u->foreign_until_ns = now + SRN_SHM_UD_FOREIGN_NS;
		*err_p = err;
	}
	if (!p)
		return NULL;
	if (u->peer[u->next])
		srn_shm_peer_del(u->peer[u->next]);
	u->peer[u->next] = p;
	u->hit = u->next;
	u->next = (u->next + 1) % SRN_SHM_UD_PEERS;
	return p;
}

/* The GRH of a datagram of len bytes to dgid, built once per (GID,
 * length) in a row; its SL (network header type) in *sl_p. */
static const uint8_t *srn_shm_ud_grh(struct srn_shm_ud *u,
				     const union ibv_gid *dgid, uint32_t len,
				     uint8_t *sl_p)
{
	if (u->grh_len != len + 1 ||
	    memcmp(&u->grh_dgid, dgid, sizeof(*dgid))) {
		u->grh_sl = srn_grh_build(u->grh, &srn_device_get()->gid, dgid,
					  len);
		u->grh_dgid = *dgid;
		u->grh_len = len + 1;
	}
	*sl_p = u->grh_sl;
	return u->grh;
}

/* May the target take a datagram with this Q_Key now? */
static bool srn_shm_ud_open_to(struct srn_peer *p, uint32_t qkey)
{
	/* acquire: pairs with the release in srn_qp_set_state */
	uint32_t st = __atomic_load_n(&p->tqp->state, __ATOMIC_ACQUIRE);

	/* relaxed: written once at creation, before the segment was
	 * passed; acquire: pairs with the release in srn_qp_apply_attr */
	return __atomic_load_n(&p->tqp->qp_type, __ATOMIC_RELAXED) ==
		       IBV_QPT_UD &&
	       (st == IBV_QPS_RTR || st == IBV_QPS_RTS || st == IBV_QPS_SQD) &&
	       __atomic_load_n(&p->tqp->qkey, __ATOMIC_ACQUIRE) == qkey;
}

/* Places GRH and payload of w into the receive WQE rw, taken at the
 * target: the status its completion gets; *posted_p when that completion
 * is posted already (srn_resp_bounce). */
static enum ibv_wc_status srn_shm_ud_place(struct srn_peer *p,
					   const struct srn_rwqe *rw,
					   const struct srn_swqe *w,
					   const uint8_t *grh,
					   const struct iovec *src, unsigned ns,
					   uint8_t sl, bool *posted_p)
{
	struct iovec dst[SRN_MAX_SGE], all[1 + SRN_MAX_SGE];
	uint64_t cap, len = w->total_len;
	uint32_t pvm = 0;

	if (srn_resp_recv_sges(p, rw, dst, &cap, &pvm))
		return IBV_WC_LOC_PROT_ERR;
	if (cap < SRN_GRH_LEN + len)
		return IBV_WC_LOC_LEN_ERR;
	if (!pvm && dst[0].iov_len >= SRN_GRH_LEN) { /* the usual buffer */
		memcpy(dst[0].iov_base, grh, SRN_GRH_LEN);
		dst[0].iov_base = (uint8_t *)dst[0].iov_base + SRN_GRH_LEN;
		dst[0].iov_len -= SRN_GRH_LEN;
		srn_iov_copy(dst, rw->num_sge, src, ns);
		return IBV_WC_SUCCESS;
	}
	all[0].iov_base = (void *)grh;
	all[0].iov_len = SRN_GRH_LEN;
	memcpy(all + 1, src, ns * sizeof(*src));
	if (pvm && srn_resp_bounce_ok(p, rw, w, pvm, SRN_GRH_LEN + len)) {
		*posted_p = true;
		return srn_resp_bounce(p, rw, w, dst, pvm, all, 1 + ns,
				       (uint32_t)(SRN_GRH_LEN + len), sl);
	}
	if (!pvm)
		srn_iov_copy(dst, rw->num_sge, all, 1 + ns);
	else if (srn_pvm_scatter(p, dst, rw->num_sge, pvm, all, 1 + ns))
		return IBV_WC_LOC_PROT_ERR;
	return IBV_WC_SUCCESS;
}

/*
 * The datagram w (src, ns) into rw as an inline receive CQE whose GRH the
 * target's poll builds (SRN_CQE_DGRAM): one line of the target's written
 * instead of two, and no copy the target cannot check. When it is small,
 * both GIDs are IPv4-mapped, the first receive SGE holds GRH and payload,
 * the CQ takes no timestamps and the receive's keys pass the target's TPT
 * (else the caller places it, and reports what is wrong). true: posted.
 */
static bool srn_shm_ud_inline(struct srn_peer *p, const struct srn_rwqe *rw,
			      const struct srn_swqe *w,
			      const union ibv_gid *dgid,
			      const struct iovec *src, unsigned ns)
{
	union {
		struct srn_cqe cqe;
		struct srn_cqe_inl inl;
	} u;
	struct srn_cqe_dgram_ips ips;
	struct iovec to = { u.inl.data, sizeof(u.inl.data) };
	uint16_t flags;
	bool odp;

	if (w->total_len > SRN_CQE_DGRAM_MAX || !rw->num_sge ||
	    rw->sge[0].length < SRN_GRH_LEN + w->total_len ||
	    !srn_gid_v4(&srn_device_get()->gid, &ips.sip) ||
	    !srn_gid_v4(dgid, &ips.dip))
		return false;
	if (srn_resp_cq_stamps(p) || srn_resp_inline_check(p, rw, &odp) || odp)
		return false;
	flags = srn_resp_inl_head(p, rw, w, &u.inl);
	srn_iov_copy(&to, 1, src, ns);
	memcpy(u.inl.data2, &ips, sizeof(ips));
	u.inl.flags = flags | SRN_CQE_DGRAM |
		      (uint16_t)(w->total_len << SRN_CQE_INL_LEN_SHIFT);
	srn_cq_post(&p->cqv, &u.cqe);
	return true;
}

/* The target's next receive WQE, taken; false: none (dropped). */
static bool srn_shm_ud_take(struct srn_peer *p, struct srn_rwqe_buf *rb)
{
	uint64_t pos;

	do {
		if (srn_rq_peek(&p->rqv, &rb->w, &pos))
			return false; /* empty (or a bad entry) */
	} while (!srn_resp_commit_recv(p, pos));
	return true;
}

int srn_shm_ud_send(struct srn_qp *qp, const struct srn_swqe *w,
		    const struct srn_ud_dest *d, enum ibv_wc_status *status,
		    enum srn_stall *stall)
{
	struct srn_shm_ud *u = srn_shm_ud_get(d->slot);
	struct iovec src[SRN_MAX_SGE];
	struct srn_rwqe_buf rb;
	struct srn_peer *p = NULL;
	enum ibv_wc_status ts;
	int err = 0;
	const uint8_t *grh;
	struct srn_cqe c;
	bool posted = false;
	unsigned ns;
	uint8_t sl;

	(void)stall;
	*status = IBV_WC_SUCCESS;
	if (srn_local_iov(qp, w, 0, src, &ns)) {
		*status = IBV_WC_LOC_PROT_ERR;
		return 0;
	}
	if (u)
		p = srn_shm_ud_peer(qp, u, d->qpn, &err);
	if (err == -EACCES)
		return err; /* not ours to carry (srn_ud_execute) */
	/* acquire: pairs with the release in srn_shm_up */
	if (p && !atomic_load_explicit(&p->up, memory_order_acquire) &&
	    srn_shm_ctl_retry(p)) {
		srn_dbg("UD: QP 0x%06x to 0x%06x: not attached yet, lost",
			qp->ibqpx.qp_base.qp_num, d->qpn);
		return 0; /* not ready (or refused): lost */
	}
	/* acquire: pairs with the release in srn_shm_on_hup */
	if (!p || atomic_load_explicit(&p->gone, memory_order_acquire) ||
	    !srn_shm_ud_open_to(p, d->qkey) || !srn_shm_ud_take(p, &rb)) {
		srn_dbg("UD: QP 0x%06x to 0x%06x: %s, lost",
			qp->ibqpx.qp_base.qp_num, d->qpn,
			!p ? "no peer" : "closed or no receive WQE");
		return 0; /* lost, as UD may */
	}
	if (srn_shm_ud_inline(p, &rb.w, w, &d->dgid, src, ns))
		return 0;
	grh = srn_shm_ud_grh(u, &d->dgid, (uint32_t)w->total_len, &sl);
	ts = srn_shm_ud_place(p, &rb.w, w, grh, src, ns, sl, &posted);
	if (posted)
		return 0;
	srn_resp_cqe_fill(p, &rb.w, w, IBV_WC_RECV,
			  (uint32_t)(SRN_GRH_LEN + w->total_len), ts, &c);
	c.sl = sl; /* the network header type, as RoCE devices report it */
	srn_cq_post(&p->cqv, &c);
	return 0;
}

/* The UD QP leaves its send path (RESET, destroy): its destinations go.
 * sq_lock held. */
void srn_shm_ud_close(struct srn_qp *qp)
{
	struct srn_shm_ud **u;

	if (!qp->ud)
		return;
	u = (struct srn_shm_ud **)srn_ud_slot(qp, "shm");
	if (!*u)
		return;
	for (unsigned i = 0; i < SRN_SHM_UD_PEERS; i++)
		if ((*u)->peer[i])
			srn_shm_peer_del((*u)->peer[i]);
	free(*u);
	*u = NULL;
}
