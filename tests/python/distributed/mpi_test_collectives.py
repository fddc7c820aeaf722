"""Every collective against NumPy on values that differ by rank (base + 10 * rank), a
sub-communicator from comm.Split, and interoperation with mpi4py. Run under mpirun (see
conftest.py)."""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest

DTYPES = [np.float32, np.float64, np.int32, np.int64]
OPS = ["sum", "mean", "max", "min", "prod"]


def rank_values(shape, rank, dtype):
    """Odd elements grow with the rank, even ones shrink; negative values included."""
    n = int(np.prod(shape))
    i = np.arange(n)
    sign = np.where(i % 2 == 1, 1, -1)
    return (i * 3 - 4 + 10 * rank * sign).reshape(shape).astype(dtype)


def prod_values(shape, rank, dtype):
    n = int(np.prod(shape))
    return (1 + (np.arange(n) + rank) % 3).reshape(shape).astype(dtype)


def everyone(make, size):
    return [make(k) for k in range(size)]


def reduce_np(op, arrays):
    stack = np.stack([a.astype(np.float64) for a in arrays])
    return {"sum": stack.sum(0), "mean": stack.mean(0), "max": stack.max(0),
            "min": stack.min(0), "prod": stack.prod(0)}[op]


def check(actual, expected, dtype):
    assert actual.dtype == np.dtype(dtype)
    assert actual.shape == expected.shape
    if np.issubdtype(dtype, np.integer):
        np.testing.assert_array_equal(actual, expected.astype(dtype))
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


def test_init_rank_and_size(MPI, comm, world):
    assert comm.rank == world.Get_rank()
    assert comm.size == world.Get_size()
    assert comm.size > 1, "run these tests with mpirun -np 2 or more"
    assert ng.distributed.rank() == world.Get_rank()
    assert ng.distributed.size() == world.Get_size()
    assert ng.distributed.is_initialized()
    default = ng.distributed.communicator()
    assert (default.rank, default.size, default.name) == (comm.rank, comm.size, comm.name)
    assert "MPI" in comm.name
    assert f"rank {comm.rank} of {comm.size}" in repr(comm)
    # Wrapping the same mpi4py communicator again gives the same ngraph communicator.
    assert ng.distributed.as_communicator(world) is comm
    ng.distributed.barrier()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", OPS)
def test_allreduce(world, comm, op, dtype):
    r, n = comm.rank, comm.size
    shape = (2, 3)
    if op == "mean" and np.issubdtype(dtype, np.integer):
        with pytest.raises(TypeError, match="mean"):
            ng.allreduce(ng.parameter(shape, dtype), op)
        return
    make = (lambda k: prod_values(shape, k, dtype)) if op == "prod" else (
        lambda k: rank_values(shape, k, dtype))
    x = ng.parameter(shape, dtype, name="x")
    f = ng.runtime().computation(ng.allreduce(x, op), x)
    for step in range(2):  # the compiled computation is reusable
        values = [v + step for v in everyone(make, n)]
        check(f(values[r])[0], reduce_np(op, values), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_broadcast_from_every_root(world, comm, dtype):
    r, n = comm.rank, comm.size
    x = ng.parameter([3, 2], dtype)
    f = ng.runtime().computation([ng.broadcast_distributed(x, root) for root in range(n)], x)
    values = everyone(lambda k: rank_values((3, 2), k, dtype), n)
    outs = f(values[r])
    for root in range(n):
        check(outs[root], values[root].astype(np.float64), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_allgather_axes(world, comm, dtype):
    r, n = comm.rank, comm.size
    x = ng.parameter([2, 3], dtype)
    y = ng.parameter([2, 2, 3], dtype)
    f = ng.runtime().computation([ng.allgather(x, 0), ng.allgather(x, 1), ng.allgather(y, 1)],
                                 x, y)
    xs = everyone(lambda k: rank_values((2, 3), k, dtype), n)
    ys = everyone(lambda k: rank_values((2, 2, 3), k + 1, dtype), n)
    a0, a1, b1 = f(xs[r], ys[r])
    check(a0, np.concatenate(xs, axis=0).astype(np.float64), dtype)
    check(a1, np.concatenate(xs, axis=1).astype(np.float64), dtype)
    check(b1, np.concatenate(ys, axis=1).astype(np.float64), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", OPS)
def test_reduce_scatter_axes(world, comm, op, dtype):
    r, n = comm.rank, comm.size
    if op == "mean" and np.issubdtype(dtype, np.integer):
        with pytest.raises(TypeError, match="mean"):
            ng.reduce_scatter(ng.parameter([n], dtype), op)
        return
    make = prod_values if op == "prod" else rank_values
    shapes = [((2 * n, 3), 0), ((3, 2 * n), 1), ((2, n, 2), 1)]
    params = [ng.parameter(s, dtype) for s, _ in shapes]
    f = ng.runtime().computation(
        [ng.reduce_scatter(p, op, axis) for p, (_, axis) in zip(params, shapes)], *params)
    per_shape = [everyone(lambda k, s=s: make(s, k, dtype), n) for s, _ in shapes]
    outs = f(*[vals[r] for vals in per_shape])
    for out, (_s, axis), vals in zip(outs, shapes, per_shape):
        full = reduce_np(op, vals)
        if np.issubdtype(dtype, np.integer):
            full = full.astype(dtype)
        check(out, np.split(full, n, axis=axis)[r], dtype)


def test_reduce_scatter_needs_divisible_axis(world, comm):
    n = comm.size
    with pytest.raises(ValueError, match="divide"):
        ng.reduce_scatter(ng.parameter([n + 1], np.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_send_recv_ring(world, comm, dtype):
    r, n = comm.rank, comm.size
    nxt, prev = (r + 1) % n, (r - 1) % n
    x = ng.parameter([5], dtype, name="x")
    s = ng.send(x, nxt, tag=3)
    y = ng.recv([5], dtype, prev, tag=3)
    f = ng.runtime().computation([s, y, y + x], x)
    for step in range(3):
        values = [v + step for v in everyone(lambda k: rank_values((5,), k, dtype), n)]
        sent, got, total = f(values[r])
        assert sent is None
        check(got, values[prev].astype(np.float64), dtype)
        check(total, (values[prev] + values[r]).astype(np.float64), dtype)


def test_send_recv_both_directions(world, comm):
    r, n = comm.rank, comm.size
    nxt, prev = (r + 1) % n, (r - 1) % n
    x = ng.parameter([4], np.float64)
    outs = ng.runtime().computation(
        [ng.send(x, nxt, tag=1), ng.send(x * 2.0, prev, tag=2),
         ng.recv([4], np.float64, prev, tag=1), ng.recv([4], np.float64, nxt, tag=2)], x
    )(np.full(4, float(r)))
    assert outs[0] is None and outs[1] is None
    np.testing.assert_array_equal(outs[2], np.full(4, float(prev)))
    np.testing.assert_array_equal(outs[3], np.full(4, 2.0 * nxt))


def test_large_send_of_a_computed_value(world, comm):
    """4 MiB (not copied eagerly by MPI) sent while the computation goes on: the value's
    buffer is not reused by later steps before the send completes."""
    r, n = comm.rank, comm.size
    count = 1 << 20
    x = ng.parameter([count], np.float32)
    y = x + x
    # Computed after the send started; the Reverse's output would take y's buffer if the
    # send did not hold it (and keeps elementwise fusion from folding the steps together).
    later = ng.reverse(y * x, [0]) * x
    f = ng.runtime().computation(
        [ng.send(y, (r + 1) % n, tag=11), ng.recv([count], np.float32, (r - 1) % n, tag=11),
         later], x)

    def data(k):
        return (k + 1 + np.arange(count) % 7).astype(np.float32)

    for _ in range(2):
        _, got, _ = f(data(r))
        np.testing.assert_array_equal(got, 2 * data((r - 1) % n))


def test_collectives_use_the_default_communicator(world, comm):
    r, n = comm.rank, comm.size
    x = ng.parameter([3], np.int64)
    node = ng.allreduce(x)  # no comm: the one init() set
    out = ng.runtime().computation(node, x)(np.array([1, r, 2]))[0]
    np.testing.assert_array_equal(out, [n, n * (n - 1) // 2, 2 * n])


def test_sub_communicator_from_split(world, comm):
    r, n = comm.rank, comm.size
    sub = world.Split(color=r % 2, key=r)
    try:
        members = list(range(r % 2, n, 2))
        ours = ng.distributed.as_communicator(sub)
        assert ours.size == len(members)
        assert ours.rank == members.index(r)
        x = ng.parameter([2, 2], np.float32)
        f = ng.runtime().computation(
            [ng.allreduce(x, "sum", comm=sub), ng.allgather(x, 0, comm=sub),
             ng.broadcast_distributed(x, 0, comm=sub), ng.allreduce(x, "sum")], x)
        values = everyone(lambda k: rank_values((2, 2), k, np.float32), n)
        group = [values[k] for k in members]
        s, g, b, w = f(values[r])
        np.testing.assert_allclose(s, np.sum(group, axis=0))
        np.testing.assert_allclose(g, np.concatenate(group, axis=0))
        np.testing.assert_allclose(b, group[0])
        np.testing.assert_allclose(w, np.sum(values, axis=0))
    finally:
        sub.Free()  # ngraph holds its own duplicate


def test_same_buffer_reduced_by_ngraph_and_mpi4py(MPI, world, comm):
    r = comm.rank
    buf = (np.arange(8, dtype=np.float64) * 0.5 + r) ** 2
    theirs = np.empty_like(buf)
    world.Allreduce(buf, theirs, op=MPI.SUM)
    x = ng.parameter([8], np.float64)
    ours = ng.runtime().computation(ng.allreduce(x, "sum"), x)(buf)[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    # And the other way: ngraph's result fed to mpi4py.
    mx = np.empty_like(buf)
    world.Allreduce(ours, mx, op=MPI.MAX)
    np.testing.assert_allclose(mx, ours)  # every rank holds the same value


def test_ngraph_traffic_does_not_touch_pending_mpi4py_messages(MPI, world, comm):
    """The user's messages in flight on COMM_WORLD (same tags, same peers) stay theirs while
    ngraph runs collectives and send/recv on its duplicate."""
    r, n = comm.rank, comm.size
    nxt, prev = (r + 1) % n, (r - 1) % n
    user_out = np.full(4, 1000.0 + r)
    user_in = np.zeros(4)
    recv_req = world.Irecv(user_in, source=prev, tag=0)
    send_req = world.Isend(user_out, dest=nxt, tag=0)
    x = ng.parameter([4], np.float64)
    f = ng.runtime().computation(
        [ng.send(x, nxt, tag=0), ng.recv([4], np.float64, prev, tag=0), ng.allreduce(x)], x)
    _, got, total = f(np.full(4, float(r)))
    np.testing.assert_array_equal(got, np.full(4, float(prev)))
    np.testing.assert_array_equal(total, np.full(4, float(n * (n - 1) // 2)))
    MPI.Request.Waitall([recv_req, send_req])
    np.testing.assert_array_equal(user_in, np.full(4, 1000.0 + prev))


def test_check_counts_and_modes(world, comm):
    x = ng.parameter([2], np.float32)
    f = ng.runtime().computation(ng.allreduce(x), x)
    before = comm.checks_passed
    f(np.ones(2, np.float32))
    f(np.ones(2, np.float32))
    assert comm.checks_passed == before + 2
