#!/bin/bash
# softrnic benchmark: measures, side by side in one run, the machine's own
# limits (cache-line ping-pong between two cores, memcpy bandwidth),
# unmodified perftest over softrnic, UCX (posix shared memory) and
# libfabric's shm provider; repeats everything R times interleaved (the
# machine is noisy) and writes the medians and ratios to docs/BENCHMARKS.md.
# As root it then does the same across two network namespaces over TCP
# (scripts/bench-tcp.sh; SOFTRNIC_BENCH_TCP=0 skips it).
#   scripts/bench.sh [REPEATS]        (default 5)
# Processes are pinned: server/target on CPU 0, client/initiator on CPU 1.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-5}
SOFTRNIC_BENCH_DEPS=1 ./scripts/install-deps.sh
./scripts/build.sh build >/dev/null
export LD_LIBRARY_PATH_SRN=$PWD/build/lib
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
port=$((30000 + RANDOM % 10000))

mkdir -p "$out/rec"
record() { echo "$2" >>"$out/rec/$1"; } # record KEY VALUE

wait_port() {
	for _ in $(seq 1 200); do
		ss -Hltn "sport = :$1" | grep . >/dev/null && return 0
		sleep 0.05
	done
}

# perftest over softrnic; prints the client's result row
perftest() {
	local prog=$1
	shift
	port=$((port + 1))
	LD_LIBRARY_PATH=$LD_LIBRARY_PATH_SRN taskset -c 0 timeout 120 \
		"$prog" -d softrnic0 -x 0 -p $port "$@" >"$out/srv" 2>&1 &
	local spid=$!
	wait_port $port
	LD_LIBRARY_PATH=$LD_LIBRARY_PATH_SRN taskset -c 1 timeout 120 \
		"$prog" -d softrnic0 -x 0 -p $port "$@" 127.0.0.1 2>&1 |
		grep -A1 -E '^ *#bytes' | tail -1
	wait $spid || true
}

ucx() { # ucx_perftest TEST SIZE ITERS -> "Final:" row
	port=$((port + 1))
	UCX_TLS=posix,self taskset -c 0 timeout 120 ucx_perftest -p $port \
		>/dev/null 2>&1 &
	local spid=$!
	sleep 0.5
	UCX_TLS=posix,self taskset -c 1 timeout 120 ucx_perftest -p $port \
		127.0.0.1 -t "$1" -s "$2" -n "$3" 2>&1 | grep '^Final:' || true
	wait $spid || true
}

fabric() { # fi_pingpong shm SIZE ITERS -> result row
	port=$((port + 1))
	taskset -c 0 timeout 120 fi_pingpong -p shm -e rdm -S "$1" -I "$2" \
		-B $port >/dev/null 2>&1 &
	local spid=$!
	sleep 0.5
	taskset -c 1 timeout 120 fi_pingpong -p shm -e rdm -S "$1" -I "$2" \
		-P $port 127.0.0.1 2>&1 | tail -1
	wait $spid || true
}

col() { awk -v c="$1" '{print $c}'; }

for r in $(seq 1 "$R"); do
	echo "round $r/$R"
	record line "$(./build/bin/linebench line 1000000)"
	record memcpy64k "$(./build/bin/linebench memcpy 65536)"
	record memcpy1m "$(./build/bin/linebench memcpy 1048576)"
	record line_b "$(./build/bin/linebench line 1000000)"
	for s in 8 4096; do
		for op in write read send; do
			v=$(perftest ib_${op}_lat -s $s -n 20000 | col 5)
			record ${op}_lat_$s "${v:-nan}"
		done
	done
	for op in write read send; do
		v=$(perftest ib_${op}_bw -s 8 -n 200000 | col 5)
		record ${op}_bw_8 "${v:-nan}"
		v=$(perftest ib_${op}_bw -s 65536 -n 10000 | col 4)
		record ${op}_bw_64k "${v:-nan}"
		v=$(perftest ib_${op}_bw -s 1048576 -n 1000 | col 4)
		record ${op}_bw_1m "${v:-nan}"
	done
	record ucx_put_lat "$(ucx ucp_put_lat 8 200000 | col 3)"
	record ucx_tag_lat "$(ucx tag_lat 8 200000 | col 3)"
	record ucx_put_bw_64k "$(ucx ucp_put_bw 65536 20000 | col 6)"
	record ucx_put_bw_1m "$(ucx ucp_put_bw 1048576 2000 | col 6)"
	record ucx_tag_bw_64k "$(ucx tag_bw 65536 20000 | col 6)"
	record ucx_tag_bw_1m "$(ucx tag_bw 1048576 2000 | col 6)"
	record fi_lat "$(fabric 8 100000 | col 7)"
	record fi_bw_64k "$(fabric 65536 10000 | col 6)"
	record fi_bw_1m "$(fabric 1048576 1000 | col 6)"
done

med() { # median of a recorded series
	sort -g "$out/rec/$1" | awk '{a[NR]=$1} END {if (NR==0) print "nan";
		else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b+0==0) print "n/a";
	else printf "%.2f", a/b}'; }
us2ns() { awk -v a="$1" 'BEGIN {printf "%.0f", a*1000}'; }
# fi_pingpong prints sizes like "1.2g": MB/s is already plain
LINE=$(awk -v a="$(med line)" -v b="$(med line_b)" 'BEGIN {printf "%.1f", (a+b)/2}')
M64=$(med memcpy64k)
M1M=$(med memcpy1m)
UPUT=$(us2ns "$(med ucx_put_lat)")
UTAG=$(us2ns "$(med ucx_tag_lat)")
FIL=$(us2ns "$(med fi_lat)")

{
	echo "# softrnic benchmarks"
	echo
	echo "Made by \`scripts/bench.sh $R\` on $(date -u +%Y-%m-%d) (commit"
	echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown))."
	echo "Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')),"
	echo "$(uname -r). Every figure is the median of $R rounds; in each round"
	echo "the machine's limits, softrnic, UCX and libfabric run back to back,"
	echo "server/target pinned to CPU 0 and client/initiator to CPU 1."
	echo "Latencies are one-way (perftest t_typical, UCX 50th percentile,"
	echo "fi_pingpong usec/xfer); bandwidths in MB/s (10^6 B/s)."
	echo
	echo "## Limits of this machine"
	echo
	echo "| measure | value |"
	echo "|---|---|"
	echo "| cache-line one-way latency, two processes, CPU 0 <-> 1 | ${LINE} ns |"
	echo "| memcpy, one thread, 64 KiB | ${M64} MB/s |"
	echo "| memcpy, one thread, 1 MiB | ${M1M} MB/s |"
	echo
	echo "## Latency (ns, one-way)"
	echo
	echo "| test | softrnic | x line | UCX put | UCX tag | libfabric shm | softrnic / best peer |"
	echo "|---|---|---|---|---|---|---|"
	for s in 8 4096; do
		for op in write read send; do
			v=$(us2ns "$(med ${op}_lat_$s)")
			peer=$UPUT
			[ $op = send ] && peer=$UTAG
			best=$(printf '%s\n' "$peer" "$FIL" | sort -g | head -1)
			echo "| ib_${op}_lat ${s} B | $v | $(ratio "$v" "$LINE") | $UPUT | $UTAG | $FIL | $(ratio "$v" "$best") |"
		done
	done
	echo
	echo "(UCX and libfabric rows are 8-byte messages.)"
	echo
	echo "## Bandwidth (MB/s) and message rate"
	echo
	echo "| test | softrnic | x memcpy | UCX put | UCX tag | libfabric shm |"
	echo "|---|---|---|---|---|---|"
	for op in write read send; do
		echo "| ib_${op}_bw 8 B (Mpps) | $(med ${op}_bw_8) | | | | |"
		echo "| ib_${op}_bw 64 KiB | $(med ${op}_bw_64k) | $(ratio "$(med ${op}_bw_64k)" "$M64") | $(med ucx_put_bw_64k) | $(med ucx_tag_bw_64k) | $(med fi_bw_64k) |"
		echo "| ib_${op}_bw 1 MiB | $(med ${op}_bw_1m) | $(ratio "$(med ${op}_bw_1m)" "$M1M") | $(med ucx_put_bw_1m) | $(med ucx_tag_bw_1m) | $(med fi_bw_1m) |"
	done
	echo
	echo "## Raw series"
	echo
	echo '```'
	for f in $(ls "$out/rec"); do
		printf '%-16s %s\n' "$f" "$(tr '\n' ' ' <"$out/rec/$f")"
	done
	echo '```'
} >"$out/md"
# across hosts (two network namespaces), when root
if [ "$(id -u)" = 0 ] && [ "${SOFTRNIC_BENCH_TCP:-1}" = 1 ]; then
	./scripts/bench-tcp.sh "$R" >>"$out/md" || echo "(TCP phase failed)" >>"$out/md"
fi
# the analysis of the figures, kept by hand in step with them
[ -f docs/bench-analysis.md ] && cat docs/bench-analysis.md >>"$out/md"
# the last A/B of two builds (scripts/bench-ab.sh), with its own command
[ -f docs/bench-ab.md ] && { echo; cat docs/bench-ab.md; } >>"$out/md"
cp "$out/md" docs/BENCHMARKS.md
cat docs/BENCHMARKS.md
