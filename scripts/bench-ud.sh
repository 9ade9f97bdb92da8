#!/bin/bash
# UD against RC on one host (docs/BENCHMARKS.md, "UD"): perftest's
# ib_send_bw (8 B, tx depth 128, 3 s) and ib_send_lat (8 B, 20000
# iterations) over UD and RC, back to back in each round so both see the
# same machine, server on CPU 0, client on CPU 1, R rounds (medians).
# UD also over the network transport forced on this host (unix datagram
# sockets), for its cost. For ib_send_bw it also records the CPU time
# (user + system) each side got: on a shared machine the received rate
# follows how much CPU the server got while the client ran.
#   scripts/bench-ud.sh [R] [OUT]    (default 5, docs/bench-ud.md)
set -u
cd "$(dirname "$0")/.."
rounds=${1:-5}
out=${2:-docs/bench-ud.md}
lib=$PWD/build/lib
port=24000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }

# run TRANSPORT PROG ARGS...: the client's result line; each side's CPU
# seconds (user + system) in $work/s.cpu and $work/c.cpu
run() {
	local tr=$1 prog=$2
	shift 2
	port=$((port + 1))
	(
		TIMEFORMAT='%U %S'
		time SOFTRNIC_TRANSPORT=$tr LD_LIBRARY_PATH=$lib taskset -c 0 \
			timeout 60 "$prog" -d softrnic0 -x 0 -F -p $port "$@" \
			>"$work/s" 2>&1
	) 2>"$work/s.time" &
	sleep 0.5
	(
		TIMEFORMAT='%U %S'
		time SOFTRNIC_TRANSPORT=$tr LD_LIBRARY_PATH=$lib taskset -c 1 \
			timeout 60 "$prog" -d softrnic0 -x 0 -F -p $port "$@" \
			127.0.0.1 >"$work/c" 2>&1
	) 2>"$work/c.time"
	wait
	awk '{print $1 + $2}' "$work/s.time" >"$work/s.cpu"
	awk '{print $1 + $2}' "$work/c.time" >"$work/c.cpu"
	grep -A1 '#bytes' "$work/c" | tail -n 1
	# the server's figure on the same line (send_bw: what it received)
	grep -A1 '#bytes' "$work/s" | tail -n 1 >"$work/srv"
}

for _ in $(seq 1 "$rounds"); do
	for c in UD RC; do
		run auto ib_send_bw -c $c -s 8 -t 128 -D 3 | awk '{print $5}' >>"$work/bw_$c"
		awk '{print $5}' "$work/srv" >>"$work/rx_$c"
		cat "$work/s.cpu" >>"$work/scpu_$c"
		cat "$work/c.cpu" >>"$work/ccpu_$c"
		run auto ib_send_lat -c $c -s 8 -n 20000 | awk '{print $3}' >>"$work/lat_$c"
	done
	run tcp ib_send_bw -c UD -s 8 -t 128 -D 3 | awk '{print $5}' >>"$work/bw_UDnet"
	run tcp ib_send_lat -c UD -s 8 -n 20000 | awk '{print $3}' >>"$work/lat_UDnet"
done

bu=$(med <"$work/bw_UD") br=$(med <"$work/bw_RC") bn=$(med <"$work/bw_UDnet")
xu=$(med <"$work/rx_UD") xr=$(med <"$work/rx_RC")
lu=$(med <"$work/lat_UD") lr=$(med <"$work/lat_RC") ln=$(med <"$work/lat_UDnet")
su=$(med <"$work/scpu_UD") sr=$(med <"$work/scpu_RC")
cu=$(med <"$work/ccpu_UD") cr=$(med <"$work/ccpu_RC")
load=$(cut -d ' ' -f 1-3 /proc/loadavg)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else printf "-"}'; }
{
	echo "## UD against RC (one host)"
	echo
	echo "Made by \`scripts/bench-ud.sh $rounds\` on $(date -u +%Y-%m-%d)" \
		"(commit $(git rev-parse --short HEAD)); medians of $rounds rounds,"
	echo "UD and RC back to back in each round; ib_send_bw 8 B, tx depth 128,"
	echo "3 s; ib_send_lat 8 B, 20000 iterations (typical latency); server"
	echo "on CPU 0, client on CPU 1."
	echo
	echo "send_bw is the client's (sent) rate; a UD datagram that finds no"
	echo "receive WQE is dropped, so the server's (received) rate is shown too."
	echo
	echo "| path | send_bw M msg/s sent | x RC | received | x RC | send_lat typical (us) | x RC |"
	echo "|---|---|---|---|---|---|---|"
	echo "| RC, shm | $br | 1.00 | $xr | 1.00 | $lr | 1.00 |"
	echo "| UD, shm | $bu | $(ratio "$bu" "$br") | $xu | $(ratio "$xu" "$xr") | $lu | $(ratio "$lu" "$lr") |"
	echo "| UD, network transport forced (unix datagram sockets) | $bn | $(ratio "$bn" "$br") | - | - | $ln | $(ratio "$ln" "$lr") |"
	echo
	echo "CPU seconds each side of ib_send_bw got (user + system, whole"
	echo "process, set-up included; medians);"
	echo "load average at the end: $load."
	echo
	echo "| path | server CPU s | client CPU s |"
	echo "|---|---|---|"
	echo "| RC, shm | $sr | $cr |"
	echo "| UD, shm | $su | $cu |"
} | tee "$out"
