"""ONNX → ngraph: reads a model, checks it, and builds its graph from ngraph's ops.

Every ONNX value is either *static* (a NumPy array known at import: initializers,
``Constant`` nodes and everything computed from them alone, such as the shape
arithmetic exporters write, ``Shape``→``Gather``→``Concat``→``Reshape``) or a *node*
(computed at run time). Nodes whose inputs are all static are folded at import; the op
converters (``ngraph.onnx.converters``) see the rest.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ngraph as ng
from ngraph import _ngraph
from ngraph.onnx.errors import ONNXError

try:
    import onnx
    from onnx import numpy_helper
except ImportError as e:  # pragma: no cover - the error names the extra to install
    raise ImportError("ngraph.onnx needs the onnx package: pip install 'ngraph[onnx]' "
                      "(or pip install onnx)") from e

__all__ = ["ImportedGraph", "import_onnx_graph", "import_onnx_model", "supported_ops",
           "load_model", "MIN_OPSET", "MAX_OPSET"]

MIN_OPSET = 7    # older models go through onnx's version converter first
MAX_OPSET = 28   # onnx 1.23's newest; its node tests cover 22-28
_MAX_ELEMENTS = 1 << 34  # a tensor claiming more elements than this is refused


# --------------------------------------------------------------------------- element types

_ONNX_DTYPES = {
    onnx.TensorProto.FLOAT: np.dtype(np.float32),
    onnx.TensorProto.DOUBLE: np.dtype(np.float64),
    onnx.TensorProto.FLOAT16: np.dtype(np.float16),
    onnx.TensorProto.INT8: np.dtype(np.int8),
    onnx.TensorProto.INT16: np.dtype(np.int16),
    onnx.TensorProto.INT32: np.dtype(np.int32),
    onnx.TensorProto.INT64: np.dtype(np.int64),
    onnx.TensorProto.UINT8: np.dtype(np.uint8),
    onnx.TensorProto.UINT16: np.dtype(np.uint16),
    onnx.TensorProto.UINT32: np.dtype(np.uint32),
    onnx.TensorProto.UINT64: np.dtype(np.uint64),
    onnx.TensorProto.BOOL: np.dtype(np.bool_),
}
try:
    import ml_dtypes

    _ONNX_DTYPES[onnx.TensorProto.BFLOAT16] = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - bf16 models then need ml_dtypes
    pass


def onnx_dtype(elem_type: int, where: str) -> np.dtype:
    """The NumPy dtype of an ONNX element type, or an ONNXError naming `where`."""
    try:
        return _ONNX_DTYPES[elem_type]
    except KeyError:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in \
            onnx.TensorProto.DataType.values() else str(elem_type)
        raise ONNXError(f"{where}: element type {name} is not supported by ngraph "
                        f"(supported: {', '.join(str(d) for d in _ONNX_DTYPES.values())})"
                        ) from None


def dtype_to_onnx(dtype: Any) -> int:
    """The ONNX element type of a NumPy dtype."""
    dtype = np.dtype(dtype)
    for k, v in _ONNX_DTYPES.items():
        if v == dtype:
            return k
    raise ONNXError(f"element type {dtype} has no ONNX equivalent")


# ------------------------------------------------------------------------------- loading


def load_model(model: Any) -> onnx.ModelProto:
    """A ModelProto from a ModelProto, a path (with its external data, which must lie in the
    model's folder) or the bytes of a model."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _parse(bytes(model), "the bytes given")
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ONNXError(f"cannot read the ONNX model {path!r}: {e.strerror}") from None
        proto = _parse(data, repr(path))
        _load_external_data(proto, os.path.dirname(os.path.abspath(path)))
        return proto
    raise ONNXError(f"import_onnx_model takes an onnx.ModelProto, a path or bytes, not a "
                    f"{type(model).__name__}")


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError and friends
        raise ONNXError(f"{what} is not a valid ONNX model (malformed or truncated protobuf: "
                        f"{e})") from None
    if not proto.HasField("graph"):
        raise ONNXError(f"{what} is not an ONNX model: it has no graph")
    return proto


def _all_tensors(graph: onnx.GraphProto):
    """Every TensorProto of a graph: initializers and Constant nodes' values, subgraphs too."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from _all_tensors(a.g)
            for g in a.graphs:
                yield from _all_tensors(g)


def _load_external_data(proto: onnx.ModelProto, folder: str) -> None:
    """Reads the external data of every tensor, refusing paths outside `folder` and ranges
    beyond the end of the file."""
    root = os.path.realpath(folder)
    for t in _all_tensors(proto.graph):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        where = f"initializer {t.name!r}: external data"
        location = info.get("location")
        if not location:
            raise ONNXError(f"{where} has no 'location'")
        if os.path.isabs(location):
            raise ONNXError(f"{where} location {location!r} is an absolute path: external "
                            "data must lie in the model's folder")
        path = os.path.realpath(os.path.join(root, location))
        if os.path.commonpath([root, path]) != root:
            raise ONNXError(f"{where} location {location!r} is outside the model's folder "
                            f"{folder!r}")
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise ONNXError(f"{where}: offset/length are not integers: {info}") from None
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                if offset < 0 or offset > size or (length is not None and
                                                   (length < 0 or offset + length > size)):
                    raise ONNXError(f"{where} claims bytes {offset}..{offset + (length or 0)} "
                                    f"of {location!r}, which holds {size} bytes")
                f.seek(offset)
                t.raw_data = f.read(size - offset if length is None else length)
        except OSError as e:
            raise ONNXError(f"{where}: cannot read {location!r}: {e.strerror}") from None
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]


def tensor_value(t: onnx.TensorProto, where: str) -> np.ndarray:
    """The array of a TensorProto, checking its claimed size against its data."""
    dtype = onnx_dtype(t.data_type, where)
    dims = _checked_shape(list(t.dims), where)
    count = int(np.prod(dims, dtype=object)) if dims else 1
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise ONNXError(f"{where}: its data is in an external file; pass the model's path "
                        "(not a ModelProto or bytes) so that ngraph can read it")
    if t.HasField("raw_data"):
        have = len(t.raw_data)
        want = count * dtype.itemsize
        if dtype == np.bool_:
            want = count
        if have != want:
            raise ONNXError(f"{where}: shape {dims} of {dtype} needs {want} bytes, raw_data "
                            f"holds {have}")
    else:
        fields = {"float_data": t.float_data, "int32_data": t.int32_data,
                  "int64_data": t.int64_data, "double_data": t.double_data,
                  "uint64_data": t.uint64_data}
        have = max(len(v) for v in fields.values())
        if dtype in (np.float16,) or dtype.name == "bfloat16":
            have = len(t.int32_data)
        if have != count and not (have == 0 and count == 0):
            raise ONNXError(f"{where}: shape {dims} needs {count} values, the tensor holds "
                            f"{have}")
    try:
        value = numpy_helper.to_array(t)
    except Exception as e:
        raise ONNXError(f"{where}: cannot read the tensor: {e}") from None
    return np.asarray(value).astype(dtype, copy=False).reshape(dims)


# ---------------------------------------------------------------------------- the result


@dataclass
class ImportedGraph:
    """An imported ONNX graph as ngraph nodes.

    ``inputs``: ONNX input name → Parameter node (in ONNX order; inputs bound to nodes of
    yours with ``inputs=`` are left out). ``outputs``: ONNX output name → node.
    ``variables``: initializer name → Variable (``trainable``). ``updates``: the
    (variable, new value) pairs a training step applies, such as batch normalization's
    running statistics; pass them to ``runtime.computation(..., updates=...)`` with the
    optimizer's."""

    inputs: OrderedDict = field(default_factory=OrderedDict)
    outputs: OrderedDict = field(default_factory=OrderedDict)
    variables: OrderedDict = field(default_factory=OrderedDict)
    updates: list = field(default_factory=list)
    buffers: set = field(default_factory=set)  # names of state variables (running stats)
    opset: int = 0
    name: str = ""

    @property
    def parameters(self) -> list:
        """The variables to train: all but the state (batch normalization's running
        statistics), in initializer order."""
        return [v for k, v in self.variables.items() if k not in self.buffers]

    def function(self) -> ng.Function:
        """The graph as a Function: the inputs' parameters, the outputs' results, and the
        updates applied in every call."""
        results = list(self.outputs.values())
        params = list(self.inputs.values())
        if self.updates:
            return _ngraph.make_function(results, params, list(self.updates), [],
                                         self.name)
        return ng.Function(results, params, self.name)


# ----------------------------------------------------------------------------- importing


def supported_ops() -> dict[str, tuple[int, int]]:
    """Each ONNX op (domain ai.onnx) the importer converts → (first, last) opset it
    handles."""
    from ngraph.onnx import converters

    return {op: (max(MIN_OPSET, c.since), min(MAX_OPSET, c.until)) for op, c in
            sorted(converters.REGISTRY.items())}


Trainable = Any  # bool, a collection of initializer names, or a predicate(name, array)


def import_onnx_model(model: Any, *, trainable: Trainable = False,
                      shapes: dict[str, Any] | None = None,
                      training: bool | None = None) -> ng.Function:
    """An ONNX model (a ``ModelProto``, a path or the bytes of one) as an ``ng.Function``:
    its parameters are the graph's inputs (names kept), its results the graph's outputs.
    ``runtime.computation(function)`` compiles it.

    trainable: which float initializers become ``ng.variable``s (named after them; the
    others are constants): ``True`` for those that look like weights (at least one axis,
    finite values: a -inf causal mask or a scalar divisor stays a constant), a collection of
    initializer names (e.g. ``{n for n, _ in torch_model.named_parameters()}``, the names
    PyTorch's TorchScript exporter keeps), or a predicate ``f(name, array) -> bool``.
    Batch normalization's running statistics become variables whenever ``trainable`` is not
    False (its training mode updates them).

    shapes: fixes symbolic dimensions, by input name (``{"x": (8, 3, 224, 224)}``) or by
    dimension name (``{"batch": 8}``). training: ``None`` runs Dropout and
    BatchNormalization as the model says; ``True``/``False`` forces training or inference
    behaviour."""
    return import_onnx_graph(model, trainable=trainable, shapes=shapes,
                             training=training).function()


def import_onnx_graph(model: Any, *, trainable: Trainable = False,
                      shapes: dict[str, Any] | None = None,
                      training: bool | None = None,
                      inputs: dict[str, ng.Node] | None = None,
                      variables: dict[str, Any] | None = None,
                      constants: dict[str, Any] | None = None) -> ImportedGraph:
    """The ONNX model's graph as ngraph nodes (an :class:`ImportedGraph`), to build on: a loss
    on its outputs, gradients of its variables.

    inputs: ONNX input name → a node of yours to use instead of a new Parameter.
    variables: initializer name → a Variable to use (share the weights of another import of
    the same model, e.g. one in training and one in inference mode; whatever
    ``trainable`` says). constants: ONNX input
    name → its value, fixed at import (an input that gives a shape, axes or a count must be
    known at import: a model that takes one as an input is imported for one value of it).
    Other arguments as :func:`import_onnx_model`."""
    proto = load_model(model)
    return _Importer(proto, trainable=trainable, shapes=shapes or {}, training=training,
                     bound=inputs or {}, shared=variables or {},
                     constants=constants or {}).run()


class StaticInputNeeded(ONNXError):
    """A graph input used where ngraph needs a value known at import (a shape, axes, a
    count): ``constants={name: value}`` fixes it. ``.input`` is its name."""

    def __init__(self, message: str, input_name: str) -> None:
        super().__init__(message)
        self.input = input_name


@dataclass
class _Initializer:
    name: str
    value: np.ndarray


class _Importer:
    def __init__(self, proto: onnx.ModelProto, *, trainable: Trainable, shapes: dict,
                 training: bool | None, bound: dict, shared: dict, constants: dict) -> None:
        self.proto = proto
        self.trainable = bool(trainable) if isinstance(trainable, bool) else True
        if isinstance(trainable, bool):
            rule = _looks_like_weight if trainable else (lambda name, value: False)
        elif callable(trainable):
            rule = trainable
        else:
            try:
                names = {str(n) for n in trainable}
            except TypeError:
                raise ONNXError(f"trainable= is a {type(trainable).__name__}: give True/False, "
                                "initializer names or a predicate(name, array)") from None
            self.trainable_names = names
            rule = lambda name, value: name in names  # noqa: E731
        self._weight_rule = rule
        self._weights: dict[str, bool] = {}  # initializer name → the rule's answer, once
        self.shapes = dict(shapes)
        self.training = training
        self.bound = dict(bound)
        self.shared = dict(shared)
        self.constants = dict(constants)
        self.result = ImportedGraph(name=proto.graph.name or "onnx_model")
        self.values: dict[str, Any] = {}          # ONNX name → ng.Node | np.ndarray | list
        self.initializers: dict[str, _Initializer] = {}

    # -- opset
    def _opset(self) -> int:
        versions = {}
        for o in self.proto.opset_import:
            domain = o.domain or "ai.onnx"
            if domain in versions and versions[domain] != o.version:
                raise ONNXError(f"opset_import names domain {domain!r} twice (versions "
                                f"{versions[domain]} and {o.version})")
            versions[domain] = o.version
        if "ai.onnx" not in versions:
            if self.proto.ir_version and self.proto.ir_version < 3:
                return 1
            raise ONNXError("the model imports no opset of domain 'ai.onnx' (opset_import: "
                            f"{dict(versions)})")
        self.domains = versions
        return versions["ai.onnx"]

    def _upgrade(self, opset: int) -> int:
        if opset > MAX_OPSET:
            raise ONNXError(f"the model uses opset {opset} of ai.onnx; ngraph imports opsets "
                            f"{MIN_OPSET} to {MAX_OPSET}")
        if opset >= MIN_OPSET:
            return opset
        from onnx import version_converter

        try:
            self.proto = version_converter.convert_version(self.proto, MIN_OPSET)
        except Exception as e:
            raise ONNXError(f"the model uses opset {opset}; onnx's version converter could "
                            f"not bring it to opset {MIN_OPSET}: {e}") from None
        return self._opset()

    def run(self) -> ImportedGraph:
        opset = self._upgrade(self._opset())
        self.opset = self.result.opset = opset
        graph = self.proto.graph
        for what, given in (("inputs", self.bound), ("constants", self.constants)):
            for name in given:
                if name not in {i.name for i in graph.input}:
                    raise ONNXError(f"{what}=: the graph has no input {name!r} (inputs: "
                                    f"{[i.name for i in graph.input]})")
        for key, value in self.shapes.items():
            values = value if isinstance(value, (list, tuple)) else [value]
            if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0
                       for v in values):
                raise ONNXError(f"shapes[{key!r}] = {value!r}: sizes are non-negative "
                                "integers")
        initializer_names = {t.name for t in graph.initializer}
        for name in self.shared:
            if name not in initializer_names:
                raise ONNXError(f"variables=: the graph has no initializer {name!r}")
        if hasattr(self, "trainable_names"):
            missing = self.trainable_names - initializer_names
            if missing:
                raise ONNXError(f"trainable=: the graph has no initializers {sorted(missing)}")
        dim_names = {d.dim_param for i in graph.input
                     for d in i.type.tensor_type.shape.dim if d.dim_param}
        unknown = set(self.shapes) - dim_names - {i.name for i in graph.input}
        if unknown:
            raise ONNXError(f"shapes=: {sorted(unknown)} name no input and no symbolic "
                            "dimension of the graph")
        self._read_initializers(graph)
        self._read_inputs(graph)
        from ngraph.onnx import converters

        self.producer = {out: node for node in graph.node for out in node.output if out}
        for node in _topological(graph):
            converters.convert_node(self, node)
        for out in graph.output:
            if not out.name:
                raise ONNXError("a graph output has an empty name")
            if out.name not in self.values:
                raise ONNXError(f"graph output {out.name!r} is not computed by any node, input "
                                "or initializer")
            node = converters.as_output(self, out.name)
            if node.get_type_name() not in ("Parameter", "Variable"):
                node.name = out.name  # the result's node carries the ONNX output's name
            self.result.outputs[out.name] = node
        return self.result

    def _read_initializers(self, graph: onnx.GraphProto) -> None:
        for i, t in enumerate(graph.initializer):
            if not t.name:
                raise ONNXError(f"initializer {i} has no name")
            if t.name in self.initializers:
                raise ONNXError(f"two initializers are named {t.name!r}")
            self.initializers[t.name] = _Initializer(
                t.name, tensor_value(t, f"initializer {t.name!r}"))
        for t in graph.sparse_initializer:
            raise ONNXError(f"sparse initializer {t.values.name!r}: sparse tensors are not "
                            "supported")

    def _read_inputs(self, graph: onnx.GraphProto) -> None:
        for vi in graph.input:
            if not vi.name:
                raise ONNXError("a graph input has an empty name")
            if vi.name in self.values:
                raise ONNXError(f"two graph inputs are named {vi.name!r}")
            if vi.name in self.bound:
                node = self.bound[vi.name]
                if not isinstance(node, ng.Node):
                    raise ONNXError(f"inputs[{vi.name!r}] is a {type(node).__name__}, not a "
                                    "Node")
                self.values[vi.name] = node
                continue
            if vi.name in self.constants:
                shape, dtype = self._input_type(vi, need_shape=False)
                value = np.asarray(self.constants[vi.name])
                if value.dtype != dtype:
                    raise ONNXError(f"constants[{vi.name!r}] is {value.dtype}; the input is "
                                    f"{dtype}")
                self.values[vi.name] = value
                continue
            if vi.name in self.initializers:
                # IR < 4: initializers are listed as inputs too; they are the defaults.
                continue
            shape, dtype = self._input_type(vi)
            p = ng.parameter(shape, dtype, name=vi.name)
            self.values[vi.name] = p
            self.result.inputs[vi.name] = p

    def _input_type(self, vi: onnx.ValueInfoProto,
                    need_shape: bool = True) -> tuple[list[int], np.dtype]:
        where = f"graph input {vi.name!r}"
        t = vi.type
        if t.WhichOneof("value") != "tensor_type":
            raise ONNXError(f"{where} is a {t.WhichOneof('value') or 'value of no type'}: "
                            "ngraph imports tensor inputs only")
        dtype = onnx_dtype(t.tensor_type.elem_type, where)
        if not need_shape:
            return [], dtype
        given = self.shapes.get(vi.name)
        if given is not None:
            try:
                shape = [int(d) for d in given]
            except (TypeError, ValueError):
                raise ONNXError(f"shapes[{vi.name!r}] = {given!r} is not a list of "
                                "integers") from None
            if t.tensor_type.HasField("shape") and len(t.tensor_type.shape.dim) != len(shape):
                raise ONNXError(f"shapes[{vi.name!r}] = {shape} has rank {len(shape)}; the "
                                f"input has rank {len(t.tensor_type.shape.dim)}")
            return _checked_shape(shape, where), dtype
        if not t.tensor_type.HasField("shape"):
            raise ONNXError(f"{where} has no shape (its rank is unknown): give it with "
                            f"shapes={{{vi.name!r}: (...)}}")
        shape = []
        for axis, d in enumerate(t.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                if d.dim_value < 0:
                    raise ONNXError(f"{where}: dimension {axis} is {d.dim_value}")
                shape.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param in self.shapes:
                shape.append(int(self.shapes[d.dim_param]))
            else:
                what = f"symbolic dimension {d.dim_param!r}" if d.dim_param else \
                    "a dimension of unknown size"
                hint = f"shapes={{{d.dim_param!r}: n}} or " if d.dim_param else ""
                raise ONNXError(f"{where}: dimension {axis} is {what}; ngraph compiles static "
                                f"shapes: fix it with {hint}shapes={{{vi.name!r}: (...)}}")
        return _checked_shape(shape, where), dtype

    # -- values
    def is_weight(self, name: str, value: np.ndarray) -> bool:
        """Whether `trainable` makes the initializer `name` a variable (asked once per name:
        the default rule reads the whole array)."""
        if name not in self._weights:
            try:
                self._weights[name] = bool(self._weight_rule(name, value))
            except Exception as e:  # a user's predicate
                raise ONNXError(f"trainable= raised {type(e).__name__} for initializer "
                                f"{name!r}: {e}") from e
        return self._weights[name]

    def input_source(self, name: str) -> str | None:
        """The graph input that the value `name` is computed from (through any ops but
        Shape and Size, which read no values), or None."""
        seen, stack = set(), [name]
        while stack:
            n = stack.pop()
            if n in seen or not n:
                continue
            seen.add(n)
            if n in self.result.inputs:
                return n
            node = self.producer.get(n)
            if node is not None and node.op_type not in ("Shape", "Size"):
                stack.extend(node.input)
        return None

    def initializer_value(self, name: str, static: bool, state: bool = False) -> Any:
        """An initializer's value: a Variable when it is consumed as data and is a weight
        (``trainable``), shared (``variables=``) or state (``state``: batch normalization's
        running statistics, when trainable), else its array."""
        init = self.initializers[name]
        if name in self.values:
            return self.values[name]
        if static:
            return init.value
        var = self.shared.get(name)
        if var is None and init.value.dtype.kind == "f" and (
                self.is_weight(name, init.value) or (state and self.trainable)):
            var = ng.variable(init.value, name=name)
        if var is None:
            return init.value
        if not isinstance(var, ng.Node) or tuple(var.shape) != init.value.shape or \
                var.dtype != init.value.dtype:
            raise ONNXError(f"variables[{name!r}] is {var!r}; the initializer is "
                            f"{init.value.dtype} {list(init.value.shape)}")
        self.values[name] = var
        self.result.variables[name] = var
        return var


def _looks_like_weight(name: str, value: np.ndarray) -> bool:
    """trainable=True's rule: float initializers with an axis and finite values (a -inf
    mask, a scalar divisor or a NaN are constants an exporter wrote)."""
    return value.dtype.kind == "f" and value.ndim >= 1 and bool(np.isfinite(value).all())


def _checked_shape(shape: list[int], where: str) -> list[int]:
    if any(d < 0 for d in shape):
        raise ONNXError(f"{where}: shape {shape} has a negative size")
    count = int(np.prod(shape, dtype=object)) if shape else 1
    if count > _MAX_ELEMENTS:
        raise ONNXError(f"{where}: shape {shape} has {count} elements, more than ngraph "
                        "accepts")
    return shape


def _topological(graph: onnx.GraphProto) -> list:
    """The graph's nodes in an order where each comes after the nodes it reads; raises for
    cycles, values computed twice and names no node, input or initializer gives."""
    known = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    producer: dict[str, int] = {}
    for k, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            if out in producer or out in known:
                raise ONNXError(f"node {_describe(node)}: its output {out!r} is already "
                                "computed by another node or given as an input/initializer")
            producer[out] = k
    indegree = [0] * len(graph.node)
    readers: dict[int, list[int]] = {}
    for k, node in enumerate(graph.node):
        for name in set(node.input):
            if not name:
                continue
            if name in producer:
                indegree[k] += 1
                readers.setdefault(producer[name], []).append(k)
            elif name not in known:
                raise ONNXError(f"node {_describe(node)} reads {name!r}, which no node, graph "
                                "input or initializer gives")
    ready = [k for k in range(len(graph.node)) if indegree[k] == 0]
    order = []
    while ready:
        k = ready.pop(0)
        order.append(graph.node[k])
        for r in readers.get(k, []):
            indegree[r] -= 1
            if indegree[r] == 0:
                ready.append(r)
    if len(order) != len(graph.node):
        stuck = [_describe(graph.node[k]) for k in range(len(graph.node)) if indegree[k]]
        raise ONNXError(f"the graph has a cycle through the nodes {', '.join(stuck[:5])}")
    return order


def _describe(node: onnx.NodeProto) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else \
        f"{node.op_type} (unnamed, output {list(node.output)[:1]})"
