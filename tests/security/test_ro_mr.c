// SPDX-License-Identifier: MIT
/*
 * An MR whose one remote right is REMOTE_READ is shared read-only, whatever
 * its local rights (docs/security.md, issue 13 item 2). The target registers
 * LOCAL_WRITE | REMOTE_READ over a buffer of its own; the initiator (another
 * process) READs it, places a SEND into it (a receive buffer) and, over the
 * same-host transport, looks at what it was given: every mapping of the
 * MR's memfd (found by the inode the target reports) in its own
 * /proc/self/maps is without 'w', mprotect(PROT_WRITE) on it fails, and a
 * descriptor of it, reopened O_RDWR through /proc/self/fd, cannot be
 * written nor mapped writable. The owner keeps writing its buffer (the next
 * READ sees it) and a WRITE to the key gets REM_ACCESS_ERR with the
 * buffer unchanged. Over TCP nothing of the MR is mapped at all.
 *
 * ro_over_rw: a read-only MR over a page of a writable MR (remote WRITE)
 * cannot have sealed pages of its own; it is served without a mapping
 * (process_vm_*): the READ works, its pages are not mapped by the peer.
 *
 * local_only: an MR without remote rights is never shared (with
 * SOFTRNIC_LOCAL_MR=shared, which shares such MRs with kin peers, the
 * data is checked and, over shared memory, that the private one was
 * made shareable as asked). The target
 * posts receives in two LOCAL_WRITE-only MRs, one over private memory, one
 * over a memfd of its own mapped MAP_SHARED; the initiator's SENDs (larger
 * than an inline CQE) land in both, the private one is still private
 * memory afterwards (not remapped onto a memfd), and the initiator has no
 * mapping and no descriptor of the target's memfd.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define T 5000
#define RO_LEN (4 * 4096)
#define RECV_OFF 8192 /* a receive buffer inside the read-only MR */

struct ro_info {
	uint32_t rkey;
	uint32_t pid;
	uint64_t addr;
	uint64_t ino; /* of the memfd behind the MR (0: none) */
};

static bool local_private(void)
{
	const char *e = getenv("SOFTRNIC_LOCAL_MR");

	return !e || strcmp(e, "shared");
}

static bool over_shm(void)
{
	const char *t = getenv("SOFTRNIC_TRANSPORT");

	return !t || strcmp(t, "tcp");
}

static int wr1(struct side *s, enum ibv_wr_opcode op, uint32_t off,
	       uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_wc wc;

	if (post_send1(s->qp, op, s->buf + off, len, s->mr->lkey, raddr, rkey,
		       IBV_SEND_SIGNALED, 7) ||
	    poll_one(s->cq, &wc, T))
		return -1;
	return wc.status;
}

struct vma {
	uintptr_t start, end;
	char perms[8];
};

/* Our mappings of inode ino (up to max). */
static int maps_of(uint64_t ino, struct vma *v, int max)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long long s, e, i;
	char line[512];
	int n = 0;

	while (f && n < max && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu", &s, &e,
			   v[n].perms, &i) == 4 &&
		    i == ino) {
			v[n].start = s;
			v[n].end = e;
			n++;
		}
	}
	if (f)
		fclose(f);
	return n;
}

/* A descriptor of the memfd, as the peer was given one: through our own
 * mapping (map_files, root), else from the target's descriptor table. */
static int fd_of(const struct vma *v, pid_t owner, uint64_t ino)
{
	char path[320];
	struct dirent *d;
	struct stat st;
	DIR *dir;
	int fd;

	snprintf(path, sizeof(path),
		 "/proc/self/map_files/%" PRIxPTR "-%" PRIxPTR, v->start,
		 v->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)owner);
	dir = opendir(path);
	while (dir && (d = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)owner,
			 d->d_name);
		if (stat(path, &st) || st.st_ino != ino)
			continue;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			break;
	}
	if (dir)
		closedir(dir);
	return fd;
}

/* Whatever we do with the memfd, it does not become writable. */
static void check_unwritable(const struct vma *v, pid_t owner, uint64_t ino)
{
	int fd = fd_of(v, owner, ino), rw;
	char path[64];
	void *p;

	CHECK(mprotect((void *)v->start, v->end - v->start,
		       PROT_READ | PROT_WRITE) != 0,
	      "mprotect(PROT_WRITE) of the peer's mapping succeeded");
	if (fd < 0) {
		CHECK(fd >= 0, "no descriptor of the memfd: %s",
		      strerror(errno));
		return;
	}
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p == MAP_FAILED, "writable mapping of the descriptor");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rw = open(path, O_RDWR | O_CLOEXEC);
	if (rw >= 0) { /* root, or mode changed back: still sealed */
		p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
		CHECK(p == MAP_FAILED,
		      "writable mapping of the descriptor reopened O_RDWR");
		CHECK(pwrite(rw, "x", 1, 0) < 0,
		      "write() to the descriptor reopened O_RDWR");
		CHECK(ftruncate(rw, 0) < 0, "ftruncate of the memfd");
		close(rw);
	} else {
		fprintf(stderr, "[%s] reopen O_RDWR refused: %s\n", t_role,
			strerror(errno));
	}
	close(fd);
}

static int ro_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ro_info d;
	struct vma v[16];
	int n = 0;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, &d, sizeof(d)), "MR");
	CHECK(wr1(&s, IBV_WR_RDMA_READ, 0, d.addr, d.rkey, RO_LEN) ==
			      IBV_WC_SUCCESS &&
		      s.buf[0] == 0x5a && s.buf[RO_LEN - 1] == 0x5a,
	      "READ of the read-only MR");
	memset(s.buf, 0x77, 64);
	CHECK(wr1(&s, IBV_WR_SEND, 0, 0, 0, 64) == IBV_WC_SUCCESS,
	      "SEND into a receive buffer of the read-only MR");
	if (over_shm() && d.ino) {
		n = maps_of(d.ino, v, 16);
		CHECK(n > 0, "the MR is not mapped here over shm");
		for (int i = 0; i < n; i++) {
			CHECK(v[i].perms[1] != 'w', "peer maps it %s",
			      v[i].perms);
			check_unwritable(&v[i], (pid_t)d.pid, d.ino);
		}
	} else if (d.ino) {
		CHECK(maps_of(d.ino, v, 16) == 0, "mapped over TCP");
	}
	chan_barrier(c); /* 1: the owner writes its buffer */
	chan_barrier(c); /* 2: written */
	CHECK(wr1(&s, IBV_WR_RDMA_READ, 0, d.addr, d.rkey, 4096) ==
			      IBV_WC_SUCCESS &&
		      s.buf[0] == 0x3c && s.buf[4095] == 0x3c,
	      "READ sees the owner's local write");
	memset(s.buf, 0xee, 4096);
	CHECK(wr1(&s, IBV_WR_RDMA_WRITE, 0, d.addr, d.rkey, 4096) ==
		      IBV_WC_REM_ACCESS_ERR,
	      "WRITE to the read-only MR");
	chan_barrier(c); /* 3 */
	side_close(&s);
	return t_failures;
}

static int ro_target(struct chan *c, void *arg)
{
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ro_info d = { 0 };
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t *buf;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	buf = mmap(NULL, RO_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(buf != MAP_FAILED, "mmap");
	memset(buf, 0x5a, RO_LEN);
	mr = ibv_reg_mr(s.pd, buf, RO_LEN, acc);
	REQUIRE(mr, "reg_mr LOCAL_WRITE|REMOTE_READ: %s", strerror(errno));
	CHECK(!post_recv1(s.qp, buf + RECV_OFF, 64, mr->lkey, 1), "post_recv");
	d.rkey = mr->rkey;
	d.addr = (uintptr_t)buf;
	d.pid = (uint32_t)getpid();
	d.ino = shared_ino_at((uintptr_t)buf);
	REQUIRE(!chan_send(c, &d, sizeof(d)), "send MR");
	CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
		      wc.byte_len == 64 && buf[RECV_OFF] == 0x77 &&
		      buf[RECV_OFF + 63] == 0x77 && buf[RECV_OFF + 64] == 0x5a,
	      "SEND placed into the read-only MR");
	chan_barrier(c); /* 1 */
	memset(buf, 0x3c, 4096); /* our own write, through our mapping */
	chan_barrier(c); /* 2 */
	chan_barrier(c); /* 3: the WRITE was refused */
	CHECK(buf[0] == 0x3c && buf[4095] == 0x3c && buf[4096] == 0x5a,
	      "the refused WRITE changed nothing");
	ibv_dereg_mr(mr);
	munmap(buf, RO_LEN);
	side_close(&s);
	return t_failures;
}

static int ow_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ro_info d;
	struct vma v[4];

	(void)arg;
	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, &d, sizeof(d)), "MR");
	CHECK(wr1(&s, IBV_WR_RDMA_READ, 0, d.addr, d.rkey, 4096) ==
			      IBV_WC_SUCCESS &&
		      s.buf[0] == 0x5a && s.buf[4095] == 0x5a,
	      "READ of the read-only MR over a writable one");
	CHECK(!d.ino || maps_of(d.ino, v, 4) == 0,
	      "the writable MR's pages were mapped for a read-only key");
	CHECK(wr1(&s, IBV_WR_RDMA_WRITE, 0, d.addr, d.rkey, 8) ==
		      IBV_WC_REM_ACCESS_ERR,
	      "WRITE with the read-only key");
	chan_barrier(c);
	side_close(&s);
	return t_failures;
}

static int ow_target(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ro_info d = { 0 };
	struct ibv_mr *ro;

	(void)arg;
	side_opts_default(&o); /* s.mr: LOCAL_WRITE and every remote right */
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	memset(s.buf, 0x5a, 8192);
	ro = ibv_reg_mr(s.pd, s.buf, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	REQUIRE(ro, "reg_mr over a writable MR: %s", strerror(errno));
	d.rkey = ro->rkey;
	d.addr = (uintptr_t)s.buf;
	d.pid = (uint32_t)getpid();
	d.ino = shared_ino_at((uintptr_t)s.buf);
	REQUIRE(!chan_send(c, &d, sizeof(d)), "send MR");
	chan_barrier(c);
	CHECK(s.buf[0] == 0x5a, "the refused WRITE changed nothing");
	ibv_dereg_mr(ro);
	side_close(&s);
	return t_failures;
}

#define LO_LEN 4096

/* Do we hold a descriptor of inode ino? */
static bool holds_ino(uint64_t ino)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *d;
	struct stat st;
	char path[300];
	bool found = false;

	while (dir && (d = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		if (!stat(path, &st) && st.st_ino == ino)
			found = true;
	}
	if (dir)
		closedir(dir);
	return found;
}

static int lo_init(struct chan *c, void *arg)
{
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ro_info d;
	struct vma v[4];

	(void)arg;
	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, &d, sizeof(d)), "MR");
	for (int i = 0; i < 2; i++) {
		memset(s.buf, 0x41 + i, LO_LEN);
		CHECK(wr1(&s, IBV_WR_SEND, 0, 0, 0, LO_LEN) == IBV_WC_SUCCESS,
		      "SEND %d into a LOCAL_WRITE-only receive buffer", i);
	}
	chan_barrier(c); /* 1: the target saw both */
	CHECK(!local_private() || (d.ino && maps_of(d.ino, v, 4) == 0),
	      "the peer maps the target's LOCAL_WRITE-only memfd");
	CHECK(!local_private() || (d.ino && !holds_ino(d.ino)),
	      "the peer holds a descriptor of it");
	side_close(&s);
	return t_failures;
}

static int lo_target(struct chan *c, void *arg)
{
	int acc = IBV_ACCESS_LOCAL_WRITE;
	struct side_opts o;
	struct side s;
	struct peer_info p;
	struct ro_info d = { 0 };
	struct ibv_mr *mr[2];
	struct ibv_wc wc;
	uint8_t *buf[2];
	int mfd;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	buf[0] = mmap(NULL, LO_LEN, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mfd = (int)syscall(SYS_memfd_create, "lo-test", 0);
	REQUIRE(mfd >= 0 && !ftruncate(mfd, LO_LEN), "memfd");
	buf[1] = mmap(NULL, LO_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	REQUIRE(buf[0] != MAP_FAILED && buf[1] != MAP_FAILED, "mmap");
	for (int i = 0; i < 2; i++) {
		mr[i] = ibv_reg_mr(s.pd, buf[i], LO_LEN, acc);
		REQUIRE(mr[i], "reg_mr LOCAL_WRITE: %s", strerror(errno));
		CHECK(!post_recv1(s.qp, buf[i], LO_LEN, mr[i]->lkey, i),
		      "post_recv");
	}
	d.pid = (uint32_t)getpid();
	d.ino = shared_ino_at((uintptr_t)buf[1]);
	REQUIRE(!chan_send(c, &d, sizeof(d)), "send MR");
	for (int i = 0; i < 2; i++)
		CHECK(!poll_one(s.cq, &wc, T) && wc.status == IBV_WC_SUCCESS &&
			      wc.byte_len == LO_LEN && wc.wr_id < 2 &&
			      buf[wc.wr_id][0] == 0x41 + wc.wr_id &&
			      buf[wc.wr_id][LO_LEN - 1] == 0x41 + wc.wr_id,
		      "SEND %d placed", i);
	CHECK(!local_private() || shared_ino_at((uintptr_t)buf[0]) == 0,
	      "a LOCAL_WRITE-only MR of private memory was made shared");
	CHECK(local_private() || !over_shm() ||
		      shared_ino_at((uintptr_t)buf[0]) != 0,
	      "SOFTRNIC_LOCAL_MR=shared: the MR was not made shareable");
	chan_barrier(c); /* 1 */
	for (int i = 0; i < 2; i++) {
		ibv_dereg_mr(mr[i]);
		munmap(buf[i], LO_LEN);
	}
	close(mfd);
	side_close(&s);
	return t_failures;
}

int main(int argc, char **argv)
{
	int pass = 0, fail = 0;

	(void)argc;
	(void)argv;
	RUN("ro_mr", ro_init, ro_target, NULL, MODE_PROCESS, pass, fail);
	RUN("ro_over_rw", ow_init, ow_target, NULL, MODE_PROCESS, pass, fail);
	RUN("local_only", lo_init, lo_target, NULL, MODE_PROCESS, pass, fail);
	return test_summary(pass, fail);
}
