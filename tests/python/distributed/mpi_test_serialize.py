"""Serialized graphs with collectives, read back on every rank with a communicator, compute
what the original graphs compute; a data-parallel training step trains the same after a round
trip. Run under mpirun (see conftest.py)."""

from __future__ import annotations

import json

import ngraph as ng
import numpy as np


def test_collectives_round_trip_with_a_communicator(world, comm):
    r, n = comm.rank, comm.size
    x = ng.parameter([2 * n, 3], np.float32, name="x")
    graph = [ng.allreduce(x, "mean"), ng.broadcast_distributed(x, n - 1), ng.allgather(x, 1),
             ng.reduce_scatter(x, "max", 0), ng.send(x * 2.0, (r + 1) % n, tag=4),
             ng.recv([2 * n, 3], np.float32, (r - 1) % n, tag=4)]
    text = ng.serialize(graph)
    ops = {op["op"]: op for op in json.loads(text)[0]["ops"]}
    assert ops["BroadcastDistributed"]["root"] == n - 1
    assert (ops["Send"]["dest_id"], ops["Recv"]["source_id"]) == ((r + 1) % n, (r - 1) % n)

    value = np.arange(6 * n, dtype=np.float32).reshape(2 * n, 3) + 100 * r
    expected = ng.runtime().computation(graph, x)(value)
    assert expected[4] is None  # the Send
    copy = ng.runtime().computation(ng.deserialize(text, communicator=world))(value)
    assert len(copy) == 5  # the Send is a sink of the Function: no place in its results
    for e, g in zip(expected[:4] + expected[5:], copy):
        np.testing.assert_array_equal(g, e)
    np.testing.assert_array_equal(copy[4], (value - 100 * r + 100 * ((r - 1) % n)) * 2)


def test_data_parallel_training_step_round_trips(world, comm):
    rng = np.random.default_rng(0)  # the same initial weights on every rank
    w = ng.variable(rng.standard_normal((4, 2)).astype(np.float32), name="w")
    x = ng.parameter([6, 4], np.float32, name="x")
    y = ng.parameter([6, 2], np.float32, name="y")
    loss = ng.sum((ng.dot(x, w) - y) ** 2.0)
    (g,) = ng.gradients(loss, [w])
    g = ng.allreduce(g, "mean", comm=comm)
    step = ng.runtime().computation(ng.allreduce(loss, "sum", comm=comm), x, y,
                                    updates=[(w, w - g * 0.01)])
    text = step.serialize()
    copy = ng.runtime().computation(ng.deserialize(text, communicator=comm))
    data = np.random.default_rng(10 + comm.rank)  # each rank its own shard
    for _ in range(3):
        xb = data.standard_normal((6, 4)).astype(np.float32)
        yb = data.standard_normal((6, 2)).astype(np.float32)
        assert copy(xb, yb)[0] == step(xb, yb)
    # The copy's weights moved as the original's did, on every rank.
    weights = [n for n in copy.function.get_ordered_ops() if isinstance(n, ng.Variable)]
    np.testing.assert_array_equal(weights[0].get_value(), w.get_value())
    everyone = world.allgather(w.get_value())
    for other in everyone:
        np.testing.assert_array_equal(other, everyone[0])
