// SPDX-License-Identifier: MIT
/*
 * fork() late in a process that has made and destroyed many contexts,
 * MRs and QPs: memory that was registered and deregistered before the
 * fork (heap pages among them) is the child's own copy, as any private
 * memory is across fork, and children that use the inherited context
 * (device memory) and their own (MRs, CQs) while the parent goes on
 * allocating all exit cleanly (rdma-core's test_multi_process_alloc_dm
 * after the rest of its suite).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 20
#define NCHILD 5
#define WAIT_S 30

static struct ibv_context *open_first(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;

	ibv_free_device_list(l);
	return ctx;
}

/* One round of a long-running program: a context with a CQ, a QP and
 * MRs over heap buffers of several sizes, all destroyed again. */
static void churn_round(int r)
{
	struct side_opts o;
	struct side s;
	void *small[8];
	struct ibv_mr *mr[8];

	side_opts_default(&o);
	o.buf_len = 4096u << (r % 5);
	CHECK(!side_open(&s, &o), "round %d: open", r);
	for (int i = 0; i < 8; i++) {
		small[i] = malloc(100 + 700 * i + r);
		mr[i] = small[i] ? ibv_reg_mr(s.pd, small[i], 100 + 700 * i + r,
					      IBV_ACCESS_LOCAL_WRITE |
						      IBV_ACCESS_REMOTE_WRITE) :
				   NULL;
		CHECK(mr[i], "round %d: MR %d", r, i);
	}
	for (int i = 0; i < 8; i++) {
		if (mr[i])
			ibv_dereg_mr(mr[i]);
		free(small[i]);
	}
	side_close(&s);
}

/* Heap work in a child or the parent: blocks of many sizes, written and
 * checked. */
static bool heap_work(unsigned seed)
{
	void *p[64] = { 0 };
	bool ok = true;

	for (int k = 0; k < 2000; k++) {
		unsigned i = (seed = seed * 1103515245u + 12345u) % 64;
		size_t n = 16 + (seed >> 8) % 3000;

		if (p[i]) {
			ok &= ((unsigned char *)p[i])[0] == (i & 0xff);
			free(p[i]);
		}
		p[i] = malloc(n);
		if (p[i])
			memset(p[i], (int)i, n);
	}
	for (int i = 0; i < 64; i++)
		free(p[i]);
	return ok;
}

/* A child: device memory on the inherited context, then its own context
 * with an MR over the heap and a CQ. 0 when all went well. */
static int child_main(struct ibv_context *inherited, int idx)
{
	struct ibv_alloc_dm_attr da = { .length = 4096 };
	struct ibv_context *ctx;
	struct ibv_dm *dm;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	uint32_t v = 0x1234 + idx, back = 0;
	char *buf;
	int bad = 0;

	if (!heap_work(7u + idx))
		bad |= 1;
	dm = ibv_alloc_dm(inherited, &da);
	if (!dm || ibv_memcpy_to_dm(dm, 0, &v, 4) ||
	    ibv_memcpy_from_dm(&back, dm, 0, 4) || back != v)
		bad |= 2;
	if (dm)
		ibv_free_dm(dm);
	ctx = open_first();
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	buf = malloc(10000);
	mr = pd && buf ? ibv_reg_mr(pd, buf, 10000,
				    IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE) :
			 NULL;
	cq = ctx ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!mr || !cq)
		bad |= 4;
	if (!heap_work(99u + idx))
		bad |= 1;
	if (cq)
		ibv_destroy_cq(cq);
	if (mr)
		ibv_dereg_mr(mr);
	free(buf);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	return bad;
}

/* Waits (bounded) for pid; its exit status, or -1 (killed when late). */
static int wait_child(pid_t pid, double until)
{
	int st;

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_s() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(10000);
	}
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * Pages registered and deregistered before the fork are private to each
 * side after it: a write by the child is not seen by the parent, and the
 * other way round.
 */
static void check_private_after_dereg(struct ibv_pd *pd)
{
	char *b = aligned_alloc(4096, 8192);
	struct ibv_mr *mr;
	int go[2], done[2];
	char c = 0;
	pid_t pid;
	int st;

	if (!b || pipe(go) || pipe(done)) {
		CHECK(0, "setup");
		free(b);
		return;
	}
	memset(b, 'p', 8192);
	mr = ibv_reg_mr(pd, b, 8192,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "MR");
	if (mr)
		ibv_dereg_mr(mr);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		bool ok;

		b[0] = 'c'; /* the parent must not see it */
		if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(3);
		ok = b[1] == 'p'; /* nor we the parent's */
		_exit(ok ? 0 : 1);
	}
	CHECK(pid > 0, "fork");
	if (pid > 0) {
		CHECK(read(done[0], &c, 1) == 1, "child ready");
		CHECK(b[0] == 'p', "the child's write reached the parent");
		b[1] = 'P';
		CHECK(write(go[1], &c, 1) == 1, "go");
		st = wait_child(pid, now_s() + WAIT_S);
		CHECK(st == 0, "child: the parent's write reached it (%d)", st);
	}
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
	free(b);
}

static int forklate_role(struct chan *c, void *arg)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	pid_t pids[NCHILD];
	double until;

	for (int r = 0; r < ROUNDS; r++)
		churn_round(r);
	ctx = open_first();
	REQUIRE(ctx, "open");
	pd = ibv_alloc_pd(ctx);
	REQUIRE(pd, "PD");
	check_private_after_dereg(pd);
	fflush(NULL);
	for (int i = 0; i < NCHILD; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(child_main(ctx, i));
		CHECK(pids[i] > 0, "fork %d", i);
	}
	CHECK(heap_work(1234), "the parent's heap");
	until = now_s() + WAIT_S;
	for (int i = 0; i < NCHILD; i++) {
		int st = pids[i] > 0 ? wait_child(pids[i], until) : 0;

		CHECK(st == 0,
		      "child %d: status %d (1 heap, 2 DM, 4 MR/CQ, "
		      "128+ signal, -1 hung)",
		      i, st);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return t_failures;
}

static int nothing(struct chan *c, void *arg)
{
	return 0;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("fork_late_children", forklate_role, nothing, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
