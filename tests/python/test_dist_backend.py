"""Choosing the communicator backend in one process: the names are checked, a one-process
job needs no oneCCL communicator, and a build without oneCCL says how to get it."""

from __future__ import annotations

import importlib.util

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
