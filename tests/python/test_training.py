"""Training: an MLP's gradients against NumPy, variables and updates, optimizers against
NumPy reimplementations, losses, and MNIST training to a test accuracy.

The MNIST tests use the 10k MNIST test digits of the shared data directory
(``../shared/data/mnist`` from the repository root): the first 8000 for training, the last
2000 for testing. They are skipped when the directory is absent.
"""

from __future__ import annotations

import os
import time

import ngraph as ng
import numpy as np
import pytest

RUNTIME = ng.runtime(backend_name="CPU")
F32, F64 = np.float32, np.float64

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MNIST_DIR = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data", "mnist"))


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(z, axis=-1):
    s = z - z.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


# ------------------------------------------------------- (a) MLP gradients vs NumPy


def numpy_mlp(x, labels, w1, b1, w2, b2):
    """Forward and backward of relu(x w1 + b1) w2 + b2 with mean softmax cross-entropy."""
    n = x.shape[0]
    h_pre = x @ w1 + b1
    h = np.maximum(h_pre, 0)
    logits = h @ w2 + b2
    loss = -np.mean(log_softmax(logits)[np.arange(n), labels])
    d_logits = (softmax(logits) - np.eye(logits.shape[1])[labels]) / n
    d_w2 = h.T @ d_logits
    d_b2 = d_logits.sum(0)
    d_h = d_logits @ w2.T
    d_pre = d_h * (h_pre > 0)
    d_w1 = x.T @ d_pre
    d_b1 = d_pre.sum(0)
    return loss, [d_w1, d_b1, d_w2, d_b2]


def ng_mlp(x, w1, b1, w2, b2):
    return ng.relu(x @ w1 + b1) @ w2 + b2


def mlp_weights(rng, sizes, dtype):
    out = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)
        b = rng.standard_normal(fan_out) * 0.1
        out += [w.astype(dtype), b.astype(dtype)]
    return out


def test_mlp_gradients_match_numpy():
    rng = np.random.default_rng(0)
    n = 16
    xs = rng.standard_normal((n, 784))
    labels = rng.integers(0, 10, n)
    values = mlp_weights(rng, [784, 64, 10], F64)
    x = ng.parameter([n, 784], F64, name="x")
    y = ng.parameter([n], np.int64, name="labels")
    names = ["w1", "b1", "w2", "b2"]
    params = [ng.parameter(v.shape, F64, name=nm) for v, nm in zip(values, names)]
    loss = ng.softmax_cross_entropy(ng_mlp(x, *params), y)
    grads = ng.gradients(loss, params)
    out = RUNTIME.computation([loss] + grads, x, y, *params)(xs, labels, *values)
    expected_loss, expected_grads = numpy_mlp(xs, labels, *values)
    np.testing.assert_allclose(out[0], expected_loss, rtol=1e-12)
    for name, got, want in zip(["w1", "b1", "w2", "b2"], out[1:], expected_grads):
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=name)
    # The NumPy reference itself, against finite differences at a few coordinates.
    eps = 1e-6
    for k, idx in [(0, (3, 5)), (1, (7,)), (2, (10, 2)), (3, (4,))]:
        plus = [v.copy() for v in values]
        minus = [v.copy() for v in values]
        plus[k][idx] += eps
        minus[k][idx] -= eps
        fd = (numpy_mlp(xs, labels, *plus)[0] - numpy_mlp(xs, labels, *minus)[0]) / (2 * eps)
        np.testing.assert_allclose(expected_grads[k][idx], fd, rtol=1e-5, atol=1e-9)


def test_mlp_gradients_with_variables_match_parameters():
    """The same MLP with its weights in variables gives the same gradients."""
    rng = np.random.default_rng(1)
    n = 8
    xs = rng.standard_normal((n, 784))
    labels = rng.integers(0, 10, n)
    values = mlp_weights(rng, [784, 64, 10], F64)
    x = ng.parameter([n, 784], F64, name="x")
    y = ng.parameter([n], np.int64, name="labels")
    variables = [ng.variable(v, name=nm) for v, nm in zip(values, ["w1", "b1", "w2", "b2"])]
    loss = ng.softmax_cross_entropy(ng_mlp(x, *variables), y)
    out = RUNTIME.computation([loss] + ng.gradients(loss, variables), x, y)(xs, labels)
    expected_loss, expected_grads = numpy_mlp(xs, labels, *values)
    np.testing.assert_allclose(out[0], expected_loss, rtol=1e-12)
    for got, want in zip(out[1:], expected_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------- (b) variables


def test_variable_value_round_trip():
    value = np.arange(6, dtype=F32).reshape(2, 3)
    v = ng.variable(value, name="w")
    assert isinstance(v, ng.Variable) and isinstance(v, ng.Node)
    assert v.get_type_name() == "Variable"
    assert v.shape == [2, 3] and v.dtype == F32 and v.name == "w"
    got = v.get_value()
    np.testing.assert_array_equal(got, value)
    assert got.dtype == F32
    got[0, 0] = 100  # a copy
    np.testing.assert_array_equal(v.get_value(), value)
    value[0, 1] = 50  # the initial value was copied too
    assert v.get_value()[0, 1] == 1
    v.set_value(np.ones((2, 3), F32) * 7)
    np.testing.assert_array_equal(v.get_value(), np.full((2, 3), 7, F32))
    v.set_value([[1, 2, 3], [4, 5, 6]])  # lists and safe conversions are accepted
    np.testing.assert_array_equal(v.get_value(), [[1, 2, 3], [4, 5, 6]])
    v.set_value(np.arange(6, dtype=F64).reshape(2, 3))  # float64 -> float32: same kind
    assert v.get_value().dtype == F32


def test_variable_dtypes_and_scalars():
    assert ng.variable(1.5).dtype == F32  # Python floats are float32, as for parameters
    assert ng.variable([1.0, 2.0]).dtype == F32
    assert ng.variable(np.float64(1.5)).dtype == F64  # NumPy scalars keep their dtype
    assert ng.variable(np.float32(1.5)).dtype == F32
    assert ng.variable(np.zeros(2, F64)).dtype == F64
    assert ng.variable(np.zeros(2), dtype=F32).dtype == F32
    assert ng.variable(np.array([1, 2], np.int64)).dtype == np.int64
    s = ng.variable(np.array(2.5, F64), name="s")
    assert s.shape == []
    s.set_value(4.0)
    assert s.get_value() == 4.0 and s.get_value().shape == ()


def test_set_value_with_a_wrong_shape_names_the_variable_and_both_shapes():
    v = ng.variable(np.zeros((2, 3), F32), name="weights")
    with pytest.raises(ValueError) as info:
        v.set_value(np.zeros((3, 2), F32))
    message = str(info.value)
    assert "weights" in message
    assert "2,3" in message and "3,2" in message
    np.testing.assert_array_equal(v.get_value(), np.zeros((2, 3)))  # unchanged


@pytest.mark.parametrize("var_dtype,value", [
    (np.int32, np.array([1.5, 2.0, 3.0])),
    (np.int64, np.array([1.0, 2.0, 3.0], F32)),
    (F32, np.array([1 + 2j, 0, 0])),
    (np.bool_, np.array([1.0, 0.0, 1.0])),
    (F64, np.array(["a", "b", "c"])),
])
def test_set_value_with_an_unsafe_dtype_is_a_type_error(var_dtype, value):
    v = ng.variable(np.zeros(3, var_dtype), name="state")
    with pytest.raises(TypeError, match="state"):
        v.set_value(value)
    np.testing.assert_array_equal(v.get_value(), np.zeros(3, var_dtype))


def test_update_with_a_wrong_shape_raises_at_computation_time():
    v = ng.variable(np.zeros((2, 3), F32), name="kernel")
    x = ng.parameter([3, 2], F32, name="x")
    with pytest.raises(ValueError) as info:
        RUNTIME.computation(ng.sum(v), x, updates=[(v, x)])
    message = str(info.value)
    assert "kernel" in message and "2,3" in message and "3,2" in message
    with pytest.raises(TypeError, match="kernel"):
        RUNTIME.computation(ng.sum(v), x, updates=[(v, ng.convert(ng.reshape(x, [2, 3]),
                                                                  np.int32))])


def test_update_pairs_must_be_variable_value_pairs():
    v = ng.variable(np.zeros(2, F32), name="v")
    x = ng.parameter([2], F32, name="x")
    with pytest.raises(TypeError, match="not a variable"):
        RUNTIME.computation(ng.sum(x), x, updates=[(x, v)])
    with pytest.raises(TypeError, match="pair"):
        RUNTIME.computation(ng.sum(x), x, updates=[v])


def test_updates_apply_after_each_call_and_reads_see_old_values():
    a = ng.variable(np.array([1.0, 2.0]), name="a")
    b = ng.variable(np.array([10.0, 20.0]), name="b")
    # Results read both variables; the updates swap them.
    comp = RUNTIME.computation([a + 0.0, b * 1.0, a - b], updates=[(a, b), (b, a)])
    out = comp()
    np.testing.assert_array_equal(out[0], [1, 2])
    np.testing.assert_array_equal(out[1], [10, 20])
    np.testing.assert_array_equal(out[2], [-9, -18])
    np.testing.assert_array_equal(a.get_value(), [10, 20])
    np.testing.assert_array_equal(b.get_value(), [1, 2])
    out = comp()
    np.testing.assert_array_equal(out[0], [10, 20])
    np.testing.assert_array_equal(a.get_value(), [1, 2])
    np.testing.assert_array_equal(b.get_value(), [10, 20])
    for _ in range(3):
        comp()
    np.testing.assert_array_equal(a.get_value(), [10, 20])
    np.testing.assert_array_equal(b.get_value(), [1, 2])


def test_swap_of_computed_updates_sees_old_values():
    a = ng.variable(np.array([1.0, 2.0]), name="a")
    b = ng.variable(np.array([3.0, 5.0]), name="b")
    # a <- a + b and b <- a * b both read the values from before the call.
    comp = RUNTIME.computation(ng.sum(a), updates=[(a, a + b), (b, a * b)])
    assert comp()[0] == 3.0
    np.testing.assert_array_equal(a.get_value(), [4, 7])
    np.testing.assert_array_equal(b.get_value(), [3, 10])
    assert comp()[0] == 11.0
    np.testing.assert_array_equal(a.get_value(), [7, 17])
    np.testing.assert_array_equal(b.get_value(), [12, 70])


def test_results_that_are_variables_or_updates_are_copies():
    v = ng.variable(np.array([1.0, 2.0]), name="v")
    new_v = v * 2.0
    comp = RUNTIME.computation([v, new_v], updates=[(v, new_v)])
    first = comp()
    np.testing.assert_array_equal(first[0], [1, 2])  # the value before the call
    np.testing.assert_array_equal(first[1], [2, 4])  # the update, also a result
    second = comp()
    np.testing.assert_array_equal(second[0], [2, 4])
    np.testing.assert_array_equal(second[1], [4, 8])
    # Earlier results are not overwritten by later calls or updates.
    np.testing.assert_array_equal(first[0], [1, 2])
    np.testing.assert_array_equal(first[1], [2, 4])
    np.testing.assert_array_equal(v.get_value(), [4, 8])


def test_update_from_a_parameter_or_the_variable_itself():
    w = ng.variable(np.array([1.0, 1.0]), name="w")
    x = ng.parameter([2], F64, name="x")
    load = RUNTIME.computation(ng.sum(x), x, updates=[(w, x)])
    load(np.array([5.0, 6.0]))
    np.testing.assert_array_equal(w.get_value(), [5, 6])
    keep = RUNTIME.computation(ng.sum(w), updates=[(w, w)])
    assert keep()[0] == 11
    np.testing.assert_array_equal(w.get_value(), [5, 6])
    const = RUNTIME.computation(ng.sum(w), updates=[(w, np.array([7.0, 8.0]))])
    assert const()[0] == 11
    np.testing.assert_array_equal(w.get_value(), [7, 8])


def test_a_variable_updated_twice_is_an_error():
    v = ng.variable(np.array([1.0]), name="twice")
    with pytest.raises(ValueError, match="twice"):
        RUNTIME.computation(v + 0.0, updates=[(v, v + 1.0), (v, v + 2.0)])


def test_counter_and_set_value_between_calls():
    count = ng.variable(np.array(0, np.int64), name="count")
    step = RUNTIME.computation(count + 0, updates=[(count, count + 1)])
    assert [int(step()[0]) for _ in range(4)] == [0, 1, 2, 3]
    assert count.get_value() == 4
    count.set_value(100)
    assert int(step()[0]) == 100
    assert count.get_value() == 101


def test_variable_shared_by_two_computations():
    v = ng.variable(np.array([1.0]), name="v")
    double = RUNTIME.computation(v + 0.0, updates=[(v, v * 2.0)])
    add_one = RUNTIME.computation(v + 0.0, updates=[(v, v + 1.0)])
    double()
    add_one()
    double()
    np.testing.assert_array_equal(v.get_value(), [6.0])
    np.testing.assert_array_equal(add_one()[0], [6.0])
    np.testing.assert_array_equal(v.get_value(), [7.0])


def test_training_step_updates_weights_without_host_round_trip():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((32, 3))
    true_w = np.array([1.5, -2.0, 0.5])
    ys = xs @ true_w
    w = ng.variable(np.zeros(3), name="w")
    x = ng.parameter([32, 3], F64, name="x")
    y = ng.parameter([32], F64, name="y")
    loss = ng.mean_squared_error(ng.dot(x, w), y)
    (g,) = ng.gradients(loss, [w])
    step = RUNTIME.computation(loss, x, y, updates=[(w, w - g * 0.1)])
    # The weights are no argument of the call: they stay in the runtime.
    assert [p.name for p in step.parameters] == ["x", "y"]
    first = step(xs, ys)[0]
    assert isinstance(first, np.ndarray) and first.shape == ()
    np.testing.assert_allclose(first, np.mean(ys ** 2))
    # One step of gradient descent, as NumPy computes it.
    expected = -0.1 * (2 / 32) * xs.T @ (0 - ys)
    np.testing.assert_allclose(w.get_value(), expected, rtol=1e-12)
    losses = [float(step(xs, ys)[0]) for _ in range(200)]
    assert losses[-1] < 1e-6 < first
    assert all(b <= a + 1e-15 for a, b in zip(losses, losses[1:]))
    np.testing.assert_allclose(w.get_value(), true_w, atol=1e-3)


def test_failing_call_leaves_variables_unchanged():
    v = ng.variable(np.array([1.0, 2.0]), name="v")
    count = ng.variable(np.array(0, np.int32), name="count")
    a = ng.parameter([2], np.int32, name="a")
    d = ng.parameter([2], np.int32, name="d")
    q = a / d  # integer division: division by zero raises at run time
    comp = RUNTIME.computation(
        ng.sum(v), a, d,
        updates=[(v, v + ng.convert(q, F64)), (count, count + 1)],
    )
    comp(np.array([4, 6], np.int32), np.array([2, 3], np.int32))
    np.testing.assert_array_equal(v.get_value(), [3.0, 4.0])
    assert count.get_value() == 1
    for _ in range(2):
        with pytest.raises(ValueError, match="division by zero"):
            comp(np.array([4, 6], np.int32), np.array([2, 0], np.int32))
        np.testing.assert_array_equal(v.get_value(), [3.0, 4.0])
        assert count.get_value() == 1
    comp(np.array([4, 6], np.int32), np.array([1, 1], np.int32))
    np.testing.assert_array_equal(v.get_value(), [7.0, 10.0])
    assert count.get_value() == 2


def test_failing_call_in_a_result_leaves_variables_unchanged():
    v = ng.variable(np.array([1.0, 2.0]), name="v")
    a = ng.parameter([2], np.int64, name="a")
    d = ng.parameter([2], np.int64, name="d")
    comp = RUNTIME.computation([a / d], a, d, updates=[(v, v * 3.0)])
    with pytest.raises(ValueError, match="division by zero"):
        comp(np.array([1, 2]), np.array([0, 1]))
    np.testing.assert_array_equal(v.get_value(), [1.0, 2.0])
    comp(np.array([1, 2]), np.array([1, 1]))
    np.testing.assert_array_equal(v.get_value(), [3.0, 6.0])


# ------------------------------------------------------------------ (c) optimizers


def quadratic_problem():
    """loss(w) = sum((m w - t)^2) + sum(w^4) / 4 over a float64 w of shape [2, 3]."""
    rng = np.random.default_rng(5)
    m = rng.standard_normal((4, 2))
    t = rng.standard_normal((4, 3))
    w0 = rng.standard_normal((2, 3))

    def grad(w):
        return 2 * m.T @ (m @ w - t) + w ** 3

    w = ng.variable(w0.copy(), name="w")
    diff = ng.constant(m) @ w - ng.constant(t)
    loss = ng.sum(diff * diff) + ng.sum(w * w * w * w) / 4.0
    return w, w0, loss, grad


def run_steps(optimizer, steps=3):
    w, w0, loss, grad = quadratic_problem()
    updates = optimizer.updates(loss, [w])
    step = RUNTIME.computation(loss, updates=updates)
    history = []
    for _ in range(steps):
        step()
        history.append(w.get_value())
    return w0, grad, history


@pytest.mark.parametrize("lr", [0.01, 0.05])
def test_sgd_matches_numpy(lr):
    w0, grad, history = run_steps(ng.optimizers.SGD(learning_rate=lr))
    w = w0.copy()
    for got in history:
        w = w - lr * grad(w)
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_matches_pytorch_formula(nesterov):
    lr, momentum = 0.02, 0.9
    w0, grad, history = run_steps(ng.optimizers.SGD(lr, momentum=momentum, nesterov=nesterov))
    # torch.optim.SGD (dampening 0): buf = g on the first step, then buf = momentum buf + g;
    # step = g + momentum buf (Nesterov) or buf; p -= lr step.
    w, buf = w0.copy(), None
    for t, got in enumerate(history):
        g = grad(w)
        buf = g.copy() if t == 0 else momentum * buf + g
        step = g + momentum * buf if nesterov else buf
        w = w - lr * step
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-14)
    # Momentum makes a difference from plain SGD by the second step.
    plain = run_steps(ng.optimizers.SGD(lr))[2]
    assert not np.allclose(plain[1], history[1], rtol=1e-6, atol=0)


@pytest.mark.parametrize("lr,betas", [(0.01, (0.9, 0.999)), (0.1, (0.8, 0.99))])
def test_adam_matches_numpy(lr, betas):
    b1, b2 = betas
    eps = 1e-8
    opt = ng.optimizers.Adam(learning_rate=lr, beta1=b1, beta2=b2, epsilon=eps)
    w0, grad, history = run_steps(opt)
    w = w0.copy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, got in enumerate(history, start=1):
        g = grad(w)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1 ** t)
        v_hat = v / (1 - b2 ** t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
        # ngraph folds the bias correction into the step size (Kingma and Ba, section 2),
        # which moves epsilon by a factor sqrt(1 - b2^t): a difference of order lr * 1e-7.
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-8)
    assert opt.step.get_value() == 3


def test_optimizer_state_lives_in_variables():
    w, _, loss, _ = quadratic_problem()
    opt = ng.optimizers.Adam(0.01)
    updates = opt.updates(loss, [w])
    updated = [v for v, _ in updates]
    assert all(isinstance(v, ng.Variable) for v in updated)
    assert any(v.same_node(w) for v in updated)
    assert any(v.same_node(opt.step) for v in updated)
    assert len(updates) == 4  # m, v, w, step
    sgd = ng.optimizers.SGD(0.1, momentum=0.5).updates(loss, [w])
    # the step count every optimizer keeps (for schedules), the momentum buffer, w
    assert len(sgd) == 3 and sgd[1][0].name.endswith("momentum")
    assert sgd[0][0].name == "sgd/step"


def test_optimizer_with_given_gradients():
    w, w0, loss, grad = quadratic_problem()
    g = ng.gradients(loss, [w])
    updates = ng.optimizers.SGD(0.05).updates(loss, [w], grads=[g[0] * 2.0])
    RUNTIME.computation(loss, updates=updates)()
    np.testing.assert_allclose(w.get_value(), w0 - 0.1 * grad(w0), rtol=1e-12)
    with pytest.raises(ValueError, match="1 variables"):
        ng.optimizers.SGD(0.05).updates(loss, [w], grads=[])


def test_optimizer_argument_errors():
    with pytest.raises(ValueError, match="learning_rate"):
        ng.optimizers.SGD(0)
    with pytest.raises(ValueError, match="momentum"):
        ng.optimizers.SGD(0.1, momentum=-1)
    with pytest.raises(ValueError, match="nesterov"):
        ng.optimizers.SGD(0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta1"):
        ng.optimizers.Adam(beta1=1.0)
    x = ng.parameter([2], F32, name="x")
    with pytest.raises(TypeError, match="not a variable"):
        ng.optimizers.SGD(0.1).updates(ng.sum(x * x), [x])


def test_adam_on_float32_variables():
    w = ng.variable(np.array([1.0, -1.0], F32), name="w")
    loss = ng.sum(w * w)
    step = RUNTIME.computation(loss, updates=ng.optimizers.Adam(0.1).updates(loss, [w]))
    for _ in range(3):
        step()
    assert w.get_value().dtype == F32
    # Adam's first steps move every coordinate by about lr against the gradient's sign.
    np.testing.assert_allclose(w.get_value(), [0.7, -0.7], atol=5e-3)
    expected, m, v = np.array([1.0, -1.0]), 0.0, 0.0
    for t in range(1, 4):
        g = 2 * expected
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        expected = expected - 0.1 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(w.get_value(), expected, rtol=1e-5)


# ----------------------------------------------------------------------- losses


def test_cross_entropy_integer_and_one_hot_labels_agree():
    rng = np.random.default_rng(2)
    logits_v = rng.standard_normal((6, 5))
    labels_v = rng.integers(0, 5, 6)
    logits = ng.parameter([6, 5], F64, name="logits")
    labels = ng.parameter([6], np.int64, name="labels")
    one_hot = ng.parameter([6, 5], F64, name="one_hot")
    loss_i = ng.softmax_cross_entropy(logits, labels)
    loss_o = ng.softmax_cross_entropy(logits, one_hot)
    (g_i,) = ng.gradients(loss_i, [logits])
    g_o, g_t = ng.gradients(loss_o, [logits, one_hot])
    out = RUNTIME.computation([loss_i, loss_o, g_i, g_o, g_t], logits, labels, one_hot)(
        logits_v, labels_v, np.eye(5)[labels_v])
    expected = -np.mean(log_softmax(logits_v)[np.arange(6), labels_v])
    np.testing.assert_allclose(out[0], expected, rtol=1e-12)
    np.testing.assert_allclose(out[1], expected, rtol=1e-12)
    expected_grad = (softmax(logits_v) - np.eye(5)[labels_v]) / 6
    np.testing.assert_allclose(out[2], expected_grad, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out[3], out[2], rtol=1e-12, atol=1e-15)
    # Soft labels are differentiable too: d loss / d target = -log_softmax / n.
    np.testing.assert_allclose(out[4], -log_softmax(logits_v) / 6, rtol=1e-12)
    # NumPy labels (constants) give the same value.
    const = RUNTIME.computation(ng.softmax_cross_entropy(logits, labels_v), logits)(logits_v)[0]
    np.testing.assert_allclose(const, expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_cross_entropy_is_stable_for_huge_logits(dtype):
    logits = ng.parameter([3, 3], dtype, name="logits")
    labels = ng.parameter([3], np.int32, name="labels")
    loss = ng.softmax_cross_entropy(logits, labels, reduction="none")
    (g,) = ng.gradients(ng.sum(loss), [logits])
    z = np.array([[1e4, 0, -1e4], [1e4, 0, -1e4], [-1e4, 1e4, 1e4]], dtype)
    lab = np.array([0, 1, 1], np.int32)
    out, grad = RUNTIME.computation([loss, g], logits, labels)(z, lab)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(grad))
    # (float32 Log is accurate to a few 1e-6 on the CPU backend.)
    tol = 1e-5 if dtype == F32 else 1e-9
    np.testing.assert_allclose(out, [0.0, 1e4, np.log(2)], rtol=tol, atol=tol)
    np.testing.assert_allclose(grad, [[0, 0, 0], [1, -1, 0], [0, -0.5, 0.5]], atol=tol)
    mean = RUNTIME.computation(ng.softmax_cross_entropy(logits, labels), logits, labels)(z, lab)[0]
    assert np.isfinite(mean)


def test_cross_entropy_reductions_and_axis():
    rng = np.random.default_rng(3)
    z = rng.standard_normal((4, 3))
    lab = np.array([2, 0, 1, 1])
    logits = ng.parameter([4, 3], F64, name="logits")
    per_example = -log_softmax(z)[np.arange(4), lab]
    comp = RUNTIME.computation([
        ng.softmax_cross_entropy(logits, lab, reduction="none"),
        ng.softmax_cross_entropy(logits, lab, reduction="sum"),
        ng.softmax_cross_entropy(logits, lab, reduction="mean"),
        # Classes along axis 0 of the transposed logits.
        ng.softmax_cross_entropy(ng.reshape(logits, [3, 4], [1, 0]), lab, axis=0),
    ], logits)
    none, total, mean, transposed = comp(z)
    np.testing.assert_allclose(none, per_example, rtol=1e-12)
    np.testing.assert_allclose(total, per_example.sum(), rtol=1e-12)
    np.testing.assert_allclose(mean, per_example.mean(), rtol=1e-12)
    np.testing.assert_allclose(transposed, per_example.mean(), rtol=1e-12)
    with pytest.raises(ValueError, match="reduction"):
        ng.softmax_cross_entropy(logits, lab, reduction="max")
    with pytest.raises(ValueError, match="labels shape"):
        ng.softmax_cross_entropy(logits, np.zeros(5, np.int64))
    with pytest.raises(TypeError, match="integers"):
        ng.softmax_cross_entropy(logits, ng.parameter([4], F64))


def test_log_softmax_matches_numpy():
    z = np.random.default_rng(4).standard_normal((3, 5)) * 30
    logits = ng.parameter([3, 5], F64, name="logits")
    out = RUNTIME.computation([ng.log_softmax(logits), ng.log_softmax(logits, axis=0)], logits)(z)
    np.testing.assert_allclose(out[0], log_softmax(z, 1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[1], log_softmax(z, 0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mean_squared_error_matches_numpy(reduction):
    rng = np.random.default_rng(6)
    p_v, t_v = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    p = ng.parameter([4, 3], F64, name="p")
    t = ng.parameter([4, 3], F64, name="t")
    loss = ng.mean_squared_error(p, t, reduction=reduction)
    gp, gt = ng.gradients(ng.sum(loss), [p, t])
    out, out_p, out_t = RUNTIME.computation([loss, gp, gt], p, t)(p_v, t_v)
    sq = (p_v - t_v) ** 2
    expected = {"mean": sq.mean(), "sum": sq.sum(), "none": sq}[reduction]
    scale = {"mean": 1 / 12, "sum": 1.0, "none": 1.0}[reduction]
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    np.testing.assert_allclose(out_p, 2 * (p_v - t_v) * scale, rtol=1e-12)
    np.testing.assert_allclose(out_t, -2 * (p_v - t_v) * scale, rtol=1e-12)


def test_mean_squared_error_broadcasts_and_takes_arrays():
    p = ng.parameter([4, 3], F64, name="p")
    target = np.array([1.0, 2.0, 3.0])
    p_v = np.arange(12, dtype=F64).reshape(4, 3)
    out = RUNTIME.computation(ng.mean_squared_error(p, target), p)(p_v)[0]
    np.testing.assert_allclose(out, np.mean((p_v - target) ** 2))
    with pytest.raises(ValueError, match="reduction"):
        ng.mean_squared_error(p, target, reduction="median")


def test_mean_over_axes():
    x = ng.parameter([2, 3, 4], F64, name="x")
    v = np.random.default_rng(7).standard_normal((2, 3, 4))
    out = RUNTIME.computation([ng.mean(x), ng.mean(x, [0, 2]), ng.mean(x, -1)], x)(v)
    np.testing.assert_allclose(out[0], v.mean())
    np.testing.assert_allclose(out[1], v.mean(axis=(0, 2)))
    np.testing.assert_allclose(out[2], v.mean(axis=-1))


# ----------------------------------------------------------------- (d) MNIST training


@pytest.fixture(scope="module")
def mnist_split():
    if not os.path.isdir(MNIST_DIR):
        pytest.skip(f"MNIST digits not found at {MNIST_DIR} (expected the shared data "
                    "directory ../shared/data/mnist next to the repository)")
    test = ng.datasets.mnist(MNIST_DIR).test
    if test is None:
        pytest.skip(f"{MNIST_DIR} has no MNIST test split (t10k-*-idx*-ubyte[.gz])")
    images = ng.datasets.flatten(test.images)  # float32 in [0, 1]
    labels = test.labels
    assert images.shape == (10000, 784) and images.dtype == F32
    assert labels.shape == (10000,) and labels.dtype == np.int64
    return (images[:8000], labels[:8000]), (images[8000:], labels[8000:])


def train_mnist(split, optimizer, epochs=5, batch=64, target=0.92, seed=0):
    """Trains 784-128-10 on the 8000 images for up to `epochs` epochs, until the test
    accuracy reaches `target`; returns (test accuracy per epoch, mean loss per epoch)."""
    (train_x, train_y), (test_x, test_y) = split
    rng = np.random.default_rng(seed)
    # float32 weights: cast after scaling (a float32 array times a NumPy float64 scalar is
    # float64 in NumPy 2).
    w1 = ng.variable((rng.standard_normal((784, 128)) * np.sqrt(2 / 784)).astype(F32), name="w1")
    b1 = ng.variable(np.zeros(128, F32), name="b1")
    w2 = ng.variable((rng.standard_normal((128, 10)) * np.sqrt(1 / 128)).astype(F32), name="w2")
    b2 = ng.variable(np.zeros(10, F32), name="b2")
    weights = [w1, b1, w2, b2]
    assert all(w.dtype == F32 for w in weights)

    x = ng.parameter([batch, 784], F32, name="x")
    y = ng.parameter([batch], np.int64, name="y")
    loss = ng.softmax_cross_entropy(ng_mlp(x, *weights), y)
    step = RUNTIME.computation(loss, x, y, updates=optimizer.updates(loss, weights))

    tx = ng.parameter(list(test_x.shape), F32, name="test_x")
    predict = RUNTIME.computation(ng.argmax(ng_mlp(tx, *weights), 1), tx)

    accuracies, losses = [], []
    before = [w.get_value() for w in weights]
    n = len(train_x) // batch * batch
    for _ in range(epochs):
        order = rng.permutation(len(train_x))[:n].reshape(-1, batch)
        epoch_loss = 0.0
        for idx in order:
            epoch_loss += float(step(train_x[idx], train_y[idx])[0])
        losses.append(epoch_loss / len(order))
        accuracies.append(float(np.mean(predict(test_x)[0] == test_y)))
        if accuracies[-1] >= target:  # "within 5 epochs": stop once there
            break
    after = [w.get_value() for w in weights]
    assert all(not np.array_equal(a, b) for a, b in zip(before, after))
    assert all(np.all(np.isfinite(a)) for a in after)
    return accuracies, losses


OPTIMIZERS = {
    "sgd-momentum": lambda: ng.optimizers.SGD(learning_rate=0.1, momentum=0.9),
    "adam": lambda: ng.optimizers.Adam(learning_rate=1e-3),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_mnist_mlp_reaches_92_percent(mnist_split, name):
    start = time.perf_counter()
    accuracies, losses = train_mnist(mnist_split, OPTIMIZERS[name]())
    elapsed = time.perf_counter() - start
    print(f"{name}: test accuracy per epoch {accuracies}, mean loss {losses}, {elapsed:.1f} s")
    assert accuracies[-1] >= 0.92, f"{name}: test accuracies {accuracies}"
    assert losses[0] < np.log(10), f"{name}: mean losses {losses}"
    assert all(b < a for a, b in zip(losses, losses[1:])), f"{name}: mean losses {losses}"


def test_updates_in_place_still_see_old_values():
    """Updates computed by fused kernels may overwrite their variable in place; every read
    in the call must still see the values from before it."""
    rt = ng.runtime()
    w = ng.variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w_inplace")
    v = ng.variable(np.ones((2, 3), np.float32), name="v_inplace")
    x = ng.parameter([2, 3], name="x")
    # w's result is returned, v's update reads w, and both updates are elementwise chains.
    step = rt.computation([w * 1.0, ng.sum(w)], x,
                          updates=[(w, w * 2.0 - x), (v, v * 0.5 + w * 3.0)])
    w0, v0 = w.get_value(), v.get_value()
    xv = np.full((2, 3), 0.25, np.float32)
    out, total = step(xv)
    np.testing.assert_array_equal(out, w0)
    assert total == w0.sum()
    np.testing.assert_allclose(w.get_value(), w0 * 2 - xv)
    np.testing.assert_allclose(v.get_value(), v0 * 0.5 + w0 * 3)
    out, _ = step(xv)  # a second call sees the first call's results
    np.testing.assert_allclose(out, w0 * 2 - xv)


def test_sgd_weight_decay_matches_pytorchs_formula():
    """g += wd * w, then momentum as usual: two steps against NumPy."""
    w0 = np.array([1.0, -2.0, 3.0], np.float32)
    w = ng.variable(w0.copy(), name="w")
    x = ng.parameter([3], np.float32, name="x")
    loss = ng.sum(w * x)
    opt = ng.optimizers.SGD(0.1, momentum=0.9, weight_decay=0.01)
    step = ng.runtime().computation(loss, x, updates=opt.updates(loss, [w]))
    xv = np.array([0.5, 1.0, -1.0], np.float32)
    ref, buf = w0.astype(np.float64), np.zeros(3)
    for _ in range(2):
        step(xv)
        g = xv + 0.01 * ref
        buf = 0.9 * buf + g
        ref = ref - 0.1 * buf
    np.testing.assert_allclose(w.get_value(), ref, rtol=1e-6)
    with pytest.raises(ValueError, match="weight_decay"):
        ng.optimizers.SGD(0.1, weight_decay=-1)
