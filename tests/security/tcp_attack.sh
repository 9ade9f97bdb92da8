#!/bin/bash
# A QP talks only to the peer its RTR attributes name (docs/security.md).
# Three hosts (network namespaces on a bridge): a victim (198.51.100.1)
# and its legitimate peer (.2) run Debian's ibv_rc_pingpong with data
# checks (-c) over softrnic's TCP transport, while
#   - a third host (.3) sends HELLOs claiming the peer's QP (with the peer's
#     address in the GID, and with its own), follows them with WRITE and
#     READ requests with guessed PSNs and keys, HELLO-then-closes, and
#     scans 300 QPNs;
#   - a second process on the peer's host (.2: same address) claims the
#     victim with the right QPNs, a second link.
# Each claim must be refused with EACCES ('refused 13'; a QPN nobody
# owns: ENOENT), no request answered, the victim's QP still in RTS while
# it happens, and the pair must finish with its data intact. Exit 77
# (skip) without root or namespaces.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
tool=$(dirname "$lib")/bin/softrnic
att=$here/wire_attacker.py
[ "$(id -u)" = 0 ] || { echo "skip: needs root for network namespaces"; exit 77; }
command -v ibv_rc_pingpong >/dev/null || { echo "skip: ibverbs-utils missing"; exit 77; }
p=srnatk$$
A=${p}a B=${p}b C=${p}c
. "$here/../lib/hosts.sh"
hosts_up $p $A $B $C || { echo "skip: cannot create namespaces"; exit 77; }
run() { # ns ip cmd...
	local ns=$1 ip=$2
	shift 2
	ip netns exec $ns env LD_LIBRARY_PATH="$lib" SOFTRNIC_IP=$ip "$@"
}

out=$(mktemp -d)
PP="ibv_rc_pingpong -g 0 -c -n 400000 -p 18515"
run $A 198.51.100.1 $PP >"$out/a" 2>&1 &
pa=$!
sleep 0.5
run $B 198.51.100.2 $PP 198.51.100.1 >"$out/b" 2>&1 &
pb=$!
# the victim's QP and its peer's, from softrnic stat on the victim's host
for _ in $(seq 1 100); do
	line=$(run $A 198.51.100.1 "$tool" stat 2>/dev/null | grep -m1 RTS)
	[ -n "$line" ] && break
	sleep 0.05
done
vq=$(awk '{print $1}' <<<"$line")
pq=$(grep -o 'qpn 0x[0-9a-f]*' <<<"$line" | awk '{print $2}')
echo "victim QP $vq, its peer $pq ($line)"
[ -n "$vq" ] && [ -n "$pq" ]
check "the pair is connected" $? "stat: $line"

# refused with EACCES (13) and nothing answered: what the attacker printed
refused() { [ "$(head -1 <<<"$1")" = "refused 13" ] && ! grep -q answers <<<"$1"; }
a1=$(ip netns exec $C python3 "$att" 198.51.100.1 4791 hello 198.51.100.2 "$pq" "$vq")
refused "$a1"
check "third host claiming the peer's GID: refused, nothing answered" $? "$a1"
echo "     ($(tr '\n' ' ' <<<"$a1"))"
a2=$(ip netns exec $C python3 "$att" 198.51.100.1 4791 hello 198.51.100.3 "$pq" "$vq")
refused "$a2"
check "third host with its own GID: refused, nothing answered" $? "$a2"
a3=$(ip netns exec $C python3 "$att" 198.51.100.1 4791 close 198.51.100.2 "$pq" "$vq")
check "HELLO-then-close: refused" "$([ "$a3" = "refused 13" ]; echo $?)" "$a3"
a4=$(ip netns exec $B python3 "$att" 198.51.100.1 4791 hello 198.51.100.2 "$pq" "$vq")
refused "$a4"
check "a second link from the peer's host: refused" $? "$a4"
a5=$(ip netns exec $C python3 "$att" 198.51.100.1 4791 scan 198.51.100.3 1 $((vq - 150)) 300)
[ "$(grep -Ec '^refused (2|13)$' <<<"$a5")" = 300 ]
check "QPN scan: each refused (ENOENT; EACCES for a live QP)" $? \
	"$(sort <<<"$a5" | uniq -c | tr '\n' ' ')"
st=$(run $A 198.51.100.1 "$tool" stat 2>/dev/null | grep "^$vq")
grep -q RTS <<<"$st"
check "the victim's QP is still in RTS" $? "$st"

wait $pa
ra=$?
wait $pb
rb=$?
[ $ra = 0 ] && [ $rb = 0 ] && grep -q "iters in" "$out/a" && grep -q "iters in" "$out/b"
check "the pair finished, data checked (-c)" $? "exit $ra/$rb: $(tail -n 3 "$out/a" "$out/b")"
rm -rf "$out"
[ $fails = 0 ] && echo "tcp_attack: all checks passed"
exit $fails
