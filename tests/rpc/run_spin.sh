#!/bin/bash
# Verifies the slot hand-off model (slot.pml) with Debian's spin.
#
#   run_spin.sh safety|two_workers|lost_wakeup|progress|direct|bug|
#               bug_behind|bug_self|bug_slot
#
# safety:      one worker, two callers, three calls each (both slots
#              reused), futex timeouts and parking, two spurious kicks,
#              stop: assertions and end states
# two_workers: two workers, two callers: which worker a claim takes
# lost_wakeup: one worker, no futex timeouts: a lost wake-up would block
#              the worker forever (an invalid end state)
# progress:    -DNP: no non-progress cycle under weak fairness (-f)
# direct:      one worker that may also read network calls itself (its
#              own claim, no slot), two callers queueing behind it too
# bug:         the worker stores SLEEPING instead of its CAS; spin must
#              report an error (shows the checks can fail)
# bug_behind:  the worker frees itself with a plain store over a call
#              queued behind it; spin must report an error
# bug_self:    the worker claims itself with a plain store; spin must
#              report an error
# bug_slot:    a caller queues behind in the running call's own receive
#              slot; spin must report an error
# All but two_workers let callers queue behind a running worker.
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
safety) defs=(-DNW=1 -DCALLS=3) cflags=() pan=() ;;
two_workers) defs=(-DNW=2 -DCALLS=1 -DKICKS=0 -DTIMEOUTS=0) cflags=() pan=() ;;
lost_wakeup) defs=(-DNW=1 -DCALLS=3 -DTIMEOUTS=0) cflags=() pan=() ;;
progress) defs=(-DNW=1 -DCALLS=3) cflags=(-DNP -DNFAIR=3) pan=(-l -f) ;;
direct) defs=(-DNW=1 -DCALLS=2 -DNET=2 -DKICKS=0) cflags=() pan=() ;;
bug) defs=(-DNW=1 -DBUG_PLAIN_STORE -DTIMEOUTS=0) cflags=() pan=() ;;
bug_self) defs=(-DNW=1 -DNET=1 -DBUG_SELF -DTIMEOUTS=0) cflags=() pan=() ;;
bug_behind) defs=(-DNW=1 -DBUG_BEHIND -DTIMEOUTS=0) cflags=() pan=() ;;
bug_slot) defs=(-DNW=1 -DBUG_SLOT -DTIMEOUTS=0) cflags=() pan=() ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
spin "${defs[@]}" -a slot.pml >/dev/null
# at most 1.5 GB, 3 GB for progress (about 22.6 million states, 1.9 GB
# and 95 s here); a run that hits the bound is incomplete and fails
memlim=1500
[ "$mode" = progress ] && memlim=3000
cc -w -O2 -DMEMLIM=$memlim -DCOLLAPSE "${cflags[@]}" -o pan pan.c
out=$(./pan -m2000000 "${pan[@]}" 2>&1 || true)
echo "$out" | grep -E "errors:|states, stored|violated|cycle|invalid" || true
if grep -qi "depth too small\|MEMLIM\|out of memory\|pan: error" <<<"$out"; then
	echo "$out" | head -5
	echo "run_spin: the run is incomplete"
	exit 1
fi
if [ "${mode#bug}" != "$mode" ]; then
	grep -q "errors: [1-9]" <<<"$out" || {
		echo "run_spin: the broken model passed: the check is blind"
		exit 1
	}
	echo "run_spin: bug found as it must be"
	exit 0
fi
# (a here-string, not a pipe: grep -q stops at its match, and a writer
# still writing would die of SIGPIPE, which pipefail takes for failure)
grep -q "errors: 0" <<<"$out" || exit 1
echo "run_spin: $mode holds"
