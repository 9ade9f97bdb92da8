#!/bin/bash
# rsockets against the kernel's TCP for an unmodified socket program
# (docs/BENCHMARKS.md, "rsockets"): iperf3, one stream, 3 s, through
# rdma-core's librspreload.so (LD_PRELOAD: its socket calls become
# softrnic's rsocket calls), and the same iperf3 over the kernel's TCP,
# back to back in each round so both see the same machine. Server on CPU 0,
# client on CPU 1, R rounds (medians).
#   one host:  loopback TCP  vs  rsockets over shared memory
#   two hosts: TCP over a veth pair between two network namespaces  vs
#              rsockets over softrnic's TCP transport, same veth pair
#   scripts/bench-rsockets.sh [R] [OUT]    (default 5, docs/bench-rsockets.md)
set -u
cd "$(dirname "$0")/.."
rounds=${1:-5}
out=${2:-docs/bench-rsockets.md}
lib=$PWD/build/lib
preload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
[ -e "$preload" ] || { echo "no $preload (apt-get install rdmacm-utils)"; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 is not installed"; exit 1; }
work=$(mktemp -d)
port=25000
. tests/lib/hosts.sh
cleanup() {
	hosts_down
	rm -rf "$work"
}
trap cleanup EXIT
hosts_up srnbrs srnbrsa srnbrsb || { echo "cannot make namespaces"; exit 1; }
trap cleanup EXIT

med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }

# one KIND SERVER_NS CLIENT_NS ADDR: iperf3's received rate (Mbit/s).
# KIND kernel or rsockets; "-" for no namespace.
one() {
	local kind=$1 sns=$2 cns=$3 addr=$4 env=() spre=() cpre=()
	port=$((port + 1))
	[ "$kind" = rsockets ] &&
		env=(env "LD_LIBRARY_PATH=$lib" "LD_PRELOAD=$preload")
	[ "$sns" = - ] || spre=(ip netns exec "$sns" env "SOFTRNIC_IP=$addr")
	[ "$cns" = - ] || cpre=(ip netns exec "$cns")
	"${spre[@]}" "${env[@]}" taskset -c 0 timeout 30 \
		iperf3 -s -1 -B "$addr" -p $port >"$work/s" 2>&1 &
	sleep 0.5
	"${cpre[@]}" "${env[@]}" taskset -c 1 timeout 30 \
		iperf3 -c "$addr" -p $port -t 3 -f m >"$work/c" 2>&1
	wait
	awk '/receiver/ {print $7}' "$work/c" | tail -n 1
}

for _ in $(seq 1 "$rounds"); do
	one kernel - - 127.0.0.1 >>"$work/lo_k"
	SOFTRNIC_TRANSPORT=shm one rsockets - - 127.0.0.1 >>"$work/lo_r"
	one kernel srnbrsa srnbrsb 198.51.100.1 >>"$work/ns_k"
	one rsockets srnbrsa srnbrsb 198.51.100.1 >>"$work/ns_r"
done

lk=$(med <"$work/lo_k") lr=$(med <"$work/lo_r")
nk=$(med <"$work/ns_k") nr=$(med <"$work/ns_r")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else printf "-"}'; }
series() { tr '\n' ' ' <"$work/$1"; }
{
	echo "## rsockets: iperf3 through librspreload.so against the kernel's TCP"
	echo
	echo "Made by \`scripts/bench-rsockets.sh $rounds\` on $(date -u +%Y-%m-%d)" \
		"(commit $(git rev-parse --short HEAD)); medians of $rounds rounds,"
	echo "kernel and rsockets back to back in each round; iperf3 one stream,"
	echo "3 s, the receiver's rate; server on CPU 0, client on CPU 1; load"
	echo "average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| path | kernel TCP (Mbit/s) | rsockets over softrnic (Mbit/s) | ratio |"
	echo "|---|---|---|---|"
	echo "| one host (loopback / shared memory) | $lk | $lr | $(ratio "$lr" "$lk") |"
	echo "| two namespaces, one veth pair (TCP / softrnic TCP transport) | $nk | $nr | $(ratio "$nr" "$nk") |"
	echo
	echo "Raw series (Mbit/s): loopback $(series lo_k); rsockets shm $(series lo_r);"
	echo "veth $(series ns_k); rsockets tcp $(series ns_r)."
} | tee "$out"
