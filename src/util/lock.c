// SPDX-License-Identifier: MIT
/* softrnic — the slow paths of srn_lock.h: sleep and wake with a futex,
 * and the choice of the unlock's barrier. */
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/srn_lock.h"

uint32_t srn_lock_sleepers_tab[SRN_LOCK_SLEEPERS];
bool srn_lock_asym;

static long srn_membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

/* Runs when the library is loaded, before any lock exists: a process
 * must register before it may use the private expedited command. */
__attribute__((constructor)) static void srn_lock_choose(void)
{
	long cmds = srn_membarrier(MEMBARRIER_CMD_QUERY);

	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		return;
	if (srn_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
		return;
	/* relaxed: no lock is in use yet; thread creation publishes it */
	__atomic_store_n(&srn_lock_asym, true, __ATOMIC_RELAXED);
}

/*
 * Counts a sleeper on l before it looks at l again: an unlock that it
 * then sees as held must see the count and wake it. 0, or -1 if the
 * barrier failed (it cannot once registered, and fork keeps the
 * registration): an unlock may then miss the sleeper.
 */
int srn_lock_announce(struct srn_lock *l)
{
	/* seq_cst: pairs with the load in srn_unlock_release */
	__atomic_fetch_add(srn_lock_sleepers(l), 1, __ATOMIC_SEQ_CST);
	/* relaxed: set once by srn_lock_choose */
	if (!__atomic_load_n(&srn_lock_asym, __ATOMIC_RELAXED))
		return 0;
	return srn_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) ? -1 : 0;
}

void srn_lock_unannounce(struct srn_lock *l)
{
	/* relaxed: only a count; a late decrement costs a spurious wake */
	__atomic_fetch_sub(srn_lock_sleepers(l), 1, __ATOMIC_RELAXED);
}

void srn_lock_slow(struct srn_lock *l)
{
	struct timespec ms = { 0, 1000000 }, *limit = NULL;

	/* without the barrier, look again every millisecond rather than
	 * risk sleeping for good */
	if (srn_lock_announce(l))
		limit = &ms;
	/* the trylock's acquire pairs with the release in srn_unlock;
	 * sleep while the lock stays held */
	while (!srn_trylock(l))
		syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 1, limit, NULL,
			0);
	srn_lock_unannounce(l);
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
