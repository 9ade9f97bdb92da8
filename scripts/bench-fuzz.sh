#!/bin/bash
# The long fuzz run (issue 13, item 8; CI runs each target 30 s): every
# libFuzzer target of tests/fuzz for SECONDS (default 600) from its seed
# corpus, one after the other, with ASan and UBSan (tests/fuzz/run_fuzz.sh).
# Writes a table (executions, executions per second, inputs added to the
# corpus, crashes) to OUT (default docs/bench-fuzz.md); a crash leaves its input
# as ./crash-* and the script exits 1. In a network namespace of its own
# when it can make one (the targets listen on ports).
#   scripts/bench-fuzz.sh [SECONDS] [OUT]
set -u
cd "$(dirname "$0")/.."
if [ -z "${SRN_BENCH_NS:-}" ] && unshare -n true 2>/dev/null; then
	exec unshare -n env SRN_BENCH_NS=1 bash -c \
		'ip link set lo up; exec "$0" "$@"' "$0" "$@"
fi
secs=${1:-600}
out=${2:-docs/bench-fuzz.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rc=0
rows=()
for t in wire tcp udp ctl rsock; do
	bash tests/fuzz/run_fuzz.sh "$secs" "$t" >"$work/$t.log" 2>&1
	r=$?
	[ $r = 77 ] && { echo "skip: $(tail -1 "$work/$t.log")"; exit 77; }
	[ $r != 0 ] && rc=1
	# libFuzzer's final stats (-print_final_stats=1)
	n=$(awk '/number_of_executed_units/ {print $2}' "$work/$t.log")
	cov=$(awk '/new_units_added/ {print $2}' "$work/$t.log")
	res=$([ $r = 0 ] && echo "no crash" || echo "**crash or error, rc $r**")
	rows+=("| fuzz_$t | $secs | ${n:--} | $(awk -v n="${n:-0}" -v s="$secs" \
		'BEGIN {printf "%.0f", n / s}') | ${cov:--} | $res |")
	echo "fuzz_$t: ${n:-?} executions, ${cov:-?} inputs added, rc $r"
done
{
	echo "# The long fuzz run"
	echo
	echo "Made by \`scripts/bench-fuzz.sh $secs\` on $(date -u +%F) (commit $(git rev-parse --short HEAD));"
	echo "every target of tests/fuzz from its seed corpus, ASan and UBSan"
	echo "(tests/fuzz/run_fuzz.sh), one after the other; load average at the"
	echo "end: $(cut -d' ' -f1-3 /proc/loadavg). Line coverage of the receive"
	echo "side: \`scripts/fuzz-coverage.sh\` (docs/security.md)."
	echo
	echo "| target | seconds | executions | per second | inputs added to the corpus | result |"
	echo "|---|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
} >"$out"
exit $rc
