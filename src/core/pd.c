// SPDX-License-Identifier: MIT
/*
 * softrnic — protection domains. A PD is a handle: MRs, QPs, SRQs and AHs
 * carry it, and the key checks compare it (srn_key_check).
 */
#include <errno.h>
#include <stdlib.h>

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
	 * (srn_qp_get_refs, ibv_dereg_mr, srn_srq_destroy, ibv_destroy_ah) */
	if (atomic_load_explicit(&pd->refs, memory_order_acquire))
		return EBUSY;
	pthread_mutex_lock(&ctx->lock);
	ctx->npd--;
	pthread_mutex_unlock(&ctx->lock);
	free(pd);
	return 0;
}
