// SPDX-License-Identifier: MIT
/* softrnic — the slow paths of srn_lock.h: sleep and wake with a futex. */
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/srn_lock.h"

void srn_lock_slow(struct srn_lock *l)
{
	/* acquire: pairs with the release in srn_unlock. Mark "sleepers"
	 * (2) and sleep while the lock stays held. */
	while (__atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE) != 0)
		syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void srn_unlock_wake(struct srn_lock *l)
{
	syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Sleeps while *addr == val, at most timeout_ns; the word may be in
 * memory shared with other processes (no FUTEX_PRIVATE). A wake-up,
 * a changed value, a signal or the timeout all return: the caller
 * looks again. */
void srn_futex_wait_shared(uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000ull),
		.tv_nsec = (long)(timeout_ns % 1000000000ull),
	};

	syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* Wakes every sleeper of srn_futex_wait_shared on addr, in any process. */
void srn_futex_wake_shared(uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}
