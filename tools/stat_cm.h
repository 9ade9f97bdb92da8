/* SPDX-License-Identifier: MIT */
/* softrnic stat: the rdma_cm section (tools/stat_cm.c). */
#ifndef SRN_TOOL_STAT_CM_H
#define SRN_TOOL_STAT_CM_H

int stat_cm(void);

#endif /* SRN_TOOL_STAT_CM_H */
