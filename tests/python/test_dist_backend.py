"""Choosing the communicator backend in one process: the names are checked, a one-process
job needs no oneCCL communicator, and a build without oneCCL says how to get it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

import ngraph as ng
import pytest
from ngraph.distributed import DistributedError

HAVE_CCL = importlib.util.find_spec("ngraph._ngraph_ccl") is not None


@pytest.fixture(autouse=True)
def _restore_backend():
    saved = ng.distributed._backend
    yield
    ng.distributed._backend = saved


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend must be 'mpi' or 'ccl', got 'gloo'"):
        ng.distributed.init(backend="gloo")


def test_unknown_backend_in_the_environment_is_refused(monkeypatch):
    ng.distributed._backend = None
    monkeypatch.setenv("NGRAPH_DIST_BACKEND", "nccl")
    with pytest.raises(ValueError, match="NGRAPH_DIST_BACKEND must be 'mpi' or 'ccl', got 'nccl'"):
        ng.distributed.backend()


def test_environment_chooses_the_backend(monkeypatch):
    ng.distributed._backend = None
    monkeypatch.setenv("NGRAPH_DIST_BACKEND", "mpi")
    assert ng.distributed.backend() == "mpi"
    monkeypatch.delenv("NGRAPH_DIST_BACKEND")
    assert ng.distributed.backend() == "mpi"


@pytest.mark.skipif(HAVE_CCL, reason="this ngraph has the oneCCL backend")
def test_without_oneccl_the_error_says_how_to_build_it():
    with pytest.raises(DistributedError) as info:
        ng.distributed.init(backend="ccl")
    msg = str(info.value)
    assert "built without the oneCCL backend" in msg, msg
    assert "NGRAPH_DISTRIBUTED='mpi;ccl'" in msg and "oneccl-cpu==2021.15.2" in msg, msg


@pytest.mark.skipif(not HAVE_CCL, reason="ngraph was built without oneCCL")
def test_one_process_on_oneccl_is_the_local_communicator():
    comm = ng.distributed.init(backend="ccl")
    assert ng.distributed.backend() == "ccl"
    assert comm.size == 1 and comm.rank == 0


NO_INIT = """
import numpy as np
import ngraph as ng
x = ng.parameter([3], np.float32)
f = ng.runtime().computation(ng.allreduce(x, "sum"), x)
c = ng.distributed.communicator()
(out,) = f(np.full(3, c.rank + 1.0, np.float32))
assert "oneCCL" in c.name, c.name
np.testing.assert_array_equal(out, np.full(3, 3.0, np.float32))
import os, sys
# A file per rank, not stdout: mpirun may interleave the ranks' lines.
with open(os.path.join(sys.argv[1], f"ok{c.rank}"), "w") as done:
    done.write(c.name)
"""


@pytest.mark.skipif(not HAVE_CCL or shutil.which("mpirun") is None,
                    reason="needs ngraph with oneCCL and mpirun")
def test_environment_alone_makes_the_default_communicator_oneccl(tmp_path):
    """NGRAPH_DIST_BACKEND=ccl without init: the ops' default communicator is oneCCL's."""
    from test_train_mnist import launch_env

    script = tmp_path / "no_init.py"
    script.write_text(NO_INIT)
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable,
           str(script), str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=launch_env(NGRAPH_DIST_BACKEND="ccl", NGRAPH_DIST_TIMEOUT="120"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Each rank finished (a file each: mpirun may interleave the ranks' stdout mid-line).
    for rank in (0, 1):
        assert "oneCCL" in (tmp_path / f"ok{rank}").read_text(), proc.stdout + proc.stderr
