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
