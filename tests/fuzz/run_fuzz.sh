#!/bin/bash
# Builds one of softrnic's libFuzzer targets with clang (libFuzzer, ASan,
# UBSan) and runs it for SECONDS (default 30) from its seed corpus
# (corpus_TARGET/). 77 = no clang or no libFuzzer runtime.
#   run_fuzz.sh SECONDS TARGET
# TARGET
#   wire  fuzz_wire.c: the TCP wire parser, cut at arbitrary points
#   ctl   fuzz_ctl.c: the control socket's message classifier, and
#         sessions on a real QP's control socket (the whole library)
#   tcp   fuzz_tcp.c: whole connections to the TCP listener, against the
#         whole library (every source file is compiled in)
#   udp   fuzz_udp.c: UD datagrams to the process's UDP socket and to a UD
#         QP's forwarding socket, against the whole library
#   rsock fuzz_rsock.c: a hostile rsockets peer (hello, immediates,
#         credits, byte_len, IOMAP, datagram headers) against the whole
#         library's rsockets, through a stand-in QP and CQ
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../../src
secs=${1:-30}
target=${2:-wire}
case $target in
wire) srcs=("$src/transport/tcp/wire.c") len=4096 env=() ;;
ctl | tcp | udp | rsock) # the verbs library's sources (src/rpc is another library)
	mapfile -t srcs < <(find "$src" -path "$src/rpc" -prune -o -name '*.c' -print | sort)
	len=16384 env=(ASAN_OPTIONS=detect_leaks=0)
	# the control socket's sessions: leaks are looked for too
	[ "$target" = ctl ] && len=1024 env=()
	# rsockets: leaks are looked for too
	[ "$target" = rsock ] && len=4096 env=() ;;
*) echo "run_fuzz.sh: unknown target $target" >&2; exit 2 ;;
esac
command -v clang >/dev/null || { echo "skip: clang not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -I"$src" -I"$here/../../include" \
	"$here/fuzz_$target.c" \
	"${srcs[@]}" -lpthread -o "$work/fuzz" 2>"$work/cc.log"; then
	if grep -q -i 'libclang_rt.fuzzer\|cannot find.*fuzzer' "$work/cc.log"; then
		echo "skip: libFuzzer runtime missing (libclang-rt-14-dev)"
		exit 77
	fi
	cat "$work/cc.log"
	exit 1
fi
mkdir -p "$work/corpus"
cp "$here/corpus_$target"/* "$work/corpus/"
# a crash leaves its input in the working directory (crash-*)
env "${env[@]}" "$work/fuzz" -max_total_time="$secs" -max_len=$len \
	-timeout=10 -print_final_stats=1 -artifact_prefix="$PWD/" \
	"$work/corpus" 2>&1 | tail -15
rc=${PIPESTATUS[0]}
[ $rc = 0 ] && echo "fuzz_$target: no crash in ${secs}s"
exit $rc
