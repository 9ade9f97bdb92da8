#!/bin/bash
# kill -9 of one side of a running rping pair (softrnic's librdmacm): the
# survivor must hear of it (DISCONNECTED: the CM connection broke) and end
# within 10 s, not hang.
#   cm_kill.sh server|client
# Exit 0 pass, 1 fail, 77 skip (rping not installed).
set -u
victim=${1:?usage: cm_kill.sh server|client}
command -v rping >/dev/null || { echo "SKIP: rping not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
out=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
trap 'kill -9 $spid $cpid 2>/dev/null; wait 2>/dev/null; rm -rf "$out"' EXIT
LD_LIBRARY_PATH=$lib rping -s -a 127.0.0.1 -p $port -C 0 -V >"$out/s" 2>&1 &
spid=$!
for _ in $(seq 1 100); do
	ss -xa | grep -q "softrnic/cm/[0-9]*/$port " &&
		ss -Hltnp "sport = :${SOFTRNIC_CM_PORT:-4790}" | grep -q "pid=$spid," && break
	sleep 0.05
done
LD_LIBRARY_PATH=$lib rping -c -a 127.0.0.1 -p $port -C 0 -V -v >"$out/c" 2>&1 &
cpid=$!
for _ in $(seq 1 100); do # pings flow
	[ "$(grep -c 'ping data' "$out/c")" -gt 10 ] && break
	sleep 0.05
done
[ "$(grep -c 'ping data' "$out/c")" -gt 10 ] || { echo "FAIL: no pings"; cat "$out/s" "$out/c"; exit 1; }
if [ "$victim" = server ]; then
	kill -9 $spid; survivor=$cpid; name=client
else
	kill -9 $cpid; survivor=$spid; name=server
fi
for _ in $(seq 1 100); do
	kill -0 $survivor 2>/dev/null || break
	sleep 0.1
done
if kill -0 $survivor 2>/dev/null; then
	echo "FAIL: the $name still runs 10 s after the $victim was killed"
	tail -5 "$out/s" "$out/c"
	exit 1
fi
wait $survivor
rc=$?
if ! grep -q "$name DISCONNECT EVENT" "$out/s" "$out/c"; then
	echo "FAIL: the $name ended ($rc) without a DISCONNECTED event"
	tail -5 "$out/s" "$out/c"
	exit 1
fi
echo "PASS: the $name got DISCONNECTED and ended ($rc) after kill -9" \
	"of the $victim"
