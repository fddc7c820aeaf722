"""Transformers across ranks: dropout draws another mask on every rank (and the same on CPU
and INTERPRETER within a rank), and a GPT's gradients averaged by the in-graph AllReduce over
per-rank shards of the batch equal the whole batch's gradient computed by one process. Run
under mpirun (see conftest.py)."""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest

B, T, V = 12, 6, 11  # windows, context, vocabulary


def test_dropout_masks_differ_by_rank_and_agree_across_backends(world, comm):
    x = ng.parameter([64, 32], name="x")
    ones = np.ones((64, 32), np.float32)
    masks = {}
    for backend in ("CPU", "INTERPRETER"):
        drop = ng.runtime(backend).computation(ng.dropout(x, 0.5, seed=17), x)
        masks[backend] = drop(ones)[0]
    np.testing.assert_array_equal(masks["CPU"], masks["INTERPRETER"])
    every = world.allgather(masks["CPU"])
    for other in range(comm.size):
        if other != comm.rank:
            assert (every[other] != every[comm.rank]).mean() > 0.3, (comm.rank, other)


def test_gpt_gradients_averaged_over_shards_are_the_full_batch_gradient(world, comm):
    r, n = comm.rank, comm.size
    if B % n:
        pytest.skip(f"{B} windows do not split over {n} ranks")
    model = ng.nn.gpt(V, T, 1, 2, 8, dropout=0.0, seed=5)
    params = model.parameters()
    rng = np.random.default_rng(3)
    xs = rng.integers(0, V, (B, T))
    ys = rng.integers(0, V, (B, T))

    def loss_of(batch):
        x = ng.parameter([batch, T], np.int64, name="x")
        y = ng.parameter([batch, T], np.int64, name="y")
        logits = ng.reshape(model(x), [batch * T, V])
        return ng.softmax_cross_entropy(logits, ng.reshape(y, [batch * T])), x, y

    local, x, y = loss_of(B // n)
    averaged = [ng.allreduce(g, "mean", comm=comm) for g in ng.gradients(local, params)]
    step = ng.runtime().computation(averaged, x, y)
    mine = slice(r * B // n, (r + 1) * B // n)
    got = step(xs[mine], ys[mine])
    whole, xw, yw = loss_of(B)
    expected = ng.runtime().computation(ng.gradients(whole, params), xw, yw)(xs, ys)
    for p, g, e in zip(params, got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6, err_msg=p.name)
    # The shards differ, so each rank's own gradient differs from the average.
    own = ng.runtime().computation(ng.gradients(local, params)[0], x, y)(xs[mine], ys[mine])[0]
    assert not np.allclose(own, expected[0])
