// SPDX-License-Identifier: MIT
/*
 * softrnic — direct access, the extension of <softrnic/direct.h>: a peer's
 * registered memory as a pointer. The QP's transport makes the mapping
 * (its direct_map op: only the same-host one has it); this file checks
 * the arguments and the QP, and keeps the live mappings so that
 * srn_direct_unmap knows their extent and refuses anything else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <softrnic/direct.h>

#include "engine/transport.h"
#include "verbs/verbs.h"

static_assert(SOFTRNIC_ACCESS_DIRECT == SRN_ACCESS_DIRECT,
	      "the public flag is the TPT's");

#define SRN_DIRECT_ACCESS                                   \
	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_ATOMIC)

struct srn_direct {
	struct srn_list link;
	void *ptr; /* what the application got */
	void *map;
	size_t map_len;
};

static pthread_mutex_t srn_direct_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_list srn_directs = SRN_LIST_INIT(srn_directs);

/* The QP's transport maps; sq_lock keeps the connection still. */
static int srn_direct_qp_map(struct srn_qp *qp, uint64_t addr, uint32_t rkey,
			     size_t len, unsigned access, struct srn_direct *d)
{
	enum ibv_qp_state st;
	int err;

	srn_lock(&qp->sq_lock);
	st = srn_qp_state(qp);
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS)
		err = -ENOTCONN;
	else if (!qp->tops)
		err = -ENOTCONN;
	else if (!qp->tops->direct_map)
		err = -EREMOTE;
	else
		err = qp->tops->direct_map(qp, addr, rkey, len, access, &d->map,
					   &d->map_len, &d->ptr);
	srn_unlock(&qp->sq_lock);
	return err;
}

SRN_EXPORT int srn_direct_map(struct ibv_qp *ibqp, uint64_t remote_addr,
			      uint32_t rkey, size_t length, unsigned int access,
			      void **ptr_p)
{
	struct srn_direct *d;
	int err;

	if (!ibqp || !ptr_p || !length || !access ||
	    (access & ~SRN_DIRECT_ACCESS) ||
	    remote_addr + length < remote_addr ||
	    srn_ctx_is_foreign(to_sqp(ibqp)->ctx))
		return errno = EINVAL;
	if (ibqp->qp_type != IBV_QPT_RC && ibqp->qp_type != IBV_QPT_UC)
		return errno = EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return errno = ENOMEM;
	err = srn_direct_qp_map(to_sqp(ibqp), remote_addr, rkey, length, access,
				d);
	if (err) {
		free(d);
		return errno = -err;
	}
	pthread_mutex_lock(&srn_direct_lock);
	srn_list_add_tail(&d->link, &srn_directs);
	pthread_mutex_unlock(&srn_direct_lock);
	*ptr_p = d->ptr;
	return 0;
}

SRN_EXPORT int srn_direct_unmap(void *ptr)
{
	struct srn_direct *found = NULL;
	struct srn_list *pos;

	pthread_mutex_lock(&srn_direct_lock);
	srn_list_for_each(pos, &srn_directs) {
		struct srn_direct *d =
			srn_list_entry(pos, struct srn_direct, link);

		if (d->ptr == ptr) {
			found = d;
			srn_list_del(&d->link);
			break;
		}
	}
	pthread_mutex_unlock(&srn_direct_lock);
	if (!found)
		return errno = EINVAL;
	munmap(found->map, found->map_len);
	free(found);
	return 0;
}
