#!/bin/bash
# Installs the Debian 12 packages softrnic needs to build, test and demo.
# Only what is missing; safe to run again.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libibverbs-dev ibverbs-utils perftest
	rdma-core python3-pyverbs iproute2 procps bc)
[ "${SOFTRNIC_BENCH_DEPS:-0}" = 1 ] && pkgs+=(ucx-utils libfabric-bin)
missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	sudo=""
	[ "$(id -u)" != 0 ] && sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
		--no-install-recommends "${missing[@]}"
fi
