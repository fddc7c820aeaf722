"""Compiling graphs and running them on NumPy arrays (nGraph's ``ng.runtime``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ngraph import _ngraph
from ngraph._ngraph import Function, Node, Variable
from ngraph.utils import as_node


def runtime(backend_name: str = "CPU") -> Runtime:
    """A runtime on the named backend: "CPU" (the compiler) or "INTERPRETER" (the reference
    executor, one plain kernel per op: slow, for checking results). Another name raises
    ValueError listing the registered backends."""
    return Runtime(backend_name)


def backends() -> list[str]:
    """The names ng.runtime accepts."""
    return list(_ngraph.Backend.get_registered_devices())


class Runtime:
    """Compiles graphs into computations on one backend."""

    def __init__(self, backend_name: str = "CPU") -> None:
        self.backend_name = backend_name
        self.backend = _ngraph.Backend.create(backend_name)

    def __repr__(self) -> str:
        return f"<Runtime: Backend='{self.backend_name}'>"

    def computation(self, node_or_function: Node | Sequence[Node] | Function,
                    *inputs: Node, updates: Sequence[tuple[Node, Any]] | None = None
                    ) -> Computation:
        """Compiles the graph that computes `node_or_function` (a node, a list of nodes or a
        Function) from the parameters `inputs` (in call order). `updates` lists
        (variable, new value) pairs applied at the end of every call, in place; all reads
        in a call see the values from before it."""
        return Computation(self, node_or_function, *inputs, updates=updates)


class Computation(_ngraph.ComputationBase):
    """A compiled graph. Call it with one array per parameter: it returns one ndarray when
    built from a node, a list of ndarrays when built from a list (or a Function).

    Arrays of the parameter's dtype and shape, C-contiguous, are used in place by a call path
    written in C++; other values are converted first when that is safe."""

    def __init__(self, runtime: Runtime, node_or_function: Any, *parameters: Node,
                 updates: Sequence[tuple[Node, Any]] | None = None) -> None:
        super().__init__()
        self.runtime = runtime
        if isinstance(node_or_function, Function):
            if updates:
                raise TypeError("Runtime.computation: updates need nodes, not a Function")
            if parameters:
                raise TypeError("Runtime.computation: pass parameters with the nodes, "
                                "not with a Function")
            self.function = node_or_function
            self._single = False
            self._layout = [True] * len(node_or_function.get_results())
        else:
            self._single = isinstance(node_or_function, Node)
            given = [node_or_function] if self._single else list(node_or_function)
            for i, r in enumerate(given):
                if not isinstance(r, Node):
                    raise TypeError(f"Runtime.computation: result {i} is a "
                                    f"{type(r).__name__}, not a Node")
            for i, p in enumerate(parameters):
                if not isinstance(p, Node) or p.get_type_name() != "Parameter":
                    raise TypeError(f"Runtime.computation: argument {i + 1} must be a "
                                    f"Parameter node, got {p!r}")
            # Nodes without a value (ng.send) run as sinks; their place in the output is None.
            self._layout = [r.get_output_size() > 0 for r in given]
            results = [r for r, has_value in zip(given, self._layout) if has_value]
            sinks = [r for r, has_value in zip(given, self._layout) if not has_value]
            name = given[0].name if self._single else ""
            pairs = []
            for i, pair in enumerate(updates or []):
                try:
                    var, value = pair
                except (TypeError, ValueError):
                    raise TypeError(f"updates[{i}] must be a (variable, value) pair, "
                                    f"got {pair!r}") from None
                if not isinstance(var, Variable):
                    raise TypeError(f"updates[{i}]: {var!r} is not a variable "
                                    "(make it with ng.variable)")
                pairs.append((var, as_node(value, var.dtype)))
            if pairs or sinks:
                self.function = _ngraph.make_function(results, list(parameters), pairs, sinks,
                                                      name)
            else:
                self.function = Function(results, list(parameters), name)
        self.parameters = self.function.get_parameters()
        self.results = self.function.get_results()
        self._dtypes = [p.dtype for p in self.parameters]
        self._shapes = [tuple(p.shape) for p in self.parameters]
        self.executable = runtime.backend.compile(self.function)
        self._bind(self.executable, self._layout, self._single)

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.element_type}{p.shape}" for p in self.parameters)
        return f"<Computation: {self.function.name or 'unnamed'}({params})>"

    def _convert(self, i: int, value: Any) -> np.ndarray:
        p, dtype, shape = self.parameters[i], self._dtypes[i], self._shapes[i]
        if not isinstance(value, np.ndarray):
            # Lists and scalars get their natural dtype first, so that they pass the same
            # check as arrays ([1.5] into an int32 parameter is refused, not truncated).
            try:
                value = np.asarray(value)
            except (TypeError, ValueError, OverflowError) as e:
                raise TypeError(f"argument {i} ({p.name}) expects {dtype} with shape "
                                f"{shape}: {e}") from None
        if value.dtype != dtype:
            if not np.can_cast(value.dtype, dtype, casting="same_kind"):
                raise TypeError(
                    f"argument {i} ({p.name}) expects {dtype} with shape {shape}, "
                    f"got {value.dtype} (cannot convert {value.dtype} to {dtype} safely)"
                )
            value = value.astype(dtype)
        if value.shape != shape:
            raise ValueError(f"argument {i} ({p.name}) expects shape {shape} ({dtype}), "
                             f"got shape {value.shape}")
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        return value

    # __call__ is ComputationBase's (C++); it comes here when an argument needs converting.
    def _call_slow(self, *input_values: Any) -> np.ndarray | list[np.ndarray]:
        if len(input_values) != len(self.parameters):
            names = ", ".join(p.name for p in self.parameters) or "none"
            raise TypeError(f"computation expects {len(self.parameters)} arguments "
                            f"({names}), got {len(input_values)}")
        arrays = [self._convert(i, v) for i, v in enumerate(input_values)]
        return self._run_converted(*arrays)
