#!/usr/bin/env bash
# The sanitizer job: ngraph's C++ libraries, GoogleTest suites and Python extension built with
# sanitizers, and their tests run clean (the first finding fails the job).
#
#   tools/sanitize.sh
#
# AddressSanitizer + UndefinedBehaviorSanitizer (with LeakSanitizer) in build/asan: every
# ctest suite (the MPI ones under mpirun), then a short Python run with the instrumented
# extension (libasan preloaded into the interpreter), single-process and under mpirun. Then
# ThreadSanitizer in build/tsan: the extensions, and the threading tests under mpirun.
#
# Suppressions (tools/sanitizers/*.supp) cover only code that is not ours (Open MPI and its
# libraries, CPython), each with the reason. Needs gcc's sanitizer runtimes (libasan,
# libubsan: Debian's gcc has them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# The CPUs this process may use. GNU nproc also honours OMP_NUM_THREADS and OMP_THREAD_LIMIT,
# so a user who exports OMP_NUM_THREADS=1 for their runs would build with one job: not here.
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
python=${PYTHON:-python3}
supp="$root/tools/sanitizers"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

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

# The interpreter is not instrumented: the sanitizer's runtime must be loaded first. The
# package is the source tree's Python files next to the instrumented extensions (which find
# their libraries in the build tree through their RUNPATH).
make_package() { # BUILD_DIR
  local pkg=$1/pkg/ngraph
  rm -rf "$1/pkg" && mkdir -p "$pkg"
  for f in python/ngraph/*; do ln -s "$root/$f" "$pkg/"; done
  ln -s "$root/$1"/python/src/_ngraph*.so "$pkg/"
}
runtime() { "${CXX:-g++}" -print-file-name="$1"; }

# CPython and NumPy keep memory until exit by design, so leak detection is off for this part.
echo "== AddressSanitizer + UndefinedBehaviorSanitizer: Python (training, ops, threads under mpirun)"
make_package build/asan
asan_preload="$(runtime libasan.so) $(runtime libubsan.so)"
asan_python() {
  PYTHONPATH="$root/build/asan/pkg" ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" "$@"
}
asan_python env LD_PRELOAD="$asan_preload" "$python" -m pytest -q -p no:cacheprovider tests/python/test_training.py \
  tests/python/test_ops.py tests/python/test_batch_norm.py tests/python/test_nn.py \
  -k "test_training or add or dot or relu or softmax or sum or conv or pool or batch_norm"
# The runtimes are preloaded into the ranks only (-x NAME=value), not into mpirun.
asan_python "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$asan_preload" -x PYTHONPATH -x ASAN_OPTIONS \
  -x UBSAN_OPTIONS \
  "$python" -m pytest -q -p no:cacheprovider tests/python/distributed/mpi_test_threads.py \
  tests/python/distributed/mpi_test_collectives.py

# ThreadSanitizer: the libraries and extensions only (the C++ suites are single-threaded), then
# the threading tests under mpirun: two and three threads calling distributed computations,
# and one computation from two threads. Kernels run on one thread (NGRAPH_NUM_THREADS=1):
# oneDNN's OpenMP runtime (libgomp) is not instrumented, so ThreadSanitizer cannot see its
# barriers. Reports inside Open MPI, libgomp and CPython (not instrumented, not ours) are
# suppressed in tools/sanitizers/tsan.supp, each with the reason.
echo "== ThreadSanitizer: build (build/tsan)"
configure_and_build build/tsan thread -DNGRAPH_BUILD_PYTHON=ON -DNGRAPH_BUILD_TESTS=OFF \
  "-DPython_EXECUTABLE=$(command -v "$python")" \
  "-Dpybind11_DIR=$("$python" -m pybind11 --cmakedir)"
echo "== ThreadSanitizer: Python threading tests under mpirun"
make_package build/tsan
# ignore_noninstrumented_modules: Open MPI's progress engine, run by whichever thread polls,
# writes the result of another thread's pending operation into that thread's buffer (memcpy
# from libmpi), and completion is signalled through its own atomics, which ThreadSanitizer
# cannot see: without this it reports ngraph's read of a completed buffer as a race (seen
# once in CI: Communicator::staged against a write with no stack, "as if synchronized via
# sleep"). Accesses made by ngraph's own code are all still checked.
# halt_on_error: the first race fails the test run. Reports go to files (log_path), printed
# here: a rank that halts can end before mpirun forwards its stderr. ASLR is turned off for
# the ranks (setarch -R): ThreadSanitizer of gcc 12 refuses the mappings of kernels with
# vm.mmap_rnd_bits above 28 ("unexpected memory mapping").
reports="$root/build/tsan/reports"
rm -rf "$reports" && mkdir -p "$reports"
status=0
PYTHONPATH="$root/build/tsan/pkg" NGRAPH_NUM_THREADS=1 \
  TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$supp/tsan.supp:log_path=$reports/tsan" \
  "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$(runtime libtsan.so)" -x PYTHONPATH -x NGRAPH_NUM_THREADS \
  -x TSAN_OPTIONS setarch "$(uname -m)" -R "$python" -m pytest -q -p no:cacheprovider \
  tests/python/distributed/mpi_test_threads.py || status=$?
if [ "$status" != 0 ] || compgen -G "$reports/tsan*" >/dev/null; then
  cat "$reports"/tsan* 2>/dev/null || true
  echo "sanitize.sh: ThreadSanitizer run failed (exit $status; reports above, in $reports)" >&2
  exit 1
fi
echo "sanitizers: clean"
