#!/bin/bash
# softrnic across hosts: two network namespaces joined by a veth pair
# (created here, deleted on exit). Measures, side by side and interleaved,
# the TCP limits of that link (iperf3 single stream, a busy-polling TCP
# ping-pong), perftest over softrnic (which uses its TCP transport there),
# UCX (UCX_TLS=tcp) and libfabric's tcp provider. Prints a Markdown section
# (medians of R rounds) on stdout; scripts/bench.sh appends it to
# docs/BENCHMARKS.md.
#   scripts/bench-tcp.sh [REPEATS]     (root; default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-3}
[ "$(id -u)" = 0 ] || { echo "bench-tcp: needs root (network namespaces)" >&2; exit 77; }
lib=$PWD/build/lib
A=srnbench$$a
B=srnbench$$b
out=$(mktemp -d)
cleanup() {
	for ns in $A $B; do
		ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		ip netns del $ns 2>/dev/null || true
	done
	rm -rf "$out"
}
trap cleanup EXIT
ip netns add $A
ip netns add $B
ip link add va$$ type veth peer name vb$$
ip link set va$$ netns $A
ip link set vb$$ netns $B
ip -n $A addr add 198.51.100.1/24 dev va$$
ip -n $B addr add 198.51.100.2/24 dev vb$$
for ns in $A $B; do ip -n $ns link set lo up; done
ip -n $A link set va$$ up
ip -n $B link set vb$$ up
SA=198.51.100.1
mkdir -p "$out/rec"
record() { echo "$2" >>"$out/rec/$1"; }
inA() { ip netns exec $A taskset -c 0 "$@"; }
inB() { ip netns exec $B taskset -c 1 "$@"; }
port=$((30000 + RANDOM % 5000))
wait_port() {
	for _ in $(seq 1 200); do
		ip netns exec $A ss -Hltn "sport = :$1" | grep . >/dev/null && return 0
		sleep 0.05
	done
}

perftest() { # prog args... -> client's result row
	local prog=$1
	shift
	port=$((port + 1))
	inA env LD_LIBRARY_PATH=$lib SOFTRNIC_IP=$SA timeout 120 "$prog" \
		-d softrnic0 -x 0 -F -p $port "$@" >/dev/null 2>&1 &
	local s=$!
	wait_port $port
	inB env LD_LIBRARY_PATH=$lib SOFTRNIC_IP=198.51.100.2 timeout 120 \
		"$prog" -d softrnic0 -x 0 -F -p $port "$@" $SA 2>&1 |
		grep -A1 -E '^ *#bytes' | tail -1 || true
	wait $s || true
}

ucx() { # test size iters -> Final row
	port=$((port + 1))
	inA env UCX_TLS=tcp timeout 120 ucx_perftest -p $port >/dev/null 2>&1 &
	local s=$!
	sleep 0.5
	inB env UCX_TLS=tcp timeout 120 ucx_perftest -p $port $SA -t "$1" \
		-s "$2" -n "$3" 2>&1 | grep '^Final:' || true
	wait $s || true
}

fabric() { # size iters -> row
	port=$((port + 1))
	inA timeout 120 fi_pingpong -p tcp -e rdm -S "$1" -I "$2" -B $port \
		>/dev/null 2>&1 &
	local s=$!
	sleep 0.5
	inB timeout 120 fi_pingpong -p tcp -e rdm -S "$1" -I "$2" -P $port $SA \
		2>&1 | tail -1 || true
	wait $s || true
}

col() { awk -v c="$1" '{print $c}'; }

for r in $(seq 1 "$R"); do
	echo "tcp round $r/$R" >&2
	port=$((port + 1))
	inA iperf3 -s -1 -p $port >/dev/null 2>&1 &
	wait_port $port
	bps=$(inB iperf3 -c $SA -p $port -t 3 -J 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' ||
		echo nan)
	record iperf3 "$(awk -v b="$bps" 'BEGIN {printf "%.0f", b/8/1e6}')"
	wait || true
	port=$((port + 1))
	inA ./build/bin/tcp_pingpong server $port >/dev/null 2>&1 &
	s=$!
	wait_port $port
	pp=$(inB ./build/bin/tcp_pingpong client $SA $port 50000)
	record tcp_pp "$(echo "$pp" | col 1)"
	record tcp_pp_avg "$(echo "$pp" | col 2)"
	kill $s 2>/dev/null || true
	for op in write send; do
		row=$(perftest ib_${op}_lat -s 8 -n 20000)
		record ${op}_lat "$(echo "$row" | col 5)"
		record ${op}_lat_avg "$(echo "$row" | col 6)"
		record ${op}_bw_64k "$(perftest ib_${op}_bw -s 65536 -n 2000 | col 4)"
		record ${op}_bw_1m "$(perftest ib_${op}_bw -s 1048576 -n 300 | col 4)"
	done
	row=$(ucx ucp_put_lat 8 50000)
	record ucx_put_lat "$(echo "$row" | col 3)"
	record ucx_put_lat_avg "$(echo "$row" | col 5)"
	row=$(ucx tag_lat 8 50000)
	record ucx_tag_lat "$(echo "$row" | col 3)"
	record ucx_tag_lat_avg "$(echo "$row" | col 5)"
	record ucx_put_bw_1m "$(ucx ucp_put_bw 1048576 500 | col 6)"
	record ucx_tag_bw_1m "$(ucx tag_bw 1048576 500 | col 6)"
	record fi_lat "$(fabric 8 20000 | col 7)"
	record fi_bw_1m "$(fabric 1048576 300 | col 6)"
done

med() {
	sort -g "$out/rec/$1" | awk '{a[NR]=$1} END {if (NR==0) print "nan";
		else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b+0==0) print "n/a";
	else printf "%.2f", a/b}'; }
us2ns() { awk -v a="$1" 'BEGIN {printf "%.0f", a*1000}'; }
IPF=$(med iperf3)
PP=$(med tcp_pp)
PPA=$(med tcp_pp_avg)
cat <<EOF

## Across hosts: TCP transport, two network namespaces over a veth pair

Made by \`scripts/bench-tcp.sh $R\` (medians of $R rounds; server side in
namespace A on CPU 0, client side in B on CPU 1). Limits of the link:
iperf3, one stream: **$IPF MB/s**; busy-polling TCP ping-pong, 8 B:
**$PP ns** one-way typical (median), $PPA ns mean. Latency rows compare
like with like: perftest's t_typical with the ping-pong's median, and
t_avg with its mean; UCX gives both (50th percentile, overall mean);
libfabric's fi_pingpong gives a mean only.

| test | softrnic | vs limit | UCX tcp | libfabric tcp |
|---|---|---|---|---|
| ib_write_lat 8 B, typical (ns) | $(us2ns "$(med write_lat)") | $(ratio "$(us2ns "$(med write_lat)")" "$PP") x ping-pong | put $(us2ns "$(med ucx_put_lat)") | |
| ib_write_lat 8 B, mean (ns) | $(us2ns "$(med write_lat_avg)") | $(ratio "$(us2ns "$(med write_lat_avg)")" "$PPA") x ping-pong | put $(us2ns "$(med ucx_put_lat_avg)") | $(us2ns "$(med fi_lat)") |
| ib_send_lat 8 B, typical (ns) | $(us2ns "$(med send_lat)") | $(ratio "$(us2ns "$(med send_lat)")" "$PP") x ping-pong | tag $(us2ns "$(med ucx_tag_lat)") | |
| ib_send_lat 8 B, mean (ns) | $(us2ns "$(med send_lat_avg)") | $(ratio "$(us2ns "$(med send_lat_avg)")" "$PPA") x ping-pong | tag $(us2ns "$(med ucx_tag_lat_avg)") | $(us2ns "$(med fi_lat)") |
| ib_write_bw 64 KiB (MB/s) | $(med write_bw_64k) | $(ratio "$(med write_bw_64k)" "$IPF") x iperf3 | | |
| ib_write_bw 1 MiB (MB/s) | $(med write_bw_1m) | $(ratio "$(med write_bw_1m)" "$IPF") x iperf3 | put $(med ucx_put_bw_1m) | $(med fi_bw_1m) |
| ib_send_bw 64 KiB (MB/s) | $(med send_bw_64k) | $(ratio "$(med send_bw_64k)" "$IPF") x iperf3 | | |
| ib_send_bw 1 MiB (MB/s) | $(med send_bw_1m) | $(ratio "$(med send_bw_1m)" "$IPF") x iperf3 | tag $(med ucx_tag_bw_1m) | $(med fi_bw_1m) |

Raw series:

\`\`\`
$(for f in $(ls "$out/rec"); do printf '%-16s %s\n' "$f" "$(tr '\n' ' ' <"$out/rec/$f")"; done)
\`\`\`
EOF
