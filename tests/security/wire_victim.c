// SPDX-License-Identifier: MIT
/*
 * A victim QP for tcp_attack.sh whose memory the test can check byte for
 * byte, and its legitimate peer.
 *
 *   wire_victim serve OOBPORT GOFILE [HOLDFILE]
 *   wire_victim alone PEER_IPV4 PEER_QPN PEER_PSN GOFILE
 *   wire_victim client HOST OOBPORT ROUNDS1 GOFILE STOPFILE
 *
 * The victim (serve, alone) registers a 64 KiB MR (REMOTE_WRITE and
 * REMOTE_READ) filled with a known pattern and brings an RC QP to RTS:
 * with the peer a client gave over a TCP socket on OOBPORT (serve), or
 * with the peer given on the command line (alone: nobody legitimate will
 * come). It prints "victim qpn Q rq_psn P sq_psn S rkey K addr A peer_qpn
 * R" and,
 * once the client closed the socket (serve) or at once (alone), "pair
 * done"; then it waits for GOFILE to exist, prints "state NAME" (its QP's
 * state) and "mr intact" if every byte of the MR is what it must be (the
 * pattern; the first 256 bytes the client's last WRITE, if a client came),
 * else "mr changed at OFFSET"; exit 0. If GOFILE.mid appears before
 * GOFILE, it prints "mid state NAME" then. With HOLDFILE (serve), the
 * victim stops at RTR: it says its line, waits for HOLDFILE to exist,
 * prints "hold state NAME", and only then gives the client its
 * attributes (attackers may claim it meanwhile); it stays at RTR while
 * the client runs (a responder, as perftest's servers) and moves to RTS
 * after the client's last word.
 *
 * The client does ROUNDS1 rounds (round r: an RDMA WRITE of 256 bytes of
 * value (r % 250) + 1 to the start of the victim's MR, then a READ of them
 * back, checked), prints "phase1 done", waits for GOFILE, does more
 * rounds until STOPFILE exists (one at least), sends the number of rounds
 * over the socket, destroys its QP, and exits (0: every completion
 * successful and every READ what was written).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define MR_LEN (64 << 10)
#define SLOT 256

struct xinfo {
	uint32_t qpn, psn, rkey, rounds;
	uint64_t addr;
	union ibv_gid gid;
};

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	uint32_t psn;
};

static void fail(const char *what)
{
	fprintf(stderr, "wire_victim: %s failed\n", what);
	exit(1);
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

static uint8_t round_value(uint32_t r)
{
	return (uint8_t)(r % 250 + 1);
}

static void xfer(int fd, void *buf, size_t len, int out)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = out ? write(fd, p, len) : read(fd, p, len);

		if (n <= 0)
			fail("socket");
		p += n;
		len -= (size_t)n;
	}
}

static void end_open(struct end *e)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { .cap = { 4, 4, 1, 1, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	if (!l || !l[0] || !(e->ctx = ibv_open_device(l[0])))
		fail("open device");
	ibv_free_device_list(l);
	e->buf = aligned_alloc(4096, MR_LEN);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	if (!e->buf || !e->pd || !e->cq || ibv_query_gid(e->ctx, 1, 0, &e->gid))
		fail("PD/CQ");
	for (size_t i = 0; i < MR_LEN; i++)
		e->buf[i] = pattern(i);
	e->mr = ibv_reg_mr(e->pd, e->buf, MR_LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ);
	qa.send_cq = qa.recv_cq = e->cq;
	e->qp = e->mr ? ibv_create_qp(e->pd, &qa) : NULL;
	if (!e->qp || ibv_modify_qp(e->qp, &a,
				    IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		fail("QP");
	srand48(getpid());
	e->psn = (uint32_t)lrand48() & 0xffffff;
}

static void end_rtr(struct end *e, const struct xinfo *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qpn,
		.rq_psn = peer->psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1,
			     .port_num = 1,
			     .grh = { .dgid = peer->gid, .hop_limit = 1 } },
	};

	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		fail("RTR");
}

static void end_rts(struct end *e)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS,
				 .timeout = 14,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .sq_psn = e->psn,
				 .max_rd_atomic = 1 };

	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		fail("RTS");
}

static void end_connect(struct end *e, const struct xinfo *peer)
{
	end_rtr(e, peer);
	end_rts(e);
}

static void end_info(const struct end *e, struct xinfo *x)
{
	memset(x, 0, sizeof(*x));
	x->qpn = e->qp->qp_num;
	x->psn = e->psn;
	x->rkey = e->mr->rkey;
	x->addr = (uintptr_t)e->buf;
	x->gid = e->gid;
}

static void wait_file(const char *path)
{
	while (access(path, F_OK))
		usleep(20000);
}

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS",
					     "SQD",   "SQE",  "ERR" };

	return (unsigned)s < 7 ? names[s] : "?";
}

static const char *qp_state_now(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		fail("query QP");
	return state_name(a.qp_state);
}

/* The end of a victim: its QP's state and whether its MR is as it must;
 * also "mid state NAME" when GOFILE.mid appears first. */
static int victim_report(struct end *e, const char *gofile, int rounds)
{
	char mid[4096];
	bool said = false;

	snprintf(mid, sizeof(mid), "%s.mid", gofile);
	while (access(gofile, F_OK)) {
		if (!said && !access(mid, F_OK)) {
			printf("mid state %s\n", qp_state_now(e->qp));
			fflush(stdout);
			said = true;
		}
		usleep(20000);
	}
	printf("state %s\n", qp_state_now(e->qp));
	for (size_t i = 0; i < MR_LEN; i++) {
		uint8_t want = rounds > 0 && i < SLOT ?
				       round_value((uint32_t)rounds - 1) :
				       pattern(i);

		if (e->buf[i] != want) {
			printf("mr changed at %zu (0x%02x, not 0x%02x)\n", i,
			       e->buf[i], want);
			return 0;
		}
	}
	printf("mr intact\n");
	return 0;
}

static void victim_say(const struct end *e, const struct xinfo *peer)
{
	printf("victim qpn 0x%06x rq_psn 0x%06x sq_psn 0x%06x rkey 0x%08x "
	       "addr 0x%llx peer_qpn 0x%06x\n",
	       e->qp->qp_num, peer->psn, e->psn, e->mr->rkey,
	       (unsigned long long)(uintptr_t)e->buf, peer->qpn);
	fflush(stdout);
}

static int oob_listen(const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)atoi(port)) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0), c;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(fd, 1))
		fail("listen");
	c = accept(fd, NULL, NULL);
	if (c < 0)
		fail("accept");
	close(fd);
	return c;
}

static int serve(const char *port, const char *gofile, const char *hold)
{
	struct end e = { 0 };
	struct xinfo me, peer;
	int fd;

	end_open(&e);
	fd = oob_listen(port);
	xfer(fd, &peer, sizeof(peer), 0);
	end_info(&e, &me);
	end_rtr(&e, &peer);
	if (hold) { /* at RTR, the client not told yet: attackers come */
		victim_say(&e, &peer);
		wait_file(hold);
		printf("hold state %s\n", qp_state_now(e.qp));
		fflush(stdout);
	} else {
		end_rts(&e);
	}
	xfer(fd, &me, sizeof(me), 1);
	if (!hold)
		victim_say(&e, &peer);
	xfer(fd, &peer, sizeof(peer), 0); /* the client's last word */
	close(fd);
	if (hold) /* a responder at RTR all along, as perftest's servers */
		end_rts(&e);
	printf("pair done (%u rounds)\n", peer.rounds);
	fflush(stdout);
	return victim_report(&e, gofile, (int)peer.rounds);
}

static int alone(char **argv)
{
	struct end e = { 0 };
	struct xinfo peer = { .qpn = (uint32_t)strtoul(argv[1], NULL, 0),
			      .psn = (uint32_t)strtoul(argv[2], NULL, 0) };
	struct in_addr ip;

	if (!inet_aton(argv[0], &ip))
		fail("PEER_IPV4");
	peer.gid.raw[10] = peer.gid.raw[11] = 0xff;
	memcpy(&peer.gid.raw[12], &ip, 4);
	end_open(&e);
	end_connect(&e, &peer);
	victim_say(&e, &peer);
	printf("pair done (no peer)\n");
	fflush(stdout);
	return victim_report(&e, argv[3], 0);
}

/* One round of the client: WRITE value v to the victim, READ it back. */
static void client_round(struct end *e, const struct xinfo *v, uint32_t r)
{
	struct ibv_sge sge = { (uintptr_t)e->buf, SLOT, e->mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { v->addr, v->rkey },
	}, *bad;
	struct ibv_wc wc;
	int n;

	memset(e->buf, round_value(r), SLOT);
	for (int op = 0; op < 2; op++) {
		if (op) {
			sge.addr += SLOT;
			wr.opcode = IBV_WR_RDMA_READ;
		}
		if (ibv_post_send(e->qp, &wr, &bad))
			fail("post");
		while ((n = ibv_poll_cq(e->cq, 1, &wc)) == 0)
			;
		if (n < 0 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "wire_victim: round %u: status %d\n", r,
				n < 0 ? -1 : (int)wc.status);
			exit(1);
		}
	}
	if (memcmp(e->buf, e->buf + SLOT, SLOT)) {
		fprintf(stderr, "wire_victim: round %u: read back differs\n",
			r);
		exit(1);
	}
}

static int oob_dial(const char *host, const char *port)
{
	struct addrinfo *ai, hints = { .ai_socktype = SOCK_STREAM };
	int fd = -1;

	for (int i = 0; i < 100 && fd < 0; i++) {
		if (getaddrinfo(host, port, &hints, &ai))
			fail("getaddrinfo");
		fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			close(fd);
			fd = -1;
			usleep(100000);
		}
		freeaddrinfo(ai);
	}
	if (fd < 0)
		fail("connect");
	return fd;
}

static int client(char **argv)
{
	uint32_t r1 = (uint32_t)atoi(argv[2]), r = 0;
	struct end e = { 0 };
	struct xinfo me, v;
	int fd;

	end_open(&e);
	fd = oob_dial(argv[0], argv[1]);
	end_info(&e, &me);
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &v, sizeof(v), 0);
	end_connect(&e, &v);
	for (; r < r1; r++)
		client_round(&e, &v, r);
	printf("phase1 done\n");
	fflush(stdout);
	wait_file(argv[3]);
	do
		client_round(&e, &v, r++);
	while (access(argv[4], F_OK));
	me.rounds = r;
	ibv_destroy_qp(e.qp);
	xfer(fd, &me, sizeof(me), 1);
	close(fd);
	printf("client done (%u rounds)\n", r);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "serve"))
		return serve(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (argc == 6 && !strcmp(argv[1], "alone"))
		return alone(argv + 2);
	if (argc == 7 && !strcmp(argv[1], "client"))
		return client(argv + 2);
	fprintf(stderr, "usage: see wire_victim.c\n");
	return 2;
}
