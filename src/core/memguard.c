// SPDX-License-Identifier: MIT
/*
 * softrnic — holding the writes of other threads to pages that memreg.c
 * copies into a memfd and maps from there in their place, so that none is
 * lost (converting ahead: core/memreg.c, srn_chunk_ahead).
 *
 * A userfaultfd in write-protect mode. srn_memguard_hold registers the
 * range and write-protects every page of it, populated or not
 * (UFFD_FEATURE_WP_UNPOPULATED): from then on a thread that writes there
 * sleeps in the kernel, in its page fault, whether the write is its own
 * store or a system call's (read() into the page, ...). Nobody reads the
 * descriptor: srn_memguard_release wakes the sleepers (UFFDIO_WAKE) once
 * the range is mapped from the memfd, their faults are retried on the new
 * mapping, and the writes land in the memfd, after the copy. The sleepers
 * wait in the kernel (no spinning, no signal handler); while they wait,
 * the faulting threads hold no mmap lock (the kernel drops it), so the
 * remap proceeds.
 *
 * Only a userfaultfd that holds kernel-mode writes too is used: that takes
 * vm.unprivileged_userfaultfd = 1, CAP_SYS_PTRACE, or access to
 * /dev/userfaultfd. The other kind (UFFD_USER_MODE_ONLY, all that an
 * unprivileged process may get) makes such a system call fail with EFAULT
 * instead of waiting: not used; memreg.c then takes nothing ahead.
 *
 * The registering thread must not write into the range between hold and
 * release (it would wait for itself): memreg.c excludes its stack and its
 * static TLS (errno) from the ranges it holds, writes nothing else there,
 * and signals are blocked meanwhile (a handler could write anywhere).
 *
 * Each hold opens its userfaultfd and its release closes it: the
 * registrations' descriptors stay those of memreg.c (func_mr_scale counts
 * them), and a copy with pages held happens once per chunk taken ahead
 * (about 200 for 100,000 consecutive pages).
 *
 * Under srn_memreg_lock (core/memreg.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/core.h"

/* Newer than some distributions' uapi headers (Linux 6.4, 5.11) */
#define SRN_UFFD_FEATURE_WP_UNPOPULATED (1ull << 13)
#define SRN_USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#define SRN_UFFD_FEATURES \
	(UFFD_FEATURE_PAGEFAULT_FLAG_WP | SRN_UFFD_FEATURE_WP_UNPOPULATED)

enum srn_memguard_state {
	SRN_MEMGUARD_UNKNOWN,
	SRN_MEMGUARD_READY,
	SRN_MEMGUARD_NONE,
};

static const char *const srn_memguard_state_names[] = {
	[SRN_MEMGUARD_UNKNOWN] = "unknown",
	[SRN_MEMGUARD_READY] = "ready",
	[SRN_MEMGUARD_NONE] = "none",
};
static_assert(SRN_ARRAY_SIZE(srn_memguard_state_names) == SRN_MEMGUARD_NONE + 1,
	      "memguard state names");

static enum srn_memguard_state srn_memguard_state;
static int srn_uffd = -1; /* between a hold and its release */
static sigset_t srn_memguard_oldmask;

/* A userfaultfd that also holds kernel-mode faults, or -1. */
static int srn_memguard_open(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	int dev;

	if (fd >= 0 || errno != EPERM)
		return fd;
	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -1;
	fd = ioctl(dev, SRN_USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	close(dev);
	return fd;
}

/* A userfaultfd with the features of a hold, or -1. */
static int srn_memguard_new(void)
{
	struct uffdio_api api = { .api = UFFD_API,
				  .features = SRN_UFFD_FEATURES };
	int fd = srn_memguard_open();

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api) ||
	    (api.features & SRN_UFFD_FEATURES) != SRN_UFFD_FEATURES ||
	    !(api.ioctls & (1ull << _UFFDIO_REGISTER))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Asked once: whether holds can be made in this process. */
bool srn_memguard_ready(void)
{
	int fd;

	if (srn_memguard_state == SRN_MEMGUARD_UNKNOWN) {
		fd = srn_memguard_new();
		srn_memguard_state = fd < 0 ? SRN_MEMGUARD_NONE :
					      SRN_MEMGUARD_READY;
		if (fd >= 0)
			close(fd);
		/* which registration path this process takes (the figures
		 * of docs/BENCHMARKS.md, "Registration", differ 4x) */
		srn_log(SRN_LOG_INFO,
			fd >= 0 ? "memory registration: pages converted ahead, "
				  "their writers held (userfaultfd)" :
				  "memory registration: each MR's pages "
				  "converted alone (no userfaultfd that holds "
				  "kernel-mode writes: needs read-write access "
				  "to /dev/userfaultfd, CAP_SYS_PTRACE or "
				  "vm.unprivileged_userfaultfd = 1)");
	}
	return srn_memguard_state == SRN_MEMGUARD_READY;
}

static void srn_memguard_close(void)
{
	close(srn_uffd);
	srn_uffd = -1;
	pthread_sigmask(SIG_SETMASK, &srn_memguard_oldmask, NULL);
}

const char *srn_memguard_state_name(void)
{
	return srn_memguard_state_names[srn_memguard_state];
}

static void srn_memguard_unregister(uintptr_t start, size_t len)
{
	struct uffdio_range r = { .start = start, .len = len };

	ioctl(srn_uffd, UFFDIO_UNREGISTER, &r);
}

/* Writes to [start, start + len) wait from now until srn_memguard_release;
 * signals of the calling thread too. 0, or -errno (nothing held: the
 * range is in use by another userfaultfd, not anonymous memory, ...). */
int srn_memguard_hold(uintptr_t start, size_t len)
{
	struct uffdio_register reg = {
		.range = { .start = start, .len = len },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	struct uffdio_writeprotect wp = {
		.range = { .start = start, .len = len },
		.mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};
	sigset_t all;

	if (!srn_memguard_ready() || (srn_uffd = srn_memguard_new()) < 0)
		return -EOPNOTSUPP;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &srn_memguard_oldmask);
	if (ioctl(srn_uffd, UFFDIO_REGISTER, &reg)) {
		srn_memguard_close();
		return -EOPNOTSUPP;
	}
	if (!(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT)) ||
	    ioctl(srn_uffd, UFFDIO_WRITEPROTECT, &wp)) {
		srn_memguard_unregister(start, len);
		srn_memguard_close();
		return -EOPNOTSUPP;
	}
	return 0;
}

/* The writers held since srn_memguard_hold go on: into the new mapping if
 * remapped, else into the pages as they were (protection removed). */
void srn_memguard_release(uintptr_t start, size_t len, bool remapped)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = start, .len = len },
		.mode = 0,
	};
	struct uffdio_range r = { .start = start, .len = len };

	if (!remapped) {
		ioctl(srn_uffd, UFFDIO_WRITEPROTECT, &wp); /* and wakes */
		srn_memguard_unregister(start, len);
	}
	ioctl(srn_uffd, UFFDIO_WAKE, &r);
	srn_memguard_close(); /* would wake them too */
}

/* In a forked child (of a thread other than the one holding, if any): a
 * descriptor open here is the parent's (its address space). */
void srn_memguard_atfork_child(void)
{
	if (srn_uffd >= 0)
		close(srn_uffd);
	srn_uffd = -1;
}
