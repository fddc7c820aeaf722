"""Gradients (``ng.gradients``) of every op against central finite differences.

Every case builds ``out = op(x0, x1, ...)`` on float64 parameters and differentiates
``y = sum(out * R)`` for a fixed random weight R (so every output element matters, each with
its own weight) with respect to every parameter; the result is compared with central finite
differences of the same compiled y.

DIFFERENTIABLE and NON_DIFFERENTIABLE together must list every op of the core, so that an
op added without a gradient test fails ``test_every_core_op_is_classified``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import ngraph as ng
import numpy as np
import pytest

RUNTIME = ng.runtime(backend_name="CPU")
F64 = np.float64


# ----------------------------------------------------------------------------- helpers


def data(shape, kind="any", seed=0):
    """float64 test data: 'any' (normal), 'pos' ([0.5, 2]), 'nonzero' (+-[0.5, 2]), 'unit'
    ((-0.9, 0.9): inside the domains of asin and acos, away from tan's poles),
    'away_int' (k + 0.5 +- 0.3: far from integers), 'distinct' (no two values within 0.05)."""
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    if kind == "any":
        return rng.standard_normal(shape)
    if kind == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if kind == "nonzero":
        return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    if kind == "away_int":
        return rng.integers(-3, 3, shape) + 0.5 + rng.uniform(-0.3, 0.3, shape)
    if kind == "unit":
        return rng.uniform(-0.9, 0.9, shape)
    if kind == "distinct":
        n = int(np.prod(shape, dtype=np.int64))
        return ((rng.permutation(n) - n / 2) * 0.1 + rng.uniform(-0.02, 0.02, n)).reshape(shape)
    raise ValueError(kind)


class Case(NamedTuple):
    """`fn(*params)` builds the op under test on one float64 parameter per input."""

    id: str
    fn: Callable
    inputs: tuple
    eps: float = 1e-6
    rtol: float = 1e-6
    atol: float = 1e-7
    scalar: bool = False  # fn builds the differentiated scalar itself (no weighted sum)


def case(id, fn, *inputs, **kw):
    return Case(id, fn, tuple(np.asarray(a, dtype=F64) for a in inputs), **kw)


def weights(shape, seed=1234):
    return np.random.default_rng(seed).standard_normal(tuple(shape))


def weighted_sum(out):
    return ng.sum(out * ng.constant(weights(out.shape)))


def numeric_gradients(f, arrays, eps):
    """Central differences of the scalar computation f at `arrays`, for every input."""
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for j in np.ndindex(*a.shape):
            args = [x.copy() for x in arrays]
            args[i][j] = a[j] + eps
            plus = float(f(*args)[0])
            args[i][j] = a[j] - eps
            minus = float(f(*args)[0])
            g[j] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


def op_types(node):
    """The op names of the graph that computes `node`."""
    seen, stack, types = set(), [node], set()
    while stack:
        n = stack.pop()
        if n.get_instance_id() in seen:
            continue
        seen.add(n.get_instance_id())
        types.add(n.get_type_name())
        stack.extend(n.inputs())
    return types


def check_gradients(c: Case, op: str | None = None):
    params = [ng.parameter(a.shape, F64, name=f"x{i}") for i, a in enumerate(c.inputs)]
    out = c.fn(*params)
    assert out.dtype == F64, f"{c.id}: output is {out.dtype}"
    if op is not None:
        assert op in op_types(out), f"{c.id}: the graph has no {op} node"
    y = out if c.scalar else weighted_sum(out)
    grads = ng.gradients(y, params)
    assert len(grads) == len(params)
    for g, a in zip(grads, c.inputs):
        assert isinstance(g, ng.Node)
        assert g.dtype == F64
        assert g.shape == list(a.shape)
    analytic = RUNTIME.computation(grads, *params)(*c.inputs)
    forward = RUNTIME.computation(y, *params)

    def f(*arrays):  # every call draws the random ops' step-0 values, as the analytic call did
        forward.rng_step = 0
        return forward(*arrays)

    numeric = numeric_gradients(f, list(c.inputs), c.eps)
    for i, (a, n) in enumerate(zip(analytic, numeric)):
        assert a.shape == c.inputs[i].shape
        assert np.all(np.isfinite(a)), f"{c.id}: d/dx{i} is not finite: {a}"
        np.testing.assert_allclose(a, n, rtol=c.rtol, atol=c.atol,
                                   err_msg=f"{c.id}: d/dx{i}")
    return analytic


# ------------------------------------------------------------------------- the cases

UNARY_SHAPES = [(), (1,), (4,), (2, 3), (2, 1, 3)]

BINARY_SHAPES = [
    ((3, 4), (3, 4)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 3, 4)),
    ((3, 1), (1, 4)),
    ((2, 1, 3), (5, 1)),
    ((), (2, 3)),
    ((2, 3), ()),
    ((), ()),
    ((1, 1), (2, 3)),
]


def sid(shape):
    return "x".join(map(str, shape)) if shape else "scalar"


def unary(op, fn, kind="any"):
    return [case(f"{op}-{sid(s)}", fn, data(s, kind, seed=i)) for i, s in enumerate(UNARY_SHAPES)]


def binary(op, fn, kind0="any", kind1="any"):
    return [
        case(f"{op}-{sid(s0)}-{sid(s1)}", fn, data(s0, kind0, seed=i),
             data(s1, kind1, seed=100 + i))
        for i, (s0, s1) in enumerate(BINARY_SHAPES)
    ]


def without_ties(op, fn):
    """Maximum/Minimum cases whose two (broadcast) arguments are never within 0.1."""
    out = []
    for i, (s0, s1) in enumerate(BINARY_SHAPES):
        a = data(s0, seed=i)
        b = data(s1, seed=100 + i)
        a_b, b_b = np.broadcast_arrays(a, b)
        seed = 200  # draw b again until no pair is close
        while np.min(np.abs(a_b - b_b)) < 0.1:
            b = data(s1, seed=seed)
            a_b, b_b = np.broadcast_arrays(a, b)
            seed += 1
        out.append(case(f"{op}-{sid(s0)}-{sid(s1)}", fn, a, b))
    return out


def result_node(x):
    return ng._ngraph.make_node("Result", [x], {}, "")


def pad_case(id, shape, below, above, mode, value_param=False, seed=0):
    x = data(shape, seed=seed)
    if value_param:
        return case(id, lambda p, v: ng.pad(p, v, below, above, pad_mode=mode), x, 0.7)
    return case(id, lambda p: ng.pad(p, 0.0, below, above, pad_mode=mode), x)


def product_with_zeros():
    x = data((4, 5), "nonzero", seed=3)
    x[0, 2] = 0.0  # one zero in row 0
    x[1, 1] = x[1, 4] = 0.0  # two zeros in row 1
    x[2, :] = 0.0  # all zero
    y = data((3, 4), "nonzero", seed=4)
    y[1, 1] = 0.0
    return [
        case("Product-one-and-two-zeros-axis1", lambda p: ng.prod(p, [1]), x),
        case("Product-zeros-axis0", lambda p: ng.prod(p, [0]), x),
        case("Product-one-zero-all", lambda p: ng.prod(p), y),
        case("Product-zero-scalar", lambda p: ng.prod(p), np.array(0.0)),
    ]


COND = data((3, 4), seed=7) > 0
COND_ROW = np.array([True, False, False, True])

DIFFERENTIABLE: dict[str, list[Case]] = {
    "Add": binary("Add", ng.add),
    "Subtract": binary("Subtract", lambda a, b: a - b),
    "Multiply": binary("Multiply", ng.multiply),
    "Divide": binary("Divide", ng.divide, "any", "nonzero"),
    "Power": binary("Power", ng.power, "pos", "any") + [
        case("Power-cube-negative-base", lambda p: p ** 3.0, data((2, 3), seed=5)),
        case("Power-square-scalar", lambda p: ng.power(p, 2.0), np.array(-1.3)),
        case("Power-sqrt-exponent", lambda p: p ** 0.5, data((4,), "pos", seed=6)),
        case("Power-constant-base", lambda p: ng.power(2.0, p), data((3,), seed=6)),
        # 0^b is 0 around b > 0: d/db is 0 there (not 0 * log(0) = nan).
        case("Power-zero-base", ng.power, [0.0, 0.5, 1.5, 0.0], [2.0, 3.0, 2.0, 1.0]),
        case("Power-relu-base-learnable-exponent", lambda x, p: ng.power(ng.relu(x), p),
             data((2, 3), "nonzero", seed=8), 2.5),
    ],
    "Maximum": without_ties("Maximum", ng.maximum),
    "Minimum": without_ties("Minimum", ng.minimum),
    "Negative": unary("Negative", lambda p: -p),
    "Abs": unary("Abs", ng.abs, "nonzero"),
    "Exp": unary("Exp", ng.exp),
    "Log": unary("Log", ng.log, "pos"),
    "Sqrt": unary("Sqrt", ng.sqrt, "pos"),
    "Sign": unary("Sign", ng.sign, "nonzero"),
    "Floor": unary("Floor", ng.floor, "away_int"),
    "Ceiling": unary("Ceiling", ng.ceiling, "away_int"),
    "Sin": unary("Sin", ng.sin),
    "Cos": unary("Cos", ng.cos),
    "Tan": unary("Tan", ng.tan, "unit"),
    "Asin": unary("Asin", ng.asin, "unit"),
    "Acos": unary("Acos", ng.acos, "unit"),
    "Atan": unary("Atan", ng.atan),
    "Sinh": unary("Sinh", ng.sinh),
    "Cosh": unary("Cosh", ng.cosh),
    "Tanh": unary("Tanh", ng.tanh),
    # The values' gradient goes to the elements picked (distinct data: no ties).
    "TopK": [
        case("TopK-max-last-axis", lambda p: ng.topk(p, 2)[0], data((3, 4), "distinct")),
        case("TopK-min-axis0", lambda p: ng.topk(p, 3, 0, cmax=False)[0],
             data((4, 3), "distinct")),
        case("TopK-middle-axis-all", lambda p: ng.topk(p, 4, 1)[0], data((2, 4, 3), "distinct")),
    ],
    "Sigmoid": unary("Sigmoid", ng.sigmoid),
    "Erf": unary("Erf", ng.erf),
    "Gelu": unary("Gelu", ng.gelu),
    "Relu": unary("Relu", ng.relu, "nonzero"),
    # stop_gradient(sign(x)) * x = |x|: holding sign(x) constant loses nothing (its derivative
    # is 0), so the result matches finite differences; test_stop_gradient_blocks_exactly
    # checks the blocking itself.
    "StopGradient": [case("StopGradient-sign-times-x", lambda p: ng.stop_gradient(ng.sign(p)) * p,
                          data((2, 3), "nonzero", seed=9))],
    "Dot": [
        case("Dot-count0-matrix-vector", lambda a, b: ng.dot(a, b, 0), data((2, 3)),
             data((4,), seed=1)),
        case("Dot-count0-vectors", lambda a, b: ng.dot(a, b, 0), data((3,)), data((2,), seed=1)),
        case("Dot-count1-matrices", lambda a, b: ng.dot(a, b), data((2, 3)), data((3, 4), seed=1)),
        case("Dot-count1-vectors", lambda a, b: ng.dot(a, b, 1), data((3,)), data((3,), seed=1)),
        case("Dot-count1-tensor-vector", ng.dot, data((2, 3, 4)), data((4,), seed=1)),
        case("Dot-count1-vector-matrix", ng.dot, data((3,)), data((3, 2), seed=1)),
        case("Dot-count2-tensors", lambda a, b: ng.dot(a, b, 2), data((2, 3, 4)),
             data((3, 4, 5), seed=1)),
        case("Dot-count2-to-scalar", lambda a, b: ng.dot(a, b, 2), data((3, 4)),
             data((3, 4), seed=1)),
        case("Dot-scalar-left", ng.dot, data(()), data((3, 4), seed=1)),
        case("Dot-scalar-right", ng.dot, data((2, 3)), data((), seed=1)),
        case("Dot-scalars", ng.dot, data(()), data((), seed=1)),
        case("Dot-size1-dims", lambda a, b: ng.dot(a, b), data((1, 3)), data((3, 1), seed=1)),
    ],
    "Convolution": [
        case("Convolution-1d", ng.convolution, data((2, 2, 7)), data((3, 2, 3), seed=1)),
        case("Convolution-2d-stride-pad",
             lambda x, w: ng.convolution(x, w, [2, 1], None, [1, 0], [0, 2]),
             data((1, 2, 5, 6)), data((2, 2, 3, 2), seed=1)),
        case("Convolution-2d-dilations",
             lambda x, w: ng.convolution(x, w, None, [2, 1], None, None, [2, 1]),
             data((1, 1, 4, 5)), data((2, 1, 2, 3), seed=1)),
        case("Convolution-2d-depthwise",
             lambda x, w: ng.convolution(x, w, padding_below=[1, 1], padding_above=[1, 1],
                                         groups=3),
             data((1, 3, 4, 4)), data((3, 1, 3, 3), seed=1)),
    ],
    "MatMul": [
        case("MatMul-plain", ng.matmul, data((3, 4)), data((4, 5), seed=1)),
        case("MatMul-transpose-a", lambda a, b: ng.matmul(a, b, True, False), data((4, 3)),
             data((4, 5), seed=1)),
        case("MatMul-transpose-b", lambda a, b: ng.matmul(a, b, False, True), data((3, 4)),
             data((5, 4), seed=1)),
        case("MatMul-transpose-both", lambda a, b: ng.matmul(a, b, True, True), data((4, 3)),
             data((5, 4), seed=1)),
        case("MatMul-vector-matrix", ng.matmul, data((4,)), data((4, 5), seed=1)),
        case("MatMul-matrix-vector", ng.matmul, data((3, 4)), data((4,), seed=1)),
        case("MatMul-vector-vector", ng.matmul, data((4,)), data((4,), seed=1)),
        case("MatMul-vector-transpose-b", lambda a, b: ng.matmul(a, b, False, True),
             data((4,)), data((5, 4), seed=1)),
        case("MatMul-batch", lambda a, b: a @ b, data((2, 3, 4)), data((2, 4, 5), seed=1)),
        case("MatMul-broadcast-batch", ng.matmul, data((2, 1, 3, 4)), data((5, 4, 2), seed=1)),
        case("MatMul-broadcast-batch-size1", ng.matmul, data((1, 3, 4)), data((2, 4, 2), seed=1)),
        case("MatMul-batch-vs-matrix-transposed", lambda a, b: ng.matmul(a, b, True, True),
             data((2, 4, 3)), data((5, 4), seed=1)),
        case("MatMul-vector-batch", ng.matmul, data((4,)), data((2, 4, 5), seed=1)),
        case("MatMul-batch-vector", ng.matmul, data((2, 3, 4)), data((4,), seed=1)),
    ],
    "Broadcast": [
        case("Broadcast-new-leading-axis", lambda p: ng.broadcast(p, [2, 3], [0]), data((3,))),
        case("Broadcast-new-trailing-axis", lambda p: ng.broadcast(p, [3, 2], [1]), data((3,))),
        case("Broadcast-new-middle-axis", lambda p: ng.broadcast(p, [2, 4, 3], [1]),
             data((2, 3))),
        case("Broadcast-scalar", lambda p: ng.broadcast(p, [2, 3], [0, 1]), data(())),
        case("Broadcast-no-axes", lambda p: ng.broadcast(p, [2, 3], []), data((2, 3))),
        case("Broadcast-stretch-size1", lambda p: ng.broadcast_to(p, [2, 3, 4]), data((3, 1))),
        case("Broadcast-to-axis", lambda p: ng.broadcast_to(p, [3, 2], 0), data((3,))),
    ],
    "Sum": [
        case("Sum-axis1", lambda p: ng.sum(p, [1]), data((2, 3, 4))),
        case("Sum-axes02", lambda p: ng.sum(p, [0, 2]), data((2, 3, 4))),
        case("Sum-all", ng.sum, data((2, 3, 4))),
        case("Sum-no-axes", lambda p: ng.sum(p, []), data((2, 3))),
        case("Sum-scalar", ng.sum, data(())),
        case("Sum-size1-axis", lambda p: ng.sum(p, 0), data((1, 3))),
        case("Sum-negative-axis", lambda p: ng.sum(p, -1), data((3, 2))),
    ],
    "Reshape": [
        case("Reshape-plain", lambda p: ng.reshape(p, [6, 4]), data((2, 3, 4))),
        case("Reshape-transpose", lambda p: ng.reshape(p, [4, 2, 3], [2, 0, 1]), data((2, 3, 4))),
        case("Reshape-transpose-and-flatten", lambda p: ng.reshape(p, [3, 8], [1, 0, 2]),
             data((2, 3, 4))),
        case("Reshape-matrix-transpose", lambda p: ng.reshape(p, [3, 2], [1, 0]), data((2, 3))),
        case("Reshape-to-scalar", lambda p: ng.reshape(p, []), data((1, 1))),
        case("Reshape-from-scalar", lambda p: ng.reshape(p, [1, 1]), data(())),
        case("Reshape-vector", lambda p: ng.reshape(p, [2, 3]), data((6,))),
    ],
    "Slice": [
        case("Slice-plain", lambda p: ng.slice(p, [1, 0], [4, 6]), data((5, 6))),
        case("Slice-strides", lambda p: ng.slice(p, [1, 0], [7, 8], [2, 3]), data((7, 8))),
        case("Slice-strides-uneven", lambda p: ng.slice(p, [0, 1], [6, 7], [4, 2]),
             data((7, 8))),
        case("Slice-3d-stride", lambda p: ng.slice(p, [0, 1, 0], [2, 3, 5], [1, 1, 2]),
             data((2, 3, 5))),
        case("Slice-size1", lambda p: ng.slice(p, [0, 1], [1, 5], [1, 2]), data((1, 5))),
        case("Slice-one-element", lambda p: ng.slice(p, [2], [3]), data((4,))),
        case("Slice-empty", lambda p: ng.slice(p, [2, 0], [2, 3]), data((4, 3))),
    ],
    "Concat": [
        case("Concat-axis0", lambda a, b: ng.concat([a, b], 0), data((2, 3)), data((4, 3), seed=1)),
        case("Concat-axis1-three", lambda a, b, c: ng.concat([a, b, c], 1), data((2, 3)),
             data((2, 1), seed=1), data((2, 2), seed=2)),
        case("Concat-vectors", lambda a, b: ng.concat([a, b], 0), data((3,)), data((2,), seed=1)),
        case("Concat-middle-axis", lambda a, b: ng.concat([a, b], 1), data((2, 3, 4)),
             data((2, 1, 4), seed=1)),
        case("Concat-negative-axis", lambda a, b: ng.concat([a, b], -1), data((2, 2)),
             data((2, 3), seed=1)),
        case("Concat-same-node-twice", lambda a: ng.concat([a, a], 0), data((2, 3))),
    ],
    "Pad": [
        pad_case("Pad-constant-with-value", (3, 4), [1, 2], [2, 0], "constant", True),
        pad_case("Pad-constant-negative", (4, 5), [-1, 1], [1, -2], "constant", True),
        pad_case("Pad-constant-crop-only", (4, 5), [-1, 0], [0, -2], "constant", True),
        pad_case("Pad-constant-vector", (3,), [2], [1], "constant", True),
        pad_case("Pad-constant-fixed-value", (2, 3), [1, 1], [1, 1], "constant"),
        pad_case("Pad-edge", (3, 4), [2, 1], [1, 3], "edge"),
        pad_case("Pad-edge-size1", (1, 3), [2, 0], [1, 2], "edge"),
        pad_case("Pad-edge-negative", (4, 5), [-1, 2], [2, -1], "edge"),
        pad_case("Pad-reflect", (3, 4), [2, 1], [1, 3], "reflect"),
        pad_case("Pad-reflect-negative", (4, 5), [-1, 2], [3, -2], "reflect"),
        pad_case("Pad-symmetric", (3, 4), [3, 2], [1, 4], "symmetric"),
        pad_case("Pad-symmetric-negative", (4, 5), [2, -1], [-1, 3], "symmetric"),
        pad_case("Pad-symmetric-3d", (2, 3, 2), [1, 2, 0], [2, 0, 1], "symmetric"),
    ],
    "Reverse": [
        case("Reverse-axis0", lambda p: ng.reverse(p, [0]), data((3, 4))),
        case("Reverse-axis1", lambda p: ng.reverse(p, 1), data((3, 4))),
        case("Reverse-both", lambda p: ng.reverse(p, [0, 1]), data((3, 4))),
        case("Reverse-none", lambda p: ng.reverse(p, []), data((3, 4))),
        case("Reverse-3d", lambda p: ng.reverse(p, [0, 2]), data((2, 3, 4))),
    ],
    "Max": [
        case("Max-axis1", lambda p: ng.max(p, [1]), data((3, 4), "distinct")),
        case("Max-axis0", lambda p: ng.max(p, 0), data((3, 4), "distinct")),
        case("Max-all", ng.max, data((2, 3, 4), "distinct")),
        case("Max-axes02", lambda p: ng.max(p, [0, 2]), data((2, 3, 4), "distinct")),
        case("Max-size1", lambda p: ng.max(p, [0]), data((1, 3), "distinct")),
        case("Max-scalar", lambda p: ng.max(p, []), data(())),
    ],
    "Min": [
        case("Min-axis1", lambda p: ng.min(p, [1]), data((3, 4), "distinct")),
        case("Min-all", ng.min, data((2, 3, 4), "distinct")),
        case("Min-axes12", lambda p: ng.min(p, [1, 2]), data((2, 3, 4), "distinct")),
        case("Min-scalar", lambda p: ng.min(p, []), data(())),
    ],
    "Product": [
        case("Product-axis1", lambda p: ng.prod(p, [1]), data((3, 4), "nonzero")),
        case("Product-all", ng.prod, data((2, 3), "nonzero")),
        case("Product-axes02", lambda p: ng.prod(p, [0, 2]), data((2, 3, 2), "nonzero")),
        case("Product-scalar", lambda p: ng.prod(p, []), data(())),
    ] + product_with_zeros(),
    "Softmax": [
        case("Softmax-last-axis", lambda p: ng.softmax(p, 1), data((3, 4))),
        case("Softmax-first-axis", lambda p: ng.softmax(p, 0), data((3, 4))),
        case("Softmax-vector", lambda p: ng.softmax(p, [0]), data((5,))),
        case("Softmax-two-axes", lambda p: ng.softmax(p, [1, 2]), data((2, 3, 4))),
        case("Softmax-outer-axes", lambda p: ng.softmax(p, [0, 2]), data((2, 3, 4))),
        case("Softmax-all-axes", lambda p: ng.softmax(p, [0, 1]), data((2, 3))),
        case("Softmax-size1-axis", lambda p: ng.softmax(p, 1), data((3, 1))),
    ],
    "Select": [
        case("Select-constant-condition", lambda a, b: ng.select(COND, a, b), data((3, 4)),
             data((3, 4), seed=1)),
        case("Select-broadcast", lambda a, b: ng.select(COND_ROW, a, b), data((3, 1)),
             data((), seed=1)),
        case("Select-on-a-comparison", lambda x: ng.select(x > 0, x * 2.0, ng.sin(x)),
             data((3, 4), "nonzero")),
        case("Select-same-branch", lambda x: ng.select(COND, x, x * x), data((3, 4))),
    ],
    "Convert": [
        case("Convert-f64-f64", lambda p: ng.convert(p, np.float64) * 3.0, data((2, 3))),
        # Through float32: the function is rounded to float32, so larger steps and float32
        # tolerance (central differences are exact for these quadratics up to rounding).
        case("Convert-f64-f32-f64",
             lambda p: ng.convert(ng.convert(p, np.float32) * 2.0 + 1.0, np.float64),
             data((2, 3)), eps=1e-2, rtol=1e-4, atol=1e-4),
        case("Convert-f32-square",
             lambda p: ng.convert(ng.convert(p, np.float32) * ng.convert(p, np.float32),
                                  np.float64),
             data((4,)), eps=1e-2, rtol=1e-4, atol=1e-4),
    ],
    # A Result is the output of a function (the CPU backend compiles it only there): the
    # differentiated scalar is the Result itself.
    "Result": [
        case("Result", lambda p: result_node(weighted_sum(p * p)), data((2, 3)), scalar=True),
        case("Result-scalar", lambda p: result_node(ng.sin(p)), data(()), scalar=True),
    ],
}

# Multi-output nodes and batch normalization: x [N, C, ...], gamma and beta [C]; the outputs
# of the training form are used through element nodes, alone and together.
def bn_case(id, fn, shape, seed=0, **kw):
    c = shape[1]
    return case(id, fn, data(shape, seed=seed), data((c,), "nonzero", seed + 1),
                data((c,), seed=seed + 2), **kw)


def two_outputs(node):
    return node[0] * 2.0 + node[2]  # [N, C] + [C]


def all_outputs(node):
    y, mean, var = node
    return weighted_sum(y) + weighted_sum(mean * 2.0) + weighted_sum(ng.sin(var))


DIFFERENTIABLE.update({
    "GetOutputElement": [
        bn_case(f"GetOutputElement-{n}",
                lambda x, g, b, n=n: ng.get_output_element(ng.batch_norm(1e-3, g, b, x), n),
                (4, 3))
        for n in range(3)
    ] + [
        bn_case("GetOutputElement-all-outputs",
                lambda x, g, b: all_outputs(ng.batch_norm(1e-3, g, b, x)), (3, 2, 2),
                scalar=True),
        case("GetOutputElement-single-output", lambda p: ng.get_output_element(ng.exp(p), 0),
             data((2, 3))),
    ],
    "BatchNormTraining": [
        bn_case(f"BatchNormTraining-{sid(shape)}",
                lambda x, g, b: ng.batch_norm(1e-3, g, b, x)[0], shape)
        for shape in [(4, 3), (2, 3, 2, 2), (5, 2, 3)]
    ] + [
        bn_case("BatchNormTraining-mean", lambda x, g, b: ng.batch_norm(1e-3, g, b, x)[1],
                (4, 3, 2)),
        bn_case("BatchNormTraining-variance", lambda x, g, b: ng.batch_norm(0.5, g, b, x)[2],
                (4, 3, 2)),
        bn_case("BatchNormTraining-two-outputs",
                lambda x, g, b: two_outputs(ng.batch_norm(1e-3, g, b, x)), (4, 3)),
    ],
    "BatchNormInference": [
        case(f"BatchNormInference-{sid(shape)}",
             lambda x, g, b, m, v: ng.batch_norm(1e-3, g, b, x, m, v), data(shape),
             data((shape[1],), "nonzero", 1), data((shape[1],), seed=2),
             data((shape[1],), seed=3), data((shape[1],), "pos", 4))
        for shape in [(4, 3), (2, 3, 2, 2)]
    ],
})


# Transformer ops: indexing (repeated and negative indices), layer normalization (its three
# outputs), dropout (the mask of step 0 in every call), and data movement.
IDX = np.array([[0, 4], [4, -1], [2, 2]])


def _ln_case(id, shape, begin, affine="none", outputs=(0,), seed=0):
    n = int(np.prod(shape[begin:]))
    scale_shape = shape[begin:] if affine == "shaped" else (n,)
    inputs = [data(shape, seed=seed)]
    if affine != "none":
        inputs += [data(scale_shape, "nonzero", seed + 1), data(scale_shape, seed=seed + 2)]

    def fn(x, *sb):
        node = ng.layer_norm(x, *sb, begin_norm_axis=begin, epsilon=1e-3)
        return sum((weighted_sum(node[k]) for k in outputs[1:]), weighted_sum(node[outputs[0]]))

    return case(id, fn, *inputs, scalar=True, rtol=1e-5, atol=1e-6)


DIFFERENTIABLE.update({
    "Gather": [
        case("Gather-axis0-repeated", lambda p: ng.gather(p, IDX), data((5, 3))),
        case("Gather-axis1", lambda p: ng.gather(p, IDX[:2], axis=1), data((2, 5, 2))),
        case("Gather-scalar-index", lambda p: ng.gather(p, np.int32(3), axis=-1), data((2, 4))),
    ],
    "EmbeddingLookup": [
        case("EmbeddingLookup", lambda w: ng.embedding_lookup(np.array([[1, 1], [5, 0]]), w),
             data((6, 3))),
    ],
    "ScatterAdd": [
        case("ScatterAdd-axis0", lambda x, u: ng.scatter_add(x, IDX, u), data((5, 2)),
             data((3, 2, 2), seed=1)),
        case("ScatterAdd-axis1", lambda x, u: ng.scatter_add(x, IDX[0], u, axis=1),
             data((2, 5)), data((2, 2), seed=1)),
    ],
    "LayerNorm": [
        _ln_case("LayerNorm-last-axis", (4, 6), -1),
        _ln_case("LayerNorm-affine", (3, 2, 5), 2, "flat"),
        _ln_case("LayerNorm-two-axes-shaped-affine", (3, 2, 4), 1, "shaped"),
        _ln_case("LayerNorm-mean-variance", (3, 4), 1, "flat", outputs=(0, 1, 2)),
        _ln_case("LayerNorm-variance-only", (2, 5), -1, outputs=(2,)),
    ],
    "Dropout": [
        case("Dropout-p0.3", lambda p: ng.dropout(p, 0.3, seed=7), data((4, 5))),
        case("Dropout-twice", lambda p: ng.dropout(ng.dropout(p, 0.5, seed=1), 0.2, seed=2),
             data((3, 7))),
    ],
    "ReplaceSlice": [
        case("ReplaceSlice-strided", lambda d, s: ng.replace_slice(d, s, [0, 1], [3, 6], [2, 2]),
             data((4, 6)), data((2, 3), seed=1)),
        case("ReplaceSlice-block", lambda d, s: ng.replace_slice(d, s * s, [1, 0, 1], [2, 2, 3]),
             data((2, 2, 3)), data((1, 2, 2), seed=1)),
    ],
    "Split": [
        case("Split-unequal", lambda p: (lambda a, b, c: ng.concat([c, a * 2.0, b], 1))(
            *ng.split(p, 1, [1, 3, 2])), data((2, 6))),
        case("Split-one-part-used", lambda p: ng.split(p, 0, 2)[1], data((4, 3))),
    ],
    "Tile": [
        case("Tile-2d", lambda p: ng.tile(p, [2, 3]), data((2, 3))),
        case("Tile-more-repeats", lambda p: ng.tile(p, [2, 1, 2]), data((3,))),
    ],
})


# Pooling: (data shape, window, strides, padding below, padding above, ceil_mode); distinct
# data for max pooling (no ties, so the maximum is differentiable).
POOL_CASES = [
    ((2, 2, 7), [3], [2], [1], [0], False),
    ((1, 2, 7), [3], [2], [1], [0], True),
    ((2, 1, 4, 4), [2, 2], [2, 2], [0, 0], [0, 0], False),
    ((1, 2, 4, 5), [3, 2], [2, 1], [1, 0], [1, 1], False),
    ((1, 1, 5, 5), [2, 2], [2, 2], [0, 0], [0, 0], True),
    ((1, 1, 3, 4, 3), [2, 2, 2], [1, 2, 1], [1, 0, 0], [0, 1, 1], False),
]


def _pool_id(op, c, suffix=""):
    return f"{op}-{sid(c[0])}-w{sid(c[1])}{'-ceil' if c[5] else ''}{suffix}"


def _pooled_shape(c):
    shape, window, strides, below, above, _ = c
    return shape[:2] + tuple((n + b + a - w) // s + 1
                             for n, w, s, b, a in zip(shape[2:], window, strides, below, above))


def _avg_pool_backprop(c, include):
    """AvgPoolBackprop(delta): the gradient of avg_pool seeded with delta."""
    shape, window, strides, below, above, _ = c

    def fn(delta):
        q = ng.parameter(shape, F64, name="q")
        pooled = ng.avg_pool(q, window, strides, below, above, include)
        return ng.gradients(pooled, q, seed=delta)

    return fn


DIFFERENTIABLE.update({
    "MaxPool": [
        case(_pool_id("MaxPool", c), lambda p, c=c: ng.max_pool(p, c[1], c[2], c[4], c[3],
                                                                ceil_mode=c[5]),
             data(c[0], "distinct", seed=4))
        for c in POOL_CASES
    ],
    "AvgPool": [
        case(_pool_id("AvgPool", c, "-include" if include else ""),
             lambda p, c=c, include=include: ng.avg_pool(p, c[1], c[2], c[3], c[4], include,
                                                         ceil_mode=c[5]),
             data(c[0], seed=6))
        for c in POOL_CASES for include in (False, True)
    ],
    "AvgPoolBackprop": [
        case(_pool_id("AvgPoolBackprop", c, "-include" if include else ""),
             _avg_pool_backprop(c, include), data(_pooled_shape(c), seed=7))
        for c in POOL_CASES if not c[5] for include in (False, True)
    ],
    "LRN": [
        case("LRN-size3", lambda p: ng.lrn(p, 0.5, 0.75, 1.0, 3), data((2, 5, 2))),
        case("LRN-defaults", ng.lrn, data((1, 6, 2, 2), seed=1)),
        case("LRN-size4-even", lambda p: ng.lrn(p, 0.3, 0.6, 1.5, 4), data((1, 6, 3), seed=2)),
        case("LRN-size-larger-than-channels", lambda p: ng.lrn(p, 0.2, 0.75, 1.0, 7),
             data((2, 3, 2, 1, 2), seed=3)),
    ],
})

# Collectives (ng.distributed): with one rank (no MPI launcher) they are identities, so their
# rules are checked by finite differences there; the gradient across ranks is the subject of
# the distributed tests.
SINGLE_RANK = ng.distributed.size() == 1


if SINGLE_RANK:
    DIFFERENTIABLE.update({
        "AllReduce": [
            case(f"AllReduce-{op}", lambda p, op=op: ng.allreduce(p * p, op), data((2, 3), kind))
            for op, kind in [("sum", "any"), ("mean", "any"), ("max", "distinct"),
                             ("min", "distinct"), ("prod", "any")]
        ] + [case("AllReduce-scalar", lambda p: ng.sin(ng.allreduce(p)), data(()))],
        "BroadcastDistributed": [
            case("BroadcastDistributed", lambda p: ng.broadcast_distributed(p) * p, data((2, 3))),
        ],
        "AllGather": [
            case("AllGather-axis0", lambda p: ng.allgather(p, 0), data((2, 3))),
            case("AllGather-axis1", lambda p: ng.allgather(ng.exp(p), 1), data((2, 3))),
        ],
        "ReduceScatter": [
            case(f"ReduceScatter-{op}", lambda p, op=op: ng.distributed.reduce_scatter(
                ng.tanh(p), op, 1), data((2, 4))) for op in ("sum", "mean")
        ],
    })
else:  # several ranks: classified, tested by the distributed tests
    DIFFERENTIABLE.update({op: [] for op in ("AllReduce", "BroadcastDistributed", "AllGather",
                                             "ReduceScatter")})

NON_DIFFERENTIABLE = {
    "ArgMax", "ArgMin", "Equal", "NotEqual", "Greater", "GreaterEq", "Less", "LessEq",
    "LogicalAnd", "LogicalOr", "LogicalNot", "OneHot", "Parameter", "Constant", "Variable",
    "Assign",
    # Point-to-point: Send is a sink; Recv's gradient would belong to the sending rank.
    "Send", "Recv",
    "ConvolutionBackpropData", "ConvolutionBackpropFilters",
    # The gradients of BatchNormTraining and LayerNorm (no second order).
    "BatchNormTrainingBackprop", "LayerNormBackprop",
    # Gradients of gradients: no rule (AvgPoolBackprop, linear in delta, has its exact one).
    "MaxPoolBackprop", "LRNBackprop",
}

ALL_CASES = [(op, c) for op, cases in DIFFERENTIABLE.items() for c in cases]


# ------------------------------------------------------------------------------ tests


def test_every_core_op_is_classified():
    core = set(ng._ngraph.op_names())
    assert not set(DIFFERENTIABLE) & NON_DIFFERENTIABLE
    untested = core - set(DIFFERENTIABLE) - NON_DIFFERENTIABLE
    assert not untested, f"core ops without a gradient test or classification: {sorted(untested)}"
    unknown = (set(DIFFERENTIABLE) | NON_DIFFERENTIABLE) - core
    assert not unknown, f"classified ops the core does not have: {sorted(unknown)}"
    assert set(DIFFERENTIABLE) | NON_DIFFERENTIABLE == core
    for op, cases in DIFFERENTIABLE.items():
        assert cases or not SINGLE_RANK, f"{op} has no gradient test case"


@pytest.mark.parametrize("op,c", ALL_CASES, ids=[c.id for _, c in ALL_CASES])
def test_gradient_matches_finite_differences(op, c):
    check_gradients(c, op)


def test_stop_gradient_blocks_exactly():
    x = ng.parameter([3], F64, name="x")
    y = ng.sum(ng.stop_gradient(x * x) + x)  # dy/dx = 1, not 2x + 1
    (g,) = ng.gradients(y, [x])
    out = RUNTIME.computation([y, g], x)(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(out[0], 1 + 4 + 9 + 6)
    np.testing.assert_array_equal(out[1], np.ones(3))


@pytest.mark.parametrize("op", ["Sign", "Floor", "Ceiling"])
def test_piecewise_constant_ops_have_exactly_zero_gradient(op):
    fn = {"Sign": ng.sign, "Floor": ng.floor, "Ceiling": ng.ceiling}[op]
    x = ng.parameter([2, 3], F64, name="x")
    g = ng.gradients(ng.sum(fn(x) * 3.0), x)
    out = RUNTIME.computation(g, x)(data((2, 3), "away_int"))[0]
    np.testing.assert_array_equal(out, np.zeros((2, 3)))


def test_sum_and_broadcast_are_each_others_adjoint():
    """<broadcast(u), v> == <u, sum(v)>, and the gradients say so."""
    u = ng.parameter([3], F64, name="u")
    v = ng.parameter([2, 3, 4], F64, name="v")
    b = ng.broadcast(u, [2, 3, 4], [0, 2])
    s = ng.sum(v, [0, 2])
    gb = ng.gradients(ng.sum(b * v), u)  # = sum(v)
    gs = ng.gradients(ng.sum(s * u), v)  # = broadcast(u)
    assert "Sum" in op_types(gb)
    assert "Broadcast" in op_types(gs)
    uu, vv = data((3,)), data((2, 3, 4), seed=1)
    out_gb, out_gs, out_s, out_b = RUNTIME.computation([gb, gs, s, b], u, v)(uu, vv)
    np.testing.assert_allclose(out_gb, out_s)
    np.testing.assert_allclose(out_gs, out_b)
    np.testing.assert_allclose(np.sum(out_b * vv), np.sum(uu * out_s))


def test_select_gives_no_gradient_to_the_condition():
    c = ng.parameter([3], np.bool_, name="c")
    a = ng.parameter([3], F64, name="a")
    b = ng.parameter([3], F64, name="b")
    y = ng.sum(ng.select(c, a, b) * np.array([1.0, 2.0, 3.0]))
    ga, gb = ng.gradients(y, [a, b])
    cond = np.array([True, False, True])
    out_a, out_b = RUNTIME.computation([ga, gb], c, a, b)(cond, np.zeros(3), np.zeros(3))
    np.testing.assert_array_equal(out_a, [1, 0, 3])
    np.testing.assert_array_equal(out_b, [0, 2, 0])
    with pytest.raises(ng.NoGradientError, match="not floating-point"):
        ng.gradients(y, c)


# --------------------------------------------------------------- no gradient: errors

def _f(node):
    return ng.convert(node, F64)


def _gradient_of(fn, x, shape):
    """The gradient of sum(fn(x reshaped to `shape`)) with respect to x, as x's shape."""
    r = ng.reshape(x, shape)
    return ng.reshape(ng.gradients(fn(r), r), list(x.shape))


# For each op of NON_DIFFERENTIABLE with a real-valued path from a float input to a float
# output: fn(x) with x float64 [3, 4].
NO_GRADIENT_PATHS = {
    "ArgMax": lambda x: _f(ng.argmax(x, 1, name="blocker")),
    "ArgMin": lambda x: _f(ng.argmin(x, 0, index_element_type=np.int64, name="blocker")),
    "Equal": lambda x: _f(ng.equal(x, 0.5, name="blocker")),
    "NotEqual": lambda x: _f(ng.not_equal(x, 0.5, name="blocker")),
    "Greater": lambda x: _f(ng.greater(x, 0.5, name="blocker")),
    "GreaterEq": lambda x: _f(ng.greater_eq(x, 0.5, name="blocker")),
    "Less": lambda x: _f(ng.less(x, 0.5, name="blocker")),
    "LessEq": lambda x: _f(ng.less_eq(x, 0.5, name="blocker")),
    "LogicalAnd": lambda x: _f(ng.logical_and(x > 0, x < 1, name="blocker")),
    "LogicalOr": lambda x: _f(ng.logical_or(x > 0, x < -1, name="blocker")),
    "LogicalNot": lambda x: _f(ng.logical_not(x > 0, name="blocker")),
    "OneHot": lambda x: ng.one_hot(ng.floor(ng.abs(x)), [3, 4, 5], 2, name="blocker"),
    # The gradients of a convolution are not differentiated again.
    "ConvolutionBackpropData": lambda x: ng.convolution_backprop_data(
        [1, 1, 3, 4], np.full((1, 1, 1, 1), 2.0), ng.reshape(x, [1, 1, 3, 4]), name="blocker"),
    "ConvolutionBackpropFilters": lambda x: ng.convolution_backprop_filters(
        ng.reshape(x, [1, 1, 3, 4]), [1, 1, 1, 1], ng.reshape(x, [1, 1, 3, 4]), name="blocker"),
    "BatchNormTrainingBackprop": lambda x: _batch_norm_backprop(x)[0],
    "LayerNormBackprop": lambda x: ng._ngraph.make_node(
        "LayerNormBackprop", [x, x, ng.constant(np.zeros(3)), ng.constant(np.ones(3))],
        {"begin_norm_axis": 1, "epsilon": 1e-5}, "blocker")[0],
    # The gradient of a max pooling / LRN of x, differentiated again.
    "MaxPoolBackprop": lambda x: _gradient_of(lambda r: ng.max_pool(r, [2, 2]), x, [1, 1, 3, 4]),
    "LRNBackprop": lambda x: _gradient_of(lambda r: ng.lrn(r, 0.5, 0.75, 1.0, 3) * 2.0, x,
                                          [1, 3, 4]),
}


def _batch_norm_backprop(x):
    """The backprop node of a batch norm on x [3, 4], with x as its delta too."""
    c = [ng.constant(np.full(4, v)) for v in (1.5, 0.5, 0.1, 2.0)]
    return ng._ngraph.make_node("BatchNormTrainingBackprop", [c[0], c[1], x, c[2], c[3], x],
                                {"epsilon": 1e-3}, "blocker")


def test_no_gradient_table_covers_the_non_differentiable_ops():
    assert set(NO_GRADIENT_PATHS) <= NON_DIFFERENTIABLE
    # The rest are leaves (Parameter, Constant, Variable, Recv) or sinks (Assign, Send).
    assert NON_DIFFERENTIABLE - set(NO_GRADIENT_PATHS) == {
        "Parameter", "Constant", "Variable", "Assign", "Send", "Recv"}


@pytest.mark.parametrize("op", sorted(NO_GRADIENT_PATHS))
def test_gradient_through_a_non_differentiable_op_raises(op):
    x = ng.parameter([3, 4], F64, name="x")
    out = NO_GRADIENT_PATHS[op](x)
    assert op in op_types(out)
    y = ng.sum(out * 2.0) + ng.sum(ng.sin(x))
    with pytest.raises(ng.NoGradientError) as info:
        ng.gradients(y, [x])
    message = str(info.value)
    assert op in message, message
    assert "x" in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("op", sorted(NO_GRADIENT_PATHS))
def test_gradient_beside_a_non_differentiable_op_works(op):
    """The blocked path does not matter for a variable it does not depend on."""
    x = ng.parameter([3, 4], F64, name="x")
    w = ng.parameter([3, 4], F64, name="w")
    out = NO_GRADIENT_PATHS[op](x)
    y = ng.sum(out * 2.0) + ng.sum(w * w)
    g = ng.gradients(y, w)
    ww = data((3, 4), seed=3)
    np.testing.assert_allclose(RUNTIME.computation(g, x, w)(data((3, 4)), ww)[0], 2 * ww)


@pytest.mark.skipif(not SINGLE_RANK, reason="builds collectives on the default communicator")
@pytest.mark.parametrize("op", ["max", "min", "prod"])
def test_reduce_scatter_without_a_rule_raises(op):
    x = ng.parameter([2, 4], F64, name="x")
    y = ng.sum(ng.distributed.reduce_scatter(x, op, 1))
    with pytest.raises(ng.NoGradientError, match=f"ReduceScatter.*'{op}'"):
        ng.gradients(y, x)


def test_cross_entropy_with_integer_labels_differentiates_the_weights():
    x = ng.parameter([5, 4], F64, name="x")
    labels = ng.parameter([5], np.int64, name="labels")
    w = ng.variable(data((4, 3), seed=2), name="w")
    loss = ng.softmax_cross_entropy(x @ w, labels)
    assert "OneHot" in op_types(loss)
    gw, gx = ng.gradients(loss, [w, x])
    xx, ll = data((5, 4), seed=1), np.array([0, 2, 1, 1, 0])
    out_w, out_x = RUNTIME.computation([gw, gx], x, labels)(xx, ll)
    logits = xx @ w.get_value()
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    d = (p - np.eye(3)[ll]) / 5
    np.testing.assert_allclose(out_w, xx.T @ d, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out_x, d @ w.get_value().T, rtol=1e-10, atol=1e-12)
    with pytest.raises(ng.NoGradientError, match="labels"):
        ng.gradients(loss, labels)


def test_gradient_with_respect_to_an_integer_value_raises():
    i = ng.parameter([3], np.int32, name="counts")
    y = ng.sum(ng.convert(i, F64) * 2.0)
    with pytest.raises(ng.NoGradientError, match="counts"):
        ng.gradients(y, [i])


def test_integer_intermediate_blocks_the_gradient():
    x = ng.parameter([3], F64, name="x")
    y = ng.sum(ng.convert(ng.convert(x, np.int32) + 1, F64))
    with pytest.raises(ng.NoGradientError, match="Convert"):
        ng.gradients(y, x)


# ---------------------------------------------------------- gradients as graph nodes


def test_second_order_cube():
    """d2/dx2 of sum(x**3) is 6x (the gradient of a gradient)."""
    x = ng.parameter([5], F64, name="x")
    g = ng.gradients(ng.sum(x ** 3.0), x)
    h = ng.gradients(ng.sum(g), x)
    xx = np.array([-2.0, -0.5, 0.0, 1.0, 3.0])
    out_g, out_h = RUNTIME.computation([g, h], x)(xx)
    np.testing.assert_allclose(out_g, 3 * xx ** 2)
    np.testing.assert_allclose(out_h, 6 * xx)


def test_third_order_sin():
    x = ng.parameter([4], F64, name="x")
    g1 = ng.gradients(ng.sum(ng.sin(x)), x)
    g2 = ng.gradients(ng.sum(g1), x)
    g3 = ng.gradients(ng.sum(g2), x)
    xx = data((4,))
    out = RUNTIME.computation([g1, g2, g3], x)(xx)
    np.testing.assert_allclose(out[0], np.cos(xx))
    np.testing.assert_allclose(out[1], -np.sin(xx))
    np.testing.assert_allclose(out[2], -np.cos(xx))


def test_mixed_second_derivative():
    x = ng.parameter([], F64, name="x")
    z = ng.parameter([], F64, name="z")
    gx = ng.gradients(x * x * z, x)  # 2 x z
    gxz = ng.gradients(gx, z)  # 2 x
    out = RUNTIME.computation([gx, gxz], x, z)(np.array(1.5), np.array(-2.0))
    np.testing.assert_allclose(out, [-6.0, 3.0])


# Second-order checks: the gradient itself (a graph) against finite differences of it.
SECOND_ORDER = {
    "Tanh": (ng.tanh, (3, 4), "any"),
    "Sigmoid": (ng.sigmoid, (3, 4), "any"),
    "Gelu": (ng.gelu, (3, 4), "any"),
    "Tan": (ng.tan, (3,), "unit"),
    "Asin": (ng.asin, (3,), "unit"),
    "Acos": (ng.acos, (3,), "unit"),
    "Atan": (ng.atan, (3,), "any"),
    "Sinh": (ng.sinh, (3,), "any"),
    "Cosh": (ng.cosh, (3,), "any"),
    "TopK": (lambda p: ng.topk(p * p * p, 2, 1)[0], (2, 4), "distinct"),
    "Exp": (ng.exp, (3,), "any"),
    "Log": (ng.log, (3,), "pos"),
    "Sqrt": (ng.sqrt, (3,), "pos"),
    "Abs": (lambda p: ng.abs(p) * p, (4,), "nonzero"),
    "Relu": (lambda p: ng.relu(p) * p, (4,), "nonzero"),
    "Divide": (lambda p: 1.0 / p, (3,), "nonzero"),
    "Softmax": (lambda p: ng.softmax(p, 1), (2, 3), "any"),
    "Max": (lambda p: ng.max(p * p, [1]), (3, 4), "distinct"),
    "Min": (lambda p: ng.min(p * p * p, [0]), (3, 4), "distinct"),
    "Product": (lambda p: ng.prod(p, [1]), (2, 4), "nonzero"),
    "MatMul": (lambda p: p @ p, (3, 3), "any"),
    "Dot": (lambda p: ng.dot(p, p * p, 2), (2, 3), "any"),
    "Pad": (lambda p: ng.pad(p * p, 0.0, [1, 2], [2, 1], pad_mode="reflect"), (3, 4), "any"),
    "Slice": (lambda p: ng.slice(p * p, [0, 1], [3, 4], [2, 2]), (3, 4), "any"),
    "Maximum": (lambda p: ng.maximum(p * p, 1.0), (4,), "nonzero"),
    "LogSoftmax": (lambda p: ng.log_softmax(p), (2, 3), "any"),
}


if SINGLE_RANK:
    SECOND_ORDER["AllReduce-max"] = (lambda p: ng.allreduce(p * p * p, "max"), (2, 3), "any")
    SECOND_ORDER["AllReduce-prod"] = (lambda p: ng.allreduce(p * p, "prod"), (2, 3), "any")


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_order_matches_finite_differences(name):
    fn, shape, kind = SECOND_ORDER[name]
    r = weights(shape, seed=99)

    def gradient(p):
        out = fn(p)
        return ng.gradients(weighted_sum(out), p) * ng.constant(r)

    x = data(shape, kind, seed=5)
    if name == "Maximum":  # keep x*x away from the kink at 1
        x = np.where(np.abs(np.abs(x) - 1) < 0.1, x * 1.5, x)
    check_gradients(case(f"second-order-{name}", gradient, x, rtol=1e-5, atol=1e-6))


def test_fan_out_accumulates():
    x = ng.parameter([4], F64, name="x")
    y = x * x + ng.sin(x)
    g = ng.gradients(ng.sum(y), x)
    xx = data((4,))
    np.testing.assert_allclose(RUNTIME.computation(g, x)(xx)[0], 2 * xx + np.cos(xx))


def test_fan_out_through_shared_intermediates():
    x = ng.parameter([3], F64, name="x")
    h = ng.exp(x)
    y = ng.sum(h * h) + ng.sum(h) * ng.sum(ng.tanh(h))
    check_gradients(case("fan-out", lambda p: ng.sum(ng.exp(p) * ng.exp(p)) + ng.sum(
        ng.exp(p)) * ng.sum(ng.tanh(ng.exp(p))), data((3,))))
    g = ng.gradients(y, x)
    xx = data((3,))
    e = np.exp(xx)
    t = np.tanh(e)
    expected = 2 * e * e + e * t.sum() + e.sum() * (1 - t * t) * e
    np.testing.assert_allclose(RUNTIME.computation(g, x)(xx)[0], expected)


def test_missing_path_gives_zeros_of_the_right_shape():
    x = ng.parameter([3], F64, name="x")
    z = ng.parameter([2, 5], F64, name="z")
    s = ng.parameter([], F64, name="s")
    y = ng.sum(x * 2.0)
    gx, gz, gs = ng.gradients(y, [x, z, s])
    assert gz.shape == [2, 5] and gz.dtype == F64
    assert gs.shape == [] and gs.dtype == F64
    out_x, out_z, out_s = RUNTIME.computation([gx, gz, gs], x, z, s)(
        np.ones(3), np.ones((2, 5)), np.array(1.0))
    np.testing.assert_array_equal(out_x, [2, 2, 2])
    np.testing.assert_array_equal(out_z, np.zeros((2, 5)))
    assert out_z.shape == (2, 5) and out_s.shape == ()
    assert out_s == 0


def test_missing_path_float32():
    x = ng.parameter([3], np.float32, name="x")
    z = ng.parameter([4, 1], np.float32, name="z")
    gz = ng.gradients(ng.sum(x), z)
    out = RUNTIME.computation(gz, z)(np.ones((4, 1), np.float32))[0]
    assert out.dtype == np.float32 and out.shape == (4, 1)
    assert not out.any()


def test_gradients_single_node_and_list_forms():
    x = ng.parameter([2], F64, name="x")
    y = ng.sum(x * x)
    g = ng.gradients(y, x)
    assert isinstance(g, ng.Node)
    gl = ng.gradients(y, [x])
    assert isinstance(gl, list) and len(gl) == 1
    assert ng.grad is ng.gradients
    with pytest.raises(TypeError):
        ng.gradients(y, [np.zeros(2)])
    with pytest.raises(TypeError):
        ng.gradients(np.zeros(2), [x])


def test_gradient_of_a_non_scalar_output_uses_ones_or_the_seed():
    x = ng.parameter([2, 3], F64, name="x")
    y = x * x
    g_default = ng.gradients(y, x)
    seed = data((2, 3), seed=9)
    g_seed = ng.gradients(y, x, seed=seed)
    xx = data((2, 3))
    out_default, out_seed = RUNTIME.computation([g_default, g_seed], x)(xx)
    np.testing.assert_allclose(out_default, 2 * xx)
    np.testing.assert_allclose(out_seed, 2 * xx * seed)
    with pytest.raises(ValueError, match="seed"):
        ng.gradients(y, x, seed=np.ones(3))


def test_gradient_with_respect_to_an_intermediate_node():
    x = ng.parameter([3], F64, name="x")
    h = ng.tanh(x)
    y = ng.sum(h * h * h)
    gh = ng.gradients(y, h)
    xx = data((3,))
    np.testing.assert_allclose(RUNTIME.computation(gh, x)(xx)[0], 3 * np.tanh(xx) ** 2)


def test_gradients_are_ordinary_nodes():
    x = ng.parameter([2, 3], F64, name="x")
    w = ng.parameter([3, 4], F64, name="w")
    y = ng.sum(ng.tanh(x @ w))
    gx, gw = ng.gradients(y, [x, w])
    for g in (gx, gw):
        assert isinstance(g, ng.Node)
        assert g.get_type_name() in repr(g)
        assert g.name
        assert str(g.element_type) == "f64"
    assert gx.shape == [2, 3] and gw.shape == [3, 4]
    f = ng.Function([y, gx, gw], [x, w], "loss_and_gradients")
    text = str(f)  # the gradient graph prints like any other
    assert text.startswith("Function loss_and_gradients")
    assert gx.name in text and gw.name in text and "Tanh" in text
    assert len(f.get_ordered_ops()) > 5
    comp = RUNTIME.computation(f)
    assert "loss_and_gradients" in repr(comp)
    xx, ww = data((2, 3)), data((3, 4), seed=1)
    loss, out_x, out_w = comp(xx, ww)
    t = np.tanh(xx @ ww)
    np.testing.assert_allclose(loss, t.sum())
    np.testing.assert_allclose(out_x, (1 - t * t) @ ww.T)
    np.testing.assert_allclose(out_w, xx.T @ (1 - t * t))
    # Gradient nodes compose with other ops and can be named.
    step = ng.subtract(w, gw * 0.1, name="sgd_step")
    assert step.name == "sgd_step"
    np.testing.assert_allclose(RUNTIME.computation(step, x, w)(xx, ww)[0], ww - 0.1 * out_w)


def test_gradient_is_the_same_for_float32():
    x = ng.parameter([3, 4], np.float32, name="x")
    y = ng.sum(ng.sigmoid(x) * ng.constant(weights((3, 4)).astype(np.float32)))
    g = ng.gradients(y, x)
    assert g.dtype == np.float32
    xx = data((3, 4)).astype(np.float32)
    s = 1 / (1 + np.exp(-xx.astype(F64)))
    np.testing.assert_allclose(RUNTIME.computation(g, x)(xx)[0], weights((3, 4)) * s * (1 - s),
                               rtol=1e-5, atol=1e-6)


def test_gradient_with_respect_to_a_variable():
    w = ng.variable(np.array([1.0, -2.0, 3.0]), name="w")
    x = ng.parameter([3], F64, name="x")
    g = ng.gradients(ng.sum(w * w * x), w)
    np.testing.assert_allclose(RUNTIME.computation(g, x)(np.array([1.0, 2.0, 3.0]))[0],
                               [2.0, -8.0, 18.0])
