// SPDX-License-Identifier: MIT
/*
 * Two users of one host (docs/security.md, issue 13 point 3): a QP of
 * nobody and a QP of root connect, over the mediated path (the target
 * checks every access; no memory is shared). One role runs as nobody
 * (setresuid after the harness forked), the other as root; each scenario
 * runs both ways round.
 *
 *   write_ok_then_bad_rkey: a WRITE within the target's MR lands; a WRITE
 *       with a wrong rkey completes with REM_ACCESS_ERR and changes nothing
 *   out_of_bounds: a WRITE that runs past the MR's end: REM_ACCESS_ERR,
 *       nothing changed
 *   no_read_right: a READ of an MR without REMOTE_READ: REM_ACCESS_ERR
 *   stopped_target (root -> nobody only: root may signal nobody): the
 *       target is stopped (SIGSTOP); a WRITE to it completes with
 *       RETRY_EXC_ERR once the RC ACK timer gives up (a unix socket has no
 *       TCP timeouts: the timer alone must notice)
 *   (every scenario) the initiator has no mapping and no descriptor of any
 *       memfd of the target (the inodes the target finds in its own
 *       /proc/self/maps), and the target none of the initiator's
 *
 * The first three scenarios run again with both roles as nobody, one of
 * them not dumpable (PR_SET_DUMPABLE 0: the other may not ptrace it, so
 * it may not map its memory either), each way round: the mediated path,
 * nothing shared; and with both dumpable but the target in another group
 * (ptrace needs the same gids too). And once with both dumpable, where
 * the two do share memory (the shm path): the control that shows the
 * count can see it.
 *
 * Needs root (exit 77 otherwise). Usage: test_xuser
 */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define T 10000
#define LEN 8192
#define FILL 0xa5
#define MAX_INO 256
#define NOBODY 65534

enum scen {
	SC_BAD_RKEY,
	SC_BOUNDS,
	SC_NO_READ,
	SC_STOPPED
};

/* Who runs the roles. */
enum xu_users {
	XU_ROOT_NOBODY, /* one role root, the other nobody */
	XU_CLOSED_TARGET, /* both nobody; the target not dumpable */
	XU_CLOSED_INITIATOR, /* both nobody; the initiator not dumpable */
	XU_KIN, /* both nobody, both dumpable: they share memory */
	XU_OTHER_GROUP, /* both nobody and dumpable, the target in group 1 */
};

struct xu_arg {
	enum scen sc;
	bool nobody_is_target; /* XU_ROOT_NOBODY: else the initiator is */
	enum xu_users users;
};

struct ino_list {
	uint32_t n;
	uint64_t ino[MAX_INO];
};

static int become_nobody_in(gid_t g)
{
	if (setgroups(1, &g) || setresgid(g, g, g) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		return -1;
	return 0;
}

static int become_nobody(void)
{
	return become_nobody_in(NOBODY);
}

/* Takes this role's user (and dumpability: a change of uid without exec
 * leaves a process not dumpable, fs.suid_dumpable 0). */
static int take_role(const struct xu_arg *a, bool is_target)
{
	bool closed = (a->users == XU_CLOSED_TARGET && is_target) ||
		      (a->users == XU_CLOSED_INITIATOR && !is_target);

	if (a->users == XU_ROOT_NOBODY)
		return a->nobody_is_target == is_target ? become_nobody() : 0;
	if (become_nobody_in(a->users == XU_OTHER_GROUP && is_target ? 1 :
								       NOBODY))
		return -1;
	return prctl(PR_SET_DUMPABLE, closed ? 0 : 1, 0, 0, 0);
}

/* The inodes of the memfds this process maps ("/memfd:" in its maps). */
static void memfd_maps(struct ino_list *l)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	l->n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		uint64_t ino = 0;

		if (!strstr(line, "/memfd:") ||
		    sscanf(line, "%*s %*s %*s %*s %" SCNu64, &ino) != 1)
			continue;
		if (l->n < MAX_INO)
			l->ino[l->n++] = ino;
	}
	if (f)
		fclose(f);
}

static bool ino_in(const struct ino_list *l, uint64_t ino)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (l->ino[i] == ino)
			return true;
	return false;
}

/* How many of the peer's memfd inodes this process maps or holds. */
static int shared_with(const struct ino_list *peer)
{
	struct ino_list mine;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	memfd_maps(&mine);
	for (uint32_t i = 0; i < mine.n; i++)
		n += ino_in(peer, mine.ino[i]);
	while (d && (e = readdir(d))) {
		struct stat st;

		if (e->d_name[0] != '.' &&
		    !fstatat(dirfd(d), e->d_name, &st, 0) &&
		    ino_in(peer, st.st_ino) && !S_ISSOCK(st.st_mode))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* Both roles: swap memfd inode lists and count what is shared: nothing,
 * unless the two may ptrace each other (XU_KIN). */
static int check_sharing(struct chan *c, const struct xu_arg *a)
{
	struct ino_list mine, peer;
	int n;

	memfd_maps(&mine);
	REQUIRE(!chan_send(c, &mine, sizeof(mine)), "send inodes");
	REQUIRE(!chan_recv(c, &peer, sizeof(peer)), "recv inodes");
	n = shared_with(&peer);
	if (a->users == XU_KIN)
		CHECK(n > 0,
		      "kin processes share no memfd: the count is blind");
	else
		CHECK(n == 0,
		      "%d mappings or fds of the other process's memfds", n);
	return t_failures;
}

static void opts(struct side_opts *o, bool target)
{
	side_opts_default(o);
	o->buf_len = LEN;
	o->retry_cnt = 1;
	o->mr_access = target ? IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE :
				IBV_ACCESS_LOCAL_WRITE;
}

static int one_wr(struct side *s, enum ibv_wr_opcode op, uint32_t off,
		  uint32_t len, uint64_t raddr, uint32_t rkey,
		  enum ibv_wc_status want)
{
	struct ibv_wc wc;

	REQUIRE(!post_send1(s->qp, op, s->buf + off, len, s->mr->lkey, raddr,
			    rkey, IBV_SEND_SIGNALED, 1),
		"post");
	REQUIRE(!poll_one(s->cq, &wc, T), "no completion");
	CHECK(wc.status == want, "status %s, expected %s",
	      ibv_wc_status_str(wc.status), ibv_wc_status_str(want));
	return t_failures;
}

/* Is process pid stopped (state T in /proc/<pid>/stat)? */
static bool stopped(pid_t pid)
{
	char path[64], st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f && fscanf(f, "%*d (%*[^)]) %c", &st) != 1)
		st = 0;
	if (f)
		fclose(f);
	return st == 'T';
}

/* SC_STOPPED, the initiator's side: the target stops itself; a WRITE
 * then gets no answer, and the ACK timer must give up. */
static int write_to_stopped(struct chan *c, struct side *s,
			    const struct peer_info *p)
{
	int32_t pid = 0;
	int i;

	REQUIRE(!chan_recv(c, &pid, sizeof(pid)) && pid > 0, "target pid");
	for (i = 0; i < 500 && !stopped(pid); i++)
		usleep(10000);
	REQUIRE(stopped(pid), "the target did not stop");
	one_wr(s, IBV_WR_RDMA_WRITE, 0, 8, p->addr, p->rkey,
	       IBV_WC_RETRY_EXC_ERR);
	kill(pid, SIGCONT);
	return t_failures;
}

static int initiator(struct chan *c, void *arg)
{
	struct xu_arg *a = arg;
	struct peer_info p;
	struct side_opts o;
	struct side s;

	opts(&o, false);
	REQUIRE(!take_role(a, false), "setresuid");
	REQUIRE(!side_pair(&s, &o, c, &p), "pair");
	memset(s.buf, 0x5a, LEN);
	switch (a->sc) {
	case SC_BAD_RKEY:
		one_wr(&s, IBV_WR_RDMA_WRITE, 0, 8, p.addr, p.rkey,
		       IBV_WC_SUCCESS);
		one_wr(&s, IBV_WR_RDMA_WRITE, 0, 64, p.addr + 64,
		       p.rkey ^ 0x100, IBV_WC_REM_ACCESS_ERR);
		break;
	case SC_BOUNDS:
		one_wr(&s, IBV_WR_RDMA_WRITE, 0, 64, p.addr + LEN - 8, p.rkey,
		       IBV_WC_REM_ACCESS_ERR);
		break;
	case SC_NO_READ:
		one_wr(&s, IBV_WR_RDMA_READ, 0, 64, p.addr, p.rkey,
		       IBV_WC_REM_ACCESS_ERR);
		break;
	case SC_STOPPED:
		write_to_stopped(c, &s, &p);
		break;
	}
	check_sharing(c, a);
	chan_barrier(c); /* the target looks at its memory */
	side_close(&s);
	return t_failures;
}

static int target(struct chan *c, void *arg)
{
	struct xu_arg *a = arg;
	struct peer_info p;
	struct side_opts o;
	struct side s;
	uint32_t from = a->sc == SC_BAD_RKEY ? 8 : 0, bad = 0;

	opts(&o, true);
	REQUIRE(!take_role(a, true), "setresuid");
	REQUIRE(!side_open(&s, &o), "open");
	memset(s.buf, FILL, LEN);
	side_info(&s, &p);
	REQUIRE(!chan_send(c, &p, sizeof(p)) && !chan_recv(c, &p, sizeof(p)),
		"exchange");
	REQUIRE(!side_connect(&s, &p, &o), "connect");
	chan_barrier(c);
	if (a->sc == SC_STOPPED) {
		int32_t pid = getpid();

		REQUIRE(!chan_send(c, &pid, sizeof(pid)), "send pid");
		raise(SIGSTOP); /* the initiator sends SIGCONT */
	}
	check_sharing(c, a);
	chan_barrier(c);
	if (a->sc == SC_STOPPED) { /* its WRITE may land after all */
		side_close(&s);
		return t_failures;
	}
	for (uint32_t i = 0; i < from; i++)
		CHECK(s.buf[i] == 0x5a, "byte %u: the valid WRITE is missing",
		      i);
	for (uint32_t i = from; i < LEN; i++)
		bad += s.buf[i] != FILL;
	CHECK(!bad, "%u bytes of the target's MR changed by refused requests",
	      bad);
	side_close(&s);
	return t_failures;
}

/* Runs one scenario in a process of its own (a role drops root). */
static int scenario(const char *name, enum scen sc, bool nobody_is_target,
		    enum xu_users users)
{
	static const char *const who[] = {
		[XU_CLOSED_TARGET] = "nobody -> nobody not dumpable",
		[XU_CLOSED_INITIATOR] = "nobody not dumpable -> nobody",
		[XU_KIN] = "nobody -> nobody, both dumpable",
		[XU_OTHER_GROUP] = "nobody -> nobody in another group",
	};
	struct xu_arg a = { sc, nobody_is_target, users };
	char full[128];
	int st = 0;
	pid_t pid;

	snprintf(full, sizeof(full), "%s, %s", name,
		 users != XU_ROOT_NOBODY ? who[users] :
		 nobody_is_target	 ? "root -> nobody" :
					   "nobody -> root");
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(run_roles(full, initiator, target, &a, MODE_PROCESS) ? 1 :
									     0);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(void)
{
	static const struct {
		const char *name;
		enum scen sc;
	} s[] = { { "write_ok_then_bad_rkey", SC_BAD_RKEY },
		  { "out_of_bounds", SC_BOUNDS },
		  { "no_read_right", SC_NO_READ } };
	int passed = 0, failed = 0;

	if (geteuid() != 0) {
		printf("skip: needs root (one role runs as nobody)\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (unsigned i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		for (int way = 0; way < 4; way++) {
			/* 0, 1: root and nobody; 2, 3: nobody, one closed */
			static const enum xu_users users[] = {
				XU_ROOT_NOBODY, XU_ROOT_NOBODY,
				XU_CLOSED_TARGET, XU_CLOSED_INITIATOR
			};
			bool err = scenario(s[i].name, s[i].sc, way == 1,
					    users[way]);

			failed += err;
			passed += !err;
		}
	if (scenario("stopped_target", SC_STOPPED, true, XU_ROOT_NOBODY))
		failed++;
	else
		passed++;
	if (scenario("write_ok_then_bad_rkey", SC_BAD_RKEY, false, XU_KIN))
		failed++;
	else
		passed++;
	if (scenario("write_ok_then_bad_rkey", SC_BAD_RKEY, false,
		     XU_OTHER_GROUP))
		failed++;
	else
		passed++;
	return test_summary(passed, failed);
}
