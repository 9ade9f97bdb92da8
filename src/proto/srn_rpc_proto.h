/* SPDX-License-Identifier: MIT */
/*
 * softrnic RPC — layout of the segment a server shares with the clients
 * of its host (docs/rpc.md, "Slot layout").
 *
 * One memfd per server, handed to a same-host client with SCM_RIGHTS over
 * the server's abstract unix socket. It holds a header, one control block
 * per worker (scheduling state, call counter, counters, two receive and
 * two transmit slots) and, per worker, an auxiliary area per direction for
 * messages larger than a slot's inline room.
 *
 * Every message in a slot or an auxiliary area is a complete ONC-RPC
 * message, XDR-encoded by libtirpc (a call: rpc_msg + arguments; a reply:
 * rpc_msg + results), so one decoder serves the network and the segment.
 *
 * Rules: fixed-width types, offsets (never pointers), sizes static_asserted;
 * a reader checks every length and offset it reads against the segment.
 */
#ifndef SRN_RPC_PROTO_H
#define SRN_RPC_PROTO_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define SRN_RPC_MAGIC 0x43505253u /* "SRPC" little endian */
#define SRN_RPC_VERSION 4

/* Two 64-byte lines: the adjacent-line prefetcher moves them in pairs. */
#define SRN_RPC_LINE 128
#define SRN_RPC_SLOT_SIZE 1024
/* A slot's head: what a hand-off moves, in the line the message starts in */
#define SRN_RPC_SLOT_HEAD 24
/* A slot's tail line: words a hand-off does not move */
#define SRN_RPC_SLOT_TAIL 64
#define SRN_RPC_SLOT_INLINE \
	(SRN_RPC_SLOT_SIZE - SRN_RPC_SLOT_HEAD - SRN_RPC_SLOT_TAIL)
/* Per worker and direction: 16 MiB of message plus the RPC headers. */
#define SRN_RPC_AUX_SIZE ((16u << 20) + 4096u)
#define SRN_RPC_MAX_WORKERS 64
/* Callers that may wait for a free worker (the per-service queue). */
#define SRN_RPC_QUEUE_LEN 8
/* A handler shorter than this (about a futex wake-up here) is "short":
 * a caller may queue its call behind it rather than wake a sleeper. */
#define SRN_RPC_SHORT_NS 30000u

/* A worker's scheduling state (in its sched word, rx[0].sched). */
enum srn_rpc_wstate {
	SRN_RPC_OFF = 0, /* no thread behind this control block */
	SRN_RPC_PARKED = 1, /* asleep for long; claimed last */
	SRN_RPC_SLEEPING = 2, /* in futex_wait on its receive slot */
	SRN_RPC_SPINNING = 3, /* polling its receive slot */
	SRN_RPC_RUNNING = 4, /* claimed by a caller, or serving a call */
	SRN_RPC_QUEUED = 5, /* RUNNING, and call n + 1 is queued behind */
	SRN_RPC_NSTATES
};

/*
 * A worker's sched word: its state, the call number n, the receive slot
 * of call n and a pid, in one 64-bit word changed by CAS only, so that a
 * claim reads the number and slot it claims in the same atomic step. n is
 * the call a free worker waits for (always in rx[0]), or the call a
 * RUNNING worker serves, in rx[slot] (a caller queued behind it makes
 * call n + 1 in rx[1 - slot]). pid: the claimer of call n (RUNNING), or
 * of call n + 1 (QUEUED), a hint for a worker that waits for a publish.
 * The word lives in rx[0]'s head, the line a free claim writes its call
 * into: the claim and the call cross to the worker as one line.
 */
#define SRN_RPC_PID_MASK 0x0fffffffu
#define SRN_RPC_SCHED(state, slot, pid, n)                     \
	((uint64_t)(state) | ((uint64_t)((slot)&1u) << 3) |    \
	 ((uint64_t)((uint32_t)(pid)&SRN_RPC_PID_MASK) << 4) | \
	 ((uint64_t)(uint32_t)(n) << 32))
#define SRN_RPC_SCHED_STATE(v) ((uint32_t)((v)&7u))
#define SRN_RPC_SCHED_SLOT(v) ((unsigned)(((v) >> 3) & 1u))
#define SRN_RPC_SCHED_PID(v) ((uint32_t)(((v) >> 4) & SRN_RPC_PID_MASK))
#define SRN_RPC_SCHED_N(v) ((uint32_t)((v) >> 32))

/* srn_rpc_slot.flags */
#define SRN_RPC_SLOT_AUX 1u /* the message is in the auxiliary area */
#define SRN_RPC_SLOT_NET 2u /* the server's receiver wrote it (its own) */

/*
 * A slot: a 24-byte head, the inline message, and a tail line. seq is
 * the futex word: the caller of call number n writes the message, then
 * stores seq = n with release; the worker waits for seq == n in the slot
 * its sched word names. The head and the first 40 bytes of the message
 * share one line, so a short message (a null call: 40 bytes; a null
 * reply: 24) crosses between the cores as that one line, and in rx[0]
 * together with the claim. The tail holds what the fast path neither
 * writes nor reads across cores.
 */
struct srn_rpc_slot {
	uint64_t sched; /* rx[0]: the worker's sched word; else unused */
	uint32_t seq;
	uint32_t len; /* bytes of the message */
	uint32_t flags; /* SRN_RPC_SLOT_* */
	union {
		uint32_t pid; /* receive: the caller's pid (a hint) */
		uint32_t ack; /* transmit: the caller is done with reply
			       * number ack (the worker reads it just before
			       * it writes the reply into this line) */
	};
	uint8_t data[SRN_RPC_SLOT_INLINE];
	uint32_t waiting; /* transmit: callers asleep on seq (a count);
			   * receive: the worker waits in futex for a call
			   * queued behind (srn_rpc_worker_await_behind) */
	uint32_t aux_gen; /* transmit: aux generation the reply was written in
			   * (read for replies in the aux area only) */
	uint8_t rsvd[SRN_RPC_SLOT_TAIL - 8];
};
static_assert(sizeof(struct srn_rpc_slot) == SRN_RPC_SLOT_SIZE, "slot size");
static_assert(offsetof(struct srn_rpc_slot, sched) == 0 &&
		      offsetof(struct srn_rpc_slot, seq) == 8,
	      "slot head order");
static_assert(offsetof(struct srn_rpc_slot, data) == SRN_RPC_SLOT_HEAD,
	      "slot head");
static_assert(offsetof(struct srn_rpc_slot, waiting) ==
		      SRN_RPC_SLOT_SIZE - SRN_RPC_SLOT_TAIL,
	      "slot tail");
static_assert(SRN_RPC_SLOT_INLINE % 4 == 0, "XDR units");

/* Per-worker counters (written by the worker only; `softrnic stat`). */
struct srn_rpc_wstat {
	uint64_t calls;
	uint64_t spins; /* calls found while spinning */
	uint64_t sleeps; /* times it went to sleep (futex) */
	uint64_t wakeups; /* calls that had to wake it */
	uint64_t timeouts; /* futex waits that timed out */
	uint64_t behind; /* calls queued behind a running call */
	uint64_t parks; /* times it went PARKED */
	uint64_t direct; /* network calls it read from the socket itself */
};

/*
 * A worker's control line pair: the auxiliary-area generation (a seqlock:
 * odd while the worker writes a reply there), the pid of a caller queued
 * behind, its handler time. Nothing on a free claim's path lives here.
 */
struct srn_rpc_wctl {
	uint32_t aux_gen;
	uint32_t owner_behind; /* pid of the caller of call n + 1 (a hint) */
	uint32_t svc_ns; /* handler time, moving average (ns) */
	uint8_t rsvd[SRN_RPC_LINE - 12];
};
static_assert(sizeof(struct srn_rpc_wctl) == SRN_RPC_LINE, "wctl size");

/* A worker's counters, on a line pair only the worker writes. */
struct srn_rpc_wcount {
	struct srn_rpc_wstat stat;
	uint8_t rsvd[SRN_RPC_LINE - sizeof(struct srn_rpc_wstat)];
};
static_assert(sizeof(struct srn_rpc_wcount) == SRN_RPC_LINE, "wcount size");

struct srn_rpc_worker {
	struct srn_rpc_wctl ctl;
	struct srn_rpc_wcount cnt;
	struct srn_rpc_slot rx[2];
	struct srn_rpc_slot tx[2];
	uint8_t pad[8192 - 2 * SRN_RPC_LINE - 4 * SRN_RPC_SLOT_SIZE];
};
static_assert(sizeof(struct srn_rpc_worker) == 8192, "worker size");
static_assert(offsetof(struct srn_rpc_worker, rx) % SRN_RPC_LINE == 0,
	      "rx alignment");
static_assert(offsetof(struct srn_rpc_worker, tx) % SRN_RPC_LINE == 0,
	      "tx alignment");

/* Per-service counters (any caller or the server writes them). */
struct srn_rpc_qstat {
	uint64_t queued; /* calls that waited in the queue */
	uint64_t dropped; /* calls refused: the queue was full */
	uint64_t grows; /* requests for one more worker */
	uint32_t started; /* worker threads started (the server) */
	uint32_t rsvd;
};

/*
 * Segment header: line pair 0 is written once by the server at creation;
 * line pair 1 is the per-service queue: a caller that finds no worker to
 * take its call puts its pid in a free queue entry (none free: the call is
 * dropped) and waits on idle_seq, bumped by a worker that becomes free
 * while an entry is taken; an entry of a dead process is reclaimed. Line
 * pair 2 holds the service's counters.
 */
struct srn_rpc_seg_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t rsvd0;
	uint64_t size; /* total bytes of the segment */
	uint32_t owner_pid;
	uint32_t nworkers; /* control blocks (the server's max_workers) */
	uint64_t worker_off; /* offset of worker 0 */
	uint64_t worker_size; /* sizeof(struct srn_rpc_worker) */
	uint64_t aux_off; /* offset of worker 0's receive aux area */
	uint64_t aux_size; /* bytes per area; worker i, direction d at
			    * aux_off + (2 * i + d) * aux_size */
	uint8_t rsvd1[SRN_RPC_LINE - 56];
	uint32_t idle_seq;
	uint32_t rsvd2;
	uint32_t queue[SRN_RPC_QUEUE_LEN]; /* pids of waiting callers; 0: free */
	uint8_t rsvd3[SRN_RPC_LINE - 8 - 4 * SRN_RPC_QUEUE_LEN];
	struct srn_rpc_qstat qstat;
	uint8_t rsvd4[SRN_RPC_LINE - sizeof(struct srn_rpc_qstat)];
};
static_assert(sizeof(struct srn_rpc_seg_hdr) == 3 * SRN_RPC_LINE,
	      "header size");
static_assert(offsetof(struct srn_rpc_seg_hdr, idle_seq) == SRN_RPC_LINE,
	      "idle line");
static_assert(offsetof(struct srn_rpc_seg_hdr, qstat) == 2 * SRN_RPC_LINE,
	      "counter line");

/* The abstract unix socket of a program/version (no leading NUL here). */
#define SRN_RPC_SOCK_FMT "softrnic-rpc.%lu.%lu"

#endif /* SRN_RPC_PROTO_H */
