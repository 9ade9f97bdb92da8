#!/bin/bash
# Connection setup under load: rdma_cm connections are made and torn down
# while the same device carries a bulk transfer between two other
# processes, other connection bursts run beside them, and a busy loop keeps
# each CPU of the machine occupied. Every pair must still pass, within
# generous time limits (the test checks that setup works under load, not
# how fast it is: scripts/bench-engines.sh measures that).
#
#   cm_load.sh        (SOFTRNIC_TRANSPORT chooses the path, as for cm_pair.sh)
#
# The pairs (each through cm_pair.sh, which checks their output):
#   - ib_write_bw -R for 8 s (the traffic);
#   - cmtime, 200 connections;
#   - ucmatose, 20 connections with 50 messages each;
#   - rping, 200 ping-pongs with data verification.
# Exit: 0 pass, 1 fail, 77 skip (a program is missing).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pair=$here/cm_pair.sh
for p in ib_write_bw cmtime ucmatose rping; do
	command -v $p >/dev/null || { echo "SKIP: $p is not installed"; exit 77; }
done
dir=${SRN_LOAD_DIR:-$(mktemp -d)}
hogs=()
cleanup() {
	[ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null
	[ -n "${SRN_LOAD_DIR:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT

# one busy loop per CPU, at normal priority, for the whole test
for ((i = 0; i < $(nproc); i++)); do
	bash -c 'while :; do :; done' &
	hogs+=($!)
done

run() { # name, then cm_pair.sh's arguments
	local name=$1
	shift
	"$pair" --timeout 240 "$@" >"$dir/$name.log" 2>&1
	echo $? >"$dir/$name.rc"
}
pids=()
run traffic --server ib_write_bw -R -F -p @PORT@ -D 8 -s 65536 \
	--client ib_write_bw -R -F -p @PORT@ -D 8 -s 65536 @ADDR@ &
pids+=($!)
sleep 1 # the bursts start while the traffic runs
run cmtime --server-stays --expect disconnect --server cmtime -p @PORT@ \
	--client cmtime -s @ADDR@ -p @PORT@ -c 200 &
pids+=($!)
run ucmatose --server ucmatose -p @PORT@ -c 20 -C 50 \
	--client ucmatose -s @ADDR@ -p @PORT@ -c 20 -C 50 &
pids+=($!)
run rping --expect rdma-ping-199 \
	--server rping -s -a @ADDR@ -p @PORT@ -V -C 200 \
	--client rping -c -a @ADDR@ -p @PORT@ -V -C 200 -v &
pids+=($!)
wait "${pids[@]}"

fail=0
for name in traffic cmtime ucmatose rping; do
	rc=$(cat "$dir/$name.rc" 2>/dev/null || echo missing)
	echo "== $name: exit $rc"
	if [ "$rc" != 0 ]; then
		fail=1
		tail -20 "$dir/$name.log"
	fi
done
grep -h -E "^ *65536 " "$dir/traffic.log" | head -2
[ $fail = 0 ] && echo "PASS: connection setup under load" && exit 0
echo "FAIL: a pair failed under load"
exit 1
