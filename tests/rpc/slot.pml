/*
 * softrnic RPC: the slot hand-off between callers and workers, as in
 * src/rpc/rpc_slot.c, rpc_worker.c, rpc_xprt.c and rpc_clnt_shm.c
 * (docs/rpc.md, "The model", maps each step to its function).
 *
 * NCALLERS callers make CALLS calls each through NW workers. A caller
 * claims a free worker by CAS on its state, call number and receive slot
 * (one word: the sched word in rx[0]'s head; any free one: the code's
 * preference, spinning first, is one of the choices explored) and makes
 * call n = next in receive slot 0, or (BEHIND) queues behind a RUNNING
 * worker: RUNNING -> QUEUED and call n = next + 1 in the receive slot the
 * running call is not in. It writes call n there, publishes it with the
 * slot's sequence number, and wakes the worker unless the claim saw it
 * SPINNING. A worker that finishes call n
 * while QUEUED stays RUNNING for call n + 1 and waits for it in futex
 * (the caller saw it RUNNING and wakes it). A worker spins (a nondeterministic budget), goes to
 * sleep only by its own CAS SPINNING -> SLEEPING, futex-waits with a
 * timeout (a timeout is no message: it waits again on the same slot and
 * number; it may park), answers in transmit slot n % 2 once the caller of
 * that slot's last reply acknowledged it, then frees itself (a free
 * worker waits in receive slot 0; one that finds a call queued behind
 * waits in the other slot). A kicker
 * wakes workers spuriously at any time (KICKS times); when every call is answered a
 * stopper sets stop and kicks every worker (srn_rpc_server_stop), and the
 * workers must all end.
 *
 * Checked (tests/rpc/run_spin.sh): assertions (every call delivered exactly
 * once, every reply matches its call), no invalid end state (with
 * TIMEOUTS 0 a lost wake-up blocks a worker forever and shows as one),
 * and, with -DNP, no non-progress cycle under weak fairness. With
 * -DBUG_PLAIN_STORE -DTIMEOUTS=0 (a worker stores SLEEPING instead of its
 * CAS) spin must find the lost wake-up, and with -DBUG_BEHIND (a worker
 * frees itself with a plain store, over a call queued behind it) the lost
 * call, and with -DBUG_SLOT (a caller queues behind in the running
 * call's own receive slot) the overwritten call: those runs show the
 * checks work. Futex words are per slot: a wake
 * of one slot does not wake a worker waiting on the other.
 *
 * With NET > 0 a spinning worker may also read a network call itself
 * (rpc_direct.c), NET times in all: srn_rpc_claim_self's CAS SPINNING(n)
 * -> RUNNING(n) makes it call n, which no slot carries (receive slot 0
 * keeps its old number; transmit slot n % 2 too, and the next reply there
 * waits for the ack of the last reply written in it); if a caller claimed call n first, the worker
 * serves that call and the network one after it under the same claim.
 * With -DBUG_SELF (a plain store of RUNNING) spin must find the damage.
 */
#ifndef CALLS
#define CALLS 2
#endif
#ifndef NW
#define NW 2
#endif
#ifndef TIMEOUTS
#define TIMEOUTS 1
#endif
#ifndef KICKS
#define KICKS 2
#endif
#ifndef BEHIND
#define BEHIND 1
#endif
#ifndef NET
#define NET 0
#endif
#define NCALLERS 2
/* worker w's transmit slot for call n */
#define TX(w, n) (2 * (w) + (n) % 2)
#define TOTAL (NCALLERS * CALLS)

#define OFF 0
#define PARKED 1
#define SLEEPING 2
#define SPINNING 3
#define RUNNING 4
#define QUEUED 5

byte wstate[NW];       /* the sched word: the state ... */
byte next[NW];         /* ... the call number n ... */
byte wslot[NW];        /* ... and the receive slot of call n */
byte rx_seq[2 * NW];   /* srn_rpc_slot.seq of worker w's rx[s]: [2w + s] */
byte rx_call[2 * NW];  /* the message: which call (caller * 8 + k) */
byte tx_seq[2 * NW];
byte tx_call[2 * NW];
byte tx_ack[2 * NW];   /* srn_rpc_slot.ack */
byte tx_last[2 * NW];  /* the last reply written there (wl->tx_n) */
byte netserved;        /* network calls the workers read themselves */
bool in_futex[2 * NW]; /* worker w blocks in futex_wait on its rx[s] */
bool rx_waiting[2 * NW]; /* srn_rpc_slot.waiting of a receive slot */
byte delivered[NCALLERS * 8];
byte answered;
bool stop;

/* futex_wake(&rx[s].seq): wakes the worker if it blocks on that slot. */
inline futex_wake(s) {
	atomic { if :: in_futex[s] -> in_futex[s] = false :: else -> skip fi }
}

/* A kick of both slots of worker w (spurious wakes, stop). */
inline kick(w) {
	futex_wake(2 * w);
	futex_wake(2 * w + 1)
}

proctype caller(byte id)
{
	byte k = 0, n, old, call, w, s;
	do
	:: k == CALLS -> break
	:: else ->
		/* srn_rpc_claim_pass: CAS free -> RUNNING (blocks while none
		 * is free: srn_rpc_claim's idle_seq wait); then read next
		 * and write the message (srn_rpc_clnt_encode): the worker
		 * looks at neither before the publish */
		atomic {
			if
			:: wstate[0] >= PARKED && wstate[0] <= SPINNING -> w = 0
#if NW > 1
			:: wstate[1] >= PARKED && wstate[1] <= SPINNING -> w = 1
#endif
#if BEHIND
			:: wstate[0] == RUNNING -> w = 0
#if NW > 1
			:: wstate[1] == RUNNING -> w = 1
#endif
#endif
			fi;
			old = wstate[w];
			if
			:: old == RUNNING -> wstate[w] = QUEUED; n = next[w] + 1;
#ifdef BUG_SLOT
				s = 2 * w + wslot[w]
#else
				s = 2 * w + 1 - wslot[w]
#endif
			:: else -> wstate[w] = RUNNING; n = next[w];
				wslot[w] = 0; s = 2 * w
			fi;
			call = id * 8 + k;
			rx_call[s] = call
		}
		/* srn_rpc_publish: the release store, then the wake */
		rx_seq[s] = n;
		if
		:: old == RUNNING && rx_waiting[s] -> futex_wake(s)
		:: old == SLEEPING || old == PARKED -> futex_wake(s)
		:: else -> skip
		fi;
		/* srn_rpc_reply_wait; srn_rpc_clnt_decode reads the reply
		 * (the assertion), then srn_rpc_reply_ack */
		/* the transmit slot is TX(w, n) */
		(tx_seq[TX(w, n)] == n);
		atomic {
			assert(tx_call[TX(w, n)] == call);
			tx_ack[TX(w, n)] = n;
			old = 0; call = 0; w = 0; s = 0
		}
progress_reply:
		k++
	od
}

proctype kicker()
{
	byte w, kicks = 0;
	do
	:: answered < TOTAL && kicks < KICKS ->
		kicks++;
		if
		:: w = 0
#if NW > 1
		:: w = 1
#endif
		fi;
		kick(w)
	:: answered == TOTAL || kicks == KICKS -> break
	od
}

/* srn_rpc_server_stop, once every call is answered */
proctype stopper()
{
	byte w = 0;
	(answered == TOTAL);
	stop = true;
	do
	:: w < NW -> kick(w); w++
	:: else -> break
	od
}

/* srn_rpc_worker_sleep: call n is there, or stop */
inline worker_sleep() {
#ifdef BUG_PLAIN_STORE
	/* the bug the CAS prevents: a plain store of SLEEPING over a claim
	 * (the caller saw SPINNING and will not wake us) */
	wstate[me] = SLEEPING;
	slept = true;
#else
	atomic {
		if
		:: wstate[me] == SPINNING -> wstate[me] = SLEEPING; slept = true
		:: else -> slept = false /* claimed: await the publish */
		fi
	}
#endif
	if
	:: !slept -> (rx_seq[s] == n)
	:: slept ->
		do
		:: rx_seq[s] == n -> break
		:: stop -> break
		:: else ->
			/* futex_wait(&seq, v): compare-and-block, atomic;
			 * stop's wake (a kick) comes after stop is set */
			atomic {
				if
				:: rx_seq[s] != n && !stop -> in_futex[s] = true
				:: else -> skip
				fi
			}
			if
			:: !in_futex[s] -> skip /* woken, or a kick */
#if TIMEOUTS
			:: in_futex[s] -> /* timeout: no message, wait again */
				atomic {
					in_futex[s] = false;
					if
					:: wstate[me] == SLEEPING ->
						wstate[me] = PARKED
					:: true -> skip
					fi
				}
#endif
			fi
		od
	fi
}

/* srn_rpc_worker_await_behind: call n was queued behind the last one;
 * the caller wakes only a worker that set the slot's waiting word */
inline worker_await_behind() {
	do
	:: rx_seq[s] == n -> break
	:: stop -> break
	:: else ->
		rx_waiting[s] = true;
		atomic {
			if
			:: rx_seq[s] != n && !stop -> in_futex[s] = true
			:: else -> skip
			fi
		}
		if
		:: !in_futex[s] -> skip
#if TIMEOUTS
		:: in_futex[s] -> in_futex[s] = false /* a 10 ms slice */
#endif
		fi
	od;
	rx_waiting[s] = false
}

/* srn_rpc_net_take: a datagram read while spinning becomes call n by
 * srn_rpc_claim_self; self is false when a caller claimed call n first */
inline worker_take_net() {
	atomic {
		netserved++;
#ifdef BUG_SELF
		wstate[me] = RUNNING;
		self = true
#else
		if
		:: wstate[me] == SPINNING -> wstate[me] = RUNNING; wslot[me] = 0;
			self = true
		:: else -> self = false
		fi
#endif
	}
	if
	:: !self -> (rx_seq[s] == n) /* the claimer's call first */
	:: else -> skip
	fi
}

proctype worker(byte me)
{
	byte n = 1, call, s;
	bool slept, claimed = false, self = false;

	/* srn_rpc_worker_ready at start */
	next[me] = 1;
	wslot[me] = 0;
	wstate[me] = SPINNING;
	do
	:: stop -> break
	:: else ->
		s = 2 * me + wslot[me]; /* the receive slot (wl->slot) */
		/* srn_rpc_worker_wait: spin for a budget, then sleep */
		self = false;
		if
		:: rx_seq[s] == n -> skip
#if NET
		:: !claimed && netserved < NET -> worker_take_net()
#endif
		:: claimed -> worker_await_behind()
		:: !claimed -> worker_sleep()
		fi;
		if
		:: self -> goto free /* served on the socket: no slot */
		:: !self && rx_seq[s] != n -> assert(stop); break
		:: else -> skip
		fi;
		/* srn_rpc_worker_serve: the call is ours until we free */
		atomic {
			assert(wstate[me] == RUNNING || wstate[me] == QUEUED);
			call = rx_call[s];
			delivered[call]++;
			assert(delivered[call] == 1)
		}
		/* srn_rpc_tx_wait_ack, then srn_rpc_reply_shm: the reply,
		 * then its release store */
		atomic {
			(tx_last[TX(me, n)] == 0 ||
			 tx_ack[TX(me, n)] == tx_last[TX(me, n)]);
			tx_call[TX(me, n)] = call
		}
		atomic {
			tx_seq[TX(me, n)] = n;
			tx_last[TX(me, n)] = n;
			answered++
		}
progress_serve:
free:
		/* srn_rpc_worker_free: CAS RUNNING(n, slot) -> SPINNING(n + 1,
		 * 0), or QUEUED(n, slot) -> RUNNING(n + 1, 1 - slot): call
		 * n + 1 is claimed, in the other receive slot */
		atomic {
			n++;
			next[me] = n;
#ifdef BUG_BEHIND
			wstate[me] = SPINNING;
			wslot[me] = 0;
			claimed = false;
#else
			if
			:: wstate[me] == QUEUED -> wstate[me] = RUNNING;
				wslot[me] = 1 - wslot[me];
				claimed = true
			:: else -> wstate[me] = SPINNING; wslot[me] = 0;
				claimed = false
			fi;
#endif
			call = 0
		}
	od;
	wstate[me] = OFF
}

init {
	atomic {
		run worker(0);
#if NW > 1
		run worker(1);
#endif
		run caller(0);
		run caller(1);
		run kicker();
		run stopper()
	}
}
