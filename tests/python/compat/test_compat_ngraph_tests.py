"""What running nGraph's own test files (tools/run_ngraph_tests.sh) showed: ng.fake_quantize
(nGraph v0.26's FakeQuantize, a composition here) and impl.op's MaxPool(arg, window_shape)
with default strides and padding, against NumPy on both backends; and the names nGraph's later
test files use that ngraph does not provide: each must fail with an error naming it, never
with a wrong value."""

import re
import sys
from pathlib import Path

import ngraph as ng
import numpy as np
import pytest
from ngraph.impl import Shape, Strides
from ngraph.impl.op import AvgPool, MaxPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_gradients import case, check_gradients  # noqa: E402

API_DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"
BACKENDS = ["CPU", "INTERPRETER"]


def fake_quantize_ref(x, in_low, in_high, out_low, out_high, levels):
    """nGraph's definition, with np.rint (ties to even, as C's nearbyint)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint((x - in_low) / (in_high - in_low) * (levels - 1))
    mid = q / (levels - 1) * (out_high - out_low) + out_low
    out = np.where(x <= in_low, out_low, np.where(x > in_high, out_high, mid))
    return np.broadcast_to(out, x.shape).astype(x.dtype)


def run(backend, node, params, *arrays):
    return ng.runtime(backend_name=backend).computation(node, *params)(*arrays)[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fake_quantize_scalar_bounds_against_numpy(backend, dtype):
    x = np.random.default_rng(1).uniform(-3, 5, (2, 3, 4, 5)).astype(dtype)
    params = [ng.parameter(x.shape, dtype)] + [ng.parameter([], dtype) for _ in range(4)]
    bounds = [dtype(-1), dtype(3.5), dtype(-2), dtype(6)]
    node = ng.fake_quantize(*params, 5)
    assert node.shape == list(x.shape) and node.dtype == dtype
    out = run(backend, node, params, x, *bounds)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, fake_quantize_ref(x, *bounds, 5), rtol=1e-6)
    # Every value is one of the 5 levels between output_low and output_high.
    levels = np.linspace(-2, 6, 5)
    assert np.all(np.min(np.abs(out[..., None] - levels), axis=-1) < 1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fake_quantize_per_channel_bounds_and_ties_to_even(backend):
    # Per-channel bounds of shape [1, 2, 1] broadcast to the data's [2, 2, 6].
    x = np.array([0, 0.5, 1, 1.5, 2.5, 3.5] * 4, np.float64).reshape(2, 2, 6)
    in_low = np.array([0.0, -1.0]).reshape(1, 2, 1)
    in_high = np.array([3.0, 2.0]).reshape(1, 2, 1)
    out_low = np.array([0.0, 10.0]).reshape(1, 2, 1)
    out_high = np.array([3.0, 13.0]).reshape(1, 2, 1)
    data = ng.parameter(x.shape, np.float64)
    out = run(backend, ng.fake_quantize(data, in_low, in_high, out_low, out_high, 4),
              [data], x)
    # Channel 0: steps of 1, so 0.5 -> 0 and 1.5 -> 2, 2.5 -> 2 (ties to even); 3.5 > 3 -> 3.
    np.testing.assert_array_equal(out[0, 0], [0, 0, 1, 2, 2, 3])
    np.testing.assert_allclose(out, fake_quantize_ref(x, in_low, in_high, out_low, out_high, 4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fake_quantize_equal_input_bounds_and_constants(backend):
    # input_low == input_high: every value is below or above, none is divided by zero.
    x = np.array([-1.0, 0.0, 0.5, 2.0], np.float32)
    node = ng.fake_quantize(x, 0.0, 0.0, -5.0, 5.0, 2)
    np.testing.assert_array_equal(run(backend, node, []), [-5, -5, 5, 5])
    # The levels may be a float holding an integer (nGraph's tests pass np.float32(4)).
    node = ng.fake_quantize(x, -1.0, 2.0, 0.0, 3.0, np.float32(4), name="fq")
    assert node.name == "fq"
    np.testing.assert_allclose(run(backend, node, []), fake_quantize_ref(x, -1, 2, 0, 3, 4))


def test_fake_quantize_gradient_against_finite_differences():
    # Piecewise constant in the data (gradient 0 away from the steps, as floor's), linear in
    # the output bounds. The data stay 0.1 away from the steps at -1, -0.5, 0.5, 1.5 and 2.
    x = np.array([-1.8, -0.9, -0.1, 0.9, 1.1, 2.7])
    out_low = np.array([-2.0, -1.0, 0.0, 0.5, -3.0, 1.0])
    out_high = out_low + np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    grads = check_gradients(case(
        "fake_quantize", lambda d, lo, hi: ng.fake_quantize(d, -1.0, 2.0, lo, hi, 4),
        x, out_low, out_high))
    assert np.all(grads[0] == 0)


def test_fake_quantize_errors_name_the_op_and_the_argument():
    data = ng.parameter([2, 3])
    with pytest.raises(ng.UserInputError, match=r"\[FakeQuantize\] levels must be an integer "
                                                r">= 2, got 1"):
        ng.fake_quantize(data, 0.0, 1.0, 0.0, 1.0, 1)
    with pytest.raises(ng.UserInputError, match=r"\[FakeQuantize\] levels .* got 2.5"):
        ng.fake_quantize(data, 0.0, 1.0, 0.0, 1.0, 2.5)
    with pytest.raises(ng.UserInputError, match=r"\[FakeQuantize\] input_high of shape \[4\] "
                                                r"does not broadcast to the data's shape"):
        ng.fake_quantize(data, 0.0, np.ones(4, np.float32), 0.0, 1.0, 4)
    with pytest.raises(ng.UserInputError,
                       match=r"\[FakeQuantize\] output_low of shape \[2, 2, 3\]"):
        ng.fake_quantize(data, 0.0, 1.0, np.zeros((2, 2, 3), np.float32), 1.0, 4)
    with pytest.raises(ng.NgraphTypeError, match=r"\[FakeQuantize\] data must be floating-point"):
        ng.fake_quantize(ng.parameter([2], np.int32), 0, 1, 0, 1, 4)


def test_ngraph_ops_module_has_the_fused_ops_too():
    # nGraph keeps every op function in ngraph/ops.py (its tests call ng.ops.lrn, ...).
    assert ng.ops.fake_quantize is ng.fake_quantize
    assert ng.ops.elu is ng.elu and ng.ops.lrn is ng.lrn
    with pytest.raises(AttributeError, match="module 'ngraph.ops' has no attribute 'nonsense'"):
        ng.ops.nonsense  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute '_block_check'"):
        ng.ops._block_check  # noqa: B018  (ngraph.fused's helpers are not ops)


OPSET1 = ["greater_equal", "less_equal", "batch_norm_inference", "batch_norm_training",
          "scatter_update", "scatter_nd_update", "scatter_elements_update",
          "binary_convolution", "ctc_greedy_decoder"]


@pytest.mark.parametrize("name", OPSET1)
def test_opset1_names_say_why_on_ngraph_and_ngraph_ops(name):
    for module in (ng, ng.ops):
        with pytest.raises(AttributeError, match=rf"ngraph has no {name}: .*opset 1.*docs/api.md"):
            getattr(module, name)
    assert re.search(rf"`(ng\.)?{name}[`(]", API_DOC.read_text()), f"{name} not in docs/api.md"


def test_depth_to_space_without_mode_is_a_clear_error():
    # nGraph before v0.26: depth_to_space(node, block_size); v0.26: (node, mode, block_size).
    p = ng.parameter([1, 4, 2, 3])
    for fn in (ng.depth_to_space, ng.space_to_depth):
        with pytest.raises(ng.UserInputError, match=r"block_size is missing: the signature is "
                                                    r"\(data, mode, block_size\)"):
            fn(p, np.float32(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_pooling_classes_default_strides_and_padding(backend):
    # nGraph's MaxPool(arg, window_shape) and AvgPool(arg, window_shape, strides): strides of
    # 1 and no padding where they are not given.
    x = np.arange(2 * 10 * 7, dtype=np.float32).reshape(1, 2, 10, 7) % 13
    p = ng.parameter(x.shape)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 2), axis=(2, 3))
    node = MaxPool(p, Shape([3, 2]))
    assert node.shape == [1, 2, 8, 6]
    np.testing.assert_array_equal(run(backend, node, [p], x), windows.max((-2, -1)))
    node = AvgPool(p, Shape([3, 2]), Strides([2, 3]))
    assert node.shape == [1, 2, 4, 2]
    np.testing.assert_allclose(run(backend, node, [p], x),
                               windows[:, :, ::2, ::3].mean((-2, -1)), rtol=1e-6)
    with pytest.raises(ng.UserInputError, match=r"\[MaxPool\] window_shape \{3\} must have one "
                                                r"value per spatial axis"):
        MaxPool(p, Shape([3]))


def test_pooling_class_defaults_gradient():
    x = np.random.default_rng(3).permutation(24).reshape(1, 1, 4, 6) * 0.1
    check_gradients(case("max_pool_defaults", lambda d: MaxPool(d, Shape([2, 3])), x))
    check_gradients(case("avg_pool_defaults", lambda d: AvgPool(d, Shape([2, 3])), x))
