// SPDX-License-Identifier: MIT
/*
 * On-demand paging (IBV_ACCESS_ON_DEMAND): explicit ODP MRs over memory
 * never touched before, on both ends of WRITE, READ and SEND; an ODP MR
 * follows the memory mapped at its addresses when it is used (the
 * application replaces the mapping after registering: the peer sees the
 * new pages, not the old ones); implicit ODP (one MR for the whole
 * address space); ibv_advise_mr and its errors; the ODP caps.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#define T 5000
#define LEN 65536
#define ODP                                              \
	(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | \
	 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct odp_info {
	struct peer_info exp, remap, imp;
	uint64_t imp_buf; /* a malloc'd buffer reached via the implicit MR */
};

static uint8_t *fresh_map(size_t len)
{
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int op(struct side *s, enum ibv_wr_opcode opc, void *buf, uint32_t len,
	      uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc;

	if (post_send1(s->qp, opc, buf, len, lkey, raddr, rkey,
		       IBV_SEND_SIGNALED, opc))
		return -1;
	if (poll_one(s->cq, &wc, T))
		return -2;
	return wc.status;
}

static void caps_and_advice(struct side *s, struct ibv_mr *odp)
{
	struct ibv_device_attr_ex a;
	struct ibv_sge sg = { (uintptr_t)odp->addr, 4096, odp->lkey };
	struct ibv_sge plain = { (uintptr_t)s->buf, 4096, s->mr->lkey };
	struct ibv_sge out = { (uintptr_t)odp->addr + LEN - 8, 4096,
			       odp->lkey };

	CHECK(!ibv_query_device_ex(s->ctx, NULL, &a), "query_device_ex");
	CHECK(a.odp_caps.general_caps ==
		      (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT),
	      "general caps 0x%llx",
	      (unsigned long long)a.odp_caps.general_caps);
	CHECK(a.odp_caps.per_transport_caps.rc_odp_caps ==
		      (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		       IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
		       IBV_ODP_SUPPORT_SRQ_RECV),
	      "rc caps 0x%x", a.odp_caps.per_transport_caps.rc_odp_caps);
	CHECK(!ibv_advise_mr(s->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sg, 1),
	      "prefetch");
	CHECK(!ibv_advise_mr(s->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			     IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1),
	      "prefetch for writing, flush");
	CHECK(!ibv_advise_mr(s->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0,
			     &sg, 1),
	      "no-fault prefetch");
	CHECK(ibv_advise_mr(s->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &plain,
			    1) == EINVAL,
	      "a non-ODP MR");
	CHECK(ibv_advise_mr(s->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &out, 1) ==
		      EINVAL,
	      "beyond the MR");
	CHECK(ibv_advise_mr(s->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, &sg,
			    1) == EINVAL,
	      "unknown flag");
	CHECK(ibv_advise_mr(s->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sg, 0) ==
		      EINVAL,
	      "no SGE");
	CHECK(ibv_advise_mr(s->pd, 77, 0, &sg, 1) == EOPNOTSUPP,
	      "unknown advice");
}

static int odp_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct odp_info d;
	uint8_t *lbuf = fresh_map(LEN);
	struct ibv_mr *lmr, *imp;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, &d, sizeof(d)), "MRs");
	lmr = lbuf ? ibv_reg_mr(s.pd, lbuf, LEN, ODP) : NULL;
	imp = ibv_reg_mr(s.pd, NULL, SIZE_MAX, ODP);
	REQUIRE(lmr && imp, "local ODP MRs: %s", strerror(errno));
	CHECK(imp->length == SIZE_MAX && !imp->addr, "implicit MR's range");
	caps_and_advice(&s, lmr);
	/* explicit: WRITE from never-touched pages, READ back */
	memset(lbuf, 0x5c, 8192);
	CHECK(op(&s, IBV_WR_RDMA_WRITE, lbuf, 8192, lmr->lkey, d.exp.addr,
		 d.exp.rkey) == IBV_WC_SUCCESS,
	      "write into ODP");
	CHECK(op(&s, IBV_WR_RDMA_READ, lbuf + 16384, 8192, lmr->lkey,
		 d.exp.addr, d.exp.rkey) == IBV_WC_SUCCESS,
	      "read from ODP");
	CHECK(lbuf[16384] == 0x5c && lbuf[16384 + 8191] == 0x5c, "read back");
	/* a SEND into the target's ODP receive buffer */
	CHECK(op(&s, IBV_WR_SEND, lbuf, 4096, lmr->lkey, 0, 0) ==
		      IBV_WC_SUCCESS,
	      "send into ODP");
	/* a small one, which could ride in the CQE: placed by us too */
	CHECK(op(&s, IBV_WR_SEND, lbuf, 8, lmr->lkey, 0, 0) == IBV_WC_SUCCESS,
	      "small send into ODP");
	chan_barrier(c); /* 1: the target checks, then remaps */
	chan_barrier(c); /* 2 */
	CHECK(op(&s, IBV_WR_RDMA_READ, lbuf + 32768, 16, lmr->lkey,
		 d.remap.addr, d.remap.rkey) == IBV_WC_SUCCESS,
	      "read the remapped range");
	CHECK(!memcmp(lbuf + 32768, "new-pages-here!", 16),
	      "the ODP MR follows the mapping: got '%.15s'", lbuf + 32768);
	/* implicit: local and remote by plain addresses */
	CHECK(op(&s, IBV_WR_RDMA_WRITE, lbuf, 64, imp->lkey, d.imp_buf,
		 d.imp.rkey) == IBV_WC_SUCCESS,
	      "write via implicit MRs");
	chan_barrier(c); /* 3 */
	ibv_dereg_mr(imp);
	ibv_dereg_mr(lmr);
	munmap(lbuf, LEN);
	side_close(&s);
	return t_failures;
}

static int odp_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct odp_info d = { 0 };
	uint8_t *exp = fresh_map(LEN), *rm = fresh_map(LEN);
	uint8_t *ibuf = malloc(4096);
	struct ibv_mr *emr, *rmr, *imp;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	emr = exp ? ibv_reg_mr(s.pd, exp, LEN, ODP) : NULL;
	rmr = rm ? ibv_reg_mr(s.pd, rm, LEN, ODP) : NULL;
	imp = ibv_reg_mr(s.pd, NULL, SIZE_MAX, ODP);
	REQUIRE(emr && rmr && imp && ibuf, "ODP MRs: %s", strerror(errno));
	memcpy(rm, "old-pages-here!", 16);
	d.exp = (struct peer_info){ .rkey = emr->rkey, .addr = (uintptr_t)exp };
	d.remap =
		(struct peer_info){ .rkey = rmr->rkey, .addr = (uintptr_t)rm };
	d.imp = (struct peer_info){ .rkey = imp->rkey };
	d.imp_buf = (uintptr_t)ibuf;
	CHECK(!post_recv1(s.qp, exp + 32768, 4096, emr->lkey, 9),
	      "receive into ODP");
	CHECK(!post_recv1(s.qp, exp + 40960, 64, emr->lkey, 11),
	      "small receive into ODP");
	chan_send(c, &d, sizeof(d));
	chan_barrier(c); /* 1 */
	CHECK(exp[0] == 0x5c && exp[8191] == 0x5c, "WRITE data");
	CHECK(exp[32768] == 0x5c && exp[32768 + 4095] == 0x5c, "SEND data");
	CHECK(exp[40960] == 0x5c && exp[40960 + 7] == 0x5c &&
		      exp[40960 + 8] == 0,
	      "small SEND data, placed before any poll");
	/* new pages at the same addresses, after registration */
	CHECK(mmap(rm, LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == rm,
	      "remap");
	memcpy(rm, "new-pages-here!", 16);
	chan_barrier(c); /* 2 */
	chan_barrier(c); /* 3 */
	CHECK(ibuf[0] == 0x5c && ibuf[63] == 0x5c, "implicit WRITE data");
	ibv_dereg_mr(imp);
	ibv_dereg_mr(rmr);
	ibv_dereg_mr(emr);
	munmap(exp, LEN);
	munmap(rm, LEN);
	free(ibuf);
	side_close(&s);
	return t_failures;
}

/* A page nothing may touch (PROT_NONE): a fault like unmapped memory,
 * and reserved while the test runs, so that no mapping made meanwhile can
 * land there (a page unmapped again could be the next one mapped). */
static uint64_t guard_addr(void)
{
	void *p =
		mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? 0 : (uintptr_t)p;
}

/* A page mapped read-only. */
static uint64_t ro_addr(void)
{
	void *p =
		mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? 0 : (uintptr_t)p;
}

enum hole {
	HOLE_REMOTE,
	HOLE_LOCAL,
	HOLE_READONLY
};

/*
 * Memory under an implicit ODP MR (which covers every address) that may
 * not be touched: a WRITE to it ends REM_ACCESS_ERR at the initiator and
 * the target lives (as a device whose page fault cannot be resolved), and
 * so does a WRITE to a read-only page; a local SGE on it ends
 * LOC_PROT_ERR. The library takes no SIGSEGV itself.
 */
/* Either side's QP pair and implicit ODP MR (NULL: failed). */
static struct ibv_mr *hole_setup(struct side *s, struct chan *c,
				 struct peer_info *p)
{
	struct side_opts o;

	side_opts_default(&o);
	if (side_pair(s, &o, c, p))
		return NULL;
	return ibv_reg_mr(s->pd, NULL, SIZE_MAX, ODP);
}

static int hole_init(struct chan *c, void *arg)
{
	bool local = (uintptr_t)arg == HOLE_LOCAL;
	struct side s;
	struct peer_info p, d;
	struct ibv_mr *imp = hole_setup(&s, c, &p);

	REQUIRE(imp, "setup: %s", strerror(errno));
	REQUIRE(!chan_recv(c, &d, sizeof(d)), "the hole");
	if (local)
		CHECK(op(&s, IBV_WR_RDMA_WRITE, (void *)(uintptr_t)guard_addr(),
			 64, imp->lkey, d.addr, d.rkey) == IBV_WC_LOC_PROT_ERR,
		      "a local SGE on a guard page");
	else
		CHECK(op(&s, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey, d.addr,
			 d.rkey) == IBV_WC_REM_ACCESS_ERR,
		      "a WRITE to a guard page or a read-only one");
	chan_barrier(c);
	ibv_dereg_mr(imp);
	side_close(&s);
	return t_failures;
}

static int hole_target(struct chan *c, void *arg)
{
	enum hole h = (enum hole)(uintptr_t)arg;
	struct side s;
	struct peer_info p, d;
	struct ibv_mr *imp = hole_setup(&s, c, &p);

	REQUIRE(imp, "setup: %s", strerror(errno));
	/* the local case writes into our (mapped) buffer */
	d = (struct peer_info){ .rkey = imp->rkey };
	if (h == HOLE_LOCAL)
		d = (struct peer_info){ .rkey = s.mr->rkey,
					.addr = (uintptr_t)s.buf };
	else
		d.addr = h == HOLE_REMOTE ? guard_addr() : ro_addr();
	chan_send(c, &d, sizeof(d));
	chan_barrier(c);
	ibv_dereg_mr(imp);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("odp_explicit+remap+implicit+advise", odp_init, odp_target, NULL, m,
	    pass, fail);
	RUN("odp_write_to_guard_page->REM_ACCESS_ERR", hole_init, hole_target,
	    (void *)HOLE_REMOTE, m, pass, fail);
	RUN("odp_local_sge_guard_page->LOC_PROT_ERR", hole_init, hole_target,
	    (void *)HOLE_LOCAL, m, pass, fail);
	RUN("odp_write_to_readonly->REM_ACCESS_ERR", hole_init, hole_target,
	    (void *)HOLE_READONLY, m, pass, fail);
	return test_summary(pass, fail);
}
