#!/bin/bash
# softrnic RPC with the system's tools, in private (unnamed) network and
# mount namespaces, so no global rpcbind or port is touched:
#   - rpcbind runs; the calc server (examples/rpc) registers with it;
#     rpcinfo -p lists the program on udp and tcp; rpcinfo -u / -t call
#     its null procedure; an unknown version is refused; libtirpc's
#     clnt_create through rpcbind (calc_client HOST udp|tcp) works;
#     stopping the server removes the registration;
#   - a client in a second network namespace (a veth pair) calls the
#     server over udp, tcp and auto (which must pick tcp there).
#
#   rpcbind.sh CALC_SERVER CALC_CLIENT
# Exits 77 (skipped) without root, unshare, ip or rpcbind.
set -uo pipefail
server=$1 client=$2
if [ -z "${SRN_RPC_INNER:-}" ]; then
	[ "$(id -u)" = 0 ] || exit 77
	for c in unshare ip rpcbind rpcinfo nsenter; do
		command -v $c >/dev/null || exit 77
	done
	exec unshare -n -m env SRN_RPC_INNER=1 "$0" "$@"
fi
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
ip link set lo up
mount -t tmpfs tmpfs /run && mkdir -p /run/rpcbind || exit 77
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
rpcbind -f -w & pids+=($!)
for i in $(seq 50); do rpcinfo -p >/dev/null 2>&1 && break; sleep 0.1; done
prog=$((0x20051111))

"$server" 0 1 2 1 >"$tmp/out" & srv=$!
pids+=($srv)
for i in $(seq 50); do [ -s "$tmp/out" ] && break; sleep 0.1; done
port=$(awk '{print $2}' "$tmp/out")
sleep 0.3
list=$(rpcinfo -p)
grep -qE "^ +$prog +1 +udp +$port" <<<"$list" && grep -qE "^ +$prog +1 +tcp +$port" <<<"$list" &&
	ok "rpcinfo -p lists udp and tcp on $port" || fail "rpcinfo -p: $list"
for t in u t; do
	rpcinfo -$t 127.0.0.1 $prog 1 | grep "ready and waiting" >/dev/null &&
		ok "rpcinfo -$t" || fail "rpcinfo -$t"
done
out=$(rpcinfo -t 127.0.0.1 $prog 2 2>&1)
grep -q "low version = 1, high version = 1" <<<"$out" &&
	ok "version 2 refused with 1..1" || fail "unknown version: $out"
for t in udp tcp; do
	"$client" 127.0.0.1 $t | grep "= 42 over $t" >/dev/null &&
		ok "clnt_create $t through rpcbind" || fail "calc_client $t"
done

# a second network namespace, joined by a veth pair
unshare -n sleep 600 & peer=$!
pids+=($peer)
sleep 0.2
ip link add srnrpc0 type veth peer name srnrpc1 netns $peer
ip addr add 10.77.0.1/24 dev srnrpc0 && ip link set srnrpc0 up
nsenter -t $peer -n sh -c 'ip link set lo up; ip addr add 10.77.0.2/24 dev srnrpc1; ip link set srnrpc1 up'
for t in udp tcp auto; do
	want=$t
	[ $t = auto ] && want=tcp
	nsenter -t $peer -n "$client" 10.77.0.1:$port $t | grep "= 42 over $want" >/dev/null &&
		ok "from another namespace over $t" || fail "cross-namespace $t"
done

kill -TERM $srv
wait $srv && ok "server stopped cleanly" || fail "server exit status"
rpcinfo -p | grep "$prog" >/dev/null && fail "still registered after stop" ||
	ok "unregistered at stop"
[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "rpcbind.sh: all checks hold"
