// SPDX-License-Identifier: MIT
/*
 * softrnic — path choice. A peer on this host is reached through shared
 * memory. SOFTRNIC_TRANSPORT=shm forces it; other hosts need the TCP
 * transport, which this build does not have yet.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"

const struct srn_transport_ops *srn_transport_select(const union ibv_gid *dgid,
						     int *err)
{
	const char *force = getenv("SOFTRNIC_TRANSPORT");

	if (force && strcmp(force, "shm") && strcmp(force, "auto")) {
		srn_err("SOFTRNIC_TRANSPORT=%s: unknown transport", force);
		*err = -EINVAL;
		return NULL;
	}
	if (srn_gid_is_local(dgid))
		return &srn_shm_transport_ops;
	srn_err("destination GID is not on this host; only the same-host "
		"transport exists in this build");
	*err = -EHOSTUNREACH;
	return NULL;
}
