#!/bin/bash
# softrnic RPC against libtirpc's svc_run (UDP, TCP, unix socket), a
# busy-polling shared-memory server (no RPC: the software limit) and a
# cache line's round trip (docs/BENCHMARKS.md, "RPC"). The calc service
# (examples/rpc), rpcgen's code unmodified; servers on CPU 0, the client
# on CPU 1; medians of R rounds, every case once per round, so the ratios
# come from one run; also a blocking (futex) shared-memory server, and
# clients in a second network namespace (veth) against a busy-polling UDP
# ping-pong. Then 2 and 4 client threads, two softrnic services sharing the cores, the
# server's CPU use at gaps between calls, and idle over 10 s
# (/proc/PID/stat). In a network namespace of
# its own when it can make one (ports, abstract sockets).
#   scripts/bench-rpc.sh [R] [OUT]     (default 3, docs/BENCHMARKS.md)
set -u
cd "$(dirname "$0")/.."
if [ -z "${SRN_BENCH_NS:-}" ] && unshare -n true 2>/dev/null; then
	exec unshare -n env SRN_BENCH_NS=1 bash -c \
		'ip link set lo up; exec "$0" "$@"' "$0" "$@"
fi
rounds=${1:-3}
out=${2:-docs/BENCHMARKS.md}
b=./build/bin/bench_rpc
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
nf=20000 # fast paths
tuned=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456
sizes="512 900 1000 4096 16384 65536 262144 1048576"
ns=3000  # socket paths

taskset -c 0 $b srv-srn 7100 & srn=$!
BENCH_RPC_PROG=0x20051112 taskset -c 0 $b srv-srn 7103 &
# the same server, its allocator told to keep freed memory (docs/rpc.md,
# "Large arguments and the allocator")
BENCH_RPC_PROG=0x20051113 GLIBC_TUNABLES=$tuned taskset -c 0 $b srv-srn 7105 &
taskset -c 0 $b srv-tirpc udp 7101 &
taskset -c 0 $b srv-tirpc tcp 7102 &
taskset -c 0 $b srv-tirpc unix "$work/sock" &
# a second namespace joined by a veth pair: clients there are "another host"
unshare -n sleep 3600 & nsb=$!
sleep 0.3
ip link add srnv0 type veth peer name srnv1 netns $nsb 2>/dev/null &&
	ip addr add 10.211.0.1/24 dev srnv0 && ip link set srnv0 up &&
	nsenter -t $nsb -n sh -c 'ip addr add 10.211.0.2/24 dev srnv1 &&
		ip link set srnv1 up && ip link set lo up' && netns=1 || netns=0
sleep 1
c() { taskset -c 1 timeout 60 $b "$@" || echo "- - -"; }
x() { nsenter -t $nsb -n taskset -c 1 timeout 60 $b "$@" || echo "- - -"; }
a() { taskset -c 0,1 timeout 60 $b "$@" || echo "- - -"; } # either CPU
cpu() { awk '{print $14 + $15}' /proc/$srn/stat; }

for _ in $(seq 1 "$rounds"); do
	c line $nf >>"$work/line"
	c spin $nf 0 >>"$work/spin_null"
	c spin $nf 64 >>"$work/spin_64"
	c futex $nf 0 >>"$work/futex_null"
	if [ $netns = 1 ]; then
		taskset -c 0 $b srv-udpspin 7104 &
		up=$!
		sleep 0.2
		x udpspin 10.211.0.1:7104 $ns 40 >>"$work/ns_udpspin"
		kill $up
		wait $up 2>/dev/null
		x call udp 10.211.0.1:7100 $ns -1 >>"$work/ns_srn_udp"
		x call tcp 10.211.0.1:7100 $ns -1 >>"$work/ns_srn_tcp"
		x call tirpc-udp 10.211.0.1:7101 $ns -1 >>"$work/ns_tirpc_udp"
	fi
	for s in null 64; do
		sz=$([ $s = null ] && echo -1 || echo 64)
		c call shm 7100 $nf $sz >>"$work/srn_shm_$s"
		c call udp 7100 $ns $sz >>"$work/srn_udp_$s"
		c call tcp 7100 $ns $sz >>"$work/srn_tcp_$s"
		c call tirpc-udp 7101 $ns $sz >>"$work/tirpc_udp_$s"
		c call tirpc-tcp 7102 $ns $sz >>"$work/tirpc_tcp_$s"
		c call tirpc-unix "$work/sock" $ns $sz >>"$work/tirpc_unix_$s"
	done
	# argument sizes around the slot (936 B inline) and above (aux area)
	for z in $sizes; do
		c call shm 7100 $((z > 65536 ? 100 : 3000)) $z >>"$work/size_$z"
		BENCH_RPC_PROG=0x20051113 c call shm 7105 \
			$((z > 65536 ? 100 : 3000)) $z >>"$work/tsize_$z"
	done
	# T client threads, each with its own CLIENT (BENCH_RPC_THREADS)
	for t in 2 4; do
		BENCH_RPC_THREADS=$t c call shm 7100 $nf -1 >>"$work/thr_shm_$t"
		BENCH_RPC_THREADS=$t a call shm 7100 $nf -1 >>"$work/thr_any_$t"
		BENCH_RPC_THREADS=$t c call tirpc-udp 7101 $ns -1 \
			>>"$work/thr_udp_$t"
	done
	# two services on the same cores: one busy alone, then both busy
	# for 2 s each, started together: they overlap for their whole run
	BENCH_RPC_SECS=2 c call shm 7100 $nf -1 >>"$work/share_alone"
	BENCH_RPC_SECS=2 BENCH_RPC_PROG=0x20051112 c call shm 7103 $nf -1 \
		>"$work/b" &
	bp=$!
	BENCH_RPC_SECS=2 c call shm 7100 $nf -1 >>"$work/share_a"
	wait $bp
	cat "$work/b" >>"$work/share_b"
	for g in 10 100 1000 10000; do
		n=$((1000000 / (g + 100)))
		t0=$(cpu) w0=$(date +%s.%N)
		c call shm 7100 $n -1 $g >>"$work/gap_$g"
		t1=$(cpu) w1=$(date +%s.%N)
		awk -v a="$t0" -v b="$t1" -v x="$w0" -v y="$w1" -v hz="$(getconf CLK_TCK)" \
			'BEGIN {printf "%.1f\n", (b - a) / hz / (y - x) * 100}' >>"$work/gapcpu_$g"
	done
done
sleep 1
t0=$(cpu)
sleep 10
t1=$(cpu)
idle=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" \
	'BEGIN {printf "%.2f", (b - a) / hz / 10 * 100}')

# column K's median of a file of "p50 p99 calls/s" lines
med() { awk -v k="$2" '{print $k}' "$work/$1" | sort -g |
	awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else printf "-"}'; }
row() { # name file base
	echo "| $1 | $(med "$2" 1) | $(med "$2" 2) | $(med "$2" 3) | $(ratio "$(med "$2" 1)" "$(med "$3" 1)") |"
}
{
	echo
	echo "## RPC (issue 11)"
	echo
	echo "Made by \`scripts/bench-rpc.sh $rounds\` on $(date -u +%Y-%m-%d)" \
		"(commit $(git rev-parse --short HEAD)); medians of $rounds rounds,"
	echo "every case once per round; the calc service's null procedure and"
	echo "a 64 B echo, closed loop, one client thread; servers on CPU 0"
	echo "(softrnic: one worker and its receiver), client on CPU 1;"
	echo "$nf calls per run on the shared-memory paths, $ns on sockets."
	echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| path | p50 (us) | p99 (us) | calls/s | p50 x busy-polling |"
	echo "|---|---|---|---|---|"
	row "cache line round trip" line spin_null
	row "busy-polling shm server, null" spin_null spin_null
	row "busy-polling shm server, 64 B" spin_64 spin_null
	row "blocking (futex) shm server, null" futex_null spin_null
	for s in null 64; do
		base=spin_$s
		row "softrnic shm, $s" srn_shm_$s $base
		row "softrnic UDP, $s" srn_udp_$s $base
		row "softrnic TCP, $s" srn_tcp_$s $base
		row "libtirpc svc_run UDP, $s" tirpc_udp_$s $base
		row "libtirpc svc_run TCP, $s" tirpc_tcp_$s $base
		row "libtirpc svc_run unix, $s" tirpc_unix_$s $base
	done
	echo
	echo "softrnic shm, null procedure, calls spaced by a gap (the server's"
	echo "CPU use, % of one core, from /proc/PID/stat over the run):"
	echo
	echo "| gap (us) | p50 (us) | p99 (us) | server CPU % |"
	echo "|---|---|---|---|"
	for g in 10 100 1000 10000; do
		echo "| $g | $(med gap_$g 1) | $(med gap_$g 2) | $(awk '{print $1}' "$work/gapcpu_$g" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') |"
	done
	echo
	echo "softrnic shm, echo of N bytes each way (up to 936 B of message"
	echo "inline in the slot, larger in the worker's auxiliary area); the"
	echo "last column: the same against a server started with"
	echo "GLIBC_TUNABLES=$tuned:"
	echo
	echo "| bytes | p50 (us) | p99 (us) | MB/s each way at p50 | p50, allocator tuned (us) |"
	echo "|---|---|---|---|---|"
	for z in $sizes; do
		echo "| $z | $(med size_$z 1) | $(med size_$z 2) | $(awk -v z=$z -v p="$(med size_$z 1)" 'BEGIN {if (p > 0) printf "%.0f", z / p}') | $(med tsize_$z 1) |"
	done
	echo
	echo "Client threads (null procedure; each thread its own CLIENT and"
	echo "$nf calls, $ns over UDP; one softrnic worker on CPU 0): p50 / p99"
	echo "(us) / calls/s of all threads together; T = 1 is the table above:"
	echo
	echo "| threads | softrnic shm, clients on CPU 1 | softrnic shm, clients on either CPU | libtirpc svc_run UDP, clients on CPU 1 |"
	echo "|---|---|---|---|"
	for t in 2 4; do
		echo "| $t | $(med thr_shm_$t 1) / $(med thr_shm_$t 2) / $(med thr_shm_$t 3) | $(med thr_any_$t 1) / $(med thr_any_$t 2) / $(med thr_any_$t 3) | $(med thr_udp_$t 1) / $(med thr_udp_$t 2) / $(med thr_udp_$t 3) |"
	done
	if [ $netns = 1 ]; then
		echo
		echo "Across two network namespaces (a veth pair; client in the"
		echo "second namespace on CPU 1, servers on CPU 0), null procedure; the"
		echo "last column is against a busy-polling UDP ping-pong of 40 B:"
		echo
		echo "| path | p50 (us) | p99 (us) | calls/s | p50 x busy-polling UDP |"
		echo "|---|---|---|---|---|"
		row "busy-polling UDP ping-pong" ns_udpspin ns_udpspin
		row "softrnic UDP" ns_srn_udp ns_udpspin
		row "softrnic TCP" ns_srn_tcp ns_udpspin
		row "libtirpc svc_run UDP" ns_tirpc_udp ns_udpspin
	fi
	echo
	echo "Two softrnic services (two server processes, one worker each, both"
	echo "on CPU 0; their clients both on CPU 1), null procedure: calls/s of"
	echo "service A alone (B idle), then of A and B both busy: $(med share_alone 3)"
	echo "alone; $(med share_a 3) and $(med share_b 3) together (B/A $(ratio "$(med share_b 3)" "$(med share_a 3)"),"
	echo "sum/alone $(awk -v a="$(med share_a 3)" -v b="$(med share_b 3)" -v c="$(med share_alone 3)" 'BEGIN {if (c > 0) printf "%.2f", (a + b) / c}'))."
	echo
	echo "Idle softrnic server over 10 s: $idle % of one core."
	p=$(med srn_shm_null 1)
	echo
	echo "Goals (null procedure): p50 $(ratio "$p" "$(med spin_null 1)")x the busy-polling server (goal <= 1.2),"
	echo "$(ratio "$p" "$(med line 1)")x the cache line round trip (goal <= 4),"
	echo "$(ratio "$(med tirpc_udp_null 1)" "$p")x lower than libtirpc over UDP (goal >= 50);"
	echo "calls/s $(ratio "$(med srn_shm_null 3)" "$(med spin_null 3)")x busy-polling (goal >= 0.9);"
	echo "idle CPU $idle % (goal < 1)."
	[ $netns = 1 ] && echo "Across namespaces: softrnic UDP p50 $(ratio "$(med ns_srn_udp 1)" "$(med ns_udpspin 1)")x a busy-polling UDP ping-pong (goal <= 1.2)."
} | tee -a "$out"
