// SPDX-License-Identifier: MIT
/*
 * softrnic's librdmacm: the bottom of the layer: the process's CM state,
 * the device, ids as objects, event channels and events.
 *
 * softrnic0 is the only device: its context is opened once per process,
 * on the first call that needs it, and stays open (as rdma-core's
 * librdmacm keeps every device open).
 *
 * A channel's fd is an eventfd in semaphore mode: every queued event adds
 * one, every rdma_get_cm_event takes one (a blocking read, or EAGAIN when
 * the application made the fd O_NONBLOCK), so poll() on it says whether
 * events wait. Events of an id destroyed before they were fetched are
 * dropped from the queue; their count stays in the eventfd and
 * rdma_get_cm_event skips it.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdmacm/cm.h"

static const char *const srn_cm_event_names[] = {
	[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
	[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
	[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
	[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
	[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
	[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
	[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
	[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
	[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
	[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
	[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
	[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
	[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
	[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
	[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
	[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
};

const char *const srn_cm_state_names[SRN_CMS_NR] = {
	[SRN_CMS_IDLE] = "IDLE",
	[SRN_CMS_BOUND] = "BOUND",
	[SRN_CMS_ADDR_RESOLVED] = "ADDR_RESOLVED",
	[SRN_CMS_ROUTE_RESOLVED] = "ROUTE_RESOLVED",
	[SRN_CMS_LISTEN] = "LISTEN",
	[SRN_CMS_CONNECTING] = "CONNECTING",
	[SRN_CMS_REQ_RCVD] = "REQ_RCVD",
	[SRN_CMS_REP_SENT] = "REP_SENT",
	[SRN_CMS_REP_RCVD] = "REP_RCVD",
	[SRN_CMS_ESTABLISHED] = "ESTABLISHED",
	[SRN_CMS_DISCONNECTING] = "DISCONNECTING",
	[SRN_CMS_DISCONNECTED] = "DISCONNECTED",
	[SRN_CMS_FAILED] = "FAILED",
};

#define SRN_CMS_BIT(s) (1u << SRN_CMS_##s)
static_assert(SRN_CMS_NR <= 16, "a state set is a uint16_t");
/* The moves of the CM state machine: the states each state may go to.
 * Any state may also go to IDLE (its id is unlinked) and to FAILED. */
static const uint16_t srn_cm_next[SRN_CMS_NR] = {
	[SRN_CMS_IDLE] = SRN_CMS_BIT(BOUND) | SRN_CMS_BIT(ADDR_RESOLVED) |
			 SRN_CMS_BIT(REQ_RCVD),
	[SRN_CMS_BOUND] = SRN_CMS_BIT(ADDR_RESOLVED) | SRN_CMS_BIT(LISTEN),
	[SRN_CMS_ADDR_RESOLVED] = SRN_CMS_BIT(ROUTE_RESOLVED) |
				  SRN_CMS_BIT(CONNECTING),
	[SRN_CMS_ROUTE_RESOLVED] = SRN_CMS_BIT(ROUTE_RESOLVED) |
				   SRN_CMS_BIT(CONNECTING),
	[SRN_CMS_CONNECTING] = SRN_CMS_BIT(REP_RCVD) |
			       SRN_CMS_BIT(ESTABLISHED), /* SIDR REP */
	[SRN_CMS_REQ_RCVD] = SRN_CMS_BIT(REP_SENT) |
			     SRN_CMS_BIT(ESTABLISHED), /* SIDR REP sent */
	[SRN_CMS_REP_SENT] = SRN_CMS_BIT(ESTABLISHED) |
			     SRN_CMS_BIT(DISCONNECTING) |
			     SRN_CMS_BIT(DISCONNECTED),
	[SRN_CMS_REP_RCVD] = SRN_CMS_BIT(ESTABLISHED) |
			     SRN_CMS_BIT(DISCONNECTING) |
			     SRN_CMS_BIT(DISCONNECTED),
	[SRN_CMS_ESTABLISHED] = SRN_CMS_BIT(DISCONNECTING) |
				SRN_CMS_BIT(DISCONNECTED),
	[SRN_CMS_DISCONNECTING] = SRN_CMS_BIT(DISCONNECTED),
	[SRN_CMS_DISCONNECTED] = SRN_CMS_BIT(DISCONNECTED),
};

/* The states with a CM timer: waiting for the peer, or for our own
 * application while the peer waits (cm_conn.c's srn_cm_timer_run). */
static const uint16_t srn_cm_timed_states =
	SRN_CMS_BIT(CONNECTING) | SRN_CMS_BIT(REQ_RCVD) |
	SRN_CMS_BIT(REP_SENT) | SRN_CMS_BIT(REP_RCVD) |
	SRN_CMS_BIT(DISCONNECTING);

/* A state with a timer was entered: the timer starts now, and the CM
 * thread, which may sleep for ever, is woken to tick. */
static void srn_cm_timer_arm(struct srn_cm_id *cid)
{
	uint64_t one = 1;

	cid->heard_ns = cid->mra_ns = srn_now_ns();
	if (!srn_cm.timed++ && srn_cm.kick_fd >= 0 &&
	    write(srn_cm.kick_fd, &one, sizeof(one)) < 0)
		srn_dbg("rdmacm: CM thread kick: %s", strerror(errno));
}

/*
 * The one writer of an id's CM state (under srn_cm.lock): a move the
 * table does not have is refused (a bug, said at error level), and a
 * state with a timer starts it.
 */
void srn_cm_set_state(struct srn_cm_id *cid, enum srn_cm_state next)
{
	enum srn_cm_state cur = cid->state;

	if (next != SRN_CMS_IDLE && next != SRN_CMS_FAILED &&
	    !(srn_cm_next[cur] & (1u << next))) {
		srn_err("rdmacm: id state %s -> %s refused",
			srn_cm_state_names[cur], srn_cm_state_names[next]);
		return;
	}
	cid->state = next;
	if (srn_cm_timed_states & (1u << next))
		srn_cm_timer_arm(cid);
}

struct srn_cm_global srn_cm = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.ids = SRN_LIST_INIT(srn_cm.ids),
	.pending = SRN_LIST_INIT(srn_cm.pending),
	.links = SRN_LIST_INIT(srn_cm.links),
	.next_serial = 1,
	.epfd = -1,
	.lfd = -1,
	.stat_fd = -1,
	.kick_fd = -1,
};

/* -errno -> -1 with errno set, as the rdma_* calls return. */
int srn_cm_err(int neg_errno)
{
	if (!neg_errno)
		return 0;
	errno = -neg_errno;
	return -1;
}

uint32_t srn_cm_random24(void)
{
	return srn_random_u32() & 0xffffff;
}

static int srn_cm_device_open(void)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	srn_cm.ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!srn_cm.ctx)
		return -ENODEV;
	if (ibv_query_device(srn_cm.ctx, &srn_cm.dev_attr) ||
	    ibv_query_gid(srn_cm.ctx, 1, 0, &srn_cm.gid) ||
	    ibv_query_port(srn_cm.ctx, 1, &pa)) {
		ibv_close_device(srn_cm.ctx);
		srn_cm.ctx = NULL;
		return -ENODEV;
	}
	srn_cm.mtu = pa.active_mtu;
	/* the device's PD: ids that name the device get it (id->pd), as in
	 * rdma-core, and QPs made without one use it */
	srn_cm.pd = ibv_alloc_pd(srn_cm.ctx);
	return 0;
}

/* Opens softrnic0 once: 0 or -ENODEV. */
int srn_cm_device(void)
{
	int ret = 0;

	pthread_mutex_lock(&srn_cm.lock);
	if (!srn_cm.ctx)
		ret = srn_cm_device_open();
	pthread_mutex_unlock(&srn_cm.lock);
	return ret;
}

SRN_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;

	if (num_devices)
		*num_devices = 0;
	if (srn_cm_device())
		return calloc(1, sizeof(*list));
	list = calloc(2, sizeof(*list));
	if (!list)
		return NULL;
	list[0] = srn_cm.ctx;
	if (num_devices)
		*num_devices = 1;
	return list;
}

SRN_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/*
 * The layer's objects (ids, channels, events, accepted connections) live
 * in pages of their own, never in the application's heap: softrnic
 * remaps the pages of registered private memory onto a memfd, and a write
 * by another thread to such a page during the remap is lost
 * (core/memreg.c). The CM thread writes these objects while application
 * threads register memory; so no page holds both.
 */
/*
 * Freed objects are kept for the next object of their size class rather
 * than unmapped: an munmap in a process with threads on several CPUs
 * flushes their TLBs (an IPI each; costly under virtualisation), and a
 * connection allocates and frees several objects (events, ids). Classes
 * are powers of two from 512 B to 16 KiB (the header included), several
 * objects to a page below 4 KiB: on this project's machines (nested
 * virtualisation) the first write to each new page costs about 6 us even
 * when populated, and a burst of connections (cmtime's thousand) wrote
 * one new page per object (an id is 1,120 B, an event 312 B) when every
 * object had pages of its own. Objects of the layer only share pages
 * with each other, never with the application's heap (above). At most
 * SRN_CM_POOL_BYTES of each class of a page or more are kept (smaller
 * blocks share pages: all are kept). An empty class is filled
 * with SRN_CM_POOL_FILL bytes of blocks from one mmap, populated at once
 * (MAP_POPULATE).
 */
#define SRN_CM_POOL_MIN_SHIFT 9 /* 512 B */
#define SRN_CM_POOL_SIZES 6 /* up to 16 KiB */
#define SRN_CM_POOL_BYTES (16ul << 20)
#define SRN_CM_POOL_FILL (64ul << 10)

struct srn_cm_pool_blk {
	size_t len; /* what srn_cm_zalloc stores there anyway */
	struct srn_cm_pool_blk *next;
};

static pthread_mutex_t srn_cm_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_cm_pool_blk *srn_cm_pool[SRN_CM_POOL_SIZES];
static size_t srn_cm_pool_n[SRN_CM_POOL_SIZES];

/* The class of a block of len bytes (a power of two), or
 * SRN_CM_POOL_SIZES when it has none (mapped alone). */
static size_t srn_cm_pool_class(size_t len)
{
	size_t k = 0;

	while (k < SRN_CM_POOL_SIZES &&
	       ((size_t)1 << (SRN_CM_POOL_MIN_SHIFT + k)) != len)
		k++;
	return k;
}

/* Under srn_cm_pool_lock: blocks of len bytes into the empty class k;
 * false when there was no memory for them. */
static bool srn_cm_pool_fill(size_t k, size_t len)
{
	char *p = mmap(NULL, SRN_CM_POOL_FILL, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	struct srn_cm_pool_blk *b;

	if (p == MAP_FAILED)
		return false;
	for (size_t i = SRN_CM_POOL_FILL / len; i-- > 0;) {
		b = (struct srn_cm_pool_blk *)(p + i * len);
		b->len = len;
		b->next = srn_cm_pool[k];
		srn_cm_pool[k] = b;
		srn_cm_pool_n[k]++;
	}
	return true;
}

void *srn_cm_zalloc(size_t size)
{
	size_t len = (size_t)1 << SRN_CM_POOL_MIN_SHIFT, k = 0;
	char *p = NULL;

	/* the block: a power of two, its class k (SRN_CM_POOL_SIZES and
	 * beyond: none) */
	for (; len < size + SRN_CACHELINE; k++)
		len <<= 1;
	if (k < SRN_CM_POOL_SIZES) {
		pthread_mutex_lock(&srn_cm_pool_lock);
		if (srn_cm_pool[k] || srn_cm_pool_fill(k, len)) {
			p = (char *)srn_cm_pool[k];
			srn_cm_pool[k] = srn_cm_pool[k]->next;
			srn_cm_pool_n[k]--;
		}
		pthread_mutex_unlock(&srn_cm_pool_lock);
		if (p)
			memset(p + SRN_CACHELINE, 0, size);
	}
	if (!p) {
		len = SRN_ALIGN_UP(size + SRN_CACHELINE, 4096ul);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
	}
	*(size_t *)p = len;
	return p + SRN_CACHELINE;
}

void srn_cm_zfree(void *ptr)
{
	struct srn_cm_pool_blk *b;
	size_t k;

	if (!ptr)
		return;
	b = (struct srn_cm_pool_blk *)((char *)ptr - SRN_CACHELINE);
	k = srn_cm_pool_class(b->len);
	if (k < SRN_CM_POOL_SIZES) {
		pthread_mutex_lock(&srn_cm_pool_lock);
		/* a block smaller than a page shares it: always kept */
		if (b->len < 4096 ||
		    srn_cm_pool_n[k] < SRN_CM_POOL_BYTES / b->len) {
			b->next = srn_cm_pool[k];
			srn_cm_pool[k] = b;
			srn_cm_pool_n[k]++;
			b = NULL;
		}
		pthread_mutex_unlock(&srn_cm_pool_lock);
	}
	if (b)
		munmap(b, b->len);
}

/* Under srn_cm.lock: the hash bucket of a serial (made empty on first
 * use: a static initializer cannot spell 1,024 list heads). */
static struct srn_list *srn_cm_id_bucket(uint64_t serial)
{
	struct srn_list *b =
		&srn_cm.by_serial[serial & (SRN_CM_ID_BUCKETS - 1)];

	if (!b->next)
		srn_list_init(b);
	return b;
}

struct srn_cm_id *srn_cm_id_new(struct srn_cm_chan *c, void *context,
				enum rdma_port_space ps,
				enum ibv_qp_type qp_type)
{
	struct srn_cm_id *cid = srn_cm_zalloc(sizeof(*cid));

	if (!cid)
		return NULL;
	if (!c) {
		c = srn_cm_chan_new(true);
		if (!c) {
			srn_cm_zfree(cid);
			return NULL;
		}
		cid->sync = true;
	}
	cid->chan = c;
	cid->id.channel = &c->ch;
	cid->id.context = context;
	cid->id.ps = ps;
	cid->id.qp_type = qp_type;
	cid->unix_fd = -1;
	cid->ack_timeout = SRN_CM_DEF_TIMEOUT;
	srn_list_init(&cid->mcs);
	pthread_cond_init(&cid->cond, NULL);
	if (!(uint32_t)srn_cm.next_serial)
		srn_cm.next_serial++; /* its communication id is never 0 */
	cid->serial = srn_cm.next_serial++;
	srn_list_add_tail(&cid->link, &srn_cm.ids);
	srn_list_add(&cid->hlink, srn_cm_id_bucket(cid->serial));
	return cid;
}

/* Under srn_cm.lock: the id of an epoll handle, or NULL (freed since). */
struct srn_cm_id *srn_cm_id_find(uint64_t serial)
{
	struct srn_list *pos, *b = srn_cm_id_bucket(serial);
	struct srn_cm_id *cid;

	srn_list_for_each(pos, b) {
		cid = srn_list_entry(pos, struct srn_cm_id, hlink);
		if (cid->serial == serial)
			return cid;
	}
	return NULL;
}

/* Under srn_cm.lock: the id whose communication id (its serial's low 32
 * bits, cm_link.c) is comm, or NULL. */
struct srn_cm_id *srn_cm_id_find_comm(uint32_t comm)
{
	struct srn_list *pos, *b = srn_cm_id_bucket(comm);
	struct srn_cm_id *cid;

	static_assert(SRN_CM_ID_BUCKETS <= 1ull << 32, "bucket of a comm id");
	srn_list_for_each(pos, b) {
		cid = srn_list_entry(pos, struct srn_cm_id, hlink);
		if ((uint32_t)cid->serial == comm)
			return cid;
	}
	return NULL;
}

/* The id now names softrnic0's port 1 (an address of this host). */
void srn_cm_id_set_verbs(struct srn_cm_id *cid)
{
	struct rdma_ib_addr *ib = &cid->id.route.addr.addr.ibaddr;

	cid->id.verbs = srn_cm.ctx;
	if (!cid->id.pd)
		cid->id.pd = srn_cm.pd;
	cid->id.port_num = 1;
	memcpy(&ib->sgid, &srn_cm.gid, sizeof(ib->sgid));
	ib->pkey = htobe16(0xffff);
}

struct srn_cm_id *srn_cm_listener_find(unsigned int ps, uint16_t port)
{
	struct srn_list *pos;
	struct srn_cm_id *cid;

	srn_list_for_each(pos, &srn_cm.ids) {
		cid = srn_list_entry(pos, struct srn_cm_id, link);
		if (cid->state == SRN_CMS_LISTEN && cid->port == port &&
		    (unsigned int)cid->id.ps == ps)
			return cid;
	}
	return NULL;
}

static void srn_cm_stat_addr_fill(struct srn_cm_stat_addr *a,
				  const struct sockaddr *sa)
{
	const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

	a->family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		a->port = be16toh(in4->sin_port);
		memcpy(a->addr, &in4->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		a->port = be16toh(in6->sin6_port);
		memcpy(a->addr, &in6->sin6_addr, 16);
	} else {
		a->family = 0;
	}
}

/* softrnic stat's answer: every id of this process (srn_cm.lock held). */
void srn_cm_stat_fill(struct srn_cm_stat_msg *m)
{
	struct srn_list *pos;

	m->hdr.magic = SRN_CM_STAT_MAGIC;
	m->hdr.version = SRN_CM_STAT_VERSION;
	m->hdr.pid = (uint32_t)getpid();
	srn_list_for_each(pos, &srn_cm.ids) {
		struct srn_cm_id *cid =
			srn_list_entry(pos, struct srn_cm_id, link);
		struct srn_cm_stat_id *d = &m->id[m->hdr.count];

		if (m->hdr.count == SRN_CM_STAT_MAX) {
			m->hdr.more++;
			continue;
		}
		d->qpn = cid->id.qp ? cid->id.qp->qp_num : 0;
		d->ps = (uint16_t)cid->id.ps;
		snprintf(d->state, sizeof(d->state), "%s",
			 cid->state < SRN_CMS_NR ?
				 srn_cm_state_names[cid->state] :
				 "?");
		d->qp_type = (uint8_t)cid->id.qp_type;
		srn_cm_stat_addr_fill(
			&d->src,
			(struct sockaddr *)&cid->id.route.addr.src_addr);
		srn_cm_stat_addr_fill(
			&d->dst,
			(struct sockaddr *)&cid->id.route.addr.dst_addr);
		m->hdr.count++;
	}
}

SRN_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	if ((unsigned int)event >= SRN_ARRAY_SIZE(srn_cm_event_names) ||
	    !srn_cm_event_names[event])
		return "UNKNOWN EVENT";
	return srn_cm_event_names[event];
}

struct srn_cm_chan *srn_cm_chan_new(bool private)
{
	struct srn_cm_chan *c = srn_cm_zalloc(sizeof(*c));

	if (!c)
		return NULL;
	c->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (c->ch.fd < 0) {
		srn_cm_zfree(c);
		return NULL;
	}
	srn_list_init(&c->events);
	c->private = private;
	return c;
}

/*
 * Frees c (under srn_cm.lock). A thread still blocked in
 * rdma_get_cm_event on it keeps it: as a read on the kernel's fd holds its
 * file, that thread stays asleep, never woken by the close and never
 * reading a closed or reused fd, and the last reader out frees it.
 */
void srn_cm_chan_free(struct srn_cm_chan *c)
{
	struct srn_list *pos, *tmp;

	srn_list_for_each_safe(pos, tmp, &c->events) {
		srn_list_del(pos);
		srn_cm_zfree(srn_list_entry(pos, struct srn_cm_event, link));
	}
	if (c->readers) {
		c->dead = true;
		return;
	}
	close(c->ch.fd);
	srn_cm_zfree(c);
}

SRN_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct srn_cm_chan *c;
	int ret = srn_cm_device();

	if (ret) {
		errno = -ret;
		return NULL;
	}
	c = srn_cm_chan_new(false);
	return c ? &c->ch : NULL;
}

SRN_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct srn_cm_chan *c = container_of(channel, struct srn_cm_chan, ch);

	pthread_mutex_lock(&srn_cm.lock);
	srn_cm_chan_free(c);
	pthread_mutex_unlock(&srn_cm.lock);
}

/*
 * fork(): the child has no CM thread, and the parent's sockets, epoll set
 * and device context are the parent's. It forgets them (closing its
 * copies, so the parent's peers see the parent's hang-ups alone); the
 * parent's ids stay allocated but dead; the next call opens the device
 * and starts a CM thread anew.
 */
/* fork() while another thread holds the page pool's lock would leave it
 * locked for ever in the child: the forking thread holds it across. */
static void srn_cm_pool_prepare(void)
{
	pthread_mutex_lock(&srn_cm_pool_lock);
}

static void srn_cm_pool_parent(void)
{
	pthread_mutex_unlock(&srn_cm_pool_lock);
}

static void srn_cm_atfork_child(void)
{
	struct srn_list *pos;
	struct srn_cm_id *cid;

	pthread_mutex_init(&srn_cm.lock, NULL);
	srn_list_for_each(pos, &srn_cm.ids) {
		cid = srn_list_entry(pos, struct srn_cm_id, link);
		if (cid->unix_fd >= 0)
			close(cid->unix_fd);
		cid->unix_fd = -1;
		cid->lk = NULL;
		srn_cm_set_state(cid, SRN_CMS_FAILED);
		pthread_cond_init(&cid->cond, NULL);
	}
	while (!srn_list_empty(&srn_cm.pending))
		srn_list_del(srn_cm.pending.next); /* pages left as they are */
	while (!srn_list_empty(&srn_cm.links)) {
		struct srn_cm_link *lk = srn_list_entry(
			srn_cm.links.next, struct srn_cm_link, link);

		if (lk->fd >= 0)
			close(lk->fd); /* the parent's connections */
		free(lk->tx);
		srn_list_del(&lk->link);
		srn_list_del(&lk->hlink);
	}
	srn_cm.idle_links = srn_cm.refusing = 0;
	srn_cm.npending = 0;
	if (srn_cm.epfd >= 0)
		close(srn_cm.epfd);
	if (srn_cm.lfd >= 0)
		close(srn_cm.lfd);
	if (srn_cm.kick_fd >= 0)
		close(srn_cm.kick_fd);
	srn_cm.epfd = srn_cm.lfd = srn_cm.kick_fd = -1;
	srn_cm.listeners = 0;
	srn_cm.redials = srn_cm.timed = 0;
	srn_cm.thread_up = false;
	srn_cm.ctx = NULL; /* the parent's; softrnic refuses its posts here */
	srn_cm.pd = NULL;
	srn_cm.xrcd = NULL;
}

__attribute__((constructor)) static void srn_cm_core_init(void)
{
	pthread_atfork(srn_cm_pool_prepare, srn_cm_pool_parent,
		       srn_cm_pool_parent); /* the child unlocks it too */
	pthread_atfork(NULL, NULL, srn_cm_atfork_child);
}

const char *const srn_cm_act_names[SRN_CM_ACT_NR] = {
	[SRN_CM_ACT_NONE] = "NONE",
	[SRN_CM_ACT_CONNECT] = "CONNECT",
	[SRN_CM_ACT_QP_ERR] = "QP_ERR",
};

/* cm_conn.c's, which does an event's work (set once, at load) */
static void (*srn_cm_act_fn)(struct srn_cm_event *e);

void srn_cm_set_act_fn(void (*fn)(struct srn_cm_event *e))
{
	srn_cm_act_fn = fn;
}

/* The address vector to gid (a peer's device GID or a group's MGID). */
void srn_cm_ud_ah(struct srn_cm_id *cid, const uint8_t *gid,
		  struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	memcpy(ah->grh.dgid.raw, gid, 16);
	ah->grh.sgid_index = 0;
	ah->grh.hop_limit = 64;
	ah->grh.traffic_class = cid->tos;
}

/* A UD id's event: the peer's QP, Q_Key and address (param.ud). */
static void srn_cm_fill_ud(struct srn_cm_id *cid, struct srn_cm_event *e,
			   const struct srn_cm_msg *m)
{
	struct rdma_ud_param *u = &e->ev.param.ud;

	u->private_data = m->pdata_len ? e->pdata : NULL;
	u->private_data_len = m->pdata_len;
	srn_cm_ud_ah(cid, m->gid, &u->ah_attr);
	u->qp_num = be32toh(m->qpn);
	u->qkey = be32toh(m->qkey);
}

/* Under srn_cm.lock: a reader (or a deferred signal) lets c go; the last
 * one out of a channel destroyed meanwhile frees it (srn_cm_chan_free). */
static void srn_cm_chan_unpin(struct srn_cm_chan *c)
{
	if (!--c->readers && c->dead) {
		c->dead = false;
		srn_cm_chan_free(c);
	}
}

static void srn_cm_signal_write(struct srn_cm_chan *c, uint64_t count)
{
	if (write(c->ch.fd, &count, sizeof(count)) != sizeof(count))
		srn_warn("rdmacm: cannot signal the event channel");
}

/*
 * Under srn_cm.lock: one more event is queued on c (a semaphore eventfd:
 * one count per event). The CM thread signals once it has dropped the
 * lock (srn_cm_signal_take, srn_cm_signal_give): a reader woken while
 * it still holds the lock would only wait for it, and on one core take
 * the CPU from it twice.
 */
static void srn_cm_signal(struct srn_cm_chan *c)
{
	unsigned int i;

	if (!srn_cm.sig_defer) {
		srn_cm_signal_write(c, 1);
		return;
	}
	for (i = 0; i < srn_cm.nsig && srn_cm.sig[i].chan != c; i++)
		;
	if (i == SRN_ARRAY_SIZE(srn_cm.sig)) { /* full: at once */
		srn_cm_signal_write(c, 1);
		return;
	}
	if (i == srn_cm.nsig) {
		srn_cm.sig[srn_cm.nsig++] = (struct srn_cm_sig){ c, 0 };
		c->readers++; /* kept until srn_cm_signal_give */
	}
	srn_cm.sig[i].count++;
}

/* Under srn_cm.lock: the CM thread takes the deferred signals (out has
 * room for all); their channels stay until srn_cm_signal_give. */
unsigned int srn_cm_signal_take(struct srn_cm_sig *out)
{
	unsigned int n = srn_cm.nsig;

	memcpy(out, srn_cm.sig, n * sizeof(*out));
	srn_cm.nsig = 0;
	return n;
}

/* Without srn_cm.lock: signals what srn_cm_signal_take took, then lets
 * the channels go (a channel destroyed meanwhile is freed here). */
void srn_cm_signal_give(const struct srn_cm_sig *sig, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		srn_cm_signal_write(sig[i].chan, sig[i].count);
	if (!n)
		return;
	pthread_mutex_lock(&srn_cm.lock);
	for (unsigned int i = 0; i < n; i++)
		srn_cm_chan_unpin(sig[i].chan);
	pthread_mutex_unlock(&srn_cm.lock);
}

/*
 * Queues an event for cid on its channel (under srn_cm.lock). owner counts
 * it (the listener for CONNECT_REQUEST). m, if any, gives the peer's
 * private data and connection values.
 */
int srn_cm_queue(struct srn_cm_id *cid, struct srn_cm_id *owner,
		 enum rdma_cm_event_type type, int status,
		 const struct srn_cm_msg *m)
{
	struct srn_cm_event *e = srn_cm_zalloc(sizeof(*e));
	struct rdma_conn_param *p;

	if (!e)
		return -ENOMEM;
	e->owner = owner;
	e->ev.id = &cid->id;
	e->ev.listen_id = cid != owner ? &owner->id : NULL;
	e->ev.event = type;
	e->ev.status = status;
	p = &e->ev.param.conn;
	if (m)
		memcpy(e->pdata, m->pdata, m->pdata_len);
	if (m && cid->id.qp_type == IBV_QPT_UD) {
		srn_cm_fill_ud(cid, e, m);
	} else if (m) {
		p->private_data = m->pdata_len ? e->pdata : NULL;
		p->private_data_len = m->pdata_len;
		/* the peer's values, seen from this side */
		p->responder_resources = m->initiator_depth;
		p->initiator_depth = m->responder_resources;
		p->flow_control = m->flow_control;
		p->retry_count = m->retry_count;
		p->rnr_retry_count = m->rnr_retry_count;
		p->srq = m->srq;
		p->qp_num = be32toh(m->qpn);
	}
	srn_list_add_tail(&e->link, &owner->chan->events);
	srn_cm_signal(owner->chan);
	return 0;
}

/* An event of cid's own that brings work to the application thread. */
int srn_cm_queue_act(struct srn_cm_id *cid, enum rdma_cm_event_type type,
		     int status, const struct srn_cm_msg *m,
		     enum srn_cm_act act)
{
	struct srn_cm_event *e;
	int ret = srn_cm_queue(cid, cid, type, status, m);

	if (ret)
		return ret;
	e = srn_list_entry(cid->chan->events.prev, struct srn_cm_event, link);
	e->act = act;
	return 0;
}

/* Drops the queued events of cid (under srn_cm.lock). */
void srn_cm_purge(struct srn_cm_id *cid)
{
	struct srn_list *pos, *tmp;
	struct srn_cm_event *e;

	if (!cid->chan)
		return;
	srn_list_for_each_safe(pos, tmp, &cid->chan->events) {
		e = srn_list_entry(pos, struct srn_cm_event, link);
		if (e->owner != cid && e->ev.id != &cid->id)
			continue;
		srn_list_del(pos);
		srn_cm_zfree(e);
	}
}

/* Takes the next event off c, or -EAGAIN when none is queued. */
static int srn_cm_take(struct srn_cm_chan *c, struct rdma_cm_event **ev_p)
{
	struct srn_cm_event *e;
	struct srn_cm_id *child;

	pthread_mutex_lock(&srn_cm.lock);
	if (srn_list_empty(&c->events)) {
		pthread_mutex_unlock(&srn_cm.lock);
		return -EAGAIN;
	}
	e = srn_list_entry(c->events.next, struct srn_cm_event, link);
	srn_list_del(&e->link);
	e->owner->reported++;
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		/* the child is the application's from now on */
		child = container_of(e->ev.id, struct srn_cm_id, id);
		if (child->listener)
			child->listener->pending--;
		child->listener = NULL;
	}
	if (e->act != SRN_CM_ACT_NONE && srn_cm_act_fn)
		srn_cm_act_fn(e); /* in the application's thread */
	pthread_mutex_unlock(&srn_cm.lock);
	*ev_p = &e->ev;
	return 0;
}

/* Enters (in = true) or leaves a blocking wait on c; the last reader out
 * of a channel destroyed meanwhile frees it (srn_cm_chan_free). */
static void srn_cm_chan_reader(struct srn_cm_chan *c, bool in)
{
	pthread_mutex_lock(&srn_cm.lock);
	if (in)
		c->readers++;
	else
		srn_cm_chan_unpin(c);
	pthread_mutex_unlock(&srn_cm.lock);
}

SRN_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				 struct rdma_cm_event **event)
{
	struct srn_cm_chan *c = container_of(channel, struct srn_cm_chan, ch);
	int ret = -1, err = 0;
	uint64_t v;
	ssize_t n;

	if (!channel || !event) {
		errno = EINVAL;
		return -1;
	}
	srn_cm_chan_reader(c, true);
	for (;;) {
		n = read(channel->fd, &v, sizeof(v));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = errno; /* EAGAIN on a non-blocking channel */
			break;
		}
		if (!srn_cm_take(c, event)) {
			ret = 0;
			break;
		}
		/* the count of a dropped event, or a destroyed channel whose
		 * fd is still open: wait for the next */
	}
	srn_cm_chan_reader(c, false);
	if (ret)
		errno = err;
	return ret;
}

SRN_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct srn_cm_event *e;

	if (!event) {
		errno = EINVAL;
		return -1;
	}
	e = container_of(event, struct srn_cm_event, ev);
	pthread_mutex_lock(&srn_cm.lock);
	e->owner->acked++;
	pthread_cond_broadcast(&e->owner->cond);
	pthread_mutex_unlock(&srn_cm.lock);
	srn_cm_zfree(e);
	return 0;
}

/*
 * A synchronous id's wait for the outcome of its call: the next event on
 * its own channel, kept in id->event until the next call (as rdma-core).
 * 0, or -1 with errno (ECONNREFUSED when rejected).
 */
int srn_cm_complete(struct srn_cm_id *cid)
{
	struct rdma_cm_event *ev;

	if (!cid->sync)
		return 0;
	if (cid->id.event) {
		rdma_ack_cm_event(cid->id.event);
		cid->id.event = NULL;
	}
	if (rdma_get_cm_event(cid->id.channel, &ev))
		return -1;
	cid->id.event = ev;
	if (!ev->status)
		return 0;
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		errno = ECONNREFUSED;
	else
		errno = ev->status < 0 ? -ev->status : ev->status;
	return -1;
}
