// SPDX-License-Identifier: MIT
/*
 * softrnic — memfd segments: the unit of shared memory between processes.
 *
 * A segment is created by its owner, passed to peers as an fd and mapped
 * by them; it has no name in any filesystem, so it disappears with the
 * last mapping or fd. Segments are MADV_DONTFORK: a forked child does not
 * inherit them and so cannot corrupt the parent's queues.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

static const char *const srn_seg_names[] = {
	[SRN_SEG_QP] = "srn-qp",
	[SRN_SEG_CQ] = "srn-cq",
	[SRN_SEG_SRQ] = "srn-srq",
	[SRN_SEG_TPT] = "srn-tpt",
};

/* Segments up to this size are populated when mapped (below). */
#define SRN_SEG_POPULATE_MAX (64u << 10)

/*
 * A QP segment (one per connection, on both sides) goes to a chunk of
 * segarena.c when it fits: unmapping it alone costs a TLB invalidation.
 * Small segments (QPs, CQs, SRQs: what every connection maps) are
 * populated by the mmap itself: on this project's machines (nested
 * virtualisation) a page's first touch through a fresh mapping costs
 * 13-15 us; populated, 2-4 us more in the mmap and 6-8 us at the first
 * touch (docs/BENCHMARKS.md, "Connection setup: what a system call costs
 * here"). The key table is large and read sparsely: it is not.
 */
static void *srn_seg_mmap(int fd, enum srn_seg_kind kind, size_t size, int prot)
{
	int flags = MAP_SHARED;
	void *p;

	if (kind != SRN_SEG_TPT && size <= SRN_SEG_POPULATE_MAX)
		flags |= MAP_POPULATE;
	p = kind == SRN_SEG_QP ? srn_sega_map(size, prot, fd, flags) : NULL;
	return p ? p : mmap(NULL, size, prot, flags, fd, 0);
}

static void srn_seg_munmap(void *addr, size_t size)
{
	if (!srn_sega_unmap(addr, size))
		munmap(addr, size);
}

int srn_seg_create(struct srn_seg *seg, enum srn_seg_kind kind, size_t size,
		   uint32_t id)
{
	struct srn_seg_hdr *h;
	int fd, err;

	size = SRN_ALIGN_UP(size, (size_t)4096);
	fd = memfd_create(srn_seg_names[kind], MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, size)) {
		err = -errno;
		close(fd);
		return err;
	}
	seg->addr = srn_seg_mmap(fd, kind, size, PROT_READ | PROT_WRITE);
	if (seg->addr == MAP_FAILED) {
		err = -errno;
		close(fd);
		return err;
	}
	madvise(seg->addr, size, MADV_DONTFORK);
	seg->fd = fd;
	seg->size = size;
	h = seg->addr;
	h->magic = SRN_SHM_MAGIC;
	h->version = SRN_SHM_VERSION;
	h->kind = kind;
	h->size = size;
	h->owner_pid = srn_pid;
	h->id = id;
	return 0;
}

/* Maps a segment received from a peer and validates its header. Takes
 * ownership of fd on success. */
int srn_seg_map(struct srn_seg *seg, int fd, enum srn_seg_kind kind,
		size_t min_size, int prot)
{
	const struct srn_seg_hdr *h;
	struct stat st;
	void *p;

	if (fstat(fd, &st))
		return -errno;
	if ((size_t)st.st_size < min_size || (size_t)st.st_size < 4096 ||
	    st.st_size > (1ll << 34))
		return -EPROTO;
	p = srn_seg_mmap(fd, kind, st.st_size, prot);
	if (p == MAP_FAILED)
		return -errno;
	h = p;
	if (h->magic != SRN_SHM_MAGIC || h->version != SRN_SHM_VERSION ||
	    h->kind != kind || h->size != (uint64_t)st.st_size) {
		srn_seg_munmap(p, st.st_size);
		return -EPROTO;
	}
	madvise(p, st.st_size, MADV_DONTFORK);
	seg->addr = p;
	seg->size = st.st_size;
	seg->fd = fd;
	return 0;
}

void srn_seg_unmap(struct srn_seg *seg)
{
	if (seg->addr && seg->addr != MAP_FAILED)
		srn_seg_munmap(seg->addr, seg->size);
	if (seg->fd >= 0)
		close(seg->fd);
	seg->addr = NULL;
	seg->fd = -1;
	seg->size = 0;
}

/* After this, nobody can map the segment writable again: peers get a
 * read-only view whatever they ask for. */
int srn_seg_seal_writes(struct srn_seg *seg)
{
	if (fcntl(seg->fd, F_ADD_SEALS,
		  F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW |
			  F_SEAL_SEAL))
		return -errno;
	return 0;
}
