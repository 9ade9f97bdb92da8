#!/bin/bash
# Verifies the slot hand-off model (slot.pml) with Debian's spin.
#
#   run_spin.sh safety|lost_wakeup|progress|bug
#
# safety:      assertions and end states, timeouts on (CALLS=3)
# lost_wakeup: the same without futex timeouts: a lost wake-up would
#              block the worker forever (an invalid end state)
# progress:    -DNP: no non-progress cycle under weak fairness (-f)
# bug:         the worker stores SLEEPING instead of its CAS; spin must
#              report an error (shows the checks can fail)
# Exits 77 (skipped) when spin or a C compiler is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v spin >/dev/null && command -v cc >/dev/null || exit 77
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/slot.pml" "$tmp/"
cd "$tmp"
mode=${1:-safety}
case $mode in
safety) defs=(-DCALLS=3) cflags=() pan=(-m1000000) ;;
lost_wakeup) defs=(-DTIMEOUTS=0 -DCALLS=3) cflags=() pan=(-m1000000) ;;
progress) defs=() cflags=(-DNP) pan=(-l -f -m1000000) ;;
bug) defs=(-DBUG_PLAIN_STORE -DTIMEOUTS=0) cflags=() pan=(-m1000000) ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
spin "${defs[@]}" -a slot.pml >/dev/null
cc -O2 "${cflags[@]}" -o pan pan.c
out=$(./pan "${pan[@]}" 2>&1 || true)
echo "$out" | grep -E "errors:|states, stored|violated|cycle|invalid" || true
if echo "$out" | grep -q "depth too small\|max search depth too small"; then
	echo "run_spin: search depth too small: the run is incomplete"
	exit 1
fi
if [ "$mode" = bug ]; then
	echo "$out" | grep -q "errors: [1-9]" || {
		echo "run_spin: the broken model passed: the check is blind"
		exit 1
	}
	echo "run_spin: bug found as it must be"
	exit 0
fi
echo "$out" | grep -q "errors: 0" || exit 1
echo "run_spin: $mode holds"
