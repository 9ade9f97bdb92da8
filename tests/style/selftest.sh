#!/bin/bash
# Shows that tools/check_style.py fails when a house style rule is broken:
# each case copies src/ and the .clang-format into a scratch tree, breaks one rule once and expects a non-zero exit naming the
# violation; the untouched copy passes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
check=$root/tools/check_style.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fresh() {
	rm -rf "$tmp/src"
	cp -r "$root/src" "$tmp/src"
	cp "$root/.clang-format" "$tmp/.clang-format"
}

expect_fail() { # name, pattern expected in the output
	local out
	if out=$(python3 "$check" "$tmp" 2>&1); then
		echo "FAIL $1: check_style passed a broken tree"
		fails=$((fails + 1))
	elif ! grep -q -- "$2" <<<"$out"; then
		echo "FAIL $1: no '$2' in: $out"
		fails=$((fails + 1))
	else
		echo "ok   $1"
	fi
}

# a function of n lines from '{' to '}', both counted
function_of() { # name, lines
	printf 'int %s(void)\n{\n\tint x = 0;\n\n' "$1"
	for ((i = 0; i < $2 - 5; i++)); do
		printf '\tx++;\n'
	done
	printf '\treturn x;\n}\n'
}

fresh
if ! out=$(python3 "$check" "$tmp" 2>&1); then
	echo "FAIL: the untouched copy does not pass: $out"
	exit 1
fi
echo "ok   untouched tree passes"

fresh # an atomic with no comment
sed -i '/relaxed: the lock is not shared yet/,+1d' "$tmp/src/util/srn_lock.h"
grep -q '__ATOMIC_RELAXED);' "$tmp/src/util/srn_lock.h"
expect_fail "atomic without a comment" \
	"srn_lock.h:[0-9]*: atomic: __atomic_store_n: no comment names its order"

fresh # a comment naming the wrong order
sed -i 's|/\* seq_cst: pairs with the load in srn_unlock_release \*/|/* release: pairs with the load in srn_unlock_release */|' \
	"$tmp/src/util/lock.c"
grep -q 'release: pairs with the load in srn_unlock_release' "$tmp/src/util/lock.c"
expect_fail "wrong order named" \
	"lock.c:[0-9]*: atomic: __atomic_fetch_add: comment names release, the code uses seq_cst"

fresh # an acquire that does not say what it pairs with
sed -i 's|/\* acquire: pairs with the release in srn_unlock; relaxed on|/* acquire: takes the lock; relaxed on|' \
	"$tmp/src/util/srn_lock.h"
grep -q 'acquire: takes the lock' "$tmp/src/util/srn_lock.h"
expect_fail "acquire without its partner" \
	"srn_lock.h:[0-9]*: atomic: __atomic_compare_exchange_n: acquire without 'pairs with'"

fresh # a partner that is not a function of the tree
sed -i 's|pairs with the release in srn_unlock; relaxed on|pairs with the release in srn_unlock_everything; relaxed on|' \
	"$tmp/src/util/srn_lock.h"
expect_fail "partner not defined" "'pairs with' names no function"

fresh # a compare-exchange whose failure order is not named
sed -i 's|relaxed on$|on|; s|failure: nothing is read under|failure nothing is read under|' \
	"$tmp/src/util/srn_lock.h"
expect_fail "failure order not named" \
	"comment names acquire, the code uses acquire/relaxed"

fresh # relaxed without a reason
sed -i '/relaxed: the lock is not shared yet/,+1c\	/* relaxed */' \
	"$tmp/src/util/srn_lock.h"
expect_fail "relaxed without a reason" "relaxed without a reason"

fresh # a 60-line function passes, a 61-line one does not
function_of srn_sixty 60 >>"$tmp/src/util/lock.c"
if ! out=$(python3 "$check" "$tmp" 2>&1); then
	echo "FAIL a 60-line function is refused: $out"
	fails=$((fails + 1))
else
	echo "ok   a 60-line function passes"
fi
function_of srn_sixty_one 61 >>"$tmp/src/util/lock.c"
expect_fail "61-line function" \
	"lock.c:[0-9]*: function-length: srn_sixty_one 61 lines"

fresh # a static inline function in a header counts too
sed -i 's|^#endif /\* SRN_LOCK_H \*/||' "$tmp/src/util/srn_lock.h"
function_of srn_inline_long 70 | sed 's/^int /static inline int /' \
	>>"$tmp/src/util/srn_lock.h"
echo '#endif /* SRN_LOCK_H */' >>"$tmp/src/util/srn_lock.h"
expect_fail "long static inline" \
	"srn_lock.h:[0-9]*: function-length: srn_inline_long 70 lines"

fresh # a 1501-line file (1500 pass)
for ((i = 0; i < 1500; i++)); do
	echo "int srn_v$i;"
done >"$tmp/src/util/big.c"
if ! out=$(python3 "$check" "$tmp" 2>&1); then
	echo "FAIL a 1500-line file is refused: $out"
	fails=$((fails + 1))
else
	echo "ok   a 1500-line file passes"
fi
echo "int srn_v1500;" >>"$tmp/src/util/big.c"
expect_fail "1501-line file" "big.c:1501: file-length: 1501 lines"

if command -v clang-format >/dev/null; then
	fresh # not formatted as .clang-format says
	sed -i 's|^\t__atomic_store_n(&l->v, 0, __ATOMIC_RELAXED);|\t__atomic_store_n( \&l->v,0,__ATOMIC_RELAXED );|' \
		"$tmp/src/util/srn_lock.h"
	expect_fail "clang-format" "srn_lock.h:[0-9]*: format:"
else
	echo "skip clang-format case: clang-format is not installed"
fi

if [ "$fails" -ne 0 ]; then
	echo "$fails case(s) failed"
	exit 1
fi
echo "check_style self-test: all cases behave"
