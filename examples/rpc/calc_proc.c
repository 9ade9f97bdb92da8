// SPDX-License-Identifier: MIT
/*
 * The calc service's procedures, as for any rpcgen -M server: each fills
 * *result and returns TRUE to have the dispatch function reply.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calc.h"

bool_t calc_add_1_svc(calc_pair *arg, int *result, struct svc_req *req)
{
	/* wraps, as the reference server's would: a signed overflow is
	 * undefined (the fuzzer's UBSan finds it) */
	*result = (int)((unsigned int)arg->a + (unsigned int)arg->b);
	return TRUE;
}

bool_t calc_echo_1_svc(calc_blob *arg, calc_blob *result, struct svc_req *req)
{
	result->calc_blob_len = arg->calc_blob_len;
	result->calc_blob_val = malloc(arg->calc_blob_len + 1);
	if (!result->calc_blob_val)
		return FALSE;
	if (arg->calc_blob_len) /* an empty blob has no buffer */
		memcpy(result->calc_blob_val, arg->calc_blob_val,
		       arg->calc_blob_len);
	return TRUE;
}

bool_t calc_sum_1_svc(calc_blob *arg, u_int *result, struct svc_req *req)
{
	u_int i, s = 0;

	for (i = 0; i < arg->calc_blob_len; i++)
		s += (unsigned char)arg->calc_blob_val[i];
	*result = s;
	return TRUE;
}

/* The longest sleep a client may ask for: no client parks a worker for
 * ever (tests/rpc/run_fuzz_rpc.sh builds this with 100 ms, below its
 * harness's timeouts). */
#ifndef CALC_SLEEP_MAX_MS
#define CALC_SLEEP_MAX_MS 10000
#endif

bool_t calc_sleep_1_svc(int *ms, int *result, struct svc_req *req)
{
	int d = *ms < 0 ? 0 : *ms > CALC_SLEEP_MAX_MS ? CALC_SLEEP_MAX_MS : *ms;
	struct timespec ts = { d / 1000, (d % 1000) * 1000000L };

	nanosleep(&ts, NULL);
	*result = *ms;
	return TRUE;
}

bool_t calc_hello_1_svc(char **name, char **result, struct svc_req *req)
{
	static const char hello[] = "hello, ";

	*result = malloc(sizeof(hello) + strlen(*name));
	if (!*result)
		return FALSE;
	strcpy(*result, hello);
	strcat(*result, *name);
	return TRUE;
}

int calc_prog_1_freeresult(SVCXPRT *xprt, xdrproc_t proc, caddr_t result)
{
	xdr_free(proc, result);
	return 1;
}
