/* SPDX-License-Identifier: MIT */
/*
 * softrnic direct access: a peer's registered memory as a plain pointer.
 *
 * Between processes of one host, softrnic's NIC is shared memory: a
 * peer's MR is mapped into the initiator, and RDMA WRITE, READ and atomics
 * are loads and stores into it. This extension hands that mapping to the
 * application (the CXL.mem idea): for a connected RC QP, a remote address,
 * an rkey and a length, srn_direct_map() returns a pointer through which
 * the application loads and stores the peer's memory itself, with no verb
 * and no completion per access.
 *
 * The owner of the memory decides: an MR is directly mappable only if it
 * was registered with SOFTRNIC_ACCESS_DIRECT as well as the IBV_ACCESS_REMOTE_*
 * rights asked for. SOFTRNIC_ACCESS_DIRECT is in rdma-core's optional
 * access range, so other devices ignore it. A direct mapping is a
 * capability the owner gives away: it lasts until srn_direct_unmap(), and
 * deregistering the MR, destroying a QP or the owner's exit do not revoke
 * it (the pages stay mapped here; after the owner's exit they are nobody's
 * but ours). Do not grant it to a peer you may need to shut out.
 *
 * Ordering: stores through the pointer are plain stores into coherent
 * memory; publish them to the peer as you would between threads (a
 * release store it acquires, or a verb after them: a SEND or an RDMA
 * WRITE posted after the stores is seen after them). Atomics: the
 * peer's IBV_WR_ATOMIC_* over shared memory are the CPU's atomic
 * instructions, so __atomic operations on 8-byte aligned words through
 * the pointer are atomic with respect to them.
 *
 * Link with softrnic's libibverbs.so.1 (pkg-config softrnic); the symbols
 * are in its version node SOFTRNIC_1.0, absent from other libibverbs
 * builds (look them up with dlsym to stay portable).
 */
#ifndef SOFTRNIC_DIRECT_H
#define SOFTRNIC_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ibv_reg_mr access flag of the memory's owner: peers on this host may
 * map this MR directly (with the REMOTE_* rights the MR also has). */
#define SOFTRNIC_ACCESS_DIRECT (IBV_ACCESS_OPTIONAL_FIRST << 9)

/*
 * Maps [remote_addr, remote_addr + length) of the memory behind rkey at
 * the peer of qp (an RC or UC QP in RTR or RTS, connected to a QP of
 * this host) and stores the pointer to remote_addr in *ptr_p. access is
 * a non-empty combination of IBV_ACCESS_REMOTE_READ (loads),
 * IBV_ACCESS_REMOTE_WRITE (stores) and IBV_ACCESS_REMOTE_ATOMIC (atomics;
 * implies loads and stores); the mapping allows exactly that.
 *
 * Returns 0, or an errno value (errno is set too):
 *   EINVAL     qp, ptr_p, length or access is invalid
 *   ENOTCONN   qp is not in RTR or RTS, or its peer is gone
 *   EREMOTE    qp's peer is reached over a network transport (another
 *              host, or SOFTRNIC_TRANSPORT forces one): nothing to map
 *   EACCES     the rkey does not grant the range with these rights and
 *              SOFTRNIC_ACCESS_DIRECT, or the peer refused the memory
 *   EOPNOTSUPP the peer's memory cannot be mapped (e.g. it is on the
 *              peer's stack, or spans several files)
 *   ETIMEDOUT  the peer did not answer
 */
int srn_direct_map(struct ibv_qp *qp, uint64_t remote_addr, uint32_t rkey,
		   size_t length, unsigned int access, void **ptr_p);

/* Unmaps what srn_direct_map() returned as ptr. 0, or EINVAL (errno
 * set too) when ptr is not a live direct mapping. */
int srn_direct_unmap(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* SOFTRNIC_DIRECT_H */
