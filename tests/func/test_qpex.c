// SPDX-License-Identifier: MIT
/*
 * The extended post-send API (ibv_qp_ex, ibv_wr_*): every builder an RC
 * QP accepts (SEND, SEND with immediate, WRITE, WRITE with immediate,
 * READ, both atomics; SGE, SGE list, inline data, inline list) with its
 * data checked at the target; a batch is posted whole at wr_complete and
 * not at all by wr_abort or after an error (full queue, too many SGEs,
 * inline too long, an opcode the QP was not created for, a QP not in
 * RTS); creation refuses opcodes the device cannot run; a plain QP has no
 * extended view.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#define T 5000
#define OPS                                                               \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |             \
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |   \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static void creation(struct side *s)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { 4, 4, 1, 1, 0 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd,
	};
	struct ibv_qp_init_attr pa = { .send_cq = s->cq,
				       .recv_cq = s->cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = { 4, 4, 1, 1, 0 } };
	struct ibv_qp *qp;

	a.send_ops_flags = IBV_QP_EX_WITH_TSO;
	CHECK(!ibv_create_qp_ex(s->ctx, &a) && errno == EOPNOTSUPP,
	      "TSO on RC refused");
	a.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
	CHECK(!ibv_create_qp_ex(s->ctx, &a) && errno == EOPNOTSUPP,
	      "atomic write refused");
	qp = ibv_create_qp(s->pd, &pa);
	CHECK(qp && !ibv_qp_to_qp_ex(qp), "a plain QP is not extended");
	if (qp)
		ibv_destroy_qp(qp);
	CHECK(ibv_qp_to_qp_ex(s->qp) != NULL, "the extended QP");
}

static int wait_n(struct side *s, int n, uint64_t *ids)
{
	struct ibv_wc wc;
	int got = 0;

	while (got < n && !poll_one(s->cq, &wc, T)) {
		CHECK(wc.status == IBV_WC_SUCCESS, "wr_id %llu: %s",
		      (unsigned long long)wc.wr_id,
		      ibv_wc_status_str(wc.status));
		ids[got++] = wc.wr_id;
	}
	return got;
}

static void batch(struct side *s, const struct peer_info *p)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(s->qp);
	struct ibv_sge list[2] = { { (uintptr_t)s->buf, 16, s->mr->lkey },
				   { (uintptr_t)s->buf + 16, 16,
				     s->mr->lkey } };
	struct ibv_data_buf inl[2] = { { "inline-", 7 }, { "list", 4 } };
	uint64_t ids[8];

	memcpy(s->buf, "sge-list-part-1-sge-list-part-2-", 32);
	*(uint64_t *)(s->buf + 256) = 0;
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, p->rkey, p->addr);
	ibv_wr_set_sge_list(x, 2, list);
	x->wr_id = 2;
	ibv_wr_rdma_write_imm(x, p->rkey, p->addr + 64, htonl(0x77));
	ibv_wr_set_inline_data_list(x, 2, inl);
	x->wr_id = 3;
	ibv_wr_send_imm(x, htonl(0x78));
	ibv_wr_set_inline_data(x, "sent!", 5);
	x->wr_id = 4;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)s->buf, 8);
	x->wr_id = 5;
	ibv_wr_atomic_fetch_add(x, p->rkey, p->addr + 128, 5);
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)s->buf + 256, 8);
	x->wr_id = 6;
	ibv_wr_atomic_cmp_swp(x, p->rkey, p->addr + 128, 5, 9);
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)s->buf + 264, 8);
	x->wr_id = 7;
	ibv_wr_rdma_read(x, p->rkey, p->addr);
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)s->buf + 512, 32);
	CHECK(cq_empty_for(s->cq, 50), "nothing runs before wr_complete");
	CHECK(!ibv_wr_complete(x), "complete");
	CHECK(wait_n(s, 7, ids) == 7, "seven completions");
	for (int i = 0; i < 7; i++)
		CHECK(ids[i] == (uint64_t)i + 1, "in order: %llu",
		      (unsigned long long)ids[i]);
	CHECK(*(uint64_t *)(s->buf + 256) == 0, "fetch-add saw 0");
	CHECK(*(uint64_t *)(s->buf + 264) == 5, "cmp-swp saw 5");
	CHECK(!memcmp(s->buf + 512, "sge-list-part-1-sge-list-part-2-", 32),
	      "read back the written list");
}

static void errors(struct side *s, const struct peer_info *p)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(s->qp);
	struct ibv_sge many[8];
	char big[512];

	for (int i = 0; i < 8; i++)
		many[i] = (struct ibv_sge){ (uintptr_t)s->buf, 1, s->mr->lkey };
	memset(big, 'b', sizeof(big));
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_start(x); /* aborted: nothing runs */
	x->wr_id = 20;
	ibv_wr_rdma_write(x, p->rkey, p->addr + 1024);
	ibv_wr_set_inline_data(x, "aborted", 7);
	ibv_wr_abort(x);
	ibv_wr_start(x); /* too many SGEs: the whole batch fails */
	x->wr_id = 21;
	ibv_wr_rdma_write(x, p->rkey, p->addr + 1024);
	ibv_wr_set_inline_data(x, "batch-1", 7);
	ibv_wr_rdma_write(x, p->rkey, p->addr + 1024);
	ibv_wr_set_sge_list(x, 8, many);
	CHECK(ibv_wr_complete(x) == EINVAL, "too many SGEs");
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, big, sizeof(big));
	CHECK(ibv_wr_complete(x) == EINVAL, "inline too long");
	ibv_wr_start(x);
	ibv_wr_atomic_fetch_add(x, p->rkey, p->addr + 128, 1);
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)s->buf, 4);
	CHECK(ibv_wr_complete(x) == EINVAL, "atomic of 4 bytes");
	ibv_wr_start(x);
	ibv_wr_send_inv(x, 1);
	CHECK(ibv_wr_complete(x) == EINVAL,
	      "send_inv: the QP was not created for it");
	ibv_wr_start(x);
	for (int i = 0; i < 65; i++) {
		ibv_wr_send(x);
		ibv_wr_set_inline_data(x, "q", 1);
	}
	CHECK(ibv_wr_complete(x) == ENOMEM, "more than the queue holds");
	CHECK(cq_empty_for(s->cq, 100), "no failed batch ran");
}

static int qpex_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	side_opts_default(&o);
	o.send_ops_flags = OPS;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	creation(&s);
	batch(&s, &p);
	errors(&s, &p);
	chan_barrier(c); /* 1: the target checks its memory */
	CHECK(!ibv_modify_qp(s.qp, &a, IBV_QP_STATE), "to ERR");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int qpex_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < 3; i++)
		CHECK(!post_recv1(s.qp, s.buf + 4096 + i * 64, 64, s.mr->lkey,
				  100 + i),
		      "recv");
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 100 &&
		      (wc.wc_flags & IBV_WC_WITH_IMM) &&
		      ntohl(wc.imm_data) == 0x77,
	      "write-imm completion");
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 101 &&
		      ntohl(wc.imm_data) == 0x78 && wc.byte_len == 5,
	      "send-imm completion");
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 102 && wc.byte_len == 8,
	      "send completion");
	chan_barrier(c); /* 1 */
	CHECK(!memcmp(s.buf, "sge-list-part-1-sge-list-part-2-", 32),
	      "WRITE of an SGE list");
	CHECK(!memcmp(s.buf + 64, "inline-list", 11), "WRITE of inline list");
	CHECK(!memcmp(s.buf + 4096 + 64, "sent!", 5), "inline SEND");
	CHECK(!memcmp(s.buf + 4096 + 128, "sge-list", 8), "SEND of an SGE");
	CHECK(*(uint64_t *)(s.buf + 128) == 9, "atomics: 0 + 5, then 5 -> 9");
	CHECK(s.buf[1024] == 0, "no aborted or failed batch reached us");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("qp_ex", qpex_init, qpex_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
