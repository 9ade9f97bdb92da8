// SPDX-License-Identifier: MIT
/*
 * Small SENDs, every length around the size a receive CQE can carry
 * (same host: the payload travels in the CQE and the target's poll places
 * it, docs/shm-layout.md "Inline receive CQEs"): RC and UC, with and
 * without an immediate, polled with ibv_poll_cq and with the extended
 * CQ. Each receive buffer sits at an odd offset between guard bytes that
 * must not change; a receive whose first SGE is shorter than the message
 * is scattered over two.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <stdlib.h>

#define T 5000 /* ms: generous, tests never fail for slowness */
#define SLOT 128 /* bytes per receive buffer, guards included */
#define GUARD 0xee

static const uint32_t lens[] = { 1, 7, 8, 13, 14, 15, 17, 21, 22, 23, 32 };
#define NLEN (sizeof(lens) / sizeof(lens[0]))
#define SPLIT_ID 100 /* the receive of two SGEs */

struct small_cfg {
	bool imm, uc, cqex;
};

static void small_opts(struct side_opts *o, const struct small_cfg *cfg)
{
	side_opts_default(o);
	o->uc = cfg->uc;
	if (cfg->cqex)
		o->cq_ex_flags = IBV_WC_STANDARD_FLAGS;
}

static uint8_t pattern(unsigned i, unsigned j)
{
	return (uint8_t)(i * 31 + j * 7 + 1);
}

static int small_send(struct side *s, const struct small_cfg *cfg, unsigned i,
		      uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + i * SLOT, len, s->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = i,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = cfg->imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
		.imm_data = htonl(1000 + i),
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	for (uint32_t j = 0; j < len; j++)
		s->buf[i * SLOT + j] = pattern(i, j);
	CHECK(!ibv_post_send(s->qp, &wr, &bad), "post send %u", len);
	CHECK(!poll_one(s->cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == i,
	      "send %u: %s", len, ibv_wc_status_str(wc.status));
	return t_failures;
}

static int small_init(struct chan *c, void *arg)
{
	const struct small_cfg *cfg = arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;

	small_opts(&o, cfg);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* receives are posted */
	for (unsigned i = 0; i < NLEN; i++)
		small_send(&s, cfg, i, lens[i]);
	small_send(&s, cfg, SPLIT_ID % NLEN + NLEN, 8); /* into two SGEs */
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* One receive completion, by either API. */
struct rwc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, qp_num, imm;
	unsigned wc_flags;
};

static int small_poll(struct side *s, bool cqex, struct rwc *r)
{
	struct ibv_poll_cq_attr a = { 0 };
	struct ibv_wc wc;
	double end = now_s() + T / 1000.0;

	if (!cqex) {
		if (poll_one(s->cq, &wc, T))
			return -1;
		*r = (struct rwc){ wc.wr_id,	wc.status, wc.opcode,
				   wc.byte_len, wc.qp_num, ntohl(wc.imm_data),
				   wc.wc_flags };
		return 0;
	}
	while (ibv_start_poll(s->cqx, &a))
		if (now_s() > end)
			return -1;
	*r = (struct rwc){ s->cqx->wr_id,
			   s->cqx->status,
			   ibv_wc_read_opcode(s->cqx),
			   ibv_wc_read_byte_len(s->cqx),
			   ibv_wc_read_qp_num(s->cqx),
			   ntohl(ibv_wc_read_imm_data(s->cqx)),
			   ibv_wc_read_wc_flags(s->cqx) };
	ibv_end_poll(s->cqx);
	return 0;
}

/* Receive i took lens[i] bytes at its odd offset, and nothing else. */
static void small_check(struct side *s, const struct small_cfg *cfg, unsigned i,
			const struct rwc *r)
{
	uint8_t *b = s->buf + i * SLOT;
	unsigned off = 1 + i % 7, bad = 0;

	CHECK(r->wr_id == i && r->status == IBV_WC_SUCCESS &&
		      r->opcode == IBV_WC_RECV && r->byte_len == lens[i] &&
		      r->qp_num == s->qp->qp_num,
	      "recv %u: wr_id %lu %s opcode %d len %u", lens[i],
	      (unsigned long)r->wr_id, ibv_wc_status_str(r->status), r->opcode,
	      r->byte_len);
	CHECK(!!(r->wc_flags & IBV_WC_WITH_IMM) == cfg->imm &&
		      (!cfg->imm || r->imm == 1000 + i),
	      "recv %u: flags 0x%x imm %u", lens[i], r->wc_flags, r->imm);
	for (unsigned j = 0; j < SLOT; j++) {
		bool in = j >= off && j < off + lens[i];

		bad += b[j] != (in ? pattern(i, j - off) : GUARD);
	}
	CHECK(!bad, "recv %u: %u bytes wrong (payload or guards)", lens[i],
	      bad);
}

static int small_target(struct chan *c, void *arg)
{
	const struct small_cfg *cfg = arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	uint8_t *sp = NULL;
	struct ibv_sge sge[2];
	struct ibv_recv_wr wr = { .wr_id = SPLIT_ID,
				  .sg_list = sge,
				  .num_sge = 2 },
			   *bad;
	struct rwc r;

	small_opts(&o, cfg);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memset(s.buf, GUARD, (NLEN + 2) * SLOT);
	for (unsigned i = 0; i < NLEN; i++)
		CHECK(!post_recv1(s.qp, s.buf + i * SLOT + 1 + i % 7, 64,
				  s.mr->lkey, i),
		      "recv %u", i);
	sp = s.buf + (NLEN + 1) * SLOT;
	sge[0] = (struct ibv_sge){ (uintptr_t)sp, 4, s.mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)sp + 64, 60, s.mr->lkey };
	CHECK(!ibv_post_recv(s.qp, &wr, &bad), "recv of two SGEs");
	chan_barrier(c);
	for (unsigned i = 0; i < NLEN; i++) {
		REQUIRE(!small_poll(&s, cfg->cqex, &r), "recv %u", lens[i]);
		small_check(&s, cfg, i, &r);
	}
	REQUIRE(!small_poll(&s, cfg->cqex, &r), "recv of two SGEs");
	CHECK(r.wr_id == SPLIT_ID && r.status == IBV_WC_SUCCESS &&
		      r.byte_len == 8,
	      "two SGEs: %s len %u", ibv_wc_status_str(r.status), r.byte_len);
	for (unsigned j = 0; j < 8; j++)
		CHECK((j < 4 ? sp[j] : sp[64 + j - 4]) ==
			      pattern(SPLIT_ID % NLEN + NLEN, j),
		      "two SGEs: byte %u", j);
	CHECK(sp[4] == GUARD && sp[68] == GUARD, "two SGEs: guards");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	struct small_cfg rc = { 0 }, rc_imm = { .imm = true },
			 uc = { .uc = true },
			 uc_imm = { .imm = true, .uc = true },
			 rcx = { .cqex = true },
			 rcx_imm = { .imm = true, .cqex = true };
	int pass = 0, fail = 0;

	RUN("rc_small_sends", small_init, small_target, &rc, m, pass, fail);
	RUN("rc_small_sends+imm", small_init, small_target, &rc_imm, m, pass,
	    fail);
	RUN("uc_small_sends", small_init, small_target, &uc, m, pass, fail);
	RUN("uc_small_sends+imm", small_init, small_target, &uc_imm, m, pass,
	    fail);
	RUN("rc_small_sends_cq_ex", small_init, small_target, &rcx, m, pass,
	    fail);
	RUN("rc_small_sends_cq_ex+imm", small_init, small_target, &rcx_imm, m,
	    pass, fail);
	return test_summary(pass, fail);
}
