"""Every op function of ``ngraph`` against NumPy, run on every backend (CPU and INTERPRETER,
see conftest.py).

Each test builds a graph on parameters, compiles it with
``RUNTIME.computation(node, *params)`` (RUNTIME is each backend's in turn) and compares the
result of calling it on NumPy arrays with what NumPy computes.
"""

import math

import ngraph as ng
import numpy as np
import pytest

RUNTIME = ng.runtime(backend_name="CPU")

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS
ALL_TYPES = NUMERIC + [np.bool_]


def dtype_id(dtype):
    return np.dtype(dtype).name


def shape_id(shape):
    return "x".join(map(str, shape)) if shape else "scalar"


def run(node, params, *arrays):
    """Compiles `node` on `params` and calls it on `arrays`."""
    return RUNTIME.computation(node, *params)(*arrays)[0]


def run_with_params(fn, *arrays):
    """fn(*params) for one parameter per array (of its shape and dtype), run on `arrays`."""
    params = [ng.parameter(a.shape, dtype=a.dtype, name=f"p{i}") for i, a in enumerate(arrays)]
    return run(fn(*params), params, *arrays)


def data(shape, dtype, kind="any", seed=0):
    """Random test data: kind 'any', 'positive' or 'nonzero'."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind == "i":
        if kind == "positive":
            values = rng.integers(1, 10, size=shape)
        elif kind == "nonzero":
            values = rng.integers(1, 10, size=shape) * rng.choice([-1, 1], size=shape)
        else:
            values = rng.integers(-9, 10, size=shape)
        return np.asarray(values, dtype=dtype)
    if kind == "positive":
        values = rng.uniform(0.1, 3.0, size=shape)
    elif kind == "nonzero":
        values = rng.uniform(0.5, 3.0, size=shape) * rng.choice([-1, 1], size=shape)
    else:
        values = rng.standard_normal(size=shape)
    return np.asarray(values, dtype=dtype)


def check(got, expected, dtype=None, rtol=None, atol=None):
    """Asserts shape, dtype and values (exact for integers and booleans)."""
    expected = np.asarray(expected)
    if dtype is not None:
        expected = expected.astype(dtype)
    assert isinstance(got, np.ndarray)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if expected.dtype.kind == "f":
        if rtol is None:
            rtol = 1e-5 if expected.dtype == np.float32 else 1e-12
        if atol is None:
            atol = 1e-6 if expected.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, expected)


# ------------------------------------------------------------------ binary elementwise

# Shape pairs that broadcast NumPy-style: equal, rank-0 scalars, size-1 axes, zero-size
# axes, and a bias added to a batch (both ways round).
BROADCAST_SHAPES = [
    ((2, 3), (2, 3)),
    ((), ()),
    ((4,), ()),
    ((), (4,)),
    ((2, 3), ()),
    ((2, 1, 3), (4, 1)),
    ((3, 1), (1, 4)),
    ((1, 1, 7), (2, 3, 1)),
    ((2, 3, 4, 5), (3, 1, 5)),
    ((0, 3), (1, 3)),
    ((0, 3), (3,)),
    ((1,), (0,)),
    ((2, 0), (2, 1)),
    ((128, 600), (600,)),
    ((600,), (128, 600)),
]
SHAPE_IDS = [f"{shape_id(a)}-{shape_id(b)}" for a, b in BROADCAST_SHAPES]

ARITHMETIC = [
    (ng.add, np.add),
    (ng.subtract, np.subtract),
    (ng.multiply, np.multiply),
    (ng.maximum, np.maximum),
    (ng.minimum, np.minimum),
]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("ng_fn,np_fn", ARITHMETIC, ids=lambda f: f.__name__)
def test_arithmetic(ng_fn, np_fn, dtype, shapes):
    a, b = data(shapes[0], dtype, seed=1), data(shapes[1], dtype, seed=2)
    check(run_with_params(ng_fn, a, b), np_fn(a, b), dtype)


def test_add_bias_to_batch():
    """The `h + b` of a dense layer: a {128,600} batch plus a {600} bias."""
    h = ng.parameter([128, 600], name="h")
    b = ng.parameter([600], name="b")
    hv, bv = data((128, 600), np.float32, seed=3), data((600,), np.float32, seed=4)
    check(run(h + b, [h, b], hv, bv), hv + bv)
    check(run(b + h, [h, b], hv, bv), bv + hv)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_divide_float(dtype, shapes):
    a, b = data(shapes[0], dtype, seed=1), data(shapes[1], dtype, "nonzero", seed=2)
    check(run_with_params(ng.divide, a, b), a / b, dtype)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", INTS, ids=dtype_id)
def test_divide_int_is_floor_division(dtype, shapes):
    a, b = data(shapes[0], dtype, seed=1), data(shapes[1], dtype, "nonzero", seed=2)
    check(run_with_params(ng.divide, a, b), a // b, dtype)


@pytest.mark.parametrize("dtype", INTS, ids=dtype_id)
def test_divide_int_signs(dtype):
    a = np.array([7, -7, 7, -7, 6, -6, 0, 1, -1], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, -3, 5, -3, 3], dtype=dtype)
    got = run_with_params(ng.divide, a, b)
    check(got, a // b, dtype)
    assert got.tolist() == [int(x) // int(y) for x, y in zip(a, b)]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES[:9], ids=SHAPE_IDS[:9])
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_power_float(dtype, shapes):
    a = data(shapes[0], dtype, "positive", seed=1)
    b = np.asarray(np.random.default_rng(2).uniform(-2, 2, size=shapes[1]), dtype=dtype)
    check(run_with_params(ng.power, a, b), np.power(a, b), dtype)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES[:9], ids=SHAPE_IDS[:9])
@pytest.mark.parametrize("dtype", INTS, ids=dtype_id)
def test_power_int(dtype, shapes):
    a = np.asarray(np.random.default_rng(1).integers(-5, 6, size=shapes[0]), dtype=dtype)
    b = np.asarray(np.random.default_rng(2).integers(0, 6, size=shapes[1]), dtype=dtype)
    check(run_with_params(ng.power, a, b), np.power(a, b), dtype)


COMPARISONS = [
    (ng.equal, np.equal),
    (ng.not_equal, np.not_equal),
    (ng.greater, np.greater),
    (ng.greater_eq, np.greater_equal),
    (ng.less, np.less),
    (ng.less_eq, np.less_equal),
]
COMPARISON_SHAPES = [((2, 3), (2, 3)), ((), ()), ((4, 1), (3,)), ((0, 2), (2,)), ((5,), ())]


@pytest.mark.parametrize("shapes", COMPARISON_SHAPES,
                         ids=[f"{shape_id(a)}-{shape_id(b)}" for a, b in COMPARISON_SHAPES])
@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("ng_fn,np_fn", COMPARISONS, ids=lambda f: f.__name__)
def test_comparison(ng_fn, np_fn, dtype, shapes):
    # Small integers so that equal values occur.
    a = np.asarray(np.random.default_rng(1).integers(-2, 3, size=shapes[0]), dtype=dtype)
    b = np.asarray(np.random.default_rng(2).integers(-2, 3, size=shapes[1]), dtype=dtype)
    check(run_with_params(ng_fn, a, b), np_fn(a, b), np.bool_)


@pytest.mark.parametrize("ng_fn,np_fn", COMPARISONS[:2], ids=lambda f: f.__name__)
def test_equality_of_booleans(ng_fn, np_fn):
    a, b = data((3, 4), np.bool_, seed=1), data((4,), np.bool_, seed=2)
    check(run_with_params(ng_fn, a, b), np_fn(a, b), np.bool_)


@pytest.mark.parametrize("ng_fn,np_fn", COMPARISONS, ids=lambda f: f.__name__)
def test_comparison_with_nan(ng_fn, np_fn):
    a = np.array([np.nan, 1.0, np.nan, 2.0], dtype=np.float32)
    b = np.array([np.nan, np.nan, 1.0, 2.0], dtype=np.float32)
    check(run_with_params(ng_fn, a, b), np_fn(a, b), np.bool_)


LOGICAL = [(ng.logical_and, np.logical_and), (ng.logical_or, np.logical_or)]


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((), ()), ((4, 1), (3,)), ((0,), (1,))],
                         ids=["same", "scalar", "broadcast", "empty"])
@pytest.mark.parametrize("ng_fn,np_fn", LOGICAL, ids=lambda f: f.__name__)
def test_logical_binary(ng_fn, np_fn, shapes):
    a, b = data(shapes[0], np.bool_, seed=1), data(shapes[1], np.bool_, seed=2)
    check(run_with_params(ng_fn, a, b), np_fn(a, b), np.bool_)


@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4), (17,)], ids=shape_id)
def test_logical_not(shape):
    a = data(shape, np.bool_)
    check(run_with_params(ng.logical_not, a), np.logical_not(a), np.bool_)


# ------------------------------------------------------------------- unary elementwise

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_],
                         ids=dtype_id)
def test_stop_gradient_is_identity(dtype):
    x = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    check(run_with_params(ng.stop_gradient, x), x, dtype)


UNARY_SHAPES = [(), (5,), (2, 3, 4), (0, 3), (1000,)]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _erf(x):
    return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _relu(x):
    return np.maximum(x, np.zeros((), dtype=x.dtype))


NUMERIC_UNARY = [
    (ng.negative, np.negative),
    (ng.absolute, np.absolute),
    (ng.abs, np.abs),
    (ng.sign, np.sign),
    (ng.floor, np.floor),
    (ng.ceiling, np.ceil),
    (ng.ceil, np.ceil),
    (ng.relu, _relu),
]
FLOAT_UNARY = [
    (ng.exp, np.exp, "any"),
    (ng.log, np.log, "positive"),
    (ng.sqrt, np.sqrt, "positive"),
    (ng.sin, np.sin, "any"),
    (ng.cos, np.cos, "any"),
    (ng.tanh, np.tanh, "any"),
    (ng.sigmoid, _sigmoid, "any"),
    (ng.erf, lambda x: _erf(x), "any"),
    (ng.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), "any"),
]


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("ng_fn,np_fn", NUMERIC_UNARY, ids=lambda f: f.__name__)
def test_numeric_unary(ng_fn, np_fn, dtype, shape):
    a = data(shape, dtype) * (3 if np.dtype(dtype).kind == "f" else 1)
    if np_fn in (np.floor, np.ceil) and np.dtype(dtype).kind == "i":
        expected = a  # integers are their own floor and ceiling
    else:
        expected = np_fn(a)
    check(run_with_params(ng_fn, a), expected, dtype)


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("ng_fn,np_fn,kind", FLOAT_UNARY, ids=lambda f: getattr(f, "__name__", f))
def test_float_unary(ng_fn, np_fn, kind, dtype, shape):
    a = data(shape, dtype, kind) * (2 if kind == "any" else 1)
    # oneDNN's f32 eltwise kernels are accurate to a few ulp, not correctly rounded.
    f32 = dtype == np.float32
    check(run_with_params(ng_fn, a), np_fn(a), dtype, rtol=1e-5 if f32 else 1e-12,
          atol=1e-5 if f32 else 1e-12)


def test_gelu_and_its_fused_gradient_against_double_math_and_finite_differences():
    """f32 GELU and its gradient (one fused kernel: an erf and an exp per element, the fast
    f32 erf and exp of scalar_ops.hpp, 16 lanes a loop on AVX-512) on a dense grid over
    [-6, 6] against the math in double, and the gradient against central differences of the
    forward in f32 (the forward and backward kernels agree)."""
    x = np.linspace(-6, 6, 20001).astype(np.float32)
    p = ng.parameter(x.shape)
    w = ng.parameter(x.shape)
    y = ng.gelu(p)
    (grad,) = ng.gradients(ng.sum(y * w), [p])
    fwd = RUNTIME.computation(y, p)
    comp = RUNTIME.computation([y, grad], p, w)
    got_y, got_g = comp(x, np.ones_like(x))
    xd = x.astype(np.float64)
    phi = 0.5 * (1 + _erf(xd / math.sqrt(2)))
    np.testing.assert_allclose(got_y, xd * phi, rtol=1e-6, atol=5e-7)  # 1 + erf cancels below 0
    want_g = phi + xd * np.exp(-xd * xd / 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-6, atol=5e-7)
    h = np.float32(1 / 64)  # exact steps: the differences carry only the forward's rounding
    fd = (fwd(x + h)[0].astype(np.float64) - fwd(x - h)[0]) / (2 * h)
    np.testing.assert_allclose(got_g, fd, atol=2e-4)


def _nan_at_1(size, dtype):
    a = np.linspace(-3, 3, size).astype(dtype)
    a[1] = np.nan
    return a


@pytest.mark.parametrize("size", [5, 8192])  # a loop kernel, and oneDNN's for f32
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("ng_fn", [ng.relu, ng.gelu, ng.erf, ng.sign], ids=lambda f: f.__name__)
def test_nan_propagates(ng_fn, dtype, size):
    """NaN in, NaN out, as in NumPy and PyTorch (oneDNN's eltwise ReLU maps NaN to 0, so ReLU
    does not use it; sign(NaN) used to be 0)."""
    got = run_with_params(ng_fn, _nan_at_1(size, dtype))
    assert np.isnan(got[1])
    assert not np.isnan(np.delete(got, 1)).any()


@pytest.mark.parametrize("shape,axis", [((4,), 0), ((3, 4), 1), ((4, 3), 0), ((64, 1000), 1)])
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_softmax_row_with_nan_is_nan(shape, axis, dtype):
    """A NaN makes its whole softmax row NaN (NumPy's formula and PyTorch's result); the other
    rows are untouched. oneDNN's softmax gave [0, NaN, 0, 0] for [1, NaN, 3, -1]."""
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    index = (1,) * len(shape)
    a[index] = np.nan
    got = run_with_params(lambda x: ng.softmax(x, [axis]), a)
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    expected = e / e.sum(axis=axis, keepdims=True)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    ok = ~np.isnan(expected)
    np.testing.assert_allclose(got[ok], expected[ok], rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_sign_of_nan_is_nan(dtype):
    a = np.array([np.nan, -2.0, 0.0, 3.0], dtype=dtype)
    check(run_with_params(ng.sign, a), np.sign(a), dtype)


# NaN through windows and softmax: NumPy's max and exp propagate it (the INTERPRETER does).
# (graph, NumPy, what the CPU backend does instead: a known difference, reported; None: the
# CPU backend must propagate it too).
NAN_WINDOW_CASES = {
    "max_pool": (lambda p: ng.max_pool(p, [2], [1]),
                 lambda x: np.stack([np.max(x[..., i:i + 2], axis=-1) for i in range(3)], -1),
                 None),
    "softmax": (lambda p: ng.softmax(p, [2]),
                lambda x: np.exp(x - x.max(-1, keepdims=True))
                / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True),
                "oneDNN's f32 softmax gives 0 beside a NaN instead of NaN"),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("case", sorted(NAN_WINDOW_CASES))
def test_nan_in_windows_and_softmax(case, dtype, backend):
    ng_fn, np_fn, cpu_difference = NAN_WINDOW_CASES[case]
    x = np.array([[[1.0, np.nan, 3.0, 0.0]]], dtype=dtype)
    got, expected = run_with_params(ng_fn, x), np_fn(x)
    nan_differs = not np.array_equal(np.isnan(got), np.isnan(expected))
    if backend == "CPU" and cpu_difference and nan_differs:
        pytest.xfail(f"known: {cpu_difference}; NumPy and the INTERPRETER propagate it")
    check(got, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_float_unary_special_values(dtype):
    a = np.array([0.0, -0.0, np.inf, -np.inf, 2.5, -2.5, -0.5, 0.5], dtype=dtype)
    for ng_fn, np_fn in [(ng.floor, np.floor), (ng.ceiling, np.ceil), (ng.absolute, np.abs),
                         (ng.negative, np.negative), (ng.relu, _relu)]:
        check(run_with_params(ng_fn, a), np_fn(a), dtype)
    check(run_with_params(ng.sigmoid, np.array([-1000, 1000, 0], dtype=dtype)),
          np.array([0.0, 1.0, 0.5]), dtype)
    check(run_with_params(ng.tanh, np.array([-1000, 1000], dtype=dtype)), [-1.0, 1.0], dtype)
    check(run_with_params(ng.exp, np.array([-np.inf, 0], dtype=dtype)), [0.0, 1.0], dtype)


# ---------------------------------------------------------------------- contractions

DOT_CASES = [
    # (shape_a, shape_b, reduction_axes_count)
    ((3,), (3,), None),  # dot of vectors: a scalar
    ((2, 3), (3,), None),  # matrix-vector
    ((3,), (3, 4), None),  # vector-matrix
    ((2, 3), (3, 4), None),  # matrix-matrix
    ((2, 3, 4), (4, 5), None),  # default 1 for tensors
    ((), (2, 3), None),  # a scalar: default 0, scales
    ((2, 3), (), None),
    ((), (), None),
    ((2,), (3,), 0),  # outer product
    ((2, 3), (4,), 0),
    ((), (3,), 0),
    ((2, 3, 4), (4, 5), 1),
    ((2, 3, 4), (3, 4, 5), 2),
    ((3, 4), (3, 4), 2),  # full contraction: a scalar
    ((2, 3, 4), (2, 3, 4), 3),
    ((2, 0), (0, 3), None),  # empty contraction: zeros
    ((0, 3), (3, 4), None),
    ((64, 128), (128, 32), None),
]


def _dot_reference(a, b, count):
    if count is None:
        count = 0 if a.ndim == 0 or b.ndim == 0 else 1
    return np.tensordot(a, b, axes=count)


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("shape_a,shape_b,count", DOT_CASES,
                         ids=[f"{shape_id(a)}-{shape_id(b)}-{c}" for a, b, c in DOT_CASES])
def test_dot(shape_a, shape_b, count, dtype):
    a, b = data(shape_a, dtype, seed=1), data(shape_b, dtype, seed=2)
    got = run_with_params(lambda x, y: ng.dot(x, y, count), a, b)
    check(got, _dot_reference(a, b, count), dtype, rtol=1e-4 if dtype == np.float32 else None,
          atol=1e-4 if dtype == np.float32 else None)


MATMUL_CASES = [
    # (shape_a, shape_b, transpose_a, transpose_b)
    ((2, 3), (3, 4), False, False),
    ((3, 2), (3, 4), True, False),
    ((2, 3), (4, 3), False, True),
    ((3, 2), (4, 3), True, True),
    ((3,), (3, 4), False, False),
    ((2, 3), (3,), False, False),
    ((3,), (3,), False, False),
    ((3,), (4, 3), False, True),
    ((3,), (3, 4), True, False),  # transpose of a 1-D argument is ignored
    ((2, 3), (3,), False, True),
    ((5, 2, 3), (3, 4), False, False),
    ((4, 2, 3), (3,), False, False),
    ((3,), (4, 3, 2), False, False),
    ((2, 1, 2, 3), (5, 3, 4), False, False),
    ((2, 1, 3, 2), (5, 4, 3), True, True),
    ((7, 1, 2, 3), (1, 6, 3, 5), False, False),
    ((2, 0), (0, 3), False, False),
    ((0, 3), (3, 4), False, False),
    ((0, 4, 1, 2), (4, 1, 2), False, True),  # an empty batch axis broadcast against 4
    ((64, 128), (128, 32), False, False),
    ((128, 64), (32, 128), True, True),
]


def _matmul_reference(a, b, ta, tb):
    if ta and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if tb and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("shape_a,shape_b,ta,tb", MATMUL_CASES,
                         ids=[f"{shape_id(a)}-{shape_id(b)}-{int(ta)}{int(tb)}"
                              for a, b, ta, tb in MATMUL_CASES])
def test_matmul(shape_a, shape_b, ta, tb, dtype):
    a, b = data(shape_a, dtype, seed=1), data(shape_b, dtype, seed=2)
    got = run_with_params(lambda x, y: ng.matmul(x, y, ta, tb), a, b)
    check(got, _matmul_reference(a, b, ta, tb), dtype,
          rtol=1e-4 if dtype == np.float32 else None, atol=1e-4 if dtype == np.float32 else None)


def test_matmul_keywords_and_operator():
    a, b = data((3, 2), np.float32, seed=1), data((4, 3), np.float32, seed=2)
    got = run_with_params(lambda x, y: ng.matmul(x, y, transpose_a=True, transpose_b=True), a, b)
    check(got, a.T @ b.T)
    x, y = data((2, 3), np.float32), data((3, 4), np.float32)
    check(run_with_params(lambda p, q: p @ q, x, y), x @ y)


# ----------------------------------------------------------------------- data movement


def _broadcast_reference(x, shape, axes):
    for axis in sorted(axes):
        x = np.expand_dims(x, axis)
    return np.broadcast_to(x, shape)


BROADCAST_AXES_CASES = [
    ((3,), [2, 3], {0}),
    ((2,), [2, 3], {1}),
    ((2, 4), [2, 3, 4], [1]),
    ((), [2, 3], {0, 1}),
    ((2, 3), [2, 3], set()),
    ((3,), [2, 3, 4], (0, 2)),
    ((3,), [0, 3], {0}),
    ((1, 3), [1, 5, 3], {1}),
]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,new_shape,axes", BROADCAST_AXES_CASES,
                         ids=[f"{shape_id(s)}-{shape_id(n)}-{sorted(a)}"
                              for s, n, a in BROADCAST_AXES_CASES])
def test_broadcast_with_axes(shape, new_shape, axes, dtype):
    x = data(shape, dtype)
    got = run_with_params(lambda p: ng.broadcast(p, new_shape, broadcast_axes=axes), x)
    check(got, _broadcast_reference(x, new_shape, axes), dtype)


BROADCAST_AXIS_CASES = [
    # (shape, new_shape, axis): the input's axes start at `axis`
    ((3,), [2, 3, 4], 1),
    ((3,), [3, 4], 0),
    ((3,), [4, 3], 1),
    ((2, 3), [2, 3, 4], 0),
    ((1, 3), [5, 2, 3], 1),  # size-1 axes stretch
]


@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=dtype_id)
@pytest.mark.parametrize("shape,new_shape,axis", BROADCAST_AXIS_CASES,
                         ids=[f"{shape_id(s)}-{shape_id(n)}-{a}"
                              for s, n, a in BROADCAST_AXIS_CASES])
def test_broadcast_with_int_axis(shape, new_shape, axis, dtype):
    x = data(shape, dtype)
    expected = x.reshape((1,) * axis + x.shape + (1,) * (len(new_shape) - axis - x.ndim))
    expected = np.broadcast_to(expected, new_shape)
    check(run_with_params(lambda p: ng.broadcast(p, new_shape, axis), x), expected, dtype)
    check(run_with_params(lambda p: ng.broadcast_to(p, new_shape, axis), x), expected, dtype)


NUMPY_BROADCAST_CASES = [
    ((4,), [2, 3, 4]),
    ((3, 1), [2, 3, 4]),
    ((1,), [5]),
    ((), [2, 2]),
    ((1, 1), [3, 1]),
    ((2, 3), [2, 3]),
    ((1,), [0]),
    ((1, 3), [0, 3]),
]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,new_shape", NUMPY_BROADCAST_CASES,
                         ids=[f"{shape_id(s)}-{shape_id(n)}" for s, n in NUMPY_BROADCAST_CASES])
def test_broadcast_numpy_style(shape, new_shape, dtype):
    x = data(shape, dtype)
    expected = np.broadcast_to(x, new_shape)
    check(run_with_params(lambda p: ng.broadcast(p, new_shape), x), expected, dtype)
    check(run_with_params(lambda p: ng.broadcast(p, new_shape, None), x), expected, dtype)
    check(run_with_params(lambda p: ng.broadcast_to(p, new_shape), x), expected, dtype)


RESHAPE_CASES = [
    ((2, 3, 4), [6, 4], None),
    ((2, 3, 4), [24], None),
    ((), [1, 1], None),
    ((1, 1), [], None),
    ((2, 3), [3, 2], [1, 0]),  # transpose
    ((2, 3), [6], [1, 0]),  # transpose, then flatten
    ((2, 3, 4), [4, 6], [2, 0, 1]),
    ((2, 3, 4), [3, 4, 2], [1, 2, 0]),
    ((0, 3), [3, 0], [1, 0]),
    ((4, 5), [2, 10], [0, 1]),
]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,out_shape,order", RESHAPE_CASES,
                         ids=[f"{shape_id(s)}-{shape_id(o)}-{'T' if p else 'id'}{i}"
                              for i, (s, o, p) in enumerate(RESHAPE_CASES)])
def test_reshape(shape, out_shape, order, dtype):
    x = data(shape, dtype)
    expected = (x if order is None else np.transpose(x, order)).reshape(out_shape)
    check(run_with_params(lambda p: ng.reshape(p, out_shape, order), x), expected, dtype)


SLICE_CASES = [
    ((5, 6), [1, 0], [4, 6], None),
    ((5, 6), [0, 1], [5, 6], [2, 3]),
    ((4, 5, 6), [0, 1, 2], [4, 5, 6], [3, 2, 4]),
    ((7,), [2], [7], [5]),
    ((7,), [3], [3], None),  # empty
    ((), [], [], None),
    ((3, 4), [0, 0], [3, 4], [1, 1]),
    ((10, 10), [9, 9], [10, 10], [4, 4]),
]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,lower,upper,strides", SLICE_CASES,
                         ids=[f"{shape_id(s)}-{lo}-{up}-{st}" for s, lo, up, st in SLICE_CASES])
def test_slice(shape, lower, upper, strides, dtype):
    x = data(shape, dtype)
    steps = strides or [1] * len(shape)
    expected = x[tuple(slice(lo, up, st) for lo, up, st in zip(lower, upper, steps))]
    check(run_with_params(lambda p: ng.slice(p, lower, upper, strides), x), expected, dtype)


CONCAT_CASES = [
    ([(2, 3), (4, 3)], 0),
    ([(2, 3), (2, 1), (2, 0), (2, 5)], 1),
    ([(2, 3, 4), (2, 3, 1)], -1),
    ([(2, 3)], 0),
    ([(0, 3), (0, 3)], 0),
    ([(0, 3), (2, 3)], 0),
    ([(3,), (4,), (5,)], 0),
    ([(2, 1, 3), (2, 4, 3)], 1),
]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shapes,axis", CONCAT_CASES,
                         ids=[f"{len(s)}x-{shape_id(s[0])}-{a}" for s, a in CONCAT_CASES])
def test_concat(shapes, axis, dtype):
    arrays = [data(s, dtype, seed=i) for i, s in enumerate(shapes)]
    got = run_with_params(lambda *ps: ng.concat(list(ps), axis), *arrays)
    check(got, np.concatenate(arrays, axis=axis), dtype)


def test_concat_with_arrays():
    x = data((2, 3), np.float32)
    const = np.arange(6, dtype=np.float64).reshape(2, 3)  # becomes an f32 constant
    check(run_with_params(lambda p: ng.concat([p, const], 1), x),
          np.concatenate([x, const.astype(np.float32)], axis=1))


def _pad_reference(x, below, above, mode, value):
    positive = [(max(b, 0), max(a, 0)) for b, a in zip(below, above)]
    if mode == "constant":
        y = np.pad(x, positive, mode="constant", constant_values=value)
    else:
        y = np.pad(x, positive, mode=mode)
    crop = tuple(slice(-min(b, 0), y.shape[i] + min(a, 0))
                 for i, (b, a) in enumerate(zip(below, above)))
    return y[crop]


PAD_CASES = [
    ((3, 4), [1, 2], [2, 0], "constant"),
    ((3, 4), [0, 0], [0, 0], "constant"),
    ((3, 4), [-1, 1], [1, -2], "constant"),  # negative padding crops
    ((3, 4), [-1, -1], [-1, -2], "constant"),
    ((5,), [3], [2], "constant"),
    ((3, 4), [2, 1], [0, 3], "edge"),
    ((3, 4), [2, 3], [1, 3], "reflect"),
    ((3, 4), [3, 2], [1, 4], "symmetric"),
    ((2, 3, 4), [1, 0, 2], [1, 2, 0], "reflect"),
    ((2, 3, 4), [1, 2, 1], [2, 1, 3], "edge"),
    ((5,), [-2], [3], "reflect"),
    ((5,), [2], [-3], "symmetric"),
    ((4, 4), [-1, 2], [2, -1], "edge"),
]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,below,above,mode", PAD_CASES,
                         ids=[f"{shape_id(s)}-{b}-{a}-{m}" for s, b, a, m in PAD_CASES])
def test_pad(shape, below, above, mode, dtype):
    x = data(shape, dtype)
    value = True if dtype == np.bool_ else 7
    got = run_with_params(lambda p: ng.pad(p, value, below, above, pad_mode=mode), x)
    check(got, _pad_reference(x, below, above, mode, value), dtype)


def test_pad_value_from_a_parameter():
    x = data((2, 3), np.float32)
    p = ng.parameter([2, 3], name="x")
    v = ng.parameter([], name="v")
    comp = RUNTIME.computation(ng.pad(p, v, [1, 0], [0, 2]), p, v)
    check(comp(x, np.float32(-5))[0], np.pad(x, [(1, 0), (0, 2)], constant_values=-5))
    check(comp(x, np.float32(3))[0], np.pad(x, [(1, 0), (0, 2)], constant_values=3))


def test_pad_defaults():
    x = data((2, 3), np.int32)
    check(run_with_params(lambda p: ng.pad(p, 0), x), x)
    check(run_with_params(lambda p: ng.pad(p, 0, [1, 1], [1, 1], [0, 0]), x),
          np.pad(x, 1))


REVERSE_CASES = [
    ((2, 3, 4), 0),
    ((2, 3, 4), [0, 1]),
    ((2, 3, 4), [0, 1, 2]),
    ((2, 3, 4), []),
    ((2, 3, 4), -1),
    ((5,), [0]),
    ((), []),
    ((0, 3), [0, 1]),
]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,axes", REVERSE_CASES,
                         ids=[f"{shape_id(s)}-{a}" for s, a in REVERSE_CASES])
def test_reverse(shape, axes, dtype):
    x = data(shape, dtype)
    expected = np.flip(x, axis=axes if isinstance(axes, int) else tuple(axes))
    check(run_with_params(lambda p: ng.reverse(p, axes), x), expected, dtype)


# -------------------------------------------------------------------------- reductions

REDUCTIONS = [(ng.sum, np.sum), (ng.prod, np.prod), (ng.max, np.max), (ng.min, np.min)]
REDUCTION_CASES = [
    ((2, 3, 4), None),
    ((2, 3, 4), 1),
    ((2, 3, 4), -1),
    ((2, 3, 4), [0, 2]),
    ((2, 3, 4), [0, 1, 2]),
    ((2, 3, 4), []),
    ((7,), 0),
    ((), None),
    ((), []),
    ((3, 300), 1),
    ((300, 3), 0),
]


def _reduction_reference(np_fn, x, axes):
    axis = None if axes is None else (axes if isinstance(axes, int) else tuple(axes))
    if np_fn in (np.max, np.min):
        if x.dtype.kind == "f":
            initial = -np.inf if np_fn is np.max else np.inf
        else:
            info = np.iinfo(x.dtype)
            initial = info.min if np_fn is np.max else info.max
        return np_fn(x, axis=axis, initial=initial)
    return np_fn(x, axis=axis, dtype=x.dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("shape,axes", REDUCTION_CASES,
                         ids=[f"{shape_id(s)}-{a}" for s, a in REDUCTION_CASES])
@pytest.mark.parametrize("ng_fn,np_fn", REDUCTIONS, ids=lambda f: f.__name__)
def test_reduction(ng_fn, np_fn, shape, axes, dtype):
    x = data(shape, dtype, seed=5)
    if np_fn is np.prod:  # keep products finite and exact
        rng = np.random.default_rng(5)
        values = rng.choice([-1, 1], size=shape) if x.size > 24 else np.clip(x, -3, 3)
        x = np.asarray(values, dtype=dtype)
    got = run_with_params(lambda p: ng_fn(p, axes), x)
    check(got, _reduction_reference(np_fn, x, axes), dtype,
          rtol=1e-5 if dtype == np.float32 else None, atol=1e-5 if dtype == np.float32 else None)


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("ng_fn,np_fn", REDUCTIONS, ids=lambda f: f.__name__)
def test_reduction_of_empty_axis(ng_fn, np_fn, dtype):
    """Sum/Product of nothing is 0/1; Max/Min of nothing is -inf/+inf (lowest/highest for
    integers)."""
    x = np.zeros((0, 3), dtype=dtype)
    got = run_with_params(lambda p: ng_fn(p, 0), x)
    check(got, _reduction_reference(np_fn, x, [0]), dtype)
    got_all = run_with_params(lambda p: ng_fn(p), x)
    check(got_all, _reduction_reference(np_fn, x, None), dtype)
    got_kept = run_with_params(lambda p: ng_fn(p, 1), x)  # reduces a non-empty axis: (0,)
    check(got_kept, np.zeros((0,)), dtype)


def test_max_of_empty_axis_is_minus_infinity():
    x = np.zeros((2, 0), dtype=np.float32)
    got = run_with_params(lambda p: ng.max(p, 1), x)
    check(got, np.array([-np.inf, -np.inf]), np.float32)
    got = run_with_params(lambda p: ng.min(p, [1]), x)
    check(got, np.array([np.inf, np.inf]), np.float32)


@pytest.mark.parametrize("ng_fn,np_fn", REDUCTIONS[2:], ids=lambda f: f.__name__)
def test_max_min_propagate_nan(ng_fn, np_fn):
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, 6.0]], dtype=np.float64)
    check(run_with_params(lambda p: ng_fn(p, 1), x), np_fn(x, axis=1), np.float64)
    check(run_with_params(lambda p: ng_fn(p, 0), x), np_fn(x, axis=0), np.float64)


@pytest.mark.parametrize("axes", [0, 1, None], ids=str)
@pytest.mark.parametrize("ng_fn,np_fn", REDUCTIONS[2:], ids=lambda f: f.__name__)
def test_max_min_propagate_nan_float32(ng_fn, np_fn, axes):
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, 6.0]], dtype=np.float32)
    check(run_with_params(lambda p: ng_fn(p, axes), x), np_fn(x, axis=axes), np.float32)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("ng_fn,np_fn", [(ng.maximum, np.maximum), (ng.minimum, np.minimum)],
                         ids=lambda f: f.__name__)
def test_maximum_minimum_propagate_nan(ng_fn, np_fn, dtype):
    a = np.array([np.nan, 1.0, np.nan, 2.0], dtype=dtype)
    b = np.array([1.0, np.nan, np.nan, 3.0], dtype=dtype)
    check(run_with_params(ng_fn, a, b), np_fn(a, b), dtype)


INDEX_CASES = [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 1), ((2, 0, 3), 2)]


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("shape,axis", INDEX_CASES,
                         ids=[f"{shape_id(s)}-{a}" for s, a in INDEX_CASES])
@pytest.mark.parametrize("ng_fn,np_fn", [(ng.argmax, np.argmax), (ng.argmin, np.argmin)],
                         ids=lambda f: f.__name__)
def test_index_reduction(ng_fn, np_fn, shape, axis, dtype):
    # Few distinct values, so ties occur: the first index wins, as in NumPy.
    x = np.asarray(np.random.default_rng(3).integers(0, 3, size=shape), dtype=dtype)
    got = run_with_params(lambda p: ng_fn(p, axis), x)
    check(got, np_fn(x, axis=axis), np.int32)


@pytest.mark.parametrize("ng_fn", [ng.argmax, ng.argmin], ids=lambda f: f.__name__)
def test_index_reduction_ties_and_types(ng_fn):
    x = np.array([[1, 3, 3, 0, 3, 0], [2, 2, 2, 2, 2, 2]], dtype=np.float32)
    expected = [1, 0] if ng_fn is ng.argmax else [3, 0]  # ties: the first index
    got = run_with_params(lambda p: ng_fn(p, 1), x)
    check(got, expected, np.int32)  # nGraph's default index type
    got = run_with_params(lambda p: ng_fn(p, axis=1, index_element_type=np.int64), x)
    check(got, expected, np.int64)
    got = run_with_params(lambda p: ng_fn(p), x)  # axis 0 by default
    check(got, (np.argmax if ng_fn is ng.argmax else np.argmin)(x, axis=0), np.int32)


def _softmax_reference(x, axes):
    axes = tuple(axes) if not isinstance(axes, int) else (axes,)
    e = np.exp(x - np.max(x, axis=axes, keepdims=True))
    return e / np.sum(e, axis=axes, keepdims=True)


SOFTMAX_CASES = [
    ((3, 4), 1),
    ((3, 4), 0),
    ((3, 4), -1),
    ((5,), 0),
    ((2, 3, 4), [1, 2]),
    ((2, 3, 4), {0, 2}),
    ((2, 3, 4), (0, 1, 2)),
    ((2, 3, 4), 1),
    ((64, 1000), 1),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("shape,axes", SOFTMAX_CASES,
                         ids=[f"{shape_id(s)}-{sorted(a) if not isinstance(a, int) else a}"
                              for s, a in SOFTMAX_CASES])
def test_softmax(shape, axes, dtype):
    x = data(shape, dtype) * 5
    check(run_with_params(lambda p: ng.softmax(p, axes), x), _softmax_reference(x, axes), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_softmax_is_stable_for_large_values(dtype):
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]], dtype=dtype)
    got = run_with_params(lambda p: ng.softmax(p, 1), x)
    check(got, _softmax_reference(x, 1), dtype)
    assert np.all(np.isfinite(got))


def _softmax_rows_data(shape, dtype):
    """Data for a softmax over the last axis: -inf entries scattered, one row all -inf (NaN),
    one row with +inf (NaN: inf - inf), the others finite."""
    x = data(shape, dtype, seed=3) * 5
    rows = x.reshape(-1, shape[-1])
    rows[1::3, ::2] = -np.inf
    rows[2] = -np.inf
    if rows.shape[0] > 4:
        rows[4, -1] = np.inf
    return x


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("shape,axes", [((3, 5, 1), [2]), ((3, 5, 7), [2]), ((4, 16), [1]),
                                        ((2, 3, 33), [2]), ((2, 4, 3, 128), [3]),
                                        ((3, 4, 5), [1, 2]), ((6, 7), [0, 1]), ((0, 4), [1]),
                                        ((4, 0), [1])],
                         ids=lambda v: shape_id(v) if isinstance(v, tuple) else str(v))
def test_softmax_over_innermost_axes(shape, axes, dtype, backend):
    """Over the innermost axes the CPU backend runs the row loop of attention's softmax: its
    values, NaN rows (all -inf, or +inf in the row) and zeros for -inf entries are the
    INTERPRETER's (the reference) and NumPy's."""
    x = _softmax_rows_data(shape, dtype) if 0 not in shape else np.zeros(shape, dtype)
    got = run_with_params(lambda p: ng.softmax(p, axes), x)
    p = ng.parameter(shape, dtype)
    reference = ng.runtime("INTERPRETER").computation(ng.softmax(p, axes), p)(x)[0]
    with np.errstate(invalid="ignore"):
        expected = _softmax_reference(x, axes) if x.size else x
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(reference))
    check(np.nan_to_num(got), np.nan_to_num(expected), dtype)
    check(np.nan_to_num(got), np.nan_to_num(reference), dtype)
    assert np.all(got[np.isneginf(x) & ~np.isnan(expected)] == 0)


def test_softmax_rows_shared_among_threads():
    """Enough rows for two threads: each computes its own range of rows, all of them."""
    x = _softmax_rows_data((64, 4, 128), np.float32)
    threads = ng.get_num_threads()
    try:
        ng.set_num_threads(2)
        got = run_with_params(lambda p: ng.softmax(p, [2]), x)
    finally:
        ng.set_num_threads(threads)
    with np.errstate(invalid="ignore"):
        expected = _softmax_reference(x, [2])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    check(np.nan_to_num(got), np.nan_to_num(expected), np.float32)


def _one_hot_reference(x, depth, axis):
    hot = (np.asarray(x)[..., None] == np.arange(depth)).astype(x.dtype)
    return np.moveaxis(hot, -1, axis)


ONE_HOT_CASES = [
    ([2, 0, 3, 1], [4, 5], 1),
    ([2, 0, 3, 1], [5, 4], 0),
    ([[0, 1, 2], [3, 2, 1]], [2, 4, 3], 1),
    ([[0, 1, 2], [3, 2, 1]], [2, 3, 4], -1),
    (3, [5], 0),
]


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("values,shape,axis", ONE_HOT_CASES,
                         ids=[f"{shape_id(s)}-{a}" for _, s, a in ONE_HOT_CASES])
def test_one_hot(values, shape, axis, dtype):
    x = np.asarray(values, dtype=dtype)
    got = run_with_params(lambda p: ng.one_hot(p, shape, axis), x)
    check(got, _one_hot_reference(x, shape[axis], axis), dtype)


CONVERT_CASES = [
    (np.float32, np.int32, [1.7, -1.7, 0.0, 3.2]),  # truncation toward zero
    (np.float64, np.int64, [2.9, -2.9, 100.5]),
    (np.float64, np.float32, [0.1, 1e10, -3.5]),
    (np.float32, np.float64, [0.1, -2.5]),
    (np.int32, np.float32, [1, -2, 3]),
    (np.int64, np.float64, [1, -2, 2**40]),
    (np.int64, np.int32, [1, -2, 3]),
    (np.int32, np.int64, [1, -2, 3]),
    (np.int32, np.bool_, [0, 1, -2, 0]),  # != 0
    (np.float32, np.bool_, [0.0, 0.5, -1.0]),
    (np.bool_, np.float32, [True, False, True]),
    (np.bool_, np.int64, [True, False]),
    (np.float32, np.float32, [1.5, -2.5]),
]


@pytest.mark.parametrize("src,dst,values", CONVERT_CASES,
                         ids=[f"{dtype_id(s)}-{dtype_id(d)}" for s, d, _ in CONVERT_CASES])
def test_convert(src, dst, values):
    x = np.asarray(values, dtype=src)
    check(run_with_params(lambda p: ng.convert(p, dst), x), x.astype(dst), dst)


@pytest.mark.parametrize("new_type,dtype", [("f32", np.float32), ("i64", np.int64),
                                            ("boolean", np.bool_), ("float64", np.float64),
                                            (float, np.float32), (int, np.int32),
                                            (bool, np.bool_), (np.dtype("int32"), np.int32)])
def test_convert_type_names(new_type, dtype):
    x = np.array([[0.0, 1.0], [2.0, -3.0]], dtype=np.float64)
    check(run_with_params(lambda p: ng.convert(p, new_type), x), x.astype(dtype), dtype)


SELECT_SHAPES = [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), ()), ((), (4,), (4,)),
                 ((4, 1), (1, 5), (5,)), ((0, 2), (2,), (2,))]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shapes", SELECT_SHAPES,
                         ids=["-".join(shape_id(s) for s in ss) for ss in SELECT_SHAPES])
def test_select(shapes, dtype):
    c = data(shapes[0], np.bool_, seed=1)
    a, b = data(shapes[1], dtype, seed=2), data(shapes[2], dtype, seed=3)
    check(run_with_params(ng.select, c, a, b), np.where(c, a, b), dtype)


def test_select_with_values():
    x = data((2, 3), np.float32)
    p = ng.parameter([2, 3], name="x")
    node = ng.select(p > 0, p, 0.0)
    check(run(node, [p], x), np.where(x > 0, x, 0).astype(np.float32))
    node = ng.select(np.array([True, False, True]), 1.0, p)
    check(run(node, [p], x), np.where([True, False, True], 1.0, x).astype(np.float32))


# ---------------------------------------------------------------------- Python operators

OPERATORS = [
    ("+", lambda x, y: x + y),
    ("-", lambda x, y: x - y),
    ("*", lambda x, y: x * y),
    ("/", lambda x, y: x / y),
    ("**", lambda x, y: x**y),
    ("==", lambda x, y: x == y),
    ("!=", lambda x, y: x != y),
    ("<", lambda x, y: x < y),
    ("<=", lambda x, y: x <= y),
    (">", lambda x, y: x > y),
    (">=", lambda x, y: x >= y),
]


def _operand(kind, shape, dtype, seed):
    """A value for one side of an operator: a node (then given a value), a NumPy array of
    another dtype, a Python scalar or a NumPy scalar."""
    values = data(shape, dtype, "positive", seed=seed)
    if kind == "array":
        return values.astype(np.float64 if np.dtype(dtype).kind == "f" else np.int64), values
    if kind == "python":
        v = 2.0 if np.dtype(dtype).kind == "f" else 2
        return v, np.asarray(v, dtype=dtype)
    v = np.float64(3.0) if np.dtype(dtype).kind == "f" else np.int64(3)
    return v, np.asarray(v, dtype=dtype)


@pytest.mark.parametrize("other", ["node", "array", "python", "numpy_scalar"])
@pytest.mark.parametrize("node_on_left", [True, False], ids=["node_left", "node_right"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64], ids=dtype_id)
@pytest.mark.parametrize("symbol,op", OPERATORS, ids=[s for s, _ in OPERATORS])
def test_python_operators(symbol, op, dtype, node_on_left, other):
    shape = (2, 3)
    x = data(shape, dtype, "positive", seed=1)
    p = ng.parameter(shape, dtype=dtype, name="p")
    params, arrays = [p], [x]
    if other == "node":
        y = data(shape, dtype, "positive", seed=2)
        q = ng.parameter(shape, dtype=dtype, name="q")
        params.append(q)
        arrays.append(y)
        operand, y_value = q, y
    else:
        operand, y_value = _operand(other, shape, dtype, seed=2)
    node = op(p, operand) if node_on_left else op(operand, p)
    assert isinstance(node, ng.Node), f"{symbol} gave {type(node).__name__}"
    left, right = (x, y_value) if node_on_left else (y_value, x)
    if symbol == "/" and np.dtype(dtype).kind == "i":
        expected = left // right
    else:
        expected = op(left, right)
    bool_result = symbol in ("==", "!=", "<", "<=", ">", ">=")
    # Constants take the node's dtype, so the result keeps it.
    check(run(node, params, *arrays), expected, np.bool_ if bool_result else dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
def test_unary_operators(dtype):
    x = data((2, 3), dtype)
    check(run_with_params(lambda p: -p, x), -x, dtype)
    check(run_with_params(lambda p: abs(p), x), np.abs(x), dtype)
    check(run_with_params(lambda p: -(-p), x), x, dtype)  # noqa: B002


def test_operators_on_scalars_and_broadcasting():
    p = ng.parameter([], name="s")
    node = 2 * p + 1
    assert node.shape == []
    check(run(node, [p], np.float32(3)), np.float32(7))
    q = ng.parameter([3, 1], name="q")
    node = q + np.arange(4)  # an int64 array becomes an f32 constant
    assert node.dtype == np.float32 and node.shape == [3, 4]
    x = data((3, 1), np.float32)
    check(run(node, [q], x), x + np.arange(4, dtype=np.float32))
    node = 1 - q / 4
    check(run(node, [q], x), 1 - x / 4)
    node = np.ones((2, 1, 1), dtype=np.float32) @ ng.reshape(q, [1, 3])
    check(run(node, [q], x), np.ones((2, 1, 1), np.float32) @ x.reshape(1, 3))


def test_integer_node_with_exact_float_scalar():
    p = ng.parameter([3], dtype=np.int32, name="p")
    node = p * 2.0  # 2.0 is exactly an int32: allowed
    assert node.dtype == np.int32
    check(run(node, [p], np.array([1, 2, 3], np.int32)), [2, 4, 6], np.int32)
    with pytest.raises(TypeError, match="0.5"):
        p + 0.5


# ------------------------------------------------------------------------- composition


def test_chain_of_ops_matches_numpy():
    """A small dense layer with softmax: relu(x @ W + b) then softmax over classes."""
    x = data((16, 32), np.float32, seed=1)
    w = data((32, 10), np.float32, seed=2) / 4
    b = data((10,), np.float32, seed=3)
    px, pw, pb = ng.parameter([16, 32], name="x"), ng.parameter([32, 10], name="W"), \
        ng.parameter([10], name="b")
    node = ng.softmax(ng.relu(ng.dot(px, pw) + pb), 1)
    expected = _softmax_reference(np.maximum(x @ w + b, 0), 1)
    check(run(node, [px, pw, pb], x, w, b), expected, rtol=1e-5, atol=1e-6)


def test_constant_only_graph():
    c = ng.constant(np.arange(6, dtype=np.int64).reshape(2, 3))
    node = ng.sum(c * 2, 1)
    check(run(node, []), [6, 24], np.int64)
    assert ng.constant(1.5).shape == []
    assert ng.constant(1.5).dtype == np.float64
    assert ng.constant(1.5, np.float32).dtype == np.float32
    assert ng.constant([1, 2], dtype="i32").dtype == np.int32


# ------------------------------------------------------------------ state: Variable, Assign


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
def test_variable_and_assign(dtype):
    """ng.variable makes a Variable node; the updates of a computation are Assign nodes that
    replace its value at the end of each call (reads see the value from before the call)."""
    init = data((2, 3), dtype, seed=1)
    v = ng.variable(init, name="v")
    assert v.get_type_name() == "Variable" and v.dtype == np.dtype(dtype)
    p = ng.parameter([2, 3], dtype=dtype, name="p")
    comp = RUNTIME.computation(v * p, p, updates=[(v, v + p)])
    assert "Assign" in [n.get_type_name() for n in comp.function.get_ordered_ops()]
    x = data((2, 3), dtype, seed=2)
    check(comp(x)[0], init * x, dtype)
    check(v.get_value(), init + x, dtype)
    check(comp(x)[0], (init + x) * x, dtype)
    check(v.get_value(), init + 2 * x, dtype)


# ------------------------------------------------------------------- constant folding

FOLDING_CASES = [
    ("add", lambda a, b: a + b, [(2, 3), (3,)], np.float32),
    ("divide_int", ng.divide, [(2, 3), (2, 3)], np.int32),
    ("power_float", lambda a, b: ng.power(ng.absolute(a) + 1, b), [(4,), (4,)], np.float64),
    ("dot", ng.dot, [(2, 3), (3, 4)], np.int64),
    ("matmul", lambda a, b: ng.matmul(a, b, transpose_b=True), [(2, 3), (4, 3)], np.float32),
    ("sum", lambda a: ng.sum(a, 1), [(3, 4)], np.float32),
    ("max", lambda a: ng.max(a, [0]), [(3, 4)], np.int32),
    ("softmax", lambda a: ng.softmax(a, 1), [(3, 4)], np.float64),
    ("argmin", lambda a: ng.argmin(a, 1), [(3, 4)], np.float32),
    ("broadcast", lambda a: ng.broadcast(a, [2, 3, 4], {0}), [(3, 4)], np.int64),
    ("reshape", lambda a: ng.reshape(a, [4, 3], [1, 0]), [(3, 4)], np.float32),
    ("slice", lambda a: ng.slice(a, [0, 1], [3, 4], [2, 2]), [(3, 4)], np.int32),
    ("pad", lambda a: ng.pad(a, 0, [1, 0], [0, 2], pad_mode="reflect"), [(3, 4)], np.float32),
    ("reverse", lambda a: ng.reverse(a, [0, 1]), [(3, 4)], np.int64),
    ("concat", lambda a, b: ng.concat([a, b], 0), [(1, 4), (3, 4)], np.float32),
    ("select", lambda a, b: ng.select(a > b, a, b), [(3, 4), (4,)], np.float32),
    ("convert", lambda a: ng.convert(a, np.int32), [(3, 4)], np.float64),
    ("exp_tanh", lambda a: ng.tanh(ng.exp(a)), [(3, 4)], np.float32),
]


@pytest.mark.parametrize("name,fn,shapes,dtype", FOLDING_CASES, ids=[c[0] for c in FOLDING_CASES])
def test_graph_of_constants_matches_graph_of_parameters(name, fn, shapes, dtype):
    """A graph on constants (folded when compiled) computes what the same graph on
    parameters computes."""
    kind = "nonzero" if name == "divide_int" else "any"
    arrays = [data(s, dtype, kind, seed=i) for i, s in enumerate(shapes)]
    from_params = run_with_params(fn, *arrays)
    from_constants = run(fn(*[ng.constant(a) for a in arrays]), [])
    check(from_constants, from_params, from_params.dtype)


# ----------------------------------------------------------------------------- convolution


def np_convolution(x, w, strides, dilations, below, above, data_dilations, groups=1):
    """The definition in NumPy: dilate the data, pad it (negative padding crops), then add
    up, for every filter position, the strided window of the data times that filter tap."""
    k = x.ndim - 2
    shape = list(x.shape[:2]) + [(d - 1) * dd + 1 for d, dd in zip(x.shape[2:], data_dilations)]
    xd = np.zeros(shape, np.float64)
    xd[(slice(None), slice(None)) + tuple(slice(None, None, dd) for dd in data_dilations)] = x
    for a in range(k):
        lo, hi = below[a], above[a]
        n = xd.shape[a + 2]
        xd = np.take(xd, range(max(-lo, 0), n - max(-hi, 0)), axis=a + 2)
        pad = [(0, 0)] * xd.ndim
        pad[a + 2] = (max(lo, 0), max(hi, 0))
        xd = np.pad(xd, pad)
    fs = w.shape[2:]
    out = [(xd.shape[a + 2] - (fs[a] - 1) * dilations[a] - 1) // strides[a] + 1 for a in range(k)]
    icg, ocg = w.shape[1], w.shape[0] // groups
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for f in np.ndindex(*fs):
        starts = [f[a] * dilations[a] for a in range(k)]
        window = tuple(slice(starts[a], starts[a] + (out[a] - 1) * strides[a] + 1, strides[a])
                       for a in range(k))
        patch = xd[(slice(None), slice(None)) + window]
        for g in range(groups):
            taps = w[(slice(g * ocg, (g + 1) * ocg), slice(None)) + f]
            y[:, g * ocg:(g + 1) * ocg] += np.einsum("nc...,oc->no...",
                                                     patch[:, g * icg:(g + 1) * icg], taps)
    return y


# (data shape, filter shape, strides, dilations, below, above, data dilations, groups)
CONV_CASES = {
    "1d": ((2, 3, 9), (4, 3, 3), [1], [1], [0], [0], [1], 1),
    "2d": ((2, 3, 8, 7), (5, 3, 3, 3), [1, 1], [1, 1], [0, 0], [0, 0], [1, 1], 1),
    "2d-stride-pad": ((2, 4, 9, 9), (8, 4, 3, 3), [2, 2], [1, 1], [1, 1], [1, 0], [1, 1], 1),
    "2d-dilations": ((1, 2, 9, 9), (3, 2, 3, 2), [1, 2], [2, 3], [0, 2], [1, 1], [1, 1], 1),
    "2d-lenet-first": ((4, 1, 28, 28), (6, 1, 5, 5), [1, 1], [1, 1], [2, 2], [2, 2], [1, 1], 1),
    "2d-groups": ((2, 8, 6, 6), (16, 4, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], [1, 1], 2),
    "2d-depthwise": ((2, 8, 6, 6), (8, 1, 3, 3), [2, 2], [1, 1], [1, 1], [1, 1], [1, 1], 8),
    "3d": ((1, 2, 4, 5, 6), (3, 2, 2, 3, 2), [1, 2, 1], [1, 1, 1], [1, 0, 1], [0, 1, 0],
           [1, 1, 1], 1),
    "2d-data-dilation": ((1, 2, 4, 4), (2, 2, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], [2, 2], 1),
    "2d-negative-pad": ((1, 2, 7, 7), (2, 2, 2, 2), [1, 1], [1, 1], [-1, 0], [0, -2], [1, 1], 1),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_convolution(case, dtype):
    ds, fs, strides, dil, below, above, ddil, groups = CONV_CASES[case]
    x, w = data(ds, dtype), data(fs, dtype, seed=1)
    got = run_with_params(lambda a, b: ng.convolution(a, b, strides, dil, below, above, ddil,
                                                      groups=groups), x, w)
    expected = np_convolution(x.astype(np.float64), w.astype(np.float64), strides, dil, below,
                              above, ddil, groups)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    check(got, expected, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_convolution_backprops_are_its_adjoints(case, dtype):
    """<conv(x, w), dy> = <x, backprop_data(w, dy)> = <w, backprop_filters(x, dy)>."""
    ds, fs, strides, dil, below, above, ddil, groups = CONV_CASES[case]
    x, w = data(ds, dtype), data(fs, dtype, seed=1)
    y = np_convolution(x.astype(np.float64), w.astype(np.float64), strides, dil, below, above,
                       ddil, groups)
    dy = data(y.shape, dtype, seed=2)
    window = dict(window_movement_strides_forward=strides, window_dilation_strides_forward=dil,
                  padding_below_forward=below, padding_above_forward=above,
                  data_dilation_strides_forward=ddil, groups=groups)
    dx = run_with_params(lambda b, d: ng.convolution_backprop_data(ds, b, d, **window), w, dy)
    dw = run_with_params(lambda a, d: ng.convolution_backprop_filters(a, fs, d, **window), x, dy)
    assert dx.shape == ds and dw.shape == fs
    ydy = np.sum(y * dy)
    tol = 1e-3 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(np.sum(x * dx), ydy, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.sum(w * dw), ydy, rtol=tol, atol=tol)


def test_convolution_errors_name_the_op_and_shapes():
    x = ng.parameter([2, 3, 8, 8], np.float32)
    with pytest.raises(ValueError, match=r"\[Convolution\].*\{4,2,3,3\}"):
        ng.convolution(x, ng.parameter([4, 2, 3, 3], np.float32))
    with pytest.raises(ValueError, match=r"\[Convolution\] strides has 1 values; the data has 2"):
        ng.convolution(x, ng.parameter([4, 3, 3, 3], np.float32), [1])
    with pytest.raises(ValueError, match=r"\[Convolution\].*smaller than the dilated filter"):
        ng.convolution(x, ng.parameter([4, 3, 9, 9], np.float32))
    with pytest.raises(ValueError, match=r"\[ConvolutionBackpropData\].*delta"):
        ng.convolution_backprop_data([2, 3, 8, 8], ng.parameter([4, 3, 3, 3], np.float32),
                                     ng.parameter([2, 4, 5, 5], np.float32))
# ---------------------------------------------------------------- pooling and LRN


def _pool_reference(x, window, strides, below, above, kind, include=False, ceil_mode=False):
    """NumPy pooling: padding cells are -inf for 'max'; 'avg' divides by the window's data
    cells, or by the full window with `include`. ceil_mode pads above as far as the last
    window reaches."""
    spatial = x.shape[2:]
    out, reach = [], []
    for n, w, s, b, a in zip(spatial, window, strides, below, above):
        span = n + b + a - w
        cells = (-(-span // s) if ceil_mode else span // s) + 1
        out.append(cells)
        reach.append(max(a, (cells - 1) * s + w - n - b))
    pads = [(0, 0), (0, 0)] + list(zip(below, reach))
    fill = -np.inf if kind == "max" else 0.0
    padded = np.pad(x.astype(np.float64), pads, constant_values=fill)
    inside = np.pad(np.ones(x.shape), pads, constant_values=0.0)
    y = np.empty(x.shape[:2] + tuple(out))
    axes = tuple(range(2, x.ndim))
    for idx in np.ndindex(*out):
        sl = (slice(None), slice(None)) + tuple(
            slice(i * s, i * s + w) for i, s, w in zip(idx, strides, window))
        if kind == "max":
            y[(Ellipsis,) + idx] = padded[sl].max(axis=axes)
        else:
            count = np.prod(window) if include else inside[sl].sum(axis=axes)
            y[(Ellipsis,) + idx] = padded[sl].sum(axis=axes) / count
    return y.astype(x.dtype)


# (data shape, window, strides, padding below, padding above, ceil_mode)
POOL_CASES = [
    ((2, 3, 7), [3], [2], [1], [0], False),
    ((2, 3, 7), [3], [2], [1], [0], True),
    ((2, 3, 4, 4), [2, 2], [2, 2], [0, 0], [0, 0], False),
    ((1, 2, 5, 6), [2, 3], [2, 1], [0, 1], [1, 1], False),
    ((1, 2, 5, 5), [2, 2], [2, 2], [0, 0], [0, 0], True),
    ((2, 16, 6, 6), [3, 3], [2, 2], [1, 1], [1, 1], False),
    ((1, 2, 4, 5, 3), [2, 2, 2], [1, 2, 1], [1, 0, 1], [0, 1, 1], False),
    ((1, 2, 5, 4, 4), [2, 3, 2], [2, 2, 3], [0, 1, 0], [0, 0, 1], True),
]
POOL_IDS = [f"{shape_id(c[0])}-w{shape_id(c[1])}{'-ceil' if c[5] else ''}" for c in POOL_CASES]


@pytest.mark.parametrize("case", POOL_CASES, ids=POOL_IDS)
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_max_pool(case, dtype):
    shape, window, strides, below, above, ceil_mode = case
    x = data(shape, dtype)
    got = run_with_params(
        lambda p: ng.max_pool(p, window, strides, above, below, ceil_mode=ceil_mode), x)
    check(got, _pool_reference(x, window, strides, below, above, "max", ceil_mode=ceil_mode))


@pytest.mark.parametrize("include", [False, True], ids=["exclude", "include"])
@pytest.mark.parametrize("case", POOL_CASES, ids=POOL_IDS)
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_avg_pool(case, include, dtype):
    shape, window, strides, below, above, ceil_mode = case
    x = data(shape, dtype)
    got = run_with_params(
        lambda p: ng.avg_pool(p, window, strides, below, above, include, ceil_mode=ceil_mode), x)
    check(got, _pool_reference(x, window, strides, below, above, "avg", include, ceil_mode))


def test_pool_defaults_and_keywords():
    x = data((1, 2, 4, 6), np.float32)
    p = ng.parameter(x.shape, np.float32)
    # Defaults: stride 1, no padding.
    check(RUNTIME.computation(ng.max_pool(p, [2, 3]), p)(x)[0],
          _pool_reference(x, [2, 3], [1, 1], [0, 0], [0, 0], "max"))
    check(RUNTIME.computation(ng.avg_pool(p, [2, 3]), p)(x)[0],
          _pool_reference(x, [2, 3], [1, 1], [0, 0], [0, 0], "avg"))
    # max_pool takes padding_above before padding_below, as nGraph's.
    node = ng.max_pool(p, [2, 2], [1, 1], [0, 2], [1, 0], name="pool")
    assert node.name == "pool"
    assert node.shape == [1, 2, 4, 7]
    check(RUNTIME.computation(node, p)(x)[0],
          _pool_reference(x, [2, 2], [1, 1], [1, 0], [0, 2], "max"))
    node = ng.avg_pool(p, window_shape=[2, 2], window_strides=[2, 2], padding_above=[1, 0],
                       include_padding=True, ceil_mode=True)
    assert node.shape == [1, 2, 3, 3]
    check(RUNTIME.computation(node, p)(x)[0],
          _pool_reference(x, [2, 2], [2, 2], [0, 0], [1, 0], "avg", True, True))


def test_max_pool_window_in_padding_is_minus_infinity():
    x = np.array([[[1.0, -2.0, 3.0]]])
    got = run_with_params(lambda p: ng.max_pool(p, [2], [1], padding_below=[2]), x)
    np.testing.assert_array_equal(got, [[[-np.inf, 1.0, 1.0, 3.0]]])


def test_pool_errors():
    p = ng.parameter([1, 1, 4, 4], np.float32)
    with pytest.raises(ValueError, match=r"\[MaxPool\] window_shape \{5,5\} is larger than"):
        ng.max_pool(p, [5, 5])
    with pytest.raises(ValueError, match=r"\[AvgPool\] window_movement_strides \{0,1\} is 0"):
        ng.avg_pool(p, [2, 2], [0, 1])
    with pytest.raises(ValueError, match=r"\[AvgPool\] a window at axis 2 lies entirely in the"):
        ng.avg_pool(p, [2, 2], padding_below=[2, 0])
    with pytest.raises(ValueError, match=r"\[MaxPool\] data shape \{4,4\} must have rank 3 to 5"):
        ng.max_pool(ng.parameter([4, 4], np.float32), [2, 2])
    with pytest.raises(TypeError, match=r"\[MaxPool\] arg0 has element type i32"):
        ng.max_pool(ng.parameter([1, 1, 4], np.int32), [2])
    with pytest.raises(ValueError, match=r"\[MaxPool\] padding_below must not have negative"):
        ng.max_pool(p, [2, 2], padding_below=[-1, 0])


def _lrn_reference(x, alpha, beta, bias, size):
    half = (size - 1) // 2
    channels = x.shape[1]
    sq = x.astype(np.float64) ** 2
    s = np.zeros_like(sq)
    for c in range(channels):
        s[:, c] = sq[:, max(0, c - half):min(channels, c + half + 1)].sum(axis=1)
    return (x / (bias + alpha / size * s) ** beta).astype(x.dtype)


@pytest.mark.parametrize("shape,alpha,beta,bias,size", [
    ((2, 7, 3, 2), 0.5, 0.75, 1.0, 5),
    ((1, 3, 4), 1.0, 0.5, 2.0, 1),
    ((1, 6, 2, 2), 0.3, 0.6, 1.5, 4),
    ((2, 3, 5), 0.1, 0.75, 1.0, 9),
    ((1, 4, 2, 3, 2), 1e-2, 0.75, 1.0, 3),
    ((2, 16, 3, 3), 1e-1, 0.75, 2.0, 5),
])
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_lrn(shape, alpha, beta, bias, size, dtype):
    x = data(shape, dtype)
    got = run_with_params(lambda p: ng.lrn(p, alpha, beta, bias, size), x)
    check(got, _lrn_reference(x, alpha, beta, bias, size))


def test_lrn_defaults_and_errors():
    x = data((1, 6, 2), np.float64)
    check(run_with_params(ng.lrn, x), _lrn_reference(x, 1, 0.5, 1, 5))
    with pytest.raises(ValueError, match=r"\[LRN\] arg shape \{2,3\} must have rank >= 3"):
        ng.lrn(ng.parameter([2, 3], np.float32))
    with pytest.raises(ValueError, match=r"\[LRN\] size must be at least 1"):
        ng.lrn(ng.parameter([2, 3, 1], np.float32), size=0)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 2, 2)], ids=shape_id)
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_global_avg_pool(shape, dtype):
    x = data(shape, dtype)
    p = ng.parameter(shape, dtype)
    node = ng.global_avg_pool(p, name="gap")
    assert node.shape == list(shape[:2])
    assert node.name == "gap"
    check(RUNTIME.computation(node, p)(x)[0], x.mean(axis=tuple(range(2, len(shape)))))
    with pytest.raises(ValueError, match=r"\[global_avg_pool\] data shape \[2, 3\]"):
        ng.global_avg_pool(ng.parameter([2, 3], dtype))


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool_value_and_gradient_float32(ceil_mode):
    """The forward and its gradient in one computation (the CPU backend pairs them through
    oneDNN's workspace): the gradient of each window goes to its maximum."""
    x = data((2, 3, 7, 6), np.float32)
    p = ng.parameter(x.shape, np.float32)
    y = ng.max_pool(p, [2, 2], [2, 2], ceil_mode=ceil_mode)
    w = data(tuple(y.shape), np.float32, seed=1)
    g = ng.gradients(ng.sum(y * w), p)
    out_y, out_g = RUNTIME.computation([y, g], p)(x)
    check(out_y, _pool_reference(x, [2, 2], [2, 2], [0, 0], [0, 0], "max", ceil_mode=ceil_mode))
    expected = np.zeros_like(x)
    for n, c, i, j in np.ndindex(*y.shape):
        window = x[n, c, 2 * i:2 * i + 2, 2 * j:2 * j + 2]
        a, b = np.unravel_index(np.argmax(window), window.shape)
        expected[n, c, 2 * i + a, 2 * j + b] += w[n, c, i, j]
    check(out_g, expected)


# ------------------------------------------------------------------ transformer ops

GATHER_CASES = [
    ((5, 3), [[0, 4], [4, -1], [2, 2]], 0),
    ((2, 5, 2), [3, 0, -5], 1),
    ((2, 4), 3, -1),  # a scalar index drops the axis
    ((3, 2), np.zeros((0,), np.int64), 0),  # no indices
]


@pytest.mark.parametrize("index_dtype", INTS, ids=dtype_id)
@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,indices,axis", GATHER_CASES,
                         ids=[f"{shape_id(s)}-axis{a}" for s, _, a in GATHER_CASES])
def test_gather(shape, indices, axis, dtype, index_dtype):
    x = data(shape, dtype)
    idx = np.asarray(indices, index_dtype)
    got = run_with_params(lambda p, i: ng.gather(p, i, axis), x, idx)
    check(got, np.take(x, idx, axis=axis), dtype)


@pytest.mark.parametrize("op", ["gather", "embedding_lookup"])
def test_indices_are_checked_when_the_result_is_empty(op):
    """An out-of-range index is an error even when the result has no elements to copy."""
    idx = np.array([7], np.int64)
    if op == "gather":
        data = np.zeros((0, 5), np.float32)  # result [0, 1]

        def build(p, i):
            return ng.gather(p, i, axis=1)
    else:
        data = np.zeros((5, 0), np.float32)  # result [1, 0]

        def build(p, i):
            return ng.embedding_lookup(i, p)
    with pytest.raises(IndexError, match="index 7 at position 0 .* axis of size 5"):
        run_with_params(build, data, idx)


def test_unsigned_indices_that_do_not_fit_int64_are_refused():
    with pytest.raises(ng.UserInputError, match=r"\[Gather\] index 18446744073709551615 "
                                                r"does not fit in int64"):
        ng.gather(np.zeros(3, np.float32), np.array([2**64 - 1], np.uint64))


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
def test_embedding_lookup(dtype):
    w = data((6, 4), dtype)
    idx = np.array([[1, 1, 5], [0, 2, 1]], np.int32)
    check(run_with_params(ng.embedding_lookup, idx, w), w[idx], dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_add_accumulates_repeated_indices(axis, dtype):
    x = data((4, 5, 3), dtype)
    idx = np.array([[2, 0], [2, -1]], np.int64)
    upd_shape = list(x.shape)
    upd_shape[axis:axis + 1 if axis != -1 else None] = idx.shape
    upd = data(tuple(upd_shape), dtype, seed=1)
    expected = x.copy()
    moved = np.moveaxis(expected, axis, 0)  # a view: the indexed axis first
    upd_moved = np.moveaxis(upd.reshape(*x.shape[:axis % 3], idx.size, *x.shape[axis % 3 + 1:]),
                            axis % 3, 0)
    for k, i in enumerate(idx.ravel()):
        moved[i] += upd_moved[k]
    got = run_with_params(lambda p, i, u: ng.scatter_add(p, i, u, axis), x, idx, upd)
    check(got, expected, dtype)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("op", ["gather", "embedding_lookup", "scatter_add"])
@pytest.mark.parametrize("bad", [5, -6])
def test_indices_out_of_range_raise_naming_op_index_and_bound(op, bad, dtype):
    if op == "scatter_add" and dtype == np.bool_:
        pytest.skip("ScatterAdd takes numbers")
    x = data((5, 2), dtype)
    idx = np.array([1, bad, 0], np.int64)
    name = {"gather": "Gather", "embedding_lookup": "EmbeddingLookup",
            "scatter_add": "ScatterAdd"}[op]
    if op == "gather":
        def build(p, i):
            return ng.gather(p, i)
    elif op == "embedding_lookup":
        def build(p, i):
            return ng.embedding_lookup(i, p)
    else:
        def build(p, i):
            return ng.scatter_add(p, i, ng.constant(np.ones((3, 2), dtype)))
    if op == "embedding_lookup" or bad == 5:
        with pytest.raises(IndexError, match=rf"\[{name}\] index {bad} at position 1 of .* "
                                             r"axis of size 5"):
            run_with_params(build, x, idx)
    else:  # -6 is out of [-5, 5) too
        with pytest.raises(IndexError, match=rf"\[{name}\] index -6 at position 1"):
            run_with_params(build, x, idx)


def _layer_norm_ref(x, begin, scale=None, bias=None, eps=1e-5):
    axes = tuple(range(begin % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = x64.var(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps)
    if scale is not None:
        shape = x.shape[begin % x.ndim:]
        y = y * scale.reshape(shape) + bias.reshape(shape)
    return y, mean.reshape(x.shape[:begin % x.ndim]), var.reshape(x.shape[:begin % x.ndim])


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("shape,begin,affine", [
    ((4, 6), -1, False), ((3, 5, 8), 2, True), ((2, 3, 4), 1, True), ((7, 33), 1, True),
    ((2, 3), 0, False)])
def test_layer_norm_against_numpy(shape, begin, affine, dtype):
    x = data(shape, dtype) * 3 + 1
    n = int(np.prod(shape[begin % len(shape):]))
    scale, bias = data((n,), dtype, seed=1), data((n,), dtype, seed=2)
    params = [ng.parameter(shape, dtype)]
    if affine:
        params += [ng.parameter([n], dtype), ng.parameter([n], dtype)]
    node = ng.layer_norm(*params, begin_norm_axis=begin)
    stats = list(shape[:begin % len(shape)])
    assert [node[0].shape, node[1].shape, node[2].shape] == [list(shape), stats, stats]
    outs = RUNTIME.computation([node[0], node[1], node[2]], *params)(
        x, *([scale, bias] if affine else []))
    expected = _layer_norm_ref(x, begin, scale if affine else None, bias if affine else None)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(outs, expected):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_layer_norm_pairs_a_lone_scale_with_zero_bias():
    x = data((3, 4), np.float32)
    s = data((4,), np.float32, seed=1)
    got = run_with_params(lambda p: ng.layer_norm(p, scale=s)[0], x)
    np.testing.assert_allclose(got, _layer_norm_ref(x, -1, s, np.zeros(4))[0], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_dropout_mask_rate_scale_and_steps(dtype):
    x = np.ones((64, 128), dtype)
    p = ng.parameter(x.shape, dtype)
    comp = RUNTIME.computation(ng.dropout(p, 0.25, seed=3), p)
    first, second = comp(x)[0], comp(x)[0]
    for out in (first, second):
        assert set(np.unique(out)) <= {0.0, dtype(1 / 0.75)}
        assert abs((out == 0).mean() - 0.25) < 0.02
    assert (first != second).mean() > 0.2  # a new mask every call, without recompiling
    comp.rng_step = 0
    np.testing.assert_array_equal(comp(x)[0], first)  # the same step draws the same mask
    assert comp.rng_step == 1


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("n", [1, 63, 64, 65, 400, 4099])
def test_dropout_is_the_same_on_both_backends_and_differs_by_seed(n, dtype):
    """The CPU's batched Philox (64 elements a batch, then the scalar reference for the rest)
    draws bitwise the INTERPRETER's masks, for ragged sizes, large steps and seeds."""
    x = np.ones(n, dtype)
    outs = {}
    for backend in ("CPU", "INTERPRETER"):
        for seed in (0, (1 << 40) + 9):
            p = ng.parameter(x.shape, dtype)
            comp = ng.runtime(backend).computation(ng.dropout(p, 0.5, seed=seed), p)
            comp.rng_step = (1 << 33) + 7 if seed else 0
            outs[backend, seed] = comp(x)[0]
    for seed in (0, (1 << 40) + 9):
        np.testing.assert_array_equal(outs["CPU", seed], outs["INTERPRETER", seed])
    if n >= 64:
        assert (outs["CPU", 0] != outs["CPU", (1 << 40) + 9]).mean() > 0.3


@pytest.mark.parametrize("n", [63, 4099])
def test_dropout_gradient_draws_the_forward_mask_again(n):
    """Dropout's gradient is the delta dropped out with the op's seed, the mask drawn again
    rather than stored (the CPU kernels then write no mask): bitwise delta times the
    forward's mask at every step, the same on both backends."""
    x, dy = data((n,), np.float32) + 4, data((n,), np.float32, seed=1)  # x != 0
    keep = np.float32(1 / (1 - 0.3))
    got = {}
    for backend in ("CPU", "INTERPRETER"):
        p, w = ng.parameter([n]), ng.parameter([n])
        y = ng.dropout(p, 0.3, seed=5)
        (g,) = ng.gradients(ng.sum(y * w), [p])
        comp = ng.runtime(backend).computation([y, g], p, w)
        for step in range(2):
            out_y, out_g = comp(x, dy)
            np.testing.assert_array_equal(out_g, dy * np.where(out_y != 0, keep, np.float32(0)))
            got[backend, step] = out_g
    assert (got["CPU", 0] != got["CPU", 1]).any()  # a new mask each step, forward and backward
    for step in range(2):
        np.testing.assert_array_equal(got["CPU", step], got["INTERPRETER", step])


def test_dropout_in_eval_mode_and_p0_is_the_identity_and_p1_zeroes():
    p = ng.parameter([3])
    assert ng.dropout(p, 0.5, training=False) is p
    assert ng.dropout(p, 0.0) is p
    out = run(ng.dropout(p, 1.0, seed=0), [p], np.ones(3, np.float32))
    np.testing.assert_array_equal(out, np.zeros(3))
    with pytest.raises(ng.UserInputError, match=r"\[Dropout\] p must be in \[0, 1\]"):
        ng.dropout(p, 1.5)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,lower,upper,strides", [
    ((4, 6), [0, 1], [3, 6], [2, 2]), ((2, 3, 4), [1, 0, 1], [2, 3, 3], None),
    ((5,), [0], [5], None), ((3, 3), [1, 1], [1, 3], None)])
def test_replace_slice(shape, lower, upper, strides, dtype):
    x = data(shape, dtype)
    steps = strides or [1] * len(shape)
    index = tuple(slice(lo, up, st) for lo, up, st in zip(lower, upper, steps))
    src = data(x[index].shape, dtype, seed=3)
    expected = x.copy()
    expected[index] = src
    got = run_with_params(lambda d, s: ng.replace_slice(d, s, lower, upper, strides), x, src)
    check(got, expected, dtype)
    check(x, data(shape, dtype), dtype)  # dest's own value is unchanged


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,axis,parts", [
    ((6, 2), 0, 3), ((2, 7), 1, [2, 0, 5]), ((2, 3, 4), -1, [1, 3]), ((4,), 0, 1)])
def test_split(shape, axis, parts, dtype):
    x = data(shape, dtype)
    params = [ng.parameter(shape, dtype)]
    nodes = ng.split(params[0], axis, parts)
    sections = parts if isinstance(parts, int) else np.cumsum(parts)[:-1]
    expected = np.split(x, sections, axis=axis)
    got = RUNTIME.computation(nodes, *params)(x)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        check(g, e, dtype)
    with pytest.raises(ng.UserInputError, match=r"\[Split\]"):
        ng.split(params[0], axis, 5 if shape[axis % len(shape)] % 5 else 4)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,repeats", [
    ((2, 3), [2, 3]), ((3,), [2, 1, 2]), ((2, 1, 3), [2]), ((2, 2), [0, 1]), ((), [3])])
def test_tile(shape, repeats, dtype):
    x = data(shape, dtype)
    check(run_with_params(lambda p: ng.tile(p, repeats), x), np.tile(x, repeats), dtype)


@pytest.mark.parametrize("op,ref", [(ng.exp, np.exp), (ng.erf, None), (ng.sigmoid, None),
                                    (ng.gelu, None)])
def test_transcendentals_keep_nan_and_infinities_in_large_tensors(op, ref):
    """Large f32 tensors run on the vectorised loops (or oneDNN): NaN stays NaN, +-inf and
    values far out of range give the limits, and values match the INTERPRETER."""
    x = np.linspace(-120, 120, 6000).astype(np.float32)
    x[:3] = [np.nan, np.inf, -np.inf]
    got = run_with_params(op, x)
    expected = ng.runtime("INTERPRETER").computation(op(p := ng.parameter(x.shape)), p)(x)[0]
    assert np.isnan(got[0]) and np.isnan(expected[0])
    np.testing.assert_array_equal(got[1:3], expected[1:3])
    # exp's values span 1e-52 to 1e52: relative error only; the others absolute too (GELU's
    # 1 + erf(x) cancels for x < -3 in f32).
    atol = 1e-37 if op is ng.exp else 1e-6
    np.testing.assert_allclose(got[3:], expected[3:], rtol=1e-6, atol=atol)
    if ref is not None:
        with np.errstate(over="ignore"):
            np.testing.assert_allclose(got[3:], ref(x[3:]), rtol=1e-6, atol=atol)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_layer_norm_of_empty_rows_has_nan_statistics(dtype):
    """Nothing to average: the mean and variance are NaN (NumPy's mean of nothing)."""
    p = ng.parameter([3, 0], dtype)
    y, mean, var = ng.layer_norm(p)
    outs = RUNTIME.computation([y, mean, var], p)(np.zeros((3, 0), dtype))
    assert outs[0].shape == (3, 0)
    assert np.isnan(outs[1]).all() and np.isnan(outs[2]).all()


@pytest.mark.parametrize(("shape", "axes"), [([16, 128, 96], [0, 1]), ([7, 33], [0]),
                                             ([3, 2, 130], [0, 1]), ([6, 5, 17], [0]),
                                             ([1, 9, 4], [0, 1]), ([2, 1], [0])])
def test_f32_column_sums_add_the_rows_in_order(shape, axes):
    """A sum over the leading axes (a bias gradient) runs the column loop (16 lanes, four rows
    a pass, reduction_kernels.cpp): each column in row order, bitwise NumPy's row-by-row sum,
    with odd row counts and column tails; NaN and inf propagate."""
    x = ng.parameter(shape, np.float32)
    f = ng.runtime("CPU").computation(ng.sum(x, axes), x)  # the INTERPRETER sums otherwise
    a = np.random.default_rng(len(shape) * shape[-1]).standard_normal(shape).astype(np.float32)
    a.flat[shape[-1] - 1] = np.nan
    if a.size > 2:
        a.flat[1] = np.inf
    rows = a.reshape(-1, int(np.prod(shape[len(axes):])))
    expected = np.zeros(rows.shape[1], np.float32)
    for r in rows:
        expected = expected + r
    np.testing.assert_array_equal(f(a)[0].ravel(), expected)
