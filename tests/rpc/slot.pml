/*
 * softrnic RPC: the slot hand-off between callers and workers, as in
 * src/rpc/rpc_slot.c, rpc_worker.c, rpc_xprt.c and rpc_clnt_shm.c
 * (docs/rpc.md, "The model", maps each step to its function).
 *
 * NCALLERS callers make CALLS calls each through NW workers. A caller
 * claims a free worker by CAS on its state (any free one: the code's
 * preference, spinning first, is one of the choices explored), writes
 * call n into that worker's receive slot n % 2, publishes it with the
 * slot's sequence number, and wakes the worker only if the claim saw it
 * SLEEPING or PARKED. A worker spins (a nondeterministic budget), goes to
 * sleep only by its own CAS SPINNING -> SLEEPING, futex-waits with a
 * timeout (a timeout is no message: it waits again on the same slot and
 * number; it may park), answers in transmit slot n % 2 once the caller of
 * that slot's last reply acknowledged it, then frees itself. A kicker
 * wakes workers spuriously at any time (KICKS times); when every call is answered a
 * stopper sets stop and kicks every worker (srn_rpc_server_stop), and the
 * workers must all end.
 *
 * Checked (tests/rpc/run_spin.sh): assertions (every call delivered exactly
 * once, every reply matches its call), no invalid end state (with
 * TIMEOUTS 0 a lost wake-up blocks a worker forever and shows as one),
 * and, with -DNP, no non-progress cycle under weak fairness. With
 * -DBUG_PLAIN_STORE -DTIMEOUTS=0 (a worker stores SLEEPING instead of its
 * CAS) spin must find the lost wake-up: that run shows the check works.
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
#define NCALLERS 2
#define TOTAL (NCALLERS * CALLS)

#define OFF 0
#define PARKED 1
#define SLEEPING 2
#define SPINNING 3
#define RUNNING 4

byte wstate[NW];       /* srn_rpc_wctl.state */
byte next[NW];         /* srn_rpc_wctl.next */
byte rx_seq[2 * NW];   /* srn_rpc_slot.seq of worker w's rx[s]: [2w + s] */
byte rx_call[2 * NW];  /* the message: which call (caller * 8 + k) */
byte tx_seq[2 * NW];
byte tx_call[2 * NW];
byte tx_ack[2 * NW];   /* srn_rpc_slot.ack */
bool in_futex[NW];     /* worker w blocks in futex_wait on its rx slot */
byte delivered[NCALLERS * 8];
byte answered;
bool stop;

/* futex_wake(&rx[..].seq): wakes worker w if it blocks. */
inline futex_wake(w) {
	atomic { if :: in_futex[w] -> in_futex[w] = false :: else -> skip fi }
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
			fi;
			old = wstate[w];
			wstate[w] = RUNNING;
			n = next[w];
			s = 2 * w + n % 2;
			call = id * 8 + k;
			rx_call[s] = call
		}
		/* srn_rpc_publish: the release store, then the wake */
		rx_seq[s] = n;
		if
		:: old != SPINNING -> futex_wake(w)
		:: else -> skip
		fi;
		/* srn_rpc_reply_wait; srn_rpc_clnt_decode reads the reply
		 * (the assertion), then srn_rpc_reply_ack */
		(tx_seq[s] == n);
		atomic {
			assert(tx_call[s] == call);
			tx_ack[s] = n;
			old = 0; call = 0; w = 0
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
		futex_wake(w)
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
	:: w < NW -> futex_wake(w); w++
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
				:: rx_seq[s] != n && !stop -> in_futex[me] = true
				:: else -> skip
				fi
			}
			if
			:: !in_futex[me] -> skip /* woken, or a kick */
#if TIMEOUTS
			:: in_futex[me] -> /* timeout: no message, wait again */
				atomic {
					in_futex[me] = false;
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

proctype worker(byte me)
{
	byte n = 1, call, s;
	bool slept;

	/* srn_rpc_worker_free at start */
	next[me] = 1;
	wstate[me] = SPINNING;
	do
	:: stop -> break
	:: else ->
		s = 2 * me + n % 2;
		/* srn_rpc_worker_wait: spin for a budget, then sleep */
		if
		:: rx_seq[s] == n -> skip
		:: true -> worker_sleep()
		fi;
		if
		:: rx_seq[s] != n -> assert(stop); break
		:: else -> skip
		fi;
		/* srn_rpc_worker_serve: the call is ours until we free */
		atomic {
			assert(wstate[me] == RUNNING);
			call = rx_call[s];
			delivered[call]++;
			assert(delivered[call] == 1)
		}
		/* srn_rpc_tx_wait_ack, then srn_rpc_reply_shm: the reply,
		 * then its release store */
		atomic {
			(n < 3 || tx_ack[s] == n - 2);
			tx_call[s] = call
		}
		atomic {
			tx_seq[s] = n;
			answered++
		}
progress_serve:
		/* srn_rpc_worker_free: next, then the state (release) */
		atomic {
			n++;
			next[me] = n;
			wstate[me] = SPINNING;
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
