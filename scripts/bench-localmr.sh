#!/bin/bash
# What keeping receive buffers private costs (the default,
# SOFTRNIC_LOCAL_MR=private: an MR without a remote right is never shared;
# a same-host SEND into one goes through the receive CQ's bounce slots,
# docs/shm-layout.md) against the opt-in SOFTRNIC_LOCAL_MR=shared (such
# MRs shared with kin peers, SENDs placed by the initiator). perftest registers its SEND buffers LOCAL_WRITE only, as
# ibv_rc_pingpong does. Each row runs both settings back to back in every
# round (which goes first alternating), server on CPU 0, client on CPU 1,
# over shared memory; medians of R rounds and the median of the rounds'
# private/shared ratios.
#   scripts/bench-localmr.sh [R]      (default 5; markdown on stdout)
set -u
cd "$(dirname "$0")/.."
rounds=${1:-5}
lib=$PWD/build/lib
port=$((22000 + RANDOM % 4000))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }

perf() { # MODE FIELD PROG ARGS... -> one figure of the client's result row
	local mode=$1 field=$2 prog=$3
	shift 3
	port=$((port + 1))
	env LD_LIBRARY_PATH="$lib" SOFTRNIC_TRANSPORT=shm SOFTRNIC_LOCAL_MR=$mode \
		taskset -c 0 timeout 60 "$prog" -d softrnic0 -x 0 -F -p $port \
		"$@" >/dev/null 2>&1 &
	sleep 0.3
	env LD_LIBRARY_PATH="$lib" SOFTRNIC_TRANSPORT=shm SOFTRNIC_LOCAL_MR=$mode \
		taskset -c 1 timeout 60 "$prog" -d softrnic0 -x 0 -F -p $port \
		"$@" 127.0.0.1 2>&1 | grep -A1 -E '^ *#bytes' | tail -n 1 |
		awk -v f="$field" '{print $f}'
	wait
}

pingpong() { # MODE SIZE -> usec/iter of ibv_rc_pingpong's client
	port=$((port + 1))
	env LD_LIBRARY_PATH="$lib" SOFTRNIC_TRANSPORT=shm SOFTRNIC_LOCAL_MR=$1 \
		taskset -c 0 timeout 60 ibv_rc_pingpong -d softrnic0 -g 0 \
		-p $port -s "$2" -n 20000 >/dev/null 2>&1 &
	sleep 0.3
	env LD_LIBRARY_PATH="$lib" SOFTRNIC_TRANSPORT=shm SOFTRNIC_LOCAL_MR=$1 \
		taskset -c 1 timeout 60 ibv_rc_pingpong -d softrnic0 -g 0 \
		-p $port -s "$2" -n 20000 127.0.0.1 2>&1 |
		sed -n 's/.*= \([0-9.]*\) usec\/iter/\1/p'
	wait
}

# name | unit | command (after MODE)
rows=(
	"ib_send_lat 64 B|us|perf MODE 5 ib_send_lat -s 64 -n 20000"
	"ib_send_lat 4096 B|us|perf MODE 5 ib_send_lat -s 4096 -n 20000"
	"ib_send_bw 4096 B|MB/s|perf MODE 4 ib_send_bw -s 4096 -n 50000"
	"ib_send_bw 64 KiB|MB/s|perf MODE 4 ib_send_bw -s 65536 -n 20000"
	"UD ib_send_lat 8 B|us|perf MODE 5 ib_send_lat -c UD -s 8 -n 50000"
	"UD ib_send_bw 8 B|M msg/s|perf MODE 5 ib_send_bw -c UD -s 8 -n 500000"
	"ibv_rc_pingpong 64 B|us/iter|pingpong MODE 64"
	"ibv_rc_pingpong 4096 B|us/iter|pingpong MODE 4096"
)

for r in $(seq 1 "$rounds"); do
	for i in "${!rows[@]}"; do
		IFS='|' read -r _ _ cmd <<<"${rows[$i]}"
		order="shared private"
		[ $(((r + i) % 2)) = 0 ] && order="private shared"
		for m in $order; do
			v=$(${cmd/MODE/$m})
			echo "${v:-}" >>"$work/$i.$m"
		done
		paste -d' ' <(tail -n 1 "$work/$i.shared") \
			<(tail -n 1 "$work/$i.private") |
			awk '$1 > 0 && $2 != "" {printf "%.2f\n", $2 / $1}' >>"$work/$i.ratio"
	done
done

echo "| test | unit | shared (with kin) | private (default) | private / shared (median of rounds) |"
echo "|---|---|---|---|---|"
for i in "${!rows[@]}"; do
	IFS='|' read -r name unit _ <<<"${rows[$i]}"
	printf '| %s | %s | %s | %s | %s |\n' "$name" "$unit" \
		"$(med <"$work/$i.shared")" "$(med <"$work/$i.private")" \
		"$(med <"$work/$i.ratio")"
done
