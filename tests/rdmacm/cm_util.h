/* SPDX-License-Identifier: MIT */
/*
 * The rdma_cm tests' common steps (cm_util.c): CHECK counts a failure and
 * returns -1 from the calling case.
 */
#ifndef SRN_TEST_CM_UTIL_H
#define SRN_TEST_CM_UTIL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "proto/srn_cm_proto.h"

extern int failures;

#define CHECK(c)                                                         \
	do {                                                             \
		if (!(c)) {                                              \
			fprintf(stderr, "%s:%d: %s: check failed: %s\n", \
				__FILE__, __LINE__, __func__, #c);       \
			failures++;                                      \
			return -1;                                       \
		}                                                        \
	} while (0)

struct side {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id; /* client's, or the listener */
	struct rdma_cm_id *child;
	uint16_t port;
};

struct rdma_cm_event *next_event(struct rdma_event_channel *ch,
				 enum rdma_cm_event_type want);
int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t);
struct sockaddr_in loopback(uint16_t port);
int listen_ps(struct side *s, uint16_t port, void *ctx,
	      enum rdma_port_space ps);
int listen_on(struct side *s, uint16_t port, void *ctx);
int client_ps(struct side *c, uint16_t port, enum rdma_port_space ps);
int client_via(struct side *c, struct sockaddr_in sa, enum rdma_port_space ps);
int client_to(struct side *c, uint16_t port);
int make_qp(struct rdma_cm_id *id);
void teardown(struct side *s);
int request(struct side *srv, struct side *cli, int ctx_tag);
int send_one(struct side *srv, struct side *cli);
int serve_one(struct side *srv);

/* A test case; cm_run_cases runs every one, or the one argv[1] names,
 * and says ok or FAIL for each: the exit status. */
struct cm_case {
	const char *name;
	int (*fn)(void);
};
int cm_run_cases(const struct cm_case *cases, size_t n, int argc, char **argv);

#endif
