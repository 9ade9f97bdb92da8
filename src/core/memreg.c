// SPDX-License-Identifier: MIT
/*
 * softrnic — making registered memory reachable by peer processes.
 *
 * A peer can only load and store into our memory if that memory is a
 * shared mapping of a file it can map too. At registration every page of
 * the MR is covered by a "chunk":
 *   - memory that is already a shared mapping of a file (MAP_SHARED of a
 *     /dev/shm file, a memfd, ...) is shared as it is: the file is reopened;
 *   - private memory (heap, anonymous mmap, .data/.bss) is remapped in
 *     place onto a fresh memfd: the pages are copied into the memfd and the
 *     memfd is mapped MAP_FIXED over the same addresses, with the same
 *     protection. The application keeps its pointers and contents.
 * Chunks are reference-counted by MRs; overlapping MRs share chunks.
 *
 * An MR shared read-only (srn_access_ro_shared: REMOTE_READ its one remote
 * right) gets chunks of its own, "sealed": the memfd is mapped here first,
 * with the application's protection, then sealed with F_SEAL_FUTURE_WRITE
 * (and against shrinking, growing and further seals) and made mode 0400.
 * From then on nobody, the owner included, can create a writable shared
 * mapping of it or write() to it, whatever descriptor they hold or reopen;
 * the owner's mapping, made before the seal, stays writable. Sealed and
 * writable chunks never share pages: an MR that would need both (a
 * read-only MR over pages of a writable one, or the reverse, or a
 * read-only MR of the application's own shared file) is not shared at all
 * (-EOPNOTSUPP): peers reach it with process_vm_* (docs/security.md).
 *
 * Caveats (docs/architecture.md): writes by other threads to the same pages
 * during the remap are lost; neighbours in the same pages become shared
 * memory too; after fork() the child gets a private copy (atfork handler).
 * Stack memory is not remapped: peers reach such an MR with
 * process_vm_readv/writev instead (the same-host transport).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <search.h>
#include <string.h>
#include <assert.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

/*
 * The remaps of application memory go to the kernel directly, not through
 * libc's mmap/mremap: the application sees the same contents at the same
 * addresses, so memory-event hooks that interpose those functions must
 * not see a change. UCX's (ucm) would take the remap of the region it has
 * just registered for an unmap, drop the registration from its cache and
 * register again at the next message: a remap per message.
 */
static int srn_remap_fixed(void *addr, size_t len, int prot, int flags, int fd,
			   off_t off)
{
	long r = syscall(SYS_mmap, addr, len, prot, flags | MAP_FIXED, fd, off);

	return r == -1 ? -errno : 0;
}

static void srn_move_fixed(void *from, size_t len, void *to)
{
	syscall(SYS_mremap, from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
}

#define SRN_PAGE 4096ul
#define SRN_MR_MEMFD_NAME "srn-mr"
#define SRN_MAX_VMAS 64

struct srn_chunk {
	struct srn_list link; /* in srn_chunks (for fork) */
	uintptr_t start;
	size_t len;
	uint64_t file_off0; /* file offset of start */
	int fd;
	ino_t ino;
	int prot;
	unsigned refs;
	bool foreign; /* the application's own shared mapping */
	bool sealed; /* a read-only MR's: F_SEAL_FUTURE_WRITE, mode 0400 */
	bool arena; /* fd is the arena's (not the chunk's own) */
	bool listed;
};

struct srn_vma {
	uintptr_t start, end; /* clipped to the range asked about */
	uintptr_t vend; /* the VMA's own end */
	int prot;
	bool shared;
	bool ours; /* a mapping of one of our srn-mr memfds */
	bool stack;
	bool anon; /* private anonymous memory, not the brk heap */
	uint64_t off;
	ino_t ino;
	char path[256];
};

static pthread_mutex_t srn_memreg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_list srn_chunks = SRN_LIST_INIT(srn_chunks);

static void srn_vma_classify(struct srn_vma *v)
{
	v->ours = v->shared && !strncmp(v->path, "/memfd:" SRN_MR_MEMFD_NAME,
					strlen("/memfd:" SRN_MR_MEMFD_NAME));
	v->stack = !strncmp(v->path, "[stack", 6);
	v->anon = !v->shared && !v->ino &&
		  (!v->path[0] || !strncmp(v->path, "[anon:", 6));
}

static int srn_vma_parse(const char *line, struct srn_vma *v)
{
	char perms[8] = "";
	unsigned long long s, e, off, ino;
	int pathpos = 0;

	if (sscanf(line, "%llx-%llx %7s %llx %*s %llu %n", &s, &e, perms, &off,
		   &ino, &pathpos) < 5)
		return -EPROTO;
	memset(v, 0, sizeof(*v));
	v->start = s;
	v->end = e;
	v->off = off;
	v->ino = ino;
	v->prot = (perms[0] == 'r' ? PROT_READ : 0) |
		  (perms[1] == 'w' ? PROT_WRITE : 0) |
		  (perms[2] == 'x' ? PROT_EXEC : 0);
	v->shared = perms[3] == 's';
	if (pathpos > 0) {
		snprintf(v->path, sizeof(v->path), "%s", line + pathpos);
		v->path[strcspn(v->path, "\n")] = 0;
	}
	srn_vma_classify(v);
	return 0;
}

/* The kernel's PROCMAP_QUERY (Linux 6.11, uapi linux/fs.h): the VMA at an
 * address without reading all of /proc/self/maps. Older kernels: ENOTTY,
 * and the text is parsed instead. */
struct srn_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
static_assert(sizeof(struct srn_procmap_query) == 104, "procmap_query");
#define SRN_PROCMAP_QUERY _IOWR('f', 17, struct srn_procmap_query)
#define SRN_PMQ_READ 0x1u
#define SRN_PMQ_WRITE 0x2u
#define SRN_PMQ_EXEC 0x4u
#define SRN_PMQ_SHARED 0x8u
#define SRN_PMQ_COVERING_OR_NEXT 0x10u

/* Under srn_memreg_lock: /proc/self/maps, open for the queries (-1: not
 * yet, or the kernel has no PROCMAP_QUERY) */
static int srn_maps_fd = -1;
static bool srn_maps_noquery;

static int srn_pmq_ioctl(struct srn_procmap_query *q, uintptr_t addr, bool next,
			 char *name, size_t name_len)
{
	memset(q, 0, sizeof(*q));
	q->size = sizeof(*q);
	q->query_flags = next ? SRN_PMQ_COVERING_OR_NEXT : 0;
	q->query_addr = addr;
	q->vma_name_addr = (uintptr_t)name;
	q->vma_name_size = (uint32_t)name_len;
	return ioctl(srn_maps_fd, SRN_PROCMAP_QUERY, q) ? -errno : 0;
}

/* The VMA covering addr (or, if next, the first one after it): 0,
 * -ENOENT (none), -ENOTTY (no PROCMAP_QUERY: parse the text). */
static int srn_vma_query(uintptr_t addr, bool next, struct srn_vma *v)
{
	struct srn_procmap_query q;
	int err;

	if (srn_maps_noquery)
		return -ENOTTY;
	if (srn_maps_fd < 0)
		srn_maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	memset(v, 0, sizeof(*v));
	err = srn_maps_fd < 0 ?
		      -ENOTTY :
		      srn_pmq_ioctl(&q, addr, next, v->path, sizeof(v->path));
	if (err == -ENAMETOOLONG) /* a long path: not needed but to reopen */
		err = srn_pmq_ioctl(&q, addr, next, NULL, 0);
	if (err == -ENOENT)
		return err;
	if (err) {
		srn_maps_noquery = true;
		return -ENOTTY;
	}
	v->start = q.vma_start;
	v->end = q.vma_end;
	v->off = q.vma_offset;
	v->ino = q.inode;
	v->prot = (q.vma_flags & SRN_PMQ_READ ? PROT_READ : 0) |
		  (q.vma_flags & SRN_PMQ_WRITE ? PROT_WRITE : 0) |
		  (q.vma_flags & SRN_PMQ_EXEC ? PROT_EXEC : 0);
	v->shared = q.vma_flags & SRN_PMQ_SHARED;
	srn_vma_classify(v);
	return 0;
}

/* Adds v clipped to [*cursor, end) to out; the cursor moves past it. */
static int srn_vma_add(struct srn_vma *v, uintptr_t *cursor, uintptr_t end,
		       struct srn_vma *out, unsigned *n)
{
	if (*n == SRN_MAX_VMAS)
		return -ENOMEM;
	v->vend = v->end;
	if (v->start < *cursor) {
		v->off += *cursor - v->start;
		v->start = *cursor;
	}
	if (v->end > end)
		v->end = end;
	out[(*n)++] = *v;
	*cursor = v->end;
	return 0;
}

/* The VMAs in [start, end), clipped, from the text of /proc/self/maps.
 * Unless gaps, -EFAULT if a page is unmapped or inaccessible. */
static int srn_vmas_parse(uintptr_t start, uintptr_t end, bool gaps,
			  struct srn_vma *out, unsigned *n)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	uintptr_t cursor = start;
	struct srn_vma v;
	int err = 0;

	if (!f)
		return -errno;
	while (!err && cursor < end && fgets(line, sizeof(line), f)) {
		if (srn_vma_parse(line, &v) || v.end <= cursor)
			continue;
		if (v.start >= end)
			break;
		if (!gaps && (v.start > cursor || !(v.prot & PROT_READ)))
			err = -EFAULT;
		else
			err = srn_vma_add(&v, &cursor, end, out, n);
	}
	fclose(f);
	return err;
}

/* The same, with PROCMAP_QUERY; -ENOTTY without it. */
static int srn_vmas_query(uintptr_t start, uintptr_t end, bool gaps,
			  struct srn_vma *out, unsigned *n)
{
	uintptr_t cursor = start;
	struct srn_vma v;
	int err = 0;

	while (!err && cursor < end) {
		err = srn_vma_query(cursor, gaps, &v);
		if (err == -ENOENT || (!err && v.start >= end))
			return gaps ? 0 : -EFAULT;
		if (!err && !gaps && !(v.prot & PROT_READ))
			err = -EFAULT;
		if (!err)
			err = srn_vma_add(&v, &cursor, end, out, n);
	}
	return err;
}

/* Under srn_memreg_lock: the VMAs in [start, end), clipped; unless gaps,
 * -EFAULT if a page is unmapped or inaccessible. */
static int srn_vmas_list(uintptr_t start, uintptr_t end, bool gaps,
			 struct srn_vma *out, unsigned *n)
{
	int err;

	*n = 0;
	err = srn_vmas_query(start, end, gaps, out, n);
	if (err != -ENOTTY)
		return err;
	*n = 0;
	err = srn_vmas_parse(start, end, gaps, out, n);
	if (!err && !gaps && (!*n || out[*n - 1].end < end))
		err = -EFAULT;
	return err;
}

static int srn_vmas_get(uintptr_t start, uintptr_t end, struct srn_vma *out,
			unsigned *n)
{
	return srn_vmas_list(start, end, false, out, n);
}

/* Chunks by address: a tree (tsearch) in which a chunk "equals" every
 * range it overlaps; chunks never overlap each other. */
static void *srn_chunk_tree;

static int srn_chunk_cmp(const void *pa, const void *pb)
{
	const struct srn_chunk *a = pa, *b = pb;

	if (a->start + a->len <= b->start)
		return -1;
	return b->start + b->len <= a->start ? 1 : 0;
}

/* A listed chunk overlapping [addr, addr + len), or NULL. */
static struct srn_chunk *srn_chunk_overlap(uintptr_t addr, size_t len)
{
	struct srn_chunk key = { .start = addr, .len = len };
	void **r = tfind(&key, &srn_chunk_tree, srn_chunk_cmp);

	return r ? *r : NULL;
}

static struct srn_chunk *srn_chunk_find(uintptr_t addr)
{
	return srn_chunk_overlap(addr, 1);
}

/* The start of the first chunk in (addr, limit), else limit; no chunk
 * holds addr. */
static uintptr_t srn_chunk_next_start(uintptr_t addr, uintptr_t limit)
{
	struct srn_chunk *c;

	while (limit > addr && (c = srn_chunk_overlap(addr, limit - addr)))
		limit = c->start;
	return limit;
}

static int srn_chunk_insert(struct srn_chunk *c)
{
	if (!tsearch(c, &srn_chunk_tree, srn_chunk_cmp))
		return -ENOMEM;
	srn_list_add_tail(&c->link, &srn_chunks);
	c->listed = true;
	return 0;
}

/* Its addresses are no longer its own (or it is gone): unlisted, MRs may
 * still hold it. */
static void srn_chunk_unlist(struct srn_chunk *c)
{
	tdelete(c, &srn_chunk_tree, srn_chunk_cmp);
	srn_list_del(&c->link);
	c->listed = false;
}

/*
 * The arena: one memfd (sparse, 2^62 bytes) for the writable chunks of the
 * process. One descriptor for any number of MRs. Each chunk takes the next
 * offsets, never used before nor after (a mapping the application moved
 * with mremap keeps reading its own pages, whatever is registered later),
 * so chunks registered in address order are consecutive in the file too
 * and the kernel merges their mappings into one VMA. A chunk's pages are
 * freed from the file when it is unshared (srn_chunk_unshare_arena).
 * Under srn_memreg_lock.
 */
static int srn_arena_fd = -1;
static ino_t srn_arena_ino;
static uint64_t srn_arena_next;
static unsigned long srn_arena_chunks; /* closed when none is left */

/*
 * Freed chunks' file pages not yet punched: [lo, hi), chunks freed one
 * after another at consecutive offsets (deregistrations in address order,
 * either way) are punched together, up to SRN_PUNCH_MAX, or when the next
 * one is not adjacent, or when the arena closes (its unshared mappings,
 * private, still hold the file). Their pages are private copies already
 * (srn_chunk_unshare_arena): no mapping reads these file pages.
 */
#define SRN_PUNCH_MAX (2ull << 20)
static uint64_t srn_punch_lo, srn_punch_hi;

static void srn_arena_punch_flush(void)
{
	if (srn_punch_hi > srn_punch_lo)
		fallocate(srn_arena_fd,
			  FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)srn_punch_lo,
			  (off_t)(srn_punch_hi - srn_punch_lo));
	srn_punch_lo = srn_punch_hi = 0;
}

static void srn_arena_punch(uint64_t off, uint64_t len)
{
	if (srn_punch_hi > srn_punch_lo &&
	    srn_punch_hi - srn_punch_lo < SRN_PUNCH_MAX) {
		if (off == srn_punch_hi) {
			srn_punch_hi += len;
			return;
		}
		if (off + len == srn_punch_lo) {
			srn_punch_lo = off;
			return;
		}
	}
	srn_arena_punch_flush();
	srn_punch_lo = off;
	srn_punch_hi = off + len;
}

static void srn_arena_close(void)
{
	srn_arena_punch_flush();
	if (srn_arena_fd >= 0)
		close(srn_arena_fd);
	srn_arena_fd = -1;
	srn_arena_next = 0;
	srn_arena_chunks = 0;
}

#define SRN_ARENA_LEN (1ull << 62)

/* The offset of a new chunk of len bytes, or -errno. */
static int64_t srn_arena_alloc(size_t len)
{
	struct stat st;
	uint64_t off;

	if (srn_arena_fd < 0) {
		int fd = memfd_create(SRN_MR_MEMFD_NAME, MFD_CLOEXEC);

		if (fd < 0)
			return -errno;
		if (ftruncate(fd, (off_t)SRN_ARENA_LEN) || fstat(fd, &st)) {
			close(fd);
			return -EIO;
		}
		srn_arena_fd = fd;
		srn_arena_ino = st.st_ino;
	}
	if (len > SRN_ARENA_LEN - srn_arena_next)
		return -ENOSPC;
	off = srn_arena_next;
	srn_arena_next += len;
	return (int64_t)off;
}

/* Writable chunk pages back to private memory: if every page of the chunk
 * is still mapped here from the arena (nothing moved them elsewhere), the
 * private mapping is made to copy each page now (MADV_POPULATE_WRITE) and
 * the arena's pages are freed. */
static void srn_chunk_unshare_arena(const struct srn_chunk *c,
				    const struct srn_vma *v, unsigned n,
				    bool intact)
{
	for (unsigned i = 0; i < n; i++)
		intact = intact && (v[i].prot & PROT_WRITE) &&
			 !madvise((void *)v[i].start, v[i].end - v[i].start,
				  MADV_POPULATE_WRITE);
	if (intact)
		srn_arena_punch(c->file_off0, c->len);
}

/*
 * The last MR over a remapped chunk is gone: its pages become private
 * again, or a fork() would share them (heap pages among them) between
 * parent and child, and their mallocs would corrupt each other's heap.
 * They are mapped MAP_PRIVATE from the same memfd in place: no copy, and
 * no write of another thread is lost (before, it went into the file the
 * private mapping reads; after, into its private copy). Only the parts
 * still mapped from the chunk's memfd (the application may have unmapped
 * and reused the rest).
 */
static void srn_chunk_unshare(const struct srn_chunk *c)
{
	static struct srn_vma v[SRN_MAX_VMAS]; /* under srn_memreg_lock */
	struct srn_vma *w = v;
	uintptr_t cursor = c->start;
	unsigned n = 0, k = 0;
	bool intact = true;

	if (srn_vmas_list(c->start, c->start + c->len, true, v, &n))
		n = 0;
	for (unsigned i = 0; i < n; i++) {
		intact = intact && v[i].start == cursor;
		cursor = v[i].end;
		if (!v[i].shared || v[i].ino != c->ino ||
		    v[i].off != c->file_off0 + (v[i].start - c->start)) {
			intact = false;
			continue;
		}
		if (srn_remap_fixed((void *)v[i].start, v[i].end - v[i].start,
				    v[i].prot, MAP_PRIVATE, c->fd,
				    (off_t)v[i].off))
			intact = false;
		w[k++] = v[i];
	}
	if (c->arena)
		srn_chunk_unshare_arena(
			c, w, k, intact && n && cursor == c->start + c->len);
}

static unsigned srn_nsealed; /* sealed chunks: each holds an fd */
static void srn_pipe_close(void);

static void srn_chunk_unref(struct srn_chunk *c)
{
	if (--c->refs)
		return;
	if (c->listed) { /* else stale: its addresses were mapped anew */
		srn_chunk_unlist(c);
		if (!c->foreign) /* the application's own mapping stays */
			srn_chunk_unshare(c);
	}
	if (c->sealed)
		srn_nsealed--;
	if (!c->arena)
		close(c->fd);
	else if (!--srn_arena_chunks)
		srn_arena_close(); /* its mappings keep the file meanwhile */
	free(c);
	if (!srn_arena_chunks && !srn_nsealed)
		srn_pipe_close();
}

static const struct srn_vma *srn_vma_at(const struct srn_vma *v, unsigned n,
					uintptr_t addr)
{
	for (unsigned i = 0; i < n; i++)
		if (addr >= v[i].start && addr < v[i].end)
			return &v[i];
	return NULL;
}

/* Shares an existing shared file mapping as it is. */
static int srn_chunk_foreign(struct srn_chunk *c, const struct srn_vma *v)
{
	char path[128];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path),
		 "/proc/self/map_files/%" PRIxPTR "-%" PRIxPTR, v->start,
		 v->end);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && v->path[0] == '/')
		fd = open(v->path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -EOPNOTSUPP;
	if (fstat(fd, &st) || st.st_ino != v->ino) {
		close(fd);
		return -EOPNOTSUPP;
	}
	c->fd = fd;
	c->ino = st.st_ino;
	c->file_off0 = v->off;
	c->foreign = true;
	return 0;
}

static void (*srn_memreg_enter)(void);
static void (*srn_memreg_leave)(void);

void srn_memreg_set_quiesce(void (*enter)(void), void (*leave)(void))
{
	/* release: pairs with the acquire in srn_chunk_copy_map (once, from
	 * the progress engine's first use; remaps may run in any thread) */
	__atomic_store_n(&srn_memreg_leave, leave, __ATOMIC_RELEASE);
	__atomic_store_n(&srn_memreg_enter, enter, __ATOMIC_RELEASE);
}

#define SRN_SPLICE_PIPE (1 << 20)

/* Moves [from, to) of src through the pipe p into fd at foff + from:
 * the bytes done (from on error). */
static size_t srn_pages_splice_pipe(const int p[2], int fd, const char *src,
				    size_t from, size_t to, uint64_t foff)
{
	while (from < to) {
		struct iovec iov = { (void *)(src + from), to - from };
		ssize_t k = vmsplice(p[1], &iov, 1, 0);
		ssize_t done = 0;

		if (k <= 0)
			return from;
		while (done < k) {
			loff_t o = (loff_t)(foff + from + (size_t)done);
			ssize_t r = splice(p[0], NULL, fd, &o,
					   (size_t)(k - done), 0);

			if (r <= 0)
				return from + (size_t)done;
			done += r;
		}
		from += (size_t)k;
	}
	return from;
}

/*
 * The copy goes through a pipe: vmsplice takes references to the pages
 * (no copy through the user addresses) and splice copies them into the
 * file page by page in the kernel. In a virtual machine whose every access
 * to user memory from the kernel is costly, ten times faster than pwrite
 * (docs/BENCHMARKS.md, "Registration"). The pipe is kept while chunks
 * are (srn_chunk_unref closes it with the last one): a registration does
 * not create and close one, three system calls of the eleven a page's
 * registration and deregistration cost. Under srn_memreg_lock; -1: none;
 * big: its capacity raised to SRN_SPLICE_PIPE (else 64 KiB).
 */
static int srn_pipe[2] = { -1, -1 };
static bool srn_pipe_big;

static void srn_pipe_close(void)
{
	if (srn_pipe[0] >= 0) {
		close(srn_pipe[0]);
		close(srn_pipe[1]);
	}
	srn_pipe[0] = srn_pipe[1] = -1;
	srn_pipe_big = false;
}

/* Before a copy of len bytes, outside the hold (core/memguard.c: no
 * variable of ours is written while other threads' writes wait, it could
 * lie in the pages held). Without a pipe, the copy is a pwrite. */
static void srn_pipe_ready(size_t len)
{
	if (srn_pipe[0] < 0 && pipe2(srn_pipe, O_CLOEXEC))
		srn_pipe[0] = srn_pipe[1] = -1;
	if (srn_pipe[0] >= 0 && len > 16 * SRN_PAGE && !srn_pipe_big)
		srn_pipe_big =
			fcntl(srn_pipe[1], F_SETPIPE_SZ, SRN_SPLICE_PIPE) >= 0;
}

/* Writes whole pages into fd. They hold more than the registered buffer
 * (other heap blocks, a sanitizer's redzones between them): the kernel
 * copies them, not an instrumented memcpy. *dirty_p: the pipe may hold
 * bytes left over (srn_pipe_close it). */
static int srn_pages_write(int fd, const void *src, size_t len, uint64_t foff,
			   bool *dirty_p)
{
	size_t off = 0;

	if (srn_pipe[0] >= 0)
		off = srn_pages_splice_pipe(srn_pipe, fd, src, 0, len, foff);
	*dirty_p = srn_pipe[0] >= 0 && off < len;

	while (off < len) {
		long k = syscall(SYS_pwrite64, fd, (const char *)src + off,
				 len - off, (off_t)(foff + off));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		off += (size_t)k;
	}
	return 0;
}

/* The inverse: len bytes of fd from off into dst. */
static int srn_pages_read(int fd, void *dst, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		long k = syscall(SYS_pread64, fd, (char *)dst + done,
				 len - done, (off_t)(off + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		done += (size_t)k;
	}
	return 0;
}

/* A sealed chunk's memfd, once mapped here: no new writable mapping, no
 * write(), no size change, no seal removed, and no reopening O_RDWR by
 * another process of our uid that is not root (mode 0400). */
static int srn_chunk_seal(int fd)
{
	if (fcntl(fd, F_ADD_SEALS,
		  F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW |
			  F_SEAL_SEAL) ||
	    fchmod(fd, 0400))
		return -errno;
	return 0;
}

/*
 * Copies the chunk's pages into fd at off and maps them from there in
 * place, with the other threads' writers held (srn_memreg_set_quiesce).
 * The pages past own (taken ahead: srn_chunk_ahead) are not the MR's:
 * every write to the chunk waits meanwhile (srn_memguard_hold), or, if
 * that cannot be, the chunk shrinks to own.
 */
static int srn_chunk_copy_map(struct srn_chunk *c, int fd, uint64_t off,
			      size_t own)
{
	void (*enter)(void), (*leave)(void);
	bool held = false, dirty = false;
	int err;

	srn_pipe_ready(c->len);
	/* acquire: pairs with the release in srn_memreg_set_quiesce */
	enter = __atomic_load_n(&srn_memreg_enter, __ATOMIC_ACQUIRE);
	leave = __atomic_load_n(&srn_memreg_leave, __ATOMIC_ACQUIRE);
	if (enter)
		enter(); /* see srn_memreg_set_quiesce */
	/* held after enter: a handler of the layer above, waiting on a held
	 * page with its lock taken, would wait for us and we for it */
	if (c->len > own) {
		held = !srn_memguard_hold(c->start, c->len);
		if (!held)
			c->len =
				own; /* its file offsets past own stay unused */
	}
	err = srn_pages_write(fd, (void *)c->start, c->len, off, &dirty);
	if (!err)
		err = srn_remap_fixed((void *)c->start, c->len, c->prot,
				      MAP_SHARED, fd, (off_t)off);
	if (held)
		srn_memguard_release(c->start, c->len, !err);
	if (enter && leave)
		leave();
	if (dirty)
		srn_pipe_close();
	return err;
}

/* A writable chunk: its pages go into the arena (those past own are taken
 * ahead). */
static int srn_chunk_remap_arena(struct srn_chunk *c, size_t own)
{
	int64_t off = srn_arena_alloc(c->len);
	int err = off < 0 ? (int)off : 0;

	if (!err)
		err = srn_chunk_copy_map(c, srn_arena_fd, (uint64_t)off, own);
	if (err)
		return err;
	c->fd = srn_arena_fd;
	c->ino = srn_arena_ino;
	c->file_off0 = (uint64_t)off;
	c->arena = true;
	srn_arena_chunks++;
	return 0;
}

/* Under srn_memreg_lock. At most a quarter of the process's descriptors
 * go to sealed chunks; read-only MRs past that are not shared
 * (process_vm_*). Once they are full, the limit is read again at every
 * 64th such MR only (a raised limit is seen a little later). */
static bool srn_sealed_room(void)
{
	static unsigned long quarter = ULONG_MAX; /* until read */
	static unsigned full_asks;
	struct rlimit rl;

	if (srn_nsealed >= quarter && full_asks++ % 64)
		return false;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		quarter = ULONG_MAX;
	else
		quarter = rl.rlim_cur / 4;
	return srn_nsealed < quarter;
}

/* A read-only MR's chunk: a memfd of its own, mapped here, then sealed. */
static int srn_chunk_remap_sealed(struct srn_chunk *c)
{
	struct stat st;
	int fd, err = 0;

	if (!srn_sealed_room())
		return -EOPNOTSUPP;
	fd = memfd_create(SRN_MR_MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return errno == EMFILE || errno == ENFILE ? -EOPNOTSUPP :
							    -errno;
	if (ftruncate(fd, c->len) || fstat(fd, &st))
		err = -errno;
	if (!err)
		err = srn_chunk_copy_map(c, fd, 0, c->len);
	if (!err && srn_chunk_seal(fd)) {
		/* the pages stay mapped from fd, untracked (a later
		 * registration remaps them): not shareable read-only */
		err = -EOPNOTSUPP;
	}
	if (err) {
		close(fd);
		return err;
	}
	c->fd = fd;
	c->ino = st.st_ino;
	c->file_off0 = 0;
	srn_nsealed++;
	return 0;
}

/* The calling thread's stack may not be remapped under its feet (the copy
 * would miss the frames written meanwhile). Thread stacks are anonymous
 * mappings that /proc/self/maps does not name. */
static bool srn_on_own_stack(uintptr_t start, uintptr_t end)
{
	/* asked once per thread: for the main thread glibc reads the maps */
	static __thread uintptr_t lo, hi;
	static __thread bool known;
	pthread_attr_t a;
	void *base;
	size_t size;

	if (!known && !pthread_getattr_np(pthread_self(), &a)) {
		if (!pthread_attr_getstack(&a, &base, &size)) {
			lo = (uintptr_t)base;
			hi = (uintptr_t)base + size;
		}
		pthread_attr_destroy(&a);
		known = true;
	}
	return start < hi && end > lo;
}

/* Creates the chunk that starts at cursor and ends at most at limit; the
 * pages past end (if limit is beyond it) are taken ahead. */
static int srn_chunk_create(uintptr_t cursor, uintptr_t limit, uintptr_t end,
			    const struct srn_vma *vmas, unsigned n, bool ro,
			    struct srn_chunk **c_p)
{
	const struct srn_vma *v = srn_vma_at(vmas, n, cursor);
	struct srn_chunk *c;
	int err;

	if (!v)
		return -EFAULT;
	if (limit > v->vend)
		limit = v->vend;
	if (v->stack || srn_on_own_stack(cursor, limit))
		return -EOPNOTSUPP;
	if (ro && v->shared && !v->ours)
		return -EOPNOTSUPP; /* the application's file cannot be sealed */
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->start = cursor;
	c->len = limit - cursor;
	c->prot = v->prot;
	c->sealed = ro;
	if (v->shared && !v->ours)
		err = srn_chunk_foreign(c, v);
	else if (ro)
		err = srn_chunk_remap_sealed(c);
	else
		err = srn_chunk_remap_arena(c, (limit < end ? limit : end) -
						       cursor);
	if (err) {
		free(c);
		return err;
	}
	c->refs = 1;
	if (srn_chunk_insert(c)) {
		srn_chunk_unref(c); /* as if stale: its pages stay shared */
		return -ENOMEM;
	}
	*c_p = c;
	return 0;
}

/* A listed chunk is still what backs its addresses (the application may
 * have unmapped and reused them). */
static bool srn_chunk_valid(const struct srn_chunk *c, const struct srn_vma *v)
{
	return v && v->shared && v->ino == c->ino &&
	       v->off == c->file_off0 + (v->start - c->start);
}

/*
 * Converting ahead. Each conversion costs a copy and an mmap over the
 * application's pages, whose TLB shootdown is most of a registration's
 * time; applications that register many small buffers mostly register them
 * at consecutive addresses. So a writable chunk that starts where an arena
 * chunk ends (the registrations walk up through the memory) takes the
 * following pages of the same anonymous mapping too, twice the length of
 * the chunk before it up to SRN_AHEAD_MAX: the next registrations there
 * find their pages converted and cost a lookup. An isolated registration
 * converts its own pages only. The pages taken ahead are shared like the
 * MR's (docs/architecture.md, "Memory registration") and go back to
 * private memory with the chunk, when its last MR goes. Not in the brk
 * heap: the pages past its last block are malloc's free top, which every
 * allocating thread writes (each would wait during the copy, below).
 *
 * The pages taken ahead are not the MR's: another thread (the
 * application's, or a neighbouring mapping merged into the same VMA) may
 * write them during the copy, and that write must not be lost. So only
 * with their writers held during the copy and remap (srn_memguard_hold:
 * a userfaultfd that write-protects them; the writers wait in the kernel
 * and write into the new mapping): where that is not available (an
 * unprivileged process with vm.unprivileged_userfaultfd = 0), nothing is
 * taken ahead. The registering thread itself must not write there
 * meanwhile: its stack and its static TLS are never taken ahead.
 * SOFTRNIC_MR_AHEAD=0 turns it off.
 */
#define SRN_AHEAD_MAX (2ul << 20)

static bool srn_ahead_on;

__attribute__((constructor)) static void srn_ahead_init(void)
{
	const char *e = getenv("SOFTRNIC_MR_AHEAD");

	srn_ahead_on = !e || atoi(e) > 0;
}

static int srn_tls_add(struct dl_phdr_info *info, size_t size, void *arg)
{
	size_t *sum = arg;

	(void)size;
	for (unsigned i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			*sum += info->dlpi_phdr[i].p_memsz +
				info->dlpi_phdr[i].p_align;
	return 0;
}

/* The TLS and TCB slack around the thread pointer: glibc's surplus for
 * modules loaded later and its thread descriptor, with room to spare. */
#define SRN_TLS_SLACK (64ul << 10)

/*
 * The end of an ahead range [cursor, want) that keeps clear of the
 * calling thread's static TLS (errno) and thread descriptor, written by
 * the system call wrappers it calls while the range is held: the thread
 * pointer, with the modules' TLS blocks on one side (below on x86-64,
 * above on arm64) and the descriptor on the other. A thread's stack
 * mapping holds them (srn_on_own_stack); the main thread's are in a small
 * mapping of the dynamic loader, with which the kernel merges a buffer
 * mapped just below it into one VMA. Under srn_memreg_lock.
 */
static uintptr_t srn_ahead_clear_tls(uintptr_t cursor, uintptr_t want)
{
	static size_t span; /* 0 until computed */
	uintptr_t tp = (uintptr_t)__builtin_thread_pointer(), lo;

	if (!span) {
		dl_iterate_phdr(srn_tls_add, &span);
		span = SRN_ALIGN_UP(span + SRN_TLS_SLACK, SRN_PAGE);
	}
	lo = (tp & ~(SRN_PAGE - 1)) - span;
	if (want <= lo || cursor >= tp + span)
		return want;
	return cursor < lo ? lo : cursor;
}

/* The end of the chunk to create at cursor for a registration up to end
 * (at least end; no chunk starts in between, and none holds cursor). */
static uintptr_t srn_chunk_ahead(uintptr_t cursor, uintptr_t end,
				 const struct srn_vma *v, bool ro)
{
	struct srn_chunk *p = cursor ? srn_chunk_find(cursor - 1) : NULL;
	uintptr_t want;
	size_t len;

	if (!srn_ahead_on || ro || !v || !v->anon || !p || !p->arena ||
	    p->start + p->len != cursor)
		return end;
	len = p->len < SRN_AHEAD_MAX / 2 ? 2 * p->len : SRN_AHEAD_MAX;
	if (len > v->vend - cursor)
		len = v->vend - cursor;
	want = srn_ahead_clear_tls(cursor, cursor + len);
	if (want <= end || srn_on_own_stack(cursor, want) ||
	    !srn_memguard_ready())
		return end;
	return want;
}

static int srn_memreg_piece(struct srn_memreg *reg, uintptr_t *cursor,
			    uintptr_t end, const struct srn_vma *vmas,
			    unsigned n, bool ro)
{
	struct srn_chunk *c = srn_chunk_find(*cursor);
	const struct srn_vma *v = srn_vma_at(vmas, n, *cursor);
	struct srn_mr_piece *p;
	uintptr_t pend;
	int err;

	if (reg->npieces == SRN_ARRAY_SIZE(reg->piece))
		return -ENOMEM;
	if (c && !srn_chunk_valid(c, v)) {
		srn_chunk_unlist(c); /* stale: MRs may still hold it */
		c = NULL;
	}
	if (c && c->sealed != ro)
		return -EOPNOTSUPP; /* read-only and writable sharing mixed */
	if (c) {
		c->refs++;
	} else {
		uintptr_t ahead = srn_chunk_ahead(*cursor, end, v, ro);

		err = srn_chunk_create(*cursor,
				       srn_chunk_next_start(*cursor, ahead),
				       end, vmas, n, ro, &c);
		if (err)
			return err;
	}
	pend = c->start + c->len < end ? c->start + c->len : end;
	p = &reg->piece[reg->npieces++];
	p->chunk = c;
	p->fd = c->fd;
	p->span_off = *cursor - reg->span_start;
	p->len = pend - *cursor;
	p->file_off = c->file_off0 + (*cursor - c->start);
	*cursor = pend;
	return 0;
}

/* The VMAs of a registration (srn_memreg_get, srn_memreg_check): static,
 * under srn_memreg_lock (not 19 KiB cleared at each call). */
static struct srn_vma srn_reg_vmas[SRN_MAX_VMAS];

int srn_memreg_get(struct srn_memreg *reg, uintptr_t addr, size_t len,
		   bool need_write, bool ro)
{
	struct srn_vma *vmas = srn_reg_vmas;
	uintptr_t end, cursor;
	unsigned n = 0;
	int err;

	memset(reg, 0, sizeof(*reg));
	reg->span_start = addr & ~(SRN_PAGE - 1);
	end = SRN_ALIGN_UP(addr + len, SRN_PAGE);
	reg->span_len = end - reg->span_start;
	pthread_mutex_lock(&srn_memreg_lock);
	err = srn_vmas_get(reg->span_start, end, vmas, &n);
	for (unsigned i = 0; !err && i < n; i++)
		if (need_write && !(vmas[i].prot & PROT_WRITE))
			err = -EFAULT;
	for (cursor = reg->span_start; !err && cursor < end;)
		err = srn_memreg_piece(reg, &cursor, end, vmas, n, ro);
	if (err) {
		for (unsigned i = 0; i < reg->npieces; i++)
			srn_chunk_unref(reg->piece[i].chunk);
		reg->npieces = 0;
	}
	pthread_mutex_unlock(&srn_memreg_lock);
	return err;
}

void srn_memreg_put(struct srn_memreg *reg)
{
	pthread_mutex_lock(&srn_memreg_lock);
	for (unsigned i = 0; i < reg->npieces; i++)
		srn_chunk_unref(reg->piece[i].chunk);
	reg->npieces = 0;
	pthread_mutex_unlock(&srn_memreg_lock);
}

/* Only checks that [addr, addr+len) is mapped (MRs nobody else reaches). */
int srn_memreg_check(uintptr_t addr, size_t len, bool need_write)
{
	struct srn_vma *vmas = srn_reg_vmas;
	uintptr_t start = addr & ~(SRN_PAGE - 1);
	unsigned n = 0;
	int err;

	pthread_mutex_lock(&srn_memreg_lock);
	err = srn_vmas_get(start, SRN_ALIGN_UP(addr + len, SRN_PAGE), vmas, &n);
	for (unsigned i = 0; !err && i < n; i++)
		if (need_write && !(vmas[i].prot & PROT_WRITE))
			err = -EFAULT;
	pthread_mutex_unlock(&srn_memreg_lock);
	return err;
}

/*
 * In a forked child: give it a private copy of every remapped chunk, as
 * the kernel's copy-on-fork does for pinned pages, and forget the chunks
 * (the child owns no MR of its parent's).
 */
void srn_memreg_atfork_child(void)
{
	struct srn_list *pos, *tmp;

	pthread_mutex_init(&srn_memreg_lock, NULL);
	srn_list_for_each_safe(pos, tmp, &srn_chunks) {
		struct srn_chunk *c =
			srn_list_entry(pos, struct srn_chunk, link);
		void *copy;

		if (!c->foreign) {
			copy = mmap(NULL, c->len, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (copy != MAP_FAILED) {
				/* the kernel copies (see srn_pages_write) */
				srn_pages_read(c->fd, copy, c->len,
					       c->file_off0);
				mprotect(copy, c->len, c->prot);
				srn_move_fixed(copy, c->len, (void *)c->start);
			}
		}
		srn_list_del(&c->link);
		if (!c->arena)
			close(c->fd);
		/* MRs of the parent still point at c: leak it on purpose */
		c->listed = false;
		c->fd = -1;
	}
	srn_chunk_tree = NULL; /* its nodes leak with the chunks */
	srn_nsealed = 0;
	srn_punch_lo = srn_punch_hi = 0; /* the parent punches them */
	srn_arena_close();
	srn_pipe_close();
	srn_memguard_atfork_child();
	if (srn_maps_fd >= 0) /* the parent's maps */
		close(srn_maps_fd);
	srn_maps_fd = -1;
}
