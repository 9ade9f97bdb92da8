// SPDX-License-Identifier: MIT
/*
 * softrnic — address handles. On a RoCE port every AH must be global
 * (carry a GRH with the destination GID); the AH only records it, UD
 * delivery is a later feature.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

struct srn_ah {
	struct ibv_ah ibah;
	struct srn_pd *pd;
	struct ibv_ah_attr attr;
};

SRN_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *ibpd,
					struct ibv_ah_attr *attr)
{
	struct srn_context *ctx = to_sctx(ibpd->context);
	struct srn_pd *pd = to_spd(ibpd);
	struct srn_ah *ah;

	if (!attr || !attr->is_global || attr->port_num != 1 ||
	    attr->grh.sgid_index >= SRN_GID_TBL_LEN) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&ctx->lock);
	if (ctx->nah >= SRN_MAX_AH) {
		pthread_mutex_unlock(&ctx->lock);
		free(ah);
		errno = ENOMEM;
		return NULL;
	}
	ctx->nah++;
	ah->ibah.handle = srn_ctx_new_handle(ctx);
	pthread_mutex_unlock(&ctx->lock);
	ah->ibah.context = ibpd->context;
	ah->ibah.pd = ibpd;
	ah->pd = pd;
	ah->attr = *attr;
	/* relaxed: a reference taken while the caller holds the PD; the
	 * count publishes nothing (the puts release it) */
	atomic_fetch_add_explicit(&pd->refs, 1, memory_order_relaxed);
	return &ah->ibah;
}

SRN_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct srn_ah *ah = container_of(ibah, struct srn_ah, ibah);
	struct srn_context *ctx = to_sctx(ibah->context);

	/* release: pairs with the acquire in ibv_dealloc_pd */
	atomic_fetch_sub_explicit(&ah->pd->refs, 1, memory_order_release);
	pthread_mutex_lock(&ctx->lock);
	ctx->nah--;
	pthread_mutex_unlock(&ctx->lock);
	free(ah);
	return 0;
}

SRN_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context,
				   uint8_t port_num, struct ibv_wc *wc,
				   struct ibv_grh *grh,
				   struct ibv_ah_attr *ah_attr)
{
	if (!grh || !(wc->wc_flags & IBV_WC_GRH) || port_num != 1) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	ah_attr->is_global = 1;
	ah_attr->grh.dgid = grh->sgid;
	ah_attr->grh.sgid_index = 0;
	ah_attr->grh.hop_limit = 0xff;
	ah_attr->grh.traffic_class = (be32toh(grh->version_tclass_flow) >> 20) &
				     0xff;
	ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
	return 0;
}

SRN_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd,
						struct ibv_wc *wc,
						struct ibv_grh *grh,
						uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}
