// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the whole TCP receive path, as a hostile peer
 * reaches it: each input is one connection to the host-wide listener of a
 * process whose QPs wait for their peer over TCP, or one a QP of ours
 * dialed. The library's own threads receive it: the listener, the HELLO
 * checks, the hand-off to the process that owns the QPN, the parser
 * (staged and direct receives), the responder (SEND, WRITE, READ, atomics,
 * NAKs, RNR) and, since the QP has requests of its own in flight, the
 * requester's side (ACKs, READ and atomic responses, NAKs, RNR NAKs and
 * the rewind they cause).
 *
 * The input is structure-aware unless its first byte is 0xff (then the
 * rest is sent raw). Structure-aware (tcp_seeds.py writes seeds), it
 * chooses:
 *   byte 0: the QP (bits 0-1: RC with its own RQ, RC on an SRQ, UC, or an
 *           RC QP of a second process: the HELLO is handed off to it);
 *           4: PSNs are coherent (requests numbered in sequence from the
 *           QP's rq_psn, answers from its sq_psn, lengths matching ours);
 *           8, 16: the QP is in INIT, ERR when the HELLO comes (and
 *           reaches RTS while the connection waits); 32: a BYE ends the
 *           stream; 64: our end stays open;
 *   byte 1: receive WQEs to post (bits 0-3), 16: the QP is destroyed with
 *           the connection open, 32: the QP dials us instead (the next
 *           byte says how its HELLO is answered: yes, ENOENT, EACCES, not
 *           a HELLO_ACK, closed);
 *   then the HELLO (right, another QPN, another peer or GID, a wrong
 *   proof: an rq_psn that is not our sq_psn, a request instead), our requests (READ, WRITE, SEND, atomics, more than
 *   max_rd_atomic, some from memory not registered), and frames with
 *   valid magic and version and mutated opcodes, flags, PSNs, lengths,
 *   keys, addresses and payloads (the QP's real rkey and buffer among the
 *   choices; 1 KiB and more land with recv straight in the MR; READs of
 *   200 KB fill the socket).
 * After 200 inputs, 40 connections from another address say nothing: the
 * per-source limit refuses those past 16 (in each of the two processes the
 * kernel spreads them over), the HELLO deadline closes the rest.
 * The second process runs short of fds. At exit the QPs and the device
 * close. ASan and UBSan watch (the second process too: its death aborts
 * us); the library must not crash, leak or hang.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "transport/tcp/srn_wire_proto.h"

#include "fuzz_in.h"

#define BUF_LEN (256 << 10) /* READs of more than one send chunk */
#define PEER_QPN 1 /* smaller than ours: the peer dials, we accept */
#define NQP 3 /* RC, RC on the SRQ, UC */
#define Q_SRQ 1
#define Q_UC 2
#define NRECV 8
#define RECV_TAG 0x1000u /* wr_id of receives: | the QP's index */
#define MAX_OURS 6 /* more READs than max_rd_atomic: a credit stall */

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp[NQP];
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	uint16_t port;
	unsigned srq_posted;
	pid_t child;
	uint32_t child_qpn;
	struct ibv_qp *dq; /* dials its peer (a larger GID): the harness */
	union ibv_gid dgid; /* the harness's address, 127.0.0.2 */
	int lfd; /* where dq dials */
} F;

static int to_state(struct ibv_qp *qp, enum ibv_qp_state last)
{
	bool uc = qp->qp_type == IBV_QPT_UC;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	ibv_modify_qp(qp, &a, IBV_QP_STATE);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags =
		IBV_ACCESS_REMOTE_WRITE |
		(uc ? 0 : IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	if (last == IBV_QPS_INIT)
		return 0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = PEER_QPN;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = qp == F.dq ? F.dgid : F.gid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  (uc ? 0 :
					IBV_QP_MAX_DEST_RD_ATOMIC |
						   IBV_QP_MIN_RNR_TIMER)))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 1; /* requests of ours time out fast */
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN |
				  (uc ? 0 :
					IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						   IBV_QP_RNR_RETRY |
						   IBV_QP_MAX_QP_RD_ATOMIC)))
		return -1;
	if (last == IBV_QPS_ERR) {
		a.qp_state = IBV_QPS_ERR;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE);
	}
	return 0;
}

/* A receive WQE of one or two SGEs (4 KiB in all) for qp (or the SRQ). */
static void post_recv(struct ibv_qp *qp, unsigned k)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)F.buf + 32768 + 4096 * (k % 8), 1024, F.mr->lkey },
		{ (uintptr_t)F.buf + 32768 + 4096 * (k % 8) + 1024, 3072,
		  F.mr->lkey },
	};
	bool srq = qp == F.qp[Q_SRQ];
	struct ibv_recv_wr wr = { .wr_id = RECV_TAG | srq,
				  .sg_list = sge,
				  .num_sge = k & 1 ? 2 : 1 },
			   *bad;

	if (k % 4 == 3)
		sge[0].length = 0; /* an empty SGE */
	if (k == 4)
		sge[0].lkey ^= 0x100; /* not a key of ours */
	if (srq && F.srq_posted < NRECV && !ibv_post_srq_recv(F.srq, &wr, &bad))
		F.srq_posted++;
	if (!srq)
		ibv_post_recv(qp, &wr, &bad);
}

/* Receives: WQEs that completed leave the SRQ. */
static void poll_all(void)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(F.cq, 16, wc)) > 0)
		for (int i = 0; i < n; i++)
			if (wc[i].wr_id == (RECV_TAG | 1) && F.srq_posted)
				F.srq_posted--;
}

static int open_device(void)
{
	struct ibv_qp_init_attr qa = { .cap = { 16, NRECV, 2, 2, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_srq_init_attr sa = { .attr = { NRECV, 2, 0 } };
	struct ibv_device **l = ibv_get_device_list(NULL);

	F.ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (l)
		ibv_free_device_list(l);
	if (!F.ctx)
		return -1;
	ibv_query_gid(F.ctx, 1, 0, &F.gid);
	F.pd = ibv_alloc_pd(F.ctx);
	F.cq = ibv_create_cq(F.ctx, 512, NULL, NULL, 0);
	F.srq = F.pd ? ibv_create_srq(F.pd, &sa) : NULL;
	F.buf = aligned_alloc(4096, BUF_LEN);
	F.mr = ibv_reg_mr(F.pd, F.buf, BUF_LEN,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ |
				  IBV_ACCESS_REMOTE_ATOMIC);
	if (!F.mr || !F.srq)
		return -1;
	qa.send_cq = qa.recv_cq = F.cq;
	for (unsigned i = 0; i < NQP; i++) {
		qa.srq = i == Q_SRQ ? F.srq : NULL;
		qa.qp_type = i == Q_UC ? IBV_QPT_UC : IBV_QPT_RC;
		F.qp[i] = ibv_create_qp(F.pd, &qa);
		if (!F.qp[i] || to_state(F.qp[i], IBV_QPS_RTS))
			return -1;
	}
	qa.srq = NULL;
	qa.qp_type = IBV_QPT_RC;
	F.dq = ibv_create_qp(F.pd, &qa);
	return F.dq ? 0 : -1;
}

/* clang's coverage runtime, when it is linked in (scripts/fuzz-coverage.sh) */
int __llvm_profile_write_file(void) __attribute__((weak));
void __llvm_profile_set_filename(const char *name) __attribute__((weak));

/* The second process has a few fds to spare: the idle connections
 * (idle_conns) the kernel gives its listener use them up until their HELLO
 * deadline (the spare fd refuses the rest, then accepting pauses). */
static void few_fds(void)
{
	struct rlimit r;
	int n = 0;
	DIR *d = opendir("/proc/self/fd");

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	if (!getrlimit(RLIMIT_NOFILE, &r)) {
		r.rlim_cur = (rlim_t)n + 6;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

/* The second process: one RC QP that HELLOs for its QPN are handed off
 * to (by whichever process the kernel gave the connection), kept in RTS
 * with receives posted, until our end of the pipe closes. */
static void child_main(int wfd, int rfd)
{
	struct pollfd p = { .fd = rfd, .events = POLLIN };
	struct ibv_wc wc[16];
	uint32_t qpn;

	setenv("SOFTRNIC_BIND", "not-an-address", 1); /* ignored */
	if (open_device())
		_exit(1);
	qpn = F.qp[0]->qp_num;
	few_fds();
	if (write(wfd, &qpn, sizeof(qpn)) != sizeof(qpn))
		_exit(1);
	close(wfd);
	while (poll(&p, 1, 20) == 0) {
		while (ibv_poll_cq(F.cq, 16, wc) > 0)
			;
		if (F.qp[0]->state != IBV_QPS_RTS)
			to_state(F.qp[0], IBV_QPS_RTS);
		for (unsigned k = 0; k < 2; k++)
			post_recv(F.qp[0], k);
	}
	/* the parent is gone: the coverage profile, if any, then out
	 * (exit would run libFuzzer's handler for a target that exits) */
	if (__llvm_profile_write_file && getenv("LLVM_PROFILE_FILE")) {
		char name[4096];

		snprintf(name, sizeof(name), "%s-child.profraw",
			 getenv("LLVM_PROFILE_FILE"));
		__llvm_profile_set_filename(name);
		__llvm_profile_write_file();
	}
	_exit(0);
}

static int start_child(void)
{
	int up[2], down[2];

	if (pipe(up) || pipe(down))
		return -1;
	F.child = fork();
	if (F.child < 0)
		return -1;
	if (!F.child) {
		close(up[0]);
		close(down[1]);
		child_main(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]); /* down[1] stays open while we live */
	if (read(up[0], &F.child_qpn, 4) != 4)
		return -1;
	close(up[0]);
	return 0;
}

/* Connections that never say HELLO, from another address: those past 16
 * in a process are over the per-source limit, the others meet the HELLO
 * deadline. */
static void idle_conns(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(F.port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) },
			   me = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(0x7f000002) };

	for (int i = 0; i < 40; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd >= 0 &&
		    (bind(fd, (struct sockaddr *)&me, sizeof(me)) ||
		     connect(fd, (struct sockaddr *)&sa, sizeof(sa))))
			close(fd); /* left open on purpose otherwise */
	}
}

/* Where dq dials: 127.0.0.2, our port (the library listens on
 * 127.0.0.1 only). */
static int listen_dialed(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(F.port),
				  .sin_addr.s_addr = htonl(0x7f000002) };

	F.dgid = F.gid;
	memcpy(F.dgid.raw + 12, &sa.sin_addr.s_addr, 4);
	F.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (F.lfd < 0 || bind(F.lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(F.lfd, 16))
		return -1;
	return 0;
}

/* At exit: the QPs go with links still open, then the device (the
 * listener stops). */
static void teardown(void)
{
	for (unsigned i = 0; i < NQP; i++)
		ibv_destroy_qp(F.qp[i]);
	ibv_destroy_qp(F.dq);
	ibv_destroy_srq(F.srq);
	ibv_dereg_mr(F.mr);
	ibv_destroy_cq(F.cq);
	ibv_dealloc_pd(F.pd);
	ibv_close_device(F.ctx);
}

static int setup(void)
{
	char p[8];

	setenv("SOFTRNIC_TRANSPORT", "tcp", 1);
	setenv("SOFTRNIC_IP", "127.0.0.1", 1);
	setenv("SOFTRNIC_LOG", "0", 1);
	setenv("SOFTRNIC_BIND", "127.0.0.1", 1);
	F.port = (uint16_t)(20000 + getpid() % 20000);
	snprintf(p, sizeof(p), "%u", F.port);
	setenv("SOFTRNIC_PORT", p, 1);
	if (start_child() || open_device())
		return -1;
	atexit(teardown);
	return listen_dialed();
}

/* What the generator knows of the stream so far. */
struct gen {
	bool coherent;
	uint32_t req_psn; /* the peer's next request */
	uint32_t ans_psn; /* our next request to answer */
	unsigned nours;
	uint32_t ours_len[MAX_OURS];
};

static bool is_request(unsigned op)
{
	return op == SRN_WOP_SEND || op == SRN_WOP_WRITE ||
	       op == SRN_WOP_READ_REQ || op == SRN_WOP_ATOMIC;
}

static uint32_t frame_len(struct in *in, struct gen *g, unsigned op,
			  uint32_t lsel)
{
	static const uint32_t big[] = { 1024, 2048, 4096, 4097, 8192, 200000 };

	switch (lsel & 3) {
	case 0:
		return take(in, 1) % 64;
	case 1:
		return take(in, 2) % 16384;
	case 2:
		return big[take(in, 1) % 6];
	default: /* the right length for the opcode */
		if (op == SRN_WOP_HELLO)
			return sizeof(struct srn_wire_hello);
		if (op == SRN_WOP_ATOMIC)
			return sizeof(struct srn_wire_atomic);
		if (op == SRN_WOP_ATOMIC_RESP)
			return 8;
		if (op == SRN_WOP_READ_RESP && g->ans_psn < g->nours)
			return g->ours_len[g->ans_psn];
		return 0;
	}
}

/* One frame from the input: a header with chosen fields and a payload. */
static size_t frame(struct in *in, struct gen *g, uint8_t *out, size_t room)
{
	struct srn_wire_hdr h = { .magic = SRN_WIRE_MAGIC,
				  .version = SRN_WIRE_VERSION };
	uint32_t sel = take(in, 1), lsel = take(in, 1), len, pay;

	h.opcode = (uint8_t)(take(in, 1) % (SRN_WOP_NR + 1));
	h.flags = (uint16_t)(take(in, 1) & 0x1f);
	h.psn = take(in, 1) & 0x0f; /* near the start: in sequence often */
	if (g->coherent && !(lsel & 0x80) && is_request(h.opcode))
		h.psn = g->req_psn++;
	else if (g->coherent && !(lsel & 0x80) && !is_request(h.opcode))
		h.psn = g->ans_psn;
	h.aux = take(in, 1);
	if (h.opcode == SRN_WOP_ACK && !(lsel & 0x40))
		h.aux %= SRN_WS_NR;
	h.rkey = (sel & 1) ? F.mr->rkey : take(in, 4);
	h.raddr = (sel & 2) ? (uintptr_t)F.buf + (take(in, 2) & 0x7ff8) :
			      ((uint64_t)take(in, 4) << 32 | take(in, 4));
	if (h.flags & SRN_WF_ACK)
		h.ack_psn = g->coherent ? g->ans_psn - 1 + (take(in, 1) & 1) :
					  take(in, 1) & 0x0f;
	len = frame_len(in, g, h.opcode, lsel >> 2);
	if (g->coherent && !(lsel & 0x80) && !is_request(h.opcode) &&
	    h.opcode >= SRN_WOP_ACK && h.opcode <= SRN_WOP_ATOMIC_RESP)
		g->ans_psn++;
	if (sel & 16)
		h.srqn = take(in, 1); /* mostly 0, sometimes not */
	h.len = len;
	/* the payload the header announces (READ_REQ and ACK: none),
	 * unless the input asks for the bytes anyway */
	pay = (h.opcode == SRN_WOP_READ_REQ || h.opcode == SRN_WOP_ACK) &&
			      !(sel & 32) ?
		      0 :
		      len;
	if (sizeof(h) + pay > room)
		return 0;
	memcpy(out, &h, sizeof(h));
	for (uint32_t i = 0; i < pay; i++)
		out[sizeof(h) + i] = (uint8_t)take(in, 1);
	return sizeof(h) + pay;
}

/* A valid HELLO from the QP's peer, or one for another QPN, as chosen. */
static size_t hello(struct in *in, uint8_t *out, uint32_t qpn)
{
	struct srn_wire_hdr h = { .magic = SRN_WIRE_MAGIC,
				  .version = SRN_WIRE_VERSION,
				  .opcode = SRN_WOP_HELLO,
				  .len = sizeof(struct srn_wire_hello) };
	struct srn_wire_hello hl = { .src_qpn = PEER_QPN, .dst_qpn = qpn };
	uint32_t sel = take(in, 1);

	memcpy(hl.src_gid, F.gid.raw, 16);
	if (sel == 1)
		hl.dst_qpn ^= 1 + take(in, 1); /* not ours: the hand-off */
	if (sel == 2)
		hl.src_qpn = take(in, 3); /* not the peer: refused */
	if (sel == 3)
		hl.src_gid[15] ^= 1; /* another GID: refused */
	if (sel == 4)
		h.opcode = SRN_WOP_SEND; /* a request before any HELLO */
	if (sel == 5) /* our sq_psn is 0: a wrong proof, refused at RTS */
		hl.rq_psn = 1 + take(in, 2);
	memcpy(out, &h, sizeof(h));
	memcpy(out + sizeof(h), &hl, sizeof(hl));
	return sizeof(h) + sizeof(hl);
}

/* Requests of our own, so that the stream's answers have something to
 * answer: WRITE, READ (small, or large enough to land straight in our
 * buffer), SEND, atomics, as the input says. */
static void post_ours(struct in *in, struct ibv_qp *qp, struct gen *g)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_READ,
		IBV_WR_SEND,
		IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_RDMA_READ,
		IBV_WR_SEND_WITH_IMM,
		IBV_WR_SEND_WITH_INV,
		IBV_WR_SEND,
	};
	uint32_t n = take(in, 1) % (MAX_OURS + 1);

	g->nours = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = take(in, 1) % 10;
		struct ibv_sge sge = { (uintptr_t)F.buf + 16384 * (i & 1), 64,
				       F.mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = ops[k],
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		if (qp->qp_type == IBV_QPT_UC && k != 0 && k != 2)
			wr.opcode = IBV_WR_RDMA_WRITE;
		if (k == 8)
			wr.invalidate_rkey = 0x1234;
		if (k == 9) { /* solicited, from memory not registered */
			wr.send_flags |= IBV_SEND_SOLICITED;
			sge.lkey ^= 0x100;
		}
		if (wr.opcode == IBV_WR_RDMA_READ && k == 6)
			sge.length = 4096; /* straight into our buffer */
		if (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			sge.length = 8;
			wr.wr.atomic.remote_addr = 0x1000;
			wr.wr.atomic.rkey = 7;
		} else {
			wr.wr.rdma.remote_addr = 0x1000;
			wr.wr.rdma.rkey = 7;
		}
		if (ibv_post_send(qp, &wr, &bad))
			break;
		g->ours_len[g->nours++] = sge.length;
	}
}

static int dial(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(F.port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	int one = 1;

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	/* no Nagle: nothing waits for a delayed ACK */
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Reads what the library sends for up to ms of silence. */
static void drain(int fd, int ms)
{
	uint8_t junk[4096];
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (poll(&p, 1, ms) == 1 && recv(fd, junk, sizeof(junk), 0) > 0)
		;
}

/* Reads n bytes (a HELLO, its answer), or what comes in ms. */
static void read_some(int fd, size_t n, int ms)
{
	uint8_t buf[64];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;
	ssize_t k;

	while (got < n && poll(&p, 1, ms) == 1 &&
	       (k = recv(fd, buf, n - got < sizeof(buf) ? n - got : sizeof(buf),
			 0)) > 0)
		got += (size_t)k;
}

/* The harness as the peer dq dials: accepts, reads its HELLO, answers
 * as told (0-3: yes; 4: ENOENT; 5: EACCES, it tries again; 6: not a
 * HELLO_ACK; 7: closes, it tries again). */
struct answerer {
	unsigned how;
	int fd; /* the connection dq took */
};

static void *answer_dial(void *arg)
{
	struct answerer *a = arg;
	struct pollfd p = { .fd = F.lfd, .events = POLLIN };

	for (int i = 0; i < 5 && a->fd < 0; i++) {
		struct srn_wire_hdr h = { .magic = SRN_WIRE_MAGIC,
					  .version = SRN_WIRE_VERSION,
					  .opcode = SRN_WOP_HELLO_ACK };
		int fd;

		if (poll(&p, 1, 1000) != 1)
			break;
		fd = accept4(F.lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			break;
		read_some(fd, sizeof(h) + sizeof(struct srn_wire_hello), 200);
		h.aux = a->how == 4 ? ENOENT : a->how == 5 ? EACCES : 0;
		if (a->how == 6)
			h.opcode = SRN_WOP_ACK;
		if (a->how != 7)
			send(fd, &h, sizeof(h), MSG_NOSIGNAL);
		if (a->how < 4) {
			a->fd = fd;
			break;
		}
		close(fd);
		if (a->how == 4 || a->how == 6)
			break; /* it does not try again */
	}
	return NULL;
}

/* dq reaches RTS: it dials the harness, which answers as the input says.
 * The connection, or -1. */
static int connect_dialed(struct in *in)
{
	struct answerer a = { .how = take(in, 1) % 8, .fd = -1 };
	pthread_t t;

	if (pthread_create(&t, NULL, answer_dial, &a))
		return -1;
	to_state(F.dq, IBV_QPS_RTS);
	pthread_join(t, NULL);
	return a.fd;
}

/* The QP goes, with the connection still open (its peer sees BYE), and a
 * new one takes its place. */
static void recreate(struct ibv_qp **qp)
{
	struct ibv_qp_init_attr qa = { .cap = { 16, NRECV, 2, 2, 0 },
				       .send_cq = F.cq,
				       .recv_cq = F.cq,
				       .qp_type = (*qp)->qp_type };

	if (*qp == F.qp[Q_SRQ])
		qa.srq = F.srq;
	if (ibv_destroy_qp(*qp))
		abort();
	*qp = ibv_create_qp(F.pd, &qa);
	if (!*qp)
		abort();
	if (*qp != F.dq)
		to_state(*qp, IBV_QPS_RTS);
}

static struct ibv_qp **qp_slot(uint32_t mode, uint32_t b1)
{
	if (b1 & 32)
		return &F.dq;
	return &F.qp[(mode & 3) == 3 ? 0 : mode & 3];
}

/* The raw bytes after nothing, to a new connection. */
static void raw(const uint8_t *data, size_t size)
{
	int fd = dial();

	if (fd < 0)
		return;
	if (send(fd, data, size, MSG_NOSIGNAL) >= 0)
		shutdown(fd, SHUT_WR);
	drain(fd, 5);
	close(fd);
}

static size_t frames(struct in *in, struct gen *g, uint8_t *out, size_t room,
		     bool bye)
{
	struct srn_wire_hdr h = { .magic = SRN_WIRE_MAGIC,
				  .version = SRN_WIRE_VERSION,
				  .opcode = SRN_WOP_BYE };
	size_t n = 0, k;

	while (in->n && (k = frame(in, g, out + n, room - n - sizeof(h))))
		n += k;
	if (bye) { /* an orderly end */
		memcpy(out + n, &h, sizeof(h));
		n += sizeof(h);
	}
	return n;
}

/* The rest of the stream (hlen bytes went), then the end: a QP that
 * goes, one more request of ours, a look at the PSNs, the close. */
static void finish(int fd, uint32_t mode, uint32_t b1, struct ibv_qp **qp,
		   const uint8_t *stream, size_t hlen, size_t n)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	if (n > hlen)
		send(fd, stream + hlen, n - hlen, MSG_NOSIGNAL);
	if (!(mode & 64))
		shutdown(fd, SHUT_WR);
	if ((b1 & 16) && (mode & 3) != 3) /* the QP goes, the link open */
		recreate(qp);
	drain(fd, 5);
	if (!(mode & 24) && !(b1 & 16)) { /* one more of ours, late: the ACK
					    * it carries, or a link the peer
					    * left */
		struct in more = { (const uint8_t *)"\1", 2 };
		struct gen g2 = { 0 };

		post_ours(&more, *qp, &g2);
		drain(fd, 2);
	}
	ibv_query_qp(*qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN,
		     &init);
	close(fd);
}

/* One structure-aware input (see the top of the file). */
static void structured(struct in *in)
{
	static uint8_t stream[1 << 18];
	uint32_t mode = take(in, 1), b1 = take(in, 1);
	struct ibv_qp **qp = qp_slot(mode, b1);
	struct gen g = { .coherent = mode & 4 };
	size_t n, hlen = 0;
	int fd = -1;

	if (b1 & 32) { /* dq dials us */
		mode &= ~24u;
		fd = connect_dialed(in);
	} else { /* every input starts from a QP just taken to RTS (or
		  * INIT, ERR, and to RTS once the HELLO is in) */
		to_state(*qp, (mode & 8)  ? IBV_QPS_INIT :
			      (mode & 16) ? IBV_QPS_ERR :
					    IBV_QPS_RTS);
		hlen = hello(in, stream,
			     (mode & 3) == 3 ? F.child_qpn : (*qp)->qp_num);
	}
	for (uint32_t i = 0; i < (b1 & 15) % (NRECV + 1); i++)
		post_recv(*qp, i);
	if (!(mode & 24))
		post_ours(in, *qp, &g);
	n = hlen +
	    frames(in, &g, stream + hlen, sizeof(stream) - hlen, mode & 32);
	if (!(b1 & 32)) {
		fd = dial();
		if (fd >= 0 &&
		    send(fd, stream, hlen, MSG_NOSIGNAL) == (ssize_t)hlen)
			read_some(fd, sizeof(struct srn_wire_hdr), 100);
		if (mode & 24) /* RTS with the connection waiting */
			to_state(*qp, IBV_QPS_RTS);
	}
	if (fd >= 0)
		finish(fd, mode, b1, qp, stream, hlen, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned runs;
	static int ready;
	struct in in = { data, size };
	int st;

	if (!ready)
		ready = setup() ? -1 : 1;
	if (ready < 0)
		abort(); /* the device did not come up: nothing is tested */
	if (waitpid(F.child, &st, WNOHANG) == F.child)
		abort(); /* the second process died: its report is above */
	if (++runs == 200) /* not earlier: the seeds run undisturbed */
		idle_conns();
	if (size && data[0] == 0xff)
		raw(data + 1, size - 1);
	else
		structured(&in);
	poll_all();
	return 0;
}
