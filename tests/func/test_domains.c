// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains: their errors; a parent domain is its
 * PD in every use (an MR registered on it serves a QP of the PD, as a
 * WRITE shows); the application's allocator gives a QP's private buffer
 * and gets it back at destroy; references keep a PD, a TD and a parent
 * domain alive while in use; an extended CQ on a parent domain.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>

#define T 5000

struct alloc_log {
	int allocs, frees;
};

static void *my_alloc(struct ibv_pd *pd, void *ctx, size_t size, size_t align,
		      uint64_t type)
{
	struct alloc_log *l = ctx;
	void *p = NULL;

	l->allocs++;
	return posix_memalign(&p, align < 64 ? 64 : align, size) ? NULL : p;
}

static void my_free(struct ibv_pd *pd, void *ctx, void *ptr, uint64_t type)
{
	struct alloc_log *l = ctx;

	l->frees++;
	free(ptr);
}

static void errors(struct side *s, struct ibv_td *td)
{
	struct ibv_td_init_attr ta = { .comp_mask = 1 };
	struct ibv_parent_domain_init_attr pa = { 0 };
	struct ibv_pd *pdom;

	CHECK(!ibv_alloc_td(s->ctx, &ta) && errno == EINVAL, "td comp_mask");
	CHECK(!ibv_alloc_parent_domain(s->ctx, &pa) && errno == EINVAL,
	      "no PD");
	pa.pd = s->pd;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	CHECK(!ibv_alloc_parent_domain(s->ctx, &pa) && errno == EINVAL,
	      "allocators without functions");
	pa.comp_mask = 1u << 5;
	CHECK(!ibv_alloc_parent_domain(s->ctx, &pa) && errno == EINVAL,
	      "unknown comp_mask");
	pa.comp_mask = 0;
	pa.td = td;
	pdom = ibv_alloc_parent_domain(s->ctx, &pa);
	CHECK(pdom, "parent domain: %s", strerror(errno));
	if (!pdom)
		return;
	pa.pd = pdom;
	CHECK(!ibv_alloc_parent_domain(s->ctx, &pa) && errno == EINVAL,
	      "a parent domain over a parent domain");
	CHECK(ibv_dealloc_td(td) == EBUSY, "TD in use");
	CHECK(!ibv_dealloc_pd(pdom), "dealloc the parent domain");
}

static void allocator(struct side *s, struct ibv_td *td)
{
	struct alloc_log log = { 0 };
	struct ibv_parent_domain_init_attr pa = {
		.pd = s->pd,
		.td = td,
		.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
		.alloc = my_alloc,
		.free = my_free,
		.pd_context = &log,
	};
	struct ibv_pd *pdom = ibv_alloc_parent_domain(s->ctx, &pa);
	struct ibv_qp_init_attr qa = { .send_cq = s->cq,
				       .recv_cq = s->cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = { 8, 8, 1, 1, 0 } };
	struct ibv_cq_init_attr_ex ca = { .cqe = 8,
					  .comp_mask =
						  IBV_CQ_INIT_ATTR_MASK_PD };
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp;

	CHECK(pdom, "parent domain with allocators");
	if (!pdom)
		return;
	qp = ibv_create_qp(pdom, &qa);
	CHECK(qp && log.allocs == 1, "a QP on it: %d allocs", log.allocs);
	CHECK(ibv_dealloc_pd(pdom) == EBUSY, "parent domain in use");
	CHECK(ibv_dealloc_pd(s->pd) == EBUSY, "PD under a parent domain");
	if (qp)
		ibv_destroy_qp(qp);
	CHECK(log.frees == log.allocs, "freed at destroy: %d/%d", log.frees,
	      log.allocs);
	ca.parent_domain = pdom;
	cqx = ibv_create_cq_ex(s->ctx, &ca);
	CHECK(cqx, "extended CQ on a parent domain: %s", strerror(errno));
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
	ca.parent_domain = s->pd;
	CHECK(!ibv_create_cq_ex(s->ctx, &ca) && errno == EINVAL,
	      "extended CQ on a plain PD");
	CHECK(!ibv_dealloc_pd(pdom), "dealloc the parent domain");
}

static int dom_init(struct chan *c, void *arg)
{
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_parent_domain_init_attr pa = { 0 };
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_td *td;
	struct ibv_pd *pdom;
	struct ibv_mr *mr;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	td = ibv_alloc_td(s.ctx, &ta);
	REQUIRE(td, "thread domain: %s", strerror(errno));
	errors(&s, td);
	allocator(&s, td);
	/* an MR registered on the parent domain serves the PD's QP */
	pa.pd = s.pd;
	pdom = ibv_alloc_parent_domain(s.ctx, &pa);
	mr = pdom ? ibv_reg_mr(pdom, s.buf + 65536, 4096,
			       IBV_ACCESS_LOCAL_WRITE) :
		    NULL;
	CHECK(mr, "MR on the parent domain");
	if (mr) {
		memcpy(s.buf + 65536, "via-parent", 10);
		CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf + 65536, 10,
				  mr->lkey, p.addr, p.rkey, IBV_SEND_SIGNALED,
				  1),
		      "write");
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
		      "write with the parent domain's lkey: %s",
		      ibv_wc_status_str(wc.status));
		CHECK(ibv_dealloc_pd(pdom) == EBUSY, "parent domain has an MR");
		ibv_dereg_mr(mr);
	}
	if (pdom)
		CHECK(!ibv_dealloc_pd(pdom), "dealloc");
	CHECK(!ibv_dealloc_td(td), "dealloc td");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int dom_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	CHECK(!memcmp(s.buf, "via-parent", 10), "the WRITE arrived");
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("thread+parent domains", dom_init, dom_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
