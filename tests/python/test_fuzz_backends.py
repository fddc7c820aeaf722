"""Differential fuzzing: random graphs of the op set run on CPU and on INTERPRETER (the
reference executor) must agree.

Each case draws, from its own seed, a graph of a few ops over random shapes (rank 0 to 4),
one of f32, f64, i32, i64 (mixed through Convert), with NumPy broadcasting, reductions,
reshapes and transposes, slices, pads, matmul and dot, convolution, pooling, softmax, batch
normalization and LRN; float graphs also get the gradients of a scalar loss (autodiff). Values
are compared exactly for integers and booleans and with a tolerance suited to the float type.

A second fuzzer covers the storage-only types f16 and bf16: a parameter of a random type
(floats of every magnitude with NaN and infinities, or integers) is converted to f16 or bf16,
moved by data-movement ops and Converts between the two, and converted out again; both backends
must agree bit for bit (any NaN matching any NaN). NGRAPH_FUZZ_LOW_CASES (default 100) cases.

CI runs NGRAPH_FUZZ_CASES (default 300) cases from NGRAPH_FUZZ_SEED (default below); a failure
names the seed and case so that it can be replayed alone::

    NGRAPH_FUZZ_SEED=20261122 python -m pytest tests/python/test_fuzz_backends.py -k case17
    NGRAPH_FUZZ_CASES=5000 python -m pytest tests/python/test_fuzz_backends.py -q   # more

Ops with discontinuities (floor, sign, comparisons, argmax, convert to integer) only read
values that both backends compute bit for bit (parameters, integer arithmetic), so that a
last-bit difference of a float cannot flip them.
"""

from __future__ import annotations

import os

import ngraph as ng
import numpy as np
import pytest

SEED = int(os.environ.get("NGRAPH_FUZZ_SEED", "20261122"))
CASES = int(os.environ.get("NGRAPH_FUZZ_CASES", "300"))
LOW_CASES = int(os.environ.get("NGRAPH_FUZZ_LOW_CASES", "100"))
CPU = ng.runtime("CPU")
INTERPRETER = ng.runtime("INTERPRETER")

FLOATS = (np.float32, np.float64)
TYPES = (np.float32, np.float64, np.int32, np.int64)
# Tolerances per float type: (rtol, atol relative to the largest magnitude of the result).
TOLERANCE = {np.dtype(np.float32): (2e-3, 2e-4), np.dtype(np.float64): (1e-8, 1e-10)}

# Cases known to differ, by (seed, case), with the reason (none known).
KNOWN_MISMATCHES: dict[tuple[int, int], str] = {}


class Value:
    """A node of the graph being built, and whether both backends compute it bit for bit."""

    def __init__(self, node, exact):
        self.node, self.exact = node, exact

    @property
    def shape(self):
        return tuple(self.node.shape)

    @property
    def dtype(self):
        return np.dtype(self.node.dtype)


class Builder:
    def __init__(self, rng):
        self.rng = rng
        self.params, self.inputs, self.steps = [], [], []
        self.dtype = np.dtype(TYPES[rng.integers(len(TYPES))])

    def data(self, shape, dtype, kind="any"):
        if np.dtype(dtype).kind == "i":
            low = 1 if kind == "positive" else -9
            return self.rng.integers(low, 10, size=shape).astype(dtype)
        values = self.rng.uniform(0.5, 2.0, size=shape) if kind == "positive" else \
            self.rng.uniform(-2.0, 2.0, size=shape)
        return np.asarray(values, dtype=dtype)

    def parameter(self, shape, dtype=None, kind="any"):
        dtype = np.dtype(dtype or self.dtype)
        p = ng.parameter(list(shape), dtype=dtype, name=f"p{len(self.params)}")
        self.params.append(p)
        self.inputs.append(self.data(shape, dtype, kind))
        self.steps.append(f"p{len(self.params) - 1} = parameter({list(shape)}, {dtype.name})")
        return Value(p, True)

    def shape(self, rank=None):
        rank = self.rng.integers(0, 5) if rank is None else rank
        return tuple(int(d) for d in self.rng.integers(1, 5, size=rank))

    def pick(self, items):
        return items[self.rng.integers(len(items))]

    def subset(self, n):
        return sorted(int(a) for a in np.flatnonzero(self.rng.random(n) < 0.5))

    def broadcast_partner(self, v, kind="any"):
        """A new parameter whose shape broadcasts with v's (fewer axes, or 1s)."""
        shape = list(v.shape[self.rng.integers(0, len(v.shape) + 1):])
        shape = [1 if self.rng.random() < 0.3 else d for d in shape]
        return self.parameter(shape, v.dtype, kind)


def _positive(v):  # |x| + 1/2: a float away from zero, the same on both backends' terms
    return ng.absolute(v.node) + np.asarray(0.5, v.dtype)


# Each op takes the builder and a value and returns (node, exact) or None when it does not
# apply; graph construction errors (an invalid random geometry) just skip the op.
def op_unary_float(b, v):
    if v.dtype.kind != "f":
        return None
    fn = b.pick([ng.exp, ng.tanh, ng.sigmoid, ng.sin, ng.cos, ng.erf, ng.gelu, ng.relu,
                 ng.negative, ng.absolute, lambda x: ng.log(_positive(Value(x, False))),
                 lambda x: ng.sqrt(_positive(Value(x, False)))])
    return fn(ng.tanh(v.node) * np.asarray(2, v.dtype) if fn is ng.exp else v.node), False


def op_unary_exact(b, v):
    if not v.exact:
        return None
    fn = b.pick([ng.floor, ng.ceiling, ng.sign, ng.negative, ng.absolute, ng.relu])
    return fn(v.node), v.exact


def op_binary(b, v):
    other = b.broadcast_partner(v, "positive")
    name = b.pick(["add", "subtract", "multiply", "maximum", "minimum", "divide", "power"])
    exact = v.exact and v.dtype.kind == "i"
    if name == "divide":
        divisor = _positive(other) if v.dtype.kind == "f" else ng.absolute(other.node) + 1
        return ng.divide(v.node, divisor), exact
    if name == "power":
        if v.dtype.kind == "i":
            small = ng.minimum(ng.absolute(other.node), np.asarray(3, v.dtype))
            return ng.power(v.node, small), exact
        return ng.power(_positive(v), ng.tanh(other.node)), False
    node = getattr(ng, name)(v.node, other.node) if b.rng.random() < 0.5 else \
        getattr(ng, name)(other.node, v.node)
    return node, exact


def op_select(b, v):
    if not v.exact:
        return None
    other = b.broadcast_partner(v)
    cond = b.pick([ng.greater, ng.less_eq, ng.equal, ng.not_equal])(v.node, other.node)
    return ng.select(cond, v.node, other.node), True


def op_reduction(b, v):
    axes = b.subset(len(v.shape))
    fn = b.pick([ng.sum, ng.max, ng.min, ng.prod])
    if fn is ng.prod:
        if v.dtype.kind == "f":
            return ng.prod(ng.tanh(v.node) + np.asarray(1, v.dtype), axes), False
        return ng.prod(ng.minimum(ng.absolute(v.node), np.asarray(2, v.dtype)), axes), v.exact
    return fn(v.node, axes), v.exact and (v.dtype.kind == "i" or fn is not ng.sum)


def op_reshape(b, v):
    order = [int(a) for a in b.rng.permutation(len(v.shape))]
    permuted = [v.shape[a] for a in order]
    if b.rng.random() < 0.5 and permuted:
        size = int(np.prod(permuted))
        split = b.rng.integers(0, len(permuted) + 1)
        out = [int(np.prod(permuted[:split])), int(np.prod(permuted[split:]))]
        out = [d for d in out if d != 1] or ([size] if size != 1 else [])
    else:
        out = permuted
    return ng.reshape(v.node, out, order), v.exact


def op_broadcast(b, v):
    axis = int(b.rng.integers(0, len(v.shape) + 1))
    shape = list(v.shape)
    shape.insert(axis, int(b.rng.integers(1, 4)))
    return ng.broadcast(v.node, shape, broadcast_axes={axis}), v.exact


def op_slice(b, v):
    if not v.shape:
        return None
    lower = [int(b.rng.integers(0, d)) for d in v.shape]
    upper = [int(b.rng.integers(lo + 1, d + 1)) for lo, d in zip(lower, v.shape)]
    strides = [int(b.rng.integers(1, 3)) for _ in v.shape]
    return ng.slice(v.node, lower, upper, strides), v.exact


def op_pad_reverse_concat(b, v):
    if not v.shape:
        return None
    kind = b.pick(["pad", "reverse", "concat"])
    rank = len(v.shape)
    if kind == "reverse":
        return ng.reverse(v.node, b.subset(rank)), v.exact
    if kind == "concat":
        axis = int(b.rng.integers(rank))
        return ng.concat([v.node, ng.negative(v.node)], axis), v.exact
    mode = b.pick(["constant", "edge", "reflect", "symmetric"])
    below = [int(b.rng.integers(-1 if d > 1 else 0, 3)) for d in v.shape]
    above = [int(b.rng.integers(-1 if d > 1 else 0, 3)) for d in v.shape]
    return ng.pad(v.node, 3, below, above, pad_mode=mode), v.exact


def op_contraction(b, v):
    if not v.shape:
        return None
    k = v.shape[-1]
    n = int(b.rng.integers(1, 5))
    exact = v.exact and v.dtype.kind == "i"
    if b.rng.random() < 0.5:
        w = b.parameter((k, n), v.dtype)
        return ng.matmul(v.node, w.node), exact
    batch = b.shape(int(b.rng.integers(0, 2)))
    w = b.parameter(batch + (n, k), v.dtype)
    return ng.matmul(v.node, w.node, False, True), exact


def op_dot(b, v):
    count = int(b.rng.integers(0, min(len(v.shape), 2) + 1))
    w = b.parameter(tuple(v.shape[len(v.shape) - count:]) + b.shape(int(b.rng.integers(0, 2))),
                    v.dtype)
    return ng.dot(v.node, w.node, count), v.exact and v.dtype.kind == "i"


def op_softmax(b, v):
    if v.dtype.kind != "f":
        return None
    return ng.softmax(v.node, b.subset(len(v.shape))), False


def _image(b, v):
    """v as a batch [N, C, spatial...] of rank 3 or 4 (a new parameter if v has another rank)."""
    if v.dtype.kind != "f":
        return None
    if len(v.shape) in (3, 4):
        return v
    return b.parameter(b.shape(int(b.rng.integers(3, 5))), v.dtype)


def op_convolution(b, v):
    x = _image(b, v)
    if x is None:
        return None
    spatial = len(x.shape) - 2
    channels = x.shape[1]
    groups = b.pick([g for g in (1, 2, 3) if channels % g == 0])
    out = groups * int(b.rng.integers(1, 3))
    window = tuple(int(d) for d in b.rng.integers(1, 4, spatial))
    w = b.parameter((out, channels // groups) + window, x.dtype)

    def ints(low, high):
        return [int(s) for s in b.rng.integers(low, high, spatial)]

    node = ng.convolution(x.node, w.node, ints(1, 3), ints(1, 3), ints(-1, 3), ints(-1, 3),
                          ints(1, 3), groups=groups)
    return node, False


def op_pooling(b, v):
    x = _image(b, v)
    if x is None:
        return None
    spatial = len(x.shape) - 2
    window = [int(d) for d in b.rng.integers(1, 4, spatial)]
    strides = [int(d) for d in b.rng.integers(1, 3, spatial)]
    below = [int(b.rng.integers(0, w)) for w in window]
    above = [int(b.rng.integers(0, w)) for w in window]
    ceil_mode = bool(b.rng.random() < 0.3)
    if b.rng.random() < 0.5:
        return ng.max_pool(x.node, window, strides, above, below, ceil_mode=ceil_mode), x.exact
    return ng.avg_pool(x.node, window, strides, below, above, bool(b.rng.random() < 0.5),
                       ceil_mode=ceil_mode), False


def op_normalization(b, v):
    if v.dtype.kind != "f" or len(v.shape) < 2 or v.shape[0] * int(np.prod(v.shape[2:])) < 2:
        return None
    if b.rng.random() < 0.5 and len(v.shape) >= 3:
        return ng.lrn(v.node, 1e-1, 0.75, 1.0, int(b.rng.integers(1, 4))), False
    c = v.shape[1]
    gamma, beta = b.parameter((c,), v.dtype, "positive"), b.parameter((c,), v.dtype)
    return ng.batch_norm(1e-3, gamma.node, beta.node, v.node)[0], False


def op_convert(b, v):
    if v.dtype.kind == "f" and v.exact:
        return ng.convert(v.node, b.pick([np.int32, np.int64])), True
    if v.dtype.kind == "i":
        return ng.convert(v.node, b.pick(FLOATS)), v.exact
    return ng.convert(v.node, np.float64 if v.dtype == np.float32 else np.float32), False


def _indices(b, n, count_shape, negative=True):
    low = -n if negative else 0
    return np.asarray(b.rng.integers(low, n, size=count_shape), dtype=b.pick([np.int32, np.int64]))


def op_indexing(b, v):
    """Gather along a random axis (negative indices too), ScatterAdd of a new parameter into
    v, or EmbeddingLookup of rows of v."""
    if not v.shape or min(v.shape) == 0:
        return None
    rank = len(v.shape)
    axis = int(b.rng.integers(rank))
    idx = _indices(b, v.shape[axis], b.shape(int(b.rng.integers(0, 3))))
    kind = b.pick(["gather", "scatter", "embedding"])
    if kind == "gather":
        return ng.gather(v.node, idx, axis - rank if b.rng.random() < 0.3 else axis), v.exact
    if kind == "embedding":
        return ng.embedding_lookup(_indices(b, v.shape[0], idx.shape, False), v.node), v.exact
    upd = b.parameter(v.shape[:axis] + idx.shape + v.shape[axis + 1:], v.dtype)
    return ng.scatter_add(v.node, idx, upd.node, axis), v.exact and v.dtype.kind == "i"


def op_split_tile_replace(b, v):
    if not v.shape:
        return None
    rank = len(v.shape)
    kind = b.pick(["split", "tile", "replace"])
    if kind == "tile":
        repeats = [int(r) for r in b.rng.integers(1, 3, int(b.rng.integers(1, rank + 2)))]
        return ng.tile(v.node, repeats), v.exact
    axis = int(b.rng.integers(rank))
    if kind == "split":
        n = v.shape[axis]
        cut = int(b.rng.integers(0, n + 1))
        parts = ng.split(v.node, axis, [cut, n - cut])
        return parts[int(b.rng.integers(2))], v.exact
    lower = [int(b.rng.integers(0, d)) for d in v.shape]
    upper = [int(b.rng.integers(lo + 1, d + 1)) for lo, d in zip(lower, v.shape)]
    strides = [int(b.rng.integers(1, 3)) for _ in v.shape]
    src = ng.negative(ng.slice(v.node, lower, upper, strides))
    return ng.replace_slice(v.node, src, lower, upper, strides), v.exact


def op_layer_norm_dropout(b, v):
    """LayerNorm from a random axis (affine or not), or Dropout (the same mask on both
    backends: it is a function of the seed, the rank and the step)."""
    if v.dtype.kind != "f" or not v.shape:
        return None
    if b.rng.random() < 0.3:
        p, seed = float(b.rng.uniform(0.1, 0.7)), int(b.rng.integers(1 << 30))
        return ng.dropout(v.node, p, seed=seed), v.exact
    begin = int(b.rng.integers(len(v.shape)))
    if int(np.prod(v.shape[begin:])) < 2:
        return None
    if b.rng.random() < 0.5:
        return ng.layer_norm(v.node, begin_norm_axis=begin, epsilon=1e-3)[0], False
    n = int(np.prod(v.shape[begin:]))
    scale, bias = b.parameter((n,), v.dtype, "positive"), b.parameter((n,), v.dtype)
    return ng.layer_norm(v.node, scale.node, bias.node, begin, 1e-3)[0], False


def op_attention(b, v):
    """Scaled dot-product attention with v as the queries [..., L, E] (causal or not): the CPU
    fuses the softmax and its gradient, the INTERPRETER runs the composition."""
    if v.dtype.kind != "f" or len(v.shape) < 2:
        return None
    keys = int(b.rng.integers(1, 5))
    k = b.parameter(v.shape[:-2] + (keys, v.shape[-1]), v.dtype)
    w = b.parameter(v.shape[:-2] + (keys, int(b.rng.integers(1, 4))), v.dtype)
    causal = bool(b.rng.random() < 0.5)
    return ng.nn.scaled_dot_product_attention(v.node, k.node, w.node, causal=causal), False


OPS = [op_unary_float, op_unary_exact, op_binary, op_binary, op_select, op_reduction,
       op_reshape, op_broadcast, op_slice, op_pad_reverse_concat, op_contraction, op_dot,
       op_softmax, op_convolution, op_pooling, op_normalization, op_convert, op_indexing,
       op_split_tile_replace, op_layer_norm_dropout, op_attention]


def try_op(b, ops, v):
    """(op, (node, exact)) for a random op of `ops` applied to `v`; None for an invalid
    random geometry or a result of more than 20000 elements (the caller tries another)."""
    op = b.pick(ops)
    try:
        made = op(b, v)
    except (ValueError, TypeError):
        return None
    if made is None or int(np.prod(made[0].shape)) > 20000:
        return None
    return op, made


def build_case(rng):
    """A random graph: (builder, results, the scalar loss of float graphs or None)."""
    b = Builder(rng)
    values = [b.parameter(b.shape())]
    results = []
    for _ in range(int(rng.integers(2, 7))):
        v = values[-1] if rng.random() < 0.7 else b.pick(values)
        tried = try_op(b, OPS, v)
        if tried is None:
            continue
        op, made = tried
        b.steps.append(f"{op.__name__}({v.node.name}) -> {made[0].get_type_name()} "
                       f"{made[0].dtype}{list(made[0].shape)}")
        values.append(Value(*made))
    last = values[-1]
    if b.pick([True, False]) and last.exact and last.shape:
        axis = int(rng.integers(len(last.shape)))
        if last.shape[axis]:
            results.append(b.pick([ng.argmax, ng.argmin])(last.node, axis))
    results.insert(0, values[-1].node)
    loss = None
    floats = [v for v in values if v.dtype.kind == "f"]
    if floats:
        last = floats[-1]
        weights = ng.constant(b.data(last.shape, last.dtype))
        loss = ng.sum(last.node * weights, list(range(len(last.shape))))
    # A value that was float32 anywhere on the way has float32's precision, whatever its type.
    b.precision = np.dtype(np.float32 if any(v.dtype == np.float32 for v in values) else np.float64)
    return b, results, loss


def compare(got, expected, precision, what):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, \
        f"{what}: {got.dtype}{got.shape} vs {expected.dtype}{expected.shape}"
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    rtol, atol = TOLERANCE[min(expected.dtype, precision, key=lambda t: t.itemsize)]
    finite = expected[np.isfinite(expected)]
    scale = float(np.max(np.abs(finite))) if finite.size else 1.0
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol * max(scale, 1.0),
                               err_msg=what)


@pytest.mark.parametrize("case", range(CASES), ids=lambda c: f"case{c}")
def test_cpu_matches_interpreter(case):
    if (SEED, case) in KNOWN_MISMATCHES:
        pytest.xfail(KNOWN_MISMATCHES[(SEED, case)])
    b, results, loss = build_case(np.random.default_rng([SEED, case]))
    params = [p for p in b.params]
    outputs = list(results)
    if loss is not None:
        wrt = [p for p in params if np.dtype(p.dtype).kind == "f"]
        try:
            outputs += ng.gradients(loss, wrt)
        except ng.NoGradientError:
            pass
    replay = (f"seed {SEED}, case {case} (replay: NGRAPH_FUZZ_SEED={SEED} python -m pytest "
              f"{__file__} -k case{case}); graph:\n  " + "\n  ".join(b.steps))
    got_cpu = CPU.computation(outputs, *params)(*b.inputs)
    got_ref = INTERPRETER.computation(outputs, *params)(*b.inputs)
    for i, (x, y) in enumerate(zip(got_cpu, got_ref)):
        compare(x, y, b.precision, f"output {i} ({outputs[i].get_type_name()}) differs: {replay}")


# ------------------------------------------------------------------- f16 and bf16


def low_data(rng, shape, dtype, tame):
    """Values of `dtype`: small quarter-integers if `tame`, else floats of every magnitude with
    NaN, infinities and values that overflow f16 (integers: the type's small values)."""
    if np.dtype(dtype).kind in "iu":
        low = 0 if np.dtype(dtype).kind == "u" else -100
        return rng.integers(low, 100, size=shape).astype(dtype)
    if tame:
        return (rng.integers(-400, 400, size=shape) / 4).astype(dtype)
    x = rng.standard_normal(size=shape) * 10.0 ** rng.uniform(-12, 12, size=shape)
    special = rng.random(size=shape)
    x = np.where(special < 0.05, np.nan, np.where(special > 0.95, np.inf * np.sign(x), x))
    return x.astype(dtype)


def op_low_move(b, v):
    """Reverse, concat with itself, pad with a constant, select against its reverse, or a
    Convert to the other 16-bit type."""
    kind = b.pick(["reverse", "concat", "pad", "select", "other"])
    rank = len(v.shape)
    if kind == "other" or not v.shape:
        return ng.convert(v.node, "bf16" if v.node.element_type == "f16" else "f16"), True
    if kind == "reverse":
        return ng.reverse(v.node, b.subset(rank)), True
    if kind == "concat":
        return ng.concat([v.node, v.node], int(b.rng.integers(rank))), True
    if kind == "select":
        mask = ng.constant(b.rng.random(v.shape) < 0.5)
        return ng.select(mask, v.node, ng.reverse(v.node, list(range(rank)))), True
    value = ng.convert(ng.constant(np.float32(b.rng.uniform(-3, 3))), v.node.element_type)
    below = [int(b.rng.integers(0, 3)) for _ in v.shape]
    above = [int(b.rng.integers(0, 3)) for _ in v.shape]
    return ng.pad(v.node, value, below, above), True


def op_low_index(b, v):
    """Gather, Tile, a piece of a Split, or ReplaceSlice of a slice of itself: data movement
    that admits f16 and bf16."""
    if not v.shape or min(v.shape) == 0:
        return None
    rank = len(v.shape)
    axis = int(b.rng.integers(rank))
    kind = b.pick(["gather", "tile", "split", "replace"])
    if kind == "gather":
        idx = _indices(b, v.shape[axis], (int(b.rng.integers(1, 4)),))
        return ng.gather(v.node, idx, axis), True
    if kind == "tile":
        return ng.tile(v.node, [2] * rank), True
    if kind == "split":
        return ng.split(v.node, axis, [1, v.shape[axis] - 1])[1], True
    upper = list(v.shape)
    upper[axis] = 1
    return ng.replace_slice(v.node, ng.slice(v.node, [0] * rank, upper), [0] * rank, upper), True


LOW_OPS = [op_reshape, op_broadcast, op_slice, op_low_move, op_low_index]


def build_low_case(rng):
    """(parameter, input, results, steps) of a random f16/bf16 data-movement graph."""
    b = Builder(rng)
    src = np.dtype(b.pick([np.float32, np.float64, np.int32, np.int64, np.uint8]))
    tame = src.kind != "f" or bool(rng.random() < 0.5)
    p = ng.parameter(list(b.shape()), src, name="p0")
    x = low_data(rng, tuple(p.shape), src, tame)
    low = b.pick(["f16", "bf16"])
    v = Value(ng.convert(p, low), True)
    steps = [f"p0 = parameter({list(p.shape)}, {src.name}), tame={tame}", f"convert -> {low}"]
    for _ in range(int(rng.integers(1, 6))):
        tried = try_op(b, LOW_OPS, v)
        if tried is None:
            continue
        op, made = tried
        v = Value(*made)
        steps.append(f"{op.__name__} -> {v.node.get_type_name()} {v.node.element_type}"
                     f"{list(v.shape)}")
    # Out: as f32 always; as f64 or as the source's type (integers only from tame values).
    outs = [ng.convert(v.node, np.float32),
            ng.convert(v.node, b.pick([np.float64, src] if tame else [np.float64]))]
    if v.node.element_type == "f16":
        outs.append(v.node)  # a float16 result, as NumPy's
    return p, x, outs, steps


@pytest.mark.parametrize("case", range(LOW_CASES), ids=lambda c: f"low{c}")
def test_cpu_matches_interpreter_f16_bf16(case):
    p, x, outs, steps = build_low_case(np.random.default_rng([SEED, 1, case]))
    replay = (f"seed {SEED}, case low{case} (replay: NGRAPH_FUZZ_SEED={SEED} python -m pytest "
              f"{__file__} -k low{case}); graph:\n  " + "\n  ".join(steps))
    got_cpu = CPU.computation(outs, p)(x)
    got_ref = INTERPRETER.computation(outs, p)(x)
    for i, (a, r) in enumerate(zip(got_cpu, got_ref)):
        assert a.dtype == r.dtype and a.shape == r.shape, f"output {i}: {replay}"
        np.testing.assert_array_equal(a, r, err_msg=f"output {i} differs: {replay}")
