#!/usr/bin/env bash
# Runs every test suite: the C++ GoogleTest suites (through ctest) and the Python suites
# (pytest). Expects tools/bootstrap.sh to have run: everything runs in its virtual
# environment (NGRAPH_VENV, default .venv): its python, pytest and ruff.
set -euo pipefail
cd "$(dirname "$0")/.."
# The CPUs this process may use. GNU nproc also honours OMP_NUM_THREADS and OMP_THREAD_LIMIT,
# so a user who exports OMP_NUM_THREADS=1 for their runs would build with one job: not here.
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
venv=${NGRAPH_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "tools/test.sh: no virtual environment in $venv: run 'bash tools/bootstrap.sh' first" >&2
  exit 1
fi
venv=$(cd "$venv" && pwd)
export PATH="$venv/bin:$PATH"
py="$venv/bin/python"

# The ONNX bridge's tests train PyTorch models exported to ONNX and compare (tests/python/onnx,
# test_train_onnx.py): PyTorch's CPU build, for the tests only (tools/bootstrap.sh leaves it
# out: the main job does not need its 190 MB).
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "== test-only packages: torch 2.13.0 (CPU)"
  "$py" -m pip install -q --disable-pip-version-check "torch==2.13.0" "onnxscript" ||
    { echo "tools/test.sh: installing torch==2.13.0 failed" >&2; exit 1; }
fi

echo "== lint (ruff)"
"$py" -m ruff check python bench examples tests

echo "== C++ build (warnings are errors)"
# With the oneCCL wheels in the environment (NGRAPH_CCL=1 bash tools/bootstrap.sh), the C++
# oneCCL suites are built and run too.
backends=mpi
[ -f "$venv/lib/libccl.so.1" ] && backends="mpi;ccl"
cmake -S . -B build/cpp -G Ninja -DCMAKE_BUILD_TYPE=Release -DNGRAPH_WARNINGS_AS_ERRORS=ON \
  -DNGRAPH_DISTRIBUTED="$backends" -DONECCL_ROOT="$venv" >/dev/null
cmake --build build/cpp -j "$jobs"

echo "== C++ tests (ctest)"
ctest --test-dir build/cpp --output-on-failure -j "$jobs"

echo "== Python tests (pytest)"
"$py" -m pytest tests/python -q

# Every rank runs the suites of tests/python/distributed (files mpi_test_*.py, collected only
# under an MPI launcher); mpirun exits non-zero when any rank fails. A collective that waits
# for a rank that is gone fails after NGRAPH_DIST_TIMEOUT seconds; `timeout` bounds the rest.
echo "== Python MPI tests (mpirun: 2, 3 and 4 ranks, 4 ranks as 2 nodes, 2 ranks over TCP)"
mpi_pytest=("$py" -m pytest tests/python/distributed -q -p no:cacheprovider)
for np in 2 3 4; do
  NGRAPH_DIST_TIMEOUT=30 timeout 600 mpirun --allow-run-as-root --oversubscribe -np $np "${mpi_pytest[@]}"
done
# Every 2 consecutive ranks as a node (NGRAPH_SHM_NODE_SIZE=2): the two-level path under
# every suite that does not choose its own layout (mpi_test_compression's two-level mode).
NGRAPH_SHM_NODE_SIZE=2 NGRAPH_DIST_TIMEOUT=30 timeout 600 mpirun --allow-run-as-root --oversubscribe \
  -x NGRAPH_SHM_NODE_SIZE -np 4 "${mpi_pytest[@]}"
# Over TCP the ranks act as if on separate hosts: no shared memory (NGRAPH_SHM=0), so the
# fused gradient allreduce goes over MPI.
NGRAPH_SHM=0 NGRAPH_DIST_TIMEOUT=30 timeout 600 mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self \
  -np 2 "${mpi_pytest[@]}"

# oneCCL backend (issue 15): the same suites on it, when ngraph was built with it (tools/ccl_setup.sh).
if "$py" -c "import ngraph._ngraph_ccl" 2>/dev/null; then
  echo "== Python MPI tests on oneCCL (2, 4 ranks)"
  for np in 2 4; do
    NGRAPH_DIST_BACKEND=ccl NGRAPH_DIST_TIMEOUT=30 timeout 1200 mpirun --allow-run-as-root \
      --oversubscribe -np $np "${mpi_pytest[@]}"
  done
fi

echo "== multi-host (2 hosts as network namespaces; skipped where namespaces are not permitted)"
timeout 600 "$py" -m pytest tests/multihost -q -p no:cacheprovider -rxs

echo "== examples"
"$py" examples/simple.py >/dev/null

# Benchmarks only as a smoke run (tiny sizes): the scripts work; no timing is asserted.
echo "== benchmarks (smoke)"
"$py" bench/run_all.py --smoke >/dev/null
"$py" bench/isa.py --smoke >/dev/null
"$py" bench/convert.py --smoke >/dev/null
"$py" bench/large_batch.py --smoke >/dev/null
NGRAPH_DIST_TIMEOUT=30 timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$py" bench/cnn.py --smoke --paired | "$py" -c 'import json, sys
ws = json.loads(sys.stdin.read().strip().splitlines()[-1])["paired"]["weak_scaling"]
assert sorted(ws) == ["independent", "lockstep", "ranks"] and all(v > 0 for v in ws.values()), ws'

# The sanitizer job (issue 14): AddressSanitizer + UndefinedBehaviorSanitizer on every C++
# suite and a Python run (one process and under mpirun), ThreadSanitizer on the threading
# tests. It builds twice more (build/asan, build/tsan): NGRAPH_SANITIZERS=0 skips it locally.
if [ "${NGRAPH_SANITIZERS:-1}" != 0 ]; then
  echo "== sanitizers (tools/sanitize.sh)"
  PYTHON="$py" bash tools/sanitize.sh
fi
echo "all tests passed"
