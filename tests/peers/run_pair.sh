#!/bin/bash
# Runs an unmodified verbs program (perftest's ib_*, ibverbs-utils'
# ibv_*_pingpong) as a server and a client on this host, both through
# softrnic's libibverbs.so.1, and checks that the pair worked.
#
#   run_pair.sh [--timeout S] [--expect REGEX] [--show WHICH] -- PROG [ARGS...]
#
# The server runs "PROG ARGS -p PORT", the client "PROG ARGS -p PORT
# 127.0.0.1", with a free TCP port chosen here. perftest programs also get
# -F (no failure on a CPU frequency mismatch, usual in VMs) unless ARGS
# already has it.
#
# Passes when, within S seconds (default 60) for the whole run:
#   - both exit with 0;
#   - neither prints a line with "couldn't", "failed", "error" or
#     "unable to" (any case);
#   - perftest (ib_*): the client prints a results table, a "#bytes" header
#     followed by a numeric row;
#   - ibv_*pingpong: both print "... bytes in ... seconds" and "... iters
#     in ... seconds" (ibv_xsrq_pingpong: "success");
#   - with --expect, the client's or the server's output matches REGEX
#     (grep -E).
# If one side fails, the other is given a few seconds and then killed, so
# a failing peer is reported at once rather than at the timeout.
#
# On success the outputs named by --show are printed: both (default),
# client, server or none. On failure both are always printed.
#
# The library comes from $SOFTRNIC_LIB_DIR (default: <repo>/build/lib),
# put first on LD_LIBRARY_PATH of both programs only.
#
# Two hosts: with SRN_PAIR_SERVER_NS / SRN_PAIR_CLIENT_NS (network
# namespaces) and SRN_PAIR_SERVER_IP / SRN_PAIR_CLIENT_IP set, each side runs
# in its namespace with SOFTRNIC_IP set to its address, and the client
# connects to SRN_PAIR_SERVER_IP (tests/netns/ creates them).
#
# Two users: with SRN_PAIR_SERVER_USER or SRN_PAIR_CLIENT_USER set (run as
# root), that side runs as that user (setpriv, its own group, no others).
#
# Exit: 0 pass, 1 fail, 2 usage, 77 skip (PROG is not installed).
set -euo pipefail

usage() {
	sed -n '/^#   run_pair/s/^#   //p' "$0" >&2
	exit "${1:-2}"
}

timeout_s=60
expect=""
show_which=both
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout)
		[ $# -ge 2 ] || usage
		timeout_s=$2
		shift 2
		;;
	--expect)
		[ $# -ge 2 ] || usage
		expect=$2
		shift 2
		;;
	--)
		shift
		break
		;;
	--show)
		[ $# -ge 2 ] || usage
		show_which=$2
		shift 2
		;;
	-h | --help) usage 0 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || usage
case "$timeout_s" in
'' | *[!0-9]*) echo "run_pair: --timeout wants whole seconds" >&2; exit 2 ;;
esac
case "$show_which" in
both | client | server | none) ;;
*) echo "run_pair: --show wants both, client, server or none" >&2; exit 2 ;;
esac
prog=$1
shift
args=("$@")

if ! command -v "$prog" >/dev/null 2>&1; then
	echo "SKIP: $prog is not installed"
	exit 77
fi
if ! command -v ss >/dev/null 2>&1; then
	echo "run_pair: ss (iproute2) is needed" >&2
	exit 1
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib_dir=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
if [ ! -e "$lib_dir/libibverbs.so.1" ]; then
	echo "note: $lib_dir/libibverbs.so.1 does not exist;" \
		"the programs will load the system library"
fi
run_env=("LD_LIBRARY_PATH=$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
server_ip=${SRN_PAIR_SERVER_IP:-127.0.0.1}
srv_pre=()
cli_pre=()
srv_env=()
cli_env=()
if [ -n "${SRN_PAIR_SERVER_NS:-}" ]; then
	srv_pre=(ip netns exec "$SRN_PAIR_SERVER_NS")
	srv_env=("SOFTRNIC_IP=$server_ip")
fi
if [ -n "${SRN_PAIR_CLIENT_NS:-}" ]; then
	cli_pre=(ip netns exec "$SRN_PAIR_CLIENT_NS")
	cli_env=("SOFTRNIC_IP=${SRN_PAIR_CLIENT_IP:?SRN_PAIR_CLIENT_IP}")
fi

for side in SERVER CLIENT; do
	user_var=SRN_PAIR_${side}_USER
	[ -n "${!user_var:-}" ] || continue
	user=${!user_var}
	pre=(setpriv --reuid="$user" --regid="$(id -gn "$user")" --clear-groups --)
	if [ $side = SERVER ]; then srv_pre+=("${pre[@]}"); else cli_pre+=("${pre[@]}"); fi
done

is_perftest=0
is_pingpong=0
case "$(basename "$prog")" in
ib_*) is_perftest=1 ;;
ibv_xsrq_pingpong) is_pingpong=2 ;; # prints only "success"
ibv_*pingpong) is_pingpong=1 ;;
esac
if [ $is_perftest = 1 ]; then
	has_f=0
	for a in "${args[@]}"; do
		case "$a" in -F | --CPU-freq) has_f=1 ;; esac
	done
	[ $has_f = 1 ] || args+=(-F)
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/run_pair.XXXXXX")
spid=""
cpid=""
port=""

# Each program runs in its own session and process group (setsid execs it
# in place, so the pid is the group id): stopping it also stops anything it
# forked. TERM first, KILL after 2 s.
setsid=()
command -v setsid >/dev/null 2>&1 && setsid=(setsid)
stop() {
	local pid=$1 i
	[ -n "$pid" ] || return 0
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 20; i++)); do
		kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	stop "$cpid"
	stop "$spid"
	rm -rf "$out"
}
trap cleanup EXIT
trap 'echo "run_pair: interrupted"; exit 130' INT
trap 'echo "run_pair: terminated"; exit 143' TERM HUP

show() {
	local side=$1
	echo "----- $side: $prog ${args[*]} -p $port${2:+ $2}"
	cat "$out/$side"
	echo "----- end of $side"
}

fail() {
	echo "FAIL: $prog ${args[*]}: $*"
	[ -f "$out/server" ] && show server
	[ -f "$out/client" ] && show client "$server_ip"
	exit 1
}

deadline=$((SECONDS + timeout_s))

# A TCP port nobody uses, below the ephemeral range so that no outgoing
# connection takes it meanwhile.
pick_port() {
	local lo=10000 hi=32767 eph p n
	eph=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) || eph=""
	if [ -n "$eph" ] && [ "$eph" -gt $((lo + 1000)) ]; then
		hi=$((eph - 1))
	fi
	for ((n = 0; n < 200; n++)); do
		p=$((lo + (RANDOM * 32768 + RANDOM + $$) % (hi - lo + 1)))
		if [ -z "$("${srv_pre[@]}" ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null)" ]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

listening() {
	[ -n "$("${srv_pre[@]}" ss -Hltn "sport = :$1" 2>/dev/null)" ]
}

# Starts the server and waits until it listens. Returns 1 if the port was
# taken under our feet (the caller tries another), exits on other failures.
start_server() {
	: >"$out/server"
	"${setsid[@]}" "${srv_pre[@]}" env "${run_env[@]}" "${srv_env[@]}" \
		"$prog" "${args[@]}" -p "$port" </dev/null >"$out/server" 2>&1 &
	spid=$!
	while ! listening "$port"; do
		if ! kill -0 "$spid" 2>/dev/null; then
			local rc=0
			wait "$spid" || rc=$?
			spid=""
			if grep -q -i -E "listen to port|address already in use|failed to bind socket" \
				"$out/server"; then
				return 1
			fi
			fail "server exited with $rc before listening on port $port"
		fi
		if [ $SECONDS -ge "$deadline" ]; then
			fail "server did not listen on port $port within ${timeout_s}s"
		fi
		sleep 0.05
	done
	return 0
}

started=0
for ((attempt = 0; attempt < 5; attempt++)); do
	port=$(pick_port) || fail "no free TCP port found"
	if start_server; then
		started=1
		break
	fi
	echo "note: port $port was taken, trying another"
done
[ $started = 1 ] || fail "could not bind a TCP port for the server"

"${setsid[@]}" "${cli_pre[@]}" env "${run_env[@]}" "${cli_env[@]}" \
	"$prog" "${args[@]}" -p "$port" "$server_ip" </dev/null >"$out/client" 2>&1 &
cpid=$!

# Waits for both; once one fails the other gets a 5 s grace period.
src=""
crc=""
grace=""
timed_out=0
while [ -n "$spid" ] || [ -n "$cpid" ]; do
	if [ -n "$spid" ] && ! kill -0 "$spid" 2>/dev/null; then
		src=0
		wait "$spid" || src=$?
		spid=""
		[ "$src" = 0 ] || grace=${grace:-$((SECONDS + 5))}
	fi
	if [ -n "$cpid" ] && ! kill -0 "$cpid" 2>/dev/null; then
		crc=0
		wait "$cpid" || crc=$?
		cpid=""
		[ "$crc" = 0 ] || grace=${grace:-$((SECONDS + 5))}
	fi
	[ -n "$spid" ] || [ -n "$cpid" ] || break
	if [ $SECONDS -ge "$deadline" ]; then
		timed_out=1
		break
	fi
	if [ -n "$grace" ] && [ $SECONDS -ge "$grace" ]; then
		break
	fi
	sleep 0.05
done

problems=()
[ $timed_out = 0 ] || problems+=("TIMEOUT: the pair did not finish within ${timeout_s}s")
for side in server client; do
	if [ $side = server ]; then pid=$spid; else pid=$cpid; fi
	[ -n "$pid" ] || continue
	stop "$pid"
	if [ $timed_out = 1 ]; then
		problems+=("$side was still running: killed")
	else
		problems+=("$side was still running 5s after its peer failed: killed")
	fi
done
spid=""
cpid=""
[ -z "$src" ] || [ "$src" = 0 ] || problems+=("server exited with $src")
[ -z "$crc" ] || [ "$crc" = 0 ] || problems+=("client exited with $crc")
# The output is judged only for a pair that ran to its end.
[ "$src" = 0 ] && [ "$crc" = 0 ] && complete=1 || complete=0

err_re="couldn't|failed|error|unable to"
for side in server client; do
	if grep -q -i -E "$err_re" "$out/$side"; then
		msg=$(grep -i -E "$err_re" "$out/$side" | head -3 |
			tr -s ' \t' ' ' | paste -s -d '|') || true
		problems+=("$side printed: $msg")
	fi
done

if [ "$complete" = 1 ] && [ $is_perftest = 1 ]; then
	# A row after the header: size, iterations, then a number.
	if ! awk '/^[ \t]*#bytes/ { hdr = 1; next }
		hdr && /^[ \t]*[0-9]+[ \t]+[0-9]+[ \t]+[0-9]+(\.[0-9]+)?/ { ok = 1 }
		END { exit !ok }' "$out/client"; then
		problems+=("client printed no results table (#bytes header and a numeric row)")
	fi
fi
if [ "$complete" = 1 ] && [ $is_pingpong = 1 ]; then
	for side in server client; do
		grep -q -E '[0-9]+ bytes in [0-9.]+ seconds' "$out/$side" ||
			problems+=("$side printed no 'bytes in ... seconds' line")
		grep -q -E '[0-9]+ iters in [0-9.]+ seconds' "$out/$side" ||
			problems+=("$side printed no 'iters in ... seconds' line")
	done
fi
if [ "$complete" = 1 ] && [ $is_pingpong = 2 ]; then
	for side in server client; do
		grep -q -x 'success' "$out/$side" ||
			problems+=("$side printed no 'success' line")
	done
fi
if [ "$complete" = 1 ] && [ -n "$expect" ] && ! grep -q -E -- "$expect" "$out/client" "$out/server"; then
	problems+=("no output matches /$expect/")
fi

if [ ${#problems[@]} -gt 0 ]; then
	for p in "${problems[@]}"; do
		echo "run_pair: $p"
	done
	fail "${#problems[@]} problem(s)"
fi
case "$show_which" in both | server) show server ;; esac
case "$show_which" in both | client) show client "$server_ip" ;; esac
echo "PASS: $prog ${args[*]}"
exit 0
