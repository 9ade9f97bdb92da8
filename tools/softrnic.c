// SPDX-License-Identifier: MIT
/*
 * softrnic — the command line tool.
 *
 *   softrnic exec -- CMD [ARGS...]   run CMD with softrnic's libibverbs first
 *   softrnic devinfo                 show the device as softrnic sees it
 *   softrnic daemon                  (root) hold the host's ports (verbs,
 *                                    rdma_cm) for every user:
 *                                    docs/security.md
 *
 * The library is found relative to this binary (see lib_dir()): installed,
 * <bindir>/softrnic and <libdir>/softrnic/libibverbs.so.1, a private
 * directory the dynamic linker never searches by itself; in the build
 * tree, bin/softrnic and lib/libibverbs.so.1. SOFTRNIC_LIB_DIR overrides.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/un.h>

#include "devnode.h"
#include "proto/srn_cm_proto.h"
#include "proto/srn_ctl_proto.h"
#include "stat_cm.h"
#include "stat_rpc.h"

static const char *const srn_cmd_names[] = { "exec", "devinfo", "stat",
					     "daemon", NULL };

#ifndef SRN_REL_LIBDIR
#define SRN_REL_LIBDIR "../lib/softrnic" /* from bindir; set by CMake */
#endif

/* 0 if dir holds a libibverbs.so.1, else -errno. */
static int lib_in(const char *dir)
{
	char lib[PATH_MAX];

	if (snprintf(lib, sizeof(lib), "%s/libibverbs.so.1", dir) >=
	    (int)sizeof(lib))
		return -ENAMETOOLONG;
	return access(lib, F_OK) ? -errno : 0;
}

/*
 * Where softrnic's libibverbs.so.1 is: $SOFTRNIC_LIB_DIR if set; else, next
 * to this binary, the private directory of an installed copy
 * (<exe dir>/SRN_REL_LIBDIR, e.g. ../lib/softrnic), then the build tree's
 * <exe dir>/../lib. The installed directory is tried first so that another
 * libibverbs.so.1 in <prefix>/lib (a source build of rdma-core in
 * /usr/local, say) is never taken for softrnic's.
 */
static int lib_dir(char *buf, size_t len)
{
	static const char *const rel[] = { SRN_REL_LIBDIR, "../lib" };
	const char *env = getenv("SOFTRNIC_LIB_DIR");
	char exe[PATH_MAX], real[PATH_MAX], *bin;
	unsigned int i;
	ssize_t n;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = 0;
	bin = dirname(exe);
	for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if (snprintf(buf, len, "%s/%s", bin, rel[i]) >= (int)len)
			return -ENAMETOOLONG;
		if (lib_in(buf))
			continue;
		if (realpath(buf, real))
			snprintf(buf, len, "%s", real);
		return 0;
	}
	fprintf(stderr,
		"softrnic: libibverbs.so.1 is neither in %s/%s nor in "
		"%s/../lib; set SOFTRNIC_LIB_DIR\n",
		bin, SRN_REL_LIBDIR, bin);
	return -ENOENT;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: softrnic COMMAND [ARGS]\n"
		"  exec -- CMD [ARGS...]  run CMD with softrnic's libibverbs.so.1 "
		"and librdmacm.so.1 first on the library path\n"
		"  devinfo                show softrnic0 (device, port, GID)\n"
		"  stat                   list the QPs on this host and the "
		"path each uses, and the RPC services and their counters\n"
		"  daemon                 (root) hold the host's port and hand "
		"each connection to the user process whose QP it is "
		"(optional: several users reachable from other hosts)\n"
		"  --help                 this text; COMMAND --help for one "
		"command\n"
		"  --version              print softrnic's version\n"
		"environment: SOFTRNIC_LIB_DIR, SOFTRNIC_IP, SOFTRNIC_LOG, "
		"SOFTRNIC_TRANSPORT, SOFTRNIC_PORT, SOFTRNIC_CM_PORT (see "
		"softrnic(1))\n");
}

struct verbs_api;
static int load_api(struct verbs_api *a);
static void exec_devnode(void);

static int cmd_exec(int argc, char **argv)
{
	char dir[PATH_MAX], *path;
	const char *old = getenv("LD_LIBRARY_PATH");

	if (argc > 1 && !strcmp(argv[1], "--help")) {
		printf("usage: softrnic exec -- CMD [ARGS...]\n"
		       "Runs CMD with softrnic's library directory first "
		       "on LD_LIBRARY_PATH (its libibverbs.so.1 and "
		       "librdmacm.so.1), so unmodified verbs and rdma_cm "
		       "programs use softrnic0.\n");
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--")) {
		argc--;
		argv++;
	}
	if (argc < 2) {
		fprintf(stderr, "softrnic exec: no command given\n");
		return 2;
	}
	if (lib_dir(dir, sizeof(dir)))
		return 1;
	if (asprintf(&path, "%s%s%s", dir, old && *old ? ":" : "",
		     old ? old : "") < 0)
		return 1;
	setenv("LD_LIBRARY_PATH", path, 1);
	free(path);
	exec_devnode();
	execvp(argv[1], argv + 1);
	fprintf(stderr, "softrnic exec: %s: %s\n", argv[1], strerror(errno));
	return 127;
}

struct verbs_api {
	struct ibv_device **(*get_list)(int *);
	void (*free_list)(struct ibv_device **);
	struct ibv_context *(*open)(struct ibv_device *);
	int (*close)(struct ibv_context *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_port)(struct ibv_context *, uint8_t, void *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
};

static int load_api(struct verbs_api *a)
{
	char dir[PATH_MAX], lib[PATH_MAX + 32];
	void *h;

	if (lib_dir(dir, sizeof(dir)))
		return -1;
	snprintf(lib, sizeof(lib), "%s/libibverbs.so.1", dir);
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "softrnic: %s\n", dlerror());
		return -1;
	}
	a->get_list = dlsym(h, "ibv_get_device_list");
	a->free_list = dlsym(h, "ibv_free_device_list");
	a->open = dlsym(h, "ibv_open_device");
	a->close = dlsym(h, "ibv_close_device");
	a->query_device = dlsym(h, "ibv_query_device");
	a->query_port = dlsym(h, "ibv_query_port");
	a->query_gid = dlsym(h, "ibv_query_gid");
	return a->get_list && a->open && a->query_device && a->query_port &&
			       a->query_gid ?
		       0 :
		       -1;
}

/* The device node UCX needs (devnode.c), named as the library names it. */
static void exec_devnode(void)
{
	struct ibv_device **list;
	struct verbs_api a;
	int n = 0;

	if (load_api(&a))
		return;
	list = a.get_list(&n);
	if (list && n > 0)
		srn_devnode_prepare(list[0]->dev_name);
	if (list)
		a.free_list(list);
}

static void print_device(struct verbs_api *a, struct ibv_context *ctx)
{
	struct ibv_device_attr d;
	struct ibv_port_attr p;
	union ibv_gid gid;
	char ip[INET6_ADDRSTRLEN];

	memset(&p, 0, sizeof(p));
	a->query_device(ctx, &d);
	a->query_port(ctx, 1, &p);
	a->query_gid(ctx, 1, 0, &gid);
	inet_ntop(AF_INET6, gid.raw, ip, sizeof(ip));
	printf("device:        %s\n", ctx->device->name);
	printf("vendor:        0x%x part 0x%x fw %s\n", d.vendor_id,
	       d.vendor_part_id, d.fw_ver);
	printf("limits:        max_qp %d max_qp_wr %d max_sge %d max_cq %d "
	       "max_cqe %d max_mr %d max_srq %d\n",
	       d.max_qp, d.max_qp_wr, d.max_sge, d.max_cq, d.max_cqe, d.max_mr,
	       d.max_srq);
	printf("atomics:       %s\n",
	       d.atomic_cap == IBV_ATOMIC_HCA ? "HCA" : "none");
	printf("port 1:        %s, link layer %s, MTU %d\n",
	       p.state == IBV_PORT_ACTIVE ? "ACTIVE" : "DOWN",
	       p.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "IB",
	       128 << p.active_mtu);
	printf("GID[0]:        %s (RoCE v2)\n", ip);
	printf("paths:         same host: shared memory; other hosts: TCP "
	       "(port %s); SOFTRNIC_TRANSPORT forces one\n",
	       getenv("SOFTRNIC_PORT") ? getenv("SOFTRNIC_PORT") : "4791");
}

static int cmd_devinfo(int argc, char **argv)
{
	struct verbs_api a;
	struct ibv_device **list;
	struct ibv_context *ctx;
	int n = 0;

	if (argc > 1 && !strcmp(argv[1], "--help")) {
		printf("usage: softrnic devinfo\nShows softrnic0 as the verbs "
		       "API reports it.\n");
		return 0;
	}
	if (load_api(&a))
		return 1;
	list = a.get_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "softrnic: no device\n");
		return 1;
	}
	ctx = a.open(list[0]);
	if (!ctx) {
		fprintf(stderr, "softrnic: open: %s\n", strerror(errno));
		return 1;
	}
	print_device(&a, ctx);
	a.close(ctx);
	a.free_list(list);
	return 0;
}

static const char *const srn_state_names[] = { "RESET", "INIT", "RTR", "RTS",
					       "SQD",	"SQE",	"ERR" };

/* Asks the owner of QP qpn (its abstract control socket) how it is
 * connected; prints one line. */
static int stat_one(unsigned qpn)
{
	struct srn_ctl_hdr req = { SRN_CTL_MAGIC, SRN_CTL_VERSION,
				   SRN_CTL_STAT_REQ, 0, sizeof(req) };
	struct srn_ctl_stat_rep r;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 2, 0 };
	int fd, n, len;

	len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
		       SRN_CTL_SOCK_FMT, qpn);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa,
		    offsetof(struct sockaddr_un, sun_path) + 1 + len) ||
	    send(fd, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req) ||
	    (n = recv(fd, &r, sizeof(r), 0)) != sizeof(r) ||
	    r.hdr.magic != SRN_CTL_MAGIC || r.hdr.type != SRN_CTL_STAT_REP) {
		close(fd);
		return -1;
	}
	close(fd);
	r.transport[sizeof(r.transport) - 1] = 0;
	r.desc[sizeof(r.desc) - 1] = 0;
	printf("0x%06x  %7u  %-5s  %-4s  %s\n", r.qpn, r.pid,
	       r.state < 7 ? srn_state_names[r.state] : "?",
	       r.transport[0] ? r.transport : "-",
	       r.transport[0] ? r.desc : "(not connected)");
	return 0;
}

static int cmd_stat(int argc, char **argv)
{
	FILE *f = fopen("/proc/net/unix", "r");
	char line[512];
	unsigned qpn, n = 0;

	if (argc > 1 && !strcmp(argv[1], "--help")) {
		printf("usage: softrnic stat\nLists every softrnic QP of this "
		       "host (network namespace): owner pid, state, and the "
		       "path to its peer (shm or tcp); then every rdma_cm id "
		       "of softrnic's librdmacm (pid, port space, state, QP, "
		       "addresses); then every softrnic "
		       "RPC service: workers started/max, callers queued, "
		       "calls, queued, dropped, grow requests, and per worker "
		       "its state and counters.\n");
		return 0;
	}
	if (!f) {
		perror("softrnic stat: /proc/net/unix");
		return 1;
	}
	printf("QPN       pid      state  path  peer\n");
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "@softrnic/qp/");

		/* listening sockets only: state 01 (unconnected) */
		if (p && sscanf(p, "@softrnic/qp/%x", &qpn) == 1 &&
		    strstr(line, " 00010000 0005 01 ") && !stat_one(qpn))
			n++;
	}
	fclose(f);
	printf("%u QP%s\n", n, n == 1 ? "" : "s");
	stat_cm();
	stat_rpc();
	return 0;
}

/* The pid that holds the host daemon's marker socket (root's), or -1. */
static int hostd_pid(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cr = { 0 };
	socklen_t clen = sizeof(cr);
	int fd, len;

	len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "%s",
		       SRN_CTL_HOSTD_SOCK);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa,
		    offsetof(struct sockaddr_un, sun_path) + 1 + len) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &clen) || cr.uid)
		cr.pid = -1;
	close(fd);
	return cr.pid;
}

/* The port in environment variable name, else def. */
static long env_port(const char *name, long def)
{
	const char *env = getenv(name);
	long port = env ? strtol(env, NULL, 10) : 0;

	return port > 0 && port <= 65535 ? port : def;
}

/* True when one of our descriptors is an IPv4 or IPv6 socket of that type
 * (listening, for SOCK_STREAM) bound to port: the library's, which holds
 * the port in daemon mode. */
static bool holds_port(int type, long port)
{
	struct sockaddr_in6 sa;
	socklen_t sl, vl;
	int v, fd;

	for (fd = 3; fd < 1024; fd++) {
		v = 0;
		vl = sizeof(v);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) || v != type)
			continue;
		v = 0;
		vl = sizeof(v);
		if (type == SOCK_STREAM &&
		    (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) || !v))
			continue;
		sl = sizeof(sa);
		if (getsockname(fd, (struct sockaddr *)&sa, &sl))
			continue;
		/* sin_port and sin6_port are at the same offset */
		if ((sa.sin6_family == AF_INET || sa.sin6_family == AF_INET6) &&
		    ntohs(sa.sin6_port) == port)
			return true;
	}
	return false;
}

/* Loads softrnic's librdmacm.so.1 (SOFTRNIC_DAEMON=1 set): its CM service
 * holds the CM port at once and hands each REQ over (rdmacm/cm_hostd.c).
 * Before the device opens: the transport's listener takes systemd's
 * LISTEN_FDS out of the environment. 0 when it holds the port. */
static int load_cm(void)
{
	char dir[PATH_MAX], lib[PATH_MAX + 32];

	if (lib_dir(dir, sizeof(dir)))
		return -1;
	snprintf(lib, sizeof(lib), "%s/librdmacm.so.1", dir);
	if (!dlopen(lib, RTLD_NOW | RTLD_LOCAL)) {
		fprintf(stderr, "softrnic: %s\n", dlerror());
		return -1;
	}
	if (holds_port(SOCK_STREAM,
		       env_port("SOFTRNIC_CM_PORT", SRN_CM_PORT_DEFAULT)))
		return 0;
	fprintf(stderr, "softrnic daemon: not holding the CM port (see the "
			"warning above); is it in use?\n");
	return -1;
}

/* The daemon's device is open (opened) and holds the port (the marker is
 * ours, or systemd's when socket-activated) and the UDP port: 0, else -1
 * (said). */
static int daemon_holds(bool opened, bool activated)
{
	if (!opened ||
	    (hostd_pid() != getpid() && !(activated && hostd_pid() > 0))) {
		fprintf(stderr, "softrnic daemon: not listening (see the "
				"warning above); is the port in use?\n");
		return -1;
	}
	if (!holds_port(SOCK_DGRAM, env_port("SOFTRNIC_PORT", 4791))) {
		fprintf(stderr,
			"softrnic daemon: not holding the UDP port (see "
			"the warning above); is it in use?\n");
		return -1;
	}
	return 0;
}

/*
 * softrnic daemon: loads librdmacm and opens the device with
 * SOFTRNIC_DAEMON=1, so that the libraries' own listeners hold the CM
 * port and the port alone (or take the sockets systemd passed) and hand
 * every connection over (docs/architecture.md, "The host daemon");
 * then waits for SIGTERM or SIGINT.
 */
static int cmd_daemon(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct verbs_api a;
	/* socket-activated: the marker is systemd's (its pid, not ours) */
	bool activated = getenv("LISTEN_PID") != NULL;
	sigset_t set;
	int n = 0, sig = 0;

	if (argc > 1 && !strcmp(argv[1], "--help")) {
		printf("usage: softrnic daemon\nRuns in the foreground, as "
		       "root: holds the host's softrnic port (SOFTRNIC_PORT, "
		       "or the socket systemd passes: softrnic.socket) and "
		       "hands each connection to the process that owns its "
		       "QP, whatever its user; the same for rdma_cm's port "
		       "(SOFTRNIC_CM_PORT), each connection to the process "
		       "listening on the rdma_cm port its REQ names; the "
		       "data of connections never passes through it. It "
		       "also holds UDP port 4791 and forwards each UD "
		       "datagram to its QP's process. Without it, only one "
		       "user's processes are reachable from other hosts "
		       "(docs/security.md).\n");
		return 0;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "softrnic daemon: must run as root (it hands "
				"connections to every user's QPs)\n");
		return 1;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL); /* the library's threads too */
	setenv("SOFTRNIC_DAEMON", "1", 1);
	if (load_api(&a) || load_cm())
		return 1;
	list = a.get_list(&n);
	ctx = list && n > 0 ? a.open(list[0]) : NULL;
	if (daemon_holds(ctx != NULL, activated))
		return 1;
	fprintf(stderr,
		"softrnic daemon: pid %d holds port %s (TCP and UDP) "
		"and CM port %s\n",
		(int)getpid(),
		getenv("SOFTRNIC_PORT") ? getenv("SOFTRNIC_PORT") : "4791",
		getenv("SOFTRNIC_CM_PORT") ? getenv("SOFTRNIC_CM_PORT") :
					     "4790");
	sigwait(&set, &sig);
	a.close(ctx);
	a.free_list(list);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], srn_cmd_names[0]))
		return cmd_exec(argc - 1, argv + 1);
	if (!strcmp(argv[1], srn_cmd_names[1]))
		return cmd_devinfo(argc - 1, argv + 1);
	if (!strcmp(argv[1], srn_cmd_names[2]))
		return cmd_stat(argc - 1, argv + 1);
	if (!strcmp(argv[1], srn_cmd_names[3]))
		return cmd_daemon(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--version")) {
		printf("softrnic %s\n", SRN_VERSION);
		return 0;
	}
	fprintf(stderr, "softrnic: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
