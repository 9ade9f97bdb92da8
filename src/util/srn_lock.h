/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the per-object lock of the data path (QP send/receive queue,
 * CQ consumer). An uncontended lock/unlock is one atomic each, inlined;
 * a contended lock sleeps in the kernel at once (futex), it never spins.
 * States: 0 free, 1 held, 2 held and somebody sleeps on it.
 */
#ifndef SRN_LOCK_H
#define SRN_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "util/srn_compiler.h"

struct srn_lock {
	uint32_t v;
};

#define SRN_LOCK_INIT \
	{             \
		0     \
	}

void srn_lock_slow(struct srn_lock *l);
void srn_unlock_wake(struct srn_lock *l);
void srn_futex_wait_shared(uint32_t *addr, uint32_t val, uint64_t timeout_ns);
void srn_futex_wake_shared(uint32_t *addr);

static inline void srn_lock_init(struct srn_lock *l)
{
	/* relaxed: the lock is not shared yet; whatever makes the object
	 * that holds it visible to other threads publishes this too */
	__atomic_store_n(&l->v, 0, __ATOMIC_RELAXED);
}

static inline bool srn_trylock(struct srn_lock *l)
{
	uint32_t e = 0;

	/* acquire: pairs with the release in srn_unlock; relaxed on
	 * failure: nothing is read under a lock we did not get */
	return __atomic_compare_exchange_n(&l->v, &e, 1, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void srn_lock(struct srn_lock *l)
{
	if (srn_unlikely(!srn_trylock(l)))
		srn_lock_slow(l);
}

static inline void srn_unlock(struct srn_lock *l)
{
	/* release: pairs with the acquire in srn_trylock/srn_lock_slow */
	if (srn_unlikely(__atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE) == 2))
		srn_unlock_wake(l);
}

#endif /* SRN_LOCK_H */
