// SPDX-License-Identifier: MIT
/*
 * Memory windows: allocation; type 1 binds (ibv_bind_mw) and type 2 binds
 * (IBV_WR_BIND_MW); WRITE, READ and atomics through a window inside its
 * bounds and access, refused outside them (REM_ACCESS_ERR); zero-based
 * windows; the old rkey refused after a rebind, after an unbind, after
 * LOCAL_INV, after a SEND_WITH_INV (whose receive completion carries
 * IBV_WC_WITH_INV and the key) and after dealloc; each bind error
 * completing with MW_BIND_ERR (LOCAL_INV errors with LOC_QP_OP_ERR, a bad
 * SEND_WITH_INV with REM_INV_REQ_ERR); an MR with a bound window cannot
 * be deregistered nor re-registered (EBUSY). The read-only window is
 * bound on an MR with MW_BIND as its one right (shared with same-host
 * peers, as a window may grant remote rights: also under
 * SOFTRNIC_LOCAL_MR=shared, func_mw_*_shared).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>

#define T 5000
#define MR_OFF 65536
#define MR_LEN 65536
#define W_OFF 4096 /* the window in the MR */
#define W_LEN 4096
#define RWA                                                 \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define MR_ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)

enum mw_case {
	C_T1_OK,
	C_T1_RO,
	C_T1_REBIND,
	C_T1_UNBIND,
	C_T2_LOCAL_INV,
	C_T2_ZERO,
	C_T2_SEND_INV,
	C_T2_DEALLOC,
	C_NR
};

static const char *const mw_case_names[] = {
	"type1_bounds_access", "type1_read_only", "type1_rebind",
	"type1_unbind",	       "type2_local_inv", "type2_zero_based",
	"type2_send_with_inv", "type2_dealloc",
};

struct mw_info {
	uint32_t rkey, old_rkey;
	uint64_t addr; /* the window's first address (0: zero based) */
};

/* Posts a bind of mw (type 2: a BIND_MW WR, type 1: ibv_bind_mw) and
 * returns its completion status; *rkey_p the window's new key. */
static int mw_bind(struct side *s, struct ibv_mw *mw, struct ibv_mr *mr,
		   uint64_t addr, uint64_t len, unsigned access,
		   uint32_t *rkey_p)
{
	struct ibv_mw_bind_info bi = { mr, addr, len, access };
	struct ibv_wc wc;

	if (mw->type == IBV_MW_TYPE_1) {
		struct ibv_mw_bind b = { .wr_id = 11,
					 .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = bi };

		if (ibv_bind_mw(s->qp, mw, &b))
			return -1;
		*rkey_p = mw->rkey;
	} else {
		struct ibv_send_wr wr = { .wr_id = 12,
					  .opcode = IBV_WR_BIND_MW,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = *rkey_p = ibv_inc_rkey(mw->rkey);
		wr.bind_mw.bind_info = bi;
		if (ibv_post_send(s->qp, &wr, &bad))
			return -1;
	}
	if (poll_one(s->cq, &wc, T))
		return -1;
	if (wc.status == IBV_WC_SUCCESS && wc.opcode != IBV_WC_BIND_MW)
		return -2;
	return wc.status;
}

static int local_inv(struct side *s, uint32_t key)
{
	struct ibv_send_wr wr = { .wr_id = 13,
				  .opcode = IBV_WR_LOCAL_INV,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc;

	wr.invalidate_rkey = key;
	if (ibv_post_send(s->qp, &wr, &bad) || poll_one(s->cq, &wc, T))
		return -1;
	if (wc.status == IBV_WC_SUCCESS && wc.opcode != IBV_WC_LOCAL_INV)
		return -2;
	return wc.status;
}

/* One WRITE/READ of len bytes, or an 8-byte fetch-and-add. */
static int op1(struct side *s, enum ibv_wr_opcode op, uint64_t raddr,
	       uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, len, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		sge.length = 8;
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 5;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(s->qp, &wr, &bad) || poll_one(s->cq, &wc, T))
		return -1;
	return wc.status;
}

static int send_inv(struct side *s, uint32_t key)
{
	struct ibv_send_wr wr = { .wr_id = 14,
				  .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc;

	wr.invalidate_rkey = key;
	if (ibv_post_send(s->qp, &wr, &bad) || poll_one(s->cq, &wc, T))
		return -1;
	return wc.status;
}

#define REQUIRE_V(cond)                     \
	do {                                \
		bool req_ok_ = (cond);      \
		CHECK(req_ok_, "required"); \
		if (!req_ok_)               \
			return;             \
	} while (0)

#define OK IBV_WC_SUCCESS
#define DENIED IBV_WC_REM_ACCESS_ERR

static void init_case(struct side *s, struct chan *c, enum mw_case k)
{
	struct mw_info d;
	uint64_t end;

	REQUIRE_V(!chan_recv(c, &d, sizeof(d)));
	end = d.addr + W_LEN;
	memcpy(s->buf, "window", 6);
	if (k == C_T1_RO) {
		CHECK(op1(s, IBV_WR_RDMA_READ, d.addr, d.rkey, 6) == OK,
		      "read");
		CHECK(op1(s, IBV_WR_RDMA_WRITE, d.addr, d.rkey, 6) == DENIED,
		      "write without REMOTE_WRITE");
		return;
	}
	CHECK(op1(s, IBV_WR_RDMA_WRITE, d.addr, d.rkey, 6) == OK, "write in");
	switch (k) {
	case C_T1_OK:
		CHECK(op1(s, IBV_WR_RDMA_READ, end - 8, d.rkey, 8) == OK,
		      "read at the end");
		CHECK(op1(s, IBV_WR_ATOMIC_FETCH_AND_ADD, d.addr + 8, d.rkey,
			  8) == OK,
		      "atomic in");
		chan_barrier(c);
		CHECK(op1(s, IBV_WR_RDMA_WRITE, end - 2, d.rkey, 4) == DENIED,
		      "write across the end");
		break;
	case C_T1_REBIND:
	case C_T1_UNBIND:
	case C_T2_LOCAL_INV:
	case C_T2_DEALLOC:
		chan_barrier(c); /* the target changes the window */
		REQUIRE_V(!chan_recv(c, &d, sizeof(d)));
		if (k == C_T1_REBIND)
			CHECK(op1(s, IBV_WR_RDMA_WRITE, d.addr, d.rkey, 6) ==
				      OK,
			      "write with the new rkey");
		CHECK(op1(s, IBV_WR_RDMA_WRITE, d.addr, d.old_rkey, 6) ==
			      DENIED,
		      "write with the old rkey");
		break;
	case C_T2_ZERO:
		CHECK(op1(s, IBV_WR_RDMA_WRITE, 100, d.rkey, 6) == OK,
		      "write at offset 100");
		chan_barrier(c);
		CHECK(op1(s, IBV_WR_RDMA_WRITE, W_LEN, d.rkey, 1) == DENIED,
		      "write past a zero-based window");
		break;
	case C_T2_SEND_INV:
		chan_barrier(c); /* the target posted a receive */
		CHECK(send_inv(s, d.rkey) == OK, "SEND_WITH_INV");
		CHECK(op1(s, IBV_WR_RDMA_WRITE, d.addr, d.rkey, 6) == DENIED,
		      "write after SEND_WITH_INV");
		break;
	default:
		break;
	}
}

static int mw_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	init_case(&s, c, (enum mw_case)(uintptr_t)arg);
	chan_barrier(c); /* done */
	side_close(&s);
	return t_failures;
}

static unsigned target_access(enum mw_case k)
{
	return k == C_T1_RO ? IBV_ACCESS_REMOTE_READ : RWA;
}

/* The target's part after the first bind of window mw. */
static void target_case(struct side *s, struct chan *c, enum mw_case k,
			struct ibv_mw *mw, struct ibv_mr *mr, struct mw_info *d)
{
	uint8_t *w = (uint8_t *)mr->addr + W_OFF;
	uint32_t key = d->rkey;
	struct ibv_wc wc;

	switch (k) {
	case C_T1_OK:
		chan_barrier(c);
		CHECK(!memcmp(w, "window", 6) && w[8] == 5, "data landed");
		CHECK(ibv_dereg_mr(mr) == EBUSY, "dereg with a bound window");
		CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				   0, MR_ACC | IBV_ACCESS_REMOTE_READ) ==
				      IBV_REREG_MR_ERR_INPUT &&
			      errno == EBUSY,
		      "rereg with a bound window");
		break;
	case C_T1_REBIND:
	case C_T1_UNBIND:
	case C_T2_LOCAL_INV:
	case C_T2_DEALLOC:
		chan_barrier(c);
		if (k == C_T1_REBIND)
			CHECK(mw_bind(s, mw, mr, d->addr, W_LEN, RWA, &key) ==
					      OK &&
				      key != d->rkey,
			      "rebind, new key");
		else if (k == C_T1_UNBIND)
			CHECK(mw_bind(s, mw, mr, 0, 0, 0, &key) == OK,
			      "unbind");
		else if (k == C_T2_LOCAL_INV)
			CHECK(local_inv(s, d->rkey) == OK, "LOCAL_INV");
		else
			CHECK(!ibv_dealloc_mw(mw), "dealloc");
		*d = (struct mw_info){ key, d->rkey, d->addr };
		chan_send(c, d, sizeof(*d));
		break;
	case C_T2_ZERO:
		chan_barrier(c);
		CHECK(!memcmp(w + 100, "window", 6) && !memcmp(w, "window", 6),
		      "zero-based offsets");
		break;
	case C_T2_SEND_INV:
		REQUIRE_V(!post_recv1(s->qp, s->buf, 64, s->mr->lkey, 21));
		chan_barrier(c);
		CHECK(!poll_one(s->cq, &wc, T) && wc.status == OK &&
			      wc.opcode == IBV_WC_RECV &&
			      (wc.wc_flags & IBV_WC_WITH_INV) &&
			      wc.invalidated_rkey == d->rkey,
		      "receive completion WITH_INV");
		break;
	default:
		break;
	}
}

static int mw_target(struct chan *c, void *arg)
{
	enum mw_case k = (enum mw_case)(uintptr_t)arg;
	int type = k >= C_T2_LOCAL_INV ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct mw_info d = { 0 };
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	unsigned acc = target_access(k);

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	/* the read-only window's MR has no right but MW_BIND: the window
	 * alone grants the peer its READ */
	mr = ibv_reg_mr(s.pd, s.buf + MR_OFF, MR_LEN,
			k == C_T1_RO ? IBV_ACCESS_MW_BIND : MR_ACC);
	mw = ibv_alloc_mw(s.pd, type);
	REQUIRE(mr && mw, "MR and MW: %s", strerror(errno));
	d.addr = (uintptr_t)mr->addr + W_OFF;
	if (k == C_T2_ZERO)
		acc |= IBV_ACCESS_ZERO_BASED;
	REQUIRE(mw_bind(&s, mw, mr, d.addr, W_LEN, acc, &d.rkey) == OK, "bind");
	CHECK(d.rkey == mw->rkey || type == IBV_MW_TYPE_2, "mw->rkey");
	if (k == C_T2_ZERO)
		d.addr = 0;
	chan_send(c, &d, sizeof(d));
	target_case(&s, c, k, mw, mr, &d);
	chan_barrier(c); /* done */
	if (k != C_T2_DEALLOC)
		ibv_dealloc_mw(mw);
	CHECK(!ibv_dereg_mr(mr), "dereg after dealloc");
	side_close(&s);
	return t_failures;
}

/* ---- bind errors: each leaves the target's QP in ERR ---- */
enum mw_err {
	E_NO_MW_BIND,
	E_TOO_LONG,
	E_ACCESS,
	E_OTHER_PD,
	E_T2_KEY,
	E_T2_REBIND,
	E_T1_ZERO,
	E_INV_MR,
	E_INV_T1,
	E_NR
};

static const char *const mw_err_names[] = {
	"err_mr_without_mw_bind", "err_window_beyond_mr",
	"err_access_beyond_mr",	  "err_qp_of_other_pd",
	"err_type2_key_index",	  "err_type2_bound_twice",
	"err_type1_zero_based",	  "err_local_inv_mr",
	"err_local_inv_type1",
};

static int bind_err(struct side *s, enum mw_err e)
{
	int t2 = e == E_OTHER_PD || e == E_T2_KEY || e == E_T2_REBIND;
	struct ibv_pd *pd = e == E_OTHER_PD ? ibv_alloc_pd(s->ctx) : s->pd;
	unsigned macc = e == E_NO_MW_BIND ? IBV_ACCESS_LOCAL_WRITE :
			e == E_ACCESS	  ? IBV_ACCESS_MW_BIND :
					    MR_ACC;
	struct ibv_mr *mr = ibv_reg_mr(pd, s->buf + MR_OFF, MR_LEN, macc);
	struct ibv_mw *mw =
		ibv_alloc_mw(pd, t2 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
	uint64_t a = (uintptr_t)s->buf + MR_OFF;
	uint32_t key = 0;
	int st = -3;

	if (!mr || !mw)
		return -4;
	if (e == E_INV_MR || e == E_INV_T1) {
		if (e == E_INV_T1 &&
		    mw_bind(s, mw, mr, a, W_LEN, RWA, &key) != OK)
			return -5;
		st = local_inv(s, e == E_INV_MR ? mr->rkey : key);
	} else if (e == E_T2_KEY) {
		struct ibv_send_wr wr = { .opcode = IBV_WR_BIND_MW,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		struct ibv_wc wc;

		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = mw->rkey + 0x100; /* not its index */
		wr.bind_mw.bind_info =
			(struct ibv_mw_bind_info){ mr, a, W_LEN, RWA };
		if (!ibv_post_send(s->qp, &wr, &bad) &&
		    !poll_one(s->cq, &wc, T))
			st = wc.status;
	} else {
		if (e == E_T2_REBIND &&
		    mw_bind(s, mw, mr, a, W_LEN, RWA, &key) != OK)
			return -5;
		st = mw_bind(s, mw, mr, a, e == E_TOO_LONG ? MR_LEN + 1 : W_LEN,
			     e == E_ACCESS  ? IBV_ACCESS_REMOTE_WRITE :
			     e == E_T1_ZERO ? IBV_ACCESS_REMOTE_READ |
						      IBV_ACCESS_ZERO_BASED :
					      RWA,
			     &key);
	}
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr);
	if (pd != s->pd)
		ibv_dealloc_pd(pd);
	return st;
}

static int err_target(struct chan *c, void *arg)
{
	enum mw_err e = (enum mw_err)(uintptr_t)arg;
	int want = e >= E_INV_MR ? IBV_WC_LOC_QP_OP_ERR : IBV_WC_MW_BIND_ERR;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	int st;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	st = bind_err(&s, e);
	CHECK(st == want, "%s: status %d, want %d", mw_err_names[e], st, want);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* A SEND_WITH_INV naming an MR's key: REM_INV_REQ_ERR at the initiator. */
static int send_inv_bad_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(send_inv(&s, p.rkey) == IBV_WC_REM_INV_REQ_ERR,
	      "SEND_WITH_INV of an MR key");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int send_inv_bad_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	post_recv1(s.qp, s.buf, 64, s.mr->lkey, 1);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* A type 2 window serves only the QP it is bound to: the target binds it
 * on its second QP; the initiator's QP connected to the first is refused. */
static int other_qp_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s, s2;
	struct peer_info p, p2;
	struct mw_info d;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p) && !side_pair(&s2, &o, c, &p2),
		"setup");
	REQUIRE(!chan_recv(c, &d, sizeof(d)), "window");
	CHECK(op1(&s2, IBV_WR_RDMA_WRITE, d.addr, d.rkey, 6) == OK,
	      "write from the QP the window is bound to");
	if (arg) { /* SEND_WITH_INV of it from another QP: refused, and
		    * the window stays valid */
		CHECK(send_inv(&s, d.rkey) == IBV_WC_REM_INV_REQ_ERR,
		      "SEND_WITH_INV from another QP");
		CHECK(op1(&s2, IBV_WR_RDMA_WRITE, d.addr, d.rkey, 6) == OK,
		      "the window is still valid");
	} else {
		CHECK(op1(&s, IBV_WR_RDMA_WRITE, d.addr, d.rkey, 6) == DENIED,
		      "write from another QP");
	}
	chan_barrier(c);
	side_close(&s2);
	side_close(&s);
	return t_failures;
}

/* The target's second QP, in the same PD and CQ as s. */
static int second_qp(struct side *s, struct side *s2, struct side_opts *o,
		     struct chan *c)
{
	struct ibv_qp_init_attr ia = { .send_cq = s->cq,
				       .recv_cq = s->cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = { 16, 16, 1, 1, 0 } };
	struct peer_info me, peer;

	*s2 = *s;
	s2->qp = ibv_create_qp(s->pd, &ia);
	if (!s2->qp)
		return -1;
	side_info(s2, &me);
	if (chan_send(c, &me, sizeof(me)) ||
	    chan_recv(c, &peer, sizeof(peer)) || side_connect(s2, &peer, o))
		return -1;
	chan_barrier(c);
	return 0;
}

static int other_qp_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s, s2;
	struct peer_info p;
	struct mw_info d = { 0 };
	struct ibv_mr *mr;
	struct ibv_mw *mw;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p) && !second_qp(&s, &s2, &o, c),
		"setup");
	mr = ibv_reg_mr(s.pd, s.buf + MR_OFF, MR_LEN, MR_ACC);
	mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	REQUIRE(mr && mw, "MR and MW");
	if (arg) /* for the SEND_WITH_INV on the first QP */
		REQUIRE(!post_recv1(s.qp, s.buf, 64, s.mr->lkey, 1), "recv");
	d.addr = (uintptr_t)mr->addr;
	REQUIRE(mw_bind(&s2, mw, mr, d.addr, W_LEN, RWA, &d.rkey) == OK,
		"bind on the second QP");
	chan_send(c, &d, sizeof(d));
	chan_barrier(c);
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr);
	ibv_destroy_qp(s2.qp);
	side_close(&s);
	return t_failures;
}

/* Allocation: both types, a wrong type refused, keys of windows. */
static void mw_alloc_checks(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	struct ibv_device_attr da;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mw *a, *b;

	t_role = "alloc";
	if (!pd) {
		CHECK(pd, "device");
		return;
	}
	CHECK(!ibv_query_device(ctx, &da) &&
		      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
		      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) &&
		      da.max_mw > 0,
	      "device caps");
	a = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	b = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(a && b && a->type == IBV_MW_TYPE_1 && b->type == IBV_MW_TYPE_2 &&
		      a->rkey != b->rkey && a->pd == pd,
	      "alloc");
	errno = 0;
	CHECK(!ibv_alloc_mw(pd, (enum ibv_mw_type)3) && errno == EINVAL,
	      "wrong type");
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "PD busy with windows");
	CHECK(!ibv_dealloc_mw(a) && !ibv_dealloc_mw(b), "dealloc");
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;
	int f0 = t_failures;

	mw_alloc_checks();
	if (t_failures == f0)
		pass++;
	else
		fail++;
	for (uintptr_t k = 0; k < C_NR; k++)
		RUN(mw_case_names[k], mw_init, mw_target, (void *)k, m, pass,
		    fail);
	for (uintptr_t e = 0; e < E_NR; e++)
		RUN(mw_err_names[e], role_idle, err_target, (void *)e, m, pass,
		    fail);
	RUN("type2_other_qp", other_qp_init, other_qp_target, NULL, m, pass,
	    fail);
	RUN("type2_send_inv_other_qp", other_qp_init, other_qp_target,
	    (void *)1, m, pass, fail);
	RUN("send_with_inv_mr_key", send_inv_bad_init, send_inv_bad_target,
	    NULL, m, pass, fail);
	return test_summary(pass, fail);
}
