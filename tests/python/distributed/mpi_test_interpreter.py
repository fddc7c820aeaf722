"""Distributed computations on the INTERPRETER backend (the reference executor) give the
numbers of NumPy and of the CPU backend: an allreduce mean of rank-dependent values, a
broadcast, the other collectives, a Send/Recv ring, and one data-parallel training step of a
tiny model. Run under mpirun (see conftest.py)."""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest

BACKENDS = ["CPU", "INTERPRETER"]


def rank_values(shape, rank, dtype=np.float64):
    n = int(np.prod(shape))
    return (np.arange(n) * 0.5 - 1 + 3 * rank * np.where(np.arange(n) % 2, 1, -1)).reshape(
        shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_allreduce_mean_of_rank_dependent_values(world, comm, dtype):
    x = ng.parameter([2, 3], dtype)
    mine = rank_values((2, 3), comm.rank, dtype)
    expected = np.mean([rank_values((2, 3), r, np.float64) for r in range(comm.size)], axis=0)
    outs = {b: ng.runtime(b).computation(ng.allreduce(x, "mean"), x)(mine)[0]
            for b in BACKENDS}
    np.testing.assert_allclose(outs["INTERPRETER"], expected, rtol=1e-6)
    # Bitwise equality is not promised: MPI may sum in another order for each call form.
    np.testing.assert_allclose(outs["INTERPRETER"], outs["CPU"], rtol=1e-6)


def test_broadcast_and_collectives_match_cpu(world, comm):
    x = ng.parameter([comm.size * 2, 3], np.int64)
    mine = rank_values((comm.size * 2, 3), comm.rank, np.int64)
    nodes = [ng.broadcast_distributed(x, comm.size - 1), ng.allgather(x, 1),
             ng.reduce_scatter(x, "sum", 0), ng.allreduce(x, "max"), ng.allreduce(x, "prod")]
    everyone = [rank_values((comm.size * 2, 3), r, np.int64) for r in range(comm.size)]
    got = ng.runtime("INTERPRETER").computation(nodes, x)(mine)
    np.testing.assert_array_equal(got[0], everyone[-1])
    np.testing.assert_array_equal(got[1], np.concatenate(everyone, axis=1))
    total = np.sum(everyone, axis=0)
    np.testing.assert_array_equal(got[2], total[2 * comm.rank:2 * comm.rank + 2])
    np.testing.assert_array_equal(got[3], np.max(everyone, axis=0))
    np.testing.assert_array_equal(got[4], np.prod(everyone, axis=0))
    for a, b in zip(got, ng.runtime("CPU").computation(nodes, x)(mine)):
        np.testing.assert_array_equal(a, b)


def test_send_recv_ring(world, comm):
    """Every rank sends to the next and receives from the previous: no deadlock."""
    r, n = comm.rank, comm.size
    x = ng.parameter([3], np.float32)
    nodes = [ng.send(x * 2.0, (r + 1) % n), ng.recv([3], np.float32, (r - 1) % n)]
    out = ng.runtime("INTERPRETER").computation(nodes, x)(np.full(3, r, np.float32))
    assert out[0] is None
    np.testing.assert_array_equal(out[1], np.full(3, 2.0 * ((r - 1) % n), np.float32))


def test_disagreeing_ranks_fail_instead_of_hanging(world, comm):
    x = ng.parameter([2], np.float32)
    node = ng.allreduce(x, "sum") if comm.rank == 0 else ng.allreduce(x, "max")
    with pytest.raises(ng.distributed.DistributedError, match="ranks disagree"):
        ng.runtime("INTERPRETER").computation(node, x)(np.ones(2, np.float32))


def test_one_training_step_matches_cpu_and_numpy(world, comm):
    """A tiny two-layer model, one SGD step on each rank's shard with averaged gradients: the
    same weights on INTERPRETER as on CPU and as full-batch gradient descent in NumPy."""
    r, n = comm.rank, comm.size
    rng = np.random.default_rng(0)
    batch, d, h, k = 4 * n, 5, 4, 3
    xs, ts = rng.standard_normal((batch, d)), rng.standard_normal((batch, k))
    w1v, w2v = rng.standard_normal((d, h)) * 0.5, rng.standard_normal((h, k)) * 0.5
    lr = 0.1
    b = batch // n
    weights = {}
    for backend in BACKENDS:
        w1 = ng.variable(w1v, name="w1")
        w2 = ng.variable(w2v, name="w2")
        x, t = ng.parameter([b, d], np.float64), ng.parameter([b, k], np.float64)
        y = ng.dot(ng.tanh(ng.dot(x, w1)), w2)
        loss = ng.sum((y - t) * (y - t), [0, 1]) / float(b)
        grads = [ng.allreduce(g, "mean") for g in ng.gradients(loss, [w1, w2])]
        updates = ng.optimizers.SGD(lr).updates(loss, [w1, w2], grads=grads)
        step = ng.runtime(backend).computation(ng.allreduce(loss, "mean"), x, t, updates=updates)
        step(xs[r * b:(r + 1) * b], ts[r * b:(r + 1) * b])
        weights[backend] = (w1.get_value(), w2.get_value())
    # NumPy: full-batch gradient of the mean over ranks of each shard's mean squared error.
    hid = np.tanh(xs @ w1v)
    dy = 2 * (hid @ w2v - ts) / batch
    g2 = hid.T @ dy
    g1 = xs.T @ ((dy @ w2v.T) * (1 - hid ** 2))
    ref1, ref2 = w1v - lr * g1, w2v - lr * g2
    for backend in BACKENDS:
        np.testing.assert_allclose(weights[backend][0], ref1, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(weights[backend][1], ref2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights["INTERPRETER"][0], weights["CPU"][0], rtol=1e-12, atol=1e-14)


def test_broadcast_variables_on_the_interpreter(world, comm):
    v = ng.variable(np.full(3, float(comm.rank)), name="v")
    ng.distributed.broadcast_variables([v], root=1, comm=comm, backend_name="INTERPRETER")
    np.testing.assert_array_equal(v.get_value(), np.ones(3))
