#!/bin/bash
# Small messages across hosts (docs/BENCHMARKS.md, "Batching requests over
# TCP"): two network namespaces joined by a veth pair (created here,
# deleted on exit), server in A on CPU 0, client in B on CPU 1. Per round,
# back to back: UCX tag_bw and tag_lat 8 B over softrnic (rc_verbs on its
# TCP transport) and over UCX's own tcp transport; perftest ib_send_bw and
# ib_write_bw 8 B (message rate), ib_write_bw 64 KiB (bandwidth), and
# ib_send_lat and ib_write_lat 8 B over softrnic. With LIB_BEFORE=DIR (a
# build's lib/ directory, its bin/softrnic beside it) every softrnic figure
# is also taken with that library, in the same round. Medians of R rounds,
# as Markdown, to OUT.
#   scripts/bench-tcp-rate.sh [R] [OUT]    (root; default 3, stdout)
set -u
cd "$(dirname "$0")/.."
rounds=${1:-3}
out=${2:-/dev/stdout}
[ "$(id -u)" = 0 ] || { echo "needs root (namespaces)" >&2; exit 77; }
libs=("$PWD/build/lib")
names=(now)
if [ -n "${LIB_BEFORE:-}" ]; then
	libs+=("$LIB_BEFORE")
	names+=(before)
fi
bin=$PWD/build/bin
work=$(mktemp -d)
A=srntr$$a B=srntr$$b SA=198.51.100.1
cleanup() {
	for ns in $A $B; do
		ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del $ns 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
ip netns add $A && ip netns add $B &&
	ip link add va$$ type veth peer name vb$$ || exit 1
ip link set va$$ netns $A
ip link set vb$$ netns $B
ip -n $A addr add $SA/24 dev va$$
ip -n $B addr add 198.51.100.2/24 dev vb$$
for ns in $A $B; do ip -n $ns link set lo up; done
ip -n $A link set va$$ up
ip -n $B link set vb$$ up
port=$((30000 + RANDOM % 5000))

med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }
rec() { echo "$2" >>"$work/$1"; }
col() { awk -v c="$1" '{print $c}'; }
inA() { ip netns exec $A env SOFTRNIC_IP=$SA taskset -c 0 "$@"; }
inB() { ip netns exec $B env SOFTRNIC_IP=198.51.100.2 taskset -c 1 "$@"; }

# ucx LIB TLS TEST N: the client's Final row (LIB empty: UCX alone)
ucx() {
	local pre=() s
	port=$((port + 1))
	# softrnic exec of that build: its libraries first, and the device
	# node UCX looks for (docs/engines.md)
	[ -n "$1" ] && pre=(env UCX_NET_DEVICES=softrnic0:1 "$1/../bin/softrnic"
		exec --)
	inA env UCX_TLS="$2" "${pre[@]}" timeout 60 ucx_perftest -p $port \
		>/dev/null 2>&1 &
	s=$!
	sleep 0.7
	inB env UCX_TLS="$2" "${pre[@]}" timeout 60 ucx_perftest -p $port $SA \
		-t "$3" -n "$4" 2>&1 | grep '^Final:'
	sleep 0.5
	kill -9 $s 2>/dev/null
	wait $s 2>/dev/null
}

# pt LIB PROG ARGS...: perftest's result row
pt() {
	local lib=$1 prog=$2 s
	shift 2
	port=$((port + 1))
	inA env LD_LIBRARY_PATH="$lib" timeout 60 "$prog" -d softrnic0 -x 0 \
		-F -p $port "$@" >/dev/null 2>&1 &
	s=$!
	sleep 0.5
	inB env LD_LIBRARY_PATH="$lib" timeout 60 "$prog" -d softrnic0 -x 0 \
		-F -p $port "$@" $SA 2>&1 | grep -A1 -E '^ *#bytes' | tail -1
	wait $s 2>/dev/null
}

V=rc_verbs,ud_verbs,self
for r in $(seq 1 "$rounds"); do
	echo "round $r/$rounds" >&2
	rec ucx_tcp_bw "$(ucx "" tcp,self tag_bw 200000 | col 9)"
	rec ucx_tcp_lat "$(ucx "" tcp,self tag_lat 20000 | col 3)"
	for i in "${!libs[@]}"; do
		l=${libs[$i]} n=${names[$i]}
		rec ${n}_ucx_bw "$(ucx "$l" $V tag_bw 200000 | col 9)"
		rec ${n}_ucx_lat "$(ucx "$l" $V tag_lat 20000 | col 3)"
		rec ${n}_send_bw "$(pt "$l" ib_send_bw -s 8 -n 200000 | col 5)"
		rec ${n}_write_bw "$(pt "$l" ib_write_bw -s 8 -n 200000 | col 5)"
		rec ${n}_write_64k "$(pt "$l" ib_write_bw -s 65536 -n 2000 | col 4)"
		rec ${n}_send_lat "$(pt "$l" ib_send_lat -s 8 -n 20000 | col 5)"
		rec ${n}_write_lat "$(pt "$l" ib_write_lat -s 8 -n 20000 | col 5)"
	done
done

m() { med <"$work/$1" 2>/dev/null || echo -; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-"}'; }
{
	echo "Made by \`scripts/bench-tcp-rate.sh $rounds\` on $(date -u '+%Y-%m-%d %H:%M UTC')" \
		"(commit $(git rev-parse --short HEAD)${LIB_BEFORE:+; before: $LIB_BEFORE});"
	echo "medians of $rounds rounds, everything back to back in each round;"
	echo "two namespaces over a veth, server on CPU 0, client on CPU 1."
	echo
	echo "| test | $(for n in "${names[@]}"; do printf 'softrnic %s | ' "$n"; done)UCX tcp | now / UCX tcp |"
	echo "|---|$(for _ in "${names[@]}"; do printf -- '---|'; done)---|---|"
	row() { # label key ucxkey
		printf '| %s |' "$1"
		for n in "${names[@]}"; do printf ' %s |' "$(m ${n}_$2)"; done
		if [ -n "$3" ]; then
			printf ' %s | %s |\n' "$(m $3)" "$(ratio "$(m now_$2)" "$(m $3)")"
		else
			printf ' | |\n'
		fi
	}
	row "UCX tag_bw 8 B (msg/s)" ucx_bw ucx_tcp_bw
	row "UCX tag_lat 8 B p50 (us)" ucx_lat ucx_tcp_lat
	row "ib_send_bw 8 B (Mpps)" send_bw ""
	row "ib_write_bw 8 B (Mpps)" write_bw ""
	row "ib_write_bw 64 KiB (MB/s)" write_64k ""
	row "ib_send_lat 8 B typical (us)" send_lat ""
	row "ib_write_lat 8 B typical (us)" write_lat ""
	echo
	echo '```'
	for f in "$work"/*; do printf '%-16s %s\n' "$(basename "$f")" "$(tr '\n' ' ' <"$f")"; done
	echo '```'
} >"$out"
