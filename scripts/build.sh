#!/bin/bash
# Configures and builds softrnic into build/ (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
# relative to the repository; never the source tree itself (an in-source
# build scatters CMake's files among the sources)
if [ "$(realpath -m "$dir")" = "$(pwd)" ]; then
	echo "build.sh: build into a directory of its own, not $dir" >&2
	exit 2
fi
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
