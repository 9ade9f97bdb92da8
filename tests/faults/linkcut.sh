#!/bin/bash
# A silent link cut seen by both ends (docs/security.md): two hosts
# (network namespaces on a bridge) run ib_write_bw over softrnic's TCP
# transport; the bridge goes down mid-transfer (no FIN, no RST: this kernel
# has no netem). Then
#   - the client, with WRITEs in flight, gets an error completion (the RC
#     ACK timer: 2 s floor) and exits with an error within 10 s;
#   - the server's QP, which has nothing of its own in flight, goes to ERR
#     within 10 s as well (TCP keepalive, ~5 s), as `softrnic stat` shows.
# Exit 77 (skip) without root, namespaces or perftest.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
tool=$(dirname "$lib")/bin/softrnic
[ "$(id -u)" = 0 ] || { echo "skip: needs root for network namespaces"; exit 77; }
command -v ib_write_bw >/dev/null || { echo "skip: perftest not installed"; exit 77; }
p=srncut$$
A=${p}a B=${p}b
. "$here/../lib/hosts.sh"
hosts_up $p $A $B || { echo "skip: cannot create namespaces"; exit 77; }
now() { date +%s.%N; }
out=$(mktemp -d)
ip netns exec $A env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=198.51.100.1 \
	ib_write_bw -d softrnic0 -x 0 -D 30 -p 18515 >"$out/a" 2>&1 &
sleep 0.5
ip netns exec $B env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=198.51.100.2 \
	ib_write_bw -d softrnic0 -x 0 -D 30 -p 18515 198.51.100.1 >"$out/b" 2>&1 &
cli=$!
qp=""
for _ in $(seq 1 100); do
	qp=$(ip netns exec $A env LD_LIBRARY_PATH="$lib" "$tool" stat 2>/dev/null |
		awk '/RT[RS]/ {print $1; exit}')
	[ -n "$qp" ] && break
	sleep 0.05
done
check "the pair runs (server QP $qp in RTR)" "$([ -n "$qp" ]; echo $?)" "no QP"
sleep 1.5
t0=$(now)
hosts_cut $p # silent: frames just stop
wait $cli
rc=$?
tc=$(awk -v a="$(now)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
check "the client fails (exit $rc) after ${tc} s (< 10 s)" \
	"$([ $rc != 0 ] && awk -v t="$tc" 'BEGIN {exit !(t < 10)}'; echo $?)" \
	"$(tail -n 4 "$out/b")"
grep -q -i "error" "$out/b"
check "the client saw an error completion" $? "$(tail -n 4 "$out/b")"
ts=""
while awk -v a="$(now)" -v b="$t0" 'BEGIN {exit !(a - b < 12)}'; do
	st=$(ip netns exec $A env LD_LIBRARY_PATH="$lib" "$tool" stat 2>/dev/null |
		awk -v q="$qp" '$1 == q {print $3}')
	if [ "$st" = ERR ]; then
		ts=$(awk -v a="$(now)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
		break
	fi
	sleep 0.2
done
check "the server's QP is in ERR after ${ts:-?} s (< 10 s)" \
	"$([ -n "$ts" ] && awk -v t="$ts" 'BEGIN {exit !(t < 10)}'; echo $?)" \
	"state '$st' after 12 s"
rm -rf "$out"
[ $fails = 0 ] && echo "linkcut: all checks passed"
exit $fails
