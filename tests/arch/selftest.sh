#!/bin/bash
# Shows that tools/check_layers.py fails when the layering rule is broken:
# each case copies src/ into a scratch tree, breaks the rule in one way and
# expects a non-zero exit naming the violation; the untouched copy passes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
check=$root/tools/check_layers.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fresh() {
	rm -rf "$tmp/src"
	cp -r "$root/src" "$tmp/src"
}

expect_fail() { # name, pattern expected in the output
	local out
	if out=$(python3 "$check" "$tmp/src" 2>&1); then
		echo "FAIL $1: check_layers passed a broken tree"
		fails=$((fails + 1))
	elif ! grep -q -- "$2" <<<"$out"; then
		echo "FAIL $1: no '$2' in: $out"
		fails=$((fails + 1))
	else
		echo "ok   $1"
	fi
}

fresh
if ! python3 "$check" "$tmp/src" >/dev/null; then
	echo "FAIL: the untouched copy does not pass"
	exit 1
fi
echo "ok   untouched tree passes"

fresh # the core reaching up into the engine
sed -i '0,/#include "core\/core.h"/s//#include "engine\/engine.h"/' \
	"$tmp/src/core/pd.c"
expect_fail "core includes engine" "core is below engine"

fresh # one transport using another
sed -i '0,/#include "transport\/tcp\/tcp.h"/s//&\n#include "transport\/shm\/shm.h"/' \
	"$tmp/src/transport/tcp/tcp_link.c"
expect_fail "sibling transports" "are siblings"

fresh # a cycle inside a folder
echo '#include "core/pd_extra.h"' >>"$tmp/src/core/core.h"
printf '#include "core/core.h"\n' >"$tmp/src/core/pd_extra.h"
expect_fail "include cycle" "include cycle between files"

fresh # the engine naming a transport
echo '/* flush the tcp links */' >>"$tmp/src/engine/progress.c"
expect_fail "engine names tcp" "names transport tcp"
fresh
echo 'void srn_shm_poke(void);' >>"$tmp/src/engine/engine.h"
expect_fail "engine names shm" "names transport shm"

fresh # the RPC layer and verbs are siblings
echo '#include "verbs/verbs.h"' >>"$tmp/src/rpc/rpc_slot.c"
expect_fail "rpc includes verbs" "are siblings"
fresh # the RPC layer may say tcp, not use the transport
echo 'void srn_tcp_poke(void);' >>"$tmp/src/rpc/srn_rpc.h"
expect_fail "rpc names the tcp transport" "names transport tcp"

fresh # librdmacm uses only the public verbs API: no core internals
echo '#include "core/core.h"' >>"$tmp/src/rdmacm/cm_qp.c"
expect_fail "rdmacm includes core" "uses only the public verbs API"
fresh # verbs is below librdmacm
echo '#include "rdmacm/cm.h"' >>"$tmp/src/verbs/verbs_qp.c"
expect_fail "verbs includes rdmacm" "verbs is below rdmacm"
fresh # librdmacm may say tcp (RDMA_PS_TCP), not use the transport
echo 'void srn_tcp_poke(void);' >>"$tmp/src/rdmacm/cm.h"
expect_fail "rdmacm names the tcp transport" "names transport tcp"

fresh # an include that is not a path from src/
echo '#include "core.h"' >>"$tmp/src/core/pd.c"
expect_fail "bare include" "not a path"

if [ "$fails" -ne 0 ]; then
	echo "$fails case(s) failed"
	exit 1
fi
echo "check_layers self-test: all cases behave"
