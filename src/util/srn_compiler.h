/* SPDX-License-Identifier: MIT */
/*
 * softrnic — compiler helpers shared by every file of the library.
 */
#ifndef SRN_COMPILER_H
#define SRN_COMPILER_H

#include <stddef.h>

/* Everything is hidden (-fvisibility=hidden) except the verbs ABI. */
#define SRN_EXPORT __attribute__((visibility("default")))

#define srn_likely(x) __builtin_expect(!!(x), 1)
#define srn_unlikely(x) __builtin_expect(!!(x), 0)

#define SRN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SRN_CACHELINE 64

/* clang-format 14 would write "(ptr)-offsetof" and "(a)-1" here */
/* clang-format off */
#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#define SRN_ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
/* clang-format on */

#endif /* SRN_COMPILER_H */
