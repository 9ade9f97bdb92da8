// SPDX-License-Identifier: MIT
/* softrnic — the slow paths of srn_lock.h: sleep and wake with a futex. */
#include <linux/futex.h>
#include <sys/syscall.h>
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
