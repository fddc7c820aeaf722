"""The build and test scripts compile with one job per CPU this process may use, whatever
OMP_NUM_THREADS says: GNU nproc honours OMP_NUM_THREADS and OMP_THREAD_LIMIT, so a user who
exported OMP_NUM_THREADS=1 (common on HPC systems, and the README's advice for ranks) built
with one job. Each script's job-count line runs here as the script runs it."""

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def job_count_line(script: str) -> str:
    text = open(os.path.join(ROOT, "tools", script)).read()
    (line,) = re.findall(r"^\s*jobs=\$\(.*\)\s*$", text, re.M)
    return line.strip()


@pytest.mark.parametrize("script", ["bootstrap.sh", "test.sh", "sanitize.sh"])
def test_job_count_ignores_omp_settings(script):
    line = job_count_line(script)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_THREAD_LIMIT": "1"}
    out = subprocess.run(["bash", "-c", f'{line}; echo "$jobs"'], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert int(out) == len(os.sched_getaffinity(0)), (script, line, out)
