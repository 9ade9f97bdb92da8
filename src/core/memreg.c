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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
	struct srn_list link; /* sorted by start */
	uintptr_t start;
	size_t len;
	uint64_t file_off0; /* file offset of start */
	int fd;
	ino_t ino;
	int prot;
	unsigned refs;
	bool foreign; /* the application's own shared mapping */
	bool listed;
};

struct srn_vma {
	uintptr_t start, end;
	int prot;
	bool shared;
	bool ours; /* a mapping of one of our srn-mr memfds */
	bool stack;
	uint64_t off;
	ino_t ino;
	char path[256];
};

static pthread_mutex_t srn_memreg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_list srn_chunks = SRN_LIST_INIT(srn_chunks);

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
	v->ours = v->shared && !strncmp(v->path, "/memfd:" SRN_MR_MEMFD_NAME,
					strlen("/memfd:" SRN_MR_MEMFD_NAME));
	v->stack = !strncmp(v->path, "[stack", 6);
	return 0;
}

/* The VMAs covering [start, end), clipped; -EFAULT if a page is unmapped
 * or inaccessible. */
static int srn_vmas_get(uintptr_t start, uintptr_t end, struct srn_vma *out,
			unsigned *n)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	uintptr_t cursor = start;
	struct srn_vma v;
	int err = 0;

	if (!f)
		return -errno;
	*n = 0;
	while (cursor < end && fgets(line, sizeof(line), f)) {
		if (srn_vma_parse(line, &v) || v.end <= cursor)
			continue;
		if (v.start > cursor || !(v.prot & PROT_READ)) {
			err = -EFAULT;
			break;
		}
		if (*n == SRN_MAX_VMAS) {
			err = -ENOMEM;
			break;
		}
		v.off += cursor - v.start;
		v.start = cursor;
		if (v.end > end)
			v.end = end;
		out[(*n)++] = v;
		cursor = v.end;
	}
	fclose(f);
	if (!err && cursor < end)
		err = -EFAULT;
	return err;
}

static struct srn_chunk *srn_chunk_find(uintptr_t addr)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &srn_chunks) {
		struct srn_chunk *c =
			srn_list_entry(pos, struct srn_chunk, link);

		if (addr >= c->start && addr < c->start + c->len)
			return c;
	}
	return NULL;
}

static uintptr_t srn_chunk_next_start(uintptr_t addr, uintptr_t limit)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &srn_chunks) {
		struct srn_chunk *c =
			srn_list_entry(pos, struct srn_chunk, link);

		if (c->start > addr && c->start < limit)
			limit = c->start;
	}
	return limit;
}

static void srn_chunk_insert(struct srn_chunk *c)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &srn_chunks) {
		if (srn_list_entry(pos, struct srn_chunk, link)->start >
		    c->start)
			break;
	}
	/* insert before pos (or at the tail) */
	srn_list_add_tail(&c->link, pos);
	c->listed = true;
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
	struct srn_vma *v = calloc(SRN_MAX_VMAS, sizeof(*v));
	uintptr_t end = c->start + c->len;
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned n = 0;
	char line[512];

	while (v && f && n < SRN_MAX_VMAS && fgets(line, sizeof(line), f)) {
		if (srn_vma_parse(line, &v[n]) || v[n].end <= c->start ||
		    v[n].start >= end)
			continue;
		if (v[n].start < c->start) { /* clip to the chunk */
			v[n].off += c->start - v[n].start;
			v[n].start = c->start;
		}
		if (v[n].end > end)
			v[n].end = end;
		if (v[n].shared && v[n].ino == c->ino &&
		    v[n].off == c->file_off0 + (v[n].start - c->start))
			n++;
	}
	if (f)
		fclose(f);
	for (unsigned i = 0; i < n; i++)
		srn_remap_fixed((void *)v[i].start, v[i].end - v[i].start,
				v[i].prot, MAP_PRIVATE, c->fd, (off_t)v[i].off);
	free(v);
}

static void srn_chunk_unref(struct srn_chunk *c)
{
	if (--c->refs)
		return;
	if (c->listed) { /* else stale: its addresses were mapped anew */
		srn_list_del(&c->link);
		if (!c->foreign) /* the application's own mapping stays */
			srn_chunk_unshare(c);
	}
	close(c->fd);
	free(c);
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
	/* release: pairs with the acquire in srn_chunk_remap (once, from
	 * the progress engine's first use; remaps may run in any thread) */
	__atomic_store_n(&srn_memreg_leave, leave, __ATOMIC_RELEASE);
	__atomic_store_n(&srn_memreg_enter, enter, __ATOMIC_RELEASE);
}

/* Writes whole pages into fd. They hold more than the registered buffer
 * (other heap blocks, a sanitizer's redzones between them): the kernel
 * copies them, not an instrumented memcpy. */
static int srn_pages_write(int fd, const void *src, size_t len)
{
	size_t off = 0;

	while (off < len) {
		long k = syscall(SYS_pwrite64, fd, (const char *)src + off,
				 len - off, (off_t)off);

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

/* Copies private pages into a new memfd and maps it over them in place. */
static int srn_chunk_remap(struct srn_chunk *c, const struct srn_vma *vmas,
			   unsigned n)
{
	void (*enter)(void), (*leave)(void);
	struct stat st;
	int fd, err = 0;

	fd = memfd_create(SRN_MR_MEMFD_NAME, MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, c->len) || fstat(fd, &st)) {
		err = -errno;
		goto out_close;
	}
	/* acquire: pairs with the release in srn_memreg_set_quiesce */
	enter = __atomic_load_n(&srn_memreg_enter, __ATOMIC_ACQUIRE);
	leave = __atomic_load_n(&srn_memreg_leave, __ATOMIC_ACQUIRE);
	if (enter)
		enter(); /* see srn_memreg_set_quiesce */
	err = srn_pages_write(fd, (void *)c->start, c->len);
	if (!err)
		err = srn_remap_fixed((void *)c->start, c->len, c->prot,
				      MAP_SHARED, fd, 0);
	if (enter && leave)
		leave();
	if (err)
		goto out_close;
	c->fd = fd;
	c->ino = st.st_ino;
	c->file_off0 = 0;
	return 0;
out_close:
	close(fd);
	return err;
}

/* The calling thread's stack may not be remapped under its feet (the copy
 * would miss the frames written meanwhile). Thread stacks are anonymous
 * mappings that /proc/self/maps does not name. */
static bool srn_on_own_stack(uintptr_t start, uintptr_t end)
{
	pthread_attr_t a;
	void *base;
	size_t size;
	bool hit = false;

	if (pthread_getattr_np(pthread_self(), &a))
		return false;
	if (!pthread_attr_getstack(&a, &base, &size))
		hit = start < (uintptr_t)base + size && end > (uintptr_t)base;
	pthread_attr_destroy(&a);
	return hit;
}

/* Creates the chunk that starts at cursor and ends at most at limit. */
static int srn_chunk_create(uintptr_t cursor, uintptr_t limit,
			    const struct srn_vma *vmas, unsigned n,
			    struct srn_chunk **c_p)
{
	const struct srn_vma *v = srn_vma_at(vmas, n, cursor);
	struct srn_chunk *c;
	int err;

	if (!v)
		return -EFAULT;
	if (v->stack ||
	    srn_on_own_stack(cursor, v->end < limit ? v->end : limit))
		return -EOPNOTSUPP;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->start = cursor;
	c->len = (v->end < limit ? v->end : limit) - cursor;
	c->prot = v->prot;
	if (v->shared && !v->ours)
		err = srn_chunk_foreign(c, v);
	else
		err = srn_chunk_remap(c, vmas, n);
	if (err) {
		free(c);
		return err;
	}
	c->refs = 1;
	srn_chunk_insert(c);
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

static int srn_memreg_piece(struct srn_memreg *reg, uintptr_t *cursor,
			    uintptr_t end, const struct srn_vma *vmas,
			    unsigned n)
{
	struct srn_chunk *c = srn_chunk_find(*cursor);
	struct srn_mr_piece *p;
	uintptr_t pend;
	int err;

	if (reg->npieces == SRN_ARRAY_SIZE(reg->piece))
		return -ENOMEM;
	if (c && !srn_chunk_valid(c, srn_vma_at(vmas, n, *cursor))) {
		srn_list_del(&c->link); /* stale: MRs may still hold it */
		c->listed = false;
		c = NULL;
	}
	if (c) {
		c->refs++;
	} else {
		err = srn_chunk_create(*cursor,
				       srn_chunk_next_start(*cursor, end), vmas,
				       n, &c);
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

int srn_memreg_get(struct srn_memreg *reg, uintptr_t addr, size_t len,
		   bool need_write)
{
	struct srn_vma *vmas = calloc(SRN_MAX_VMAS, sizeof(*vmas));
	uintptr_t end, cursor;
	unsigned n = 0;
	int err;

	if (!vmas)
		return -ENOMEM;
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
		err = srn_memreg_piece(reg, &cursor, end, vmas, n);
	if (err) {
		for (unsigned i = 0; i < reg->npieces; i++)
			srn_chunk_unref(reg->piece[i].chunk);
		reg->npieces = 0;
	}
	pthread_mutex_unlock(&srn_memreg_lock);
	free(vmas);
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
	struct srn_vma *vmas = calloc(SRN_MAX_VMAS, sizeof(*vmas));
	uintptr_t start = addr & ~(SRN_PAGE - 1);
	unsigned n = 0;
	int err;

	if (!vmas)
		return -ENOMEM;
	err = srn_vmas_get(start, SRN_ALIGN_UP(addr + len, SRN_PAGE), vmas, &n);
	for (unsigned i = 0; !err && i < n; i++)
		if (need_write && !(vmas[i].prot & PROT_WRITE))
			err = -EFAULT;
	free(vmas);
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
		close(c->fd);
		/* MRs of the parent still point at c: leak it on purpose */
		c->listed = false;
		c->fd = -1;
	}
}
