#!/bin/bash
# The SEND path against UCX's tag matching on one host (issue 9's speed
# goals: 8 B SEND message rate >= 1.0x UCX tag_bw, latency <= 1.0x UCX
# tag_lat): perftest's ib_send_bw (8 B, 1,000,000 messages) and
# ib_send_lat (8 B, 100,000 iterations, typical) over softrnic, and
# ucx_perftest's tag_bw and tag_lat (8 B, UCX_TLS=posix,self: UCX's own
# shared memory), with the machine's cache-line one-way latency
# (build/bin/linebench) measured in the same round, since it swings from
# minute to minute. Every pair back to back in each round, which goes
# first alternating; server on CPU 0, client on CPU 1; medians of R
# rounds, and the medians of the per-round ratios.
#   scripts/bench-send.sh [R] [OUT]    (default 5, docs/bench-send.md)
set -u
cd "$(dirname "$0")/.."
rounds=${1:-5}
out=${2:-docs/bench-send.md}
lib=$PWD/build/lib
port=$((26000 + RANDOM % 4000))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a != "" && b > 0) printf "%.2f", a / b; else printf "-"}'; }

perf() { # PROG ARGS... -> the client's result row
	local prog=$1
	shift
	port=$((port + 1))
	LD_LIBRARY_PATH=$lib taskset -c 0 timeout 60 "$prog" -d softrnic0 \
		-x 0 -F -p $port "$@" >/dev/null 2>&1 &
	sleep 0.3
	LD_LIBRARY_PATH=$lib taskset -c 1 timeout 60 "$prog" -d softrnic0 \
		-x 0 -F -p $port "$@" 127.0.0.1 2>&1 |
		grep -A1 -E '^ *#bytes' | tail -n 1
	wait
}

ucx() { # TEST ITERS -> the "Final:" row, 8 B
	port=$((port + 1))
	UCX_TLS=posix,self taskset -c 0 timeout 60 ucx_perftest -p $port \
		>/dev/null 2>&1 &
	sleep 0.5
	UCX_TLS=posix,self taskset -c 1 timeout 60 ucx_perftest -p $port \
		127.0.0.1 -t "$1" -s 8 -n "$2" 2>&1 | grep '^Final:'
	wait
}

soft_bw() { perf ib_send_bw -s 8 -n 1000000 | awk '{print $5}'; }
ucx_bw() { ucx tag_bw 2000000 | awk '{printf "%.6f\n", $9 / 1e6}'; }
soft_lat() { perf ib_send_lat -s 8 -n 100000 | awk '{print $5}'; }
ucx_lat() { ucx tag_lat 200000 | awk '{print $3}'; }

pair() { # NAME A B: runs A and B back to back, in turn first
	local a b
	if [ $(($2 % 2)) = 0 ]; then
		a=$($3)
		b=$($4)
	else
		b=$($4)
		a=$($3)
	fi
	echo "$a" >>"$work/$1_soft"
	echo "$b" >>"$work/$1_ucx"
	echo "$(ratio "$a" "$b")" >>"$work/$1_ratio"
	echo
}

for r in $(seq 1 "$rounds"); do
	./build/bin/linebench line 1000000 >>"$work/line"
	pair bw "$r" soft_bw ucx_bw >/dev/null
	pair lat "$r" soft_lat ucx_lat >/dev/null
done

line=$(med <"$work/line")
load=$(cut -d ' ' -f 1-3 /proc/loadavg)
{
	echo "Made by \`scripts/bench-send.sh $rounds\` on $(date -u +%Y-%m-%d)" \
		"$(date -u +%H:%M) UTC (commit $(git rev-parse --short HEAD)); medians"
	echo "of $rounds rounds, softrnic and UCX back to back in each round; 8 B"
	echo "messages; server on CPU 0, client on CPU 1; cache-line one-way"
	echo "latency in the same rounds: $line ns (series: $(tr '\n' ' ' <"$work/line"));"
	echo "load average at the end: $load."
	echo
	echo "| measure | softrnic (ib_send_*) | UCX tag (posix) | softrnic / UCX | median of the rounds' ratios |"
	echo "|---|---|---|---|---|"
	echo "| message rate (M msg/s) | $(med <"$work/bw_soft") | $(med <"$work/bw_ucx") | $(ratio "$(med <"$work/bw_soft")" "$(med <"$work/bw_ucx")") | $(med <"$work/bw_ratio") |"
	echo "| latency, one-way typical (us) | $(med <"$work/lat_soft") | $(med <"$work/lat_ucx") | $(ratio "$(med <"$work/lat_soft")" "$(med <"$work/lat_ucx")") | $(med <"$work/lat_ratio") |"
	echo
	echo "Series: rate softrnic $(tr '\n' ' ' <"$work/bw_soft"); UCX $(tr '\n' ' ' <"$work/bw_ucx");"
	echo "latency softrnic $(tr '\n' ' ' <"$work/lat_soft"); UCX $(tr '\n' ' ' <"$work/lat_ucx")."
} | tee "$out"
