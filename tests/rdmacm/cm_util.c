// SPDX-License-Identifier: MIT
/*
 * The rdma_cm tests' common steps (test_cm.c, test_cm_link.c): a listener
 * and a client in this process, each with its own event channel.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "cm_util.h"

int failures;

/* The next event on ch within 10 s; it must be of type want. */
struct rdma_cm_event *next_event(struct rdma_event_channel *ch,
				 enum rdma_cm_event_type want)
{
	struct pollfd pf = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pf, 1, 10000) != 1) {
		fprintf(stderr, "no event (wanted %s)\n", rdma_event_str(want));
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		perror("rdma_get_cm_event");
		return NULL;
	}
	if (ev->event != want) {
		fprintf(stderr, "got %s status %d, wanted %s\n",
			rdma_event_str(ev->event), ev->status,
			rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev = next_event(ch, t);

	if (!ev)
		return -1;
	rdma_ack_cm_event(ev);
	return 0;
}

struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	return sa;
}

int listen_ps(struct side *s, uint16_t port, void *ctx, enum rdma_port_space ps)
{
	struct sockaddr_in sa = loopback(port);

	s->ch = rdma_create_event_channel();
	CHECK(s->ch);
	CHECK(!rdma_create_id(s->ch, &s->id, ctx, ps));
	CHECK(!rdma_bind_addr(s->id, (struct sockaddr *)&sa));
	CHECK(s->id->verbs); /* a concrete address names the device */
	CHECK(!rdma_listen(s->id, 8));
	s->port = ntohs(rdma_get_src_port(s->id));
	CHECK(s->port);
	return 0;
}

int listen_on(struct side *s, uint16_t port, void *ctx)
{
	return listen_ps(s, port, ctx, RDMA_PS_TCP);
}

/* A client id, resolved to port (address and route events checked). */
int client_ps(struct side *c, uint16_t port, enum rdma_port_space ps)
{
	return client_via(c, loopback(port), ps);
}

/* A client id, resolved to sa (address and route events checked). */
int client_via(struct side *c, struct sockaddr_in sa, enum rdma_port_space ps)
{
	c->ch = rdma_create_event_channel();
	CHECK(c->ch);
	CHECK(!rdma_create_id(c->ch, &c->id, c, ps));
	CHECK(!rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&sa, 2000));
	CHECK(!expect(c->ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(c->id->verbs && c->id->port_num == 1);
	CHECK(c->id->route.addr.addr.ibaddr.sgid.raw[10] == 0xff);
	CHECK(!rdma_resolve_route(c->id, 2000));
	CHECK(!expect(c->ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(c->id->route.num_paths == 1);
	return 0;
}

int client_to(struct side *c, uint16_t port)
{
	return client_ps(c, port, RDMA_PS_TCP);
}

int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC, .sq_sig_all = 1 };

	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	CHECK(!rdma_create_qp(id, NULL, &a));
	CHECK(id->qp && id->pd && id->send_cq && id->recv_cq);
	return 0;
}

void teardown(struct side *s)
{
	if (s->child) {
		rdma_destroy_qp(s->child);
		rdma_destroy_id(s->child);
	}
	if (s->id) {
		rdma_destroy_qp(s->id);
		rdma_destroy_id(s->id);
	}
	if (s->ch)
		rdma_destroy_event_channel(s->ch);
	memset(s, 0, sizeof(*s));
}

/* Up to CONNECT_REQUEST on the server, with private data "hello". */
int request(struct side *srv, struct side *cli, int ctx_tag)
{
	struct rdma_conn_param p = { .private_data = "hello",
				     .private_data_len = 5,
				     .responder_resources = 1,
				     .initiator_depth = 1,
				     .retry_count = 7,
				     .rnr_retry_count = 7 };
	struct rdma_cm_event *ev;

	CHECK(!listen_on(srv, 0, &ctx_tag));
	CHECK(!client_to(cli, srv->port));
	CHECK(!make_qp(cli->id));
	CHECK(!rdma_connect(cli->id, &p));
	ev = next_event(srv->ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(ev);
	srv->child = ev->id;
	CHECK(ev->listen_id == srv->id);
	CHECK(ev->id->context == &ctx_tag); /* inherited */
	CHECK(ev->id->verbs && ev->id->port_num == 1);
	CHECK(ev->param.conn.private_data_len >= 5 &&
	      !memcmp(ev->param.conn.private_data, "hello", 5));
	CHECK(ev->param.conn.qp_num == cli->id->qp->qp_num);
	CHECK(ev->param.conn.initiator_depth == 1);
	rdma_ack_cm_event(ev);
	return 0;
}

/* A SEND from the client reaches the server's child. */
int send_one(struct side *srv, struct side *cli)
{
	char rbuf[32] = { 0 }, sbuf[32] = "through the connection";
	struct ibv_mr *rmr = rdma_reg_msgs(srv->child, rbuf, sizeof(rbuf));
	struct ibv_mr *smr = rdma_reg_msgs(cli->id, sbuf, sizeof(sbuf));
	struct ibv_wc wc;

	CHECK(rmr && smr);
	CHECK(!rdma_post_recv(srv->child, NULL, rbuf, sizeof(rbuf), rmr));
	CHECK(!rdma_post_send(cli->id, NULL, sbuf, sizeof(sbuf), smr, 0));
	CHECK(rdma_get_send_comp(cli->id, &wc) == 1 &&
	      wc.status == IBV_WC_SUCCESS);
	CHECK(rdma_get_recv_comp(srv->child, &wc) == 1 &&
	      wc.status == IBV_WC_SUCCESS);
	CHECK(!strcmp(rbuf, sbuf));
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	return 0;
}

int cm_run_cases(const struct cm_case *cases, size_t n, int argc, char **argv)
{
	int ran = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	for (size_t i = 0; i < n; i++) {
		int before = failures;

		if (argc > 1 && strcmp(argv[1], cases[i].name))
			continue;
		ran++;
		cases[i].fn();
		printf("%s %s\n", failures == before ? "ok  " : "FAIL",
		       cases[i].name);
	}
	if (!ran) {
		fprintf(stderr, "no case named %s\n", argv[1]);
		return 2;
	}
	return failures ? 1 : 0;
}

/* A listener's side of one connection: the request accepted (srv->child,
 * with a QP), established, then disconnected by the client. 0, or 1. */
int serve_one(struct side *srv)
{
	struct rdma_cm_event *ev;

	ev = next_event(srv->ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (!ev)
		return 1;
	srv->child = ev->id;
	rdma_ack_cm_event(ev);
	if (make_qp(srv->child) || rdma_accept(srv->child, NULL) ||
	    expect(srv->ch, RDMA_CM_EVENT_ESTABLISHED) ||
	    expect(srv->ch, RDMA_CM_EVENT_DISCONNECTED))
		return 1;
	return 0;
}
