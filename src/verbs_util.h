/* SPDX-License-Identifier: MIT */
/*
 * softrnic — hidden hooks between the exported verbs utilities
 * (verbs_util.c) and the rest of the library.
 */
#ifndef SRN_VERBS_UTIL_H
#define SRN_VERBS_UTIL_H

#include <stddef.h>

/*
 * Serves a virtual sysfs file of a softrnic device. ibv_read_sysfs_file()
 * asks it first for every "<dir>/<file>" it is given.
 *
 * Fills @buf (at most @size bytes, NUL-terminated when it fits, no trailing
 * newline) and returns the length read, >= 0, when (@dir, @file) is ours;
 * returns -ENOENT when it is not, and the real file is read instead; any
 * other negative errno fails the read (-1, errno set).
 *
 * verbs_util.c has a weak default that owns nothing; device.c provides the
 * real one.
 */
int srn_sysfs_virtual_read(const char *dir, const char *file, char *buf,
			   size_t size);

#endif /* SRN_VERBS_UTIL_H */
