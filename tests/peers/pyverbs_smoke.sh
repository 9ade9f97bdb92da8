#!/bin/bash
# Runs pyverbs_smoke.py with Debian's python3 and softrnic's library.
set -u
py=/usr/bin/python3
$py -c "import pyverbs" 2>/dev/null || { echo "skip: python3-pyverbs missing"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRNIC_LIB_DIR:-$here/../../build/lib}
LD_LIBRARY_PATH=$lib exec $py "$here/pyverbs_smoke.py"
