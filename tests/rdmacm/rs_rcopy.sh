#!/bin/bash
# rcopy (rdmacm-utils, unmodified) copies a file through rsockets over
# softrnic: its server (which serves for ever) and its client run as a
# pair by cm_pair.sh; then the copy must equal the source byte for byte.
#
#   rs_rcopy.sh [SIZE]     (bytes, default 3 MB)
#
# Exit: 0 pass, 1 fail, 77 skip (rcopy is not installed).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
size=${1:-3000000}
command -v rcopy >/dev/null 2>&1 || { echo "SKIP: rcopy is not installed"; exit 77; }
d=$(mktemp -d "${TMPDIR:-/tmp}/rs_rcopy.XXXXXX")
trap 'rm -rf "$d"' EXIT
head -c "$size" /dev/urandom >"$d/src"
"$here/cm_pair.sh" --timeout 50 --server-stays --expect "done" \
	--server rcopy -p @PORT@ \
	--client rcopy "$d/src" "@ADDR@:$d/dst" -p @PORT@ || exit $?
cmp "$d/src" "$d/dst" || { echo "FAIL: the copy differs from the source"; exit 1; }
echo "PASS: rcopy copied $size bytes intact"
