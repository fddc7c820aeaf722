"""Large-batch training: LARS and LAMB against NumPy step by step (zero-norm weights and
gradients included, f32 and f64), learning-rate schedules computed in the compiled step from
the optimizer's step count (every t, every optimizer, through a checkpoint), gradient
accumulation against one big batch, and label smoothing against PyTorch."""

from __future__ import annotations

import math

import ngraph as ng
import numpy as np
import pytest

RTOL = {np.float32: 2e-5, np.float64: 1e-12}

# name -> (shape, excluded by default); the gradients of each step come from GRADS.
SHAPES = {"W": (3, 4), "Z": (2, 3), "G": (4, 2), "b": (4,), "s": ()}


def problem(dtype, seed=0, steps=4):
    """Initial values and the gradients of `steps` steps. Z starts at zero (|w| = 0 on the
    first step); G gets zero gradients on steps 0 and 2 (|g| = 0); b starts at zero too."""
    rng = np.random.default_rng(seed)
    init = {n: rng.standard_normal(s).astype(dtype) for n, s in SHAPES.items()}
    init["Z"][...] = 0
    init["b"][...] = 0
    grads = []
    for t in range(steps):
        g = {n: rng.standard_normal(s).astype(dtype) for n, s in SHAPES.items()}
        if t in (0, 2):
            g["G"][...] = 0
        grads.append(g)
    return init, grads


def run(optimizer, dtype, init, grads):
    """Applies `optimizer` with the given gradients (fed as parameters) in one compiled
    step; returns the weights after each step and the optimizer."""
    variables = [ng.variable(init[n].copy(), name=n) for n in SHAPES]
    params = [ng.parameter(list(SHAPES[n]), dtype, name=f"g_{n}") for n in SHAPES]
    loss = ng.sum(variables[0])  # unused: the gradients are given
    updates = optimizer.updates(loss, variables, grads=params)
    step = ng.runtime().computation(optimizer.learning_rate_node(dtype), *params,
                                    updates=updates)
    history = []
    for g in grads:
        step(*[g[n] for n in SHAPES])
        history.append({v.name: v.get_value() for v in variables})
    for v in variables:
        assert v.get_value().dtype == dtype
    return history


def norm(x):
    return float(np.sqrt(np.sum(np.square(x, dtype=np.float64))))


def lars_reference(init, grads, lr, momentum, wd, trust, eps, excluded):
    w = {n: v.astype(np.float64) for n, v in init.items()}
    buf = {n: np.zeros_like(v) for n, v in w.items()}
    history = []
    for gs in grads:
        for n, g in gs.items():
            g = g.astype(np.float64)
            if excluded(n):
                d = lr * g
            else:
                wn, gn = norm(w[n]), norm(g)
                local = trust * wn / (gn + wd * wn + eps) if wn > 0 and gn > 0 else 1.0
                d = lr * local * (g + wd * w[n])
            buf[n] = momentum * buf[n] + d
            w[n] = w[n] - buf[n]
        history.append({n: v.copy() for n, v in w.items()})
    return history


def lamb_reference(init, grads, lr, b1, b2, eps, wd, excluded):
    w = {n: v.astype(np.float64) for n, v in init.items()}
    m = {n: np.zeros_like(v) for n, v in w.items()}
    s = {n: np.zeros_like(v) for n, v in w.items()}
    history = []
    for t, gs in enumerate(grads, start=1):
        for n, g in gs.items():
            g = g.astype(np.float64)
            m[n] = b1 * m[n] + (1 - b1) * g
            s[n] = b2 * s[n] + (1 - b2) * g * g
            r = (m[n] / (1 - b1 ** t)) / (np.sqrt(s[n] / (1 - b2 ** t)) + eps)
            if excluded(n):
                ratio = 1.0
            else:
                r = r + wd * w[n]
                wn, rn = norm(w[n]), norm(r)
                ratio = wn / rn if wn > 0 and rn > 0 else 1.0
            w[n] = w[n] - lr * ratio * r
        history.append({n: v.copy() for n, v in w.items()})
    return history


def by_rank(n):
    return len(SHAPES[n]) <= 1


def compare(got, want, dtype):
    for t, (g, w) in enumerate(zip(got, want)):
        for n in SHAPES:
            np.testing.assert_allclose(g[n], w[n], rtol=RTOL[dtype], atol=RTOL[dtype] * 1e-2,
                                       err_msg=f"{n} after step {t}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_lars_matches_numpy_step_by_step(dtype, wd):
    init, grads = problem(dtype)
    lr, mom, trust, eps = 0.5, 0.9, 0.1, 1e-9
    opt = ng.optimizers.LARS(lr, momentum=mom, weight_decay=wd, trust_coefficient=trust,
                             eps=eps)
    got = run(opt, dtype, init, grads)
    compare(got, lars_reference(init, grads, lr, mom, wd, trust, eps, by_rank), dtype)
    assert opt.step.get_value() == len(grads)
    names = sorted(v.name for v in opt.state_variables)
    assert names == sorted(["lars/step", *(f"{n}/momentum" for n in SHAPES)])
    # The zero-norm cases did what they should: Z moved by lr * g on step 0 (local 1).
    np.testing.assert_allclose(got[0]["Z"], -lr * grads[0]["Z"], rtol=RTOL[dtype])
    # G's zero gradient: only its weight decay (local 1) moved it on step 0.
    np.testing.assert_allclose(got[0]["G"], init["G"] * (1 - lr * wd), rtol=RTOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lars_without_momentum_and_exclude_override(dtype):
    init, grads = problem(dtype, seed=1)
    lr, trust, wd = 0.3, 0.05, 0.02
    # Exclude only W; the vectors and the scalar take the trust ratio and weight decay.
    opt = ng.optimizers.LARS(lr, momentum=0.0, weight_decay=wd, trust_coefficient=trust,
                             exclude=lambda v: v.name == "W")
    got = run(opt, dtype, init, grads)
    want = lars_reference(init, grads, lr, 0.0, wd, trust, 1e-9, lambda n: n == "W")
    compare(got, want, dtype)
    assert [v.name for v in opt.state_variables] == ["lars/step"]  # no momentum buffers


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_lamb_matches_numpy_step_by_step(dtype, wd):
    init, grads = problem(dtype, seed=2)
    lr, b1, b2, eps = 0.05, 0.9, 0.99, 1e-6
    opt = ng.optimizers.LAMB(lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd)
    got = run(opt, dtype, init, grads)
    compare(got, lamb_reference(init, grads, lr, b1, b2, eps, wd, by_rank), dtype)
    assert opt.step.get_value() == len(grads)
    # G's zero first gradient: m = v = 0, so r = weight_decay * w and the ratio |w| / |r| =
    # 1 / weight_decay: w -= lr * w. Without decay r = 0 (ratio 1): w stays.
    want_g = init["G"] * (1 - lr) if wd else init["G"]
    np.testing.assert_allclose(got[0]["G"], want_g, rtol=RTOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lamb_exclude_override(dtype):
    init, grads = problem(dtype, seed=3)
    opt = ng.optimizers.LAMB(0.02, weight_decay=0.1, exclude=lambda v: False)
    got = run(opt, dtype, init, grads)
    compare(got, lamb_reference(init, grads, 0.02, 0.9, 0.999, 1e-6, 0.1, lambda n: False),
            dtype)


def test_lars_and_lamb_argument_errors():
    with pytest.raises(ng.UserInputError, match="momentum"):
        ng.optimizers.LARS(0.1, momentum=-1)
    with pytest.raises(ng.UserInputError, match="trust_coefficient"):
        ng.optimizers.LARS(0.1, trust_coefficient=0)
    with pytest.raises(ng.UserInputError, match="weight_decay"):
        ng.optimizers.LARS(0.1, weight_decay=-1)
    with pytest.raises(ng.UserInputError, match="beta2"):
        ng.optimizers.LAMB(0.1, beta2=1.0)
    with pytest.raises(ng.NgraphTypeError, match="exclude"):
        ng.optimizers.LAMB(0.1, exclude=[1])
    w = ng.variable(np.zeros(3, np.int32), name="w_int")
    with pytest.raises(ng.NgraphTypeError, match="LAMB updates f32 and f64"):
        ng.optimizers.LAMB(0.1).updates(ng.sum(w), [w], grads=[ng.constant(np.ones(3,
                                                                                  np.int32))])


def test_lars_trains_a_small_model():
    """LARS with warm-up and polynomial decay reduces a least-squares loss 100-fold."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (x @ rng.standard_normal((8, 1))).astype(np.float32)
    W = ng.variable(rng.standard_normal((8, 1)).astype(np.float32), name="W")
    b = ng.variable(np.zeros(1, np.float32), name="b")
    X, Y = ng.parameter([64, 8], name="X"), ng.parameter([64, 1], name="Y")
    loss = ng.mean_squared_error(ng.dot(X, W) + b, Y)
    opt = ng.optimizers.LARS(ng.schedules.warmup(ng.schedules.poly(1.0, 60), 5),
                             trust_coefficient=0.05, weight_decay=1e-4)
    step = ng.runtime().computation(loss, X, Y, updates=opt.updates(loss, [W, b]))
    losses = [float(step(x, y)[0]) for _ in range(60)]
    assert losses[-1] < 0.01 * losses[0], losses


# ------------------------------------------------------------------------------ schedules


def numpy_schedules(t):
    """The reference formulas, t an integer."""
    return {
        "poly": (0.4 - 0.01) * (1 - min(t, 10) / 10) ** 2.0 + 0.01,
        "poly-linear": 0.4 * (1 - min(t, 7) / 7) ** 1.0,
        "cosine": 0.05 + (0.4 - 0.05) * (1 + math.cos(math.pi * min(t, 10) / 10)) / 2,
        "cosine-to-0": 0.4 * (1 + math.cos(math.pi * min(t, 9) / 9)) / 2,
        "step": 0.4 * 0.5 ** (t // 4),
        "warmup-cosine": (0.4 * (1 + math.cos(math.pi * min(t, 10) / 10)) / 2)
        * ((t + 1) / 3 if t < 3 else 1.0),
        "warmup-constant": 0.4 * ((t + 1) / 5 if t < 5 else 1.0),
        "warmup-step": 0.4 * 0.5 ** (t // 4) * ((t + 1) / 6 if t < 6 else 1.0),
        "per-epoch-cosine": 0.4 * (1 + math.cos(math.pi * min(t // 3, 4) / 4)) / 2,
        "warmup-per-epoch-poly": 0.4 * (1 - min(t // 2, 5) / 5) ** 2.0
        * ((t + 1) / 4 if t < 4 else 1.0),
    }


SCHEDULES = {
    "poly": lambda: ng.schedules.poly(0.4, 10, end=0.01),
    "poly-linear": lambda: ng.schedules.poly(0.4, 7, power=1.0),
    "cosine": lambda: ng.schedules.cosine(0.4, 10, end=0.05),
    "cosine-to-0": lambda: ng.schedules.cosine(0.4, 9),
    "step": lambda: ng.schedules.step(0.4, 4, 0.5),
    "warmup-cosine": lambda: ng.schedules.warmup(ng.schedules.cosine(0.4, 10), 3),
    "warmup-constant": lambda: ng.schedules.warmup(0.4, 5),
    "warmup-step": lambda: ng.schedules.warmup(ng.schedules.step(0.4, 4, 0.5), 6),
    "per-epoch-cosine": lambda: ng.schedules.per_epoch(ng.schedules.cosine(0.4, 4), 3),
    "warmup-per-epoch-poly": lambda: ng.schedules.warmup(
        ng.schedules.per_epoch(ng.schedules.poly(0.4, 5), 2), 4),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_values_for_every_step(name):
    """The learning rate of each step, in f32 and f64, and the update it makes (SGD with
    gradient 1 moves w by -lr), for t = 0 .. past the end of the schedule."""
    schedule = SCHEDULES[name]()
    opt = ng.optimizers.SGD(schedule)
    w32 = ng.variable(np.float32(0), name="w32")
    w64 = ng.variable(np.float64(0), name="w64")
    ones = [ng.constant(np.float32(1)), ng.constant(np.float64(1))]
    updates = opt.updates(ng.constant(np.float32(0)), [w32, w64], grads=ones)
    step = ng.runtime().computation(
        [opt.learning_rate_node(), opt.learning_rate_node(np.float64)], updates=updates)
    for t in range(16):
        want = numpy_schedules(t)[name]
        assert schedule(t) == pytest.approx(want, rel=1e-12, abs=1e-15)
        before = w64.get_value()
        lr32, lr64 = step()
        assert lr32.dtype == np.float32 and lr64.dtype == np.float64
        # f32: within a few roundings of lr0 (1 + cos cancels near the end of the cosine).
        np.testing.assert_allclose(lr32, want, rtol=1e-6, atol=1e-7, err_msg=f"t={t}")
        np.testing.assert_allclose(lr64, want, rtol=1e-12, atol=1e-15, err_msg=f"t={t}")
        np.testing.assert_allclose(before - w64.get_value(), want, rtol=1e-9, atol=1e-15)
    assert opt.step.get_value() == 16


OPTIMIZERS = {
    "SGD": lambda lr: ng.optimizers.SGD(lr),
    "SGD-momentum": lambda lr: ng.optimizers.SGD(lr, momentum=0.9, weight_decay=0.01),
    "Adam": lambda lr: ng.optimizers.Adam(lr),
    "AdamW": lambda lr: ng.optimizers.AdamW(lr),
    "LARS": lambda lr: ng.optimizers.LARS(lr, weight_decay=0.01, trust_coefficient=0.1),
    "LAMB": lambda lr: ng.optimizers.LAMB(lr, weight_decay=0.01),
}


def quadratic(seed=0):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((5, 4))
    W = ng.variable(rng.standard_normal((4, 3)), name="W")
    b = ng.variable(rng.standard_normal(3), name="b")
    e = ng.dot(ng.constant(m), W) + b
    return [W, b], ng.sum(e * e)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_takes_a_schedule(name):
    """A schedule as learning_rate gives the same steps as a learning-rate variable set from
    Python to the schedule's value before each call (the way train_mnist.py sets one)."""
    schedule = ng.schedules.warmup(ng.schedules.cosine(0.05, 6, end=0.001), 2)
    (W, b), loss = quadratic()
    opt = OPTIMIZERS[name](schedule)
    step = ng.runtime().computation(loss, updates=opt.updates(loss, [W, b]))
    (W2, b2), loss2 = quadratic()
    lr = ng.variable(np.float64(1), name="lr")
    opt2 = OPTIMIZERS[name](lr)
    step2 = ng.runtime().computation(loss2, updates=opt2.updates(loss2, [W2, b2]))
    for t in range(8):
        lr.set_value(np.float64(schedule(t)))
        step()
        step2()
        np.testing.assert_allclose(W.get_value(), W2.get_value(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b.get_value(), b2.get_value(), rtol=1e-12, atol=1e-14)
    assert opt.step.get_value() == opt2.step.get_value() == 8


@pytest.mark.parametrize("name", ["SGD-momentum", "LARS", "LAMB"])
def test_schedule_resumes_from_a_checkpoint(tmp_path, name):
    """Three steps, save, a new model and optimizer loaded from the file, three more steps:
    the weights and the learning rate equal those of six steps without the checkpoint."""
    def build():
        (W, b), loss = quadratic()
        opt = OPTIMIZERS[name](ng.schedules.warmup(ng.schedules.poly(0.05, 8), 3))
        step = ng.runtime().computation([loss, opt.learning_rate_node(np.float64)],
                                        updates=opt.updates(loss, [W, b]))
        return [W, b], opt, step

    variables, opt, step = build()
    lrs = [float(step()[1]) for _ in range(6)]
    variables_a, opt_a, step_a = build()
    for _ in range(3):
        step_a()
    path = tmp_path / "ck.ngc"
    ng.save(path, variables_a, opt_a)
    assert ng.load(path).optimizer[f"{type(opt).__name__.lower()}/step"] == 3
    variables_b, opt_b, step_b = build()
    ng.load(path, variables_b, opt_b)
    resumed = [float(step_b()[1]) for _ in range(3)]
    np.testing.assert_allclose(resumed, lrs[3:], rtol=1e-12)
    for v, w in zip(variables, variables_b):
        np.testing.assert_allclose(w.get_value(), v.get_value(), rtol=1e-12)
    assert opt_b.step.get_value() == 6


def test_plain_and_variable_learning_rates_are_unchanged():
    """A float stays a float (no node), a variable is used as it is."""
    opt = ng.optimizers.SGD(0.1)
    assert opt.learning_rate == 0.1
    lr = ng.variable(np.float32(0.1), name="lr_var")
    opt = ng.optimizers.SGD(lr)
    assert opt.learning_rate is lr
    w = ng.variable(np.float32(1), name="w_f32")
    ng.runtime().computation(w, updates=opt.updates(ng.sum(w), [w]))()
    assert w.get_value() == np.float32(0.9)
    lr.set_value(np.float32(0.5))
    ng.runtime().computation(w, updates=opt.updates(ng.sum(w), [w]))()
    assert w.get_value() == np.float32(0.9) - np.float32(0.5)


def test_schedule_argument_errors():
    with pytest.raises(ng.UserInputError, match="total_steps"):
        ng.schedules.poly(0.1, 0)
    with pytest.raises(ng.UserInputError, match="end"):
        ng.schedules.cosine(0.1, 10, end=0.2)
    with pytest.raises(ng.UserInputError, match="lr0"):
        ng.schedules.step(-1.0, 10, 0.5)
    with pytest.raises(ng.UserInputError, match="every"):
        ng.schedules.step(0.1, 2.5, 0.5)
    with pytest.raises(ng.UserInputError, match="steps"):
        ng.schedules.warmup(0.1, 0)
    with pytest.raises(ng.UserInputError, match="steps_per_epoch"):
        ng.schedules.per_epoch(ng.schedules.cosine(0.1, 10), 0)
    with pytest.raises(ng.NgraphTypeError, match=r"\[per_epoch\] schedule must be"):
        ng.schedules.per_epoch(0.1, 10)
    with pytest.raises(ng.UserInputError, match="step must be"):
        ng.schedules.cosine(0.1, 10)(-1)
    with pytest.raises(ng.NgraphTypeError, match="scalar float node"):
        ng.schedules.cosine(0.1, 10)(ng.constant(np.int32(3)))


# ------------------------------------------------------------------- gradient accumulation


def mlp_loss(params, x, y, examples):
    """A 2-layer MLP's summed cross-entropy over `x` divided by the examples of the whole
    update, so gradients summed over micro-batches are those of the update's mean loss."""
    h = ng.relu(ng.dot(x, params[0]) + params[1])
    logits = ng.dot(h, params[2]) + params[3]
    return ng.softmax_cross_entropy(logits, y, reduction="sum") / float(examples)


def mlp(dtype, seed=1):
    rng = np.random.default_rng(seed)
    shapes = {"W1": (7, 9), "b1": (9,), "W2": (9, 4), "b2": (4,)}
    return {n: (rng.standard_normal(s) * 0.5).astype(dtype) for n, s in shapes.items()}


ACCUMULATED = {
    "SGD-momentum": lambda: ng.optimizers.SGD(0.3, momentum=0.9, weight_decay=0.01),
    "LARS": lambda: ng.optimizers.LARS(ng.schedules.warmup(ng.schedules.poly(2.0, 6), 2),
                                       weight_decay=0.01, trust_coefficient=0.02),
    "LAMB": lambda: ng.optimizers.LAMB(0.05, weight_decay=0.01),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(ACCUMULATED))
def test_gradient_accumulation_equals_one_big_batch(name, dtype):
    """Micro-batches of 5, 3 and 4 examples (the last one in the final step) make the same
    updates and losses as one step on the 12 examples together, over 4 updates; the buffers
    are zero after every update."""
    sizes, total = [5, 3, 4], 12
    init = mlp(dtype)
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((4, total, 7)).astype(dtype)
    ys = rng.integers(0, 4, (4, total))
    rt = ng.runtime()

    big_params = [ng.variable(v.copy(), name=n) for n, v in init.items()]
    x, y = ng.parameter([total, 7], dtype), ng.parameter([total], np.int64)
    loss = mlp_loss(big_params, x, y, total)
    big = rt.computation(loss, x, y, updates=ACCUMULATED[name]().updates(loss, big_params))

    params = [ng.variable(v.copy(), name=n) for n, v in init.items()]
    acc = ng.optimizers.GradientAccumulator([*params, np.zeros((), dtype)])
    opt = ACCUMULATED[name]()
    steps = {}
    for i, m in enumerate(sizes):
        xm, ym = ng.parameter([m, 7], dtype), ng.parameter([m], np.int64)
        lm = mlp_loss(params, xm, ym, total)
        values = [*ng.gradients(lm, params), lm]
        if i < len(sizes) - 1:
            steps[m] = rt.computation(lm, xm, ym, updates=acc.add(values))
        else:
            *g, lsum = acc.total(values)
            steps[m] = rt.computation(lsum, xm, ym,
                                      updates=opt.updates(lsum, params, grads=g) + acc.reset())
    tol = RTOL[dtype]
    for u in range(4):
        (want,) = big(xs[u], ys[u])
        start = 0
        for m in sizes:
            (got,) = steps[m](xs[u, start:start + m], ys[u, start:start + m])
            start += m
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        for a, b in zip(params, big_params):
            np.testing.assert_allclose(a.get_value(), b.get_value(), rtol=tol * 10,
                                       atol=tol * 10, err_msg=f"{a.name} after update {u}")
        assert all(not np.any(b.get_value()) for b in acc.buffers)
    assert opt.step.get_value() == 4


def test_gradient_accumulator_errors():
    w = ng.variable(np.zeros((2, 3), np.float32), name="w")
    acc = ng.optimizers.GradientAccumulator([w])
    assert acc.buffers[0].name == "w/accumulated" and acc.buffers[0].shape == [2, 3]
    with pytest.raises(ng.UserInputError, match=r"\[GradientAccumulator.add\] got 2 values"):
        acc.add([w, w])
    with pytest.raises(ng.UserInputError, match=r"values\[0\] is float32 \[3\]; buffer "
                                                r"w/accumulated is float32 \[2, 3\]"):
        acc.total([ng.constant(np.zeros(3, np.float32))])
    with pytest.raises(ng.UserInputError, match="float64"):
        acc.add([ng.constant(np.zeros((2, 3)))])
    with pytest.raises(ng.NgraphTypeError, match=r"values\[0\] is a ndarray, not a node"):
        acc.add([np.zeros((2, 3), np.float32)])
    with pytest.raises(ng.NgraphTypeError, match=r"like\[1\] \(3\) has no shape"):
        ng.optimizers.GradientAccumulator([w, 3])


# ------------------------------------------------------------------------ label smoothing

try:
    import torch
except ImportError:  # the NumPy reference below stands in
    torch = None


def reference_cross_entropy(logits, labels, eps, reduction):
    """PyTorch's F.cross_entropy(label_smoothing=eps) when torch is importable, else NumPy."""
    if torch is not None:
        x = torch.tensor(logits, requires_grad=True)
        target = torch.tensor(labels)
        loss = torch.nn.functional.cross_entropy(x, target, reduction=reduction,
                                                 label_smoothing=eps)
        loss.backward(torch.ones_like(loss))
        return loss.detach().numpy(), x.grad.numpy()
    classes = logits.shape[1]
    shifted = logits - logits.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    target = np.eye(classes)[labels] if labels.ndim == 1 else labels
    target = (1 - eps) * target + eps / classes
    per = -(target * logp).sum(1)
    dlogits = np.exp(logp) * target.sum(1, keepdims=True) - target
    if reduction == "mean":
        return per.mean(), dlogits / len(per)
    if reduction == "sum":
        return per.sum(), dlogits
    return per, dlogits


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.35, 1.0])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("soft", [False, True])
def test_label_smoothing_matches_pytorch(dtype, eps, reduction, soft):
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((6, 5)) * 3).astype(dtype)
    if soft:
        labels = rng.random((6, 5)).astype(dtype)
        labels /= labels.sum(1, keepdims=True)
    else:
        labels = rng.integers(0, 5, 6)
    x = ng.parameter([6, 5], dtype, name="logits")
    loss = ng.softmax_cross_entropy(x, labels, reduction=reduction, label_smoothing=eps)
    (dx,) = ng.gradients(loss, [x])
    got, got_dx = ng.runtime().computation([loss, dx], x)(logits)
    want, want_dx = reference_cross_entropy(logits, labels, eps, reduction)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(got_dx, want_dx, rtol=tol, atol=tol)


def test_label_smoothing_errors():
    with pytest.raises(ng.UserInputError, match="label_smoothing must be in"):
        ng.softmax_cross_entropy(np.zeros((2, 3), np.float32), [0, 1], label_smoothing=1.5)
    with pytest.raises(ng.UserInputError, match="label_smoothing must be in"):
        ng.softmax_cross_entropy(np.zeros((2, 3), np.float32), [0, 1], label_smoothing=-0.1)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_step_count_keeps_updates_in_place(name):
    """The step count's update is scheduled before the variables' fused update kernels: the
    CPU backend updates variables in place (and shards the update over a node's ranks) only
    when those kernels end the step."""
    rt = ng.runtime()
    if rt.backend_name != "CPU":
        pytest.skip("the CPU backend's schedule")
    x = ng.parameter([8, 16], np.float32)
    W = ng.variable(np.full((16, 4), 0.1, np.float32), name="W")
    loss = ng.sum(ng.dot(x, W) ** 2)
    opt = OPTIMIZERS[name](ng.schedules.cosine(0.1, 10))
    step = rt.computation(loss, x, updates=opt.updates(loss, [W]))
    assert step.executable.schedule[-1].startswith("CPUFusedElementwise"), (
        step.executable.schedule)
