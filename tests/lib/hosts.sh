# Sourced by the tests that need several hosts: network namespaces on one
# bridge, deleted (with every process in them) when the test exits.
#   hosts_up PREFIX NS...   NS gets 198.51.100.<its position> on the
#                           bridge (namespace PREFIXs); returns 77 when
#                           namespaces cannot be made here. PREFIX is a
#                           stem and the test's pid: what a killed run of
#                           the same stem left is deleted first
#   hosts_cut PREFIX        takes the bridge down: a silent link cut
#   host_alone NS ADDR...   one namespace, no link: lo up with ADDRs
# check NAME STATUS DETAIL prints ok/FAIL and counts failures in $fails.

fails=0
hosts_ns=()

check() {
	if [ "$2" = 0 ]; then
		echo "ok   $1"
	else
		echo "FAIL $1: $3"
		fails=$((fails + 1))
	fi
}

hosts_down() {
	for ns in "${hosts_ns[@]}"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
}

# Namespaces an earlier run left when it was killed (a test runner's
# timeout sends SIGKILL, which no trap sees): named STEM<pid><letter>, with
# STEM the prefix without its digits, and no process of that pid alive.
hosts_reap() {
	local stem=${1%%[0-9]*} ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ $ns =~ ^${stem}([0-9]+)[a-z]$ ]] || continue
		pid=${BASH_REMATCH[1]}
		{ [ "$pid" = "$$" ] || kill -0 "$pid" 2>/dev/null; } && continue
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
}

hosts_up() {
	local p=$1 n=1 ns
	shift
	hosts_reap "$p"
	trap hosts_down EXIT
	trap 'exit 143' TERM INT HUP # so that EXIT runs when a run is stopped
	ip netns add "${p}s" 2>/dev/null || return 77
	hosts_ns+=("${p}s")
	ip -n "${p}s" link add br0 type bridge && ip -n "${p}s" link set br0 up
	for ns in "$@"; do
		ip netns add "$ns" || return 1
		hosts_ns+=("$ns")
		ip link add "v$p$n" type veth peer name "w$p$n"
		ip link set "v$p$n" netns "$ns"
		ip link set "w$p$n" netns "${p}s"
		ip -n "${p}s" link set "w$p$n" master br0 up
		ip -n "$ns" addr add "198.51.100.$n/24" dev "v$p$n"
		ip -n "$ns" link set "v$p$n" up
		ip -n "$ns" link set lo up
		n=$((n + 1))
	done
}

hosts_cut() {
	ip -n "${1}s" link set br0 down
}

host_alone() {
	local ns=$1 a
	shift
	trap hosts_down EXIT
	trap 'exit 143' TERM INT HUP # so that EXIT runs when a run is stopped
	ip netns add "$ns" 2>/dev/null || return 77
	hosts_ns+=("$ns")
	ip -n "$ns" link set lo up
	for a in "$@"; do
		ip -n "$ns" addr add "$a/32" dev lo
	done
}
