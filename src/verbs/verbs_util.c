// SPDX-License-Identifier: MIT
/*
 * softrnic — the exported verbs utilities that need no device state:
 * enum-to-string tables, rate conversions, copies between the kernel-ABI
 * and verbs structs, sysfs reads, the fork helpers, and the two small
 * address helpers. Behaviour as rdma-core 44 and its man pages document;
 * where softrnic differs on purpose, the function's comment says so.
 *
 * The kernel-ABI structs come from the kernel uapi headers that
 * libibverbs-dev installs: <infiniband/kern-abi.h> is not installed by
 * Debian 12, and <infiniband/sa-kern-abi.h> is only a shim that includes
 * <rdma/ib_user_sa.h> behind a "#warning obsolete".
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include "core/core.h"

/* Exported by rdma-core, but declared only in its uninstalled headers. */
SRN_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
					   struct ib_uverbs_ah_attr *src);
SRN_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
					   struct ib_uverbs_qp_attr *src);
SRN_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					    struct ib_user_path_rec *src);
SRN_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					  struct ibv_sa_path_rec *src);
SRN_EXPORT const char *ibv_get_sysfs_path(void);
SRN_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
				   size_t size);
SRN_EXPORT int ibv_dontfork_range(void *base, size_t size);
SRN_EXPORT int ibv_dofork_range(void *base, size_t size);

/* ---- enum names ---- */

static const char *srn_enum_str(const char *const *names, size_t n,
				unsigned int value)
{
	return value < n && names[value] ? names[value] : "unknown";
}

SRN_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	return srn_wc_status_str(status);
}

SRN_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const names[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] =
			"invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] =
			"local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};

	return srn_enum_str(names, SRN_ARRAY_SIZE(names), event);
}

SRN_EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	static const char *const names[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};

	/* IBV_NODE_UNKNOWN is -1: the unsigned compare maps it to "unknown" */
	return srn_enum_str(names, SRN_ARRAY_SIZE(names), node_type);
}

SRN_EXPORT const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const names[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};

	return srn_enum_str(names, SRN_ARRAY_SIZE(names), port_state);
}

/* ---- static rates ---- */

/*
 * Each rate with its multiple of the 2.5 Gb/s base rate and its Mb/s.
 * As in rdma-core, the FDR/EDR-era rates (14, 56, 112, 168, 25, 100, 200
 * and 300 Gb/s) have no multiple (0 here): ibv_rate_to_mult() returns -1
 * for them and mult_to_ibv_rate() never returns them.
 */
static const struct srn_rate {
	enum ibv_rate rate;
	int mult;
	int mbps;
} srn_rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },
	{ IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },
	{ IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },
	{ IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },
	{ IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },
	{ IBV_RATE_14_GBPS, 0, 14062 },
	{ IBV_RATE_56_GBPS, 0, 56250 },
	{ IBV_RATE_112_GBPS, 0, 112500 },
	{ IBV_RATE_168_GBPS, 0, 168750 },
	{ IBV_RATE_25_GBPS, 0, 25781 },
	{ IBV_RATE_100_GBPS, 0, 103125 },
	{ IBV_RATE_200_GBPS, 0, 206250 },
	{ IBV_RATE_300_GBPS, 0, 309375 },
	{ IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },
	{ IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },
	{ IBV_RATE_800_GBPS, 320, 850000 },
	{ IBV_RATE_1200_GBPS, 480, 1275000 },
};

static const struct srn_rate *srn_rate_by_enum(enum ibv_rate rate)
{
	for (size_t i = 0; i < SRN_ARRAY_SIZE(srn_rates); i++)
		if (srn_rates[i].rate == rate)
			return &srn_rates[i];
	return NULL;
}

SRN_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	const struct srn_rate *r = srn_rate_by_enum(rate);

	return r && r->mult ? r->mult : -1;
}

SRN_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	if (mult <= 0)
		return IBV_RATE_MAX;
	for (size_t i = 0; i < SRN_ARRAY_SIZE(srn_rates); i++)
		if (srn_rates[i].mult == mult)
			return srn_rates[i].rate;
	return IBV_RATE_MAX;
}

SRN_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	const struct srn_rate *r = srn_rate_by_enum(rate);

	return r ? r->mbps : -1;
}

SRN_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < SRN_ARRAY_SIZE(srn_rates); i++)
		if (srn_rates[i].mbps == mbps)
			return srn_rates[i].rate;
	return IBV_RATE_MAX;
}

/* ---- kernel ABI <-> verbs structs ---- */

SRN_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
					   struct ib_uverbs_ah_attr *src)
{
	struct ibv_global_route *grh = &dst->grh;

	memcpy(grh->dgid.raw, src->grh.dgid, sizeof(grh->dgid.raw));
	grh->flow_label = src->grh.flow_label;
	grh->sgid_index = src->grh.sgid_index;
	grh->hop_limit = src->grh.hop_limit;
	grh->traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

/* The scalar fields of the QP attributes: the rest are nested. */
static void srn_qp_scalars_from_kern(struct ibv_qp_attr *dst,
				     const struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

/*
 * As rdma-core does, qp_state is not copied (callers set the state they
 * ask for themselves), nor are fields the kernel struct lacks
 * (sq_sig_all, rate_limit): those keep their previous value.
 */
SRN_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
					   struct ib_uverbs_qp_attr *src)
{
	srn_qp_scalars_from_kern(dst, src);
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
}

/*
 * struct ibv_sa_path_rec and struct ib_user_path_rec name their scalar
 * fields alike, so one list serves both directions; only the GIDs differ
 * (union ibv_gid against a byte array).
 */
#define SRN_PATH_REC_SCALARS(dst, src)                             \
	do {                                                       \
		(dst)->dlid = (src)->dlid;                         \
		(dst)->slid = (src)->slid;                         \
		(dst)->raw_traffic = (src)->raw_traffic;           \
		(dst)->flow_label = (src)->flow_label;             \
		(dst)->hop_limit = (src)->hop_limit;               \
		(dst)->traffic_class = (src)->traffic_class;       \
		(dst)->reversible = (src)->reversible;             \
		(dst)->numb_path = (src)->numb_path;               \
		(dst)->pkey = (src)->pkey;                         \
		(dst)->sl = (src)->sl;                             \
		(dst)->mtu_selector = (src)->mtu_selector;         \
		(dst)->mtu = (src)->mtu;                           \
		(dst)->rate_selector = (src)->rate_selector;       \
		(dst)->rate = (src)->rate;                         \
		(dst)->packet_life_time_selector =                 \
			(src)->packet_life_time_selector;          \
		(dst)->packet_life_time = (src)->packet_life_time; \
		(dst)->preference = (src)->preference;             \
	} while (0)

SRN_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					    struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	SRN_PATH_REC_SCALARS(dst, src);
}

SRN_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					  struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	SRN_PATH_REC_SCALARS(dst, src);
}

/* ---- sysfs ---- */

static char srn_sysfs_path[PATH_MAX];
static pthread_once_t srn_sysfs_once = PTHREAD_ONCE_INIT;

static void srn_sysfs_path_init(void)
{
	const char *env = NULL;
	size_t len;

	/* a set-user-ID program does not follow its caller's environment */
	if (getuid() == geteuid())
		env = getenv("SYSFS_PATH");
	snprintf(srn_sysfs_path, sizeof(srn_sysfs_path), "%s",
		 env ? env : "/sys");
	len = strlen(srn_sysfs_path);
	while (len > 0 && srn_sysfs_path[len - 1] == '/')
		srn_sysfs_path[--len] = '\0';
}

/*
 * The root of sysfs: $SYSFS_PATH without trailing slashes (so "/" gives
 * ""), else "/sys". Read once, at the first call, like rdma-core.
 */
SRN_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&srn_sysfs_once, srn_sysfs_path_init);
	return srn_sysfs_path;
}

/* One read(2) of a sysfs attribute; the file's trailing newline dropped. */
static int srn_read_attr(const char *path, char *buf, size_t size)
{
	ssize_t len;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	len = read(fd, buf, size);
	err = errno;
	close(fd);
	if (len < 0) {
		errno = err;
		return -1;
	}
	if (len > 0 && buf[len - 1] == '\n') {
		buf[--len] = '\0';
	} else if ((size_t)len < size) {
		buf[len] = '\0';
	} else if (len > 0) { /* no room left for the terminating NUL */
		errno = EOVERFLOW;
		return -1;
	}
	return (int)len;
}

/*
 * Reads "<dir>/<file>" into @buf: returns the length without the trailing
 * newline (the string is NUL-terminated), or -1 with errno set. Contents
 * that would not fit with their NUL fail rather than being truncated.
 * softrnic's virtual sysfs files are served first.
 */
SRN_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
				   size_t size)
{
	char *path;
	int ret;

	ret = srn_sysfs_virtual_read(dir, file, buf, size);
	if (ret >= 0)
		return ret;
	if (ret != -ENOENT) {
		errno = -ret;
		return -1;
	}
	if (asprintf(&path, "%s/%s", dir, file) < 0)
		return -1;
	ret = srn_read_attr(path, buf, size);
	free(path);
	return ret;
}

/* ---- fork support ---- */

/*
 * softrnic needs no MADV_DONTFORK bookkeeping: its registered memory is
 * plain process memory, so a child just gets its copy-on-write view.
 */
SRN_EXPORT int ibv_fork_init(void)
{
	return 0;
}

SRN_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* Empty ranges are accepted, like rdma-core; wrapping ones are EINVAL. */
static int srn_fork_range_check(const void *base, size_t size)
{
	if (!base || !size)
		return 0;
	return (uintptr_t)base + size - 1 < (uintptr_t)base ? EINVAL : 0;
}

SRN_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	return srn_fork_range_check(base, size);
}

SRN_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	return srn_fork_range_check(base, size);
}

/* ---- address helpers ---- */

/*
 * rdma-core asks the kernel's neighbour table for the MAC and VLAN of the
 * GID. softrnic never builds Ethernet frames, so every GID resolves to the
 * zero MAC without VLAN (0xffff, as rdma-core reports "no VLAN").
 * Returns 0, or -EINVAL for missing arguments.
 */
SRN_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
					   struct ibv_ah_attr *attr,
					   uint8_t eth_mac[ETHERNET_LL_SIZE],
					   uint16_t *vid)
{
	(void)context;
	if (!attr || !eth_mac || !vid)
		return -EINVAL;
	memset(eth_mac, 0, ETHERNET_LL_SIZE);
	*vid = 0xffff;
	return 0;
}

/*
 * rdma-core scans the port's P_Key table with ibv_query_pkey(). A softrnic
 * port has one entry, the full-member default P_Key 0xffff at index 0
 * (see ibv_query_pkey() in device.c), so that is the only key found.
 * Returns the index, or -1 with errno ENOENT.
 */
SRN_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
				  __be16 pkey)
{
	(void)context;
	(void)port_num;
	if (pkey == htobe16(0xffff))
		return 0;
	errno = ENOENT;
	return -1;
}
