// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the UD datagram receive path between hosts, as a
 * hostile sender reaches it: each input becomes one datagram, sent to the
 * process's UDP socket (port SOFTRNIC_PORT) or to a UD QP's forwarding
 * socket (abstract unix "softrnic/ud/<QPN>"), both served by the
 * library's progress thread: the header check (srn_udw_check), the
 * forward-once rule, the Q_Key and state checks, the receive WQE, the GRH
 * and the CQE. The input is structure-aware (valid magic and version, the
 * QP's own QPN and Q_Key among the choices, mutated opcode, flags,
 * lengths and GID) or raw bytes when its first byte says so. After each
 * datagram a valid one follows on the same socket and the target waits
 * for its completion, so every input has been handled before the next
 * one. ASan and UBSan watch; the library must not crash, leak or hang.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "transport/tcp/srn_udp_proto.h"

#include "fuzz_in.h"

#define NRECV 64
#define RBUF 4200 /* GRH + the MTU, and some */
#define QKEY 0x11111111u
#define MARK 0x4d41524bu /* the sync datagram's imm */

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint16_t port;
	int udp, unx;
} F;

static int post_recv(unsigned i)
{
	struct ibv_sge sge = { (uintptr_t)(F.buf + (size_t)i * RBUF), RBUF,
			       F.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	return ibv_post_recv(F.qp, &wr, &bad);
}

static int to_rts(void)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qkey = QKEY };

	if (ibv_modify_qp(F.qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(F.qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(F.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int open_device(void)
{
	struct ibv_qp_init_attr qa = { .cap = { 4, NRECV, 1, 1, 0 },
				       .qp_type = IBV_QPT_UD };
	struct ibv_device **l = ibv_get_device_list(NULL);

	F.ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (!F.ctx)
		return -1;
	F.pd = ibv_alloc_pd(F.ctx);
	F.cq = ibv_create_cq(F.ctx, 2 * NRECV, NULL, NULL, 0);
	F.buf = aligned_alloc(4096,
			      ((size_t)NRECV * RBUF + 4095) / 4096 * 4096);
	F.mr = ibv_reg_mr(F.pd, F.buf, (size_t)NRECV * RBUF,
			  IBV_ACCESS_LOCAL_WRITE);
	qa.send_cq = qa.recv_cq = F.cq;
	F.qp = F.mr ? ibv_create_qp(F.pd, &qa) : NULL;
	if (!F.qp || to_rts())
		return -1;
	for (unsigned i = 0; i < NRECV; i++)
		if (post_recv(i))
			return -1;
	return 0;
}

static int setup(void)
{
	char p[8];

	setenv("SOFTRNIC_TRANSPORT", "tcp", 1);
	setenv("SOFTRNIC_IP", "127.0.0.1", 1);
	setenv("SOFTRNIC_LOG", "0", 1);
	F.port = (uint16_t)(20000 + getpid() % 20000);
	snprintf(p, sizeof(p), "%u", F.port);
	setenv("SOFTRNIC_PORT", p, 1);
	if (open_device())
		return -1;
	F.udp = socket(AF_INET, SOCK_DGRAM, 0);
	F.unx = socket(AF_UNIX, SOCK_DGRAM, 0);
	return F.udp < 0 || F.unx < 0 ? -1 : 0;
}

/* A header from the input: mostly valid, every field sometimes wrong. */
static size_t build(struct in *in, uint8_t *dg, size_t cap)
{
	struct srn_udw_hdr *h = (struct srn_udw_hdr *)dg;
	uint32_t pick = take(in, 2), len;

	memset(h, 0, sizeof(*h));
	h->magic = pick & 1 ? take(in, 4) : SRN_UDW_MAGIC;
	h->version = pick & 2 ? (uint8_t)take(in, 1) : SRN_UDW_VERSION;
	h->opcode = (uint8_t)take(in, 1) % 4;
	h->flags = (uint8_t)take(in, 1) & 7;
	h->dst_qpn = pick & 4 ? take(in, 4) : F.qp->qp_num;
	h->src_qpn = take(in, 3);
	h->qkey = pick & 8 ? take(in, 4) : QKEY;
	h->imm = take(in, 4);
	h->src_ipv4 = pick & 16 ? take(in, 4) : htonl(INADDR_LOOPBACK);
	for (unsigned i = 0; i < 16 && (pick & 32); i++)
		h->dgid[i] = (uint8_t)take(in, 1);
	len = in->n < cap - sizeof(*h) ? (uint32_t)in->n :
					 (uint32_t)(cap - sizeof(*h));
	memcpy(dg + sizeof(*h), in->p, len);
	h->len = pick & 64 ? take(in, 4) : len;
	return sizeof(*h) + len;
}

static void send_to(int unx, const void *dg, size_t n)
{
	struct sockaddr_in si = { .sin_family = AF_INET,
				  .sin_port = htons(F.port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_un su = { .sun_family = AF_UNIX };
	int k = snprintf(su.sun_path + 1, sizeof(su.sun_path) - 1,
			 SRN_UDW_FWD_FMT, F.qp->qp_num);

	if (unx)
		sendto(F.unx, dg, n, MSG_DONTWAIT, (struct sockaddr *)&su,
		       offsetof(struct sockaddr_un, sun_path) + 1 + k);
	else
		sendto(F.udp, dg, n, MSG_DONTWAIT, (struct sockaddr *)&si,
		       sizeof(si));
}

/* A valid datagram behind the input's on the same socket; its completion
 * means the input's was handled (one socket is read in order). Receive
 * WQEs are reposted as they complete. */
static void sync_after(int unx)
{
	struct srn_udw_hdr h = { .magic = SRN_UDW_MAGIC,
				 .version = SRN_UDW_VERSION,
				 .opcode = SRN_UDW_SEND_IMM,
				 .dst_qpn = F.qp->qp_num,
				 .src_qpn = 7,
				 .qkey = QKEY,
				 .imm = MARK,
				 .src_ipv4 = htonl(INADDR_LOOPBACK) };
	struct timespec t0, t;
	struct ibv_wc wc[16];

	if (unx)
		h.flags = SRN_UDW_F_FORWARDED;
	send_to(unx, &h, sizeof(h));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(F.cq, 16, wc);

		for (int i = 0; i < n; i++) {
			post_recv((unsigned)wc[i].wr_id);
			if (wc[i].status == IBV_WC_SUCCESS &&
			    (wc[i].wc_flags & IBV_WC_WITH_IMM) &&
			    wc[i].imm_data == MARK)
				return;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 2)
			return; /* lost (UD may lose): go on */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t dg[65536];
	static int ready;
	struct in in = { data, size };
	size_t n;
	int unx;

	if (!ready)
		ready = setup() ? -1 : 1;
	if (ready < 0)
		abort(); /* the device did not come up: nothing is tested */
	unx = size && (data[0] & 1);
	if (size && (data[0] & 0xfe) == 0xfe) { /* raw bytes */
		n = size - 1 < sizeof(dg) ? size - 1 : sizeof(dg);
		memcpy(dg, data + 1, n);
	} else {
		take(&in, 1);
		n = build(&in, dg, 4096 + 2 * sizeof(struct srn_udw_hdr));
	}
	send_to(unx, dg, n);
	sync_after(unx);
	return 0;
}
