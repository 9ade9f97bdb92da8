// SPDX-License-Identifier: MIT
/*
 * Data integrity: random sizes (0..64 KiB, and one round in 8 up to
 * 480 KB, beyond a transport's per-call chunk), offsets and SGE layouts
 * (1..4 SGEs) for WRITE, READ and SEND, every byte checked at the other
 * side.
 * The seed is printed; SRN_SEED=<n> replays a run.
 */
#include "harness.h"

#include <stdlib.h>
#include <unistd.h>

#define T 10000
#define ROUNDS 300
#define REGION (1 << 20)

struct plan {
	uint32_t op; /* 0 write, 1 read, 2 send */
	uint32_t nsge;
	uint32_t len[4];
	uint32_t loff[4]; /* local offsets */
	uint32_t roff; /* remote offset (write/read) */
	uint32_t rsge_len[4]; /* receive SGEs (send) */
	uint32_t rsge_off[4];
	uint32_t seed;
};

static unsigned int seed0;

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void make_plan(struct plan *p, uint32_t round)
{
	uint32_t s = seed0 ^ (round * 2654435761u), total = 0, off;
	bool big;

	memset(p, 0, sizeof(*p));
	p->seed = s;
	p->op = rnd(&s) % 3;
	p->nsge = 1 + rnd(&s) % 4;
	big = rnd(&s) % 8 == 0;
	for (uint32_t i = 0; i < p->nsge; i++) {
		p->len[i] = big		     ? rnd(&s) % 120001 :
			    rnd(&s) % 4 == 0 ? rnd(&s) % 16 :
					       rnd(&s) % (16384 + 1);
		p->loff[i] = i * (REGION / 4) + rnd(&s) % 4096;
		total += p->len[i];
	}
	p->roff = rnd(&s) % (REGION - total - 1);
	/* receive side: split total (plus slack) over 1..4 SGEs */
	off = rnd(&s) % 1024;
	for (uint32_t i = 0; i < 4; i++) {
		p->rsge_len[i] = i < 3 ? total / 3 + rnd(&s) % 64 : total;
		p->rsge_off[i] = off;
		off += p->rsge_len[i] + rnd(&s) % 256;
	}
}

static uint8_t pattern(uint32_t seed, uint32_t i)
{
	return (uint8_t)((seed >> (i % 24)) ^ (i * 131) ^ (i >> 8));
}

static uint32_t plan_total(const struct plan *p)
{
	uint32_t t = 0;

	for (uint32_t i = 0; i < p->nsge; i++)
		t += p->len[i];
	return t;
}

/* The byte with logical index k of the message, at the side that holds
 * it in its local SGEs. */
static uint8_t *sge_byte(uint8_t *base, const uint32_t *off,
			 const uint32_t *len, uint32_t n, uint32_t k)
{
	for (uint32_t i = 0; i < n; i++) {
		if (k < len[i])
			return base + off[i] + k;
		k -= len[i];
	}
	return NULL;
}

static int integ_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_sge sge[4];
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	struct plan pl;

	side_opts_default(&o);
	o.buf_len = REGION;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (uint32_t r = 0; r < ROUNDS && !t_failures; r++) {
		uint32_t total;

		make_plan(&pl, r);
		total = plan_total(&pl);
		memset(s.buf, 0xee, REGION);
		if (pl.op != 1)
			for (uint32_t k = 0; k < total; k++)
				*sge_byte(s.buf, pl.loff, pl.len, pl.nsge, k) =
					pattern(pl.seed, k);
		chan_barrier(c); /* target ready (pattern or receive) */
		for (uint32_t i = 0; i < pl.nsge; i++)
			sge[i] =
				(struct ibv_sge){ (uintptr_t)s.buf + pl.loff[i],
						  pl.len[i], s.mr->lkey };
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = r;
		wr.sg_list = sge;
		wr.num_sge = pl.nsge;
		wr.opcode = pl.op == 0 ? IBV_WR_RDMA_WRITE :
			    pl.op == 1 ? IBV_WR_RDMA_READ :
					 IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = p.addr + pl.roff;
		wr.wr.rdma.rkey = p.rkey;
		CHECK(!ibv_post_send(s.qp, &wr, &bad), "post round %u", r);
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
		      "round %u op %u: %s", r, pl.op,
		      ibv_wc_status_str(wc.status));
		if (pl.op == 1) {
			uint32_t diff = 0;

			for (uint32_t k = 0; k < total; k++)
				diff += *sge_byte(s.buf, pl.loff, pl.len,
						  pl.nsge,
						  k) != pattern(pl.seed, k);
			CHECK(!diff, "round %u read: %u bytes differ", r, diff);
		}
		chan_barrier(c); /* target checks */
	}
	side_close(&s);
	return t_failures;
}

static int integ_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_sge sge[4];
	struct ibv_recv_wr wr, *bad;
	struct ibv_wc wc;
	struct plan pl;

	side_opts_default(&o);
	o.buf_len = REGION;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (uint32_t r = 0; r < ROUNDS && !t_failures; r++) {
		uint32_t total, diff = 0;

		make_plan(&pl, r);
		total = plan_total(&pl);
		memset(s.buf, 0xee, REGION);
		if (pl.op == 1)
			for (uint32_t k = 0; k < total; k++)
				s.buf[pl.roff + k] = pattern(pl.seed, k);
		if (pl.op == 2) {
			for (int i = 0; i < 4; i++)
				sge[i] = (struct ibv_sge){
					(uintptr_t)s.buf + pl.rsge_off[i],
					pl.rsge_len[i], s.mr->lkey
				};
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = r;
			wr.sg_list = sge;
			wr.num_sge = 4;
			CHECK(!ibv_post_recv(s.qp, &wr, &bad), "recv");
		}
		chan_barrier(c);
		chan_barrier(c); /* the initiator's op completed */
		if (pl.op == 0) {
			for (uint32_t k = 0; k < total; k++)
				diff += s.buf[pl.roff + k] !=
					pattern(pl.seed, k);
			diff += pl.roff && s.buf[pl.roff - 1] != 0xee;
			diff += s.buf[pl.roff + total] != 0xee;
		} else if (pl.op == 2) {
			CHECK(!poll_one(s.cq, &wc, T) &&
				      wc.status == IBV_WC_SUCCESS &&
				      wc.byte_len == total,
			      "round %u recv len %u/%u", r, wc.byte_len, total);
			for (uint32_t k = 0; k < total; k++)
				diff += *sge_byte(s.buf, pl.rsge_off,
						  pl.rsge_len, 4,
						  k) != pattern(pl.seed, k);
		}
		CHECK(!diff, "round %u op %u: %u bytes differ (seed %u)", r,
		      pl.op, diff, seed0);
	}
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	const char *e = getenv("SRN_SEED");
	int pass = 0, fail = 0;

	seed0 = e ? (unsigned)strtoul(e, NULL, 0) : (unsigned)getpid();
	printf("seed %u\n", seed0);
	RUN("random_sizes_offsets_sges", integ_init, integ_target, NULL, m,
	    pass, fail);
	return test_summary(pass, fail);
}
