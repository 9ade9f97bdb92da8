/* SPDX-License-Identifier: MIT */
/* softrnic — hooks between the utility exports and the device. */
#ifndef SRN_VERBS_UTIL_H
#define SRN_VERBS_UTIL_H

#include <stddef.h>

/* Serves the virtual sysfs files of softrnic0: length read, or -ENOENT
 * when (dir, file) is not ours. Provided by device.c. */
int srn_sysfs_virtual_read(const char *dir, const char *file, char *buf,
			   size_t size);

#endif /* SRN_VERBS_UTIL_H */
