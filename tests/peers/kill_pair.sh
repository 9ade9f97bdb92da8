#!/bin/bash
# kill -9 of one side of an unmodified perftest pair mid-transfer: the
# survivor must notice (error completion), exit non-zero and not hang.
#   kill_pair.sh server|client PROG [ARGS...]
set -u
victim=$1
prog=$2
shift 2
command -v "$prog" >/dev/null || { echo "skip: $prog not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
out=$(mktemp -d)
trap 'kill -9 $spid $cpid 2>/dev/null; rm -rf "$out"' EXIT
port=$((20000 + RANDOM % 20000))
"$prog" "$@" -p $port >"$out/server" 2>&1 &
spid=$!
for _ in $(seq 1 200); do
	ss -Hltn "sport = :$port" | grep -q . && break
	sleep 0.05
done
"$prog" "$@" -p $port 127.0.0.1 >"$out/client" 2>&1 &
cpid=$!
sleep 2 # mid-transfer (the run lasts far longer)
if [ "$victim" = server ]; then dead=$spid; live=$cpid; else dead=$cpid; live=$spid; fi
kill -9 $dead
start=$(date +%s.%N)
for _ in $(seq 1 100); do # the survivor has 10 s to give up
	kill -0 $live 2>/dev/null || break
	sleep 0.1
done
if kill -0 $live 2>/dev/null; then
	echo "FAIL: the survivor still runs 10 s after its peer was killed"
	cat "$out/server" "$out/client"
	exit 1
fi
wait $live
rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "survivor exited $rc, ${took}s after the kill"
cat "$out/client" "$out/server" | grep -i -E 'error|fail' | head -3
[ $rc != 0 ] || { echo "FAIL: the survivor reported success"; exit 1; }
leaks=$(ls /dev/shm | grep -i -E 'srn|softrnic')
[ -z "$leaks" ] || { echo "FAIL: left in /dev/shm: $leaks"; exit 1; }
echo "KILL OK: $victim of $prog"
