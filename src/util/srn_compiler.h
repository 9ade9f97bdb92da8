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

/*
 * A full barrier right after an atomic read-modify-write (the kernel's
 * smp_mb__after_atomic): it keeps a later load from passing an earlier
 * store. On x86 the locked instruction of the RMW is such a barrier
 * already, so only the compiler is held back; elsewhere it is a seq_cst
 * fence. Each use names the RMW it follows and the fence it pairs with.
 */
#if defined(__x86_64__) || defined(__i386__)
/* seq_cst: a compiler barrier (the preceding locked RMW is the fence);
 * pairs with srn_resp_peek_recv's fence or the one each use names */
#define srn_smp_mb_after_atomic() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#else
#define srn_smp_mb_after_atomic() srn_smp_mb()
#endif

/*
 * A full barrier: a later load does not pass an earlier store (the
 * kernel's smp_mb). A seq_cst fence; under ThreadSanitizer, which does not
 * model fences (gcc refuses them with -Wtsan), a seq_cst read-modify-write
 * of a dummy word, which orders the same on the hardware and which TSan
 * sees. Each use names the barrier it pairs with.
 */
#if defined(__SANITIZE_THREAD__)
extern unsigned srn_mb_word;
#define srn_smp_mb()                                                     \
	/* seq_cst: pairs with srn_resp_peek_recv's barrier or the one \
	 * each use names */ \
	((void)__atomic_fetch_add(&srn_mb_word, 0, __ATOMIC_SEQ_CST))
#else
/* seq_cst: pairs with srn_resp_peek_recv's barrier or the one each use
 * names */
#define srn_smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

/*
 * Asks for the line at p in exclusive state, ahead of a store to it: a
 * line that is read and then written (a check before a CAS, an ack
 * before a reply) then crosses between cores once, not twice. A hint
 * (PREFETCHW: a no-op where the CPU lacks it).
 */
static inline void srn_prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1);
#endif
}

#endif /* SRN_COMPILER_H */
