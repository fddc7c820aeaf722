"""ngraph as an ONNX backend (``onnx.backend.base.Backend``), as ngraph-onnx had: onnx's
backend test suites run models through it.

    import ngraph.onnx.backend as backend
    rep = backend.prepare(model, "CPU")      # or "INTERPRETER"
    outputs = rep.run([x])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep

import ngraph as ng
from ngraph.onnx.importer import (
    StaticInputNeeded,
    import_onnx_graph,
    load_model,
    supported_ops,
)

__all__ = ["NgraphBackend", "NgraphBackendRep", "prepare", "run_model", "supports_device",
           "is_compatible"]


class NgraphBackendRep(BackendRep):
    """A compiled ONNX model: ``run(inputs)`` takes the graph's inputs in order (or a dict by
    name) and returns its outputs, in order.

    A graph input that gives a shape, axes or a count (``Reshape``'s shape, ``Pad``'s pads...)
    must be known when ngraph compiles: such a model compiles at ``run``, for the values of
    those inputs given, and again when they change."""

    def __init__(self, proto, device: str, options: dict) -> None:
        self.proto, self.device, self.options = proto, device, options
        self.input_names = [i.name for i in proto.graph.input
                            if i.name not in {t.name for t in proto.graph.initializer}]
        self.output_names = [o.name for o in proto.graph.output]
        self.static: list[str] = []   # inputs fixed at import
        self.compiled: dict[bytes, Any] = {}
        self._compile({})  # raises now for models that cannot import

    def _compile(self, values: dict) -> Any:
        while True:
            key = b"".join(n.encode() + b"\0" + np.ascontiguousarray(values[n]).tobytes()
                           + str(np.asarray(values[n]).shape).encode() for n in self.static)
            if key in self.compiled:
                return self.compiled[key]
            try:
                graph = import_onnx_graph(self.proto, constants={n: values[n] for n in
                                                                 self.static}, **self.options)
            except StaticInputNeeded as e:
                # Only inputs that look like shapes, axes or counts: integers, or a few
                # floats (a ratio, a range's bounds).
                v = values.get(e.input)
                if e.input in self.static or (v is not None and np.asarray(v).dtype.kind == "f"
                                              and np.asarray(v).size > 8):
                    raise
                self.static.append(e.input)
                if e.input not in values:
                    return None  # compiled at run, with the value
                continue
            comp = ng.runtime(self.device).computation(graph.function())
            self.compiled[key] = (graph, comp)
            return self.compiled[key]

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise ValueError(f"the model takes {len(self.input_names)} inputs "
                             f"({self.input_names}), {len(inputs)} were given")
        values = dict(zip(self.input_names, inputs))
        graph, comp = self._compile(values)
        return tuple(comp(*[values[n] for n in graph.inputs]))


class NgraphBackend(Backend):
    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> NgraphBackendRep:
        # (not onnx.checker, as Backend.prepare would: the import checks what it reads and
        # raises ONNXError naming the node and field)
        proto = load_model(model)
        options = {k: kwargs[k] for k in ("shapes", "training") if k in kwargs}
        return NgraphBackendRep(proto, _device(device), options)

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return _device(device) in ng.backends()

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs: Any) -> bool:
        ops = supported_ops()
        proto = load_model(model)
        return all(n.op_type in ops and (n.domain or "ai.onnx") == "ai.onnx"
                   for n in proto.graph.node)


def _device(device: str) -> str:
    return str(device).split(":")[0].upper()


prepare = NgraphBackend.prepare
run_model = NgraphBackend.run_model
supports_device = NgraphBackend.supports_device
is_compatible = NgraphBackend.is_compatible
