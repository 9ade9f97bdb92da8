// SPDX-License-Identifier: MIT
/*
 * softrnic — direct access (<softrnic/direct.h>): the application gets its
 * own mapping of a peer MR's pages, the same pages the initiator reaches
 * for RDMA WRITE/READ/atomics.
 *
 * The rkey is checked in the target's TPT like any request, with
 * SRN_ACCESS_DIRECT on top of the REMOTE_* rights asked for; the MR is
 * fetched into the peer's MR cache as for a WRITE (srn_resp_mr_any), and
 * the pages holding the range are mapped a second time with mremap(old
 * size 0), which makes a new mapping of the same shared pages. The cache
 * may evict and unmap its own copy; ours stays until srn_direct_unmap.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "transport/shm/shm.h"

#define SRN_PAGE_MASK 4095ul

/* The cache slot whose mapping holds [ptr, ptr + len). */
static struct srn_rmr *srn_rmr_holding(struct srn_peer *p, const uint8_t *ptr,
				       uint64_t len)
{
	for (unsigned i = 0; i < p->rmr_cap; i++) {
		struct srn_rmr *m = &p->rmr[i];
		const uint8_t *map = m->map;

		if (m->key && !m->pvm && map && ptr >= map &&
		    len <= m->map_len &&
		    (size_t)(ptr - map) <= m->map_len - len)
			return m;
	}
	return NULL;
}

/* A second mapping of the pages of [ptr, ptr + len), with prot. */
static int srn_direct_dup(uint8_t *ptr, uint64_t len, int prot, void **map_p,
			  size_t *map_len_p)
{
	uintptr_t start = (uintptr_t)ptr & ~SRN_PAGE_MASK;
	uintptr_t end = ((uintptr_t)ptr + len + SRN_PAGE_MASK) & ~SRN_PAGE_MASK;
	void *map = mremap((void *)start, 0, end - start, MREMAP_MAYMOVE);

	if (map == MAP_FAILED) /* e.g. the range spans two files */
		return -EOPNOTSUPP;
	if (mprotect(map, end - start, prot)) {
		munmap(map, end - start);
		return -EOPNOTSUPP;
	}
	*map_p = map;
	*map_len_p = end - start;
	return 0;
}

int srn_shm_direct_map(struct srn_qp *qp, uint64_t addr, uint32_t rkey,
		       uint64_t len, unsigned need_access, void **map_p,
		       size_t *map_len_p, void **ptr_p)
{
	struct srn_peer *p = qp->tpriv;
	int prot = PROT_READ;
	struct srn_rmr *m;
	uint8_t *ptr;
	bool pvm;
	int err;

	if (!p)
		return -ENOTCONN;
	/* acquire: pairs with the release in srn_shm_on_hup */
	if (atomic_load_explicit(&p->gone, memory_order_acquire) != 0)
		return -ENOTCONN;
	/* acquire: pairs with the release in srn_shm_up (the segments) */
	if (!atomic_load_explicit(&p->up, memory_order_acquire) &&
	    (srn_shm_ctl_wait(p) ||
	     /* acquire: pairs with the release in srn_shm_up */
	     !atomic_load_explicit(&p->up, memory_order_acquire)))
		return -ENOTCONN;
	err = srn_resp_mr_any(p, rkey, addr, len,
			      need_access | SRN_ACCESS_DIRECT, &ptr, &pvm);
	if (err == -EAGAIN)
		return -ETIMEDOUT;
	if (err)
		return err;
	m = pvm ? NULL : srn_rmr_holding(p, ptr, len);
	if (!m)
		return -EOPNOTSUPP; /* reached only with process_vm_* */
	if (need_access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC))
		prot |= PROT_WRITE;
	err = srn_direct_dup(ptr, len, prot, map_p, map_len_p);
	if (!err)
		*ptr_p = (uint8_t *)*map_p + ((uintptr_t)ptr & SRN_PAGE_MASK);
	return err;
}
