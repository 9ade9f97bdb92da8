// SPDX-License-Identifier: MIT
/*
 * Unit tests of the hardware blocks, linked against the library's objects:
 * receive rings, CQ rings (owner bits, overflow, arming), the key table and
 * its check order, the QP state table, the opcode table, the RNR timer,
 * the control socket's reading after a reset, the sharing of received
 * descriptors and the kin verdicts' memo.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cq_poll.h"
#include "engine/engine.h"
#include "proto/srn_ctl_proto.h"
#include "unit_check.h"

static void test_rq_ring(void)
{
	size_t off = 256, bytes = off + srn_rq_bytes(4, 2);
	void *seg = calloc(1, bytes);
	struct srn_rq_shm *rq = (struct srn_rq_shm *)seg;
	struct srn_rq_view v;
	struct srn_rwqe_buf b;
	struct ibv_sge sge[3] = { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } };
	struct ibv_recv_wr wr = { .wr_id = 0, .sg_list = sge, .num_sge = 2 };

	srn_rq_init(rq, 4, 2, off);
	CHECK(srn_rq_view_init(&v, rq, seg, bytes) == 0);
	CHECK(srn_rq_view_init(&v, rq, seg, bytes - 1) == -EPROTO);
	CHECK(srn_rq_claim(&v, &b.w, NULL) == -EAGAIN);
	for (int i = 0; i < 4; i++) {
		wr.wr_id = 100 + i;
		CHECK(srn_rq_post(&v, &wr) == 0);
	}
	CHECK(srn_rq_post(&v, &wr) == -ENOMEM); /* full */
	CHECK(srn_rq_count(&v) == 4);
	wr.num_sge = 3;
	CHECK(srn_rq_post(&v, &wr) == -EINVAL); /* too many SGEs */
	for (int i = 0; i < 4; i++) {
		uint32_t pos = 0;

		CHECK(srn_rq_claim(&v, &b.w, &pos) == 0);
		CHECK(pos == (uint32_t)i + 1); /* for its CQE's rq_pos */
		CHECK(b.w.wr_id == (uint64_t)(100 + i) && b.w.num_sge == 2);
		CHECK(b.w.sge[1].addr == 4 && b.w.sge[1].lkey == 6);
	}
	CHECK(srn_rq_claim(&v, &b.w, NULL) == -EAGAIN);
	/* a corrupt entry is refused, not followed */
	wr.num_sge = 1;
	CHECK(srn_rq_post(&v, &wr) == 0);
	((struct srn_rwqe *)((char *)seg + off + (4 & 3) * v.stride))->num_sge =
		99;
	CHECK(srn_rq_claim(&v, &b.w, NULL) == -EPROTO);
	/* a corrupt geometry is refused at view time */
	rq->max_sge = 1000;
	CHECK(srn_rq_view_init(&v, rq, seg, bytes) == -EPROTO);
	free(seg);
}

/* test_rq_polled_bound's ring (prod 7, bound 3), now named by both QPs of
 * cq, as two QPs of one SRQ: a position from either raises the bound; an
 * older one polled later takes nothing back. */
static void rq_bound_two_qps(struct srn_cq *cq, struct srn_rq_view *v,
			     const struct ibv_recv_wr *wr)
{
	struct srn_cqe c = { 0 };

	cq->rqs[0].v = v;
	c.qp_num = 0x11;
	c.rq_pos = 4; /* prod 7, cons_seen 3 */
	srn_cq_rq_polled(cq, &c);
	CHECK(srn_rq_post(v, wr) == 0); /* bound 4 */
	CHECK(srn_rq_post(v, wr) == -ENOMEM);
	c.qp_num = 0x22;
	c.rq_pos = 6;
	srn_cq_rq_polled(cq, &c);
	CHECK(v->polled_pos == 6);
	CHECK(srn_rq_post(v, wr) == 0); /* bound 6 */
	CHECK(srn_rq_post(v, wr) == 0);
	CHECK(srn_rq_post(v, wr) == -ENOMEM);
	c.qp_num = 0x11;
	c.rq_pos = 5;
	srn_cq_rq_polled(cq, &c);
	CHECK(srn_rq_post(v, wr) == -ENOMEM);
}

/* The owner's bound of cons from its polled receive CQEs: a CQE's rq_pos
 * reaches the view of the QP it names (srn_cq_rq_polled), and a full
 * ring then takes posts up to that bound without cons, never beyond it;
 * a position outside the last lap is ignored. */
static void test_rq_polled_bound(void)
{
	size_t off = 256, bytes = off + srn_rq_bytes(4, 1);
	void *seg = calloc(1, bytes);
	struct srn_rq_shm *rq = (struct srn_rq_shm *)seg;
	struct ibv_sge sge = { 1, 2, 3 };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 };
	struct srn_cqe c = { .qp_num = 0x11, .rq_pos = 2 };
	struct srn_cq cq;
	struct srn_rq_view v, other;

	srn_rq_init(rq, 4, 1, off);
	CHECK(srn_rq_view_init(&v, rq, seg, bytes) == 0);
	other = v;
	memset(&cq, 0, sizeof(cq));
	cq.rqs[0] = (struct srn_cq_rq){ 0x22, &other };
	cq.rqs[1] = (struct srn_cq_rq){ 0x11, &v };
	cq.nrqs = 2;
	for (int i = 0; i < 4; i++)
		CHECK(srn_rq_post(&v, &wr) == 0);
	CHECK(srn_rq_post(&v, &wr) == -ENOMEM); /* full, cons 0 */
	srn_cq_rq_polled(&cq, &c); /* positions 0 and 1 were taken */
	CHECK(v.polled_pos == 2 && other.polled_pos == 0);
	CHECK(srn_rq_post(&v, &wr) == 0);
	CHECK(srn_rq_post(&v, &wr) == 0);
	CHECK(srn_rq_post(&v, &wr) == -ENOMEM); /* beyond the bound */
	c.rq_pos = 0; /* no position: nothing changes */
	srn_cq_rq_polled(&cq, &c);
	CHECK(v.polled_pos == 2);
	c.rq_pos = 6 + 100; /* ahead of prod (6): ignored */
	srn_cq_rq_polled(&cq, &c);
	CHECK(srn_rq_post(&v, &wr) == -ENOMEM);
	c.rq_pos = 1; /* older than the bound already known: no change */
	srn_cq_rq_polled(&cq, &c);
	CHECK(srn_rq_post(&v, &wr) == -ENOMEM);
	c.qp_num = 0x33; /* a QP this CQ does not know */
	c.rq_pos = 6;
	srn_cq_rq_polled(&cq, &c);
	CHECK(srn_rq_post(&v, &wr) == -ENOMEM);
	/* the real cons moved: read as before */
	__atomic_store_n(&rq->cons, 3, __ATOMIC_RELEASE);
	CHECK(srn_rq_post(&v, &wr) == 0);
	CHECK(srn_rq_post(&v, &wr) == -ENOMEM);
	rq_bound_two_qps(&cq, &v, &wr);
	free(seg);
}

#define CQ4_BYTES (sizeof(struct srn_cq_shm) + 4 * sizeof(struct srn_cqe))

/* A CQ segment of 4 slots, and a producer's view of it in *v. */
static struct srn_cq_shm *cq4_new(struct srn_cq_view *v)
{
	struct srn_cq_shm *shm = calloc(1, CQ4_BYTES);

	shm->size = 4;
	shm->cqe_off = sizeof(*shm);
	CHECK(srn_cq_view_init(v, shm, CQ4_BYTES, -1, -1) == 0);
	return shm;
}

static void test_cq_ring(void)
{
	size_t bytes = CQ4_BYTES;
	struct srn_cq_view v;
	struct srn_cq_shm *shm = cq4_new(&v);
	void *seg = shm;
	struct srn_cqe c = { .wr_id = 7, .status = IBV_WC_SUCCESS };

	CHECK(srn_cq_view_init(&v, seg, bytes - 64, -1, -1) == -EPROTO);
	for (int i = 0; i < 4; i++)
		CHECK(srn_cq_post(&v, &c) == 0);
	CHECK(srn_cq_post(&v, &c) == -ENOSPC);
	CHECK(shm->overflow == 1);
	/* owner bits: slot i holds position i+1 */
	for (int i = 0; i < 4; i++)
		CHECK(v.ring[i].owner_seq == (uint32_t)(i + 1));
	/* consumer frees two; the next lap writes new owner tags */
	shm->cons = 2;
	CHECK(srn_cq_post(&v, &c) == 0 && v.ring[0].owner_seq == 5);
	/* arming fires once per arm */
	shm->arm = SRN_CQ_ARM_NEXT;
	CHECK(srn_cq_post(&v, &c) == 0 && shm->events == 1 &&
	      shm->arm == SRN_CQ_ARM_NONE);
	shm->cons = 6;
	CHECK(srn_cq_post(&v, &c) == 0 && shm->events == 1);
	/* solicited-only: an unsolicited success does not fire, an error
	 * does */
	shm->arm = SRN_CQ_ARM_SOLICITED;
	CHECK(srn_cq_post(&v, &c) == 0 && shm->events == 1);
	c.status = IBV_WC_REM_ACCESS_ERR;
	CHECK(srn_cq_post(&v, &c) == 0 && shm->events == 2);
	/* corrupt size refused */
	shm->size = 3;
	CHECK(srn_cq_view_init(&v, seg, bytes, -1, -1) == -EPROTO);
	free(seg);
}

/*
 * A producer's stale prod: it read prod = 10; since, other producers
 * filled slots 10 and 11 and the owner drained them (cons = 12). That is
 * no full ring (p - cons wraps): read prod again. A ring whose cons stays
 * past prod (garbage from whoever maps it) ends the post with -EPROTO,
 * not a hang.
 */
static void test_cq_stale_prod(void)
{
	struct srn_cq_view v;
	struct srn_cq_shm *shm = cq4_new(&v);
	struct srn_cqe c = { .wr_id = 7, .status = IBV_WC_SUCCESS };

	shm->prod = 12;
	shm->cons = 12;
	CHECK(srn_cq_room(&v, 10, 3) == -EAGAIN); /* cons_seen (0) is stale */
	CHECK(v.cons_seen == 12);
	CHECK(srn_cq_room(&v, 10, 3) == -EAGAIN); /* and from the hint */
	CHECK(srn_cq_room(&v, 12, 3) == 0);
	CHECK(srn_cq_room(&v, 15, 3) == 0);
	CHECK(srn_cq_room(&v, 16, 3) == -ENOSPC);
	CHECK(shm->overflow == 0); /* srn_cq_room only looks */
	CHECK(srn_cq_post(&v, &c) == 0 && shm->prod == 13);
	CHECK(shm->overflow == 0);
	shm->prod = 5; /* garbage: cons stays past prod */
	CHECK(srn_cq_post(&v, &c) == -EPROTO);
	free(shm);
}

/* A zero-based type 2 window at index 6 on 0x100 bytes of MR key (entry
 * e), at MR offset 0x200, bound to QP 42. */
static void test_tpt_window(struct srn_tpt_shm *t, struct srn_tpt_entry *mr,
			    uint32_t key)
{
	struct srn_tpt_entry *w = &t->entry[6];
	uint32_t wkey = SRN_KEY_MW_BIT | 9u << 22 | 6u << 8 | 0x11;
	struct srn_key_ref r;

	CHECK(srn_key_index(wkey) == 6 && srn_key_index(key) == 5);
	w->pd_handle = 3;
	w->access = IBV_ACCESS_REMOTE_READ;
	w->flags = SRN_TPT_MW | SRN_TPT_MW_TYPE2;
	w->iova = 0;
	w->length = 0x100;
	w->va = mr->va + 0x200;
	w->mr_key = key;
	w->qpn = 42;
	w->key = wkey;
	CHECK(srn_rkey_check(t, wkey, 3, 42, IBV_ACCESS_REMOTE_READ, 0x10, 0x10,
			     &r) == SRN_KEY_OK &&
	      r.va == 0x7200 && r.iova == 0 && r.map_key == key &&
	      r.map_va == 0x7000 && r.map_iova == 0x10000);
	CHECK(srn_rkey_check(t, key, 3, 42, IBV_ACCESS_REMOTE_READ, 0x10000, 1,
			     &r) == SRN_KEY_OK &&
	      r.map_key == key);
	CHECK(srn_rkey_check(t, wkey, 3, 43, IBV_ACCESS_REMOTE_READ, 0, 1,
			     &r) == SRN_KEY_BAD_QP);
	CHECK(srn_rkey_check(t, wkey, 3, 42, IBV_ACCESS_REMOTE_READ, 0xff, 2,
			     &r) == SRN_KEY_BAD_BOUNDS);
	CHECK(srn_rkey_check(t, wkey, 3, 42, IBV_ACCESS_REMOTE_WRITE, 0, 1,
			     &r) == SRN_KEY_BAD_ACCESS);
	CHECK(srn_rkey_check(t, wkey ^ 1, 3, 42, IBV_ACCESS_REMOTE_READ, 0, 1,
			     &r) == SRN_KEY_BAD_KEY);
	/* a window's key is no local key */
	CHECK(srn_key_check(t, wkey, 3, 0, 0, 1, &r) == SRN_KEY_BAD_KEY);
	w->mr_key = key + (1u << SRN_KEY_INDEX_BITS); /* its MR is gone */
	CHECK(srn_rkey_check(t, wkey, 3, 42, IBV_ACCESS_REMOTE_READ, 0, 1,
			     &r) == SRN_KEY_BAD_KEY);
	w->key = 0;
}

static void test_tpt(void)
{
	struct srn_tpt_shm *t = calloc(1, sizeof(*t));
	struct srn_tpt_entry *e = &t->entry[5];
	struct srn_key_ref r;
	uint32_t key = (77u << SRN_KEY_INDEX_BITS) | 5;

	e->pd_handle = 3;
	e->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	e->iova = 0x10000;
	e->length = 0x1000;
	e->va = 0x7000;
	e->key = key;
	CHECK(srn_key_check(t, key, 3, IBV_ACCESS_REMOTE_READ, 0x10000, 0x1000,
			    &r) == SRN_KEY_OK);
	CHECK(r.va == 0x7000);
	/* the checks run in order: key, PD, access, bounds */
	CHECK(srn_key_check(t, key + (1u << SRN_KEY_INDEX_BITS), 9,
			    IBV_ACCESS_REMOTE_WRITE, 0, 1 << 20,
			    &r) == SRN_KEY_BAD_KEY);
	CHECK(srn_key_check(t, key, 9, IBV_ACCESS_REMOTE_WRITE, 0, 1 << 20,
			    &r) == SRN_KEY_BAD_PD);
	CHECK(srn_key_check(t, key, 3, IBV_ACCESS_REMOTE_WRITE, 0, 1 << 20,
			    &r) == SRN_KEY_BAD_ACCESS);
	CHECK(srn_key_check(t, key, 3, IBV_ACCESS_REMOTE_READ, 0x10001, 0x1000,
			    &r) == SRN_KEY_BAD_BOUNDS);
	CHECK(srn_key_check(t, key, 3, IBV_ACCESS_REMOTE_READ, 0xffff, 1, &r) ==
	      SRN_KEY_BAD_BOUNDS);
	CHECK(srn_key_check(t, key, 3, IBV_ACCESS_REMOTE_READ, 0x10fff,
			    UINT64_MAX, &r) == SRN_KEY_BAD_BOUNDS);
	CHECK(srn_key_check(t, 0, 3, 0, 0, 0, &r) == SRN_KEY_BAD_KEY);
	test_tpt_window(t, e, key);
	e->key = 0; /* deregistered */
	CHECK(srn_key_check(t, key, 3, 0, 0x10000, 1, &r) == SRN_KEY_BAD_KEY);
	free(t);
}

static void test_qp_states(void)
{
	const int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			 IBV_QP_ACCESS_FLAGS;
	const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			IBV_QP_MAX_QP_RD_ATOMIC;

	CHECK(!srn_qp_check_modify(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPT_RC,
				   init));
	CHECK(srn_qp_check_modify(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPT_RC,
				  init & ~IBV_QP_PORT) == -EINVAL);
	CHECK(srn_qp_check_modify(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPT_RC,
				  init | IBV_QP_SQ_PSN) == -EINVAL);
	CHECK(!srn_qp_check_modify(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPT_RC, rtr));
	CHECK(srn_qp_check_modify(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPT_RC,
				  rtr & ~IBV_QP_DEST_QPN) == -EINVAL);
	CHECK(!srn_qp_check_modify(IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPT_RC, rts));
	CHECK(srn_qp_check_modify(IBV_QPS_INIT, IBV_QPS_RTS, IBV_QPT_RC, rts) ==
	      -EINVAL);
	CHECK(srn_qp_check_modify(IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPT_RC,
				  rtr) == -EINVAL);
	CHECK(!srn_qp_check_modify(IBV_QPS_RTS, IBV_QPS_ERR, IBV_QPT_RC,
				   IBV_QP_STATE));
	CHECK(!srn_qp_check_modify(IBV_QPS_ERR, IBV_QPS_RESET, IBV_QPT_RC,
				   IBV_QP_STATE));
	CHECK(srn_qp_check_modify(IBV_QPS_ERR, IBV_QPS_RTS, IBV_QPT_RC, rts) ==
	      -EINVAL);
	CHECK(!srn_qp_check_modify(IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPT_RC,
				   IBV_QP_ACCESS_FLAGS));
	CHECK(srn_qp_check_modify(IBV_QPS_RESET, IBV_QPS_INIT,
				  IBV_QPT_RAW_PACKET, init) == -EOPNOTSUPP);
	/* UD: a Q_Key instead of access flags, no path at RTR */
	CHECK(srn_qp_check_modify(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPT_UD,
				  init) == -EINVAL);
	CHECK(!srn_qp_check_modify(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPT_UD,
				   IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					   IBV_QP_PORT | IBV_QP_QKEY));
	CHECK(!srn_qp_check_modify(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPT_UD,
				   IBV_QP_STATE));
	CHECK(srn_qp_check_modify(IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPT_UD,
				  IBV_QP_STATE) == -EINVAL);
	CHECK(!strcmp(srn_qp_state_names[IBV_QPS_RTS], "RTS"));
}

static void test_opcodes(void)
{
	const struct srn_opcode_info *o = srn_opcode_get(IBV_WR_SEND);

	CHECK(o && (o->flags & SRN_OP_CONSUMES_RECV) &&
	      o->wc_opcode == IBV_WC_SEND && o->recv_wc_opcode == IBV_WC_RECV);
	o = srn_opcode_get(IBV_WR_RDMA_READ);
	CHECK(o && (o->flags & SRN_OP_REMOTE_READ) &&
	      (o->flags & SRN_OP_LOCAL_WRITE) &&
	      !(o->flags & SRN_OP_INLINE_OK));
	o = srn_opcode_get(IBV_WR_RDMA_WRITE_WITH_IMM);
	CHECK(o && (o->flags & SRN_OP_CONSUMES_RECV) &&
	      o->recv_wc_opcode == IBV_WC_RECV_RDMA_WITH_IMM);
	o = srn_opcode_get(IBV_WR_ATOMIC_FETCH_AND_ADD);
	CHECK(o && o->wc_opcode == IBV_WC_FETCH_ADD);
	o = srn_opcode_get(IBV_WR_LOCAL_INV);
	CHECK(o && (o->flags & SRN_OP_LOCAL) &&
	      o->wc_opcode == IBV_WC_LOCAL_INV);
	o = srn_opcode_get(IBV_WR_BIND_MW);
	CHECK(o && (o->flags & SRN_OP_LOCAL) && o->wc_opcode == IBV_WC_BIND_MW);
	o = srn_opcode_get(IBV_WR_SEND_WITH_INV);
	CHECK(o && (o->flags & SRN_OP_INV) &&
	      (o->flags & SRN_OP_CONSUMES_RECV) &&
	      o->recv_wc_opcode == IBV_WC_RECV);
	CHECK(srn_opcode_get(IBV_WR_TSO) == NULL);
	CHECK(srn_opcode_get(1000) == NULL);
}

static void test_timers(void)
{
	CHECK(srn_rnr_timer_ns(1) == 10000);
	CHECK(srn_rnr_timer_ns(0) == 655360000);
	CHECK(srn_rnr_timer_ns(31) == 491520000);
	CHECK(srn_ack_timeout_ns(0) == 0);
	CHECK(srn_ack_timeout_ns(14) == 4096ull << 14);
}

/* A producer that died between reserving a CQ slot and filling it: after
 * the peer's death is known, poll_cq skips the slot and the completions
 * behind it are seen. */
static void test_cq_repair(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l ? ibv_open_device(l[0]) : NULL;
	struct ibv_cq *ibcq = ctx ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	struct srn_cqe c = { .wr_id = 42, .status = IBV_WC_SUCCESS };
	struct ibv_wc wc;
	struct srn_cq *cq;

	CHECK(ibcq != NULL);
	if (!ibcq)
		return;
	cq = to_scq(ibcq);
	__atomic_fetch_add(&cq->shm->prod, 1, __ATOMIC_RELEASE); /* dies */
	CHECK(srn_cq_post(&cq->local, &c) == 0);
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 0); /* stuck behind the hole */
	srn_cq_peer_died(cq);
	cq->repair_after_ns = 1; /* long ago */
	/* the hole is skipped only once seen empty for as long again: a live
	 * producer between claim and publish is left alone */
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 0);
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 0);
	cq->repair_seen_ns = 1; /* first seen long ago */
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 1 && wc.wr_id == 42);
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 0);
	ibv_destroy_cq(ibcq);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
}

/* One crafted inline receive CQE (struct srn_cqe_inl), as a peer could
 * write it, polled by the owner: the completion's status. */
static enum ibv_wc_status cq_inline_flags(struct ibv_cq *ibcq, uint32_t lkey,
					  uint64_t addr, uint32_t len,
					  uint16_t flags)
{
	struct srn_cqe_inl in = {
		.wr_id = 5,
		.addr = addr,
		.lkey = lkey,
		.flags = SRN_CQE_INLINE | flags | len << SRN_CQE_INL_LEN_SHIFT,
	};
	uint32_t grh = flags & SRN_CQE_DGRAM ? 40 : 0;
	struct ibv_wc wc;

	memset(in.data, 0xab, sizeof(in.data));
	memset(in.data2, 0xab, sizeof(in.data2));
	CHECK(srn_cq_post(&to_scq(ibcq)->local, (struct srn_cqe *)&in) == 0);
	if (ibv_poll_cq(ibcq, 1, &wc) != 1 || wc.wr_id != 5)
		return IBV_WC_GENERAL_ERR;
	CHECK(wc.opcode == IBV_WC_RECV);
	CHECK(wc.byte_len == (wc.status == IBV_WC_SUCCESS ? grh + len : 0));
	CHECK(!!(wc.wc_flags & IBV_WC_GRH) ==
	      (grh && wc.status == IBV_WC_SUCCESS));
	return wc.status;
}

static enum ibv_wc_status cq_inline_one(struct ibv_cq *ibcq, uint32_t lkey,
					uint64_t addr, uint32_t len)
{
	return cq_inline_flags(ibcq, lkey, addr, len, 0);
}

static bool all_zero(const uint8_t *b, size_t n)
{
	while (n--)
		if (*b++)
			return false;
	return true;
}

/* A datagram's inline CQE from IPv4 sip to dip (network byte order), 8
 * bytes of 0x5a, into buf: the completion. */
static struct ibv_wc cq_dgram_from(struct ibv_cq *ibcq, uint32_t lkey,
				   uint8_t *buf, uint32_t sip, uint32_t dip)
{
	struct srn_cqe_inl in = {
		.wr_id = 6,
		.addr = (uintptr_t)buf,
		.lkey = lkey,
		.flags = SRN_CQE_INLINE | SRN_CQE_DGRAM |
			 8u << SRN_CQE_INL_LEN_SHIFT,
	};
	struct srn_cqe_dgram_ips ips = { sip, dip };
	struct ibv_wc wc = { 0 };

	memset(in.data, 0x5a, 8);
	memcpy(in.data2, &ips, sizeof(ips));
	CHECK(srn_cq_post(&to_scq(ibcq)->local, (struct srn_cqe *)&in) == 0);
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 1 && wc.wr_id == 6);
	return wc;
}

/* The IPv4 header in a GRH: valid checksum, these addresses. */
static bool grh_v4_is(const uint8_t *g, uint32_t sip, uint32_t dip)
{
	uint32_t sum = 0;

	for (int i = 20; i < 40; i += 2)
		sum += (uint32_t)g[i] << 8 | g[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return all_zero(g, 20) && g[20] == 0x45 && sum == 0xffff &&
	       !memcmp(g + 32, &sip, 4) && !memcmp(g + 36, &dip, 4);
}

/* Datagrams of one length from two sources in a row: each GRH names its
 * own (the owner's cached GRH follows the addresses). */
static void cq_inline_dgram_addrs(struct ibv_cq *ibcq, uint32_t lkey,
				  uint8_t *wbuf)
{
	uint32_t a = htonl(0x0a000001), b = htonl(0x0a000002);
	struct ibv_wc wc;

	for (int i = 0; i < 3; i++) {
		uint32_t s = i == 1 ? b : a, d = i == 1 ? a : b;

		memset(wbuf, 0, 48);
		wc = cq_dgram_from(ibcq, lkey, wbuf, s, d);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 48 &&
		      (wc.wc_flags & IBV_WC_GRH) && (wc.sl & 7) == 2);
		CHECK(grh_v4_is(wbuf, s, d) && wbuf[40] == 0x5a &&
		      wbuf[47] == 0x5a);
	}
	memset(wbuf, 0, 48);
}

/* A datagram's inline CQE (SRN_CQE_DGRAM) into wbuf (n bytes, zero): its
 * GRH is built in front of the payload and counts in the bounds. */
static void cq_inline_dgram(struct ibv_cq *ibcq, uint32_t lkey, uint8_t *wbuf,
			    size_t n)
{
	CHECK(cq_inline_flags(ibcq, lkey, (uintptr_t)wbuf + 10, 14,
			      SRN_CQE_DGRAM) == IBV_WC_SUCCESS);
	CHECK(all_zero(wbuf, 30) && wbuf[30] == 0x45 && wbuf[50] == 0xab &&
	      wbuf[63] == 0xab && all_zero(wbuf + 64, n - 64));
	memset(wbuf, 0, n);
	CHECK(cq_inline_flags(ibcq, lkey, (uintptr_t)wbuf, 15, SRN_CQE_DGRAM) ==
	      IBV_WC_LOC_PROT_ERR); /* longer than a datagram's CQE holds */
	CHECK(cq_inline_flags(ibcq, lkey, (uintptr_t)wbuf + n - 46, 8,
			      SRN_CQE_DGRAM) ==
	      IBV_WC_LOC_PROT_ERR); /* payload fits, GRH and payload do not */
	CHECK(all_zero(wbuf, n));
	cq_inline_dgram_addrs(ibcq, lkey, wbuf);
}

/* A peer writes inline receive CQEs: the owner's poll places their bytes
 * only inside one of its own MRs with LOCAL_WRITE (key, access, bounds
 * from its own TPT) and completes anything else with LOC_PROT_ERR,
 * writing nothing. */
static void test_cq_inline(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l ? ibv_open_device(l[0]) : NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *ibcq = ctx ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	static uint8_t wbuf[256], rbuf[256], gbuf[256];
	struct ibv_mr *w = NULL, *r = NULL, *g = NULL;
	uint32_t gone;

	CHECK(pd && ibcq);
	if (!pd || !ibcq)
		return;
	w = ibv_reg_mr(pd, wbuf, sizeof(wbuf), IBV_ACCESS_LOCAL_WRITE);
	r = ibv_reg_mr(pd, rbuf, sizeof(rbuf), 0); /* no LOCAL_WRITE */
	g = ibv_reg_mr(pd, gbuf, sizeof(gbuf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(w && r && g);
	if (!w || !r || !g)
		return;
	gone = g->lkey;
	ibv_dereg_mr(g);
	CHECK(cq_inline_one(ibcq, w->lkey, (uintptr_t)wbuf + 10, 22) ==
	      IBV_WC_SUCCESS);
	CHECK(all_zero(wbuf, 10) && wbuf[10] == 0xab && wbuf[31] == 0xab &&
	      all_zero(wbuf + 32, sizeof(wbuf) - 32));
	memset(wbuf, 0, sizeof(wbuf));
	CHECK(cq_inline_one(ibcq, w->lkey, (uintptr_t)wbuf + 240, 22) ==
	      IBV_WC_LOC_PROT_ERR); /* past the MR */
	CHECK(cq_inline_one(ibcq, w->lkey, (uintptr_t)wbuf - 4, 8) ==
	      IBV_WC_LOC_PROT_ERR); /* before it */
	CHECK(cq_inline_one(ibcq, w->lkey, (uintptr_t)wbuf, 23) ==
	      IBV_WC_LOC_PROT_ERR); /* longer than a CQE holds */
	CHECK(cq_inline_one(ibcq, r->lkey, (uintptr_t)rbuf, 8) ==
	      IBV_WC_LOC_PROT_ERR); /* not writable */
	CHECK(cq_inline_one(ibcq, 0, (uintptr_t)wbuf, 8) ==
	      IBV_WC_LOC_PROT_ERR);
	CHECK(cq_inline_one(ibcq, gone, (uintptr_t)gbuf, 8) ==
	      IBV_WC_LOC_PROT_ERR); /* deregistered */
	g = ibv_reg_mr(pd, gbuf, sizeof(gbuf),
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	CHECK(g && cq_inline_one(ibcq, g->lkey, (uintptr_t)gbuf, 8) ==
			   IBV_WC_LOC_PROT_ERR); /* ODP: pages may be missing */
	if (g)
		ibv_dereg_mr(g);
	CHECK(all_zero(wbuf, sizeof(wbuf)) && all_zero(rbuf, sizeof(rbuf)) &&
	      all_zero(gbuf, sizeof(gbuf)));
	cq_inline_dgram(ibcq, w->lkey, wbuf, sizeof(wbuf));
	ibv_dereg_mr(w);
	ibv_dereg_mr(r);
	ibv_destroy_cq(ibcq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
}

/* One crafted bounce CQE (SRN_CQE_BOUNCE): its slot filled with 0xcd,
 * polled by the owner: the completion (*wc) and its status. */
static enum ibv_wc_status cq_bounce_one(struct ibv_cq *ibcq, uint32_t lkey,
					uint64_t addr, uint32_t len,
					uint32_t slot, uint16_t more,
					struct ibv_wc *wc)
{
	struct srn_cq *cq = to_scq(ibcq);
	struct srn_cqe_bnc b = { .len = len, .slot = slot };
	struct srn_cqe_inl in = {
		.wr_id = 6,
		.addr = addr,
		.lkey = lkey,
		.flags = SRN_CQE_INLINE | SRN_CQE_BOUNCE | more,
	};

	memcpy(in.data, &b, sizeof(b));
	if (slot < SRN_CQ_BOUNCE_SLOTS)
		memset(cq->local.bounce + (size_t)slot * SRN_CQ_BOUNCE_SIZE,
		       0xcd, SRN_CQ_BOUNCE_SIZE);
	CHECK(srn_cq_post(&cq->local, (struct srn_cqe *)&in) == 0);
	if (ibv_poll_cq(ibcq, 1, wc) != 1 || wc->wr_id != 6)
		return IBV_WC_GENERAL_ERR;
	CHECK(wc->byte_len == (wc->status == IBV_WC_SUCCESS ? len : 0));
	return wc->status;
}

/* A peer writes bounce CQEs: the owner's poll copies the slot they name
 * only inside one of its own MRs with LOCAL_WRITE, and completes one that
 * names a slot or length out of bounds with LOC_PROT_ERR, writing
 * nothing. */
static void test_cq_bounce(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l ? ibv_open_device(l[0]) : NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *ibcq = ctx ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	static uint8_t buf[16384];
	uint64_t a = (uintptr_t)buf;
	struct ibv_mr *w = NULL;
	struct ibv_wc wc;

	CHECK(pd && ibcq && to_scq(ibcq)->local.bounce);
	w = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) :
		 NULL;
	CHECK(w != NULL);
	if (!w || !ibcq || !to_scq(ibcq)->local.bounce)
		return;
	CHECK(cq_bounce_one(ibcq, w->lkey, a + 100, 5000, 3, 0, &wc) ==
	      IBV_WC_SUCCESS);
	CHECK(all_zero(buf, 100) && buf[100] == 0xcd && buf[5099] == 0xcd &&
	      all_zero(buf + 5100, sizeof(buf) - 5100) &&
	      !(wc.wc_flags & IBV_WC_GRH));
	memset(buf, 0, sizeof(buf));
	CHECK(cq_bounce_one(ibcq, w->lkey, a, 48, 255, SRN_CQE_DGRAM, &wc) ==
		      IBV_WC_SUCCESS &&
	      (wc.wc_flags & IBV_WC_GRH) && buf[47] == 0xcd && !buf[48]);
	memset(buf, 0, sizeof(buf));
	CHECK(cq_bounce_one(ibcq, w->lkey, a, 8, SRN_CQ_BOUNCE_SLOTS, 0, &wc) ==
	      IBV_WC_LOC_PROT_ERR); /* no such slot */
	CHECK(cq_bounce_one(ibcq, w->lkey, a, SRN_CQ_BOUNCE_SIZE + 1, 0, 0,
			    &wc) == IBV_WC_LOC_PROT_ERR); /* more than a slot */
	CHECK(cq_bounce_one(ibcq, w->lkey, a + 10000, 8000, 0, SRN_CQE_DGRAM,
			    &wc) == IBV_WC_LOC_PROT_ERR &&
	      !(wc.wc_flags & IBV_WC_GRH)); /* past the MR */
	CHECK(all_zero(buf, sizeof(buf)));
	{ /* a slot is given only while its last user is consumed */
		struct srn_cq *cq = to_scq(ibcq);
		uint64_t c = cq->shm->cons;

		CHECK(srn_cq_bounce_slot(&cq->local, c) != NULL);
		CHECK(srn_cq_bounce_slot(&cq->local,
					 c + SRN_CQ_BOUNCE_SLOTS - 1) != NULL);
		CHECK(srn_cq_bounce_slot(&cq->local, c + SRN_CQ_BOUNCE_SLOTS) ==
		      NULL);
	}
	ibv_dereg_mr(w);
	ibv_destroy_cq(ibcq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
}

/* Resize seen from a peer's view: a new generation is re-read and
 * checked against the segment; garbage is refused (-EPROTO), never
 * followed. A resize flag that stays set makes a producer give up after
 * its bounded wait (-ENOSPC, overflow flagged). */
static void test_cq_peer_geo(void)
{
	size_t bytes = sizeof(struct srn_cq_shm) + 4 * sizeof(struct srn_cqe);
	struct srn_cq_shm *shm = calloc(1, bytes);
	struct srn_cq_view v;
	struct srn_cqe c = { .wr_id = 7, .status = IBV_WC_SUCCESS };
	uint64_t t0;

	shm->size = 4;
	shm->cqe_off = sizeof(*shm);
	CHECK(srn_cq_view_init(&v, shm, bytes, -1, -1) == 0);
	CHECK(srn_cq_post(&v, &c) == 0 && v.ring[0].owner_seq == 1);
	shm->gen = 1;
	shm->size = 1u << 20; /* past the segment */
	CHECK(srn_cq_post(&v, &c) == -EPROTO);
	shm->size = 3;
	CHECK(srn_cq_post(&v, &c) == -EPROTO);
	shm->size = 2; /* a real resize: the view follows it */
	shm->prod = 9;
	shm->cons = 9;
	CHECK(srn_cq_post(&v, &c) == 0 && v.ring[1].owner_seq == 10);
	CHECK(srn_cq_post(&v, &c) == 0 && v.ring[0].owner_seq == 11);
	CHECK(srn_cq_post(&v, &c) == -ENOSPC); /* 2 entries now */
	shm->overflow = 0;
	shm->cons = 11;
	shm->prod |= SRN_CQ_PROD_RESIZING; /* and never cleared */
	t0 = srn_now_ns();
	CHECK(srn_cq_post(&v, &c) == -ENOSPC && shm->overflow == 1);
	CHECK(srn_now_ns() - t0 < 30000000000ull);
	free(shm);
}

/* The owner takes its geometry from its own resize, never from the
 * segment; a resize that finds a slot reserved but not filled gives up
 * (EAGAIN) and leaves the CQ as it was; garbage in prod: EIO. */
static void test_cq_owner_resize(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l ? ibv_open_device(l[0]) : NULL;
	struct ibv_cq *ibcq = ctx ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	struct srn_cqe c = { .wr_id = 42, .status = IBV_WC_SUCCESS };
	struct ibv_wc wc;
	struct srn_cq *cq;
	uint64_t prod;

	CHECK(ibcq != NULL);
	if (!ibcq)
		return;
	cq = to_scq(ibcq);
	CHECK(ibv_resize_cq(ibcq, 100) == 0 && ibcq->cqe == 128);
	cq->shm->gen = 77; /* a peer writes garbage */
	cq->shm->size = 1u << 30;
	CHECK(srn_cq_post(&cq->local, &c) == 0);
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 1 && wc.wr_id == 42);
	prod = cq->shm->prod;
	cq->shm->prod = prod + 1000; /* more than the ring holds */
	CHECK(ibv_resize_cq(ibcq, 4) == EINVAL); /* holds "1000" */
	CHECK(ibv_resize_cq(ibcq, 4096) == EIO); /* past its 128 */
	cq->shm->prod = prod;
	__atomic_fetch_add(&cq->shm->prod, 1, __ATOMIC_RELEASE); /* stops */
	CHECK(ibv_resize_cq(ibcq, 4) == EAGAIN && ibcq->cqe == 128);
	CHECK((cq->shm->prod & SRN_CQ_PROD_RESIZING) == 0);
	cq->ring[prod & cq->mask].owner_seq = (uint32_t)(prod + 1); /* done */
	CHECK(ibv_resize_cq(ibcq, 4) == 0 && ibcq->cqe == 4);
	CHECK(srn_cq_post(&cq->local, &c) == 0);
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 1); /* the late one */
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 1 && wc.wr_id == 42);
	CHECK(ibv_poll_cq(ibcq, 1, &wc) == 0);
	ibv_destroy_cq(ibcq);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
}

/*
 * A control connection whose other end says BYE and closes while a message
 * of ours is still unread there: the kernel reports a reset first
 * (ECONNRESET), ahead of the BYE still queued. The BYE must be read, or a
 * destroyed peer QP is taken for a dead process (its QP moved to ERR).
 */
static void test_ctl_reset(void)
{
	struct srn_ctl_hdr req = { SRN_CTL_MAGIC, SRN_CTL_VERSION,
				   SRN_CTL_STAT_REQ, 0, sizeof(req) };
	struct srn_ctl_hdr h;
	int sv[2], fds[SRN_CTL_MAX_FDS];
	unsigned nfds = SRN_CTL_MAX_FDS;

	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(srn_ctl_sendmsg(sv[0], &req, sizeof(req), NULL, 0) == 0);
	srn_ctl_bye(sv[1]); /* with our request unread */
	close(sv[1]);
	CHECK(srn_ctl_recvmsg(sv[0], &h, sizeof(h), fds, &nfds) ==
		      (ssize_t)sizeof(h) &&
	      nfds == 0 && h.magic == SRN_CTL_MAGIC && h.type == SRN_CTL_BYE);
	nfds = SRN_CTL_MAX_FDS;
	CHECK(srn_ctl_recvmsg(sv[0], &h, sizeof(h), fds, &nfds) ==
	      -ECONNRESET); /* then the end */
	close(sv[0]);
}

/*
 * Two peers' files whose keys fall in one slot of util/fdshare.c's hints,
 * received again and again (a peer's kick eventfd and one of its CQ
 * segments, at every connection): each is kept once, however the keys
 * fall, and the last put closes it.
 */
static void test_fdshare_slot(void)
{
	const int32_t k1 = 0x1234, k2 = k1 + 256; /* one slot */
	int a = eventfd(0, EFD_CLOEXEC), b = eventfd(0, EFD_CLOEXEC);
	int ka, kb, x;

	CHECK(a >= 0 && b >= 0);
	ka = srn_fdshare_get(dup(a), k1);
	kb = srn_fdshare_get(dup(b), k2);
	for (int i = 0; i < 4; i++) {
		x = srn_fdshare_get(dup(a), k1);
		CHECK(x == ka);
		x = srn_fdshare_get(dup(b), k2);
		CHECK(x == kb);
	}
	for (int i = 0; i < 5; i++) {
		srn_fdshare_put(ka);
		srn_fdshare_put(kb);
	}
	CHECK(fcntl(ka, F_GETFD) < 0 && fcntl(kb, F_GETFD) < 0);
	close(a);
	close(b);
}

/* ptrace's access rules as srn_self_kin applies them (util/self.c): the
 * cases this machine cannot show (Yama, capabilities, saved ids). */
static void test_cred_may_trace(void)
{
	const struct srn_cred u = { { 1000, 1000, 1000 },
				    { 100, 100, 100 },
				    0,
				    0,
				    7 };
	struct srn_cred root = { { 0, 0, 0 }, { 0, 0, 0 }, ~0ull, ~0ull, 7 };
	struct srn_cred t = u, e = u;

	CHECK(srn_cred_may_trace(&t, &e, true, 0));
	CHECK(!srn_cred_may_trace(&t, &e, false, 0)); /* not dumpable */
	CHECK(!srn_cred_may_trace(&t, &e, true, 1)); /* Yama 1 */
	CHECK(!srn_cred_may_trace(&t, &e, true, 2));
	CHECK(!srn_cred_may_trace(&t, &e, true, 3));
	e.gid[1] = 101; /* another effective group */
	CHECK(!srn_cred_may_trace(&t, &e, true, 0));
	e = u;
	e.uid[2] = 0; /* a saved uid of root (a setuid program) */
	CHECK(!srn_cred_may_trace(&t, &e, true, 0));
	e = u;
	e.prm = 1ull << 14; /* CAP_IPC_LOCK, which the tracer lacks */
	CHECK(!srn_cred_may_trace(&t, &e, true, 0));
	t.prm = e.prm;
	CHECK(srn_cred_may_trace(&t, &e, true, 0));
	t = u;
	e = u;
	e.userns = 8; /* another user namespace */
	CHECK(!srn_cred_may_trace(&t, &e, true, 0));
	/* CAP_SYS_PTRACE: ids, dumpability and capabilities do not matter,
	 * Yama 1 and 2 let it, 3 does not; not in another namespace */
	e = u;
	CHECK(srn_cred_may_trace(&root, &e, false, 2));
	CHECK(!srn_cred_may_trace(&root, &e, true, 3));
	root.userns = 9;
	CHECK(!srn_cred_may_trace(&root, &e, true, 0));
	CHECK(!srn_cred_may_trace(&e, &root, true, 0)); /* a user over root */
}

struct kin_ask {
	pid_t pid;
	bool kin;
};

static void *kin_thread(void *arg)
{
	struct kin_ask *a = arg;

	a->kin = srn_self_kin(a->pid, srn_euid);
	return NULL;
}

/* srn_self_kin in a thread of its own: the verdict it sees. */
static bool kin_from_thread(pid_t pid)
{
	struct kin_ask a = { pid, false };
	pthread_t t;

	CHECK(pthread_create(&t, NULL, kin_thread, &a) == 0);
	pthread_join(t, NULL);
	return a.kin;
}

/*
 * util/self.c keeps srn_self_kin's verdicts for a second, for the whole
 * process: one thread's verdict on a peer serves the others (the RTR's
 * and the progress thread's), a forked child keeps none of its parent's,
 * and a verdict past its second is worked out again. Shown with a child
 * process that is judged kin, then dies: its pid is still kin to the
 * memo for the rest of the second, and only to the memo.
 */
static void test_kin_memo(void)
{
	pid_t child = fork(), probe;
	int st = -1;

	if (child == 0) {
		pause();
		_exit(0);
	}
	CHECK(child > 0);
	srn_self_refresh();
	CHECK(kin_from_thread(child)); /* our user's, dumpable */
	kill(child, SIGKILL);
	CHECK(waitpid(child, &st, 0) == child);
	CHECK(kin_from_thread(child)); /* another thread: the memo */
	probe = fork();
	if (probe == 0) { /* a child of ours judges afresh */
		srn_self_atfork_child(); /* as the library's atfork handler */
		_exit(srn_self_kin(child, srn_euid) ? 1 : 0);
	}
	CHECK(probe > 0 && waitpid(probe, &st, 0) == probe);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	usleep(1100 * 1000); /* past the memo's second */
	CHECK(!kin_from_thread(child));
}

/* srn_cred_parse of text, written whole into a pipe first (a read then
 * returns all that it asks for). */
static unsigned cred_parse_text(const char *text, struct srn_cred *c)
{
	int p[2];
	unsigned got;

	memset(c, 0, sizeof(*c));
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], text, strlen(text)) == (ssize_t)strlen(text));
	close(p[1]);
	got = srn_cred_parse(p[0], c);
	close(p[0]);
	return got;
}

/*
 * The /proc/PID/status parser (util/self.c): the four lines it needs, ids
 * that fit 32 bits, digits only; a line longer than its 2,047-byte buffer
 * is skipped whole: here a Groups: line whose part past the buffer reads
 * as a Uid: line (it must not be taken for one); a last line without its
 * newline is not taken.
 */
static void test_cred_parse(void)
{
	static const char head[] = "Name:\tx\nUid:\t1\t2\t3\t4\n"
				   "Gid:\t5\t6\t7\t8\n";
	static const char caps[] = "CapPrm:\t00000000000000ff\n"
				   "CapEff:\t0000000000000001\n";
	static char text[8192];
	struct srn_cred c;
	size_t n;

	snprintf(text, sizeof(text), "%s%s", head, caps);
	CHECK(cred_parse_text(text, &c) == 15);
	CHECK(c.uid[0] == 1 && c.uid[1] == 2 && c.uid[2] == 3);
	CHECK(c.gid[0] == 5 && c.gid[2] == 7);
	CHECK(c.prm == 0xff && c.eff == 1);
	/* the Groups: line's first 2,047 bytes fill the buffer */
	n = snprintf(text, sizeof(text), "%sGroups:\t", head);
	memset(text + n, '7', 2047 - strlen("Groups:\t"));
	n += 2047 - strlen("Groups:\t");
	snprintf(text + n, sizeof(text) - n, "Uid:\t9\t9\t9\t9\n%s", caps);
	CHECK(cred_parse_text(text, &c) == 15);
	CHECK(c.uid[0] == 1 && c.uid[1] == 2 && c.prm == 0xff);
	CHECK(cred_parse_text("Uid:\t4294967296\t0\t0\t0\n", &c) == 0);
	CHECK(cred_parse_text("Uid:\t-1\t0\t0\t0\n", &c) == 0);
	CHECK(cred_parse_text("Gid:\t1\t2\t3\t4\nCapEff:\t01", &c) == 2);
}

/*
 * The peer's credentials come from /proc/PID/status, parsed a read at a
 * time (util/self.c): a "Groups:" line longer than the read buffer (a
 * user in hundreds of groups) is skipped whole, and the lines after it
 * (CapPrm, CapEff) are still found. Root only (setgroups).
 */
static void test_kin_groups(void)
{
	static gid_t g[600];
	int p[2], st = -1;
	pid_t child;
	char c;

	if (geteuid() != 0)
		return;
	for (unsigned i = 0; i < 600; i++)
		g[i] = 100000 + i; /* "100123 ": 4,200 bytes in all */
	CHECK(pipe(p) == 0);
	child = fork();
	if (child == 0) {
		close(p[0]);
		if (setgroups(600, g) == 0 && write(p[1], "k", 1) == 1)
			pause();
		_exit(1);
	}
	close(p[1]);
	CHECK(read(p[0], &c, 1) == 1);
	close(p[0]);
	CHECK(kin_from_thread(child)); /* root's, dumpable: kin */
	kill(child, SIGKILL);
	CHECK(waitpid(child, &st, 0) == child);
}

int main(void)
{
	test_rq_ring();
	test_rq_polled_bound();
	test_cq_ring();
	test_cq_stale_prod();
	test_tpt();
	test_qp_states();
	test_opcodes();
	test_timers();
	test_cq_repair();
	test_cq_inline();
	test_cq_bounce();
	test_cq_peer_geo();
	test_cq_owner_resize();
	test_ctl_reset();
	test_fdshare_slot();
	test_cred_may_trace();
	test_cred_parse();
	test_kin_memo();
	test_kin_groups();
	return unit_summary();
}
