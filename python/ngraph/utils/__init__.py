"""Conversions between NumPy values and graph nodes (ngraph's helpers), and nGraph's
``ngraph.utils`` package: ``types``, ``input_validation``, ``broadcasting``, ``reduction``,
``decorators`` and ``node_factory``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Union

import numpy as np

from ngraph import _ngraph
from ngraph._ngraph import Node
from ngraph.exceptions import NgraphTypeError, UserInputError

NodeInput = Union[Node, int, float, np.ndarray]

try:  # NumPy has no bfloat16; ml_dtypes (JAX's) adds it. Optional: see docs/api.md.
    from ml_dtypes import bfloat16
except ImportError:
    bfloat16 = None

#: NumPy dtypes of the element types the core supports (bf16's only with ml_dtypes).
SUPPORTED_DTYPES = (
    np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.float16,
) + ((bfloat16,) if bfloat16 is not None else ())  # fmt: skip
#: nGraph's short names of the element types.
SHORT_NAMES = {
    "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16", "i32": "int32",
    "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "boolean": "bool", "f16": "float16", "bf16": "bfloat16",
}  # fmt: skip
_SUPPORTED = ("bool, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, "
              "uint32, uint64 or ml_dtypes.bfloat16")
_NO_BF16 = ("NumPy has no bfloat16 and the ml_dtypes package that adds it is not installed "
            "(pip install ml_dtypes)")


def _is_bf16_name(value: Any) -> bool:
    return isinstance(value, str) and value in ("bf16", "bfloat16")


def to_dtype(value: Any, what: str = "dtype") -> np.dtype:
    """A NumPy dtype from a dtype, a type (np.float32, float, int, bool) or a name
    ('float32', 'f32', 'i64', 'boolean', 'f16', 'bf16')."""
    if _is_bf16_name(value):
        if bfloat16 is None:
            raise NgraphTypeError(f"{what}: element type bf16 has no NumPy dtype: {_NO_BF16}")
        return np.dtype(bfloat16)
    return _to_dtype(value, what)


def element_type_arg(value: Any, what: str) -> Any:
    """`value` for an element-type attribute of an op: its NumPy dtype, or the name "bf16"
    where bf16 has no dtype (no ml_dtypes): bf16 values can still be made and moved in a
    graph, only not handed to or from NumPy."""
    if _is_bf16_name(value) and bfloat16 is None:
        return "bf16"
    return to_dtype(value, what)


def _to_dtype(value: Any, what: str) -> np.dtype:
    if isinstance(value, str):
        value = SHORT_NAMES.get(value, value)
    if value is float:
        value = np.float32
    elif value is int:
        value = np.int32
    try:
        dtype = np.dtype(value)
    except TypeError as e:
        raise NgraphTypeError(f"{what}: {value!r} is not a dtype") from e
    if dtype.type not in SUPPORTED_DTYPES:
        raise NgraphTypeError(
            f"{what}: dtype {dtype} is not supported (use {_SUPPORTED})"
        )
    return dtype


def make_constant_node(value: Any, dtype: Any = None, name: str | None = None) -> Node:
    """A Constant node holding `value` (converted to `dtype` when given)."""
    raw = np.asarray(value)
    if raw.dtype.kind not in "biuf" and raw.dtype.type is not bfloat16:
        # None, strings, objects, complex: not silently NaN
        raise NgraphTypeError(
            f"[Constant] value {value!r} is not a number, boolean or array of them "
            f"(dtype {raw.dtype})"
        )
    if dtype is None:
        array = raw
    else:
        try:
            array = np.asarray(value, dtype=to_dtype(dtype, "[Constant] dtype"))
        except (OverflowError, ValueError) as e:  # -1 as uint8, 300 as int8 (NumPy >= 2)
            raise NgraphTypeError(f"[Constant] value {value!r} does not fit {dtype}: {e}") from None
    if dtype is None and array.dtype.type not in SUPPORTED_DTYPES:
        raise NgraphTypeError(
            f"[Constant] dtype {array.dtype} is not supported (use {_SUPPORTED})"
        )
    # Not np.ascontiguousarray: it turns a 0-d array (a scalar) into shape (1,).
    if not array.flags.c_contiguous:
        array = np.array(array, order="C")
    return _ngraph.make_constant(array, name or "")


def as_node(value: NodeInput, dtype: Any = None) -> Node:
    """`value` itself if it is a Node, else a Constant of it (of `dtype` when given)."""
    if isinstance(value, Node):
        return value
    return make_constant_node(value, dtype)


def as_nodes(*values: NodeInput, op: str = "") -> list[Node]:
    """Nodes for `values`; non-nodes become constants of the first node's dtype (as in
    nGraph: ``x_f32 + 1`` adds an f32 constant). A value that the dtype cannot hold exactly
    (``x_i32 + 0.5``) raises TypeError."""
    # (A bf16 node without ml_dtypes has no dtype: the op then names what it refuses.)
    dtype = next((v.dtype for v in values if isinstance(v, Node)
                  and (bfloat16 is not None or v.element_type != "bf16")), None)
    out = []
    for v in values:
        if not isinstance(v, Node) and dtype is not None:
            raw = np.asarray(v)
            if raw.dtype.kind == "f" and dtype.kind in "iub" and not np.array_equal(
                raw.astype(dtype), raw
            ):
                raise NgraphTypeError(
                    f"[{op}] value {v!r} cannot be represented exactly as {dtype}; "
                    "convert the node or the value first"
                )
        out.append(as_node(v, dtype))
    return out


def int_list(values: Iterable[Any], what: str) -> list[int]:
    """A list of Python ints; raises TypeError naming `what` otherwise."""
    try:
        out = []
        for v in values:
            if isinstance(v, (bool, np.bool_)) or not float(v).is_integer():
                raise TypeError
            out.append(int(v))
        return out
    except (TypeError, ValueError):
        raise NgraphTypeError(f"{what} must be a sequence of integers, got {values!r}") from None


def axis_list(axes: Any, rank: int, what: str) -> list[int]:
    """Axes as non-negative ints; accepts one int or a sequence; negative axes count from
    the end (NumPy style)."""
    if isinstance(axes, (int, np.integer)):
        axes = [axes]
    out = []
    for a in int_list(axes, what):
        if not -rank <= a < rank:
            raise UserInputError(f"{what}: axis {a} is out of range for rank {rank}")
        out.append(a + rank if a < 0 else a)
    return out


def shape_of(shape: Sequence[Any], what: str = "shape") -> list[int]:
    dims = int_list(shape, what)
    if any(d < 0 for d in dims):
        raise UserInputError(f"{what} must not have negative dimensions, got {list(shape)}")
    return dims
