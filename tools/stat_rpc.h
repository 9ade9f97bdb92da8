/* SPDX-License-Identifier: MIT */
/* softrnic stat: the RPC section (tools/stat_rpc.c). */
#ifndef SRN_TOOL_STAT_RPC_H
#define SRN_TOOL_STAT_RPC_H

int stat_rpc(void);

#endif /* SRN_TOOL_STAT_RPC_H */
