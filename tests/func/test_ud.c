// SPDX-License-Identifier: MIT
/*
 * UD (unreliable datagram) QPs: the UD state rules (a Q_Key, no path);
 * SEND and SEND with immediate arrive after a 40-byte GRH whose IPv4
 * header names the sender, with IBV_WC_GRH, src_qp and the length
 * counting the GRH; an AH made from that completion answers the sender;
 * a wrong Q_Key, a missing receive WQE or a stopped target drop the
 * datagram while the sender completes with success; a WR Q_Key with its
 * MSB set sends the QP's own; a receive buffer too small for GRH and
 * payload ends in LOC_LEN_ERR and the QP stays in RTS; post refuses
 * over-MTU messages and RDMA opcodes; the ibv_wr_* path with
 * ibv_wr_set_ud_addr; multicast attach/detach and delivery; small
 * datagrams around the size a receive CQE carries (same host: the target's
 * poll writes GRH and payload, so its buffer is untouched before it),
 * each GRH compared byte for byte with the IPv4 header RoCEv2 carries,
 * guard bytes around each buffer unchanged.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#define T 5000
#define QKEY 0x11111111u
#define BUF 65536

struct ud_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint8_t *buf;
};

struct ud_info {
	uint32_t qpn;
	union ibv_gid gid;
};

static int state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? -1 : (int)a.qp_state;
}

static struct ibv_qp *ud_qp(struct ud_side *s, bool ex)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.qp_type = IBV_QPT_UD,
		.cap = { 16, 16, 2, 2, 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = s->pd,
	};

	if (ex) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = IBV_QP_EX_WITH_SEND |
				    IBV_QP_EX_WITH_SEND_WITH_IMM;
	}
	return ibv_create_qp_ex(s->ctx, &ia);
}

static int ud_up(struct ibv_qp *qp, uint32_t qkey)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qkey = qkey };

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int ud_open(struct ud_side *s, struct chan *c, struct ud_info *peer)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ud_info me;

	memset(s, 0, sizeof(*s));
	s->ctx = l ? ibv_open_device(l[0]) : NULL;
	ibv_free_device_list(l);
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	s->buf = aligned_alloc(4096, BUF);
	if (!s->pd || !s->cq || !s->buf)
		return -1;
	memset(s->buf, 0, BUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	s->qp = ud_qp(s, true);
	if (!s->mr || !s->qp || ud_up(s->qp, QKEY))
		return -1;
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	me.qpn = s->qp->qp_num;
	ibv_query_gid(s->ctx, 1, 0, &me.gid);
	if (chan_send(c, &me, sizeof(me)) || chan_recv(c, peer, sizeof(*peer)))
		return -1;
	return 0;
}

static void ud_close(struct ud_side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
}

static struct ibv_ah *ah_to(struct ud_side *s, const union ibv_gid *gid)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1 };

	a.grh.dgid = *gid;
	a.grh.hop_limit = 64;
	return ibv_create_ah(s->pd, &a);
}

static int ud_send(struct ud_side *s, struct ibv_ah *ah, uint32_t qpn,
		   uint32_t qkey, uint32_t off, uint32_t len,
		   enum ibv_wr_opcode op, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(0xabcd) };
	struct ibv_send_wr *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(s->qp, &wr, &bad);
}

static int recv_at(struct ud_side *s, uint32_t off, uint32_t len,
		   uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)(s->buf + off), len, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

static bool sent_ok(struct ud_side *s, uint64_t wr_id)
{
	struct ibv_wc wc;

	if (poll_one(s->cq, &wc, T)) {
		fprintf(stderr, "no send completion for %llu\n",
			(unsigned long long)wr_id);
		return false;
	}
	if (wc.wr_id == wr_id && wc.status == IBV_WC_SUCCESS &&
	    wc.opcode == IBV_WC_SEND)
		return true;
	fprintf(stderr, "send %llu: got wr_id %llu status %s opcode %d\n",
		(unsigned long long)wr_id, (unsigned long long)wc.wr_id,
		ibv_wc_status_str(wc.status), wc.opcode);
	return false;
}

static void rules(struct ud_side *s)
{
	struct ibv_qp *qp = ud_qp(s, false);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	CHECK(qp, "a second UD QP");
	if (!qp)
		return;
	CHECK(ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) ==
		      EINVAL,
	      "INIT needs a Q_Key");
	CHECK(ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS) ==
		      EINVAL,
	      "INIT refuses access flags");
	CHECK(!ud_up(qp, 7), "RESET -> INIT -> RTR -> RTS without a path");
	CHECK(state_of(qp) == IBV_QPS_RTS, "RTS");
	ibv_destroy_qp(qp);
}

static void mcast_gid(union ibv_gid *g)
{
	static const uint8_t v4[16] = { 0, 0, 0,    0,	  0,   0, 0, 0,
					0, 0, 0xff, 0xff, 239, 7, 8, 9 };

	memcpy(g->raw, v4, 16);
}

static void init_drops(struct ud_side *s0, struct chan *c,
		       const struct ud_info *p0, struct ibv_ah *ah)
{
	struct ud_side s = *s0;
	struct ud_info p = *p0;

	chan_barrier(c); /* 3: one receive posted */
	memcpy(s.buf + 64, "bad-qkey", 8);
	memcpy(s.buf + 128, "msb-rule", 8);
	CHECK(!ud_send(&s, ah, p.qpn, QKEY + 1, 64, 8, IBV_WR_SEND, 101) &&
		      sent_ok(&s, 101),
	      "a wrong Q_Key completes with success at the sender");
	CHECK(!ud_send(&s, ah, p.qpn, 0x80000000u, 128, 8, IBV_WR_SEND, 102) &&
		      sent_ok(&s, 102),
	      "a privileged Q_Key sends the QP's own");
	chan_barrier(c); /* 4 */
	memcpy(s.buf + 192, "lost", 4);
	CHECK(!ud_send(&s, ah, p.qpn, QKEY, 192, 4, IBV_WR_SEND, 103) &&
		      sent_ok(&s, 103),
	      "no receive WQE: success at the sender");
	chan_barrier(c); /* 5 */
	chan_barrier(c); /* 6: a receive is posted */
	memcpy(s.buf + 256, "found", 5);
	CHECK(!ud_send(&s, ah, p.qpn, QKEY, 256, 5, IBV_WR_SEND, 104) &&
		      sent_ok(&s, 104),
	      "SEND after the drop");
	chan_barrier(c); /* 7 */
	chan_barrier(c); /* 8: a small receive is posted */
	CHECK(!ud_send(&s, ah, p.qpn, QKEY, 512, 16, IBV_WR_SEND, 105) &&
		      sent_ok(&s, 105),
	      "SEND into a small buffer");
	chan_barrier(c); /* 9 */
	CHECK(ud_send(&s, ah, p.qpn, QKEY, 0, 4097, IBV_WR_SEND, 1) == EINVAL,
	      "over the MTU: EINVAL at post");
	CHECK(ud_send(&s, ah, p.qpn, QKEY, 0, 8, IBV_WR_RDMA_WRITE, 1) ==
		      EINVAL,
	      "RDMA WRITE on UD: EINVAL at post");
	chan_barrier(c); /* 10: a receive is posted */
	memcpy(s.buf + 1024, "wr-api", 6);
	ibv_wr_start(s.qpx);
	s.qpx->wr_id = 106;
	s.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(s.qpx, htonl(0x77));
	ibv_wr_set_ud_addr(s.qpx, ah, p.qpn, QKEY);
	ibv_wr_set_sge(s.qpx, s.mr->lkey, (uintptr_t)(s.buf + 1024), 6);
	CHECK(!ibv_wr_complete(s.qpx) && sent_ok(&s, 106),
	      "ibv_wr_send_imm with ibv_wr_set_ud_addr");
	chan_barrier(c); /* 11 */
}

static void init_mcast(struct ud_side *s0, struct chan *c)
{
	struct ud_side s = *s0;
	union ibv_gid mgid;
	struct ibv_ah *mah;

	chan_barrier(c); /* 12: the target is attached to the group */
	mcast_gid(&mgid);
	mah = ah_to(&s, &mgid);
	memcpy(s.buf + 2048, "mcast", 5);
	CHECK(mah &&
		      !ud_send(&s, mah, 0xffffff, QKEY, 2048, 5, IBV_WR_SEND,
			       107) &&
		      sent_ok(&s, 107),
	      "a multicast SEND");
	chan_barrier(c); /* 13 */
	chan_barrier(c); /* 14: detached */
	CHECK(mah &&
		      !ud_send(&s, mah, 0xffffff, QKEY, 2048, 5, IBV_WR_SEND,
			       108) &&
		      sent_ok(&s, 108),
	      "a multicast SEND after the detach");
	chan_barrier(c); /* 15 */
	if (mah)
		ibv_destroy_ah(mah);
}

static const uint32_t sizes[] = { 0, 1, 8, 13, 14, 15, 22, 100 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define SZ_AT(i) (40960u + (uint32_t)(i)*256u + 3u) /* odd offsets */
#define GUARD 0xee

static void init_sizes(struct ud_side *s, struct chan *c,
		       const struct ud_info *p, struct ibv_ah *ah)
{
	chan_barrier(c); /* 16: the receives are posted */
	CHECK(!ud_send(s, ah, p->qpn, QKEY, 0, 4, IBV_WR_SEND, 299) &&
		      sent_ok(s, 299),
	      "into the receive left from the multicast part");
	for (unsigned i = 0; i < NSIZES; i++) {
		for (uint32_t k = 0; k < sizes[i]; k++)
			s->buf[4096 + i * 128 + k] = (uint8_t)(i * 31 + k);
		CHECK(!ud_send(s, ah, p->qpn, QKEY, 4096 + i * 128, sizes[i],
			       i & 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
			       300 + i) &&
			      sent_ok(s, 300 + i),
		      "a datagram of %u bytes", sizes[i]);
	}
	chan_barrier(c); /* 17: all sent */
	chan_barrier(c); /* 18: all checked */
}

static uint16_t csum(const uint8_t *h, size_t n)
{
	uint32_t sum = 0;

	for (size_t i = 0; i < n; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The 40 bytes a RoCEv2 datagram of len bytes from sgid to dgid (both
 * IPv4-mapped) leaves in front of its payload. */
static void grh_expected(uint8_t g[40], const union ibv_gid *sgid,
			 const union ibv_gid *dgid, uint32_t len)
{
	uint32_t tot = 20 + 8 + 12 + 8 + len + 4; /* IP UDP BTH DETH ICRC */
	uint8_t *h = g + 20;
	uint16_t sum;

	memset(g, 0, 40);
	h[0] = 0x45;
	h[2] = (uint8_t)(tot >> 8);
	h[3] = (uint8_t)tot;
	h[6] = 0x40;
	h[8] = 64;
	h[9] = 17;
	memcpy(h + 12, sgid->raw + 12, 4);
	memcpy(h + 16, dgid->raw + 12, 4);
	sum = csum(h, 20);
	h[10] = (uint8_t)(sum >> 8);
	h[11] = (uint8_t)sum;
}

static void check_size(struct ud_side *s, const struct ud_info *p,
		       const union ibv_gid *me, unsigned i, bool untouched,
		       bool seen)
{
	uint8_t *b = s->buf + SZ_AT(i), g[40];
	uint32_t len = sizes[i];
	bool body = true, guard = true;
	struct ibv_wc wc;

	CHECK(!poll_one(s->cq, &wc, T) && wc.wr_id == 400 + i &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		      wc.byte_len == 40 + len && (wc.wc_flags & IBV_WC_GRH) &&
		      wc.src_qp == p->qpn && (wc.sl & 7) == 2 &&
		      !!(wc.wc_flags & IBV_WC_WITH_IMM) == (i & 1) &&
		      (!(i & 1) || ntohl(wc.imm_data) == 0xabcd),
	      "%u bytes: the completion", len);
	if (untouched)
		CHECK(!seen, "%u bytes: the buffer is written by our poll",
		      len);
	grh_expected(g, &p->gid, me, len);
	CHECK(!memcmp(b, g, 40), "%u bytes: the GRH", len);
	for (uint32_t k = 0; k < len; k++)
		body &= b[40 + k] == (uint8_t)(i * 31 + k);
	for (uint32_t k = 40 + len; k < 253; k++)
		guard &= b[k] == GUARD;
	CHECK(body && guard && b[-1] == GUARD, "%u bytes: payload and guards",
	      len);
}

/* Does the target's own poll write this datagram (so that its buffer is
 * untouched before)? Same host: when it fits a CQE, or always when
 * receive buffers stay private (the default; docs/shm-layout.md). Over
 * TCP a datagram may arrive after its sender's completion: no rule. */
static bool written_by_poll(uint32_t len)
{
	const char *tr = getenv("SOFTRNIC_TRANSPORT");
	const char *lm = getenv("SOFTRNIC_LOCAL_MR");

	if (tr && !strcmp(tr, "tcp"))
		return false;
	return len <= 14 || !lm || strcmp(lm, "shared");
}

static void target_sizes(struct ud_side *s, struct chan *c,
			 const struct ud_info *p)
{
	union ibv_gid me;
	struct ibv_wc wc;
	bool seen[NSIZES];

	ibv_query_gid(s->ctx, 1, 0, &me);
	memset(s->buf + SZ_AT(0) - 3, GUARD, NSIZES * 256);
	for (unsigned i = 0; i < NSIZES; i++)
		CHECK(!recv_at(s, SZ_AT(i), 40 + sizes[i] + 1, 400 + i),
		      "recv");
	chan_barrier(c); /* 16 */
	chan_barrier(c); /* 17 */
	/* every datagram was sent: which buffers hold one before a poll? */
	for (unsigned i = 0; i < NSIZES; i++)
		seen[i] = s->buf[SZ_AT(i) + 20] == 0x45;
	CHECK(!poll_one(s->cq, &wc, T) && wc.wr_id == 8 &&
		      wc.status == IBV_WC_SUCCESS,
	      "the receive left from the multicast part");
	for (unsigned i = 0; i < NSIZES; i++)
		check_size(s, p, &me, i, written_by_poll(sizes[i]), seen[i]);
	chan_barrier(c); /* 18 */
}

static int ud_init(struct chan *c, void *arg)
{
	struct ud_side s;
	struct ud_info p;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	(void)arg;

	REQUIRE(!ud_open(&s, c, &p), "setup");
	rules(&s);
	ah = ah_to(&s, &p.gid);
	REQUIRE(ah, "ibv_create_ah");
	CHECK(!recv_at(&s, 32768, 40 + 64, 2), "recv for the answer");
	chan_barrier(c); /* 1: the target's receive is posted */
	memcpy(s.buf, "hello-ud", 8);
	CHECK(!ud_send(&s, ah, p.qpn, QKEY, 0, 8, IBV_WR_SEND, 100),
	      "post the SEND");
	/* the answer may complete before our SEND does: either order */
	for (int i = 0; i < 2; i++) {
		if (poll_one(s.cq, &wc, T)) {
			CHECK(0, "two completions");
			break;
		}
		if (wc.wr_id == 100)
			CHECK(wc.status == IBV_WC_SUCCESS &&
				      wc.opcode == IBV_WC_SEND,
			      "SEND completes");
		else
			CHECK(wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS &&
				      (wc.wc_flags & IBV_WC_WITH_IMM) &&
				      ntohl(wc.imm_data) == 0xabcd &&
				      wc.src_qp == p.qpn &&
				      wc.byte_len == 40 + 4,
			      "the answer through an AH made from the "
			      "completion");
	}
	CHECK(!memcmp(s.buf + 32768 + 40, "pong", 4), "answer data");
	chan_barrier(c); /* 2 */
	init_drops(&s, c, &p, ah);
	init_mcast(&s, c);
	init_sizes(&s, c, &p, ah);
	ibv_destroy_ah(ah);
	chan_barrier(c); /* end */
	ud_close(&s);
	return t_failures;
}

static void target_first(struct ud_side *s, struct chan *c,
			 const struct ud_info *p)
{
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint32_t ip;

	CHECK(!recv_at(s, 0, 40 + 4096, 1), "recv");
	chan_barrier(c); /* 1 */
	CHECK(!poll_one(s->cq, &wc, T) && wc.wr_id == 1 &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		      wc.byte_len == 40 + 8 && (wc.wc_flags & IBV_WC_GRH) &&
		      wc.src_qp == p->qpn,
	      "the datagram: GRH flag, src_qp, length with the GRH");
	CHECK(!memcmp(s->buf + 40, "hello-ud", 8), "payload after the GRH");
	memcpy(&ip, p->gid.raw + 12, 4);
	CHECK(s->buf[20] == 0x45 && !memcmp(s->buf + 32, &ip, 4),
	      "the GRH holds the sender's IPv4 header");
	/* as RoCE devices report it (and UCX reads it): bits 2:0 of sl are
	 * the network header type, 2 = IPv4 */
	CHECK((wc.sl & 7) == 2, "wc.sl names an IPv4 header (got %u)", wc.sl);
	ah = ibv_create_ah_from_wc(s->pd, &wc, (struct ibv_grh *)s->buf, 1);
	CHECK(ah, "ibv_create_ah_from_wc");
	memcpy(s->buf + 16384, "pong", 4);
	CHECK(ah &&
		      !ud_send(s, ah, wc.src_qp, QKEY, 16384, 4,
			       IBV_WR_SEND_WITH_IMM, 200) &&
		      sent_ok(s, 200),
	      "the answer");
	if (ah)
		ibv_destroy_ah(ah);
	chan_barrier(c); /* 2 */
}

static void target_drops(struct ud_side *s, struct chan *c)
{
	struct ibv_wc wc;

	CHECK(!recv_at(s, 8192, 40 + 64, 3), "recv");
	chan_barrier(c); /* 3 */
	chan_barrier(c); /* 4 */
	CHECK(!poll_one(s->cq, &wc, T) && wc.wr_id == 3 &&
		      wc.status == IBV_WC_SUCCESS,
	      "one datagram arrived");
	CHECK(!memcmp(s->buf + 8192 + 40, "msb-rule", 8),
	      "the wrong Q_Key was dropped, the privileged one taken");
	chan_barrier(c); /* 5: "lost" was sent to no receive WQE */
	CHECK(cq_empty_for(s->cq, 200), "nothing for the dropped datagram");
	CHECK(!recv_at(s, 12288, 40 + 64, 4), "recv");
	chan_barrier(c); /* 6 */
	chan_barrier(c); /* 7 */
	CHECK(!poll_one(s->cq, &wc, T) && wc.wr_id == 4 &&
		      wc.status == IBV_WC_SUCCESS &&
		      !memcmp(s->buf + 12288 + 40, "found", 5),
	      "the next datagram arrives");
	CHECK(!recv_at(s, 16384, 40 + 4, 5), "a small recv");
	chan_barrier(c); /* 8 */
	chan_barrier(c); /* 9 */
	CHECK(!poll_one(s->cq, &wc, T) && wc.wr_id == 5 &&
		      wc.status == IBV_WC_LOC_LEN_ERR,
	      "too small for GRH and payload: LOC_LEN_ERR");
	CHECK(state_of(s->qp) == IBV_QPS_RTS, "the QP stays in RTS");
}

static void target_mcast(struct ud_side *s, struct chan *c)
{
	union ibv_gid mgid, gid;
	struct ibv_wc wc;

	mcast_gid(&mgid);
	ibv_query_gid(s->ctx, 1, 0, &gid);
	CHECK(ibv_attach_mcast(s->qp, &gid, 0) == EINVAL,
	      "attach to a unicast GID: EINVAL");
	CHECK(!ibv_attach_mcast(s->qp, &mgid, 0), "ibv_attach_mcast");
	CHECK(!recv_at(s, 20480, 40 + 64, 7), "recv");
	chan_barrier(c); /* 12 */
	chan_barrier(c); /* 13 */
	CHECK(!poll_one(s->cq, &wc, T) && wc.wr_id == 7 &&
		      wc.status == IBV_WC_SUCCESS &&
		      !memcmp(s->buf + 20480 + 40, "mcast", 5),
	      "the group's datagram arrives");
	CHECK(!ibv_detach_mcast(s->qp, &mgid, 0), "ibv_detach_mcast");
	CHECK(ibv_detach_mcast(s->qp, &mgid, 0) == EINVAL,
	      "detach again: EINVAL");
	CHECK(!recv_at(s, 24576, 40 + 64, 8), "recv");
	chan_barrier(c); /* 14 */
	chan_barrier(c); /* 15 */
	CHECK(cq_empty_for(s->cq, 300), "nothing after the detach");
}

static int ud_target(struct chan *c, void *arg)
{
	struct ud_side s;
	struct ud_info p;
	struct ibv_wc wc;
	(void)arg;

	REQUIRE(!ud_open(&s, c, &p), "setup");
	target_first(&s, c, &p);
	target_drops(&s, c);
	CHECK(!recv_at(&s, 28672, 40 + 64, 6), "recv");
	chan_barrier(c); /* 10 */
	chan_barrier(c); /* 11 */
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 6 &&
		      (wc.wc_flags & IBV_WC_WITH_IMM) &&
		      ntohl(wc.imm_data) == 0x77 &&
		      !memcmp(s.buf + 28672 + 40, "wr-api", 6),
	      "the ibv_wr_* datagram");
	target_mcast(&s, c);
	target_sizes(&s, c, &p);
	chan_barrier(c); /* end */
	ud_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("ud", ud_init, ud_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
