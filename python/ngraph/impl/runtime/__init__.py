"""Backends, executables and tensors (nGraph's ``ngraph.impl.runtime``)::

    backend = Backend.create("CPU")
    a = backend.create_tensor(Type.f32, Shape([2, 2]))
    a.write(util.numpy_to_c(array), 16)
    executable = backend.compile(function)
    executable.call([result], [a, b])
    result.read(util.numpy_to_c(out), 16)

Compiling and running are the core's (the same executables as ``ng.runtime()``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ngraph import _ngraph
from ngraph._ngraph import Function
from ngraph.exceptions import NgraphTypeError, UserInputError
from ngraph.impl import Shape, Type
from ngraph.impl.util import CPointer


class Tensor:
    """A host tensor of an element type and shape (zeros when created)."""

    def __init__(self, element_type: Any, shape: Any) -> None:
        self.element_type = element_type if isinstance(element_type, Type) else \
            Type.from_dtype(element_type)
        self.shape = Shape(shape)
        self.data = np.zeros(self.shape, dtype=self.element_type.to_dtype())

    def get_element_type(self) -> Type:
        return self.element_type

    def get_shape(self) -> Shape:
        return self.shape

    def get_element_count(self) -> int:
        return int(self.data.size)

    def get_size_in_bytes(self) -> int:
        return int(self.data.nbytes)

    def _span(self, what: str, pointer: CPointer, args: tuple[int, ...]) -> tuple[int, int]:
        """(offset, size) from nGraph's (size) or older (offset, size) arguments, checked."""
        if not isinstance(pointer, CPointer):
            raise NgraphTypeError(f"Tensor.{what} takes util.numpy_to_c(array), got "
                                  f"{type(pointer).__name__}")
        if len(args) == 1:
            offset, size = 0, int(args[0])
        elif len(args) == 2:
            offset, size = int(args[0]), int(args[1])
        else:
            raise NgraphTypeError(f"Tensor.{what}(pointer, size) or (pointer, offset, size)")
        if offset < 0 or size < 0 or offset + size > self.data.nbytes:
            raise UserInputError(f"Tensor.{what}: bytes {offset}..{offset + size} are outside "
                                 f"the tensor ({self.element_type}{list(self.shape)}, "
                                 f"{self.data.nbytes} bytes)")
        if size > pointer.array.nbytes:
            raise UserInputError(f"Tensor.{what}: {size} bytes, but the array has "
                                 f"{pointer.array.nbytes}")
        return offset, size

    def write(self, pointer: CPointer, *args: int) -> None:
        """Copies `size` bytes from the array into the tensor (at byte `offset`)."""
        offset, size = self._span("write", pointer, args)
        mine = self.data.reshape(-1).view(np.uint8)
        mine[offset:offset + size] = pointer.array.reshape(-1).view(np.uint8)[:size]

    def read(self, pointer: CPointer, *args: int) -> None:
        """Copies `size` bytes of the tensor (from byte `offset`) into the array."""
        offset, size = self._span("read", pointer, args)
        theirs = pointer.array.reshape(-1).view(np.uint8)
        theirs[:size] = self.data.reshape(-1).view(np.uint8)[offset:offset + size]

    def __repr__(self) -> str:
        return f"<Tensor: {self.element_type}{list(self.shape)}>"


class Executable:
    """A compiled function: ``call(outputs, inputs)`` with one Tensor per result and per
    parameter."""

    def __init__(self, executable: Any) -> None:
        self.executable = executable

    def get_parameters(self) -> list:
        return self.executable.get_parameters()

    def get_results(self) -> list:
        return self.executable.get_results()

    def call(self, outputs: list[Tensor], inputs: list[Tensor]) -> bool:
        """Runs on the input tensors, writing the output tensors; True."""
        for what, tensors, nodes in (("outputs", outputs, self.get_results()),
                                     ("inputs", inputs, self.get_parameters())):
            if len(tensors) != len(nodes):
                raise UserInputError(f"Executable.call: {len(nodes)} {what} expected, got "
                                     f"{len(tensors)}")
            for i, (t, n) in enumerate(zip(tensors, nodes)):
                if not isinstance(t, Tensor):
                    raise NgraphTypeError(f"Executable.call: {what}[{i}] is not a Tensor")
                if t.data.dtype != n.dtype or list(t.shape) != n.shape:
                    raise UserInputError(
                        f"Executable.call: {what}[{i}] is {t.element_type}{list(t.shape)}, "
                        f"{n.name} is {n.element_type}{n.shape}")
        results = self.executable.call([t.data for t in inputs])
        for t, r in zip(outputs, results):
            t.data[...] = r
        return True


class Backend:
    """A backend ("CPU"): creates tensors and compiles functions."""

    def __init__(self, backend: Any, name: str) -> None:
        self.backend = backend
        self.name = name

    @staticmethod
    def create(backend_name: str) -> Backend:
        return Backend(_ngraph.Backend.create(backend_name), backend_name)

    @staticmethod
    def get_registered_devices() -> list[str]:
        return _ngraph.Backend.get_registered_devices()

    def create_tensor(self, element_type: Any, shape: Any) -> Tensor:
        return Tensor(element_type, shape)

    def compile(self, function: Function) -> Executable:
        if not isinstance(function, Function):
            raise NgraphTypeError(f"Backend.compile takes a Function, got "
                                  f"{type(function).__name__}")
        return Executable(self.backend.compile(function))

    def __repr__(self) -> str:
        return f"<Backend: '{self.name}'>"


__all__ = ["Backend", "Executable", "Tensor"]
