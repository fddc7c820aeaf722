"""Batch normalization (``ng.batch_norm``) against NumPy, and multi-output nodes: indexing,
unpacking and ``ng.get_output_element``.

The training form of ``ng.batch_norm`` is a node with three outputs (normalized data, batch
mean, batch variance); a Python node stands for one value, so its outputs are used through
element nodes (``node[i]``, or unpacking ``y, mean, var = node``).
"""

from __future__ import annotations

import ngraph as ng
import numpy as np
import pytest

RUNTIME = ng.runtime(backend_name="CPU")


def data(shape, dtype=np.float32, seed=0, scale=2.0, offset=0.5):
    rng = np.random.default_rng(seed)
    return (offset + scale * rng.standard_normal(shape)).astype(dtype)


def stat_axes(x):
    return (0, *range(2, x.ndim))


def per_channel(v, x):
    """A [C] vector shaped to broadcast along axis 1 of x."""
    return np.reshape(v, (1, -1) + (1,) * (x.ndim - 2))


def np_batch_norm(x, gamma, beta, eps, mean=None, var=None):
    x64 = x.astype(np.float64)
    if mean is None:
        mean, var = x64.mean(axis=stat_axes(x)), x64.var(axis=stat_axes(x))
    y = (per_channel(gamma, x) * (x64 - per_channel(mean, x)) / np.sqrt(per_channel(var, x) + eps)
         + per_channel(beta, x))
    return y, mean, var


def tolerance(dtype):
    return {"rtol": 2e-5, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


SHAPES = [(6, 3), (2, 3, 5), (4, 3, 5, 5), (2, 16, 3, 3), (2, 3, 2, 2, 2)]


# ----------------------------------------------------------------------- batch_norm values


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_training_matches_numpy(shape, dtype):
    c = shape[1]
    x = ng.parameter(shape, dtype, name="x")
    gamma = ng.parameter([c], dtype, name="gamma")
    beta = ng.parameter([c], dtype, name="beta")
    bn = ng.batch_norm(1e-3, gamma, beta, x, name="bn")
    assert bn.get_type_name() == "BatchNormTraining"
    assert bn.get_output_size() == 3
    y, mean, var = bn
    xv, gv, bv = data(shape, dtype), data([c], dtype, 1), data([c], dtype, 2)
    got = RUNTIME.computation([y, mean, var], x, gamma, beta)(xv, gv, bv)
    for g, e in zip(got, np_batch_norm(xv, gv, bv, 1e-3)):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, e, **tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_inference_matches_numpy(shape, dtype):
    c = shape[1]
    x = ng.parameter(shape, dtype, name="x")
    mean = ng.parameter([c], dtype, name="mean")
    var = ng.parameter([c], dtype, name="var")
    gv, bv = data([c], dtype, 1), data([c], dtype, 2)
    node = ng.batch_norm(0.5, gv, bv, x, mean, var)  # arrays become constants of x's dtype
    assert node.get_type_name() == "BatchNormInference"
    assert node.get_output_size() == 1
    assert node.shape == list(shape)
    xv, mv = data(shape, dtype), data([c], dtype, 3)
    vv = np.abs(data([c], dtype, 4)) + 0.1
    got = RUNTIME.computation(node, x, mean, var)(xv, mv, vv)[0]
    expected, _, _ = np_batch_norm(xv, gv, bv, 0.5, mv, vv)
    np.testing.assert_allclose(got, expected, **tolerance(dtype))


def test_training_statistics_are_the_biased_ones():
    x = np.array([[1.0, 4.0], [3.0, 4.0], [5.0, 7.0]])
    y, mean, var = ng.batch_norm(0.0, np.ones(2), np.zeros(2), ng.constant(x))
    got_mean, got_var = RUNTIME.computation([mean, var])()
    np.testing.assert_allclose(got_mean, [3.0, 5.0])
    np.testing.assert_allclose(got_var, [8 / 3, 2.0])  # divided by 3, not 2


def test_normalized_output_of_training_has_zero_mean_and_unit_variance():
    x = ng.parameter([32, 4, 3, 3], np.float64, name="x")
    y = ng.batch_norm(1e-9, np.ones(4), np.zeros(4), x)[0]
    out = RUNTIME.computation(y, x)(data([32, 4, 3, 3], np.float64))[0]
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=(0, 2, 3)), 1, rtol=1e-6)


def test_batch_norm_layer_trains():
    """A batch-norm layer in a small training step: its gradient moves gamma and beta."""
    x = ng.parameter([8, 2], np.float32, name="x")
    gamma = ng.variable(np.ones(2, np.float32), name="gamma")
    beta = ng.variable(np.zeros(2, np.float32), name="beta")
    y = ng.batch_norm(1e-5, gamma, beta, x)[0]
    loss = ng.sum((y - 3.0) * (y - 3.0))
    g_gamma, g_beta = ng.gradients(loss, [gamma, beta])
    step = RUNTIME.computation(loss, x, updates=[(gamma, gamma - 0.05 * g_gamma),
                                                 (beta, beta - 0.05 * g_beta)])
    xv = data([8, 2])
    losses = [float(step(xv)[0]) for _ in range(30)]
    assert losses[-1] < 0.05 * losses[0]
    np.testing.assert_allclose(beta.get_value(), [3.0, 3.0], rtol=1e-2)


# ---------------------------------------------------------------------- gradients vs NumPy


def test_training_gradients_match_numpy():
    """d/dx, d/dgamma, d/dbeta of sum(w * y) against the textbook formulas."""
    shape, c = (4, 3, 2, 2), 3
    x = ng.parameter(shape, np.float64, name="x")
    gamma = ng.parameter([c], np.float64, name="gamma")
    beta = ng.parameter([c], np.float64, name="beta")
    w = data(shape, np.float64, 5)
    y = ng.batch_norm(1e-3, gamma, beta, x)[0]
    grads = ng.gradients(ng.sum(y * w), [x, gamma, beta])
    assert "BatchNormTrainingBackprop" in {n.get_type_name() for g in grads for n in g.inputs()}
    xv, gv, bv = data(shape, np.float64), data([c], np.float64, 1), data([c], np.float64, 2)
    dx, dgamma, dbeta = RUNTIME.computation(grads, x, gamma, beta)(xv, gv, bv)
    axes, m = stat_axes(xv), xv.size // c
    mean, var = xv.mean(axis=axes), xv.var(axis=axes)
    xhat = (xv - per_channel(mean, xv)) / np.sqrt(per_channel(var, xv) + 1e-3)
    np.testing.assert_allclose(dbeta, w.sum(axis=axes))
    np.testing.assert_allclose(dgamma, (w * xhat).sum(axis=axes))
    expected_dx = (per_channel(gv / np.sqrt(var + 1e-3), xv)
                   * (w - per_channel(dbeta, xv) / m - xhat * per_channel(dgamma, xv) / m))
    np.testing.assert_allclose(dx, expected_dx, rtol=1e-10, atol=1e-12)


def test_mean_output_gradient_is_exact():
    x = ng.parameter([5, 2], np.float64, name="x")
    _, mean, _ = ng.batch_norm(1e-3, np.ones(2), np.zeros(2), x)
    g = ng.gradients(ng.sum(mean * np.array([1.0, 3.0])), x)
    out = RUNTIME.computation(g, x)(data([5, 2], np.float64))[0]
    np.testing.assert_allclose(out, np.tile([0.2, 0.6], (5, 1)))


# -------------------------------------------------------------------- multi-output nodes


def _bn(shape=(4, 3), dtype=np.float32, name="bn"):
    x = ng.parameter(list(shape), dtype, name="x")
    c = shape[1]
    return x, ng.batch_norm(1e-5, np.ones(c), np.zeros(c), x, name=name)


def test_indexing_gives_element_nodes():
    _, bn = _bn()
    elements = [bn[0], bn[1], bn[2]]
    assert [e.get_type_name() for e in elements] == ["GetOutputElement"] * 3
    assert [e.shape for e in elements] == [[4, 3], [3], [3]]
    assert all(e.dtype == np.float32 for e in elements)
    assert all(e.inputs()[0].same_node(bn) for e in elements)
    assert bn[-1].attributes() == bn[2].attributes() == "n=2"
    assert bn[np.int64(1)].shape == [3]


def test_index_out_of_range_names_the_node_and_its_output_count():
    _, bn = _bn(name="my_bn")
    with pytest.raises(IndexError, match=r"output index 3 .* my_bn \(BatchNormTraining\), "
                                         r"which has 3 outputs"):
        bn[3]
    with pytest.raises(IndexError, match="which has 3 outputs"):
        bn[-4]
    with pytest.raises(IndexError, match="which has 3 outputs"):
        ng.get_output_element(bn, 5)
    with pytest.raises(TypeError, match="must be integers"):
        bn["mean"]
    with pytest.raises(TypeError, match="must be integers"):
        bn[0:2]


def test_unpacking_and_iteration():
    _, bn = _bn()
    y, mean, var = bn
    assert (y.shape, mean.shape, var.shape) == ([4, 3], [3], [3])
    assert [e.attributes() for e in bn] == ["n=0", "n=1", "n=2"]
    with pytest.raises(ValueError):
        a, b = bn  # noqa: F841  (three outputs)


def test_single_output_nodes():
    x = ng.parameter([2], np.float32, name="x")
    e = ng.exp(x)
    assert e[0] is e or e[0].same_node(e)
    assert e[-1].same_node(e)
    with pytest.raises(IndexError, match="which has 1 output$"):
        e[1]
    with pytest.raises(TypeError, match="only nodes with several outputs"):
        iter(e)
    goe = ng.get_output_element(e, 0, name="e0")  # always a GetOutputElement, as in nGraph
    assert goe.get_type_name() == "GetOutputElement"
    assert goe.name == "e0"
    np.testing.assert_allclose(RUNTIME.computation(goe, x)(np.array([0, 1], np.float32))[0],
                               [1, np.e], rtol=1e-6)


def test_get_output_element():
    x, bn = _bn()
    var = ng.get_output_element(bn, 2, name="batch_var")
    assert var.name == "batch_var"
    assert var.get_type_name() == "GetOutputElement"
    xv = data([4, 3])
    np.testing.assert_allclose(RUNTIME.computation(var, x)(xv)[0], xv.var(axis=0), rtol=1e-5)
    with pytest.raises(TypeError, match="must be a Node"):
        ng.get_output_element(np.zeros(3), 0)


def test_multi_output_node_properties_say_which_output_to_pick():
    _, bn = _bn(name="bn7")
    assert repr(bn) == "<BatchNormTraining: 'bn7' 3 outputs: f32{4,3}, f32{3}, f32{3}>"
    for prop in ("shape", "dtype", "element_type"):
        with pytest.raises(ValueError, match=r"bn7 has 3 outputs .*pick an output with node\[i\]"):
            getattr(bn, prop)


def test_multi_output_node_as_a_value_raises():
    x, bn = _bn(name="bn8")
    with pytest.raises(TypeError, match=r"\[Relu\] input 0 \(bn8, BatchNormTraining\) has 3 "
                                        r"outputs; pick one with node\[i\]"):
        ng.relu(bn)
    with pytest.raises(TypeError, match=r"result 0 \(bn8, BatchNormTraining\) has 3 outputs"):
        RUNTIME.computation(bn, x)
    with pytest.raises(TypeError, match=r"\[gradients\] y \(bn8"):
        ng.gradients(bn, [x])


def test_results_through_element_nodes_in_any_order_and_repeated():
    x, bn = _bn((5, 2), np.float64)
    y, mean, var = bn
    comp = RUNTIME.computation([var, y * 2.0, mean, bn[0], var], x)
    xv = data([5, 2], np.float64)
    out = comp(xv)
    ey, em, ev = np_batch_norm(xv, np.ones(2), np.zeros(2), 1e-5)
    for got, expected in zip(out, [ev, 2 * ey, em, ey, ev]):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_backprop_node_is_what_gradients_build():
    x, bn = _bn((4, 3), np.float64)
    (gx,) = ng.gradients(ng.sum(bn[0] * bn[0]), [x])
    backprop = gx.inputs()[0]
    assert backprop.get_type_name() == "BatchNormTrainingBackprop"
    assert backprop.get_output_size() == 3
    assert backprop.attributes() == "epsilon=1.0000000000000001e-05"


# ---------------------------------------------------------------------------- errors


def test_mean_without_variance_raises():
    x = ng.parameter([4, 3], np.float32)
    with pytest.raises(ValueError, match=r"\[BatchNormInference\] variance is missing"):
        ng.batch_norm(1e-5, np.ones(3), np.zeros(3), x, mean=np.zeros(3))
    with pytest.raises(ValueError, match="mean is missing"):
        ng.batch_norm(1e-5, np.ones(3), np.zeros(3), x, variance=np.ones(3))


def test_shape_and_type_errors_name_the_op_and_shapes():
    x = ng.parameter([4, 3], np.float32)
    with pytest.raises(ValueError, match=r"^\[BatchNormTraining\] gamma shape \{4\} must be "
                                         r"\{3\}, the channel count of input shape \{4,3\}$"):
        ng.batch_norm(1e-5, np.ones(4), np.zeros(3), x)
    with pytest.raises(ValueError, match=r"\[BatchNormInference\] variance shape \{2\}"):
        ng.batch_norm(1e-5, np.ones(3), np.zeros(3), x, np.zeros(3), np.ones(2))
    with pytest.raises(ValueError, match=r"input shape \{3\} must have rank >= 2"):
        ng.batch_norm(1e-5, np.ones(3), np.zeros(3), ng.parameter([3], np.float32))
    with pytest.raises(ValueError, match="epsilon must be finite and >= 0, got -1"):
        ng.batch_norm(-1, np.ones(3), np.zeros(3), x)
    with pytest.raises(TypeError, match=r"\[BatchNormTraining\] input has element type i32"):
        ng.batch_norm(1e-5, np.ones(3), np.zeros(3), ng.parameter([4, 3], np.int32))
    with pytest.raises(TypeError, match=r"element type of gamma \(f64\) does not match input"):
        ng.batch_norm(1e-5, ng.parameter([3], np.float64), np.zeros(3), x)
