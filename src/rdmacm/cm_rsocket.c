// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: rsockets. Not offered in this phase: every call
 * exists (programs linked against rdma-core's librdmacm load) and fails
 * with ENOSYS, so a program falls back or stops with a clear error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <rdma/rsocket.h>

#include "util/srn_compiler.h"

#define SRN_RS_FAIL(ret)        \
	do {                    \
		errno = ENOSYS; \
		return (ret);   \
	} while (0)

SRN_EXPORT int rsocket(int domain, int type, int protocol)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rlisten(int socket, int backlog)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rconnect(int socket, const struct sockaddr *addr,
			socklen_t addrlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rshutdown(int socket, int how)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rclose(int socket)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			     struct sockaddr *src_addr, socklen_t *addrlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			   const struct sockaddr *dest_addr, socklen_t addrlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		       fd_set *exceptfds, struct timeval *timeout)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rgetpeername(int socket, struct sockaddr *addr,
			    socklen_t *addrlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rgetsockname(int socket, struct sockaddr *addr,
			    socklen_t *addrlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rsetsockopt(int socket, int level, int optname,
			   const void *optval, socklen_t optlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval,
			   socklen_t *optlen)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int rfcntl(int socket, int cmd, ...)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
			off_t offset)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	SRN_RS_FAIL(-1);
}

SRN_EXPORT size_t riowrite(int socket, const void *buf, size_t count,
			   off_t offset, int flags)
{
	SRN_RS_FAIL(0);
}
