"""The ONNX op converters: one function per ONNX op, registered with ``@op``.

A converter gets a :class:`Ctx` (the node's inputs, attributes and opset) and returns the
node's outputs: ngraph nodes, or NumPy arrays for values known at import. Adding an op is
one function here (docs/onnx.md's table follows: tools/onnx_conformance.py); the conformance
suite (tests/python/onnx/test_backend.py) then runs onnx's own cases of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper

import ngraph as ng
from ngraph.onnx.errors import ONNXError
from ngraph.onnx.importer import (
    _MAX_ELEMENTS,
    StaticInputNeeded,
    _describe,
    dtype_to_onnx,
    onnx_dtype,
    tensor_value,
)

__all__ = ["REGISTRY", "convert_node", "as_output"]


@dataclass
class Converter:
    fn: Callable
    since: int
    until: int
    movement: bool   # moves or selects data only: computes in any element type


REGISTRY: dict[str, Converter] = {}


def op(*names: str, since: int = 1, until: int = 1 << 30, movement: bool = False):
    def register(fn):
        for n in names:
            REGISTRY[n] = Converter(fn, since, until, movement)
        return fn

    return register


# The ops evaluated at import, by onnx's reference implementation, when all their inputs are
# known: the shape arithmetic exporters write (the reference's versions of these agree with
# the spec at every opset). Other nodes of known inputs are converted as usual, on constants.
FOLDED = {
    "Identity", "Cast", "CastLike", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
    "Concat", "Split", "Slice", "Gather", "GatherElements", "Expand", "Tile", "Add", "Sub",
    "Mul", "Div", "Mod", "Neg", "Abs", "Sqrt", "Floor", "Ceil", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Where", "Max", "Min", "ReduceProd",
    "ReduceSum", "ReduceMax", "ReduceMin", "Trilu",
}


def _is_low(node: Any) -> bool:
    return isinstance(node, ng.Node) and node.element_type in ("f16", "bf16")


# ------------------------------------------------------------------------- the context


class Ctx:
    """One ONNX node being converted."""

    def __init__(self, imp, node: onnx.NodeProto) -> None:
        self.imp = imp
        self.node = node
        self.opset = imp.opset
        self.attrs = {a.name: a for a in node.attribute}
        self.low_type = None  # f16/bf16 inputs computed in f32: the type results go back to

    # -- errors
    def where(self) -> str:
        return f"{_describe(self.node)} (opset {self.opset})"

    def fail(self, message: str) -> ONNXError:
        return ONNXError(f"{self.where()}: {message}")

    # -- inputs
    @property
    def n_inputs(self) -> int:
        return len(self.node.input)

    def has(self, i: int) -> bool:
        return i < len(self.node.input) and bool(self.node.input[i])

    def raw(self, i: int, static: bool = False, state: bool = False) -> Any:
        """Input i: a Node, an ndarray (known at import) or a list (a sequence); None when
        absent. `state`: an initializer here is state a training step updates (a Variable
        when the import is trainable)."""
        if not self.has(i):
            return None
        name = self.node.input[i]
        if name in self.imp.values:
            return self.imp.values[name]
        if name in self.imp.initializers:
            return self.imp.initializer_value(name, static, state)
        raise self.fail(f"input {i} {name!r} has no value")  # _topological rules this out

    def is_static(self, i: int) -> bool:
        if not self.has(i):
            return True
        name = self.node.input[i]
        if name in self.imp.values:
            return isinstance(self.imp.values[name], np.ndarray)
        init = self.imp.initializers.get(name)
        return init is not None and name not in self.imp.shared and not (
            init.value.dtype.kind == "f" and self.imp.is_weight(name, init.value))

    def x(self, i: int, default: Any = None, state: bool = False) -> ng.Node:
        """Input i as a node (a known value becomes a constant)."""
        v = self.raw(i, state=state)
        if v is None:
            if default is None:
                raise self.fail(f"input {i} is required")
            v = default
        if isinstance(v, list):
            raise self.fail(f"input {i} is a sequence, where a tensor is expected")
        node = v if isinstance(v, ng.Node) else ng.constant(np.asarray(v))
        if self.low_type is not None and _is_low(node):
            node = ng.convert(node, np.float32)
        return node

    def static(self, i: int, what: str, default: Any = None) -> np.ndarray | None:
        """Input i, which must be known at import (a shape, axes, a count)."""
        if not self.has(i):
            return None if default is None else np.asarray(default)
        v = self.raw(i, static=True)
        if isinstance(v, ng.Node):
            name = self.node.input[i]
            source = self.imp.input_source(name)
            if source is not None:
                via = "is" if source == name else "is computed from"
                raise StaticInputNeeded(
                    f"{self.where()}: input {i} ({what}) {via} the graph input {source!r}; "
                    f"ngraph needs it known at import: fix it with "
                    f"constants={{{source!r}: value}}", source)
            raise self.fail(f"input {i} ({what}) is computed at run time; ngraph needs it "
                            "known at import (a constant, an initializer or computed from "
                            "shapes)")
        return np.asarray(v)

    def ints(self, i: int, what: str) -> list[int] | None:
        v = self.static(i, what)
        return None if v is None else [int(a) for a in v.reshape(-1)]

    # -- attributes
    def attr(self, name: str, default: Any = None) -> Any:
        a = self.attrs.get(name)
        if a is None:
            return default
        kinds = {onnx.AttributeProto.FLOAT: "f", onnx.AttributeProto.INT: "i",
                 onnx.AttributeProto.STRING: "s", onnx.AttributeProto.TENSOR: "t",
                 onnx.AttributeProto.FLOATS: "floats", onnx.AttributeProto.INTS: "ints",
                 onnx.AttributeProto.STRINGS: "strings"}
        kind = kinds.get(a.type)
        if kind is None:
            raise self.fail(f"attribute {name!r} is of type "
                            f"{onnx.AttributeProto.AttributeType.Name(a.type)}, which ngraph "
                            "does not read")
        if default is not None:
            expected = _expected_kind(default)
            if expected and expected != kind and not (expected == "f" and kind == "i"):
                raise self.fail(f"attribute {name!r} is a "
                                f"{onnx.AttributeProto.AttributeType.Name(a.type)}, expected "
                                f"{_KIND_NAMES[expected]}")
        if kind == "f":
            return float(a.f)
        if kind == "i":
            return int(a.i)
        if kind == "s":
            return a.s.decode("utf-8", "replace")
        if kind == "t":
            return tensor_value(a.t, f"{self.where()}: attribute {name!r}")
        if kind == "floats":
            return [float(v) for v in a.floats]
        if kind == "ints":
            return [int(v) for v in a.ints]
        return [s.decode("utf-8", "replace") for s in a.strings]

    def int_attr(self, name: str, default: int) -> int:
        return int(self.attr(name, default))

    def float_attr(self, name: str, default: float) -> float:
        return float(self.attr(name, float(default)))

    def ints_attr(self, name: str, default: list[int] | None = None) -> list[int] | None:
        if name not in self.attrs:
            return default
        return [int(a) for a in self.attr(name, [0])]


_KIND_NAMES = {"f": "FLOAT", "i": "INT", "s": "STRING", "t": "TENSOR", "floats": "FLOATS",
               "ints": "INTS", "strings": "STRINGS"}


def _expected_kind(default: Any) -> str | None:
    if isinstance(default, bool) or isinstance(default, int):
        return "i"
    if isinstance(default, float):
        return "f"
    if isinstance(default, str):
        return "s"
    if isinstance(default, (list, tuple)):
        if default and isinstance(default[0], float):
            return "floats"
        if default and isinstance(default[0], str):
            return "strings"
        return "ints"
    return None


# --------------------------------------------------------------------------- converting


def convert_node(imp, node: onnx.NodeProto) -> None:
    domain = node.domain or "ai.onnx"
    if domain != "ai.onnx":
        version = imp.domains.get(domain)
        raise ONNXError(f"{_describe(node)}: domain {domain!r} (opset "
                        f"{version if version is not None else 'not imported'}) is not "
                        "supported: ngraph imports ops of the domain 'ai.onnx'")
    conv = REGISTRY.get(node.op_type)
    if conv is None:
        raise ONNXError(f"{_describe(node)}: op {node.op_type!r} of domain 'ai.onnx' (opset "
                        f"{imp.opset}) is not supported by ngraph's ONNX importer (docs/onnx.md "
                        "lists the supported ops)")
    ctx = Ctx(imp, node)
    for a in node.attribute:
        if a.ref_attr_name:
            raise ctx.fail(f"attribute {a.name!r} refers to a function attribute; ngraph does "
                           "not import functions")
    if node.op_type in FOLDED and all(ctx.is_static(i) for i in range(ctx.n_inputs)) and \
            not any(isinstance(ctx.raw(i, True), list) for i in range(ctx.n_inputs)):
        outputs = _fold(ctx)
    else:
        if not conv.movement and any(_is_low(ctx.raw(i)) for i in range(ctx.n_inputs)
                                     if not ctx.is_static(i)):
            ctx.low_type = next(ctx.raw(i).dtype for i in range(ctx.n_inputs)
                                if not ctx.is_static(i) and _is_low(ctx.raw(i)))
        try:
            outputs = conv.fn(ctx)
        except ONNXError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure names the node it happened in
            raise ctx.fail(f"{type(e).__name__}: {e}") from e
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        if ctx.low_type is not None:
            outputs = [ng.convert(o, ctx.low_type) if isinstance(o, ng.Node) and
                       o.element_type == "f32" else o for o in outputs]
    for k, name in enumerate(node.output):
        if not name:
            continue
        if k >= len(outputs) or outputs[k] is None:
            raise ctx.fail(f"output {k} ({name!r}) is not supported by ngraph")
        out = outputs[k]
        if isinstance(out, ng.Node):
            count = int(np.prod(out.shape, dtype=object)) if len(out.shape) else 1
            if count > _MAX_ELEMENTS:
                raise ctx.fail(f"output {k} has shape {list(out.shape)}: {count} elements, "
                               "more than ngraph accepts")
        imp.values[name] = out


def _fold(ctx: Ctx) -> list[np.ndarray]:
    """Evaluates a node whose inputs are all known, with onnx's reference implementation."""
    from onnx.reference import ReferenceEvaluator

    node = ctx.node
    values = [ctx.raw(i, static=True) if ctx.has(i) else None for i in range(ctx.n_inputs)]
    if node.op_type == "Constant":
        return [_constant(ctx)]
    inputs = []
    feeds = {}
    for name, v in zip(node.input, values):
        if not name or name in feeds:
            continue
        v = np.asarray(v)
        inputs.append(helper.make_tensor_value_info(name, dtype_to_onnx(v.dtype), v.shape))
        feeds[name] = v
    outputs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
               for o in node.output if o]
    graph = helper.make_graph([node], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ctx.opset)])
    try:
        results = ReferenceEvaluator(model).run(None, feeds)
    except Exception as e:
        raise ctx.fail(f"evaluating it at import failed: {type(e).__name__}: {e}") from None
    out = []
    it = iter(results)
    for o in node.output:
        out.append(np.asarray(next(it)) if o else None)
    return out


def as_output(imp, name: str) -> ng.Node:
    v = imp.values[name]
    if isinstance(v, list):
        raise ONNXError(f"graph output {name!r} is a sequence; ngraph's outputs are tensors")
    if isinstance(v, np.ndarray):
        return ng.constant(v)
    return v


# ------------------------------------------------------------------------------ helpers


def _axis(ctx: Ctx, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise ctx.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _reshape(x: ng.Node, shape) -> ng.Node:
    shape = [int(d) for d in shape]
    if list(x.shape) == shape:
        return x
    return ng.reshape(x, shape)


def _transpose(x: ng.Node, perm) -> ng.Node:
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return x
    return ng.reshape(x, [x.shape[p] for p in perm], input_order=perm)


def _bcast(x: ng.Node, shape) -> ng.Node:
    shape = [int(d) for d in shape]
    if list(x.shape) == shape:
        return x
    return ng.broadcast_to(x, shape)


def _const(value, like: ng.Node) -> ng.Node:
    return ng.constant(np.asarray(value, dtype=like.dtype))


def _keep(x: ng.Node, in_shape, axes, keepdims: bool) -> ng.Node:
    if not keepdims:
        return x
    return _reshape(x, [1 if i in axes else d for i, d in enumerate(in_shape)])


# ----------------------------------------------------------------------------- constants


@op("Constant", movement=True)
def _constant(ctx: Ctx):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in ctx.attrs:
            v = ctx.attr(key)
            if key == "value":
                return v
            dtype = np.float32 if "float" in key else np.int64
            return np.asarray(v, dtype=dtype)
    raise ctx.fail("no value attribute of a supported kind (value, value_float(s), "
                   "value_int(s)); sparse and string constants are not supported")


@op("Identity", movement=True)
def _identity(ctx):
    v = ctx.raw(0)
    return v


@op("Shape", movement=True)
def _shape(ctx):
    v = ctx.raw(0, static=True)
    shape = list(v.shape)
    start, end = ctx.int_attr("start", 0), ctx.attr("end", None)
    rank = len(shape)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = rank if end is None else min(max(end + rank if end < 0 else end, 0), rank)
    return np.asarray(shape[start:end], np.int64)


@op("Size", movement=True)
def _size(ctx):
    v = ctx.raw(0, static=True)
    return np.asarray(int(np.prod(v.shape, dtype=np.int64)), np.int64)


@op("ConstantOfShape", movement=True)
def _constant_of_shape(ctx):
    shape = ctx.ints(0, "shape")
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else value.reshape(-1)
    return np.full(shape, value[0], value.dtype)


@op("Range", movement=True)
def _range(ctx):
    start, limit, delta = (ctx.static(i, n) for i, n in enumerate(("start", "limit", "delta")))
    return np.arange(start, limit, delta).astype(start.dtype)


# ---------------------------------------------------------------------------- elementwise


def _unary(name, fn):
    op(name)(lambda ctx: fn(ctx.x(0)))


for _name, _fn in {
    "Abs": ng.abs, "Acos": ng.acos, "Asin": ng.asin, "Atan": ng.atan, "Ceil": ng.ceiling,
    "Cos": ng.cos, "Cosh": ng.cosh, "Erf": ng.erf, "Exp": ng.exp, "Floor": ng.floor,
    "Log": ng.log, "Neg": ng.negative, "Relu": ng.relu, "Sigmoid": ng.sigmoid,
    "Sign": ng.sign, "Sin": ng.sin, "Sinh": ng.sinh, "Sqrt": ng.sqrt, "Tan": ng.tan,
    "Tanh": ng.tanh, "Not": ng.logical_not,
}.items():
    _unary(_name, _fn)


@op("Reciprocal")
def _reciprocal(ctx):
    x = ctx.x(0)
    return _const(1, x) / x


# Activations as functions of a node (the recurrent ops take them by name too).


def softplus(x):
    """log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|))."""
    return ng.maximum(x, _const(0, x)) + ng.log(_const(1, x) + ng.exp(-ng.abs(x)))


def softsign(x):
    return x / (_const(1, x) + ng.abs(x))


def elu(x, alpha=1.0):
    return ng.select(ng.greater(x, _const(0, x)), x,
                     (ng.exp(x) - _const(1, x)) * _const(alpha, x))


def leaky_relu(x, alpha=0.01):
    return ng.select(ng.less(x, _const(0, x)), x * _const(alpha, x), x)


def thresholded_relu(x, alpha=1.0):
    return ng.select(ng.greater(x, _const(alpha, x)), x, _const(np.zeros(x.shape), x))


def hard_sigmoid(x, alpha=0.2, beta=0.5):
    return ng.minimum(ng.maximum(x * _const(alpha, x) + _const(beta, x), _const(0, x)),
                      _const(1, x))


op("Softplus")(lambda ctx: softplus(ctx.x(0)))
op("Softsign")(lambda ctx: softsign(ctx.x(0)))
op("Elu")(lambda ctx: elu(ctx.x(0), ctx.float_attr("alpha", 1.0)))
op("LeakyRelu")(lambda ctx: leaky_relu(ctx.x(0), ctx.float_attr("alpha", 0.01)))
op("ThresholdedRelu", since=10)(
    lambda ctx: thresholded_relu(ctx.x(0), ctx.float_attr("alpha", 1.0)))
op("HardSigmoid")(lambda ctx: hard_sigmoid(ctx.x(0), ctx.float_attr("alpha", 0.2),
                                           ctx.float_attr("beta", 0.5)))


@op("Selu")
def _selu(ctx):
    x = ctx.x(0)
    alpha = ctx.float_attr("alpha", 1.67326319217681884765625)
    gamma = ctx.float_attr("gamma", 1.05070102214813232421875)
    neg = (ng.exp(x) - _const(1, x)) * _const(alpha, x)
    return ng.select(ng.greater(x, _const(0, x)), x, neg) * _const(gamma, x)


@op("Celu", since=12)
def _celu(ctx):
    x = ctx.x(0)
    alpha = ctx.float_attr("alpha", 1.0)
    neg = (ng.exp(x / _const(alpha, x)) - _const(1, x)) * _const(alpha, x)
    return ng.maximum(x, _const(0, x)) + ng.minimum(_const(0, x), neg)


@op("PRelu")
def _prelu(ctx):
    x, slope = ctx.x(0), ctx.x(1)
    try:
        np.broadcast_shapes(tuple(x.shape), tuple(slope.shape))
    except ValueError:
        # before opset 9, a slope of shape [C] is per channel (axis 1)
        if len(slope.shape) == 1 and len(x.shape) > 2 and slope.shape[0] == x.shape[1]:
            slope = _reshape(slope, [slope.shape[0]] + [1] * (len(x.shape) - 2))
        else:
            raise ctx.fail(f"slope {list(slope.shape)} does not broadcast to the input "
                           f"{list(x.shape)}") from None
    return ng.select(ng.less(x, _const(0, x)), x * slope, _bcast(x, np.broadcast_shapes(
        tuple(x.shape), tuple(slope.shape))))


@op("HardSwish", since=14)
def _hard_swish(ctx):
    x = ctx.x(0)
    hs = ng.minimum(ng.maximum(x * _const(1 / 6, x) + _const(0.5, x), _const(0, x)),
                    _const(1, x))
    return x * hs


@op("Mish", since=18)
def _mish(ctx):
    x = ctx.x(0)
    return x * ng.tanh(softplus(x))


@op("Gelu", since=20)
def _gelu(ctx):
    x = ctx.x(0)
    if ctx.attr("approximate", "none") == "tanh":
        inner = (x + _const(0.044715, x) * x * x * x) * _const(math.sqrt(2 / math.pi), x)
        return _const(0.5, x) * x * (_const(1, x) + ng.tanh(inner))
    return _const(0.5, x) * x * (_const(1, x) + ng.erf(x * _const(1 / math.sqrt(2), x)))


@op("Acosh", since=9)
def _acosh(ctx):
    x = ctx.x(0)
    return ng.log(x + ng.sqrt(x * x - _const(1, x)))


@op("Asinh", since=9)
def _asinh(ctx):
    x = ctx.x(0)
    return ng.log(x + ng.sqrt(x * x + _const(1, x)))


@op("Atanh", since=9)
def _atanh(ctx):
    x = ctx.x(0)
    return ng.log((_const(1, x) + x) / (_const(1, x) - x)) * _const(0.5, x)


@op("IsNaN", since=9)
def _isnan(ctx):
    x = ctx.x(0)
    return ng.not_equal(x, x)


@op("IsInf", since=10)
def _isinf(ctx):
    x = ctx.x(0)
    pos, neg = ctx.int_attr("detect_positive", 1), ctx.int_attr("detect_negative", 1)
    out = None
    if pos:
        out = ng.equal(x, _const(np.inf, x))
    if neg:
        n = ng.equal(x, _const(-np.inf, x))
        out = n if out is None else ng.logical_or(out, n)
    return out if out is not None else _bcast(ng.constant(np.zeros((), bool)), x.shape)


@op("Shrink", since=9)
def _shrink(ctx):
    x = ctx.x(0)
    lambd, bias = ctx.float_attr("lambd", 0.5), ctx.float_attr("bias", 0.0)
    return ng.select(ng.less(x, _const(-lambd, x)), x + _const(bias, x),
                     ng.select(ng.greater(x, _const(lambd, x)), x - _const(bias, x),
                               _const(np.zeros(x.shape), x)))


@op("Clip")
def _clip(ctx):
    x = ctx.x(0)
    if ctx.opset < 11:
        lo, hi = ctx.attr("min", -np.inf), ctx.attr("max", np.inf)
        lo_n = None if lo == -np.inf else _const(lo, x)
        hi_n = None if hi == np.inf else _const(hi, x)
    else:
        lo_n = ctx.x(1) if ctx.has(1) else None
        hi_n = ctx.x(2) if ctx.has(2) else None
    if lo_n is not None:
        x = ng.maximum(x, lo_n)
    if hi_n is not None:
        x = ng.minimum(x, hi_n)
    return x


def _binary(name, fn):
    op(name)(lambda ctx: fn(ctx.x(0), ctx.x(1)))


for _name, _fn in {
    "Add": ng.add, "Sub": ng.subtract, "Mul": ng.multiply, "Equal": ng.equal,
    "Greater": ng.greater, "Less": ng.less, "GreaterOrEqual": ng.greater_eq,
    "LessOrEqual": ng.less_eq, "And": ng.logical_and, "Or": ng.logical_or,
}.items():
    _binary(_name, _fn)


@op("Xor")
def _xor(ctx):
    return ng.not_equal(ctx.x(0), ctx.x(1))


def divide(a: ng.Node, b: ng.Node) -> ng.Node:
    """a / b as ONNX divides: integers truncate toward zero (C); ngraph's Divide floors."""
    if a.dtype.kind != "i":
        return a / b
    q = a / b
    r = a - q * b
    fix = ng.logical_and(ng.not_equal(r, _const(0, r)),
                         ng.not_equal(ng.less(a, _const(0, a)), ng.less(b, _const(0, b))))
    return ng.select(fix, q + _const(1, q), q)


op("Div")(lambda ctx: divide(ctx.x(0), ctx.x(1)))


@op("Pow")
def _pow(ctx):
    a, b = ctx.x(0), ctx.x(1)
    if b.dtype == a.dtype:
        return ng.power(a, b)
    if a.dtype.kind in "iu" and b.dtype.kind == "f":  # in f64, truncated to the base's type
        return ng.convert(ng.power(ng.convert(a, np.float64), ng.convert(b, np.float64)),
                          a.dtype)
    return ng.power(a, ng.convert(b, a.dtype))


@op("Mod", since=10)
def _mod(ctx):
    a, b = ctx.x(0), ctx.x(1)
    fmod = ctx.int_attr("fmod", 0)
    if a.dtype.kind == "f":
        # C's fmod (the sign of a), exact for |b| = inf; fmod=0: moved to the sign of b
        q = a / b
        r = a - ng.sign(q) * ng.floor(ng.abs(q)) * b
        finite_a = ng.equal(a - a, _const(0, a))
        r = ng.select(ng.logical_and(ng.equal(ng.abs(b), _const(np.inf, b)), finite_a), a, r)
        if fmod:
            return r
        zero = _const(0, r)
        differ = ng.logical_and(ng.not_equal(r, zero),
                                ng.not_equal(ng.less(r, zero), ng.less(b, zero)))
        return ng.select(differ, r + b, r)
    q = a / b  # floored
    r = a - q * b  # the sign of b (Python's %)
    if not fmod or a.dtype.kind == "u":
        return r
    # C's fmod: the sign of a
    differ = ng.logical_and(ng.not_equal(r, _const(0, r)),
                            ng.not_equal(ng.less(r, _const(0, r)), ng.less(a, _const(0, a))))
    return ng.select(differ, r - b, r)


def _variadic(name, fn, mean=False):
    def convert(ctx):
        xs = [ctx.x(i) for i in range(ctx.n_inputs) if ctx.has(i)]
        out = xs[0]
        for v in xs[1:]:
            out = fn(out, v)
        if mean:
            out = out / _const(len(xs), out)
        return out

    op(name)(convert)


_variadic("Sum", ng.add)
_variadic("Max", ng.maximum)
_variadic("Min", ng.minimum)
_variadic("Mean", ng.add, mean=True)


@op("Where", since=9)
def _where(ctx):
    c, a, b = ctx.x(0), ctx.x(1), ctx.x(2)
    shape = np.broadcast_shapes(tuple(c.shape), tuple(a.shape), tuple(b.shape))
    return ng.select(_bcast(c, shape), _bcast(a, shape), _bcast(b, shape))


@op("Cast", movement=True)
def _cast(ctx):
    to = onnx_dtype(ctx.int_attr("to", 1), f"{ctx.where()}: attribute 'to'")
    x = ctx.x(0)
    if x.dtype == to:
        return x
    return ng.convert(x, to)


@op("CastLike", since=15, movement=True)
def _cast_like(ctx):
    x = ctx.x(0)
    to = ctx.raw(1, static=True).dtype
    return x if x.dtype == to else ng.convert(x, to)


# ----------------------------------------------------------------------------- shapes


@op("Reshape", movement=True)
def _reshape_op(ctx):
    x = ctx.x(0)
    if ctx.opset < 5:
        shape = ctx.ints_attr("shape", [])
    else:
        shape = ctx.ints(1, "shape")
    allowzero = ctx.int_attr("allowzero", 0)
    out = []
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            if i >= len(x.shape):
                raise ctx.fail(f"shape {shape}: 0 at axis {i} copies an axis the input "
                               f"{list(x.shape)} does not have")
            d = x.shape[i]
        out.append(d)
    total = int(np.prod(x.shape, dtype=np.int64))
    if out.count(-1) > 1:
        raise ctx.fail(f"shape {shape} has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise ctx.fail(f"cannot reshape {list(x.shape)} to {shape}")
        out[out.index(-1)] = total // known
    if any(d < 0 for d in out) or int(np.prod(out, dtype=np.int64)) != total:
        raise ctx.fail(f"cannot reshape {list(x.shape)} ({total} elements) to {shape}")
    return _reshape(x, out)


@op("Flatten", movement=True)
def _flatten(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = ctx.int_attr("axis", 1)
    if not -rank <= axis <= rank:
        raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    a = int(np.prod(x.shape[:axis], dtype=np.int64))
    return _reshape(x, [a, int(np.prod(x.shape[axis:], dtype=np.int64))])


def _axes_input(ctx, index: int, attr_until: int) -> list[int] | None:
    """Axes given as an attribute before opset `attr_until`, as an input from it."""
    if ctx.opset < attr_until:
        return ctx.ints_attr("axes", None)
    return ctx.ints(index, "axes")


@op("Squeeze", movement=True)
def _squeeze(ctx):
    x = ctx.x(0)
    axes = _axes_input(ctx, 1, 13)
    rank = len(x.shape)
    if not axes:
        keep = [d for d in x.shape if d != 1]
    else:
        axes = {_axis(ctx, a, rank) for a in axes}
        for a in axes:
            if x.shape[a] != 1:
                raise ctx.fail(f"axis {a} of shape {list(x.shape)} has size {x.shape[a]}, "
                               "not 1")
        keep = [d for i, d in enumerate(x.shape) if i not in axes]
    return _reshape(x, keep)


@op("Unsqueeze", movement=True)
def _unsqueeze(ctx):
    x = ctx.x(0)
    axes = _axes_input(ctx, 1, 13)
    if axes is None:
        raise ctx.fail("axes are required")
    rank = len(x.shape) + len(axes)
    axes = sorted(_axis(ctx, a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise ctx.fail(f"axes {axes} repeat an axis")
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return _reshape(x, shape)


@op("Transpose", movement=True)
def _transpose_op(ctx):
    x = ctx.x(0)
    perm = ctx.ints_attr("perm", None)
    rank = len(x.shape)
    if perm is None:
        perm = list(range(rank))[::-1]
    if sorted(perm) != list(range(rank)):
        raise ctx.fail(f"perm {perm} is not a permutation of the {rank} axes")
    return _transpose(x, perm)


@op("Concat", movement=True)
def _concat(ctx):
    xs = [ctx.x(i) for i in range(ctx.n_inputs) if ctx.has(i)]
    rank = len(xs[0].shape)
    axis = _axis(ctx, ctx.int_attr("axis", 0 if ctx.opset < 4 else 1 << 40), rank)
    xs = [x for x in xs if x.shape[axis] != 0 or len(xs) == 1] or xs[:1]
    if len(xs) == 1:
        return xs[0]
    return ng.concat(xs, axis)


@op("Split", movement=True)
def _split(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", 0), rank)
    if ctx.opset < 13:
        sizes = ctx.ints_attr("split", None)
    else:
        sizes = ctx.ints(1, "split")
    n_out = len(ctx.node.output)
    dim = x.shape[axis]
    if not sizes:
        parts = ctx.int_attr("num_outputs", n_out) if ctx.opset >= 18 else n_out
        size = -(-dim // parts)
        sizes = [min(size, dim - i * size) for i in range(parts)]
        if ctx.opset < 18 and dim % parts:
            raise ctx.fail(f"axis {axis} of size {dim} does not split into {parts} equal parts")
    if sum(sizes) != dim:
        raise ctx.fail(f"split sizes {sizes} do not add up to axis {axis}'s size {dim}")
    return _split_sizes(x, axis, sizes)


def _split_sizes(x, axis, sizes):
    outs = []
    start = 0
    for s in sizes:
        lo = [0] * len(x.shape)
        hi = list(x.shape)
        lo[axis], hi[axis] = start, start + s
        outs.append(ng.slice(x, lo, hi))
        start += s
    return outs


@op("Slice", movement=True)
def _slice(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    if ctx.opset < 10:
        starts, ends = ctx.ints_attr("starts", []), ctx.ints_attr("ends", [])
        axes, steps = ctx.ints_attr("axes", None), None
    else:
        starts, ends = ctx.ints(1, "starts"), ctx.ints(2, "ends")
        axes, steps = ctx.ints(3, "axes"), ctx.ints(4, "steps")
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in "
                       "length")
    return _strided_slice(ctx, x, {_axis(ctx, a, rank): (s, e, st)
                                   for a, s, e, st in zip(axes, starts, ends, steps)})


def _strided_slice(ctx, x, spec):
    rank = len(x.shape)
    lo, hi, strides, rev = [0] * rank, list(x.shape), [1] * rank, []
    for a, (start, end, step) in spec.items():
        dim = x.shape[a]
        if step == 0:
            raise ctx.fail(f"step 0 on axis {a}")
        if start < 0:
            start += dim
        if end < 0:
            end += dim
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            indices = range(start, end, step)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            indices = range(start, end, step)
        n = len(indices)
        if n == 0:
            lo[a], hi[a] = 0, 0
            continue
        if step > 0:
            lo[a], hi[a], strides[a] = indices[0], indices[-1] + 1, step
        else:
            rev.append(a)
            first = dim - 1 - indices[0]
            lo[a], hi[a], strides[a] = first, first + (n - 1) * (-step) + 1, -step
    if rev:
        x = ng.reverse(x, rev)
    if lo == [0] * rank and hi == list(x.shape) and strides == [1] * rank:
        return x
    return ng.slice(x, lo, hi, strides)


@op("Gather", movement=True)
def _gather(ctx):
    x = ctx.x(0)
    axis = _axis(ctx, ctx.int_attr("axis", 0), len(x.shape))
    idx = ctx.x(1)
    return ng.gather(x, idx, axis)


def _normalize_index(idx: ng.Node, dim) -> ng.Node:
    """int64 indices with negative ones counted from the end (`dim`: an int or a node)."""
    i64 = ng.convert(idx, np.int64) if idx.dtype != np.int64 else idx
    d = _const(dim, i64) if not isinstance(dim, ng.Node) else dim
    return ng.select(ng.less(i64, _const(0, i64)), i64 + d, i64)


def _flat_positions(ctx, shape, idx: ng.Node, axis: int) -> ng.Node:
    """Positions in the flattened `shape` of the elements that ScatterElements and
    GatherElements address: idx along `axis`, the element's own coordinate elsewhere."""
    rank = len(shape)
    ishape = list(idx.shape)
    idx64 = _normalize_index(idx, shape[axis])
    strides = np.cumprod([1] + list(shape[::-1]))[::-1][1:]
    flat = None
    for a in range(rank):
        if a == axis:
            coord = idx64
        else:
            r = np.arange(ishape[a], dtype=np.int64).reshape(
                [-1 if k == a else 1 for k in range(rank)])
            coord = _bcast(ng.constant(r), ishape)
        term = coord * _const(int(strides[a]), coord)
        flat = term if flat is None else flat + term
    return _reshape(flat, [int(np.prod(ishape, dtype=np.int64))])


def _scatter(ctx, data: ng.Node, positions: ng.Node, updates: ng.Node, reduction: str):
    """data (2-D: rows × row) with the rows at `positions` (1-D) replaced by, or added to,
    the rows of `updates`."""
    if reduction == "add":
        return ng.scatter_add(data, positions, updates, 0)
    if reduction != "none":
        raise ctx.fail(f"reduction {reduction!r} is not supported (none, add)")
    ones = ng.constant(np.ones(updates.shape, np.float32))
    hit = ng.greater(ng.scatter_add(ng.constant(np.zeros(data.shape, np.float32)), positions,
                                    ones, 0), ng.constant(np.float32(0)))
    kept = ng.select(hit, _const(np.zeros(data.shape), data), data)
    return ng.scatter_add(kept, positions, updates, 0)


@op("GatherElements", since=11, movement=True)
def _gather_elements(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", 0), rank)
    idx = ctx.x(1)
    if len(idx.shape) != rank:
        raise ctx.fail(f"indices of rank {len(idx.shape)} for data of rank {rank}")
    flat = _flat_positions(ctx, x.shape, idx, axis)
    total = int(np.prod(x.shape, dtype=np.int64))
    return _reshape(ng.gather(_reshape(x, [total]), flat, 0), idx.shape)


@op("ScatterElements", since=11)
def _scatter_elements(ctx):
    x, idx, upd = ctx.x(0), ctx.x(1), ctx.x(2)
    rank = len(x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", 0), rank)
    if list(idx.shape) != list(upd.shape) or len(idx.shape) != rank:
        raise ctx.fail(f"indices {list(idx.shape)} and updates {list(upd.shape)} must have "
                       f"the same shape, of the data's rank {rank}")
    flat = _flat_positions(ctx, x.shape, idx, axis)
    total = int(np.prod(x.shape, dtype=np.int64))
    n = int(np.prod(upd.shape, dtype=np.int64))
    out = _scatter(ctx, _reshape(x, [total, 1]), flat, _reshape(upd, [n, 1]),
                   ctx.attr("reduction", "none"))
    return _reshape(out, x.shape)


op("Scatter", since=9, until=10)(_scatter_elements)  # ScatterElements' name before opset 11


def _nd_positions(ctx, shape, idx: ng.Node, batch_dims: int = 0) -> tuple[ng.Node, int]:
    """Row numbers, in data reshaped to [prod(shape[:b + k]), rest], of the slices that
    GatherND/ScatterND indices (last axis k) address, and k."""
    k = idx.shape[-1]
    b = batch_dims
    if b + k > len(shape):
        raise ctx.fail(f"indices' last axis {k} (+ batch_dims {b}) exceeds the data's rank "
                       f"{len(shape)}")
    lead = list(idx.shape[:-1])
    strides = np.cumprod([1] + list(shape[b:b + k][::-1]))[::-1][1:]
    flat = None
    for j in range(k):
        lo = [0] * len(idx.shape)
        hi = list(idx.shape)
        lo[-1], hi[-1] = j, j + 1
        c = _normalize_index(_reshape(ng.slice(idx, lo, hi), lead), shape[b + j])
        term = c * _const(int(strides[j]), c)
        flat = term if flat is None else flat + term
    if flat is None:
        flat = ng.constant(np.zeros(lead, np.int64))
    if b:
        per_batch = int(np.prod(shape[b:b + k], dtype=np.int64))
        bcount = int(np.prod(shape[:b], dtype=np.int64))
        r = np.arange(bcount, dtype=np.int64).reshape(list(shape[:b]) + [1] * (len(lead) - b))
        flat = flat + _bcast(ng.constant(r * per_batch), lead)
    return _reshape(flat, [int(np.prod(lead, dtype=np.int64))]), k


@op("GatherND", since=11, movement=True)
def _gather_nd(ctx):
    x, idx = ctx.x(0), ctx.x(1)
    b = ctx.int_attr("batch_dims", 0)
    rows, k = _nd_positions(ctx, x.shape, idx, b)
    rest = list(x.shape[b + k:])
    table = _reshape(x, [int(np.prod(x.shape[:b + k], dtype=np.int64)),
                         int(np.prod(rest, dtype=np.int64))])
    return _reshape(ng.gather(table, rows, 0), list(idx.shape[:-1]) + rest)


@op("ScatterND", since=11)
def _scatter_nd(ctx):
    x, idx, upd = ctx.x(0), ctx.x(1), ctx.x(2)
    rows, k = _nd_positions(ctx, x.shape, idx)
    rest = int(np.prod(x.shape[k:], dtype=np.int64))
    table = _reshape(x, [int(np.prod(x.shape[:k], dtype=np.int64)), rest])
    out = _scatter(ctx, table, rows, _reshape(upd, [rows.shape[0], rest]),
                   ctx.attr("reduction", "none"))
    return _reshape(out, x.shape)


@op("Expand", since=8, movement=True)
def _expand(ctx):
    x = ctx.x(0)
    shape = ctx.ints(1, "shape")
    try:
        target = np.broadcast_shapes(tuple(x.shape), tuple(shape))
    except ValueError:
        raise ctx.fail(f"shape {shape} does not broadcast with the input's "
                       f"{list(x.shape)}") from None
    return _bcast(x, target)


@op("Tile", movement=True)
def _tile(ctx):
    x = ctx.x(0)
    repeats = ctx.ints(1, "repeats")
    if len(repeats) != len(x.shape):
        raise ctx.fail(f"repeats {repeats} for an input of rank {len(x.shape)}")
    if all(r == 1 for r in repeats):
        return x
    return ng.tile(x, repeats)


@op("Pad", movement=True)
def _pad(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    mode = ctx.attr("mode", "constant")
    if ctx.opset < 11:
        pads = ctx.ints_attr("pads", None) or ctx.ints_attr("paddings", [])
        value = ctx.float_attr("value", 0.0)
        value_node = _const(value, x)
        axes = list(range(rank))
    else:
        pads = ctx.ints(1, "pads")
        value_node = ctx.x(2) if ctx.has(2) else _const(0, x)
        if value_node.dtype != x.dtype:
            value_node = ng.convert(value_node, x.dtype)
        value_node = _reshape(value_node, [])
        axes = ctx.ints(3, "axes") if ctx.opset >= 18 and ctx.has(3) else list(range(rank))
        axes = [_axis(ctx, a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"pads {pads} should have {2 * len(axes)} values")
    below, above = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        below[a], above[a] = pads[k], pads[k + len(axes)]
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.fail(f"mode {mode!r} is not one of constant, reflect, edge, wrap")
    if mode == "wrap":
        return _pad_wrap(x, below, above)
    if not any(below) and not any(above):
        return x
    return ng.pad(x, value_node, below, above, pad_mode=mode)


def _pad_wrap(x, below, above):
    for a, (b, e) in enumerate(zip(below, above)):
        dim = x.shape[a]
        parts = []
        if b > 0:
            parts.append(_slice_axis(x, a, dim - b, dim))
        parts.append(_slice_axis(x, a, max(-b, 0), dim - max(-e, 0)))
        if e > 0:
            parts.append(_slice_axis(x, a, 0, e))
        x = ng.concat(parts, a) if len(parts) > 1 else parts[0]
    return x


def _slice_axis(x, axis, start, end):
    lo, hi = [0] * len(x.shape), list(x.shape)
    lo[axis], hi[axis] = start, end
    return ng.slice(x, lo, hi)


@op("DepthToSpace", movement=True)
def _depth_to_space(ctx):
    x = ctx.x(0)
    b = ctx.int_attr("blocksize", 0)
    n, c, h, w = x.shape
    if ctx.attr("mode", "DCR") == "DCR":
        t = _reshape(x, [n, b, b, c // (b * b), h, w])
        t = _transpose(t, [0, 3, 4, 1, 5, 2])
    else:
        t = _reshape(x, [n, c // (b * b), b, b, h, w])
        t = _transpose(t, [0, 1, 4, 2, 5, 3])
    return _reshape(t, [n, c // (b * b), h * b, w * b])


@op("SpaceToDepth", movement=True)
def _space_to_depth(ctx):
    x = ctx.x(0)
    b = ctx.int_attr("blocksize", 0)
    n, c, h, w = x.shape
    t = _reshape(x, [n, c, h // b, b, w // b, b])
    if ctx.attr("mode", "DCR") == "CRD":
        t = _transpose(t, [0, 1, 3, 5, 2, 4])
    else:
        t = _transpose(t, [0, 3, 5, 1, 2, 4])
    return _reshape(t, [n, c * b * b, h // b, w // b])


@op("Trilu", since=14, movement=True)
def _trilu(ctx):
    x = ctx.x(0)
    k = int(ctx.static(1, "k", 0).reshape(-1)[0]) if ctx.has(1) else 0
    upper = ctx.int_attr("upper", 1)
    n, m = x.shape[-2:]
    mask = np.triu(np.ones((n, m), bool), k) if upper else np.tril(np.ones((n, m), bool), k)
    return ng.select(_bcast(ng.constant(mask), x.shape), x, _const(np.zeros(x.shape), x))


@op("EyeLike", since=9, movement=True)
def _eye_like(ctx):
    x = ctx.raw(0, static=True)
    dtype = onnx_dtype(ctx.int_attr("dtype", dtype_to_onnx(x.dtype)), ctx.where())
    return np.eye(x.shape[0], x.shape[1], ctx.int_attr("k", 0), dtype=dtype)


@op("OneHot", since=9)
def _one_hot(ctx):
    idx = ctx.x(0)
    depth = int(ctx.static(1, "depth").reshape(-1)[0])
    values = ctx.x(2)
    rank = len(idx.shape) + 1
    axis = _axis(ctx, ctx.int_attr("axis", -1), rank)
    i64 = ng.convert(idx, np.int64) if idx.dtype != np.int64 else idx
    i64 = ng.select(ng.less(i64, _const(0, i64)), i64 + _const(depth, i64), i64)
    shape = list(idx.shape)
    shape.insert(axis, depth)
    pos = np.arange(depth, dtype=np.int64).reshape([-1 if a == axis else 1
                                                   for a in range(rank)])
    hit = ng.equal(_bcast(ng.unsqueeze(i64, [axis]), shape), _bcast(ng.constant(pos), shape))
    off, on = ng.slice(values, [0], [1]), ng.slice(values, [1], [2])
    return ng.select(hit, _bcast(_reshape(on, []), shape), _bcast(_reshape(off, []), shape))


# ------------------------------------------------------------------ sequences (as lists)


@op("SplitToSequence", since=11, movement=True)
def _split_to_sequence(ctx):
    x = ctx.x(0)
    rank = len(x.shape)
    axis = _axis(ctx, ctx.int_attr("axis", 0), rank)
    keepdims = ctx.int_attr("keepdims", 1)
    dim = x.shape[axis]
    split = ctx.ints(1, "split") if ctx.has(1) else None
    if split is None:
        parts = _split_sizes(x, axis, [1] * dim)
        if not keepdims:
            parts = [_reshape(p, [d for i, d in enumerate(p.shape) if i != axis])
                     for p in parts]
        return [parts]
    if len(split) == 1:
        size = split[0]
        split = [min(size, dim - i) for i in range(0, dim, size)]
    return [_split_sizes(x, axis, split)]


@op("SequenceAt", since=11, movement=True)
def _sequence_at(ctx):
    seq = ctx.raw(0)
    if not isinstance(seq, list):
        raise ctx.fail("input 0 is not a sequence")
    pos = int(ctx.static(1, "position").reshape(-1)[0])
    if not -len(seq) <= pos < len(seq):
        raise ctx.fail(f"position {pos} is outside the sequence of {len(seq)}")
    return seq[pos]


@op("SequenceConstruct", since=11, movement=True)
def _sequence_construct(ctx):
    return [[ctx.x(i) for i in range(ctx.n_inputs)]]


@op("SequenceLength", since=11, movement=True)
def _sequence_length(ctx):
    seq = ctx.raw(0)
    if not isinstance(seq, list):
        raise ctx.fail("input 0 is not a sequence")
    return np.asarray(len(seq), np.int64)


@op("ConcatFromSequence", since=11, movement=True)
def _concat_from_sequence(ctx):
    seq = [s if isinstance(s, ng.Node) else ng.constant(s) for s in ctx.raw(0)]
    axis = ctx.int_attr("axis", 0)
    if ctx.int_attr("new_axis", 0):
        rank = len(seq[0].shape) + 1
        axis = _axis(ctx, axis, rank)
        seq = [ng.unsqueeze(s, [axis]) for s in seq]
    else:
        axis = _axis(ctx, axis, len(seq[0].shape))
    return ng.concat(seq, axis) if len(seq) > 1 else seq[0]


# The neural-network ops register themselves on import.
from ngraph.onnx import converters_nn  # noqa: E402, F401
