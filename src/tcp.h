/* SPDX-License-Identifier: MIT */
/* softrnic — the TCP transport's internal interfaces (docs/wire.md). */
#ifndef SRN_TCP_H
#define SRN_TCP_H

#include <poll.h>
#include <sys/uio.h>

#include "srn.h"
#include "wire.h"

#define SRN_TCP_PORT_DEFAULT 4791
#define SRN_TCP_USER_TIMEOUT_MS 5000 /* unacknowledged data: peer gone */

/* How the other end went away. */
#define SRN_TCP_ALIVE 0u
#define SRN_TCP_CLOSED 1u /* BYE, then end of stream */
#define SRN_TCP_DEAD 2u /* reset, error, or end of stream without BYE */

uint16_t srn_tcp_port(void);
int srn_tcp_sendv(int fd, struct iovec *iov, unsigned n);
void srn_wire_hdr_init(struct srn_wire_hdr *h, unsigned op, uint32_t psn,
		       uint32_t len);

/* tcp_responder.c: the host-wide listener and the target side */
void srn_tcp_listen_start(void);
void srn_tcp_listen_stop(void);
void srn_tcp_resume_paused(void);
int srn_tcp_adopt(struct srn_qp *qp, int fd, const struct srn_wire_hello *hello);
void srn_tcp_unlisten(struct srn_qp *qp);

#endif /* SRN_TCP_H */
