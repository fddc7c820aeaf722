#!/usr/bin/env bash
# Runs every test suite: the C++ GoogleTest suites (through ctest) and the Python suites
# (pytest). Expects tools/bootstrap.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

echo "== C++ build (warnings are errors)"
cmake -S . -B build/cpp -G Ninja -DCMAKE_BUILD_TYPE=Release -DNGRAPH_WARNINGS_AS_ERRORS=ON >/dev/null
cmake --build build/cpp -j "$jobs"

echo "== C++ tests (ctest)"
ctest --test-dir build/cpp --output-on-failure -j "$jobs"

echo "== Python tests (pytest)"
python3 -m pytest tests/python -q

echo "== examples"
python3 examples/simple.py >/dev/null
echo "all tests passed"
