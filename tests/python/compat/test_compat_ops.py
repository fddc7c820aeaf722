"""The op functions nGraph v0.26 has and ngraph added for it: ng.tan, ng.asin, ng.acos,
ng.atan, ng.sinh, ng.cosh, ng.topk and the fused ops, against NumPy, with gradients against
finite differences (the helpers of test_gradients.py)."""

import sys
from pathlib import Path

import ngraph as ng
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_gradients import case, check_gradients, data  # noqa: E402

RUNTIME = ng.runtime(backend_name="CPU")


def run(node, params, *arrays):
    return RUNTIME.computation(node, *params)(*arrays)[0]


def run_fn(fn, *arrays):
    params = [ng.parameter(a.shape, a.dtype) for a in arrays]
    return run(fn(*params), params, *arrays)


UNARY = {
    "tan": (ng.tan, np.tan), "asin": (ng.asin, np.arcsin), "acos": (ng.acos, np.arccos),
    "atan": (ng.atan, np.arctan), "sinh": (ng.sinh, np.sinh), "cosh": (ng.cosh, np.cosh),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_numpy(name, shape, dtype):
    fn, ref = UNARY[name]
    x = np.random.default_rng(0).uniform(-0.95, 0.95, shape).astype(dtype)
    out = run_fn(fn, x)
    assert out.dtype == dtype and out.shape == shape
    np.testing.assert_allclose(out, ref(x), rtol=1e-6 if dtype == np.float32 else 1e-13)


def test_unary_large_dense_and_edge_values():
    x = np.linspace(-3, 3, 5000, dtype=np.float32)
    np.testing.assert_allclose(run_fn(ng.atan, x), np.arctan(x), rtol=1e-6)
    np.testing.assert_allclose(run_fn(ng.sinh, x), np.sinh(x), rtol=1e-6)
    np.testing.assert_allclose(run_fn(ng.cosh, x), np.cosh(x), rtol=1e-6)
    edge = np.array([-1.0, 1.0, 2.0])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(run_fn(ng.asin, edge), np.arcsin(edge))
        np.testing.assert_array_equal(run_fn(ng.acos, edge), np.arccos(edge))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_rejects_integers_and_takes_scalars(name):
    fn, ref = UNARY[name]
    with pytest.raises(ng.NgraphTypeError, match=r"floating-point"):
        fn(ng.parameter([2], np.int32))
    node = fn(0.5, name="v")
    assert node.name == "v"
    np.testing.assert_allclose(RUNTIME.computation(node)()[0], ref(0.5))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradient(name):
    fn, _ = UNARY[name]
    check_gradients(case(name, fn, data((2, 3), "unit")), name.capitalize())


# ------------------------------------------------------------------------------- topk


def topk_reference(x, k, axis, largest):
    key = x.astype(np.float64)
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64])
@pytest.mark.parametrize("shape, k, axis", [((7,), 3, 0), ((3, 5), 2, 1), ((4, 3, 2), 4, 0),
                                            ((2, 6, 3), 1, 1), ((2, 3), 3, -1)])
@pytest.mark.parametrize("cmax", [True, False])
def test_topk_against_numpy(shape, k, axis, cmax, dtype):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, shape).astype(dtype)  # repeats: ties go to the lower index
    p = ng.parameter(list(shape), dtype)
    values, indices = ng.topk(p, k, axis, cmax)
    got_v, got_i = RUNTIME.computation([values, indices], p)(x)
    want_v, want_i = topk_reference(x, k, axis % len(shape), cmax)
    assert got_v.dtype == dtype and got_i.dtype == np.int32
    np.testing.assert_array_equal(got_v, want_v)
    np.testing.assert_array_equal(got_i, want_i)


def test_topk_node_index_type_nan_and_name():
    p = ng.parameter([5], np.float64)
    node = ng.topk(p, 2, name="top", index_element_type=np.int64)
    assert node.name == "top" and node.get_type_name() == "TopK" and node.get_output_size() == 2
    assert node[0].shape == [2] and node[1].dtype == np.int64
    x = np.array([1.0, np.nan, 3.0, 2.0, 0.0])
    v, i = RUNTIME.computation([node[0], node[1]], p)(x)
    assert np.isnan(v[0]) and v[1] == 3.0 and list(i) == [1, 2]
    v, i = RUNTIME.computation([ng.topk(p, 2, cmax=False)[0], ng.topk(p, 2, cmax=False)[1]], p)(x)
    assert list(v) == [0.0, 1.0] and list(i) == [4, 0]


def test_topk_errors():
    p = ng.parameter([2, 3])
    with pytest.raises(ng.UserInputError, match=r"\[TopK\] k 4 must be between 1 and the size"):
        ng.topk(p, 4)
    with pytest.raises(ng.UserInputError, match=r"\[TopK\] k must be >= 1"):
        ng.topk(p, 0)
    with pytest.raises(ng.NgraphTypeError, match=r"\[TopK\] k must be an integer"):
        ng.topk(p, 1.5)
    with pytest.raises(ng.UserInputError, match=r"\[TopK\] kaxis: axis 2 is out of range"):
        ng.topk(p, 1, 2)
    with pytest.raises(ng.NgraphTypeError, match=r"\[TopK\].*i32 or i64"):
        ng.topk(p, 1, index_element_type=np.int8)
    with pytest.raises(ng.NgraphTypeError, match=r"\[TopK\].*boolean"):
        ng.topk(ng.parameter([3], bool), 1)


def test_topk_gradient():
    check_gradients(case("topk", lambda p: ng.topk(p, 2, 0)[0], data((4, 3), "distinct")), "TopK")
    check_gradients(case("topk-min", lambda p: ng.topk(p, 3, 1, False)[0] * 2.0,
                         data((2, 5), "distinct")), "TopK")


# ---------------------------------------------------------------------------- fused ops


X = data((2, 3, 4), seed=11)
POS = data((2, 3, 4), "pos", seed=12)
FUSED = {
    "elu": (lambda x: ng.elu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1)), X),
    "clamp": (lambda x: ng.clamp(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), X),
    "squared_difference": (lambda x: ng.squared_difference(x, 0.25), lambda x: (x - 0.25) ** 2,
                           X),
    "prelu": (lambda x: ng.prelu(x, np.array([0.1, 0.2, 0.3, 0.4])),
              lambda x: np.where(x < 0, x * np.array([0.1, 0.2, 0.3, 0.4]), x), X),
    "hard_sigmoid": (lambda x: ng.hard_sigmoid(x, 0.5, 0.6),
                     lambda x: np.clip(0.5 * x + 0.6, 0, 1), X),
    "scale_shift": (lambda x: ng.scale_shift(x, 2.0, np.ones(4)), lambda x: 2 * x + 1, X),
    "squeeze": (lambda x: ng.squeeze(ng.reshape(x, [2, 1, 3, 4, 1]), [1, 4]), lambda x: x, X),
    "unsqueeze": (lambda x: ng.unsqueeze(x, ng.constant([0, 4])),
                  lambda x: x[np.newaxis, ..., np.newaxis], X),
    "shuffle_channels": (lambda x: ng.shuffle_channels(ng.reshape(x, [1, 6, 2, 2]), 1, 3),
                         lambda x: x.reshape(1, 3, 2, 2, 2).transpose(0, 2, 1, 3, 4)
                         .reshape(1, 6, 2, 2), X),
    "depth_to_space_blocks_first": (
        lambda x: ng.depth_to_space(ng.reshape(x, [1, 8, 3, 1]), "blocks_first", 2),
        lambda x: x.reshape(1, 2, 2, 2, 3, 1).transpose(0, 3, 4, 1, 5, 2).reshape(1, 2, 6, 2), X),
    "depth_to_space_depth_first": (
        lambda x: ng.depth_to_space(ng.reshape(x, [1, 8, 3, 1]), "depth_first", 2),
        lambda x: x.reshape(1, 2, 2, 2, 3, 1).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 6, 2), X),
    "space_to_depth": (lambda x: ng.space_to_depth(ng.reshape(x, [1, 2, 2, 6]), "blocks_first", 2),
                       lambda x: x.reshape(1, 2, 1, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4)
                       .reshape(1, 8, 1, 3), X),
    "mvn": (lambda x: ng.mvn(x, [1, 2], True, 1e-3),
            lambda x: (x - x.mean((1, 2), keepdims=True))
            / (np.sqrt(x.var((1, 2), keepdims=True)) + 1e-3), X),
    "mvn_mean_only": (lambda x: ng.mvn(x, [0], False, 1e-3),
                      lambda x: x - x.mean(0, keepdims=True), X),
    "grn": (lambda x: ng.grn(x, 0.5), lambda x: x / np.sqrt((x * x).sum(1, keepdims=True) + 0.5),
            X),
    "gemm": (lambda x: ng.gemm(ng.reshape(x, [6, 4]), ng.reshape(x, [6, 4]), np.ones(4), 0.5,
                               2.0, True, False),
             lambda x: 0.5 * x.reshape(6, 4).T @ x.reshape(6, 4) + 2.0, X),
}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_against_numpy(name):
    fn, ref, x = FUSED[name]
    np.testing.assert_allclose(run_fn(fn, x), ref(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_gradient(name):
    fn, _, x = FUSED[name]
    if name in ("clamp", "hard_sigmoid"):  # keep finite differences off the kinks
        x = np.where(np.abs(np.abs(x) - 0.5) < 0.05, x * 1.3, x)
    if name == "prelu":
        x = np.where(np.abs(x) < 0.05, 0.1, x)
    check_gradients(case(name, fn, x, rtol=1e-5, atol=1e-6))


def test_fused_names_and_dequantize():
    x = ng.parameter([3], np.uint8, name="q")
    y = ng.dequantize(x, 0.5, np.uint8(2), np.float32, name="dq")
    assert y.name == "dq" and y.dtype == np.float32
    np.testing.assert_allclose(run(y, [x], np.array([0, 2, 255], np.uint8)), [-1, 0, 126.5])
    assert ng.elu(ng.parameter([2]), 1.0, name="e").name == "e"


def test_fused_errors():
    p = ng.parameter([1, 4, 2, 2])
    with pytest.raises(ng.UserInputError, match=r"\[Squeeze\] axis 1 of shape \[1, 4, 2, 2\]"):
        ng.squeeze(p, [1])
    with pytest.raises(ng.UserInputError, match=r"\[ShuffleChannels\] groups 3"):
        ng.shuffle_channels(p, 1, 3)
    with pytest.raises(ng.UserInputError, match=r"\[DepthToSpace\] channels 4"):
        ng.depth_to_space(p, "blocks_first", 3)
    with pytest.raises(ng.UserInputError, match=r"\[SpaceToDepth\] mode"):
        ng.space_to_depth(p, "sideways", 2)
    with pytest.raises(ng.UserInputError, match=r"\[Clamp\] min_value 2"):
        ng.clamp(p, 2, 1)
    with pytest.raises(ng.NgraphTypeError, match=r"\[Elu\] data must be floating-point"):
        ng.elu(ng.parameter([2], np.int32), 1.0)
    with pytest.raises(ng.UserInputError, match=r"\[GRN\] data must have rank 2 to 4"):
        ng.grn(ng.parameter([4]), 1.0)
    assert ng.squeeze(p, []).shape == [4, 2, 2]
