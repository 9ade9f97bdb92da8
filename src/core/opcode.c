// SPDX-License-Identifier: MIT
/*
 * softrnic — the opcode table: what each RC send opcode needs at the
 * requester and the responder, and which completion opcodes it produces.
 */
#include "core/core.h"

const struct srn_opcode_info srn_opcodes[SRN_NOPCODES] = {
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
	[IBV_WR_LOCAL_INV] = {
		.name = "LOCAL_INV",
		.flags = SRN_OP_LOCAL,
		.wc_opcode = IBV_WC_LOCAL_INV,
	},
	[IBV_WR_BIND_MW] = {
		.name = "BIND_MW",
		.flags = SRN_OP_LOCAL,
		.wc_opcode = IBV_WC_BIND_MW,
	},
	[IBV_WR_SEND_WITH_INV] = {
		.name = "SEND_WITH_INV",
		.flags = SRN_OP_CONSUMES_RECV | SRN_OP_INLINE_OK | SRN_OP_INV,
		.wc_opcode = IBV_WC_SEND,
		.recv_wc_opcode = IBV_WC_RECV,
	},
};

/* The names rdma-core gives completion statuses (ibv_wc_status_str). */
const char *srn_wc_status_str(enum ibv_wc_status status)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};

	return (unsigned)status < SRN_ARRAY_SIZE(names) && names[status] ?
		       names[status] :
		       "unknown";
}
