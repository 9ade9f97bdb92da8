// SPDX-License-Identifier: MIT
/*
 * softrnic — the device: softrnic0, one Ethernet (RoCEv2) port.
 *
 * Device discovery, device/port/GID queries and the virtual sysfs files
 * that ibv_devinfo reads. The GID table has one entry, index 0: the
 * IPv4-mapped address of this host (SOFTRNIC_IP, else the first non-loopback
 * IPv4 address that is up, else 127.0.0.1).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#undef ibv_query_port
#undef ibv_get_device_list

static struct srn_device srn_dev;
static pthread_once_t srn_dev_once = PTHREAD_ONCE_INIT;

static void *srn_dummy_dev_op(void)
{
	return NULL;
}

static uint32_t srn_pick_ipv4(void)
{
	const char *env = getenv("SOFTRNIC_IP");
	struct ifaddrs *ifa, *it;
	struct in_addr a;
	uint32_t ip = htonl(INADDR_LOOPBACK);

	if (env && inet_pton(AF_INET, env, &a) == 1)
		return a.s_addr;
	if (env)
		srn_warn("SOFTRNIC_IP=%s is not an IPv4 address; ignored", env);
	if (getifaddrs(&ifa))
		return ip;
	for (it = ifa; it; it = it->ifa_next) {
		if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET)
			continue;
		if (!(it->ifa_flags & IFF_UP) || (it->ifa_flags & IFF_LOOPBACK))
			continue;
		ip = ((struct sockaddr_in *)it->ifa_addr)->sin_addr.s_addr;
		break;
	}
	freeifaddrs(ifa);
	return ip;
}

static void srn_device_init(void)
{
	struct srn_device *d = &srn_dev;
	uint8_t *g = d->gid.raw;

	d->ibdev._ops._dummy1 = (void *)srn_dummy_dev_op;
	d->ibdev._ops._dummy2 = (void *)srn_dummy_dev_op;
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", SRN_DEV_NAME);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs0");
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
		 "/softrnic/class/infiniband_verbs/uverbs0");
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path),
		 "/softrnic/class/infiniband/%s", SRN_DEV_NAME);
	d->ipv4 = srn_pick_ipv4();
	memset(g, 0, 16);
	g[10] = 0xff;
	g[11] = 0xff;
	memcpy(g + 12, &d->ipv4, 4);
	/* EUI-64 style GUID derived from the address, like a MAC-based one */
	d->guid = htobe64(0x02000000fffe0000ull | (be32toh(d->ipv4) & 0xffff) |
			  ((uint64_t)(be32toh(d->ipv4) >> 16) << 40));
}

struct srn_device *srn_device_get(void)
{
	pthread_once(&srn_dev_once, srn_device_init);
	return &srn_dev;
}

/* A GID names this host when it is our GID or any local IPv4 address. */
bool srn_gid_is_local(const union ibv_gid *gid)
{
	static const uint8_t v4pfx[12] = { 0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff };
	struct ifaddrs *ifa, *it;
	uint32_t ip;
	bool local = false;

	if (!memcmp(gid->raw, srn_device_get()->gid.raw, 16))
		return true;
	if (memcmp(gid->raw, v4pfx, 12))
		return false;
	memcpy(&ip, gid->raw + 12, 4);
	if ((be32toh(ip) >> 24) == 127)
		return true;
	if (getifaddrs(&ifa))
		return false;
	for (it = ifa; it && !local; it = it->ifa_next)
		local = it->ifa_addr && it->ifa_addr->sa_family == AF_INET &&
			((struct sockaddr_in *)it->ifa_addr)->sin_addr.s_addr ==
				ip;
	freeifaddrs(ifa);
	return local;
}

SRN_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list = calloc(2, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = &srn_device_get()->ibdev;
	if (num_devices)
		*num_devices = 1;
	return list;
}

SRN_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SRN_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

SRN_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return srn_device_get()->guid;
}

SRN_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return device == &srn_device_get()->ibdev ? 0 : -1;
}

static void srn_fill_device_attr(struct ibv_device_attr *a)
{
	struct srn_device *d = srn_device_get();

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "0.1.0");
	a->node_guid = d->guid;
	a->sys_image_guid = d->guid;
	a->max_mr_size = SRN_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = SRN_VENDOR_ID;
	a->vendor_part_id = SRN_VENDOR_PART_ID;
	a->hw_ver = 1;
	a->max_qp = SRN_MAX_QP;
	a->max_qp_wr = SRN_MAX_QP_WR;
	a->device_cap_flags =
		IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_CHANGE_PHY_PORT |
		IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_MEM_WINDOW |
		IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
	a->max_sge = SRN_MAX_SGE;
	a->max_sge_rd = SRN_MAX_SGE;
	a->max_cq = SRN_MAX_CQ;
	a->max_cqe = SRN_MAX_CQE;
	a->max_mr = SRN_MAX_MR;
	a->max_mw = SRN_MAX_MW; /* windows share the TPT with MRs */
	a->max_pd = SRN_MAX_PD;
	a->max_qp_rd_atom = SRN_MAX_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SRN_MAX_RD_ATOM * SRN_MAX_QP;
	a->max_qp_init_rd_atom = SRN_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = SRN_MAX_AH;
	a->max_mcast_grp = SRN_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SRN_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach =
		SRN_MAX_MCAST_GRP * SRN_MAX_MCAST_QP_ATTACH;
	a->max_srq = SRN_MAX_SRQ;
	a->max_srq_wr = SRN_MAX_SRQ_WR;
	a->max_srq_sge = SRN_MAX_SGE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

SRN_EXPORT int ibv_query_device(struct ibv_context *context,
				struct ibv_device_attr *attr)
{
	if (!context || !attr)
		return EINVAL;
	srn_fill_device_attr(attr);
	return 0;
}

int srn_query_device_ex(struct ibv_context *context,
			const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex ex;

	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(ex.orig_attr))
		return EINVAL;
	memset(&ex, 0, sizeof(ex));
	srn_fill_device_attr(&ex.orig_attr);
	ex.max_dm_size = SRN_MAX_DM_SIZE; /* core/dm.c */
	ex.phys_port_cnt_ex = 1;
	/* CQE timestamps (verbs_cqex.c): CLOCK_MONOTONIC in ns, 64 bits */
	ex.completion_timestamp_mask = UINT64_MAX;
	ex.hca_core_clock = 1000000; /* kHz: one tick per ns */
	/* ODP (core/mr.c): explicit and implicit. Same host, a peer reaches
	 * an ODP MR with process_vm_readv/writev, which cannot make an
	 * atomic: no ATOMIC */
	ex.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	ex.odp_caps.per_transport_caps.rc_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
		IBV_ODP_SUPPORT_SRQ_RECV;
	/* XRC (an INI's requests into a TGT's XRC SRQs): the same paths */
	ex.xrc_odp_caps = ex.odp_caps.per_transport_caps.rc_odp_caps;
	memcpy(attr, &ex, attr_size < sizeof(ex) ? attr_size : sizeof(ex));
	return 0;
}

static void srn_fill_port_attr(struct ibv_port_attr *p)
{
	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = IBV_MTU_4096;
	p->gid_tbl_len = SRN_GID_TBL_LEN;
	p->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	p->max_msg_sz = SRN_MAX_MSG_SZ;
	p->pkey_tbl_len = 1;
	p->active_width = 1; /* 1X */
	p->active_speed = 32; /* 25 Gbps class */
	p->phys_state = 5; /* LINK_UP */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
}

int srn_query_port(struct ibv_context *context, uint8_t port_num,
		   struct ibv_port_attr *attr, size_t attr_len)
{
	struct ibv_port_attr p;

	if (!attr || port_num != 1)
		return EINVAL;
	srn_fill_port_attr(&p);
	memcpy(attr, &p, attr_len < sizeof(p) ? attr_len : sizeof(p));
	return 0;
}

/* The exported symbol is the compat entry: it writes only the fields an
 * old struct ibv_port_attr had (everything before port_cap_flags2). */
SRN_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			      struct _compat_ibv_port_attr *attr)
{
	return srn_query_port(context, port_num, (struct ibv_port_attr *)attr,
			      offsetof(struct ibv_port_attr, port_cap_flags2));
}

SRN_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num,
			     int index, union ibv_gid *gid)
{
	if (!context || port_num != 1 || index < 0 ||
	    index >= SRN_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	if (index == 0)
		*gid = srn_device_get()->gid;
	else
		memset(gid, 0, sizeof(*gid)); /* empty slot, as rdma-core */
	return 0;
}

SRN_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				 uint32_t gid_index,
				 struct ibv_gid_entry *entry, uint32_t flags,
				 size_t entry_size)
{
	if (!context || !entry || flags || port_num != 1 ||
	    entry_size < sizeof(*entry))
		return EINVAL;
	if (gid_index >= SRN_GID_TBL_LEN)
		return EINVAL;
	if (gid_index != 0)
		return ENODATA;
	memset(entry, 0, sizeof(*entry));
	entry->gid = srn_device_get()->gid;
	entry->gid_index = 0;
	entry->port_num = 1;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = 0;
	return 0;
}

SRN_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
					struct ibv_gid_entry *entries,
					size_t max_entries, uint32_t flags,
					size_t entry_size)
{
	if (!context || flags || entry_size < sizeof(*entries))
		return -EINVAL;
	if (max_entries < 1)
		return -EINVAL;
	return _ibv_query_gid_ex(context, 1, 0, entries, 0, entry_size) ?
		       -EINVAL :
		       1;
}

/* Private rdma-core ABI (ibv_devinfo uses it). The type uses the sysfs
 * numbering: 0 = IB/RoCE v1, 1 = RoCE v2. */
enum srn_gid_type_sysfs {
	SRN_GID_SYSFS_IB_ROCE_V1 = 0,
	SRN_GID_SYSFS_ROCE_V2
};

SRN_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				  unsigned int index,
				  enum srn_gid_type_sysfs *type);
SRN_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				  unsigned int index,
				  enum srn_gid_type_sysfs *type)
{
	if (!context || port_num != 1 || index >= SRN_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*type = index == 0 ? SRN_GID_SYSFS_ROCE_V2 : SRN_GID_SYSFS_IB_ROCE_V1;
	return 0;
}

SRN_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num,
			      int index, __be16 *pkey)
{
	if (!context || port_num != 1 || index < 0 || !pkey) {
		errno = EINVAL;
		return -1;
	}
	*pkey = index == 0 ? htobe16(0xffff) : 0;
	return 0;
}

/* Virtual sysfs: ibv_devinfo reads board_id etc. from ibdev_path. */
int srn_sysfs_virtual_read(const char *dir, const char *file, char *buf,
			   size_t size)
{
	const struct srn_device *d = srn_device_get();
	const char *val = NULL;
	char tmp[64];

	if (!dir || strcmp(dir, d->ibdev.ibdev_path))
		return -ENOENT;
	if (!strcmp(file, "board_id")) {
		val = "SOFTRNIC-1";
	} else if (!strcmp(file, "fw_ver")) {
		val = "0.1.0";
	} else if (!strcmp(file, "node_type")) {
		val = "1: CA";
	} else if (!strcmp(file, "hw_rev")) {
		val = "1";
	} else if (!strcmp(file, "node_guid")) {
		uint64_t g = be64toh(d->guid);

		snprintf(tmp, sizeof(tmp), "%04x:%04x:%04x:%04x",
			 (unsigned)(g >> 48) & 0xffff,
			 (unsigned)(g >> 32) & 0xffff,
			 (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
		val = tmp;
	}
	if (!val)
		return -ENOENT;
	if (strlen(val) >= size)
		return -ENOSPC; /* rdma-core fails rather than truncate */
	return snprintf(buf, size, "%s", val);
}
