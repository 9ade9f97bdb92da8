#!/bin/bash
# Installs softrnic from a build directory into a temporary prefix
# (cmake --install, no root needed) and checks the installed copy:
#   - the tool in bin/, and nothing else executable but the libraries
#     (no test or benchmark binary is installed);
#   - the libraries only in the private directory <libdir>/softrnic;
#   - headers, softrnic.pc and the man page where they belong;
#   - the host daemon's systemd units, the service naming the installed tool;
#   - the tool finds its libraries by itself (no SOFTRNIC_LIB_DIR):
#     --version, devinfo, exec -- ibv_devinfo -l shows softrnic0;
#   - a program built with `pkg-config --cflags --libs softrnic` runs on
#     softrnic0 without softrnic exec (when cc and libibverbs-dev are here).
#
#   check_install.sh BUILD_DIR [CMAKE]
# Exit: 0 pass, 1 fail.
set -euo pipefail
build=$1
cmake=${2:-cmake}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/srn-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() {
	echo "check_install: FAIL: $*" >&2
	exit 1
}
ok() { echo "ok: $*"; }

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; fail "cmake --install failed"; }
(cd "$prefix" && find . ! -type d | sort)

# The tool, and no other executable but the libraries.
[ -x "$prefix/bin/softrnic" ] || fail "bin/softrnic is not installed"
extra=$(cd "$prefix" && find . -type f -perm -u+x ! -path ./bin/softrnic \
	! -name 'lib*.so.*')
[ -z "$extra" ] || fail "unexpected executables installed: $extra"
ok "bin/softrnic, and no test or benchmark binary"

# The libraries: only in <libdir>/softrnic.
so=$(cd "$prefix" && find . -name 'libibverbs.so.1')
if [ -z "$so" ] || [ "$(echo "$so" | wc -l)" != 1 ]; then
	fail "expected one libibverbs.so.1, found: ${so:-none}"
fi
priv=$prefix/$(dirname "${so#./}")
case "$priv" in
"$prefix"/lib*/softrnic) ;;
*) fail "libibverbs.so.1 is in $priv, not in <libdir>/softrnic" ;;
esac
if [ ! -L "$priv/libibverbs.so.1" ] ||
	[ ! -f "$(readlink -f "$priv/libibverbs.so.1")" ]; then
	fail "$priv/libibverbs.so.1 is not a link to the library"
fi
stray=$(cd "$prefix" && find . -name 'lib*.so*' ! -path "./${priv#"$prefix"/}/*")
[ -z "$stray" ] || fail "libraries outside the private directory: $stray"
ok "libraries in ${priv#"$prefix"/} only"

for f in include/softrnic/softrnic.h include/softrnic/version.h \
	share/man/man1/softrnic.1; do
	[ -f "$prefix/$f" ] || fail "$f is not installed"
done
pc=$(cd "$prefix" && find . -name softrnic.pc)
[ -n "$pc" ] || fail "softrnic.pc is not installed"
grep -q "^prefix=$prefix\$" "$prefix/$pc" ||
	fail "$pc does not name the prefix $prefix: $(cat "$prefix/$pc")"
ok "headers, ${pc#./}, man page"

# The host daemon's systemd units (not enabled: nothing links them).
units=$prefix/lib/systemd/system
[ -f "$units/softrnic.socket" ] && [ -f "$units/softrnic.service" ] ||
	fail "softrnic.socket and softrnic.service are not in lib/systemd/system"
grep -qx "ExecStart=$prefix/bin/softrnic daemon" "$units/softrnic.service" ||
	fail "softrnic.service does not run $prefix/bin/softrnic daemon: $(grep ExecStart "$units/softrnic.service")"
ok "systemd units, ExecStart=$prefix/bin/softrnic daemon"

# The tool finds its libraries relative to itself.
unset SOFTRNIC_LIB_DIR
srn=$prefix/bin/softrnic
case "$("$srn" --version)" in
"softrnic "[0-9]*.[0-9]*.[0-9]*) ;;
*) fail "softrnic --version" ;;
esac
# shellcheck disable=SC2016 # expanded by the inner shell
first=$("$srn" exec -- sh -c 'printf "%s\n" "${LD_LIBRARY_PATH%%:*}"')
[ "$first" = "$(readlink -f "$priv")" ] ||
	fail "softrnic exec put '$first' first on LD_LIBRARY_PATH, not $priv"
ok "softrnic exec puts $first first"
"$srn" devinfo >"$work/devinfo" 2>&1 || { cat "$work/devinfo"; fail "softrnic devinfo"; }
grep -q '^device: *softrnic0' "$work/devinfo" || fail "softrnic devinfo shows no softrnic0"
ok "softrnic devinfo"
if command -v ibv_devinfo >/dev/null 2>&1; then
	"$srn" exec -- ibv_devinfo -l >"$work/l" 2>&1 || true
	grep -q softrnic0 "$work/l" ||
		{ cat "$work/l"; fail "softrnic exec -- ibv_devinfo -l shows no softrnic0"; }
	ok "softrnic exec -- ibv_devinfo -l shows softrnic0"
else
	echo "skip: ibv_devinfo is not installed (ibverbs-utils)"
fi

# A program built with softrnic.pc runs on softrnic0 by itself.
if ! command -v cc >/dev/null 2>&1 || ! command -v pkg-config >/dev/null 2>&1 ||
	! echo '#include <infiniband/verbs.h>' | cc -E -x c - >/dev/null 2>&1; then
	echo "skip: pkg-config build (needs cc, pkg-config, libibverbs-dev)"
	exit 0
fi
PKG_CONFIG_PATH=$(dirname "$prefix/$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs softrnic) || fail "pkg-config softrnic"
echo "pkg-config --cflags --libs softrnic: $flags"
# shellcheck disable=SC2086 # flags are words
cc -o "$work/hello" "$here/hello_softrnic.c" $flags || fail "build with softrnic.pc"
env -u LD_LIBRARY_PATH "$work/hello" || fail "hello_softrnic found no softrnic0"
ok "a program built with softrnic.pc runs on softrnic0 without softrnic exec"
# The direct-access example, built against the installed <softrnic/direct.h>
# (its symbols are in the installed library's SOFTRNIC_1.0 node).
# shellcheck disable=SC2086 # flags are words
cc -o "$work/direct_hello" "$here/../../examples/direct/direct_hello.c" $flags ||
	fail "build examples/direct with softrnic.pc"
env -u LD_LIBRARY_PATH SOFTRNIC_TRANSPORT=shm "$work/direct_hello" ||
	fail "direct_hello"
ok "examples/direct builds against the installed header and runs"
echo "check_install: all checks passed"
