#!/bin/bash
# The caps on connections waiting for their HELLO (docs/security.md, "TCP
# (other hosts)" point 4; docs/wire.md, "Listening";
# SRN_TCP_PRE_HELLO_SRC 16 and SRN_TCP_PRE_HELLO 256 in
# src/transport/tcp/tcp.h, SRN_TCP_HELLO_NS 3 s). In a namespace of its
# own, a softrnic process that waits for its client (ib_write_bw server)
# takes silent connections (caps.py):
#   - 24 from one address: the first 16 stay open until the HELLO
#     deadline (at least 2.9 s each, closed within 30 s), the 8 over the
#     per-address cap are closed at once (before the first of the 16);
#   - then 16 from each of 17 addresses (272): the first 256 stay open
#     until the deadline, the 16 over the total cap are closed at once;
#   - afterwards a real client still connects and runs.
# Exit 77 (skip) without root, namespaces or perftest.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
[ "$(id -u)" = 0 ] || { echo "skip: needs root for a network namespace"; exit 77; }
command -v ib_write_bw >/dev/null || { echo "skip: perftest not installed"; exit 77; }
command -v prlimit >/dev/null || { echo "skip: prlimit missing"; exit 77; }
ns=srncaps$$
ip=198.51.100.9
src=$(seq -f "198.51.100.%g" 10 26) # 17 addresses
. "$here/../lib/hosts.sh"
# shellcheck disable=SC2086 # one address a word
host_alone "$ns" $ip $src || { echo "skip: cannot create a namespace"; exit 77; }
in_ns() { ip netns exec "$ns" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$ip "$@"; }

# fds for all 256 and more: the caps, not the fds, must close them
in_ns prlimit --nofile=2048 ib_write_bw -d softrnic0 -x 0 -p 18515 -n 200 \
	>/dev/null 2>&1 &
srv=$!
for _ in $(seq 1 200); do
	ip netns exec "$ns" ss -Hltn "sport = :4791" | grep -q . && break
	sleep 0.05
done
out=$(mktemp)
ip netns exec "$ns" python3 "$here/caps.py" $ip 4791 16 24 198.51.100.10 >"$out"
rc=$?
sed 's/^/     /' "$out"
check "one address, 24 silent: 16 kept until the deadline, 8 closed at once" $rc \
	"$(cat "$out")"
# shellcheck disable=SC2086
ip netns exec "$ns" python3 "$here/caps.py" $ip 4791 256 16 $src >"$out"
rc=$?
sed 's/^/     /' "$out"
check "17 addresses, 16 each: 256 kept until the deadline, 16 closed at once" $rc \
	"$(cat "$out")"
in_ns ib_write_bw -d softrnic0 -x 0 -p 18515 -n 200 $ip >"$out" 2>&1
rc=$?
check "a real client still connects and runs" $rc "$(tail -n 3 "$out")"
wait $srv
rm -f "$out"
[ $fails = 0 ] && echo "flood_caps: all checks passed"
exit $fails
