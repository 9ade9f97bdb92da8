#!/bin/bash
# Two hosts on one machine: creates two network namespaces joined by a veth
# pair (198.51.100.1 and .2, a documentation range), runs an unmodified
# verbs program as server in one and client in the other over softrnic
# (which picks its TCP transport: the peer's GID is not on its host), and
# deletes everything it created, whatever happens.
#   netns_pair.sh pair -- PROG [ARGS...]   (checks as tests/peers/run_pair.sh)
#   netns_pair.sh kill -- PROG [ARGS...]   (kill -9 of the server mid-run:
#                                           the client must fail, not hang)
#   netns_pair.sh cm -- CM_PAIR_ARGS...    (an rdma_cm pair: the arguments of
#                                           tests/rdmacm/cm_pair.sh)
#   netns_pair.sh ucx -- UCX_PAIR_ARGS...  (a ucx_perftest pair: the arguments
#                                           of tests/engines/ucx_pair.sh)
# Exit 77 (skip) when not root or namespaces are unavailable.
set -u
mode=$1
shift
[ "${1:-}" = -- ] && shift
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
[ "$(id -u)" = 0 ] || { echo "skip: needs root for network namespaces"; exit 77; }
if [ "$mode" != cm ] && [ "$mode" != ucx ]; then
	command -v "$1" >/dev/null || { echo "skip: $1 not installed"; exit 77; }
fi
a=srn$$a
b=srn$$b
cleanup() {
	ip netns pids "$a" 2>/dev/null | xargs -r kill -9 2>/dev/null
	ip netns pids "$b" 2>/dev/null | xargs -r kill -9 2>/dev/null
	ip netns del "$a" 2>/dev/null
	ip netns del "$b" 2>/dev/null
}
trap cleanup EXIT
if ! ip netns add "$a" 2>/dev/null || ! ip netns add "$b" ||
	! ip link add "v$$a" type veth peer name "v$$b"; then
	echo "skip: cannot create network namespaces here"
	exit 77
fi
ip link set "v$$a" netns "$a"
ip link set "v$$b" netns "$b"
ip -n "$a" addr add 198.51.100.1/24 dev "v$$a"
ip -n "$b" addr add 198.51.100.2/24 dev "v$$b"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "v$$a" up
ip -n "$b" link set "v$$b" up

if [ "$mode" = cm ]; then
	SRN_PAIR_SERVER_NS=$a SRN_PAIR_CLIENT_NS=$b \
		SRN_PAIR_SERVER_IP=198.51.100.1 SRN_PAIR_CLIENT_IP=198.51.100.2 \
		SOFTRNIC_LIB_DIR=$lib "$here/../rdmacm/cm_pair.sh" --timeout 100 "$@"
	exit $?
fi
if [ "$mode" = ucx ]; then
	SRN_PAIR_SERVER_NS=$a SRN_PAIR_CLIENT_NS=$b \
		SRN_PAIR_SERVER_IP=198.51.100.1 SRN_PAIR_CLIENT_IP=198.51.100.2 \
		SOFTRNIC_LIB_DIR=$lib "$here/../engines/ucx_pair.sh" --timeout 100 -- "$@"
	exit $?
fi
if [ "$mode" = pair ]; then
	SRN_PAIR_SERVER_NS=$a SRN_PAIR_CLIENT_NS=$b \
		SRN_PAIR_SERVER_IP=198.51.100.1 SRN_PAIR_CLIENT_IP=198.51.100.2 \
		SOFTRNIC_LIB_DIR=$lib "$here/../peers/run_pair.sh" --timeout 100 -- "$@"
	exit $?
fi

# kill: server in a, client in b; kill -9 the server once data flows
out=$(mktemp -d)
port=$((20000 + RANDOM % 10000))
ip netns exec "$a" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=198.51.100.1 \
	"$@" -p $port >"$out/server" 2>&1 &
spid=$!
for _ in $(seq 1 200); do
	ip netns exec "$a" ss -Hltn "sport = :$port" | grep -q . && break
	sleep 0.05
done
ip netns exec "$b" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=198.51.100.2 \
	"$@" -p $port 198.51.100.1 >"$out/client" 2>&1 &
cpid=$!
sleep 2
kill -9 $spid
for _ in $(seq 1 100); do
	kill -0 $cpid 2>/dev/null || break
	sleep 0.1
done
if kill -0 $cpid 2>/dev/null; then
	echo "FAIL: client still runs 10 s after the server was killed"
	cat "$out/client"
	rm -rf "$out"
	exit 1
fi
wait $cpid
rc=$?
grep -i -E 'error|fail' "$out/client" | head -3
rm -rf "$out"
[ $rc != 0 ] || { echo "FAIL: the client reported success"; exit 1; }
echo "KILL OK across namespaces: client exited $rc"
