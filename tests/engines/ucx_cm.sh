#!/bin/bash
# UCX's rdmacm connection manager over softrnic's librdmacm: Debian's UCP
# client/server example (libucx-dev's ucp_client_server.c, built as is)
# connects by IP address and port through rdma_cm and sends tagged
# messages over rc_verbs.
#   ucx_cm.sh PROGRAM
# UCX_SOCKADDR_TLS_PRIORITY=rdmacm makes rdma_cm the only way to connect,
# and UCX_TLS leaves UCX only softrnic's transports. Passes when the
# client exits 0 after all its iterations and the server received the
# last one; exit 77 when the program was not built (no libucx-dev).
set -u
prog=${1:-}
[ -x "$prog" ] || { echo "skip: ucp_client_server not built (libucx-dev)"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
tool=$lib/../bin/softrnic
port=$((20000 + RANDOM % 20000))
n=20
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$out"' EXIT
export UCX_TLS=rc_verbs,ud_verbs,self,rdmacm UCX_NET_DEVICES=softrnic0:1
export UCX_SOCKADDR_TLS_PRIORITY=rdmacm
"$tool" exec -- stdbuf -oL "$prog" -p $port -c tag -i $n >"$out/s" 2>&1 &
for _ in $(seq 1 100); do
	grep -q "Waiting for connection" "$out/s" && break
	sleep 0.1
done
timeout 60 "$tool" exec -- "$prog" -a 127.0.0.1 -p $port -c tag -i $n \
	>"$out/c" 2>&1
rc=$?
for _ in $(seq 1 50); do
	[ "$(grep -c "Waiting for connection" "$out/s")" -ge 2 ] && break
	sleep 0.1
done
# the example prints its first and last iterations
last=$(grep -c "Server: iteration #$n\$" "$out/s")
grep -v '^$' "$out/c" | tail -4
grep -v '^$' "$out/s" | grep -v "iteration\|received\|ABCD" | tail -6
echo "client exit $rc, server's last iteration seen: $last"
[ "$rc" = 0 ] && grep -q "Client: iteration #$n\$" "$out/c" && [ "$last" = 1 ] &&
	{ echo PASS; exit 0; }
echo FAIL
exit 1
