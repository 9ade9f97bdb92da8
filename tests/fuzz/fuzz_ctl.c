// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the target side of the same-host control protocol:
 * srn_ctl_classify (proto/srn_ctl_proto.h), the pure function that decides
 * what engine/ctl.c dispatches for a message received on a QP's control
 * socket (its bytes, its length, how many fds came with it, whether the
 * connection has attached). ASan and UBSan watch it read only the bytes it
 * was given, unaligned; an independent, table-driven statement of the
 * rules (docs/shm-layout.md) checks every verdict, and the invariants the
 * handlers rely on abort when broken.
 *
 * Input: byte 0 chooses the mode and context (bit 0: structure-aware,
 * bits 1-2: fds, bit 3: attached); then, raw: the message itself;
 * structure-aware: a type, mutation bits and a length delta, then the
 * fields after the header. The structure-aware mode builds a valid header
 * for the type and breaks only what the mutation bits say, so the fuzzer
 * reaches the checks behind the header's.
 *
 * With bit 4 of byte 0 set, the messages go to a real QP's control socket
 * instead (the whole library is linked in; the same-host transport
 * serves it): one connection per input, a session of messages built as
 * above (a type, mutation bits, fields, 0 to 3 fds), the QPN and key
 * fields right unless the input says otherwise, so that CONNECT_REQ
 * attaches (our process owns the QP it names, as the kernel checks) and
 * MR_REQ exports a real MR; replies and their fds are read and closed.
 * The session ends with BYE or a hang-up (an attached peer's death: the
 * QP goes to ERR; the next input starts from RTR again).
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/srn_ctl_proto.h"

#define QPN 0x123456u

struct rule {
	size_t len;
	unsigned fds;
	bool early; /* allowed before attach */
};

static const struct rule rules[SRN_CTL_MEDIATE_REP + 1] = {
	[SRN_CTL_CONNECT_REQ] = { 32, 1, true },
	[SRN_CTL_MR_REQ] = { 24, 0, false },
	[SRN_CTL_BYE] = { 16, 0, true },
	[SRN_CTL_ADOPT] = { 56, 1, true },
	[SRN_CTL_STAT_REQ] = { 16, 0, true },
	[SRN_CTL_XSRQ_REQ] = { 24, 0, false },
	[SRN_CTL_MEDIATE] = { 64, 0, true },
};

static uint32_t rd32(const uint8_t *p, size_t off)
{
	uint32_t v;

	memcpy(&v, p + off, sizeof(v));
	return v;
}

/* The rules again, written from the protocol's table, not from the code. */
static int oracle(const uint8_t *m, size_t len, unsigned nfds, bool attached)
{
	const struct rule *r;
	uint16_t type, version;

	if (len < 16)
		return -EBADMSG;
	memcpy(&version, m + 4, 2);
	memcpy(&type, m + 6, 2);
	if (rd32(m, 0) != SRN_CTL_MAGIC || version != SRN_CTL_VERSION ||
	    rd32(m, 12) != len)
		return -EBADMSG;
	r = type < sizeof(rules) / sizeof(rules[0]) ? &rules[type] : NULL;
	if (!r || !r->len)
		return -EPROTO;
	if (len != r->len || nfds != r->fds || rd32(m, 8))
		return -EPROTO;
	if (!attached && !r->early)
		return -EPERM;
	if (type == SRN_CTL_CONNECT_REQ &&
	    (rd32(m, 20) != QPN || !rd32(m, 16) || rd32(m, 16) > 0xffffff))
		return -EPROTO;
	if (type == SRN_CTL_ADOPT && (rd32(m, 16) != QPN || rd32(m, 20) > 32))
		return -EPROTO;
	if (type == SRN_CTL_MEDIATE &&
	    (rd32(m, 16) != QPN || !rd32(m, 20) || rd32(m, 20) > 0xffffff ||
	     rd32(m, 24) > 32 || rd32(m, 28)))
		return -EPROTO;
	return type;
}

static void verdict(const uint8_t *m, size_t len, unsigned nfds, bool att)
{
	int got = srn_ctl_classify(m, len, nfds, QPN, att);
	int want = oracle(m, len, nfds, att);

	if (got != want) {
		fprintf(stderr,
			"classify %d, rules say %d (len %zu fds %u%s)\n", got,
			want, len, nfds, att ? " attached" : "");
		abort();
	}
	/* what the handlers take for granted once a type is dispatched */
	if (got > 0 && (len > SRN_CTL_MAX_MSG || len != rules[got].len ||
			nfds != rules[got].fds || (!att && !rules[got].early)))
		abort();
}

/* Structure-aware: a valid header for in[0]'s type, broken on purpose
 * only where in[1]'s bits say, the rest of the fields from in[3...]. */
static void structured(const uint8_t *in, size_t n, unsigned nfds, bool att)
{
	static const uint16_t types[] = { 0, 1, 2, 3,  4,  5,	  6,
					  7, 8, 9, 10, 11, 0xffff };
	uint8_t buf[SRN_CTL_MAX_MSG + 17];
	struct srn_ctl_hdr h = { SRN_CTL_MAGIC, SRN_CTL_VERSION, 0, 0, 0 };
	uint8_t bits, delta;
	size_t len;

	if (n < 3)
		return;
	h.type = types[in[0] % (sizeof(types) / sizeof(types[0]))];
	bits = in[1];
	delta = in[2];
	len = h.type < sizeof(rules) / sizeof(rules[0]) && rules[h.type].len ?
		      rules[h.type].len :
		      16 + delta % 64;
	if (bits & 1) /* a wrong length, within the buffer */
		len = (len + (int8_t)delta) % (sizeof(buf) - 1);
	h.len = (uint32_t)len;
	if (bits & 2)
		h.magic ^= 1u << (delta % 32);
	if (bits & 4)
		h.version++;
	if (bits & 8)
		h.status = -(int32_t)(delta + 1);
	if (bits & 16)
		h.len ^= 1u << (delta % 12);
	memset(buf, 0, sizeof(buf));
	memcpy(buf + 16, in + 3,
	       n - 3 < sizeof(buf) - 16 ? n - 3 : sizeof(buf) - 16);
	if (!(bits & 32)) { /* the QPN fields right, unless asked */
		uint32_t q = QPN;

		memcpy(buf + (h.type == SRN_CTL_CONNECT_REQ ? 20 : 16), &q, 4);
	}
	memcpy(buf, &h, sizeof(h));
	verdict(buf, len, nfds, att);
	memmove(buf + 1, buf, len); /* the same, unaligned */
	verdict(buf + 1, len, nfds, att);
}

/* ---- the control socket of a real QP ---- */

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *a; /* the target: at RTR, its peer is b */
	struct ibv_qp *b; /* ours: what CONNECT_REQ names */
	uint8_t *buf;
} S;

/* a: reset, then INIT and (rtr) RTR towards b, on this host. */
static int to_rtr(bool rtr)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	ibv_modify_qp(S.a, &a, IBV_QP_STATE);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(S.a, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	if (!rtr)
		return 0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = S.b->qp_num;
	a.max_dest_rd_atomic = 1;
	a.ah_attr.is_global = 1;
	ibv_query_gid(S.ctx, 1, 0, &a.ah_attr.grh.dgid);
	a.ah_attr.port_num = 1;
	return ibv_modify_qp(S.a, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

static int sock_setup(void)
{
	struct ibv_qp_init_attr qa = { .cap = { 4, 4, 1, 1, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_device **l;

	setenv("SOFTRNIC_TRANSPORT", "shm", 1);
	setenv("SOFTRNIC_LOG", "0", 1);
	l = ibv_get_device_list(NULL);
	S.ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (l)
		ibv_free_device_list(l);
	if (!S.ctx)
		return -1;
	S.pd = ibv_alloc_pd(S.ctx);
	S.cq = ibv_create_cq(S.ctx, 16, NULL, NULL, 0);
	S.buf = aligned_alloc(4096, 65536);
	S.mr = S.pd ? ibv_reg_mr(S.pd, S.buf, 65536,
				 IBV_ACCESS_LOCAL_WRITE |
					 IBV_ACCESS_REMOTE_WRITE) :
		      NULL;
	qa.send_cq = qa.recv_cq = S.cq;
	S.a = S.mr ? ibv_create_qp(S.pd, &qa) : NULL;
	S.b = S.a ? ibv_create_qp(S.pd, &qa) : NULL;
	return S.b ? to_rtr(true) : -1;
}

static int sock_dial(uint32_t qpn)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int k = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
			 SRN_CTL_SOCK_FMT, qpn);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd >= 0 &&
	    connect(fd, (struct sockaddr *)&sa,
		    offsetof(struct sockaddr_un, sun_path) + 1 + k)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends m with nfds fresh eventfds. */
static void sock_send(int fd, const void *m, size_t len, unsigned nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = { (void *)m, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[4];

	for (unsigned i = 0; i < nfds; i++)
		fds[i] = eventfd(0, EFD_CLOEXEC);
	if (nfds) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	sendmsg(fd, &mh, MSG_NOSIGNAL);
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
}

/* Reads a reply, if one comes within ms, and closes the fds it brings. */
static void sock_reply(int fd, int ms)
{
	uint64_t buf[SRN_CTL_MAX_MSG / 8 + 1];
	char cbuf[CMSG_SPACE(sizeof(int) * SRN_CTL_MAX_FDS)];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct cmsghdr *cm;

	if (poll(&p, 1, ms) != 1 || recvmsg(fd, &mh, MSG_CMSG_CLOEXEC) <= 0)
		return;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		for (size_t i = 0;
		     cm->cmsg_type == SCM_RIGHTS &&
		     i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		     i++) {
			int f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
			close(f);
		}
}

/* One message of the session: as structured() builds them, with the
 * fields a real target checks right unless bit 32 says otherwise. */
static void sock_msg(int fd, const uint8_t *in, size_t n)
{
	static const uint16_t types[] = { 1, 3, 5, 6, 7, 9, 2, 0, 11 };
	struct srn_ctl_hdr h = { SRN_CTL_MAGIC, SRN_CTL_VERSION, 0, 0, 0 };
	uint8_t m[SRN_CTL_MAX_MSG + 16] = { 0 };
	uint8_t bits = in[1], delta = in[2];
	size_t len;
	uint32_t v;

	h.type = types[in[0] % (sizeof(types) / sizeof(types[0]))];
	len = h.type < sizeof(rules) / sizeof(rules[0]) && rules[h.type].len ?
		      rules[h.type].len :
		      16 + delta % 48;
	if (bits & 1) /* a wrong length */
		len = (len + (int8_t)delta) % sizeof(m);
	if (bits & 2)
		h.magic ^= 1u << (delta % 32);
	if (bits & 4)
		h.version++;
	if (bits & 8)
		h.status = -(int32_t)(delta + 1);
	h.len = (uint32_t)len;
	memcpy(m + 16, in + 3, n - 3 < 16 ? n - 3 : 16);
	if (!(bits & 32)) {
		v = h.type == SRN_CTL_CONNECT_REQ ? S.b->qp_num :
		    h.type == SRN_CTL_MR_REQ	  ? S.mr->rkey :
		    h.type == SRN_CTL_ADOPT	  ? S.a->qp_num :
						    m[16];
		memcpy(m + 16, &v, 4);
		v = h.type == SRN_CTL_CONNECT_REQ ? S.a->qp_num :
		    h.type == SRN_CTL_ADOPT	  ? 24 :
						    0;
		memcpy(m + 20, &v, 4);
		memset(m + 24, 0, 8);
	}
	memcpy(m, &h, sizeof(h));
	sock_send(fd, m, len,
		  (bits >> 6) & 3 ?
			  (bits >> 6) & 3 :
			  rules[h.type < sizeof(rules) / sizeof(rules[0]) ?
					h.type :
					0]
				  .fds);
	if (h.type == SRN_CTL_CONNECT_REQ || h.type == SRN_CTL_MR_REQ ||
	    h.type == SRN_CTL_STAT_REQ || h.type == SRN_CTL_XSRQ_REQ)
		sock_reply(fd, 20);
}

/* A session on the control socket of QP a (or b: not at RTR, its peer
 * not us). */
static void sock_session(const uint8_t *in, size_t n)
{
	static int ready;
	uint8_t how = n ? in[0] : 0;
	int fd;

	if (!ready)
		ready = sock_setup() ? -1 : 1;
	if (ready < 0)
		abort(); /* the device did not come up: nothing is tested */
	to_rtr(!(how & 2));
	fd = sock_dial(how & 4 ? S.b->qp_num : S.a->qp_num);
	if (fd < 0)
		return;
	for (size_t i = 1; i + 3 <= n; i += 3 + 16)
		sock_msg(fd, in + i, n - i < 19 ? n - i : 19);
	if (how & 1) {
		struct srn_ctl_hdr bye = { SRN_CTL_MAGIC, SRN_CTL_VERSION,
					   SRN_CTL_BYE, 0, sizeof(bye) };

		sock_send(fd, &bye, sizeof(bye), 0);
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned nfds;
	bool att;

	if (size < 1)
		return 0;
	if (data[0] & 16) {
		sock_session(data + 1, size - 1);
		return 0;
	}
	nfds = (data[0] >> 1) & 3;
	att = data[0] & 8;
	if (data[0] & 1)
		structured(data + 1, size - 1, nfds, att);
	else
		verdict(data + 1, size - 1, nfds, att); /* raw, unaligned */
	return 0;
}
