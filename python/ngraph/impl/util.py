"""Buffers for tensor reads and writes (nGraph's ``ngraph.impl.util``)."""

from __future__ import annotations

import numpy as np

from ngraph.exceptions import NgraphTypeError


class CPointer:
    """The memory of a NumPy array, as ``numpy_to_c`` gives it to ``Tensor.write``/``read``;
    it keeps the array alive."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __repr__(self) -> str:
        return f"<CPointer: {self.array.nbytes} bytes>"


def numpy_to_c(array: np.ndarray) -> CPointer:
    """A pointer to the data of `array`, which must be a C-contiguous ndarray (reads write
    into it)."""
    if not isinstance(array, np.ndarray):
        raise NgraphTypeError(f"numpy_to_c takes an ndarray, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise NgraphTypeError("numpy_to_c needs a C-contiguous array (np.ascontiguousarray)")
    return CPointer(array)
