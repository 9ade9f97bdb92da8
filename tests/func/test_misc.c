// SPDX-License-Identifier: MIT
/*
 * Memory and object semantics: MRs with an iova other than their address,
 * MRs over memory that is already a shared mapping, MRs on a thread's stack
 * (which cannot be remapped: peers reach them with process_vm_*), AH objects, a QP brought back from ERR through RESET, the GID
 * queries agreeing, and fork(): a child cannot corrupt its parent's QPs or
 * registered memory and can open the device itself.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define T 5000

/* ---- iova, shared mappings, stack ---- */
static int mem_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p, extra, stack;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, &extra, sizeof(extra)), "extra MRs");
	REQUIRE(!chan_recv(c, &stack, sizeof(stack)), "stack MR");
	/* iova: the target registered its buffer at iova 0x10000000 */
	memcpy(s.buf, "iova-addressed", 14);
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 14, s.mr->lkey,
			  0x10000000 + 64, extra.rkey, IBV_SEND_SIGNALED, 1),
	      "write by iova");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "iova write: %s", ibv_wc_status_str(wc.status));
	/* a MAP_SHARED buffer at the target */
	memcpy(s.buf, "into-shared-map", 15);
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 15, s.mr->lkey,
			  extra.addr, extra.qpn /* rkey of the shared MR */,
			  IBV_SEND_SIGNALED, 2),
	      "write shared");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "shared-map write: %s", ibv_wc_status_str(wc.status));
	/* the target's stack buffer: written, then read back */
	memcpy(s.buf, "onto-the-stack", 14);
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 14, s.mr->lkey,
			  stack.addr + 8, stack.rkey, IBV_SEND_SIGNALED, 3),
	      "write stack");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "stack write: %s", ibv_wc_status_str(wc.status));
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_READ, s.buf + 100, 22, s.mr->lkey,
			  stack.addr, stack.rkey, IBV_SEND_SIGNALED, 4),
	      "read stack");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "stack read: %s", ibv_wc_status_str(wc.status));
	CHECK(!memcmp(s.buf + 100, "stack:\0\0onto-the-stack", 22),
	      "stack read-back");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int mem_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p, extra = { 0 };
	struct ibv_mr *iova_mr, *shm_mr, *stack_mr;
	char stackbuf[256];
	uint8_t *shm;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	iova_mr = ibv_reg_mr_iova2(s.pd, s.buf + 65536, 4096, 0x10000000,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE);
	shm = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	shm_mr = ibv_reg_mr(s.pd, shm, 65536,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	memset(stackbuf, 0, sizeof(stackbuf));
	memcpy(stackbuf, "stack:", 6);
	stack_mr = ibv_reg_mr(s.pd, stackbuf, sizeof(stackbuf),
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ);
	CHECK(iova_mr && shm_mr && stack_mr, "registrations");
	CHECK(!iova_mr || iova_mr->addr == s.buf + 65536, "mr->addr");
	extra.rkey = iova_mr ? iova_mr->rkey : 0;
	extra.qpn = shm_mr ? shm_mr->rkey : 0;
	extra.addr = (uintptr_t)shm;
	chan_send(c, &extra, sizeof(extra));
	memset(&extra, 0, sizeof(extra));
	extra.rkey = stack_mr ? stack_mr->rkey : 0;
	extra.addr = (uintptr_t)stackbuf;
	chan_send(c, &extra, sizeof(extra));
	chan_barrier(c);
	CHECK(!memcmp(stackbuf + 8, "onto-the-stack", 14), "data on the stack");
	CHECK(!memcmp(s.buf + 65536 + 64, "iova-addressed", 14),
	      "data at iova 0x10000040");
	CHECK(!memcmp(shm, "into-shared-map", 15), "data in the shared map");
	if (stack_mr)
		ibv_dereg_mr(stack_mr);
	if (shm_mr)
		ibv_dereg_mr(shm_mr);
	if (iova_mr)
		ibv_dereg_mr(iova_mr);
	munmap(shm, 65536);
	side_close(&s);
	return t_failures;
}

/* ---- ERR -> RESET -> reuse, AH, GIDs ---- */
static int objects(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ibv_ah_attr aa;
	struct ibv_gid_entry ge;
	union ibv_gid gid, zero = { 0 };
	struct ibv_ah *ah;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(!post_recv1(s.qp, s.buf, 64, s.mr->lkey, 5), "recv");
	CHECK(!ibv_modify_qp(s.qp, &a, IBV_QP_STATE), "to ERR");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_WR_FLUSH_ERR &&
		      wc.wr_id == 5,
	      "posted receive flushed on ERR");
	a.qp_state = IBV_QPS_RESET;
	CHECK(!ibv_modify_qp(s.qp, &a, IBV_QP_STATE), "ERR -> RESET");
	CHECK(s.qp->state == IBV_QPS_RESET, "state RESET");
	CHECK(!side_connect(&s, &p, &o), "RESET -> INIT -> RTR -> RTS again");
	/* AH: RoCE needs a GRH */
	memset(&aa, 0, sizeof(aa));
	aa.port_num = 1;
	errno = 0;
	CHECK(!ibv_create_ah(s.pd, &aa) && errno == EINVAL, "AH without GRH");
	aa.is_global = 1;
	aa.grh.dgid = p.gid;
	ah = ibv_create_ah(s.pd, &aa);
	CHECK(ah != NULL, "AH with GRH");
	if (ah)
		CHECK(!ibv_destroy_ah(ah), "destroy AH");
	/* GID 0 agrees across queries; other slots are empty */
	CHECK(!ibv_query_gid(s.ctx, 1, 0, &gid) && gid.raw[10] == 0xff &&
		      gid.raw[11] == 0xff,
	      "GID 0 is IPv4-mapped");
	CHECK(!ibv_query_gid_ex(s.ctx, 1, 0, &ge, 0) &&
		      !memcmp(&ge.gid, &gid, 16) &&
		      ge.gid_type == IBV_GID_TYPE_ROCE_V2,
	      "gid_ex agrees, RoCE v2");
	CHECK(!ibv_query_gid(s.ctx, 1, 3, &gid) && !memcmp(&gid, &zero, 16),
	      "empty slot reads as zero");
	CHECK(ibv_query_gid_ex(s.ctx, 1, 3, &ge, 0) == ENODATA,
	      "empty slot: ENODATA");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- PSNs ----
 * Both QPs start at a PSN the applications agreed on (not 0): traffic
 * flows, and over TCP, where PSNs are on the wire, ibv_query_qp reports
 * them moving on from there (one per request). */
#define PSN0 0xfedcb0u

static int psn_init(struct chan *c, void *arg)
{
	const char *t = getenv("SOFTRNIC_TRANSPORT");
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	o.psn = PSN0;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < 20; i++) {
		CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 64,
				  s.mr->lkey, p.addr, p.rkey, IBV_SEND_SIGNALED,
				  i),
		      "write");
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
		      "write %d from PSN 0x%x: %s", i, PSN0,
		      ibv_wc_status_str(wc.status));
	}
	CHECK(!ibv_query_qp(s.qp, &qa, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &init),
	      "query");
	if (t && !strcmp(t, "tcp"))
		CHECK(qa.sq_psn == PSN0 + 20 && qa.rq_psn == PSN0,
		      "PSNs on the wire: sq 0x%x (0x%x), rq 0x%x (0x%x)",
		      qa.sq_psn, PSN0 + 20, qa.rq_psn, PSN0);
	chan_barrier(c);
	chan_barrier(c); /* the target queried while we were still here */
	side_close(&s);
	chan_barrier(c);
	return t_failures;
}

static int psn_target(struct chan *c, void *arg)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;
	const char *t = getenv("SOFTRNIC_TRANSPORT");
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	o.psn = PSN0;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	CHECK(!ibv_query_qp(s.qp, &qa, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &init),
	      "query");
	if (t && !strcmp(t, "tcp"))
		CHECK(qa.rq_psn == PSN0 + 20, "the target expects 0x%x (0x%x)",
		      qa.rq_psn, PSN0 + 20);
	chan_barrier(c);
	chan_barrier(c); /* the initiator's QP is gone (BYE) */
	CHECK(!ibv_query_qp(s.qp, &qa, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &init),
	      "query after the peer left");
	if (t && !strcmp(t, "tcp"))
		CHECK(qa.rq_psn == PSN0 + 20,
		      "after the peer left, the target still says 0x%x (0x%x)",
		      qa.rq_psn, PSN0 + 20);
	side_close(&s);
	return t_failures;
}

/* ---- fork ---- */
static int fork_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	int st = -1;
	pid_t pid;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memcpy(s.buf, "parent", 7);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct ibv_device **l;
		struct ibv_context *ctx;
		int bad = 0;

		/* the parent's objects are off limits; memory is a copy */
		bad += post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 8, s.mr->lkey,
				  p.addr, p.rkey, 0, 1) != EINVAL;
		bad += memcmp(s.buf, "parent", 7) != 0;
		memcpy(s.buf, "child!", 7);
		l = ibv_get_device_list(NULL);
		ctx = l ? ibv_open_device(l[0]) : NULL;
		bad += ctx == NULL;
		if (ctx) {
			struct ibv_pd *pd = ibv_alloc_pd(ctx);

			bad += pd == NULL;
			if (pd)
				ibv_dealloc_pd(pd);
			ibv_close_device(ctx);
		}
		ibv_free_device_list(l);
		_exit(bad);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child checks: %d",
	      WEXITSTATUS(st));
	CHECK(!memcmp(s.buf, "parent", 7), "child's write leaked into parent");
	/* the parent's QP still works after the child is gone */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 7, s.mr->lkey, p.addr,
			  p.rkey, IBV_SEND_SIGNALED, 2),
	      "post after fork");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "write after fork: %s", ibv_wc_status_str(wc.status));
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int fork_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	CHECK(!memcmp(s.buf, "parent", 7), "the parent's write arrived");
	CHECK(s.qp->state == IBV_QPS_RTS, "target QP unaffected by the fork");
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("mr_iova+shared_map+stack", mem_init, mem_target, NULL, m, pass,
	    fail);
	RUN("err_reset_reuse+ah+gid", objects, role_idle, NULL, m, pass, fail);
	RUN("fork_child_isolated", fork_init, fork_target, NULL, m, pass, fail);
	RUN("psn_not_zero+query", psn_init, psn_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
