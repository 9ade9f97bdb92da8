#!/bin/bash
# Installs the Debian 12 packages softrnic needs to build, test and demo,
# only those that are missing (so it is quick, and safe to run again).
#
#   scripts/install-deps.sh [EXTRA_PACKAGE...]
#
# Runs apt-get as root, or through "sudo -n" otherwise. Needs no stdin
# and asks no questions (CI).
set -euo pipefail

pkgs=(
	build-essential cmake pkg-config # build
	libibverbs-dev                   # <infiniband/verbs.h>, the ABI we match
	ibverbs-utils perftest rdma-core # the programs run over softrnic
	librdmacm-dev rdmacm-utils       # <rdma/rdma_cma.h>, rping, ucmatose, cmtime
	python3-pyverbs                  # pyverbs smoke test (/usr/bin/python3)
	iproute2 procps bc               # ss (run_pair.sh), ps, bc (kill_pair.sh)
	ucx-utils libfabric-bin          # ucx_perftest, fi_* (benchmarks)
	openmpi-bin libopenmpi-dev       # mpirun, mpicc: Open MPI over UCX over softrnic
	libucx-dev                       # UCX's client/server example (its rdmacm CM)
	clang libclang-rt-14-dev         # libFuzzer (wire parser)
	iperf3                           # the TCP limit (bench-tcp.sh)
	dpkg-dev file                    # the .deb: cpack's dpkg-shlibdeps, file
	libtirpc-dev rpcbind spin        # softrnic RPC: XDR, rpcinfo, the model
	"$@"
)

installed() {
	local status
	status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
	[ "$status" = "install ok installed" ]
}

if ! command -v dpkg-query >/dev/null 2>&1 ||
	! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: this needs a Debian system (dpkg, apt-get)" >&2
	exit 1
fi

missing=()
for p in "${pkgs[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#pkgs[@]} packages are installed"
	exit 0
fi
echo "install-deps: installing ${missing[*]}"

as_root=()
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2
		exit 1
	fi
	as_root=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o DPkg::Lock::Timeout=300
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

# Mirrors fail now and then: a few attempts, a pause in between.
retry() {
	local n
	for n in 1 2 3; do
		"$@" </dev/null && return 0
		[ $n = 3 ] || { echo "install-deps: attempt $n failed, retrying"; sleep 10; }
	done
	return 1
}

retry "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get "${apt_opts[@]}" update
retry "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get "${apt_opts[@]}" install --no-install-recommends "${missing[@]}"

still=()
for p in "${missing[@]}"; do
	installed "$p" || still+=("$p")
done
if [ ${#still[@]} -gt 0 ]; then
	echo "install-deps: still missing: ${still[*]}" >&2
	exit 1
fi
echo "install-deps: done"
