// SPDX-License-Identifier: MIT
/*
 * XRC: XRC domains (ibv_open_xrcd: O_CREAT, O_EXCL, the same file's
 * domain shared, EBUSY while in use), XRC SRQs (a CQ is required, host-
 * unique numbers), the QP types (an INI QP has no receive queue, a TGT QP
 * neither send nor receive queue: posting to them is EINVAL; ibv_open_qp
 * of a TGT QP in the same domain only), their state rules, and traffic:
 * one INI QP sends into two XRC SRQs of the target (each receive CQE in
 * that SRQ's CQ, qp_num the TGT QP, src_qp the INI QP), WRITE and READ
 * checked against the named SRQ's PD; a SEND naming an SRQ of another
 * XRC domain, or no SRQ at all, completes with REM_INV_REQ_ERR. Two INI
 * QPs of a process sending into one XRC SRQ: on one host its ring and its
 * CQ are mapped once (transport/shm/shm_smap.c). In processes: the INI QP's process dies and
 * the TGT's lives on.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define T 5000

enum xrc_case {
	XC_OTHER_DOMAIN,
	XC_NO_SRQ
};

struct xrc_info {
	uint32_t tgt_qpn;
	uint32_t srqn[3]; /* two of the TGT's domain, one of another */
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

struct xrc_tgt {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq[3];
	struct ibv_xrcd *xrcd, *xrcd2;
	struct ibv_srq *srq[3];
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static int state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? -1 : (int)a.qp_state;
}

/* Waits (bounded) for qp to reach ERR: over a network the requester's QP
 * moves there once the NAK is handled, which may follow its CQE. */
static bool wait_err(struct ibv_qp *qp)
{
	for (int i = 0; i < 500; i++) {
		if (state_of(qp) == IBV_QPS_ERR)
			return true;
		usleep(10000);
	}
	return false;
}

static struct ibv_xrcd *xrcd_open(struct ibv_context *ctx, int fd, int oflags)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd,
		.oflags = oflags,
	};

	return ibv_open_xrcd(ctx, &a);
}

static struct ibv_srq *xsrq_create(struct xrc_tgt *t, struct ibv_xrcd *x,
				   struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 8, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC,
		.pd = t->pd,
		.xrcd = x,
		.cq = cq,
	};

	return ibv_create_srq_ex(t->ctx, &a);
}

static struct ibv_qp *tgt_qp_create(struct ibv_context *ctx, struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a = { .qp_type = IBV_QPT_XRC_RECV,
					 .comp_mask = IBV_QP_INIT_ATTR_XRCD,
					 .xrcd = x };

	return ibv_create_qp_ex(ctx, &a);
}

/* Domains shared through a file, O_EXCL, EBUSY, ibv_open_qp. */
static void xrcd_rules(struct xrc_tgt *t)
{
	char path[] = "/tmp/srn_xrcd_XXXXXX";
	int fd = mkstemp(path), fd2;
	struct ibv_xrcd *a, *b, *c;
	struct ibv_qp_open_attr oa = { .comp_mask = IBV_QP_OPEN_ATTR_NUM |
						    IBV_QP_OPEN_ATTR_XRCD |
						    IBV_QP_OPEN_ATTR_TYPE,
				       .qp_type = IBV_QPT_XRC_RECV };
	struct ibv_qp *qp, *q2;

	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	fd2 = open(path, O_RDONLY);
	unlink(path);
	CHECK(!xrcd_open(t->ctx, fd, 0) && errno == EINVAL,
	      "no domain for the file yet and no O_CREAT: EINVAL");
	a = xrcd_open(t->ctx, fd, O_CREAT);
	b = xrcd_open(t->ctx, fd2, O_CREAT); /* same inode: same domain */
	c = xrcd_open(t->ctx, -1, O_CREAT); /* a private one */
	CHECK(a && b && c, "open three");
	CHECK(!xrcd_open(t->ctx, fd, O_CREAT | O_EXCL),
	      "O_EXCL on an existing domain fails");
	if (!a || !b || !c)
		goto out;
	qp = tgt_qp_create(t->ctx, a);
	CHECK(qp && qp->qp_type == IBV_QPT_XRC_RECV, "TGT QP in domain a");
	if (!qp)
		goto out;
	CHECK(ibv_close_xrcd(a) == EBUSY, "close a domain in use: EBUSY");
	oa.qp_num = qp->qp_num;
	oa.xrcd = c;
	CHECK(!ibv_open_qp(t->ctx, &oa), "open_qp from another domain fails");
	oa.xrcd = b;
	q2 = ibv_open_qp(t->ctx, &oa);
	CHECK(q2 && q2->qp_num == qp->qp_num, "open_qp through the same file");
	if (q2)
		CHECK(!ibv_destroy_qp(q2), "close the opened handle");
	CHECK(state_of(qp) == IBV_QPS_RESET, "the QP lives on");
	CHECK(!ibv_destroy_qp(qp), "destroy the TGT QP");
out:
	if (a)
		CHECK(!ibv_close_xrcd(a), "close a");
	if (b)
		CHECK(!ibv_close_xrcd(b), "close b");
	if (c)
		CHECK(!ibv_close_xrcd(c), "close c");
	close(fd);
	if (fd2 >= 0)
		close(fd2);
}

/* Creation rules of XRC SRQs and QPs. */
static void create_rules(struct xrc_tgt *t)
{
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 8, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD,
		.srq_type = IBV_SRQT_XRC,
		.pd = t->pd,
		.xrcd = t->xrcd,
	};
	struct ibv_qp_init_attr_ex qa = { .qp_type = IBV_QPT_XRC_RECV,
					  .comp_mask = IBV_QP_INIT_ATTR_PD,
					  .pd = t->pd };
	struct ibv_device_attr da;
	uint32_t n0 = 0, n1 = 0;

	CHECK(!ibv_query_device(t->ctx, &da) &&
		      (da.device_cap_flags & IBV_DEVICE_XRC),
	      "IBV_DEVICE_XRC");
	CHECK(!ibv_create_srq_ex(t->ctx, &sa), "an XRC SRQ needs a CQ");
	CHECK(!ibv_create_qp_ex(t->ctx, &qa), "a TGT QP needs an XRC domain");
	CHECK(!ibv_get_srq_num(t->srq[0], &n0) &&
		      !ibv_get_srq_num(t->srq[1], &n1) && n0 && n0 != n1,
	      "SRQ numbers: 0x%x 0x%x", n0, n1);
}

static int tgt_open(struct xrc_tgt *t)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	memset(t, 0, sizeof(*t));
	t->ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	ibv_free_device_list(l);
	if (!t->ctx)
		return -1;
	t->pd = ibv_alloc_pd(t->ctx);
	for (int i = 0; i < 3; i++)
		t->cq[i] = ibv_create_cq(t->ctx, 16, NULL, NULL, 0);
	t->xrcd = xrcd_open(t->ctx, -1, O_CREAT);
	t->xrcd2 = xrcd_open(t->ctx, -1, O_CREAT);
	if (!t->pd || !t->cq[0] || !t->cq[1] || !t->cq[2] || !t->xrcd ||
	    !t->xrcd2)
		return -1;
	t->srq[0] = xsrq_create(t, t->xrcd, t->cq[0]);
	t->srq[1] = xsrq_create(t, t->xrcd, t->cq[1]);
	t->srq[2] = xsrq_create(t, t->xrcd2, t->cq[2]);
	t->qp = tgt_qp_create(t->ctx, t->xrcd);
	t->buf = calloc(1, 4096);
	t->mr = t->buf ? ibv_reg_mr(t->pd, t->buf, 4096,
				    IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ) :
			 NULL;
	return t->srq[0] && t->srq[1] && t->srq[2] && t->qp && t->mr ? 0 : -1;
}

static void tgt_close(struct xrc_tgt *t)
{
	if (t->qp)
		ibv_destroy_qp(t->qp);
	for (int i = 0; i < 3; i++)
		if (t->srq[i])
			ibv_destroy_srq(t->srq[i]);
	if (t->mr)
		ibv_dereg_mr(t->mr);
	if (t->xrcd)
		CHECK(!ibv_close_xrcd(t->xrcd), "close the domain");
	if (t->xrcd2)
		ibv_close_xrcd(t->xrcd2);
	for (int i = 0; i < 3; i++)
		if (t->cq[i])
			ibv_destroy_cq(t->cq[i]);
	if (t->pd)
		ibv_dealloc_pd(t->pd);
	if (t->ctx)
		ibv_close_device(t->ctx);
	free(t->buf);
}

/* RESET -> INIT -> RTR -> RTS; an INI QP is given the responder's
 * attributes too (ignored, as the kernel does: perftest gives them). */
static int xrc_connect(struct ibv_qp *qp, uint32_t dqpn,
		       const union ibv_gid *gid, bool tgt)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_REMOTE_READ };
	int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	if (!tgt)
		rts |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		       IBV_QP_MAX_QP_RD_ATOMIC;
	return ibv_modify_qp(qp, &a, rts) ? -1 : 0;
}

static int post_xrc(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr,
		    uint32_t len, uint32_t lkey, uint32_t srqn, uint64_t raddr,
		    uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(0x1234);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	wr.qp_type.xrc.remote_srqn = srqn;
	return ibv_post_send(qp, &wr, &bad);
}

static void check_recv(struct ibv_cq *cq, const struct xrc_info *me,
		       uint32_t ini, uint64_t wr_id, uint32_t len, bool imm)
{
	struct ibv_wc wc;

	CHECK(!poll_one(cq, &wc, T), "receive CQE %lu", (unsigned long)wr_id);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == wr_id &&
		      wc.byte_len == len && wc.qp_num == me->tgt_qpn &&
		      wc.src_qp == ini && wc.opcode == IBV_WC_RECV,
	      "CQE: status %d wr_id %lu len %u qp 0x%x src 0x%x",
	      (int)wc.status, (unsigned long)wc.wr_id, wc.byte_len, wc.qp_num,
	      wc.src_qp);
	CHECK(!!(wc.wc_flags & IBV_WC_WITH_IMM) == imm &&
		      (!imm || wc.imm_data == htobe32(0x1234)),
	      "immediate data");
}

/* One receive on each SRQ, a second on the first. */
static void tgt_post_recvs(struct xrc_tgt *tp)
{
	struct xrc_tgt t = *tp;
	uint8_t *b = t.buf;

	for (int i = 0; i < 3; i++) {
		struct ibv_sge sge = { (uintptr_t)b + 256 * (i + 1), 64,
				       t.mr->lkey };
		struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

		wr.wr_id = 10 + i;
		CHECK(!ibv_post_srq_recv(t.srq[i], &wr, &bad), "post srq");
	}
	{ /* a second receive on SRQ 0 */
		struct ibv_sge sge = { (uintptr_t)b + 1024, 64, t.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 20,
					  .sg_list = &sge,
					  .num_sge = 1 },
				   *bad;

		CHECK(!ibv_post_srq_recv(t.srq[0], &wr, &bad), "post srq");
	}
}

/* What the INI needs of the target: QPN, SRQ numbers, MR, GID. */
static void tgt_info(const struct xrc_tgt *t, struct xrc_info *me)
{
	memset(me, 0, sizeof(*me));
	me->tgt_qpn = t->qp->qp_num;
	for (int i = 0; i < 3; i++)
		ibv_get_srq_num(t->srq[i], &me->srqn[i]);
	me->rkey = t->mr->rkey;
	me->addr = (uintptr_t)t->buf;
	ibv_query_gid(t->ctx, 1, 0, &me->gid);
}

/* The TGT's half of the exchange: its info out, the INI's QPN in; then
 * its QP to RTS against that INI. 0 or -1. */
static int tgt_join(struct chan *c, struct xrc_tgt *t, struct xrc_info *me,
		    uint32_t *ini_p)
{
	if (chan_send(c, me, sizeof(*me)) ||
	    chan_recv(c, ini_p, sizeof(*ini_p)))
		return -1;
	return xrc_connect(t->qp, *ini_p, &me->gid, true) ? -1 : 0;
}

/*
 * The initiator: the harness's side with an INI QP in place of its RC QP,
 * the target's xrc_info received, our QPN sent, the INI QP in RTS.
 * 0, or the failures so far (a REQUIRE failed).
 */
static int ini_open(struct side *s, const struct side_opts *o, struct chan *c,
		    struct xrc_info *p)
{
	struct ibv_qp_init_attr_ex qa = { .qp_type = IBV_QPT_XRC_SEND,
					  .comp_mask = IBV_QP_INIT_ATTR_PD,
					  .cap = { .max_send_wr = 16,
						   .max_send_sge = 1 } };
	uint32_t me;

	REQUIRE(!side_open(s, o), "setup");
	qa.pd = s->pd;
	qa.send_cq = s->cq;
	qa.recv_cq = s->cq;
	ibv_destroy_qp(s->qp); /* the harness's RC QP: an INI QP instead */
	s->qp = ibv_create_qp_ex(s->ctx, &qa);
	REQUIRE(s->qp && s->qp->qp_type == IBV_QPT_XRC_SEND, "INI QP");
	me = s->qp->qp_num;
	REQUIRE(!chan_recv(c, p, sizeof(*p)) && !chan_send(c, &me, sizeof(me)),
		"exchange");
	REQUIRE(!xrc_connect(s->qp, p->tgt_qpn, &p->gid, false), "INI to RTS");
	return 0;
}

static int xrc_target(struct chan *c, void *arg)
{
	enum xrc_case xc = (enum xrc_case)(uintptr_t)arg;
	struct xrc_tgt t;
	struct xrc_info me;
	uint32_t ini;
	uint8_t *b;

	REQUIRE(!tgt_open(&t), "setup");
	b = t.buf;
	create_rules(&t);
	xrcd_rules(&t);
	tgt_info(&t, &me);
	CHECK(post_recv1(t.qp, b, 64, t.mr->lkey, 9) == EINVAL,
	      "post_recv on a TGT QP: EINVAL");
	CHECK(post_send1(t.qp, IBV_WR_SEND, b, 8, t.mr->lkey, 0, 0,
			 IBV_SEND_SIGNALED, 9) == EINVAL,
	      "post_send on a TGT QP: EINVAL");
	tgt_post_recvs(&t);
	REQUIRE(!tgt_join(c, &t, &me, &ini), "exchange, TGT to RTS");
	CHECK(state_of(t.qp) == IBV_QPS_RTS, "TGT in RTS");
	chan_barrier(c); /* 1: connected */
	chan_barrier(c); /* 2: three SENDs and a WRITE done */
	check_recv(t.cq[0], &me, ini, 10, 7, false);
	check_recv(t.cq[1], &me, ini, 11, 7, true);
	check_recv(t.cq[0], &me, ini, 20, 8, false);
	CHECK(!memcmp(b + 256, "to-srq0", 7) &&
		      !memcmp(b + 512, "to-srq1", 7) &&
		      !memcmp(b + 1024, "again-s0", 8),
	      "payloads where the SRQs' WQEs point");
	CHECK(!memcmp(b + 2048, "written", 7), "WRITE landed");
	CHECK(cq_empty_for(t.cq[2], 20), "nothing for the other domain's SRQ");
	chan_barrier(c); /* 3: the bad SEND failed */
	CHECK(cq_empty_for(t.cq[2], 20), "still nothing in the other SRQ's CQ");
	CHECK(wait_err(t.qp), "TGT in ERR (it NAKed an invalid request)");
	(void)xc;
	tgt_close(&t);
	return t_failures;
}

/* Three SENDs into two SRQs, a WRITE, then a READ of what the first SEND
 * placed. */
static void ini_traffic(struct side *s, const struct xrc_info *pp)
{
	const struct xrc_info p = *pp;
	struct ibv_wc wc;
	uint8_t *b = s->buf;

	memcpy(b, "to-srq0", 7);
	memcpy(b + 64, "to-srq1", 7);
	memcpy(b + 128, "again-s0", 8);
	memcpy(b + 192, "written", 7);
	CHECK(!post_xrc(s->qp, IBV_WR_SEND, b, 7, s->mr->lkey, p.srqn[0], 0, 0,
			1) &&
		      !post_xrc(s->qp, IBV_WR_SEND_WITH_IMM, b + 64, 7,
				s->mr->lkey, p.srqn[1], 0, 0, 2) &&
		      !post_xrc(s->qp, IBV_WR_SEND, b + 128, 8, s->mr->lkey,
				p.srqn[0], 0, 0, 3) &&
		      !post_xrc(s->qp, IBV_WR_RDMA_WRITE, b + 192, 7,
				s->mr->lkey, p.srqn[0], p.addr + 2048, p.rkey,
				4),
	      "post");
	for (int i = 1; i <= 4; i++) {
		CHECK(!poll_one(s->cq, &wc, T), "completion %d", i);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i,
		      "wr %lu: %s", (unsigned long)wc.wr_id,
		      ibv_wc_status_str(wc.status));
	}
	CHECK(!post_xrc(s->qp, IBV_WR_RDMA_READ, b + 512, 7, s->mr->lkey,
			p.srqn[1], p.addr + 256, p.rkey, 5),
	      "post READ");
	CHECK(!poll_one(s->cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      !memcmp(b + 512, "to-srq0", 7),
	      "READ back what the first SEND placed: %s",
	      ibv_wc_status_str(wc.status));
}

static int xrc_init(struct chan *c, void *arg)
{
	enum xrc_case xc = (enum xrc_case)(uintptr_t)arg;
	struct side_opts o;
	struct side s;
	struct xrc_info p;
	struct ibv_wc wc;
	uint8_t *b;

	side_opts_default(&o);
	o.qp_access = IBV_ACCESS_REMOTE_WRITE;
	REQUIRE(!ini_open(&s, &o, c, &p), "INI side");
	b = s.buf;
	CHECK(post_recv1(s.qp, b, 64, s.mr->lkey, 9) == EINVAL,
	      "post_recv on an INI QP: EINVAL");
	chan_barrier(c); /* 1 */
	ini_traffic(&s, &p);
	chan_barrier(c); /* 2 */
	CHECK(!post_xrc(s.qp, IBV_WR_SEND, b, 7, s.mr->lkey,
			xc == XC_OTHER_DOMAIN ? p.srqn[2] : 0, 0, 0, 6),
	      "post the bad SEND");
	CHECK(!poll_one(s.cq, &wc, T) && wc.wr_id == 6 &&
		      wc.status == IBV_WC_REM_INV_REQ_ERR,
	      "SEND to %s: %s",
	      xc == XC_OTHER_DOMAIN ? "another domain's SRQ" : "no SRQ",
	      ibv_wc_status_str(wc.status));
	CHECK(wait_err(s.qp), "INI in ERR");
	chan_barrier(c); /* 3 */
	side_close(&s);
	return t_failures;
}

/*
 * The process of an XRC INI QP dies while connected (no BYE: _exit, as
 * kill -9): the TGT QP, which has no CQ of its own, goes to ERR and its
 * process lives on with its SRQs and their CQs intact (a hang-up once
 * marked a NULL CQ and crashed it). This role runs in the parent.
 */
static int xrc_tgt_survives(struct chan *c, void *arg)
{
	struct xrc_tgt t;
	struct xrc_info me;
	uint32_t ini;

	(void)arg;
	REQUIRE(!tgt_open(&t), "setup");
	tgt_info(&t, &me);
	REQUIRE(!tgt_join(c, &t, &me, &ini), "exchange, TGT to RTS");
	chan_barrier(c); /* 1: connected */
	chan_barrier(c); /* 2: the WRITE done; then the INI's process dies */
	CHECK(!memcmp(t.buf + 2048, "written", 7), "WRITE landed");
	CHECK(wait_err(t.qp), "TGT in ERR after its peer died");
	CHECK(cq_empty_for(t.cq[0], 20), "no completion in the SRQ's CQ");
	{ /* the SRQ, shared with other TGT QPs, still takes receives */
		struct ibv_sge sge = { (uintptr_t)t.buf, 64, t.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 30,
					  .sg_list = &sge,
					  .num_sge = 1 },
				   *bad;

		CHECK(!ibv_post_srq_recv(t.srq[0], &wr, &bad), "post srq");
	}
	tgt_close(&t);
	return t_failures;
}

/* The INI side: connect, one WRITE, then exit without destroying
 * anything. Runs in the child process. */
static int xrc_ini_dies(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct xrc_info p;
	struct ibv_wc wc;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(!ini_open(&s, &o, c, &p), "INI side");
	chan_barrier(c); /* 1 */
	memcpy(s.buf, "written", 7);
	CHECK(!post_xrc(s.qp, IBV_WR_RDMA_WRITE, s.buf, 7, s.mr->lkey,
			p.srqn[0], p.addr + 2048, p.rkey, 1) &&
		      !poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS,
	      "WRITE");
	chan_barrier(c); /* 2 */
	_exit(t_failures ? 1 : 0);
}

/*
 * The first SEND to an XRC SRQ makes the initiator fetch it from the
 * TGT's process, which only an application thread may do (a round trip
 * on the control connection). Here that falls to the progress thread
 * while the application waits in ibv_get_cq_event (ibv_xsrq_pingpong -e
 * does): a SEND into SRQ 0 stalls on RNR (no receive yet), a signaled
 * SEND into SRQ 1, never fetched, waits behind it; the receives come once
 * the initiator sleeps. The progress thread must wake the waiting thread
 * to fetch (srn_ctx_channels_poke); else the retries run out and the
 * second SEND ends RETRY_EXC_ERR.
 */
static int xrc_fetch_tgt(struct chan *c, void *arg)
{
	struct xrc_tgt t;
	struct xrc_info me;
	uint32_t ini;

	(void)arg;
	REQUIRE(!tgt_open(&t), "setup");
	tgt_info(&t, &me);
	REQUIRE(!tgt_join(c, &t, &me, &ini), "exchange, TGT to RTS");
	chan_barrier(c); /* 1: connected, no receive posted */
	chan_barrier(c); /* 2: posted; the initiator goes to sleep */
	usleep(200000);
	tgt_post_recvs(&t);
	check_recv(t.cq[1], &me, ini, 11, 7, true);
	chan_barrier(c); /* 3 */
	tgt_close(&t);
	return t_failures;
}

static int xrc_fetch_ini(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct xrc_info p;
	struct ibv_cq *cq;
	struct ibv_wc wc;
	void *cctx;

	(void)arg;
	side_opts_default(&o);
	o.use_channel = true;
	REQUIRE(!ini_open(&s, &o, c, &p), "INI side");
	chan_barrier(c); /* 1 */
	memcpy(s.buf, "to-srq0", 7);
	memcpy(s.buf + 64, "to-srq1", 7);
	REQUIRE(!ibv_req_notify_cq(s.cq, 0), "arm");
	for (int i = 0; i < 2; i++) { /* only the second is signaled */
		struct ibv_sge sge = { (uintptr_t)s.buf + 64 * i, 7,
				       s.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 1 + i,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = i ? IBV_WR_SEND_WITH_IMM :
							IBV_WR_SEND,
					  .send_flags = i ? IBV_SEND_SIGNALED :
							    0,
					  .imm_data = htobe32(0x1234) },
				   *bad;

		wr.qp_type.xrc.remote_srqn = p.srqn[i];
		REQUIRE(!ibv_post_send(s.qp, &wr, &bad), "post into SRQ %d", i);
	}
	chan_barrier(c); /* 2 */
	REQUIRE(!ibv_get_cq_event(s.ch, &cq, &cctx), "get event");
	ibv_ack_cq_events(cq, 1);
	REQUIRE(!poll_one(s.cq, &wc, T), "the second SEND's completion");
	CHECK(wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS, "wr %lu: %s",
	      (unsigned long)wc.wr_id, ibv_wc_status_str(wc.status));
	chan_barrier(c); /* 3 */
	side_close(&s);
	return t_failures;
}

static bool over_network(void)
{
	const char *t = getenv("SOFTRNIC_TRANSPORT");

	return t && strcmp(t, "shm") != 0;
}

/* Mappings here of segments of this kind (memfd name srn-cq, srn-srq). */
static int seg_maps(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], want[32];
	int n = 0;

	if (!f)
		return -1;
	snprintf(want, sizeof(want), "memfd:%s ", name);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, want) != NULL;
	fclose(f);
	return n;
}

/*
 * Two TGT QPs of one domain, each connected to an INI QP of one process;
 * both INI QPs send into SRQ 0. On the shared-memory path the initiator's
 * process maps that SRQ and its CQ once, not once per connection.
 */
static int xrc_maps_tgt(struct chan *c, void *arg)
{
	struct xrc_tgt t;
	struct xrc_info me;
	struct ibv_qp *qp2;
	uint32_t ini[2], q2;
	struct ibv_wc wc;

	(void)arg;
	REQUIRE(!tgt_open(&t), "setup");
	qp2 = tgt_qp_create(t.ctx, t.xrcd);
	REQUIRE(qp2, "second TGT QP");
	tgt_info(&t, &me);
	tgt_post_recvs(&t); /* two on SRQ 0 */
	q2 = qp2->qp_num;
	REQUIRE(!chan_send(c, &me, sizeof(me)) &&
			!chan_recv(c, &ini[0], sizeof(ini[0])) &&
			!chan_send(c, &q2, sizeof(q2)) &&
			!chan_recv(c, &ini[1], sizeof(ini[1])),
		"exchange");
	REQUIRE(!xrc_connect(t.qp, ini[0], &me.gid, true) &&
			!xrc_connect(qp2, ini[1], &me.gid, true),
		"TGTs to RTS");
	chan_barrier(c); /* 1: connected */
	chan_barrier(c); /* 2: both SENDs done */
	for (int i = 0; i < 2; i++)
		CHECK(!poll_one(t.cq[0], &wc, T) &&
			      wc.status == IBV_WC_SUCCESS &&
			      wc.src_qp == ini[i],
		      "SRQ 0's receive %d", i);
	ibv_destroy_qp(qp2);
	tgt_close(&t);
	return t_failures;
}

/* A SEND of INI QP qp into SRQ srqn, completed. */
static void send_to_srq(struct side *s, struct ibv_qp *qp, uint32_t srqn,
			uint64_t wr_id)
{
	struct ibv_wc wc;

	CHECK(!post_xrc(qp, IBV_WR_SEND, s->buf, 7, s->mr->lkey, srqn, 0, 0,
			wr_id) &&
		      !poll_one(s->cq, &wc, T) && wc.wr_id == wr_id &&
		      wc.status == IBV_WC_SUCCESS,
	      "SEND %lu into SRQ 0", (unsigned long)wr_id);
}

static int xrc_maps_ini(struct chan *c, void *arg)
{
	struct ibv_qp_init_attr_ex qa = { .qp_type = IBV_QPT_XRC_SEND,
					  .comp_mask = IBV_QP_INIT_ATTR_PD,
					  .cap = { .max_send_wr = 16,
						   .max_send_sge = 1 } };
	struct side_opts o;
	struct side s;
	struct xrc_info p;
	struct ibv_qp *qp2;
	uint32_t q2, me2;
	int srq1, cq1;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(!ini_open(&s, &o, c, &p), "INI side");
	qa.pd = s.pd;
	qa.send_cq = qa.recv_cq = s.cq;
	qp2 = ibv_create_qp_ex(s.ctx, &qa);
	REQUIRE(qp2, "second INI QP");
	me2 = qp2->qp_num;
	REQUIRE(!chan_recv(c, &q2, sizeof(q2)) &&
			!chan_send(c, &me2, sizeof(me2)),
		"exchange");
	REQUIRE(!xrc_connect(qp2, q2, &p.gid, false), "second INI to RTS");
	chan_barrier(c); /* 1 */
	memcpy(s.buf, "to-srq0", 7);
	send_to_srq(&s, s.qp, p.srqn[0], 1);
	srq1 = seg_maps("srn-srq");
	cq1 = seg_maps("srn-cq");
	send_to_srq(&s, qp2, p.srqn[0], 2);
	if (!over_network()) /* the network path maps nothing */
		CHECK(srq1 > 0 && seg_maps("srn-srq") == srq1 &&
			      seg_maps("srn-cq") == cq1,
		      "SRQ and CQ segments mapped %d, %d after one "
		      "connection's SEND; %d, %d after the second's (the "
		      "same expected)",
		      srq1, cq1, seg_maps("srn-srq"), seg_maps("srn-cq"));
	chan_barrier(c); /* 2 */
	ibv_destroy_qp(qp2);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("xrc_other_domain", xrc_init, xrc_target,
	    (void *)(uintptr_t)XC_OTHER_DOMAIN, m, pass, fail);
	RUN("xrc_no_srq", xrc_init, xrc_target, (void *)(uintptr_t)XC_NO_SRQ, m,
	    pass, fail);
	RUN("xrc_fetch_while_blocked", xrc_fetch_ini, xrc_fetch_tgt, NULL, m,
	    pass, fail);
	RUN("xrc_two_ini_one_srq", xrc_maps_ini, xrc_maps_tgt, NULL, m, pass,
	    fail);
	if (m == MODE_PROCESS) /* a role exits: needs its own process */
		RUN("xrc_ini_dies", xrc_tgt_survives, xrc_ini_dies, NULL, m,
		    pass, fail);
	return test_summary(pass, fail);
}
