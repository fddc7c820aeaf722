"""One class per op (nGraph's ``ngraph.impl.op``), constructed as nGraph's were::

    A = Parameter(Type.f32, Shape([2, 2]))
    y = Convolution(data, filters, Strides([1, 1]), Strides([1, 1]),
                    CoordinateDiff([0, 0]), CoordinateDiff([0, 0]))

Every op of the core has a class here, generated from the core's op list: a call builds the
node with the core's generic by-name construction (the attribute visitor), so a new op needs no
code here. By default the positional arguments are the op's inputs and keywords its
attributes (by their visitor names); ``SIGNATURES`` gives nGraph's positional order for the
ops whose constructors took attributes positionally. ``isinstance(node, Add)`` checks the op.
nGraph's names for the logical ops (``And``, ``Or``, ``Not``) are aliases of ``LogicalAnd``,
``LogicalOr`` and ``LogicalNot``; its ``BatchMatMul(a, b)`` and ``BatchMatMulTranspose(a, b,
transpose_a, transpose_b)`` of 3-D arguments are ``MatMul`` (batch axes lead).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ngraph import _ngraph
from ngraph._ngraph import Node
from ngraph.exceptions import NgraphTypeError, UserInputError
from ngraph.utils import as_node, make_constant_node

#: nGraph's positional arguments: an int is the core op's input of that index, a str an
#: attribute; arguments past the given ones keep the core's defaults.
SIGNATURES: dict[str, list[int | str]] = {
    "Parameter": ["element_type", "shape"],
    "Convert": [0, "destination_type"],
    "Broadcast": [0, "shape", "broadcast_axes"],
    "Reshape": [0, "input_order", "output_shape"],
    "Slice": [0, "lower_bounds", "upper_bounds", "strides"],
    "ReplaceSlice": [0, 1, "lower_bounds", "upper_bounds", "strides"],
    "Gather": [0, 1, "axis"],
    "Split": [0, "axis", "splits"],
    "Tile": [0, "repeats"],
    "Concat": [0, "concatenation_axis"],  # input 0 is the list of inputs
    "Pad": [0, 1, "padding_below", "padding_above", "padding_interior"],
    "Reverse": [0, "reversed_axes"],
    "Sum": [0, "reduction_axes"],
    "Product": [0, "reduction_axes"],
    "Max": [0, "reduction_axes"],
    "Min": [0, "reduction_axes"],
    "ArgMax": [0, "axis", "index_element_type"],
    "ArgMin": [0, "axis", "index_element_type"],
    "TopK": [0, "axis", "index_element_type", "k", "compute_max"],
    "Softmax": [0, "axes"],
    "OneHot": [0, "shape", "one_hot_axis"],
    "Dot": [0, 1, "reduction_axes_count"],
    "MatMul": [0, 1, "transpose_a", "transpose_b"],
    "BatchMatMul": [0, 1],
    "BatchMatMulTranspose": [0, 1, "transpose_a", "transpose_b"],
    "Convolution": [0, 1, "strides", "dilations", "padding_below", "padding_above",
                    "data_dilations"],
    "ConvolutionBackpropData": ["data_batch_shape", 0, 1, "strides", "dilations",
                                "padding_below", "padding_above", "data_dilations"],
    "ConvolutionBackpropFilters": [0, "filters_shape", 1, "strides", "dilations",
                                   "padding_below", "padding_above", "data_dilations"],
    "MaxPool": [0, "window_shape", "window_movement_strides", "padding_below",
                "padding_above"],
    "AvgPool": [0, "window_shape", "window_movement_strides", "padding_below",
                "padding_above", "include_padding_in_avg_computation"],
    "LRN": [0, "alpha", "beta", "bias", "size"],
    # nGraph: (input, gamma, beta, epsilon); the core's inputs are (gamma, beta, input).
    "BatchNormTraining": [2, 0, 1, "epsilon"],
    "BatchNormInference": [2, 0, 1, 3, 4, "epsilon"],
}

ALIASES = {"And": "LogicalAnd", "Or": "LogicalOr", "Not": "LogicalNot",
           # nGraph's batched products of 3-D arguments are MatMul over the leading axis.
           "BatchMatMul": "MatMul", "BatchMatMulTranspose": "MatMul"}


def _arguments(name: str, args: tuple, kwargs: dict) -> tuple[list[Node], dict[str, Any]]:
    """The inputs and attributes of a call of op class `name`."""
    signature = SIGNATURES.get(name)
    if signature is None:
        return [as_node(a) for a in args], dict(kwargs)
    if len(args) > len(signature):
        raise NgraphTypeError(f"[{name}] takes at most {len(signature)} positional arguments "
                              f"({', '.join(map(str, signature))}), got {len(args)}")
    inputs: dict[int, Any] = {}
    attributes = dict(kwargs)
    for spec, value in zip(signature, args):
        if isinstance(spec, int):
            inputs[spec] = value
        else:
            attributes[spec] = value
    if name == "Concat":
        return [as_node(a) for a in inputs.get(0, [])], attributes
    missing = [i for i in range(len(inputs)) if i not in inputs]
    if missing:
        raise NgraphTypeError(f"[{name}] is missing inputs: needs {len(signature)} arguments "
                              f"({', '.join(map(str, signature))})")
    interior = attributes.pop("padding_interior", None)
    if interior is not None and any(int(v) for v in interior):
        raise UserInputError(f"[{name}] interior padding is not supported, got {list(interior)}")
    return [as_node(inputs[i]) for i in range(len(inputs))], attributes


class _OpClass(type):
    """The type of the op classes: calling one builds a node; isinstance checks the op."""

    op_type: str

    def __call__(cls, *args: Any, **kwargs: Any) -> Node:
        inputs, attributes = _arguments(cls.__name__, args, kwargs)
        return _ngraph.make_node(cls.op_type, inputs, attributes, "")

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Node) and obj.get_type_name() == cls.op_type


class _ConstantClass(_OpClass):
    def __call__(cls, element_type: Any, shape: Any, values: Any) -> Node:
        """nGraph's Constant(element_type, shape, values): a flat list of values (or one to
        fill the shape) converted to the element type."""
        flat = np.asarray(values).reshape(-1)
        size = int(np.prod(list(shape), dtype=np.int64))
        if flat.size not in (1, size):
            raise UserInputError(f"[Constant] got {flat.size} values for shape {list(shape)} "
                                 f"({size} elements)")
        data = np.broadcast_to(flat, (size,)) if flat.size == 1 else flat
        return make_constant_node(np.asarray(data).reshape(list(shape)), element_type)


class _GetOutputElementClass(_OpClass):
    def __call__(cls, node: Node, index: int) -> Node:
        return _ngraph.get_output_element(node, index, "")


_SPECIAL = {"Constant": _ConstantClass, "GetOutputElement": _GetOutputElementClass}


def _make_class(name: str, op_type: str) -> type:
    meta = _SPECIAL.get(op_type, _OpClass)
    signature = SIGNATURES.get(name)
    doc = (f"The {op_type} op: {name}({', '.join(map(str, signature))})" if signature else
           f"The {op_type} op: {name}(*inputs, **attributes)")
    return meta(name, (), {"op_type": op_type, "__doc__": doc, "__module__": __name__})


OP_CLASSES = {name: _make_class(name, name) for name in _ngraph.op_names()}
OP_CLASSES.update({alias: _make_class(alias, core) for alias, core in ALIASES.items()})
globals().update(OP_CLASSES)

__all__ = sorted(OP_CLASSES)  # noqa: PLE0605
