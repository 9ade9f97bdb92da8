#!/bin/bash
# Hostile connections are cheap (docs/security.md). In a namespace of its
# own, a softrnic process that waits for its client (ib_write_bw server),
# with only 40 fds (prlimit), takes a flood of connections that never say
# a valid HELLO (idle, a byte a second, garbage) from two addresses:
#   - every one is closed within 10 s (HELLO deadline 3 s; garbage as
#     soon as it is read, which may wait while the fds are out);
#   - the server's CPU stays under 30% of a core while its fds run out;
#   - afterwards a real client still connects and runs (accepting resumed).
# Exit 77 (skip) without root, namespaces or perftest.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
[ "$(id -u)" = 0 ] || { echo "skip: needs root for a network namespace"; exit 77; }
command -v ib_write_bw >/dev/null || { echo "skip: perftest not installed"; exit 77; }
command -v prlimit >/dev/null || { echo "skip: prlimit missing"; exit 77; }
ns=srnflood$$
ip=198.51.100.9
. "$here/../lib/hosts.sh"
host_alone "$ns" $ip 198.51.100.10 || { echo "skip: cannot create a namespace"; exit 77; }
cpu_ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
in_ns() { ip netns exec "$ns" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$ip "$@"; }

# exec'd all the way down (no shell function): $! is the server itself
ip netns exec "$ns" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$ip \
	prlimit --nofile=40 ib_write_bw -d softrnic0 -x 0 -p 18515 -n 200 \
	>/dev/null 2>&1 &
srv=$!
for _ in $(seq 1 100); do
	ip netns exec "$ns" ss -Hltn "sport = :18515" | grep -q . && break
	sleep 0.05
done
out=$(mktemp)
ip netns exec "$ns" python3 "$here/flood.py" $ip 4791 60 20 20 10 >"$out.a" &
f1=$!
ip netns exec "$ns" python3 "$here/flood.py" $ip 4791 60 0 0 10 \
	198.51.100.10 >"$out.b" &
f2=$!
sleep 1 # the fds run out now
t0=$(cpu_ticks $srv)
sleep 3
t1=$(cpu_ticks $srv)
wait $f1 $f2
cat "$out.a" "$out.b" | sed 's/^/     /'
cpu=$(( (t1 - t0) * 100 / $(getconf CLK_TCK) / 3 ))
check "server CPU during the flood: ${cpu}% of a core (< 30%)" \
	"$([ $cpu -lt 30 ]; echo $?)" "${cpu}%"
left=$(cat "$out.a" "$out.b" | awk '{s += $3} END {print s + 0}')
check "every hostile connection closed within 10 s" "$([ "$left" = 0 ]; echo $?)" \
	"$left still open"
in_ns ib_write_bw -d softrnic0 -x 0 -p 18515 -n 200 $ip >"$out.c" 2>&1
rc=$?
check "a real client still connects and runs" $rc "$(tail -n 3 "$out.c")"
wait $srv
rm -f "$out" "$out.a" "$out.b" "$out.c"
[ $fails = 0 ] && echo "flood: all checks passed"
exit $fails
