// SPDX-License-Identifier: MIT
/*
 * softrnic — protection domains. A PD is a handle: MRs, QPs, SRQs and AHs
 * carry it, and the key checks compare it (srn_key_check). A parent domain
 * is a PD with the same handle plus a thread domain and the application's
 * allocator, which the QP's private send ring comes from.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

SRN_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct srn_context *ctx = to_sctx(context);
	struct srn_pd *pd;

	pthread_mutex_lock(&ctx->lock);
	if (ctx->npd >= SRN_MAX_PD) {
		pthread_mutex_unlock(&ctx->lock);
		errno = ENOMEM;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		pthread_mutex_unlock(&ctx->lock);
		errno = ENOMEM;
		return NULL;
	}
	ctx->npd++;
	pd->handle = srn_ctx_new_handle(ctx);
	pthread_mutex_unlock(&ctx->lock);
	pd->ibpd.context = context;
	pd->ibpd.handle = pd->handle;
	return &pd->ibpd;
}

SRN_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct srn_context *ctx = to_sctx(ibpd->context);
	struct srn_pd *pd = to_spd(ibpd);

	/* acquire: pairs with the release of refs in every put
	 * (srn_qp_get_refs, ibv_dereg_mr, srn_srq_destroy, ibv_destroy_ah,
	 * ibv_dealloc_pd of a parent domain) */
	if (atomic_load_explicit(&pd->refs, memory_order_acquire))
		return EBUSY;
	if (pd->parent_of) {
		/* release: pairs with the acquire in ibv_dealloc_pd */
		atomic_fetch_sub_explicit(&pd->parent_of->refs, 1,
					  memory_order_release);
		if (pd->td) /* release: pairs with the acquire in
			     * srn_dealloc_td */
			atomic_fetch_sub_explicit(&pd->td->refs, 1,
						  memory_order_release);
		free(pd);
		return 0;
	}
	pthread_mutex_lock(&ctx->lock);
	ctx->npd--;
	pthread_mutex_unlock(&ctx->lock);
	free(pd);
	return 0;
}

/* ---- thread domains and parent domains ---- */

struct ibv_td *srn_alloc_td(struct ibv_context *context,
			    struct ibv_td_init_attr *attr)
{
	struct srn_td *td;

	if (!attr || attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibtd.context = context;
	return &td->ibtd;
}

int srn_dealloc_td(struct ibv_td *ibtd)
{
	struct srn_td *td = container_of(ibtd, struct srn_td, ibtd);

	/* acquire: pairs with the release in ibv_dealloc_pd (of the parent
	 * domains that used it) */
	if (atomic_load_explicit(&td->refs, memory_order_acquire))
		return EBUSY;
	free(td);
	return 0;
}

static int srn_parent_check(struct ibv_context *context,
			    const struct ibv_parent_domain_init_attr *a)
{
	const uint32_t known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;

	if (!a || !a->pd || a->pd->context != context ||
	    to_spd(a->pd)->parent_of || (a->comp_mask & ~known))
		return EINVAL;
	if ((a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!a->alloc || !a->free))
		return EINVAL;
	if (a->td && a->td->context != context)
		return EINVAL;
	return 0;
}

/* A PD in every use (its handle is its PD's), with a thread domain and
 * the application's allocator for the QP's private buffers. */
struct ibv_pd *srn_alloc_parent_domain(struct ibv_context *context,
				       struct ibv_parent_domain_init_attr *a)
{
	struct srn_pd *pd;
	int err = srn_parent_check(context, a);

	if (err || !(pd = calloc(1, sizeof(*pd)))) {
		errno = err ? err : ENOMEM;
		return NULL;
	}
	pd->parent_of = to_spd(a->pd);
	pd->handle = pd->parent_of->handle;
	pd->ibpd.context = context;
	pd->ibpd.handle = pd->handle;
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = a->alloc;
		pd->free = a->free;
	}
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = a->pd_context;
	if (a->td) {
		pd->td = container_of(a->td, struct srn_td, ibtd);
		/* relaxed: a reference taken while the caller holds the TD */
		atomic_fetch_add_explicit(&pd->td->refs, 1,
					  memory_order_relaxed);
	}
	/* relaxed: a reference taken while the caller holds the PD */
	atomic_fetch_add_explicit(&pd->parent_of->refs, 1,
				  memory_order_relaxed);
	return &pd->ibpd;
}

/* A private buffer of a QP on pd: from the parent domain's allocator when
 * it has one and wants to (else calloc'd); zeroed either way. */
void *srn_pd_buf_alloc(struct srn_pd *pd, size_t size, bool *custom_p)
{
	void *p = IBV_ALLOCATOR_USE_DEFAULT;

	*custom_p = false;
	if (pd && pd->alloc) /* an XRC TGT QP has no PD */
		p = pd->alloc(&pd->ibpd, pd->pd_context, size, 64, 0);
	if (p == IBV_ALLOCATOR_USE_DEFAULT)
		return calloc(1, size);
	if (p) {
		memset(p, 0, size);
		*custom_p = true;
	}
	return p;
}

void srn_pd_buf_free(struct srn_pd *pd, void *ptr, bool custom)
{
	if (custom)
		pd->free(&pd->ibpd, pd->pd_context, ptr, 0);
	else
		free(ptr);
}
