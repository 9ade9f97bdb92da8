/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the per-object lock of the data path (QP send/receive queue,
 * CQ consumer), private to a process. An uncontended lock is one atomic
 * (a compare-exchange), an unlock a plain store and a load: no locked
 * instruction, so the stores made under the lock (a CQE into a peer's
 * ring, a line the peer holds) drain while the caller goes on instead of
 * at the unlock. A contended lock sleeps in the kernel at once (futex),
 * it never spins.
 *
 * v is 0 free or 1 held. Whoever sleeps on a lock counts itself in a
 * process-wide table of sleeper counts (srn_lock_sleepers, hashed by
 * address; a collision costs the other lock's unlocks a futex wake-up
 * call each while the sleeper waits, nothing else). The
 * unlocker stores v = 0 and then loads that count; the sleeper increments
 * it and then loads v (its trylock). Each side stores, then loads what
 * the other stored, so each needs a full barrier in between: the sleeper,
 * on the slow path, pays for both with membarrier(2) (private expedited:
 * every running thread of the process passes a full barrier), and the
 * unlocker's barrier is then only a compiler barrier — the asymmetric
 * fence of liburcu and folly. Where membarrier is missing (old kernels,
 * a seccomp filter), the unlock is an exchange (a full barrier) instead:
 * srn_lock_asym, decided once when the library is loaded.
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

#define SRN_LOCK_SLEEPERS 256 /* power of two */

extern uint32_t srn_lock_sleepers_tab[SRN_LOCK_SLEEPERS];
extern bool srn_lock_asym;

void srn_lock_slow(struct srn_lock *l);
int srn_lock_announce(struct srn_lock *l);
void srn_lock_unannounce(struct srn_lock *l);
void srn_unlock_wake(struct srn_lock *l);
void srn_futex_wait_shared(uint32_t *addr, uint32_t val, uint64_t timeout_ns);
void srn_futex_wake_shared(uint32_t *addr);

static inline uint32_t *srn_lock_sleepers(const struct srn_lock *l)
{
	return &srn_lock_sleepers_tab[((uintptr_t)l >> 2) &
				      (SRN_LOCK_SLEEPERS - 1)];
}

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
	 * failure: nothing is read under a lock we did not get. On x86
	 * the locked instruction is also the full barrier srn_lock_slow's
	 * increment of the sleeper count needs before it loads v */
	return __atomic_compare_exchange_n(&l->v, &e, 1, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void srn_lock(struct srn_lock *l)
{
	if (srn_unlikely(!srn_trylock(l)))
		srn_lock_slow(l);
}

/* Frees the lock; true if somebody may sleep on it (srn_unlock_wake). */
static inline bool srn_unlock_release(struct srn_lock *l)
{
	/* relaxed: set once before any lock is used (a constructor) */
	if (srn_likely(__atomic_load_n(&srn_lock_asym, __ATOMIC_RELAXED))) {
		/* release: pairs with the acquire in srn_trylock. The
		 * store-then-load against srn_lock_announce's increment and
		 * the trylock after it: the compiler barrier here, the
		 * membarrier there (the asymmetric fence, above) */
		__atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
		/* seq_cst: a compiler barrier only, the light side of the
		 * asymmetric fence; pairs with the membarrier in
		 * srn_lock_announce */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	} else {
		/* seq_cst: the release of the branch above and the full
		 * barrier before the load below, in one exchange; pairs with
		 * srn_lock_announce's increment */
		__atomic_exchange_n(&l->v, 0, __ATOMIC_SEQ_CST);
	}
	/* relaxed: ordered after the store by the barriers above; pairs
	 * with the increment in srn_lock_announce */
	return __atomic_load_n(srn_lock_sleepers(l), __ATOMIC_RELAXED) != 0;
}

static inline void srn_unlock(struct srn_lock *l)
{
	if (srn_unlikely(srn_unlock_release(l)))
		srn_unlock_wake(l);
}

#endif /* SRN_LOCK_H */
