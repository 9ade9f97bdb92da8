#!/bin/bash
# One side of an unmodified socket program (iperf3) carried over softrnic
# by rdma-core's librspreload.so (LD_PRELOAD: socket calls become
# rsocket calls of softrnic's librdmacm). cm_pair.sh runs the pair:
#
#   rs_preload.sh server ADDR PORT   iperf3 -s for one test (exec'ed, so
#                                    that cm_pair.sh sees its pid listen)
#   rs_preload.sh client ADDR PORT [iperf3 options]
#
# The client then checks that the kernel's TCP carried nothing on PORT
# (the preload library falls back to a real socket when rsockets fail):
# any TCP connection there leaves a socket (TIME-WAIT at least).
#
# Exit: 0 pass, 1 fail, 77 skip (iperf3 or librspreload.so missing).
set -uo pipefail
role=$1 addr=$2 port=$3
shift 3
preload=${SRN_RSPRELOAD:-/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so}
[ -e "$preload" ] || { echo "SKIP: no $preload"; exit 77; }
command -v iperf3 >/dev/null 2>&1 || { echo "SKIP: iperf3 is not installed"; exit 77; }
if [ "$role" = server ]; then
	exec env LD_PRELOAD="$preload" iperf3 -s -1 -B "$addr" -p "$port"
fi
env LD_PRELOAD="$preload" iperf3 -c "$addr" -p "$port" -t 2 -f m "$@"
rc=$?
[ $rc = 0 ] || exit $rc
if ss -Htan "( sport = :$port or dport = :$port )" | grep . >/dev/null; then
	echo "FAIL: the kernel's TCP carried connections on port $port:"
	ss -tan "( sport = :$port or dport = :$port )"
	exit 1
fi
echo "no kernel TCP connection on port $port: rsockets carried it"
