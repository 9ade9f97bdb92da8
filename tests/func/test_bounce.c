// SPDX-License-Identifier: MIT
/*
 * SENDs into receive buffers the initiator may not map (an MR without a
 * remote right is never shared, unless SOFTRNIC_LOCAL_MR=shared, under
 * which this test refuses to run). Over shared memory the bytes go through the receive CQ's bounce
 * slots and the target's poll places them (docs/shm-layout.md, "Bounce
 * slots"), or with process_vm_writev when they do not fit a slot or the
 * slot is still in use; over TCP the target places them as always. Each
 * scenario checks every byte, byte_len, wr_id and the immediate, and that
 * the target's buffer is still private memory (not remapped onto a memfd).
 *
 *   sizes:  SENDs of 23 B to 64 KiB (8 KiB is the largest a slot holds),
 *           one SEND_WITH_IMM, one into a receive of two SGEs
 *   window: 600 SENDs before the target polls any (256 slots: the rest
 *           take process_vm_writev), then all 600 polled
 *   resize: 10 SENDs, then the target resizes its CQ before polling them
 *           (the bounce CQEs are placed before they move: the 300 SENDs
 *           that follow, still unpolled, reuse their slots)
 *   clean:  10 SENDs, then another QP on the target's CQ leaves 5 flushed
 *           receives behind them and is reset: the clean moves the 10
 *           (they are placed first), and 300 more SENDs reuse the slots
 *   nopvm:  the initiator's thread may not call process_vm_writev
 *           (seccomp): 20 SENDs of 23 B to 8 KiB still land, so they took
 *           the bounce slots
 *   srq:    the same into receives of an SRQ
 *   short:  a SEND longer than the receive: LOC_LEN_ERR at the target,
 *           REM_INV_REQ_ERR at the initiator, nothing written past it
 */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#define T 10000
#define TBUF (256 * 1024)
#define NWIN 600
#define WLEN 100
#define WSTRIDE 128

enum scen {
	S_SIZES,
	S_WINDOW,
	S_RESIZE,
	S_CLEAN,
	S_NOPVM,
	S_SRQ,
	S_SHORT
};

static const uint32_t sizes[] = { 23, 64, 1000, 4096, 8192, 8193, 65536 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint8_t pat(uint32_t msg, uint32_t i)
{
	return (uint8_t)(msg * 31 + (msg >> 8) * 97 + i * 7 + 1);
}

static void opts(struct side_opts *o, bool target)
{
	side_opts_default(o);
	o->buf_len = TBUF;
	o->max_send_wr = 1024;
	o->max_recv_wr = 1024;
	o->cq_size = 2048;
	if (target)
		o->mr_access = IBV_ACCESS_LOCAL_WRITE;
}

/* Sends messages first .. n - 1: message k has len[k] bytes of pat(k, i)
 * from its own part of our buffer; with imm for message imm_at. */
static int send_all(struct side *s, const uint32_t *len, unsigned first,
		    unsigned n, unsigned imm_at)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	size_t off = 0;

	for (unsigned k = 0; k < first; k++)
		off += (len[k] + 63) & ~63u;
	for (unsigned k = first; k < n; k++) {
		for (uint32_t i = 0; i < len[k]; i++)
			s->buf[off + i] = pat(k, i);
		sge = (struct ibv_sge){ (uintptr_t)s->buf + off, len[k],
					s->mr->lkey };
		wr = (struct ibv_send_wr){ .wr_id = k,
					   .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED };
		if (k == imm_at) {
			wr.opcode = IBV_WR_SEND_WITH_IMM;
			wr.imm_data = htonl(0xb0cce);
		}
		if (ibv_post_send(s->qp, &wr, &bad))
			return -1;
		off += (len[k] + 63) & ~63u;
	}
	for (unsigned k = first; k < n; k++) {
		if (poll_one(s->cq, &wc, T) || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "send %u: status %d\n", k,
				(int)wc.status);
			return -1;
		}
	}
	return 0;
}

/* From now on this thread's process_vm_writev fails with EPERM. */
static int deny_pvm_writev(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 0,
			 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int bnc_init(struct chan *c, void *arg)
{
	enum scen k = (enum scen)(uintptr_t)arg;
	uint32_t len[NWIN];
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;
	unsigned n = 0;

	opts(&o, false);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c); /* the target posted its receives */
	if (k == S_SIZES) {
		for (n = 0; n < NSIZES; n++)
			len[n] = sizes[n];
		len[n++] = 3000; /* into the receive of two SGEs */
	} else if (k == S_NOPVM || k == S_SRQ) {
		static const uint32_t nl[] = { 23, 100, 1000, 4096, 8192 };

		REQUIRE(!deny_pvm_writev(), "seccomp: %s", strerror(errno));
		for (n = 0; n < 20; n++)
			len[n] = nl[n % 5];
	} else if (k == S_SHORT) {
		CHECK(post_send1(s.qp, IBV_WR_SEND, s.buf, 200, s.mr->lkey, 0,
				 0, IBV_SEND_SIGNALED, 1) == 0 &&
			      poll_one(s.cq, &wc, T) == 0 &&
			      wc.status == IBV_WC_REM_INV_REQ_ERR,
		      "SEND longer than the receive: status %d",
		      (int)wc.status);
	} else {
		n = k == S_WINDOW ? NWIN : 310;
		for (unsigned i = 0; i < n; i++)
			len[i] = WLEN;
	}
	if (k == S_RESIZE || k == S_CLEAN) {
		CHECK(!send_all(&s, len, 0, 10, 2), "10 SENDs");
		chan_barrier(c); /* 10 sent */
		chan_barrier(c); /* the target resized or cleaned its CQ */
		CHECK(!send_all(&s, len, 10, n, 2), "300 SENDs");
	} else if (n) {
		CHECK(!send_all(&s, len, 0, n, 2), "%u SENDs", n);
	}
	chan_barrier(c); /* sent: the target polls */
	chan_barrier(c); /* done */
	side_close(&s);
	return t_failures;
}

/* Checks the receive of message k (wr_id k) at dst: len bytes. */
static void check_recv(const struct ibv_wc *wc, uint64_t k, const uint8_t *dst,
		       uint32_t len, bool imm)
{
	uint32_t bad = len;

	for (uint32_t i = 0; i < len && bad == len; i++)
		if (dst[i] != pat((uint32_t)k, i))
			bad = i;
	CHECK(wc->status == IBV_WC_SUCCESS && wc->wr_id == k &&
		      wc->byte_len == len && bad == len,
	      "receive %llu: status %d wr_id %llu byte_len %u (want %u), "
	      "first bad byte %u",
	      (unsigned long long)k, (int)wc->status,
	      (unsigned long long)wc->wr_id, wc->byte_len, len, bad);
	CHECK(!imm || ((wc->wc_flags & IBV_WC_WITH_IMM) &&
		       wc->imm_data == htonl(0xb0cce)),
	      "receive %llu: immediate", (unsigned long long)k);
}

/* The receives of sizes: each size at its own offset, then one of two
 * SGEs (2000 + 1000 bytes, far apart). */
static void sizes_target(struct side *s, struct chan *c)
{
	struct ibv_sge sg[2] = { { 0, 2000, s->mr->lkey },
				 { 0, 1000, s->mr->lkey } };
	struct ibv_recv_wr wr = { .wr_id = NSIZES,
				  .sg_list = sg,
				  .num_sge = 2 },
			   *bad;
	size_t off[NSIZES + 1], o = 0;
	struct ibv_wc wc;
	uint8_t two[3000];

	for (unsigned k = 0; k < NSIZES; k++) {
		off[k] = o;
		CHECK(!post_recv1(s->qp, s->buf + o, sizes[k], s->mr->lkey, k),
		      "post_recv %u", k);
		o += (sizes[k] + 4095) & ~4095u;
	}
	sg[0].addr = (uintptr_t)s->buf + o;
	sg[1].addr = (uintptr_t)s->buf + o + 8192;
	CHECK(!ibv_post_recv(s->qp, &wr, &bad), "post_recv of two SGEs");
	chan_barrier(c);
	chan_barrier(c);
	for (unsigned k = 0; k < NSIZES; k++) {
		CHECK(!poll_one(s->cq, &wc, T), "receive %u", k);
		check_recv(&wc, k, s->buf + off[k], sizes[k], k == 2);
	}
	CHECK(!poll_one(s->cq, &wc, T), "receive of two SGEs");
	memcpy(two, s->buf + o, 2000);
	memcpy(two + 2000, s->buf + o + 8192, 1000);
	check_recv(&wc, NSIZES, two, 3000, false);
}

/* Another QP on s's CQ, in INIT with 5 receives posted (NULL: failed). */
static struct ibv_qp *other_qp(struct side *s)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = { .max_send_wr = 4,
			 .max_recv_wr = 8,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);
	bool ok = qp &&
		  !ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);

	for (unsigned i = 0; ok && i < 5; i++)
		ok = !post_recv1(qp, s->buf + TBUF - 4096, 64, s->mr->lkey,
				 1000 + i);
	if (!ok && qp)
		ibv_destroy_qp(qp);
	return ok ? qp : NULL;
}

/* The other QP's receives flushed behind the bounce CQEs, then the QP
 * reset: its CQEs are cleaned out and ours move. */
static void flush_and_clean(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	CHECK(qp && !ibv_modify_qp(qp, &a, IBV_QP_STATE), "other QP to ERR");
	a.qp_state = IBV_QPS_RESET;
	CHECK(qp && !ibv_modify_qp(qp, &a, IBV_QP_STATE), "other QP to RESET");
}

static void many_target(struct side *s, struct chan *c, unsigned n,
			enum scen sc)
{
	struct ibv_qp *qp = sc == S_CLEAN ? other_qp(s) : NULL;
	struct ibv_wc wc;

	for (unsigned k = 0; k < n; k++)
		CHECK(!post_recv1(s->qp, s->buf + k * WSTRIDE, WLEN,
				  s->mr->lkey, k),
		      "post_recv %u", k);
	chan_barrier(c);
	if (sc == S_RESIZE || sc == S_CLEAN) {
		chan_barrier(c); /* 10 sent */
		if (sc == S_RESIZE)
			CHECK(!ibv_resize_cq(s->cq, 4000), "resize_cq: %s",
			      strerror(errno));
		else
			flush_and_clean(qp);
		chan_barrier(c); /* resized or cleaned */
	}
	chan_barrier(c); /* all sent, none polled yet */
	for (unsigned k = 0; k < n; k++) {
		CHECK(!poll_one(s->cq, &wc, T), "receive %u", k);
		check_recv(&wc, k, s->buf + k * WSTRIDE, WLEN, k == 2);
	}
	CHECK(!qp || cq_empty_for(s->cq, 10), "the cleaned QP's CQEs stayed");
	if (qp)
		ibv_destroy_qp(qp);
}

/* 20 receives of 8 KiB (in the SRQ, if s has one), the SENDs of nopvm
 * and srq checked. */
static void sized_target(struct side *s, struct chan *c)
{
	static const uint32_t nl[] = { 23, 100, 1000, 4096, 8192 };
	struct ibv_recv_wr *bad;
	struct ibv_wc wc;

	for (unsigned k = 0; k < 20; k++) {
		struct ibv_sge sge = { (uintptr_t)s->buf + k * 8192, 8192,
				       s->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = k,
					  .sg_list = &sge,
					  .num_sge = 1 };

		CHECK(!(s->srq ? ibv_post_srq_recv(s->srq, &wr, &bad) :
				 ibv_post_recv(s->qp, &wr, &bad)),
		      "post_recv %u", k);
	}
	chan_barrier(c);
	chan_barrier(c);
	for (unsigned k = 0; k < 20; k++) {
		CHECK(!poll_one(s->cq, &wc, T), "receive %u", k);
		check_recv(&wc, k, s->buf + k * 8192, nl[k % 5], k == 2);
	}
}

static int bnc_target(struct chan *c, void *arg)
{
	enum scen k = (enum scen)(uintptr_t)arg;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ibv_wc wc;

	opts(&o, true);
	o.use_srq = k == S_SRQ;
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memset(s.buf, 0xee, TBUF);
	if (k == S_SIZES) {
		sizes_target(&s, c);
	} else if (k == S_NOPVM || k == S_SRQ) {
		sized_target(&s, c);
	} else if (k == S_SHORT) {
		CHECK(!post_recv1(s.qp, s.buf, 100, s.mr->lkey, 1), "post");
		chan_barrier(c);
		chan_barrier(c);
		CHECK(!poll_one(s.cq, &wc, T) &&
			      wc.status == IBV_WC_LOC_LEN_ERR,
		      "receive too short: status %d", (int)wc.status);
		for (unsigned i = 100; i < 200; i++)
			if (s.buf[i] != 0xee) {
				CHECK(false, "byte %u past the receive", i);
				break;
			}
	} else {
		many_target(&s, c, k == S_WINDOW ? NWIN : 310, k);
	}
	CHECK(shared_ino_at((uintptr_t)s.buf) == 0,
	      "the LOCAL_WRITE-only buffer was made shared");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode mode = test_mode(argc, argv);
	const char *e = getenv("SOFTRNIC_LOCAL_MR");
	int pass = 0, fail = 0;

	if (e && !strcmp(e, "shared")) {
		fprintf(stderr, "run without SOFTRNIC_LOCAL_MR=shared\n");
		return 2;
	}
	RUN("sizes", bnc_init, bnc_target, (void *)S_SIZES, mode, pass, fail);
	RUN("window", bnc_init, bnc_target, (void *)S_WINDOW, mode, pass, fail);
	RUN("resize", bnc_init, bnc_target, (void *)S_RESIZE, mode, pass, fail);
	RUN("clean", bnc_init, bnc_target, (void *)S_CLEAN, mode, pass, fail);
	RUN("nopvm", bnc_init, bnc_target, (void *)S_NOPVM, mode, pass, fail);
	RUN("srq", bnc_init, bnc_target, (void *)S_SRQ, mode, pass, fail);
	RUN("short", bnc_init, bnc_target, (void *)S_SHORT, mode, pass, fail);
	return test_summary(pass, fail);
}
