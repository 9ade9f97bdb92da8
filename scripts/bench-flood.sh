#!/bin/bash
# A transfer under a flood of hostile connections (docs/BENCHMARKS.md,
# "Under a connection flood"; issue 13, "hostile connections are cheap"):
# in a network namespace of its own (root), ib_write_bw over softrnic's TCP
# transport between two addresses, D seconds, first alone, then while a
# third address holds 2,000 connections to port 4791 that never say a
# valid HELLO (700 idle, 700 sending a byte a second, 600 sending garbage,
# reopened as they are closed). Prints both bandwidths and their ratio
# (issue 13's goal: >= 0.7), R rounds (medians; the ratio is the median
# of each round's). A figure, not a test:
# it depends on the machine's load.
#   scripts/bench-flood.sh [D] [R]    (default 5 s, 3 rounds)
set -u
cd "$(dirname "$0")/.."
d=${1:-5}
rounds=${2:-3}
lib=$PWD/build/lib
[ "$(id -u)" = 0 ] || { echo "needs root (a network namespace)"; exit 77; }
command -v ib_write_bw >/dev/null || { echo "perftest not installed"; exit 77; }
. tests/lib/hosts.sh
ns=srnbf$$
srv=198.51.100.9 cli=198.51.100.10 att=198.51.100.11
host_alone "$ns" $srv $cli $att || exit 77
work=$(mktemp -d)
trap 'hosts_down; rm -rf "$work"' EXIT
med() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }

# one transfer: its average bandwidth in MB/s (perftest's BW average)
bw() {
	local port=$((18600 + RANDOM % 1000))
	ip netns exec "$ns" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$srv \
		SOFTRNIC_TRANSPORT=tcp ib_write_bw -d softrnic0 -x 0 -F -D "$d" \
		-p $port >"$work/s" 2>&1 &
	local spid=$!
	sleep 0.5
	ip netns exec "$ns" env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$cli \
		SOFTRNIC_TRANSPORT=tcp ib_write_bw -d softrnic0 -x 0 -F -D "$d" \
		-p $port $srv >"$work/c" 2>&1
	wait $spid
	awk '$1 ~ /^[0-9]+$/ && NF >= 5 {v = $4} END {print v + 0}' "$work/c"
}

# holds the flood until killed: prints how many connections it holds
flood() {
	ip netns exec "$ns" prlimit --nofile=8192 python3 - "$srv" "$att" <<'PY'
import os, socket, sys, time
host, src = sys.argv[1], sys.argv[2]
kinds = ["idle"] * 700 + ["slow"] * 700 + ["garbage"] * 600
socks = [None] * len(kinds)
def opened(k):
    try:
        s = socket.create_connection((host, 4791), timeout=1,
                                     source_address=(src, 0))
        s.setblocking(False)
        if k == "garbage":
            s.send(os.urandom(64))
        return s
    except OSError:
        return None
while True:
    for i, k in enumerate(kinds):
        s = socks[i]
        if s is not None:
            try:
                if s.recv(64, socket.MSG_PEEK) == b"":
                    s.close()  # closed by the server: open another
                    s = None
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                s = None
        if s is None:
            s = opened(k)
        elif k == "slow":
            try:
                s.send(b"\x53")
            except OSError:
                pass
        socks[i] = s
    print(sum(1 for s in socks if s is not None), flush=True)
    time.sleep(1)
PY
}

for _ in $(seq "$rounds"); do
	bw >>"$work/alone"
	flood >"$work/held" 2>/dev/null &
	fp=$!
	sleep 2
	bw >>"$work/flood"
	kill $fp 2>/dev/null
	wait $fp 2>/dev/null
	a=$(tail -n 1 "$work/alone") f=$(tail -n 1 "$work/flood")
	awk -v a="$a" -v f="$f" 'BEGIN {printf "%.2f\n", a ? f / a : 0}' >>"$work/ratio"
	echo "round: alone $a MB/s, flood $f MB/s (x $(tail -n 1 "$work/ratio")), flood connections open at once: up to $(sort -g "$work/held" | tail -n 1)"
done
echo "median of $rounds: alone $(med <"$work/alone") MB/s, under the flood $(med <"$work/flood") MB/s, ratio (median of the rounds') $(med <"$work/ratio")"
