#!/bin/bash
# Two users of one host (docs/security.md): Debian's unmodified programs,
# one side as root and the other as nobody, both ways round, over
# softrnic's libibverbs.so.1. Their QPs share no memory: each side's QP
# takes the mediated path (the target checks every access), which the
# target's log must show, also with SOFTRNIC_TRANSPORT=shm or tcp.
# run_pair.sh judges each pair.
#   cross_user.sh RUN_PAIR     (ctest security_cross_user)
# SOFTRNIC_LIB_DIR: the library (default build/lib); nobody must be able to
# read it. Exit 77 (skip) when not root, or setpriv, nobody or the
# programs are missing.
set -u
run_pair=${1:?usage: cross_user.sh RUN_PAIR}
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
export SOFTRNIC_LIB_DIR=$lib
[ "$(id -u)" = 0 ] || { echo "skip: needs root (to run a side as nobody)"; exit 77; }
command -v setpriv >/dev/null || { echo "skip: no setpriv"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "skip: no user nobody"; exit 77; }
command -v ibv_rc_pingpong >/dev/null || { echo "skip: no ibverbs-utils"; exit 77; }
command -v ib_write_bw >/dev/null || { echo "skip: perftest not installed"; exit 77; }
group=$(id -gn nobody)
if ! setpriv --reuid=nobody --regid="$group" --clear-groups -- \
	test -r "$lib/libibverbs.so.1"; then
	echo "skip: nobody cannot read $lib/libibverbs.so.1"
	exit 77
fi
# the target's log says which path its QP took (info level)
export SOFTRNIC_LOG=2
up='mediated link for QP 0x[0-9a-f]+ of pid [0-9]+ \(uid [0-9]+\): up'

fails=0
pair() { # name, server user, client user, program and arguments
	local name=$1 su=$2 cu=$3 rc
	local expect=${PAIR_EXPECT-$up} # UD: no link to look for
	shift 3
	echo "== $name (server $su, client $cu)"
	SRN_PAIR_SERVER_USER=$([ "$su" = root ] || echo "$su") \
		SRN_PAIR_CLIENT_USER=$([ "$cu" = root ] || echo "$cu") \
		"$run_pair" --timeout 50 --show none \
		${expect:+--expect "$expect"} -- "$@"
	rc=$?
	if [ $rc = 0 ]; then
		echo "ok   $name (server $su, client $cu)"
	else
		echo "FAIL $name (server $su, client $cu): run_pair exit $rc"
		fails=$((fails + 1))
	fi
}

pair rc_pingpong root nobody ibv_rc_pingpong -g 0 -n 200
pair rc_pingpong nobody root ibv_rc_pingpong -g 0 -n 200
pair write_bw root nobody ib_write_bw -d softrnic0 -x 0 -n 200
pair read_bw nobody root ib_read_bw -d softrnic0 -x 0 -n 200
# datagrams between users: over the forwarding socket, not shared memory
# (the shm path refuses a process that may not ptrace ours)
PAIR_EXPECT= pair ud_pingpong root nobody ibv_ud_pingpong -g 0 -n 200
PAIR_EXPECT= pair ud_pingpong nobody root ibv_ud_pingpong -g 0 -n 200
# the mediated path is taken whatever SOFTRNIC_TRANSPORT forces (shm: no
# TCP socket is opened at all; tcp: not through the host-wide port)
SOFTRNIC_TRANSPORT=shm pair rc_pingpong_shm_forced root nobody \
	ibv_rc_pingpong -g 0 -n 50
SOFTRNIC_TRANSPORT=tcp pair rc_pingpong_tcp_forced nobody root \
	ibv_rc_pingpong -g 0 -n 50

[ $fails = 0 ] && echo "cross_user: all pairs passed"
exit $fails
