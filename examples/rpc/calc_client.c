// SPDX-License-Identifier: MIT
/*
 * calc_client HOST[:PORT] [NETTYPE]: calls the calc service through
 * srn_clnt_create (NETTYPE auto, shm, tcp or udp; default auto) with the
 * stubs rpcgen made, and prints the results.
 */
#include <stdio.h>
#include <stdlib.h>

#include <softrnic/rpc.h>

#include "calc.h"

int main(int argc, char **argv)
{
	calc_pair p = { 40, 2 };
	char *name = "softrnic", *hello = NULL;
	int sum = 0;
	CLIENT *cl;

	if (argc < 2) {
		fprintf(stderr, "usage: %s HOST[:PORT] [NETTYPE]\n", argv[0]);
		return 2;
	}
	cl = srn_clnt_create(argv[1], CALC_PROG, CALC_VERS,
			     argc > 2 ? argv[2] : "auto");
	if (!cl) {
		clnt_pcreateerror(argv[1]);
		return 1;
	}
	if (calc_add_1(&p, &sum, cl) != RPC_SUCCESS ||
	    calc_hello_1(&name, &hello, cl) != RPC_SUCCESS) {
		clnt_perror(cl, "calc");
		return 1;
	}
	printf("%d + %d = %d over %s\n%s\n", p.a, p.b, sum, cl->cl_netid,
	       hello);
	clnt_freeres(cl, (xdrproc_t)xdr_wrapstring, (char *)&hello);
	clnt_destroy(cl);
	return 0;
}
