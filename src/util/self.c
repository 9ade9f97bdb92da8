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
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

pid_t srn_pid;
uid_t srn_euid;

void srn_self_refresh(void)
{
	srn_pid = getpid();
	srn_euid = geteuid();
}

__attribute__((constructor)) static void srn_self_init(void)
{
	srn_self_refresh();
}

/* Yama's ptrace scope (0: classic rules; 1: descendants only; 2: admin
 * only; 3: none), read once: 0 without Yama, 3 if unreadable. */
static int srn_ptrace_scope(void)
{
	static int scope = -1;
	int v = 0;
	FILE *f;

	if (scope >= 0)
		return scope;
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%d", &v) != 1 || v < 0)
			v = 3;
		fclose(f);
	}
	scope = v;
	return scope;
}

/* Is process pid dumpable? The kernel makes the private files of a
 * process that is not (/proc/<pid>/mem among them) root's
 * (proc(5), PR_SET_DUMPABLE in prctl(2)); a pid we cannot see: no. */
static bool srn_pid_dumpable(pid_t pid, uid_t uid)
{
	char path[48];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	return pid > 0 && !stat(path, &st) && st.st_uid == uid;
}

/*
 * Would the kernel let process pid (effective uid uid, as SO_PEERCRED
 * says) and this one ptrace each other (ptrace(2), "Ptrace access mode
 * checking")? Then neither gains a right by mapping the other's memory.
 * Both root: yes (CAP_SYS_PTRACE), unless Yama forbids every attach.
 * Otherwise only the same user, both processes dumpable (a process that
 * changed its uid without exec, or called PR_SET_DUMPABLE 0, is not), and
 * no Yama restriction (scope 0). Read each time: dumpability can change.
 */
bool srn_self_kin(pid_t pid, uid_t uid)
{
	if (uid != srn_euid)
		return false;
	if (srn_euid == 0)
		return srn_ptrace_scope() < 3;
	return srn_ptrace_scope() == 0 && prctl(PR_GET_DUMPABLE) == 1 &&
	       srn_pid_dumpable(pid, uid);
}
