#!/bin/bash
# Line coverage of the receive side that the fuzzers driving the whole
# library reach: fuzz_tcp (connections to the listener and from a QP that
# dials, tests/fuzz/fuzz_tcp.c), fuzz_udp (UD datagrams) and fuzz_ctl
# (sessions on a QP's control socket), each run for SECONDS (default 300)
# from its seed corpus, built with clang's source-based coverage; their
# profiles (and those of the processes they start) are merged. Prints
# llvm-cov's table for the TCP transport's receive files, then the line
# coverage of the receive-side functions of tcp_ud.c and of the control
# socket's target side (engine/ctl.c, transport/shm/shm_ctl.c), whose
# files also hold the sending side; and, from fuzz_rsock alone, that of
# rsockets' receive-side functions (docs/rsockets.md). docs/security.md
# quotes it. Run it in a network namespace of its own (it listens on a
# port):
#   unshare -n bash -c 'ip link set lo up; scripts/fuzz-coverage.sh 60'
# FUZZ_COV_KEEP=DIR keeps the binaries and the profile in DIR (then, e.g.:
#   llvm-cov show DIR/fuzz_tcp -object DIR/fuzz_udp -object DIR/fuzz_ctl
#   -instr-profile=DIR/all.profdata src/transport/tcp/tcp_responder.c).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
if [ -n "${FUZZ_COV_KEEP:-}" ]; then
	w=$(realpath -m "$FUZZ_COV_KEEP")
	mkdir -p "$w"
	rm -f "$w"/*.profraw
else
	w=$(mktemp -d)
	trap 'rm -rf "$w"' EXIT
fi
cflags=(-std=gnu11 -g -O1 -fprofile-instr-generate -fcoverage-mapping
	-Isrc -Iinclude -w)
# the verbs library's sources (src/rpc is another library), compiled once
mapfile -t lib < <(find src -path src/rpc -prune -o -name '*.c' -print | sort)
mkdir -p "$w/obj"
printf '%s\n' "${lib[@]}" | xargs -P2 -I{} sh -c \
	'clang "$@" -fsanitize=fuzzer-no-link -c {} -o "$0/obj/$(echo {} | tr / _).o"' \
	"$w" "${cflags[@]}"
for t in tcp udp ctl rsock; do
	len=16384
	[ $t = ctl ] && len=1024
	[ $t = rsock ] && len=4096
	clang "${cflags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$t.c" \
		"$w"/obj/*.o -lpthread -o "$w/fuzz_$t"
	rm -rf "$w/corpus_$t"
	mkdir -p "$w/corpus_$t"
	cp "tests/fuzz/corpus_$t"/* "$w/corpus_$t/"
	(cd "$w" && LLVM_PROFILE_FILE="$w/$t-%p.profraw" "$w/fuzz_$t" \
		-max_total_time="$secs" -max_len=$len "$w/corpus_$t" \
		>"$w/$t.log" 2>&1) || { tail -20 "$w/$t.log"; exit 1; }
	echo "fuzz_$t: $(grep -E -o 'Done [0-9]+ runs.*' "$w/$t.log" || true)"
done
sleep 1 # the second process of fuzz_tcp writes its profile as it leaves
llvm-profdata merge -sparse "$w"/rsock-*.profraw -o "$w/rsock.profdata"
rm -f "$w"/rsock-*.profraw
llvm-profdata merge -sparse "$w"/*.profraw -o "$w/all.profdata"
cov=(llvm-cov report "$w/fuzz_tcp" -object "$w/fuzz_udp" -object
	"$w/fuzz_ctl" -instr-profile="$w/all.profdata")
"${cov[@]}" src/transport/tcp/wire.c src/transport/tcp/tcp_link.c \
	src/transport/tcp/tcp_responder.c src/transport/tcp/tcp_transport.c
# the lines of the named functions: covered / all
funcs() {
	local name=$1 re=$2
	shift 2
	"${cov[@]}" -show-functions "$@" | awk -v name="$name" -v re="^($re)\$" '
		{ f = $1; sub(/.*:/, "", f) }
		f ~ re { lines += $5; miss += $6 }
		END { printf "%-40s %5d lines %5d missed %6.2f%%\n", name,
		      lines, miss, lines ? 100 * (lines - miss) / lines : 0 }'
}
funcs "tcp_ud.c, receive side" \
	'srn_udw_check|srn_udp_place|srn_udp_cqe|srn_udp_to_qp|srn_udp_fwd_addr|srn_udp_forward|srn_udp_deliver|srn_udp_drain|srn_udp_on_sock|srn_udp_on_fwd|srn_udp_group_find|srn_udp_v4_gid' \
	src/transport/tcp/tcp_ud.c
funcs "ctl.c + shm_ctl.c, target side" \
	'srn_ctl_conn_attach|srn_ctl_recvmsg|srn_ctl_conn_verify|srn_ctl_owner|srn_ctl_on_accept|srn_ctl_uid_ok|srn_ctl_on_conn|srn_ctl_on_hangup|srn_ctl_dispatch|srn_ctl_on_adopt|srn_ctl_on_stat|srn_ctl_conn_close|srn_ctl_peercred|srn_shm_on_msg|srn_shm_on_connect|srn_shm_on_mr_req' \
	src/engine/ctl.c src/transport/shm/shm_ctl.c
cov=(llvm-cov report "$w/fuzz_rsock" -instr-profile="$w/rsock.profdata")
funcs "rsockets, receive side (fuzz_rsock)" \
	'srn_rs_peer|srn_rs_on_recv|srn_rs_on_dgram|srn_rs_iomap_in|srn_rs_on_send|srn_rs_poll_cq|srn_rs_read|srn_rs_release_head|srn_rs_flush_ctrl|srn_rs_broken|srn_rs_dg_take|srn_rs_dg_from|srn_rs_dg_recvfrom|srn_rs_rmap_find|riowrite' \
	src/rdmacm/cm_rsocket_core.c src/rdmacm/cm_rsocket_dgram.c \
	src/rdmacm/cm_rsocket_io.c
