#!/bin/bash
# Line coverage of the TCP transport's receive side reached by the fuzzers
# that drive the whole library over sockets, fuzz_tcp (connections to the
# listener, tests/fuzz/fuzz_tcp.c) and fuzz_udp (UD datagrams,
# tests/fuzz/fuzz_udp.c), each run for SECONDS (default 300) from its seed
# corpus: builds them with clang's source-based coverage, runs them (and
# the processes they start), merges the profiles and prints llvm-cov's
# table. docs/security.md quotes it. Run it in a network namespace of its
# own (it listens on a port):
#   unshare -rn bash -c 'ip link set lo up; scripts/fuzz-coverage.sh 60'
# FUZZ_COV_KEEP=DIR keeps the binaries and the profile in DIR (then, e.g.:
#   llvm-cov show DIR/fuzz_tcp -object DIR/fuzz_udp
#   -instr-profile=DIR/all.profdata src/transport/tcp/tcp_responder.c).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
if [ -n "${FUZZ_COV_KEEP:-}" ]; then
	w=$FUZZ_COV_KEEP
	mkdir -p "$w"
else
	w=$(mktemp -d)
	trap 'rm -rf "$w"' EXIT
fi
cflags=(-std=gnu11 -g -O1 -fprofile-instr-generate -fcoverage-mapping
	-Isrc -Iinclude -w)
# the verbs library's sources (src/rpc is another library), compiled once
mapfile -t lib < <(find src -path src/rpc -prune -o -name '*.c' -print | sort)
mkdir -p "$w/obj"
printf '%s\n' "${lib[@]}" | xargs -P2 -I{} sh -c \
	'clang "$@" -fsanitize=fuzzer-no-link -c {} -o "$0/obj/$(echo {} | tr / _).o"' \
	"$w" "${cflags[@]}"
for t in tcp udp; do
	clang "${cflags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$t.c" \
		"$w"/obj/*.o -lpthread -o "$w/fuzz_$t"
	rm -rf "$w/corpus_$t"
	mkdir -p "$w/corpus_$t"
	cp "tests/fuzz/corpus_$t"/* "$w/corpus_$t/"
	LLVM_PROFILE_FILE="$w/$t-%p.profraw" "$w/fuzz_$t" \
		-max_total_time="$secs" -max_len=16384 "$w/corpus_$t" \
		>"$w/$t.log" 2>&1 || { tail -20 "$w/$t.log"; exit 1; }
	echo "fuzz_$t: $(grep -E -o 'Done [0-9]+ runs.*' "$w/$t.log" || true)"
done
llvm-profdata merge -sparse "$w"/*.profraw -o "$w/all.profdata"
llvm-cov report "$w/fuzz_tcp" -object "$w/fuzz_udp" \
	-instr-profile="$w/all.profdata" \
	src/transport/tcp/wire.c src/transport/tcp/tcp_link.c \
	src/transport/tcp/tcp_responder.c src/transport/tcp/tcp_transport.c \
	src/transport/tcp/tcp_ud.c
