#!/bin/bash
# SPDX-License-Identifier: MIT
#
# softrnic — ABI test of our libibverbs.so.1 against Debian's.
#
# Usage: check_exports.sh path/to/our/libibverbs.so.1
#
# Checks, with readelf:
#  1. the version nodes: the same IBVERBS_* nodes with the same parents as
#     the system library (13 of them), and the SONAME libibverbs.so.1;
#  2. every default-versioned (@@) symbol of the system library is
#     exported by ours, default-versioned, in the same node, of the same
#     kind (FUNC/OBJECT; data objects also of the same size);
#  3. ours exports nothing else, except ibv_register_driver@IBVERBS_1.1
#     (a compat symbol the system library has as non-default @) and
#     softrnic's extensions (<softrnic/direct.h>) in their own root node
#     SOFTRNIC_1.0, which must hold exactly those;
#  4. every IBVERBS symbol and version node imported by the consumers
#     (ibv_devinfo, ib_write_bw, libmlx5, libefa, librdmacm, ...) is
#     provided by ours. Consumers that are not installed are skipped.
# Exits 0 when all hold, 1 with the differences listed otherwise, 77 when
# the system library is not installed.
set -u
set -o pipefail

ours=${1:?usage: check_exports.sh path/to/libibverbs.so.1}
libdir=/usr/lib/x86_64-linux-gnu
sys=$(readlink -f "$libdir/libibverbs.so.1")
consumers="/usr/bin/ibv_devinfo /usr/bin/ib_write_bw /usr/bin/ibv_rc_pingpong
	$libdir/libmlx5.so.1 $libdir/libefa.so.1 $libdir/librdmacm.so.1"
extra_ok="ibv_register_driver@IBVERBS_1.1 FUNC"
ext_node=SOFTRNIC_1.0
ext_syms="srn_direct_map srn_direct_unmap"
fail=0

[ -r "$sys" ] || { echo "SKIP: no system $libdir/libibverbs.so.1"; exit 77; }
ours=$(readlink -f "$ours")
[ -r "$ours" ] || { echo "FAIL: cannot read $1"; exit 1; }
command -v readelf >/dev/null || { echo "FAIL: readelf not found"; exit 1; }

# Reports a failed check: a title, then the offending lines indented.
report() {
	[ -n "$2" ] || return 0
	echo "FAIL: $1"
	while IFS= read -r line; do echo "    $line"; done <<<"$2"
	fail=1
}

# Version definitions as "node parent" (parent "-" for a root node).
verdefs() {
	readelf -V -W "$1" | awk '
		/^Version definition section/ { on = 1; next }
		/^Version (needs|symbols) section/ { on = 0 }
		!on { next }
		/Flags: BASE/ { next }
		/ Name: / { node = $NF; parent[node] = "-"; order[++n] = node }
		/Parent 1:/ { parent[node] = $NF }
		END {
			for (i = 1; i <= n; i++)
				print order[i], parent[order[i]]
		}' |
		sort
}

# Defined dynamic symbols as "name@node kind size dflt" (dflt: @@ or @, or
# - when unversioned). The absolute symbols ld emits for each version node
# (IBVERBS_1.0, or IBVERBS_1.0@@IBVERBS_1.0) are markers, not exports.
defined() {
	local nodes

	nodes=" $(verdefs "$1" | cut -d' ' -f1 | tr '\n' ' ')"
	readelf --dyn-syms -W "$1" | awk -v nodes="$nodes" '
		NF >= 8 && $7 != "UND" && $1 ~ /^[0-9]+:$/ {
			name = $8; dflt = "-"
			if (index(name, "@@")) dflt = "@@"
			else if (index(name, "@")) dflt = "@"
			split(name, p, "@+")
			if ($7 == "ABS" && index(nodes, " " p[1] " ") &&
			    (dflt == "-" || p[1] == p[2]))
				next
			if (dflt != "-")
				name = p[1] "@" p[2]
			size = ($4 == "OBJECT") ? $3 : "-"
			print name, $4, size, dflt
		}' | sort -u
}

# Undefined IBVERBS imports as "name@node kind".
imports() {
	readelf --dyn-syms -W "$1" | awk '
		NF >= 8 && $7 == "UND" && $8 ~ /@IBVERBS_/ {
			split($8, p, "@+"); print p[1] "@" p[2], $4
		}' | sort -u
}

# Version nodes a consumer needs from libibverbs.so.1.
verneeds() {
	readelf -V -W "$1" | awk '
		/^Version needs section/ { on = 1; next }
		!on { next }
		/ File: / {
			file = $0
			sub(/.*File: /, "", file)
			sub(/ .*/, "", file)
		}
		/ Name: / && file == "libibverbs.so.1" {
			for (i = 1; i < NF; i++)
				if ($i == "Name:")
					print $(i + 1)
		}' | sort -u
}

# 1. version nodes and SONAME
sys_nodes=$(verdefs "$sys")
all_nodes=$(verdefs "$ours")
our_nodes=$(grep -v "^$ext_node " <<<"$all_nodes")
[ "$(grep "^$ext_node " <<<"$all_nodes")" = "$ext_node -" ] ||
	report "softrnic's extension node is missing or not a root node" \
		"$(grep "^$ext_node" <<<"$all_nodes")"

report "version nodes differ from the system library (< system, > ours):" \
	"$(diff <(echo "$sys_nodes") <(echo "$our_nodes") | grep '^[<>]')"
n_nodes=$(grep -c . <<<"$our_nodes")
[ "$n_nodes" = 13 ] || report "expected 13 version nodes" "ours has $n_nodes"
soname=$(readelf -d -W "$ours" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libibverbs.so.1 ] ||
	report "wrong SONAME" "'$soname' instead of 'libibverbs.so.1'"

# 2. and 3. the export table
sys_defs=$(defined "$sys")
all_defs=$(defined "$ours")
our_defs=$(grep -v "@$ext_node " <<<"$all_defs")
ext_have=$(grep "@$ext_node " <<<"$all_defs" | awk '{ print $1, $2, $4 }')
ext_want=$(for f in $ext_syms; do echo "$f@$ext_node FUNC @@"; done)
report "softrnic's extension node differs (< wanted, > ours):" \
	"$(diff <(sort <<<"$ext_want") <(sort <<<"$ext_have") | grep '^[<>]')"
want=$( (awk '$4 == "@@" { print $1, $2, $3 }' <<<"$sys_defs"
	echo "$extra_ok -") | sort -u)
have=$(awk '{ print $1, $2, $3 }' <<<"$our_defs" | sort -u)
report "exported by the system library, not by ours (or kind/size differs):" \
	"$(comm -23 <(echo "$want") <(echo "$have"))"
report "exported by ours, not by the system library (or kind/size differs):" \
	"$(comm -13 <(echo "$want") <(echo "$have"))"
report "exported by ours without a version:" \
	"$(awk '$4 == "-" { print $1 }' <<<"$our_defs")"
report "exported by ours as non-default (@) although the system has @@:" \
	"$(awk -v ok="${extra_ok% *}" '$4 == "@" && $1 != ok { print $1 }' \
		<<<"$our_defs")"

# 4. consumers
our_syms=$(awk '{ print $1, $2 }' <<<"$our_defs")
our_names=$(awk '{ print $1 }' <<<"$our_nodes")
checked=0
for c in $consumers; do
	if [ ! -e "$c" ]; then
		echo "note: $c not installed, skipped"
		continue
	fi
	checked=$((checked + 1))
	need=$(imports "$c")
	# NOTYPE imports bind to either kind: compare names only for them
	missing=$(while read -r sym kind; do
		[ -n "$sym" ] || continue
		if [ "$kind" = FUNC ] || [ "$kind" = OBJECT ]; then
			grep -qxF "$sym $kind" <<<"$our_syms" ||
				echo "$sym ($kind)"
		else
			awk -v s="$sym" '$1 == s { f = 1 } END { exit !f }' \
				<<<"$our_syms" || echo "$sym"
		fi
	done <<<"$need")
	report "$c imports symbols ours lacks:" "$missing"
	report "$c needs version nodes ours lacks:" \
		"$(comm -23 <(verneeds "$c") <(echo "$our_names"))"
done

if [ "$fail" != 0 ]; then
	echo "check_exports: $ours does NOT match $sys"
	exit 1
fi
echo "check_exports: OK: $(grep -c . <<<"$have") symbols in $n_nodes" \
	"version nodes match $sys; $checked consumers satisfied"
exit 0
