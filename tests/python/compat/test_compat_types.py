"""The element types nGraph has beyond ngraph's first five (int8, int16, uint8, uint16,
uint32, uint64), per op family against NumPy (with NumPy's wrap-around integer semantics)."""

import ngraph as ng
import numpy as np
import pytest

RUNTIME = ng.runtime(backend_name="CPU")
NEW_INTS = [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64]
INTS = NEW_INTS + [np.int32, np.int64]


def ints(dtype, shape, lo=None, hi=None, seed=0):
    info = np.iinfo(dtype)
    lo = max(info.min, -100) if lo is None else lo
    hi = min(info.max, 100) if hi is None else hi
    return np.random.default_rng(seed).integers(lo, hi, shape, endpoint=True).astype(dtype)


def run_fn(fn, *arrays):
    params = [ng.parameter(a.shape, a.dtype) for a in arrays]
    (out,) = RUNTIME.computation(fn(*params), *params)(*arrays)
    return out


def same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", NEW_INTS, ids=lambda d: np.dtype(d).name)
def test_parameters_constants_and_names(dtype):
    name = np.dtype(dtype).name
    p = ng.parameter([2], dtype=dtype)
    assert p.dtype == dtype
    short = {"int8": "i8", "int16": "i16", "uint8": "u8", "uint16": "u16", "uint32": "u32",
             "uint64": "u64"}[name]
    assert p.element_type == short
    assert ng.parameter([1], dtype=short).dtype == dtype
    assert ng.parameter([1], dtype=name).dtype == dtype
    info = np.iinfo(dtype)
    c = ng.constant(np.array([info.min, info.max], dtype))
    same(c.get_data(), np.array([info.min, info.max], dtype))
    same(RUNTIME.computation(c)()[0], np.array([info.min, info.max], dtype))
    x = ints(dtype, (2,))
    same(RUNTIME.computation(p, p)(x)[0], x)


@pytest.mark.parametrize("dtype", NEW_INTS, ids=lambda d: np.dtype(d).name)
def test_constants_from_python_values_take_the_nodes_type(dtype):
    p = ng.parameter([3], dtype)
    x = ints(dtype, (3,), 0, 50)
    same(run_fn(lambda q: q + 1, x), x + dtype(1))
    with pytest.raises(ng.NgraphTypeError, match="cannot be represented exactly"):
        p + 0.5
    if np.iinfo(dtype).min == 0:
        with pytest.raises(ng.NgraphTypeError, match="does not fit"):
            p + (-1)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_elementwise_arithmetic(dtype):
    a = ints(dtype, (3, 4), seed=1)
    b = ints(dtype, (3, 4), seed=2)
    nz = np.where(b == 0, dtype(3), b)
    if np.issubdtype(dtype, np.signedinteger):  # MIN / -1 overflows in NumPy too
        nz = np.where((nz == -1) & (a == np.iinfo(dtype).min), dtype(2), nz)
    with np.errstate(over="ignore"):
        same(run_fn(ng.add, a, b), a + b)
        same(run_fn(ng.subtract, a, b), a - b)
        same(run_fn(ng.multiply, a, b), a * b)
        same(run_fn(ng.divide, a, nz), a // nz)
        same(run_fn(ng.maximum, a, b), np.maximum(a, b))
        same(run_fn(ng.minimum, a, b), np.minimum(a, b))
        e = ints(dtype, (3, 4), 0, 5, seed=3)
        same(run_fn(ng.power, a, e), np.power(a, e))
        same(run_fn(ng.negative, a), np.negative(a))
        same(run_fn(ng.absolute, a), np.abs(a))
        same(run_fn(ng.sign, a), np.sign(a))
        same(run_fn(ng.relu, a), np.maximum(a, dtype(0)))
        same(run_fn(ng.floor, a), a)
        same(run_fn(ng.ceiling, a), a)
        # Broadcasting, and a long vector (the strided loops' fast paths).
        same(run_fn(ng.add, a, b[0]), a + b[0])
        long = ints(dtype, (5000,), seed=4)
        same(run_fn(lambda x: x * dtype(3) - x, long), long * dtype(3) - long)


def test_wraparound_like_numpy():
    with np.errstate(over="ignore"):
        u = np.array([0, 1, 255], np.uint8)
        same(run_fn(lambda x: x + np.uint8(1), u), u + np.uint8(1))
        same(run_fn(ng.negative, u), -u)
        i = np.array([-128, 127, -1], np.int8)
        same(run_fn(ng.absolute, i), np.abs(i))
        same(run_fn(lambda x: x * np.int8(2), i), i * np.int8(2))
        big = np.array([2**64 - 1, 2**63], np.uint64)
        same(run_fn(lambda x: x + np.uint64(1), big), big + np.uint64(1))
        same(run_fn(ng.sum, big), big.sum(dtype=np.uint64))


@pytest.mark.parametrize("dtype", NEW_INTS, ids=lambda d: np.dtype(d).name)
def test_comparisons_and_select(dtype):
    a = ints(dtype, (4, 3), seed=5)
    b = ints(dtype, (4, 3), seed=6)
    for fn, ref in [(ng.equal, np.equal), (ng.not_equal, np.not_equal), (ng.greater, np.greater),
                    (ng.greater_eq, np.greater_equal), (ng.less, np.less),
                    (ng.less_eq, np.less_equal)]:
        same(run_fn(fn, a, b), ref(a, b))
    same(run_fn(lambda x, y: ng.select(x > y, x, y), a, b), np.where(a > b, a, b))


@pytest.mark.parametrize("dtype", NEW_INTS, ids=lambda d: np.dtype(d).name)
def test_reductions(dtype):
    a = ints(dtype, (3, 4, 2), 0, 3, seed=7)
    same(run_fn(lambda x: ng.sum(x, [0, 2]), a), a.sum((0, 2), dtype=dtype))
    same(run_fn(lambda x: ng.prod(x, 1), a), a.prod(1, dtype=dtype))
    same(run_fn(lambda x: ng.max(x, 2), a), a.max(2))
    same(run_fn(lambda x: ng.min(x), a), np.array(a.min(), dtype))
    same(run_fn(lambda x: ng.argmax(x, 1), a), a.argmax(1).astype(np.int32))
    same(run_fn(lambda x: ng.argmin(x, 0, np.int64), a), a.argmin(0))
    same(run_fn(lambda x: ng.max(ng.slice(x, [0, 0, 0], [0, 4, 2]), 0), a),
         np.full((4, 2), np.iinfo(dtype).min, dtype))


@pytest.mark.parametrize("dtype", NEW_INTS, ids=lambda d: np.dtype(d).name)
def test_shape_and_data_movement(dtype):
    a = ints(dtype, (2, 3), seed=8)
    same(run_fn(lambda x: ng.reshape(x, [3, 2], [1, 0]), a), a.T)
    same(run_fn(lambda x: ng.slice(x, [0, 1], [2, 3]), a), a[:, 1:])
    same(run_fn(lambda x: ng.concat([x, x], 0), a), np.concatenate([a, a]))
    same(run_fn(lambda x: ng.reverse(x, 1), a), a[:, ::-1])
    same(run_fn(lambda x: ng.broadcast(x, [4, 2, 3], {0}), a), np.broadcast_to(a, (4, 2, 3)))
    same(run_fn(lambda x: ng.pad(x, 7, [1, 0], [0, 2]), a),
         np.pad(a, [(1, 0), (0, 2)], constant_values=7))
    same(run_fn(lambda x: ng.pad(x, 0, [1, 1], [1, 1], pad_mode="reflect"), a),
         np.pad(a, 1, mode="reflect"))
    idx = np.array([0, 2, 1], dtype)
    same(run_fn(lambda x: ng.one_hot(x, [3, 3], 1), idx), np.eye(3, dtype=dtype)[[0, 2, 1]])
    same(run_fn(lambda x: ng.dot(x, ng.reshape(x, [3, 2], [1, 0])), a),
         (a @ a.T).astype(dtype))
    same(run_fn(lambda x: ng.topk(x, 2, 1)[0], a), -np.sort(-a.astype(np.int64), 1)[:, :2]
         .astype(dtype))


@pytest.mark.parametrize("src", INTS + [np.float32, np.float64, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dst", INTS + [np.float32, np.float64, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_convert_between_every_pair(src, dst):
    # Values every type holds: 0..100 (no negative floats into unsigned, which C++ leaves
    # undefined).
    x = np.array([0, 1, 7, 100], dtype=src) if src is not np.bool_ else \
        np.array([True, False, True, True])
    same(run_fn(lambda p: ng.convert(p, dst), x), x.astype(dst))


def test_narrowing_integer_conversion_wraps_like_numpy():
    x = np.array([300, -1, 65535], np.int64)
    same(run_fn(lambda p: ng.convert(p, np.uint8), x), x.astype(np.uint8))
    same(run_fn(lambda p: ng.convert(p, np.int16), x), x.astype(np.int16))


def test_real_only_ops_refuse_integers_and_unsupported_dtypes_are_named():
    with pytest.raises(ng.NgraphTypeError, match=r"\[Exp\] arg0 has element type u8"):
        ng.exp(ng.parameter([2], np.uint8))
    with pytest.raises(ng.NgraphTypeError, match="float128 is not supported"):
        ng.constant(np.ones(2, np.longdouble))
    with pytest.raises(ng.NgraphTypeError, match="is not supported"):
        ng.parameter([2], np.complex64)


def test_computation_converts_same_kind_integer_arguments():
    p = ng.parameter([3], np.int8)
    comp = RUNTIME.computation(p * 2, p)
    same(comp(np.array([1, 2, 3], np.int64))[0], np.array([2, 4, 6], np.int8))
    with pytest.raises(ng.NgraphTypeError, match="cannot convert float64 to int8"):
        comp(np.array([1.5, 2, 3]))
