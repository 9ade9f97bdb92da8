#!/bin/bash
# Many connections (docs/BENCHMARKS.md, "Many QPs"): perftest's
# ib_write_bw with 8-byte WRITEs over 1, 64, 1024 and 4000 RC QP pairs
# between two processes on this host, tx depth 128 per QP, pinned to the
# two CPUs, R rounds each (median). For each count: the message rate and
# its ratio to one QP, the client's setup time (wall time minus the 4 s
# of traffic), its resident memory and open fds per QP (read from /proc
# while the traffic runs). A count that cannot run (out of fds, say) is
# reported with perftest's error.
#   scripts/bench-qps.sh [R] [OUT]    (default 3, docs/bench-qps.md)
set -u
cd "$(dirname "$0")/.."
rounds=${1:-3}
out=${2:-docs/bench-qps.md}
lib=$PWD/build/lib
port=23000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }

# one round with q QPs: "mpps setup_s rss_kb fds" or "fail <why>"
one() {
	local q=$1 cpid fds=0 rss=0 t0 t1
	port=$((port + 1))
	LD_LIBRARY_PATH=$lib taskset -c 0 timeout 300 ib_write_bw -d softrnic0 \
		-x 0 -s 8 -q "$q" -t 128 -D 4 -F -p $port >"$work/s" 2>&1 &
	sleep 0.5
	t0=$(date +%s.%N)
	LD_LIBRARY_PATH=$lib taskset -c 1 timeout 300 ib_write_bw -d softrnic0 \
		-x 0 -s 8 -q "$q" -t 128 -D 4 -F -p $port 127.0.0.1 \
		>"$work/c" 2>&1 &
	cpid=$!
	sleep 3.5 # inside the 4 s of traffic, once set up
	local pid
	pid=$(pgrep -P "$cpid" -f ib_write_bw | head -n 1)
	pid=${pid:-$cpid}
	if [ -d /proc/"$pid" ]; then
		fds=$(ls /proc/"$pid"/fd 2>/dev/null | wc -l)
		rss=$(awk '/VmRSS/ {print $2}' /proc/"$pid"/status 2>/dev/null)
	fi
	wait "$cpid"
	t1=$(date +%s.%N)
	wait
	local mpps
	mpps=$(grep -A1 '#bytes' "$work/c" | tail -n 1 | awk '{print $5}')
	if [ -z "$mpps" ]; then
		echo "fail $(cat "$work/s" "$work/c" | grep -m1 -E 'softrnic\[|rror|ouldn' |
			sed 's/softrnic\[[0-9]*\] //' | head -c 100)"
		return
	fi
	echo "$mpps $(awk -v a="$t1" -v b="$t0" 'BEGIN {printf "%.2f", a - b - 4}') $rss $fds"
}

{
	echo "## Many QPs"
	echo
	echo "Made by \`scripts/bench-qps.sh $rounds\` on $(date -u +%Y-%m-%d)" \
		"(commit $(git rev-parse --short HEAD)); medians of $rounds rounds."
	echo "ib_write_bw, 8 B WRITEs, tx depth 128 per QP, 4 s, server on CPU 0,"
	echo "client on CPU 1; setup = the client's wall time minus the 4 s of"
	echo "traffic (device open, QPs created and connected, perftest's own"
	echo "exchange; about 1.2 s of it is perftest's start-up with one QP), and"
	echo "the cost of each QP beyond the first; memory and fds are the"
	echo "client's, during the traffic."
	echo
	echo "| QPs | M msg/s | x 1 QP | setup (s) | per added QP (ms) | RSS (MB) | KB per QP | fds |"
	echo "|---|---|---|---|---|---|---|---|"
	base=""
	for q in 1 64 1024 4000; do
		: >"$work/r"
		fail=""
		for _ in $(seq 1 "$rounds"); do
			r=$(one "$q")
			case $r in fail*) fail=${r#fail }; break ;; esac
			echo "$r" >>"$work/r"
		done
		if [ -n "$fail" ]; then
			echo "| $q | did not run: $fail | | | | | | |"
			continue
		fi
		m=$(cut -d' ' -f1 "$work/r" | med)
		s=$(cut -d' ' -f2 "$work/r" | med)
		k=$(cut -d' ' -f3 "$work/r" | med)
		f=$(cut -d' ' -f4 "$work/r" | med)
		[ -z "$base" ] && base=$m && s1=$s
		echo "| $q | $m | $(awk -v a="$m" -v b="$base" 'BEGIN {printf "%.2f", a / b}') | $s |" \
			"$(awk -v s="$s" -v a="$s1" -v q="$q" 'BEGIN {if (q > 1) printf "%.2f", (s - a) * 1000 / (q - 1); else printf "-"}') |" \
			"$(awk -v k="$k" 'BEGIN {printf "%.1f", k / 1024}') |" \
			"$(awk -v k="$k" -v q="$q" 'BEGIN {printf "%.0f", k / q}') | $f |"
	done
} | tee "$out"
