/* SPDX-License-Identifier: MIT */
/* softrnic — the wire protocol's parser (wire.c). */
#ifndef SRN_WIRE_H
#define SRN_WIRE_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "transport/tcp/srn_wire_proto.h"

#define SRN_WIRE_MAX_IOV 17 /* max_sge + 1 */
#define SRN_WIRE_STAGE 4096 /* headers and small payloads: one recv */
#define SRN_WIRE_DIRECT_MIN 1024 /* payloads this big: straight in */

/* Where a parsed message goes. on_ack (optional) runs once per header
 * that acknowledges our requests (SRN_WF_ACK), before on_hdr. on_hdr
 * points the payload somewhere (iov, *niov entries; beyond them it is
 * discarded); on_msg runs once the whole payload has arrived. Each returns
 * 0 or -errno to drop the connection; on_hdr may also return -EAGAIN: the
 * parser then stops before the payload and asks again at the next call
 * (srn_wire_recv returns -EAGAIN). */
struct srn_wire_sink {
	int (*on_hdr)(void *ctx, const struct srn_wire_hdr *h,
		      struct iovec *iov, unsigned *niov);
	int (*on_msg)(void *ctx, const struct srn_wire_hdr *h);
	int (*on_ack)(void *ctx, uint32_t ack_psn);
};

/* The receive state of one connection; resumes at any byte boundary. */
struct srn_wire_rx {
	struct srn_wire_hdr hdr;
	uint32_t hdr_have;
	uint32_t next_psn; /* one past the last request's sequence number;
			    * a request may not go beyond it */
	bool psn_free; /* the next request may carry any psn: the owner does
			* not know yet where the peer's requests start (it
			* checks the first one itself) */
	uint64_t payload_left;
	struct iovec iov[SRN_WIRE_MAX_IOV];
	unsigned niov, iov_idx;
	size_t iov_off;
	bool hdr_checked; /* checks passed, psn counted */
	bool sink_ready; /* on_hdr accepted the header */
	uint32_t stage_off, stage_len; /* unparsed: stage[off, len) */
	uint8_t stage[SRN_WIRE_STAGE];
};

bool srn_wire_is_request(unsigned op);
int64_t srn_wire_hdr_check(const struct srn_wire_hdr *h);
void srn_wire_rx_init(struct srn_wire_rx *rx);
int srn_wire_feed(struct srn_wire_rx *rx, const uint8_t *buf, size_t n,
		  const struct srn_wire_sink *s, void *ctx, size_t *used_p);
int srn_wire_recv(struct srn_wire_rx *rx, int fd, const struct srn_wire_sink *s,
		  void *ctx);
void srn_wire_hdr_init(struct srn_wire_hdr *h, unsigned op, uint32_t psn,
		       uint32_t len);

#endif /* SRN_WIRE_H */
