#!/bin/bash
# Listen only where asked (docs/security.md): in a network namespace of its
# own, a softrnic process (ib_write_bw waiting for its client) must
#   - listen on its GID's address, not on 0.0.0.0;
#   - listen on SOFTRNIC_BIND's address when it is set;
#   - have no TCP socket on the port at all with SOFTRNIC_TRANSPORT=shm;
#   - say so at the default log level when it cannot listen.
# Exit 77 (skip) when not root or namespaces are unavailable.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
[ "$(id -u)" = 0 ] || { echo "skip: needs root for a network namespace"; exit 77; }
command -v ib_write_bw >/dev/null || { echo "skip: perftest not installed"; exit 77; }
ns=srnlisten$$
port=4791
ip=198.51.100.7
. "$here/../lib/hosts.sh"
host_alone "$ns" $ip || { echo "skip: cannot create a namespace"; exit 77; }

# Starts the server with the given environment, waits until it listens on
# its own perftest port, prints softrnic's listening sockets, kills it.
listeners() {
	local log=$1
	shift
	ip netns exec "$ns" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$ip "$@" \
		ib_write_bw -d softrnic0 -x 0 -p 18515 >/dev/null 2>"$log" &
	local pid=$!
	for _ in $(seq 1 100); do
		ip netns exec "$ns" ss -Hltn "sport = :18515" | grep -q . && break
		sleep 0.05
	done
	ip netns exec "$ns" ss -Hltn "sport = :$port" | awk '{print $4}'
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	for _ in $(seq 1 100); do # gone, with its sockets
		ip netns exec "$ns" ss -Hltn "sport = :18515" | grep -q . || break
		sleep 0.05
	done
}


got=$(listeners /dev/null)
[ "$got" = "$ip:$port" ]
check "listens on the GID's address" $? "sockets on :$port: '$got'"

got=$(listeners /dev/null SOFTRNIC_BIND=127.0.0.1)
[ "$got" = "127.0.0.1:$port" ]
check "SOFTRNIC_BIND chooses the address" $? "sockets on :$port: '$got'"

got=$(listeners /dev/null SOFTRNIC_TRANSPORT=shm)
[ -z "$got" ]
check "no TCP socket with SOFTRNIC_TRANSPORT=shm" $? "sockets on :$port: '$got'"

# Somebody else holds the port (no SO_REUSEPORT): softrnic warns.
ip netns exec "$ns" timeout 30 python3 -c "
import socket, time
s = socket.socket()
s.bind(('$ip', $port))
s.listen()
time.sleep(30)" &
for _ in $(seq 1 100); do
	ip netns exec "$ns" ss -Hltn "sport = :$port" | grep -q . && break
	sleep 0.05
done
log=$(mktemp)
listeners "$log" >/dev/null
grep -q "warn: TCP $ip:$port" "$log"
check "failing to listen is a warning" $? "stderr: $(cat "$log")"
rm -f "$log"

[ $fails = 0 ] && echo "listen: all checks passed"
exit $fails
