// SPDX-License-Identifier: MIT
/*
 * One side of a chaos pair (tests/faults/chaos.py): a verbs program that
 * keeps a record the orchestrator can check after it was stopped, killed
 * or cut off.
 *
 *   chaos_worker server PORT DUMP LOG
 *   chaos_worker client HOST PORT NQP NWR PACE_US LOG
 *
 * The client connects NQP RC QPs to the server's (QP numbers, GID, rkey
 * exchanged over a TCP socket) and posts NWR work requests round-robin
 * over them, at most 32 outstanding, pausing PACE_US every 4: WR i is an
 * RDMA WRITE of a 256-byte pattern of i into slot i of the server's MR, or
 * every 8th a 64-byte SEND carrying i. It logs "P i" before posting WR i
 * and "C i status" for every completion, with write(2), so the log
 * survives a kill -9. It exits 0 when every WR has completed, 2 when none
 * completed for 30 s (a hang), 1 on a setup error.
 *
 * The server logs "R i status" for every SEND received; when the client's
 * socket closes (the client ended or died) or on SIGTERM, it writes its
 * slots to DUMP (via a temporary file and rename, so a kill leaves no
 * partial dump) and exits 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define SLOT 256
#define SEND_LEN 64
#define MAXQP 256
#define WINDOW 32

struct xinfo {
	uint32_t nqp;
	uint32_t nwr;
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
	uint32_t qpn[MAXQP];
};

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[MAXQP];
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	unsigned nqp;
	union ibv_gid gid;
};

static int logfd = -1;
static volatile sig_atomic_t stop;

static void logf_(const char *fmt, ...)
{
	char line[96];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && write(logfd, line, (size_t)n) != n)
		exit(1);
}

static uint8_t pattern(uint32_t i, uint32_t j)
{
	return (uint8_t)(i * 131u + j * 7u + 1u);
}

static int fail(const char *what)
{
	fprintf(stderr, "chaos_worker: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int xfer(int fd, void *buf, size_t len, bool out)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = out ? write(fd, p, len) : read(fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void end_open(struct end *e, unsigned nqp, size_t len, uint32_t nrecv)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = {
		.cap = { WINDOW, nrecv, 1, 1, 0 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	if (!l || !l[0] || !(e->ctx = ibv_open_device(l[0])))
		fail("open device");
	ibv_free_device_list(l);
	e->nqp = nqp;
	e->len = len;
	e->buf = calloc(1, len);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, (int)(4 * WINDOW + nrecv) * (int)nqp,
			      NULL, NULL, 0);
	if (!e->buf || !e->pd || !e->cq || ibv_query_gid(e->ctx, 1, 0, &e->gid))
		fail("PD/CQ");
	e->mr = ibv_reg_mr(e->pd, e->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	qa.send_cq = qa.recv_cq = e->cq;
	for (unsigned q = 0; q < nqp; q++) {
		e->qp[q] = ibv_create_qp(e->pd, &qa);
		if (!e->qp[q] ||
		    ibv_modify_qp(e->qp[q], &a,
				  IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			fail("QP");
	}
	if (!e->mr)
		fail("MR");
}

static void end_connect(struct end *e, const struct xinfo *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1,
			     .port_num = 1,
			     .grh = { .dgid = peer->gid, .hop_limit = 1 } },
	};
	int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

	for (unsigned q = 0; q < e->nqp; q++) {
		a.qp_state = IBV_QPS_RTR;
		a.dest_qp_num = peer->qpn[q];
		if (ibv_modify_qp(e->qp[q], &a,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC |
					  IBV_QP_MIN_RNR_TIMER))
			fail("RTR");
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 12; /* ~17 ms x 4 retries: the 2 s floor rules */
		a.retry_cnt = 3;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		if (ibv_modify_qp(e->qp[q], &a, rts))
			fail("RTS");
	}
}

static void end_info(const struct end *e, struct xinfo *x, uint32_t nwr)
{
	memset(x, 0, sizeof(*x));
	x->nqp = e->nqp;
	x->nwr = nwr;
	x->rkey = e->mr->rkey;
	x->addr = (uintptr_t)e->buf;
	x->gid = e->gid;
	for (unsigned q = 0; q < e->nqp; q++)
		x->qpn[q] = e->qp[q]->qp_num;
}

/* ---- client ---- */

static int post_one(struct end *e, const struct xinfo *srv, uint32_t i)
{
	uint8_t *src = e->buf + (size_t)(i % 1024) * SLOT;
	bool send = i % 8 == 7;
	struct ibv_sge sge = { (uintptr_t)src, send ? SEND_LEN : SLOT,
			       e->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = i, .sg_list = &sge, .num_sge = 1,
		.opcode = send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { srv->addr + (uint64_t)i * SLOT, srv->rkey },
	}, *bad;

	for (uint32_t j = 0; j < SLOT; j++)
		src[j] = pattern(i, j);
	if (send)
		memcpy(src, &i, sizeof(i));
	logf_("P %u\n", i);
	return ibv_post_send(e->qp[i % e->nqp], &wr, &bad);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int client_run(struct end *e, const struct xinfo *srv, uint32_t nwr,
		      unsigned pace_us)
{
	uint32_t posted = 0, done = 0;
	double last = now_s();
	struct ibv_wc wc[16];

	while (done < nwr) {
		while (posted < nwr && posted - done < WINDOW) {
			if (post_one(e, srv, posted)) {
				logf_("E %u post\n", posted);
				return 1; /* refused at post: not accepted */
			}
			if (++posted % 4 == 0 && pace_us)
				usleep(pace_us);
		}
		int n = ibv_poll_cq(e->cq, 16, wc);

		for (int k = 0; k < n; k++)
			logf_("C %llu %d\n", (unsigned long long)wc[k].wr_id,
			      wc[k].status);
		done += n > 0 ? (uint32_t)n : 0;
		if (n > 0)
			last = now_s();
		else if (now_s() - last > 30) {
			logf_("HANG %u %u\n", posted, done);
			return 2;
		} else if (n == 0)
			usleep(100);
	}
	return 0;
}

static int client(const char *host, const char *port, unsigned nqp,
		  uint32_t nwr, unsigned pace_us)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	struct xinfo mine, srv;
	struct end e;
	int fd, rc;

	if (nqp < 1 || nqp > MAXQP || getaddrinfo(host, port, &hints, &ai))
		fail("arguments");
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	for (int t = 0; connect(fd, ai->ai_addr, ai->ai_addrlen); t++) {
		if (t > 100)
			fail("connect");
		usleep(50000);
	}
	freeaddrinfo(ai);
	end_open(&e, nqp, 1024 * SLOT, 1);
	end_info(&e, &mine, nwr);
	if (xfer(fd, &mine, sizeof(mine), true) ||
	    xfer(fd, &srv, sizeof(srv), false))
		fail("exchange");
	end_connect(&e, &srv);
	rc = client_run(&e, &srv, nwr, pace_us);
	close(fd); /* the server dumps its slots now */
	return rc;
}

/* ---- server ---- */

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* Receive WQEs per QP: every SEND of the client can land on one QP. */
static uint32_t recvs_per_qp(const struct xinfo *cli)
{
	return cli->nwr / 8 + 2;
}

static void server_post_recvs(struct end *e, const struct xinfo *cli)
{
	size_t base = (size_t)cli->nwr * SLOT;
	uint32_t per_qp = recvs_per_qp(cli);

	for (unsigned q = 0; q < e->nqp; q++) {
		for (uint32_t r = 0; r < per_qp; r++) {
			size_t off = base + ((size_t)q * per_qp + r) * SEND_LEN;
			struct ibv_sge sge = { (uintptr_t)e->buf + off,
					       SEND_LEN, e->mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = off,
						  .sg_list = &sge,
						  .num_sge = 1 },
					   *bad;

			if (ibv_post_recv(e->qp[q], &wr, &bad))
				fail("post_recv");
		}
	}
}

static void server_dump(const struct end *e, uint32_t nwr, const char *path)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fwrite(e->buf, SLOT, nwr, f) != nwr || fclose(f) ||
	    rename(tmp, path))
		fail("dump");
}

static void server_drain(struct end *e)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(e->cq, 16, wc)) > 0) {
		for (int k = 0; k < n; k++) {
			uint32_t id = UINT32_MAX;

			if (wc[k].status == IBV_WC_SUCCESS)
				memcpy(&id, e->buf + wc[k].wr_id, sizeof(id));
			logf_("R %u %d\n", id, wc[k].status);
		}
	}
}

static int server(const char *port, const char *dump)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)atoi(port)) };
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0), fd;
	struct xinfo cli, mine;
	struct pollfd pf;
	struct end e;

	signal(SIGTERM, on_term);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		fail("listen");
	pf = (struct pollfd){ .fd = ls, .events = POLLIN };
	logf_("S listening\n");
	if (poll(&pf, 1, 30000) != 1) {
		logf_("S no client\n"); /* it was killed before connecting */
		return 0;
	}
	fd = accept(ls, NULL, NULL);
	logf_("S accepted\n");
	if (fd < 0 || xfer(fd, &cli, sizeof(cli), false) || cli.nqp < 1 ||
	    cli.nqp > MAXQP || cli.nwr > 1000000)
		fail("exchange");
	end_open(&e, cli.nqp,
		 (size_t)cli.nwr * SLOT +
			 (size_t)recvs_per_qp(&cli) * cli.nqp * SEND_LEN,
		 recvs_per_qp(&cli));
	end_connect(&e, &cli);
	server_post_recvs(&e, &cli);
	end_info(&e, &mine, cli.nwr);
	if (xfer(fd, &mine, sizeof(mine), true))
		fail("exchange");
	logf_("S up\n");
	pf = (struct pollfd){ .fd = fd, .events = POLLIN };
	while (!stop) {
		server_drain(&e);
		if (poll(&pf, 1, 10) == 1)
			break; /* EOF: the client ended or died */
	}
	server_drain(&e);
	server_dump(&e, cli.nwr, dump);
	logf_("S dumped\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "server")) {
		logfd = open(argv[4], O_WRONLY | O_CREAT | O_APPEND, 0644);
		return logfd < 0 ? fail("log") : server(argv[2], argv[3]);
	}
	if (argc == 8 && !strcmp(argv[1], "client")) {
		logfd = open(argv[7], O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (logfd < 0)
			fail("log");
		return client(argv[2], argv[3], (unsigned)atoi(argv[4]),
			      (uint32_t)atoi(argv[5]), (unsigned)atoi(argv[6]));
	}
	fprintf(stderr, "usage: chaos_worker server PORT DUMP LOG\n"
			"       chaos_worker client HOST PORT NQP NWR PACE_US "
			"LOG\n");
	return 1;
}
