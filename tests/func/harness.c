// SPDX-License-Identifier: MIT
/* softrnic functional tests — harness (see harness.h). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__thread int t_failures;
__thread const char *t_role = "main";

int chan_send(struct chan *c, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(c->fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

int chan_recv(struct chan *c, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(c->fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

void chan_barrier(struct chan *c)
{
	char x = 'b';

	chan_send(c, &x, 1);
	chan_recv(c, &x, 1);
}

void side_opts_default(struct side_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->buf_len = 1 << 20;
	o->mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	o->qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	o->cq_size = 256;
	o->max_send_wr = 64;
	o->max_recv_wr = 64;
	o->max_sge = 4;
	o->max_inline = 64;
	o->rnr_retry = 7;
	o->min_rnr_timer = 1;
	o->retry_cnt = 7;
	o->timeout = 14;
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;

	ibv_free_device_list(l);
	return ctx;
}

/* The CQ: plain, or extended when the options ask for wc_flags. */
static void side_make_cq(struct side *s, const struct side_opts *o)
{
	if (o->cq_ex_flags) {
		struct ibv_cq_init_attr_ex ca = {
			.cqe = (uint32_t)o->cq_size,
			.cq_context = s,
			.channel = s->ch,
			.wc_flags = o->cq_ex_flags,
		};

		s->cqx = ibv_create_cq_ex(s->ctx, &ca);
		s->cq = s->cqx ? ibv_cq_ex_to_cq(s->cqx) : NULL;
	} else {
		s->cq = ibv_create_cq(s->ctx, o->cq_size, s, s->ch, 0);
	}
}

/* The QP: plain, or extended (ibv_create_qp_ex) with send_ops_flags. */
static void side_make_qp(struct side *s, const struct side_opts *o,
			 struct ibv_qp_init_attr *iap)
{
	struct ibv_qp_init_attr ia = *iap;

	if (o->send_ops_flags) {
		struct ibv_qp_init_attr_ex ix;

		memset(&ix, 0, sizeof(ix));
		memcpy(&ix, &ia, sizeof(ia));
		ix.comp_mask = IBV_QP_INIT_ATTR_PD |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ix.pd = s->pd;
		ix.send_ops_flags = o->send_ops_flags;
		s->qp = ibv_create_qp_ex(s->ctx, &ix);
	} else {
		s->qp = ibv_create_qp(s->pd, &ia);
	}
}

int side_open(struct side *s, const struct side_opts *o)
{
	struct ibv_qp_init_attr ia;

	memset(s, 0, sizeof(*s));
	s->ctx = open_dev();
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	if (o->use_channel)
		s->ch = ibv_create_comp_channel(s->ctx);
	side_make_cq(s, o);
	s->len = o->buf_len;
	s->buf = aligned_alloc(4096, (s->len + 4095) & ~4095ul);
	if (!s->pd || !s->cq || !s->buf)
		return -1;
	memset(s->buf, 0, s->len);
	s->mr = ibv_reg_mr(s->pd, s->buf, s->len, o->mr_access);
	if (!s->mr)
		return -1;
	if (o->use_srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 256,
							  .max_sge = 4 } };

		s->srq = ibv_create_srq(s->pd, &sa);
		if (!s->srq)
			return -1;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.srq = s->srq;
	ia.qp_type = o->uc ? IBV_QPT_UC : IBV_QPT_RC;
	ia.sq_sig_all = o->sig_all;
	ia.cap.max_send_wr = o->max_send_wr;
	ia.cap.max_recv_wr = o->max_recv_wr;
	ia.cap.max_send_sge = o->max_sge;
	ia.cap.max_recv_sge = o->max_sge;
	ia.cap.max_inline_data = o->max_inline;
	side_make_qp(s, o, &ia);
	return s->qp ? 0 : -1;
}

void side_info(const struct side *s, struct peer_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->qpn = s->qp->qp_num;
	pi->rkey = s->mr->rkey;
	pi->addr = (uintptr_t)s->buf;
	ibv_query_gid(s->ctx, 1, 0, &pi->gid);
}

int side_init(struct side *s, const struct side_opts *o)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = o->qp_access;
	return ibv_modify_qp(s->qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS) ?
		       -1 :
		       0;
}

int side_connect(struct side *s, const struct peer_info *peer,
		 const struct side_opts *o)
{
	return side_init(s, o) ? -1 : side_rtr_rts(s, peer, o);
}

int side_rtr_rts(struct side *s, const struct peer_info *peer,
		 const struct side_opts *o)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = o->psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  (o->uc ? 0 :
					   IBV_QP_MAX_DEST_RD_ATOMIC |
						   IBV_QP_MIN_RNR_TIMER)))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.sq_psn = o->psn;
	a.max_rd_atomic = o->max_rd_atomic ? o->max_rd_atomic : 16;
	return ibv_modify_qp(
		       s->qp, &a,
		       IBV_QP_STATE | IBV_QP_SQ_PSN |
			       (o->uc ? 0 :
					IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						IBV_QP_RNR_RETRY |
						IBV_QP_MAX_QP_RD_ATOMIC)) ?
		       -1 :
		       0;
}

int side_pair(struct side *s, const struct side_opts *o, struct chan *c,
	      struct peer_info *peer)
{
	struct peer_info me;

	if (side_open(s, o))
		return -1;
	side_info(s, &me);
	if (chan_send(c, &me, sizeof(me)) || chan_recv(c, peer, sizeof(*peer)))
		return -1;
	if (side_connect(s, peer, o))
		return -1;
	chan_barrier(c); /* both sides are RTS */
	return 0;
}

void side_close(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->srq)
		ibv_destroy_srq(s->srq);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->ch)
		ibv_destroy_comp_channel(s->ch);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t now_ms(void)
{
	return (uint64_t)(now_s() * 1000);
}

int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;

	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n == 1)
			return 0;
		if (n < 0)
			return -1;
		sched_yield();
	} while (now_ms() < end);
	return -1;
}

bool cq_empty_for(struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc;

	return poll_one(cq, &wc, ms) != 0;
}

int post_send1(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr,
	       uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
	       unsigned flags, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len || op >= IBV_WR_ATOMIC_CMP_AND_SWP ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

int post_recv1(struct ibv_qp *qp, void *addr, uint32_t len, uint32_t lkey,
	       uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

int role_idle(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

struct role_run {
	role_fn *fn;
	void *arg;
	struct chan c;
	const char *name;
	int failures;
};

static void *role_thread(void *p)
{
	struct role_run *r = p;

	t_role = r->name;
	t_failures = 0;
	r->failures = r->fn(&r->c, r->arg);
	close(r->c.fd);
	return NULL;
}

int run_roles(const char *name, role_fn *a, role_fn *b, void *arg,
	      enum run_mode mode)
{
	struct role_run ra = { a, arg, { -1 }, "initiator", 0 };
	struct role_run rb = { b, arg, { -1 }, "target", 0 };
	int sv[2], total;
	pthread_t th;

	/* a side that failed and left closes its end: the other's next
	 * chan_send fails (and says where) instead of killing the test */
	signal(SIGPIPE, SIG_IGN);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return 1;
	ra.c.fd = sv[0];
	rb.c.fd = sv[1];
	if (mode == MODE_THREAD) {
		pthread_create(&th, NULL, role_thread, &rb);
		role_thread(&ra);
		pthread_join(th, NULL);
		total = ra.failures + rb.failures;
	} else {
		int st = 0;
		pid_t pid;

		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			close(sv[0]);
			role_thread(&rb);
			_exit(rb.failures ? 1 : 0);
		}
		close(sv[1]);
		role_thread(&ra);
		waitpid(pid, &st, 0);
		total = ra.failures + (!WIFEXITED(st) || WEXITSTATUS(st) != 0);
	}
	printf("%s %s (%s)\n", total ? "FAIL" : "ok  ", name,
	       mode == MODE_THREAD ? "threads" : "processes");
	fflush(stdout);
	return total;
}

enum run_mode test_mode(int argc, char **argv)
{
	return argc > 1 && !strcmp(argv[1], "process") ? MODE_PROCESS :
							 MODE_THREAD;
}

int test_summary(int passed, int failed)
{
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

unsigned long long shared_ino_at(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long long s, e, ino, found = 0;
	char perms[8], line[512];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu", &s, &e, perms,
			   &ino) == 4 &&
		    addr >= s && addr < e && perms[3] == 's')
			found = ino;
	if (f)
		fclose(f);
	return found;
}
