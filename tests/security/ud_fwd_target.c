// SPDX-License-Identifier: MIT
/*
 * The target of hostd_ud.sh's forwarding check: one UD QP (Q_Key
 * 0x11111111) in RTS with receives posted. Prints "QPN 0x%06x", then one
 * line "RECV src_qp 0x%06x len %u" per datagram received, until SECONDS
 * pass without one (default 3). Blocks in its completion channel.
 *   ud_fwd_target [SECONDS]
 */
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#define QKEY 0x11111111u
#define NRECV 16
#define BUF 4096

static char buf[NRECV][BUF];

static int post_recv(struct ibv_qp *qp, struct ibv_mr *mr, int i)
{
	struct ibv_sge sge = { (uintptr_t)buf[i], BUF, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 1,
			 .max_recv_wr = NRECV,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qkey = QKEY };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp || ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_PORT | IBV_QP_QKEY))
		return NULL;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return NULL;
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return NULL;
	return qp;
}

/* Completions until secs pass without one. */
static int wait_recvs(struct ibv_comp_channel *ch, struct ibv_cq *cq,
		      struct ibv_qp *qp, struct ibv_mr *mr, int secs)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct ibv_cq *ev;
	struct ibv_wc wc;
	void *ctx;

	for (;;) {
		if (ibv_req_notify_cq(cq, 0))
			return 1;
		while (ibv_poll_cq(cq, 1, &wc) == 1) {
			printf("RECV src_qp 0x%06x len %u status %d\n",
			       wc.src_qp, wc.byte_len, wc.status);
			fflush(stdout);
			if (post_recv(qp, mr, (int)wc.wr_id))
				return 1;
		}
		if (poll(&p, 1, secs * 1000) <= 0)
			return 0;
		if (ibv_get_cq_event(ch, &ev, &ctx))
			return 1;
		ibv_ack_cq_events(ev, 1);
	}
}

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 3, n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *c = n > 0 ? ibv_open_device(l[0]) : NULL;
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	struct ibv_comp_channel *ch = c ? ibv_create_comp_channel(c) : NULL;
	struct ibv_cq *cq = ch ? ibv_create_cq(c, 2 * NRECV, NULL, ch, 0) :
				 NULL;
	struct ibv_mr *mr =
		pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) :
		     NULL;
	struct ibv_qp *qp = mr && cq ? ud_qp(pd, cq) : NULL;

	if (!qp) {
		fprintf(stderr, "ud_fwd_target: no UD QP\n");
		return 1;
	}
	for (int i = 0; i < NRECV; i++)
		if (post_recv(qp, mr, i))
			return 1;
	printf("QPN 0x%06x\n", qp->qp_num);
	fflush(stdout);
	return wait_recvs(ch, cq, qp, mr, secs);
}
