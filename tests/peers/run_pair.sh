#!/bin/bash
# Runs an unmodified Debian verbs program as server and client over
# softrnic on this host and checks both succeed with sane output.
#   run_pair.sh [--timeout S] [--expect REGEX] -- PROG [ARGS...]
# The port (-p) and, for the client, the server address are added here.
# Exit 0 ok, 1 failure, 77 skipped (program not installed).
set -u
timeout_s=120
expect=""
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) timeout_s=$2; shift 2 ;;
	--expect) expect=$2; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
prog=${1:?program}
shift
command -v "$prog" >/dev/null || { echo "skip: $prog not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=$(mktemp -d)
spid=""
cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
	rm -rf "$out"
}
trap cleanup EXIT

port_free() { ! ss -Htan "sport = :$1" | grep -q .; }
port=$((20000 + RANDOM % 20000))
while ! port_free $port; do port=$((port + 1)); done

timeout -s KILL "$timeout_s" "$prog" "$@" -p "$port" >"$out/server" 2>&1 &
spid=$!
for _ in $(seq 1 200); do # the server listens on its TCP port
	ss -Hltn "sport = :$port" | grep -q . && break
	kill -0 $spid 2>/dev/null || break
	sleep 0.05
done
timeout -s KILL "$timeout_s" "$prog" "$@" -p "$port" 127.0.0.1 >"$out/client" 2>&1
crc=$?
wait $spid
src=$?
spid=""

fail=0
[ $crc = 0 ] || { echo "client exited $crc"; fail=1; }
[ $src = 0 ] || { echo "server exited $src"; fail=1; }
for side in server client; do
	if grep -q -i -E "couldn't|failed|error|unable" "$out/$side"; then
		echo "$side reported an error"
		fail=1
	fi
done
case "$prog" in
ib_*) # perftest: a results header followed by at least one numeric row
	grep -A1 -E '^ *#bytes' "$out/client" | grep -q -E '^ *[0-9]+ +[0-9]+' ||
		{ echo "client printed no results"; fail=1; } ;;
ibv_*pingpong)
	for side in server client; do
		grep -q -E 'bytes in [0-9.]+ seconds' "$out/$side" ||
			{ echo "$side printed no throughput"; fail=1; }
	done ;;
esac
if [ -n "$expect" ] && ! grep -q -E "$expect" "$out/client"; then
	echo "client output lacks /$expect/"
	fail=1
fi
echo "== server: $prog $*"; cat "$out/server"
echo "== client: $prog $* 127.0.0.1"; cat "$out/client"
[ $fail = 0 ] && echo "PAIR OK: $prog $*" || echo "PAIR FAILED: $prog $*"
exit $fail
