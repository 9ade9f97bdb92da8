// SPDX-License-Identifier: MIT
/*
 * Descriptors per connected QP (docs/architecture.md, "The control
 * path"): two processes connect N RC QP pairs, every QP does one RDMA
 * WRITE to its peer, and each process's open descriptors must have grown
 * by less than K per QP (counted in /proc/self/fd, no timing).
 *
 *   test_qpfds [N [K]]    (default 200 QPs, K 5)
 *
 * Same host over shared memory, a connected QP costs 4: its listening
 * control socket, its connection to the peer QP's and the peer's to it,
 * its own QP segment (kept to be passed again); the peer process's kick
 * eventfd is kept once per process (util/fdshare.c), not once per QP (6
 * before). The peer's CQ, which all its QPs share, is mapped here once
 * (N times before): at most 2 CQ segments are mapped, ours and its. Over TCP a QP costs its control socket, its link and its
 * segment. When RLIMIT_NOFILE's hard limit cannot hold N * 4 + 1024 the
 * test is skipped (exit 77), saying so.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* Mappings of CQ segments here: our CQ's, and a peer CQ's once however
 * many of our QPs reach it (transport/shm/shm_ctl.c, srn_shm_cq_get). */
static int cq_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "memfd:srn-cq") != NULL;
	fclose(f);
	return n;
}

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

/* Both processes got here. */
static int barrier(int s)
{
	char c = 0;

	return xfer(s, &c, 1, true) || xfer(s, &c, 1, false) ? -1 : 0;
}

struct info {
	uint64_t addr;
	uint32_t rkey;
	union ibv_gid gid;
};

static int to_rts(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
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
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC) ?
		       -1 :
		       0;
}

/* One RDMA WRITE on each QP to the peer's buffer; all must succeed. */
static int write_all(struct ibv_qp **qp, int n, struct ibv_cq *cq,
		     struct ibv_mr *mr, const struct info *peer,
		     const char *who)
{
	char *buf = mr->addr;
	int done = 0;

	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)buf + 64, 8, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.wr.rdma.remote_addr = peer->addr + 8 * (uint64_t)(i % 256);
		wr.wr.rdma.rkey = peer->rkey;
		if (ibv_post_send(qp[i], &wr, &bad))
			return 1;
	}
	while (done < n) {
		struct ibv_wc wc[16];
		int got = ibv_poll_cq(cq, 16, wc);

		if (got < 0)
			return 1;
		for (int j = 0; j < got; j++)
			if (wc[j].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "%s: WRITE %d: %s\n", who,
					(int)wc[j].wr_id,
					ibv_wc_status_str(wc[j].status));
				return 1;
			}
		done += got;
	}
	return 0;
}

static int connect_all(struct ibv_qp **qp, int n, const uint32_t *theirs,
		       const union ibv_gid *gid, const char *who)
{
	for (int i = 0; i < n; i++)
		if (to_rts(qp[i], theirs[i], gid)) {
			fprintf(stderr, "%s: QP %d to RTS: %s\n", who, i,
				strerror(errno));
			return 1;
		}
	return 0;
}

/* n RC QPs on pd, their numbers in mine[]; 0, or 1 (said on stderr). */
static int create_qps(struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
		      struct ibv_qp **qp, uint32_t *mine, int n,
		      const char *who)
{
	for (int i = 0; i < n; i++) {
		qp[i] = ibv_create_qp(pd, ia);
		if (!qp[i]) {
			fprintf(stderr, "%s: create QP %d: %s\n", who, i,
				strerror(errno));
			return 1;
		}
		mine[i] = qp[i]->qp_num;
	}
	return 0;
}

static void destroy_qps(struct ibv_qp **qp, int n)
{
	for (int i = 0; i < n; i++)
		ibv_destroy_qp(qp[i]);
	free(qp);
}

/* The counts once connected: 1 when over the limits. */
static int counted(const char *who, int n, int k, int before)
{
	int after = fd_count(), cqm = cq_maps();

	printf("%s: %d QPs connected, fds %d -> %d: %.2f per QP (limit %d); "
	       "CQ segments mapped %d (limit 2)\n",
	       who, n, before, after, (double)(after - before) / n, k, cqm);
	fflush(stdout);
	return after - before < k * n && cqm <= 2 ? 0 : 1;
}

/* One side: N QPs, connected to the other's, one WRITE each. */
static int side(int s, int n, int k, const char *who)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx = devs && devs[0] ? ibv_open_device(devs[0]) :
						    NULL;
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 2,
						.max_recv_wr = 1,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp **qp = calloc((size_t)n, sizeof(*qp));
	uint32_t *mine = calloc((size_t)n, 4), *theirs = calloc((size_t)n, 4);
	static char buf[4096];
	struct info me = { 0 }, peer;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	int before, bad;

	if (!ctx || !qp || !mine || !theirs)
		return 2;
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, n + 16, NULL, NULL, 0);
	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!pd || !cq || !mr || ibv_query_gid(ctx, 1, 0, &me.gid))
		return 2;
	me.addr = (uintptr_t)buf;
	me.rkey = mr->rkey;
	ia.send_cq = ia.recv_cq = cq;
	before = fd_count();
	if (create_qps(pd, &ia, qp, mine, n, who))
		return 1;
	if (xfer(s, &me, sizeof(me), true) || xfer(s, &peer, sizeof(peer), 0) ||
	    xfer(s, mine, (size_t)n * 4, true) ||
	    xfer(s, theirs, (size_t)n * 4, false))
		return 2;
	if (connect_all(qp, n, theirs, &peer.gid, who) || barrier(s))
		return 1;
	/* both sides done before either counts (a peer's connection to us
	 * may still be answered while we poll) and before either tears
	 * down */
	if (write_all(qp, n, cq, mr, &peer, who) || barrier(s))
		return 1;
	bad = counted(who, n, k, before);
	if (barrier(s))
		return 2;
	destroy_qps(qp, n);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	free(mine);
	free(theirs);
	return barrier(s) ? 2 : bad;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	int k = argc > 2 ? atoi(argv[2]) : 5;
	struct rlimit rl;
	int sv[2], st, rc;
	pid_t pid;

	/* what the design needs (4 a QP) and a margin for the rest */
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max != RLIM_INFINITY &&
	    rl.rlim_max < (rlim_t)n * 4 + 1024) {
		printf("SKIP: the hard fd limit %llu cannot hold %d QPs at 4 "
		       "fds each\n",
		       (unsigned long long)rl.rlim_max, n);
		return 77;
	}
	alarm(100); /* a side stuck (its peer failed) fails, not hangs */
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 2;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(side(sv[1], n, k, "child"));
	}
	close(sv[1]);
	rc = side(sv[0], n, k, "parent");
	close(sv[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 2;
	if (rc || WEXITSTATUS(st)) {
		printf("FAIL: fds per QP or CQ mappings over the limit (or an "
		       "error)\n");
		return 1;
	}
	printf("PASS\n");
	return 0;
}
