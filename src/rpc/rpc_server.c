// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — the server object: create, register, run, stop, destroy.
 * run() makes the calling thread worker 0, starts min_workers - 1 more and
 * the receiver (rpc_net.c), which starts more workers up to max_workers
 * when a call finds none free.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpc/srn_rpc.h"
#include "util/srn_compiler.h"
#include "util/util.h"

static int srn_rpc_server_init_workers(struct srn_rpc_server *srv)
{
	unsigned i;

	srv->wl = calloc(srv->max_workers, sizeof(*srv->wl));
	if (!srv->wl)
		return -ENOMEM;
	for (i = 0; i < srv->max_workers; i++) {
		struct srn_rpc_wlocal *wl = &srv->wl[i];

		wl->srv = srv;
		wl->idx = i;
		wl->w = srn_rpc_seg_worker(&srv->seg, i);
		*srn_rpc_sched(wl->w) = SRN_RPC_SCHED(SRN_RPC_OFF, 0, 0, 1);
		wl->aux_in = srn_rpc_seg_aux(&srv->seg, i, 0);
		wl->aux_out = srn_rpc_seg_aux(&srv->seg, i, 1);
		srn_rpc_xprt_init(wl);
	}
	return 0;
}

/* SOFTRNIC_RPC_SPIN_US: the least a waiting worker spins before it
 * sleeps (0 to 1 s; default 0: the budget follows the gaps alone). */
static int64_t srn_rpc_spin_min_ns(void)
{
	const char *env = getenv("SOFTRNIC_RPC_SPIN_US");
	long us = env ? strtol(env, NULL, 10) : 0;

	if (us < 0)
		us = 0;
	return (us > 1000000 ? 1000000 : us) * 1000ll;
}

static int srn_rpc_server_setup(struct srn_rpc_server *srv,
				const struct srn_rpc_server_attr *attr)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int rc;

	if (attr)
		srv->attr = *attr;
	if (srv->attr.addr) {
		if (strlen(srv->attr.addr) >= sizeof(srv->addr))
			return -EINVAL;
		strcpy(srv->addr, srv->attr.addr);
		srv->attr.addr = srv->addr;
	}
	srv->spin_min_ns = srn_rpc_spin_min_ns();
	srv->min_workers = srv->attr.min_workers ? srv->attr.min_workers : 1;
	srv->max_workers = srv->attr.max_workers ?
				   srv->attr.max_workers :
				   (unsigned)(ncpu > 0 ? ncpu : 1);
	if (srv->max_workers < srv->min_workers)
		srv->max_workers = srv->min_workers;
	if (srv->max_workers > SRN_RPC_MAX_WORKERS)
		return -EINVAL;
	rc = srn_rpc_seg_create(srv->max_workers, &srv->segfd, &srv->seg);
	if (rc)
		return rc;
	rc = srn_rpc_server_init_workers(srv);
	if (rc)
		return rc;
	srv->rxbuf = malloc(SRN_RPC_DGRAM_MAX);
	if (!srv->rxbuf)
		return -ENOMEM;
	return srn_rpc_net_open(srv);
}

SRN_EXPORT struct srn_rpc_server *
srn_rpc_server_create(const struct srn_rpc_server_attr *attr)
{
	struct srn_rpc_server *srv = calloc(1, sizeof(*srv));
	int rc;

	if (!srv) {
		errno = ENOMEM;
		return NULL;
	}
	/* the user who may map the segment is judged as the server is now
	 * (a program that drops privileges first: srn_self_kin) */
	srn_self_refresh();
	srv->ufd = srv->tfd = srv->efd = srv->segfd = -1;
	rc = srn_rpc_server_setup(srv, attr);
	if (rc) {
		srn_rpc_server_destroy(srv);
		errno = -rc;
		return NULL;
	}
	return srv;
}

/* The abstract unix socket same-host clients find the program by. */
static int srn_rpc_listen_unix(rpcprog_t prog, rpcvers_t vers)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd, n;

	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, SRN_RPC_SOCK_FMT,
		     (unsigned long)prog, (unsigned long)vers);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 64) < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	return fd;
}

SRN_EXPORT int srn_rpc_server_register(struct srn_rpc_server *srv,
				       rpcprog_t prog, rpcvers_t vers,
				       void (*dispatch)(struct svc_req *,
							SVCXPRT *))
{
	struct srn_rpc_prog *p;
	unsigned i;
	int fd;

	if (!srv || !dispatch)
		return EINVAL;
	/* relaxed: run and register are the application's to order */
	if (__atomic_load_n(&srv->running, __ATOMIC_RELAXED))
		return EBUSY;
	for (i = 0; i < srv->nprogs; i++)
		if (srv->progs[i].prog == prog && srv->progs[i].vers == vers)
			return EEXIST;
	if (srv->nprogs == SRN_RPC_MAX_PROGS)
		return ENOSPC;
	fd = srn_rpc_listen_unix(prog, vers);
	if (fd < 0)
		return -fd;
	p = &srv->progs[srv->nprogs++];
	p->prog = prog;
	p->vers = vers;
	p->dispatch = dispatch;
	p->lfd = fd;
	return 0;
}

static int srn_rpc_server_start(struct srn_rpc_server *srv)
{
	sigset_t all, old;
	unsigned i;
	int rc;

	for (i = 0; i < srv->min_workers; i++) {
		rc = srn_rpc_worker_start(srv, i);
		if (rc)
			return -rc;
		srv->nstarted = i + 1;
	}
	/* relaxed: a counter for `softrnic stat` */
	__atomic_store_n(&srv->seg.hdr->qstat.started, srv->nstarted,
			 __ATOMIC_RELAXED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&srv->rx_tid, NULL, srn_rpc_net_main, srv);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return rc;
	pthread_setname_np(srv->rx_tid, "srn-rpc-recv");
	srv->rx_started = true;
	return 0;
}

static void srn_rpc_server_join(struct srn_rpc_server *srv)
{
	unsigned i;

	if (srv->rx_started)
		pthread_join(srv->rx_tid, NULL);
	srv->rx_started = false;
	for (i = 1; srv->wl && i < srv->max_workers; i++) {
		if (srv->wl[i].started)
			pthread_join(srv->wl[i].tid, NULL);
		srv->wl[i].started = false;
	}
}

SRN_EXPORT int srn_rpc_server_run(struct srn_rpc_server *srv)
{
	uint32_t no = 0;
	int rc;

	if (!srv)
		return EINVAL;
	/* acq_rel: one run at a time; pairs with itself in another
	 * srn_rpc_server_run; acquire on failure, same pairing */
	if (!__atomic_compare_exchange_n(&srv->running, &no, 1, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return EBUSY;
	srn_rpc_bind_set(srv, true);
	rc = srn_rpc_server_start(srv);
	if (rc == 0)
		srn_rpc_worker_main(&srv->wl[0]);
	else
		srn_rpc_server_stop(srv);
	srn_rpc_server_join(srv);
	srn_rpc_bind_set(srv, false);
	return rc;
}

/* Async-signal-safe: an atomic store, write(2) and futex wakes. */
SRN_EXPORT void srn_rpc_server_stop(struct srn_rpc_server *srv)
{
	uint64_t one = 1;
	unsigned i;
	ssize_t k;

	if (!srv)
		return;
	/* release: pairs with the acquire in srn_rpc_stopping */
	__atomic_store_n(&srv->stop, 1, __ATOMIC_RELEASE);
	k = write(srv->efd, &one, sizeof(one));
	(void)k;
	for (i = 0; i < srv->max_workers && srv->wl; i++) {
		srn_rpc_futex_wake(&srv->wl[i].w->rx[0].seq);
		srn_rpc_futex_wake(&srv->wl[i].w->rx[1].seq);
	}
	if (srv->seg.hdr)
		srn_rpc_futex_wake(&srv->seg.hdr->idle_seq);
}

SRN_EXPORT void srn_rpc_server_destroy(struct srn_rpc_server *srv)
{
	unsigned i;

	if (!srv)
		return;
	srn_rpc_server_stop(srv);
	srn_rpc_server_join(srv);
	for (i = 0; i < srv->nprogs; i++)
		close(srv->progs[i].lfd);
	for (i = 0; i < srv->nconns; i++)
		srn_rpc_conn_put(srv->conns[i]);
	for (i = 0; srv->wl && i < srv->max_workers; i++) {
		free(srv->wl[i].netbuf);
		free(srv->wl[i].dgram);
	}
	free(srv->wl);
	free(srv->rxbuf);
	srn_rpc_seg_unmap(&srv->seg);
	if (srv->segfd >= 0)
		close(srv->segfd);
	if (srv->ufd >= 0)
		close(srv->ufd);
	if (srv->tfd >= 0)
		close(srv->tfd);
	if (srv->efd >= 0)
		close(srv->efd);
	free(srv);
}

SRN_EXPORT unsigned short srn_rpc_server_port(const struct srn_rpc_server *srv)
{
	return srv ? srv->port : 0;
}
