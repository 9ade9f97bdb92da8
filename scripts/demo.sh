#!/bin/bash
# The demo: installs what is missing, builds softrnic (Release), shows the
# device, then runs unmodified Debian programs in pairs (server and client
# processes on this host) over softrnic and prints the client's results
# and a summary. Exits non-zero if any step fails.
#   scripts/demo.sh        (SOFTRNIC_BUILD_DIR: build directory, default build)
#   scripts/demo.sh --installed     (or SOFTRNIC_INSTALLED=1)
# With --installed it builds nothing and uses the installed softrnic, the
# one on PATH (the .deb's, or cmake --install's), with its own libraries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build=${SOFTRNIC_BUILD_DIR:-build}
installed=${SOFTRNIC_INSTALLED:-0}
case "${1:-}" in
--installed) installed=1 ;;
"") ;;
*)
	echo "usage: scripts/demo.sh [--installed]" >&2
	exit 2
	;;
esac

say() { printf '\n===== %s\n' "$*"; }

say "dependencies"
./scripts/install-deps.sh </dev/null

if [ "$installed" = 1 ]; then
	# The installed tool, and the library directory it puts first on
	# LD_LIBRARY_PATH (the private one next to it).
	unset SOFTRNIC_LIB_DIR
	if ! srn=$(command -v softrnic); then
		echo "demo: softrnic is not on PATH; install it first" >&2
		exit 1
	fi
	# shellcheck disable=SC2016 # expanded by the inner shell
	lib=$("$srn" exec -- sh -c 'printf "%s\n" "${LD_LIBRARY_PATH%%:*}"')
	say "installed softrnic: $srn, libraries in $lib (no build)"
	if [ ! -e "$lib/libibverbs.so.1" ]; then
		echo "demo: $lib/libibverbs.so.1 is not installed" >&2
		exit 1
	fi
else
	say "build (Release, $build)"
	cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
	cmake --build "$build" -j2

	for f in "$build/bin/softrnic" "$build/lib/libibverbs.so.1"; do
		if [ ! -e "$f" ]; then
			echo "demo: $f was not built" >&2
			exit 1
		fi
	done
	srn=$build/bin/softrnic
	case "$build" in
	/*) lib=$build/lib ;;
	*) lib=$root/$build/lib ;;
	esac
fi

say "$srn devinfo"
if ! "$srn" devinfo; then
	echo "demo: 'softrnic devinfo' failed" >&2
	exit 1
fi

export SOFTRNIC_LIB_DIR=$lib
PT=(-d softrnic0 -x 0)
runs=(
	"ibv_rc_pingpong -g 0"
	"ib_write_lat ${PT[*]} -s 8 -n 10000"
	"ib_read_lat ${PT[*]} -s 8 -n 10000"
	"ib_send_lat ${PT[*]} -s 8 -n 10000"
	"ib_atomic_lat ${PT[*]} -n 10000"
	"ib_write_bw ${PT[*]} -s 65536 -n 5000"
	"ib_send_bw ${PT[*]} -s 65536 -n 5000"
)

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# The key figure of a run, from run_pair.sh's output (the client's part).
figure() {
	local prog=$1
	case "$prog" in
	ibv_*pingpong)
		sed -n 's/^.* iters in .* = \(.*usec\/iter\)$/\1/p' "$log" | tail -1
		;;
	ib_*_lat)
		awk '/^[ \t]*#bytes/ { h = 1; next }
			h && $1 ~ /^[0-9]+$/ {
				printf "%s B: typical %s us, average %s us\n", $1, $5, $6
				exit }' "$log"
		;;
	ib_*_bw)
		awk '/^[ \t]*#bytes/ { h = 1; next }
			h && $1 ~ /^[0-9]+$/ {
				printf "%s B: %s MB/s average, %s Mpps\n", $1, $4, $5
				exit }' "$log"
		;;
	esac
}

summary=()
failed=0
for r in "${runs[@]}"; do
	read -r -a cmd <<<"$r"
	say "$r  (server and client, 127.0.0.1)"
	rc=0
	tests/peers/run_pair.sh --timeout 300 --show client -- "${cmd[@]}" \
		2>&1 | tee "$log" || rc=$?
	if [ $rc = 0 ]; then
		summary+=("$(printf '%-6s %-50s %s' ok "$r" "$(figure "${cmd[0]}")")")
	else
		[ $rc = 77 ] && why="not installed" || why="exit $rc"
		summary+=("$(printf '%-6s %-50s %s' FAILED "$r" "$why")")
		failed=$((failed + 1))
	fi
done

say "summary"
for s in "${summary[@]}"; do
	echo "$s"
done
if [ $failed -gt 0 ]; then
	echo "demo: $failed of ${#runs[@]} runs failed"
	exit 1
fi
echo "demo: all ${#runs[@]} runs passed"
