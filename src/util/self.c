// SPDX-License-Identifier: MIT
/*
 * softrnic — who this process is: its pid and effective uid, read once.
 *
 * Connection set-up asked the kernel for both several times per
 * connection (the owner checks of engine/ctl.c, kcmp in fdshare.c, the
 * header of every segment). They are taken when the library is loaded
 * and again when a device list is first made (a program that drops
 * privileges before it opens a device is judged as it is then), and the
 * pid again in a forked child. Like the credentials a file keeps from
 * its open(2), the uid is not followed afterwards: a process that changes
 * its effective uid later is still the user it was then
 * (docs/security.md, "Same host: the control socket").
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/util.h"

pid_t srn_pid;
uid_t srn_euid;

/*
 * What srn_self_kin remembers, for the whole process (connection set-up
 * asks about one peer from several threads: the one at RTR, the progress
 * thread that lets the peer attach): verdicts on peers for a second each,
 * and this process's own credentials as /proc showed them. Taken with a
 * trylock only: a thread that finds it held works the verdict out itself;
 * a forked child starts with none of it (srn_self_atfork_child).
 */
#define SRN_KIN_MEMO 16
#define SRN_KIN_MEMO_NS 1000000000ull

struct srn_kin_memo {
	pid_t pid, self; /* self: srn_pid when it was kept (fork) */
	uid_t uid;
	bool kin;
	uint64_t until_ns;
};

static struct {
	pthread_mutex_t lock;
	struct srn_kin_memo memo[SRN_KIN_MEMO];
	unsigned next;
	/* ours, as read when srn_self_refresh last ran (cred_gen): used
	 * only while our real, effective and saved ids are still those
	 * (srn_self_cred_fresh); capabilities can only have been dropped
	 * since, which makes the peer's right over us look smaller, never
	 * larger (srn_cred_may_trace) */
	struct srn_cred cred;
	pid_t cred_pid; /* srn_pid when cred was read; 0: none */
	unsigned cred_gen;
} srn_kin = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Bumped by every srn_self_refresh, whoever holds srn_kin.lock. */
static unsigned srn_self_gen;

static int srn_cred_read(pid_t pid, struct srn_cred *c);
static int srn_ptrace_scope(void);

/* Also reads our credentials (and Yama's scope) for srn_self_kin, when
 * the first device is opened (or an RPC server made): a connection's
 * set-up then needs not read them. */
void srn_self_refresh(void)
{
	/* relaxed: a number compared, nothing published with it */
	unsigned gen = __atomic_add_fetch(&srn_self_gen, 1, __ATOMIC_RELAXED);
	struct srn_cred c;
	bool ok;

	srn_pid = getpid();
	srn_euid = geteuid();
	ok = srn_cred_read(0, &c) == 0;
	(void)srn_ptrace_scope();
	if (ok && pthread_mutex_trylock(&srn_kin.lock) == 0) {
		srn_kin.cred = c;
		srn_kin.cred_pid = srn_pid;
		srn_kin.cred_gen = gen;
		pthread_mutex_unlock(&srn_kin.lock);
	}
}

/* In a forked child (src/verbs/verbs_context.c): nothing of the parent's,
 * and a lock no parent thread can have left held. */
void srn_self_atfork_child(void)
{
	pthread_mutex_init(&srn_kin.lock, NULL);
	memset(srn_kin.memo, 0, sizeof(srn_kin.memo));
	srn_kin.cred_pid = 0;
	srn_pid = getpid();
}

/* At load, only who we are: a program that never opens a device reads
 * nothing of /proc. */
__attribute__((constructor)) static void srn_self_init(void)
{
	srn_pid = getpid();
	srn_euid = geteuid();
}

/* Yama's ptrace scope (0: classic rules; 1: descendants only; 2: admin
 * only; 3: none): 0 without Yama (it cannot be loaded later), 3 when it
 * cannot be read (fail closed). Only a reading is kept, never a failure. */
static int srn_ptrace_scope(void)
{
	static int scope = -1;
	/* relaxed: a value on its own, the same whichever thread reads the
	 * file (pairs with the relaxed store below only as a cache) */
	int v = __atomic_load_n(&scope, __ATOMIC_RELAXED);
	FILE *f;

	if (v >= 0)
		return v;
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (!f && errno != ENOENT)
		return 3;
	v = 0;
	if (f && (fscanf(f, "%d", &v) != 1 || v < 0 || v > 3))
		v = 3;
	if (f)
		fclose(f);
	/* relaxed: as the load above */
	__atomic_store_n(&scope, v, __ATOMIC_RELAXED);
	return v;
}

#define SRN_CAP_SYS_PTRACE 19

/* Parses n numbers (base; each at most max) after the field's name
 * ("Uid:") at the start of a line of /proc/PID/status: digits only, each
 * after blanks. */
static bool srn_cred_field(const char *line, const char *name, int base,
			   unsigned long long max, unsigned long long *v,
			   unsigned n)
{
	size_t k = strlen(name);
	int saved = errno;
	bool ok = true;
	char *end;

	if (strncmp(line, name, k))
		return false;
	line += k;
	for (unsigned i = 0; ok && i < n; i++) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (base == 16 ? !isxdigit((unsigned char)*line) :
				 !isdigit((unsigned char)*line)) {
			ok = false;
			break;
		}
		errno = 0;
		v[i] = strtoull(line, &end, base);
		ok = !errno && v[i] <= max;
		line = end;
	}
	errno = saved;
	return ok;
}

/* One line of /proc/PID/status: the bits of what it gave (1 Uid, 2 Gid,
 * 4 CapPrm, 8 CapEff). */
static unsigned srn_cred_line(const char *line, struct srn_cred *c)
{
	unsigned long long v[3];

	if (srn_cred_field(line, "Uid:", 10, UINT_MAX, v, 3)) {
		for (int i = 0; i < 3; i++)
			c->uid[i] = (unsigned)v[i];
		return 1;
	}
	if (srn_cred_field(line, "Gid:", 10, UINT_MAX, v, 3)) {
		for (int i = 0; i < 3; i++)
			c->gid[i] = (unsigned)v[i];
		return 2;
	}
	if (srn_cred_field(line, "CapPrm:", 16, ULLONG_MAX, &c->prm, 1))
		return 4;
	if (srn_cred_field(line, "CapEff:", 16, ULLONG_MAX, &c->eff, 1))
		return 8;
	return 0;
}

/* Reads fd's lines: the bits srn_cred_line found (util.h). A line longer
 * than the buffer (Groups: of a user in many groups) is skipped. Plain
 * reads, not stdio: a connection's first set-up waits for this. */
unsigned srn_cred_parse(int fd, struct srn_cred *c)
{
	char buf[2048];
	size_t have = 0;
	unsigned got = 0;
	bool skip = false;
	ssize_t n;

	while (got != 15 &&
	       (n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		char *line = buf, *nl;

		have += (size_t)n;
		buf[have] = 0;
		while ((nl = memchr(line, '\n', have - (line - buf)))) {
			*nl = 0;
			if (!skip)
				got |= srn_cred_line(line, c);
			skip = false;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) { /* a long line: drop it */
			have = 0;
			skip = true;
		}
	}
	return got;
}

/* pid 0: this process. 0 or -1 (gone, or not ours to read). */
static int srn_cred_read(pid_t pid, struct srn_cred *c)
{
	char path[48];
	struct stat st;
	unsigned got;
	int fd;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if (stat(pid ? path : "/proc/self/ns/user", &st))
		return -1;
	c->userns = (unsigned long)st.st_ino;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(pid ? path : "/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	got = srn_cred_parse(fd, c);
	close(fd);
	return got == 15 ? 0 : -1;
}

/*
 * Would the kernel let tracer t attach to tracee e (dumpable or not)
 * under Yama scope scope?
 * ptrace(2), "Ptrace access mode checking", with PTRACE_MODE_REALCREDS:
 * t's real ids equal all of e's, or t holds CAP_SYS_PTRACE (in e's user
 * namespace: taken as t's own only when they share it); e dumpable, or
 * that capability; e's permitted capabilities a subset of t's, or that
 * capability; Yama: scope 0, or 1 and 2 with the capability (scope 1's
 * descendants are not counted: fail closed).
 */
bool srn_cred_may_trace(const struct srn_cred *t, const struct srn_cred *e,
			bool e_dumpable, int scope)
{
	bool same_ns = t->userns == e->userns;
	bool cap = same_ns && (t->eff >> SRN_CAP_SYS_PTRACE & 1);
	bool ids = true;

	for (int i = 0; i < 3; i++)
		ids = ids && t->uid[0] == e->uid[i] && t->gid[0] == e->gid[i];
	if (scope >= 3 || (scope >= 1 && !cap))
		return false;
	if (!cap && (!ids || !e_dumpable || !same_ns || (e->prm & ~t->prm)))
		return false;
	return true;
}

/* May this process attach to pid (ptrace's full check, Yama and any LSM
 * included)? The kernel answers process_vm_readv after its access check:
 * EFAULT (the address 0 is not mapped) means it passed. */
static bool srn_self_may_trace(pid_t pid)
{
	char b;
	struct iovec l = { &b, 1 }, r = { NULL, 1 };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) < 0 && errno == EFAULT;
}

/* Under srn_kin.lock: may the credentials kept be used? Ours, read since
 * the last refresh, and our ids unchanged. */
static bool srn_self_cred_fresh(void)
{
	const struct srn_cred *c = &srn_kin.cred;
	uid_t u[3];
	gid_t g[3];

	/* relaxed: as in srn_self_refresh */
	if (srn_kin.cred_pid != srn_pid ||
	    srn_kin.cred_gen !=
		    __atomic_load_n(&srn_self_gen, __ATOMIC_RELAXED))
		return false;
	if (getresuid(&u[0], &u[1], &u[2]) || getresgid(&g[0], &g[1], &g[2]))
		return false;
	for (int i = 0; i < 3; i++)
		if (c->uid[i] != u[i] || c->gid[i] != g[i])
			return false;
	return true;
}

/* Sharing memory with pid gives neither side a right it lacked: each may
 * ptrace the other. This one's right over pid is asked of the kernel; pid's
 * over this one is worked out from what /proc says of both. */
static bool srn_self_kin_eval(pid_t pid, uid_t uid, bool locked)
{
	struct srn_cred self, peer;

	if (pid <= 0 || uid != srn_euid || !srn_self_may_trace(pid))
		return false;
	if (locked && srn_self_cred_fresh()) {
		self = srn_kin.cred;
	} else if (srn_cred_read(0, &self)) {
		return false;
	} else if (locked) {
		srn_kin.cred = self;
		srn_kin.cred_pid = srn_pid;
		/* relaxed: as in srn_self_refresh */
		srn_kin.cred_gen =
			__atomic_load_n(&srn_self_gen, __ATOMIC_RELAXED);
	}
	if (srn_cred_read(pid, &peer) || peer.uid[1] != (unsigned)uid)
		return false;
	return srn_cred_may_trace(&peer, &self, prctl(PR_GET_DUMPABLE) == 1,
				  srn_ptrace_scope());
}

/* Does /proc show our pid namespace (its "self" is our pid)? */
static bool srn_self_proc_ok(void)
{
	char b[24];
	ssize_t n = readlink("/proc/self", b, sizeof(b) - 1);

	if (n <= 0)
		return false;
	b[n] = 0;
	return strtol(b, NULL, 10) == (long)srn_pid;
}

/*
 * May process pid (effective uid uid, as SO_PEERCRED says) and this one
 * share memory (the shm path)? Only when each could ptrace the other
 * anyway (srn_self_kin_eval); a pid that names no process of our pid
 * namespace (SO_PEERCRED gives 0 for one outside it), or a /proc that is
 * not our pid namespace's, is never kin.
 */
bool srn_self_kin(pid_t pid, uid_t uid)
{
	bool locked = pthread_mutex_trylock(&srn_kin.lock) == 0;
	uint64_t now = srn_now_ns();
	struct srn_kin_memo *m;
	bool kin;

	if (pid == srn_pid && uid == srn_euid) {
		kin = true; /* ourselves */
		goto out;
	}
	for (unsigned i = 0; locked && i < SRN_KIN_MEMO; i++) {
		m = &srn_kin.memo[i];
		if (m->pid == pid && m->uid == uid && m->self == srn_pid &&
		    m->until_ns > now) {
			kin = m->kin;
			goto out;
		}
	}
	kin = srn_self_proc_ok() && srn_self_kin_eval(pid, uid, locked);
	if (locked) {
		srn_kin.memo[srn_kin.next] =
			(struct srn_kin_memo){ pid, srn_pid, uid, kin,
					       now + SRN_KIN_MEMO_NS };
		srn_kin.next = (srn_kin.next + 1) % SRN_KIN_MEMO;
	}
out:
	if (locked)
		pthread_mutex_unlock(&srn_kin.lock);
	return kin;
}
