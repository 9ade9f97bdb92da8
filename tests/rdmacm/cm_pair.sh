#!/bin/bash
# Runs an unmodified rdma_cm program pair (rdmacm-utils, perftest -R) as a
# server and a client on this host through softrnic's libibverbs.so.1 and
# librdmacm.so.1, and checks that the pair worked.
#
#   cm_pair.sh [--timeout S] [--expect REGEX] [--server-stays] [--ipv6] \
#       [--port P] [--ready REGEX] --server PROG ARGS... --client PROG ARGS...
#
# In the arguments, @PORT@ becomes an rdma_cm port chosen here, @ADDR@
# the server's address (127.0.0.1, or SRN_PAIR_SERVER_IP), @CADDR@ the
# client's (the same, or SRN_PAIR_CLIENT_IP) and @GROUP@ an
# IPv4 multicast group chosen here (239.255.x.y, one per run). The client
# starts once the server listens on that port: softrnic's CM has bound the
# abstract unix socket "softrnic/cm/<port space>/<port>" for it, and the
# server's process listens on the CM port (ss -p). --port P: the program's
# own fixed rdma_cm port (udaddy's 7174) instead of a chosen one; the test
# then takes a lock on it (flock) so that runs in one namespace take turns.
# --ready REGEX: the client starts once the server printed a line matching
# REGEX instead (mckey's receiver, which listens on no port; run under
# stdbuf -oL so that its output comes line by line).
#
# Passes when, within S seconds (default 60): both exit 0 (with
# --server-stays only the client: the server, cmtime's, never ends and is
# stopped after the client); neither prints "couldn't", "failed",
# "error" or "unable to" (any case; "error 0" excepted); with --expect,
# one of the outputs matches REGEX (grep -E). perftest's client must print
# a results table.
#
# SRN_PAIR_SERVER_NS/SRN_PAIR_CLIENT_NS with SRN_PAIR_SERVER_IP and
# SRN_PAIR_CLIENT_IP: each side runs in its network namespace with
# SOFTRNIC_IP set (tests/netns/ creates them).
#
# Exit: 0 pass, 1 fail, 2 usage, 77 skip (a program is not installed).
set -uo pipefail

timeout_s=60
expect=""
stays=0
fixed_port=""
ready=""
srv=()
cli=()
side=""
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) timeout_s=$2; shift 2; continue ;;
	--expect) expect=$2; shift 2; continue ;;
	--server-stays) stays=1; shift; continue ;;
	--port) fixed_port=$2; shift 2; continue ;;
	--ready) ready=$2; shift 2; continue ;;
	--ipv6) # the pair uses ::1: skip where the host has no IPv6
		ip -6 addr show dev lo 2>/dev/null | grep "::1/" >/dev/null ||
			{ echo "SKIP: no IPv6 loopback"; exit 77; }
		shift; continue ;;
	--server) side=s; shift; continue ;;
	--client) side=c; shift; continue ;;
	esac
	case "$side" in
	s) srv+=("$1") ;;
	c) cli+=("$1") ;;
	*) echo "usage: cm_pair.sh [--timeout S] [--expect RE] [--server-stays]" \
		"--server PROG ARGS... --client PROG ARGS..." >&2; exit 2 ;;
	esac
	shift
done
[ ${#srv[@]} -gt 0 ] && [ ${#cli[@]} -gt 0 ] || { echo "cm_pair: no server or client" >&2; exit 2; }
for p in "${srv[0]}" "${cli[0]}"; do
	command -v "$p" >/dev/null 2>&1 || { echo "SKIP: $p is not installed"; exit 77; }
done
command -v ss >/dev/null 2>&1 || { echo "cm_pair: ss (iproute2) is needed" >&2; exit 1; }
[ -z "$ready" ] || command -v stdbuf >/dev/null 2>&1 ||
	{ echo "cm_pair: stdbuf (coreutils) is needed" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib_dir=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
[ -e "$lib_dir/librdmacm.so.1" ] || { echo "FAIL: no $lib_dir/librdmacm.so.1"; exit 1; }
run_env=("LD_LIBRARY_PATH=$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
addr=${SRN_PAIR_SERVER_IP:-127.0.0.1}
srv_pre=()
cli_pre=()
srv_env=()
cli_env=()
if [ -n "${SRN_PAIR_SERVER_NS:-}" ]; then
	srv_pre=(ip netns exec "$SRN_PAIR_SERVER_NS")
	srv_env=("SOFTRNIC_IP=$addr")
fi
if [ -n "${SRN_PAIR_CLIENT_NS:-}" ]; then
	cli_pre=(ip netns exec "$SRN_PAIR_CLIENT_NS")
	cli_env=("SOFTRNIC_IP=${SRN_PAIR_CLIENT_IP:?SRN_PAIR_CLIENT_IP}")
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/cm_pair.XXXXXX")
spid=""
cpid=""
stop() {
	local pid=$1 i
	[ -n "$pid" ] || return 0
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
cleanup() {
	stop "$cpid"
	stop "$spid"
	rm -rf "$out"
}
trap cleanup EXIT

# rdma_cm ports in use on the server's side (any port space)
cm_ports() {
	"${srv_pre[@]}" ss -xa 2>/dev/null |
		sed -n 's|.*@softrnic/cm/[0-9]*/\([0-9]*\).*|\1|p'
}
port=$fixed_port
if [ -n "$port" ]; then
	# one user of a fixed port at a time (the lock goes with this shell)
	exec 9>"${TMPDIR:-/tmp}/srn-cm-pair-port-$port.lock"
	flock -w "$timeout_s" 9 || { echo "FAIL: port $port stays locked"; exit 1; }
fi
for ((n = 0; n < 100 && ${#port} == 0; n++)); do
	p=$((10000 + (RANDOM * 32768 + RANDOM) % 20000))
	cm_ports | grep -x "$p" >/dev/null || { port=$p; break; }
done
[ -n "$port" ] || { echo "FAIL: no free rdma_cm port"; exit 1; }
group=239.255.$((RANDOM % 256)).$((RANDOM % 256))
subst() {
	local a
	for a in "$@"; do
		a=${a//@PORT@/$port}
		a=${a//@GROUP@/$group}
		a=${a//@CADDR@/${SRN_PAIR_CLIENT_IP:-$addr}}
		printf '%s\n' "${a//@ADDR@/$addr}"
	done
}
mapfile -t srv < <(subst "${srv[@]}")
mapfile -t cli < <(subst "${cli[@]}")

show() {
	echo "----- $1: $2"
	cat "$out/$1"
	echo "----- end of $1"
}
fail() {
	echo "FAIL: $*"
	show server "${srv[*]}"
	[ -f "$out/client" ] && show client "${cli[*]}"
	exit 1
}

deadline=$((SECONDS + timeout_s))
# --ready reads the server's output as it comes: line-buffered
[ -z "$ready" ] || srv=(stdbuf -oL "${srv[@]}")
setsid "${srv_pre[@]}" env "${run_env[@]}" "${srv_env[@]}" "${srv[@]}" \
	</dev/null >"$out/server" 2>&1 &
spid=$!
# listening: its port bound (rdma_bind_addr) and the CM port open in the
# server's process (rdma_listen)
cm_listens() {
	if [ -n "$ready" ]; then
		grep -q -E -- "$ready" "$out/server"
		return
	fi
	cm_ports | grep -x "$port" >/dev/null &&
		"${srv_pre[@]}" ss -Hltnp "sport = :${SOFTRNIC_CM_PORT:-4790}" 2>/dev/null |
		grep -q "pid=$spid,"
}
until cm_listens; do
	kill -0 "$spid" 2>/dev/null || fail "server exited before listening"
	[ $SECONDS -lt $deadline ] || fail "server did not listen within ${timeout_s}s"
	sleep 0.05
done
setsid "${cli_pre[@]}" env "${run_env[@]}" "${cli_env[@]}" "${cli[@]}" \
	</dev/null >"$out/client" 2>&1 &
cpid=$!

src=""
crc=""
grace=""
while [ -n "$cpid" ] || { [ -n "$spid" ] && [ $stays = 0 ]; }; do
	if [ -n "$cpid" ] && ! kill -0 "$cpid" 2>/dev/null; then
		crc=0
		wait "$cpid" || crc=$?
		cpid=""
		[ "$crc" = 0 ] || grace=${grace:-$((SECONDS + 5))}
	fi
	if [ -n "$spid" ] && ! kill -0 "$spid" 2>/dev/null; then
		src=0
		wait "$spid" || src=$?
		spid=""
		[ "$src" = 0 ] || grace=${grace:-$((SECONDS + 5))}
	fi
	[ $SECONDS -lt $deadline ] || break
	[ -z "$grace" ] || [ $SECONDS -lt "$grace" ] || break
	sleep 0.05
done
problems=()
[ -z "$cpid" ] || problems+=("client still running: killed")
if [ $stays = 1 ]; then
	[ -z "$src" ] || problems+=("server exited ($src) although it serves forever")
else
	[ -z "$spid" ] || problems+=("server still running: killed")
	[ -z "$src" ] || [ "$src" = 0 ] || problems+=("server exited with $src")
fi
[ -z "$crc" ] || [ "$crc" = 0 ] || problems+=("client exited with $crc")
stop "$cpid"
cpid=""
stop "$spid"
spid=""
for s in server client; do
	if grep -i -E "couldn't|failed|error|unable to" "$out/$s" |
		grep -q -v -i -E "error:? 0\b"; then
		problems+=("$s printed: $(grep -i -E "couldn't|failed|error|unable to" "$out/$s" | head -2 | paste -s -d '|')")
	fi
done
case "$(basename "${cli[0]}")" in
ib_*)
	awk '/^[ \t]*#bytes/ { h = 1; next }
		h && /^[ \t]*[0-9]+[ \t]+[0-9]+[ \t]+[0-9]+(\.[0-9]+)?/ { ok = 1 }
		END { exit !ok }' "$out/client" ||
		problems+=("client printed no results table")
	;;
esac
if [ -n "$expect" ] && ! grep -q -E -- "$expect" "$out/client" "$out/server"; then
	problems+=("no output matches /$expect/")
fi
if [ ${#problems[@]} -gt 0 ]; then
	printf 'cm_pair: %s\n' "${problems[@]}"
	fail "${#problems[@]} problem(s)"
fi
show client "${cli[*]}"
echo "PASS: ${srv[*]} / ${cli[*]}"
exit 0
