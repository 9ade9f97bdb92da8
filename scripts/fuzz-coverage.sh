#!/bin/bash
# Line coverage of the TCP receive side (src/transport/tcp/) reached by
# the TCP receive-path fuzzer (tests/fuzz/fuzz_tcp.c) in SECONDS (default
# 300), from the seed corpus: builds it with clang's source-based
# coverage, runs it, prints llvm-cov's table. docs/security.md quotes it.
#   scripts/fuzz-coverage.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
# the verbs library's sources (src/rpc is another library)
mapfile -t lib < <(find src -path src/rpc -prune -o -name '*.c' -print | sort)
clang -std=gnu11 -g -O1 -fsanitize=fuzzer -fprofile-instr-generate \
	-fcoverage-mapping -Isrc -Iinclude tests/fuzz/fuzz_tcp.c "${lib[@]}" -lpthread \
	-o "$w/fuzz_tcp"
mkdir -p "$w/corpus"
cp tests/fuzz/corpus_tcp/* "$w/corpus/"
LLVM_PROFILE_FILE="$w/run.profraw" "$w/fuzz_tcp" -max_total_time="$secs" \
	-max_len=16384 "$w/corpus" >"$w/log" 2>&1 || { tail -20 "$w/log"; exit 1; }
grep -E 'Done [0-9]+ runs' "$w/log" || true
llvm-profdata merge -sparse "$w/run.profraw" -o "$w/run.profdata"
llvm-cov report "$w/fuzz_tcp" -instr-profile="$w/run.profdata" \
	src/transport/tcp/tcp_responder.c src/transport/tcp/tcp_link.c \
	src/transport/tcp/tcp_transport.c src/transport/tcp/wire.c
