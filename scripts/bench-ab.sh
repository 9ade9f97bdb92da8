#!/bin/bash
# A/B benchmark of two softrnic builds in one run: unmodified perftest over
# build A's and build B's libibverbs.so.1, the two interleaved in every
# round (which goes first alternates), on one host (shared memory) and, as
# root, between two network namespaces (TCP). Prints a Markdown section
# with the medians of R rounds and B/A ratios, and writes it to
# docs/bench-ab.md (scripts/bench.sh appends that file to
# docs/BENCHMARKS.md). Use it to show that a change costs nothing.
#   scripts/bench-ab.sh LIBDIR_A LIBDIR_B [REPEATS] [LABEL_A] [LABEL_B]
# LIBDIR_* hold libibverbs.so.1 (e.g. a worktree's build/lib).
# SOFTRNIC_AB_ROWS=REGEX runs only the rows whose names match.
# SOFTRNIC_AB_CALLGRIND=1 also counts, with valgrind's callgrind (exact,
# whatever the machine's noise), the instructions ibv_post_send runs per WR
# in perftest's client, doorbell and execution included (8 B ib_write_bw
# and ib_send_bw, 100,000 WRs).
# Pinned: server/target on CPU 0, client/initiator on CPU 1.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,12p "$0" >&2; exit 2; }
LA=$(cd "$1" && pwd)
LB=$(cd "$2" && pwd)
R=${3:-5}
NA=${4:-A}
NB=${5:-B}
for d in "$LA" "$LB"; do
	[ -e "$d/libibverbs.so.1" ] || { echo "no libibverbs.so.1 in $d" >&2; exit 2; }
done
out=$(mktemp -d)
NSA=srnab$$a
NSB=srnab$$b
cleanup() {
	for ns in $NSA $NSB; do
		ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		ip netns del $ns 2>/dev/null || true
	done
	rm -rf "$out"
}
trap cleanup EXIT
mkdir -p "$out/rec"
record() { echo "$2" >>"$out/rec/$1"; }
port=$((40000 + RANDOM % 10000))

wait_port() { # port [netns]
	for _ in $(seq 1 200); do
		${2:+ip netns exec $2} ss -Hltn "sport = :$1" | grep . >/dev/null && return 0
		sleep 0.05
	done
}

shm_perftest() { # libdir prog args... -> the client's result row
	local lib=$1 prog=$2
	shift 2
	port=$((port + 1))
	LD_LIBRARY_PATH=$lib taskset -c 0 timeout 120 "$prog" -d softrnic0 \
		-x 0 -F -p $port "$@" >/dev/null 2>&1 &
	local s=$!
	wait_port $port
	LD_LIBRARY_PATH=$lib taskset -c 1 timeout 120 "$prog" -d softrnic0 \
		-x 0 -F -p $port "$@" 127.0.0.1 2>&1 |
		grep -A1 -E '^ *#bytes' | tail -1 || true
	wait $s || true
}

tcp_perftest() { # libdir prog args... (two namespaces)
	local lib=$1 prog=$2
	shift 2
	port=$((port + 1))
	ip netns exec $NSA taskset -c 0 env LD_LIBRARY_PATH=$lib \
		SOFTRNIC_IP=198.51.100.1 timeout 120 "$prog" -d softrnic0 -x 0 \
		-F -p $port "$@" >/dev/null 2>&1 &
	local s=$!
	wait_port $port $NSA
	ip netns exec $NSB taskset -c 1 env LD_LIBRARY_PATH=$lib \
		SOFTRNIC_IP=198.51.100.2 timeout 120 "$prog" -d softrnic0 -x 0 \
		-F -p $port "$@" 198.51.100.1 2>&1 |
		grep -A1 -E '^ *#bytes' | tail -1 || true
	wait $s || true
}

col() { awk -v c="$1" '{print $c}'; }

# name | runner | program and arguments | column (lat: t_typical; bw: MB/s
# or Mpps) -- one line per row of the table
ROWS="shm_write_lat_8|shm|ib_write_lat -s 8 -n 20000|5
shm_read_lat_8|shm|ib_read_lat -s 8 -n 20000|5
shm_send_lat_8|shm|ib_send_lat -s 8 -n 20000|5
shm_write_lat_4k|shm|ib_write_lat -s 4096 -n 20000|5
shm_write_bw_8|shm|ib_write_bw -s 8 -n 200000|5
shm_send_bw_8|shm|ib_send_bw -s 8 -n 200000|5
shm_read_bw_8|shm|ib_read_bw -s 8 -n 200000|5
shm_write_bw_64k|shm|ib_write_bw -s 65536 -n 10000|4
shm_send_bw_1m|shm|ib_send_bw -s 1048576 -n 1000|4
shm_ud_send_lat_8|shm|ib_send_lat -c UD -s 8 -n 20000|5
shm_ud_send_bw_8|shm|ib_send_bw -c UD -s 8 -n 200000|5
tcp_write_lat_8|tcp|ib_write_lat -s 8 -n 5000|5
tcp_send_lat_8|tcp|ib_send_lat -s 8 -n 5000|5
tcp_write_bw_1m|tcp|ib_write_bw -s 1048576 -n 2000|4
tcp_send_bw_1m|tcp|ib_send_bw -s 1048576 -n 2000|4"

# SOFTRNIC_AB_ROWS=REGEX keeps only the rows whose name matches
if [ -n "${SOFTRNIC_AB_ROWS:-}" ]; then
	ROWS=$(grep -E "^(${SOFTRNIC_AB_ROWS})[|]" <<<"$ROWS" || true)
fi

tcp=0
if [ "$(id -u)" = 0 ] && [ "${SOFTRNIC_BENCH_TCP:-1}" = 1 ]; then
	tcp=1
	ip netns add $NSA
	ip netns add $NSB
	ip link add vab$$ type veth peer name vbb$$
	ip link set vab$$ netns $NSA
	ip link set vbb$$ netns $NSB
	ip -n $NSA addr add 198.51.100.1/24 dev vab$$
	ip -n $NSB addr add 198.51.100.2/24 dev vbb$$
	for ns in $NSA $NSB; do ip -n $ns link set lo up; done
	ip -n $NSA link set vab$$ up
	ip -n $NSB link set vbb$$ up
fi

run_row() { # build-letter libdir row
	local which=$1 lib=$2 name runner cmd c v
	IFS='|' read -r name runner cmd c <<<"$3"
	[ "$runner" = tcp ] && [ $tcp = 0 ] && return 0
	# shellcheck disable=SC2086
	v=$(${runner}_perftest "$lib" $cmd | col "$c")
	record "${name}_$which" "${v:-nan}"
}

for r in $(seq 1 "$R"); do
	echo "round $r/$R" >&2
	while IFS= read -r row; do
		if [ $((r % 2)) = 1 ]; then
			run_row a "$LA" "$row"
			run_row b "$LB" "$row"
		else
			run_row b "$LB" "$row"
			run_row a "$LA" "$row"
		fi
	done <<<"$ROWS"
done

# Instructions per ibv_post_send in the client of PROG -s 8 -n 100000, run
# under callgrind.
cg_per_wr() { # libdir prog
	local lib=$1 prog=$2 n=100000 s
	port=$((port + 1))
	LD_LIBRARY_PATH=$lib taskset -c 0 timeout 600 "$prog" -d softrnic0 \
		-x 0 -F -p $port -s 8 -n $n >/dev/null 2>&1 &
	s=$!
	wait_port $port
	LD_LIBRARY_PATH=$lib taskset -c 1 timeout 600 valgrind \
		--tool=callgrind --callgrind-out-file="$out/cg" "$prog" \
		-d softrnic0 -x 0 -F -p $port -s 8 -n $n 127.0.0.1 \
		>/dev/null 2>&1 || true
	wait $s || true
	# inclusive: the verb and everything it ran (WQE, doorbell, the
	# transport's execute, the completion); polling is left out, as its
	# count depends on timing
	callgrind_annotate --inclusive=yes "$out/cg" 2>/dev/null |
		grep -E ':srn_qp_post_send \[' | head -1 |
		awk -v n=$n '{gsub(",", "", $1); printf "%.1f", $1 / n}'
}

med() {
	[ -f "$out/rec/$1" ] || { echo nan; return; }
	sort -g "$out/rec/$1" | awk '{a[NR]=$1} END {if (NR==0) print "nan";
		else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b+0==0) print "n/a";
	else printf "%.3f", a/b}'; }

{
	echo "## A/B: $NA vs $NB"
	echo
	echo "Made by \`scripts/bench-ab.sh LIBDIR_A LIBDIR_B $R '$NA' '$NB'\` on"
	echo "$(date -u +%Y-%m-%d). perftest over each build, interleaved in every"
	echo "round (the order alternates), pinned to CPUs 0 and 1; medians of $R"
	echo "rounds. Latency rows: t_typical in us (lower is better); bandwidth"
	echo "rows: MB/s, or Mpps at 8 B (higher is better). 'B/A' > 1 means B is"
	echo "slower for latency rows and faster for bandwidth rows."
	echo
	echo "| row | $NA | $NB | B/A | spread A (min-max) | spread B (min-max) |"
	echo "|---|---|---|---|---|---|"
	while IFS='|' read -r name _ _ _; do
		[ -f "$out/rec/${name}_a" ] || continue
		a=$(med "${name}_a")
		b=$(med "${name}_b")
		sa=$(sort -g "$out/rec/${name}_a" | sed -n '1p;$p' | tr '\n' ' ')
		sb=$(sort -g "$out/rec/${name}_b" | sed -n '1p;$p' | tr '\n' ' ')
		echo "| $name | $a | $b | $(ratio "$b" "$a") | ${sa% } | ${sb% } |"
	done <<<"$ROWS"
	if [ "${SOFTRNIC_AB_CALLGRIND:-0}" = 1 ] &&
		command -v valgrind >/dev/null; then
		echo
		echo "Instructions per ibv_post_send (inclusive: WQE, doorbell,"
		echo "execution, completion), perftest client under callgrind"
		echo "(8 B, 100,000 WRs; counts, not times):"
		echo
		echo "| program | $NA | $NB | B/A |"
		echo "|---|---|---|---|"
		for prog in ib_write_bw ib_send_bw; do
			a=$(cg_per_wr "$LA" $prog)
			b=$(cg_per_wr "$LB" $prog)
			echo "| $prog | $a | $b | $(ratio "$b" "$a") |"
		done
	fi
	echo
	echo '```'
	for f in $(ls "$out/rec"); do
		printf '%-22s %s\n' "$f" "$(tr '\n' ' ' <"$out/rec/$f")"
	done
	echo '```'
} >"$out/md"
cp "$out/md" docs/bench-ab.md
cat docs/bench-ab.md
