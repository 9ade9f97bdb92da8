// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: rsockets, the data calls (docs/rsockets.md):
 * rrecv and rsend and their variants, riomap, riounmap, riowrite. A call
 * that cannot go on blocks in the kernel (srn_rs_wait) unless the rsocket
 * is non-blocking or the call says MSG_DONTWAIT: then EAGAIN.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rdmacm/rs.h"
#include "util/srn_compiler.h"

/* An iovec cursor: the vectors left and the offset into the first. */
struct srn_rs_cur {
	const struct iovec *iov;
	int cnt;
	struct iovec first; /* iov[0] less what was done */
	struct iovec v[8]; /* first, then iov[1..7]: what calls see */
};

static size_t srn_rs_iov_len(const struct iovec *iov, int cnt)
{
	size_t n = 0;
	int i;

	for (i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* The next vectors (8 at most) of cur, after done bytes more. */
static const struct iovec *srn_rs_cur_get(struct srn_rs_cur *c, size_t done,
					  int *cnt_p)
{
	int i;

	while (c->cnt && done >= c->first.iov_len) {
		done -= c->first.iov_len;
		c->iov++;
		c->cnt--;
		if (c->cnt)
			c->first = c->iov[0];
	}
	if (c->cnt) {
		c->first.iov_base = (uint8_t *)c->first.iov_base + done;
		c->first.iov_len -= done;
	}
	*cnt_p = c->cnt < 8 ? c->cnt : 8;
	for (i = 0; i < *cnt_p; i++)
		c->v[i] = i ? c->iov[i] : c->first;
	return c->v;
}

static void srn_rs_cur_init(struct srn_rs_cur *c, const struct iovec *iov,
			    int cnt)
{
	c->iov = iov;
	c->cnt = cnt;
	if (cnt)
		c->first = iov[0];
}

static bool srn_rs_nb(const struct srn_rs *rs, int flags)
{
	return rs->nonblock || (flags & MSG_DONTWAIT);
}

/* One pass of a receive: bytes read, or 0 and *done_p at end of stream */
static int srn_rs_recv_state(struct srn_rs *rs)
{
	switch (rs->state) {
	case SRN_RSS_CONNECTED:
	case SRN_RSS_CONNECTING:
		return rs->fin_rcvd || rs->shut_rd ? 1 : 0;
	case SRN_RSS_CLOSED:
		return 1; /* end of stream */
	default:
		return -ENOTCONN;
	}
}

static ssize_t srn_rs_dg_recvv(struct srn_rs *rs, const struct iovec *iov,
			       int iovcnt, int flags, struct sockaddr *from,
			       socklen_t *fromlen)
{
	ssize_t ret = srn_rs_dg_recvfrom(rs, iov, iovcnt, flags, from, fromlen);

	pthread_mutex_unlock(&rs->lock);
	return ret < 0 ? srn_rs_fail(ret) : ret;
}

static ssize_t srn_rs_recvv(int fd, const struct iovec *iov, int iovcnt,
			    int flags, struct sockaddr *from,
			    socklen_t *fromlen)
{
	struct srn_rs *rs = srn_rs_lock_fd(fd);
	size_t want = srn_rs_iov_len(iov, iovcnt), got = 0;
	struct srn_rs_cur cur;
	const struct iovec *v;
	int ret = 0, n;

	if (!rs)
		return -1;
	if (rs->dgram)
		return srn_rs_dg_recvv(rs, iov, iovcnt, flags, from, fromlen);
	srn_rs_cur_init(&cur, iov, iovcnt);
	while (got < want) {
		srn_rs_progress(rs);
		if (rs->rq_cnt && !rs->shut_rd) {
			size_t r;

			v = srn_rs_cur_get(&cur, 0, &n);
			r = srn_rs_read(rs, v, n, want - got, flags & MSG_PEEK);
			got += r;
			srn_rs_cur_get(&cur, r, &n);
			if (!(flags & MSG_WAITALL) || (flags & MSG_PEEK))
				break;
			continue;
		}
		ret = srn_rs_recv_state(rs);
		if (ret)
			break; /* the end (1), or not connected */
		if (got && !(flags & MSG_WAITALL))
			break;
		if (srn_rs_nb(rs, flags)) {
			ret = got ? 0 : -EAGAIN;
			break;
		}
		ret = srn_rs_wait(rs, POLLIN, -1);
		if (ret)
			break;
	}
	pthread_mutex_unlock(&rs->lock);
	if (got)
		return got;
	return ret < 0 ? srn_rs_fail(ret) : 0;
}

static int srn_rs_send_state(struct srn_rs *rs)
{
	if (rs->shut_wr || rs->fin_sent)
		return -EPIPE;
	switch (rs->state) {
	case SRN_RSS_CONNECTED:
	case SRN_RSS_CONNECTING:
		return 0;
	case SRN_RSS_CLOSED:
		return rs->err == ECONNRESET ? -ECONNRESET : -EPIPE;
	default:
		return -ENOTCONN;
	}
}

static ssize_t srn_rs_sendv(int fd, const struct iovec *iov, int iovcnt,
			    int flags, const struct sockaddr *to)
{
	struct srn_rs *rs = srn_rs_lock_fd(fd);
	size_t want = srn_rs_iov_len(iov, iovcnt), sent = 0;
	struct srn_rs_cur cur;
	const struct iovec *v;
	ssize_t r;
	int ret = 0, n;

	if (!rs)
		return -1;
	if (rs->dgram) {
		r = srn_rs_dg_sendto(rs, iov, iovcnt, flags, to);
		pthread_mutex_unlock(&rs->lock);
		return r < 0 ? srn_rs_fail(r) : r;
	}
	if (to) { /* a connected stream: as send(2), EISCONN */
		pthread_mutex_unlock(&rs->lock);
		return srn_rs_fail(-EISCONN);
	}
	srn_rs_cur_init(&cur, iov, iovcnt);
	while (sent < want) {
		srn_rs_progress(rs);
		ret = srn_rs_send_state(rs);
		if (ret)
			break;
		while (sent < want && srn_rs_can_send(rs)) {
			v = srn_rs_cur_get(&cur, 0, &n);
			ret = srn_rs_post_data(rs, SRN_RS_DATA, NULL, 0, v, n,
					       want - sent);
			if (ret < 0)
				break;
			sent += ret;
			srn_rs_cur_get(&cur, ret, &n);
			ret = 0;
		}
		if (ret || sent == want)
			break;
		if (srn_rs_nb(rs, flags)) {
			ret = sent ? 0 : -EAGAIN;
			break;
		}
		ret = srn_rs_wait(rs, POLLOUT, -1);
		if (ret)
			break;
	}
	pthread_mutex_unlock(&rs->lock);
	if (sent)
		return sent;
	return ret < 0 ? srn_rs_fail(ret) : 0;
}

SRN_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec v = { .iov_base = buf, .iov_len = len };

	return srn_rs_recvv(socket, &v, 1, flags, NULL, NULL);
}

/* A stream's source is its peer. */
static void srn_rs_stream_from(int socket, struct sockaddr *from,
			       socklen_t *fromlen)
{
	struct srn_rs *rs = srn_rs_get(socket);

	if (!from || !fromlen || !rs || rs->dgram)
		return;
	if (rgetpeername(socket, from, fromlen))
		*fromlen = 0;
}

SRN_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			     struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct iovec v = { .iov_base = buf, .iov_len = len };
	ssize_t ret = srn_rs_recvv(socket, &v, 1, flags, src_addr, addrlen);

	if (ret >= 0)
		srn_rs_stream_from(socket, src_addr, addrlen);
	return ret;
}

SRN_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	ssize_t ret;

	if (!msg || msg->msg_iovlen > IOV_MAX)
		return srn_rs_fail(-EINVAL);
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	ret = srn_rs_recvv(socket, msg->msg_iov, msg->msg_iovlen, flags,
			   msg->msg_name, &msg->msg_namelen);
	if (ret >= 0)
		srn_rs_stream_from(socket, msg->msg_name, &msg->msg_namelen);
	return ret;
}

SRN_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };

	return srn_rs_sendv(socket, &v, 1, flags, NULL);
}

SRN_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			   const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };

	if (dest_addr && addrlen < sizeof(struct sockaddr_in))
		return srn_rs_fail(-EINVAL);
	return srn_rs_sendv(socket, &v, 1, flags, dest_addr);
}

SRN_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg || msg->msg_iovlen > IOV_MAX)
		return srn_rs_fail(-EINVAL);
	return srn_rs_sendv(socket, msg->msg_iov, msg->msg_iovlen, flags,
			    msg->msg_namelen ? msg->msg_name : NULL);
}

SRN_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

SRN_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return srn_rs_fail(-EINVAL);
	return srn_rs_recvv(socket, iov, iovcnt, 0, NULL, NULL);
}

SRN_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

SRN_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return srn_rs_fail(-EINVAL);
	return srn_rs_sendv(socket, iov, iovcnt, 0, NULL);
}

/* IOMAP or IOUNMAP of m to the peer: waits for the connection and a
 * credit (riomap has no EAGAIN). */
static int srn_rs_send_iomap(struct srn_rs *rs, enum srn_rs_msg_kind kind,
			     const struct srn_rs_iomap *m)
{
	struct srn_rs_iomap_msg msg = {
		.offset = htobe64((uint64_t)m->offset),
		.addr = htobe64((uintptr_t)m->addr),
		.len = htobe64(m->len),
		.rkey = htobe32(m->mr ? m->mr->rkey : 0),
	};
	int ret;

	for (;;) {
		srn_rs_progress(rs);
		ret = srn_rs_send_state(rs);
		if (ret)
			return ret;
		if (srn_rs_can_send(rs))
			break;
		ret = srn_rs_wait(rs, POLLOUT, -1); /* also when non-blocking */
		if (ret)
			return ret;
	}
	ret = srn_rs_post_data(rs, kind, &msg, sizeof(msg), NULL, 0, 0);
	return ret < 0 ? ret : 0;
}

static off_t srn_rs_iomap_next(const struct srn_rs *rs)
{
	off_t end = 0;
	uint32_t i;

	for (i = 0; i < rs->niomap; i++)
		if (rs->iomap[i].offset + (off_t)rs->iomap[i].len > end)
			end = rs->iomap[i].offset + rs->iomap[i].len;
	return end;
}

static int srn_rs_iomap_add(struct srn_rs *rs, void *buf, size_t len,
			    off_t offset, off_t *offset_p)
{
	struct srn_rs_iomap *t, *m;
	int ret;

	if ((rs->iomapsize && rs->niomap >= rs->iomapsize) ||
	    rs->niomap >= SRN_RS_RMAP_MAX) /* what the peer takes */
		return -ENOMEM;
	t = realloc(rs->iomap, (rs->niomap + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	rs->iomap = t;
	m = &t[rs->niomap];
	m->addr = buf;
	m->len = len;
	m->offset = offset == -1 ? srn_rs_iomap_next(rs) : offset;
	m->mr = ibv_reg_mr(rs->pd, buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!m->mr)
		return -(errno ? errno : ENOMEM);
	ret = srn_rs_send_iomap(rs, SRN_RS_IOMAP, m);
	if (ret) {
		ibv_dereg_mr(m->mr);
		return ret;
	}
	rs->niomap++;
	*offset_p = m->offset;
	return 0;
}

SRN_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
			off_t offset)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	off_t out = -1;
	int ret;

	if (!rs)
		return -1;
	if (!buf || !len || !(prot & PROT_WRITE) ||
	    (prot & ~(PROT_READ | PROT_WRITE)) || flags || offset < -1)
		ret = -EINVAL;
	else if (rs->state != SRN_RSS_CONNECTED &&
		 rs->state != SRN_RSS_CONNECTING)
		ret = -ENOTCONN;
	else
		ret = srn_rs_iomap_add(rs, buf, len, offset, &out);
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : out;
}

SRN_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	int ret = -EINVAL;
	uint32_t i;

	if (!rs)
		return -1;
	for (i = 0; i < rs->niomap; i++) {
		struct srn_rs_iomap m = rs->iomap[i];

		if (m.addr != buf || m.len != len)
			continue;
		rs->iomap[i] = rs->iomap[--rs->niomap];
		ret = 0;
		if (rs->state == SRN_RSS_CONNECTED)
			srn_rs_send_iomap(rs, SRN_RS_IOUNMAP, &m);
		ibv_dereg_mr(m.mr);
		break;
	}
	pthread_mutex_unlock(&rs->lock);
	return ret ? srn_rs_fail(ret) : 0;
}

static const struct srn_rs_rmap *srn_rs_rmap_find(const struct srn_rs *rs,
						  uint64_t off, size_t count)
{
	uint32_t i;

	for (i = 0; i < rs->nrmap; i++) {
		const struct srn_rs_rmap *m = &rs->rmap[i];

		if (off >= m->offset && off - m->offset <= m->len &&
		    count <= m->len - (off - m->offset))
			return m;
	}
	return NULL;
}

SRN_EXPORT size_t riowrite(int socket, const void *buf, size_t count,
			   off_t offset, int flags)
{
	struct srn_rs *rs = srn_rs_lock_fd(socket);
	const struct srn_rs_rmap *m;
	size_t done = 0;
	int ret = 0;

	if (!rs)
		return (size_t)-1;
	while (done < count) {
		srn_rs_progress(rs);
		ret = srn_rs_send_state(rs);
		m = srn_rs_rmap_find(rs, offset, count);
		if (!ret && !m)
			ret = -EINVAL; /* the peer mapped nothing there */
		if (ret)
			break;
		while (done < count && srn_rs_slot_free(rs)) {
			ret = srn_rs_post_write(rs, m, offset + done,
						(const uint8_t *)buf + done,
						count - done);
			if (ret < 0)
				break;
			done += ret;
			ret = 0;
		}
		if (ret || done == count)
			break;
		if (srn_rs_nb(rs, flags)) {
			ret = done ? 0 : -EAGAIN;
			break;
		}
		ret = srn_rs_wait(rs, POLLWRBAND, -1); /* a free slot */
		if (ret)
			break;
	}
	pthread_mutex_unlock(&rs->lock);
	if (done)
		return done;
	return ret < 0 ? (size_t)srn_rs_fail(ret) : 0;
}
