#!/bin/bash
# softrnic stat shows the path each connected QP uses: a pingpong pair is
# run over shm and over tcp (forced), and stat must list both QPs of the
# pair, in RTS, on that path.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
cli=$lib/../bin/softrnic
command -v ibv_rc_pingpong >/dev/null || { echo "skip: no ibverbs-utils"; exit 77; }
fail=0
for path in shm tcp; do
	port=$((20000 + RANDOM % 10000))
	LD_LIBRARY_PATH=$lib SOFTRNIC_TRANSPORT=$path timeout 60 \
		ibv_rc_pingpong -g 0 -p $port -n 50000000 >/dev/null 2>&1 &
	s=$!
	for _ in $(seq 1 100); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.05; done
	LD_LIBRARY_PATH=$lib SOFTRNIC_TRANSPORT=$path timeout 60 \
		ibv_rc_pingpong -g 0 -p $port -n 50000000 127.0.0.1 >/dev/null 2>&1 &
	c=$!
	out=""
	for _ in $(seq 1 50); do # until both QPs are connected
		out=$("$cli" stat)
		[ "$(echo "$out" | grep -c " RTS  *$path ")" -ge 2 ] && break
		sleep 0.1
	done
	echo "$out"
	kill $s $c 2>/dev/null
	wait $s $c 2>/dev/null
	if [ "$(echo "$out" | grep -c " RTS  *$path ")" -lt 2 ]; then
		echo "FAIL: stat does not show the pair on $path"
		fail=1
	fi
done
[ $fail = 0 ] && echo "stat OK"
exit $fail
