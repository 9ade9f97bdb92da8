// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the receive side of rsockets (src/rdmacm/
 * cm_rsocket*.c, proto/srn_rs_proto.h) as a hostile peer reaches it: its
 * hello (srn_rs_peer, srn_rs_hello_check), then the completions of the
 * messages it sends (srn_rs_progress: the immediate's kind and credits,
 * byte_len, IOMAP/IOUNMAP payloads, datagrams' GRH and header) mixed with
 * the application's calls on the rsocket (rrecv, rsend, riowrite,
 * rrecvfrom, all non-blocking) and completions of our sends.
 *
 * The whole library is linked in; the rsocket is a real one (its event
 * channel, table entry, PD and MRs are real) whose QP and CQ are replaced
 * by stand-ins: the CQ returns the completions the input describes, as a
 * NIC would (only for buffers that are posted, byte_len within the
 * posted length unless the input asks for a raw one), and the QP checks
 * every post: a receive buffer posted once, inside the receive mapping; a
 * send inside the send mapping, no longer than the peer's buffer, no more
 * outstanding than the send queue holds; an RDMA WRITE (riowrite) inside
 * a buffer the peer mapped. After each step the invariants the code
 * relies on are checked: credits never above what the peer's hello
 * granted, the peer's IOMAP table within SRN_RS_RMAP_MAX, queued lengths
 * within a buffer. ASan, UBSan and LeakSanitizer watch.
 *
 * Input: byte 0 bit 0 chooses a datagram rsocket (else a stream one),
 * bit 1 a raw hello (else a valid one with mutated fields); then steps,
 * each an opcode byte and its fields (fuzz_in.h's reader: zeros once the
 * input runs out; at most MAX_STEPS steps).
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rdmacm/rs.h"

#include "fuzz_in.h"

#define MAX_STEPS 64
#define MAX_BUFS 64
#define MAX_SENDS 1100
#define DG_RBUF (40 + 4096) /* cm_rsocket_dgram.c's GRH + MTU */
#define DG_BUFS 16

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_context fctx; /* the stand-in QP's and CQ's ops */
	struct ibv_qp fqp;
	struct ibv_cq fcq;
	struct srn_rs *rs;
	uint32_t peer_bufs; /* the credits the hello granted */
	bool posted[MAX_BUFS];
	uint64_t sends[MAX_SENDS]; /* wr_ids outstanding */
	uint32_t nsends;
	struct ibv_wc wc[16]; /* completions to return */
	int nwc;
} F;

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_rsock: %s\n", what);
	abort();
}

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int c = F.nwc < n ? F.nwc : n;

	(void)cq;
	memcpy(wc, F.wc, c * sizeof(*wc));
	memmove(F.wc, F.wc + c, (F.nwc - c) * sizeof(*wc));
	F.nwc -= c;
	return c;
}

static int f_notify(struct ibv_cq *cq, int solicited)
{
	(void)cq;
	(void)solicited;
	return 0;
}

static int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad)
{
	struct srn_rs *rs = F.rs;

	(void)qp;
	(void)bad;
	for (; wr; wr = wr->next) {
		uint64_t idx = wr->wr_id;

		if (idx >= rs->nrbuf || idx >= MAX_BUFS || F.posted[idx])
			fail("receive buffer posted twice or out of range");
		if (wr->num_sge != 1 ||
		    wr->sg_list[0].addr !=
			    (uintptr_t)(rs->rbuf + idx * rs->rbuf_size) ||
		    wr->sg_list[0].length != rs->rbuf_size)
			fail("receive buffer outside its slot");
		F.posted[idx] = true;
	}
	return 0;
}

/* An RDMA WRITE must land inside a buffer the peer mapped. */
static void check_write(const struct srn_rs *rs, const struct ibv_send_wr *wr)
{
	uint64_t a = wr->wr.rdma.remote_addr, len = wr->sg_list[0].length;
	uint32_t i;

	for (i = 0; i < rs->nrmap; i++) {
		const struct srn_rs_rmap *m = &rs->rmap[i];

		if (m->rkey == wr->wr.rdma.rkey && a >= m->addr &&
		    a - m->addr <= m->len && len <= m->len - (a - m->addr))
			return;
	}
	fail("riowrite outside the peer's mapped buffers");
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	struct srn_rs *rs = F.rs;

	(void)qp;
	(void)bad;
	for (; wr; wr = wr->next) {
		if (F.nsends >= rs->sq_depth || F.nsends >= MAX_SENDS)
			fail("more sends outstanding than the send queue");
		if (wr->num_sge) {
			const struct ibv_sge *s = wr->sg_list;

			if (s->addr < (uintptr_t)rs->sbuf ||
			    s->addr + s->length >
				    (uintptr_t)rs->sbuf + rs->sbuf_len ||
			    s->length > rs->peer_buf)
				fail("send outside the send mapping");
		}
		if (wr->opcode == IBV_WR_RDMA_WRITE)
			check_write(rs, wr);
		F.sends[F.nsends++] = wr->wr_id;
	}
	return 0;
}

static void check(const struct srn_rs *rs)
{
	uint32_t i;

	if (!rs->dgram && rs->credits > F.peer_bufs)
		fail("more credits than the peer's hello granted");
	if (rs->nrmap > SRN_RS_RMAP_MAX)
		fail("the peer's IOMAP table grew past SRN_RS_RMAP_MAX");
	if (rs->rq_cnt > rs->nrbuf || rs->s_used > rs->nsbuf)
		fail("queue counts out of range");
	for (i = 0; i < rs->rq_cnt; i++)
		if (rs->rq_len[(rs->rq_head + i) % rs->nrbuf] > rs->rbuf_size)
			fail("a queued message longer than its buffer");
}

/* The k-th posted receive buffer, -1 when none is. */
static int pick_posted(uint32_t k)
{
	uint32_t n = 0, i;

	for (i = 0; i < F.rs->nrbuf; i++)
		n += F.posted[i];
	if (!n)
		return -1;
	k %= n;
	for (i = 0; i < F.rs->nrbuf; i++)
		if (F.posted[i] && k-- == 0)
			return i;
	return -1;
}

static void deliver(struct srn_rs *rs, const struct ibv_wc *wc)
{
	F.wc[F.nwc++] = *wc;
	if (F.nwc == 16)
		srn_rs_progress(rs);
}

static void flush(struct srn_rs *rs)
{
	if (F.nwc)
		srn_rs_progress(rs);
	check(rs);
}

static uint32_t pick_credits(struct in *in)
{
	switch (take(in, 1) & 3) {
	case 0:
		return 0;
	case 1:
		return 0xffff;
	case 2:
		return take(in, 1) & 7;
	default:
		return take(in, 2);
	}
}

/* An IOMAP / IOUNMAP payload: small offsets (so that they collide) or
 * raw ones. */
static void iomap_payload(struct in *in, uint8_t *p, uint32_t n)
{
	struct srn_rs_iomap_msg m;
	uint32_t sel = take(in, 1);

	m.offset = htobe64(sel & 1 ? (uint64_t)take(in, 4) << 32 | take(in, 4) :
				     (uint64_t)(n ? n : take(in, 1)) * 4096);
	m.addr = htobe64((uint64_t)take(in, 4) << 12);
	m.len = htobe64(sel & 2 ? (uint64_t)take(in, 4) << 32 | take(in, 4) :
				  take(in, 2));
	m.rkey = htobe32(take(in, 1));
	m.reserved = 0;
	memcpy(p, &m, sizeof(m));
}

/* One message of the peer, as its receive completion. */
static void peer_msg(struct in *in, struct srn_rs *rs)
{
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV,
			     .wc_flags = IBV_WC_WITH_IMM };
	uint32_t sel = take(in, 1), kind = take(in, 1), credits;
	int idx = pick_posted(take(in, 1));
	uint8_t *p;

	if (idx < 0)
		return;
	p = rs->rbuf + (size_t)idx * rs->rbuf_size;
	credits = pick_credits(in);
	wc.wr_id = idx;
	wc.imm_data = kind & 0x80 ? htobe32(take(in, 4)) :
				    srn_rs_imm(kind % SRN_RS_KIND_NR, credits);
	kind &= 0x7f;
	if (kind % SRN_RS_KIND_NR == SRN_RS_IOMAP ||
	    kind % SRN_RS_KIND_NR == SRN_RS_IOUNMAP) {
		iomap_payload(in, p, 0);
		wc.byte_len = sizeof(struct srn_rs_iomap_msg);
	} else if (kind % SRN_RS_KIND_NR == SRN_RS_DATA) {
		wc.byte_len = take(in, 2) % (rs->rbuf_size + 1);
		memset(p, 0xa5, wc.byte_len);
	}
	if (sel & 1) /* a raw length: more than a NIC would write */
		wc.byte_len = take(in, 4);
	if (sel & 2)
		wc.wc_flags = 0;
	if (sel & 4)
		wc.status = (sel >> 3) % (IBV_WC_GENERAL_ERR + 1);
	F.posted[idx] = false; /* completed, even in error */
	deliver(rs, &wc);
	flush(rs);
}

/* A flood of one kind from the peer: CREDIT with credits, or IOMAPs of
 * fresh offsets (the table's growth). */
static void peer_flood(struct in *in, struct srn_rs *rs)
{
	uint32_t kind = take(in, 1) & 1 ? SRN_RS_IOMAP : SRN_RS_CREDIT;
	uint32_t n = take(in, 2) + 1, credits = pick_credits(in), i;
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV,
			     .wc_flags = IBV_WC_WITH_IMM };

	if (kind == SRN_RS_IOMAP && n > 3 * SRN_RS_RMAP_MAX)
		n = 3 * SRN_RS_RMAP_MAX;
	for (i = 0; i < n && rs->state == SRN_RSS_CONNECTED; i++) {
		int idx = pick_posted(i);

		if (idx < 0)
			break;
		wc.wr_id = idx;
		wc.imm_data = srn_rs_imm(kind, credits);
		wc.byte_len = 0;
		if (kind == SRN_RS_IOMAP) {
			struct in none = { 0 };

			iomap_payload(&none,
				      rs->rbuf + (size_t)idx * rs->rbuf_size,
				      i + 1);
			wc.byte_len = sizeof(struct srn_rs_iomap_msg);
		}
		F.posted[idx] = false;
		F.wc[F.nwc++] = wc;
		srn_rs_progress(rs);
		check(rs);
	}
}

/* A datagram: GRH, header (valid or mutated), payload. */
static void peer_dgram(struct in *in, struct srn_rs *rs)
{
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV,
			     .wc_flags = IBV_WC_GRH };
	struct srn_rs_dgram_hdr h = { 0 };
	uint32_t sel = take(in, 1), i;
	int idx = pick_posted(take(in, 1));
	uint8_t *p;

	if (idx < 0)
		return;
	p = rs->rbuf + (size_t)idx * rs->rbuf_size;
	memset(p, 0, 40);
	p[20] = sel & 1 ? 0x45 : take(in, 1);
	for (i = 8; i < 40; i++)
		p[i] = sel & 2 ? take(in, 1) : p[i];
	h.magic = htobe32(sel & 4 ? take(in, 4) : SRN_RS_DGRAM_MAGIC);
	h.version = sel & 8 ? take(in, 1) : SRN_RS_VERSION;
	h.family = sel & 16 ? take(in, 1) : sel & 32 ? 6 : 4;
	h.port = take(in, 2);
	for (i = 0; i < 16; i++)
		h.addr[i] = sel & 64 ? take(in, 1) : 0;
	memcpy(p + 40, &h, sizeof(h));
	wc.wr_id = idx;
	wc.byte_len = take(in, 2) % (rs->rbuf_size + 1);
	if ((sel & 0x80) && (take(in, 1) & 1)) /* raw: more than a NIC would */
		wc.byte_len = take(in, 4);
	F.posted[idx] = false;
	deliver(rs, &wc);
	flush(rs);
}

/* One of our sends completes. */
static void send_done(struct in *in, struct srn_rs *rs)
{
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS, .opcode = IBV_WC_SEND };
	uint32_t k, sel = take(in, 1);

	if (!F.nsends)
		return;
	k = sel % F.nsends;
	wc.wr_id = F.sends[k];
	F.sends[k] = F.sends[--F.nsends];
	if (sel & 0x80)
		wc.status = sel & 0x40 ? IBV_WC_WR_FLUSH_ERR :
					 IBV_WC_RETRY_EXC_ERR;
	deliver(rs, &wc);
	flush(rs);
}

static uint8_t io[70000];

static void app_call(struct in *in, struct srn_rs *rs, uint32_t op)
{
	int fd = rs->fd, flags = MSG_DONTWAIT;
	uint32_t len = take(in, 2) + (take(in, 1) & 1 ? 0 : 4000);
	struct sockaddr_storage from;
	socklen_t fromlen = take(in, 1) % (sizeof(from) + 1);
	off_t off;

	if (len > sizeof(io))
		len = sizeof(io);
	switch (op) {
	case 0:
		flags |= take(in, 1) & 1 ? MSG_PEEK : 0;
		if (rs->dgram)
			rrecvfrom(fd, io, len, flags, (struct sockaddr *)&from,
				  &fromlen);
		else
			rrecv(fd, io, len, flags);
		break;
	case 1:
		if (!rs->dgram)
			rsend(fd, io, len, flags);
		break;
	default:
		off = take(in, 1) & 1 ? (off_t)take(in, 4) << 16 | take(in, 2) :
					(off_t)take(in, 1) * 4096 + take(in, 2);
		if (!rs->dgram)
			riowrite(fd, io, len % 9000, off, 0);
		break;
	}
	check(rs);
}

/* The peer's hello: valid with mutated fields, or raw bytes. */
static int hello(struct in *in, struct srn_rs *rs, bool raw)
{
	uint8_t b[24];
	size_t len = sizeof(struct srn_rs_hello);
	struct srn_rs_hello h = { .magic = htobe32(SRN_RS_MAGIC),
				  .version = SRN_RS_VERSION };
	uint32_t sel = take(in, 1), i;

	if (raw) {
		len = take(in, 1) % sizeof(b);
		for (i = 0; i < len; i++)
			b[i] = take(in, 1);
	} else {
		h.bufs = htobe32(sel & 1 ? take(in, 4) : 2 + take(in, 1) % 60);
		h.buf_size =
			htobe32(sel & 2 ? take(in, 4) : 1024 + take(in, 2));
		if (sel & 4)
			h.version = take(in, 1);
		if (sel & 8)
			h.flags = take(in, 1);
		if (sel & 16)
			h.magic ^= htobe32(take(in, 4));
		memcpy(b, &h, sizeof(h));
	}
	if (srn_rs_peer(rs, b, len))
		return -1;
	F.peer_bufs = be32toh(((struct srn_rs_hello *)b)->bufs);
	if (F.peer_bufs < rs->credits)
		fail("hello check let a bad hello through");
	return 0;
}

static struct srn_rs *make_rs(bool dgram, struct in *in)
{
	struct srn_rs *rs = srn_rs_alloc(AF_INET);
	uint32_t i;

	if (!rs)
		fail("srn_rs_alloc");
	F.rs = rs;
	rs->pd = F.pd;
	rs->qp = &F.fqp;
	rs->cq = &F.fcq;
	rs->nonblock = true;
	rs->dgram = dgram;
	if (dgram) {
		rs->rbuf_size = DG_RBUF;
		rs->nrbuf = rs->rbufs = DG_BUFS;
		rs->nsbuf = rs->sq_depth = 4;
		rs->peer_buf = 4096;
	} else { /* srn_rs_setup's sizes, smaller */
		rs->rbuf_size = SRN_RS_BUF_SIZE;
		rs->rbufs = 2 + take(in, 1) % 8;
		rs->nrbuf = rs->rbufs + SRN_RS_CTRL_SLOTS;
		rs->nsbuf = 2 + take(in, 1) % 6;
		rs->sq_depth = rs->nsbuf + SRN_RS_CTRL_SLOTS;
		rs->peer_view = rs->rbufs;
	}
	if (srn_rs_map(rs->pd, (size_t)rs->nrbuf * rs->rbuf_size,
		       IBV_ACCESS_LOCAL_WRITE, &rs->rbuf, &rs->rbuf_len,
		       &rs->rmr))
		fail("srn_rs_map");
	if (dgram && srn_rs_map(rs->pd, (size_t)rs->nsbuf * rs->peer_buf, 0,
				&rs->sbuf, &rs->sbuf_len, &rs->smr))
		fail("srn_rs_map");
	rs->rq_idx = calloc(rs->nrbuf, sizeof(*rs->rq_idx));
	rs->rq_len = calloc(rs->nrbuf, sizeof(*rs->rq_len));
	if (!rs->rq_idx || !rs->rq_len || srn_rs_insert(rs))
		fail("alloc");
	for (i = 0; i < rs->nrbuf; i++)
		if (srn_rs_post_recv(rs, i))
			fail("post_recv");
	return rs;
}

static void drop_rs(struct srn_rs *rs)
{
	srn_rs_remove(rs);
	rs->qp = NULL;
	rs->cq = NULL;
	rs->pd = NULL; /* F.pd, kept */
	srn_rs_free(rs);
	F.rs = NULL;
	memset(F.posted, 0, sizeof(F.posted));
	F.nsends = 0;
	F.nwc = 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	(void)argc;
	(void)argv;
	setenv("SOFTRNIC_LOG", "error", 0);
	F.ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	F.pd = F.ctx ? ibv_alloc_pd(F.ctx) : NULL;
	if (!F.pd)
		fail("no softrnic device");
	ibv_free_device_list(l);
	F.fctx.ops.poll_cq = f_poll_cq;
	F.fctx.ops.req_notify_cq = f_notify;
	F.fctx.ops.post_recv = f_post_recv;
	F.fctx.ops.post_send = f_post_send;
	F.fqp.context = &F.fctx;
	F.fqp.qp_num = 0x4242;
	F.fcq.context = &F.fctx;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	uint32_t mode = take(&in, 1), op, steps;
	struct srn_rs *rs = make_rs(mode & 1, &in);

	if (!rs->dgram) {
		if (hello(&in, rs, mode & 2)) {
			drop_rs(rs);
			return 0;
		}
		rs->state = SRN_RSS_CONNECTED;
	}
	for (steps = 0; in.n && steps < MAX_STEPS; steps++) {
		op = take(&in, 1) % 8;
		if (op < 3)
			rs->dgram ? peer_dgram(&in, rs) : peer_msg(&in, rs);
		else if (op == 3 && !rs->dgram)
			peer_flood(&in, rs);
		else if (op == 4)
			send_done(&in, rs);
		else
			app_call(&in, rs, op - 5);
	}
	flush(rs);
	drop_rs(rs);
	return 0;
}
