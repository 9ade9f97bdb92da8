#!/bin/bash
# The main job: installs what is missing, builds softrnic and runs
# unmodified Debian programs (ibv_rc_pingpong, perftest) between two
# processes on this host over softrnic, printing their results.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh build
export SOFTRNIC_LIB_DIR=$PWD/build/lib
echo "== softrnic devinfo"
./build/bin/softrnic devinfo
pair() {
	echo
	echo "== $*"
	./tests/peers/run_pair.sh -- "$@" | sed -n '/^== client/,$p'
}
pair ibv_rc_pingpong -g 0 -n 10000
pair ib_write_lat -d softrnic0 -x 0 -s 8 -n 10000
pair ib_read_lat -d softrnic0 -x 0 -s 8 -n 10000
pair ib_send_lat -d softrnic0 -x 0 -s 8 -n 10000
pair ib_atomic_lat -d softrnic0 -x 0 -n 10000
pair ib_write_bw -d softrnic0 -x 0 -s 65536 -n 5000
pair ib_send_bw -d softrnic0 -x 0 -s 65536 -n 5000
echo
echo "demo done: every pair above ran unmodified over softrnic0"
