# Shared by hostd.sh and hostd_cm.sh (sourced): two hosts (network
# namespaces) A and B, users nobody and daemon, softrnic's libraries.
# The caller sets here, HOSTD_CMDS (the programs it needs) and HOSTD_TAG
# (its namespaces' prefix). Exits 77 (skip) where the machine cannot.
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
tool=$(dirname "$lib")/bin/softrnic
[ "$(id -u)" = 0 ] || { echo "skip: needs root (namespaces, users)"; exit 77; }
for c in $HOSTD_CMDS setpriv ss; do
	command -v $c >/dev/null || { echo "skip: $c missing"; exit 77; }
done
id nobody >/dev/null 2>&1 && id daemon >/dev/null 2>&1 ||
	{ echo "skip: users nobody and daemon needed"; exit 77; }
p=$HOSTD_TAG$$
A=${p}a B=${p}b
. "$here/../lib/hosts.sh"
hosts_up $p $B $A || { echo "skip: cannot create namespaces"; exit 77; }
ipA=198.51.100.2 ipB=198.51.100.1
out=$(mktemp -d)
chmod 755 "$out"
trap 'hosts_down; rm -rf "$out"' EXIT

on() { # ns ip user cmd...: as user (its uid, gid and no other group),
	# softrnic first, TCP between the hosts; exec, so that $! is its pid
	local ns=$1 ip=$2 u=$3
	shift 3
	exec ip netns exec "$ns" setpriv --reuid "$(id -u "$u")" \
		--regid "$(id -g "$u")" --clear-groups env LD_LIBRARY_PATH="$lib" \
		SOFTRNIC_IP="$ip" SOFTRNIC_TRANSPORT=tcp "$@"
}
sockets() { # pid: its socket descriptors
	ls -l /proc/"$1"/fd 2>/dev/null | grep -c 'socket:'
}
# The checks without the daemon, in every hostd test: the first user's
# pair finishes (first: its exit statuses, all 0), the second user's
# server says so (grep pattern, what the check is called) and its pair
# fails (why). Uses the script's finished and check, and r2.
nod_checks() { # first pattern name why
	[ "$1" = 0 ] && finished nod 1
	check "first user's pair finishes" $? \
		"exit $1: $(tail -n 3 "$out/nod.srv1" "$out/nod.cli1")"
	grep -q "$2" "$out/nod.srv2"
	check "$3" $? "$(cat "$out/nod.srv2")"
	[ "$r2" != 0 ] && ! finished nod 2
	check "second user's pair fails ($4)" $? \
		"exit $r2: $(tail -n 3 "$out/nod.srv2" "$out/nod.cli2")"
}
