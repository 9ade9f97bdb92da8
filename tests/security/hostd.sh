#!/bin/bash
# Several users on one host, each reachable from other hosts, through the
# optional host daemon (`softrnic daemon`, docs/security.md "Programs of
# different users on one host"). Two hosts (network namespaces on a
# bridge): host A (198.51.100.2) runs two ibv_rc_pingpong servers (Debian's,
# unmodified, over softrnic's TCP transport), one as `nobody` and one as
# `daemon`; host B (.1, the smaller GID: its QPs dial) runs their clients.
#   1. without the daemon: the first user's server holds the port, the
#      second one warns that it is "reachable from this host only", and its
#      pair fails (its connection lands in the first user's process, which
#      may not hand it over): why the daemon exists;
#   2. with `softrnic daemon` (root) holding the port: neither server warns,
#      both pairs finish with their data checked (-c), each pair's TCP
#      connection is owned by the user's own process, and the daemon holds
#      no more sockets than before (it forgot each connection it handed
#      over);
#   3. the same with the daemon socket-activated (systemd-socket-activate
#      passes it the port's socket, as softrnic.socket does), when that
#      tool is installed.
# Exit 77 (skip) without root, namespaces, setpriv or ibverbs-utils.
set -u
here=$(cd "$(dirname "$0")" && pwd)
HOSTD_CMDS="ibv_rc_pingpong" HOSTD_TAG=srnhd
. "$here/hostd_lib.sh"
PP="ibv_rc_pingpong -g 0 -c -e"
ITERS=200

wait_listen() { # port: until something in A listens on TCP port
	for _ in $(seq 1 200); do
		ip netns exec "$A" ss -Htln "sport = :$1" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}
# The two servers on A, nobody's first (it takes the port when nobody else
# has), then their clients on B, each within its time limit.
pairs() { # tag limit1 limit2
	on "$A" $ipA nobody timeout 30 $PP -n $ITERS -p 18515 >"$out/$1.srv1" 2>&1 &
	s1=$!
	wait_listen 18515
	on "$A" $ipA daemon timeout 30 $PP -n $ITERS -p 18516 >"$out/$1.srv2" 2>&1 &
	s2=$!
	wait_listen 18516
	on "$B" $ipB root timeout "$2" $PP -n $ITERS -p 18515 $ipA >"$out/$1.cli1" 2>&1 &
	c1=$!
	on "$B" $ipB root timeout "$3" $PP -n $ITERS -p 18516 $ipA >"$out/$1.cli2" 2>&1 &
	c2=$!
}
finished() { # tag n: pair n (1 nobody, 2 daemon) finished, data checked
	grep -q "iters in" "$out/$1.srv$2" && grep -q "iters in" "$out/$1.cli$2"
}

echo "-- without the daemon"
pairs nod 20 10
wait $c1
r1=$?
wait $c2
r2=$?
kill $s2 2>/dev/null # it waits for a peer that never came
wait $s1
q1=$?
wait $s2 2>/dev/null
nod_checks "$((r1 | q1))" "reachable from this host only" \
	"second user's server warns it is unreachable" \
	"no daemon to hand its connection over"

echo "-- with softrnic daemon"
on "$A" $ipA root "$tool" daemon >"$out/daemon.log" 2>&1 &
d=$!
for _ in $(seq 1 200); do
	grep -q "holds port" "$out/daemon.log" && break
	sleep 0.05
done
grep -q "holds port" "$out/daemon.log"
check "the daemon holds the port" $? "$(cat "$out/daemon.log")"
base=$(sockets $d)
ITERS=3000 # long enough for several samples of each connection
pairs d 20 20
ITERS=200
# while the pairs run: sample the established connections on the port and
# who holds each (until both clients are done). The daemon holds each one
# for the moment between its accept and the hand-off; a relay would hold
# it for the whole run.
samples=$out/owners
: >"$samples"
n=0
while kill -0 $c1 2>/dev/null || kill -0 $c2 2>/dev/null; do
	n=$((n + 1))
	ip netns exec "$A" ss -Htnp state established "sport = :4791" |
		awk -v n=$n '{ print n, $3, $4, $0 }' >>"$samples"
	sleep 0.02
done
wait $c1
r1=$?
wait $c2
r2=$?
wait $s1
q1=$?
wait $s2
q2=$?
[ $r1 = 0 ] && [ $q1 = 0 ] && finished d 1
check "nobody's pair finishes, data checked" $? "exit $r1/$q1: $(tail -n 3 "$out/d.srv1" "$out/d.cli1")"
[ $r2 = 0 ] && [ $q2 = 0 ] && finished d 2
check "daemon's pair finishes, data checked" $? "exit $r2/$q2: $(tail -n 3 "$out/d.srv2" "$out/d.cli2")"
! grep -q "reachable from this host only" "$out/d.srv1" "$out/d.srv2"
check "no server warns that it is unreachable" $? "$(cat "$out/d.srv1" "$out/d.srv2")"
# per connection (local, peer address): samples it was the daemon's, and
# samples it was another process's
held=$(awk -v d="pid=$d," '{ k = $2 " " $3; seen[k] = 1; l = $0
	while (match(l, /pid=[0-9]+,/)) {
		if (substr(l, RSTART, RLENGTH) == d) dm[k]++; else us[k]++
		l = substr(l, RSTART + RLENGTH)
	} }
	END { for (k in seen) print k, dm[k] + 0, us[k] + 0 }' "$samples")
# connections seen in a user's process: the sampling is not blind
awk '$4 > 0 { ok = 1 } END { exit !ok }' <<<"$held"
check "the samples see connections in the users' processes" $? "$held"
# a hand-off leaves it in the daemon for a sample or two (20 ms apart),
# then in the user's process; a relay would hold it in the daemon only
awk '$3 >= 3 || ($3 > 0 && $4 == 0) { exit 1 }' <<<"$held"
check "no established connection on the port stays the daemon's" $? "$held"
echo "connections (local peer daemon-samples user-samples):"
echo "$held"
now=$(sockets $d)
[ "$now" = "$base" ]
check "the daemon holds no connection after the hand-offs ($now sockets, $base before)" $? \
	"$(ls -l /proc/$d/fd)"
kill -0 $d 2>/dev/null
check "the daemon still runs" $? "$(cat "$out/daemon.log")"
kill $d
wait $d
check "the daemon stops on SIGTERM" $? "$(cat "$out/daemon.log")"

# 3. socket-activated, as under systemd (softrnic.socket): the daemon takes
# the listening socket it is passed (LISTEN_FDS) instead of binding
if command -v systemd-socket-activate >/dev/null; then
	echo "-- socket-activated (systemd-socket-activate)"
	ip netns exec "$A" systemd-socket-activate -l $ipA:4791 \
		-E LD_LIBRARY_PATH="$lib" -E SOFTRNIC_IP=$ipA \
		-E SOFTRNIC_TRANSPORT=tcp "$tool" daemon >"$out/sa.log" 2>&1 &
	d=$!
	wait_listen 4791
	# the first connection starts the daemon (then closed at its HELLO
	# deadline)
	ip netns exec "$A" bash -c "exec 3<>/dev/tcp/$ipA/4791"
	for _ in $(seq 1 200); do
		grep -q "holds port" "$out/sa.log" && break
		sleep 0.05
	done
	ip netns exec "$A" ss -Htlnp "sport = :4791" | grep -q "pid=$d,fd=3)"
	check "the daemon listens on the socket it was passed (fd 3)" $? \
		"$(cat "$out/sa.log"; ip netns exec "$A" ss -Htlnp)"
	pairs sa 20 20
	wait $c1
	r1=$?
	wait $c2
	r2=$?
	wait $s1 $s2
	finished sa 1 && finished sa 2
	check "both pairs finish through the socket-activated daemon" $? \
		"exit $r1/$r2: $(tail -n 3 "$out"/sa.*)"
	kill $d
	wait $d
else
	echo "(no systemd-socket-activate: socket activation not tested)"
fi
grep -h "iters in" "$out"/*.cli*
[ $fails = 0 ] && echo "hostd: all checks passed"
exit $fails
