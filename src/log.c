// SPDX-License-Identifier: MIT
/*
 * softrnic — diagnostics. Errors go to stderr; SOFTRNIC_LOG=0..3 sets the
 * level (0 errors only, default 1 warnings, 3 debug).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "srn.h"

static int srn_log_level = -1;

void srn_log(enum srn_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info",
					     "debug" };
	va_list ap;

	if (srn_log_level < 0) {
		const char *e = getenv("SOFTRNIC_LOG");

		srn_log_level = e ? atoi(e) : SRN_LOG_WARN;
	}
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
