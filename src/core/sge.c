// SPDX-License-Identifier: MIT
/*
 * softrnic — the requester's local side of a WQE: its SGEs checked in the
 * context's own TPT and resolved to iovecs, and copies between iovec lists.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "core/core.h"

/* Resolves the WQE's local SGEs (or its inline data) to iovecs. */
int srn_local_iov(struct srn_qp *qp, const struct srn_swqe *w, unsigned need,
		  struct iovec *iov, unsigned *n_p)
{
	const struct srn_tpt_shm *tpt = srn_ctx_tpt(qp->ctx);
	struct srn_key_ref ref;
	unsigned n = 0;

	if (w->inline_len) {
		iov[0].iov_base = srn_swqe_inline((struct srn_swqe *)w);
		iov[0].iov_len = w->inline_len;
		*n_p = 1;
		return 0;
	}
	for (uint32_t i = 0; i < w->num_sge; i++) {
		const struct ibv_sge *s = &w->sge[i];

		if (!s->length)
			continue;
		if (srn_key_check(tpt, s->lkey, qp->pd->handle, need, s->addr,
				  s->length, &ref) != SRN_KEY_OK)
			return -EACCES;
		iov[n].iov_base =
			(void *)(uintptr_t)(ref.va + (s->addr - ref.iova));
		iov[n++].iov_len = s->length;
		if (srn_key_fault(&ref, s->addr, s->length,
				  need & IBV_ACCESS_LOCAL_WRITE))
			return -EACCES; /* nothing mapped there: LOC_PROT_ERR */
	}
	*n_p = n;
	return 0;
}

/* The owner's view of a receive WQE of qp: its SGEs checked for
 * LOCAL_WRITE in the context's TPT and resolved to iovecs; their total
 * length in *cap_p. The first fill bytes will be written: those of an ODP
 * MR are faulted in. 0, or -EACCES (a bad lkey, or nothing mapped where
 * an ODP MR is written: LOC_PROT_ERR). */
int srn_recv_iov(struct srn_qp *qp, const struct srn_rwqe *rw,
		 struct iovec *iov, unsigned *n_p, uint64_t *cap_p,
		 uint64_t fill)
{
	const struct srn_tpt_shm *tpt = srn_ctx_tpt(qp->ctx);
	uint64_t cap = 0;
	unsigned n = 0;

	for (uint32_t i = 0; i < rw->num_sge && i < SRN_MAX_SGE; i++) {
		const struct srn_rsge *s = &rw->sge[i];
		uint64_t w = fill > cap ? fill - cap : 0;
		struct srn_key_ref ref;

		if (!s->length)
			continue;
		if (srn_key_check(tpt, s->lkey, qp->pd->handle,
				  IBV_ACCESS_LOCAL_WRITE, s->addr, s->length,
				  &ref) != SRN_KEY_OK ||
		    srn_key_fault(&ref, s->addr, w < s->length ? w : s->length,
				  true))
			return -EACCES;
		iov[n].iov_base =
			(void *)(uintptr_t)(ref.va + (s->addr - ref.iova));
		iov[n++].iov_len = s->length;
		cap += s->length;
	}
	*n_p = n;
	*cap_p = cap;
	return 0;
}

/* srn_iov_copy's walk of two lists. */
void srn_iov_copy_list(const struct iovec *dst, unsigned nd,
		       const struct iovec *src, unsigned ns)
{
	size_t doff = 0, soff = 0;
	unsigned di = 0, si = 0;

	while (di < nd && si < ns) {
		size_t dl = dst[di].iov_len - doff, sl = src[si].iov_len - soff;
		size_t k = dl < sl ? dl : sl;

		if (k) /* a zero-length SGE may have no address */
			memcpy((char *)dst[di].iov_base + doff,
			       (const char *)src[si].iov_base + soff, k);
		doff += k;
		soff += k;
		if (doff == dst[di].iov_len) {
			di++;
			doff = 0;
		}
		if (soff == src[si].iov_len) {
			si++;
			soff = 0;
		}
	}
}
