/* SPDX-License-Identifier: MIT */
/*
 * softrnic — the core: the objects a verbs user creates, their memory and
 * their queues. Nothing here runs a queue or talks to a peer (that is the
 * engine's work, engine/engine.h); the core calls only util/.
 *
 *   device.c, context.c  the device, its contexts and async event queue
 *   pd.c, ah.c           protection domains, address handles
 *   mr.c                 MRs and the key table (TPT)
 *   memreg.c             making registered memory shareable (memfd remap)
 *   memguard.c           holding other threads' writes during a remap
 *   cq.c, event.c        completion rings, channels
 *   queue.c, srq.c       receive rings (QP RQ and SRQ) in shared memory
 *   qp.c                 the QP object: queues, attributes, WQE format
 *   opcode.c             the opcode table
 *   sge.c                local SGE resolution
 */
#ifndef SRN_CORE_H
#define SRN_CORE_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "util/util.h"

/* ---- device limits (reported by ibv_query_device and enforced) ---- */
#define SRN_MAX_QP 4096
#define SRN_MAX_QP_WR 16384
#define SRN_MAX_SGE 16
#define SRN_MAX_INLINE 256
#define SRN_MAX_CQ 4096
#define SRN_MAX_CQE ((1 << 22) - 1) /* a sparse memfd: pages on use */
static_assert(SRN_MAX_CQE + 1 == SRN_CQ_MAX_ENTRIES, "CQ segment size");
#define SRN_MAX_MR (1u << 20) /* MRs: TPT indexes from 2^14 */
#define SRN_MAX_MW ((1u << SRN_MW_INDEX_BITS) - 1) /* windows: below */
#define SRN_MAX_MR_SIZE (1ull << 40)
#define SRN_MAX_PD 4096
#define SRN_MAX_DM_SIZE (256u << 10) /* device memory per context */
#define SRN_MAX_SRQ 1024
#define SRN_MAX_SRQ_WR 16384
#define SRN_MAX_AH 4096
#define SRN_MAX_RD_ATOM 128
/* multicast: the groups a process's datagram socket may join (the
 * kernel's net.ipv4.igmp_max_memberships default) and the QPs attached to
 * one group in a process (the datagram transport's table) */
#define SRN_MAX_MCAST_GRP 20
#define SRN_MAX_MCAST_QP_ATTACH 64
#define SRN_MAX_MSG_SZ 0x80000000u
#define SRN_GID_TBL_LEN 16
#define SRN_VENDOR_ID 0x5352ee /* none of Mellanox, Amazon, Intel, ... */
#define SRN_VENDOR_PART_ID 0x5201
#define SRN_DEV_NAME "softrnic0"
/* ---- device.c ---- */
struct srn_device {
	struct ibv_device ibdev;
	void *verbs_ops_slot; /* NULL; where verbs_device.ops would be */
	uint64_t guid;
	union ibv_gid gid;
	uint32_t ipv4; /* network order, the address in gid */
};

struct srn_device *srn_device_get(void);
int srn_query_device_ex(struct ibv_context *context,
			const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size);
int srn_query_port(struct ibv_context *context, uint8_t port_num,
		   struct ibv_port_attr *attr, size_t attr_len);
/*
 * Serves a virtual sysfs file of a softrnic device (ibv_read_sysfs_file
 * asks it first for every "<dir>/<file>" it is given). Fills buf (at most
 * size bytes, NUL-terminated when it fits, no trailing newline) and returns
 * the length, >= 0, when (dir, file) is ours; -ENOENT when it is not (the
 * real file is read instead); any other -errno fails the read.
 */
int srn_sysfs_virtual_read(const char *dir, const char *file, char *buf,
			   size_t size);
bool srn_gid_is_local(const union ibv_gid *gid);

/* ---- context.c ---- */
struct srn_async_event {
	struct srn_list link;
	struct ibv_async_event ev;
};

/* From this many QPs open at once, posts prefetch what they will touch
 * (core/sq.h): with few, it is warm, and prefetching a WRITE's target for
 * writing steals the line a ping-pong's peer is polling. */
#define SRN_QP_PREFETCH_MIN 64

struct srn_context {
	struct srn_list link; /* in the progress thread's context list */
	pid_t owner_pid;
	uint32_t handle;
	/* SRN_QP_PREFETCH_MIN QPs were open at once (set under lock, never
	 * cleared; read relaxed by posts: a hint) */
	atomic_bool many_qps;
	pthread_mutex_t lock; /* object lists, handles, MR table */
	struct srn_list qps, cqs, srqs;
	uint32_t nqp, ncq, nsrq, npd, nmr, nah;
	size_t dm_used; /* device memory allocated (dm.c) */
	uint32_t next_handle;
	/* key table: shared (peers map it read-only) and private half */
	struct srn_seg tpt_seg;
	struct srn_mr **mr_by_index; /* SRN_TPT_ENTRIES */
	uint32_t mr_hint, mw_hint; /* where the next search for a free
				    * index starts */
	/* async events (ibv_get_async_event) */
	pthread_mutex_t async_lock;
	struct srn_list async_events;
	/* QPs with a stalled send queue (RNR, peer not ready) */
	atomic_uint nstalled;
	/* The QPs the requester must run again (engine/requester.c): their
	 * send queue is stalled, or a handler asked for a run (pending_run,
	 * pending_err). Guarded by retry_lock, a leaf lock taken under a
	 * QP's sq_lock (srn_qp_want_run, srn_qp_retry_del); nretry is their
	 * number, read without the lock as a hint by srn_poll_cq. */
	struct srn_lock retry_lock;
	struct srn_list retry_qps;
	atomic_uint nretry;
	/* must be last: the application's view */
	struct verbs_context vctx;
};

static inline struct srn_context *to_sctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct srn_context, vctx.context);
}

static inline struct srn_tpt_shm *srn_ctx_tpt(struct srn_context *ctx)
{
	return ctx->tpt_seg.addr;
}

int srn_ctx_create(struct ibv_device *device, struct srn_context **ctx_p);
void srn_ctx_destroy(struct srn_context *ctx);
uint32_t srn_ctx_new_handle(struct srn_context *ctx);
void srn_async_event_post(struct srn_context *ctx,
			  const struct ibv_async_event *ev);
bool srn_ctx_is_foreign(const struct srn_context *ctx);

/* ---- pd.c ---- */
struct srn_td {
	struct ibv_td ibtd;
	atomic_uint refs; /* parent domains using it */
};

struct srn_pd {
	struct ibv_pd ibpd;
	uint32_t handle; /* a parent domain's is its PD's: same keys */
	atomic_uint refs; /* MRs, QPs, SRQs, AHs, parent domains using it */
	/* a parent domain (ibv_alloc_parent_domain): its PD, thread domain
	 * and the application's allocator for the QP's private buffers */
	struct srn_pd *parent_of;
	struct srn_td *td;
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
};

struct ibv_td *srn_alloc_td(struct ibv_context *context,
			    struct ibv_td_init_attr *attr);
int srn_dealloc_td(struct ibv_td *td);
struct ibv_pd *srn_alloc_parent_domain(struct ibv_context *context,
				       struct ibv_parent_domain_init_attr *a);
void *srn_pd_buf_alloc(struct srn_pd *pd, size_t size, bool *custom_p);
void srn_pd_buf_free(struct srn_pd *pd, void *ptr, bool custom);

static inline struct srn_pd *to_spd(struct ibv_pd *p)
{
	return container_of(p, struct srn_pd, ibpd);
}

/* ---- ah.c ---- */
struct srn_ah {
	struct ibv_ah ibah;
	struct srn_pd *pd;
	struct ibv_ah_attr attr;
};

static inline struct srn_ah *to_sah(struct ibv_ah *a)
{
	return container_of(a, struct srn_ah, ibah);
}

/* The 40 bytes a UD receive buffer starts with (RoCEv2 over IPv4, as
 * Soft-RoCE writes them: 20 zero bytes, then the IPv4 header) */
#define SRN_GRH_LEN 40
/* The network header type a RoCE device reports in a UD receive's wc.sl
 * (bits 2:0): what the GRH area holds. UCX reads it to know which bytes
 * of the GRH are the destination address. */
#define SRN_WC_SL_ROCE_IPV6 1u
#define SRN_WC_SL_ROCE_IPV4 2u
/* Writes the GRH; returns its SRN_WC_SL_* type for the receive's wc.sl */
uint8_t srn_grh_build(uint8_t grh[SRN_GRH_LEN], const union ibv_gid *sgid,
		      const union ibv_gid *dgid, uint32_t payload_len);
void srn_grh_build_v4(uint8_t grh[SRN_GRH_LEN], uint32_t sip, uint32_t dip,
		      uint32_t payload_len);
/* The IPv4 address (network byte order) of an IPv4-mapped GID, or false */
bool srn_gid_v4(const union ibv_gid *g, uint32_t *ip_p);
#define SRN_UD_MTU 4096 /* the port's active MTU: the largest datagram */

/* ---- dm.c ---- */
struct ibv_dm *srn_alloc_dm(struct ibv_context *context,
			    struct ibv_alloc_dm_attr *attr);
int srn_free_dm(struct ibv_dm *dm);
struct ibv_mr *srn_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off,
			     size_t length, unsigned int access);

/* ---- memreg.c ---- */
struct srn_chunk;

struct srn_mr_piece {
	struct srn_chunk *chunk;
	uint64_t span_off;
	uint64_t len;
	uint64_t file_off;
	int fd; /* the chunk's memfd (owned by the chunk) */
};

struct srn_memreg {
	uintptr_t span_start;
	size_t span_len;
	unsigned npieces;
	struct srn_mr_piece piece[16];
};

/* -EFAULT: not all mapped (or not writable, if need_write); -EOPNOTSUPP
 * (mapped as asked, but not shareable): peers use process_vm_*. */
int srn_memreg_get(struct srn_memreg *reg, uintptr_t addr, size_t len,
		   bool need_write, bool ro);
void srn_memreg_put(struct srn_memreg *reg);
void srn_memreg_atfork_child(void);
/* A remap copies pages and maps the copy in their place: a write by
 * another thread in between is lost. Writers serialised by a lock of a
 * layer above (the progress thread's handlers, which link the pollables
 * that application threads allocated) must not run meanwhile: that layer
 * gives its lock's enter and leave (engine/progress.c). */
void srn_memreg_set_quiesce(void (*enter)(void), void (*leave)(void));
int srn_memreg_check(uintptr_t addr, size_t len, bool need_write);

/* ---- memguard.c: other threads' writes held during a remap (userfaultfd
 * write protection), under memreg.c's lock ---- */
bool srn_memguard_ready(void);
const char *srn_memguard_state_name(void);
int srn_memguard_hold(uintptr_t start, size_t len);
void srn_memguard_release(uintptr_t start, size_t len, bool remapped);
void srn_memguard_atfork_child(void);

/* ---- mr.c: the translation and protection table ---- */
struct srn_mr {
	struct ibv_mr ibmr;
	struct srn_pd *pd;
	uint32_t index;
	unsigned access;
	uint64_t iova;
	bool shared; /* memory reachable by peers (memreg holds it) */
	bool is_mw; /* the TPT slot of a memory window (struct srn_mw) */
	uint32_t nbound; /* windows bound to it (ctx->lock) */
	struct srn_memreg *reg; /* when shared: its pieces only */
};

/* ---- mw.c: memory windows (their TPT entries are published by mr.c) */
struct srn_mw {
	struct srn_mr slot; /* ctx->mr_by_index[] entry, is_mw set */
	struct ibv_mw ibmw;
	struct srn_mr *bound_mr; /* ctx->lock */
	uint32_t key; /* the key its entry holds (0: not bound) */
};

/* The owner lets same-host peers map the MR directly (SOFTRNIC_ACCESS_DIRECT
 * of <softrnic/direct.h>: an optional access flag, ignored elsewhere). */
#define SRN_ACCESS_DIRECT (IBV_ACCESS_OPTIONAL_FIRST << 9)
/* Internal, never in the TPT: an MR of device memory (core/dm.c), which
 * may be empty */
#define SRN_ACCESS_DM (1u << 31)

/* The rights only a remote access needs (a window's key may serve it). */
#define SRN_ACCESS_REMOTE                                   \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* The rights that write the memory. */
#define SRN_ACCESS_WRITES                                   \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* An MR whose one remote right is REMOTE_READ is shared read-only,
 * whatever its local rights: its pages are a memfd sealed against writable
 * mappings and writes (core/memreg.c), sent O_RDONLY and mapped without
 * PROT_WRITE by peers (docs/security.md). */
static inline bool srn_access_ro_shared(unsigned access)
{
	return (access & SRN_ACCESS_REMOTE) == IBV_ACCESS_REMOTE_READ;
}

/* What a key resolves to: a copy of its TPT entry, taken consistently. */
struct srn_key_ref {
	uint32_t key;
	uint32_t pd_handle;
	uint32_t access;
	uint32_t flags; /* SRN_TPT_* */
	uint32_t mr_key; /* a window's MR */
	uint32_t qpn; /* a type 2 window's QP */
	uint64_t iova;
	uint64_t length;
	uint64_t va;
	/* the MR whose memory the key reaches (its own entry for an MR):
	 * what a same-host peer maps (srn_rkey_check fills it) */
	uint32_t map_key;
	uint32_t map_access;
	uint64_t map_iova, map_length, map_va;
};

/* Outcome of a key check, in the order the checks run. */
enum srn_key_err {
	SRN_KEY_OK = 0,
	SRN_KEY_BAD_KEY,
	SRN_KEY_BAD_PD,
	SRN_KEY_BAD_ACCESS,
	SRN_KEY_BAD_BOUNDS,
	SRN_KEY_BAD_QP, /* a type 2 window bound to another QP */
};
extern const char *const srn_key_err_names[];

#include "core/tpt.h" /* srn_tpt_lookup, srn_key_check, srn_rkey_check */
int srn_tpt_init(struct srn_context *ctx);
int srn_tpt_slot_add(struct srn_context *ctx, struct srn_mr *slot);
void srn_tpt_slot_del(struct srn_context *ctx, struct srn_mr *slot);
void srn_tpt_set_entry(struct srn_context *ctx, uint32_t index,
		       const struct srn_tpt_entry *src);
uint32_t srn_key_tag(unsigned bits);
struct srn_qp;
struct srn_swqe;
int srn_mw_alloc(struct ibv_pd *pd, enum ibv_mw_type type,
		 struct ibv_mw **mw_p);
int srn_mw_dealloc(struct ibv_mw *mw);
enum ibv_wc_status srn_mw_bind_exec(struct srn_qp *qp,
				    const struct srn_swqe *w);
enum ibv_wc_status srn_mw_local_inv_exec(struct srn_qp *qp,
					 const struct srn_swqe *w);
int srn_mw_remote_inv(struct srn_context *ctx, uint32_t key, uint32_t qpn);
void srn_tpt_fini(struct srn_context *ctx);
struct ibv_mr *srn_mr_reg(struct ibv_pd *ibpd, void *addr, size_t length,
			  uint64_t iova, unsigned access);
/* ODP memory the library touches itself: faulted in first (0, -EFAULT) */
int srn_odp_fault(uint64_t va, uint64_t len, bool write);

/* The same for len bytes at addr under an MR's checked key (an lkey's:
 * ref->va is its memory); nothing to do for an MR that is not ODP. */
static inline int srn_key_fault(const struct srn_key_ref *ref, uint64_t addr,
				uint64_t len, bool write)
{
	if (srn_likely(!(ref->access & IBV_ACCESS_ON_DEMAND)))
		return 0;
	return srn_odp_fault(ref->va + (addr - ref->iova), len, write);
}
int srn_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		  uint32_t flags, struct ibv_sge *sg, uint32_t num_sge);
int srn_mr_export(struct srn_context *ctx, uint32_t key,
		  struct srn_key_ref *ref, struct srn_memreg *reg_copy);

/* ---- cq.c ---- */
struct srn_comp_channel {
	struct ibv_comp_channel ibch;
	pthread_mutex_t lock;
	struct srn_list cqs;
};

/* A producer's view of some CQ: ours or a peer's. */
struct srn_cq_view {
	struct srn_cq_shm *shm;
	struct srn_cqe *ring; /* at cqe_off: never moves */
	size_t seg_size;
	/* the ring's geometry, (gen << 32) | mask, read and replaced whole
	 * (relaxed atomics: producers of this process share the view) */
	uint64_t geo;
	/* the owner's own view: its geometry comes from srn_cq_relayout,
	 * never from the segment a peer could write */
	bool owner;
	int chan_fd; /* eventfd of the owner's channel, -1 if none */
	int kick_fd; /* owner's progress kick, for overflow */
	/* last cons read: a lower bound, so the free space it implies is
	 * never more than the truth; shared by this process's producers
	 * (stored with release after an acquire of cons, loaded with
	 * acquire: srn_cq_room, srn_cq_bounce_slot) */
	uint64_t cons_seen;
	/* the bounce slots (SRN_CQ_BOUNCE_OFF), NULL if the segment is too
	 * small for them */
	uint8_t *bounce;
};

#define SRN_CQ_RQS 4
struct srn_rq_view;

struct srn_cq {
	struct ibv_cq_ex ibcq; /* ibv_cq is its prefix */
	struct srn_context *ctx;
	struct srn_list ctx_link;
	struct srn_list chan_link;
	uint32_t handle;
	struct srn_lock lock; /* the consumer side */
	struct srn_seg seg;
	struct srn_cq_shm *shm;
	struct srn_cqe *ring;
	uint32_t mask;
	uint64_t cons; /* owner's copy, published to shm->cons */
	uint64_t events_seen; /* events handed out by ibv_get_cq_event */
	struct srn_comp_channel *chan;
	struct srn_cq_view local; /* producer view for this process */
	atomic_uint refs; /* QPs and SRQs using it */
	uint8_t overflow_reported; /* atomic exchange */
	/* A producer in a process that died may have reserved a slot it
	 * never filled: after this time poll_cq skips such a slot. */
	uint64_t repair_after_ns; /* atomic; 0: no peer died */
	/* srn_cq_repair (cq->lock): the position found claimed but empty,
	 * and when it was first found so */
	uint64_t repair_pos;
	uint64_t repair_seen_ns;
	/* extended CQ (verbs_cqex.c): what ibv_create_cq_ex asked for, and
	 * the CQE between start_poll and end_poll (cq->lock held) */
	uint64_t wc_flags;
	const struct srn_cqe *cur;
	struct srn_cqe cur_inl; /* cur, when the ring's CQE is inline */
	/* srn_cq_inl_place (lock): the GRH of the last inline datagram,
	 * built once for its addresses and length */
	struct srn_cqe_dgram_ips grh_ips;
	uint32_t grh_len; /* its payload length + 1; 0: none built */
	uint8_t grh[SRN_GRH_LEN];
	/* The first QPs whose receives complete here, with the ring they
	 * take WQEs from (their own or their SRQ's), under lock: a CQE's
	 * rq_pos goes to that ring's view (srn_cq_rq_polled); QPs beyond
	 * these leave their ring's post_recv to read cons instead. */
	struct srn_cq_rq {
		uint32_t qpn;
		struct srn_rq_view *v;
	} rqs[SRN_CQ_RQS];
	unsigned nrqs;
};

static inline struct srn_cq *to_scq(struct ibv_cq *c)
{
	return container_of((struct ibv_cq_ex *)c, struct srn_cq, ibcq);
}

int srn_cq_view_init(struct srn_cq_view *v, void *seg_addr, size_t seg_size,
		     int chan_fd, int kick_fd);
int srn_cq_post(struct srn_cq_view *v, const struct srn_cqe *cqe);
/* srn_cq_post in two steps: claim a slot (0 or as srn_cq_post), then
 * publish the CQE in it (the bounce slot of its position in between) */
int srn_cq_claim(struct srn_cq_view *v, uint64_t *p_p, struct srn_cqe **slot_p);
uint8_t *srn_cq_bounce_slot(struct srn_cq_view *v, uint64_t p);
uint64_t srn_cq_prod_hint(const struct srn_cq_view *v);
void srn_cq_publish(struct srn_cq_view *v, struct srn_cqe *slot, uint64_t p,
		    const struct srn_cqe *cqe);
int srn_cq_room(struct srn_cq_view *v, uint64_t p, uint32_t mask);
int srn_cq_resize(struct srn_cq *cq, int cqe);
int srn_cq_create(struct ibv_context *context, int cqe, void *cq_context,
		  struct ibv_comp_channel *channel, int comp_vector,
		  struct srn_cq **cq_p);
int srn_cq_del(struct srn_cq *cq);
void srn_cq_rq_attach(struct srn_cq *cq, uint32_t qpn, struct srn_rq_view *v);
void srn_cq_rq_detach(struct srn_cq *cq, uint32_t qpn);
void srn_cq_destroy(struct srn_cq *cq);
bool srn_cq_repair(struct srn_cq *cq);
void srn_cq_inl_take(struct srn_cq *cq, const struct srn_cqe *c,
		     struct srn_cqe *out);
void srn_cq_arm(struct srn_cq *cq, bool solicited_only);
void srn_cq_clean(struct srn_cq *cq, uint32_t qpn);
void srn_cq_check_overflow(struct srn_cq *cq);
void srn_cq_peer_died(struct srn_cq *cq);

/* ---- event.c ---- */
int srn_channel_signal(int chan_fd);
/* Work only an application thread may do (a fetch over the control
 * connection), run by one that waits in ibv_get_cq_event: the engine
 * registers it (srn_channel_work_set); srn_ctx_channels_poke wakes such a
 * thread when the progress thread stalled a QP on it. */
typedef void srn_channel_work_fn(struct srn_context *ctx);
void srn_channel_work_set(srn_channel_work_fn *fn);
void srn_ctx_channels_poke(struct srn_context *ctx);

/* ---- queue.c: receive rings in shared memory ---- */
struct srn_rq_view {
	struct srn_rq_shm *rq;
	uint8_t *wqes;
	uint32_t mask;
	uint32_t stride;
	uint32_t max_sge;
	uint64_t cons_seen; /* owner: last cons read (a lower bound) */
	/* owner: the last receive CQE's srn_cqe.rq_pos polled for this
	 * ring (srn_cq_rq_polled), 0: none; written by the poller */
	uint32_t polled_pos;
};

/* A receive WQE with room for the largest SGE list. */
struct srn_rwqe_buf {
	struct srn_rwqe w;
	struct srn_rsge sge[SRN_MAX_SGE];
};

uint32_t srn_rq_stride(uint32_t max_sge);
size_t srn_rq_bytes(uint32_t size, uint32_t max_sge);
void srn_rq_init(struct srn_rq_shm *rq, uint32_t size, uint32_t max_sge,
		 uint32_t wqe_off);
int srn_rq_view_init(struct srn_rq_view *v, struct srn_rq_shm *rq,
		     void *seg_base, size_t seg_size);
int srn_rq_post(struct srn_rq_view *v, const struct ibv_recv_wr *wr);
int srn_rq_peek(const struct srn_rq_view *v, struct srn_rwqe *out,
		uint64_t *pos_p);
bool srn_rq_commit(const struct srn_rq_view *v, uint64_t pos);
int srn_rq_claim(const struct srn_rq_view *v, struct srn_rwqe *out,
		 uint32_t *rq_pos_p);
uint32_t srn_rq_count(const struct srn_rq_view *v);

struct srn_qp;

/* ---- xrcd.c: XRC domains ---- */
/* What ibv_open_xrcd returns. Opens of the same file (inode) share one
 * domain: its id, unique in the process (0: none). */
struct srn_xrcd {
	struct ibv_xrcd ibxrcd;
	struct srn_xrcd_dom *dom;
	atomic_uint refs; /* XRC SRQs and TGT QPs using it */
};

static inline struct srn_xrcd *to_sxrcd(struct ibv_xrcd *x)
{
	return container_of(x, struct srn_xrcd, ibxrcd);
}

struct ibv_xrcd *srn_open_xrcd(struct ibv_context *context,
			       struct ibv_xrcd_init_attr *attr);
int srn_close_xrcd(struct ibv_xrcd *xrcd);
uint32_t srn_xrcd_id(const struct srn_xrcd *x);
extern pthread_mutex_t srn_xrc_lock;

/* ---- srq.c ---- */
struct srn_srq {
	struct ibv_srq ibsrq;
	struct srn_context *ctx;
	struct srn_list ctx_link;
	struct srn_pd *pd;
	uint32_t handle;
	struct srn_lock lock;
	struct srn_seg seg;
	struct srn_srq_shm *shm;
	struct srn_rq_view rqv;
	uint32_t max_wr, max_sge;
	atomic_uint refs;
	/* XRC SRQ: its domain, CQ and host-unique number (srqn_fd holds
	 * the number, engine/ctl.c); xrc_link in the process's list of XRC
	 * SRQs (srn_srq_xrc_find) */
	struct srn_xrcd *xrcd;
	struct srn_cq *cq;
	uint32_t srqn;
	int srqn_fd;
	struct srn_list xrc_link;
};

static inline struct srn_srq *to_ssrq(struct ibv_srq *s)
{
	return container_of(s, struct srn_srq, ibsrq);
}

int srn_srq_create(struct ibv_pd *ibpd, struct ibv_srq_init_attr *attr,
		   struct srn_srq **srq_p);
int srn_srq_create_xrc(struct ibv_srq_init_attr_ex *attr,
		       struct srn_srq **srq_p);
void srn_srq_xrc_publish(struct srn_srq *srq, uint32_t srqn, int srqn_fd);
struct srn_srq *srn_srq_xrc_find(uint32_t srqn);
int srn_srq_xrc_lookup(uint32_t srqn, uint32_t xrcd_id, struct srn_srq **srq_p);
int srn_srq_del(struct srn_srq *srq);
void srn_srq_destroy(struct srn_srq *srq);
int srn_srq_post(struct srn_srq *srq, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad_wr);
bool srn_srq_take_peer_waiting(struct srn_srq *srq);
void srn_srq_check_limit(struct srn_srq *srq);
void srn_srq_limit_consumed(struct srn_rq_view *v, int owner_kick_fd);

/* ---- opcode.c ---- */
enum srn_op_flags {
	SRN_OP_REMOTE_WRITE = 1 << 0, /* needs REMOTE_WRITE at target */
	SRN_OP_REMOTE_READ = 1 << 1,
	SRN_OP_REMOTE_ATOMIC = 1 << 2,
	SRN_OP_CONSUMES_RECV = 1 << 3, /* takes a receive WQE */
	SRN_OP_LOCAL_WRITE = 1 << 4, /* scatters into local SGEs */
	SRN_OP_HAS_IMM = 1 << 5,
	SRN_OP_INLINE_OK = 1 << 6,
	SRN_OP_LOCAL = 1 << 7, /* executed at the requester (BIND_MW,
				* LOCAL_INV): no transport */
	SRN_OP_INV = 1 << 8, /* invalidates imm_data's key at the target */
};

struct srn_opcode_info {
	const char *name;
	unsigned flags;
	enum ibv_wc_opcode wc_opcode; /* requester completion */
	enum ibv_wc_opcode recv_wc_opcode; /* responder completion */
};

/* The table, indexed by ibv_wr_opcode (core/opcode.c); entries without a
 * name are opcodes this device does not execute. */
#define SRN_NOPCODES (IBV_WR_SEND_WITH_INV + 1)
extern const struct srn_opcode_info srn_opcodes[SRN_NOPCODES];

/* NULL for opcodes an RC QP of this device does not execute. Inline: it
 * runs for every WR, at post and at the target's completion. */
static inline const struct srn_opcode_info *srn_opcode_get(unsigned opcode)
{
	if (opcode >= SRN_NOPCODES || !srn_opcodes[opcode].name)
		return NULL;
	return &srn_opcodes[opcode];
}
const char *srn_wc_status_str(enum ibv_wc_status status);

/* ---- qp.c / qp_state.c ---- */
struct srn_swqe {
	uint64_t wr_id;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t num_sge;
	uint32_t imm_data; /* network order; invalidate_rkey for *_INV */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t inline_len;
	union { /* what the opcode or the QP type needs beyond the above */
		struct { /* atomics */
			uint64_t compare_add;
			uint64_t swap;
		};
		struct { /* UD: ibv_send_wr.wr.ud */
			struct ibv_ah *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		};
		struct { /* BIND_MW (remote_addr, total_len, rkey: the
			  * window's address, length and new rkey) */
			struct ibv_mw *bind_mw;
			struct ibv_mr *bind_mr;
			uint32_t bind_access;
			uint32_t bind_rsvd;
		};
	};
	uint64_t total_len;
	uint32_t psn; /* on the wire (transports that number requests) */
	uint8_t done; /* under comp_lock: status is final */
	uint8_t status; /* enum ibv_wc_status */
	uint8_t rsvd[2];
	uint32_t xrc_srqn; /* XRC INI: the target SRQ */
	uint32_t rsvd2;
	struct ibv_sge sge[]; /* max_sge, or inline data in the same space */
};

/* Where a WQE's inline data is: the space of its SGE list and beyond (an
 * inline WR has no SGEs), up to the stride; cap.max_inline_data says how
 * much (srn_sq_init). */
static inline uint8_t *srn_swqe_inline(struct srn_swqe *w)
{
	return (uint8_t *)w->sge;
}

/*
 * The send queue: [cons, sent) are executed (done, or in flight on a
 * transport that answers later), [sent, prod) wait to be executed.
 * prod and sent belong to the requester (sq_lock); cons to the completer
 * (comp_lock), which publishes it with release for the fullness check.
 */
struct srn_sq {
	uint8_t *buf;
	bool buf_custom; /* from the parent domain's allocator */
	uint32_t size; /* power of two */
	uint32_t stride;
	uint32_t max_wr;
	uint64_t prod;
	uint64_t sent; /* written under sq_lock and comp_lock */
	uint64_t cons;
	/* the position in slot 0: moved to prod when the queue is empty
	 * (srn_sq_rebase), under sq_lock */
	uint64_t base;
};

/* The slot of WQE number pos. */
static inline struct srn_swqe *srn_sq_slot(const struct srn_sq *sq,
					   uint64_t pos)
{
	return (struct srn_swqe *)(sq->buf +
				   ((pos - sq->base) & (sq->size - 1)) *
					   sq->stride);
}

/*
 * An empty queue starts again at slot 0, so that a QP whose WQEs complete
 * at their doorbell (same host) writes one warm slot, not a ring's worth
 * of cold ones (with many QPs: 128 B of cache a QP instead of tx depth x
 * 128 B). cons was read with acquire (pairs with its release in
 * srn_comp_send_done): the completer is done with every slot, and no
 * position is live, so no slot moves under anyone. sq_lock held.
 */
static inline void srn_sq_rebase(struct srn_sq *sq, uint64_t cons)
{
	if (cons == sq->prod)
		sq->base = sq->prod;
}

enum srn_stall {
	SRN_STALL_NONE = 0,
	SRN_STALL_RNR, /* no receive WQE at the target */
	SRN_STALL_NOT_READY, /* target not in RTR/RTS yet */
	SRN_STALL_CREDIT, /* max_rd_atomic READs/atomics in flight */
	SRN_STALL_RNR_WAIT, /* the target NAKed (RNR): wait out its timer,
			     * then send again (retries counted by the
			     * transport) */
	SRN_STALL_FETCH, /* a peer's MR must be fetched by an application
			  * thread (its next poll or post); bounded as
			  * NOT_READY, by timeout x retry_cnt */
};
extern const char *const srn_stall_names[];

struct srn_transport_ops;
struct srn_ud_qp;

/* struct srn_qp's rx. */
struct srn_qp_rxattr {
	uint32_t access, rq_psn, sq_psn;
	uint8_t min_rnr_timer, timeout, retry_cnt;
};

struct srn_qp {
	struct ibv_qp_ex ibqpx; /* qp_base first */
	/*
	 * What every post and its completion touch, on two cache lines (and
	 * qp_base's state, type and number): with many QPs, each message
	 * finds its QP's lines cold, and the fewer they are the fewer misses
	 * (docs/BENCHMARKS.md, "Many QPs").
	 */
	struct srn_context *ctx __attribute__((aligned(64)));
	struct srn_cq *send_cq, *recv_cq;
	/* the transport and its per-connection state */
	const struct srn_transport_ops *tops;
	void *tpriv;
	struct srn_lock sq_lock; /* the requester; taken before rq_lock */
	struct srn_lock rq_lock;
	struct srn_lock comp_lock; /* the completer; after the others */
	uint32_t wr_ops; /* 1 << ibv_wr_opcode the QP type runs */
	/* stall bookkeeping, under sq_lock */
	enum srn_stall stall;
	/* set by the progress thread when it could not get sq_lock:
	 * SRN_PENDING_* bits */
	atomic_uint pending_err;
	atomic_uint pending_run; /* the transport asks the requester to
				  * run (go back after an RNR NAK) */
	bool sq_sig_all;
	/* the doorbell left posted WQEs unsent, for the next run to send
	 * with others (srn_req_doorbell); sq_lock */
	bool deferred;
	struct srn_sq sq;
	/* the next line: what a post reads less often or only to check */
	struct ibv_qp_cap cap;
	/* the WQE at err_wait_pos failed at the requester while WQEs ahead
	 * of it were in flight: nothing behind it runs, and the QP goes to
	 * ERR once they are complete (requester.c, completer.c); written
	 * under comp_lock */
	atomic_bool err_wait;
	uint64_t err_wait_pos;
	/* the target address of the last RDMA WRITE executed minus its
	 * remote address: where a post prefetches the next one's target
	 * (verbs_qp.c). A hint only, written and read relaxed */
	uint64_t pf_delta;
	struct srn_ud_qp *ud; /* UD: engine/ud.c (NULL for other types) */
	/* the rest: the control path's */
	struct srn_list ctx_link;
	struct srn_pd *pd;
	struct srn_srq *srq;
	struct srn_xrcd *xrcd; /* XRC TGT: its domain */
	unsigned opens; /* XRC TGT: ibv_open_qp handles beyond the first
			 * (srn_xrc_lock) */
	bool held; /* holds references on its PD, CQs and SRQ (srn_qp_add) */
	bool fatal_sent; /* IBV_EVENT_QP_FATAL raised (sq_lock; RESET clears) */
	/* attributes (written by modify_qp under both locks) */
	struct ibv_qp_attr attr;
	/* the attributes a receive side reads without the QP's locks (the
	 * progress thread): copies published by srn_qp_publish_rx, read
	 * with srn_qp_rx_get */
	struct srn_qp_rxattr rx;
	/* shared segment: state for peers and the RQ ring */
	struct srn_seg seg;
	struct srn_qp_shm *shm;
	struct srn_rq_view rqv; /* unused with an SRQ */
	/* the ibv_wr_* API (verbs_qpex.c): the ops ibv_create_qp_ex asked
	 * for, and the batch between wr_start and wr_complete (sq_lock
	 * held all along): its first position, length, current WQE and
	 * first error (a positive errno, returned by wr_complete) */
	uint64_t send_ops_flags;
	uint64_t bx_start;
	uint32_t bx_n;
	int bx_err;
	struct srn_swqe *bx_cur;
	/* stall bookkeeping, under sq_lock */
	uint64_t stall_deadline_ns;
	unsigned stall_retries;
	uint64_t stall_period_ns;
	/* on ctx->retry_qps (under its retry_lock) while stalled or
	 * pending: empty when not */
	struct srn_list retry_link;
	/* the QP's control socket and the peers connected to it (ctl.c) */
	struct srn_pollable *listener;
	/* pid << 32 | QPN: the process our own dial found listening on that
	 * QPN's control socket, 0: none (srn_ctl_dial_own, srn_ctl_undial) */
	_Atomic uint64_t ctl_dialed;
	pthread_mutex_t conn_lock; /* leaf lock: guards conns, links */
	struct srn_list conns;
	/* inbound links a transport accepted for this QP, possibly before
	 * it connected, and the transport state their receive side reads
	 * (written under conn_lock with release) */
	struct srn_list links;
	void *tstate;
};

/* ... and a UD QP: datagrams (SEND) only */
#define SRN_QP_SEND_OPS_UD (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
/* ... and a UC QP: no READ, no atomics */
#define SRN_QP_SEND_OPS_UC                                                \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
/* The ibv_wr_* opcodes an RC QP can run (IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) */
#define SRN_QP_SEND_OPS_RC                                                \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |             \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |   \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |   \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV)

/* ... and an XRC INI QP: RC's remote operations */
#define SRN_QP_SEND_OPS_XRC                                               \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |             \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |   \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

/* Does a QP of this type have a receive queue of its own (or an SRQ)?
 * XRC QPs do not: an XRC TGT's receives go to the SRQ each request
 * names, an INI receives nothing. */
static inline bool srn_qp_has_rq(enum ibv_qp_type type)
{
	return type != IBV_QPT_XRC_SEND && type != IBV_QPT_XRC_RECV;
}

#define SRN_PENDING_ERR 1u /* move to ERR */
#define SRN_PENDING_FATAL 2u /* ... and raise IBV_EVENT_QP_FATAL */

static inline struct srn_qp *to_sqp(struct ibv_qp *q)
{
	return container_of(q, struct srn_qp, ibqpx.qp_base);
}

static inline enum ibv_qp_state srn_qp_state(const struct srn_qp *qp)
{
	/* acquire: pairs with the release in srn_qp_set_state */
	return __atomic_load_n(&qp->ibqpx.qp_base.state, __ATOMIC_ACQUIRE);
}

/* qp.c: the QP object (the state machine is the engine's, qp_state.c) */
int srn_qp_create(struct srn_context *ctx, struct ibv_qp_init_attr_ex *a,
		  struct srn_qp **qp_p);
uint64_t srn_qp_send_ops(enum ibv_qp_type type);
void srn_qp_destroy(struct srn_qp *qp);
void srn_qp_add(struct srn_qp *qp, struct ibv_qp_init_attr_ex *a);
void srn_qp_del(struct srn_qp *qp);
void srn_qp_want_run(struct srn_qp *qp);
void srn_qp_retry_del(struct srn_context *ctx, struct srn_qp *qp);
int srn_qp_check_attr(const struct ibv_qp_attr *a, int mask);
void srn_qp_publish_rx(struct srn_qp *qp);

/* The attributes a thread that does not hold the QP's locks may read. */
static inline struct srn_qp_rxattr srn_qp_rx_get(const struct srn_qp *qp)
{
	struct srn_qp_rxattr r;

	/* relaxed: pairs with the relaxed stores in srn_qp_publish_rx; each
	 * field is a value of its own, ordered with nothing else */
	r.access = __atomic_load_n(&qp->rx.access, __ATOMIC_RELAXED);
	/* relaxed: as above */
	r.rq_psn = __atomic_load_n(&qp->rx.rq_psn, __ATOMIC_RELAXED);
	/* relaxed: as above */
	r.sq_psn = __atomic_load_n(&qp->rx.sq_psn, __ATOMIC_RELAXED);
	/* relaxed: as above */
	r.min_rnr_timer =
		__atomic_load_n(&qp->rx.min_rnr_timer, __ATOMIC_RELAXED);
	/* relaxed: as above */
	r.timeout = __atomic_load_n(&qp->rx.timeout, __ATOMIC_RELAXED);
	/* relaxed: as above */
	r.retry_cnt = __atomic_load_n(&qp->rx.retry_cnt, __ATOMIC_RELAXED);
	return r;
}

void srn_qp_apply_attr(struct srn_qp *qp, const struct ibv_qp_attr *a,
		       int mask);
void srn_qp_reset_queues(struct srn_qp *qp);
void srn_qp_query(struct srn_qp *qp, struct ibv_qp_attr *attr,
		  struct ibv_qp_init_attr *init);

/* ---- sge.c ---- */
struct iovec;
int srn_local_iov(struct srn_qp *qp, const struct srn_swqe *w, unsigned need,
		  struct iovec *iov, unsigned *n_p);
int srn_recv_iov(struct srn_qp *qp, const struct srn_rwqe *rw,
		 struct iovec *iov, unsigned *n_p, uint64_t *cap_p,
		 uint64_t fill);
void srn_iov_copy_list(const struct iovec *dst, unsigned nd,
		       const struct iovec *src, unsigned ns);

/* Copies min(total(src), total(dst)) bytes from one iovec list to
 * another; one to one (a WRITE or SEND of one SGE) without the list walk,
 * as it is most of the data path's copies. */
static inline void srn_iov_copy(const struct iovec *dst, unsigned nd,
				const struct iovec *src, unsigned ns)
{
	if (nd == 1 && ns == 1) {
		size_t k = dst->iov_len < src->iov_len ? dst->iov_len :
							 src->iov_len;

		if (k) /* a zero-length SGE may have no address */
			memcpy(dst->iov_base, src->iov_base, k);
		return;
	}
	srn_iov_copy_list(dst, nd, src, ns);
}

#endif /* SRN_CORE_H */
