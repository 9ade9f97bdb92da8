// SPDX-License-Identifier: MIT
/*
 * softrnic — the opcode table: what each RC send opcode needs at the
 * requester and the responder, and which completion opcodes it produces.
 */
#include "srn.h"

static const struct srn_opcode_info srn_opcodes[] = {
	[IBV_WR_RDMA_WRITE] = {
		.name = "RDMA_WRITE",
		.flags = SRN_OP_REMOTE_WRITE | SRN_OP_INLINE_OK,
		.wc_opcode = IBV_WC_RDMA_WRITE,
	},
	[IBV_WR_RDMA_WRITE_WITH_IMM] = {
		.name = "RDMA_WRITE_WITH_IMM",
		.flags = SRN_OP_REMOTE_WRITE | SRN_OP_CONSUMES_RECV |
			 SRN_OP_HAS_IMM | SRN_OP_INLINE_OK,
		.wc_opcode = IBV_WC_RDMA_WRITE,
		.recv_wc_opcode = IBV_WC_RECV_RDMA_WITH_IMM,
	},
	[IBV_WR_SEND] = {
		.name = "SEND",
		.flags = SRN_OP_CONSUMES_RECV | SRN_OP_INLINE_OK,
		.wc_opcode = IBV_WC_SEND,
		.recv_wc_opcode = IBV_WC_RECV,
	},
	[IBV_WR_SEND_WITH_IMM] = {
		.name = "SEND_WITH_IMM",
		.flags = SRN_OP_CONSUMES_RECV | SRN_OP_HAS_IMM |
			 SRN_OP_INLINE_OK,
		.wc_opcode = IBV_WC_SEND,
		.recv_wc_opcode = IBV_WC_RECV,
	},
	[IBV_WR_RDMA_READ] = {
		.name = "RDMA_READ",
		.flags = SRN_OP_REMOTE_READ | SRN_OP_LOCAL_WRITE,
		.wc_opcode = IBV_WC_RDMA_READ,
	},
	[IBV_WR_ATOMIC_CMP_AND_SWP] = {
		.name = "ATOMIC_CMP_AND_SWP",
		.flags = SRN_OP_REMOTE_ATOMIC | SRN_OP_LOCAL_WRITE,
		.wc_opcode = IBV_WC_COMP_SWAP,
	},
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = {
		.name = "ATOMIC_FETCH_AND_ADD",
		.flags = SRN_OP_REMOTE_ATOMIC | SRN_OP_LOCAL_WRITE,
		.wc_opcode = IBV_WC_FETCH_ADD,
	},
};

/* NULL for opcodes an RC QP of this device does not execute. */
const struct srn_opcode_info *srn_opcode_get(unsigned opcode)
{
	if (opcode >= SRN_ARRAY_SIZE(srn_opcodes) || !srn_opcodes[opcode].name)
		return NULL;
	return &srn_opcodes[opcode];
}
