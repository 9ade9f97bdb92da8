#!/bin/bash
# Builds tests/rpc/fuzz_rpc.c with clang (libFuzzer, ASan, UBSan) against
# softrnic RPC's sources and the rpcgen output of examples/rpc/calc.x, and
# runs it for SECONDS (default 30) from seeds the harness writes. 77 = no clang, no
# libFuzzer runtime or no rpcgen. Run it in a private network namespace.
#   run_fuzz_rpc.sh [SECONDS [INPUT]]   (INPUT: run that one input once)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
secs=${1:-30}
replay=${2:-} # an input (a crash-* or oom-* file) to run once instead
command -v clang >/dev/null || { echo "skip: clang not installed"; exit 77; }
command -v rpcgen >/dev/null || { echo "skip: rpcgen not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root/examples/rpc/calc.x" "$work/"
(cd "$work" && rpcgen -M -h -o calc.h calc.x && rpcgen -M -c -o calc_xdr.c calc.x &&
	rpcgen -M -m -o calc_svc.c calc.x) || exit 1
mapfile -t srcs < <(find "$root/src/rpc" -name '*.c' | sort)
# CALC_SLEEP_MAX_MS: the calc service sleeps at most 100 ms, however long a
# call asks for (a fuzzed CALC_SLEEP of hours hung the harness)
if ! clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
	-DCALC_SLEEP_MAX_MS=100 \
	-fno-sanitize-recover=all -w -I"$root/src" -I"$root/include" -I"$work" \
	$(pkg-config --cflags libtirpc) "$here/fuzz_rpc.c" "${srcs[@]}" \
	"$root/src/util/log.c" "$root/src/util/self.c" \
	"$root/examples/rpc/calc_proc.c" \
	"$work/calc_xdr.c" "$work/calc_svc.c" \
	$(pkg-config --libs libtirpc) -lpthread -o "$work/fuzz" 2>"$work/cc.log"; then
	if grep -q -i 'libclang_rt.fuzzer\|cannot find.*fuzzer' "$work/cc.log"; then
		echo "skip: libFuzzer runtime missing (libclang-rt-14-dev)"
		exit 77
	fi
	cat "$work/cc.log"
	exit 1
fi
mkdir -p "$work/corpus"
# seeds: valid calls (add, hello with AUTH_SYS, a 1500-byte echo) in each
# mode, encoded by libtirpc in the harness itself
SRN_RPC_SEED_DIR=$work/corpus "$work/fuzz" -runs=0 >/dev/null 2>&1
# libtirpc's xdr_bytes allocates what a hostile length field says (up to
# 4 GiB) before it finds the message shorter, as for any libtirpc server:
# such allocations fail here (NULL, a decode error) rather than count as
# the server's out-of-memory; real growth is caught by -rss_limit_mb.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=256
if [ -n "$replay" ]; then
	"$work/fuzz" -malloc_limit_mb=512 -rss_limit_mb=1024 "$replay"
	exit $?
fi
"$work/fuzz" -max_total_time="$secs" -malloc_limit_mb=512 -rss_limit_mb=1024 \
	-max_len=8192 -timeout=20 -print_final_stats=1 \
	-artifact_prefix="$PWD/" "$work/corpus" 2>&1 | grep -v "^#[0-9]* *\(NEW\|REDUCE\|pulse\)" | tail -60
rc=${PIPESTATUS[0]}
[ $rc = 0 ] && echo "fuzz_rpc: no crash in ${secs}s"
exit $rc
