#!/bin/bash
# softrnic stat lists rdma_cm ids: an rping pair (server and client
# processes) must show the server's listening id and one ESTABLISHED id
# in each process, whose QPs are the QPs softrnic stat lists as connected
# to each other, with the right addresses.
#   cm_stat.sh     (SOFTRNIC_LIB_DIR: the build's lib directory)
# Exit: 0 pass, 1 fail, 77 skip (rping not installed).
set -u
command -v rping >/dev/null || { echo "skip: rping not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
tool=$lib/../bin/softrnic
port=$((20000 + RANDOM % 20000))
out=$(mktemp)
trap 'kill $(jobs -p) 2>/dev/null; rm -f "$out"' EXIT
LD_LIBRARY_PATH=$lib rping -s -a 127.0.0.1 -p $port -C 100000000 >/dev/null 2>&1 &
spid=$!
# deadlines, not counts: a loaded machine only makes this slower
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do
	"$tool" stat 2>/dev/null | grep -q "LISTEN .*127.0.0.1:$port" && break
	sleep 0.1
done
LD_LIBRARY_PATH=$lib rping -c -a 127.0.0.1 -p $port -C 100000000 >/dev/null 2>&1 &
cpid=$!
# one listing is a snapshot taken piece by piece (QPs, then ids): look
# again until one shows the pair connected throughout
sq="" cq=""
established() {
	[ "$(grep -c "ESTABLISHED" "$out")" = 2 ] || return 1
	sq=$(awk -v p="$spid" '$1 == p && $3 == "ESTABLISHED" {print $4}' "$out")
	cq=$(awk -v p="$cpid" '$1 == p && $3 == "ESTABLISHED" {print $4}' "$out")
	[ -n "$sq" ] && [ -n "$cq" ] &&
		grep -Eq "^$sq +$spid +RTS +shm +shm pid $cpid qpn $cq" "$out" &&
		grep -Eq "^$cq +$cpid +RTS +shm +shm pid $spid qpn $sq" "$out"
}
ok=0
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do
	"$tool" stat >"$out" 2>&1
	established && { ok=1; break; }
	sleep 0.1
done
cat "$out"
fail() { echo "FAIL: $*"; exit 1; }
[ $ok = 1 ] || fail "never an ESTABLISHED id in each process whose QPs \
stat lists as connected to each other (last: server $sq, client $cq)"
grep -Eq "^ *$spid +TCP +LISTEN +- +127.0.0.1:$port " "$out" ||
	fail "the server's listening id"
awk -v p="$cpid" '$1 == p && $3 == "ESTABLISHED"' "$out" |
	grep -q "127.0.0.1:$port *$" || fail "the client id's destination"
echo PASS
