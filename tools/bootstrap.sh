#!/usr/bin/env bash
# Sets up ngraph on a fresh Debian 12 machine (or another Debian-based one): system packages
# with apt-get, a Python virtual environment in the repository (.venv) with the Python
# packages, and ngraph built and installed into it. Safe to run again: each phase skips what
# is already done, and ngraph is rebuilt only when its build inputs changed.
#
#   bash tools/bootstrap.sh && . .venv/bin/activate
#
# Settings (environment variables):
#   NGRAPH_PYTHON=/path/to/python3  the interpreter the environment is made from (default:
#                                   Debian's /usr/bin/python3 when it exists, else python3)
#   NGRAPH_VENV=dir                 where the environment goes (default: .venv)
#   NGRAPH_NATIVE_ARCH=1            compile ngraph's kernels for this machine's CPU
#                                   (-march=native) instead of the portable default
#   NGRAPH_EDITABLE=1               install ngraph in editable mode (development)
#   NGRAPH_FORCE_BUILD=1            rebuild ngraph even when nothing changed
#   NGRAPH_SKIP_APT=1               do not run apt-get (the packages are known to be there)
#   NGRAPH_CCL=1                    also the oneCCL communicator backend (issue 15; CI sets
#                                   it): libfabric-dev, the pinned oneCCL wheels, and ngraph
#                                   built with -DNGRAPH_DISTRIBUTED="mpi;ccl" (tools/ccl_setup.sh
#                                   says why the pin)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

t0=$SECONDS
phase_start=$SECONDS
phase_name=""
# Ends the current phase (printing its time) and starts the next one.
phase() {
  if [ -n "$phase_name" ]; then
    echo "   ($phase_name: $((SECONDS - phase_start)) s)"
  fi
  phase_name=$1
  phase_start=$SECONDS
  echo "== [$((SECONDS - t0)) s] $1"
}
fail() {
  echo "bootstrap: $*" >&2
  exit 1
}

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || fail "not root and no sudo: run as root or install sudo"
  SUDO="sudo"
fi

# ------------------------------------------------------------------------- system packages
APT_PACKAGES=(
  g++ make cmake ninja-build pkg-config zlib1g-dev
  python3 python3-venv python3-dev
  openmpi-bin libopenmpi-dev
  libdnnl-dev ocl-icd-opencl-dev libgtest-dev libbenchmark-dev
  graphviz dataset-fashion-mnist fortunes
)
ccl=${NGRAPH_CCL:-0}
# oneCCL dlopens the unversioned libfabric.so, which only the -dev package provides.
[ "$ccl" = 1 ] && APT_PACKAGES+=(libfabric-dev)
phase "system packages (apt-get)"
missing=()
installed=" $(dpkg-query -W -f='${Package}=${db:Status-Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null |
  sed -n 's/=installed$//p' | tr '\n' ' ' || true) "
for p in "${APT_PACKAGES[@]}"; do
  case "$installed" in *" $p "*) ;; *) missing+=("$p") ;; esac
done
if [ "${#missing[@]}" = 0 ]; then
  echo "   all ${#APT_PACKAGES[@]} packages are installed"
elif [ "${NGRAPH_SKIP_APT:-0}" = 1 ]; then
  fail "NGRAPH_SKIP_APT=1 but these packages are missing: ${missing[*]}"
else
  echo "   installing ${#missing[@]} missing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# ------------------------------------------------------------------- virtual environment
phase "virtual environment"
py=${NGRAPH_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=$(command -v python3); fi
fi
[ -x "$py" ] || py=$(command -v "$py" || true)
[ -n "$py" ] && [ -x "$py" ] || fail "NGRAPH_PYTHON=${NGRAPH_PYTHON:-} is not an executable"
py_version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
  fail "$py is Python $py_version; ngraph needs 3.9 or newer (set NGRAPH_PYTHON)"
venv=${NGRAPH_VENV:-.venv}
case "$venv" in /*) ;; *) venv="$repo/$venv" ;; esac
# The interpreter an existing environment was made from (its pyvenv.cfg's home and version).
venv_matches() {
  [ -x "$venv/bin/python" ] && [ -f "$venv/pyvenv.cfg" ] || return 1
  local home version
  home=$(sed -n 's/^home = //p' "$venv/pyvenv.cfg")
  version=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || return 1
  [ "$version" = "$py_version" ] && [ "$(readlink -f "$home")" = "$(readlink -f "$(dirname "$py")")" ]
}
if venv_matches; then
  echo "   $venv (Python $py_version from $py) exists"
else
  if [ -e "$venv" ]; then
    echo "   $venv was made from another interpreter: making it again from $py"
    rm -rf "$venv"
  fi
  "$py" -m venv "$venv" ||
    fail "$py -m venv failed: on Debian/Ubuntu install python3-venv (or python$py_version-venv)"
  echo "   made $venv from $py (Python $py_version)"
fi
vpy="$venv/bin/python"
export PATH="$venv/bin:$PATH"  # the build finds the environment's tools first

# ------------------------------------------------------------------------ Python packages
phase "Python packages (pip, binary wheels)"
pip_install() { "$vpy" -m pip install -q --disable-pip-version-check "$@"; }
# ml_dtypes: NumPy's bfloat16 dtype, optional for users; the bf16 tests need it.
# onnx: ngraph.onnx (the ONNX bridge); onnxruntime: its tests compare exports with it.
packages=("numpy>=1.22" "pybind11>=2.12" "scikit-build-core>=0.10" "pytest>=7" ruff matplotlib
  ml_dtypes "onnx>=1.16" "onnxruntime>=1.17")
# Debian 12's cmake (3.25) is new enough; older distributions get CMake from PyPI.
cmake_version=$(cmake --version 2>/dev/null | sed -n '1s/^cmake version //p')
if [ -z "$cmake_version" ] ||
  [ "$(printf '%s\n' 3.20 "$cmake_version" | sort -V | head -1)" != 3.20 ]; then
  packages+=("cmake>=3.20")
fi
command -v ninja >/dev/null || packages+=(ninja)
pip_install --prefer-binary "${packages[@]}"

# mpi4py must load the same MPI library as ngraph (the system's Open MPI). Its binary wheel
# finds the system libmpi at run time; check that it does, else build it from source against
# the system's mpicc.
mpi4py_check() {
  "$vpy" - <<'EOF'
import sys
import mpi4py
mpi4py.rc.initialize = False  # the check needs no MPI_Init
from mpi4py import MPI
version = MPI.Get_library_version().replace("\0", "").splitlines()[0]
maps = open("/proc/self/maps").read().split("\n")
libs = sorted({line.split()[-1] for line in maps if "/libmpi.so" in line})
print(f"mpi4py {mpi4py.__version__}: {version}; loads {', '.join(libs) or 'no libmpi.so'}")
sys.exit(0 if "Open MPI" in version and libs else 1)
EOF
}
if ! "$vpy" -c "import mpi4py" 2>/dev/null; then
  pip_install --only-binary=mpi4py "mpi4py>=3.1" ||
    echo "   no binary wheel of mpi4py for this Python: building it from source"
fi
if out=$(mpi4py_check 2>&1); then
  echo "   $out"
else
  echo "   mpi4py does not load the system Open MPI (${out##*$'\n'}): building it from source"
  echo "   against $(command -v mpicc) (about a minute)"
  pip_install --no-binary=mpi4py --force-reinstall --no-deps "mpi4py>=3.1"
  out=$(mpi4py_check 2>&1) || fail "mpi4py still does not load Open MPI: $out"
  echo "   $out"
fi

if [ "$ccl" = 1 ]; then
  phase "oneCCL 2021.15.2 (pip)"
  NGRAPH_CCL_BUILD=0 PYTHON="$vpy" bash tools/ccl_setup.sh | sed 's/^/   /'
fi

# ------------------------------------------------------------------------------ ngraph
phase "ngraph (build and install)"
native=${NGRAPH_NATIVE_ARCH:-0}
editable=${NGRAPH_EDITABLE:-0}
# The build's inputs: sources, build files, compiler, Python and the settings. Same hash and
# ngraph still importable: nothing to do.
inputs_hash() {
  {
    find cpp python CMakeLists.txt pyproject.toml -type f \
      ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum
    c++ --version | head -1
    "$vpy" -c 'import sys; print(sys.version)'
    dpkg-query -W libdnnl-dev libopenmpi-dev 2>/dev/null || true
    echo "native=$native editable=$editable ccl=$ccl"
  } | sha256sum | cut -d' ' -f1
}
stamp="$venv/.ngraph-build-stamp"
hash=$(inputs_hash)
if [ "${NGRAPH_FORCE_BUILD:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ] &&
  "$vpy" -c "import ngraph" 2>/dev/null; then
  echo "   unchanged since the last build (stamp $stamp): skipped"
else
  rm -f "$stamp"
  arch_flag=OFF
  [ "$native" = 1 ] && arch_flag=ON
  log="$repo/build/bootstrap-ngraph.log"
  mkdir -p "$repo/build"
  : >"$log"  # exists before tail follows it (tail -f of a missing file gives up at once)
  arch_text="portable instruction set"
  [ "$native" = 1 ] && arch_text="-march=native"
  # The CPUs this process may use. GNU nproc also honours OMP_NUM_THREADS and OMP_THREAD_LIMIT,
  # so a user who exports OMP_NUM_THREADS=1 for their runs would build with one job: not here.
  jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
  echo "   compiling with $jobs jobs, $arch_text; full log: $log"
  mode=(.)
  [ "$editable" = 1 ] && mode=(-e .)
  if [ "$ccl" = 1 ]; then
    mode+=(--config-settings="cmake.define.NGRAPH_DISTRIBUTED=mpi;ccl"
      --config-settings="cmake.define.ONECCL_ROOT=$venv")
  fi
  # pip -v passes CMake's and Ninja's output through; show Ninja's [done/total] lines.
  CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$vpy" -m pip install -v --no-build-isolation \
    --disable-pip-version-check --config-settings="cmake.define.NGRAPH_NATIVE_ARCH=$arch_flag" \
    "${mode[@]}" >"$log" 2>&1 </dev/null &
  pid=$!
  # One progress line per Ninja step, as it happens.
  tail -n +1 -f "$log" --pid=$pid 2>/dev/null |
    sed -u -n 's/^ *\(\[[0-9]*\/[0-9]*\] \)/   \1/p' || true
  if ! wait $pid; then
    tail -n 40 "$log" >&2
    fail "building ngraph failed (the end of $log is above)"
  fi
  echo "$hash" >"$stamp"
fi

phase "check"
"$vpy" - <<'EOF'
import numpy
import ngraph as ng
mpi = "MPI available" if ng.distributed.mpi_available() else "no MPI (one process only)"
print(f"   ngraph {ng.__version__}, numpy {numpy.__version__}, {mpi}")
EOF
echo "   ($phase_name: $((SECONDS - phase_start)) s)"
echo "== bootstrap done in $((SECONDS - t0)) s; use the environment with: . $venv/bin/activate"
