// SPDX-License-Identifier: MIT
/*
 * softrnic stat — the rdma_cm section: every rdma_cm id of this host
 * (network namespace) in processes of softrnic's librdmacm. Each bound
 * rdma_cm port has an abstract unix socket "softrnic/cm/<ps>/<port>"; the
 * tool asks each one (SRN_CM_STAT_MAGIC, src/proto/srn_cm_proto.h) and
 * the process behind it answers with all of its ids, once per process.
 * Processes of other users (unless root) do not answer.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/srn_cm_proto.h"
#include "stat_cm.h"

#define SRN_STAT_CM_PIDS 256

static const char *ps_name(unsigned ps)
{
	switch (ps) {
	case SRN_CM_PS_STREAM:
		return "TCP";
	case SRN_CM_PS_UDP:
		return "UDP";
	case SRN_CM_PS_IB:
		return "IB";
	case SRN_CM_PS_IPOIB:
		return "IPOIB";
	}
	return "?";
}

static void addr_str(const struct srn_cm_stat_addr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "-";

	if (a->family != AF_INET && a->family != AF_INET6) {
		snprintf(buf, len, "-");
		return;
	}
	inet_ntop(a->family, a->addr, ip, sizeof(ip));
	snprintf(buf, len, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip,
		 a->port);
}

static void print_ids(const struct srn_cm_stat_msg *m, ssize_t n)
{
	unsigned count = m->hdr.count;

	if (count > SRN_CM_STAT_MAX ||
	    n != (ssize_t)(sizeof(m->hdr) + count * sizeof(m->id[0])))
		return;
	for (unsigned i = 0; i < count; i++) {
		const struct srn_cm_stat_id *d = &m->id[i];
		char src[64], dst[64], qpn[16], st[sizeof(d->state) + 1];

		memcpy(st, d->state, sizeof(d->state));
		st[sizeof(d->state)] = 0;
		addr_str(&d->src, src, sizeof(src));
		addr_str(&d->dst, dst, sizeof(dst));
		snprintf(qpn, sizeof(qpn), d->qpn ? "0x%06x" : "-", d->qpn);
		printf("%7u  %-5s  %-14s  %-8s  %-22s  %s\n", m->hdr.pid,
		       ps_name(d->ps), st, qpn, src, dst);
	}
	if (m->hdr.more)
		printf("%7u  (%u more ids)\n", m->hdr.pid, m->hdr.more);
}

/* Asks the port socket named name (abstract, without its NUL) for its
 * process's ids; prints them unless that process answered already. */
static int ask_port(int fd, const char *name, unsigned *pids, unsigned *npids)
{
	static struct srn_cm_stat_msg m;
	struct srn_cm_stat_hdr q = { .magic = SRN_CM_STAT_MAGIC,
				     .version = SRN_CM_STAT_VERSION };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	ssize_t n;

	if (len >= sizeof(sa.sun_path) - 1)
		return -1;
	memcpy(sa.sun_path + 1, name, len);
	if (sendto(fd, &q, sizeof(q), 0, (struct sockaddr *)&sa,
		   offsetof(struct sockaddr_un, sun_path) + 1 + len) < 0)
		return -1;
	n = recv(fd, &m, sizeof(m), 0);
	if (n < (ssize_t)sizeof(m.hdr) || m.hdr.magic != SRN_CM_STAT_MAGIC ||
	    m.hdr.version != SRN_CM_STAT_VERSION)
		return -1;
	for (unsigned i = 0; i < *npids; i++)
		if (pids[i] == m.hdr.pid)
			return 0; /* that process was listed */
	if (*npids < SRN_STAT_CM_PIDS)
		pids[(*npids)++] = m.hdr.pid;
	print_ids(&m, n);
	return 0;
}

int stat_cm(void)
{
	FILE *f = fopen("/proc/net/unix", "r");
	struct timeval tv = { 0, 300000 };
	unsigned pids[SRN_STAT_CM_PIDS], npids = 0;
	char line[512], name[108];
	sa_family_t fam = AF_UNIX;
	int fd;

	if (!f)
		return -1;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	/* an address of our own (autobind) for the answers */
	if (fd < 0 || bind(fd, (struct sockaddr *)&fam, sizeof(fam))) {
		fclose(f);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	printf("\nrdma_cm ids\n    pid  ps     state           QP        "
	       "source                  destination\n");
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "@softrnic/cm/");

		if (p && sscanf(p + 1, "%107s", name) == 1)
			ask_port(fd, name, pids, &npids);
	}
	fclose(f);
	close(fd);
	printf("%u process%s with rdma_cm ids\n", npids,
	       npids == 1 ? "" : "es");
	return 0;
}
