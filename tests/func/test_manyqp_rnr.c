// SPDX-License-Identifier: MIT
/*
 * Stalled send queues among many QPs are retried (docs/architecture.md,
 * "Stalls and retries"): two processes connect N RC QP pairs to one CQ
 * each; the target posts a receive on every QP but every S-th, the
 * initiator posts one SEND on every QP and polls its CQ with ibv_poll_cq
 * only. The SENDs of the QPs with a receive complete; the others wait for
 * one (RNR, retried forever: rnr_retry 7). Then the target posts the
 * missing receives: every stalled SEND must complete, with its payload in
 * the right buffer. A requester that no longer retries a stalled QP (the
 * retry list forgets it, the poll path skips it) fails here after 30 s.
 *
 * The initiator also counts its mappings of CQ segments (/proc/self/maps):
 * N connections to QPs of one CQ map that CQ once (transport/shm,
 * shm_smap.c), not N times. No timing: only outcomes are checked.
 *
 *   test_manyqp_rnr [N [S]]    (default 512 QPs, S 16)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define SLOT 64 /* bytes of the buffer per QP */
#define WAIT_S 30 /* what must complete does so within this (or fails) */

static int xfer(int s, void *buf, size_t len, bool send_it)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k = send_it ? write(s, (char *)buf + done, len - done) :
				      read(s, (char *)buf + done, len - done);

		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

static int barrier(int s)
{
	char c = 0;

	return xfer(s, &c, 1, true) || xfer(s, &c, 1, false) ? -1 : 0;
}

/* Mappings of CQ segments (memfds named srn-cq) in this process. */
static int cq_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "srn-cq") != NULL;
	fclose(f);
	return n;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct info {
	union ibv_gid gid;
};

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp **qp;
	uint8_t *buf;
	int n;
};

static int to_rts(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 14; /* 1.92 ms */
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 20; /* 4 s: a loaded machine answers late */
	a.retry_cnt = 7;
	a.rnr_retry = 7; /* RNR: retried until a receive comes */
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC) ?
		       -1 :
		       0;
}

/* Device, PD, one CQ for all, the buffer, n QPs; 0 or an exit code. */
static int end_open(struct end *e, int n, const char *who)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 2,
						.max_recv_wr = 2,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };

	e->n = n;
	e->ctx = devs && devs[0] ? ibv_open_device(devs[0]) : NULL;
	ibv_free_device_list(devs);
	e->buf = calloc((size_t)n, SLOT);
	e->qp = calloc((size_t)n, sizeof(*e->qp));
	if (!e->ctx || !e->buf || !e->qp)
		return 2;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 2 * n + 16, NULL, NULL, 0);
	e->mr = e->pd ? ibv_reg_mr(e->pd, e->buf, (size_t)n * SLOT,
				   IBV_ACCESS_LOCAL_WRITE) :
			NULL;
	if (!e->cq || !e->mr)
		return 2;
	ia.send_cq = ia.recv_cq = e->cq;
	for (int i = 0; i < n; i++) {
		e->qp[i] = ibv_create_qp(e->pd, &ia);
		if (!e->qp[i]) {
			fprintf(stderr, "%s: create QP %d: %s\n", who, i,
				strerror(errno));
			return 1;
		}
	}
	return 0;
}

static void end_close(struct end *e)
{
	for (int i = 0; i < e->n; i++)
		ibv_destroy_qp(e->qp[i]);
	ibv_dereg_mr(e->mr);
	ibv_destroy_cq(e->cq);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	free(e->qp);
	free(e->buf);
}

/* Exchanges QP numbers and GIDs through s and connects every QP. */
static int end_connect(struct end *e, int s, const char *who)
{
	uint32_t *mine = calloc((size_t)e->n, 4), *theirs;
	struct info me = { 0 }, peer;
	int rc = 0;

	theirs = calloc((size_t)e->n, 4);
	if (!mine || !theirs || ibv_query_gid(e->ctx, 1, 0, &me.gid))
		rc = 2;
	for (int i = 0; !rc && i < e->n; i++)
		mine[i] = e->qp[i]->qp_num;
	if (!rc && (xfer(s, &me, sizeof(me), true) ||
		    xfer(s, &peer, sizeof(peer), false) ||
		    xfer(s, mine, (size_t)e->n * 4, true) ||
		    xfer(s, theirs, (size_t)e->n * 4, false)))
		rc = 2;
	for (int i = 0; !rc && i < e->n; i++)
		if (to_rts(e->qp[i], theirs[i], &peer.gid)) {
			fprintf(stderr, "%s: QP %d to RTS: %s\n", who, i,
				strerror(errno));
			rc = 1;
		}
	free(mine);
	free(theirs);
	return rc;
}

static int post_recv_on(struct end *e, int i)
{
	struct ibv_sge sge = { (uintptr_t)e->buf + (size_t)i * SLOT, SLOT,
			       e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)i,
				  .sg_list = &sge,
				  .num_sge = 1 },
			   *bad;

	return ibv_post_recv(e->qp[i], &wr, &bad);
}

/*
 * Polls (ibv_poll_cq only) until want completions came, each successful
 * and of a QP for which expect(i) holds, marked in seen[]; 0 or 1.
 */
static int poll_n(struct end *e, int want, bool (*expect)(int i, int s), int s,
		  bool *seen, const char *who)
{
	double end = now_s() + WAIT_S;
	int got = 0;

	while (got < want) {
		struct ibv_wc wc[16];
		int k = ibv_poll_cq(e->cq, 16, wc);

		if (k < 0)
			return 1;
		for (int j = 0; j < k; j++) {
			int i = (int)wc[j].wr_id;

			if (wc[j].status != IBV_WC_SUCCESS || i < 0 ||
			    i >= e->n || seen[i] || !expect(i, s)) {
				fprintf(stderr, "%s: QP %d: %s%s\n", who, i,
					ibv_wc_status_str(wc[j].status),
					i >= 0 && i < e->n && seen[i] ?
						" (twice)" :
						"");
				return 1;
			}
			seen[i] = true;
		}
		got += k;
		if (!k && now_s() > end) {
			fprintf(stderr,
				"%s: %d of %d completions after %d s: "
				"stalled send queues were not retried\n",
				who, got, want, WAIT_S);
			return 1;
		}
	}
	return 0;
}

static bool stalled(int i, int s)
{
	return i % s == s - 1;
}

static bool flowing(int i, int s)
{
	return !stalled(i, s);
}

static bool any(int i, int s)
{
	(void)i;
	(void)s;
	return true;
}

/* The initiator: a SEND of one byte (its QP's index) on every QP. */
static int initiator(struct end *e, int sock, int s, int maps0)
{
	bool *seen = calloc((size_t)e->n, 1);
	int nstalled = 0, maps;

	if (!seen || barrier(sock)) /* the target's receives are posted */
		return 2;
	for (int i = 0; i < e->n; i++) {
		struct ibv_sge sge = { (uintptr_t)e->buf + (size_t)i * SLOT, 1,
				       e->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		e->buf[(size_t)i * SLOT] = (uint8_t)(i * 7 + 1);
		nstalled += stalled(i, s);
		if (ibv_post_send(e->qp[i], &wr, &bad))
			return 1;
	}
	/* those with a receive complete; the others are stalled (RNR) */
	if (poll_n(e, e->n - nstalled, flowing, s, seen, "initiator"))
		return 1;
	maps = cq_maps();
	printf("initiator: %d QPs, %d stalled; CQ segments mapped: %d more "
	       "than before connecting\n",
	       e->n, nstalled, maps - maps0);
	fflush(stdout);
	if (maps < 0 || maps - maps0 > 2) {
		fprintf(stderr, "initiator: the peer's CQ mapped %d times\n",
			maps - maps0);
		return 1;
	}
	if (barrier(sock) || barrier(sock)) /* the target posts the rest */
		return 2;
	if (poll_n(e, nstalled, stalled, s, seen, "initiator"))
		return 1;
	free(seen);
	return 0;
}

/* The target: a receive on every QP but every s-th, the rest later; each
 * QP's buffer must hold its initiator QP's byte. */
static int target(struct end *e, int sock, int s)
{
	bool *seen = calloc((size_t)e->n, 1);

	if (!seen)
		return 2;
	for (int i = 0; i < e->n; i++)
		if (!stalled(i, s) && post_recv_on(e, i))
			return 1;
	if (barrier(sock)) /* the initiator sends */
		return 2;
	if (barrier(sock)) /* the initiator saw its flowing SENDs complete */
		return 2;
	for (int i = 0; i < e->n; i++)
		if (stalled(i, s) && post_recv_on(e, i))
			return 1;
	if (barrier(sock))
		return 2;
	if (poll_n(e, e->n, any, s, seen, "target"))
		return 1;
	for (int i = 0; i < e->n; i++)
		if (e->buf[(size_t)i * SLOT] != (uint8_t)(i * 7 + 1)) {
			fprintf(stderr, "target: QP %d received %u\n", i,
				e->buf[(size_t)i * SLOT]);
			return 1;
		}
	free(seen);
	return 0;
}

static int side(int sock, int n, int s, bool init)
{
	const char *who = init ? "initiator" : "target";
	struct end e = { 0 };
	int maps0 = cq_maps();
	int rc = end_open(&e, n, who);

	if (!rc)
		rc = end_connect(&e, sock, who);
	if (!rc)
		rc = init ? initiator(&e, sock, s, maps0) : target(&e, sock, s);
	if (!rc && barrier(sock)) /* both done before either tears down */
		rc = 2;
	if (!rc)
		end_close(&e);
	return rc;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 512;
	int s = argc > 2 ? atoi(argv[2]) : 16;
	int sv[2], st, rc;
	pid_t pid;

	if (n < 1 || s < 1)
		return 2;
	alarm(4 * WAIT_S); /* a side stuck (its peer failed) fails */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 2;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(side(sv[1], n, s, false));
	}
	close(sv[1]);
	rc = side(sv[0], n, s, true);
	close(sv[0]);
	if (rc)
		kill(pid, SIGKILL); /* it may wait for us */
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return rc ? rc : 2;
	if (rc || WEXITSTATUS(st)) {
		printf("FAIL\n");
		return 1;
	}
	printf("PASS\n");
	return 0;
}
