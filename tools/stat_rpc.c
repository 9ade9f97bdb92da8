// SPDX-License-Identifier: MIT
/*
 * softrnic stat — the RPC section: every softrnic RPC server of this host
 * (network namespace), found by its listening abstract socket
 * "softrnic-rpc.<prog>.<vers>". The tool connects like a same-host client,
 * receives the segment's memfd (same uid, or root), maps its header and
 * worker blocks read-only and prints the counters
 * (src/proto/srn_rpc_proto.h; docs/rpc.md, "Counters").
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/srn_rpc_proto.h"
#include "stat_rpc.h"

static const char *const srn_wstate_names[SRN_RPC_NSTATES] = {
	"OFF", "PARKED", "SLEEPING", "SPINNING", "RUNNING", "QUEUED"
};

/* The server's memfd, or -1. */
static int rpc_segment(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char cbuf[CMSG_SPACE(sizeof(int))], byte;
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct timeval tv = { 2, 0 };
	struct cmsghdr *cm;
	int s, fd = -1, n;

	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "%s", name);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (!connect(s, (struct sockaddr *)&sa,
		     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				 n)) &&
	    recvmsg(s, &mh, MSG_CMSG_CLOEXEC) == 1) {
		cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_level == SOL_SOCKET &&
		    cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	}
	close(s);
	return fd;
}

/* Header and worker blocks, checked; NULL if it is not a segment. */
static const struct srn_rpc_seg_hdr *rpc_map(int fd, size_t *len_p)
{
	const struct srn_rpc_seg_hdr *h;
	struct stat st;
	size_t len;

	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(*h))
		return NULL;
	h = mmap(NULL, sizeof(*h), PROT_READ, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return NULL;
	len = sizeof(*h) + (size_t)h->nworkers * sizeof(struct srn_rpc_worker);
	if (h->magic != SRN_RPC_MAGIC || h->version != SRN_RPC_VERSION ||
	    h->nworkers == 0 || h->nworkers > SRN_RPC_MAX_WORKERS ||
	    h->worker_off != sizeof(*h) ||
	    h->worker_size != sizeof(struct srn_rpc_worker) ||
	    len > (size_t)st.st_size) {
		munmap((void *)h, sizeof(*h));
		return NULL;
	}
	munmap((void *)h, sizeof(*h));
	h = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	*len_p = len;
	return h == MAP_FAILED ? NULL : h;
}

static void rpc_print_workers(const struct srn_rpc_seg_hdr *h)
{
	const struct srn_rpc_worker *w = (const void *)(h + 1);
	unsigned i, st;

	printf("  worker state    calls      spins      sleeps   wakeups  "
	       "timeouts behind   parks  handler_us direct\n");
	for (i = 0; i < h->nworkers; i++, w++) {
		const struct srn_rpc_wstat *s = &w->cnt.stat;

		st = SRN_RPC_SCHED_STATE(w->rx[0].sched);
		if (st == SRN_RPC_OFF && s->calls == 0)
			continue; /* never started */
		printf("  %-6u %-8s %-10llu %-10llu %-8llu %-8llu %-8llu "
		       "%-8llu %-6llu %-10.1f %llu\n",
		       i, st < SRN_RPC_NSTATES ? srn_wstate_names[st] : "?",
		       (unsigned long long)s->calls,
		       (unsigned long long)s->spins,
		       (unsigned long long)s->sleeps,
		       (unsigned long long)s->wakeups,
		       (unsigned long long)s->timeouts,
		       (unsigned long long)s->behind,
		       (unsigned long long)s->parks, w->ctl.svc_ns / 1000.0,
		       (unsigned long long)s->direct);
	}
}

/* One service: a summary line, then a line per worker. */
static int rpc_print(unsigned long prog, unsigned long vers, const char *name)
{
	const struct srn_rpc_seg_hdr *h;
	const struct srn_rpc_worker *w;
	unsigned long long calls = 0;
	unsigned i, q = 0;
	size_t len = 0;
	int fd = rpc_segment(name);

	if (fd < 0)
		return -1;
	h = rpc_map(fd, &len);
	close(fd);
	if (!h)
		return -1;
	w = (const void *)(h + 1);
	for (i = 0; i < h->nworkers; i++)
		calls += w[i].cnt.stat.calls;
	for (i = 0; i < SRN_RPC_QUEUE_LEN; i++)
		q += h->queue[i] != 0;
	printf("0x%08lx %-4lu %-8u %u/%-5u %u/%-4u %-10llu %-8llu %-8llu "
	       "%llu\n",
	       prog, vers, h->owner_pid, h->qstat.started, h->nworkers, q,
	       SRN_RPC_QUEUE_LEN, calls, (unsigned long long)h->qstat.queued,
	       (unsigned long long)h->qstat.dropped,
	       (unsigned long long)h->qstat.grows);
	rpc_print_workers(h);
	munmap((void *)h, len);
	return 0;
}

/* Lists every RPC server of this host; the number found. */
int stat_rpc(void)
{
	FILE *f = fopen("/proc/net/unix", "r");
	unsigned long prog, vers;
	char line[512], name[64];
	int n = 0;

	if (!f)
		return 0;
	printf("RPC program vers pid      workers queue  calls      queued   "
	       "dropped  grows\n");
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "@softrnic-rpc.");

		if (!p ||
		    sscanf(p, "@softrnic-rpc.%lu.%lu", &prog, &vers) != 2 ||
		    !strstr(line, " 00010000 0001 01 "))
			continue;
		snprintf(name, sizeof(name), SRN_RPC_SOCK_FMT, prog, vers);
		if (!rpc_print(prog, vers, name))
			n++;
	}
	fclose(f);
	printf("%d RPC service%s\n", n, n == 1 ? "" : "s");
	return n;
}
