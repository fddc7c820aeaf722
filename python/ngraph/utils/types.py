"""Conversions between Python and NumPy types and ngraph element types (nGraph's
``ngraph.utils.types``)."""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from ngraph._ngraph import Node
from ngraph.exceptions import NgraphTypeError
from ngraph.impl import Type
from ngraph.utils import SUPPORTED_DTYPES, as_node, as_nodes, make_constant_node, to_dtype

TensorShape = list[int]
NumericData = Union[int, float, np.ndarray]
NumericType = Union[type, np.dtype]
ScalarData = Union[int, float]
NodeInput = Union[Node, NumericData]

#: (element type, NumPy type) pairs, one per element type.
ngraph_to_numpy_types_map = [(Type.from_dtype(t), t) for t in SUPPORTED_DTYPES]


def get_element_type(data_type: Any) -> Type:
    """The element type of a NumPy dtype or type, a Python type (int is i32, float is f32) or
    a name; NgraphTypeError for others."""
    return Type.from_dtype(to_dtype(data_type, "get_element_type"))


def get_dtype(ngraph_type: Type) -> np.dtype:
    """The NumPy dtype of an element type."""
    if not isinstance(ngraph_type, Type):
        raise NgraphTypeError(f"get_dtype: {ngraph_type!r} is not an element Type")
    return ngraph_type.to_dtype()


def get_ndarray(data: NumericData) -> np.ndarray:
    """`data` as an ndarray (itself when it is one)."""
    return data if isinstance(data, np.ndarray) else np.array(data)


__all__ = [
    "NodeInput", "NumericData", "NumericType", "ScalarData", "TensorShape", "as_node",
    "as_nodes", "get_dtype", "get_element_type", "get_ndarray", "make_constant_node",
    "ngraph_to_numpy_types_map",
]  # fmt: skip
