#!/usr/bin/env bash
# Runs Intel nGraph's own Python test files, unchanged, against the ngraph installed in a
# Python environment, on the CPU and INTERPRETER backends, and prints a pass/fail summary
# per file. The test files are not part of this repository: fetch them from nGraph's.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/run_ngraph_tests.sh [-p PYTHON] [-b BACKENDS] [-k] DIR [-- PYTEST_ARGS...]

DIR holds nGraph's Python test package as nGraph's repository lays it out: DIR/test/
(conftest.py, __init__.py, test_ops.py: the low-level ngraph.impl API) and DIR/test/ngraph/
(util.py, test_*.py). Every test_*.py under DIR/test runs. Get it with:

  git clone --depth 1 --branch v0.26.0 https://github.com/NervanaSystems/ngraph.git /tmp/ngraph-src
  tools/run_ngraph_tests.sh /tmp/ngraph-src/python

(other tags: v0.27.1, v0.28.0, v0.29.0; files from other dates work the same way).

  -p PYTHON    the interpreter whose ngraph is tested (default: python3 on PATH, e.g. a venv's)
  -b BACKENDS  space-separated backends (default: "CPU INTERPRETER")
  -k           keep pytest's full output (default: the summary and the failures' first lines)

The files run unchanged. Files written before pytest 5 use `pytest.config`, and some use
`np.bool`; both names were removed upstream (pytest 5.0, NumPy 1.24) and have nothing to do
with ngraph, so a small pytest plugin loaded with -p puts them back (pytest.config is the
session's config, with the gpu_skip/cpu_skip/... markers nGraph's conftest of 2018 defined).
The exit status is 0 when every test passed or was skipped, 1 otherwise.
EOF
}

python=python3
backends="CPU INTERPRETER"
keep=0
while getopts "p:b:kh" opt; do
  case "$opt" in
    p) python=$OPTARG ;;
    b) backends=$OPTARG ;;
    k) keep=1 ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -lt 1 ]]; then usage >&2; exit 2; fi
dir=$(cd "$1" && pwd) || { echo "run_ngraph_tests: no directory $1" >&2; exit 2; }
shift
[[ "${1:-}" == "--" ]] && shift
if [[ ! -f "$dir/test/conftest.py" || ! -d "$dir/test/ngraph" ]]; then
  echo "run_ngraph_tests: $dir has no test/conftest.py and test/ngraph/ (nGraph's python/ folder)" >&2
  exit 2
fi
"$python" -c "import ngraph" || { echo "run_ngraph_tests: $python cannot import ngraph" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/ngraph_legacy_test_api.py" <<'EOF'
"""Puts back pytest.config and np.bool for nGraph test files older than pytest 5 / NumPy 1.24."""
import numpy as np
import pytest

if not hasattr(np, "bool"):
    np.bool = bool


def pytest_configure(config):
    backend = config.getoption("backend", default="CPU")
    for name in ("GPU", "CPU", "NNP", "INTERPRETER", "PlaidML"):
        attr = name.lower() + "_skip"
        if not hasattr(config, attr):
            setattr(config, attr, pytest.mark.skipif(backend == name, reason=f"not on {name}"))
    pytest.config = config
EOF

status=0
for backend in $backends; do
  echo "== nGraph's tests on $backend ($dir)"
  set +e
  (cd "$dir" && PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}" "$python" -m pytest test \
     --backend="$backend" -p ngraph_legacy_test_api -p no:cacheprovider -q -rfE \
     --continue-on-collection-errors \
     --junitxml="$work/$backend.xml" -W ignore "$@") >"$work/$backend.log" 2>&1
  rc=$?
  set -e
  if [[ $keep == 1 ]]; then cat "$work/$backend.log"; else grep -E "^(FAILED|ERROR) " "$work/$backend.log" | cut -c1-200 || true; fi
  [[ $rc -ne 0 ]] && status=1
  if [[ $rc -gt 1 && ! -s "$work/$backend.xml" ]]; then
    tail -20 "$work/$backend.log"
    continue
  fi
done

"$python" - "$work" $backends <<'EOF'
import collections
import sys
import xml.etree.ElementTree as ET

work, backends = sys.argv[1], sys.argv[2:]
counts = collections.defaultdict(lambda: collections.Counter())
for backend in backends:
    try:
        root = ET.parse(f"{work}/{backend}.xml").getroot()
    except (OSError, ET.ParseError):
        continue
    for case in root.iter("testcase"):
        module = case.get("classname") or case.get("name", "?")
        name = module.split(".")[-1] if module.startswith("test.") else module
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        counts[name][(backend, outcome)] += 1
header = f"{'file':28}" + "".join(f"{b + ' pass/fail/skip':>28}" for b in backends)
print(header)
print("-" * len(header))
total = collections.Counter()
for name in sorted(counts):
    row = f"{name:28}"
    for b in backends:
        c = counts[name]
        row += f"{c[(b, 'passed')]:>18}/{c[(b, 'failed')]}/{c[(b, 'skipped')]}".rjust(28)
        for o in ("passed", "failed", "skipped"):
            total[(b, o)] += c[(b, o)]
    print(row)
print("-" * len(header))
print(f"{'total':28}" + "".join(
    f"{total[(b, 'passed')]}/{total[(b, 'failed')]}/{total[(b, 'skipped')]}".rjust(28)
    for b in backends))
EOF
exit $status
