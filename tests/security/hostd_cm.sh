#!/bin/bash
# Several users' rdma_cm servers on one host, each reachable from other
# hosts, through the optional host daemon (`softrnic daemon`, which also
# holds rdma_cm's port: docs/security.md, docs/rdmacm.md). Two hosts
# (network namespaces on a bridge): host A (198.51.100.2) runs Debian's
# rping servers (unmodified, softrnic's librdmacm over its TCP transport),
# one as `nobody` and one as `daemon`; host B (.1) runs their clients.
#   1. without the daemon: the first user's server holds the CM port
#      (SO_REUSEPORT, one user only); the second one cannot listen and its
#      pair fails: why the daemon serves the CM port too;
#   2. with `softrnic daemon` (root) holding both ports: both rping pairs
#      finish (data checked, -V), a SIDR pair (udaddy, UD) of the second
#      user too, no server warns, a REQ for a port nobody listens on is
#      REJECTED, a connection that sends no REQ is closed after the CM's
#      deadline, one address may not hold more than 64 connections
#      waiting for their REQ, the daemon holds no established connection
#      on the CM port past its first message (the REQ it hands over) and
#      no more sockets than before;
#   3. socket-activated (systemd-socket-activate passes both ports, as
#      softrnic.socket does): the daemon takes the CM port's socket it was
#      passed and both pairs finish, when that tool is installed.
# Exit 77 (skip) without root, namespaces, setpriv or rdmacm-utils.
set -u
here=$(cd "$(dirname "$0")" && pwd)
HOSTD_CMDS="rping udaddy" HOSTD_TAG=srnhc
. "$here/hostd_lib.sh"
CM=4790

bound() { # pid ps port: until pid holds rdma_cm port (its hand-off
	# socket) or ends
	for _ in $(seq 1 200); do
		ip netns exec "$A" ss -Hxl | grep -q "@softrnic/cm/$2/$3 " &&
			return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
cm_listened() { # until something in A listens on the CM port
	for _ in $(seq 1 200); do
		ip netns exec "$A" ss -Htln "sport = :$CM" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}
# rping servers on A, nobody's first (it takes the CM port when nobody
# else has), then their clients on B.
pairs() { # tag
	on "$A" $ipA nobody timeout 30 rping -s -a $ipA -p 7171 -C 3 -v -V \
		>"$out/$1.srv1" 2>&1 &
	s1=$!
	bound $s1 262 7171 && cm_listened
	on "$A" $ipA daemon timeout 30 rping -s -a $ipA -p 7172 -C 3 -v -V \
		>"$out/$1.srv2" 2>&1 &
	s2=$!
	bound $s2 262 7172
	on "$B" $ipB root timeout 20 rping -c -a $ipA -p 7171 -C 3 -v -V \
		>"$out/$1.cli1" 2>&1 &
	c1=$!
	on "$B" $ipB root timeout 20 rping -c -a $ipA -p 7172 -C 3 -v -V \
		>"$out/$1.cli2" 2>&1 &
	c2=$!
}
finished() { # tag n: pair n (1 nobody, 2 daemon) exchanged its pings
	grep -q "rdma-ping-2" "$out/$1.srv$2" &&
		grep -q "rdma-ping-2" "$out/$1.cli$2"
}
wait_all() { # tag: waits for the pairs; r1 r2 q1 q2 their exit codes
	wait $c1
	r1=$?
	wait $c2
	r2=$?
	wait $s1
	q1=$?
	wait $s2
	q2=$?
}
pairs_ok() { # tag what
	[ $r1 = 0 ] && [ $q1 = 0 ] && finished "$1" 1
	check "nobody's rping pair finishes $2" $? \
		"exit $r1/$q1: $(tail -n 3 "$out/$1.srv1" "$out/$1.cli1")"
	[ $r2 = 0 ] && [ $q2 = 0 ] && finished "$1" 2
	check "daemon's rping pair finishes $2" $? \
		"exit $r2/$q2: $(tail -n 3 "$out/$1.srv2" "$out/$1.cli2")"
}
started() { # log: until the daemon says it holds its ports
	for _ in $(seq 1 200); do
		grep -q "holds port" "$1" && return 0
		sleep 0.05
	done
	return 1
}

echo "-- without the daemon"
pairs nod
wait_all nod
nod_checks "$((r1 | q1))" "cannot listen on the CM port" \
	"second user's server cannot listen on the CM port" \
	"no daemon to hand its REQ over"

echo "-- with softrnic daemon"
on "$A" $ipA root "$tool" daemon >"$out/daemon.log" 2>&1 &
d=$!
started "$out/daemon.log"
check "the daemon holds both ports" $? "$(cat "$out/daemon.log")"
ip netns exec "$A" ss -Htlnp "sport = :$CM" | grep -q "pid=$d,"
check "the CM port is the daemon's" $? "$(ip netns exec "$A" ss -Htlnp)"
base=$(sockets $d)
pairs d
# while the pairs run (sampled until both clients are done): the daemon
# holds an established connection on the CM port only while it reads the
# REQ and hands it over, so one that it holds has received that one
# message at most (a CM message is 256 bytes; the peer sends nothing
# more before it is answered). How long it holds one depends on how soon
# the active side sends its REQ, so catching it then is no failure.
past=""
while kill -0 $c1 2>/dev/null || kill -0 $c2 2>/dev/null; do
	past+=$(ip netns exec "$A" ss -Htnpi state established "sport = :$CM" |
		awk -v d="pid=$d," '
			/users:/ { mine = index($0, d) > 0; next }
			mine && match($0, /bytes_received:[0-9]+/) {
				n = substr($0, RSTART + 15, RLENGTH - 15) + 0
				if (n > 256) printf "bytes_received:%d ", n
			}')
	sleep 0.02
done
wait_all d
pairs_ok d "through the daemon"
! grep -q "cannot listen\|reachable from this host only" "$out/d.srv1" "$out/d.srv2"
check "no server warns" $? "$(cat "$out/d.srv1" "$out/d.srv2")"
[ -z "$past" ]
check "the daemon holds no CM connection past its REQ" $? "$past"

# SIDR (UD, RDMA_PS_UDP 0x111): the second user's udaddy
on "$A" $ipA daemon timeout 30 udaddy -b $ipA -C 4 >"$out/ud.srv" 2>&1 &
s2=$!
bound $s2 273 7174
(on "$B" $ipB root timeout 20 udaddy -s $ipA -C 4) >"$out/ud.cli" 2>&1
r2=$?
wait $s2
q2=$?
[ $r2 = 0 ] && [ $q2 = 0 ] && grep -q "data transfers complete" "$out/ud.cli"
check "daemon's udaddy (SIDR) pair finishes through the daemon" $? \
	"exit $r2/$q2: $(cat "$out/ud.srv" "$out/ud.cli")"

# nobody listens on the port: REJECTED, as without the daemon
(on "$B" $ipB root timeout 20 rping -c -a $ipA -p 7179 -C 1) >"$out/rej.cli" 2>&1
r=$?
[ $r != 0 ] && grep -q "REJECTED" "$out/rej.cli"
check "a REQ for a port nobody listens on is REJECTED" $? "exit $r: $(cat "$out/rej.cli")"

# a connection that never sends its REQ: closed by the daemon (EOF, read's
# status 1) after SRN_CM_REQ_WAIT_MS (3 s), long before read's 20 s
r=$(ip netns exec "$B" timeout 30 bash -c \
	"exec 3<>/dev/tcp/$ipA/$CM; read -t 20 -u 3; echo \$?")
[ "$r" = 1 ]
check "a connection without REQ is closed by the daemon" $? "read: '$r'"

# 100 silent connections from one address: the daemon keeps 64 of them
# waiting for their REQ (SRN_CM_PEND_SRC) and closes the others at once
ip netns exec "$B" bash -c "for i in \$(seq 100); do
	exec {f}<>/dev/tcp/$ipA/$CM || exit 1; done; touch $out/flood; sleep 20" &
fl=$!
held=0
for _ in $(seq 1 200); do # until all 100 are connected
	[ -e "$out/flood" ] && break
	sleep 0.05
done
for _ in $(seq 1 200); do # until the kernel has no more queued for it
	est=$(ip netns exec "$A" ss -Htnp state established "sport = :$CM")
	held=$(grep -c "pid=$d," <<<"$est")
	[ "$held" -gt 0 ] && ! grep -qv "users:" <<<"$est" && break
	sleep 0.05
done
[ "$held" -ge 1 ] && [ "$held" -le 64 ]
check "one address holds at most 64 connections waiting for their REQ ($held)" $? \
	"$(ip netns exec "$A" ss -Htnp state established "sport = :$CM" | head)"
kill $fl 2>/dev/null
wait $fl 2>/dev/null

# every connection handed over, refused or timed out: the daemon's
# sockets are back to what they were (the silent ones above go at their
# 3 s deadline)
for _ in $(seq 1 200); do
	now=$(sockets $d)
	[ "$now" = "$base" ] && break
	sleep 0.05
done
[ "$now" = "$base" ]
check "the daemon holds no connection after the hand-offs ($now sockets, $base before)" $? \
	"$(ls -l /proc/$d/fd)"
kill $d
wait $d
check "the daemon stops on SIGTERM" $? "$(cat "$out/daemon.log")"

# 3. socket-activated, as under systemd (softrnic.socket passes the port,
# the marker and the CM port): here the port and the CM port
if command -v systemd-socket-activate >/dev/null; then
	echo "-- socket-activated (systemd-socket-activate)"
	ip netns exec "$A" systemd-socket-activate -l $ipA:4791 -l $CM \
		-E LD_LIBRARY_PATH="$lib" -E SOFTRNIC_IP=$ipA \
		-E SOFTRNIC_TRANSPORT=tcp "$tool" daemon >"$out/sa.log" 2>&1 &
	d=$!
	cm_listened
	# the first connection starts the daemon (then closed at its
	# deadline)
	ip netns exec "$A" bash -c "exec 3<>/dev/tcp/$ipA/$CM"
	started "$out/sa.log"
	ip netns exec "$A" ss -Htlnp "sport = :$CM" | grep -q "pid=$d,fd=4)"
	check "the daemon listens on the CM socket it was passed (fd 4)" $? \
		"$(cat "$out/sa.log"; ip netns exec "$A" ss -Htlnp)"
	pairs sa
	wait_all sa
	pairs_ok sa "through the socket-activated daemon"
	kill $d
	wait $d
else
	echo "(no systemd-socket-activate: socket activation not tested)"
fi
[ $fails = 0 ] && echo "hostd_cm: all checks passed"
exit $fails
