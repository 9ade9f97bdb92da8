#!/bin/bash
# Runs every test: installs what is missing, builds, then runs the whole
# CTest suite (unit, functional in threads and processes, ABI, Debian's
# own binaries in pairs, faults, the install tree), then the Debian package
# (scripts/package-test.sh: as root or with sudo; SOFTRNIC_SKIP_PACKAGE=1
# skips it), then the sanitizer builds.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh build
(cd build && ctest --output-on-failure -j1 --timeout 300)
# The Debian package: built, installed, checked, demo from it, removed.
if [ "${SOFTRNIC_SKIP_PACKAGE:-0}" = 1 ]; then
	echo "test: package test skipped (SOFTRNIC_SKIP_PACKAGE=1)"
else
	rc=0
	./scripts/package-test.sh build || rc=$?
	if [ $rc = 77 ]; then
		echo "test: package test SKIPPED: needs root or sudo without a password"
	elif [ $rc != 0 ]; then
		echo "test: package test failed (exit $rc)" >&2
		exit $rc
	fi
fi
if [ "${SOFTRNIC_SKIP_SANITIZERS:-0}" != 1 ]; then
	# ASan+UBSan over the unit and functional tests.
	./scripts/build.sh build-asan -DSRN_SANITIZE=address,undefined
	(cd build-asan && ASAN_OPTIONS=detect_leaks=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		ctest --output-on-failure -L 'unit|func' --timeout 300)
	# TSan over the concurrency tests.
	./scripts/build.sh build-tsan -DSRN_SANITIZE=thread
	(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/../tests/tsan.supp" \
		ctest --output-on-failure -L 'concurrency' --timeout 600)
fi
leaks=$(ls /dev/shm | grep -i -E 'srn|softrnic' || true)
if [ -n "$leaks" ]; then
	echo "files left in /dev/shm: $leaks"
	exit 1
fi
echo "all tests passed"
