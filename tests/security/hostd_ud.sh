#!/bin/bash
# Several users' UD QPs on one host, each reachable from other hosts,
# through the optional host daemon (`softrnic daemon`, which also holds UDP
# port 4791 and forwards each datagram to its QP's process:
# docs/security.md, docs/wire.md). Two hosts (network namespaces on a
# bridge): host A (198.51.100.2) runs Debian's ibv_ud_pingpong servers
# (unmodified, softrnic's libibverbs over its TCP transport), one as
# `nobody` and one as `daemon`; host B (.1) runs their clients.
#   1. without the daemon: the first user's server holds the UDP port
#      (SO_REUSEPORT, one user only); the second one's warns and its pair
#      fails (it has no UDP socket; the first user's process gets its
#      datagrams and may not relay them to another user's QP: 3.);
#   2. with `softrnic daemon` (root) holding the UDP port alone: both
#      pairs finish, no server warns, the port is the daemon's only (the
#      daemon does not start while a user's process holds it);
#   3. a datagram written straight to a QP's forwarding socket
#      (@softrnic/ud/<QPN>) by a process of another user, claiming to come
#      from another host, is not delivered; the same from the QP's own
#      user is; another user's datagram that says it comes from this host
#      (what it could send to the port anyway) is;
#   4. socket-activated (LISTEN_FDS as softrnic.socket passes them, the
#      UDP port's socket fourth): the daemon forwards on the UDP socket it
#      was passed, and both pairs finish.
# Exit 77 (skip) without root, namespaces, setpriv, python3 or
# ibverbs-utils.
#   hostd_ud.sh [UD_FWD_TARGET]   (ctest security_hostd_ud)
set -u
here=$(cd "$(dirname "$0")" && pwd)
target=${1:-$here/../../build/bin/ud_fwd_target}
HOSTD_CMDS="ibv_ud_pingpong python3" HOSTD_TAG=srnhu
. "$here/hostd_lib.sh"
[ -x "$target" ] || { echo "skip: no $target"; exit 77; }

exchanged() { # pid port: until a server listens on its TCP exchange
	# port (or pid ends)
	for _ in $(seq 1 200); do
		ip netns exec "$A" ss -Htln "sport = :$2" | grep -q . &&
			return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# ibv_ud_pingpong servers on A, nobody's first (it takes the UDP port
# when nobody else has), then their clients on B.
pairs() { # tag
	on "$A" $ipA nobody timeout 20 ibv_ud_pingpong -g 0 -p 7181 -n 50 \
		>"$out/$1.srv1" 2>&1 &
	s1=$!
	exchanged $s1 7181
	on "$A" $ipA daemon timeout 20 ibv_ud_pingpong -g 0 -p 7182 -n 50 \
		>"$out/$1.srv2" 2>&1 &
	s2=$!
	exchanged $s2 7182
	on "$B" $ipB root timeout 8 ibv_ud_pingpong -g 0 -p 7181 -n 50 $ipA \
		>"$out/$1.cli1" 2>&1 &
	c1=$!
	on "$B" $ipB root timeout 8 ibv_ud_pingpong -g 0 -p 7182 -n 50 $ipA \
		>"$out/$1.cli2" 2>&1 &
	c2=$!
}
finished() { # tag n: pair n (1 nobody, 2 daemon) exchanged its 50 pings
	grep -q "50 iters" "$out/$1.srv$2" && grep -q "50 iters" "$out/$1.cli$2"
}
wait_all() { # waits for the pairs; r1 r2 q1 q2 their exit codes
	wait $c1
	r1=$?
	wait $c2
	r2=$?
	# a server whose client gave up waits for ever: stopped
	[ $r1 = 0 ] || kill -TERM $s1 2>/dev/null
	[ $r2 = 0 ] || kill -TERM $s2 2>/dev/null
	wait $s1
	q1=$?
	wait $s2
	q2=$?
}
pairs_ok() { # tag what
	[ $r1 = 0 ] && finished "$1" 1
	check "nobody's ud_pingpong pair finishes $2" $? \
		"exit $r1/$q1: $(tail -n 3 "$out/$1.srv1" "$out/$1.cli1")"
	[ $r2 = 0 ] && finished "$1" 2
	check "daemon's ud_pingpong pair finishes $2" $? \
		"exit $r2/$q2: $(tail -n 3 "$out/$1.srv2" "$out/$1.cli2")"
	! grep -q "reachable from this host only" "$out/$1.srv1" "$out/$1.srv2"
	check "no server warns $2" $? "$(cat "$out/$1.srv1" "$out/$1.srv2")"
}
started() { # log: until the daemon says it holds its ports
	for _ in $(seq 1 200); do
		grep -q "holds port" "$1" && return 0
		sleep 0.05
	done
	return 1
}
udp_owner() { # pid fd: the UDP port's only socket is pid's fd
	local s
	s=$(ip netns exec "$A" ss -Hulnp "sport = :4791")
	[ "$(grep -c . <<<"$s")" = 1 ] && grep -q "pid=$1,fd=$2)" <<<"$s"
}

echo "-- without the daemon"
pairs nod
wait_all
nod_checks "$r1" "UDP port 4791: Address already in use" \
	"second user's server cannot bind the UDP port (warned)" \
	"no UDP socket; nobody's may not relay"

echo "-- with softrnic daemon"
# a user's process holds the UDP port: the daemon refuses to start
on "$A" $ipA nobody python3 -c 'import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("0.0.0.0", 4791)); print("bound", flush=True); time.sleep(30)' \
	>"$out/hold.log" 2>&1 &
h=$!
for _ in $(seq 1 100); do
	grep -q bound "$out/hold.log" && break
	sleep 0.05
done
(on "$A" $ipA root timeout 10 "$tool" daemon) >"$out/busy.log" 2>&1
r=$?
kill $h
wait $h 2>/dev/null
[ $r = 1 ] && grep -q "not holding the UDP port" "$out/busy.log"
check "the daemon refuses to start when a user holds the UDP port" $? \
	"exit $r: $(cat "$out/busy.log")"
on "$A" $ipA root "$tool" daemon >"$out/daemon.log" 2>&1 &
d=$!
started "$out/daemon.log"
check "the daemon starts" $? "$(cat "$out/daemon.log")"
udp_owner $d '[0-9]*'
check "the UDP port is the daemon's alone" $? "$(ip netns exec "$A" ss -Hulnp)"
pairs d
wait_all
pairs_ok d "through the daemon"

echo "-- another user's forward to a QP's unix socket"
# the target waits up to 30 s for each datagram (a loaded machine starts
# the three injectors slowly); it is stopped once both deliverable ones
# came, or after 30 s
on "$A" $ipA nobody "$target" 30 >"$out/fwd.log" 2>&1 &
t=$!
for _ in $(seq 1 100); do
	grep -q "^QPN" "$out/fwd.log" && break
	sleep 0.05
done
qpn=$(awk '/^QPN/ {print $2}' "$out/fwd.log")
inject() { # user src_qpn src_ip
	(on "$A" $ipA "$1" python3 "$here/ud_inject.py" "$qpn" "$2" "$3" $ipA)
}
inject daemon 0xbad $ipB
inject nobody 0x600d $ipB
inject daemon 0x10ca1 $ipA
for _ in $(seq 1 300); do
	[ "$(grep -c "status 0" "$out/fwd.log")" -ge 2 ] && break
	sleep 0.1
done
sleep 0.2 # a late undeliverable one would show up now
kill $t 2>/dev/null
wait $t
grep -q "src_qp 0x000bad" "$out/fwd.log"
check "another user's forward (from another host, it says) is not delivered" \
	$((!$?)) "$(cat "$out/fwd.log")"
grep -q "src_qp 0x00600d len 48 status 0" "$out/fwd.log"
check "the QP's own user's forward is delivered" $? "$(cat "$out/fwd.log")"
grep -q "src_qp 0x010ca1 len 48 status 0" "$out/fwd.log"
check "another user's own datagram from this host is delivered" $? "$(cat "$out/fwd.log")"
kill $d
wait $d
check "the daemon stops on SIGTERM" $? "$(cat "$out/daemon.log")"

echo "-- socket-activated (LISTEN_FDS: TCP port, marker, CM port, UDP port)"
ip netns exec "$A" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$ipA \
	SOFTRNIC_TRANSPORT=tcp python3 -c '
import fcntl, os, socket, sys
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.bind(("0.0.0.0", 4791)); t.listen(64)
m = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
m.bind("\0softrnic/hostd"); m.listen(64)
c = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
c.bind(("::", 4790)); c.listen(64)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("0.0.0.0", 4791))
high = [fcntl.fcntl(s.fileno(), fcntl.F_DUPFD_CLOEXEC, 100) for s in (t, m, c, u)]
for i, f in enumerate(high):
	os.dup2(f, 3 + i, inheritable=True)
os.environ.update(LISTEN_FDS="4", LISTEN_PID=str(os.getpid()))
os.execv(sys.argv[1], [sys.argv[1], "daemon"])' "$tool" >"$out/sa.log" 2>&1 &
d=$!
started "$out/sa.log"
udp_owner $d 6
check "the daemon's UDP socket is the one it was passed (fd 6)" $? \
	"$(cat "$out/sa.log"; ip netns exec "$A" ss -Hulnp)"
pairs sa
wait_all
pairs_ok sa "through the socket-activated daemon"
kill $d
wait $d
[ $fails = 0 ] && echo "hostd_ud: all checks passed"
exit $fails
