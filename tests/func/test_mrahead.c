// SPDX-License-Identifier: MIT
/*
 * MRs registered at consecutive addresses: the library converts the pages
 * after them ahead (docs/architecture.md, "Memory registration"), so
 * several MRs share one converted chunk and later ones find their pages
 * converted already. Each must still be right for a peer: a WRITE through
 * one MR is read back through an overlapping one, an MR registered over
 * pages taken ahead sees what the application wrote there meanwhile,
 * deregistering some MRs of a chunk leaves the others working, and after
 * the last deregistration the memory holds the application's data and is
 * private again (the pages taken ahead too).
 *
 * mr_ahead_race: no write of another thread is lost. A thread stores
 * without pause into the pages just past the registrations (taken ahead:
 * copied and remapped meanwhile) while MRs are registered walking up, then
 * deregistered; it is the only writer of its words and checks before each
 * store that the word still holds its previous one.
 *
 * Converting ahead needs a userfaultfd that holds kernel-mode writes too
 * (core/memguard.c); without one, or with SOFTRNIC_MR_AHEAD=0, nothing is
 * taken ahead: the checks that pages were converted ahead are skipped, and
 * so is mr_ahead_race (its writer stores into the pages being registered
 * too, and those writes are lost when the MR's own page is copied).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define T 5000
#define PG 4096
#define NPG 64 /* the buffer */
#define NSEQ 16 /* MRs over pages 0..15, in order */
#define LATE 24 /* registered last, over a page converted ahead */
#define WIDE_PG 2 /* one MR over pages 2..5 */
#define WIDE_NPG 4
#define NINFO (NSEQ + 2)
#define I_WIDE NSEQ
#define I_LATE (NSEQ + 1)

struct ma_info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t pad;
};

static uint64_t ma_pattern(int page)
{
	return 0x5157000000000000ull + (uint64_t)page * 7 + 1;
}

static int ma_op(struct side *s, enum ibv_wr_opcode op, uint64_t *val,
		 const struct ma_info *d, size_t off)
{
	struct ibv_wc wc;

	if (op == IBV_WR_RDMA_WRITE)
		memcpy(s->buf, val, 8);
	if (post_send1(s->qp, op, s->buf, 8, s->mr->lkey, d->addr + off,
		       d->rkey, IBV_SEND_SIGNALED, 1) ||
	    poll_one(s->cq, &wc, T) || wc.status)
		return -1;
	if (op == IBV_WR_RDMA_READ)
		memcpy(val, s->buf, 8);
	return 0;
}

static uint64_t ma_read(struct side *s, const struct ma_info *d, size_t off)
{
	uint64_t v = 0;

	CHECK(!ma_op(s, IBV_WR_RDMA_READ, &v, d, off), "READ failed");
	return v;
}

static void ma_write(struct side *s, const struct ma_info *d, size_t off,
		     uint64_t v)
{
	CHECK(!ma_op(s, IBV_WR_RDMA_WRITE, &v, d, off), "WRITE failed");
}

static int ma_init(struct chan *c, void *arg)
{
	struct ma_info d[NINFO];
	struct side_opts o;
	struct peer_info p;
	struct side s;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(!side_pair(&s, &o, c, &p), "setup");
	REQUIRE(!chan_recv(c, d, sizeof(d)), "the MRs");
	for (int i = 0; i < NSEQ; i++) {
		CHECK(ma_read(&s, &d[i], 0) == ma_pattern(i), "MR %d", i);
		ma_write(&s, &d[i], 64, 0xa0 + (uint64_t)i);
	}
	/* through the wide MR, over chunks shared with the small ones */
	CHECK(ma_read(&s, &d[I_WIDE], (3 - WIDE_PG) * PG + 64) == 0xa3,
	      "a WRITE through MR 3 read through the wide MR");
	ma_write(&s, &d[I_WIDE], (4 - WIDE_PG) * PG + 128, 0xbeef);
	CHECK(ma_read(&s, &d[4], 128) == 0xbeef,
	      "a WRITE through the wide MR read through MR 4");
	CHECK(ma_read(&s, &d[I_LATE], 0) == 0x1a7e,
	      "the MR over a page converted ahead: the application's write");
	chan_barrier(c); /* 1: the target deregisters MRs 4, 5, wide */
	chan_barrier(c); /* 2: and wrote into pages 3 and 6 */
	CHECK(ma_read(&s, &d[3], 256) == 0x7a3, "MR 3 after its neighbours");
	CHECK(ma_read(&s, &d[6], 256) == 0x7a6, "MR 6 after its neighbours");
	ma_write(&s, &d[6], 512, 0x600d);
	ma_write(&s, &d[I_LATE], 8, 0x1a7e2);
	chan_barrier(c); /* 3: written */
	chan_barrier(c); /* 4: checked */
	side_close(&s);
	return t_failures;
}

/* No mapping of [buf, buf + len) is shared any more. */
static bool ma_private(const uint8_t *buf, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long long s, e;
	char line[512], perms[8];
	bool ok = f != NULL;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s", &s, &e, perms) == 3 &&
		    e > (uintptr_t)buf && s < (uintptr_t)buf + len &&
		    perms[3] != 'p')
			ok = false;
	if (f)
		fclose(f);
	return ok;
}

/* The library converts ahead: it can hold writers during a remap
 * (core/memguard.c: a userfaultfd without UFFD_USER_MODE_ONLY, from the
 * system call or else from /dev/userfaultfd, which an ordinary user's
 * process may be granted), and SOFTRNIC_MR_AHEAD=0 does not turn it off. */
static bool ma_ahead_on(void)
{
	const char *e = getenv("SOFTRNIC_MR_AHEAD");
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	int dev;

	if (fd < 0 &&
	    (dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC)) >= 0) {
		fd = ioctl(dev, _IO(0xAA, 0x00), O_CLOEXEC); /* ..._IOC_NEW */
		close(dev);
	}
	if (fd < 0)
		return false;
	close(fd);
	return !e || atoi(e) > 0;
}

/* The mapping at addr is shared (converted). */
static bool ma_shared_at(const uint8_t *addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long long s, e;
	char line[512], perms[8];
	bool shared = false;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s", &s, &e, perms) == 3 &&
		    s <= (uintptr_t)addr && (uintptr_t)addr < e)
			shared = perms[3] == 's';
	if (f)
		fclose(f);
	return shared;
}

static uint64_t ma_at(const uint8_t *buf, int page, size_t off)
{
	uint64_t v;

	memcpy(&v, buf + (size_t)page * PG + off, 8);
	return v;
}

static void ma_put(uint8_t *buf, int page, size_t off, uint64_t v)
{
	memcpy(buf + (size_t)page * PG + off, &v, 8);
}

/* What the initiator wrote, and the pattern everywhere else. */
static void ma_check_data(const uint8_t *buf, const char *when)
{
	int bad = 0;

	for (int i = 0; i < NSEQ; i++)
		bad += ma_at(buf, i, 64) != 0xa0 + (uint64_t)i;
	for (int i = 0; i < NPG; i++)
		bad += ma_at(buf, i, 0) != ma_pattern(i) ||
		       ma_at(buf, i, PG - 8) != ma_pattern(i);
	CHECK(!bad, "%s: %d values wrong", when, bad);
	CHECK(ma_at(buf, 4, 128) == 0xbeef && ma_at(buf, 6, 512) == 0x600d &&
		      ma_at(buf, LATE, 8) == 0x1a7e2,
	      "%s: the WRITEs through the wide, sixth and late MRs", when);
}

static struct ibv_mr *ma_reg(struct side *s, uint8_t *addr, size_t len)
{
	return ibv_reg_mr(s->pd, addr, len,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ);
}

static int ma_target(struct chan *c, void *arg)
{
	uint8_t *buf = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr[NINFO] = { 0 };
	struct ma_info d[NINFO];
	struct side_opts o;
	struct peer_info p;
	struct side s;

	(void)arg;
	side_opts_default(&o);
	REQUIRE(buf != MAP_FAILED && !side_pair(&s, &o, c, &p), "setup");
	for (int i = 0; i < NPG; i++) {
		ma_put(buf, i, 0, ma_pattern(i));
		ma_put(buf, i, PG - 8, ma_pattern(i));
	}
	for (int i = 0; i < NSEQ; i++)
		mr[i] = ma_reg(&s, buf + (size_t)i * PG, PG);
	CHECK(!ma_ahead_on() || ma_shared_at(buf + 20 * PG),
	      "no page converted ahead");
	mr[I_WIDE] = ma_reg(&s, buf + WIDE_PG * PG, WIDE_NPG * PG);
	ma_put(buf, LATE, 0, 0x1a7e); /* after its page was converted */
	mr[I_LATE] = ma_reg(&s, buf + LATE * PG, PG);
	for (int i = 0; i < NINFO; i++) {
		REQUIRE(mr[i], "MR %d: %s", i, strerror(errno));
		d[i].addr = (uintptr_t)mr[i]->addr;
		d[i].rkey = mr[i]->rkey;
	}
	chan_send(c, d, sizeof(d));
	chan_barrier(c); /* 1 */
	ibv_dereg_mr(mr[4]);
	ibv_dereg_mr(mr[5]);
	ibv_dereg_mr(mr[I_WIDE]);
	mr[4] = mr[5] = mr[I_WIDE] = NULL;
	ma_put(buf, 3, 256, 0x7a3);
	ma_put(buf, 6, 256, 0x7a6);
	chan_barrier(c); /* 2 */
	chan_barrier(c); /* 3 */
	ma_put(buf, LATE, 0, ma_pattern(LATE));
	ma_check_data(buf, "registered");
	for (int i = 0; i < NINFO; i++)
		if (mr[i])
			ibv_dereg_mr(mr[i]);
	ma_check_data(buf, "deregistered");
	CHECK(ma_private(buf, NPG * PG), "pages still shared after dereg");
	chan_barrier(c); /* 4 */
	side_close(&s);
	munmap(buf, NPG * PG);
	return t_failures;
}

#define RACE_NPG 2048 /* 8 MiB per round */
#define RACE_NREG 1024 /* MRs over pages 0..1023, in order */
#define RACE_SPAN 24 /* the writer's pages: just past the front */
#define RACE_ROUNDS 4

struct ma_race {
	uint8_t *buf; /* this round's pages */
	int front; /* the page being registered */
	int stop;
	long lost, stores;
	uint64_t last[RACE_NPG]; /* the writer's last store into each page */
};

static volatile uint64_t *ma_race_word(struct ma_race *r, int pg)
{
	return (volatile uint64_t *)(r->buf + (size_t)pg * PG +
				     (size_t)(pg % 509) * 8);
}

/* The writer: stores into pages front + 1 .. front + RACE_SPAN (some not
 * yet touched, so unpopulated when taken ahead). */
static void *ma_race_writer(void *arg)
{
	struct ma_race *r = arg;
	uint64_t v = 0;

	/* acquire: pairs with the release in ma_race_round */
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		/* relaxed: only where to write, no data behind it */
		int f = __atomic_load_n(&r->front, __ATOMIC_RELAXED);

		for (int pg = f + 1; pg <= f + RACE_SPAN && pg < RACE_NPG;
		     pg++) {
			volatile uint64_t *w = ma_race_word(r, pg);

			r->lost += *w != r->last[pg];
			*w = ++v;
			r->last[pg] = v;
		}
		r->stores += RACE_SPAN;
	}
	return NULL;
}

static void ma_race_front(struct ma_race *r, int pg)
{
	/* relaxed: see ma_race_writer */
	__atomic_store_n(&r->front, pg, __ATOMIC_RELAXED);
}

/* The MRs registered walking up (about a dozen chunks, most with pages
 * taken ahead), then deregistered, with the writer running. */
static void ma_race_walk(struct ma_race *r, struct side *s, struct ibv_mr **mr)
{
	int bad = 0;

	for (int i = 0; i < RACE_NREG; i++) {
		ma_race_front(r, i);
		mr[i] = ma_reg(s, r->buf + (size_t)i * PG, PG);
		bad += !mr[i];
	}
	CHECK(!bad, "%d registrations failed", bad);
	CHECK(ma_shared_at(r->buf + (RACE_NREG + 1) * PG),
	      "no page converted ahead");
	for (int i = 0; i < RACE_NREG; i++) {
		ma_race_front(r, i);
		if (mr[i])
			ibv_dereg_mr(mr[i]);
	}
}

/* A round in fresh anonymous pages: once deregistered, pages are a private
 * mapping of the memfd, where nothing is taken ahead (architecture.md). */
static void ma_race_round(struct ma_race *r, struct side *s, struct ibv_mr **mr,
			  uint8_t *buf)
{
	pthread_t t;
	int bad = 0;

	r->buf = buf;
	r->front = 0; /* page 0: an isolated registration, nothing held */
	r->stop = 0;
	r->lost = 0;
	memset(r->last, 0, sizeof(r->last));
	if (pthread_create(&t, NULL, ma_race_writer, r)) {
		CHECK(0, "thread");
		return;
	}
	ma_race_walk(r, s, mr);
	/* release: pairs with the acquire in ma_race_writer */
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	for (int pg = 0; pg < RACE_NPG; pg++)
		bad += *ma_race_word(r, pg) != r->last[pg];
	CHECK(!r->lost && !bad,
	      "writes lost: %ld seen by the writer, %d words wrong at the "
	      "end (%ld stores)",
	      r->lost, bad, r->stores);
	CHECK(ma_private(buf, RACE_NPG * PG), "pages still shared");
}

static int ma_race_target(struct chan *c, void *arg)
{
	struct ma_race *r = calloc(1, sizeof(*r));
	struct ibv_mr **mr = calloc(RACE_NREG, sizeof(*mr));
	size_t len = (size_t)RACE_ROUNDS * RACE_NPG * PG;
	struct side_opts o;
	struct side s;
	uint8_t *buf;

	(void)c;
	(void)arg;
	if (!ma_ahead_on()) {
		/* the writer would store into the page being registered,
		 * whose writes are lost (docs/architecture.md) */
		printf("mr_ahead_race: skipped, nothing taken ahead\n");
		free(r);
		free(mr);
		return 0;
	}
	side_opts_default(&o);
	REQUIRE(r && mr && !side_open(&s, &o), "setup");
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(buf != MAP_FAILED, "mmap");
	for (int i = 0; i < RACE_ROUNDS; i++)
		ma_race_round(r, &s, mr, buf + (size_t)i * RACE_NPG * PG);
	munmap(buf, len);
	side_close(&s);
	free(mr);
	free(r);
	return t_failures;
}

static int ma_race_idle(struct chan *c, void *arg)
{
	(void)c;
	(void)arg;
	return 0;
}

int main(int argc, char **argv)
{
	enum run_mode m = test_mode(argc, argv);
	int pass = 0, fail = 0;

	RUN("mr_ahead", ma_init, ma_target, NULL, m, pass, fail);
	RUN("mr_ahead_race", ma_race_idle, ma_race_target, NULL, m, pass, fail);
	return test_summary(pass, fail);
}
