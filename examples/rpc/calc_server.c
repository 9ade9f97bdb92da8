// SPDX-License-Identifier: MIT
/*
 * calc_server [PORT [MIN_WORKERS [MAX_WORKERS [RPCBIND]]]]: the rpcgen
 * service calc.x served by softrnic RPC. Prints "port N" once it serves;
 * SIGINT or SIGTERM stop it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softrnic/rpc.h>

#include "calc.h"

/* rpcgen -m made it (calc_svc.c); its header does not declare it */
void calc_prog_1(struct svc_req *rqstp, SVCXPRT *transp);

static struct srn_rpc_server *server;

static void on_signal(int sig)
{
	srn_rpc_server_stop(server); /* async-signal-safe */
}

int main(int argc, char **argv)
{
	struct srn_rpc_server_attr attr = { 0 };
	struct sigaction sa = { 0 };
	int rc;

	attr.port = argc > 1 ? (unsigned short)atoi(argv[1]) : 0;
	attr.min_workers = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
	attr.max_workers = argc > 3 ? (unsigned)atoi(argv[3]) : 0;
	attr.rpcbind = argc > 4 ? atoi(argv[4]) : 0;
	server = srn_rpc_server_create(&attr);
	if (!server) {
		perror("srn_rpc_server_create");
		return 1;
	}
	rc = srn_rpc_server_register(server, CALC_PROG, CALC_VERS, calc_prog_1);
	if (rc) {
		fprintf(stderr, "register: %s\n", strerror(rc));
		return 1;
	}
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("port %u\n", srn_rpc_server_port(server));
	fflush(stdout);
	rc = srn_rpc_server_run(server);
	srn_rpc_server_destroy(server);
	return rc ? 1 : 0;
}
