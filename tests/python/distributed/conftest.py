"""The MPI suites: files named ``mpi_test_*.py``, run by every rank of an MPI job::

    mpirun -np 2 python -m pytest tests/python/distributed -q -p no:cacheprovider

Plain ``pytest tests/python`` (one process, no launcher) does not collect them: their file
names do not match pytest's patterns, and this conftest only adds them under mpirun. Every
rank runs every test in the same order; a failure on any rank makes that rank's pytest (and
so mpirun) exit non-zero, and a rank that stops answering makes the others fail within the
communicator's timeout (NGRAPH_DIST_TIMEOUT) instead of hanging.
"""

from __future__ import annotations

import os

import pytest

_LAUNCHER_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE")


def _under_mpi_launcher() -> bool:
    return any(v in os.environ for v in _LAUNCHER_SIZE_VARS)


def pytest_collect_file(file_path, parent):
    # Files named on the command line are collected by pytest itself.
    if (file_path.suffix == ".py" and file_path.name.startswith("mpi_test_")
            and _under_mpi_launcher() and not parent.session.isinitpath(file_path)):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.fixture(scope="session")
def MPI():
    """mpi4py's MPI module (the suites are skipped without it)."""
    mpi = pytest.importorskip("mpi4py.MPI", reason="the MPI suites need mpi4py")
    return mpi


@pytest.fixture(scope="session")
def comm(MPI):
    """ngraph's communicator for MPI.COMM_WORLD, also the default one."""
    import ngraph as ng

    return ng.distributed.init(MPI.COMM_WORLD)


_sync_comm = None  # a communicator of its own for the barriers between tests


@pytest.fixture(scope="session")
def sync(MPI, comm):
    """A duplicate of the world used only for the barriers between tests, so that they never
    pair up with a test's collectives; it waits longer than the tests' communicators, so a
    rank that failed early waits for the others to fail by their timeout."""
    global _sync_comm
    import ngraph as ng

    _sync_comm = ng.distributed.as_communicator(MPI.COMM_WORLD.Dup())
    _sync_comm.timeout = 3 * comm.timeout
    return _sync_comm


@pytest.fixture
def world(MPI, comm, sync):
    """mpi4py's world. The ranks are in step at the start of each test (a bounded barrier:
    after a rank failed mid-test, the others fail within the timeout instead of waiting)."""
    sync.barrier()
    yield MPI.COMM_WORLD


def pytest_report_header(config):
    for v in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if v in os.environ:
            return f"MPI rank {os.environ[v]}"
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    rank = next((os.environ[v] for v in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
                 if v in os.environ), None)
    if rank is not None:
        failed = len(terminalreporter.stats.get("failed", [])) + len(
            terminalreporter.stats.get("error", []))
        passed = len(terminalreporter.stats.get("passed", []))
        terminalreporter.write_line(f"[MPI rank {rank}] {passed} passed, {failed} failed")


def pytest_sessionfinish(session, exitstatus):
    # The ranks finish together (bounded): a rank that ends first with failures would make
    # mpirun stop the others before they print their reports.
    if _sync_comm is not None:
        try:
            _sync_comm.barrier()
        except Exception as e:  # noqa: BLE001 - the failures are reported already
            import sys

            sys.stderr.write(f"[MPI] final barrier failed: {e}\n")
