"""The oneCCL backend explicitly (whatever NGRAPH_DIST_BACKEND says): every collective on a
oneCCL communicator against NumPy on values that differ by rank, a training step that matches
the MPI backend's, a sub-communicator from comm.Split, and a rank that never arrives. Skipped
when ngraph was built without oneCCL. The other suites run on oneCCL too when
NGRAPH_DIST_BACKEND=ccl (tools/test.sh does both)."""

from __future__ import annotations

import time

import ngraph as ng
import numpy as np
import pytest
from mpi_test_collectives import check, everyone, prod_values, rank_values, reduce_np
from ngraph import _ngraph
from ngraph.distributed import DistributedError

DTYPES = [np.float32, np.float64, np.int32, np.int64]


@pytest.fixture(scope="module")
def ccl(MPI, comm):
    try:
        return ng.distributed.as_communicator(MPI.COMM_WORLD, backend="ccl")
    except DistributedError as e:
        if "built without the oneCCL backend" in str(e):
            pytest.skip("ngraph was built without oneCCL (-DNGRAPH_DISTRIBUTED='mpi;ccl')")
        raise


def test_it_is_a_oneccl_communicator(ccl, comm):
    assert "oneCCL" in ccl.name and (ccl.rank, ccl.size) == (comm.rank, comm.size)
    from ngraph import _ngraph_ccl

    assert _ngraph_ccl.library_version().startswith("oneCCL 2021.15")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_collective_against_numpy(world, ccl, dtype):
    r, n = ccl.rank, ccl.size
    ops = ["sum", "max", "min", "prod"] + (["mean"] if np.dtype(dtype).kind == "f" else [])
    x = ng.parameter([2 * n, 3], dtype, name="x")
    p = ng.parameter([2 * n, 3], dtype, name="p")
    outs = [ng.allreduce(p if op == "prod" else x, op, comm=ccl) for op in ops]
    outs += [ng.reduce_scatter(x, "sum", 0, comm=ccl), ng.allgather(x, 1, comm=ccl)]
    outs += [ng.broadcast_distributed(x, root, comm=ccl) for root in range(n)]
    f = ng.runtime().computation(outs, x, p)
    for step in range(3):  # the agreement check, then the verified (guarded) kernels
        xs = everyone(lambda k, s=step: rank_values((2 * n, 3), k + s, dtype), n)
        ps = everyone(lambda k: prod_values((2 * n, 3), k, dtype), n)
        got = f(xs[r], ps[r])
        for op, value in zip(ops, got):
            check(value, reduce_np(op, ps if op == "prod" else xs), dtype)
        k = len(ops)
        check(got[k], reduce_np("sum", xs)[2 * r:2 * r + 2], dtype)
        check(got[k + 1], np.concatenate(xs, axis=1).astype(np.float64), dtype)
        for root in range(n):
            check(got[k + 2 + root], xs[root].astype(np.float64), dtype)
    assert ccl.checks_passed >= 1


def test_training_step_matches_the_mpi_backend(world, comm, ccl):
    """The same data-parallel SGD steps on both backends: the same weights (float tolerance:
    the two libraries may add in another order)."""
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((6, 3)).astype(np.float32)
    xs = rng.standard_normal((4 * comm.size, 6)).astype(np.float32)
    ys = rng.standard_normal((4 * comm.size, 3)).astype(np.float32)
    mine = slice(4 * comm.rank, 4 * comm.rank + 4)
    finals = []
    for name, c in (("mpi", comm), ("ccl", ccl)):
        w = ng.variable(w0.copy(), name=f"w_{name}")
        x = ng.parameter([4, 6], np.float32)
        y = ng.parameter([4, 3], np.float32)
        loss = ng.mean((ng.dot(x, w) - y) ** 2)
        (g,) = ng.gradients(loss, [w])
        step = ng.runtime().computation(loss, x, y,
                                        updates=[(w, w - ng.allreduce(g, "mean", comm=c) * 0.1)])
        for _ in range(5):
            step(xs[mine], ys[mine])
        finals.append(w.get_value())
    np.testing.assert_allclose(finals[1], finals[0], rtol=1e-5, atol=1e-6)
    # And against NumPy: full-batch gradient descent on all ranks' data.
    w = w0.astype(np.float64)
    for _ in range(5):
        grads = [2 * xs[4 * k:4 * k + 4].T @ (xs[4 * k:4 * k + 4] @ w - ys[4 * k:4 * k + 4]) / 12
                 for k in range(comm.size)]
        w -= 0.1 * np.mean(grads, axis=0)
    np.testing.assert_allclose(finals[1], w, rtol=1e-4, atol=1e-5)


def test_sub_communicator_from_split(world, comm, ccl):
    r, n = comm.rank, comm.size
    sub = world.Split(color=r % 2, key=r)
    try:
        members = list(range(r % 2, n, 2))
        ours = ng.distributed.as_communicator(sub, backend="ccl")
        assert ours.size == len(members) and ours.rank == members.index(r)
        assert len(members) == 1 or "oneCCL" in ours.name
        x = ng.parameter([3], np.int64)
        f = ng.runtime().computation([ng.allreduce(x, "sum", comm=ours),
                                      ng.allreduce(x, "max", comm=ccl)], x)
        values = everyone(lambda k: rank_values((3,), k, np.int64), n)
        s, m = f(values[r])
        np.testing.assert_array_equal(s, np.sum([values[k] for k in members], axis=0))
        np.testing.assert_array_equal(m, np.max(values, axis=0))
    finally:
        sub.Free()


def test_send_recv_go_over_mpi(world, ccl):
    r, n = ccl.rank, ccl.size
    x = ng.parameter([5], np.float64)
    f = ng.runtime().computation([ng.send(x, (r + 1) % n, comm=ccl),
                                  ng.recv([5], np.float64, (r - 1) % n, comm=ccl)], x)
    _, got = f(np.full(5, float(r)))
    np.testing.assert_array_equal(got, np.full(5, float((r - 1) % n)))


def test_rank_that_never_arrives(world, comm):
    """The last rank skips an allreduce on a oneCCL communicator with a 2 s timeout: the
    others raise DistributedError naming the op, its bytes, their rank and oneCCL within a
    few seconds, and the communicator refuses later work at once. Then the late rank runs it,
    so oneCCL has nothing left in flight."""
    r, n = comm.rank, comm.size
    dup = world.Dup()
    try:
        try:
            c = ng.distributed.as_communicator(dup, backend="ccl")
        except DistributedError as e:
            if "built without" in str(e):
                pytest.skip("ngraph was built without oneCCL")
            raise
        c.timeout = 2
        x = ng.parameter([64], np.float32)
        f = ng.runtime().computation(ng.allreduce(x, comm=c, name="skipped") + x, x)
        data = np.ones(64, np.float32)
        mode = _ngraph.get_check_mode()
        _ngraph.set_check_mode("never")  # the AllReduce itself waits
        try:
            if r != n - 1:
                start = time.monotonic()
                with pytest.raises(DistributedError) as info:
                    f(data)
                waited = time.monotonic() - start
                msg = str(info.value)
                assert 1.9 <= waited < 10, (waited, msg)
                assert "[AllReduce] 64 x f32 (256 bytes, oneCCL)" in msg, msg
                assert f"rank {r} timed out after 2 s" in msg, msg
                with pytest.raises(DistributedError, match="unusable after an earlier failure"):
                    f(data)
            comm.barrier()
            if r == n - 1:
                np.testing.assert_array_equal(f(data)[0], np.full(64, n + 1.0, np.float32))
            comm.barrier()
        finally:
            _ngraph.set_check_mode(mode)
    finally:
        dup.Free()


def test_backend_argument_is_checked(world):
    with pytest.raises(ValueError, match="backend must be 'mpi' or 'ccl', got 'nccl'"):
        ng.distributed.as_communicator(world, backend="nccl")
