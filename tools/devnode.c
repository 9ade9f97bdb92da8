// SPDX-License-Identifier: MIT
/*
 * softrnic exec: the device node that UCX looks for.
 *
 * UCX (libuct_ib) keeps an RDMA device only if /dev/infiniband/<dev_name>
 * is a character device the user may read and write; it never opens it.
 * softrnic has no kernel device, so exec gives the command a private mount
 * namespace in which a small tmpfs is mounted on /dev/infiniband and
 * /dev/null is bound at /dev/infiniband/<dev_name>. The host's /dev is not
 * changed, except that an empty /dev/infiniband directory is created when
 * it is missing (a mount point needs one). This needs root (CAP_SYS_ADMIN);
 * without it, the command runs as before and UCX does not list softrnic0.
 * SOFTRNIC_DEVNODE=0 turns it off, =1 makes a failure a warning.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mount.h>
#include <sys/stat.h>

#include "devnode.h"

#define SRN_DEVNODE_DIR "/dev/infiniband"

static int srn_devnode_mount(const char *node)
{
	int fd;

	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL))
		return -errno; /* our mounts must not reach the host */
	if (mkdir(SRN_DEVNODE_DIR, 0755) && errno != EEXIST)
		return -errno;
	if (mount("softrnic", SRN_DEVNODE_DIR, "tmpfs", MS_NOSUID | MS_NOEXEC,
		  "mode=0755,size=64k"))
		return -errno;
	fd = open(node, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	close(fd);
	if (mount("/dev/null", node, NULL, MS_BIND, NULL))
		return -errno;
	return 0;
}

int srn_devnode_prepare(const char *dev_name)
{
	const char *env = getenv("SOFTRNIC_DEVNODE");
	char node[256];
	struct stat st;
	int err;

	if (env && !strcmp(env, "0"))
		return 0;
	if (!dev_name || !*dev_name || strchr(dev_name, '/'))
		return -EINVAL;
	snprintf(node, sizeof(node), "%s/%s", SRN_DEVNODE_DIR, dev_name);
	if (!stat(node, &st) && S_ISCHR(st.st_mode))
		return 0; /* there already (a real node, or a parent's) */
	if (unshare(CLONE_NEWNS))
		err = -errno;
	else
		err = srn_devnode_mount(node);
	if (err && env && !strcmp(env, "1"))
		fprintf(stderr,
			"softrnic exec: warning: no %s for UCX (%s); UCX will "
			"not list the device\n",
			node, strerror(-err));
	return err;
}
