// SPDX-License-Identifier: MIT
/*
 * softrnic — path choice. A peer on this host is reached through shared
 * memory, any other peer through TCP. SOFTRNIC_TRANSPORT=shm|tcp forces one
 * (tests, debugging); tcp works on the same host too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"

const struct srn_transport_ops *srn_transport_select(const union ibv_gid *dgid,
						     int *err)
{
	const char *force = getenv("SOFTRNIC_TRANSPORT");

	if (force && strcmp(force, "shm") && strcmp(force, "tcp") &&
	    strcmp(force, "auto")) {
		srn_err("SOFTRNIC_TRANSPORT=%s: unknown transport", force);
		*err = -EINVAL;
		return NULL;
	}
	if (force && !strcmp(force, "tcp"))
		return &srn_tcp_transport_ops;
	if (srn_gid_is_local(dgid))
		return &srn_shm_transport_ops;
	if (force && !strcmp(force, "shm")) {
		srn_err("SOFTRNIC_TRANSPORT=shm: the destination is not on "
			"this host");
		*err = -EHOSTUNREACH;
		return NULL;
	}
	return &srn_tcp_transport_ops;
}
