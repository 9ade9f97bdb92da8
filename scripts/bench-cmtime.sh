#!/bin/bash
# Connection setup rate (issue 10; docs/BENCHMARKS.md, "Connection setup"):
# Debian's cmtime (rdma_cm connect/accept with QPs, then disconnect) over
# softrnic against the kernel's TCP connect/accept and close on loopback
# (build/bin/tcp_connrate), N connections, back to back in each of R
# rounds, each run in a network namespace of its own (unshare -n, lo up);
# cmtime's server on CPU 0, its client on CPU 1. With a second library
# directory OLD, that library runs in each round too (before/after).
# Figures are microseconds per connection, medians; the ratio is kernel
# time / softrnic time (issue 10's goal: >= 0.5), the median of the
# rounds' own ratios (the machine's speed swings between rounds). Each
# round also runs both with a single connection: a process's first, which
# pays for what a burst shares (the peer's first verdict, the CM link).
#   scripts/bench-cmtime.sh [R] [N] [OLD_LIBDIR] [OUT]
#   (defaults 5, 1000, none, docs/bench-cmtime.md)
set -u
cd "$(dirname "$0")/.."
rounds=${1:-5}
n=${2:-1000}
old=${3:-}
out=${4:-docs/bench-cmtime.md}
lib=$PWD/build/lib
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }

# cmtime_run LIBDIR N: "create connect disconnect" us per connection
cmtime_run() {
	unshare -n bash -c "
		ip link set lo up
		port=\$((20000 + RANDOM % 20000))
		LD_LIBRARY_PATH=$1 taskset -c 0 cmtime -b 127.0.0.1 -p \$port \
			-c $2 >$work/srv.log 2>&1 &
		sleep 0.5
		LD_LIBRARY_PATH=$1 taskset -c 1 timeout 120 cmtime \
			-s 127.0.0.1 -p \$port -c $2 2>&1 |
			awk '/^create qp/ {q = \$NF} /^connect/ {c = \$NF}
			     /^disconnect/ {d = \$NF} END {print q, c, d}'
		kill %1 2>/dev/null
		wait"
}

# kernel N: "connect close" us per connection
kernel_run() {
	unshare -n bash -c "ip link set lo up
		taskset -c 0 build/bin/tcp_connrate $1" |
		awk '/^connect/ {c = $2} /^disconnect/ {d = $2} END {print c, d}'
}

counts=$n
[ "$n" != 1 ] && counts="1 $n"
for _ in $(seq 1 "$rounds"); do
	for k in $counts; do
		read -r kc kd < <(kernel_run "$k")
		read -r q c d < <(cmtime_run "$lib" "$k")
		echo "$kc $kd $q $c $d" >>"$work/new.$k"
		if [ -n "$old" ]; then
			read -r q c d < <(cmtime_run "$old" "$k")
			echo "$kc $kd $q $c $d" >>"$work/old.$k"
		fi
	done
done

# col FILE K: the median of column K; ratio FILE K J: median of $K/$J
col() { awk -v k="$2" '{print $k}' "$1" | med; }
ratio() { awk -v k="$2" -v j="$3" '$j > 0 {print $k / $j}' "$1" | med; }

row() { # LABEL FILE
	printf '| %s | %s | %s | %.2f | %s | %.2f |\n' "$1" "$(col "$2" 3)" \
		"$(col "$2" 4)" "$(ratio "$2" 1 4)" "$(col "$2" 5)" \
		"$(ratio "$2" 2 5)"
}

table() { # N
	echo "**$1 connection(s).** Kernel TCP (tcp_connrate $1): connect" \
		"$(col "$work/new.$1" 1), close $(col "$work/new.$1" 2)."
	echo
	echo "| library | create qp | connect | connect ratio | disconnect | disconnect ratio |"
	echo "|---|---|---|---|---|---|"
	[ -n "$old" ] && row "before ($old)" "$work/old.$1"
	row "this build" "$work/new.$1"
	echo
	echo "Rounds (kernel connect, close; create qp, connect, disconnect):"
	echo
	[ -n "$old" ] && sed 's/^/    before: /' "$work/old.$1"
	sed 's/^/    this:   /' "$work/new.$1"
	echo
}

{
	echo "Made by \`scripts/bench-cmtime.sh $rounds $n${old:+ OLD}\` on" \
		"$(date -u '+%Y-%m-%d %H:%M UTC') (commit" \
		"$(git rev-parse --short HEAD)); $rounds rounds, medians, us per connection;"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	for k in $counts; do
		table "$k"
	done
} | tee "$out"
