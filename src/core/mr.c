// SPDX-License-Identifier: MIT
/*
 * softrnic — memory regions and the translation and protection table.
 *
 * A key is (random tag << 21 | index), index >= 2^14 (a window's: mw.c).
 * The TPT entry at index holds the key, PD, access and range; it lives in a memfd segment that peers map
 * read-only, so an initiator checks a remote key with plain loads. The
 * checks always run in the same order: key, PD, access, bounds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

int srn_memreg_check(uintptr_t addr, size_t len, bool need_write);

const char *const srn_key_err_names[] = {
	[SRN_KEY_OK] = "ok",
	[SRN_KEY_BAD_KEY] = "bad key",
	[SRN_KEY_BAD_PD] = "PD mismatch",
	[SRN_KEY_BAD_ACCESS] = "access denied",
	[SRN_KEY_BAD_BOUNDS] = "out of bounds",
	[SRN_KEY_BAD_QP] = "window bound to another QP",
};

#define SRN_ACCESS_SUPPORTED                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |               \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |              \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_HUGETLB | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_OPTIONAL_RANGE)
/* The rights that make an MR's memory shareable with (kin) peers: a
 * remote right, or MW_BIND (a window may grant one). An MR without one (a
 * receive buffer with LOCAL_WRITE only) stays private: SENDs into it go
 * through the receive CQ's bounce slots (or process_vm_writev), and
 * srn_mr_export answers with its address and no descriptor. With
 * SOFTRNIC_LOCAL_MR=shared, LOCAL_WRITE also makes it shareable, so that a
 * same-host initiator places SENDs into it directly (faster for large
 * SENDs; docs/security.md says what that gives a kin peer). */
static unsigned srn_access_shared = SRN_ACCESS_REMOTE | IBV_ACCESS_MW_BIND;

__attribute__((constructor)) static void srn_local_mr_init(void)
{
	const char *e = getenv("SOFTRNIC_LOCAL_MR");

	if (!e || !strcmp(e, "private"))
		return;
	if (!strcmp(e, "shared"))
		srn_access_shared = SRN_ACCESS_REMOTE | IBV_ACCESS_MW_BIND |
				    IBV_ACCESS_LOCAL_WRITE;
	else
		srn_warn("SOFTRNIC_LOCAL_MR=%s: not private or shared; "
			 "private",
			 e);
}
#define SRN_ACCESS_SHARED srn_access_shared
#define SRN_ACCESS_NEEDS_WRITE                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_ATOMIC)

int srn_tpt_init(struct srn_context *ctx)
{
	int err = srn_seg_create(&ctx->tpt_seg, SRN_SEG_TPT,
				 sizeof(struct srn_tpt_shm), 0);

	if (err)
		return err;
	/* untouched pages of both cost nothing */
	ctx->mr_by_index = calloc(SRN_TPT_ENTRIES, sizeof(*ctx->mr_by_index));
	if (!ctx->mr_by_index)
		return -ENOMEM;
	srn_ctx_tpt(ctx)->nentries = SRN_TPT_ENTRIES;
	ctx->mr_hint = SRN_MW_INDEX_MASK + 1;
	ctx->mw_hint = 1;
	return srn_seg_seal_writes(&ctx->tpt_seg);
}

void srn_tpt_fini(struct srn_context *ctx)
{
	srn_seg_unmap(&ctx->tpt_seg);
	free(ctx->mr_by_index);
	ctx->mr_by_index = NULL;
}

/* A random nonzero tag of bits bits (bits < 32) for a key
 * (util/random.c: no key says anything of another). */
uint32_t srn_key_tag(unsigned bits)
{
	uint32_t tag;

	do
		tag = srn_random_u32() & ((1u << bits) - 1);
	while (!tag);
	return tag;
}

/* Under ctx->lock: a free TPT index in [lo, lo + n), the search starting
 * at *hint, or 0. */
static uint32_t srn_tpt_alloc_index(struct srn_context *ctx, uint32_t lo,
				    uint32_t n, uint32_t *hint)
{
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = lo + (*hint - lo + k) % n;

		if (!ctx->mr_by_index[i]) {
			*hint = i + 1 < lo + n ? i + 1 : lo;
			return i;
		}
	}
	return 0;
}

/* Under ctx->lock: an MR's index (from 2^14, at most SRN_MAX_MR of them),
 * or 0. */
static uint32_t srn_tpt_alloc_mr(struct srn_context *ctx)
{
	if (ctx->nmr >= SRN_MAX_MR)
		return 0;
	return srn_tpt_alloc_index(ctx, SRN_MW_INDEX_MASK + 1,
				   SRN_TPT_ENTRIES - SRN_MW_INDEX_MASK - 1,
				   &ctx->mr_hint);
}

/* Publishes mr's TPT entry under key, or a new key when key is 0. */
static void srn_mr_publish(struct srn_context *ctx, struct srn_mr *mr,
			   uint32_t key)
{
	struct srn_tpt_entry *e = &srn_ctx_tpt(ctx)->entry[mr->index];

	if (!key)
		key = (srn_key_tag(31 - SRN_KEY_INDEX_BITS)
		       << SRN_KEY_INDEX_BITS) |
		      mr->index;

	/* relaxed: the entry is free (key 0), so no reader uses these
	 * fields until the release of key below publishes them */
	__atomic_store_n(&e->pd_handle, mr->pd->handle, __ATOMIC_RELAXED);
	__atomic_store_n(&e->access, mr->access, __ATOMIC_RELAXED);
	__atomic_store_n(&e->iova, mr->iova, __ATOMIC_RELAXED);
	__atomic_store_n(&e->length, (uint64_t)mr->ibmr.length,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&e->va, (uint64_t)(uintptr_t)mr->ibmr.addr,
			 __ATOMIC_RELAXED);
	/* relaxed: as above */
	__atomic_store_n(&e->flags, 0, __ATOMIC_RELAXED);
	/* release: pairs with the acquire of key in srn_tpt_lookup */
	__atomic_store_n(&e->key, key, __ATOMIC_RELEASE);
	/* one key for both, as devices do: the rights are checked at the
	 * target against the entry's access (an rkey of an MR without
	 * remote access fails there), and a rereg that adds remote access
	 * keeps the rkey the peer already has */
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
}

static void srn_mr_unpublish(struct srn_context *ctx, struct srn_mr *mr)
{
	struct srn_tpt_entry *e = &srn_ctx_tpt(ctx)->entry[mr->index];

	/* release: pairs with the acquire of key in srn_tpt_lookup, which
	 * then finds the entry gone. It orders nothing after it: the field
	 * stores of the next srn_mr_publish of this index are kept after
	 * it only by ctx->lock, not by a fence */
	__atomic_store_n(&e->key, 0, __ATOMIC_RELEASE);
}

/* A TPT index for slot (a window's), its entry unpublished. -ENOMEM. */
int srn_tpt_slot_add(struct srn_context *ctx, struct srn_mr *slot)
{
	pthread_mutex_lock(&ctx->lock);
	slot->index =
		srn_tpt_alloc_index(ctx, 1, SRN_MW_INDEX_MASK, &ctx->mw_hint);
	if (slot->index)
		ctx->mr_by_index[slot->index] = slot;
	pthread_mutex_unlock(&ctx->lock);
	return slot->index ? 0 : -ENOMEM;
}

void srn_tpt_slot_del(struct srn_context *ctx, struct srn_mr *slot)
{
	pthread_mutex_lock(&ctx->lock);
	srn_mr_unpublish(ctx, slot);
	ctx->mr_by_index[slot->index] = NULL;
	pthread_mutex_unlock(&ctx->lock);
}

/* Under ctx->lock: replaces entry index with src (src->key 0: leaves it
 * unpublished), as srn_mr_publish does. */
void srn_tpt_set_entry(struct srn_context *ctx, uint32_t index,
		       const struct srn_tpt_entry *src)
{
	struct srn_tpt_entry *e = &srn_ctx_tpt(ctx)->entry[index];

	/* release: pairs with the acquire of key in srn_tpt_lookup, which
	 * then finds the entry gone while its fields change */
	__atomic_store_n(&e->key, 0, __ATOMIC_RELEASE);
	if (!src->key)
		return;
	/* relaxed: the entry is unpublished (key 0) until the release of
	 * key below */
	__atomic_store_n(&e->pd_handle, src->pd_handle, __ATOMIC_RELAXED);
	__atomic_store_n(&e->access, src->access, __ATOMIC_RELAXED);
	__atomic_store_n(&e->flags, src->flags, __ATOMIC_RELAXED);
	__atomic_store_n(&e->iova, src->iova, __ATOMIC_RELAXED);
	__atomic_store_n(&e->length, src->length, __ATOMIC_RELAXED);
	__atomic_store_n(&e->va, src->va, __ATOMIC_RELAXED);
	__atomic_store_n(&e->mr_key, src->mr_key, __ATOMIC_RELAXED);
	__atomic_store_n(&e->qpn, src->qpn, __ATOMIC_RELAXED);
	/* release: pairs with the acquire of key in srn_tpt_lookup */
	__atomic_store_n(&e->key, src->key, __ATOMIC_RELEASE);
}

/* Implicit ODP: one MR for the whole address space (iova = address). */
static bool srn_mr_implicit(void *addr, size_t length, uint64_t iova,
			    unsigned access)
{
	return (access & IBV_ACCESS_ON_DEMAND) && !addr && !iova &&
	       length == SIZE_MAX;
}

static int srn_mr_check_args(void *addr, size_t length, uint64_t iova,
			     unsigned access)
{
	if (access & ~(SRN_ACCESS_SUPPORTED | SRN_ACCESS_DM))
		return -EINVAL;
	if ((access & SRN_ACCESS_DM) && !length)
		return 0; /* an empty MR of device memory, as devices allow */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (srn_mr_implicit(addr, length, iova, access))
		return 0;
	if (!length || length > SRN_MAX_MR_SIZE)
		return -EINVAL;
	if (((uintptr_t)addr & 4095) != (iova & 4095))
		return -EINVAL;
	if ((uintptr_t)addr + length < (uintptr_t)addr)
		return -EINVAL;
	return 0;
}

static size_t srn_memreg_size(unsigned npieces)
{
	return offsetof(struct srn_memreg, piece) +
	       npieces * sizeof(struct srn_mr_piece);
}

/* mr->reg: a copy of reg as long as its pieces (a million MRs of one
 * piece each must not cost 16). */
static int srn_mr_keep_reg(struct srn_mr *mr, struct srn_memreg *reg)
{
	mr->reg = malloc(srn_memreg_size(reg->npieces));
	if (!mr->reg) {
		srn_memreg_put(reg);
		return -ENOMEM;
	}
	memcpy(mr->reg, reg, srn_memreg_size(reg->npieces));
	mr->shared = true;
	return 0;
}

static void srn_mr_detach_memory(struct srn_mr *mr)
{
	if (!mr->shared)
		return;
	srn_memreg_put(mr->reg);
	free(mr->reg);
	mr->reg = NULL;
	mr->shared = false;
}

/* Makes the memory reachable (or at least checks it is there). */
static int srn_mr_attach_memory(struct srn_mr *mr)
{
	uintptr_t addr = (uintptr_t)mr->ibmr.addr;
	bool need_write = mr->access & SRN_ACCESS_NEEDS_WRITE;
	struct srn_memreg reg;
	int err;

	/* ODP: nothing is pinned or remapped at registration; the memory is
	 * whatever is mapped at the address when it is used, and peers on
	 * this host reach it with process_vm_* (srn_mr_export: not shared) */
	if ((mr->access & IBV_ACCESS_ON_DEMAND) || !mr->ibmr.length)
		return 0; /* (an empty MR of device memory: nothing either) */
	if (!(mr->access & SRN_ACCESS_SHARED))
		return srn_memreg_check(addr, mr->ibmr.length, false);
	err = srn_memreg_get(&reg, addr, mr->ibmr.length, need_write,
			     srn_access_ro_shared(mr->access));
	if (err == -EOPNOTSUPP) {
		srn_dbg("MR at %p: memory cannot be remapped (stack or "
			"unshareable mapping) or shared with the rights it "
			"needs (read-only and writable MRs over one page): "
			"peers use process_vm_*",
			mr->ibmr.addr);
		return 0; /* the range was found mapped (srn_memreg_get) */
	}
	return err ? err : srn_mr_keep_reg(mr, &reg);
}

struct ibv_mr *srn_mr_reg(struct ibv_pd *ibpd, void *addr, size_t length,
			  uint64_t iova, unsigned access)
{
	struct srn_context *ctx = to_sctx(ibpd->context);
	struct srn_mr *mr;
	int err = srn_mr_check_args(addr, length, iova, access);

	if (err)
		goto fail;
	err = -ENOMEM;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		goto fail;
	mr->pd = to_spd(ibpd);
	/* optional flags are ignored, but for softrnic's own */
	mr->access = access &
		     ~(IBV_ACCESS_OPTIONAL_RANGE & ~SRN_ACCESS_DIRECT) &
		     ~SRN_ACCESS_DM;
	mr->iova = iova;
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	err = srn_mr_attach_memory(mr);
	if (err)
		goto fail_free;
	pthread_mutex_lock(&ctx->lock);
	mr->index = srn_tpt_alloc_mr(ctx);
	if (!mr->index) {
		pthread_mutex_unlock(&ctx->lock);
		err = -ENOMEM;
		goto fail_put;
	}
	ctx->mr_by_index[mr->index] = mr;
	ctx->nmr++;
	mr->ibmr.handle = mr->index;
	srn_mr_publish(ctx, mr, 0);
	pthread_mutex_unlock(&ctx->lock);
	/* relaxed: a reference taken while the caller holds the PD; the
	 * count publishes nothing (the puts release it) */
	atomic_fetch_add_explicit(&mr->pd->refs, 1, memory_order_relaxed);
	return &mr->ibmr;
fail_put:
	srn_mr_detach_memory(mr);
fail_free:
	free(mr);
fail:
	errno = -err;
	return NULL;
}

SRN_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				     size_t length, int access)
{
	return srn_mr_reg(pd, addr, length, (uintptr_t)addr, access);
}

SRN_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					  size_t length, uint64_t iova,
					  int access)
{
	return srn_mr_reg(pd, addr, length, iova, access);
}

SRN_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					   size_t length, uint64_t iova,
					   unsigned int access)
{
	return srn_mr_reg(pd, addr, length, iova, access);
}

SRN_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct srn_mr *mr = container_of(ibmr, struct srn_mr, ibmr);
	struct srn_context *ctx = to_sctx(ibmr->context);

	pthread_mutex_lock(&ctx->lock);
	if (mr->nbound) { /* windows are bound to it (as rxe) */
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	srn_mr_unpublish(ctx, mr);
	ctx->mr_by_index[mr->index] = NULL;
	ctx->nmr--;
	pthread_mutex_unlock(&ctx->lock);
	srn_mr_detach_memory(mr);
	/* release: pairs with the acquire in ibv_dealloc_pd */
	atomic_fetch_sub_explicit(&mr->pd->refs, 1, memory_order_release);
	free(mr);
	return 0;
}

/* The registration ibv_rereg_mr asks for, in nw (a copy of mr with the
 * changes; its memory attached). -errno: the arguments are wrong (EINVAL)
 * or the memory cannot be registered. */
static int srn_rereg_prepare(struct srn_mr *mr, struct srn_mr *nw, int flags,
			     struct ibv_pd *pd, void *addr, size_t length,
			     int access)
{
	int err;

	if (!flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED))
		return -EINVAL;
	if ((flags & IBV_REREG_MR_CHANGE_PD) &&
	    (!pd || pd->context != mr->ibmr.context))
		return -EINVAL;
	*nw = *mr;
	nw->reg = NULL;
	nw->shared = false;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		nw->ibmr.addr = addr;
		nw->ibmr.length = length;
		nw->iova = (uintptr_t)addr;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		nw->pd = to_spd(pd);
		nw->ibmr.pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		nw->access = (unsigned)access &
			     ~(IBV_ACCESS_OPTIONAL_RANGE & ~SRN_ACCESS_DIRECT);
	err = srn_mr_check_args(nw->ibmr.addr, nw->ibmr.length, nw->iova,
				nw->access);
	return err ? err : srn_mr_attach_memory(nw);
}

/*
 * ibv_rereg_mr: the MR keeps its TPT index and its keys (applications keep
 * using the rkey they sent their peers, as on hardware) with its new
 * range, PD or access; the entry is unpublished while it changes. A
 * same-host peer's cached mapping of the old memory is not used again:
 * the peer's cache matches on iova and length too, which a new range
 * changes (shm_responder.c). On failure the old registration stays.
 */
SRN_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd,
			    void *addr, size_t length, int access)
{
	struct srn_mr *mr = container_of(ibmr, struct srn_mr, ibmr);
	struct srn_context *ctx = to_sctx(ibmr->context);
	struct srn_mr old = *mr, nw;
	int err = srn_rereg_prepare(mr, &nw, flags, pd, addr, length, access);

	if (err) {
		errno = -err;
		return err == -EINVAL ? IBV_REREG_MR_ERR_INPUT :
					IBV_REREG_MR_ERR_CMD;
	}
	pthread_mutex_lock(&ctx->lock);
	if (mr->nbound) { /* bound windows address its old memory */
		pthread_mutex_unlock(&ctx->lock);
		srn_mr_detach_memory(&nw);
		errno = EBUSY;
		return IBV_REREG_MR_ERR_INPUT;
	}
	srn_mr_unpublish(ctx, mr);
	*mr = nw;
	srn_mr_publish(ctx, mr, old.ibmr.lkey);
	pthread_mutex_unlock(&ctx->lock);
	if (nw.pd != old.pd) {
		/* relaxed: taken while the caller holds the new PD */
		atomic_fetch_add_explicit(&nw.pd->refs, 1,
					  memory_order_relaxed);
		/* release: pairs with the acquire in ibv_dealloc_pd */
		atomic_fetch_sub_explicit(&old.pd->refs, 1,
					  memory_order_release);
	}
	/* the new registration attached its memory itself (the same chunks,
	 * shared, when the range did not change): drop the old one's */
	srn_mr_detach_memory(&old);
	return 0;
}

/* A descriptor of a piece's memfd for a peer: a duplicate, or for a
 * read-only MR (sealed memfds) a new O_RDONLY open of it, so that even
 * the descriptor's own mode refuses a writable mapping. */
static int srn_mr_export_fd(int fd, bool ro)
{
	char path[64];

	if (!ro)
		return fcntl(fd, F_DUPFD_CLOEXEC, 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/*
 * For a peer's MR_REQ: the TPT entry of key and a copy of its memory
 * pieces with duplicated fds (the caller closes them). -EACCES when the
 * MR's memory is not shared with peers.
 */
int srn_mr_export(struct srn_context *ctx, uint32_t key,
		  struct srn_key_ref *ref, struct srn_memreg *reg_copy)
{
	struct srn_mr *mr;
	int err = 0;

	pthread_mutex_lock(&ctx->lock);
	mr = ctx->mr_by_index[srn_key_index(key)];
	if (!mr || mr->is_mw || srn_tpt_lookup(srn_ctx_tpt(ctx), key, ref)) {
		err = -ENOENT;
	} else if (!mr->shared) {
		/* memory we could not or would not share (a receive buffer
		 * without remote rights): process_vm_* for peers that may
		 * (nothing to send but the address), else refuse */
		memset(reg_copy, 0, sizeof(*reg_copy));
		err = (mr->access &
		       (SRN_ACCESS_SHARED | IBV_ACCESS_LOCAL_WRITE)) ?
			      0 :
			      -EACCES;
	} else {
		memcpy(reg_copy, mr->reg, srn_memreg_size(mr->reg->npieces));
		for (unsigned i = 0; i < reg_copy->npieces; i++) {
			reg_copy->piece[i].chunk = NULL;
			reg_copy->piece[i].fd = srn_mr_export_fd(
				mr->reg->piece[i].fd,
				srn_access_ro_shared(mr->access));
			if (reg_copy->piece[i].fd < 0)
				err = -EMFILE;
		}
		if (err)
			for (unsigned i = 0; i < reg_copy->npieces; i++)
				if (reg_copy->piece[i].fd >= 0)
					close(reg_copy->piece[i].fd);
	}
	pthread_mutex_unlock(&ctx->lock);
	return err;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Does this kernel know MADV_POPULATE_* (Linux 5.14)? Asked once. */
static bool srn_populate_known(void)
{
	static _Alignas(4096) char probe[4096];
	static int known = -1;
	/* relaxed: every thread computes the same answer; a race only asks
	 * twice (pairs with the relaxed store below) */
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (k < 0) {
		k = !madvise(probe, sizeof(probe), MADV_POPULATE_READ);
		/* relaxed: as above (pairs with the load above) */
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}

/*
 * Before the library itself touches [va, va + len) of an ODP MR: its pages
 * faulted in (writable when write), as a device's page fault handler does,
 * so that memory the application left unmapped (or read-only) is an error
 * completion instead of a SIGSEGV in the library. 0 or -EFAULT. A kernel
 * without MADV_POPULATE_* (before 5.14) is only asked, with msync, whether
 * the range is mapped at all.
 */
int srn_odp_fault(uint64_t va, uint64_t len, bool write)
{
	uintptr_t start = (uintptr_t)va & ~4095ul;
	uintptr_t end = ((uintptr_t)(va + len) + 4095) & ~4095ul;

	if (!len)
		return 0;
	if (end <= start || va + len < va)
		return -EFAULT;
	if (!srn_populate_known()) {
		if (msync((void *)start, end - start, MS_ASYNC))
			return -EFAULT;
		return 0;
	}
	/* EINVAL too: a read-only mapping asked to be written */
	if (madvise((void *)start, end - start,
		    write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ))
		return -EFAULT;
	return 0;
}

/* Faults the pages of [va, va + len) in, for reading or for writing. A
 * range with nothing mapped is left alone: the access fails later, as
 * the device's would. */
static void srn_prefetch(uint64_t va, uint64_t len, bool write)
{
	uintptr_t start = (uintptr_t)va & ~4095ul;
	uintptr_t end = ((uintptr_t)(va + len) + 4095) & ~4095ul;

	if (!len || end <= start)
		return;
	if (!write || madvise((void *)start, end - start, MADV_POPULATE_WRITE))
		(void)madvise((void *)start, end - start, MADV_WILLNEED);
}

/* ibv_advise_mr: ranges of ODP MRs (lkeys of pd) the application will use
 * soon. Checked like SGEs; prefetched unless NO_FAULT asks not to. */
int srn_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		  uint32_t flags, struct ibv_sge *sg, uint32_t num_sge)
{
	struct srn_context *ctx = to_sctx(pd->context);
	bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	struct srn_key_ref ref;

	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && !write &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	if ((flags & ~IBV_ADVISE_MR_FLAG_FLUSH) || !sg || !num_sge)
		return EINVAL;
	for (uint32_t i = 0; i < num_sge; i++) {
		if (srn_key_check(
			    srn_ctx_tpt(ctx), sg[i].lkey, to_spd(pd)->handle,
			    write ? IBV_ACCESS_LOCAL_WRITE : 0, sg[i].addr,
			    sg[i].length, &ref) != SRN_KEY_OK ||
		    !(ref.access & IBV_ACCESS_ON_DEMAND))
			return EINVAL;
	}
	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return 0;
	for (uint32_t i = 0; i < num_sge; i++) {
		srn_key_check(srn_ctx_tpt(ctx), sg[i].lkey, to_spd(pd)->handle,
			      0, sg[i].addr, sg[i].length, &ref);
		srn_prefetch(ref.va + (sg[i].addr - ref.iova), sg[i].length,
			     write);
	}
	return 0;
}
