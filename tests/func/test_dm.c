// SPDX-License-Identifier: MIT
/*
 * Device memory (ibv_alloc_dm): allocation limits and errors, copies to
 * and from it (4-byte aligned, in bounds, else EINVAL), zero-based MRs
 * over it (ibv_reg_dm_mr, which needs IBV_ACCESS_ZERO_BASED), and a peer's
 * RDMA WRITE into it by its zero-based address, read back with
 * ibv_memcpy_from_dm.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>

#define T 5000
#define DM_LEN 8192

static void dm_api(struct side *s)
{
	struct ibv_device_attr_ex da;
	struct ibv_alloc_dm_attr a = { .length = 64 };
	struct ibv_dm *dm;
	char buf[16] = "0123456789abcdef", back[16];

	CHECK(!ibv_query_device_ex(s->ctx, NULL, &da) && da.max_dm_size,
	      "max_dm_size %llu", (unsigned long long)da.max_dm_size);
	a.comp_mask = 1;
	CHECK(!ibv_alloc_dm(s->ctx, &a) && errno == EINVAL, "comp_mask");
	a.comp_mask = 0;
	a.length = da.max_dm_size + 1;
	CHECK(!ibv_alloc_dm(s->ctx, &a) && errno == ENOMEM, "too big");
	a.length = 64;
	dm = ibv_alloc_dm(s->ctx, &a);
	CHECK(dm, "alloc: %s", strerror(errno));
	if (!dm)
		return;
	CHECK(!ibv_memcpy_to_dm(dm, 8, buf, 16), "copy to");
	CHECK(!ibv_memcpy_from_dm(back, dm, 8, 16) && !memcmp(back, buf, 16),
	      "copy back");
	CHECK(ibv_memcpy_to_dm(dm, 2, buf, 16) == EINVAL, "unaligned offset");
	CHECK(ibv_memcpy_to_dm(dm, 8, buf, 6) == EINVAL, "unaligned length");
	CHECK(ibv_memcpy_to_dm(dm, 56, buf, 16) == EINVAL, "past the end");
	CHECK(!ibv_reg_dm_mr(s->pd, dm, 0, 64, IBV_ACCESS_LOCAL_WRITE) &&
		      errno == EINVAL,
	      "reg without ZERO_BASED");
	CHECK(!ibv_reg_dm_mr(s->pd, dm, 0, 128,
			     IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE) &&
		      errno == EINVAL,
	      "reg past the end");
	CHECK(!ibv_free_dm(dm), "free");
}

static int dm_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p, dmp;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	dm_api(&s);
	REQUIRE(!chan_recv(c, &dmp, sizeof(dmp)), "DM MR");
	memcpy(s.buf, "into-device-memory", 18);
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 18, s.mr->lkey, 4096,
			  dmp.rkey, IBV_SEND_SIGNALED, 1),
	      "write");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "write into DM at zero-based 4096: %s",
	      ibv_wc_status_str(wc.status));
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int dm_target(struct chan *c, void *arg)
{
	struct ibv_alloc_dm_attr a = { .length = DM_LEN };
	struct side_opts o;
	struct side s;
	struct peer_info p, dmp = { 0 };
	struct ibv_dm *dm;
	struct ibv_mr *mr;
	char back[18];

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	dm = ibv_alloc_dm(s.ctx, &a);
	mr = dm ? ibv_reg_dm_mr(s.pd, dm, 0, DM_LEN,
				IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE) :
		  NULL;
	CHECK(mr, "DM MR: %s", strerror(errno));
	dmp.rkey = mr ? mr->rkey : 0;
	chan_send(c, &dmp, sizeof(dmp));
	chan_barrier(c);
	CHECK(dm && !ibv_memcpy_from_dm(back, dm, 4096, 16) &&
		      !memcmp(back, "into-device-memo", 16),
	      "the WRITE is in device memory");
	if (mr)
		ibv_dereg_mr(mr);
	if (dm)
		ibv_free_dm(dm);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("device_memory", dm_init, dm_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
