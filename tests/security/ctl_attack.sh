#!/bin/bash
# Same-host attacks on a live QP's control socket (docs/security.md): a
# legitimate pair (ib_write_bw server and client over softrnic's shared
# memory, as root) runs; the server's QP is the victim. ctl_attacker then
#   (a) as nobody, claims the legitimate client's QPN (CONNECT_REQ + MR_REQ):
#       another user may only ask for a mediated link, nothing else
#   (b) as root, claims the client's QPN, which it does not own
#   (c) as root, claims a QPN it owns (it listens on that QPN's socket
#       itself) that is not the victim's dest QPN
#   (d) as root, asks for the victim's MR (MR_REQ) without any CONNECT_REQ
#   (e) as nobody, asks for a mediated link (MEDIATE) claiming the client's
#       QPN, which it does not own
#   (f) as nobody, asks for a mediated link as a QPN it owns: the victim is
#       connected to its peer (not over a mediated link)
#   (g) a second victim, as nobody (wire_victim alone: its peer QPN is one
#       the attacker then owns): a nobody attacker of another group (same
#       user, but it could not ptrace the victim: not kin) claims that
#       QPN, which it really owns: the attach is refused (EACCES, no fd),
#       and the attacker's exit leaves the victim's QP in RTS (a peer that
#       was attached and leaves without BYE would move it to ERR)
#   (h) a lying target: root owns the QPN a third victim (wire_victim,
#       root) names as its peer and answers its CONNECT_REQ naming pid 1
#       as the QP's process: the victim refuses it (its process_vm_writev
#       would aim at the process its own dial reached, not the one named),
#       keeps its MR intact and does not crash
# Each must receive no fd at all (no memory, no link). After (f) the
# victim's QP must still be in RTR/RTS; the pair must finish normally
# (exit 0, result printed) and no QP of it may have gone to ERR; (g) and
# (h) run after it.
#   ctl_attack.sh ATTACKER SOFTRNIC_TOOL WIRE_VICTIM   (ctest security_ctl)
# SOFTRNIC_LIB_DIR: the libibverbs.so.1 to attack (default build/lib);
# CTL_ATTACK_VERSION: the protocol version the attacker writes (default
# this tree's; 1 for a library older than ADOPT v2).
# Exit 77 (skip) when not root, or setpriv / perftest are missing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
attacker=${1:?usage: ctl_attack.sh ATTACKER SOFTRNIC_TOOL}
tool=${2:?usage: ctl_attack.sh ATTACKER SOFTRNIC_TOOL WIRE_VICTIM}
wvictim=${3:?usage: ctl_attack.sh ATTACKER SOFTRNIC_TOOL WIRE_VICTIM}
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
[ "$(id -u)" = 0 ] || { echo "skip: needs root (to run as nobody)"; exit 77; }
command -v setpriv >/dev/null || { echo "skip: no setpriv"; exit 77; }
command -v stdbuf >/dev/null || { echo "skip: no stdbuf"; exit 77; }
command -v ib_write_bw >/dev/null || { echo "skip: perftest not installed"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "skip: no user nobody"; exit 77; }
group=$(id -gn nobody)

work=$(mktemp -d)
chmod 755 "$work"
stamp=$work/stamp
touch "$stamp"
port=$((19000 + $$ % 1000))
spid= cpid= vpid= hpid=
cleanup() {
	for p in $spid $cpid $vpid $hpid; do
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	# /dev/shm: whatever appeared during the test and nobody has open
	find /dev/shm -maxdepth 1 -newer "$stamp" ! -path /dev/shm 2>/dev/null |
		while read -r f; do
			fuser -s "$f" 2>/dev/null || rm -rf -- "$f"
		done
	rm -rf "$work"
}
trap cleanup EXIT
# nobody must be able to run the attacker wherever the build tree is
cp "$attacker" "$work/ctl_attacker" && chmod 755 "$work/ctl_attacker"
attacker=$work/ctl_attacker
cp "$wvictim" "$work/wire_victim" && chmod 755 "$work/wire_victim"
wvictim=$work/wire_victim

fails=0
check() { # name, condition result (0 ok), detail
	if [ "$2" = 0 ]; then
		echo "ok   $1"
	else
		echo "FAIL $1: $3"
		fails=$((fails + 1))
	fi
}

run_bw() { # out, [server address]
	env LD_LIBRARY_PATH="$lib" SOFTRNIC_TRANSPORT=shm \
		timeout 60 stdbuf -oL ib_write_bw -d softrnic0 -x 0 -p $port -D 8 "${@:2}" \
		>"$1" 2>&1
}
run_bw "$work/server.out" &
spid=$!
sleep 0.3
run_bw "$work/client.out" 127.0.0.1 &
cpid=$!
for _ in $(seq 1 100); do # both addresses printed: connected
	grep -q "remote address" "$work/server.out" 2>/dev/null && break
	sleep 0.05
done
line() { sed -n "s/.*$1 address:.*QPN \(0x[0-9a-f]*\).*RKey \(0x[0-9a-f]*\).*/\1 \2/p" \
	"$work/server.out" | head -1; }
read -r victim rkey <<<"$(line local)"
read -r peer _ <<<"$(line remote)"
if [ -z "${victim:-}" ] || [ -z "${peer:-}" ]; then
	echo "FAIL: the legitimate pair did not connect"
	cat "$work/server.out" "$work/client.out"
	exit 1
fi
echo "victim: ib_write_bw server QP $victim (rkey $rkey), its peer QP $peer"
"$tool" stat | grep -E "^QPN|^$victim|^$peer"

attack() { # name, expected text, [setpriv...] --, attacker args
	local name=$1 want=$2 out=$work/attack.out rc
	shift 2
	local pre=()
	while [ "$1" != -- ]; do pre+=("$1"); shift; done
	shift
	"${pre[@]}" "$attacker" "$@" ${CTL_ATTACK_VERSION:+-V $CTL_ATTACK_VERSION} \
		>"$out" 2>&1
	rc=$?
	sed 's/^/     /' "$out"
	[ $rc = 0 ] && grep -q "fds received: 0" "$out" && grep -q "$want" "$out"
	check "$name" $? "exit $rc, expected 0 fds and '$want'"
}

attack "(a) nobody claiming the peer's QPN: another user gets a mediated link only" \
	"closed by the victim\|reset by the victim\|send failed" \
	setpriv --reuid=nobody --regid="$group" --clear-groups -- \
	"$victim" -c "$peer" -k "$rkey"
attack "(b) root claiming a QPN it does not own: refused" \
	"status -1 (Operation not permitted)" \
	env -- "$victim" -c "$peer" -k "$rkey"
own=$(printf '0x%06x' $((0x100000 + (RANDOM << 4) + $$ % 16)))
attack "(c) root claiming its own QPN $own, not the victim's peer: refused" \
	"status -1 (Operation not permitted)" \
	env -- "$victim" -c "$own" -o -k "$rkey"
attack "(d) MR_REQ without CONNECT_REQ: connection closed" \
	"MR_REQ: connection closed by the victim" \
	env -- "$victim" -k "$rkey"

attack "(e) nobody asking for a mediated link as the peer's QPN: refused" \
	"MEDIATE: answer type 12 status -1 (Operation not permitted)" \
	setpriv --reuid=nobody --regid="$group" --clear-groups -- \
	"$victim" -c "$peer" -m
own=$(printf '0x%06x' $((0x200000 + (RANDOM << 4) + $$ % 16)))
attack "(f) nobody asking for a mediated link as its own QPN $own: refused" \
	"MEDIATE: answer type 12 status -13 (Permission denied)" \
	setpriv --reuid=nobody --regid="$group" --clear-groups -- \
	"$victim" -c "$own" -o -m

st=$("$tool" stat | awk -v q="$victim" '$1 == q { print $3 }')
[ "$st" = RTR ] || [ "$st" = RTS ]
check "the victim's QP is still connected after the attacks" $? "state '$st'"

wait $cpid
crc=$?
wait $spid
src=$?
cpid= spid=
grep -q "BW average" "$work/client.out" && [ $crc = 0 ] && [ $src = 0 ]
check "the legitimate pair finished (exit $src/$crc, result printed)" $? \
	"$(tail -n 5 "$work/server.out" "$work/client.out")"
! grep -q "died\|RTS -> ERR\|RTR -> ERR\|error:" "$work/server.out" "$work/client.out"
check "no QP of the pair went to ERR" $? \
	"$(grep "died\|ERR\|error:" "$work/server.out" "$work/client.out")"
grep -q "refused" "$work/server.out"
check "the victim logged the refusal" $? "$(grep softrnic "$work/server.out")"
grep "BW average" -A1 "$work/client.out" | tail -1

# (g) and (h) take victims of their own, once the pair is done: nothing
# else of this host listens on port 4791 then, where a victim that is not
# kin with its peer dials for a mediated link
# (g): a nobody victim whose peer QPN the attacker owns; the attacker is
# nobody too, in another group (not kin: it could not ptrace the victim)
other=$(getent group daemon >/dev/null && echo daemon || echo 1)
# below every QPN the library gives (>= 0x100): the victim, whose peer is
# not kin, takes the mediated path, on which the QP with the smaller QPN
# dials; so the victim waits to be dialed and its RTR does not depend on
# the attacker (which answers no MEDIATE)
own=$(printf '0x%06x' $((0x10 + $$ % 0xe0)))
qpnfile=$work/victim2.qpn
# the attacker owns the QPN first (the victim's RTR dials it), then waits
# for the victim's QPN in qpnfile
setpriv --reuid=nobody --regid="$other" --clear-groups -- \
	"$attacker" "@$qpnfile" -c "$own" -o >"$work/attack_g.out" 2>&1 &
apid=$!
for _ in $(seq 1 200); do # it owns the QPN before the victim's RTR dials it
	grep -q "owning QPN" "$work/attack_g.out" 2>/dev/null && break
	sleep 0.05
done
env LD_LIBRARY_PATH="$lib" SOFTRNIC_TRANSPORT=shm timeout 60 \
	setpriv --reuid=nobody --regid="$group" --clear-groups -- \
	stdbuf -oL "$wvictim" alone 127.0.0.1 "$own" 0 "$work/go" \
	>"$work/victim2.out" 2>&1 &
vpid=$!
for _ in $(seq 1 200); do
	grep -q "pair done" "$work/victim2.out" 2>/dev/null && break
	sleep 0.05
done
sed -n 's/^victim qpn \([0-9a-fx]*\) .*/\1/p' "$work/victim2.out" >"$qpnfile.tmp"
mv "$qpnfile.tmp" "$qpnfile"
wait $apid
arc=$?
sed 's/^/     /' "$work/attack_g.out"
[ $arc = 0 ] && grep -q "fds received: 0" "$work/attack_g.out" &&
	grep -q "CONNECT_REQ: answer type [0-9]* status -13 (Permission denied)" \
		"$work/attack_g.out"
check "(g) nobody of another group, owning the peer QPN $own: attach refused (EACCES)" \
	$? "exit $arc, expected 0 fds and status -13"
touch "$work/go"
wait $vpid
vpid=
sed 's/^/     /' "$work/victim2.out"
grep -q "state RTS" "$work/victim2.out"
check "(g) the second victim's QP stays RTS after the attacker left" $? \
	"$(cat "$work/victim2.out")"

# (h): a lying target
own=$(printf '0x%06x' $((0x400000 + (RANDOM << 4) + $$ % 16)))
"$attacker" serve "$own" 1 >"$work/attack_h.out" 2>&1 &
hpid=$!
for _ in $(seq 1 200); do
	grep -q "owning QPN" "$work/attack_h.out" 2>/dev/null && break
	sleep 0.05
done
env LD_LIBRARY_PATH="$lib" SOFTRNIC_TRANSPORT=shm timeout 60 \
	stdbuf -oL "$wvictim" alone 127.0.0.1 "$own" 0 "$work/go_h" \
	>"$work/victim3.out" 2>&1 &
vpid=$!
wait $hpid
hrc=$?
hpid=
touch "$work/go_h"
wait $vpid
vrc=$?
vpid=
sed 's/^/     /' "$work/attack_h.out" "$work/victim3.out"
[ $hrc = 0 ] && [ $vrc = 0 ] && grep -q "says it is 1: refused" "$work/victim3.out" &&
	grep -q "mr intact" "$work/victim3.out"
check "(h) a target naming another process as its QP's owner is refused" $? \
	"attacker exit $hrc, victim exit $vrc"

[ $fails = 0 ] && echo "ctl_attack: all checks passed"
exit $fails
