#!/bin/bash
# Engines over softrnic against their own transports (docs/BENCHMARKS.md,
# "Engines"): ucx_perftest tag_lat and tag_bw (8 B) with UCX over
# softrnic0 (rc_verbs, ud_verbs) against UCX's posix and tcp transports on
# one host, and against UCX tcp between two network namespaces; an MPI
# ping-pong (Open MPI's UCX PML over softrnic against Open MPI's own
# shared-memory path, vader); rdma_cm connection setup (cmtime) against
# kernel TCP connect/accept. All variants back to back in each round, so
# they see the same machine; server on CPU 0, client on CPU 1; medians of R
# rounds.
#   scripts/bench-engines.sh [R] [OUT]    (default 5, docs/bench-engines.md)
# Needs root (namespaces, the device node UCX looks for).
set -u
cd "$(dirname "$0")/.."
rounds=${1:-5}
out=${2:-docs/bench-engines.md}
bin=$PWD/build/bin
lib=$PWD/build/lib
work=$(mktemp -d)
nsa=srnbe$$a nsb=srnbe$$b
cleanup() {
	ip netns del "$nsa" 2>/dev/null
	ip netns del "$nsb" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$nsa" && ip netns add "$nsb" &&
	ip link add "v$nsa" type veth peer name "v$nsb" || exit 1
ip link set "v$nsa" netns "$nsa"
ip link set "v$nsb" netns "$nsb"
ip -n "$nsa" addr add 198.51.100.1/24 dev "v$nsa"
ip -n "$nsb" addr add 198.51.100.2/24 dev "v$nsb"
for ns in "$nsa" "$nsb"; do
	ip -n "$ns" link set lo up
	ip -n "$ns" link set "v$ns" up
done

med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-"}'; }

# ucx KIND TLS TEST [ARGS]: the client's Final row. KIND: srn (through
# softrnic exec, on one host), own (UCX alone), srnns/ownns (between the
# namespaces).
ucx() {
	local kind=$1 tls=$2 t=$3 pre_s=() pre_c=() addr=127.0.0.1 spid
	local port=$((20000 + RANDOM % 20000)) # (a subshell: no counter)
	shift 3
	case $kind in
	srn*) pre_s=("$bin/softrnic" exec --) pre_c=("$bin/softrnic" exec --) ;;
	esac
	if [ "${kind%ns}" != "$kind" ]; then
		pre_s=(ip netns exec "$nsa" env SOFTRNIC_IP=198.51.100.1 "${pre_s[@]}")
		pre_c=(ip netns exec "$nsb" env SOFTRNIC_IP=198.51.100.2 "${pre_c[@]}")
		addr=198.51.100.1
	fi
	UCX_TLS=$tls UCX_NET_DEVICES=${NETDEV:-all} "${pre_s[@]}" \
		taskset -c 0 ucx_perftest -p $port >"$work/s" 2>&1 &
	spid=$!
	sleep 0.7
	UCX_TLS=$tls UCX_NET_DEVICES=${NETDEV:-all} timeout 60 "${pre_c[@]}" \
		taskset -c 1 ucx_perftest -p $port "$addr" -t "$t" "$@" 2>&1 |
		grep '^Final:'
	# a server whose client failed would wait for ever
	sleep 1
	pkill -9 -P "$spid" 2>/dev/null
	kill -9 "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}

mpi() { # PML/BTL args...: the program's two lines
	UCX_TLS=${TLS:-} UCX_NET_DEVICES=${NETDEV:-all} timeout 120 \
		"$bin/softrnic" exec -- mpirun --allow-run-as-root -np 2 \
		--bind-to core -x UCX_TLS -x UCX_NET_DEVICES -x LD_LIBRARY_PATH \
		"$@" "$bin/mpi_pingpong" 2>/dev/null
}

cmtime_us() { # N: connect and disconnect us per connection
	local port=$((20000 + RANDOM % 20000))
	LD_LIBRARY_PATH=$lib taskset -c 0 cmtime -b 127.0.0.1 -p $port -c "$1" \
		>"$work/cs" 2>&1 &
	sleep 0.5
	LD_LIBRARY_PATH=$lib taskset -c 1 timeout 120 cmtime -s 127.0.0.1 \
		-p $port -c "$1" 2>&1 |
		awk '/^connect/ {c = $NF} /^disconnect/ {d = $NF} END {print c, d}'
	kill %1 2>/dev/null
	wait
}

S=rc_verbs,ud_verbs,self
for _ in $(seq 1 "$rounds"); do
	NETDEV=softrnic0:1 ucx srn $S tag_lat -n 100000 | awk '{print $3}' >>"$work/lat_srn"
	ucx own posix,self tag_lat -n 100000 | awk '{print $3}' >>"$work/lat_posix"
	ucx own tcp,self tag_lat -n 100000 | awk '{print $3}' >>"$work/lat_tcp"
	NETDEV=softrnic0:1 ucx srn $S tag_bw -n 1000000 | awk '{print $9}' >>"$work/bw_srn"
	ucx own posix,self tag_bw -n 1000000 | awk '{print $9}' >>"$work/bw_posix"
	ucx own tcp,self tag_bw -n 1000000 | awk '{print $9}' >>"$work/bw_tcp"
	NETDEV=softrnic0:1 ucx srnns $S tag_lat -n 20000 | awk '{print $3}' >>"$work/nlat_srn"
	ucx ownns tcp,self tag_lat -n 20000 | awk '{print $3}' >>"$work/nlat_tcp"
	NETDEV=softrnic0:1 ucx srnns $S tag_bw -n 200000 | awk '{print $9}' >>"$work/nbw_srn"
	ucx ownns tcp,self tag_bw -n 200000 | awk '{print $9}' >>"$work/nbw_tcp"
	TLS=$S NETDEV=softrnic0:1 mpi --mca pml ucx --mca pml_ucx_devices any \
		--mca btl self >"$work/m"
	awk '/lat_us/ {print $2 >> "'"$work/mlat_srn"'"} /bw_MBps/ {print $2 >> "'"$work/mbw_srn"'"}' "$work/m"
	mpi --mca pml ob1 --mca btl vader,self >"$work/m"
	awk '/lat_us/ {print $2 >> "'"$work/mlat_vader"'"} /bw_MBps/ {print $2 >> "'"$work/mbw_vader"'"}' "$work/m"
	for n in 1 1000; do
		read -r c d < <(cmtime_us $n)
		echo "$c" >>"$work/cm_c_$n"
		echo "$d" >>"$work/cm_d_$n"
		"$bin/tcp_connrate" $n >"$work/k"
		awk '/^connect/ {print $2}' "$work/k" >>"$work/k_c_$n"
		awk '/^disconnect/ {print $2}' "$work/k" >>"$work/k_d_$n"
	done
done

m() { med <"$work/$1"; }
inv() { awk -v a="$1" -v b="$2" 'BEGIN {if (a + 0 > 0 && b + 0 > 0) printf "%.2f", b / a; else printf "-"}'; }
{
	echo "## Engines: UCX, Open MPI and rdma_cm over softrnic"
	echo
	echo "Made by \`scripts/bench-engines.sh $rounds\` on $(date -u +%Y-%m-%d)" \
		"(commit $(git rev-parse --short HEAD)); medians of $rounds rounds,"
	echo "every variant back to back in each round; server on CPU 0, client on"
	echo "CPU 1. ucx_perftest 8 B: tag_lat is the 50th percentile one-way"
	echo "latency, tag_bw the overall message rate. \"softrnic\" is UCX with"
	echo "UCX_TLS=rc_verbs,ud_verbs,self over softrnic0 (docs/engines.md)."
	echo
	echo "| one host | tag_lat p50 (us) | softrnic / this | tag_bw (msg/s) | softrnic / this |"
	echo "|---|---|---|---|---|"
	echo "| UCX over softrnic (shm) | $(m lat_srn) | 1.00 | $(m bw_srn) | 1.00 |"
	echo "| UCX posix (its shared memory) | $(m lat_posix) | $(ratio "$(m lat_srn)" "$(m lat_posix)") | $(m bw_posix) | $(ratio "$(m bw_srn)" "$(m bw_posix)") |"
	echo "| UCX tcp (loopback) | $(m lat_tcp) | $(ratio "$(m lat_srn)" "$(m lat_tcp)") | $(m bw_tcp) | $(ratio "$(m bw_srn)" "$(m bw_tcp)") |"
	echo
	echo "| two namespaces (veth) | tag_lat p50 (us) | softrnic / this | tag_bw (msg/s) | softrnic / this |"
	echo "|---|---|---|---|---|"
	echo "| UCX over softrnic (its TCP transport) | $(m nlat_srn) | 1.00 | $(m nbw_srn) | 1.00 |"
	echo "| UCX tcp | $(m nlat_tcp) | $(ratio "$(m nlat_srn)" "$(m nlat_tcp)") | $(m nbw_tcp) | $(ratio "$(m nbw_srn)" "$(m nbw_tcp)") |"
	echo
	echo "MPI ping-pong (bench/mpi_pingpong.c, two ranks bound to cores): half"
	echo "the median round trip of 8 B, and 1 MiB messages 64 in flight."
	echo
	echo "| Open MPI | latency (us) | softrnic / this | bandwidth (MB/s) | softrnic / this |"
	echo "|---|---|---|---|---|"
	echo "| UCX PML over softrnic | $(m mlat_srn) | 1.00 | $(m mbw_srn) | 1.00 |"
	echo "| ob1 + vader (its own shared memory) | $(m mlat_vader) | $(ratio "$(m mlat_srn)" "$(m mlat_vader)") | $(m mbw_vader) | $(ratio "$(m mbw_srn)" "$(m mbw_vader)") |"
	echo
	echo "Connection setup: cmtime (rdma_cm over softrnic: connect/accept with"
	echo "QPs, then disconnect) against kernel TCP connect/accept and close on"
	echo "loopback (bench/tcp_connrate.c), microseconds per connection; the"
	echo "rate ratio is kernel time / softrnic time (goal >= 0.5)."
	echo
	echo "| connections | cmtime connect | kernel TCP connect | rate ratio | cmtime disconnect | kernel close | rate ratio |"
	echo "|---|---|---|---|---|---|---|"
	for n in 1 1000; do
		echo "| $n | $(m cm_c_$n) | $(m k_c_$n) | $(inv "$(m cm_c_$n)" "$(m k_c_$n)") | $(m cm_d_$n) | $(m k_d_$n) | $(inv "$(m cm_d_$n)" "$(m k_d_$n)") |"
	done
} | tee "$out"
