#!/bin/bash
# Registration at scale (docs/BENCHMARKS.md, "Registration"; issue 13,
# item 7): bench/mrbench registers N MRs of 4 KiB (consecutive pages of one
# buffer) and deregisters them, under RLIMIT_NOFILE 1024, R rounds each
# (median), for MRs with remote write (LOCAL_WRITE|REMOTE_WRITE|
# REMOTE_READ: the process's one arena memfd) and read-only MRs
# (REMOTE_READ: a sealed memfd each, up to a quarter of the fd limit).
# Writable MRs run twice: as by default (consecutive registrations convert
# the following pages ahead, their writers held meanwhile, where the kernel
# allows it: core/memreg.c, srn_chunk_ahead), and with SOFTRNIC_MR_AHEAD=0
# (each registration converts its own page: the default of a process that
# may not hold writers, vm.unprivileged_userfaultfd = 0 without
# CAP_SYS_PTRACE).
#   scripts/bench-mr.sh [N] [R]    (default 100000, 3)
set -u
cd "$(dirname "$0")/.."
n=${1:-100000}
rounds=${2:-3}
lib=$PWD/build/lib
med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }
for run in 7:default 7:0 4:default; do
	access=${run%:*}
	ahead=${run#*:}
	out=$(mktemp)
	for _ in $(seq "$rounds"); do
		env $([ "$ahead" = default ] || echo "SOFTRNIC_MR_AHEAD=$ahead") \
			LD_LIBRARY_PATH=$lib prlimit --nofile=1024 \
			build/bin/mrbench "$n" "$access" | tee -a "$out"
	done
	printf 'access 0x%x, ahead %s, %d MRs: median reg %s s, dereg %s s\n' \
		"$access" "$ahead" "$n" \
		"$(awk '{for (i = 1; i <= NF; i++) if ($i == "reg") print $(i + 1)}' "$out" | med)" \
		"$(awk '{for (i = 1; i <= NF; i++) if ($i == "dereg") print $(i + 1)}' "$out" | med)"
	rm -f "$out"
done
