#!/bin/bash
# Checks that our libibverbs.so.1 exports exactly what the system one does:
# every default-versioned symbol of the system library, in the same version
# node (plus the compat ibv_register_driver@IBVERBS_1.1), nothing else; and
# that every IBVERBS import of Debian's consumers is satisfied.
set -u
ours=${1:?usage: check_exports.sh path/to/libibverbs.so.1}
sys=$(readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1)
fail=0

exports() { # symbol@node for every defined, versioned dynamic symbol
	readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $8 ~ /@/ {print $8}' |
		sed 's/@@/@/' | grep -v '@IBVERBS_[0-9.A-Z_]*$' -c >/dev/null
	readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $8 ~ /@@/ {sub("@@","@",$8); print $8}' | sort -u
}

[ -r "$sys" ] || { echo "skip: no system libibverbs"; exit 77; }
want=$( (exports "$sys"; echo "ibv_register_driver@IBVERBS_1.1") | sort -u)
ourset=$(readelf --dyn-syms -W "$ours" | awk '$7 != "UND" && $8 ~ /@/ {sub("@@","@",$8); print $8}' | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$ourset"))
extra=$(comm -13 <(echo "$want") <(echo "$ourset") | grep -v -E '^IBVERBS_[0-9A-Z_.]+@IBVERBS')
if [ -n "$missing" ]; then echo "MISSING exports:"; echo "$missing"; fail=1; fi
if [ -n "$extra" ]; then echo "EXTRA exports:"; echo "$extra"; fail=1; fi

nodes=$(readelf -V -W "$ours" | sed -n '/Version definition/,/Version needs/p' | grep -o 'Name: [A-Z0-9_.]*' | awk '{print $2}' | grep IBVERBS | sort)
want_nodes=$(printf '%s\n' IBVERBS_1.0 IBVERBS_1.1 IBVERBS_1.5 IBVERBS_1.6 IBVERBS_1.7 IBVERBS_1.8 IBVERBS_1.9 IBVERBS_1.10 IBVERBS_1.11 IBVERBS_1.12 IBVERBS_1.13 IBVERBS_1.14 IBVERBS_PRIVATE_34 | sort)
if [ "$nodes" != "$want_nodes" ]; then echo "version nodes differ:"; diff <(echo "$want_nodes") <(echo "$nodes"); fail=1; fi

for c in /usr/bin/ibv_devinfo /usr/bin/ib_write_bw /usr/bin/ibv_rc_pingpong \
	/usr/lib/x86_64-linux-gnu/libmlx5.so.1 /usr/lib/x86_64-linux-gnu/libefa.so.1 \
	/usr/lib/x86_64-linux-gnu/librdmacm.so.1; do
	[ -e "$c" ] || continue
	imports=$(readelf --dyn-syms -W "$c" | awk '$7 == "UND" && $8 ~ /@IBVERBS/ {sub(/ \(.*$/,"",$8); print $8}' | sed 's/@@/@/' | sort -u)
	un=$(comm -23 <(echo "$imports") <(echo "$ourset"))
	if [ -n "$un" ]; then echo "$c imports what we lack:"; echo "$un"; fail=1; fi
done
n=$(echo "$ourset" | wc -l)
if [ $fail = 0 ]; then echo "exports ok: $n symbols, 13 version nodes, consumers satisfied"; fi
exit $fail
