/* SPDX-License-Identifier: MIT */
/*
 * softrnic functional tests — a small harness. A scenario has two roles
 * (usually initiator and target), each with its own device context, run
 * either as two threads of one process or as two processes; the roles
 * exchange QP numbers and keys over a socketpair.
 */
#ifndef SRN_TEST_HARNESS_H
#define SRN_TEST_HARNESS_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum run_mode {
	MODE_THREAD,
	MODE_PROCESS
};

extern __thread int t_failures;
extern __thread const char *t_role;

#define CHECK(cond, ...)                                                 \
	do {                                                             \
		if (!(cond)) {                                           \
			t_failures++;                                    \
			fprintf(stderr, "[%s] FAIL %s:%d: %s: ", t_role, \
				__FILE__, __LINE__, #cond);              \
			fprintf(stderr, __VA_ARGS__);                    \
			fputc('\n', stderr);                             \
		}                                                        \
	} while (0)

#define REQUIRE(cond, ...)                   \
	do {                                 \
		bool req_ok_ = (cond);       \
		CHECK(req_ok_, __VA_ARGS__); \
		if (!req_ok_)                \
			return t_failures;   \
	} while (0)

struct chan {
	int fd;
};

int chan_send(struct chan *c, const void *buf, size_t len);
int chan_recv(struct chan *c, void *buf, size_t len);
void chan_barrier(struct chan *c);

/* One end of a connection. */
struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx; /* the same CQ, when made extended */
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
};

struct side_opts {
	size_t buf_len;
	int mr_access;
	int qp_access;
	int cq_size;
	int max_send_wr, max_recv_wr, max_sge, max_inline;
	bool use_channel;
	bool sig_all;
	bool use_srq;
	uint8_t rnr_retry, min_rnr_timer, retry_cnt, timeout;
	uint8_t max_rd_atomic; /* 0: 16 */
	uint32_t psn; /* sq_psn and rq_psn of both sides (they must agree) */
	bool uc; /* an unreliable connected QP instead of RC */
	uint64_t send_ops_flags; /* nonzero: ibv_create_qp_ex with these */
	uint64_t cq_ex_flags; /* nonzero: the CQ is made with ibv_create_cq_ex
			       * and these wc_flags (then side.cqx is set) */
};

struct peer_info {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

void side_opts_default(struct side_opts *o);
int side_open(struct side *s, const struct side_opts *o);
int side_connect(struct side *s, const struct peer_info *peer,
		 const struct side_opts *o);
/* side_connect in two steps: RESET -> INIT, then INIT -> RTR -> RTS. */
int side_init(struct side *s, const struct side_opts *o);
int side_rtr_rts(struct side *s, const struct peer_info *peer,
		 const struct side_opts *o);
void side_info(const struct side *s, struct peer_info *pi);
void side_close(struct side *s);
/* Opens s and connects it to the other role through c. */
int side_pair(struct side *s, const struct side_opts *o, struct chan *c,
	      struct peer_info *peer);

/* The inode of a shared mapping (MAP_SHARED of a file, a memfd) at addr
 * in our /proc/self/maps, 0 if none (private memory). */
unsigned long long shared_ino_at(uintptr_t addr);
/* CLOCK_MONOTONIC in seconds. */
double now_s(void);
/* Busy-polls one completion; 0 on success, -1 on timeout. */
int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);
/* Checks that no completion arrives within ms. */
bool cq_empty_for(struct ibv_cq *cq, int ms);

int post_send1(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr,
	       uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
	       unsigned flags, uint64_t wr_id);
int post_recv1(struct ibv_qp *qp, void *addr, uint32_t len, uint32_t lkey,
	       uint64_t wr_id);

typedef int role_fn(struct chan *c, void *arg);
/* A peer that connects with the default options, waits for one barrier
 * (the other role is done) and closes. */
int role_idle(struct chan *c, void *arg);
/* Runs a (initiator) and b (target); returns the total failures. */
int run_roles(const char *name, role_fn *a, role_fn *b, void *arg,
	      enum run_mode mode);

/* Parses "thread"/"process" from argv[1]; prints the summary line. */
enum run_mode test_mode(int argc, char **argv);
int test_summary(int passed, int failed);

#define RUN(name, a, b, arg, mode, passed, failed)    \
	do {                                          \
		if (run_roles(name, a, b, arg, mode)) \
			(failed)++;                   \
		else                                  \
			(passed)++;                   \
	} while (0)

#endif
