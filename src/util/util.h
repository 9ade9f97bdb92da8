/* SPDX-License-Identifier: MIT */
/*
 * softrnic — small utilities every layer may use: logging, clocks, memfd
 * segments (seg.c), eventfd kicks, lists and the futex lock.
 */
#ifndef SRN_UTIL_H
#define SRN_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "proto/srn_shm_proto.h"
#include "util/srn_compiler.h"
#include "util/srn_list.h"
#include "util/srn_lock.h"

/*
 * socket(2) straight to the kernel: an LD_PRELOAD'ed socket library
 * (rdma-core's librspreload.so, which turns an application's socket()
 * into rsocket() of softrnic's librdmacm) must not catch the sockets
 * softrnic makes for itself underneath (the CM's, the transports').
 */
int srn_socket(int domain, int type, int protocol);

/* ---- self.c: this process (refreshed after fork) ---- */
extern pid_t srn_pid;
extern uid_t srn_euid; /* as it was when a device list was first made */
void srn_self_refresh(void);
bool srn_self_kin(pid_t pid, uid_t uid);
void srn_self_atfork_child(void);
/* What ptrace's access check reads of a process (/proc/<pid>/status). */
struct srn_cred {
	unsigned uid[3], gid[3]; /* real, effective, saved */
	unsigned long long prm, eff; /* permitted, effective capabilities */
	unsigned long userns; /* inode of its user namespace */
};
bool srn_cred_may_trace(const struct srn_cred *t, const struct srn_cred *e,
			bool e_dumpable, int scope);
/* /proc/PID/status read from fd: bits of what was found (1 Uid, 2 Gid,
 * 4 CapPrm, 8 CapEff); all four: 15. */
unsigned srn_cred_parse(int fd, struct srn_cred *c);

/* ---- random.c: the kernel's CSPRNG, pooled per thread ---- */
uint32_t srn_random_u32(void);

/* ---- log.c ---- */
enum srn_log_level {
	SRN_LOG_ERR,
	SRN_LOG_WARN,
	SRN_LOG_INFO,
	SRN_LOG_DBG
};
void srn_log(enum srn_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define srn_err(...) srn_log(SRN_LOG_ERR, __VA_ARGS__)
#define srn_warn(...) srn_log(SRN_LOG_WARN, __VA_ARGS__)
#define srn_dbg(...) srn_log(SRN_LOG_DBG, __VA_ARGS__)
uint64_t srn_now_ns(void);

/* ---- seg.c: memfd segments ---- */
struct srn_seg {
	int fd;
	void *addr;
	size_t size;
};

int srn_seg_create(struct srn_seg *seg, enum srn_seg_kind kind, size_t size,
		   uint32_t id);
int srn_seg_map(struct srn_seg *seg, int fd, enum srn_seg_kind kind,
		size_t min_size, int prot);
void srn_seg_unmap(struct srn_seg *seg);
int srn_seg_seal_writes(struct srn_seg *seg);
/* segarena.c: where small QP segments are mapped */
void *srn_sega_map(size_t size, int prot, int fd, int flags);
bool srn_sega_unmap(void *addr, size_t size);

void srn_kick_fd(int fd);

/* ---- fdshare.c: one descriptor per open file received from peers ---- */
int srn_fdshare_get(int fd, int32_t key);
void srn_fdshare_put(int fd);

/* ---- hostd.c: the optional host daemon (docs/security.md) ---- */
struct sockaddr_un;
bool srn_hostd_mode(void);
socklen_t srn_hostd_addr(struct sockaddr_un *sa);
int srn_hostd_pid(void);
int srn_hostd_passed_fd(int type, int family, uint16_t port);

#endif /* SRN_UTIL_H */
