#!/bin/bash
# SPDX-License-Identifier: MIT
#
# softrnic — ABI test of our librdmacm.so.1 against Debian's (rdma-core 44).
#
# Usage: check_rdmacm_exports.sh path/to/our/librdmacm.so.1 [our libibverbs.so.1]
#
# Checks, with readelf:
#  1. the SONAME librdmacm.so.1 and the version nodes RDMACM_1.0 .. 1.3
#     with the system library's parents;
#  2. every symbol the system library exports is exported by ours, in the
#     same node, of the same kind, default-versioned; ours exports nothing
#     else;
#  3. every RDMACM symbol and version node the consumers import (rdmacm-
#     utils, perftest, pyverbs' cmid module, ...) is provided by ours;
#     consumers that are not installed are skipped;
#  4. with our libibverbs.so.1: every IBVERBS symbol ours imports is
#     exported there (the layer uses only the public verbs API).
# Exits 0 when all hold, 1 with the differences listed, 77 when the
# system library is not installed.
set -u
set -o pipefail

ours=${1:?usage: check_rdmacm_exports.sh path/to/librdmacm.so.1 [libibverbs.so.1]}
verbs=${2:-}
libdir=/usr/lib/x86_64-linux-gnu
sys=$(readlink -f "$libdir/librdmacm.so.1")
consumers="/usr/bin/rping /usr/bin/ucmatose /usr/bin/udaddy /usr/bin/mckey
	/usr/bin/cmtime /usr/bin/rdma_server /usr/bin/rdma_client
	/usr/bin/rdma_xserver /usr/bin/rdma_xclient /usr/bin/rstream
	/usr/bin/rcopy /usr/bin/riostream /usr/bin/udpong /usr/bin/ib_write_bw
	/usr/bin/ib_send_lat /usr/bin/qperf
	$(ls /usr/lib/python3/dist-packages/pyverbs/cmid*.so 2>/dev/null)"
fail=0

[ -r "$sys" ] || { echo "SKIP: no system $libdir/librdmacm.so.1"; exit 77; }
ours=$(readlink -f "$ours")
[ -r "$ours" ] || { echo "FAIL: cannot read $1"; exit 1; }

report() {
	[ -n "$2" ] || return 0
	echo "FAIL: $1"
	while IFS= read -r line; do echo "    $line"; done <<<"$2"
	fail=1
}

# "node parent" for each version definition
verdefs() {
	readelf -V -W "$1" | awk '
		/^Version definition section/ { on = 1; next }
		/^Version (needs|symbols) section/ { on = 0 }
		!on { next }
		/Flags: BASE/ { next }
		/ Name: / { node = $NF; parent[node] = "-"; order[++n] = node }
		/Parent 1:/ { parent[node] = $NF }
		END { for (i = 1; i <= n; i++) print order[i], parent[order[i]] }' |
		sort
}

# "name@node kind dflt" of the defined dynamic symbols (version markers
# left out)
defined() {
	readelf --dyn-syms -W "$1" | awk '
		NF >= 8 && $7 != "UND" && $1 ~ /^[0-9]+:$/ {
			name = $8; dflt = "-"
			if (index(name, "@@")) dflt = "@@"
			else if (index(name, "@")) dflt = "@"
			split(name, p, "@+")
			if ($7 == "ABS") next
			if (dflt != "-") name = p[1] "@" p[2]
			print name, $4, dflt
		}' | sort -u
}

# "name@node" a file imports from the given node prefix
imports() {
	readelf --dyn-syms -W "$1" | awk -v pre="$2" '
		NF >= 8 && $7 == "UND" && index($8, "@" pre) {
			split($8, p, "@+"); print p[1] "@" p[2]
		}' | sort -u
}

# version nodes a file needs from the named library
verneeds() {
	readelf -V -W "$1" | awk -v lib="$2" '
		/^Version needs section/ { on = 1; next }
		!on { next }
		/ File: / { file = $0; sub(/.*File: /, "", file); sub(/ .*/, "", file) }
		/ Name: / && file == lib {
			for (i = 1; i < NF; i++) if ($i == "Name:") print $(i + 1)
		}' | sort -u
}

# 1.
soname=$(readelf -d -W "$ours" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = librdmacm.so.1 ] || report "wrong SONAME" "'$soname'"
report "version nodes differ (< system, > ours):" \
	"$(diff <(verdefs "$sys") <(verdefs "$ours") | grep '^[<>]')"

# 2.
sys_defs=$(defined "$sys")
our_defs=$(defined "$ours")
report "exports differ (< system only, > ours only; name@node kind dflt):" \
	"$(diff <(echo "$sys_defs") <(echo "$our_defs") | grep '^[<>]')"

# 3.
our_syms=$(awk '{ print $1 }' <<<"$our_defs")
our_nodes=$(verdefs "$ours" | cut -d' ' -f1)
checked=0
for c in $consumers; do
	[ -e "$c" ] || { echo "note: $c not installed, skipped"; continue; }
	checked=$((checked + 1))
	report "$c imports symbols ours lacks:" \
		"$(comm -23 <(imports "$c" RDMACM_) <(sort <<<"$our_syms"))"
	report "$c needs version nodes ours lacks:" \
		"$(comm -23 <(verneeds "$c" librdmacm.so.1) <(sort <<<"$our_nodes"))"
done

# 4.
if [ -n "$verbs" ]; then
	vdefs=$(defined "$(readlink -f "$verbs")" | awk '{ print $1 }' | sort)
	report "ours imports verbs symbols $verbs lacks:" \
		"$(comm -23 <(imports "$ours" IBVERBS_) <(echo "$vdefs"))"
fi

if [ "$fail" != 0 ]; then
	echo "check_rdmacm_exports: $ours does NOT match $sys"
	exit 1
fi
echo "check_rdmacm_exports: OK: $(grep -c . <<<"$our_defs") symbols in" \
	"$(grep -c . <<<"$our_nodes") version nodes match $sys; $checked" \
	"consumers satisfied"
exit 0
