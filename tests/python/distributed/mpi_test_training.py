"""Data-parallel training: N ranks with per-rank batches of B/N give the gradients (and the
steps) of one process on the whole batch B. Run under mpirun (see conftest.py)."""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest

B, D, H, K = 16, 5, 6, 3  # batch, inputs, hidden units, outputs


def full_batch(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, D))
    t = rng.standard_normal((B, K))
    w1 = rng.standard_normal((D, H)) * 0.5
    w2 = rng.standard_normal((H, K)) * 0.5
    return x, t, w1, w2


def numpy_loss_and_grads(x, t, w1, w2):
    """mean over the batch of 0.5 * |tanh(x w1) w2 - t|^2, and its gradients."""
    h = np.tanh(x @ w1)
    e = h @ w2 - t
    n = x.shape[0]
    loss = 0.5 * np.sum(e * e) / n
    d_out = e / n
    d_w2 = h.T @ d_out
    d_w1 = x.T @ ((d_out @ w2.T) * (1 - h * h))
    return loss, [d_w1, d_w2]


def model_loss(x, t, w1, w2, batch):
    e = ng.tanh(x @ w1) @ w2 - t
    return ng.sum(e * e * 0.5) / float(batch)


def shard(a, r, n):
    return np.split(a, n, axis=0)[r]


def test_allreduce_mean_of_gradients_is_the_full_batch_gradient(world, comm):
    r, n = comm.rank, comm.size
    if B % n:
        pytest.skip(f"batch {B} does not split over {n} ranks")
    xs, ts, w1v, w2v = full_batch()
    b = B // n
    x = ng.parameter([b, D], np.float64, name="x")
    t = ng.parameter([b, K], np.float64, name="t")
    w1 = ng.parameter([D, H], np.float64, name="w1")
    w2 = ng.parameter([H, K], np.float64, name="w2")
    local = model_loss(x, t, w1, w2, b)
    grads = ng.gradients(local, [w1, w2])
    averaged = [ng.allreduce(g, "mean") for g in grads]
    global_loss = ng.allreduce(local, "mean")
    f = ng.runtime().computation([global_loss, *averaged], x, t, w1, w2)
    loss, g1, g2 = f(shard(xs, r, n), shard(ts, r, n), w1v, w2v)

    ref_loss, (ref1, ref2) = numpy_loss_and_grads(xs, ts, w1v, w2v)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-12)
    np.testing.assert_allclose(g1, ref1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g2, ref2, rtol=1e-10, atol=1e-12)

    # The same reference from a local ngraph graph on the full batch (no collectives).
    xf = ng.parameter([B, D], np.float64)
    tf = ng.parameter([B, K], np.float64)
    full = model_loss(xf, tf, w1, w2, B)
    lf, f1, f2 = ng.runtime().computation([full, *ng.gradients(full, [w1, w2])],
                                          xf, tf, w1, w2)(xs, ts, w1v, w2v)
    np.testing.assert_allclose(loss, lf, rtol=1e-12)
    np.testing.assert_allclose(g1, f1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g2, f2, rtol=1e-10, atol=1e-12)


def test_gradient_through_allreduce_mean(world, comm):
    """d/dw of allreduce(local loss, mean): each rank gets its own local gradient (the rule
    differentiates the sum of every rank's loss); averaging those is the full-batch one."""
    r, n = comm.rank, comm.size
    if B % n:
        pytest.skip(f"batch {B} does not split over {n} ranks")
    xs, ts, w1v, w2v = full_batch(1)
    b = B // n
    x = ng.parameter([b, D], np.float64)
    t = ng.parameter([b, K], np.float64)
    w1 = ng.parameter([D, H], np.float64)
    w2 = ng.parameter([H, K], np.float64)
    local = model_loss(x, t, w1, w2, b)
    shared = ng.allreduce(local, "mean")
    g1, g2 = ng.gradients(shared, [w1, w2])
    f = ng.runtime().computation([g1, g2, ng.allreduce(g1, "mean"), ng.allreduce(g2, "mean")],
                                 x, t, w1, w2)
    mine1, mine2, avg1, avg2 = f(shard(xs, r, n), shard(ts, r, n), w1v, w2v)
    _, (own1, own2) = numpy_loss_and_grads(shard(xs, r, n), shard(ts, r, n), w1v, w2v)
    np.testing.assert_allclose(mine1, own1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mine2, own2, rtol=1e-10, atol=1e-12)
    _, (ref1, ref2) = numpy_loss_and_grads(xs, ts, w1v, w2v)
    np.testing.assert_allclose(avg1, ref1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(avg2, ref2, rtol=1e-10, atol=1e-12)


def test_data_parallel_sgd_steps_match_one_process(world, comm):
    """Three SGD steps with variables updated in place: the weights stay identical on every
    rank and equal those of full-batch gradient descent in NumPy."""
    r, n = comm.rank, comm.size
    if B % n:
        pytest.skip(f"batch {B} does not split over {n} ranks")
    xs, ts, w1v, w2v = full_batch(2)
    b = B // n
    lr = 0.1
    # Rank 0's initial weights reach everyone through broadcast_distributed.
    start1 = w1v if r == 0 else np.zeros_like(w1v)
    start2 = w2v if r == 0 else np.zeros_like(w2v)
    p1 = ng.parameter([D, H], np.float64)
    p2 = ng.parameter([H, K], np.float64)
    init1, init2 = ng.runtime().computation(
        [ng.broadcast_distributed(p1, 0), ng.broadcast_distributed(p2, 0)], p1, p2)(start1, start2)
    w1 = ng.variable(init1, name="w1")
    w2 = ng.variable(init2, name="w2")
    x = ng.parameter([b, D], np.float64)
    t = ng.parameter([b, K], np.float64)
    loss = model_loss(x, t, w1, w2, b)
    grads = [ng.allreduce(g, "mean") for g in ng.gradients(loss, [w1, w2])]
    updates = ng.optimizers.SGD(lr).updates(loss, [w1, w2], grads=grads)
    step = ng.runtime().computation(ng.allreduce(loss, "mean"), x, t, updates=updates)

    ref1, ref2 = w1v.copy(), w2v.copy()
    for _ in range(3):
        got = step(shard(xs, r, n), shard(ts, r, n))[0]
        ref_loss, (d1, d2) = numpy_loss_and_grads(xs, ts, ref1, ref2)
        np.testing.assert_allclose(got, ref_loss, rtol=1e-12)
        ref1 -= lr * d1
        ref2 -= lr * d2
    np.testing.assert_allclose(w1.get_value(), ref1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w2.get_value(), ref2, rtol=1e-10, atol=1e-12)
    # Identical on every rank: the max over ranks equals this rank's value.
    mx = ng.parameter([D, H], np.float64)
    same = ng.runtime().computation(ng.allreduce(mx, "max"), mx)(w1.get_value())[0]
    np.testing.assert_array_equal(same, w1.get_value())


def numpy_conv(x, w):
    """3x3 convolution, stride 1, padding 1 (NCHW data, OIHW filters)."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, v = x.shape[2:]
    return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + v], w[:, :, i, j])
               for i in range(3) for j in range(3))


def numpy_conv_filter_grad(x, e):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, v = x.shape[2:]
    return np.stack([np.stack([np.einsum("nohw,nchw->oc", e, xp[:, :, i:i + h, j:j + v])
                               for j in range(3)], -1) for i in range(3)], -2)


def test_convolution_filters_kept_blocked_train_like_numpy(world, comm, monkeypatch):
    """Momentum SGD on a convolution's filters with rank-different data: the CPU backend keeps
    the filters and their momentum in the convolution's blocked layout between calls and
    averages the gradient in that layout, and after three steps the filters (read row-major)
    equal full-batch momentum SGD in NumPy on every rank."""
    r, n = comm.rank, comm.size
    batch, c, o, side = 4, 8, 16, 5
    if batch % n:
        pytest.skip(f"batch {batch} does not split over {n} ranks")
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((batch, c, side, side)).astype(np.float32)
    ts = rng.standard_normal((batch, o, side, side)).astype(np.float32)
    w0 = (rng.standard_normal((o, c, 3, 3)) * 0.2).astype(np.float32)
    b = batch // n
    lr, mu = 0.05, 0.9

    def build(keep):
        monkeypatch.setenv("NGRAPH_CPU_VARIABLE_LAYOUTS", "1" if keep else "0")
        w = ng.variable(w0, name="filters")
        x = ng.parameter([b, c, side, side], np.float32)
        t = ng.parameter([b, o, side, side], np.float32)
        e = ng.convolution(x, w, padding_below=[1, 1], padding_above=[1, 1]) - t
        loss = ng.sum(e * e * 0.5) / float(batch)
        grads = [ng.allreduce(g, "sum") for g in ng.gradients(loss, [w])]
        updates = ng.optimizers.SGD(lr, momentum=mu).updates(loss, [w], grads=grads)
        return w, ng.runtime().computation(ng.allreduce(loss, "sum"), x, t, updates=updates)

    w, step = build(True)
    _, plain_step = build(False)

    def reorders(s):
        return sum(name.startswith("CPUReorder") for name in s.executable.schedule)

    assert reorders(step) < reorders(plain_step)
    ref, vel = w0.astype(np.float64), np.zeros_like(w0, dtype=np.float64)
    for _ in range(3):
        got = step(shard(xs, r, n), shard(ts, r, n))[0]
        err = numpy_conv(xs, ref) - ts
        np.testing.assert_allclose(got, 0.5 * np.sum(err * err) / batch, rtol=1e-4)
        vel = mu * vel + numpy_conv_filter_grad(xs, err) / batch
        ref -= lr * vel
    np.testing.assert_allclose(w.get_value(), ref, rtol=1e-4, atol=1e-5)
