// SPDX-License-Identifier: MIT
/*
 * softrnic RPC — srn_clnt_create: a standard CLIENT. Over "tcp", and over
 * "udp" when rpcbind gives the port, it is libtirpc's own client; over
 * "shm" it is ours (rpc_clnt_shm.c): the call is written straight into a
 * waiting worker's slot; over "udp" to a given port, ours too
 * (rpc_clnt_udp.c): libtirpc's datagram client whose caller polls for its
 * reply a little before it sleeps.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/srn_rpc.h"
#include "rpc/rpc_clnt.h"
#include "util/srn_compiler.h"

/* Splits "name[:port]" ("[v6]:port" too); port 0 when there is none. */
static int srn_rpc_split_host(const char *host, char *name, size_t cap,
			      unsigned short *port_p)
{
	const char *colon = strrchr(host, ':'), *end = host + strlen(host);
	char *e;
	unsigned long v;

	*port_p = 0;
	if (colon && (strchr(host, ':') == colon || host[0] == '[')) {
		v = strtoul(colon + 1, &e, 10);
		if (*e || colon[1] == 0 || v == 0 || v > 65535)
			return -EINVAL;
		*port_p = (unsigned short)v;
		end = colon;
	}
	if (host[0] == '[') {
		host++;
		if (end[-1] == ']')
			end--;
	}
	if ((size_t)(end - host) >= cap)
		return -EINVAL;
	memcpy(name, host, (size_t)(end - host));
	name[end - host] = 0;
	return 0;
}

static bool srn_rpc_addr_local(const struct sockaddr *sa)
{
	struct ifaddrs *ifa, *i;
	bool found = false;

	if (sa->sa_family == AF_INET &&
	    (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) ==
		    127)
		return true;
	if (getifaddrs(&ifa) < 0)
		return false;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    sa->sa_family != AF_INET)
			continue;
		found = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
			((const struct sockaddr_in *)sa)->sin_addr.s_addr;
	}
	freeifaddrs(ifa);
	return found;
}

/* Is host this host? (an empty name, localhost, one of our addresses) */
static bool srn_rpc_host_local(const char *name)
{
	struct addrinfo hints = { .ai_family = AF_INET }, *ai;
	bool local;

	if (!name[0] || !strcmp(name, "localhost"))
		return true;
	if (getaddrinfo(name, NULL, &hints, &ai))
		return false;
	local = srn_rpc_addr_local(ai->ai_addr);
	freeaddrinfo(ai);
	return local;
}

static CLIENT *srn_rpc_clnt_net(const char *name, unsigned short port,
				rpcprog_t prog, rpcvers_t vers, bool udp)
{
	struct addrinfo hints = { .ai_family = AF_INET }, *ai;
	struct sockaddr_in sin;

	if (!port)
		return clnt_create(name[0] ? name : "localhost", prog, vers,
				   udp ? "udp" : "tcp");
	if (getaddrinfo(name[0] ? name : "localhost", NULL, &hints, &ai)) {
		rpc_createerr.cf_stat = RPC_UNKNOWNHOST;
		return NULL;
	}
	memcpy(&sin, ai->ai_addr, sizeof(sin));
	freeaddrinfo(ai);
	sin.sin_port = htons(port);
	if (udp)
		return srn_rpc_clnt_udp_create(&sin, prog, vers);
	return srn_rpc_clnt_tcp_create(&sin, prog, vers);
}

SRN_EXPORT CLIENT *srn_clnt_create(const char *host, rpcprog_t prog,
				   rpcvers_t vers, const char *nettype)
{
	char name[256];
	unsigned short port;
	bool local;
	CLIENT *cl;

	if (!nettype)
		nettype = "auto";
	if (srn_rpc_split_host(host ? host : "", name, sizeof(name), &port)) {
		rpc_createerr.cf_stat = RPC_UNKNOWNHOST;
		return NULL;
	}
	if (!strcmp(nettype, "udp") || !strcmp(nettype, "tcp"))
		return srn_rpc_clnt_net(name, port, prog, vers,
					nettype[0] == 'u');
	if (strcmp(nettype, "shm") && strcmp(nettype, "auto")) {
		rpc_createerr.cf_stat = RPC_UNKNOWNPROTO;
		return NULL;
	}
	local = srn_rpc_host_local(name);
	if (nettype[0] == 's') {
		if (local)
			return srn_rpc_clnt_shm_create(prog, vers);
		rpc_createerr.cf_stat = RPC_UNKNOWNHOST;
		return NULL;
	}
	cl = local ? srn_rpc_clnt_shm_create(prog, vers) : NULL;
	return cl ? cl : srn_rpc_clnt_net(name, port, prog, vers, false);
}
