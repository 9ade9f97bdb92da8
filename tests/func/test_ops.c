// SPDX-License-Identifier: MIT
/*
 * Every RC operation between two players, checked byte for byte:
 * WRITE, WRITE_WITH_IMM, SEND (SGE lists), SEND_WITH_IMM, READ, both
 * atomics, inline data, unsignaled WRs and sq_sig_all.
 */
#include "harness.h"

#include <unistd.h>

#include <arpa/inet.h>
#include <stdlib.h>

#define T 5000 /* ms: generous, tests never fail for slowness */

static struct side_opts opts;

/* ---- RDMA WRITE and WRITE_WITH_IMM ---- */
static int write_init(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	REQUIRE(!side_pair(&s, &opts, c, &p), "setup");
	for (int i = 0; i < 4096; i++)
		s.buf[i] = (uint8_t)(i * 7 + 1);
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 4096, s.mr->lkey,
			  p.addr + 100, p.rkey, IBV_SEND_SIGNALED, 11),
	      "post");
	CHECK(!poll_one(s.cq, &wc, T), "completion");
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE &&
		      wc.wr_id == 11,
	      "wc status %s opcode %d", ibv_wc_status_str(wc.status),
	      wc.opcode);
	chan_barrier(c); /* target checks the data */
	chan_barrier(c); /* target posted a receive for the immediate */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf, 64,
			  s.mr->lkey, p.addr + 8192, p.rkey, IBV_SEND_SIGNALED,
			  12) ||
		      1,
	      "post imm");
	{
		struct ibv_sge sge = { (uintptr_t)s.buf, 64, s.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 13,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.imm_data = htonl(0xabcd1234);
		wr.wr.rdma.remote_addr = p.addr + 16384;
		wr.wr.rdma.rkey = p.rkey;
		CHECK(!ibv_post_send(s.qp, &wr, &bad), "post imm 2");
	}
	for (int i = 0; i < 2; i++) {
		CHECK(!poll_one(s.cq, &wc, T), "imm completion %d", i);
		CHECK(wc.status == IBV_WC_SUCCESS, "imm status %s",
		      ibv_wc_status_str(wc.status));
	}
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int write_target(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	int bad = 0;

	REQUIRE(!side_pair(&s, &opts, c, &p), "setup");
	chan_barrier(c);
	for (int i = 0; i < 4096; i++)
		bad += s.buf[100 + i] != (uint8_t)(i * 7 + 1);
	CHECK(!bad, "%d bytes differ", bad);
	CHECK(s.buf[99] == 0 && s.buf[4196] == 0, "wrote outside the range");
	CHECK(cq_empty_for(s.cq, 50), "plain WRITE must not complete here");
	CHECK(!post_recv1(s.qp, NULL, 0, 0, 21), "recv");
	CHECK(!post_recv1(s.qp, NULL, 0, 0, 22), "recv");
	chan_barrier(c);
	CHECK(!poll_one(s.cq, &wc, T), "imm recv 1");
	CHECK(wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.wr_id == 21,
	      "recv 1: %s opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
	CHECK(!poll_one(s.cq, &wc, T), "imm recv 2");
	CHECK(wc.wr_id == 22 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
		      ntohl(wc.imm_data) == 0xabcd1234 && wc.byte_len == 64 &&
		      wc.src_qp == p.qpn && wc.qp_num == s.qp->qp_num,
	      "imm %x len %u flags %x", ntohl(wc.imm_data), wc.byte_len,
	      wc.wc_flags);
	CHECK(!memcmp(s.buf + 16384, s.buf + 100, 64), "imm payload");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- SEND with SGE lists, SEND_WITH_IMM, inline ---- */
static int send_init(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;
	struct ibv_sge sge[3];
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	REQUIRE(!side_pair(&s, &opts, c, &p), "setup");
	for (int i = 0; i < 3000; i++)
		s.buf[i] = (uint8_t)(i ^ 0x5a);
	chan_barrier(c); /* receives are posted */
	sge[0] = (struct ibv_sge){ (uintptr_t)s.buf, 1000, s.mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)s.buf + 1000, 1500, s.mr->lkey };
	sge[2] = (struct ibv_sge){ (uintptr_t)s.buf + 2500, 500, s.mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.sg_list = sge;
	wr.num_sge = 3;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(77);
	wr.send_flags = IBV_SEND_SIGNALED;
	CHECK(!ibv_post_send(s.qp, &wr, &bad), "post send");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_SEND,
	      "send wc %s", ibv_wc_status_str(wc.status));
	/* inline: the buffer may change right after the post */
	memcpy(s.buf + 4000, "inline-data!", 12);
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf + 4000, 12, 0, 0, 0,
			  IBV_SEND_INLINE | IBV_SEND_SIGNALED, 2),
	      "post inline");
	memset(s.buf + 4000, 0, 12);
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "inline wc");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int send_target(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;
	struct ibv_sge sge[3];
	struct ibv_recv_wr wr, *bad;
	struct ibv_wc wc;
	int diff = 0;

	REQUIRE(!side_pair(&s, &opts, c, &p), "setup");
	/* scatter 3000 bytes into 3 SGEs of other sizes, out of order */
	sge[0] = (struct ibv_sge){ (uintptr_t)s.buf + 50000, 2000, s.mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)s.buf + 10000, 100, s.mr->lkey };
	sge[2] = (struct ibv_sge){ (uintptr_t)s.buf + 20000, 4000, s.mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 5;
	wr.sg_list = sge;
	wr.num_sge = 3;
	CHECK(!ibv_post_recv(s.qp, &wr, &bad), "post recv");
	CHECK(!post_recv1(s.qp, s.buf + 60000, 64, s.mr->lkey, 6), "recv 2");
	chan_barrier(c);
	CHECK(!poll_one(s.cq, &wc, T), "recv wc");
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		      wc.byte_len == 3000 && wc.wr_id == 5 &&
		      (wc.wc_flags & IBV_WC_WITH_IMM) &&
		      ntohl(wc.imm_data) == 77,
	      "recv: %s len %u", ibv_wc_status_str(wc.status), wc.byte_len);
	for (int i = 0; i < 3000; i++) {
		uint8_t *b = i < 2000 ? s.buf + 50000 + i :
			     i < 2100 ? s.buf + 10000 + (i - 2000) :
					s.buf + 20000 + (i - 2100);

		diff += *b != (uint8_t)(i ^ 0x5a);
	}
	CHECK(!diff, "%d scattered bytes differ", diff);
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 6 && wc.byte_len == 12 &&
		      !(wc.wc_flags & IBV_WC_WITH_IMM),
	      "inline recv");
	CHECK(!memcmp(s.buf + 60000, "inline-data!", 12), "inline payload");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- READ and atomics ---- */
static int read_init(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	uint64_t *res;
	int diff = 0;

	REQUIRE(!side_pair(&s, &opts, c, &p), "setup");
	chan_barrier(c); /* target filled its buffer */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_READ, s.buf + 8, 65536, s.mr->lkey,
			  p.addr, p.rkey, IBV_SEND_SIGNALED, 3),
	      "post read");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == 65536,
	      "read wc %s", ibv_wc_status_str(wc.status));
	for (int i = 0; i < 65536; i++)
		diff += s.buf[8 + i] != (uint8_t)(i * 13);
	CHECK(!diff, "%d read bytes differ", diff);

	res = (uint64_t *)(s.buf + 70000);
	sge = (struct ibv_sge){ (uintptr_t)res, 8, s.mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = p.addr + 131072;
	wr.wr.atomic.rkey = p.rkey;
	/* FAA twice, CAS that fails, CAS that succeeds */
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.compare_add = 5;
	CHECK(!ibv_post_send(s.qp, &wr, &bad), "faa");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_FETCH_ADD && *res == 1000,
	      "faa old %llu", (unsigned long long)*res);
	CHECK(!ibv_post_send(s.qp, &wr, &bad), "faa 2");
	CHECK(!poll_one(s.cq, &wc, T) && *res == 1005, "faa 2 old");
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 1;
	wr.wr.atomic.swap = 42;
	CHECK(!ibv_post_send(s.qp, &wr, &bad), "cas miss");
	CHECK(!poll_one(s.cq, &wc, T) && wc.opcode == IBV_WC_COMP_SWAP &&
		      *res == 1010,
	      "cas miss old %llu", (unsigned long long)*res);
	wr.wr.atomic.compare_add = 1010;
	CHECK(!ibv_post_send(s.qp, &wr, &bad), "cas hit");
	CHECK(!poll_one(s.cq, &wc, T) && *res == 1010, "cas hit old");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int read_target(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;
	uint64_t *v;

	REQUIRE(!side_pair(&s, &opts, c, &p), "setup");
	for (int i = 0; i < 65536; i++)
		s.buf[i] = (uint8_t)(i * 13);
	v = (uint64_t *)(s.buf + 131072);
	*v = 1000;
	chan_barrier(c);
	chan_barrier(c);
	CHECK(*v == 42, "atomics left %llu", (unsigned long long)*v);
	side_close(&s);
	return t_failures;
}

/* ---- a window of READs wider than max_rd_atomic ---- */

/* 48 READs of 4 KiB and 16 WRITEs, interleaved, with max_rd_atomic 1:
 * the READs beyond the limit wait in the send queue (tcp) and everything
 * completes, in order, with the right data. */
static int rdwin_init(struct chan *c, void *arg)
{
	struct side_opts o = opts;
	struct side s;
	struct peer_info p;
	int n = 0, bad_order = 0, diff = 0;

	o.max_rd_atomic = 1;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* target filled its buffer */
	for (int i = 0; i < 64; i++) {
		bool rd = i % 4 != 3;
		int k = rd ? i - i / 4 : i / 4; /* READ k, WRITE k */

		CHECK(!post_send1(s.qp,
				  rd ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				  s.buf + (rd ? k * 4096 : 512 * 1024 + k * 8),
				  rd ? 4096 : 8, s.mr->lkey,
				  p.addr + (rd ? k * 4096 : 512 * 1024 + k * 8),
				  p.rkey, IBV_SEND_SIGNALED, i),
		      "post %d", i);
	}
	while (n < 64) {
		struct ibv_wc wc;

		if (poll_one(s.cq, &wc, T) || wc.status != IBV_WC_SUCCESS) {
			CHECK(0, "wc %d: %s", n, ibv_wc_status_str(wc.status));
			break;
		}
		bad_order += wc.wr_id != (uint64_t)n++;
	}
	CHECK(!bad_order, "%d completions out of order", bad_order);
	for (int i = 0; i < 48 * 4096; i++)
		diff += s.buf[i] != (uint8_t)(i * 13);
	CHECK(!diff, "%d read bytes differ", diff);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int rdwin_target(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;

	REQUIRE(!side_pair(&s, &opts, c, &p), "setup");
	for (int i = 0; i < 48 * 4096; i++)
		s.buf[i] = (uint8_t)(i * 13);
	chan_barrier(c);
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- unsignaled and sq_sig_all ---- */
static int unsig_init(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	struct side_opts o = opts;

	o.sig_all = arg != NULL;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < 10; i++)
		CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf, 64,
				  s.mr->lkey, p.addr, p.rkey,
				  i == 9 ? IBV_SEND_SIGNALED : 0, i),
		      "post %d", i);
	if (o.sig_all) {
		for (int i = 0; i < 10; i++)
			CHECK(!poll_one(s.cq, &wc, T) &&
				      wc.wr_id == (unsigned)i,
			      "sig_all completion %d", i);
	} else {
		CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 9,
		      "only the signaled WR completes");
	}
	CHECK(cq_empty_for(s.cq, 50), "extra completions");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int idle_target(struct chan *c, void *arg)
{
	struct side s;
	struct peer_info p;
	struct side_opts o = opts;

	o.sig_all = arg != NULL;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

/* ---- a SEND waits for a receive that the target posts only after its
 * own READ from the sender completed (rnr_retry 7). The READ's answer
 * must get past the waiting SEND: a transport that stops reading the
 * connection while it waits deadlocks here. Behind the SEND, a WRITE, a
 * READ and a second SEND wait too, and must complete once, in order. */
static int rnr_read_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memset(s.buf + 4096, 0xa7, 512); /* what the target reads */
	memset(s.buf, 0x3c, 64);
	memset(s.buf + 128, 0x5d, 64);
	chan_barrier(c);
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf, 64, s.mr->lkey, 0, 0,
			  IBV_SEND_SIGNALED, 1),
	      "send");
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_WRITE, s.buf + 128, 64, s.mr->lkey,
			  p.addr + 16384, p.rkey, IBV_SEND_SIGNALED, 2),
	      "write");
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_READ, s.buf + 1024, 64, s.mr->lkey,
			  p.addr + 20480, p.rkey, IBV_SEND_SIGNALED, 3),
	      "read");
	CHECK(!post_send1(s.qp, IBV_WR_SEND, s.buf + 128, 32, s.mr->lkey, 0, 0,
			  IBV_SEND_SIGNALED, 4),
	      "send 2");
	chan_barrier(c); /* the SEND is on its way: the target reads */
	for (uint64_t id = 1; id <= 4; id++)
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
			      wc.wr_id == id,
		      "WR %llu completes, in order, once the receive is posted",
		      (unsigned long long)id);
	CHECK(s.buf[1024] == 0x61 && s.buf[1024 + 63] == 0x61,
	      "the read behind the send");
	CHECK(ibv_poll_cq(s.cq, 1, &wc) == 0, "each WR completes once");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int rnr_read_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memset(s.buf + 20480, 0x61, 64); /* what the peer reads */
	chan_barrier(c);
	chan_barrier(c);
	usleep(20000); /* the SEND arrives and finds no receive */
	CHECK(!post_send1(s.qp, IBV_WR_RDMA_READ, s.buf + 8192, 512, s.mr->lkey,
			  p.addr + 4096, p.rkey, IBV_SEND_SIGNALED, 2),
	      "read");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 2,
	      "the read completes while the peer's SEND waits");
	CHECK(s.buf[8192] == (uint8_t)0xa7 &&
		      s.buf[8192 + 511] == (uint8_t)0xa7,
	      "read data");
	CHECK(!post_recv1(s.qp, s.buf, 256, s.mr->lkey, 3), "recv");
	CHECK(!post_recv1(s.qp, s.buf + 256, 256, s.mr->lkey, 4), "recv 2");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 3 && wc.byte_len == 64 && s.buf[0] == 0x3c,
	      "the waiting SEND lands");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 4 && wc.byte_len == 32 && s.buf[256] == 0x5d,
	      "the second SEND lands once");
	CHECK(s.buf[16384] == 0x5d && s.buf[16384 + 63] == 0x5d,
	      "the write behind the send landed");
	CHECK(ibv_poll_cq(s.cq, 1, &wc) == 0, "no extra receive");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	side_opts_default(&opts);
	RUN("rdma_write+imm", write_init, write_target, NULL, m, pass, fail);
	RUN("send_sge+imm+inline", send_init, send_target, NULL, m, pass, fail);
	RUN("rdma_read+atomics", read_init, read_target, NULL, m, pass, fail);
	RUN("read_window>max_rd_atomic", rdwin_init, rdwin_target, NULL, m,
	    pass, fail);
	RUN("send_waits_for_recv_after_read", rnr_read_init, rnr_read_target,
	    NULL, m, pass, fail);
	RUN("unsignaled", unsig_init, idle_target, NULL, m, pass, fail);
	RUN("sq_sig_all", unsig_init, idle_target, (void *)1, m, pass, fail);
	return test_summary(pass, fail);
}
