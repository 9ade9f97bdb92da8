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
# it happens, and the pair must finish with its data intact.
# Then a victim whose memory is checked byte for byte (wire_victim, its
# client on .1 WRITEs and READs back at .2):
#   - its client's stream (HELLO and requests, built byte for byte as the
#     client sends them) is replayed from the third host while the pair
#     runs (paused between two phases, and while the second runs: it goes
#     on until the replay is over), from
#     the peer's host while the pair runs (a second link), and from the
#     third host after the client left (BYE): refused 13, nothing
#     answered; the client finishes, the victim's QP is in RTS and every
#     byte of its MR is what the client last wrote or the initial pattern;
#   - claims with the right QPNs from the right address (the peer's host)
#     by an attacker who does not know the PSNs, after the victim's RTR and
#     before the real peer dials: one whose first request has a wrong PSN
#     is closed, one that stays silent is closed when the real peer proves
#     itself; the victim's QP never in ERR, the real peer finishes, the MR
#     as it left it (see below);
#   - at a victim in RTS: a wrong HELLO proof is refused (EACCES), the QP
#     untouched; the right proof with a WRITE of a wrong PSN (1 behind):
#     accepted, then dropped with nothing answered or written, and the
#     victim's QP in ERR (docs/wire.md, "Errors and faults": a psn out of
#     sequence on the QP's own link drops it, QP -> ERR).
# Exit 77 (skip) without root or namespaces.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
tool=$(dirname "$lib")/bin/softrnic
att=$here/wire_attacker.py
vic=${1:-$(dirname "$lib")/bin/wire_victim}
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

# until FILE has a line matching RE (120 s at most: a loaded machine)
await() {
	for _ in $(seq 1 1200); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
# victim's words: "victim qpn Q rq_psn P sq_psn S rkey K addr A peer_qpn R"
field() { grep -m1 '^victim qpn' "$1" | awk -v f="$2" '{for (i = 1; i < NF; i++) if ($i == f) print $(i + 1)}'; }
replay() { # netns: replays the client's first 50 rounds at the victim
	ip netns exec "$1" python3 "$att" 198.51.100.2 4791 replay 198.51.100.1 \
		"$(field "$out/v" peer_qpn)" "$(field "$out/v" qpn)" \
		"$(field "$out/v" rq_psn)" "$(field "$out/v" rkey)" \
		"$(field "$out/v" addr)" 50 "$(field "$out/v" sq_psn)"
}
run $B 198.51.100.2 "$vic" serve 18516 "$out/vgo" >"$out/v" 2>&1 &
pv=$!
run $A 198.51.100.1 "$vic" client 198.51.100.2 18516 50 "$out/cgo" \
	"$out/cstop" >"$out/c" 2>&1 &
pc=$!
await "$out/c" "phase1 done"
check "victim pair: 50 rounds (WRITE, READ back) done" $? "$(cat "$out/v" "$out/c")"
r1=$(replay $C)
refused "$r1"
check "replay from a third host, the pair's link up: refused, nothing answered" $? "$r1"
r2=$(replay $A)
refused "$r2"
check "replay from the peer's host (a second link): refused, nothing answered" $? "$r2"
touch "$out/cgo" # the client's rounds go on until cstop: we replay again
r3=$(replay $C)
refused "$r3" && kill -0 $pc
check "replay from a third host while the pair runs: refused, nothing answered" $? "$r3"
touch "$out/cstop"
wait $pc
rc=$?
[ $rc = 0 ] && grep -Eq "client done \([0-9]+ rounds\)" "$out/c"
check "the victim's client finished, every READ what it wrote" $? "exit $rc: $(cat "$out/c")"
await "$out/v" "pair done"
r4=$(replay $C)
refused "$r4"
check "replay from a third host after the client left: refused, nothing answered" $? "$r4"
touch "$out/vgo.mid"
await "$out/v" "mid state"
grep -qx "mid state RTS" "$out/v"
check "the victim's QP in RTS after the replays" $? "$(cat "$out/v")"
# from the peer's host after the client left (BYE): a link from there may
# take the client's place (a reconnection), but its requests continue from
# where the client's stopped (wire.md, "Leaving"): the replayed stream is
# out of sequence, nothing of it is executed
r5=$(replay $A)
[ "$r5" = "$(printf 'accepted\ndropped')" ]
check "replay from the peer's host after the client left: accepted, then dropped unanswered" $? "$r5"
touch "$out/vgo"
wait $pv
grep -qx "mr intact" "$out/v"
check "the victim's MR byte for byte as the client left it" $? "$(cat "$out/v")"

# An attacker on the peer's host (its address) that knows both QPNs but
# not the PSNs claims the victim after its RTR, before the real peer
# dials (wire_victim serve with HOLDFILE: the victim waits at RTR, its
# client not told yet, and stays at RTR while the client runs, as a
# perftest server). A claim is a candidate until it proves itself
# (docs/wire.md, "Whom a QP talks to"): one whose first request has a
# wrong PSN is closed, the QP untouched (before the rule it held the link
# and the PSN put the QP in ERR); one that says nothing is closed once the
# real peer, a second candidate meanwhile, proves itself with its first
# request's PSN.
run $B 198.51.100.2 "$vic" serve 18517 "$out/hgo" "$out/hhold" >"$out/h" 2>&1 &
pv=$!
run $A 198.51.100.1 "$vic" client 198.51.100.2 18517 50 "$out/hc" "$out/hc" \
	>"$out/hcl" 2>&1 &
pc=$!
await "$out/h" "^victim qpn"
check "a victim at RTR, its client not told yet" $? "$(cat "$out/h")"
claim() { # MODE ARGS...: a claim from the peer's host, with the QPNs
	local mode=$1
	shift
	ip netns exec $A python3 "$att" 198.51.100.2 4791 "$mode" 198.51.100.1 \
		"$(field "$out/h" peer_qpn)" "$(field "$out/h" qpn)" "$@"
}
k1=$(claim psn $(($(field "$out/h" rq_psn) + 5)) "$(field "$out/h" rkey)" \
	"$(field "$out/h" addr)")
[ "$k1" = "$(printf 'accepted\ndropped')" ]
check "claim before the peer, first PSN wrong: a candidate, then closed unanswered" $? "$k1"
claim hold 600 >"$out/hk" 2>&1 &
pk=$!
await "$out/hk" "accepted"
check "a silent claim before the peer: a candidate" $? "$(cat "$out/hk")"
touch "$out/hhold"
await "$out/h" "hold state"
grep -qx "hold state RTR" "$out/h"
check "  ... the victim's QP not in ERR" $? "$(cat "$out/h")"
touch "$out/hc"
wait $pc
rc=$?
[ $rc = 0 ] && grep -Eq "client done \([0-9]+ rounds\)" "$out/hcl"
check "the real peer then connects and finishes, every READ what it wrote" $? "exit $rc: $(cat "$out/hcl")"
wait $pk
[ "$(cat "$out/hk")" = "$(printf 'accepted\ndropped')" ]
check "  ... the silent claim closed when the peer proved itself" $? "$(cat "$out/hk")"
await "$out/h" "pair done"
touch "$out/hgo"
wait $pv
grep -qx "state RTS" "$out/h" && grep -qx "mr intact" "$out/h"
check "  ... the victim's QP in RTS, its MR as the real peer left it" $? "$(cat "$out/h")"

# a victim at RTS (no peer will come): a claim with the right QPNs from
# the right address whose HELLO has a wrong proof (not the victim's
# sq_psn) is refused at once, the QP untouched; one with the right proof
# (it knows the PSNs: the peer) whose WRITE has a wrong PSN (1 behind)
# fails the QP, as any violation on the QP's own link
for d in 5 -1; do
	rm -f "$out/ago"
	psn=$(( (RANDOM << 8 | RANDOM & 255) % 0xfffff0 + 8 ))
	run $B 198.51.100.2 "$vic" alone 198.51.100.1 0x777 $psn "$out/ago" \
		>"$out/w$d" 2>&1 &
	pv=$!
	await "$out/w$d" "pair done"
	proof=$(field "$out/w$d" sq_psn)
	[ $d = 5 ] && proof=$(( (proof + 1) & 0xffffff ))
	w=$(ip netns exec $A python3 "$att" 198.51.100.2 4791 psn 198.51.100.1 \
		0x777 "$(field "$out/w$d" qpn)" $((psn + d)) \
		"$(field "$out/w$d" rkey)" "$(field "$out/w$d" addr)" $proof)
	touch "$out/ago"
	wait $pv
	if [ $d = 5 ]; then
		[ "$w" = "$(printf 'refused 13\ndropped')" ]
		check "right QPNs and address, wrong HELLO proof: refused" $? "$w"
		grep -qx "state RTS" "$out/w$d" && grep -qx "mr intact" "$out/w$d"
		check "  ... the victim's QP in RTS, its MR unchanged" $? "$(cat "$out/w$d")"
	else
		[ "$w" = "$(printf 'accepted\ndropped')" ]
		check "right proof, PSN off by $d: accepted, then dropped unanswered" $? "$w"
		grep -qx "state ERR" "$out/w$d" && grep -qx "mr intact" "$out/w$d"
		check "  ... the victim's QP in ERR (wire.md), its MR unchanged" $? "$(cat "$out/w$d")"
	fi
done

wait $pa
ra=$?
wait $pb
rb=$?
[ $ra = 0 ] && [ $rb = 0 ] && grep -q "iters in" "$out/a" && grep -q "iters in" "$out/b"
check "the pair finished, data checked (-c)" $? "exit $ra/$rb: $(tail -n 3 "$out/a" "$out/b")"
rm -rf "$out"
[ $fails = 0 ] && echo "tcp_attack: all checks passed"
exit $fails
