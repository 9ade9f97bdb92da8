/*
 * softrnic RPC: the slot hand-off between callers and one worker, as in
 * src/rpc/rpc_slot.c, rpc_worker.c, rpc_xprt.c and rpc_clnt_shm.c
 * (docs/rpc.md, "The model", maps each step to its function).
 *
 * Two callers make CALLS calls each through one worker: claim the worker
 * by CAS on its state, write call n into receive slot n % 2, publish with
 * the slot's sequence number, wake only if the claim saw the worker
 * SLEEPING or PARKED; the worker spins (a nondeterministic budget), goes
 * to sleep only by its own CAS SPINNING -> SLEEPING, futex-waits with a
 * timeout (a timeout is no message: it waits again on the same slot and
 * number; after timeouts it may park), answers in transmit slot n % 2
 * once the caller of that slot's last reply acknowledged it, then frees
 * itself. A kicker wakes the worker spuriously at any time.
 *
 * Checked (tests/rpc/CMakeLists.txt): assertions (every call delivered
 * exactly once, every reply matches its call), no invalid end state (with
 * TIMEOUTS 0 a lost wake-up blocks the worker forever and shows as one),
 * and, with -DNP, no non-progress cycle under weak fairness. With
 * -DBUG_PLAIN_STORE -DTIMEOUTS=0 (the worker stores SLEEPING instead of its
 * CAS) spin must find the lost wake-up: that run shows the check works.
 */
#ifndef CALLS
#define CALLS 2
#endif
#ifndef TIMEOUTS
#define TIMEOUTS 1
#endif
#define NCALLERS 2
#define TOTAL (NCALLERS * CALLS)

#define OFF 0
#define PARKED 1
#define SLEEPING 2
#define SPINNING 3
#define RUNNING 4

byte wstate = OFF;     /* srn_rpc_wctl.state */
byte next = 1;         /* srn_rpc_wctl.next */
byte rx_seq[2];        /* srn_rpc_slot.seq of rx[0], rx[1] */
byte rx_call[2];       /* the message: which call (caller * 8 + k) */
byte tx_seq[2];
byte tx_call[2];
byte tx_ack[2];        /* srn_rpc_slot.ack */
bool in_futex;         /* the worker blocks in futex_wait on rx[n % 2] */
byte delivered[NCALLERS * 8];
byte answered;

/* futex_wake(&rx[..].seq): wakes the worker if it blocks. */
inline futex_wake() {
	atomic { if :: in_futex -> in_futex = false :: else -> skip fi }
}

proctype caller(byte id)
{
	byte k = 0, n, old, call;
	do
	:: k == CALLS -> break
	:: else ->
		/* srn_rpc_claim_pass: CAS free -> RUNNING (blocks while none
		 * is free: srn_rpc_claim's idle_seq wait) */
		atomic {
			if
			:: wstate == SPINNING -> old = SPINNING
			:: wstate == SLEEPING -> old = SLEEPING
			:: wstate == PARKED -> old = PARKED
			fi;
			wstate = RUNNING
		}
		n = next;
		call = id * 8 + k;
		/* srn_rpc_clnt_encode, then srn_rpc_publish */
		rx_call[n % 2] = call;
		rx_seq[n % 2] = n;
		if
		:: old != SPINNING -> futex_wake()
		:: else -> skip
		fi;
		/* srn_rpc_reply_wait, srn_rpc_clnt_decode, srn_rpc_reply_ack */
		(tx_seq[n % 2] == n);
		assert(tx_call[n % 2] == call);
		tx_ack[n % 2] = n;
progress_reply:
		k++
	od
}

proctype kicker()
{
	do
	:: answered < TOTAL -> futex_wake()
	:: answered == TOTAL -> break
	od
}

/* srn_rpc_worker_sleep: 0 = call n is there */
inline worker_sleep() {
#ifdef BUG_PLAIN_STORE
	/* the bug the CAS prevents: a plain store of SLEEPING over a claim
	 * (the caller saw SPINNING and will not wake us) */
	wstate = SLEEPING;
	slept = true;
#else
	atomic {
		if
		:: wstate == SPINNING -> wstate = SLEEPING; slept = true
		:: else -> slept = false /* claimed: await the publish */
		fi
	}
#endif
	if
	:: !slept -> (rx_seq[n % 2] == n)
	:: slept ->
		do
		:: rx_seq[n % 2] == n -> break
		:: else ->
			/* futex_wait(&seq, v): compare-and-block, atomic */
			atomic {
				if
				:: rx_seq[n % 2] != n -> in_futex = true
				:: else -> skip
				fi
			}
			if
			:: !in_futex -> skip /* woken, or a kick */
#if TIMEOUTS
			:: in_futex -> /* timeout: no message, wait again */
				atomic {
					in_futex = false;
					if
					:: wstate == SLEEPING -> wstate = PARKED
					:: true -> skip
					fi
				}
#endif
			fi
		od
	fi
}

proctype worker()
{
	byte n = 1, call;
	bool slept;

	/* srn_rpc_worker_free at start */
	wstate = SPINNING;
	do
	:: n > TOTAL -> break
	:: else ->
		/* srn_rpc_worker_wait: spin for a budget, then sleep */
		if
		:: rx_seq[n % 2] == n -> skip
		:: true -> worker_sleep()
		fi;
		assert(rx_seq[n % 2] == n && wstate == RUNNING);
		/* srn_rpc_worker_serve */
		call = rx_call[n % 2];
		delivered[call]++;
		assert(delivered[call] == 1);
		/* srn_rpc_tx_wait_ack, srn_rpc_reply_shm */
		(n < 3 || tx_ack[n % 2] == n - 2);
		tx_call[n % 2] = call;
		tx_seq[n % 2] = n;
		answered++;
progress_serve:
		n++;
		/* srn_rpc_worker_free */
		next = n;
		wstate = SPINNING
	od;
	assert(answered == TOTAL)
}

init {
	atomic {
		run worker();
		run caller(0);
		run caller(1);
		run kicker()
	}
}
