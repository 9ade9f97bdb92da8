// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the whole TCP receive path, as a hostile peer
 * reaches it: each input is one connection to the host-wide listener of a
 * process whose RC QP waits for its peer over TCP. The input is a stream
 * of frames, built from the input bytes (structure-aware: valid magic and
 * version, mutated opcodes, flags, PSNs, lengths, keys, addresses and
 * payloads, the QP's real rkey and buffer among the choices), or raw bytes
 * when the first byte says so. The library's own threads receive it: the
 * listener, the HELLO deadline and checks, the hand-off for QPNs that are
 * not ours, the parser (staged and direct receives), the responder (SEND,
 * WRITE, READ, atomics, NAKs) and, since the QP also has requests of its
 * own in flight, the requester's side (ACKs, READ and atomic responses,
 * RNR NAKs). Between inputs the QP is taken back to RTS if the input broke
 * it. ASan and UBSan watch; the library must not crash, leak or hang.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/srn_wire_proto.h"

#include "fuzz_in.h"

#define BUF_LEN 65536
#define PEER_QPN 1 /* smaller than ours: the peer dials, we accept */

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	uint16_t port;
} F;

static int to_rts(void)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	ibv_modify_qp(F.qp, &a, IBV_QP_STATE);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(F.qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = PEER_QPN;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = F.gid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(F.qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 1; /* requests of ours time out fast */
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(F.qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

static int setup(void)
{
	struct ibv_qp_init_attr qa = { .cap = { 16, 16, 2, 2, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_device **l;

	setenv("SOFTRNIC_TRANSPORT", "tcp", 1);
	setenv("SOFTRNIC_IP", "127.0.0.1", 1);
	setenv("SOFTRNIC_LOG", "0", 1);
	F.port = (uint16_t)(20000 + getpid() % 20000);
	{
		char p[8];

		snprintf(p, sizeof(p), "%u", F.port);
		setenv("SOFTRNIC_PORT", p, 1);
	}
	l = ibv_get_device_list(NULL);
	F.ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (!F.ctx)
		return -1;
	ibv_query_gid(F.ctx, 1, 0, &F.gid);
	F.pd = ibv_alloc_pd(F.ctx);
	F.cq = ibv_create_cq(F.ctx, 256, NULL, NULL, 0);
	F.buf = aligned_alloc(4096, BUF_LEN);
	F.mr = ibv_reg_mr(F.pd, F.buf, BUF_LEN,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ |
				  IBV_ACCESS_REMOTE_ATOMIC);
	qa.send_cq = qa.recv_cq = F.cq;
	F.qp = F.mr ? ibv_create_qp(F.pd, &qa) : NULL;
	return F.qp ? to_rts() : -1;
}

/* One frame from the input: a header with chosen fields and a payload. */
static size_t frame(struct in *in, uint8_t *out, size_t room)
{
	struct srn_wire_hdr h = { .magic = SRN_WIRE_MAGIC,
				  .version = SRN_WIRE_VERSION };
	uint32_t sel = take(in, 1), len;

	h.opcode = (uint8_t)(take(in, 1) % (SRN_WOP_NR + 1));
	h.flags = (uint16_t)(take(in, 1) & 0x1f);
	h.psn = take(in, 1) & 0x0f; /* near the start: in sequence often */
	h.aux = take(in, 1);
	h.rkey = (sel & 1) ? F.mr->rkey : take(in, 4);
	h.raddr = (sel & 2) ? (uintptr_t)F.buf + (take(in, 2) & 0xfff8) :
			      ((uint64_t)take(in, 4) << 32 | take(in, 4));
	if (h.flags & SRN_WF_ACK)
		h.ack_psn = take(in, 1) & 0x0f;
	len = (sel & 4) ? take(in, 2) % 8192 : take(in, 1) % 64;
	if (h.opcode == SRN_WOP_HELLO && (sel & 8))
		len = sizeof(struct srn_wire_hello);
	if (h.opcode == SRN_WOP_ATOMIC && (sel & 8))
		len = sizeof(struct srn_wire_atomic);
	if (sel & 16)
		h.srqn = take(in, 1); /* mostly 0, sometimes not */
	h.len = len;
	if (sizeof(h) + len > room)
		return 0;
	memcpy(out, &h, sizeof(h));
	for (uint32_t i = 0; i < len; i++)
		out[sizeof(h) + i] = (uint8_t)take(in, 1);
	return sizeof(h) + len;
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
	memcpy(out, &h, sizeof(h));
	memcpy(out + sizeof(h), &hl, sizeof(hl));
	return sizeof(h) + sizeof(hl);
}

/* Requests of our own, so that the stream's answers have something to
 * answer. */
static void post_ours(void)
{
	struct ibv_sge sge = { (uintptr_t)F.buf, 64, F.mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge,
				  .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = 0x1000;
	wr.wr.rdma.rkey = 7;
	ibv_post_send(F.qp, &wr, &bad);
	wr.opcode = IBV_WR_RDMA_READ;
	ibv_post_send(F.qp, &wr, &bad);
}

static int dial(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(F.port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
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

/* Sends the HELLO (first hlen bytes of s) and waits for its answer; then,
 * with the link taken, our own requests go out (the rest of the stream
 * answers them as often as not); then the rest, and whatever comes back
 * until the library closes the connection or 5 ms of silence. */
static void exchange(int fd, const uint8_t *s, size_t hlen, size_t n)
{
	if (hlen && send(fd, s, hlen, MSG_NOSIGNAL) < 0)
		return;
	drain(fd, 5);
	post_ours();
	drain(fd, 2);
	if (n > hlen && send(fd, s + hlen, n - hlen, MSG_NOSIGNAL) < 0)
		return;
	shutdown(fd, SHUT_WR);
	drain(fd, 5);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t stream[1 << 17];
	static int ready;
	struct in in = { data, size };
	struct ibv_wc wc[16];
	size_t n = 0, hlen = 0, k;
	int fd;

	if (!ready)
		ready = setup() ? -1 : 1;
	if (ready < 0)
		abort(); /* the device did not come up: nothing is tested */
	if (size && data[0] == 0xff) { /* raw bytes */
		n = size - 1 < sizeof(stream) ? size - 1 : sizeof(stream);
		memcpy(stream, data + 1, n);
	} else {
		n = hlen = hello(&in, stream, F.qp->qp_num);
		while (in.n && (k = frame(&in, stream + n, sizeof(stream) - n)))
			n += k;
	}
	fd = dial();
	if (fd < 0)
		return 0;
	exchange(fd, stream, hlen, n);
	close(fd);
	while (ibv_poll_cq(F.cq, 16, wc) > 0)
		;
	if (F.qp->state != IBV_QPS_RTS)
		to_rts();
	return 0;
}
