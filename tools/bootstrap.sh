#!/usr/bin/env bash
# Installs everything ngraph needs on a fresh Debian 12 machine (system packages, Python
# packages) and builds and installs ngraph itself. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

echo "== system packages (apt-get)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  g++ make pkg-config zlib1g-dev \
  openmpi-bin libopenmpi-dev \
  libdnnl-dev ocl-icd-opencl-dev libgtest-dev libbenchmark-dev \
  dataset-fashion-mnist >/dev/null

echo "== Python packages (pip)"
python3 -m pip install -q "cmake>=3.20" ninja "scikit-build-core>=0.10" "pybind11>=2.12" \
  "numpy>=1.22" "pytest>=7" ruff matplotlib
# mpi4py must load the same MPI library as ngraph: build it against Debian's Open MPI.
if ! python3 -c "from mpi4py import MPI; import sys; sys.exit('Open MPI' not in MPI.Get_library_version())" 2>/dev/null; then
  python3 -m pip install -q --no-binary=mpi4py --force-reinstall --no-deps "mpi4py>=3.1"
fi

echo "== ngraph (pip install)"
# Editable when NGRAPH_EDITABLE=1 (development), a regular install otherwise.
if [ "${NGRAPH_EDITABLE:-0}" = 1 ]; then
  python3 -m pip install -q --no-build-isolation -e .
else
  python3 -m pip install -q --no-build-isolation .
fi
python3 -c "import ngraph, numpy; print('ngraph', ngraph.__version__, 'numpy', numpy.__version__)"
# oneCCL backend (issue 15), opt-in: NGRAPH_CCL=1 installs it and rebuilds ngraph with it.
if [ "${NGRAPH_CCL:-0}" = 1 ]; then PYTHON=python3 tools/ccl_setup.sh; fi
