#!/usr/bin/env bash
# The sanitizer job: ngraph's C++ libraries, GoogleTest suites and Python extension built with
# sanitizers, and their tests run clean (the first finding fails the job).
#
#   tools/sanitize.sh
#
# AddressSanitizer + UndefinedBehaviorSanitizer (with LeakSanitizer) in build/asan: every
# ctest suite (the MPI ones under mpirun), then a short Python run with the instrumented
# extension (libasan preloaded into the interpreter). A ThreadSanitizer build is configured
# with -DNGRAPH_SANITIZE=thread; it is not part of this job yet.
#
# Not yet in tools/test.sh: so far only the MPI suites have been run clean with it (the build
# of the other suites and the extension did not finish on the shared CI machine in time).
#
# Suppressions (tools/sanitizers/*.supp) cover only code that is not ours (Open MPI and its
# libraries, CPython), each with the reason. Needs gcc's sanitizer runtimes (libasan,
# libubsan: Debian's gcc has them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)
python=${PYTHON:-python3}
supp="$root/tools/sanitizers"

configure_and_build() { # DIR SANITIZERS [extra cmake args...]
  local dir=$1 san=$2
  shift 2
  # -O1 -g1: sanitizer builds compile in less time and report lines; assertions stay on.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DNGRAPH_SANITIZE=$san" \
    -DNGRAPH_WARNINGS_AS_ERRORS=ON -DNGRAPH_BUILD_EXAMPLES=OFF "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

# Stop at the first finding, with a stack; Open MPI's own leaks are suppressed (see the file).
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_init_order=1:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export NGRAPH_DIST_TIMEOUT=${NGRAPH_DIST_TIMEOUT:-60}

echo "== AddressSanitizer + UndefinedBehaviorSanitizer: build (build/asan)"
configure_and_build build/asan "address;undefined" -DNGRAPH_BUILD_PYTHON=ON \
  "-DPython_EXECUTABLE=$(command -v "$python")" \
  "-Dpybind11_DIR=$("$python" -m pybind11 --cmakedir)"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer: ctest"
ctest --test-dir build/asan --output-on-failure -j "$jobs" --timeout 900 -E '^mpi_'
# The MPI suites without leak detection: Open MPI leaks at exit from plug-ins it has already
# unloaded (dlclose at MPI_Finalize), so LeakSanitizer cannot name those stacks' library and no
# narrow suppression matches them. Address and undefined-behaviour checks stay on.
ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
  ctest --test-dir build/asan --output-on-failure --timeout 900 -R '^mpi_'

# The interpreter is not instrumented: the ASan runtime must be loaded first. The package is
# the source tree's Python files next to the instrumented extension (which finds its libraries
# in the build tree through its RUNPATH). CPython and NumPy keep memory until exit by design,
# so leak detection is off for this part.
echo "== AddressSanitizer + UndefinedBehaviorSanitizer: Python (test_training, test_ops subset)"
pkg=build/asan/pkg/ngraph
rm -rf build/asan/pkg && mkdir -p "$pkg"
for f in python/ngraph/*; do ln -s "$root/$f" "$pkg/"; done
ln -s "$root"/build/asan/python/src/_ngraph*.so "$pkg/"
LD_PRELOAD="$(${CXX:-g++} -print-file-name=libasan.so) $(${CXX:-g++} -print-file-name=libubsan.so)" \
  PYTHONPATH="$root/build/asan/pkg" ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
  "$python" -m pytest -q -p no:cacheprovider tests/python/test_training.py \
  tests/python/test_ops.py -k "test_training or add or dot or relu or softmax or sum"
echo "sanitizers: clean"
