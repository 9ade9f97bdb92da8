// SPDX-License-Identifier: MIT
/*
 * A hostile process on the victim's host (docs/security.md, tests
 * ctl_attack.sh): it speaks the same-host control protocol
 * (proto/srn_ctl_proto.h) to a victim QP's abstract socket, as a peer
 * would, and counts what it is handed. libc only.
 *
 *   ctl_attacker VICTIM_QPN [-c CLAIM_QPN [-o] [-m]] [-k KEY] [-V VERSION]
 *   ctl_attacker serve QPN OWNER_PID
 *
 *   -c CLAIM_QPN  send CONNECT_REQ claiming to be QP CLAIM_QPN, with an
 *                 eventfd as the kick fd, and read the answer
 *   -m            send MEDIATE (ask for a mediated link) instead of
 *                 CONNECT_REQ, claiming CLAIM_QPN
 *   -o            first bind and listen on CLAIM_QPN's socket ourselves:
 *                 the kernel then says we own that QPN
 *   -k KEY        then send MR_REQ for KEY (an rkey) and read the answer
 *   VICTIM_QPN    a QPN, or @FILE: read it from FILE once FILE holds it
 *                 (up to 20 s), after -o's bind: a victim whose RTR needs
 *                 its peer QPN to exist is started after us
 *   -V VERSION    the protocol version to write in the headers (default
 *                 this tree's; 1 speaks to libraries older than ADOPT v2,
 *                 whose CONNECT_REQ and MR_REQ were the same)
 *
 * serve: a lying target. Owns QPN, takes the first connection to it (the
 * victim dials it at RTR: QPN is its peer), reads its CONNECT_REQ and
 * answers CONNECT_REP naming OWNER_PID as the QP's process, with four
 * eventfds as the segments and kick; then waits for the victim to hang up
 * (up to 5 s) and exits 0 ("served a lie"), or 2 if nobody came in 20 s.
 *
 * Prints one line per answer and the total of file descriptors received.
 * Exit status: 0 nothing was handed out (refused), 1 some fds were
 * received (the victim served us), 2 usage error or no such QP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/srn_ctl_proto.h"

static uint16_t version = SRN_CTL_VERSION;

static socklen_t qp_addr(struct sockaddr_un *sa, uint32_t qpn)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
		     SRN_CTL_SOCK_FMT, qpn);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

static int send_msg(int fd, const void *msg, size_t len, int pass_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)msg, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (pass_fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

/* Reads one answer: prints it, closes and counts the fds that came. -1
 * when the victim closed the connection or said nothing. */
static int read_answer(int fd, const char *what, unsigned *fds_total)
{
	uint64_t buf[SRN_CTL_MAX_MSG / 8 + 1];
	char cbuf[CMSG_SPACE(sizeof(int) * SRN_CTL_MAX_FDS)];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	const struct srn_ctl_hdr *h = (const void *)buf;
	unsigned nfds = 0;
	struct cmsghdr *cm;
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

	for (cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm; cm = CMSG_NXTHDR(&mh, cm)) {
		unsigned k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (unsigned i = 0; cm->cmsg_type == SCM_RIGHTS && i < k;
		     i++) {
			int f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
			close(f);
			nfds++;
		}
	}
	*fds_total += nfds;
	if (n <= 0) {
		printf("%s: %s\n", what,
		       n == 0		   ? "connection closed by the victim" :
		       errno == ECONNRESET ? "connection reset by the victim" :
					     "no answer (timeout)");
		return -1;
	}
	if ((size_t)n < sizeof(*h) || h->magic != SRN_CTL_MAGIC) {
		printf("%s: %zd bytes that are no control message, %u fds\n",
		       what, n, nfds);
		return 0;
	}
	printf("%s: answer type %u status %d (%s), %u fds\n", what, h->type,
	       h->status, h->status ? strerror(-h->status) : "served", nfds);
	return 0;
}

/* Sends msg with n descriptors. */
static int send_fds(int fd, const void *msg, size_t len, const int *fds,
		    unsigned n)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = { (void *)msg, len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
	struct cmsghdr *cm;

	memset(cbuf, 0, sizeof(cbuf));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

static int own_qpn(uint32_t qpn);

/* The lying target (see the top). */
static int serve_lie(uint32_t qpn, uint32_t owner)
{
	struct srn_ctl_connect_rep rep = {
		.hdr = { SRN_CTL_MAGIC, version, SRN_CTL_CONNECT_REP, 0,
			 sizeof(rep) },
		.qpn = qpn,
		.fd_mask = (1u << SRN_REPFD_QP) | (1u << SRN_REPFD_CQ) |
			   (1u << SRN_REPFD_TPT) | (1u << SRN_REPFD_KICK),
		.owner_pid = owner,
	};
	uint64_t buf[SRN_CTL_MAX_MSG / 8 + 1];
	int lfd = own_qpn(qpn), fd, efd[4];
	struct pollfd pf;

	if (lfd < 0)
		return 2;
	pf = (struct pollfd){ .fd = lfd, .events = POLLIN };
	if (poll(&pf, 1, 20000) != 1 || (fd = accept(lfd, NULL, NULL)) < 0) {
		printf("serve: nobody came\n");
		return 2;
	}
	pf = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&pf, 1, 5000) != 1 || recv(fd, buf, sizeof(buf), 0) <= 0) {
		printf("serve: no request\n");
		return 2;
	}
	for (int i = 0; i < 4; i++)
		efd[i] = eventfd(0, EFD_CLOEXEC);
	printf("serve: CONNECT_REP naming pid %u: %s\n", owner,
	       send_fds(fd, &rep, sizeof(rep), efd, 4) ? "send failed" :
							 "sent");
	for (int i = 0; i < 4; i++)
		close(efd[i]);
	while (poll(&pf, 1, 5000) == 1 && recv(fd, buf, sizeof(buf), 0) > 0)
		; /* until the victim hangs up (or 5 s of silence) */
	printf("serve: served a lie\n");
	close(fd);
	close(lfd);
	return 0;
}

static int own_qpn(uint32_t qpn)
{
	struct sockaddr_un sa;
	socklen_t len = qp_addr(&sa, qpn);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 8)) {
		fprintf(stderr, "ctl_attacker: cannot own QPN 0x%06x: %s\n",
			qpn, strerror(errno));
		return -1;
	}
	printf("owning QPN 0x%06x (listening on its socket)\n", qpn);
	return fd;
}

static int dial(uint32_t qpn)
{
	struct timeval tv = { 3, 0 };
	struct sockaddr_un sa;
	socklen_t len = qp_addr(&sa, qpn);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, len)) {
		fprintf(stderr, "ctl_attacker: no QP 0x%06x: %s\n", qpn,
			strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int do_connect(int fd, uint32_t victim, uint32_t claim,
		      unsigned *fds_total)
{
	struct srn_ctl_connect_req req = {
		.hdr = { SRN_CTL_MAGIC, version, SRN_CTL_CONNECT_REQ, 0,
			 sizeof(req) },
		.src_qpn = claim,
		.dst_qpn = victim,
		.src_pid = (uint32_t)getpid(),
	};
	int kick = eventfd(0, EFD_CLOEXEC), err;

	printf("CONNECT_REQ to QP 0x%06x claiming QP 0x%06x\n", victim, claim);
	err = send_msg(fd, &req, sizeof(req), kick);
	close(kick);
	if (err) {
		printf("CONNECT_REQ: send failed: %s\n", strerror(-err));
		return -1;
	}
	return read_answer(fd, "CONNECT_REQ", fds_total);
}

static int do_mediate(int fd, uint32_t victim, uint32_t claim,
		      unsigned *fds_total)
{
	struct srn_ctl_mediate req = {
		.hdr = { SRN_CTL_MAGIC, version, SRN_CTL_MEDIATE, 0,
			 sizeof(req) },
		.dst_qpn = victim,
		.src_qpn = claim,
		/* a wire HELLO (version 5): GID, source and dest QPN, rq_psn */
		.hello_len = 28,
	};
	int err;

	memcpy(req.hello + 16, &claim, 4);
	memcpy(req.hello + 20, &victim, 4);
	printf("MEDIATE to QP 0x%06x claiming QP 0x%06x\n", victim, claim);
	err = send_msg(fd, &req, sizeof(req), -1);
	if (err) {
		printf("MEDIATE: send failed: %s\n", strerror(-err));
		return -1;
	}
	return read_answer(fd, "MEDIATE", fds_total);
}

static int do_mr(int fd, uint32_t key, unsigned *fds_total)
{
	struct srn_ctl_mr_req req = {
		.hdr = { SRN_CTL_MAGIC, version, SRN_CTL_MR_REQ, 0,
			 sizeof(req) },
		.key = key,
	};
	int err;

	printf("MR_REQ for key 0x%x\n", key);
	err = send_msg(fd, &req, sizeof(req), -1);
	if (err) {
		printf("MR_REQ: send failed: %s\n", strerror(-err));
		return -1;
	}
	return read_answer(fd, "MR_REQ", fds_total);
}

/* The victim's QPN: a number, or @FILE (waited for: see the top). */
static int victim_qpn(const char *arg, uint32_t *qpn_p)
{
	char buf[32];

	for (int i = 0; arg[0] == '@' && i < 1000; i++) {
		FILE *f = fopen(arg + 1, "re");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = 0;
		if (n && buf[n - 1] == '\n') {
			*qpn_p = (uint32_t)strtoul(buf, NULL, 0);
			return 0;
		}
		usleep(20000);
	}
	if (arg[0] == '@') {
		fprintf(stderr, "ctl_attacker: no QPN in %s\n", arg + 1);
		return -1;
	}
	*qpn_p = (uint32_t)strtoul(arg, NULL, 0);
	return 0;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: ctl_attacker VICTIM_QPN [-c CLAIM_QPN [-o] [-m]] "
		"[-k KEY] [-V VERSION]\n");
	return 2;
}

int main(int argc, char **argv)
{
	uint32_t victim, claim = 0, key = 0;
	bool own = false, mr = false, mediate = false;
	unsigned fds_total = 0;
	int opt, fd, lfd = -1, alive = 0;

	setvbuf(stdout, NULL, _IOLBF, 0); /* a script waits for our lines */
	if (argc == 4 && !strcmp(argv[1], "serve"))
		return serve_lie((uint32_t)strtoul(argv[2], NULL, 0),
				 (uint32_t)strtoul(argv[3], NULL, 0));
	if (argc < 2)
		return usage();
	optind = 2;
	while ((opt = getopt(argc, argv, "c:omk:V:")) != -1) {
		if (opt == 'V')
			version = (uint16_t)atoi(optarg);
		else if (opt == 'c')
			claim = (uint32_t)strtoul(optarg, NULL, 0);
		else if (opt == 'o')
			own = true;
		else if (opt == 'm')
			mediate = true;
		else if (opt == 'k')
			mr = true, key = (uint32_t)strtoul(optarg, NULL, 0);
		else
			return usage();
	}
	if ((own && !claim) || (!claim && !mr))
		return usage();
	if (own && (lfd = own_qpn(claim)) < 0)
		return 2;
	if (victim_qpn(argv[1], &victim))
		return 2;
	fd = dial(victim);
	if (fd < 0)
		return 2;
	if (claim && mediate)
		alive = do_mediate(fd, victim, claim, &fds_total);
	else if (claim)
		alive = do_connect(fd, victim, claim, &fds_total);
	if (mr && alive == 0)
		do_mr(fd, key, &fds_total);
	printf("fds received: %u\n", fds_total);
	close(fd);
	if (lfd >= 0)
		close(lfd);
	return fds_total ? 1 : 0;
}
