"""Exporting ngraph functions as ONNX models (``ngraph.onnx.export``).

Every op of the function becomes one ONNX op or a small composition of them (the table in
docs/onnx-export.md, also ``EXPORTED_OPS`` and ``NO_EQUIVALENT`` here). Parameters become the
graph's inputs, in the function's order; results its outputs, in order; constants and
variables initializers (a variable's current value, so a trained model is deployable). Ops that
ONNX cannot express (collectives, Send/Recv, variable updates) raise ONNXError naming the op.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ngraph import _ngraph
from ngraph._ngraph import Function, Node
from ngraph.onnx.errors import ONNXError

__all__ = ["export", "EXPORTED_OPS", "NO_EQUIVALENT", "MIN_OPSET", "MAX_OPSET", "DEFAULT_OPSET"]

MIN_OPSET = 13
#: The newest opset accepted: the installed onnx package's.
MAX_OPSET = onnx.defs.onnx_opset_version()
DEFAULT_OPSET = 18

#: ngraph's element types as ONNX tensor types.
_ONNX_TYPE = {
    "f32": TensorProto.FLOAT, "f64": TensorProto.DOUBLE, "f16": TensorProto.FLOAT16,
    "bf16": TensorProto.BFLOAT16, "i8": TensorProto.INT8, "i16": TensorProto.INT16,
    "i32": TensorProto.INT32, "i64": TensorProto.INT64, "u8": TensorProto.UINT8,
    "u16": TensorProto.UINT16, "u32": TensorProto.UINT32, "u64": TensorProto.UINT64,
    "boolean": TensorProto.BOOL,
}  # fmt: skip

#: Ops with no ONNX counterpart, and why: export raises ONNXError naming them.
NO_EQUIVALENT = {
    "AllGather": "a collective: ONNX models run on one device, without communicators",
    "AllReduce": "a collective: ONNX models run on one device, without communicators",
    "BroadcastDistributed": "a collective: ONNX models run on one device, without communicators",
    "ReduceScatter": "a collective: ONNX models run on one device, without communicators",
    "Send": "point-to-point communication between ranks has no ONNX op",
    "Recv": "point-to-point communication between ranks has no ONNX op",
    "Assign": "a variable update: an ONNX model has no state (export with drop_updates=True "
              "to write the results alone)",
}

_UNARY = {
    "Negative": "Neg", "Abs": "Abs", "Sign": "Sign", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt",
    "Sin": "Sin", "Cos": "Cos", "Tan": "Tan", "Asin": "Asin", "Acos": "Acos", "Atan": "Atan",
    "Sinh": "Sinh", "Cosh": "Cosh", "Tanh": "Tanh", "Sigmoid": "Sigmoid", "Erf": "Erf",
    "LogicalNot": "Not", "StopGradient": "Identity", "Floor": "Floor", "Ceiling": "Ceil",
    "Relu": "Relu",
}  # fmt: skip

_BINARY = {
    "Add": "Add", "Subtract": "Sub", "Multiply": "Mul", "Power": "Pow", "Maximum": "Max",
    "Minimum": "Min", "Equal": "Equal", "Greater": "Greater", "GreaterEq": "GreaterOrEqual",
    "Less": "Less", "LessEq": "LessOrEqual", "LogicalAnd": "And", "LogicalOr": "Or",
}  # fmt: skip

_INT64_MIN = np.iinfo(np.int64).min


def _parse_value(text: str) -> Any:
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        inner = text[1:-1].strip()
        return [_parse_value(t) for t in inner.split(",")] if inner else []
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_attributes(text: str) -> dict[str, Any]:
    """The attributes of ``Node.attributes()`` (``k=v, k={1,2}, k='s'``) as a dict of ints,
    floats, bools, strings and lists."""
    out: dict[str, Any] = {}
    depth, quote, start, parts = 0, "", 0, []
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    for part in parts:
        if "=" in part:
            key, _, value = part.partition("=")
            out[key.strip()] = _parse_value(value)
    return out


def _np_dtype(etype: str) -> np.dtype:
    if etype == "bf16":
        from ngraph.utils import bfloat16  # noqa: PLC0415

        if bfloat16 is None:
            raise ONNXError("exporting a bf16 value needs the ml_dtypes package")
        return np.dtype(bfloat16)
    return helper.tensor_dtype_to_np_dtype(_ONNX_TYPE[etype])


class _Exporter:
    """Builds the ONNX graph of one ngraph function."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.names: set[str] = set()
        self.values: dict[tuple[int, int], str] = {}
        self.info: dict[str, tuple[list[int], str]] = {}
        self._consts: dict[tuple, str] = {}
        self.node: Node | None = None  # the ngraph node being exported (for errors, names)

    # ------------------------------------------------------------------ building blocks

    def unique(self, base: str) -> str:
        name, i = base, 1
        while name in self.names:
            name = f"{base}_{i}"
            i += 1
        self.names.add(name)
        return name

    def fail(self, message: str) -> ONNXError:
        node = self.node
        where = f"{node.get_type_name()} node '{node.name}'" if node is not None else "export"
        return ONNXError(f"ONNX export (opset {self.opset}): {where}: {message}")

    def emit(self, op_type: str, inputs: Sequence[str], outputs: int = 1,
             **attributes: Any) -> list[str]:
        """Adds an ONNX node; returns its output names."""
        base = self.node.name if self.node is not None else "graph"
        outs = [self.unique(f"{base}/{op_type}" + (f":{i}" if i else ""))
                for i in range(outputs)]
        attrs = {k: v for k, v in attributes.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), outs,
                                           name=self.unique(f"{base}/{op_type}#node"), **attrs))
        return outs

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        return self.emit(op_type, inputs, 1, **attributes)[0]

    def const(self, value: np.ndarray, hint: str = "const") -> str:
        """An initializer holding `value` (small ones shared)."""
        value = np.asarray(value)
        key = None
        if value.size <= 16:
            key = (value.dtype.str, value.shape, value.tobytes())
            if key in self._consts:
                return self._consts[key]
        name = self.unique(hint)
        self.initializers.append(numpy_helper.from_array(value, name))
        if key is not None:
            self._consts[key] = name
        return name

    def ints(self, values: Sequence[int]) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    def scalar(self, value: float, etype: str) -> str:
        return self.const(np.asarray(value, dtype=_np_dtype(etype)), "scalar")

    def reshape(self, x: str, shape: Sequence[int]) -> str:
        shape = [int(d) for d in shape]
        if 0 in shape:
            if self.opset < 14:
                raise self.fail(f"reshaping to {shape} (zero-sized) needs opset 14 (allowzero)")
            return self.op("Reshape", x, self.ints(shape), allowzero=1)
        return self.op("Reshape", x, self.ints(shape))

    def transpose(self, x: str, perm: Sequence[int]) -> str:
        perm = [int(p) for p in perm]
        if perm == sorted(perm):
            return x
        return self.op("Transpose", x, perm=perm)

    def slice(self, x: str, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int],
              steps: Sequence[int] | None = None) -> str:
        if not axes:
            return x
        inputs = [x, self.ints(starts), self.ints(ends), self.ints(axes)]
        if steps is not None:
            inputs.append(self.ints(steps))
        return self.op("Slice", *inputs)

    def reduce(self, op_type: str, x: str, axes: Sequence[int], keepdims: int) -> str:
        """ReduceSum/Max/Min/Prod/Mean over `axes` (not empty), in the opset's spelling."""
        axes = [int(a) for a in axes]
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.op(op_type, x, self.ints(axes), keepdims=keepdims)
        return self.op(op_type, x, axes=axes, keepdims=keepdims)

    def pad(self, x: str, below: Sequence[int], above: Sequence[int], value: str | None = None,
            mode: str = "constant") -> str:
        """Pads by non-negative amounts."""
        if not any(below) and not any(above):
            return x
        inputs = [x, self.ints(list(below) + list(above))]
        if value is not None:
            inputs.append(value)
        return self.op("Pad", *inputs, mode=mode)

    def cast(self, x: str, etype: str) -> str:
        return self.op("Cast", x, to=_ONNX_TYPE[etype])

    # -------------------------------------------------------------------- the walk

    def export_function(self, function: Function, drop_updates: bool,
                        graph_name: str) -> onnx.GraphProto:
        results = function.get_results()
        ops = function.get_ordered_ops()
        sinks = [n for n in ops if n.get_output_size() == 0 and n.get_type_name() != "Result"]
        for sink in sinks:
            if sink.get_type_name() == "Assign" and drop_updates:
                continue
            self.node = sink
            raise self.fail(f"no ONNX equivalent ({NO_EQUIVALENT.get(sink.get_type_name(), '')})")
        # Only what the results depend on (dropped updates may read collectives).
        needed: set[int] = set()
        stack = list(results)
        while stack:
            n = stack.pop()
            key = n.get_instance_id()
            if key not in needed:
                needed.add(key)
                stack.extend(n.inputs())
        used: set[tuple[int, int]] = set()
        for n in ops:
            if n.get_instance_id() in needed:
                for src, idx in _ngraph.node_input_values(n):
                    used.add((src.get_instance_id(), idx))
        self.used = used

        inputs = []
        for p in function.get_parameters():
            shape, etype = _ngraph.node_outputs(p)[0]
            name = self.unique(p.name or "input")
            self.values[(p.get_instance_id(), 0)] = name
            inputs.append(helper.make_tensor_value_info(name, _ONNX_TYPE[etype], list(shape)))
        outputs = []
        for n in ops:
            if n.get_instance_id() not in needed or n.get_type_name() == "Parameter":
                continue
            self.node = n
            type_name = n.get_type_name()
            if type_name in NO_EQUIVALENT:
                raise self.fail(f"no ONNX equivalent ({NO_EQUIVALENT[type_name]})")
            handler = _HANDLERS.get(type_name)
            if handler is None and type_name != "Result":
                raise self.fail("no ONNX equivalent (ngraph.onnx.export does not know this op)")
            ins = [self.values[(src.get_instance_id(), idx)]
                   for src, idx in _ngraph.node_input_values(n)]
            attrs = parse_attributes(n.attributes())
            if type_name == "Result":
                shape, etype = _ngraph.node_outputs(n)[0]
                src, idx = _ngraph.node_input_values(n)[0]
                base = src.name if src.get_output_size() == 1 else f"{src.name}_{idx}"
                name = self.unique(base)
                self.nodes.append(helper.make_node("Identity", ins, [name],
                                                   name=self.unique(f"{n.name}#node")))
                outputs.append(helper.make_tensor_value_info(name, _ONNX_TYPE[etype],
                                                             list(shape)))
                continue
            outs = handler(self, n, ins, attrs)
            for i, value in enumerate(outs):
                if value is not None:
                    self.values[(n.get_instance_id(), i)] = value
        self.node = None
        return helper.make_graph(self.nodes, graph_name, inputs, outputs, self.initializers)

    # ------------------------------------------------------------------ helpers on nodes

    def in_shape(self, node: Node, i: int) -> list[int]:
        src, idx = _ngraph.node_input_values(node)[i]
        return [int(d) for d in src.get_output_shape(idx)]

    def in_type(self, node: Node, i: int) -> str:
        src, idx = _ngraph.node_input_values(node)[i]
        return _ngraph.node_outputs(src)[idx][1]

    def out_shape(self, node: Node, i: int = 0) -> list[int]:
        return [int(d) for d in node.get_output_shape(i)]

    def out_type(self, node: Node, i: int = 0) -> str:
        return _ngraph.node_outputs(node)[i][1]

    def is_used(self, node: Node, i: int) -> bool:
        return (node.get_instance_id(), i) in self.used

    # --------------------------------------------------------------- convolutions

    def dilate(self, x: str, shape: list[int], factors: Sequence[int]) -> tuple[str, list[int]]:
        """`x` (N, C, spatial...) with factor - 1 zeros between the elements of each spatial
        axis (a convolution's data dilation)."""
        shape = list(shape)
        for i, d in enumerate(factors):
            ax, n = 2 + i, shape[2 + i]
            if d <= 1 or n == 0:
                continue
            x = self.reshape(x, shape[:ax + 1] + [1] + shape[ax + 1:])
            below = [0] * (len(shape) + 1)
            above = list(below)
            above[ax + 1] = d - 1
            x = self.pad(x, below, above)
            x = self.reshape(x, shape[:ax] + [n * d] + shape[ax + 1:])
            x = self.slice(x, [0], [(n - 1) * d + 1], [ax])
            shape[ax] = (n - 1) * d + 1
        return x, shape

    def conv(self, x: str, x_shape: list[int], w: str, w_shape: list[int],
             strides: Sequence[int], dilations: Sequence[int], below: Sequence[int],
             above: Sequence[int], data_dilations: Sequence[int], groups: int) -> str:
        """nGraph's convolution: data dilation and negative padding as compositions."""
        spatial = len(x_shape) - 2
        x, x_shape = self.dilate(x, x_shape, data_dilations)
        if any(p < 0 for p in list(below) + list(above)):
            starts = [max(0, -b) for b in below]
            ends = [x_shape[2 + i] - max(0, -a) for i, a in enumerate(above)]
            x = self.slice(x, starts, ends, list(range(2, 2 + spatial)))
        pads = [max(0, b) for b in below] + [max(0, a) for a in above]
        return self.op("Conv", x, w, strides=list(strides), dilations=list(dilations),
                       pads=pads, group=int(groups), kernel_shape=list(w_shape[2:]))

    def reverse(self, x: str, axes: Sequence[int]) -> str:
        axes = list(axes)
        if not axes:
            return x
        return self.slice(x, [-1] * len(axes), [_INT64_MIN] * len(axes), axes, [-1] * len(axes))


def _window(attrs: dict[str, Any], spatial: int) -> tuple[list[int], ...]:
    def get(key: str, default: int) -> list[int]:
        value = attrs.get(key) or []
        return [int(v) for v in value] if value else [default] * spatial

    return (get("strides", 1), get("dilations", 1), get("padding_below", 0),
            get("padding_above", 0), get("data_dilations", 1))


# ------------------------------------------------------------------------- op handlers

Handler = Callable[[_Exporter, Node, list, dict], list]
_HANDLERS: dict[str, Handler] = {}


def _handles(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            _HANDLERS[name] = fn
        return fn

    return register


@_handles("Constant")
def _constant(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    value = _ngraph.constant_value(node)
    value = np.asarray(value, order="C").astype(_np_dtype(e.out_type(node)), copy=False)
    return [e.const(value, node.name)]


@_handles("Variable")
def _variable(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    value = np.asarray(node.get_value(), order="C")
    name = e.unique(node.name)
    e.initializers.append(numpy_helper.from_array(value.astype(_np_dtype(e.out_type(node)),
                                                               copy=False), name))
    return [name]


@_handles("GetOutputElement")
def _get_output_element(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    return [ins[0]]


@_handles(*_UNARY)
def _unary(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    t = node.get_type_name()
    etype = e.in_type(node, 0)
    integral = etype[0] in "iu"
    if t in ("Floor", "Ceiling") and integral:
        return [e.op("Identity", ins[0])]
    if t == "Relu" and integral:
        return [e.op("Max", ins[0], e.scalar(0, etype))]
    if t == "Negative" and etype[0] == "u":
        return [e.op("Sub", e.scalar(0, etype), ins[0])]
    return [e.op(_UNARY[t], ins[0])]


@_handles("Gelu")
def _gelu(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    if e.opset >= 20:
        return [e.op("Gelu", ins[0])]
    etype = e.in_type(node, 0)
    x = ins[0]
    erf = e.op("Erf", e.op("Mul", x, e.scalar(1 / np.sqrt(2.0), etype)))
    half = e.op("Mul", x, e.scalar(0.5, etype))
    return [e.op("Mul", half, e.op("Add", erf, e.scalar(1, etype)))]


@_handles(*_BINARY, "NotEqual", "Divide")
def _binary(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    t = node.get_type_name()
    a, b = ins
    if t == "NotEqual":
        return [e.op("Not", e.op("Equal", a, b))]
    if t == "Divide":
        etype = e.in_type(node, 0)
        if etype[0] != "i" or not attrs.get("pythondiv", True):
            return [e.op("Div", a, b)]
        # Python's //: ONNX's integer Div truncates; step down where the remainder is not 0
        # and the signs differ.
        q = e.op("Div", a, b)
        inexact = e.op("Not", e.op("Equal", e.op("Mul", q, b), a))
        zero = e.scalar(0, etype)
        signs = e.op("Xor", e.op("Less", a, zero), e.op("Less", b, zero))
        return [e.op("Sub", q, e.cast(e.op("And", inexact, signs), etype))]
    return [e.op(_BINARY[t], a, b)]


@_handles("Select")
def _select(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    return [e.op("Where", *ins)]


@_handles("Convert")
def _convert(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    return [e.cast(ins[0], e.out_type(node))]


@_handles("Dot")
def _dot(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    a_shape, b_shape = e.in_shape(node, 0), e.in_shape(node, 1)
    n = int(attrs.get("reduction_axes_count", -1))
    if n < 0:
        n = 0 if not a_shape or not b_shape else 1
    p = int(np.prod(a_shape[:len(a_shape) - n], dtype=np.int64))
    k = int(np.prod(a_shape[len(a_shape) - n:], dtype=np.int64))
    q = int(np.prod(b_shape[n:], dtype=np.int64))
    a = ins[0] if a_shape == [p, k] else e.reshape(ins[0], [p, k])
    b = ins[1] if b_shape == [k, q] else e.reshape(ins[1], [k, q])
    out = e.op("MatMul", a, b)
    shape = e.out_shape(node)
    return [out if shape == [p, q] else e.reshape(out, shape)]


@_handles("MatMul")
def _matmul(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    args = []
    for i, key in enumerate(("transpose_a", "transpose_b")):
        rank = len(e.in_shape(node, i))
        x = ins[i]
        if attrs.get(key) and rank >= 2:
            x = e.transpose(x, list(range(rank - 2)) + [rank - 1, rank - 2])
        args.append(x)
    return [e.op("MatMul", *args)]


@_handles("Reshape")
def _reshape(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    in_shape = e.in_shape(node, 0)
    order = [int(a) for a in attrs.get("input_order") or range(len(in_shape))]
    x = e.transpose(ins[0], order)
    out = e.out_shape(node)
    if [in_shape[a] for a in order] == out:
        return [x if x != ins[0] else e.op("Identity", x)]
    return [e.reshape(x, out)]


@_handles("Broadcast")
def _broadcast(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    out = e.out_shape(node)
    axes = {int(a) for a in attrs.get("broadcast_axes") or []}
    kept = [1 if i in axes else d for i, d in enumerate(out)]
    x = ins[0] if e.in_shape(node, 0) == kept else e.reshape(ins[0], kept)
    return [e.op("Expand", x, e.ints(out))]


@_handles("Slice")
def _slice(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    lower, upper = attrs["lower_bounds"], attrs["upper_bounds"]
    strides = attrs.get("strides") or [1] * len(lower)
    if not lower:
        return [e.op("Identity", ins[0])]
    return [e.slice(ins[0], lower, upper, list(range(len(lower))), strides)]


@_handles("Concat")
def _concat(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    return [e.op("Concat", *ins, axis=int(attrs["concatenation_axis"]))]


@_handles("Pad")
def _pad(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    shape = e.in_shape(node, 0)
    rank = len(shape)
    below = [int(v) for v in attrs.get("padding_below") or [0] * rank]
    above = [int(v) for v in attrs.get("padding_above") or [0] * rank]
    mode = attrs.get("pad_mode", "constant")
    # Positive padding first (taking values from the whole input, as nGraph's), then crop.
    pb, pa = [max(0, v) for v in below], [max(0, v) for v in above]
    x = ins[0]
    if mode == "symmetric":
        for ax in range(rank):
            n = shape[ax]
            parts = []
            if pb[ax]:
                parts.append(e.reverse(e.slice(x, [0], [pb[ax]], [ax]), [ax]))
            parts.append(x)
            if pa[ax]:
                parts.append(e.reverse(e.slice(x, [n - pa[ax]], [n], [ax]), [ax]))
            if len(parts) > 1:
                x = e.op("Concat", *parts, axis=ax)
    else:
        x = e.pad(x, pb, pa, ins[1] if mode == "constant" else None, mode)
    padded = [d + b + a for d, b, a in zip(shape, pb, pa)]
    crop = [ax for ax in range(rank) if below[ax] < 0 or above[ax] < 0]
    if crop:
        x = e.slice(x, [-min(0, below[ax]) for ax in crop],
                    [padded[ax] + min(0, above[ax]) for ax in crop], crop)
    return [x if x != ins[0] else e.op("Identity", x)]


@_handles("Reverse")
def _reverse(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    axes = sorted(int(a) for a in attrs.get("reversed_axes") or [])
    return [e.reverse(ins[0], axes) if axes else e.op("Identity", ins[0])]


@_handles("ReplaceSlice")
def _replace_slice(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    dest, src = ins
    lower, upper = attrs["lower_bounds"], attrs["upper_bounds"]
    strides = attrs.get("strides") or [1] * len(lower)
    src_shape = e.in_shape(node, 1)
    if not lower:
        return [e.op("Identity", src)]
    if 0 in src_shape:
        return [e.op("Identity", dest)]
    ranges = [np.arange(lo, hi, st, dtype=np.int64) for lo, hi, st in zip(lower, upper, strides)]
    grid = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1)
    return [e.op("ScatterND", dest, e.const(grid, "indices"), src)]


@_handles("Split")
def _split(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    shape = e.in_shape(node, 0)
    axis = int(attrs.get("axis", 0)) % max(len(shape), 1)
    splits = [int(s) for s in attrs.get("splits") or [shape[axis]]]
    if len(splits) == 1:
        return [e.op("Identity", ins[0])]
    return e.emit("Split", [ins[0], e.ints(splits)], len(splits), axis=axis)


@_handles("Tile")
def _tile(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    shape = e.in_shape(node, 0)
    repeats = [int(r) for r in attrs.get("repeats") or []]
    rank = max(len(shape), len(repeats))
    x = ins[0]
    if len(shape) < rank:
        x = e.reshape(x, [1] * (rank - len(shape)) + shape)
    repeats = [1] * (rank - len(repeats)) + repeats
    return [e.op("Tile", x, e.ints(repeats))]


@_handles("Gather")
def _gather(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    rank = len(e.in_shape(node, 0))
    return [e.op("Gather", ins[0], ins[1], axis=int(attrs.get("axis", 0)) % max(rank, 1))]


@_handles("EmbeddingLookup")
def _embedding_lookup(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    return [e.op("Gather", ins[1], ins[0], axis=0)]


@_handles("ScatterAdd")
def _scatter_add(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    data, indices, updates = ins
    shape = e.in_shape(node, 0)
    idx_shape = e.in_shape(node, 1)
    etype = e.in_type(node, 0)
    rank, q = len(shape), len(idx_shape)
    axis = int(attrs.get("axis", 0)) % rank
    n = shape[axis]
    # Indices as int64 in [0, n).
    idx = indices if e.in_type(node, 1) == "i64" else e.cast(indices, "i64")
    zero, size = e.const(np.asarray(0, np.int64), "zero"), e.const(np.asarray(n, np.int64), "n")
    idx = e.op("Where", e.op("Less", idx, zero), e.op("Add", idx, size), idx)
    # The indexed axis first: data [n, rest...], updates [idx..., rest...].
    perm = [axis] + [a for a in range(rank) if a != axis]
    upd_perm = list(range(axis, axis + q)) + list(range(axis)) + \
        list(range(axis + q, rank - 1 + q))
    data_t, upd_t = e.transpose(data, perm), e.transpose(updates, upd_perm)
    rest = [shape[a] for a in perm[1:]]
    if e.opset >= 16:
        idx_nd = e.reshape(idx, idx_shape + [1])
        out = e.op("ScatterND", data_t, idx_nd, upd_t, reduction="add")
    else:
        # One-hot [n, m] times updates [m, rest]: the sums of updates per index.
        m = int(np.prod(idx_shape, dtype=np.int64))
        r = int(np.prod(rest, dtype=np.int64))
        flat = e.reshape(idx, [1, m])
        hot = e.cast(e.op("Equal", e.const(np.arange(n, dtype=np.int64).reshape(n, 1), "range"),
                          flat), etype)
        sums = e.op("MatMul", hot, e.reshape(upd_t, [m, r]))
        out = e.op("Add", data_t, e.reshape(sums, [n] + rest))
    return [e.transpose(out, [int(a) for a in np.argsort(perm)])]


_REDUCE = {"Sum": "ReduceSum", "Product": "ReduceProd", "Max": "ReduceMax", "Min": "ReduceMin"}


@_handles(*_REDUCE)
def _reduction(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    axes = sorted(int(a) for a in attrs.get("reduction_axes") or [])
    if not axes:
        return [e.op("Identity", ins[0])]
    return [e.reduce(_REDUCE[node.get_type_name()], ins[0], axes, 0)]


@_handles("ArgMax", "ArgMin")
def _arg_reduction(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    out = e.op(node.get_type_name(), ins[0], axis=int(attrs["axis"]), keepdims=0,
               select_last_index=0)
    return [out if e.out_type(node) == "i64" else e.cast(out, e.out_type(node))]


@_handles("TopK")
def _topk(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    values, indices = e.emit("TopK", [ins[0], e.ints([int(attrs["k"])])], 2,
                             axis=int(attrs["axis"]), largest=int(bool(attrs["compute_max"])),
                             sorted=1)
    if e.out_type(node, 1) != "i64":
        indices = e.cast(indices, e.out_type(node, 1))
    return [values, indices]


@_handles("Softmax")
def _softmax(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    axes = sorted(int(a) for a in attrs.get("axes") or [])
    x = ins[0]
    if len(axes) == 1:
        return [e.op("Softmax", x, axis=axes[0])]
    if not axes:  # over no axis: exp(x - x) / itself
        ones = e.op("Exp", e.op("Sub", x, x))
        return [e.op("Div", ones, ones)]
    shifted = e.op("Sub", x, e.reduce("ReduceMax", x, axes, 1))
    exp = e.op("Exp", shifted)
    return [e.op("Div", exp, e.reduce("ReduceSum", exp, axes, 1))]


@_handles("OneHot")
def _one_hot(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    out = e.out_shape(node)
    axis = int(attrs["one_hot_axis"])
    in_shape = e.in_shape(node, 0)
    etype = e.in_type(node, 0)
    x = e.reshape(ins[0], in_shape[:axis] + [1] + in_shape[axis:])
    depth = out[axis]
    values = np.arange(depth).astype(_np_dtype(etype))
    values = values.reshape([depth] + [1] * (len(out) - axis - 1))
    return [e.cast(e.op("Equal", x, e.const(values, "range")), etype)]


# ------------------------------------------------------- convolution and pooling


@_handles("Convolution")
def _convolution(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    x_shape, w_shape = e.in_shape(node, 0), e.in_shape(node, 1)
    strides, dil, below, above, dd = _window(attrs, len(x_shape) - 2)
    return [e.conv(ins[0], x_shape, ins[1], w_shape, strides, dil, below, above, dd,
                   int(attrs.get("groups", 1)))]


def _backprop_extra(shape: list[int], f_shape: list[int], strides, dil, below, above, dd):
    """Per spatial axis, the cells of the padded, dilated data the forward's last window
    leaves out: (dilated_in + below + above - dilated_filter) % stride."""
    return [((n - 1) * d + 1 + b + a - ((f - 1) * w + 1)) % s
            for n, f, s, w, b, a, d in zip(shape, f_shape, strides, dil, below, above, dd)]


@_handles("ConvolutionBackpropData")
def _conv_backprop_data(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    filters, delta = ins
    w_shape, d_shape = e.in_shape(node, 0), e.in_shape(node, 1)
    data_shape = [int(v) for v in attrs["data_batch_shape"]]
    spatial = len(data_shape) - 2
    strides, dil, below, above, dd = _window(attrs, spatial)
    groups = int(attrs.get("groups", 1))
    f = w_shape[2:]
    extra = _backprop_extra(data_shape[2:], f, strides, dil, below, above, dd)
    bb = [(k - 1) * w - b for k, w, b in zip(f, dil, below)]
    ba = [(k - 1) * w + x - a for k, w, x, a in zip(f, dil, extra, above)]
    # Filters [O, C/g, k...] -> [C, O/g, k...], reversed along the spatial axes.
    o, cg = w_shape[0], w_shape[1]
    if groups == 1:
        w = e.transpose(filters, [1, 0] + list(range(2, 2 + spatial)))
    else:
        w = e.reshape(filters, [groups, o // groups, cg] + f)
        w = e.transpose(w, [0, 2, 1] + list(range(3, 3 + spatial)))
        w = e.reshape(w, [cg * groups, o // groups] + f)
    w = e.reverse(w, list(range(2, 2 + spatial)))
    return [e.conv(delta, d_shape, w, [cg * groups, o // groups] + f, dd, dil, bb, ba, strides,
                   groups)]


@_handles("ConvolutionBackpropFilters")
def _conv_backprop_filters(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    data, delta = ins
    x_shape, d_shape = e.in_shape(node, 0), e.in_shape(node, 1)
    f_shape = [int(v) for v in attrs["filters_shape"]]
    spatial = len(x_shape) - 2
    strides, dil, below, above, dd = _window(attrs, spatial)
    groups = int(attrs.get("groups", 1))
    extra = _backprop_extra(x_shape[2:], f_shape[2:], strides, dil, below, above, dd)
    swap = [1, 0] + list(range(2, 2 + spatial))
    x_t = e.transpose(data, swap)  # [C, N, ...]: channels as the batch
    d_t = e.transpose(delta, swap)  # [O, N, ...]: outputs as the filters
    r = e.conv(x_t, [x_shape[1], x_shape[0]] + x_shape[2:], d_t,
               [d_shape[1], d_shape[0]] + d_shape[2:], dil, strides, below,
               [a - x for a, x in zip(above, extra)], dd, 1)  # [C, O, k...]
    if groups == 1:
        return [e.transpose(r, swap)]
    c, o, k = x_shape[1], d_shape[1], f_shape[2:]
    r = e.reshape(r, [groups, c // groups, groups, o // groups] + k)
    mask = np.eye(groups).reshape([groups, 1, groups, 1] + [1] * spatial)
    r = e.op("Mul", r, e.const(mask.astype(_np_dtype(e.out_type(node))), "group_mask"))
    r = e.reduce("ReduceSum", r, [2], 0)  # [g, C/g, O/g, k...]
    r = e.transpose(r, [0, 2, 1] + list(range(3, 3 + spatial)))
    return [e.reshape(r, f_shape)]


def _pool_geometry(e: _Exporter, node: Node, attrs: dict, in_shape: list[int],
                   out_shape: list[int]) -> tuple[list[int], ...]:
    window = [int(v) for v in attrs["window_shape"]]
    spatial = len(window)
    strides = [int(v) for v in attrs.get("window_movement_strides") or [1] * spatial]
    below = [int(v) for v in attrs.get("padding_below") or [0] * spatial]
    above = [int(v) for v in attrs.get("padding_above") or [0] * spatial]
    # The padding above that the windows reach (more than padding_above with ceil_mode).
    above = [max(a, (o - 1) * s + w - n - b) for a, o, s, w, n, b in
             zip(above, out_shape[2:], strides, window, in_shape[2:], below)]
    return window, strides, below, above


def _window_counts(window, strides, below, in_sizes, out_sizes) -> np.ndarray:
    """The number of data cells in each window (outer product over the spatial axes)."""
    counts = np.ones([], dtype=np.float64)
    for w, s, b, n, o in zip(window, strides, below, in_sizes, out_sizes):
        starts = np.arange(o) * s - b
        axis = np.clip(starts + w, 0, n) - np.clip(starts, 0, n)
        counts = np.multiply.outer(counts, axis)
    return counts


def _lowest(etype: str) -> np.ndarray:
    dtype = _np_dtype(etype)
    if dtype.kind == "f":
        return np.asarray(-np.inf, dtype=dtype)
    return np.asarray(np.iinfo(dtype).min, dtype=dtype)


@_handles("MaxPool", "AvgPool")
def _pool(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    in_shape, out_shape = e.in_shape(node, 0), e.out_shape(node)
    etype = e.in_type(node, 0)
    window, strides, below, above = _pool_geometry(e, node, attrs, in_shape, out_shape)
    is_max = node.get_type_name() == "MaxPool"
    include = int(bool(attrs.get("include_padding_in_avg_computation", False)))
    x = ins[0]
    if all(b < w and a < w for b, a, w in zip(below, above, window)):
        if is_max:
            return [e.op("MaxPool", x, kernel_shape=window, strides=strides,
                         pads=below + above)]
        return [e.op("AveragePool", x, kernel_shape=window, strides=strides,
                     pads=below + above, count_include_pad=include)]
    # Padding as wide as the window (ONNX runtimes refuse it): pad explicitly.
    fill = _lowest(etype) if is_max else np.asarray(0, dtype=_np_dtype(etype))
    padded = e.pad(x, [0, 0] + below, [0, 0] + above, e.const(fill, "fill"))
    if is_max:
        return [e.op("MaxPool", padded, kernel_shape=window, strides=strides)]
    mean = e.op("AveragePool", padded, kernel_shape=window, strides=strides)
    if include:
        return [mean]
    counts = _window_counts(window, strides, below, in_shape[2:], out_shape[2:])
    scale = (np.prod(window) / np.maximum(counts, 1)).astype(_np_dtype(etype))
    return [e.op("Mul", mean, e.const(scale, "window_scale"))]


@_handles("AvgPoolBackprop")
def _avg_pool_backprop(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    in_shape = [int(v) for v in attrs["forward_arg_shape"]]
    d_shape = e.in_shape(node, 0)
    etype = e.in_type(node, 0)
    window, strides, below, above = _pool_geometry(e, node, attrs, in_shape, d_shape)
    spatial = len(window)
    if attrs.get("include_padding_in_avg_computation"):
        counts = np.full(d_shape[2:], float(np.prod(window)))
    else:
        counts = np.maximum(_window_counts(window, strides, below, in_shape[2:], d_shape[2:]), 1)
    scaled = e.op("Mul", ins[0], e.const((1 / counts).astype(_np_dtype(etype)), "inverse_counts"))
    # Each scaled delta spread over its window: a full correlation with ones, channel by channel.
    c = in_shape[1]
    ones = e.const(np.ones([c, 1] + window, dtype=_np_dtype(etype)), "ones")
    full = e.conv(scaled, d_shape, ones, [c, 1] + window, [1] * spatial, [1] * spatial,
                  [w - 1 for w in window], [w - 1 for w in window], strides, c)
    # `full` covers the padded data from its start; keep the data's cells.
    lengths = [(o - 1) * s + w for o, s, w in zip(d_shape[2:], strides, window)]
    short = [max(0, b + n - length) for b, n, length in zip(below, in_shape[2:], lengths)]
    full = e.pad(full, [0] * (2 + spatial), [0, 0] + short)
    return [e.slice(full, below, [b + n for b, n in zip(below, in_shape[2:])],
                    list(range(2, 2 + spatial)))]


@_handles("MaxPoolBackprop")
def _max_pool_backprop(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    if e.opset < 16:
        raise e.fail("needs ScatterElements with reduction='add' (opset 16 or later)")
    x, delta = ins
    in_shape, d_shape = e.in_shape(node, 0), e.in_shape(node, 1)
    etype = e.in_type(node, 0)
    window, strides, below, above = _pool_geometry(e, node, attrs, in_shape, d_shape)
    spatial = len(window)
    padded = e.pad(x, [0, 0] + below, [0, 0] + above, e.const(_lowest(etype), "fill"))
    padded_shape = in_shape[:2] + [n + b + a for n, b, a in zip(in_shape[2:], below, above)]
    _, indices = e.emit("MaxPool", [padded], 2, kernel_shape=window, strides=strides)
    size = int(np.prod(padded_shape, dtype=np.int64))
    zeros = e.op("ConstantOfShape", e.ints([size]),
                 value=numpy_helper.from_array(np.zeros([1], dtype=_np_dtype(etype))))
    flat = e.op("ScatterElements", zeros, e.reshape(indices, [-1]), e.reshape(delta, [-1]),
                axis=0, reduction="add")
    grad = e.reshape(flat, padded_shape)
    return [e.slice(grad, below, [b + n for b, n in zip(below, in_shape[2:])],
                    list(range(2, 2 + spatial)))]


# ------------------------------------------------------------------------ LRN


def _lrn_window_sum(e: _Exporter, x: str, shape: list[int], size: int, etype: str) -> str:
    """The sum over channels c - (size - 1) / 2 .. c + (size - 1) / 2 (nGraph's window), by a
    convolution over the channel axis."""
    half = (size - 1) // 2
    rest = int(np.prod(shape[2:], dtype=np.int64))
    v = e.reshape(x, [shape[0], 1, shape[1], rest])
    ones = e.const(np.ones([1, 1, 2 * half + 1, 1], dtype=_np_dtype(etype)), "ones")
    s = e.op("Conv", v, ones, pads=[half, 0, half, 0], kernel_shape=[2 * half + 1, 1])
    return e.reshape(s, shape)


@_handles("LRN")
def _lrn(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    shape = e.in_shape(node, 0)
    size = int(attrs["size"])
    alpha, beta, bias = float(attrs["alpha"]), float(attrs["beta"]), float(attrs["bias"])
    # nGraph's window has 2 * ((size - 1) // 2) + 1 channels, ONNX's `size`.
    onnx_size = 2 * ((size - 1) // 2) + 1
    x = ins[0]
    four = len(shape) == 4
    if not four:
        x = e.reshape(x, shape[:2] + [int(np.prod(shape[2:], dtype=np.int64)), 1])
    y = e.op("LRN", x, size=onnx_size, alpha=alpha * onnx_size / size, beta=beta, bias=bias)
    return [y if four else e.reshape(y, shape)]


@_handles("LRNBackprop")
def _lrn_backprop(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    x, delta = ins
    shape = e.in_shape(node, 0)
    etype = e.in_type(node, 0)
    size = int(attrs["size"])
    alpha, beta, bias = float(attrs["alpha"]), float(attrs["beta"]), float(attrs["bias"])
    # y = x t^-beta, t = bias + alpha / size * S(x^2):
    # dx = delta t^-beta - 2 beta alpha / size * x * S(delta x t^(-beta - 1)).
    s = _lrn_window_sum(e, e.op("Mul", x, x), shape, size, etype)
    t = e.op("Add", e.scalar(bias, etype), e.op("Mul", s, e.scalar(alpha / size, etype)))
    tb = e.op("Pow", t, e.scalar(-beta, etype))
    inner = e.op("Div", e.op("Mul", e.op("Mul", delta, x), tb), t)
    back = _lrn_window_sum(e, inner, shape, size, etype)
    second = e.op("Mul", e.op("Mul", x, back), e.scalar(-2 * beta * alpha / size, etype))
    return [e.op("Add", e.op("Mul", delta, tb), second)]


# ------------------------------------------------------------ normalization


def _moments(e: _Exporter, x: str, axes: list[int]) -> tuple[str, str, str]:
    """(mean, x - mean, biased variance), the statistics with kept axes."""
    mean = e.reduce("ReduceMean", x, axes, 1)
    centered = e.op("Sub", x, mean)
    var = e.reduce("ReduceMean", e.op("Mul", centered, centered), axes, 1)
    return mean, centered, var


@_handles("BatchNormInference")
def _batch_norm_inference(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    gamma, beta, x, mean, var = ins
    return [e.op("BatchNormalization", x, gamma, beta, mean, var,
                 epsilon=float(attrs["epsilon"]))]


@_handles("BatchNormTraining")
def _batch_norm_training(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    gamma, beta, x = ins
    shape = e.in_shape(node, 2)
    etype = e.in_type(node, 2)
    axes = [0] + list(range(2, len(shape)))
    channel = [shape[1]] + [1] * (len(shape) - 2)
    mean, centered, var = _moments(e, x, axes)
    inv = e.op("Div", e.scalar(1, etype),
               e.op("Sqrt", e.op("Add", var, e.scalar(float(attrs["epsilon"]), etype))))
    y = e.op("Mul", e.op("Mul", centered, inv), e.reshape(gamma, channel))
    y = e.op("Add", y, e.reshape(beta, channel))
    return [y, e.reshape(mean, [shape[1]]), e.reshape(var, [shape[1]])]


@_handles("BatchNormTrainingBackprop")
def _batch_norm_training_backprop(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    gamma, _beta, x, mean, var, delta = ins
    shape = e.in_shape(node, 2)
    etype = e.in_type(node, 2)
    axes = [0] + list(range(2, len(shape)))
    channel = [shape[1]] + [1] * (len(shape) - 2)
    count = float(np.prod([shape[a] for a in axes]))
    inv = e.op("Div", e.scalar(1, etype), e.op("Sqrt", e.op(
        "Add", e.reshape(var, channel), e.scalar(float(attrs["epsilon"]), etype))))
    xhat = e.op("Mul", e.op("Sub", x, e.reshape(mean, channel)), inv)
    d_beta = e.reduce("ReduceSum", delta, axes, 1)
    d_gamma = e.reduce("ReduceSum", e.op("Mul", delta, xhat), axes, 1)
    # dx = gamma inv / M (M delta - d_beta - xhat d_gamma)
    inner = e.op("Sub", e.op("Sub", e.op("Mul", delta, e.scalar(count, etype)), d_beta),
                 e.op("Mul", xhat, d_gamma))
    factor = e.op("Mul", e.op("Mul", e.reshape(gamma, channel), inv),
                  e.scalar(1 / count, etype))
    return [e.op("Mul", inner, factor), e.reshape(d_gamma, [shape[1]]),
            e.reshape(d_beta, [shape[1]])]


def _begin_axis(attrs: dict, rank: int) -> int:
    begin = int(attrs.get("begin_norm_axis", -1))
    return begin + rank if begin < 0 else begin


@_handles("LayerNorm")
def _layer_norm(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    x = ins[0]
    shape = e.in_shape(node, 0)
    etype = e.in_type(node, 0)
    rank = len(shape)
    begin = _begin_axis(attrs, rank)
    eps = float(attrs.get("epsilon", 1e-5))
    normalized = shape[begin:]
    axes = list(range(begin, rank))
    lead = shape[:begin]
    affine = len(ins) == 3
    scale = e.reshape(ins[1], normalized) if affine else None
    bias = e.reshape(ins[2], normalized) if affine else None
    if e.opset >= 17 and etype == "f32":
        if scale is None:
            scale = e.const(np.ones(normalized, dtype=_np_dtype(etype)), "ones")
        inputs = [x, scale] + ([bias] if bias is not None else [])
        y, mean, _ = e.emit("LayerNormalization", inputs, 3, axis=begin, epsilon=eps)
        out_mean = e.reshape(mean, lead) if e.is_used(node, 1) else None
        out_var = None
        if e.is_used(node, 2):
            centered = e.op("Sub", x, mean)
            var = e.reduce("ReduceMean", e.op("Mul", centered, centered), axes, 0)
            out_var = var if lead == list(e.out_shape(node, 2)) else e.reshape(var, lead)
        return [y, out_mean, out_var]
    mean, centered, var = _moments(e, x, axes)
    y = e.op("Div", centered, e.op("Sqrt", e.op("Add", var, e.scalar(eps, etype))))
    if affine:
        y = e.op("Add", e.op("Mul", y, scale), bias)
    return [y, e.reshape(mean, lead), e.reshape(var, lead)]


@_handles("LayerNormBackprop")
def _layer_norm_backprop(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    x, delta, mean, var = ins[:4]
    shape = e.in_shape(node, 0)
    etype = e.in_type(node, 0)
    rank = len(shape)
    begin = _begin_axis(attrs, rank)
    eps = float(attrs.get("epsilon", 1e-5))
    axes, lead_axes = list(range(begin, rank)), list(range(begin))
    count = float(np.prod(shape[begin:]))
    kept = shape[:begin] + [1] * (rank - begin)
    inv = e.op("Div", e.scalar(1, etype), e.op("Sqrt", e.op(
        "Add", e.reshape(var, kept), e.scalar(eps, etype))))
    xhat = e.op("Mul", e.op("Sub", x, e.reshape(mean, kept)), inv)
    g = delta
    if len(ins) == 5:
        g = e.op("Mul", delta, e.reshape(ins[4], shape[begin:]))
    # dx = inv / N (N g - sum(g) - xhat sum(g xhat)), sums over the normalized axes.
    inner = e.op("Sub", e.op("Sub", e.op("Mul", g, e.scalar(count, etype)),
                             e.reduce("ReduceSum", g, axes, 1)),
                 e.op("Mul", xhat, e.reduce("ReduceSum", e.op("Mul", g, xhat), axes, 1)))
    dx = e.op("Mul", inner, e.op("Mul", inv, e.scalar(1 / count, etype)))
    if len(ins) < 5:
        return [dx]
    scale_shape = e.in_shape(node, 4)

    def over_lead(v: str) -> str:
        s = e.reduce("ReduceSum", v, lead_axes, 0) if lead_axes else v
        return e.reshape(s, scale_shape)

    return [dx, over_lead(e.op("Mul", delta, xhat)), over_lead(delta)]


# ------------------------------------------------------------------------ random


@_handles("Dropout")
def _dropout(e: _Exporter, node: Node, ins: list, attrs: dict) -> list:
    x = ins[0]
    etype = e.in_type(node, 0)
    p = float(attrs["probability"])
    if p >= 1:
        zero = e.scalar(0, etype)
        y = e.op("Mul", x, zero)
        return [y, e.op("Mul", y, zero)]
    # The mask differs from ngraph's (another generator); its distribution is the same.
    seed = int(attrs.get("seed", 0))
    seed = seed - (1 << 64) if seed >= 1 << 63 else seed
    y, mask = e.emit("Dropout", [x, e.scalar(p, etype), e.const(np.asarray(True), "training")],
                     2, seed=seed)
    if not e.is_used(node, 1):
        return [y, None]
    return [y, e.op("Mul", e.cast(mask, etype), e.scalar(1 / (1 - p), etype))]


#: Every op export writes, and the ONNX ops it becomes (the op table of docs/onnx-export.md).
EXPORTED_OPS = sorted(_HANDLERS) + ["Parameter", "Result"]


# --------------------------------------------------------------------------- entry point


def _as_function(graph: Any) -> Function:
    from ngraph.serializer import function_of  # noqa: PLC0415

    return function_of(graph, "export")


def export(function_or_computation: Any, path: str | os.PathLike | None,
           opset: int = DEFAULT_OPSET, *, drop_updates: bool = False) -> onnx.ModelProto:
    """Writes an ngraph function as an ONNX model at `path` (None: only returns it); returns
    the ``ModelProto``.

    `function_or_computation`: an ``ng.Function``, a computation of ``runtime.computation``
    (its function), a node or a list of nodes (the graph computing them from the parameters
    they depend on). Parameters become the model's inputs (in the function's order, named as
    the parameters), results its outputs, in order; constants and variables become
    initializers, variables with their current values. `opset` (default 18) is the ONNX
    opset, from 13 to the installed onnx package's newest. A function with variable updates
    (a training step) raises unless `drop_updates` (the model computes the results only).

    An op with no ONNX equivalent (collectives, Send/Recv, see ``NO_EQUIVALENT``) raises
    ONNXError naming the op and the node; ``EXPORTED_OPS`` lists the ops written."""
    if isinstance(opset, bool) or not isinstance(opset, int) or \
            not MIN_OPSET <= opset <= MAX_OPSET:
        raise ONNXError(f"export: opset must be an integer from {MIN_OPSET} to {MAX_OPSET}, "
                        f"got {opset!r}")
    function = _as_function(function_or_computation)
    exporter = _Exporter(opset)
    graph = exporter.export_function(function, drop_updates, function.name or "ngraph")
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="ngraph")
    model.ir_version = helper.find_min_ir_version_for(opsets)
    if path is not None:
        onnx.save_model(model, os.fspath(path))
    return model
