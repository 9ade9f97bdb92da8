// SPDX-License-Identifier: MIT
/*
 * softrnic — device memory (ibv_alloc_dm): memory of the "NIC" that the
 * application reaches only through ibv_memcpy_to_dm/from_dm (4-byte
 * aligned, in bounds) and through zero-based MRs (ibv_reg_dm_mr). Here it
 * is a memfd mapped shared by its owner, so an MR over it is reached by
 * same-host peers like any shared mapping (core/memreg.c) and by a
 * responder on another host like any MR. At most SRN_MAX_DM_SIZE per
 * context, as a device's on-chip memory is small.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"

struct srn_dm {
	struct ibv_dm ibdm;
	uint8_t *mem; /* a memfd, mapped shared */
	size_t map_len;
	size_t length;
};

static inline struct srn_dm *to_sdm(struct ibv_dm *d)
{
	return container_of(d, struct srn_dm, ibdm);
}

static bool srn_dm_range_ok(const struct srn_dm *dm, uint64_t off, size_t len)
{
	return !((off | len) & 3) && off <= dm->length &&
	       len <= dm->length - off;
}

static int srn_dm_to(struct ibv_dm *ibdm, uint64_t off, const void *host,
		     size_t len)
{
	struct srn_dm *dm = to_sdm(ibdm);

	if (!srn_dm_range_ok(dm, off, len))
		return EINVAL;
	memcpy(dm->mem + off, host, len);
	return 0;
}

static int srn_dm_from(void *host, struct ibv_dm *ibdm, uint64_t off,
		       size_t len)
{
	struct srn_dm *dm = to_sdm(ibdm);

	if (!srn_dm_range_ok(dm, off, len))
		return EINVAL;
	memcpy(host, dm->mem + off, len);
	return 0;
}

/* Counts delta bytes against the context's device memory; -ENOMEM past
 * the limit. A context inherited across fork() (a child using its
 * parent's) is not counted: its lock may have been held at the fork. */
static int srn_dm_account(struct srn_context *ctx, ssize_t delta)
{
	int err = 0;

	if (srn_ctx_is_foreign(ctx))
		return delta > (ssize_t)SRN_MAX_DM_SIZE ? -ENOMEM : 0;
	pthread_mutex_lock(&ctx->lock);
	if (delta > 0 && (size_t)delta > SRN_MAX_DM_SIZE - ctx->dm_used)
		err = -ENOMEM;
	else
		ctx->dm_used += delta;
	pthread_mutex_unlock(&ctx->lock);
	return err;
}

/* The memory: a memfd of whole pages, zeroed, mapped shared. */
static int srn_dm_map(struct srn_dm *dm, size_t length)
{
	int fd = memfd_create("srn-dm", MFD_CLOEXEC);

	if (fd < 0)
		return -errno;
	dm->map_len = (length + 4095) & ~4095ul;
	dm->mem = ftruncate(fd, (off_t)dm->map_len) ?
			  MAP_FAILED :
			  mmap(NULL, dm->map_len, PROT_READ | PROT_WRITE,
			       MAP_SHARED, fd, 0);
	close(fd);
	return dm->mem == MAP_FAILED ? -ENOMEM : 0;
}

struct ibv_dm *srn_alloc_dm(struct ibv_context *context,
			    struct ibv_alloc_dm_attr *attr)
{
	struct srn_context *ctx = to_sctx(context);
	struct srn_dm *dm;
	int err = EINVAL;

	if (!attr || attr->comp_mask || !attr->length ||
	    attr->log_align_req > 12)
		goto fail;
	err = ENOMEM;
	if (srn_dm_account(ctx, (ssize_t)attr->length))
		goto fail;
	dm = calloc(1, sizeof(*dm));
	if (dm && !srn_dm_map(dm, attr->length)) {
		dm->length = attr->length;
		dm->ibdm.context = context;
		dm->ibdm.memcpy_to_dm = srn_dm_to;
		dm->ibdm.memcpy_from_dm = srn_dm_from;
		dm->ibdm.handle =
			srn_ctx_is_foreign(ctx) ? 0 : srn_ctx_new_handle(ctx);
		return &dm->ibdm;
	}
	free(dm);
	srn_dm_account(ctx, -(ssize_t)attr->length);
fail:
	errno = err;
	return NULL;
}

int srn_free_dm(struct ibv_dm *ibdm)
{
	struct srn_dm *dm = to_sdm(ibdm);
	struct srn_context *ctx = to_sctx(ibdm->context);

	srn_dm_account(ctx, -(ssize_t)dm->length);
	munmap(dm->mem, dm->map_len);
	free(dm);
	return 0;
}

/* A zero-based MR over [off, off + length) of dm: its iova 0 is that
 * offset. IBV_ACCESS_ZERO_BASED is required (libibverbs checks it too). */
struct ibv_mr *srn_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
			     uint64_t off, size_t length, unsigned int access)
{
	struct srn_dm *dm = to_sdm(ibdm);

	if (!(access & IBV_ACCESS_ZERO_BASED) || (off & 4095) ||
	    off > dm->length || length > dm->length - off) {
		errno = EINVAL;
		return NULL;
	}
	return srn_mr_reg(pd, dm->mem + off, length, 0,
			  (access & ~IBV_ACCESS_ZERO_BASED) | SRN_ACCESS_DM);
}
