"""Synchronized batch normalisation (ng.nn.BatchNorm2d(sync=True)) over the ranks: each
rank's output, its gradient w.r.t. its shard of the batch, the allreduced gradients of gamma
and beta, and the running statistics equal NumPy's batch norm over the combined batch, with
even and uneven shards. Run under mpirun (see conftest.py)."""

from __future__ import annotations

import contextlib

import ngraph as ng
import numpy as np
import pytest
from ngraph import _ngraph

C, H, W = 3, 4, 5
EPS, MOMENTUM = 1e-5, 0.1


def combined(sizes, seed=0):
    """The combined batch (channels with different offsets and scales), the gradient of the
    output fed in (loss = sum(y * dy)), gamma and beta, in float64."""
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    x = rng.standard_normal((n, C, H, W)) * np.array([1.0, 3.0, 0.5])[:, None, None] \
        + np.array([0.0, 5.0, -2.0])[:, None, None]
    dy = rng.standard_normal((n, C, H, W))
    gamma = np.array([1.5, 0.5, 2.0])
    beta = np.array([0.1, -0.2, 0.3])
    return x, dy, gamma, beta


def numpy_batch_norm(x, dy, gamma, beta):
    """y, dx, dgamma, dbeta and the mean and unbiased variance of batch norm over the whole
    batch (float64)."""
    axes = (0, 2, 3)
    m = x.size // x.shape[1]
    mu = x.mean(axes)
    var = x.var(axes)
    inv = 1.0 / np.sqrt(var + EPS)
    xhat = (x - mu[:, None, None]) * inv[:, None, None]
    y = gamma[:, None, None] * xhat + beta[:, None, None]
    dgamma = (dy * xhat).sum(axes)
    dbeta = dy.sum(axes)
    dx = (gamma * inv)[:, None, None] * (
        dy - dy.mean(axes)[:, None, None] - xhat * (dy * xhat).mean(axes)[:, None, None])
    return y, dx, dgamma, dbeta, mu, var * m / (m - 1)


def close(actual, expected):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * scale)


@contextlib.contextmanager
def shapes_may_differ(uneven):
    """Ranks whose batches differ in size build graphs that differ in shape: the agreement
    check hashes each graph's shapes (docs/distributed.md, "When ranks disagree"), so uneven
    batches run with check="never". The collectives themselves still agree ([C + 1] and [C]
    per BatchNorm2d, and the gradients' shapes)."""
    mode = _ngraph.get_check_mode()
    if uneven:
        _ngraph.set_check_mode("never")
    try:
        yield
    finally:
        _ngraph.set_check_mode(mode)


def same_on_every_rank(value):
    p = ng.parameter(value.shape, value.dtype)
    hi, lo = ng.runtime().computation([ng.allreduce(p, "max"), ng.allreduce(p, "min")],
                                      p)(value)
    np.testing.assert_array_equal(hi, value)
    np.testing.assert_array_equal(lo, value)


@pytest.mark.parametrize("uneven", [False, True], ids=["even", "uneven"])
def test_sync_batch_norm_matches_the_combined_batch(world, comm, uneven):
    r, size = comm.rank, comm.size
    sizes = [1 + k for k in range(size)] if uneven else [2] * size
    x, dy, gamma, beta = combined(sizes, seed=size)
    start = sum(sizes[:r])
    shard = slice(start, start + sizes[r])

    bn = ng.nn.BatchNorm2d(C, EPS, MOMENTUM, name="sbn", sync=True)
    bn.gamma.set_value(gamma.astype(np.float32))
    bn.beta.set_value(beta.astype(np.float32))
    xp = ng.parameter([sizes[r], C, H, W], name="x")
    dyp = ng.parameter([sizes[r], C, H, W], name="dy")
    y = bn(xp)
    loss = ng.sum(y * dyp)  # this rank's part; the gradient is of the sum over ranks
    gx, gg, gb = ng.gradients(loss, [xp, bn.gamma, bn.beta])
    step = ng.runtime().computation(
        [y, gx, ng.allreduce(gg, "sum"), ng.allreduce(gb, "sum")], xp, dyp,
        updates=bn.state_updates())
    with shapes_may_differ(uneven):
        ys, dxs, dgamma, dbeta = step(x[shard].astype(np.float32),
                                      dy[shard].astype(np.float32))

    ref_y, ref_dx, ref_dgamma, ref_dbeta, mu, unbiased = numpy_batch_norm(x, dy, gamma, beta)
    close(ys, ref_y[shard])
    close(dxs, ref_dx[shard])
    close(dgamma, ref_dgamma)
    close(dbeta, ref_dbeta)
    rm, rv = bn.running_mean.get_value(), bn.running_var.get_value()
    close(rm, MOMENTUM * mu)
    close(rv, (1 - MOMENTUM) + MOMENTUM * unbiased)
    same_on_every_rank(rm)
    same_on_every_rank(rv)


def test_sync_batch_norm_equals_one_process_ngraph_on_the_combined_batch(world, comm):
    """The same comparison against ngraph's own (unsynchronized) batch norm run over the
    whole batch on every rank, in a network: conv -> SyncBN -> relu."""
    r, size = comm.rank, comm.size
    sizes = [3 if k % 2 else 2 for k in range(size)]
    x, _, _, _ = combined(sizes, seed=7)
    x = x.astype(np.float32)
    start = sum(sizes[:r])
    shard = slice(start, start + sizes[r])

    def build(sync, n):
        conv = ng.nn.Conv2d(C, 4, 3, padding=1, bias=False, rng=np.random.default_rng(1))
        bn = ng.nn.BatchNorm2d(4, name="bn", sync=sync)
        xp = ng.parameter([n, C, H, W])
        out = ng.relu(bn(conv(xp)))
        loss = ng.sum(out * out) * 0.5
        grads = ng.gradients(loss, [conv.weight, bn.gamma, bn.beta])
        if sync:
            grads = [ng.allreduce(g, "sum") for g in grads]
        f = ng.runtime().computation([out, *grads], xp, updates=bn.state_updates())
        return f, bn

    f, bn = build(True, sizes[r])
    with shapes_may_differ(size > 1):
        got = f(x[shard])
    g, ref_bn = build(False, sum(sizes))
    ref = g(x)
    close(got[0], ref[0][shard])
    for a, b in zip(got[1:], ref[1:]):
        close(a, b)
    close(bn.running_mean.get_value(), ref_bn.running_mean.get_value())
    close(bn.running_var.get_value(), ref_bn.running_var.get_value())
