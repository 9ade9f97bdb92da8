/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the key checks of the translation and protection table, as
 * a target applies them: key, PD, access, bounds (and a window's QP and
 * MR). Inline: they run once per remote access on the data path, and the
 * key reference they fill then stays in registers in the caller; out of
 * line, filled through memory, an 8 B WRITE cost 851 instructions against
 * 750 (callgrind, docs/BENCHMARKS.md).
 * Included by core.h below struct srn_key_ref.
 */
#ifndef SRN_CORE_TPT_H
#define SRN_CORE_TPT_H

/* Takes a consistent copy of the entry of key; -ENOENT if it is not
 * registered (or is being replaced while we read it). */
static inline int srn_tpt_lookup(const struct srn_tpt_shm *tpt, uint32_t key,
				 struct srn_key_ref *ref)
{
	const struct srn_tpt_entry *e = &tpt->entry[srn_key_index(key)];
	uint32_t k;

	/* acquire: pairs with the release store of key in srn_mr_publish */
	k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
	if (!key || k != key)
		return -ENOENT;
	ref->key = k;
	/* acquire: the acquire of key above pairs with the release of key
	 * in srn_mr_publish, which published these fields; the acquire on
	 * each field only keeps the second read of key after them (a
	 * seqlock read side without a fence). relaxed: that second read,
	 * ordered by them; a different key means a torn copy */
	ref->pd_handle = __atomic_load_n(&e->pd_handle, __ATOMIC_ACQUIRE);
	ref->access = __atomic_load_n(&e->access, __ATOMIC_ACQUIRE);
	ref->iova = __atomic_load_n(&e->iova, __ATOMIC_ACQUIRE);
	ref->length = __atomic_load_n(&e->length, __ATOMIC_ACQUIRE);
	ref->va = __atomic_load_n(&e->va, __ATOMIC_ACQUIRE);
	ref->flags = __atomic_load_n(&e->flags, __ATOMIC_ACQUIRE);
	if (srn_unlikely(ref->flags & SRN_TPT_MW)) { /* only a window's */
		/* acquire: as the fields above (pairs with the release of
		 * key in srn_tpt_set_entry) */
		ref->mr_key = __atomic_load_n(&e->mr_key, __ATOMIC_ACQUIRE);
		/* acquire: as mr_key (pairs with the release of key in
		 * srn_tpt_set_entry) */
		ref->qpn = __atomic_load_n(&e->qpn, __ATOMIC_ACQUIRE);
	} else {
		ref->mr_key = ref->qpn = 0; /* an MR has neither */
	}
	/* relaxed: the second read of key, ordered by the acquires above;
	 * a different key means a torn copy */
	if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) != k)
		return -ENOENT;
	return 0;
}

/* The access and bounds checks of a key, without its PD. */
static inline enum srn_key_err srn_key_check_span(const struct srn_key_ref *ref,
						  unsigned need_access,
						  uint64_t addr, uint64_t len)
{
	if ((ref->access & need_access) != need_access)
		return SRN_KEY_BAD_ACCESS;
	if (addr < ref->iova || len > ref->length ||
	    addr - ref->iova > ref->length - len)
		return SRN_KEY_BAD_BOUNDS;
	return SRN_KEY_OK;
}

static inline enum srn_key_err srn_key_check_ref(const struct srn_key_ref *ref,
						 uint32_t pd_handle,
						 unsigned need_access,
						 uint64_t addr, uint64_t len)
{
	if (ref->pd_handle != pd_handle)
		return SRN_KEY_BAD_PD;
	return srn_key_check_span(ref, need_access, addr, len);
}

/* A local key (lkey): an MR's; a window's key is refused. */
static inline enum srn_key_err srn_key_check(const struct srn_tpt_shm *tpt,
					     uint32_t key, uint32_t pd_handle,
					     unsigned need_access,
					     uint64_t addr, uint64_t len,
					     struct srn_key_ref *ref)
{
	if (srn_tpt_lookup(tpt, key, ref) || (ref->flags & SRN_TPT_MW))
		return SRN_KEY_BAD_KEY;
	return srn_key_check_ref(ref, pd_handle, need_access, addr, len);
}

/*
 * A remote key used by QP qpn of the target: an MR's, or a window's. A
 * window is checked against its own PD, access and bounds, a type 2
 * window against the QP it is bound to, and its MR must still be the one
 * it was bound to (key unchanged). ref->map_* name the MR's memory.
 */
static inline enum srn_key_err
srn_rkey_check(const struct srn_tpt_shm *tpt, uint32_t key, uint32_t pd_handle,
	       uint32_t qpn, unsigned need_access, uint64_t addr, uint64_t len,
	       struct srn_key_ref *ref)
{
	struct srn_key_ref mr;
	enum srn_key_err ke;

	if (srn_tpt_lookup(tpt, key, ref))
		return SRN_KEY_BAD_KEY;
	ke = srn_key_check_ref(ref, pd_handle, need_access, addr, len);
	if (ke != SRN_KEY_OK)
		return ke;
	if (srn_likely(!(ref->flags & SRN_TPT_MW))) { /* an MR's own key */
		ref->map_key = ref->key;
		ref->map_access = ref->access;
		ref->map_iova = ref->iova;
		ref->map_length = ref->length;
		ref->map_va = ref->va;
		return SRN_KEY_OK;
	}
	if ((ref->flags & SRN_TPT_MW_TYPE2) && ref->qpn != qpn)
		return SRN_KEY_BAD_QP;
	if (srn_tpt_lookup(tpt, ref->mr_key, &mr) || (mr.flags & SRN_TPT_MW))
		return SRN_KEY_BAD_KEY; /* its MR is gone */
	ref->map_key = mr.key;
	ref->map_access = mr.access;
	ref->map_iova = mr.iova;
	ref->map_length = mr.length;
	ref->map_va = mr.va;
	return SRN_KEY_OK;
}

#endif /* SRN_CORE_TPT_H */
