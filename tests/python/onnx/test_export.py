"""ngraph.onnx.export: every exportable op against onnxruntime, the ONNX checker, round trips
through ngraph.onnx's importer (op cases and the graphs of the backend fuzzer), variables'
current values, and the ops with no ONNX equivalent.

Each case builds a small graph on parameters; the exported model must pass
``onnx.checker.check_model(full_check=True)``, and onnxruntime (CPU) must give ngraph's values.
Cases onnxruntime has no kernel for (f64 convolutions, ...) are checked and round-tripped only.

    NGRAPH_ONNX_FUZZ_CASES=300 python -m pytest tests/python/onnx/test_export.py -k fuzz
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import ngraph as ng
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ngraph import _ngraph  # noqa: E402
from ngraph.onnx import ONNXError, export  # noqa: E402
from ngraph.onnx.export import EXPORTED_OPS, NO_EQUIVALENT  # noqa: E402

CPU = ng.runtime("CPU")
FUZZ_CASES = int(os.environ.get("NGRAPH_ONNX_FUZZ_CASES", "100"))
FUZZ_LOW_CASES = int(os.environ.get("NGRAPH_ONNX_FUZZ_LOW_CASES", "40"))


def _fuzzer():
    """tests/python/test_fuzz_backends.py, the backend fuzzer (its graph generator)."""
    if "test_fuzz_backends" in sys.modules:
        return sys.modules["test_fuzz_backends"]
    path = Path(__file__).resolve().parent.parent / "test_fuzz_backends.py"
    spec = importlib.util.spec_from_file_location("test_fuzz_backends", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["test_fuzz_backends"] = module
    spec.loader.exec_module(module)
    return module


fuzz = _fuzzer()


# ------------------------------------------------------------------------------ the cases


class Case:
    """A graph: `build(*params)` gives its result nodes; `arrays` are the inputs."""

    def __init__(self, name, build, arrays, ort=True, rtol=1e-5, atol=1e-6, check=None):
        self.name, self.build, self.arrays = name, build, arrays
        self.ort, self.rtol, self.atol, self.check = ort, rtol, atol, check

    def graph(self):
        params = [ng.parameter(list(a.shape), a.dtype, name=f"in{i}")
                  for i, a in enumerate(self.arrays)]
        results = self.build(*params)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        return ng.Function(results, params, self.name), params


CASES: dict[str, Case] = {}
RNG = np.random.default_rng(20260101)


def data(shape, dtype=np.float32, kind="any"):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype.kind in "iu":
        low = 1 if kind == "positive" else (0 if dtype.kind == "u" else -9)
        return RNG.integers(low, 10, size=shape).astype(dtype)
    if kind == "positive":
        return RNG.uniform(0.5, 2.0, size=shape).astype(dtype)
    if kind == "unit":
        return RNG.uniform(-0.9, 0.9, size=shape).astype(dtype)
    return RNG.uniform(-2.0, 2.0, size=shape).astype(dtype)


def case(name, build, *arrays, **options):
    assert name not in CASES, name
    CASES[name] = Case(name, build, list(arrays), **options)


F, D, I32, I64 = np.float32, np.float64, np.int32, np.int64

# Elementwise.
for fn in [ng.negative, ng.absolute, ng.sign, ng.floor, ng.ceiling, ng.relu, ng.exp, ng.sin,
           ng.cos, ng.tan, ng.atan, ng.sinh, ng.cosh, ng.tanh, ng.sigmoid, ng.erf, ng.gelu,
           ng.stop_gradient]:
    case(f"unary_{fn.__name__}", fn, data([2, 3, 4]))
for fn in [ng.log, ng.sqrt]:
    case(f"unary_{fn.__name__}", fn, data([3, 4], kind="positive"))
for fn in [ng.asin, ng.acos]:
    case(f"unary_{fn.__name__}", fn, data([3, 4], kind="unit"))
for fn in [ng.negative, ng.absolute, ng.sign, ng.floor, ng.ceiling, ng.relu]:
    case(f"unary_{fn.__name__}_i32", fn, data([3, 4], I32))
case("unary_gelu_f64", ng.gelu, data([5], D), ort=False)
case("logical_not", ng.logical_not, data([3, 4], np.bool_))
for fn in [ng.add, ng.subtract, ng.multiply, ng.maximum, ng.minimum]:
    case(f"binary_{fn.__name__}", fn, data([2, 3, 4]), data([3, 1]))
    case(f"binary_{fn.__name__}_i64", fn, data([3, 4], I64), data([4], I64))
case("binary_divide", ng.divide, data([2, 3]), data([2, 3], kind="positive"))
case("binary_power", ng.power, data([2, 3], kind="positive"), data([2, 3]))
case("binary_power_i64", ng.power, data([2, 3], I64), data([2, 3], I64, "positive") % 4)
case("floor_divide_i32", ng.divide, np.array([7, -7, 7, -7, 6, -6, 0], I32),
     np.array([2, 2, -2, -2, 3, -3, 5], I32))
case("floor_divide_i64", ng.divide, data([4, 5], I64), data([5], I64, "positive") *
     np.array([1, -1, 1, -1, 1], I64))
for fn in [ng.equal, ng.not_equal, ng.greater, ng.greater_eq, ng.less, ng.less_eq]:
    case(f"compare_{fn.__name__}", fn, np.array([1, 2, 3, 4], F), np.array([2, 2, 2, 2], F))
    case(f"compare_{fn.__name__}_i32", fn, data([3, 4], I32), data([4], I32))
case("logical_and", ng.logical_and, data([3, 4], np.bool_), data([4], np.bool_))
case("logical_or", ng.logical_or, data([3, 4], np.bool_), data([3, 4], np.bool_))
case("select", ng.select, data([3, 4], np.bool_), data([3, 4]), data([4]))
case("convert_f32_i32", lambda x: ng.convert(x, I32), data([3, 4]) * 4)
case("convert_i32_f64", lambda x: ng.convert(x, D), data([3, 4], I32))
case("convert_bool", lambda x: ng.convert(x, np.bool_), np.array([0, 1.5, -2, 0], F))
case("convert_f16", lambda x: ng.convert(x, np.float16), data([3, 4]))
case("convert_bf16", lambda x: ng.convert(ng.convert(x, "bf16"), F), data([3, 4]))
case("variable", lambda x: ng.dot(x, ng.variable(np.arange(8, dtype=F).reshape(4, 2))),
     data([3, 4]))
case("constant", lambda x: x + ng.constant(np.arange(12, dtype=F).reshape(3, 4)), data([3, 4]))

# Contractions.
case("dot_matrix_vector", ng.dot, data([3, 4]), data([4]))
case("dot_matrix_matrix", ng.dot, data([3, 4]), data([4, 5]))
case("dot_scalar", ng.dot, data([]), data([2, 3]))
case("dot_outer", lambda a, b: ng.dot(a, b, 0), data([2, 3]), data([4]))
case("dot_two_axes", lambda a, b: ng.dot(a, b, 2), data([2, 3, 4]), data([3, 4, 5]))
case("dot_i32", ng.dot, data([3, 4], I32), data([4, 2], I32))
case("matmul_batched", ng.matmul, data([2, 3, 4]), data([4, 5]))
case("matmul_transposes", lambda a, b: ng.matmul(a, b, True, True), data([2, 4, 3]),
     data([2, 5, 4]))
case("matmul_vector", ng.matmul, data([4]), data([2, 4, 3]))

# Data movement.
case("reshape_transpose", lambda x: ng.reshape(x, [4, 6], [2, 0, 1]), data([2, 3, 4]))
case("reshape_only", lambda x: ng.reshape(x, [6, 4]), data([2, 3, 4]))
case("transpose_only", lambda x: ng.reshape(x, [4, 2, 3], [2, 0, 1]), data([2, 3, 4]))
case("broadcast_axes", lambda x: ng.broadcast(x, [2, 3, 4], {0, 2}), data([3]))
case("broadcast_to", lambda x: ng.broadcast_to(x, [2, 3, 4]), data([3, 1]))
case("slice", lambda x: ng.slice(x, [0, 1, 1], [2, 3, 4], [1, 1, 2]), data([2, 3, 4]))
case("concat", lambda a, b: ng.concat([a, b, a], 1), data([2, 3]), data([2, 1]))
for mode in ["constant", "edge", "reflect", "symmetric"]:
    case(f"pad_{mode}", lambda x, mode=mode: ng.pad(x, 2.5, [1, 2], [2, 0], pad_mode=mode),
         data([3, 4]))
    case(f"pad_{mode}_crop", lambda x, mode=mode: ng.pad(x, 1.0, [-1, 2], [1, -2],
                                                          pad_mode=mode), data([3, 4]))
case("pad_crop_reflect_far", lambda x: ng.pad(x, 0.0, [-2], [2], pad_mode="reflect"),
     data([3]))
case("reverse", lambda x: ng.reverse(x, [0, 2]), data([2, 3, 4]))
case("replace_slice", lambda d, s: ng.replace_slice(d, s, [0, 1], [3, 4], [2, 2]),
     data([3, 4]), data([2, 2]))
case("split", lambda x: ng.split(x, 1, [1, 2, 3]), data([2, 6]))
case("split_empty_part", lambda x: ng.split(x, 0, [0, 3])[1], data([3, 2]))
case("tile_more", lambda x: ng.tile(x, [2, 1, 3]), data([2, 3]))
case("tile_fewer", lambda x: ng.tile(x, [2]), data([2, 3]))
case("gather", lambda x: ng.gather(x, np.array([[2, -1], [0, 1]], I64), 1), data([2, 3, 4]))
case("gather_i32", lambda x: ng.gather(x, np.array([1, 0, 1], I32), -1), data([3, 2]))
case("embedding_lookup", lambda i, w: ng.embedding_lookup(i, w), np.array([[0, 2], [4, 0]], I32),
     data([5, 3]))
case("scatter_add", lambda d, u: ng.scatter_add(d, np.array([0, 2, 0], I64), u),
     data([4, 3]), data([3, 3]))
case("scatter_add_axis", lambda d, u: ng.scatter_add(d, np.array([[1, -1], [1, 0]], I32), u, 1),
     data([2, 3, 4]), data([2, 2, 2, 4]))
case("scatter_add_i64", lambda d, u: ng.scatter_add(d, np.array([1, 1], I64), u),
     data([3, 2], I64), data([2, 2], I64))

# Reductions and index reductions.
for fn in [ng.sum, ng.max, ng.min, ng.prod]:
    case(f"reduce_{fn.__name__}", lambda x, fn=fn: fn(x, [0, 2]), data([2, 3, 4]))
    case(f"reduce_{fn.__name__}_i32", lambda x, fn=fn: fn(x, [1]), data([3, 4], I32))
case("reduce_sum_no_axes", lambda x: ng.sum(x, []), data([2, 3]))
case("argmax", lambda x: ng.argmax(x, 1), data([3, 4]))
case("argmin_i64", lambda x: ng.argmin(x, 0, np.int64), data([3, 4], I32))
case("topk", lambda x: list(ng.topk(x, 2, 1)), data([3, 5]))
case("topk_min_i64", lambda x: list(ng.topk(x, 3, 0, False, index_element_type=np.int64)),
     data([4, 2]))
case("softmax", lambda x: ng.softmax(x, 1), data([2, 3, 4]))
case("softmax_axes", lambda x: ng.softmax(x, [0, 2]), data([2, 3, 4]))
case("one_hot", lambda x: ng.one_hot(x, [3, 4, 2], 1), np.array([[0, 1], [3, 2], [1, 1]], I32))
case("one_hot_f32", lambda x: ng.one_hot(x, [4, 5], 1), np.array([0, 4, 2, 1], F))

# Convolution and pooling.
case("conv2d", lambda x, w: ng.convolution(x, w), data([2, 3, 5, 5]), data([4, 3, 3, 3]),
     rtol=1e-4, atol=1e-5)
case("conv2d_window", lambda x, w: ng.convolution(x, w, [2, 1], [1, 2], [1, 0], [2, 1]),
     data([1, 2, 7, 6]), data([3, 2, 2, 3]), rtol=1e-4, atol=1e-5)
case("conv2d_groups", lambda x, w: ng.convolution(x, w, groups=2), data([1, 4, 5, 5]),
     data([6, 2, 3, 3]), rtol=1e-4, atol=1e-5)
case("conv2d_data_dilation", lambda x, w: ng.convolution(x, w, [1, 2], [1, 1], [0, 1], [1, 0],
                                                         [2, 3]),
     data([1, 2, 4, 4]), data([2, 2, 2, 3]), rtol=1e-4, atol=1e-5)
case("conv2d_negative_padding", lambda x, w: ng.convolution(x, w, None, None, [-1, 1], [1, -2]),
     data([1, 1, 6, 6]), data([1, 1, 2, 2]), rtol=1e-4, atol=1e-5)
case("conv1d", lambda x, w: ng.convolution(x, w, [2], [2], [1], [1]), data([2, 3, 9]),
     data([2, 3, 3]), rtol=1e-4, atol=1e-5)
case("conv3d", lambda x, w: ng.convolution(x, w), data([1, 2, 4, 4, 3]), data([2, 2, 2, 2, 2]),
     rtol=1e-4, atol=1e-5)
case("conv2d_f64", lambda x, w: ng.convolution(x, w), data([1, 2, 4, 4], D),
     data([2, 2, 2, 2], D), ort=False)
for g in (1, 2):
    window = dict(window_movement_strides_forward=[2, 1], window_dilation_strides_forward=[1, 2],
                  padding_below_forward=[1, 0], padding_above_forward=[0, 2],
                  data_dilation_strides_forward=[1, 2], groups=g)
    case(f"conv_backprop_data_g{g}",
         lambda w, d, window=window: ng.convolution_backprop_data([2, 4, 6, 5], w, d, **window),
         data([4, 4 // g, 3, 2]),
         data(ng.convolution(ng.parameter([2, 4, 6, 5]), ng.parameter([4, 4 // g, 3, 2]),
                             [2, 1], [1, 2], [1, 0], [0, 2], [1, 2], groups=g).shape),
         rtol=1e-4, atol=1e-5)
    case(f"conv_backprop_filters_g{g}",
         lambda x, d, window=window, g=g: ng.convolution_backprop_filters(
             x, [4, 4 // g, 3, 2], d, **window),
         data([2, 4, 6, 5]),
         data(ng.convolution(ng.parameter([2, 4, 6, 5]), ng.parameter([4, 4 // g, 3, 2]),
                             [2, 1], [1, 2], [1, 0], [0, 2], [1, 2], groups=g).shape),
         rtol=1e-4, atol=1e-5)
case("max_pool", lambda x: ng.max_pool(x, [2, 2], [2, 2]), data([2, 3, 6, 6]))
case("max_pool_padded_ceil", lambda x: ng.max_pool(x, [3, 2], [2, 2], [1, 1], [1, 0],
                                                   ceil_mode=True), data([1, 2, 6, 5]))


def _check_all_padding_windows(got, expected, inputs):
    """A window entirely in the padding: -inf in ngraph (and by ONNX's definition);
    onnxruntime starts its maximum from the lowest finite float instead."""
    (y,), (x,) = got, expected
    assert np.all(np.isneginf(x[..., [0, -1]]))
    x = np.where(np.isneginf(x), np.finfo(np.float32).min, x)
    np.testing.assert_array_equal(y, x)


case("max_pool_wide_padding", lambda x: ng.max_pool(x, [2], [1], [2], [2]), data([1, 2, 4]),
     check=_check_all_padding_windows)
case("avg_pool", lambda x: ng.avg_pool(x, [2, 2], [2, 2]), data([2, 3, 6, 6]))
case("avg_pool_exclude_padding", lambda x: ng.avg_pool(x, [3, 3], [2, 2], [1, 1], [1, 1]),
     data([1, 2, 6, 5]))
case("avg_pool_include_padding_ceil",
     lambda x: ng.avg_pool(x, [3, 2], [2, 2], [1, 0], [1, 1], True, ceil_mode=True),
     data([1, 2, 6, 5]))
case("avg_pool_wide_padding", lambda x: ng.avg_pool(x, [2], [1], [2], [2], True),
     data([1, 2, 4]))
case("avg_pool_wide_padding_ceil", lambda x: ng.avg_pool(x, [2, 2], [2, 2], [1, 1], [1, 1], True,
                                                         ceil_mode=True), data([1, 1, 4, 3]))
case("lrn", lambda x: ng.lrn(x, 0.1, 0.75, 1.0, 3), data([2, 5, 3, 3]))
case("lrn_even_size_rank3", lambda x: ng.lrn(x, 0.2, 0.5, 2.0, 2), data([2, 4, 3]))


def _grads(forward, *wrt_index):
    """The gradients of sum(forward(*params) * weights) with respect to parameters."""

    def build(*params):
        y = forward(*params)
        weights = ng.constant(np.linspace(-1, 1, int(np.prod(y.shape))).reshape(y.shape)
                              .astype(y.dtype))
        loss = ng.sum(y * weights, list(range(len(y.shape))))
        return ng.gradients(loss, [params[i] for i in wrt_index])

    return build


case("grad_max_pool", _grads(lambda x: ng.max_pool(x, [2, 2], [1, 2], [1, 0], [0, 1]), 0),
     data([1, 2, 5, 5]))
case("grad_avg_pool", _grads(lambda x: ng.avg_pool(x, [3, 2], [2, 1], [1, 1], [1, 0]), 0),
     data([1, 2, 5, 5]), rtol=1e-4, atol=1e-5)
case("grad_avg_pool_include", _grads(lambda x: ng.avg_pool(x, [2, 2], [2, 2], [1, 1], [1, 1],
                                                           True), 0), data([1, 2, 5, 4]),
     rtol=1e-4, atol=1e-5)
case("grad_convolution", _grads(lambda x, w: ng.convolution(x, w, [2, 1], [1, 1], [1, 0],
                                                            [0, 1]), 0, 1),
     data([2, 2, 5, 5]), data([3, 2, 2, 3]), rtol=1e-4, atol=1e-4)
case("grad_lrn", _grads(lambda x: ng.lrn(x, 0.1, 0.75, 1.0, 3), 0), data([2, 4, 3, 2]),
     rtol=1e-4, atol=1e-5)
case("grad_batch_norm", _grads(lambda x, g, b: ng.batch_norm(1e-3, g, b, x)[0], 0, 1, 2),
     data([3, 2, 2, 2]), data([2], kind="positive"), data([2]), rtol=1e-3, atol=1e-4)
case("grad_layer_norm", _grads(lambda x, g, b: ng.layer_norm(x, g, b, 1, 1e-3)[0], 0, 1, 2),
     data([3, 2, 4]), data([2, 4], kind="positive"), data([2, 4]), rtol=1e-3, atol=1e-4)
case("grad_layer_norm_plain", _grads(lambda x: ng.layer_norm(x, None, None, -1, 1e-3)[0], 0),
     data([3, 5]), rtol=1e-3, atol=1e-4)

# Normalization, dropout.
case("batch_norm_inference", lambda x, g, b, m, v: ng.batch_norm(1e-3, g, b, x, m, v),
     data([2, 3, 4]), data([3]), data([3]), data([3]), data([3], kind="positive"),
     rtol=1e-4, atol=1e-5)
case("batch_norm_training", lambda x, g, b: list(ng.batch_norm(1e-3, g, b, x)),
     data([4, 3, 2, 2]), data([3]), data([3]), rtol=1e-4, atol=1e-5)
case("layer_norm", lambda x, g, b: ng.layer_norm(x, g, b, -1, 1e-3)[0],
     data([2, 3, 4]), data([4]), data([4]), rtol=1e-4, atol=1e-5)
case("layer_norm_stats", lambda x: list(ng.layer_norm(x, None, None, 1, 1e-3)),
     data([2, 3, 4]), rtol=1e-4, atol=1e-5)
case("layer_norm_flat_scale", lambda x, g, b: ng.layer_norm(x, g, b, 1)[0],
     data([2, 3, 2]), data([6]), data([6]), rtol=1e-4, atol=1e-5)


def _check_dropout(got, expected, inputs):
    """onnxruntime draws another mask: each element is 0 or x / (1 - p), the mask 0 or
    1 / (1 - p), consistently."""
    (x,) = inputs
    y, mask = got
    scale = 1 / (1 - 0.25)
    assert set(np.unique(mask)) <= {0, np.float32(scale)}
    np.testing.assert_allclose(y, x * mask, rtol=1e-6)
    assert 0 < np.count_nonzero(mask) < mask.size


def _dropout_and_mask(x):
    y = ng.dropout(x, 0.25, seed=7)
    return [y, y.inputs()[0][1]]


case("dropout", _dropout_and_mask, data([40, 40]), check=_check_dropout)


# ------------------------------------------------------------------------------ helpers


def run_ngraph(fn, arrays):
    return CPU.computation(fn)(*arrays)


def run_onnxruntime(path, arrays):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arrays)))


def compare(got, expected, rtol, atol, what):
    assert len(got) == len(expected), what
    for i, (g, x) in enumerate(zip(got, expected)):
        g, x = np.asarray(g), np.asarray(x)
        assert g.shape == x.shape, f"{what}: output {i} shape {g.shape} vs {x.shape}"
        assert g.dtype == x.dtype, f"{what}: output {i} dtype {g.dtype} vs {x.dtype}"
        if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64), x.astype(np.float64), rtol=rtol,
                                       atol=atol, err_msg=f"{what}: output {i}")
        else:
            np.testing.assert_array_equal(g, x, err_msg=f"{what}: output {i}")


def export_checked(fn, path, opset=18):
    export(fn, path, opset)
    onnx.checker.check_model(str(path), full_check=True)
    return path


# ---------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("name", sorted(CASES))
def test_export_matches_onnxruntime(name, tmp_path):
    c = CASES[name]
    fn, _ = c.graph()
    expected = run_ngraph(fn, c.arrays)
    path = export_checked(fn, tmp_path / f"{name}.onnx")
    if not c.ort:
        pytest.skip("onnxruntime has no CPU kernel for this op and type (checked only)")
    got = run_onnxruntime(path, c.arrays)
    if c.check:
        c.check(got, expected, c.arrays)
    else:
        compare(got, expected, c.rtol, c.atol, name)


@pytest.mark.parametrize("opset", range(13, 22))
def test_opsets(opset, tmp_path):
    """Every case at every opset from 13 to 21: the checker accepts it, onnxruntime agrees
    (MaxPoolBackprop needs opset 16 and raises below)."""
    for name, c in sorted(CASES.items()):
        fn, _ = c.graph()
        path = tmp_path / f"{name}.onnx"
        types = {n.get_type_name() for n in _ops_of(fn)}
        if opset < 16 and "MaxPoolBackprop" in types:
            with pytest.raises(ONNXError, match="MaxPoolBackprop"):
                export(fn, path, opset)
            continue
        export_checked(fn, path, opset)
        if not c.ort or c.check:
            continue
        expected = run_ngraph(fn, c.arrays)
        compare(run_onnxruntime(path, c.arrays), expected, c.rtol, c.atol, f"{name} @{opset}")


def test_opset_out_of_range(tmp_path):
    x = ng.parameter([2])
    for bad in (12, 1000, "18", True):
        with pytest.raises(ONNXError, match="opset"):
            export(ng.relu(x), tmp_path / "m.onnx", bad)


def test_inputs_outputs_and_names(tmp_path):
    """Inputs in the function's order with their names and types; outputs in order, also
    when a result is an input itself or repeats."""
    x = ng.parameter([2, 3], np.float32, name="x")
    k = ng.parameter([3], np.int64, name="k")
    y = ng.relu(x)
    fn = ng.Function([y, x, y, ng.convert(k, np.float32)], [x, k], "f")
    model = export(fn, tmp_path / "m.onnx")
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["x", "k"]
    assert model.graph.input[1].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert len(model.graph.output) == 4
    a, b = data([2, 3]), np.array([1, 2, 3], np.int64)
    compare(run_onnxruntime(tmp_path / "m.onnx", [a, b]), CPU.computation(fn)(a, b), 0, 0, "io")


def test_computation_and_trained_variables(tmp_path):
    """A computation exports its function; variables are initializers holding their current
    values (after training steps), so the model computes what the trained graph does."""
    w = ng.variable(np.zeros((3, 2), np.float32), name="w")
    b = ng.variable(np.zeros(2, np.float32), name="b")
    x = ng.parameter([4, 3], name="x")
    t = ng.parameter([4, 2], name="t")
    y = ng.dot(x, w) + b
    loss = ng.sum((y - t) * (y - t), [0, 1])
    gw, gb = ng.gradients(loss, [w, b])
    step = CPU.computation(loss, x, t, updates=[(w, w - 0.01 * gw), (b, b - 0.01 * gb)])
    xs, ts = data([4, 3]), data([4, 2])
    for _ in range(5):
        step(xs, ts)
    assert np.any(w.get_value() != 0)
    infer = CPU.computation(y, x)
    model = export(infer, tmp_path / "m.onnx")
    values = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    np.testing.assert_array_equal(values["w"], w.get_value())
    np.testing.assert_array_equal(values["b"], b.get_value())
    compare(run_onnxruntime(tmp_path / "m.onnx", [xs]), infer(xs), 1e-5, 1e-6, "trained")
    # The training step has variable updates: they have no ONNX counterpart.
    with pytest.raises(ONNXError, match="Assign"):
        export(step, tmp_path / "step.onnx")
    export(step, tmp_path / "step.onnx", drop_updates=True)
    onnx.checker.check_model(str(tmp_path / "step.onnx"), full_check=True)
    got = run_onnxruntime(tmp_path / "step.onnx", [xs, ts])
    ref = CPU.computation(loss, x, t)(xs, ts)
    compare(got, ref, 1e-5, 1e-5, "loss")


def test_no_equivalent_raises_naming_the_op(tmp_path):
    x = ng.parameter([4], name="x")
    node = ng.allreduce(ng.relu(x), name="sync")
    with pytest.raises(ONNXError, match=r"AllReduce node 'sync'.*no ONNX equivalent"):
        export(node, tmp_path / "m.onnx")
    assert isinstance(ONNXError("x"), ValueError)
    with pytest.raises(ONNXError, match="AllGather node"):
        export([ng.relu(x), ng.allgather(ng.exp(x))], tmp_path / "m.onnx")


def test_every_op_is_exported_or_listed():
    """Every ngraph op is exported, with a case here, or listed as having no ONNX
    equivalent: a new op without export support fails this test."""
    covered = {"Parameter", "Result"}
    for c in CASES.values():
        fn, _ = c.graph()
        covered |= {n.get_type_name() for n in _ops_of(fn)}
    missing = []
    for op in _ngraph.op_names():
        if op in NO_EQUIVALENT:
            assert op not in EXPORTED_OPS, op
        elif op not in EXPORTED_OPS:
            missing.append(f"{op} (not exported, not in NO_EQUIVALENT)")
        elif op not in covered:
            missing.append(f"{op} (exported, but no test case)")
    assert not missing, missing


def _ops_of(fn):
    seen, stack, out = set(), list(fn.get_results()), []
    while stack:
        n = stack.pop()
        if n.get_instance_id() in seen:
            continue
        seen.add(n.get_instance_id())
        out.append(n)
        stack.extend(n.inputs())
    return out


# ---------------------------------------------------------------------------- round trips


def _import(path):
    from ngraph.onnx import import_onnx_model  # noqa: PLC0415

    return import_onnx_model(str(path))


def round_trip(fn, arrays, path, rtol, atol, what, precision=None):
    expected = run_ngraph(fn, arrays)
    export(fn, path)
    fn = _import(path)
    got = CPU.computation(fn)(*arrays)
    if precision is not None:
        assert len(got) == len(expected), what
        for i, (g, x) in enumerate(zip(got, expected)):
            fuzz.compare(g, x, precision, f"{what}: output {i}")
    else:
        compare(got, expected, rtol, atol, what)


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip(name, tmp_path):
    """import(export(f)) computes what f does (the dropout mask too: the seed travels)."""
    c = CASES[name]
    fn, _ = c.graph()
    round_trip(fn, c.arrays, tmp_path / "m.onnx", c.rtol, c.atol, name)


def _fuzz_graph(case):
    b, results, loss = fuzz.build_case(np.random.default_rng([fuzz.SEED, case]))
    outputs = list(results)
    if loss is not None:
        wrt = [p for p in b.params if np.dtype(p.dtype).kind == "f"]
        try:
            outputs += ng.gradients(loss, wrt)
        except ng.NoGradientError:
            pass
    what = f"fuzz seed {fuzz.SEED} case {case}; graph:\n  " + "\n  ".join(b.steps)
    return b, ng.Function(outputs, b.params, f"fuzz{case}"), what


@pytest.mark.parametrize("case", range(FUZZ_CASES), ids=lambda c: f"fuzz{c}")
def test_round_trip_fuzz(case, tmp_path):
    """The backend fuzzer's random graphs (with their gradients) survive export and import."""
    b, fn, what = _fuzz_graph(case)
    round_trip(fn, b.inputs, tmp_path / "m.onnx", 0, 0, what, b.precision)


@pytest.mark.parametrize("case", range(FUZZ_CASES), ids=lambda c: f"fuzz{c}")
def test_fuzz_onnxruntime(case, tmp_path):
    """The fuzzer's graphs (with their gradients) on onnxruntime, where it has the kernels."""
    b, fn, what = _fuzz_graph(case)
    expected = run_ngraph(fn, b.inputs)
    export_checked(fn, tmp_path / "m.onnx")
    try:
        got = run_onnxruntime(tmp_path / "m.onnx", b.inputs)
    except Exception as e:  # onnxruntime's own errors
        if "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e):
            pytest.skip(f"onnxruntime lacks a kernel: {str(e)[:200]}")
        raise
    dropout = any(n.get_type_name() == "Dropout" for n in _ops_of(fn))
    if dropout:
        pytest.skip("dropout: onnxruntime draws another mask")
    for i, (g, x) in enumerate(zip(got, expected)):
        fuzz.compare(g, x, b.precision, f"{what}: output {i}")


@pytest.mark.parametrize("case", range(FUZZ_LOW_CASES), ids=lambda c: f"low{c}")
def test_round_trip_fuzz_f16_bf16(case, tmp_path):
    """The f16/bf16 fuzzer's data-movement graphs survive export and import bit for bit."""
    p, x, outs, steps = fuzz.build_low_case(np.random.default_rng([fuzz.SEED, 1, case]))
    fn = ng.Function(outs, [p], f"low{case}")
    expected = run_ngraph(fn, [x])
    export(fn, tmp_path / "m.onnx")
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)
    got = CPU.computation(_import(tmp_path / "m.onnx"))(x)
    for i, (a, r) in enumerate(zip(got, expected)):
        assert a.dtype == r.dtype and a.shape == r.shape, f"output {i}: {steps}"
        np.testing.assert_array_equal(a, r, err_msg=f"output {i} differs: {steps}")
