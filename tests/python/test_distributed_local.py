"""ng.distributed in one process (plain pytest, no launcher): every collective is an identity;
ngraph imports and runs without mpi4py; and small MPI jobs started with mpirun from here
(scripts written to tmp_path) end - non-zero, within a bounded time, naming the error - when
ranks disagree, when a rank raises mid-step, and when a rank dies."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import time

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph, _ngraph_mpi

RUNTIME = ng.runtime("CPU")
LOCAL = _ngraph.local_communicator()
DTYPES = [np.float32, np.float64, np.int32, np.int64]


def values(shape, dtype):
    return (np.arange(int(np.prod(shape))) * 3 - 4).reshape(shape).astype(dtype)


# --------------------------------------------------------------------- one rank


def test_one_rank_without_a_launcher():
    comm = ng.distributed.communicator()
    assert (comm.rank, comm.size) == (0, 1)
    assert (ng.distributed.rank(), ng.distributed.size()) == (0, 1)
    assert "local" in comm.name
    ng.distributed.barrier()  # returns at once
    if "mpi4py.MPI" not in sys.modules:  # (importing mpi4py.MPI initialises MPI)
        assert not _ngraph_mpi.mpi_initialized()  # one process does not start MPI


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("comm", [None, LOCAL], ids=["default", "local"])
def test_collectives_are_identities(dtype, comm):
    ops = ["sum", "max", "min", "prod"] + (["mean"] if np.issubdtype(dtype, np.floating) else [])
    x = ng.parameter([2, 4], dtype)
    nodes = [ng.allreduce(x, op, comm=comm) for op in ops]
    nodes += [ng.broadcast_distributed(x, 0, comm=comm), ng.allgather(x, 0, comm=comm),
              ng.allgather(x, 1, comm=comm)]
    nodes += [ng.reduce_scatter(x, op, axis, comm=comm) for op in ops for axis in (0, 1)]
    v = values((2, 4), dtype)
    for out in RUNTIME.computation(nodes, x)(v):
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, v)


def test_identity_gradients():
    x = ng.parameter([3], np.float64)
    y = ng.sum(ng.allreduce(x, "mean") * np.array([1.0, 2.0, 3.0]))
    (g,) = ng.gradients(y, [x])
    np.testing.assert_allclose(RUNTIME.computation(g, x)(np.ones(3))[0], [1.0, 2.0, 3.0])


def test_one_rank_errors():
    x = ng.parameter([2], np.float32)
    with pytest.raises(ValueError, match="itself"):
        ng.send(x, 0)
    with pytest.raises(ValueError, match="out of range"):
        ng.recv([2], np.float32, 1)
    with pytest.raises(ValueError, match="root"):
        ng.broadcast_distributed(x, 1)
    with pytest.raises(TypeError, match="mean"):
        ng.allreduce(ng.parameter([2], np.int32), "mean")
    with pytest.raises(TypeError, match="communicator"):
        ng.allreduce(x, comm="world")


def test_import_without_mpi4py(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.modules["mpi4py"] = None  # import mpi4py raises ImportError
        import numpy as np
        import ngraph as ng
        assert ng.distributed._mpi4py_module() is None
        comm = ng.distributed.init()
        assert (comm.rank, comm.size) == (0, 1), comm
        x = ng.parameter([3], np.float32)
        out = ng.runtime().computation(ng.allreduce(x, "sum"), x)(np.arange(3, dtype=np.float32))[0]
        assert out.tolist() == [0.0, 1.0, 2.0], out
        from ngraph import _ngraph_mpi
        assert not _ngraph_mpi.mpi_initialized()
        print("ok without mpi4py")
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "PMIX"))}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok without mpi4py" in proc.stdout


# ---------------------------------------------------------- MPI jobs from here

MPIRUN = shutil.which("mpirun")
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(
    MPIRUN is None or not HAVE_MPI4PY,
    reason="needs mpirun and mpi4py (apt-get install openmpi-bin libopenmpi-dev; "
           "pip install --no-binary=mpi4py mpi4py)"
    if MPIRUN is None else "needs mpi4py (pip install --no-binary=mpi4py mpi4py)",
)
JOB_TIMEOUT = 120  # seconds: a job still running then has hung, which is a failure
COLLECTIVE_TIMEOUT = "10"  # NGRAPH_DIST_TIMEOUT inside the jobs


def run_job(tmp_path, script: str, ranks: int = 2):
    """Runs `script` under mpirun; returns (returncode, output, seconds)."""
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "PMIX"))}
    env.update(NGRAPH_DIST_TIMEOUT=COLLECTIVE_TIMEOUT, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               PYTHONUNBUFFERED="1")
    start = time.monotonic()
    try:
        proc = subprocess.run([MPIRUN, "-np", str(ranks), sys.executable, str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=JOB_TIMEOUT, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"the MPI job hung (still running after {JOB_TIMEOUT} s):\n{out}")
    return proc.returncode, proc.stdout, time.monotonic() - start


HEADER = """
import os, sys, time
import numpy as np
from mpi4py import MPI
import ngraph as ng
comm = ng.distributed.init(MPI.COMM_WORLD)
r, n = comm.rank, comm.size
rt = ng.runtime()
"""


@needs_mpi
def test_job_works(tmp_path):
    """The baseline for the failure jobs: the same kind of job ends with 0."""
    code, out, seconds = run_job(tmp_path, HEADER + """
x = ng.parameter([4], np.float32)
step = rt.computation(ng.allreduce(x, "mean"), x)
for i in range(5):
    got = step(np.full(4, float(r + i), np.float32))[0]
    assert np.allclose(got, (n - 1) / 2 + i), got
print(f"rank {r} done", flush=True)
""")
    assert code == 0, out
    assert "rank 0 done" in out and "rank 1 done" in out, out


@needs_mpi
def test_job_with_different_graphs_fails_on_every_rank(tmp_path):
    code, out, seconds = run_job(tmp_path, HEADER + """
x = ng.parameter([4 + r], np.float32)
step = rt.computation(ng.allreduce(x), x)
step(np.ones(4 + r, np.float32))[0]
print(f"rank {r} was not stopped", flush=True)
""")
    assert code != 0, out
    assert seconds < 60, (seconds, out)
    assert "was not stopped" not in out, out
    for rank in (0, 1):
        # Every rank reports the error (the excepthook prints it before ending the job).
        assert f"[ngraph rank {rank}] unhandled exception" in out, out
    assert out.count("DistributedError: [AllReduce] ranks disagree") == 2, out
    assert "AllReduce f32{4} sum" in out and "AllReduce f32{5} sum" in out, out
    assert "rank 0 runs" in out and "rank 1 runs" in out, out


@needs_mpi
def test_job_where_a_rank_raises_mid_step(tmp_path):
    code, out, seconds = run_job(tmp_path, HEADER + """
x = ng.parameter([4], np.float32)
step = rt.computation(ng.allreduce(x), x)
for i in range(5):
    if r == 1 and i == 3:
        raise RuntimeError("rank 1 fails before the allreduce of step 3")
    step(np.ones(4, np.float32))
print(f"rank {r} finished", flush=True)
""")
    assert code != 0, out
    assert seconds < 60, (seconds, out)
    assert "RuntimeError: rank 1 fails before the allreduce of step 3" in out, out
    assert "finished" not in out, out


@needs_mpi
def test_job_where_a_rank_raises_without_abort_ends_by_timeout(tmp_path):
    """Without the abort hook, the other rank is not left waiting: its allreduce times out."""
    code, out, seconds = run_job(tmp_path, HEADER.replace(
        "init(MPI.COMM_WORLD)", "init(MPI.COMM_WORLD, timeout=3, abort_on_error=False)") + """
x = ng.parameter([4], np.float32)
step = rt.computation(ng.allreduce(x), x)
for i in range(5):
    if r == 1 and i == 3:
        raise RuntimeError("rank 1 fails before the allreduce of step 3")
    step(np.ones(4, np.float32))
print(f"rank {r} finished", flush=True)
""")
    assert code != 0, out
    assert seconds < 60, (seconds, out)
    assert "RuntimeError: rank 1 fails before the allreduce of step 3" in out, out
    assert "finished" not in out, out


@needs_mpi
def test_job_where_a_rank_dies_mid_step(tmp_path):
    code, out, seconds = run_job(tmp_path, HEADER + """
x = ng.parameter([4], np.float32)
step = rt.computation(ng.allreduce(x), x)
for i in range(5):
    if r == 1 and i == 3:
        os._exit(3)
    step(np.ones(4, np.float32))
print(f"rank {r} finished", flush=True)
""")
    assert code != 0, out
    assert seconds < 60, (seconds, out)
    assert "finished" not in out, out
