// SPDX-License-Identifier: MIT
/*
 * Store-then-load races between two threads on two CPUs, run round after
 * round on the library's own functions (a litmus test: each side stores,
 * then loads what the other side stored; unless both sides have a full
 * barrier in between, x86 lets both loads miss).
 *
 *   cq_arm_race   the CQ owner arms (srn_cq_arm) and then looks at the next
 *                 slot, as its poll after ibv_req_notify_cq does; a peer
 *                 publishes a CQE there (srn_cq_post) and then looks at
 *                 the arm. In every round, one of the two must see the
 *                 other: else the owner sleeps with a CQE in its ring.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine/engine.h"
#include "unit_check.h"

#define ROUNDS 1000000
#define SLOTS 4

struct race {
	struct srn_cq_view v; /* the producer's view, with a channel */
	struct srn_cq cq; /* the owner: only its shm is used */
	struct srn_cq_shm *shm;
	unsigned arrive; /* both sides at the start line: 2 per round */
	unsigned done; /* rounds the producer has finished */
	unsigned lost, fired;
};

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* Both sides leave round r's start line together (a test's spin):
 * arrive counts 2 per round. */
static void arrive_together(unsigned *arrive, unsigned r)
{
	/* acq_rel: pairs with the other side's increment (the state one
	 * side reset for this round is seen by the other) */
	__atomic_fetch_add(arrive, 1, __ATOMIC_ACQ_REL);
	/* acquire: pairs with the acq_rel increments above */
	while (__atomic_load_n(arrive, __ATOMIC_ACQUIRE) < 2 * (r + 1))
		;
}

static void start_line(struct race *x, unsigned r)
{
	arrive_together(&x->arrive, r);
}

/* The owner runs the rounds: resets, races, then judges each. */
static void *owner(void *arg)
{
	struct race *x = arg;

	pin(0);
	for (unsigned r = 0; r < ROUNDS; r++) {
		const struct srn_cqe *slot = &x->v.ring[r % SLOTS];
		uint64_t ev = x->shm->events;
		bool saw;

		x->shm->arm = SRN_CQ_ARM_NONE;
		x->shm->cons = r; /* the previous round's CQE is consumed */
		start_line(x, r);
		srn_cq_arm(&x->cq, false);
		/* acquire: as srn_cq_drain reads the tag */
		saw = __atomic_load_n(&slot->owner_seq, __ATOMIC_ACQUIRE) ==
		      r + 1;
		/* acquire: pairs with the release of done in producer */
		while (__atomic_load_n(&x->done, __ATOMIC_ACQUIRE) != r + 1)
			;
		if (x->shm->events != ev)
			x->fired++; /* the producer saw the arm */
		else if (!saw)
			x->lost++; /* neither saw the other */
	}
	return NULL;
}

static void *producer(void *arg)
{
	struct race *x = arg;
	struct srn_cqe c = { .wr_id = 1, .status = IBV_WC_SUCCESS };

	pin(1);
	for (unsigned r = 0; r < ROUNDS; r++) {
		start_line(x, r);
		CHECK(srn_cq_post(&x->v, &c) == 0);
		/* release: pairs with the acquire in owner */
		__atomic_store_n(&x->done, r + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void test_cq_arm_race(void)
{
	size_t bytes =
		sizeof(struct srn_cq_shm) + SLOTS * sizeof(struct srn_cqe);
	struct race x = { 0 };
	int chan = eventfd(0, EFD_NONBLOCK);
	pthread_t a, b;

	x.shm = aligned_alloc(64, bytes);
	memset(x.shm, 0, bytes);
	x.shm->size = SLOTS;
	x.shm->cqe_off = sizeof(*x.shm);
	x.cq.shm = x.shm;
	CHECK(srn_cq_view_init(&x.v, x.shm, bytes, chan, -1) == 0);
	pthread_create(&a, NULL, owner, &x);
	pthread_create(&b, NULL, producer, &x);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("cq_arm_race: %u rounds, %u fired, %u lost\n", ROUNDS, x.fired,
	       x.lost);
	CHECK(x.lost == 0);
	close(chan);
	free(x.shm);
}

#define STALE_POSTS 400000u
#define STALE_PRODUCERS 4

struct stale {
	struct srn_cq_view v[STALE_PRODUCERS]; /* one each, as peers have */
	struct srn_cq_shm *shm;
	unsigned credits; /* free slots: producers take, the owner returns */
	unsigned posted, full;
	bool stop;
};

static void *stale_owner(void *arg)
{
	struct stale *x = arg;
	const struct srn_cqe *ring = x->v[0].ring;
	uint64_t cons = 0;

	/* acquire: pairs with the release of stop in test_cq_stale_prod */
	while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
		/* acquire: as srn_cq_drain reads the tag */
		if (__atomic_load_n(&ring[cons % SLOTS].owner_seq,
				    __ATOMIC_ACQUIRE) != (uint32_t)(cons + 1))
			continue;
		cons++;
		/* release: as srn_cq_drain publishes cons */
		__atomic_store_n(&x->shm->cons, cons, __ATOMIC_RELEASE);
		/* release: pairs with the CAS in stale_producer (the slot
		 * is free before its credit is) */
		__atomic_fetch_add(&x->credits, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

struct stale_arg {
	struct stale *x;
	int i;
};

static void *stale_producer(void *arg)
{
	struct stale_arg *a = arg;
	struct stale *x = a->x;
	struct srn_cqe c = { .wr_id = 1, .status = IBV_WC_SUCCESS };

	/* relaxed: only counts, read after the join */
	while (__atomic_fetch_add(&x->posted, 1, __ATOMIC_RELAXED) <
	       STALE_POSTS) {
		/* acquire: pairs with the release in stale_owner */
		unsigned cr = __atomic_load_n(&x->credits, __ATOMIC_ACQUIRE);

		while (!cr || !__atomic_compare_exchange_n(
				      &x->credits, &cr, cr - 1, true,
				      __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
			if (!cr)
				sched_yield(); /* 2 CPUs, 5 threads */
			/* acquire: as above */
			cr = __atomic_load_n(&x->credits, __ATOMIC_ACQUIRE);
		}
		if (srn_cq_post(&x->v[a->i], &c))
			/* relaxed: a count, read after the join */
			__atomic_fetch_add(&x->full, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void test_cq_stale_prod(void)
{
	size_t bytes =
		sizeof(struct srn_cq_shm) + SLOTS * sizeof(struct srn_cqe);
	struct stale x = { .credits = SLOTS };
	struct stale_arg a[STALE_PRODUCERS];
	pthread_t o, p[STALE_PRODUCERS];
	int i;

	x.shm = aligned_alloc(64, bytes);
	memset(x.shm, 0, bytes);
	x.shm->size = SLOTS;
	x.shm->cqe_off = sizeof(*x.shm);
	for (i = 0; i < STALE_PRODUCERS; i++) {
		a[i] = (struct stale_arg){ &x, i };
		CHECK(srn_cq_view_init(&x.v[i], x.shm, bytes, -1, -1) == 0);
	}
	pthread_create(&o, NULL, stale_owner, &x);
	for (i = 0; i < STALE_PRODUCERS; i++)
		pthread_create(&p[i], NULL, stale_producer, &a[i]);
	for (i = 0; i < STALE_PRODUCERS; i++)
		pthread_join(p[i], NULL);
	/* release: pairs with the acquire in stale_owner */
	__atomic_store_n(&x.stop, true, __ATOMIC_RELEASE);
	pthread_join(o, NULL);
	printf("cq_stale_prod: %u posts, %u found the ring full\n", STALE_POSTS,
	       x.full);
	CHECK(x.full == 0);
	CHECK(x.shm->overflow == 0);
	free(x.shm);
}

#define FENCE_ROUNDS 200000

struct fence_race {
	struct srn_lock lock __attribute__((aligned(64)));
	unsigned arrive __attribute__((aligned(64)));
	unsigned done; /* rounds the sleeper has tried */
	unsigned judged; /* rounds the unlocker has judged */
	bool got; /* this round's trylock, written before done */
	unsigned lost, woke, took;
};

static void *fence_unlocker(void *arg)
{
	struct fence_race *x = arg;

	pin(0);
	for (unsigned r = 0; r < FENCE_ROUNDS; r++) {
		bool wake;

		/* relaxed: the sleeper is past last round (done, below) */
		__atomic_store_n(&x->lock.v, 1, __ATOMIC_RELAXED);
		arrive_together(&x->arrive, r);
		wake = srn_unlock_release(&x->lock);
		/* acquire: pairs with the release of done in fence_sleeper */
		while (__atomic_load_n(&x->done, __ATOMIC_ACQUIRE) != r + 1)
			;
		x->woke += wake;
		x->took += x->got;
		if (!wake && !x->got)
			x->lost++;
		/* release: pairs with the acquire in fence_sleeper */
		__atomic_store_n(&x->judged, r + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *fence_sleeper(void *arg)
{
	struct fence_race *x = arg;

	pin(1);
	for (unsigned r = 0; r < FENCE_ROUNDS; r++) {
		arrive_together(&x->arrive, r);
		CHECK(srn_lock_announce(&x->lock) == 0);
		x->got = srn_trylock(&x->lock);
		/* release: pairs with the acquire in fence_unlocker */
		__atomic_store_n(&x->done, r + 1, __ATOMIC_RELEASE);
		/* a sleeper stays counted while it sleeps: until the
		 * unlocker has looked. acquire: pairs with the release of
		 * judged in fence_unlocker */
		while (__atomic_load_n(&x->judged, __ATOMIC_ACQUIRE) != r + 1)
			;
		srn_lock_unannounce(&x->lock);
	}
	return NULL;
}

static void test_lock_fence(void)
{
	struct fence_race *x = aligned_alloc(64, sizeof(*x));
	pthread_t a, b;

	memset(x, 0, sizeof(*x));
	pthread_create(&a, NULL, fence_unlocker, x);
	pthread_create(&b, NULL, fence_sleeper, x);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("lock_fence (%s unlock): %u rounds, %u woke, %u took the "
	       "lock, %u lost\n",
	       srn_lock_asym ? "store" : "exchange", FENCE_ROUNDS, x->woke,
	       x->took, x->lost);
	CHECK(x->lost == 0);
	free(x);
}

#define LOCK_THREADS 4
#define LOCK_ITERS 200000

struct lock_race {
	struct srn_lock lock;
	unsigned long count; /* under lock */
	unsigned finished; /* threads done */
};

static void *locker(void *arg)
{
	struct lock_race *x = arg;
	static unsigned next;
	/* relaxed: a thread number only */
	unsigned me = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);

	pin((int)me);
	for (unsigned i = 0; i < LOCK_ITERS; i++) {
		srn_lock(&x->lock);
		x->count++;
		/* now and then hold it long enough for the others to sleep */
		if ((i + me) % 4096 == 0)
			usleep(200);
		srn_unlock(&x->lock);
	}
	/* release: pairs with the acquire in lock_race_run */
	__atomic_fetch_add(&x->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void lock_race_run(bool asym)
{
	struct lock_race x = { .lock = SRN_LOCK_INIT };
	pthread_t t[LOCK_THREADS];
	bool was = srn_lock_asym;
	unsigned waited = 0;

	srn_lock_asym = asym && was; /* no lock of the library is in use */
	for (int i = 0; i < LOCK_THREADS; i++)
		pthread_create(&t[i], NULL, locker, &x);
	/* acquire: pairs with the release in locker. 60 s: far beyond a
	 * slow machine's need (about a second here), short of ctest's
	 * timeout, so that a stuck thread is named as such */
	while (__atomic_load_n(&x.finished, __ATOMIC_ACQUIRE) < LOCK_THREADS &&
	       waited++ < 60000)
		usleep(1000);
	printf("lock_sleepers (%s unlock): %u/%d threads finished, count %lu "
	       "of %lu\n",
	       srn_lock_asym ? "store" : "exchange", x.finished, LOCK_THREADS,
	       x.count, (unsigned long)LOCK_THREADS * LOCK_ITERS);
	CHECK(x.finished == LOCK_THREADS);
	if (x.finished != LOCK_THREADS) { /* stuck threads: end here */
		unit_summary();
		exit(1);
	}
	for (int i = 0; i < LOCK_THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(x.count == (unsigned long)LOCK_THREADS * LOCK_ITERS);
	for (unsigned b = 0; b < SRN_LOCK_SLEEPERS; b++)
		CHECK(srn_lock_sleepers_tab[b] == 0);
	srn_lock_asym = was;
}

static void test_lock_sleepers(void)
{
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

	/* the library chose the plain store where membarrier works */
	CHECK(srn_lock_asym ==
	      (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)));
	lock_race_run(true);
	lock_race_run(false);
}

int main(void)
{
	test_cq_arm_race();
	test_cq_stale_prod();
	test_lock_fence();
	{
		bool was = srn_lock_asym;

		srn_lock_asym = false;
		test_lock_fence();
		srn_lock_asym = was;
	}
	test_lock_sleepers();
	return unit_summary();
}
