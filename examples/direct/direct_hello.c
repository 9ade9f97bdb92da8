// SPDX-License-Identifier: MIT
/*
 * softrnic direct access, the smallest example: a "server" process
 * registers a buffer with SOFTRNIC_ACCESS_DIRECT, a "client" process
 * connects an RC QP to it and asks srn_direct_map() for a pointer into
 * the server's buffer, then writes a greeting with memcpy and bumps a
 * counter with an atomic add: no verb, no completion. The server prints
 * what it finds. (The two exchange QP numbers and the key over a pipe.)
 *
 *   cc direct_hello.c $(pkg-config --cflags --libs softrnic) -o direct_hello
 *   ./direct_hello
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <softrnic/direct.h>

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
};

struct hello_msg {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

static int die(const char *what)
{
	perror(what);
	exit(1);
}

static void end_open(struct end *e)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { .cap = { 4, 4, 1, 1, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	if (!l || !l[0] || !(e->ctx = ibv_open_device(l[0])))
		die("no RDMA device");
	ibv_free_device_list(l);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 4, NULL, NULL, 0);
	qa.send_cq = qa.recv_cq = e->cq;
	if (!e->pd || !e->cq || !(e->qp = ibv_create_qp(e->pd, &qa)))
		die("create PD/CQ/QP");
	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) ||
	    ibv_query_gid(e->ctx, 1, 0, &e->gid))
		die("INIT");
}

static void end_connect(struct end *e, uint32_t dqpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dqpn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1,
			     .port_num = 1,
			     .grh = { .dgid = e->gid, .hop_limit = 1 } },
	};

	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

static void end_close(struct end *e)
{
	ibv_destroy_qp(e->qp); /* tells the peer: a goodbye, not a crash */
	ibv_destroy_cq(e->cq);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
}

static void client(int rd, int wr, uint32_t *my_qpn)
{
	struct hello_msg m;
	struct end e;
	char *p;
	int err;

	end_open(&e);
	*my_qpn = e.qp->qp_num;
	if (write(wr, my_qpn, 4) != 4 || read(rd, &m, sizeof(m)) != sizeof(m))
		die("exchange");
	end_connect(&e, m.qpn);
	err = srn_direct_map(e.qp, m.addr, m.rkey, 4096,
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_ATOMIC,
			     (void **)&p);
	if (err) {
		fprintf(stderr, "srn_direct_map: %s\n", strerror(err));
		exit(1);
	}
	strcpy(p + 8, "hello through a plain pointer");
	__atomic_fetch_add((uint64_t *)p, 42, __ATOMIC_RELEASE);
	srn_direct_unmap(p);
	end_close(&e);
	if (write(wr, "d", 1) != 1)
		die("done");
}

static void server(int rd, int wr)
{
	static char buf[4096] __attribute__((aligned(4096)));
	struct hello_msg m;
	struct ibv_mr *mr;
	uint32_t cqpn;
	struct end e;
	char done;

	end_open(&e);
	mr = ibv_reg_mr(e.pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC |
				SOFTRNIC_ACCESS_DIRECT);
	if (!mr)
		die("ibv_reg_mr");
	if (read(rd, &cqpn, 4) != 4)
		die("exchange");
	end_connect(&e, cqpn);
	m = (struct hello_msg){ e.qp->qp_num, mr->rkey, (uintptr_t)buf };
	if (write(wr, &m, sizeof(m)) != sizeof(m) || read(rd, &done, 1) != 1)
		die("exchange");
	printf("server: counter %" PRIu64 ", text \"%s\"\n",
	       __atomic_load_n((uint64_t *)buf, __ATOMIC_ACQUIRE), buf + 8);
	ibv_dereg_mr(mr);
	end_close(&e);
}

int main(void)
{
	int to_srv[2], to_cli[2], st;
	uint32_t qpn;
	pid_t pid;

	if (pipe(to_srv) || pipe(to_cli))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		client(to_cli[0], to_srv[1], &qpn);
		return 0;
	}
	server(to_srv[0], to_cli[1]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
