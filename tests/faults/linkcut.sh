#!/bin/bash
# A silent link cut seen by both ends (docs/security.md, docs/wire.md
# "Errors and faults"): two hosts (network namespaces on a bridge) run
# ib_write_bw over softrnic's TCP transport; the bridge goes down
# mid-transfer (no FIN, no RST: this kernel has no netem). Of the two QPs
# the server's (198.51.100.1, the smaller GID) dials the link and the
# client's accepts it. Two rounds:
#   1. the client WRITEs: its first error completion is RETRY_EXC_ERR
#      (status 12: the RC ACK timer, 2 s floor), not a flush, and it exits
#      within 10 s; the server's QP, with nothing of its own in flight,
#      goes to ERR within 10 s as well (TCP keepalive, ~5 s), as
#      `softrnic stat` shows;
#   2. both WRITE (-b): the dialing end and the accepting end each get
#      RETRY_EXC_ERR (status 12) as their first error and exit within 10 s.
# perftest reports the first error completion only; the flushes behind it
# are test_fault's. Exit 77 (skip) without root, namespaces or perftest.
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
since() { awk -v a="$(now)" -v b="$1" 'BEGIN {printf "%.1f", a - b}'; }
out=$(mktemp -d)
RETRY_EXC=12 # IBV_WC_RETRY_EXC_ERR; IBV_WC_WR_FLUSH_ERR is 5

# The QPN of the server's QP once it is in RTR or RTS, or nothing.
server_qp() {
	local qp=""
	for _ in $(seq 1 100); do
		qp=$(ip netns exec $A env LD_LIBRARY_PATH="$lib" "$tool" stat \
			2>/dev/null | awk '/RT[RS]/ {print $1; exit}')
		[ -n "$qp" ] && break
		sleep 0.05
	done
	echo "$qp"
}

# ib_write_bw in namespace NS, output to FILE, more arguments after.
bw() {
	local ns=$1 ip=$2 f=$3
	shift 3
	ip netns exec $ns env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$ip \
		ib_write_bw -d softrnic0 -x 0 -D 30 "$@" >"$f" 2>&1
}

# NAME FILE: the first error completion perftest printed is RETRY_EXC_ERR.
check_status() {
	local st
	st=$(awk '/Failed status/ {sub(":", "", $3); print $3; exit}' "$2")
	check "$1's first error completion is RETRY_EXC_ERR ($RETRY_EXC; saw '${st:-none}')" \
		"$([ "$st" = $RETRY_EXC ]; echo $?)" \
		"$(grep -i -m 3 "error\|failed" "$2")"
}

# NAME PID T0: the process fails (exit != 0) within 10 s of T0.
check_fails() {
	local rc t
	wait "$2"
	rc=$?
	t=$(since "$3")
	check "$1 fails (exit $rc) after $t s (< 10 s)" \
		"$([ $rc != 0 ] && awk -v t="$t" 'BEGIN {exit !(t < 10)}'; echo $?)" ""
}

# Round 1: the client WRITEs, the server only waits.
bw $A 198.51.100.1 "$out/a1" -p 18515 2>/dev/null &
srv=$!
sleep 0.5
bw $B 198.51.100.2 "$out/b1" -p 18515 198.51.100.1 &
cli=$!
qp=$(server_qp)
check "the pair runs (server QP $qp in RTR)" "$([ -n "$qp" ]; echo $?)" "no QP"
sleep 1.5
t0=$(now)
hosts_cut $p # silent: frames just stop
check_fails "the client (accepted the link)" $cli "$t0"
check_status "the client (accepted the link)" "$out/b1"
ts=""
while awk -v a="$(now)" -v b="$t0" 'BEGIN {exit !(a - b < 12)}'; do
	st=$(ip netns exec $A env LD_LIBRARY_PATH="$lib" "$tool" stat 2>/dev/null |
		awk -v q="$qp" '$1 == q {print $3}')
	if [ "$st" = ERR ]; then
		ts=$(since "$t0")
		break
	fi
	sleep 0.2
done
check "the server's QP is in ERR after ${ts:-?} s (< 10 s)" \
	"$([ -n "$ts" ] && awk -v t="$ts" 'BEGIN {exit !(t < 10)}'; echo $?)" \
	"state '$st' after 12 s"
ip netns pids $A | xargs -r kill -9 # the server waits for its client
wait $srv

# Round 2: both WRITE, both ends have requests in flight when the link goes.
ip -n "${p}s" link set br0 up
bw $A 198.51.100.1 "$out/a2" -p 18516 -b &
srv=$!
sleep 0.5
bw $B 198.51.100.2 "$out/b2" -p 18516 -b 198.51.100.1 &
cli=$!
qp=$(server_qp)
check "the bidirectional pair runs (server QP $qp)" "$([ -n "$qp" ]; echo $?)" \
	"no QP"
sleep 1.5
t0=$(now)
hosts_cut $p
check_fails "the server (dialed the link)" $srv "$t0"
check_fails "the client (accepted the link)" $cli "$t0"
check_status "the server (dialed the link)" "$out/a2"
check_status "the client (accepted the link)" "$out/b2"
rm -rf "$out"
[ $fails = 0 ] && echo "linkcut: all checks passed"
exit $fails
