// SPDX-License-Identifier: MIT
/*
 * libFuzzer over softrnic RPC's server input: a calc server (rpcgen's
 * dispatch, examples/rpc) runs in this process; each input goes to it as
 * (first byte % 3) a UDP datagram, a TCP stream (record marking and all),
 * or a same-host call written raw into a worker's receive slot or aux
 * area (a hostile client of the segment). Every 32 inputs a NULL call over
 * UDP must still be answered: a server that stops serving is a crash.
 * Built and run by run_fuzz_rpc.sh.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "calc.h"
#include "rpc/srn_rpc.h"

void calc_prog_1(struct svc_req *rqstp, SVCXPRT *transp);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct srn_rpc_server *srv;
static struct sockaddr_in sin_srv;
static pthread_t run_tid;

static void *run_main(void *arg)
{
	srn_rpc_server_run(srv);
	return NULL;
}

/* One seed: mode byte, then call proc of the calc service (encoded by
 * libtirpc) with auth, as a datagram, a TCP record or a slot's content. */
static void write_seed(const char *dir, int mode, rpcproc_t proc,
		       xdrproc_t xargs, void *args, AUTH *auth)
{
	static int k;
	struct rpc_msg m = { 0 };
	uint8_t buf[4200];
	uint32_t mark, len;
	char path[512];
	FILE *f;
	XDR x;

	m.rm_xid = 1000 + k;
	m.rm_direction = CALL;
	m.rm_call.cb_rpcvers = RPC_MSG_VERSION;
	m.rm_call.cb_prog = CALC_PROG;
	m.rm_call.cb_vers = CALC_VERS;
	xdrmem_create(&x, (char *)buf + 5, sizeof(buf) - 5, XDR_ENCODE);
	if (!xdr_callhdr(&x, &m) || !xdr_u_int32_t(&x, &proc) ||
	    !AUTH_MARSHALL(auth, &x) || !xargs(&x, args))
		abort();
	len = xdr_getpos(&x);
	mark = htonl(0x80000000u | len);
	memcpy(buf + 1, &mark, 4);
	buf[mode == 1 ? 0 : 4] = (uint8_t)mode;
	snprintf(path, sizeof(path), "%s/seed%d", dir, k++);
	f = fopen(path, "w");
	if (!f)
		abort();
	fwrite(mode == 1 ? buf : buf + 4, 1, mode == 1 ? len + 5 : len + 1, f);
	fclose(f);
}

static void write_seeds(const char *dir)
{
	AUTH *none = authnone_create(), *sys = authunix_create_default();
	calc_pair p = { 1, 2 };
	char *name = "fuzz";
	calc_blob b = { 1500, malloc(1500) };
	int mode;

	memset(b.calc_blob_val, 7, b.calc_blob_len);
	for (mode = 0; mode < 3; mode++) {
		write_seed(dir, mode, CALC_ADD, (xdrproc_t)xdr_calc_pair, &p,
			   none);
		write_seed(dir, mode, CALC_HELLO, (xdrproc_t)xdr_wrapstring,
			   &name, sys);
		write_seed(dir, mode, CALC_ECHO, (xdrproc_t)xdr_calc_blob, &b,
			   none);
	}
	free(b.calc_blob_val);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	if (getenv("SRN_RPC_SEED_DIR")) {
		write_seeds(getenv("SRN_RPC_SEED_DIR"));
		exit(0);
	}

	struct srn_rpc_server_attr a = { .addr = "127.0.0.1",
					 .min_workers = 1,
					 .max_workers = 2 };

	srv = srn_rpc_server_create(&a);
	if (!srv ||
	    srn_rpc_server_register(srv, CALC_PROG, CALC_VERS, calc_prog_1))
		abort();
	sin_srv.sin_family = AF_INET;
	sin_srv.sin_port = htons(srn_rpc_server_port(srv));
	sin_srv.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	pthread_create(&run_tid, NULL, run_main, NULL);
	return 0;
}

static void send_udp(const uint8_t *p, size_t len)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	sendto(fd, p, len, 0, (struct sockaddr *)&sin_srv, sizeof(sin_srv));
	close(fd);
}

static void send_tcp(const uint8_t *p, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char buf[256];
	struct timeval tv = { 0, 20000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sin_srv, sizeof(sin_srv)) == 0 &&
	    send(fd, p, len, MSG_NOSIGNAL) >= 0)
		while (recv(fd, buf, sizeof(buf), 0) > 0)
			; /* whatever it answers, until it is quiet */
	close(fd);
}

/* A hostile same-host caller: raw bytes as the call, then wait until the
 * worker frees itself, and acknowledge whatever reply it wrote. */
static void send_slot(const uint8_t *p, size_t len)
{
	struct srn_rpc_worker *w;
	struct srn_rpc_ticket t;
	uint32_t flags = 0;
	int i = srn_rpc_claim(&srv->seg, -1, 5000, SRN_RPC_CLAIM_NODROP, &t);

	if (i < 0)
		abort(); /* no worker came free in 5 s */
	w = srn_rpc_seg_worker(&srv->seg, (unsigned)i);
	if (len <= SRN_RPC_SLOT_INLINE) {
		memcpy(w->rx[t.slot].data, p, len);
	} else {
		memcpy(srn_rpc_seg_aux(&srv->seg, (unsigned)i, 0), p, len);
		flags = SRN_RPC_SLOT_AUX;
	}
	/* the length field itself is hostile too, now and then */
	srn_rpc_publish(w, &t, len > 2 && p[1] == 0xff ? 0xfffffff0u : len,
			flags);
	/* relaxed: polled until the worker moved past call n */
	while ((int32_t)(SRN_RPC_SCHED_N(__atomic_load_n(srn_rpc_sched(w),
							 __ATOMIC_RELAXED)) -
			 t.n) <= 0)
		usleep(50);
	srn_rpc_reply_ack(w, t.n);
}

static void check_alive(void)
{
	struct timeval tmo = { 5, 0 }, wait = { 1, 0 };
	struct sockaddr_in sin = sin_srv;
	int sock = RPC_ANYSOCK;
	CLIENT *cl = clntudp_create(&sin, CALC_PROG, CALC_VERS, wait, &sock);

	if (!cl || clnt_call(cl, NULLPROC, (xdrproc_t)xdr_void, NULL,
			     (xdrproc_t)xdr_void, NULL, tmo) != RPC_SUCCESS)
		abort(); /* the server stopped serving */
	clnt_destroy(cl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned count;

	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		send_udp(data + 1, size - 1);
		break;
	case 1:
		send_tcp(data + 1, size - 1);
		break;
	default:
		send_slot(data + 1, size - 1);
	}
	if (++count % 32 == 0)
		check_alive();
	return 0;
}
