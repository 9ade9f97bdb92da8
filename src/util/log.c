// SPDX-License-Identifier: MIT
/*
 * softrnic — diagnostics. Errors go to stderr; SOFTRNIC_LOG=0..3 sets the
 * level (0 errors only, default 1 warnings, 3 debug).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

static int srn_log_level = SRN_LOG_WARN;

/* srn_smp_mb's word under ThreadSanitizer (util/srn_compiler.h) */
unsigned srn_mb_word;
static pthread_once_t srn_log_once = PTHREAD_ONCE_INIT;

static void srn_log_init(void)
{
	const char *e = getenv("SOFTRNIC_LOG");

	if (e)
		srn_log_level = atoi(e);
}

void srn_log(enum srn_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	va_list ap;

	pthread_once(&srn_log_once, srn_log_init);
	if ((int)lvl > srn_log_level)
		return;
	fprintf(stderr, "softrnic[%d] %s: ", (int)getpid(), names[lvl]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

uint64_t srn_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Writes an eventfd (a progress thread's kick, a channel); never blocks. */
void srn_kick_fd(int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		srn_dbg("kick: %m");
}

/* util.h: the kernel's socket(2), past any interposed socket() */
int srn_socket(int domain, int type, int protocol)
{
	return (int)syscall(SYS_socket, domain, type, protocol);
}
