#!/bin/bash
# Runs Debian's ucx_perftest, unmodified, as a server and a client over
# softrnic, with UCX limited to softrnic's verbs transports:
#
#   ucx_pair.sh [--timeout S] [--tls TLS] [--expect-fail] -- ARGS...
#
# The server runs "ucx_perftest -p PORT", the client "ucx_perftest -p PORT
# ADDR ARGS" (ARGS: "-t tag_lat" and so on), each through "softrnic exec"
# (which gives UCX the device node it looks for) with UCX_TLS=TLS (default
# rc_verbs,ud_verbs,self) and UCX_NET_DEVICES=softrnic0:1. "self" reaches
# only its own process, so two processes can talk only over softrnic0.
#
# Passes when, within S seconds (default 60), both exit 0, the client
# prints its "Final:" row, and neither prints a UCX "ERROR" or "Fatal".
# --expect-fail inverts the verdict (a check that the pass above means
# something: without the device node, UCX must find no way to connect).
#
# SRN_PAIR_SERVER_NS/SRN_PAIR_CLIENT_NS with SRN_PAIR_SERVER_IP and
# SRN_PAIR_CLIENT_IP: each side runs in its network namespace with
# SOFTRNIC_IP set (tests/netns/netns_pair.sh creates them).
#
# Exit: 0 pass, 1 fail, 2 usage, 77 skip (ucx_perftest is not installed).
set -uo pipefail

timeout_s=60
tls=rc_verbs,ud_verbs,self
invert=0
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) timeout_s=$2; shift 2 ;;
	--tls) tls=$2; shift 2 ;;
	--expect-fail) invert=1; shift ;;
	--) shift; break ;;
	*) echo "usage: see $0" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: see $0" >&2; exit 2; }
command -v ucx_perftest >/dev/null ||
	{ echo "skip: ucx_perftest is not installed (ucx-utils)"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
tool=$lib/../bin/softrnic
[ -x "$tool" ] || { echo "ucx_pair: no $tool" >&2; exit 2; }

out=$(mktemp -d)
port=$((30000 + RANDOM % 20000))
addr=${SRN_PAIR_SERVER_IP:-127.0.0.1}
srv_pre=() cli_pre=()
if [ -n "${SRN_PAIR_SERVER_NS:-}" ]; then
	srv_pre=(ip netns exec "$SRN_PAIR_SERVER_NS"
		env "SOFTRNIC_IP=$SRN_PAIR_SERVER_IP")
	cli_pre=(ip netns exec "$SRN_PAIR_CLIENT_NS"
		env "SOFTRNIC_IP=$SRN_PAIR_CLIENT_IP")
fi
export UCX_TLS=$tls UCX_NET_DEVICES=softrnic0:1 SOFTRNIC_LIB_DIR=$lib
cleanup() {
	kill -9 "${spid:-}" "${cpid:-}" 2>/dev/null
	rm -rf "$out"
}
trap cleanup EXIT

# srv_start: the server on $port; 0 once its rendezvous port listens, 1
# when another program holds that port (then try another)
srv_start() {
	"${srv_pre[@]}" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . &&
		return 1
	"${srv_pre[@]}" "$tool" exec -- ucx_perftest -p "$port" >"$out/srv" 2>&1 &
	spid=$!
	for _ in $(seq 1 200); do
		"${srv_pre[@]}" ss -Hltn "sport = :$port" 2>/dev/null |
			grep . >/dev/null && return 0
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.05
	done
	grep -q "bind() failed" "$out/srv" || return 0
	wait "$spid"
	return 1
}
for _ in 1 2 3 4 5; do
	srv_start && break
	port=$((30000 + RANDOM % 20000))
done
timeout "$timeout_s" "${cli_pre[@]}" "$tool" exec -- \
	ucx_perftest -p "$port" "$addr" "$@" >"$out/cli" 2>&1
crc=$?
# the server ends when its client does; a failed client may leave it
# waiting for a peer that will not come
for _ in $(seq 1 50); do
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
kill -9 "$spid" 2>/dev/null
wait "$spid"
src=$?
ok=1
[ "$crc" = 0 ] && [ "$src" = 0 ] || ok=0
grep -q "^Final:" "$out/cli" || ok=0
grep -Eq "UCX +(ERROR|FATAL)|Fatal:" "$out/cli" "$out/srv" && ok=0
echo "--- client (exit $crc): ucx_perftest $* ---"
grep -v "^ *[0-9]* .*0x" "$out/cli" | tail -12
echo "--- server (exit $src) ---"
grep -v "^ *[0-9]* .*0x" "$out/srv" | tail -6
if [ "$invert" = 1 ]; then
	[ "$ok" = 0 ] && { echo "PASS: failed as expected"; exit 0; }
	echo "FAIL: the pair worked where it must not"
	exit 1
fi
[ "$ok" = 1 ] && { echo PASS; exit 0; }
echo FAIL
exit 1
