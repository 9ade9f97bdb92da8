// SPDX-License-Identifier: MIT
/*
 * softrnic — address handles. On a RoCE port every AH must be global
 * (carry a GRH with the destination GID); a UD WR's AH says where its
 * datagram goes (engine/ud.c), and the GRH a UD receive starts with says
 * where one came from (srn_grh_build, ibv_init_ah_from_wc).
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

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
	struct srn_ah *ah = to_sah(ibah);
	struct srn_context *ctx = to_sctx(ibah->context);

	/* release: pairs with the acquire in ibv_dealloc_pd */
	atomic_fetch_sub_explicit(&ah->pd->refs, 1, memory_order_release);
	pthread_mutex_lock(&ctx->lock);
	ctx->nah--;
	pthread_mutex_unlock(&ctx->lock);
	free(ah);
	return 0;
}

/* The IPv4 address of an IPv4-mapped GID, or false. */
bool srn_gid_v4(const union ibv_gid *g, uint32_t *ip_p)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0,	   0,
					 0, 0, 0, 0, 0xff, 0xff };

	if (memcmp(g->raw, pfx, sizeof(pfx)))
		return false;
	memcpy(ip_p, g->raw + 12, 4);
	return true;
}

static uint16_t srn_ip_csum(const uint8_t *h, size_t n)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The GRH of a datagram from IPv4 address sip to dip (network byte
 * order): 20 zero bytes, then the IPv4 header RoCEv2 would have carried
 * (UDP, BTH, DETH and ICRC in its length). */
void srn_grh_build_v4(uint8_t grh[SRN_GRH_LEN], uint32_t sip, uint32_t dip,
		      uint32_t payload_len)
{
	uint32_t ip_len = 20 + 8 + 12 + 8 + payload_len + 4;
	uint8_t *h = grh + 20;
	uint16_t csum;

	memset(grh, 0, SRN_GRH_LEN);
	h[0] = 0x45;
	h[2] = (uint8_t)(ip_len >> 8);
	h[3] = (uint8_t)ip_len;
	h[6] = 0x40; /* don't fragment */
	h[8] = 64; /* TTL */
	h[9] = 17; /* UDP */
	memcpy(h + 12, &sip, 4);
	memcpy(h + 16, &dip, 4);
	csum = srn_ip_csum(h, 20);
	h[10] = (uint8_t)(csum >> 8);
	h[11] = (uint8_t)csum;
}

/* The GRH of a datagram from sgid to dgid: srn_grh_build_v4's, or an IPv6
 * GRH when either GID is not IPv4-mapped. */
uint8_t srn_grh_build(uint8_t grh[SRN_GRH_LEN], const union ibv_gid *sgid,
		      const union ibv_gid *dgid, uint32_t payload_len)
{
	uint32_t sip, dip, ip_len = 20 + 8 + 12 + 8 + payload_len + 4;

	if (!srn_gid_v4(sgid, &sip) || !srn_gid_v4(dgid, &dip)) {
		struct ibv_grh *g = (struct ibv_grh *)grh;

		memset(grh, 0, SRN_GRH_LEN);
		g->version_tclass_flow = htobe32(6u << 28);
		g->paylen = htobe16((uint16_t)(ip_len - 20));
		g->next_hdr = 17;
		g->hop_limit = 64;
		g->sgid = *sgid;
		g->dgid = *dgid;
		return SRN_WC_SL_ROCE_IPV6;
	}
	srn_grh_build_v4(grh, sip, dip, payload_len);
	return SRN_WC_SL_ROCE_IPV4;
}

/* A GRH that holds a valid IPv4 header (RoCEv2 over IPv4)? */
static bool srn_grh_is_v4(const struct ibv_grh *grh)
{
	const uint8_t *h = (const uint8_t *)grh + 20;

	return h[0] == 0x45 && srn_ip_csum(h, 20) == 0;
}

SRN_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context,
				   uint8_t port_num, struct ibv_wc *wc,
				   struct ibv_grh *grh,
				   struct ibv_ah_attr *ah_attr)
{
	uint32_t flow;

	(void)context;
	if (!wc || !ah_attr || !grh || !(wc->wc_flags & IBV_WC_GRH) ||
	    port_num != 1) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	ah_attr->is_global = 1;
	ah_attr->grh.sgid_index = 0;
	ah_attr->grh.hop_limit = 0xff;
	if (srn_grh_is_v4(grh)) { /* the sender is the IPv4 source */
		const uint8_t *h = (const uint8_t *)grh + 20;

		ah_attr->grh.dgid.raw[10] = 0xff;
		ah_attr->grh.dgid.raw[11] = 0xff;
		memcpy(ah_attr->grh.dgid.raw + 12, h + 12, 4);
		ah_attr->grh.traffic_class = h[1];
		return 0;
	}
	flow = be32toh(grh->version_tclass_flow);
	ah_attr->grh.dgid = grh->sgid;
	ah_attr->grh.traffic_class = (flow >> 20) & 0xff;
	ah_attr->grh.flow_label = flow & 0xfffff;
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
