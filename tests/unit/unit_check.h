/* SPDX-License-Identifier: MIT */
/* softrnic unit tests — counting checks and the closing summary line. */
#ifndef SRN_UNIT_CHECK_H
#define SRN_UNIT_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(c)                                                      \
	do {                                                          \
		checks++;                                             \
		if (!(c)) {                                           \
			failures++;                                   \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, \
				__LINE__, #c);                        \
		}                                                     \
	} while (0)

static inline int unit_summary(void)
{
	printf("%d passed, %d failed\n", checks - failures, failures);
	return failures ? 1 : 0;
}

#endif /* SRN_UNIT_CHECK_H */
