"""nGraph's low-level Python API (``ngraph.impl``, pyngraph's classes) over ngraph's core.

``Type``, ``Shape``, ``Strides``, ``Coordinate``, ``CoordinateDiff``, ``AxisSet`` and
``AxisVector`` are small Python value classes; ``Node`` and ``Function`` are the core's own
classes (the same as ``ng.Node`` and ``ng.Function``). ``ngraph.impl.op`` has one class per op,
``ngraph.impl.runtime`` the backend, executables and tensors, ``ngraph.impl.util`` the buffer
helpers. Everything is built by the core: there is no second implementation here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ngraph._ngraph import Function, Node
from ngraph.exceptions import NgraphTypeError, UserInputError
from ngraph.utils import _NO_BF16, SHORT_NAMES, bfloat16

# Element type short names and their NumPy types (from ngraph.utils' one list); bf16's is
# ml_dtypes.bfloat16, None without ml_dtypes.
_TYPES = {short: bfloat16 if short == "bf16" else np.dtype(name).type
          for short, name in SHORT_NAMES.items()}


class Type(str):
    """An element type: ``Type.f32``, ``Type.i8``, ``Type.boolean``, ... It is its short name
    (a ``str``), so it is accepted wherever ngraph takes a dtype."""

    boolean: Type
    f16: Type
    bf16: Type
    f32: Type
    f64: Type
    i8: Type
    i16: Type
    i32: Type
    i64: Type
    u8: Type
    u16: Type
    u32: Type
    u64: Type

    def __new__(cls, name: str) -> Type:
        if name not in _TYPES:
            raise NgraphTypeError(f"unknown element type {name!r} (one of {', '.join(_TYPES)})")
        return super().__new__(cls, name)

    @classmethod
    def from_dtype(cls, dtype: Any) -> Type:
        """The element type of a NumPy dtype; NgraphTypeError for unsupported ones."""
        dtype = np.dtype(dtype)
        for name, np_type in _TYPES.items():
            if np_type is not None and dtype == np_type:
                return cls(name)
        raise NgraphTypeError(f"dtype {dtype} has no element type")

    def to_dtype(self) -> np.dtype:
        if _TYPES[self] is None:
            raise NgraphTypeError(f"element type {self} has no NumPy dtype: {_NO_BF16}")
        return np.dtype(_TYPES[self])

    def get_type_name(self) -> str:
        return str(self)

    @property
    def bitwidth(self) -> int:
        return self.size * 8

    @property
    def size(self) -> int:
        return 2 if self == "bf16" else self.to_dtype().itemsize

    def is_real(self) -> bool:
        return self == "bf16" or self.to_dtype().kind == "f"

    def is_integral(self) -> bool:
        return self != "bf16" and self.to_dtype().kind in "iu"

    def is_signed(self) -> bool:
        return self == "bf16" or self.to_dtype().kind in "if"

    def is_static(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<Type: '{self}'>"


for _name in _TYPES:
    setattr(Type, _name, Type(_name))


class _IntVector(list):
    """A list of ints checked on construction (nGraph's Shape, Strides, ...)."""

    _negative_ok = False

    def __init__(self, values: Iterable[Any] = ()) -> None:
        try:
            raw = list(values)
            if any(isinstance(v, (bool, float, np.floating)) for v in raw):
                raise TypeError
            items = [int(v) for v in raw]
        except (TypeError, ValueError):
            raise NgraphTypeError(f"{type(self).__name__} takes integers, got {values!r}") from None
        if not self._negative_ok and any(v < 0 for v in items):
            raise UserInputError(f"{type(self).__name__} takes non-negative integers, got {items}")
        super().__init__(items)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {{{', '.join(map(str, self))}}}>"


class Shape(_IntVector):
    """A tensor shape: one non-negative size per axis."""


class Strides(_IntVector):
    """Strides (or dilations), one per spatial axis."""


class Coordinate(_IntVector):
    """A position in a tensor, one index per axis."""


class AxisVector(_IntVector):
    """An ordered list of axes (a permutation, for Reshape)."""


class CoordinateDiff(_IntVector):
    """Signed offsets, one per axis (paddings, which may be negative)."""

    _negative_ok = True


class AxisSet(_IntVector):
    """A set of axes, kept sorted and without repeats."""

    def __init__(self, values: Iterable[Any] = ()) -> None:
        super().__init__(sorted(set(_IntVector(values))))


class NodeVector(list):
    """pyngraph's list of nodes (``Function(NodeVector([y]), [x], "f")``): a ``list`` of
    ``Node``; anything else raises NgraphTypeError naming its position."""

    def __init__(self, nodes: Iterable[Any] = ()) -> None:
        nodes = list(nodes)
        for i, n in enumerate(nodes):
            if not isinstance(n, Node):
                raise NgraphTypeError(f"NodeVector takes nodes; item {i} is a {type(n).__name__}")
        super().__init__(nodes)


class ParameterVector(NodeVector):
    """pyngraph's list of Parameter nodes."""

    def __init__(self, nodes: Iterable[Any] = ()) -> None:
        super().__init__(nodes)
        for i, n in enumerate(self):
            if n.get_type_name() != "Parameter":
                raise NgraphTypeError(f"ParameterVector takes Parameter nodes; item {i} is a "
                                      f"{n.get_type_name()}")


def _install_node_accessors() -> None:
    """pyngraph's Node accessors, returning the value classes above."""
    Node.get_output_shape = lambda self, i: Shape(self[i].shape)
    Node.get_output_element_type = lambda self, i: Type.from_dtype(self[i].dtype)
    Node.get_shape = lambda self: Shape(self.shape)
    Node.get_element_type = lambda self: Type(self.element_type)
    Node.get_name = lambda self: self.name
    Node.get_friendly_name = lambda self: self.friendly_name


_install_node_accessors()

from ngraph.impl import op, runtime, util  # noqa: E402

__all__ = [
    "AxisSet", "AxisVector", "Coordinate", "CoordinateDiff", "Function", "Node", "NodeVector",
    "ParameterVector", "Shape", "Strides", "Type", "op", "runtime", "util",
]  # fmt: skip
