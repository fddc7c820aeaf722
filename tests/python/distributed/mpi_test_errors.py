"""Failures end in ng.distributed.DistributedError on every rank, naming the op, what differs
and the ranks, within the communicator's timeout: never a hang. Run under mpirun (see
conftest.py)."""

from __future__ import annotations

import time

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph

DistributedError = ng.distributed.DistributedError


def rank_list(ranks):
    """How messages name a group of ranks: "rank 1", "ranks 0,2"."""
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(str(k) for k in ranks)


def test_distributed_error_is_a_runtime_error():
    assert issubclass(DistributedError, RuntimeError)


def test_different_shapes(world, comm):
    r, n = comm.rank, comm.size
    shape = [4 + r % 2]
    x = ng.parameter(shape, np.float32)
    f = ng.runtime().computation(ng.allreduce(x, name="grads"), x)
    with pytest.raises(DistributedError) as info:
        f(np.ones(shape, np.float32))
    msg = str(info.value)
    assert msg.startswith("[AllReduce]"), msg
    assert "AllReduce f32{4} sum" in msg and "AllReduce f32{5} sum" in msg, msg
    assert rank_list(list(range(0, n, 2))) + " run" in msg, msg
    assert rank_list(list(range(1, n, 2))) + " run" in msg, msg
    assert "grads" in msg, msg  # the node's name
    # Nothing was left half-done: the ranks go on together.
    y = ng.parameter([2], np.float32)
    out = ng.runtime().computation(ng.allreduce(y), y)(np.ones(2, np.float32))[0]
    np.testing.assert_array_equal(out, [n, n])


def test_different_number_of_collectives(world, comm):
    r, n = comm.rank, comm.size
    x = ng.parameter([3], np.float64)
    results = [ng.allreduce(x)]
    if r == 0:
        results.append(ng.allgather(x))
    f = ng.runtime().computation(results, x)
    with pytest.raises(DistributedError) as info:
        f(np.ones(3))
    msg = str(info.value)
    assert msg.startswith("[AllGather]"), msg
    assert "collective #1" in msg, msg
    assert "rank 0 runs AllGather f64{3} axis=0" in msg, msg
    assert rank_list(list(range(1, n))) + " run" in msg and "(no collective)" in msg, msg
    # The extra collective on the last rank: the message still names the op.
    results = [ng.allreduce(x)]
    if r == n - 1:
        results.append(ng.broadcast_distributed(x, 0))
    with pytest.raises(DistributedError) as info:
        ng.runtime().computation(results, x)(np.ones(3))
    msg = str(info.value)
    assert msg.startswith("[BroadcastDistributed]"), msg
    assert f"rank {n - 1} runs BroadcastDistributed f64{{3}} root=0" in msg, msg


def test_different_reduce_op(world, comm):
    r = comm.rank
    x = ng.parameter([2], np.float32)
    f = ng.runtime().computation(ng.allreduce(x, "max" if r == 0 else "min"), x)
    with pytest.raises(DistributedError, match=r"AllReduce f32\{2\} max.*AllReduce f32\{2\} min"):
        f(np.ones(2, np.float32))


def test_comm_null_is_refused(MPI, world, comm):
    r = comm.rank
    sub = world.Split(MPI.UNDEFINED if r == 0 else 1, r)
    if r == 0:
        assert sub == MPI.COMM_NULL
        with pytest.raises(ValueError, match="COMM_NULL"):
            ng.distributed.as_communicator(sub)
    else:
        assert ng.distributed.as_communicator(sub).size == comm.size - 1
        sub.Free()


def test_timeout_when_a_rank_skips_a_collective(world, comm):
    """The last rank skips an allreduce on a dedicated communicator with a 2 s timeout: the
    others raise within a few seconds. Then the skipping rank runs it late, so the pending
    MPI operation completes and MPI can finalise cleanly."""
    r, n = comm.rank, comm.size
    skipper = n - 1
    dup = world.Dup()
    c = ng.distributed.as_communicator(dup)
    c.timeout = 2
    assert c.timeout == 2
    x = ng.parameter([4], np.float32)
    # The allreduce's output lives in the computation's own buffers (kept alive here), so
    # the late completion writes into memory that still exists.
    f = ng.runtime().computation(ng.allreduce(x, comm=c, name="skipped") + x, x)
    data = np.ones(4, np.float32)
    mode = _ngraph.get_check_mode()
    _ngraph.set_check_mode("never")  # the AllReduce itself waits (not the agreement check)
    try:
        if r != skipper:
            start = time.monotonic()
            with pytest.raises(DistributedError) as info:
                f(data)
            waited = time.monotonic() - start
            msg = str(info.value)
            assert 1.9 <= waited < 10, (waited, msg)
            assert "[AllReduce]" in msg and "timed out after 2 s" in msg, msg
            assert f"rank {r}" in msg, msg
            # Later calls fail at once, naming the first failure.
            start = time.monotonic()
            with pytest.raises(DistributedError, match="unusable after an earlier failure"):
                f(data)
            assert time.monotonic() - start < 1
        comm.barrier()
        if r == skipper:
            np.testing.assert_array_equal(f(data)[0], np.full(4, n + 1.0, np.float32))
        comm.barrier()  # the waiting ranks' MPI progresses here and completes the request
    finally:
        _ngraph.set_check_mode(mode)
        dup.Free()


def test_recv_timeout(world, comm):
    r, n = comm.rank, comm.size
    dup = world.Dup()
    try:
        c = ng.distributed.as_communicator(dup)
        c.timeout = 1
        if r == 0:
            y = ng.recv([3], np.int32, n - 1, tag=5, comm=c)
            f = ng.runtime().computation(y)
            start = time.monotonic()
            with pytest.raises(DistributedError, match=f"timed out.*from rank {n - 1}"):
                f()
            assert 0.9 <= time.monotonic() - start < 8
        comm.barrier()
    finally:
        dup.Free()


def test_recv_of_the_wrong_size(world, comm):
    r = comm.rank
    if r == 0:
        x = ng.parameter([5], np.float32)
        ng.runtime().computation([ng.send(x, 1, tag=4)], x)(np.arange(5, dtype=np.float32))
    elif r == 1:
        f = ng.runtime().computation(ng.recv([4], np.float32, 0, tag=4))
        with pytest.raises(DistributedError) as info:
            f()
        msg = str(info.value)
        assert "[Recv]" in msg, msg
        assert "expected 4 elements of f32 from rank 0" in msg, msg
        assert "5 elements" in msg, msg
    comm.barrier()
    # The wrong message was consumed: the next one arrives intact.
    if r == 0:
        x = ng.parameter([4], np.float32)
        ng.runtime().computation([ng.send(x, 1, tag=4)], x)(np.arange(4, dtype=np.float32))
    elif r == 1:
        got = ng.runtime().computation(ng.recv([4], np.float32, 0, tag=4))()[0]
        np.testing.assert_array_equal(got, np.arange(4, dtype=np.float32))
    comm.barrier()


def test_peer_out_of_range(world, comm):
    r, n = comm.rank, comm.size
    x = ng.parameter([2], np.float32)
    with pytest.raises(ValueError, match="out of range"):
        ng.send(x, n)
    with pytest.raises(ValueError, match="itself"):
        ng.recv([2], np.float32, r)
    with pytest.raises(ValueError, match="root"):
        ng.broadcast_distributed(x, n)


@pytest.mark.parametrize("timeout", [float("inf"), 1e10, 1e300])
def test_infinite_or_huge_timeout_waits_for_a_late_rank(world, comm, timeout):
    """A timeout of inf or one beyond the clock's range means "no limit": a rank that arrives
    1.5 s late is waited for (it used to overflow into a deadline in the past and end the job
    at once with "did not complete within -2147483648 s")."""
    dup = world.Dup()
    c = ng.distributed.as_communicator(dup)
    try:
        c.timeout = timeout
        assert c.timeout == timeout
        x = ng.parameter([3], np.float32)
        f = ng.runtime().computation(ng.allreduce(x, comm=c), x)
        if comm.rank == comm.size - 1:
            time.sleep(1.5)
        got = f(np.full(3, comm.rank + 1.0, np.float32))[0]
        np.testing.assert_array_equal(got, np.full(3, comm.size * (comm.size + 1) / 2, np.float32))
    finally:
        dup.Free()


def test_timeout_must_be_positive(world):
    dup = world.Dup()
    c = ng.distributed.as_communicator(dup)
    try:
        for bad in (0.0, -1.0, float("nan")):
            with pytest.raises(ValueError, match="timeout must be > 0"):
                c.timeout = bad
    finally:
        dup.Free()
