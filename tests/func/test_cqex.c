// SPDX-License-Identifier: MIT
/*
 * The extended CQ: ibv_create_cq_ex and its errors, start/next/end_poll
 * and every ibv_wc_read_* accessor against the traffic that made the
 * completions (SEND with immediate, WRITE with immediate, READ, fetch-add,
 * a failed WRITE), completion timestamps (device clock and wallclock),
 * ibv_query_rt_values_ex, and a CQ of max_cqe entries costing no memory
 * until used.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define T 5000
#define FLAGS                                                          \
	(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

struct cx {
	uint64_t wr_id, ts, wall;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, qp_num, src_qp, imm;
	unsigned wc_flags;
};

static uint64_t ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void cx_read(struct ibv_cq_ex *x, struct cx *o)
{
	o->wr_id = x->wr_id;
	o->status = x->status;
	o->opcode = ibv_wc_read_opcode(x);
	o->byte_len = ibv_wc_read_byte_len(x);
	o->qp_num = ibv_wc_read_qp_num(x);
	o->src_qp = ibv_wc_read_src_qp(x);
	o->wc_flags = ibv_wc_read_wc_flags(x);
	o->imm = ntohl(ibv_wc_read_imm_data(x));
	o->ts = ibv_wc_read_completion_ts(x);
	o->wall = ibv_wc_read_completion_wallclock_ns(x);
}

/* Reads n completions, in one start/next/end sequence where it can. */
static int cx_poll(struct ibv_cq_ex *x, struct cx *out, int n)
{
	struct ibv_poll_cq_attr a = { 0 };
	double t0 = now_s();
	int got = 0, rc;

	while (got < n && now_s() - t0 < T / 1000.0) {
		rc = ibv_start_poll(x, &a);
		if (rc == ENOENT)
			continue;
		if (rc)
			return -1;
		do
			cx_read(x, &out[got++]);
		while (got < n && !ibv_next_poll(x));
		ibv_end_poll(x);
	}
	return got;
}

static void create_errors(struct side *s)
{
	struct ibv_device_attr_ex da;
	struct ibv_cq_init_attr_ex a = { .cqe = 16 };
	struct ibv_poll_cq_attr pa = { .comp_mask = 1 };
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	struct ibv_cq_ex *x;
	uint64_t t0 = ns(CLOCK_MONOTONIC);

	CHECK(!ibv_query_device_ex(s->ctx, NULL, &da), "query_device_ex");
	CHECK(da.hca_core_clock == 1000000 &&
		      da.completion_timestamp_mask == UINT64_MAX,
	      "clock %llu kHz, mask 0x%llx",
	      (unsigned long long)da.hca_core_clock,
	      (unsigned long long)da.completion_timestamp_mask);
	CHECK(!ibv_query_rt_values_ex(s->ctx, &v), "rt values");
	CHECK((uint64_t)v.raw_clock.tv_sec * 1000000000ull +
			      (uint64_t)v.raw_clock.tv_nsec >=
		      t0,
	      "raw clock is the device clock");
	v.comp_mask = IBV_VALUES_MASK_RESERVED;
	CHECK(ibv_query_rt_values_ex(s->ctx, &v) == EINVAL, "bad values mask");
	for (unsigned b = 0; b < 12; b++) {
		a.wc_flags = 1ull << b;
		x = ibv_create_cq_ex(s->ctx, &a);
		CHECK(!!x == !!(a.wc_flags & FLAGS) &&
			      (x || errno == EOPNOTSUPP),
		      "wc flag bit %u: %s", b, x ? "made" : strerror(errno));
		if (x)
			ibv_destroy_cq(ibv_cq_ex_to_cq(x));
	}
	a.wc_flags = 0;
	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
		  IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	x = ibv_create_cq_ex(s->ctx, &a);
	CHECK(x, "create flags: %s", strerror(errno));
	if (x) {
		CHECK(ibv_start_poll(x, &pa) == EINVAL, "poll attr comp_mask");
		pa.comp_mask = 0;
		CHECK(ibv_start_poll(x, &pa) == ENOENT, "empty CQ: ENOENT");
		ibv_destroy_cq(ibv_cq_ex_to_cq(x));
	}
	a.flags = 1u << 7;
	CHECK(!ibv_create_cq_ex(s->ctx, &a) && errno == EOPNOTSUPP,
	      "unknown create flag");
	a.comp_mask = 1u << 7;
	CHECK(!ibv_create_cq_ex(s->ctx, &a) && errno == EINVAL,
	      "unknown comp_mask");
	a.comp_mask = 0;
	a.cqe = (uint32_t)da.orig_attr.max_cqe + 1;
	CHECK(!ibv_create_cq_ex(s->ctx, &a) && errno == EINVAL,
	      "cqe > max_cqe");
	a.cqe = 16;
	a.comp_vector = (uint32_t)s->ctx->num_comp_vectors;
	CHECK(!ibv_create_cq_ex(s->ctx, &a) && errno == EINVAL,
	      "bad comp_vector");
}

/* A CQ of max_cqe entries: its ring is a sparse memfd. */
static void big_cq(struct side *s)
{
	struct ibv_device_attr da;
	long before, after;
	struct ibv_cq *cq;
	FILE *f;

	CHECK(!ibv_query_device(s->ctx, &da) && da.max_cqe >= (1 << 22) - 1,
	      "max_cqe %d in the millions", da.max_cqe);
	f = fopen("/proc/self/statm", "r");
	CHECK(f && fscanf(f, "%*d %ld", &before) == 1, "statm");
	if (f)
		fclose(f);
	cq = ibv_create_cq(s->ctx, da.max_cqe, NULL, NULL, 0);
	CHECK(cq && cq->cqe >= da.max_cqe, "a CQ of max_cqe entries");
	f = fopen("/proc/self/statm", "r");
	CHECK(f && fscanf(f, "%*d %ld", &after) == 1, "statm");
	if (f)
		fclose(f);
	CHECK((after - before) * 4096 < (16 << 20), "it cost %ld KiB resident",
	      (after - before) * 4);
	if (cq)
		ibv_destroy_cq(cq);
	CHECK(!ibv_create_cq(s->ctx, da.max_cqe + 1, NULL, NULL, 0) &&
		      errno == EINVAL,
	      "max_cqe + 1");
}

static void post_all(struct side *s, const struct peer_info *p)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, 8, s->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge,
				  .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr_id = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(0xabc001);
	CHECK(!ibv_post_send(s->qp, &wr, &bad), "send imm");
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(0xabc002);
	wr.wr.rdma.remote_addr = p->addr;
	wr.wr.rdma.rkey = p->rkey;
	CHECK(!ibv_post_send(s->qp, &wr, &bad), "write imm");
	wr.wr_id = 3;
	wr.opcode = IBV_WR_RDMA_READ;
	sge.addr = (uintptr_t)s->buf + 64;
	sge.length = 32;
	CHECK(!ibv_post_send(s->qp, &wr, &bad), "read");
	wr.wr_id = 4;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	sge.length = 8;
	wr.wr.atomic.remote_addr = p->addr + 128;
	wr.wr.atomic.rkey = p->rkey;
	wr.wr.atomic.compare_add = 3;
	CHECK(!ibv_post_send(s->qp, &wr, &bad), "fetch add");
}

static void check_sends(const struct side *s, const struct cx *c, int n,
			uint64_t t0)
{
	static const enum ibv_wc_opcode op[] = { IBV_WC_SEND, IBV_WC_RDMA_WRITE,
						 IBV_WC_RDMA_READ,
						 IBV_WC_FETCH_ADD };
	uint64_t last = t0, now = ns(CLOCK_MONOTONIC);

	for (int i = 0; i < n; i++) {
		CHECK(c[i].wr_id == (uint64_t)i + 1 &&
			      c[i].status == IBV_WC_SUCCESS &&
			      c[i].opcode == op[i] &&
			      c[i].qp_num == s->qp->qp_num,
		      "completion %d: wr_id %llu %s opcode %d qp 0x%x", i,
		      (unsigned long long)c[i].wr_id,
		      ibv_wc_status_str(c[i].status), c[i].opcode, c[i].qp_num);
		CHECK(c[i].ts >= last && c[i].ts <= now,
		      "timestamp %d in order, in [post, now]", i);
		last = c[i].ts;
		CHECK(llabs((long long)(c[i].wall - ns(CLOCK_REALTIME))) <
			      1000000000ll,
		      "wallclock %d within 1 s", i);
	}
	CHECK(c[2].byte_len == 32, "READ byte_len %u", c[2].byte_len);
}

static int cqex_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct cx cx[8];
	struct ibv_wc wc;
	uint64_t t0;

	side_opts_default(&o);
	o.cq_ex_flags = FLAGS;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(s.cqx, "extended CQ");
	create_errors(&s);
	big_cq(&s);
	chan_barrier(c); /* the target's receives are posted */
	t0 = ns(CLOCK_MONOTONIC);
	post_all(&s, &p);
	CHECK(cx_poll(s.cqx, cx, 4) == 4, "four completions");
	check_sends(&s, cx, 4, t0);
	/* a failed WRITE, read through the plain poll of the same CQ */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 8, s.mr->lkey, p.addr,
			  p.rkey ^ 0x4000, IBV_SEND_SIGNALED, 9),
	      "bad write");
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 9 &&
		      wc.status == IBV_WC_REM_ACCESS_ERR,
	      "error completion via ibv_poll_cq: %s",
	      ibv_wc_status_str(wc.status));
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int cqex_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct cx cx[2];

	side_opts_default(&o);
	o.cq_ex_flags = FLAGS;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	CHECK(!post_recv1(s.qp, s.buf + 4096, 64, s.mr->lkey, 11) &&
		      !post_recv1(s.qp, s.buf + 8192, 64, s.mr->lkey, 12),
	      "receives");
	chan_barrier(c);
	CHECK(cx_poll(s.cqx, cx, 2) == 2, "two receive completions");
	CHECK(cx[0].wr_id == 11 && cx[0].opcode == IBV_WC_RECV &&
		      cx[0].byte_len == 8 && cx[0].imm == 0xabc001 &&
		      (cx[0].wc_flags & IBV_WC_WITH_IMM) &&
		      cx[0].qp_num == s.qp->qp_num && cx[0].src_qp == p.qpn,
	      "SEND with imm: wr_id %llu op %d len %u imm 0x%x flags 0x%x "
	      "src 0x%x",
	      (unsigned long long)cx[0].wr_id, cx[0].opcode, cx[0].byte_len,
	      cx[0].imm, cx[0].wc_flags, cx[0].src_qp);
	CHECK(cx[1].wr_id == 12 && cx[1].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		      cx[1].imm == 0xabc002 &&
		      (cx[1].wc_flags & IBV_WC_WITH_IMM),
	      "WRITE with imm: op %d imm 0x%x", cx[1].opcode, cx[1].imm);
	CHECK(cx[0].ts && cx[1].ts >= cx[0].ts, "receive timestamps");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("cq_ex", cqex_init, cqex_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
