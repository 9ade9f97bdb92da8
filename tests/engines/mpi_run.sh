#!/bin/bash
# Runs tests/engines/mpi_ping (an MPI program) as two ranks on this host
# with Debian's Open MPI, its UCX PML, and UCX limited to softrnic's verbs
# transports (UCX_TLS=rc_verbs,ud_verbs,self; the byte transfer layer only
# "self"), so the ranks can reach each other only over softrnic0.
#
#   mpi_run.sh MPI_PING_BINARY [--expect-fail]
#
# Debian's openmpi-mca-params.conf turns the UCX PML off (pml = ^ucx), and
# Open MPI prefers UCX only for devices in pml_ucx_devices (mlx*): both are
# set here. Passes when mpirun exits 0 and both ranks print "data ok".
# --expect-fail: without the device node UCX needs (SOFTRNIC_DEVNODE=0), the
# run must fail: a check that a pass means the traffic used softrnic.
# Exit: 0 pass, 1 fail, 77 skip (Open MPI not installed).
set -uo pipefail
prog=$1
invert=0
[ "${2:-}" = --expect-fail ] && invert=1
command -v mpirun >/dev/null || { echo "skip: mpirun not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
export UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=softrnic0:1
export SOFTRNIC_LIB_DIR=$lib OMPI_MCA_plm_rsh_agent=false
[ "$invert" = 1 ] && export SOFTRNIC_DEVNODE=0
out=$(timeout 100 "$lib/../bin/softrnic" exec -- mpirun --allow-run-as-root \
	--oversubscribe -np 2 --mca pml ucx --mca pml_ucx_devices any \
	--mca pml_ucx_tls any --mca btl self --mca osc ^ucx \
	-x UCX_TLS -x UCX_NET_DEVICES -x SOFTRNIC_TRANSPORT -x SOFTRNIC_IP \
	-x SOFTRNIC_DEVNODE -x LD_LIBRARY_PATH "$prog" 2>&1)
rc=$?
echo "$out" | tail -20
ok=$(echo "$out" | grep -c "data ok")
if [ "$invert" = 1 ]; then
	[ "$rc" != 0 ] && [ "$ok" -lt 2 ] && { echo "PASS: failed as expected"; exit 0; }
	echo "FAIL: the ranks talked without softrnic's device"
	exit 1
fi
[ "$rc" = 0 ] && [ "$ok" = 2 ] && { echo PASS; exit 0; }
echo "FAIL (mpirun exit $rc, $ok ranks with data ok)"
exit 1
