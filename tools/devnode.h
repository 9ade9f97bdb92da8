/* SPDX-License-Identifier: MIT */
#ifndef SRN_TOOLS_DEVNODE_H
#define SRN_TOOLS_DEVNODE_H

/* Makes /dev/infiniband/<dev_name> exist for this process and its
 * children (a private mount namespace). 0 or -errno; best effort. */
int srn_devnode_prepare(const char *dev_name);

#endif
