"""Fault injection on small MPI jobs started from here (issue 14, items 3, 8 and 9): a rank
stopped (SIGSTOP) or killed (kill -9) mid-training or while shared memory is set up, and
settings that differ between ranks. Every live rank must end - with a DistributedError
naming the collective, the timeout and the rank that did not answer, or by the watchdog
ending the job with that message - within the timeout plus a few seconds, and nothing of
the job may stay in /dev/shm."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(
    MPIRUN is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpirun and mpi4py (apt-get install openmpi-bin libopenmpi-dev; "
           "pip install --no-binary=mpi4py mpi4py)")

TIMEOUT = 2.0     # the collectives' timeout inside the jobs (set after start-up)
SLACK = 8.0       # what a live rank may take beyond it (the survey takes 1 s; a loaded machine)
JOB_LIMIT = 120   # seconds: a job still running then has hung

HEADER = """
import os, signal, sys, time
import numpy as np
from mpi4py import MPI
import ngraph as ng
OUT = sys.argv[1]
comm = ng.distributed.init(MPI.COMM_WORLD, abort_on_error=ABORT, check=CHECK)
r, n = comm.rank, comm.size
with open(os.path.join(OUT, f"pid-{r}"), "w") as f:
    f.write(str(os.getpid()))
comm.barrier()  # start-up skew stays out of the short timeout
comm.timeout = TIMEOUT
rt = ng.runtime()

def report(text):
    path = os.path.join(OUT, f"out-{r}")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
"""

TRAINING = """
x = ng.parameter([4096], np.float32)
w = ng.parameter([300], np.float32)
one = ng.constant(np.float32(1))
step = rt.computation([ng.allreduce(x * one), ng.allreduce(w * one)], x, w)
for i in range(100000):
    if r == STALLER and i == 5:
        os.kill(os.getpid(), SIGNAL)
    start = time.monotonic()
    try:
        got = step(np.full(4096, r + i, np.float32), np.full(300, 1.0, np.float32))
    except ng.distributed.DistributedError as e:
        report(f"{time.monotonic() - start:.2f}\\n{e}")
        time.sleep(600)  # the harness ends the job
    assert got[0][0] == n * (n - 1) / 2 + n * i, got[0][0]
"""


def ngraph_objects():
    try:
        return {p for p in os.listdir("/dev/shm") if p.startswith("ngraph-")}
    except FileNotFoundError:
        return set()


def start_job(tmp_path: Path, script: str, ranks: int, tcp: bool, **values):
    for k, v in values.items():
        script = script.replace(k, repr(v) if not isinstance(v, str) or k == "CHECK" else v)
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "PMIX"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", PYTHONUNBUFFERED="1")
    cmd = [MPIRUN, "-np", str(ranks)]
    if tcp:
        env["NGRAPH_SHM"] = "0"
        cmd += ["--mca", "btl", "tcp,self", "-x", "NGRAPH_SHM"]
    cmd += [sys.executable, str(path), str(tmp_path)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=tmp_path, start_new_session=True)


def pids(tmp_path: Path, ranks: int):
    return {r: int((tmp_path / f"pid-{r}").read_text()) for r in range(ranks)
            if (tmp_path / f"pid-{r}").exists()}


def end_job(proc, tmp_path: Path, ranks: int):
    """Kills what is left of the job (the stopped rank included); returns mpirun's output."""
    for pid in pids(tmp_path, ranks).values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return out


def wait_for_reports(proc, tmp_path: Path, ranks, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if all((tmp_path / f"out-{r}").exists() for r in ranks):
            return {r: (tmp_path / f"out-{r}").read_text() for r in ranks}
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    out = end_job(proc, tmp_path, max(ranks) + 2)
    pytest.fail(f"ranks {list(ranks)} did not all report within {limit} s:\n{out}")


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("tcp", [False, True], ids=["shm", "tcp"])
@pytest.mark.parametrize("check", ["always", "first"])
def test_stopped_rank_makes_every_live_rank_raise(tmp_path, ranks, tcp, check):
    """abort_on_error=False: rank 1 stops itself (SIGSTOP) before step 5. Every other rank
    raises DistributedError within the timeout plus the survey, naming the collective, the
    timeout and rank 1 as the rank that did not answer. check='first' makes them wait in the
    data allreduce itself (shared memory, or MPI's allreduce run polled), 'always' in the
    agreement check."""
    proc = start_job(tmp_path, HEADER + TRAINING, ranks, tcp, ABORT=False, CHECK=check,
                     TIMEOUT=TIMEOUT, STALLER=1, SIGNAL="signal.SIGSTOP")
    live = [r for r in range(ranks) if r != 1]
    reports = wait_for_reports(proc, tmp_path, live, JOB_LIMIT)
    job_pids = set(pids(tmp_path, ranks).values())
    end_job(proc, tmp_path, ranks)
    for r, text in reports.items():
        seconds, msg = text.split("\n", 1)
        assert float(seconds) < TIMEOUT + SLACK, (r, text)
        assert "[AllReduce]" in msg, msg
        assert f"rank {r} timed out after 2 s" in msg, msg
        assert "rank 1 did not answer within 1 s" in msg, msg
    left = {o for o in ngraph_objects() if any(f"ngraph-{p}-" in o for p in job_pids)}
    assert not left, left


@pytest.mark.parametrize("ranks", [2, 4])
def test_stopped_rank_with_abort_ends_the_job_naming_it(tmp_path, ranks):
    """abort_on_error=True (the default) over TCP with check='first': the live ranks sit in
    MPI's blocking allreduce; the watchdog of every live rank prints which rank did not
    answer and ends the job within the timeout plus a few seconds."""
    proc = start_job(tmp_path, HEADER + TRAINING, ranks, True, ABORT=True, CHECK="first",
                     TIMEOUT=TIMEOUT, STALLER=1, SIGNAL="signal.SIGSTOP")
    deadline = time.monotonic() + JOB_LIMIT
    while not (tmp_path / "pid-1").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        out = end_job(proc, tmp_path, ranks)
        pytest.fail(f"the job was not ended by its watchdog:\n{out}")
    assert proc.returncode != 0, out
    for r in range(ranks):
        if r != 1:
            assert re.search(rf"\[AllReduce\][^\n]*rank {r} timed out after 2 s in a blocking "
                             rf"MPI_Allreduce[^\n]*rank 1 did not answer", out), out
    assert "ending the job (MPI_Abort)" in out, out


def ended_by_a_watchdog(tmp_path, fault: str, abort: bool) -> str:
    """Runs TRAINING on 2 ranks with the fault hook `fault` (a call of ngraph's test-only
    interface ng._ngraph._testing) installed on rank 1 only; returns the job's output once a
    watchdog has ended it (the test fails if none did)."""
    script = HEADER.replace("comm.timeout = TIMEOUT", f"""comm.timeout = TIMEOUT
if r == 1:
    ng._ngraph._testing.{fault}
""") + TRAINING
    proc = start_job(tmp_path, script, 2, False, ABORT=abort, CHECK="first", TIMEOUT=TIMEOUT,
                     STALLER=-1, SIGNAL="signal.SIGSTOP")
    start = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        out = end_job(proc, tmp_path, 2)
        pytest.fail(f"the job was not ended by its watchdog:\n{out}")
    assert proc.returncode != 0, out
    assert time.monotonic() - start < 45, out
    assert "ending the job (MPI_Abort)" in out, out
    return out


def test_rank_stopped_inside_the_node_split_ends_the_job(tmp_path):
    """MPI_Comm_split_type cannot be polled: every rank arrives at a polled barrier first,
    then splits. Rank 1 stops between the two (the test hook at "topology_split"),
    so rank 0 sits in the blocking split. Its watchdog ends the job within the timeout plus
    a few seconds, naming the split and rank 1; before, it waited forever."""
    out = ended_by_a_watchdog(tmp_path, 'stop_at("topology_split")', abort=True)
    assert re.search(r"\[SharedRegion\] node topology[^\n]*rank 0 timed out after 2 s in a "
                     r"blocking MPI_Comm_split_type[^\n]*rank 1 did not answer", out), out


def test_rank_late_for_the_node_split_ends_the_job(tmp_path):
    """abort_on_error=False. Rank 1 arrives at the topology set-up 4 s late (the test hook at
    "topology_barrier"): rank 0 raises at the barrier after the 2 s timeout, while
    compiling. Rank 1 then passes the barrier (rank 0's is still pending inside MPI) into the
    blocking split, where it used to wait forever; now its watchdog ends the job, naming the
    split."""
    out = ended_by_a_watchdog(tmp_path, 'sleep_at("topology_barrier", 4)', abort=False)
    # The topology is made when the step is compiled: rank 0's error is uncaught there.
    assert re.search(r"DistributedError: \[SharedRegion\] node topology[^\n]*\(every rank "
                     r"arriving\): rank 0 timed out after 2 s", out), out
    assert re.search(r"rank 1 timed out after 2 s in a blocking MPI_Comm_split_type", out), out


@pytest.mark.parametrize("sig", ["SIGSTOP", "SIGKILL"])
def test_creator_stalls_or_dies_while_shared_memory_is_set_up(tmp_path, sig):
    """Rank 0 makes the shared-memory object, then stalls before anyone mapped it (the test
    hook at "shared_object_made"); the harness stops or kills it there. Stopped: rank
    1 times out and removes the object itself. Killed: mpirun ends the job at once (Open MPI
    kills the other ranks), and the next job on the machine removes the object of the dead
    process. Either way nothing is left in /dev/shm."""
    script = HEADER.replace("comm.timeout = TIMEOUT", """comm.timeout = TIMEOUT
if r == 0:
    ng._ngraph._testing.sleep_at("shared_object_made", 60)
""") + TRAINING
    before = ngraph_objects()
    proc = start_job(tmp_path, script, 2, False, ABORT=False, CHECK="always", TIMEOUT=TIMEOUT,
                     STALLER=-1, SIGNAL="signal.SIGSTOP")
    deadline = time.monotonic() + JOB_LIMIT
    made = set()
    while time.monotonic() < deadline and not made:
        creator = pids(tmp_path, 2).get(0)
        if creator:
            made = {o for o in ngraph_objects() - before if o.startswith(f"ngraph-{creator}-")}
        if proc.poll() is not None:
            pytest.fail(proc.communicate()[0])
        time.sleep(0.02)
    assert made, "rank 0 made no shared-memory object"
    os.kill(creator, getattr(signal, sig))
    if sig == "SIGSTOP":
        reports = wait_for_reports(proc, tmp_path, [1], TIMEOUT + SLACK + 5)
        seconds, msg = reports[1].split("\n", 1)
        assert float(seconds) < TIMEOUT + SLACK, reports
        assert "[SharedRegion]" in msg and "timed out after 2 s" in msg, msg
        assert "rank 0 did not answer" in msg, msg
        assert not (made & ngraph_objects()), "rank 1 left the object in /dev/shm"
        end_job(proc, tmp_path, 2)
    else:
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            end_job(proc, tmp_path, 2)
            pytest.fail("mpirun did not end the job after a rank was killed")
        # The next job that sets up shared memory removes the dead job's object.
        again = tmp_path / "again"
        again.mkdir()
        proc = start_job(again, HEADER + TRAINING.replace("range(100000)", "range(3)"), 2,
                         False, ABORT=True, CHECK="always", TIMEOUT=30.0, STALLER=-1,
                         SIGNAL="signal.SIGSTOP")
        out, _ = proc.communicate(timeout=JOB_LIMIT)
        assert proc.returncode == 0, out
        assert not (made & ngraph_objects()), "the dead job's object is still in /dev/shm"


@pytest.mark.parametrize("variable, values", [
    ("NGRAPH_SHM", ("1", "0")),
    ("NGRAPH_DIST_CHECK", ("always", "never")),
    ("NGRAPH_FUSION_THRESHOLD", ("0", "1000000")),
    ("NGRAPH_DIST_COMPRESSION", ("bf16", "fp16")),
])
def test_settings_that_differ_between_ranks_fail_at_init(tmp_path, variable, values):
    """Set on some ranks only (easy across hosts), these crashed a job ("stack smashing
    detected", SIGSEGV). Now init raises on every rank, naming the setting and the ranks."""
    script = f"""
import os, sys
os.environ[{variable!r}] = {values!r}[int(os.environ["OMPI_COMM_WORLD_RANK"]) % 2]
from mpi4py import MPI
import ngraph as ng
try:
    ng.distributed.init(MPI.COMM_WORLD)
except ng.distributed.DistributedError as e:
    print(f"rank {{MPI.COMM_WORLD.rank}} refused: {{e}}", flush=True)
    sys.exit(0)
print(f"rank {{MPI.COMM_WORLD.rank}} was not refused", flush=True)
"""
    (tmp_path / "job.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "PMIX"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run([MPIRUN, "-np", "3", sys.executable, str(tmp_path / "job.py")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=JOB_LIMIT, env=env)
    out = proc.stdout
    assert "was not refused" not in out, out
    for r in range(3):
        assert f"rank {r} refused" in out, out
    name = variable if variable != "NGRAPH_DIST_CHECK" else "the check mode (NGRAPH_DIST_CHECK"
    assert out.count(name) >= 3, out
    shown = {"NGRAPH_SHM": ("on", "0 (off)")}.get(variable, values)
    assert f"{shown[0]} on ranks 0,2" in out and f"{shown[1]} on rank 1" in out, out


SHARDED_TRAINING = """
x = ng.parameter([16, 20], np.float32)
y = ng.parameter([16], np.int64)
init = np.random.default_rng(7)
params = [ng.variable((init.standard_normal((20, 64)) * 0.1).astype(np.float32), name="w1"),
          ng.variable((init.standard_normal((64, 5)) * 0.1).astype(np.float32), name="w2")]
w1, w2 = params
loss = ng.softmax_cross_entropy(ng.dot(ng.relu(ng.dot(x, w1)), w2), y)
opt = ng.optimizers.Adam(0.01)
grads = [ng.allreduce(g, "mean") for g in ng.gradients(loss, params)]
step = rt.computation(loss, x, y, updates=opt.updates(loss, params, grads))
rng = np.random.default_rng(r)
ckpt = os.path.join(OUT, "last.ckpt")
for i in range(100000):
    if i == 4:  # the last checkpoint before the fault
        saved = [p.get_value() for p in params]
        # Every rank: Adam's moments stay in shares across nodes; rank 0 writes.
        ng.checkpoint.save(ckpt, params, opt, metadata={"step": i}, collective=True)
        comm.barrier()
        sharded = step.executable.last_call_sharded
    if r == STALLER and i == 5:
        ng._ngraph._testing.FAULT("sharded_update_gather")
    start = time.monotonic()
    try:
        step(rng.standard_normal((16, 20)).astype(np.float32), rng.integers(0, 5, 16))
    except ng.distributed.DistributedError as e:
        took = time.monotonic() - start
        meta = ng.checkpoint.load(ckpt, params, opt).metadata
        restored = all(np.array_equal(p.get_value(), s) for p, s in zip(params, saved))
        report(f"{took:.2f}\\n{meta['step']} {sharded} {restored}\\n{e}")
        time.sleep(600)  # the harness ends the job
"""


@pytest.mark.parametrize("node_size, compression, point", [
    (1, "none", "sharded_update_gather"), (2, "none", "sharded_update_gather"),
    (2, "bf16", "sharded_update_gather"), (1, "none", "sharded_update_reduce_scatter"),
    (1, "bf16", "sharded_update_reduce_scatter"), (2, "fp16", "sharded_update_reduce_scatter")])
def test_rank_stopped_mid_sharded_update(tmp_path, node_size, compression, point):
    """Four ranks as nodes of `node_size` (NGRAPH_SHM_NODE_SIZE), Adam's update sharded across
    them (with a 16-bit exchange and error feedback: NGRAPH_SHM_SHARDED_COMPRESSED=1). Rank 1
    stops itself (SIGSTOP) in step 5 at `point`: after updating its share, before the shares
    are gathered; or after summing its piece within its node, before the reduce-scatter
    between the nodes (the 16-bit one with compression). Every other rank raises
    DistributedError naming it within the timeout and a few seconds, and the checkpoint
    saved after step 4 (collectively: the moments are gathered from their owners, rank 0
    writes) loads on every one of them, giving back the values saved."""
    training = SHARDED_TRAINING.replace("FAULT", "stop_at").replace(
        '"sharded_update_gather"', f'"{point}"')
    if compression != "none":
        training = training.replace(
            'ng.allreduce(g, "mean")',
            f'ng.allreduce(g, "mean", compression="{compression}", error_feedback=True)')
    script = f"import os\nos.environ['NGRAPH_SHM_NODE_SIZE'] = '{node_size}'\n" \
        "os.environ['NGRAPH_SHM_SHARDED_ACROSS_NODES'] = '1'\n" \
        "os.environ['NGRAPH_SHM_SHARDED_COMPRESSED'] = '1'\n" + HEADER + training
    proc = start_job(tmp_path, script, 4, False, ABORT=False, CHECK="first", TIMEOUT=TIMEOUT,
                     STALLER=1, SIGNAL="")
    live = [0, 2, 3]
    reports = wait_for_reports(proc, tmp_path, live, JOB_LIMIT)
    end_job(proc, tmp_path, 4)
    for r, text in reports.items():
        seconds, state, msg = text.split("\n", 2)
        assert float(seconds) < TIMEOUT + SLACK, (r, text)
        assert state == "4 True True", (r, text)  # sharded calls; the checkpoint restored
        assert "sharded update" in msg and f"rank {r} timed out after 2 s" in msg, msg
        assert "rank 1" in msg, msg
    if point == "sharded_update_reduce_scatter":  # lost there: its partners wait in that step
        wire = "" if compression == "none" else f", sent as {compression}"
        assert any(f"summed by the sharded update{wire} between nodes: rank {r} timed out" in t
                   for r, t in reports.items()), reports


def test_rank_killed_mid_sharded_update(tmp_path):
    """Rank 1 of four (one per node) kills itself after updating its share, before the
    shares are gathered: the job ends with an error, and the last checkpoint (saved by rank 0
    after step 4) is whole and loads."""
    script = "import os\nos.environ['NGRAPH_SHM_NODE_SIZE'] = '1'\n" \
        "os.environ['NGRAPH_SHM_SHARDED_ACROSS_NODES'] = '1'\n" + HEADER + \
        SHARDED_TRAINING.replace("FAULT", "kill_at")
    proc = start_job(tmp_path, script, 4, False, ABORT=True, CHECK="first", TIMEOUT=TIMEOUT,
                     STALLER=1, SIGNAL="")
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        out = end_job(proc, tmp_path, 4)
        pytest.fail(f"the job did not end after a rank was killed:\n{out}")
    assert proc.returncode != 0, out
    import ngraph as ng  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    w1 = ng.variable(np.zeros((20, 64), np.float32), name="w1")
    w2 = ng.variable(np.zeros((64, 5), np.float32), name="w2")
    ck = ng.checkpoint.load(tmp_path / "last.ckpt", [w1, w2], strict=False)
    assert ck.metadata["step"] == 4
    assert np.all(np.isfinite(w1.get_value())) and np.any(w1.get_value() != 0)
