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
#define SRN_RPC_VERSION 1

/* Two 64-byte lines: the adjacent-line prefetcher moves them in pairs. */
#define SRN_RPC_LINE 128
#define SRN_RPC_SLOT_SIZE 1024
#define SRN_RPC_SLOT_CTL 64
#define SRN_RPC_SLOT_INLINE (SRN_RPC_SLOT_SIZE - SRN_RPC_SLOT_CTL)
/* Per worker and direction: 16 MiB of message plus the RPC headers. */
#define SRN_RPC_AUX_SIZE ((16u << 20) + 4096u)
#define SRN_RPC_MAX_WORKERS 64

/* A worker's scheduling state (srn_rpc_wctl.state). */
enum srn_rpc_wstate {
	SRN_RPC_OFF = 0, /* no thread behind this control block */
	SRN_RPC_PARKED = 1, /* asleep for long; claimed last */
	SRN_RPC_SLEEPING = 2, /* in futex_wait on its receive slot */
	SRN_RPC_SPINNING = 3, /* polling its receive slot */
	SRN_RPC_RUNNING = 4, /* claimed by a caller, or serving a call */
};

/* srn_rpc_slot.flags */
#define SRN_RPC_SLOT_AUX 1u /* the message is in the auxiliary area */
#define SRN_RPC_SLOT_NET 2u /* the server's receiver wrote it (its own) */

/*
 * A slot: 64 bytes of control, then the inline message. seq is the futex
 * word: the caller of call number n writes the message, then stores
 * seq = n with release; the worker waits for seq == n in slot n & 1.
 */
struct srn_rpc_slot {
	uint32_t seq;
	uint32_t len; /* bytes of the message */
	uint32_t flags; /* SRN_RPC_SLOT_* */
	uint32_t waiting; /* transmit slots: the caller sleeps on seq */
	uint32_t aux_gen; /* transmit: aux generation the reply was written in */
	uint32_t ack; /* transmit: the caller is done with reply number ack */
	uint8_t rsvd[SRN_RPC_SLOT_CTL - 24];
	uint8_t data[SRN_RPC_SLOT_INLINE];
};
static_assert(sizeof(struct srn_rpc_slot) == SRN_RPC_SLOT_SIZE, "slot size");
static_assert(offsetof(struct srn_rpc_slot, data) == SRN_RPC_SLOT_CTL,
	      "slot control");

/* Per-worker counters (written by the worker only). */
struct srn_rpc_wstat {
	uint64_t calls;
	uint64_t spins; /* calls found while spinning */
	uint64_t sleeps; /* futex waits */
	uint64_t wakeups; /* calls that had to wake the worker */
	uint64_t timeouts; /* futex waits that timed out */
};

/*
 * A worker's control line pair: its state (claimed by CAS), the number of
 * its next call, the auxiliary-area generation (a seqlock: odd while the
 * worker writes a reply there) and counters.
 */
struct srn_rpc_wctl {
	uint32_t state; /* enum srn_rpc_wstate */
	uint32_t next; /* the call number the next caller uses */
	uint32_t aux_gen;
	uint32_t owner; /* pid of the claimer (a hint: dead claimers) */
	struct srn_rpc_wstat stat;
	uint8_t rsvd[SRN_RPC_LINE - 16 - sizeof(struct srn_rpc_wstat)];
};
static_assert(sizeof(struct srn_rpc_wctl) == SRN_RPC_LINE, "wctl size");

struct srn_rpc_worker {
	struct srn_rpc_wctl ctl;
	struct srn_rpc_slot rx[2];
	struct srn_rpc_slot tx[2];
	uint8_t pad[8192 - SRN_RPC_LINE - 4 * SRN_RPC_SLOT_SIZE];
};
static_assert(sizeof(struct srn_rpc_worker) == 8192, "worker size");
static_assert(offsetof(struct srn_rpc_worker, rx) % SRN_RPC_LINE == 0,
	      "rx alignment");
static_assert(offsetof(struct srn_rpc_worker, tx) % SRN_RPC_LINE == 0,
	      "tx alignment");

/*
 * Segment header: line pair 0 is written once by the server at creation;
 * line pair 1 is where callers that find no free worker wait (idle_seq is
 * their futex word, bumped by a worker that becomes free while waiters is
 * nonzero).
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
	uint32_t waiters;
	uint8_t rsvd2[SRN_RPC_LINE - 8];
};
static_assert(sizeof(struct srn_rpc_seg_hdr) == 2 * SRN_RPC_LINE,
	      "header size");
static_assert(offsetof(struct srn_rpc_seg_hdr, idle_seq) == SRN_RPC_LINE,
	      "idle line");

/* The abstract unix socket of a program/version (no leading NUL here). */
#define SRN_RPC_SOCK_FMT "softrnic-rpc.%lu.%lu"

#endif /* SRN_RPC_PROTO_H */
