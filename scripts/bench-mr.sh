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
# CAP_SYS_PTRACE). Run as root, the writable MRs run once more as the user
# nobody (setpriv), where the library cannot hold writers unless the
# machine lets nobody open /dev/userfaultfd: the unprivileged path, as a
# process of an ordinary user takes it. Medians of the wall time and of
# the CPU time (user + system: what the phase costs, whatever else the
# machine runs).
#   scripts/bench-mr.sh [N] [R]    (default 100000, 3)
set -u
cd "$(dirname "$0")/.."
n=${1:-100000}
rounds=${2:-3}
lib=$PWD/build/lib
med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }
field() { awk -v f="$1" '{for (i = 1; i <= NF; i++) if ($i == f) print $(i + 1)}' "$2" | med; }
runs="7:default 7:0 4:default"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	runs="$runs 7:nobody"
fi
for run in $runs; do
	access=${run%:*}
	ahead=${run#*:}
	as=()
	[ "$ahead" = nobody ] &&
		as=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
	out=$(mktemp)
	for _ in $(seq "$rounds"); do
		"${as[@]}" env $([ "$ahead" = 0 ] && echo "SOFTRNIC_MR_AHEAD=0") \
			LD_LIBRARY_PATH=$lib SOFTRNIC_LOG=2 \
			prlimit --nofile=1024 \
			build/bin/mrbench "$n" "$access" 2>&1 | tee -a "$out"
	done
	printf 'access 0x%x, ahead %s, %d MRs: median reg %s s, dereg %s s; cpu reg %s s, dereg %s s\n' \
		"$access" "$ahead" "$n" "$(field reg "$out")" \
		"$(field dereg "$out")" "$(field cpu_reg "$out")" \
		"$(field cpu_dereg "$out")"
	rm -f "$out"
done
