#!/bin/bash
# Builds the control-message fuzzer (tests/fuzz/fuzz_ctl.c: the target
# side's srn_ctl_classify, a header-only function of proto/) with clang's
# libFuzzer, ASan and UBSan, and runs it for SECONDS (default 30) from the
# seed corpus (corpus_ctl/). 77 = no libFuzzer.
#   run_fuzz_ctl.sh [SECONDS]
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../../src
secs=${1:-30}
command -v clang >/dev/null || { echo "skip: clang not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -I"$src" "$here/fuzz_ctl.c" \
	-o "$work/fuzz_ctl" 2>"$work/cc.log"; then
	if grep -q -i 'libclang_rt.fuzzer\|cannot find.*fuzzer' "$work/cc.log"; then
		echo "skip: libFuzzer runtime missing (libclang-rt-14-dev)"
		exit 77
	fi
	cat "$work/cc.log"
	exit 1
fi
mkdir -p "$work/corpus"
cp "$here"/corpus_ctl/* "$work/corpus/"
"$work/fuzz_ctl" -max_total_time="$secs" -max_len=1024 -print_final_stats=1 \
	"$work/corpus" 2>&1 | tail -15
rc=${PIPESTATUS[0]}
[ $rc = 0 ] && echo "fuzz_ctl: no crash in ${secs}s"
exit $rc
