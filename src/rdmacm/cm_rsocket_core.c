// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: rsockets, the bottom block (docs/rsockets.md).
 * The table of rsockets by number, a connection's resources (QP, CQ,
 * buffers), its completions (receive ring, credits, send slots), the
 * messages it posts and its rdma_cm events. Everything here runs with the
 * rsocket's lock held and never blocks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdmacm/rs.h"
#include "util/srn_compiler.h"
#include "util/util.h"

const char *const srn_rs_state_names[SRN_RSS_NR] = {
	[SRN_RSS_INIT] = "INIT",	   [SRN_RSS_BOUND] = "BOUND",
	[SRN_RSS_LISTEN] = "LISTEN",	   [SRN_RSS_ADDR] = "ADDR",
	[SRN_RSS_ROUTE] = "ROUTE",	   [SRN_RSS_CONNECTING] = "CONNECTING",
	[SRN_RSS_CONNECTED] = "CONNECTED", [SRN_RSS_CLOSED] = "CLOSED",
	[SRN_RSS_FAILED] = "FAILED",
};

static pthread_mutex_t srn_rs_tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_rs **srn_rs_tab; /* by number */
static int srn_rs_tab_len;

int srn_rs_fail(int neg_errno)
{
	errno = -neg_errno;
	return -1;
}

int srn_rs_nonblock_fd(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* A new rsocket with its own event channel; no id yet. */
struct srn_rs *srn_rs_alloc(int domain)
{
	struct srn_rs *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->ch = rdma_create_event_channel();
	if (!rs->ch || srn_rs_nonblock_fd(rs->ch->fd)) {
		if (rs->ch)
			rdma_destroy_event_channel(rs->ch);
		free(rs);
		return NULL;
	}
	pthread_mutex_init(&rs->lock, NULL);
	rs->fd = rs->ch->fd;
	rs->domain = domain;
	rs->sndbuf = SRN_RS_DEF_BUF;
	rs->rcvbuf = SRN_RS_DEF_BUF;
	rs->inline_size = 64;
	rs->conn_dest = -1;
	return rs;
}

struct srn_rs *srn_rs_new(int domain)
{
	struct srn_rs *rs = srn_rs_alloc(domain);

	if (!rs)
		return NULL;
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP)) {
		int e = errno;

		srn_rs_free(rs);
		errno = e;
		return NULL;
	}
	return rs;
}

/* An rsocket for a connection request's id (raccept): the id moves to
 * the new rsocket's channel. */
struct srn_rs *srn_rs_child(const struct srn_rs *lrs, struct rdma_cm_id *id)
{
	struct srn_rs *rs = srn_rs_alloc(lrs->domain);

	if (!rs)
		return NULL;
	if (rdma_migrate_id(id, rs->ch)) {
		int e = errno;

		srn_rs_free(rs);
		errno = e;
		return NULL;
	}
	rs->id = id;
	id->context = rs;
	rs->sndbuf = lrs->sndbuf;
	rs->rcvbuf = lrs->rcvbuf;
	rs->sqsize = lrs->sqsize;
	rs->rqsize = lrs->rqsize;
	rs->nodelay = lrs->nodelay;
	rs->keepalive = lrs->keepalive;
	rs->inline_size = lrs->inline_size;
	rs->iomapsize = lrs->iomapsize;
	return rs;
}

int srn_rs_insert(struct srn_rs *rs)
{
	int ret = 0;

	pthread_mutex_lock(&srn_rs_tab_lock);
	if (rs->fd >= srn_rs_tab_len) {
		int len = rs->fd < 64 ? 128 : rs->fd * 2;
		struct srn_rs **t = realloc(srn_rs_tab, len * sizeof(*t));

		if (!t) {
			ret = -ENOMEM;
			goto out;
		}
		memset(t + srn_rs_tab_len, 0,
		       (len - srn_rs_tab_len) * sizeof(*t));
		srn_rs_tab = t;
		srn_rs_tab_len = len;
	}
	srn_rs_tab[rs->fd] = rs;
out:
	pthread_mutex_unlock(&srn_rs_tab_lock);
	return ret;
}

struct srn_rs *srn_rs_get(int fd)
{
	struct srn_rs *rs = NULL;

	pthread_mutex_lock(&srn_rs_tab_lock);
	if (fd >= 0 && fd < srn_rs_tab_len)
		rs = srn_rs_tab[fd];
	pthread_mutex_unlock(&srn_rs_tab_lock);
	return rs;
}

/* The rsocket numbered fd, locked; NULL with errno EBADF if none. */
struct srn_rs *srn_rs_lock_fd(int fd)
{
	struct srn_rs *rs = srn_rs_get(fd);

	if (!rs) {
		errno = EBADF;
		return NULL;
	}
	pthread_mutex_lock(&rs->lock);
	return rs;
}

void srn_rs_remove(struct srn_rs *rs)
{
	pthread_mutex_lock(&srn_rs_tab_lock);
	if (rs->fd < srn_rs_tab_len && srn_rs_tab[rs->fd] == rs)
		srn_rs_tab[rs->fd] = NULL;
	pthread_mutex_unlock(&srn_rs_tab_lock);
}

static void srn_rs_unmap(uint8_t **buf, size_t *len, struct ibv_mr **mr)
{
	if (*mr)
		ibv_dereg_mr(*mr);
	if (*buf)
		munmap(*buf, *len);
	*mr = NULL;
	*buf = NULL;
	*len = 0;
}

void srn_rs_free(struct srn_rs *rs)
{
	uint32_t i;

	if (rs->qp && rs->dgram)
		ibv_destroy_qp(rs->qp);
	else if (rs->qp)
		rdma_destroy_qp(rs->id);
	for (i = 0; i < rs->ndests; i++)
		ibv_destroy_ah(rs->dests[i].ah);
	free(rs->dests);
	if (rs->rch)
		rdma_destroy_event_channel(rs->rch);
	srn_rs_unmap(&rs->rbuf, &rs->rbuf_len, &rs->rmr);
	srn_rs_unmap(&rs->sbuf, &rs->sbuf_len, &rs->smr);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	if (rs->id)
		rdma_destroy_id(rs->id);
	rdma_destroy_event_channel(rs->ch);
	free(rs->rq_idx);
	free(rs->rq_len);
	free(rs->iomap);
	free(rs->rmap);
	free(rs->sleepers);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

int srn_rs_map(struct ibv_pd *pd, size_t len, int access, uint8_t **buf_p,
	       size_t *len_p, struct ibv_mr **mr_p)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -ENOMEM;
	*buf_p = p;
	*len_p = len;
	*mr_p = ibv_reg_mr(pd, p, len, access);
	if (!*mr_p)
		return -(errno ? errno : ENOMEM);
	return 0;
}

int srn_rs_post_recv(struct srn_rs *rs, uint32_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(rs->rbuf + (size_t)idx * rs->rbuf_size),
		.length = rs->rbuf_size,
		.lkey = rs->rmr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = idx, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return -ibv_post_recv(rs->qp, &wr, &bad);
}

static uint32_t srn_rs_clamp(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static int srn_rs_make_qp(struct srn_rs *rs)
{
	struct ibv_qp_init_attr a = { 0 };

	rs->pd = ibv_alloc_pd(rs->id->verbs);
	rs->cch = ibv_create_comp_channel(rs->id->verbs);
	if (!rs->pd || !rs->cch || srn_rs_nonblock_fd(rs->cch->fd))
		return -ENOMEM;
	rs->cq = ibv_create_cq(rs->id->verbs, rs->sq_depth + rs->nrbuf, rs,
			       rs->cch, 0);
	if (!rs->cq)
		return -(errno ? errno : ENOMEM);
	a.send_cq = rs->cq;
	a.recv_cq = rs->cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = rs->sq_depth;
	a.cap.max_recv_wr = rs->nrbuf;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	if (rdma_create_qp(rs->id, rs->pd, &a))
		return -(errno ? errno : ENOMEM);
	rs->qp = rs->id->qp;
	return 0;
}

/* A connection's resources, before rdma_connect or rdma_accept. */
int srn_rs_setup(struct srn_rs *rs)
{
	uint32_t i;
	int ret;

	rs->rbuf_size = SRN_RS_BUF_SIZE;
	rs->rbufs = rs->rqsize ? rs->rqsize : rs->rcvbuf / rs->rbuf_size;
	rs->rbufs = srn_rs_clamp(rs->rbufs, SRN_RS_BUFS_MIN, 1024);
	rs->nrbuf = rs->rbufs + SRN_RS_CTRL_SLOTS;
	rs->nsbuf = rs->sqsize ? rs->sqsize : rs->sndbuf / SRN_RS_BUF_SIZE;
	rs->nsbuf = srn_rs_clamp(rs->nsbuf, 2, 1024);
	rs->sq_depth = rs->nsbuf + SRN_RS_CTRL_SLOTS;
	ret = srn_rs_make_qp(rs);
	if (ret)
		return ret;
	ret = srn_rs_map(rs->pd, (size_t)rs->nrbuf * rs->rbuf_size,
			 IBV_ACCESS_LOCAL_WRITE, &rs->rbuf, &rs->rbuf_len,
			 &rs->rmr);
	if (ret)
		return ret;
	rs->rq_idx = calloc(rs->nrbuf, sizeof(*rs->rq_idx));
	rs->rq_len = calloc(rs->nrbuf, sizeof(*rs->rq_len));
	if (!rs->rq_idx || !rs->rq_len)
		return -ENOMEM;
	for (i = 0; i < rs->nrbuf; i++) {
		ret = srn_rs_post_recv(rs, i);
		if (ret)
			return ret;
	}
	rs->peer_view = rs->rbufs;
	return 0;
}

void srn_rs_hello_make(const struct srn_rs *rs, struct srn_rs_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = htobe32(SRN_RS_MAGIC);
	h->version = SRN_RS_VERSION;
	h->bufs = htobe32(rs->rbufs);
	h->buf_size = htobe32(rs->rbuf_size);
}

/* The peer's hello: its credits and buffer size; the send slots. */
int srn_rs_peer(struct srn_rs *rs, const void *pdata, size_t len)
{
	struct srn_rs_hello h;
	int ret = srn_rs_hello_check(pdata, len, &h);

	if (ret)
		return ret;
	rs->credits = h.bufs;
	rs->peer_bufs = h.bufs;
	rs->peer_buf = h.buf_size < SRN_RS_BUF_SIZE ? h.buf_size :
						      SRN_RS_BUF_SIZE;
	return srn_rs_map(rs->pd, (size_t)rs->nsbuf * rs->peer_buf, 0,
			  &rs->sbuf, &rs->sbuf_len, &rs->smr);
}

static int srn_rs_post(struct srn_rs *rs, uint64_t wr_id, struct ibv_sge *sge,
		       enum srn_rs_msg_kind kind)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = sge,
		.num_sge = sge ? 1 : 0,
		.opcode = IBV_WR_SEND_WITH_IMM,
		.imm_data = srn_rs_imm(kind, rs->owed),
	};
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(rs->qp, &wr, &bad);

	if (ret)
		return -ret;
	rs->peer_view += rs->owed;
	rs->owed = 0;
	rs->sq_out++;
	return 0;
}

/* CREDIT or FIN: needs a send WR, no credit; -EAGAIN when none is free. */
int srn_rs_post_ctrl(struct srn_rs *rs, enum srn_rs_msg_kind kind)
{
	if (!rs->qp || rs->sq_out >= rs->sq_depth)
		return -EAGAIN;
	return srn_rs_post(rs, SRN_RS_WR_SEND | SRN_RS_WR_CTRL, NULL, kind);
}

bool srn_rs_can_send(const struct srn_rs *rs)
{
	return rs->state == SRN_RSS_CONNECTED && !rs->fin_sent &&
	       rs->credits > 0 && rs->s_used < rs->nsbuf &&
	       rs->sq_out < rs->sq_depth;
}

/*
 * DATA, IOMAP, IOUNMAP: head_len bytes of head, then up to the peer's buffer
 * size of the len bytes in iov, copied into the next send slot. The caller
 * checked srn_rs_can_send. Returns the bytes of iov taken, or -errno.
 */
int srn_rs_post_data(struct srn_rs *rs, enum srn_rs_msg_kind kind,
		     const void *head, size_t head_len, const struct iovec *iov,
		     int iovcnt, size_t len)
{
	uint32_t slot = rs->s_head % rs->nsbuf;
	uint8_t *p = rs->sbuf + (size_t)slot * rs->peer_buf;
	size_t room = rs->peer_buf - head_len, n = 0;
	struct ibv_sge sge;
	int i, ret;

	if (head_len)
		memcpy(p, head, head_len);
	for (i = 0; i < iovcnt && n < len && n < room; i++) {
		size_t c = iov[i].iov_len;

		if (c > len - n)
			c = len - n;
		if (c > room - n)
			c = room - n;
		if (c)
			memcpy(p + head_len + n, iov[i].iov_base, c);
		n += c;
	}
	sge.addr = (uintptr_t)p;
	sge.length = head_len + n;
	sge.lkey = rs->smr->lkey;
	ret = srn_rs_post(rs, SRN_RS_WR_SEND | slot, &sge, kind);
	if (ret)
		return ret;
	rs->s_head++;
	rs->s_used++;
	rs->credits--;
	return n;
}

/* riowrite: len bytes (at most a slot) of buf into the peer's mapped
 * buffer m at riomap offset, an RDMA WRITE from the next send slot. The
 * caller checked srn_rs_slot_free. */
int srn_rs_post_write(struct srn_rs *rs, const struct srn_rs_rmap *m,
		      uint64_t offset, const void *buf, size_t len)
{
	uint32_t slot = rs->s_head % rs->nsbuf;
	uint8_t *p = rs->sbuf + (size_t)slot * rs->peer_buf;
	struct ibv_sge sge = { .addr = (uintptr_t)p, .lkey = rs->smr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = SRN_RS_WR_SEND | slot,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
	};
	struct ibv_send_wr *bad;
	int ret;

	if (len > rs->peer_buf)
		len = rs->peer_buf;
	memcpy(p, buf, len);
	sge.length = len;
	wr.wr.rdma.remote_addr = m->addr + (offset - m->offset);
	wr.wr.rdma.rkey = m->rkey;
	ret = ibv_post_send(rs->qp, &wr, &bad);
	if (ret)
		return -ret;
	rs->sq_out++;
	rs->s_head++;
	rs->s_used++;
	return len;
}

bool srn_rs_slot_free(const struct srn_rs *rs)
{
	return rs->state == SRN_RSS_CONNECTED && !rs->fin_sent &&
	       rs->s_used < rs->nsbuf && rs->sq_out < rs->sq_depth;
}

/* Returns credits when enough are freed or the peer runs short, and the
 * FIN once it fits. */
static void srn_rs_flush_ctrl(struct srn_rs *rs)
{
	uint32_t low = rs->rbufs / 4 ? rs->rbufs / 4 : 1;

	if (rs->dgram ||
	    (rs->state != SRN_RSS_CONNECTED && rs->state != SRN_RSS_CONNECTING))
		return;
	if (rs->fin_wanted && !srn_rs_post_ctrl(rs, SRN_RS_FIN)) {
		rs->fin_wanted = false;
		rs->fin_sent = true;
	}
	if (rs->owed && (rs->owed >= low || rs->peer_view < low))
		srn_rs_post_ctrl(rs, SRN_RS_CREDIT);
}

/* Frees the oldest received buffer: reposted, one credit owed. */
void srn_rs_release_head(struct srn_rs *rs)
{
	uint32_t idx = rs->rq_idx[rs->rq_head];

	rs->rq_head = (rs->rq_head + 1) % rs->nrbuf;
	rs->rq_cnt--;
	rs->rq_off = 0;
	if (srn_rs_post_recv(rs, idx) == 0)
		rs->owed++;
}

/* Copies received bytes into iov (len at most); peek leaves them. */
size_t srn_rs_read(struct srn_rs *rs, const struct iovec *iov, int iovcnt,
		   size_t len, bool peek)
{
	uint32_t at = rs->rq_head, left = rs->rq_cnt, off = rs->rq_off;
	size_t n = 0, io = 0;
	int i = 0;

	while (left && n < len && i < iovcnt) {
		const uint8_t *src =
			rs->rbuf + (size_t)rs->rq_idx[at] * rs->rbuf_size;
		size_t c = rs->rq_len[at] - off;

		if (c > iov[i].iov_len - io)
			c = iov[i].iov_len - io;
		if (c > len - n)
			c = len - n;
		memcpy((uint8_t *)iov[i].iov_base + io, src + off, c);
		n += c;
		io += c;
		off += c;
		if (io == iov[i].iov_len) {
			i++;
			io = 0;
		}
		if (off < rs->rq_len[at])
			continue;
		off = 0;
		at = (at + 1) % rs->nrbuf;
		left--;
		if (!peek)
			srn_rs_release_head(rs);
	}
	if (!peek) {
		rs->rq_off = off;
		srn_rs_flush_ctrl(rs);
	}
	return n;
}

/* IOMAP / IOUNMAP from the peer: its table of riomap'ed buffers, at
 * most SRN_RS_RMAP_MAX of them. -EPROTO when the peer maps more. */
static int srn_rs_iomap_in(struct srn_rs *rs, enum srn_rs_msg_kind kind,
			   const uint8_t *p, uint32_t len)
{
	struct srn_rs_iomap_msg m;
	struct srn_rs_rmap *t;
	uint32_t i;

	if (len != sizeof(m))
		goto bad;
	memcpy(&m, p, sizeof(m));
	for (i = 0; i < rs->nrmap; i++)
		if (rs->rmap[i].offset == be64toh(m.offset))
			break;
	if (kind == SRN_RS_IOUNMAP) {
		if (i < rs->nrmap)
			rs->rmap[i] = rs->rmap[--rs->nrmap];
		return 0;
	}
	if (i == rs->nrmap && rs->nrmap >= SRN_RS_RMAP_MAX)
		return -EPROTO;
	if (i == rs->nrmap) {
		t = realloc(rs->rmap, (rs->nrmap + 1) * sizeof(*t));
		if (!t)
			goto bad;
		rs->rmap = t;
		rs->nrmap++;
	}
	rs->rmap[i].offset = be64toh(m.offset);
	rs->rmap[i].addr = be64toh(m.addr);
	rs->rmap[i].len = be64toh(m.len);
	rs->rmap[i].rkey = be32toh(m.rkey);
	return 0;
bad:
	srn_warn("rsocket %d: bad IOMAP message dropped", rs->fd);
	return 0;
}

static void srn_rs_broken(struct srn_rs *rs, int err)
{
	if (rs->state == SRN_RSS_CONNECTED || rs->state == SRN_RSS_CONNECTING)
		rs->state = SRN_RSS_CLOSED;
	if (!rs->err)
		rs->err = err;
}

/* A datagram (GRH first) into the receive queue; one longer than its
 * buffer (no NIC writes that) is dropped. */
static void srn_rs_on_dgram(struct srn_rs *rs, uint32_t idx, uint32_t len)
{
	uint32_t tail = (rs->rq_head + rs->rq_cnt) % rs->nrbuf;

	if (len > rs->rbuf_size) {
		srn_warn("rsocket %d: bad datagram dropped", rs->fd);
		if (srn_rs_post_recv(rs, idx))
			srn_rs_broken(rs, ECONNRESET);
		return;
	}
	rs->rq_idx[tail] = idx;
	rs->rq_len[tail] = len;
	rs->rq_cnt++;
}

/* The peer's message: its immediate is checked, its credits too (never
 * more than its hello's bufs in all, proto/srn_rs_proto.h). */
static void srn_rs_on_recv(struct srn_rs *rs, const struct ibv_wc *wc)
{
	uint32_t idx = (uint32_t)wc->wr_id, credits, tail;
	enum srn_rs_msg_kind kind;

	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			srn_rs_broken(rs, ECONNRESET);
		return;
	}
	if (rs->dgram && idx < rs->nrbuf) {
		srn_rs_on_dgram(rs, idx, wc->byte_len);
		return;
	}
	if (idx >= rs->nrbuf || !(wc->wc_flags & IBV_WC_WITH_IMM) ||
	    srn_rs_imm_parse(wc->imm_data, &kind, &credits) ||
	    wc->byte_len > rs->rbuf_size ||
	    credits > rs->peer_bufs - rs->credits) {
		srn_warn("rsocket %d: bad message, connection reset", rs->fd);
		srn_rs_broken(rs, EPROTO);
		return;
	}
	rs->credits += credits;
	if (kind == SRN_RS_DATA && wc->byte_len) {
		tail = (rs->rq_head + rs->rq_cnt) % rs->nrbuf;
		rs->rq_idx[tail] = idx;
		rs->rq_len[tail] = wc->byte_len;
		rs->rq_cnt++;
		rs->peer_view -= rs->peer_view ? 1 : 0;
		return;
	}
	if (kind == SRN_RS_FIN)
		rs->fin_rcvd = true;
	if ((kind == SRN_RS_IOMAP || kind == SRN_RS_IOUNMAP) &&
	    srn_rs_iomap_in(rs, kind, rs->rbuf + (size_t)idx * rs->rbuf_size,
			    wc->byte_len)) {
		srn_warn("rsocket %d: more than %u IOMAPs, connection reset",
			 rs->fd, SRN_RS_RMAP_MAX);
		srn_rs_broken(rs, EPROTO);
		return;
	}
	if (kind != SRN_RS_CREDIT && kind != SRN_RS_FIN) {
		rs->peer_view -= rs->peer_view ? 1 : 0;
		rs->owed++;
	}
	if (srn_rs_post_recv(rs, idx))
		srn_rs_broken(rs, ECONNRESET);
}

static void srn_rs_on_send(struct srn_rs *rs, const struct ibv_wc *wc)
{
	if (rs->sq_out)
		rs->sq_out--;
	if (!(wc->wr_id & SRN_RS_WR_CTRL) && rs->s_used)
		rs->s_used--;
	if (wc->status != IBV_WC_SUCCESS)
		srn_rs_broken(rs, wc->status == IBV_WC_WR_FLUSH_ERR ?
					  EPIPE :
					  ECONNRESET);
}

/* Takes the completion channel's events; the CQ is to be armed again. */
void srn_rs_drain_cch(struct srn_rs *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!rs->cch)
		return;
	while (ibv_get_cq_event(rs->cch, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		rs->armed = false;
	}
}

static int srn_rs_poll_cq(struct srn_rs *rs)
{
	struct ibv_wc wc[16];
	int n, i, total = 0;

	if (!rs->cq)
		return 0;
	srn_rs_drain_cch(rs);
	do {
		n = ibv_poll_cq(rs->cq, 16, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].wr_id & SRN_RS_WR_SEND)
				srn_rs_on_send(rs, &wc[i]);
			else
				srn_rs_on_recv(rs, &wc[i]);
		}
		total += n > 0 ? n : 0;
	} while (n == 16);
	srn_rs_flush_ctrl(rs);
	return total;
}

/* Requests a completion event; 0, or -errno. */
int srn_rs_arm(struct srn_rs *rs)
{
	if (!rs->cq || rs->armed)
		return 0;
	if (ibv_req_notify_cq(rs->cq, 0))
		return -EIO;
	rs->armed = true;
	return 0;
}

static int srn_rs_event_err(const struct rdma_cm_event *ev, int dflt)
{
	if (ev->status < 0 && ev->status > -4096)
		return -ev->status == ETIMEDOUT ? ETIMEDOUT : dflt;
	return dflt;
}

/* Active side: the REQ, with our hello, once the route is known. */
static int srn_rs_connect_req(struct srn_rs *rs)
{
	struct rdma_conn_param p = { 0 };
	struct srn_rs_hello h;
	int ret = srn_rs_setup(rs);

	if (ret)
		return ret;
	srn_rs_hello_make(rs, &h);
	p.private_data = &h;
	p.private_data_len = sizeof(h);
	p.retry_count = 7;
	p.rnr_retry_count = 7; /* a full receive queue: retry for ever */
	if (rdma_connect(rs->id, &p))
		return -errno;
	rs->state = SRN_RSS_CONNECTING;
	return 0;
}

static void srn_rs_failed(struct srn_rs *rs, int err)
{
	rs->state = SRN_RSS_FAILED;
	rs->err = err;
}

/* The connection's events: resolution, establishment, its end. */
static void srn_rs_on_event(struct srn_rs *rs, const struct rdma_cm_event *ev)
{
	int ret;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		rs->state = SRN_RSS_ROUTE;
		if (rdma_resolve_route(rs->id, SRN_RS_RESOLVE_MS))
			srn_rs_failed(rs, errno);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = srn_rs_connect_req(rs);
		if (ret)
			srn_rs_failed(rs, -ret);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		srn_rs_failed(rs, srn_rs_event_err(ev, EHOSTUNREACH));
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state != SRN_RSS_CONNECTING)
			break;
		ret = rs->sbuf ? 0 :
				 srn_rs_peer(rs, ev->param.conn.private_data,
					     ev->param.conn.private_data_len);
		if (ret) {
			srn_rs_failed(rs, -ret);
			rdma_disconnect(rs->id);
			break;
		}
		rs->state = SRN_RSS_CONNECTED;
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		srn_rs_failed(rs, srn_rs_event_err(ev, ECONNREFUSED));
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (rs->state == SRN_RSS_CONNECTING && !rs->sbuf)
			srn_rs_failed(rs, ECONNRESET);
		else
			srn_rs_broken(rs, 0);
		break;
	default:
		break;
	}
}

/* One rdma_cm event of a connecting or connected rsocket: 1 handled,
 * 0 none waiting. */
int srn_rs_cm_step(struct srn_rs *rs)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(rs->ch, &ev))
		return 0;
	if (rs->on_cm)
		rs->on_cm(rs, ev);
	else
		srn_rs_on_event(rs, ev);
	rdma_ack_cm_event(ev);
	return 1;
}

/* Everything that arrived: CM events (not a listener's), completions.
 * Returns how many were handled. */
int srn_rs_progress(struct srn_rs *rs)
{
	int n = 0;

	if (rs->dgram ||
	    (rs->state != SRN_RSS_LISTEN && rs->state != SRN_RSS_INIT &&
	     rs->state != SRN_RSS_BOUND))
		while (srn_rs_cm_step(rs))
			n++;
	n += srn_rs_poll_cq(rs);
	if (n && rs->nsleepers)
		srn_rs_wake_sleepers(rs);
	return n;
}

static bool srn_rs_fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Poll events of an rsocket now (after srn_rs_progress). */
short srn_rs_revents(struct srn_rs *rs)
{
	short ev = 0;

	if (rs->dgram) /* a datagram waits; a send slot is free */
		return (rs->rq_cnt ? POLLIN : 0) |
		       (rs->s_used < rs->nsbuf && rs->sq_out < rs->sq_depth ?
				POLLOUT :
				0);
	switch (rs->state) {
	case SRN_RSS_LISTEN:
		return srn_rs_fd_readable(rs->ch->fd) ? POLLIN : 0;
	case SRN_RSS_CONNECTED:
	case SRN_RSS_CONNECTING:
		if (rs->rq_cnt || rs->fin_rcvd || rs->shut_rd)
			ev |= POLLIN;
		if (srn_rs_can_send(rs))
			ev |= POLLOUT;
		if (srn_rs_slot_free(rs)) /* riowrite may go on */
			ev |= POLLWRBAND;
		if (rs->fin_rcvd)
			ev |= POLLRDHUP;
		return ev;
	case SRN_RSS_CLOSED:
		/* the peer is gone: hang-up (and the error) once its data is
		 * read, as a TCP socket reports the FIN first */
		if (rs->rq_cnt)
			return POLLIN | POLLOUT | POLLRDHUP;
		return POLLIN | POLLOUT | POLLHUP | POLLRDHUP |
		       (rs->err ? POLLERR : 0);
	case SRN_RSS_FAILED:
		return POLLOUT | POLLERR | POLLHUP;
	default:
		return 0;
	}
}
