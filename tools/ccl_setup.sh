#!/usr/bin/env bash
# Sets up the oneCCL communicator backend (issue 15) and builds ngraph with it:
#   1. apt: libfabric-dev (oneCCL's transport; it dlopens the unversioned libfabric.so, which
#      only the -dev package provides: without it oneCCL fails with "could not initialize any
#      transport library");
#   2. pip, into the Python environment that runs this script ($PYTHON, default python3):
#      oneccl-cpu==2021.15.2 and oneccl-cpu-devel==2021.15.2. The pin: the newer wheels
#      (2021.16, 2021.17, 2022.x) ship a libccl.so.1 that needs libccl.so.2, which no wheel
#      ships, so they cannot be loaded;
#   3. pip install . with -DNGRAPH_DISTRIBUTED="mpi;ccl" and ONECCL_ROOT=<that environment>
#      (skip with NGRAPH_CCL_BUILD=0, e.g. when bootstrap builds ngraph itself with
#      NGRAPH_CCL_CMAKE_ARGS printed below).
# Then run with: NGRAPH_DIST_BACKEND=ccl mpirun -np N python train.py (or
# ngraph.distributed.init(comm, backend="ccl")). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

echo "== libfabric (apt-get)"
if ! ldconfig -p | grep -q 'libfabric\.so '; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libfabric-dev >/dev/null
fi

echo "== oneCCL 2021.15.2 (pip, into $($PYTHON -c 'import sys; print(sys.prefix)'))"
$PYTHON -m pip install -q --no-deps "oneccl-cpu==2021.15.2" "oneccl-cpu-devel==2021.15.2"
prefix=$($PYTHON -c 'import sys; print(sys.prefix)')
# libccl.so.1 must load with only libc/libstdc++ (the unusable newer wheels fail here).
$PYTHON -c "import ctypes, sys; ctypes.CDLL(sys.prefix + '/lib/libccl.so.1')"
echo "NGRAPH_CCL_CMAKE_ARGS=-DNGRAPH_DISTRIBUTED=mpi;ccl -DONECCL_ROOT=$prefix"

if [ "${NGRAPH_CCL_BUILD:-1}" = 1 ]; then
  echo "== ngraph with the oneCCL backend (pip install)"
  $PYTHON -m pip install -q --no-build-isolation . \
    -Ccmake.define.NGRAPH_DISTRIBUTED="mpi;ccl" -Ccmake.define.ONECCL_ROOT="$prefix"
  $PYTHON -c "from ngraph import _ngraph_ccl; print('ngraph with', _ngraph_ccl.library_version())"
fi
