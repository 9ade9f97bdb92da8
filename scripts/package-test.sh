#!/bin/bash
# The Debian package, end to end: builds softrnic_<version>_<arch>.deb from
# a build directory with cpack, installs it with apt-get, checks the
# installed copy, runs the demo from it (scripts/demo.sh --installed), then
# removes the package (apt-get remove, then purge if dpkg still lists it)
# and checks that nothing of it is left.
#
#   scripts/package-test.sh [BUILD_DIR]     (default build; configured)
#
# Checks, once installed:
#   - softrnic on PATH is /usr/bin/softrnic, and finds its own libraries;
#   - the libraries are only in their private directory, which the dynamic
#     linker does not know (ldconfig -p), and no ld.so.conf entry is added;
#   - `softrnic exec -- ibv_devinfo` (Debian's) shows softrnic0 through that
#     private library, while plain ibv_devinfo does not see it;
#   - the system's libibverbs.so.1 is still libibverbs1's, unchanged;
#   - pkg-config softrnic works, and a program built with it runs on
#     softrnic0 without softrnic exec;
#   - man finds softrnic(1) (without man-db: the file is there).
# Needs root, or sudo without a password (apt-get install/remove).
# Exit: 0 pass, 1 fail, 77 skip (neither root nor sudo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build=${1:-build}
case "$build" in
/*) ;;
*) build=$root/$build ;;
esac

say() { printf '\n===== package-test: %s\n' "$*"; }
ok() { echo "package-test: ok: $*"; }
fail() {
	echo "package-test: FAIL: $*" >&2
	exit 1
}

as_root=()
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
		echo "package-test: SKIP: needs root or sudo without a password" \
			"(it installs and removes the softrnic package)" >&2
		exit 77
	fi
	as_root=(sudo -n)
fi
apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q
	-o DPkg::Lock::Timeout=300)

for c in cmake cpack dpkg-deb dpkg-shlibdeps apt-get file; do
	command -v "$c" >/dev/null 2>&1 ||
		fail "$c is missing (scripts/install-deps.sh installs it)"
done
[ -f "$build/CPackConfig.cmake" ] ||
	fail "$build is not a configured build directory (scripts/build.sh)"
installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = \
		"install ok installed" ]
}
if installed softrnic; then
	fail "the softrnic package is already installed; remove it first" \
		"(apt-get remove softrnic), or set SOFTRNIC_SKIP_PACKAGE=1"
fi

# The system's library, to check it is untouched.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null ||
	gcc -print-multiarch)
syslib=/usr/lib/$multiarch/libibverbs.so.1
sys_sum() { [ -e "$syslib" ] && sha256sum <"$(readlink -f "$syslib")" || echo none; }
sum_before=$(sys_sum)

work=$(mktemp -d "${TMPDIR:-/tmp}/srn-package.XXXXXX")
chmod 755 "$work" # apt's sandbox user (_apt) reads the .deb from here
pkg_in=0
cleanup() {
	if [ $pkg_in = 1 ] && [ -n "$(dpkg-query -W softrnic 2>/dev/null)" ]; then
		echo "package-test: removing the softrnic package"
		"${apt[@]}" purge softrnic >/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

say "cpack in $build"
cmake --build "$build" -j"$(nproc)" >/dev/null || fail "the build in $build failed"
(cd "$build" && cpack -G DEB -B "$work") || fail "cpack failed"
arch=$(dpkg --print-architecture)
debs=("$work"/softrnic_*_"$arch".deb)
if [ ${#debs[@]} != 1 ] || [ ! -f "${debs[0]}" ]; then
	fail "cpack made no softrnic_<version>_$arch.deb in $work"
fi
deb=${debs[0]}
version=$(dpkg-deb -f "$deb" Version)
[ "$(basename "$deb")" = "softrnic_${version}_$arch.deb" ] ||
	fail "unexpected package name $(basename "$deb")"
chmod 644 "$deb"
dpkg-deb -I "$deb"
dpkg-deb -c "$deb"
ok "$(basename "$deb"): Depends: $(dpkg-deb -f "$deb" Depends)"

say "apt-get install $deb"
pkg_in=1
"${apt[@]}" install "$deb" || fail "apt-get install failed"
installed softrnic || fail "softrnic is not installed after apt-get install"
hash -r

say "checks"
srn=$(command -v softrnic) || fail "softrnic is not on PATH"
[ "$srn" = /usr/bin/softrnic ] ||
	fail "softrnic on PATH is $srn, not /usr/bin/softrnic (another copy shadows it?)"
[ "$("$srn" --version)" = "softrnic $version" ] ||
	fail "softrnic --version does not print 'softrnic $version'"
ok "softrnic on PATH is $srn, version $version"

so=$(dpkg -L softrnic | grep '/libibverbs\.so\.1$') ||
	fail "the package has no libibverbs.so.1"
priv=$(dirname "$so")
case "$priv" in
/usr/lib/softrnic | /usr/lib/"$multiarch"/softrnic) ;;
*) fail "libibverbs.so.1 is installed in $priv, not a private softrnic directory" ;;
esac
if dpkg -L softrnic | grep -E '/lib[^/]*\.so' | grep -v -q "^$priv/"; then
	fail "libraries outside $priv: $(dpkg -L softrnic | grep -E '/lib[^/]*\.so' | grep -v "^$priv/")"
fi
if dpkg -L softrnic | grep '^/etc/ld\.so\.conf' >/dev/null; then
	fail "the package adds to the dynamic linker's configuration"
fi
if /sbin/ldconfig -p | grep -F "$priv/" >/dev/null; then
	fail "the dynamic linker knows $priv: $(/sbin/ldconfig -p | grep -F "$priv/")"
fi
ok "libraries only in $priv, unknown to the dynamic linker"

# shellcheck disable=SC2016 # expanded by the inner shell
first=$(env -u SOFTRNIC_LIB_DIR softrnic exec -- sh -c 'printf "%s\n" "${LD_LIBRARY_PATH%%:*}"')
[ "$first" = "$priv" ] ||
	fail "softrnic exec puts '$first' first on LD_LIBRARY_PATH, not $priv"
env -u SOFTRNIC_LIB_DIR softrnic devinfo || fail "softrnic devinfo"
ibv=$(command -v ibv_devinfo) || fail "ibv_devinfo is missing (ibverbs-utils)"
env -u SOFTRNIC_LIB_DIR softrnic exec -- ibv_devinfo >"$work/devinfo" 2>&1 ||
	{ cat "$work/devinfo"; fail "softrnic exec -- ibv_devinfo failed"; }
cat "$work/devinfo"
grep -q -E '^hca_id:[[:space:]]+softrnic0$' "$work/devinfo" ||
	fail "softrnic exec -- ibv_devinfo shows no softrnic0"
env -u SOFTRNIC_LIB_DIR softrnic exec -- ldd "$ibv" >"$work/ldd" 2>&1 || true
grep -q -E "libibverbs\.so\.1 => $priv/libibverbs\.so\.1 " "$work/ldd" ||
	{ cat "$work/ldd"; fail "under softrnic exec, $ibv does not load $priv/libibverbs.so.1"; }
env -u LD_LIBRARY_PATH ibv_devinfo -l >"$work/plain" 2>&1 || true
if grep -q softrnic0 "$work/plain"; then
	cat "$work/plain"
	fail "plain ibv_devinfo (the system's library) sees softrnic0"
fi
ok "softrnic exec -- ibv_devinfo shows softrnic0 through $priv; plain ibv_devinfo does not"

owner=$(dpkg -S "$syslib" 2>/dev/null) || fail "no package owns $syslib"
case "$owner" in
libibverbs1:*) ;;
*) fail "$syslib belongs to '${owner%%:*}', not libibverbs1" ;;
esac
[ "$(sys_sum)" = "$sum_before" ] || fail "$syslib changed"
ok "$syslib is libibverbs1's, unchanged"

pc_libs=$(pkg-config --libs softrnic) || fail "pkg-config --libs softrnic"
pc_cflags=$(pkg-config --cflags softrnic) || fail "pkg-config --cflags softrnic"
case " $pc_libs " in
*" -L$priv "*" -libverbs "*) ;;
*) fail "pkg-config --libs softrnic is '$pc_libs'" ;;
esac
[ "$(pkg-config --modversion softrnic)" = "$version" ] ||
	fail "pkg-config --modversion softrnic is not $version"
ok "pkg-config --libs softrnic: $pc_libs"
if command -v cc >/dev/null 2>&1 && [ -f /usr/include/infiniband/verbs.h ]; then
	# shellcheck disable=SC2086 # flags are words
	cc -o "$work/hello" tests/install/hello_softrnic.c $pc_cflags $pc_libs ||
		fail "a program does not build with pkg-config softrnic"
	env -u LD_LIBRARY_PATH "$work/hello" || fail "hello_softrnic found no softrnic0"
	ok "a program built with pkg-config softrnic runs on softrnic0 by itself"
else
	echo "package-test: note: no cc or libibverbs-dev, program build skipped"
fi

page=$(dpkg -L softrnic | grep '/man1/softrnic\.1') ||
	fail "the package has no softrnic.1"
if command -v man >/dev/null 2>&1; then
	found=$(man -w softrnic) || fail "man -w softrnic finds no page"
	ok "man -w softrnic: $found"
elif [ -f "$page" ]; then
	ok "$page is installed (no man-db here to ask)"
else
	fail "$page is not on disk (a dpkg path-exclude for man pages?)"
fi

say "the demo, from the installed copy"
./scripts/demo.sh --installed || fail "scripts/demo.sh --installed failed"

say "apt-get remove softrnic"
"${apt[@]}" remove softrnic || fail "apt-get remove softrnic failed"
pkg_in=0
hash -r
! installed softrnic || fail "softrnic is still installed"
for f in "$priv" /usr/bin/softrnic /usr/include/softrnic "$page"; do
	[ ! -e "$f" ] || fail "$f is left after apt-get remove"
done
! pkg-config --exists softrnic 2>/dev/null || fail "softrnic.pc is left"
[ "$(sys_sum)" = "$sum_before" ] || fail "$syslib changed"
ok "removed; $priv and the rest are gone, $syslib unchanged"
# dpkg keeps a removed package's record while it has a postrm (cpack adds
# one that runs ldconfig when the libraries are under /usr/lib/softrnic):
# purge it too, so that nothing is left at all.
dpkg_status() { dpkg-query -W -f='${Status}' softrnic 2>/dev/null || true; }
case "$(dpkg_status)" in
"" | *" not-installed") ;;
*) "${apt[@]}" purge softrnic >/dev/null || fail "apt-get purge softrnic failed" ;;
esac
case "$(dpkg_status)" in
"" | *" not-installed") ;;
*) fail "dpkg still lists softrnic: $(dpkg_status)" ;;
esac
ok "dpkg no longer lists softrnic"
echo "package-test: all checks passed"
