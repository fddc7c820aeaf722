"""LARS and LAMB in data-parallel training: the gradients passed with grads= are allreduced,
so every rank computes the same per-variable norms and trust ratios; the weights stay equal
on every rank and equal a 1-process NumPy run on the combined gradient. Run under mpirun
(see conftest.py)."""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest

B, D, K = 24, 6, 3  # global batch, inputs, outputs


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, D))
    t = rng.standard_normal((B, K))
    w = rng.standard_normal((D, K))
    bias = np.zeros(K)  # zero norm: LARS/LAMB must treat it as excluded anyway (rank 1)
    return x, t, w, bias


def numpy_grads(x, t, w, bias):
    """Gradients of 0.5 * |x w + bias - t|^2 / B over the whole batch."""
    e = x @ w + bias - t
    return [x.T @ e / B, e.sum(0) / B]


def numpy_lars(w, g, buf, lr, mom, wd, trust, eps, excluded):
    if excluded:
        d = lr * g
    else:
        wn, gn = np.linalg.norm(w), np.linalg.norm(g)
        local = trust * wn / (gn + wd * wn + eps) if wn > 0 and gn > 0 else 1.0
        d = lr * local * (g + wd * w)
    buf = mom * buf + d
    return w - buf, buf


def numpy_lamb(w, g, m, s, t, lr, b1, b2, eps, wd, excluded):
    m = b1 * m + (1 - b1) * g
    s = b2 * s + (1 - b2) * g * g
    r = (m / (1 - b1 ** t)) / (np.sqrt(s / (1 - b2 ** t)) + eps)
    ratio = 1.0
    if not excluded:
        r = r + wd * w
        wn, rn = np.linalg.norm(w), np.linalg.norm(r)
        ratio = wn / rn if wn > 0 and rn > 0 else 1.0
    return w - lr * ratio * r, m, s


@pytest.mark.parametrize("name", ["LARS", "LAMB"])
def test_layerwise_optimizer_over_ranks_matches_one_process(world, comm, name):
    r, n = comm.rank, comm.size
    if B % n:
        pytest.skip(f"batch {B} does not split over {n} ranks")
    xs, ts, w0, b0 = data(3)
    b = B // n
    W = ng.variable(w0.copy(), name="W")
    bias = ng.variable(b0.copy(), name="bias")
    x = ng.parameter([b, D], np.float64)
    t = ng.parameter([b, K], np.float64)
    e = ng.dot(x, W) + bias - t
    loss = ng.sum(e * e * 0.5) / float(B)  # the sum over ranks is the global mean
    grads = [ng.allreduce(g, "sum") for g in ng.gradients(loss, [W, bias])]
    lr = ng.schedules.warmup(ng.schedules.cosine(0.5, 6), 2)
    if name == "LARS":
        opt = ng.optimizers.LARS(lr, momentum=0.9, weight_decay=0.01, trust_coefficient=0.1)
    else:
        opt = ng.optimizers.LAMB(lr, beta1=0.9, beta2=0.99, weight_decay=0.01)
    step = ng.runtime().computation(ng.allreduce(loss, "sum"), x, t,
                                    updates=opt.updates(loss, [W, bias], grads=grads))

    ref = [w0.copy(), b0.copy()]
    state = [[np.zeros_like(v), np.zeros_like(v)] for v in ref]
    for k in range(5):
        # Each rank's shard of the batch: different data on every rank.
        step(np.split(xs, n)[r], np.split(ts, n)[r])
        for i, g in enumerate(numpy_grads(xs, ts, *ref)):
            excluded = ref[i].ndim <= 1
            if name == "LARS":
                ref[i], state[i][0] = numpy_lars(ref[i], g, state[i][0], lr(k), 0.9, 0.01, 0.1,
                                                 1e-9, excluded)
            else:
                ref[i], state[i][0], state[i][1] = numpy_lamb(
                    ref[i], g, state[i][0], state[i][1], k + 1, lr(k), 0.9, 0.99, 1e-6, 0.01,
                    excluded)
        np.testing.assert_allclose(W.get_value(), ref[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(bias.get_value(), ref[1], rtol=1e-10, atol=1e-12)
    assert opt.step.get_value() == 5
    # Identical on every rank, bit for bit: the max and the min over ranks equal this rank's.
    for v in (W, bias):
        p = ng.parameter(v.shape, np.float64)
        hi, lo = ng.runtime().computation([ng.allreduce(p, "max"), ng.allreduce(p, "min")],
                                          p)(v.get_value())
        np.testing.assert_array_equal(hi, v.get_value())
        np.testing.assert_array_equal(lo, v.get_value())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradient_accumulation_over_ranks_equals_the_global_batch(world, comm, dtype):
    """Each rank's shard split into 3 micro-batches: two steps that only add into the
    GradientAccumulator (no collective), then one that allreduces the sums and updates with
    LARS. Equals the NumPy LARS step on the whole global batch; the loss returned is the
    global batch's."""
    r, n = comm.rank, comm.size
    micro = 3
    if B % (n * micro):
        pytest.skip(f"batch {B} does not split into {micro} micro-batches over {n} ranks")
    xs, ts, w0, b0 = data(5)
    m = B // n // micro
    W = ng.variable(w0.astype(dtype), name="W")
    bias = ng.variable(b0.astype(dtype), name="bias")
    x = ng.parameter([m, D], dtype)
    t = ng.parameter([m, K], dtype)
    e = ng.dot(x, W) + bias - t
    loss = ng.sum(e * e * 0.5) / float(B)
    grads = ng.gradients(loss, [W, bias])
    acc = ng.optimizers.GradientAccumulator([W, bias, loss])
    add = ng.runtime().computation(loss, x, t, updates=acc.add([*grads, loss]))
    *total, total_loss = [ng.allreduce(v, "sum") for v in acc.total([*grads, loss])]
    lr = ng.schedules.warmup(ng.schedules.poly(0.5, 6), 2)
    opt = ng.optimizers.LARS(lr, momentum=0.9, weight_decay=0.01, trust_coefficient=0.1)
    final = ng.runtime().computation(
        total_loss, x, t, updates=opt.updates(loss, [W, bias], grads=total) + acc.reset())

    ref = [w0.copy(), b0.copy()]
    bufs = [np.zeros_like(v) for v in ref]
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=1e-6)
    for k in range(4):
        mine_x, mine_t = np.split(xs, n)[r].astype(dtype), np.split(ts, n)[r].astype(dtype)
        for j in range(micro - 1):
            add(mine_x[j * m:(j + 1) * m], mine_t[j * m:(j + 1) * m])
        (got_loss,) = final(mine_x[-m:], mine_t[-m:])
        e_ref = xs @ ref[0] + ref[1] - ts
        np.testing.assert_allclose(got_loss, 0.5 * (e_ref * e_ref).sum() / B, **tol)
        for i, g in enumerate(numpy_grads(xs, ts, *ref)):
            ref[i], bufs[i] = numpy_lars(ref[i], g, bufs[i], lr(k), 0.9, 0.01, 0.1, 1e-9,
                                         ref[i].ndim <= 1)
        np.testing.assert_allclose(W.get_value(), ref[0], **tol)
        np.testing.assert_allclose(bias.get_value(), ref[1], **tol)
        for buf in acc.buffers:  # cleared by the final step
            assert not np.any(buf.get_value())
