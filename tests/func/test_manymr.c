// SPDX-License-Identifier: MIT
/*
 * Many target MRs in use at once, as MPI's rendezvous keeps them (one per
 * message buffer in flight): the target registers NMR separate MRs and
 * the initiator READs and WRITEs each of them in turn, three times over.
 * Every READ returns the MR's own pattern and every WRITE lands in its
 * own MR, whatever the initiator keeps cached of the target's MRs (on one
 * host the cache grows from its first size, 32, to 512 slots here).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <stdlib.h>

#define T 5000
#define NMR 400 /* past 3/4 of 256 slots: the cache grows four times */
#define MRLEN 4096
#define ROUNDS 3

struct mm_info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t pad;
};

static int mm_init(struct chan *c, void *arg)
{
	struct mm_info *d = calloc(NMR, sizeof(*d));
	struct side_opts o;
	struct peer_info p;
	struct ibv_wc wc;
	struct side s;
	int bad_read = 0, bad_status = 0;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(d && !side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, d, NMR * sizeof(*d)), "the MRs");
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < NMR; i++) {
			uint32_t v = (uint32_t)i * 2654435761u;

			if (post_send1(s.qp, IBV_WR_RDMA_READ, s.buf, 8,
				       s.mr->lkey, d[i].addr, d[i].rkey,
				       IBV_SEND_SIGNALED, 1) ||
			    poll_one(s.cq, &wc, T) || wc.status)
				bad_status++;
			else if (memcmp(s.buf, &v, 4))
				bad_read++;
			memcpy(s.buf, &i, 4);
			if (post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 4,
				       s.mr->lkey, d[i].addr + 8 + 4 * r,
				       d[i].rkey, IBV_SEND_SIGNALED, 2) ||
			    poll_one(s.cq, &wc, T) || wc.status)
				bad_status++;
		}
	}
	CHECK(!bad_status, "%d operations failed", bad_status);
	CHECK(!bad_read, "%d READs returned another MR's bytes", bad_read);
	chan_barrier(c); /* all written */
	chan_barrier(c); /* checked */
	side_close(&s);
	free(d);
	return t_failures;
}

static int mm_target(struct chan *c, void *arg)
{
	uint8_t *mem = aligned_alloc(4096, (size_t)NMR * MRLEN);
	struct ibv_mr **mr = calloc(NMR, sizeof(*mr));
	struct mm_info *d = calloc(NMR, sizeof(*d));
	int bad = 0, nreg = 0;
	struct side_opts o;
	struct peer_info p;
	struct side s;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(mem && mr && d && !side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < NMR; i++) {
		uint32_t v = (uint32_t)i * 2654435761u;

		memcpy(mem + (size_t)i * MRLEN, &v, 4);
		mr[i] = ibv_reg_mr(s.pd, mem + (size_t)i * MRLEN, MRLEN,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ);
		if (!mr[i])
			break;
		nreg++;
		d[i].addr = (uintptr_t)mr[i]->addr;
		d[i].rkey = mr[i]->rkey;
	}
	CHECK(nreg == NMR, "registered %d of %d MRs", nreg, NMR);
	chan_send(c, d, NMR * sizeof(*d));
	chan_barrier(c); /* all written */
	for (int i = 0; i < nreg; i++)
		for (int r = 0; r < ROUNDS; r++)
			if (memcmp(mem + (size_t)i * MRLEN + 8 + 4 * r, &i, 4))
				bad++;
	CHECK(!bad, "%d WRITEs missing or misplaced", bad);
	chan_barrier(c); /* checked */
	for (int i = 0; i < nreg; i++)
		ibv_dereg_mr(mr[i]);
	side_close(&s);
	free(mem);
	free(mr);
	free(d);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("many_mrs", mm_init, mm_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
