// SPDX-License-Identifier: MIT
/*
 * Direct access (<softrnic/direct.h>): a peer's MR as a pointer. Over
 * shared memory: loads, stores and atomics through the pointer reach the
 * target's memory both ways, a read-only grant maps read-only, and every
 * refusal has its errno (no DIRECT grant, rights, bounds, stack memory,
 * QP not connected, bad arguments, unknown pointer, deregistered MR).
 * Over a network transport every map fails with EREMOTE.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <softrnic/direct.h>

#define RW (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)
#define OFF_RW 65536

struct direct_info {
	struct peer_info rw, ro, stack, plain;
};

static bool over_network(void)
{
	const char *t = getenv("SOFTRNIC_TRANSPORT");

	return t && strcmp(t, "shm") != 0;
}

/* The protection of the mapping that holds p, from /proc/self/maps. */
static bool mapped_read_only(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long s, e;
	char perms[8];
	bool ro = false;
	char line[512];

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) == 3 &&
		    (uintptr_t)p >= s && (uintptr_t)p < e)
			ro = perms[0] == 'r' && perms[1] == '-';
	}
	if (f)
		fclose(f);
	return ro;
}

static void refusals(struct side *s, const struct direct_info *d)
{
	struct ibv_qp_init_attr qa = { .send_cq = s->cq,
				       .recv_cq = s->cq,
				       .cap = { 1, 1, 1, 1, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_qp *idle = ibv_create_qp(s->pd, &qa);
	void *p;

	CHECK(srn_direct_map(s->qp, d->rw.addr, d->rw.rkey, 0, RW, &p) ==
		      EINVAL,
	      "length 0");
	CHECK(srn_direct_map(s->qp, d->rw.addr, d->rw.rkey, 8, 0, &p) == EINVAL,
	      "no access");
	CHECK(srn_direct_map(s->qp, d->rw.addr, d->rw.rkey, 8,
			     IBV_ACCESS_LOCAL_WRITE, &p) == EINVAL,
	      "local access");
	CHECK(srn_direct_map(s->qp, d->rw.addr, d->rw.rkey, 8, RW, NULL) ==
		      EINVAL,
	      "no ptr_p");
	CHECK(srn_direct_map(NULL, d->rw.addr, d->rw.rkey, 8, RW, &p) ==
			      EINVAL &&
		      errno == EINVAL,
	      "no qp");
	CHECK(idle && srn_direct_map(idle, d->rw.addr, d->rw.rkey, 8, RW, &p) ==
			      ENOTCONN,
	      "QP in RESET");
	CHECK(srn_direct_unmap(NULL) == EINVAL, "unmap NULL");
	CHECK(srn_direct_unmap(s->buf) == EINVAL, "unmap a foreign pointer");
	if (idle)
		ibv_destroy_qp(idle);
	if (over_network()) {
		CHECK(srn_direct_map(s->qp, d->rw.addr, d->rw.rkey, 8, RW,
				     &p) == EREMOTE,
		      "network peer");
		return;
	}
	CHECK(srn_direct_map(s->qp, d->plain.addr, d->plain.rkey, 8, RW, &p) ==
		      EACCES,
	      "MR without the DIRECT grant");
	CHECK(srn_direct_map(s->qp, d->ro.addr, d->ro.rkey, 8, RW, &p) ==
		      EACCES,
	      "write on a read-only grant");
	CHECK(srn_direct_map(s->qp, d->rw.addr + 4000, d->rw.rkey, 200, RW,
			     &p) == EACCES,
	      "beyond the MR");
	CHECK(srn_direct_map(s->qp, d->rw.addr, d->rw.rkey ^ 0x4000, 8, RW,
			     &p) == EACCES,
	      "wrong rkey");
	CHECK(srn_direct_map(s->qp, d->stack.addr, d->stack.rkey, 8, RW, &p) ==
		      EOPNOTSUPP,
	      "stack memory");
}

static void loads_and_stores(struct side *s, struct chan *c,
			     const struct direct_info *d)
{
	uint8_t *rw = NULL, *ro = NULL;

	CHECK(!srn_direct_map(s->qp, d->rw.addr + 100, d->rw.rkey, 200,
			      RW | IBV_ACCESS_REMOTE_ATOMIC, (void **)&rw),
	      "map rw: %s", strerror(errno));
	CHECK(!srn_direct_map(s->qp, d->ro.addr, d->ro.rkey, 4096,
			      IBV_ACCESS_REMOTE_READ, (void **)&ro),
	      "map ro: %s", strerror(errno));
	if (!rw || !ro)
		return;
	CHECK(!memcmp(rw, "target-wrote-this", 17), "load the target's data");
	CHECK(!memcmp(ro, "read-only-page", 14), "load a read-only grant");
	CHECK(mapped_read_only(ro), "the read-only grant is mapped read-only");
	CHECK(!mapped_read_only(rw), "the rw grant is writable");
	memcpy(rw + 20, "initiator-stored", 16);
	__atomic_fetch_add((uint64_t *)(rw + 60), 5, __ATOMIC_RELEASE);
	chan_barrier(c); /* 1: the target checks, then writes again */
	chan_barrier(c); /* 2 */
	CHECK(!memcmp(rw + 100, "second-round", 12), "see the target's store");
	CHECK(!srn_direct_unmap(rw), "unmap");
	CHECK(srn_direct_unmap(rw) == EINVAL, "unmap twice");
	CHECK(!srn_direct_unmap(ro), "unmap ro");
}

static int direct_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct direct_info d;
	void *ptr;

	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, &d, sizeof(d)), "MRs");
	refusals(&s, &d);
	if (over_network()) {
		chan_barrier(c);
		chan_barrier(c);
	} else {
		loads_and_stores(&s, c, &d);
	}
	chan_barrier(c); /* 3: the target deregistered the rw MR */
	CHECK(srn_direct_map(s.qp, d.rw.addr, d.rw.rkey, 8, RW, &ptr) ==
		      (over_network() ? EREMOTE : EACCES),
	      "map after dereg");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static struct ibv_mr *reg(struct side *s, void *addr, int access,
			  struct peer_info *pi)
{
	struct ibv_mr *mr = ibv_reg_mr(s->pd, addr, 4096, access);

	CHECK(mr, "register %p", addr);
	pi->addr = (uintptr_t)addr;
	pi->rkey = mr ? mr->rkey : 0;
	return mr;
}

static int direct_target(struct chan *c, void *arg)
{
	int direct = SOFTRNIC_ACCESS_DIRECT | IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr *rw, *ro, *stack, *plain;
	struct side_opts o;
	struct direct_info d = { 0 };
	struct side s;
	struct peer_info p;
	char stackbuf[4096] __attribute__((aligned(4096)));
	/* a read-only grant needs pages of its own: one inside s.buf (a
	 * writable MR) would be reached only with process_vm_* */
	uint8_t *ropage = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	side_opts_default(&o);
	REQUIRE(ropage != MAP_FAILED, "mmap");
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memcpy(s.buf + OFF_RW + 100, "target-wrote-this", 17);
	memcpy(ropage, "read-only-page", 14);
	rw = reg(&s, s.buf + OFF_RW, direct | RW | IBV_ACCESS_REMOTE_ATOMIC,
		 &d.rw);
	ro = reg(&s, ropage, direct | IBV_ACCESS_REMOTE_READ, &d.ro);
	stack = reg(&s, stackbuf, direct | RW, &d.stack);
	plain = reg(&s, s.buf + 3 * 65536, IBV_ACCESS_LOCAL_WRITE | RW,
		    &d.plain);
	chan_send(c, &d, sizeof(d));
	chan_barrier(c); /* 1 */
	if (!over_network()) {
		CHECK(!memcmp(s.buf + OFF_RW + 120, "initiator-stored", 16),
		      "the initiator's store");
		CHECK(*(uint64_t *)(s.buf + OFF_RW + 160) == 5,
		      "the initiator's atomic");
		memcpy(s.buf + OFF_RW + 200, "second-round", 12);
	}
	chan_barrier(c); /* 2 */
	ibv_dereg_mr(rw);
	chan_barrier(c); /* 3 */
	chan_barrier(c);
	ibv_dereg_mr(ro);
	ibv_dereg_mr(stack);
	ibv_dereg_mr(plain);
	munmap(ropage, 4096);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("direct_map", direct_init, direct_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
