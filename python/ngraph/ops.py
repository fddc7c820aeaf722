"""Op functions, with the names and arguments of nGraph's Python API.

Every function takes NumPy arrays and Python scalars wherever it takes a node (they become
constants) and an optional ``name``. Binary elementwise ops broadcast NumPy-style.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ngraph import _ngraph
from ngraph._ngraph import Node
from ngraph.exceptions import NgraphTypeError, UserInputError
from ngraph.utils import (
    NodeInput,
    as_node,
    as_nodes,
    axis_list,
    element_type_arg,
    int_list,
    make_constant_node,
    shape_of,
    to_dtype,
)


def _make(op: str, inputs: Sequence[Node], name: str | None = None, **attributes: Any) -> Node:
    return _ngraph.make_node(op, list(inputs), attributes, name or "")


# ----------------------------------------------------------------------------- leaves


def parameter(shape: Sequence[int], dtype: Any = np.float32, name: str | None = None) -> Node:
    """A graph input of `shape` and `dtype` (float32 by default)."""
    return _make(
        "Parameter",
        [],
        name,
        element_type=element_type_arg(dtype, "[Parameter] dtype"),
        shape=shape_of(shape, "[Parameter] shape"),
    )


def constant(value: Any, dtype: Any = None, name: str | None = None) -> Node:
    """A constant node holding `value` (an array or scalar), converted to `dtype` if given."""
    return make_constant_node(value, dtype, name)


# ------------------------------------------------------------------------ elementwise


def _unary(op: str):
    def fn(node: NodeInput, name: str | None = None) -> Node:
        return _make(op, [as_node(node)], name)

    fn.__name__ = op.lower()
    fn.__doc__ = f"Elementwise {op}."
    return fn


negative = _unary("Negative")
absolute = _unary("Abs")
exp = _unary("Exp")
log = _unary("Log")
sqrt = _unary("Sqrt")
sign = _unary("Sign")
floor = _unary("Floor")
ceiling = _unary("Ceiling")
sin = _unary("Sin")
cos = _unary("Cos")
tan = _unary("Tan")
asin = _unary("Asin")
acos = _unary("Acos")
atan = _unary("Atan")
sinh = _unary("Sinh")
cosh = _unary("Cosh")
tanh = _unary("Tanh")
relu = _unary("Relu")
sigmoid = _unary("Sigmoid")
erf = _unary("Erf")
gelu = _unary("Gelu")
logical_not = _unary("LogicalNot")
stop_gradient = _unary("StopGradient")
stop_gradient.__doc__ = (
    "The value of `node`, treated as a constant by autodiff (its gradient is 0 by definition)."
)
absolute.__name__, ceiling.__name__, logical_not.__name__ = "absolute", "ceiling", "logical_not"
stop_gradient.__name__ = "stop_gradient"


def _binary(op: str, doc: str):
    def fn(left_node: NodeInput, right_node: NodeInput, name: str | None = None) -> Node:
        left, right = as_nodes(left_node, right_node, op=op)
        return _make(op, [left, right], name, auto_broadcast="numpy")

    fn.__doc__ = doc + " Inputs broadcast NumPy-style."
    return fn


add = _binary("Add", "Elementwise left + right.")
subtract = _binary("Subtract", "Elementwise left - right.")
multiply = _binary("Multiply", "Elementwise left * right.")
divide = _binary(
    "Divide", "Elementwise left / right; integers divide like Python's // (floor division)."
)
power = _binary("Power", "Elementwise left ** right.")
maximum = _binary("Maximum", "Elementwise maximum.")
minimum = _binary("Minimum", "Elementwise minimum.")
equal = _binary("Equal", "Elementwise left == right (boolean).")
not_equal = _binary("NotEqual", "Elementwise left != right (boolean).")
greater = _binary("Greater", "Elementwise left > right (boolean).")
greater_eq = _binary("GreaterEq", "Elementwise left >= right (boolean).")
less = _binary("Less", "Elementwise left < right (boolean).")
less_eq = _binary("LessEq", "Elementwise left <= right (boolean).")
logical_and = _binary("LogicalAnd", "Elementwise logical and of booleans.")
logical_or = _binary("LogicalOr", "Elementwise logical or of booleans.")
for _fn, _name in [
    (add, "add"), (subtract, "subtract"), (multiply, "multiply"), (divide, "divide"),
    (power, "power"), (maximum, "maximum"), (minimum, "minimum"), (equal, "equal"),
    (not_equal, "not_equal"), (greater, "greater"), (greater_eq, "greater_eq"),
    (less, "less"), (less_eq, "less_eq"), (logical_and, "logical_and"),
    (logical_or, "logical_or"),
]:  # fmt: skip
    _fn.__name__ = _name


def select(
    selection_node: NodeInput,
    input_node1: NodeInput,
    input_node2: NodeInput,
    name: str | None = None,
) -> Node:
    """Elementwise `input_node1` where `selection_node` (boolean) is true, else
    `input_node2`. All three broadcast NumPy-style."""
    cond = as_node(selection_node, np.bool_ if not isinstance(selection_node, Node) else None)
    a, b = as_nodes(input_node1, input_node2, op="Select")
    return _make("Select", [cond, a, b], name, auto_broadcast="numpy")


def convert(node: NodeInput, new_type: Any, name: str | None = None) -> Node:
    """Elementwise conversion to `new_type` (a NumPy dtype or type, or its name)."""
    return _make("Convert", [as_node(node)], name,
                 destination_type=element_type_arg(new_type, "[Convert] new_type"))


# ----------------------------------------------------------------------- contractions


def dot(
    left_node: NodeInput,
    right_node: NodeInput,
    reduction_axes_count: int | None = None,
    name: str | None = None,
) -> Node:
    """nGraph's generalised dot: sums the last `reduction_axes_count` axes of the left
    argument against the first ones of the right (default: 0 if either is a scalar, else 1)."""
    left, right = as_nodes(left_node, right_node, op="Dot")
    count = -1 if reduction_axes_count is None else int(reduction_axes_count)
    if count < 0 and reduction_axes_count is not None:
        raise UserInputError(f"[Dot] reduction_axes_count must be >= 0, got {reduction_axes_count}")
    return _make("Dot", [left, right], name, reduction_axes_count=count)


def matmul(
    data_a: NodeInput,
    data_b: NodeInput,
    transpose_a: bool = False,
    transpose_b: bool = False,
    name: str | None = None,
) -> Node:
    """NumPy matmul (batch axes broadcast; 1-D arguments promoted), with optional transposes
    of the last two axes."""
    a, b = as_nodes(data_a, data_b, op="MatMul")
    return _make("MatMul", [a, b], name, transpose_a=bool(transpose_a),
                 transpose_b=bool(transpose_b))


# ----------------------------------------------------------------------------- convolution


def _conv_window(op: str, spatial: int, strides, dilations, below, above, data_dilations,
                 groups) -> dict:
    """The window attributes of the three convolution ops, defaults filled in for `spatial`
    axes (1s, 0s) and checked in Python so errors name nGraph's argument names."""

    def ints(value, default, argname):
        values = [default] * spatial if value is None else [int(v) for v in value]
        if len(values) != spatial:
            raise UserInputError(f"[{op}] {argname} has {len(values)} values; the data has "
                             f"{spatial} spatial axes")
        return values

    return {
        "strides": ints(strides, 1, "strides"),
        "dilations": ints(dilations, 1, "dilation strides"),
        "padding_below": ints(below, 0, "padding_below"),
        "padding_above": ints(above, 0, "padding_above"),
        "data_dilations": ints(data_dilations, 1, "data dilation strides"),
        "groups": int(groups),
    }


def convolution(
    data_batch: NodeInput,
    filter_weights: NodeInput,
    filter_strides: Sequence[int] | None = None,
    filter_dilation_strides: Sequence[int] | None = None,
    padding_below: Sequence[int] | None = None,
    padding_above: Sequence[int] | None = None,
    data_dilation_strides: Sequence[int] | None = None,
    name: str | None = None,
    groups: int = 1,
) -> Node:
    """Batched convolution: data [N, C_in, spatial...] (NCHW), filters
    [C_out, C_in / groups, spatial...] (OIHW), 1 to 3 (or more) spatial axes. Along each axis
    the data is dilated by `data_dilation_strides`, padded by `padding_below`/`padding_above`
    (which may be negative), and the filter, dilated by `filter_dilation_strides`, moves by
    `filter_strides`. `groups` (ngraph's addition) splits the channels into independent
    convolutions; groups = C_in is a depthwise convolution."""
    data, filters = as_nodes(data_batch, filter_weights, op="Convolution")
    spatial = builtins.max(len(data.shape) - 2, 0)
    window = _conv_window("Convolution", spatial, filter_strides, filter_dilation_strides,
                          padding_below, padding_above, data_dilation_strides, groups)
    return _make("Convolution", [data, filters], name, **window)


def convolution_backprop_data(
    data_batch_shape: Sequence[int],
    filters: NodeInput,
    output_delta: NodeInput,
    window_movement_strides_forward: Sequence[int] | None = None,
    window_dilation_strides_forward: Sequence[int] | None = None,
    padding_below_forward: Sequence[int] | None = None,
    padding_above_forward: Sequence[int] | None = None,
    data_dilation_strides_forward: Sequence[int] | None = None,
    name: str | None = None,
    groups: int = 1,
) -> Node:
    """The gradient of a convolution with respect to its data batch (of shape
    `data_batch_shape`), given its filters and the gradient of its output."""
    w, delta = as_nodes(filters, output_delta, op="ConvolutionBackpropData")
    shape = [int(d) for d in data_batch_shape]
    window = _conv_window("ConvolutionBackpropData", builtins.max(len(shape) - 2, 0),
                          window_movement_strides_forward, window_dilation_strides_forward,
                          padding_below_forward, padding_above_forward,
                          data_dilation_strides_forward, groups)
    return _make("ConvolutionBackpropData", [w, delta], name, data_batch_shape=shape, **window)


def convolution_backprop_filters(
    data_batch: NodeInput,
    filters_shape: Sequence[int],
    output_delta: NodeInput,
    window_movement_strides_forward: Sequence[int] | None = None,
    window_dilation_strides_forward: Sequence[int] | None = None,
    padding_below_forward: Sequence[int] | None = None,
    padding_above_forward: Sequence[int] | None = None,
    data_dilation_strides_forward: Sequence[int] | None = None,
    name: str | None = None,
    groups: int = 1,
) -> Node:
    """The gradient of a convolution with respect to its filters (of shape `filters_shape`),
    given its data batch and the gradient of its output."""
    data, delta = as_nodes(data_batch, output_delta, op="ConvolutionBackpropFilters")
    window = _conv_window("ConvolutionBackpropFilters", builtins.max(len(data.shape) - 2, 0),
                          window_movement_strides_forward, window_dilation_strides_forward,
                          padding_below_forward, padding_above_forward,
                          data_dilation_strides_forward, groups)
    return _make("ConvolutionBackpropFilters", [data, delta], name,
                 filters_shape=[int(d) for d in filters_shape], **window)


# ------------------------------------------------------------------------ data movement


def get_broadcast_axes(
    output_shape: Sequence[int], input_shape: Sequence[int], axis: int | None = None
) -> set[int]:
    """The axes of `output_shape` that broadcasting `input_shape` adds: all but the
    len(input_shape) axes starting at `axis` (default: the trailing ones)."""
    begin = len(output_shape) - len(input_shape) if axis is None else int(axis)
    return set(range(len(output_shape))) - set(range(begin, begin + len(input_shape)))


def broadcast(
    node: NodeInput,
    new_shape: Sequence[int],
    broadcast_axes: Iterable[int] | int | None = None,
    name: str | None = None,
) -> Node:
    """Broadcasts to `new_shape`. `broadcast_axes` lists the axes of `new_shape` that are new
    (removing them from `new_shape` gives the input's shape). An int is taken as the axis at
    which the input's axes start (nGraph's older ``axis`` argument); None means NumPy's
    right-aligned placement (size-1 axes of the input are stretched too)."""
    node = as_node(node)
    if broadcast_axes is None or isinstance(broadcast_axes, (int, np.integer)):
        return broadcast_to(node, new_shape, broadcast_axes, name)
    new_shape = shape_of(new_shape, "[Broadcast] new_shape")
    axes = int_list(broadcast_axes, "[Broadcast] broadcast_axes")
    return _make("Broadcast", [node], name, shape=new_shape, broadcast_axes=axes)


def broadcast_to(
    node: NodeInput, new_shape: Sequence[int], axis: int | None = None, name: str | None = None
) -> Node:
    """Broadcasts to `new_shape`, the input's axes placed from `axis` (default: right-aligned,
    as NumPy). Input axes of size 1 stretch to the size in `new_shape`."""
    node = as_node(node)
    new_shape = shape_of(new_shape, "[Broadcast] new_shape")
    in_shape = list(node.shape)
    begin = len(new_shape) - len(in_shape) if axis is None else int(axis)
    if begin < 0 or begin + len(in_shape) > len(new_shape):
        raise UserInputError(
            f"[Broadcast] cannot place shape {in_shape} in {new_shape} at axis {begin}"
        )
    # Size-1 axes that must stretch are dropped first, then broadcast like new axes.
    keep = [
        i for i, d in enumerate(in_shape) if not (d == 1 and new_shape[begin + i] != 1)
    ]
    if len(keep) != len(in_shape):
        node = reshape(node, [in_shape[i] for i in keep])
    axes = set(range(len(new_shape))) - {begin + i for i in keep}
    return _make("Broadcast", [node], name, shape=new_shape, broadcast_axes=sorted(axes))


def reshape(
    node: NodeInput,
    output_shape: Sequence[int],
    input_order: Sequence[int] | None = None,
    name: str | None = None,
) -> Node:
    """Reshapes to `output_shape` after permuting the input's axes by `input_order`
    (default: identity)."""
    node = as_node(node)
    if input_order is None:
        input_order = list(range(len(node.shape)))
    return _make(
        "Reshape",
        [node],
        name,
        input_order=int_list(input_order, "[Reshape] input_order"),
        output_shape=shape_of(output_shape, "[Reshape] output_shape"),
    )


def slice(
    node: NodeInput,
    lower_bounds: Sequence[int],
    upper_bounds: Sequence[int],
    strides: Sequence[int] | None = None,
    name: str | None = None,
) -> Node:
    """Elements lower_bounds <= i < upper_bounds (with `strides`, default 1) on every axis."""
    node = as_node(node)
    return _make(
        "Slice",
        [node],
        name,
        lower_bounds=int_list(lower_bounds, "[Slice] lower_bounds"),
        upper_bounds=int_list(upper_bounds, "[Slice] upper_bounds"),
        strides=None if strides is None else int_list(strides, "[Slice] strides"),
    )


def concat(nodes: Sequence[NodeInput], axis: int, name: str | None = None) -> Node:
    """Concatenates `nodes` along `axis`."""
    nodes = as_nodes(*nodes, op="Concat")
    if not nodes:
        raise UserInputError("[Concat] needs at least one node")
    rank = len(nodes[0].shape)
    (axis,) = axis_list(axis, rank, "[Concat] axis")
    return _make("Concat", nodes, name, concatenation_axis=axis)


def replace_slice(
    dest_node: NodeInput,
    src_node: NodeInput,
    lower_bounds: Sequence[int],
    upper_bounds: Sequence[int],
    strides: Sequence[int] | None = None,
    name: str | None = None,
) -> Node:
    """`dest_node` with the slice [lower_bounds, upper_bounds) (step `strides`) replaced by
    `src_node`, whose shape is that slice's (nGraph's ReplaceSlice: the adjoint of ``slice``;
    a pure op, the graph's value of dest is unchanged)."""
    dest, src = as_nodes(dest_node, src_node, op="ReplaceSlice")
    return _make(
        "ReplaceSlice",
        [dest, src],
        name,
        lower_bounds=int_list(lower_bounds, "[ReplaceSlice] lower_bounds"),
        upper_bounds=int_list(upper_bounds, "[ReplaceSlice] upper_bounds"),
        strides=None if strides is None else int_list(strides, "[ReplaceSlice] strides"),
    )


def split(data: NodeInput, axis: int, parts: int | Sequence[int],
          name: str | None = None) -> list[Node]:
    """Splits `data` along `axis` into `parts` equal pieces (an int that divides the axis) or
    pieces of the lengths `parts` (a sequence summing to the axis). Returns one node per piece."""
    data = as_node(data)
    (ax,) = axis_list(axis, len(data.shape), "[Split] axis")
    size = data.shape[ax]
    if isinstance(parts, (int, np.integer)) and not isinstance(parts, bool):
        if parts <= 0 or size % parts:
            raise UserInputError(f"[Split] cannot split axis {ax} of size {size} (data shape "
                                 f"{data.shape}) into {parts} equal parts")
        lengths = [size // int(parts)] * int(parts)
    else:
        lengths = int_list(parts, "[Split] parts")
    node = _make("Split", [data], name, axis=ax, splits=lengths)
    return [node[i] for i in range(node.get_output_size())]


def tile(data: NodeInput, repeats: Sequence[int] | int, name: str | None = None) -> Node:
    """`data` repeated `repeats[i]` times along axis i, as ``np.tile``."""
    if isinstance(repeats, (int, np.integer)):
        repeats = [repeats]
    return _make("Tile", [as_node(data)], name, repeats=int_list(repeats, "[Tile] repeats"))


# ------------------------------------------------------------------------------ indexing


def _indices(node: NodeInput, op: str) -> Node:
    """An index tensor: a node of i32/i64, or integers (made an int64 constant)."""
    if isinstance(node, Node):
        return node
    value = np.asarray(node)
    if value.dtype.kind not in "iu":
        raise NgraphTypeError(f"[{op}] indices must be integers, got {value.dtype}")
    if value.dtype.kind == "u" and value.size and value.max() > np.iinfo(np.int64).max:
        raise UserInputError(f"[{op}] index {value.max()} does not fit in int64")
    return make_constant_node(value.astype(np.int64), None, None)


def gather(data: NodeInput, indices: NodeInput, axis: int = 0, name: str | None = None) -> Node:
    """Slices of `data` along `axis` at `indices` (i32 or i64; negative ones count from the
    end), as ``np.take``: the result's shape is data.shape[:axis] + indices.shape +
    data.shape[axis + 1:]. An index outside [-n, n) fails the call naming the op, the index and
    the bound. Its gradient scatters back, summing repeated indices."""
    data = as_node(data)
    return _make("Gather", [data, _indices(indices, "Gather")], name, axis=int(axis))


def embedding_lookup(indices: NodeInput, weights: NodeInput, name: str | None = None) -> Node:
    """Rows of `weights` at `indices` (i32 or i64, each in [0, weights.shape[0])): shape
    indices.shape + weights.shape[1:] (nGraph's EmbeddingLookup)."""
    return _make("EmbeddingLookup", [_indices(indices, "EmbeddingLookup"), as_node(weights)], name)


def scatter_add(inputs: NodeInput, indices: NodeInput, updates: NodeInput, axis: int = 0,
                name: str | None = None) -> Node:
    """A copy of `inputs` with each slice of `updates` added at its index along `axis` (0, as
    nGraph's ScatterAdd; repeated indices accumulate); updates has the shape
    inputs.shape[:axis] + indices.shape + inputs.shape[axis + 1:]."""
    data, upd = as_nodes(inputs, updates, op="ScatterAdd")
    return _make("ScatterAdd", [data, _indices(indices, "ScatterAdd"), upd], name, axis=int(axis))


def pad(
    data_batch: NodeInput,
    value: NodeInput,
    padding_below: Sequence[int] | None = None,
    padding_above: Sequence[int] | None = None,
    padding_in: Sequence[int] | None = None,
    name: str | None = None,
    pad_mode: str = "constant",
) -> Node:
    """Pads each axis by padding_below/padding_above elements (negative values crop) with
    `value` (mode 'constant'), or with 'edge', 'reflect' or 'symmetric' values."""
    data = as_node(data_batch)
    rank = len(data.shape)
    if padding_in is not None and any(int_list(padding_in, "[Pad] padding_in")):
        raise UserInputError("[Pad] interior padding (padding_in) is not supported")
    value_node = as_node(value, data.dtype if not isinstance(value, Node) else None)
    below = [0] * rank if padding_below is None else int_list(padding_below, "[Pad] padding_below")
    above = [0] * rank if padding_above is None else int_list(padding_above, "[Pad] padding_above")
    return _make("Pad", [data, value_node], name, padding_below=below, padding_above=above,
                 pad_mode=pad_mode)


def reverse(node: NodeInput, reversed_axes: Iterable[int] | int, name: str | None = None) -> Node:
    """Reverses the order of elements along `reversed_axes`."""
    node = as_node(node)
    axes = axis_list(reversed_axes, len(node.shape), "[Reverse] reversed_axes")
    return _make("Reverse", [node], name, reversed_axes=axes)


# --------------------------------------------------------------------------- reductions


def _reduction(op: str, doc: str):
    def fn(node: NodeInput, reduction_axes: Iterable[int] | int | None = None,
           name: str | None = None) -> Node:
        node = as_node(node)
        rank = len(node.shape)
        axes = list(range(rank)) if reduction_axes is None else axis_list(
            reduction_axes, rank, f"[{op}] reduction_axes")
        return _make(op, [node], name, reduction_axes=axes)

    fn.__doc__ = doc + " over `reduction_axes` (default: all axes), which are removed."
    return fn


sum = _reduction("Sum", "Sum")
prod = _reduction("Product", "Product")
max = _reduction("Max", "Maximum")
min = _reduction("Min", "Minimum")
sum.__name__, prod.__name__, max.__name__, min.__name__ = "sum", "prod", "max", "min"


def argmax(data: NodeInput, axis: int = 0, index_element_type: Any = np.int32,
           name: str | None = None) -> Node:
    """Index of the first maximum along `axis` (int32 by default, as in nGraph)."""
    return _index_reduction("ArgMax", data, axis, index_element_type, name)


def argmin(data: NodeInput, axis: int = 0, index_element_type: Any = np.int32,
           name: str | None = None) -> Node:
    """Index of the first minimum along `axis` (int32 by default, as in nGraph)."""
    return _index_reduction("ArgMin", data, axis, index_element_type, name)


def _index_reduction(op, data, axis, index_element_type, name):
    data = as_node(data)
    (axis,) = axis_list(axis, len(data.shape), f"[{op}] axis")
    return _make(op, [data], name, axis=axis,
                 index_element_type=to_dtype(index_element_type, f"[{op}] index_element_type"))


def topk(data: NodeInput, k: int, kaxis: int = -1, cmax: bool = True,
         name: str | None = None, index_element_type: Any = np.int32) -> Node:
    """The `k` largest (`cmax`, default) or smallest elements along axis `kaxis` (default the
    last), sorted from the largest (smallest) on, ties by the lower index: a node with two
    outputs, the values and their indices along the axis (int32 by default)::

        values, indices = ng.topk(x, 3)
    """
    data = as_node(data)
    (axis,) = axis_list(kaxis, len(data.shape), "[TopK] kaxis")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise NgraphTypeError(f"[TopK] k must be an integer, got {k!r}")
    if k < 1:
        raise UserInputError(f"[TopK] k must be >= 1, got {k}")
    return _make("TopK", [data], name, k=int(k), axis=axis, compute_max=bool(cmax),
                 index_element_type=to_dtype(index_element_type, "[TopK] index_element_type"))


def softmax(node: NodeInput, axes: Iterable[int] | int, name: str | None = None) -> Node:
    """Softmax over `axes` (an int or a set of axes)."""
    node = as_node(node)
    return _make("Softmax", [node], name,
                 axes=sorted(set(axis_list(axes, len(node.shape), "[Softmax] axes"))))


def one_hot(node: NodeInput, shape: Sequence[int], one_hot_axis: int,
            name: str | None = None) -> Node:
    """One-hot encoding: the result has `shape` and the input's dtype; `one_hot_axis` is the
    new axis."""
    node = as_node(node)
    shape = shape_of(shape, "[OneHot] shape")
    (one_hot_axis,) = axis_list(one_hot_axis, len(shape), "[OneHot] one_hot_axis")
    return _make("OneHot", [node], name, shape=shape, one_hot_axis=one_hot_axis)


# ------------------------------------------------- multi-output nodes, batch normalization


def get_output_element(data: Node, index: int, name: str | None = None) -> Node:
    """Output `index` of the node `data` (nGraph's GetOutputElement): a node for one value of a
    node with several outputs, such as ``ng.batch_norm`` in training form. ``node[index]`` does
    the same (and gives a single-output node itself for index 0). Negative indices count from
    the end; IndexError names the node and its output count. Compiling removes the node: it
    never copies."""
    if not isinstance(data, Node):
        raise NgraphTypeError(f"[GetOutputElement] data must be a Node, got {type(data).__name__}")
    return _ngraph.get_output_element(data, index, name or "")


def layer_norm(
    data: NodeInput,
    scale: NodeInput | None = None,
    bias: NodeInput | None = None,
    begin_norm_axis: int = -1,
    epsilon: float = 1e-5,
    name: str | None = None,
) -> Node:
    """Layer normalization of `data` over the axes from `begin_norm_axis` (negative counts from
    the end) to the last: ``(data - mean) / sqrt(variance + epsilon) * scale + bias`` with the
    biased variance (as PyTorch's layer_norm). scale and bias have the normalized shape
    (data.shape[begin_norm_axis:]) or its element count; one given without the other is paired
    with ones or zeros. The node has three outputs: the normalized data, the mean and the
    variance (shape data.shape[:begin_norm_axis]): ``y = ng.layer_norm(x, g, b)[0]``."""
    x = as_node(data)
    if scale is None and bias is None:
        return _make("LayerNorm", [x], name, begin_norm_axis=int(begin_norm_axis),
                     epsilon=float(epsilon))
    rank = len(x.shape)
    (begin,) = axis_list(begin_norm_axis, rank, "[LayerNorm] begin_norm_axis") if rank else (0,)
    normalized = x.shape[begin:]
    dtype = x.dtype
    scale = np.ones(normalized, dtype) if scale is None else scale
    bias = np.zeros(normalized, dtype) if bias is None else bias
    affine = [as_node(v, None if isinstance(v, Node) else dtype) for v in (scale, bias)]
    return _make("LayerNorm", [x, *affine], name, begin_norm_axis=int(begin_norm_axis),
                 epsilon=float(epsilon))


# The seeds of dropouts given none: counted from 2^61, far from the small seeds people give.
_dropout_seeds = iter(range(1 << 61, 1 << 62))


def dropout(data: NodeInput, p: float, seed: int | None = None, training: bool = True,
            name: str | None = None) -> Node:
    """Inverted dropout: each element is zeroed with probability `p` and the others scaled by
    1 / (1 - p). The mask comes from a counter-based generator in the graph, a function of
    (seed, rank, step): different on every rank and every call of the computation (its
    ``rng_step``) without recompiling, the same on CPU and INTERPRETER, and the backward pass
    reuses it. Without `training` (evaluation) it is the identity. Give every dropout of a
    model its own `seed`; by default each call takes the next seed of a process-wide count,
    the same on every rank that builds the same graph."""
    x = as_node(data)
    p = float(p)
    if not 0 <= p <= 1:
        raise UserInputError(f"[Dropout] p must be in [0, 1], got {p}")
    if not training or p == 0:
        return x
    seed = next(_dropout_seeds) if seed is None else int(seed)
    node = _make("Dropout", [x], name, probability=p, seed=seed)
    return node[0]


def batch_norm(
    eps: float,
    gamma: NodeInput,
    beta: NodeInput,
    data: NodeInput,
    mean: NodeInput | None = None,
    variance: NodeInput | None = None,
    name: str | None = None,
) -> Node:
    """Batch normalization over axis 1 (the channels) of `data` (rank >= 2), with statistics
    over every other axis: ``gamma * (data - mean) / sqrt(variance + eps) + beta``; gamma, beta,
    mean and variance have shape [C].

    Without `mean` and `variance` (training): the batch's own mean and biased variance are
    used, and the node has three outputs, the normalized data, the batch mean and the batch
    variance (``y, batch_mean, batch_var = ng.batch_norm(eps, gamma, beta, x)``, or ``node[0]``).
    With both (inference): the node normalizes with them and has one output."""
    if (mean is None) != (variance is None):
        missing = "variance" if variance is None else "mean"
        raise UserInputError(f"[BatchNormInference] {missing} is missing: pass both mean and "
                         "variance (inference) or neither (training)")
    x = as_node(data)
    dtype = x.dtype
    per_channel = [as_node(v, None if isinstance(v, Node) else dtype) for v in (gamma, beta)]
    if mean is None:
        return _make("BatchNormTraining", [*per_channel, x], name, epsilon=float(eps))
    stats = [as_node(v, None if isinstance(v, Node) else dtype) for v in (mean, variance)]
    return _make("BatchNormInference", [*per_channel, x, *stats], name, epsilon=float(eps))
# ---------------------------------------------------------------- pooling and LRN


def _pool_geometry(op: str, data: NodeInput, window_shape: Sequence[int],
                   strides: Sequence[int] | None, padding_below: Sequence[int] | None,
                   padding_above: Sequence[int] | None) -> tuple[Node, dict[str, list[int]]]:
    """The data node and the window attributes, with nGraph's defaults (stride 1, no padding)
    for as many spatial axes as window_shape has."""
    data = as_node(data)
    window = shape_of(window_shape, f"[{op}] window_shape")

    def sizes(values, default, what):
        return [default] * len(window) if values is None else shape_of(values, f"[{op}] {what}")

    return data, {
        "window_shape": window,
        "window_movement_strides": sizes(strides, 1, "window_strides"),
        "padding_below": sizes(padding_below, 0, "padding_below"),
        "padding_above": sizes(padding_above, 0, "padding_above"),
    }


def avg_pool(
    data_batch: NodeInput,
    window_shape: Sequence[int],
    window_strides: Sequence[int] | None = None,
    padding_below: Sequence[int] | None = None,
    padding_above: Sequence[int] | None = None,
    include_padding: bool = False,
    name: str | None = None,
    *,
    ceil_mode: bool = False,
) -> Node:
    """Average pooling of `data_batch` (N, C, then 1 to 3 spatial axes) over windows of
    `window_shape` moved by `window_strides` (default 1) over the data padded by
    `padding_below`/`padding_above` (default 0). Each window's data cells are summed and
    divided by their number, or by the full window size when `include_padding` (padding then
    counts as zeros). An output axis has floor((in + below + above - window) / stride) + 1
    cells, the ceiling with `ceil_mode` (the last windows then reach into extra padding)."""
    data, geometry = _pool_geometry("AvgPool", data_batch, window_shape, window_strides,
                                    padding_below, padding_above)
    return _make("AvgPool", [data], name, **geometry,
                 include_padding_in_avg_computation=bool(include_padding),
                 ceil_mode=bool(ceil_mode))


def max_pool(
    x: NodeInput,
    window_shape: Sequence[int],
    strides: Sequence[int] | None = None,
    padding_above: Sequence[int] | None = None,
    padding_below: Sequence[int] | None = None,
    name: str | None = None,
    *,
    ceil_mode: bool = False,
) -> Node:
    """Max pooling of `x` (N, C, then 1 to 3 spatial axes): the maximum of each window of
    `window_shape` moved by `strides` (default 1). Padding cells are -inf (a window entirely in
    the padding gives -inf). Output sizes as in avg_pool. nGraph's argument order:
    padding_above comes before padding_below (each is applied on its own side)."""
    data, geometry = _pool_geometry("MaxPool", x, window_shape, strides, padding_below,
                                    padding_above)
    return _make("MaxPool", [data], name, **geometry, ceil_mode=bool(ceil_mode))


def global_avg_pool(data: NodeInput, name: str | None = None) -> Node:
    """The mean over all spatial axes of `data` (N, C, spatial...): a node of shape [N, C].
    A composition (sum over axes 2.. divided by their size), not a pooling op."""
    data = as_node(data)
    shape = list(data.shape)
    if len(shape) < 3:
        raise UserInputError(f"[global_avg_pool] data shape {shape} must have rank >= 3 "
                         "(N, C and spatial axes)")
    if data.dtype.kind != "f":
        raise NgraphTypeError(f"[global_avg_pool] data must be floating-point, got {data.dtype}")
    axes = list(range(2, len(shape)))
    count = int(np.prod([shape[a] for a in axes]))
    return divide(sum(data, axes), count, name=name)


def lrn(
    data: NodeInput,
    alpha: float = 1,
    beta: float = 0.5,
    bias: float = 1,
    size: int = 5,
    name: str | None = None,
) -> Node:
    """Local response normalization across channels (axis 1) of `data` (rank >= 3):
    x / (bias + alpha / size * s) ** beta, where s sums the squares of the channels
    c - (size - 1) // 2 .. c + (size - 1) // 2 that exist, at the same position."""
    data = as_node(data)
    (size,) = shape_of([size], "[LRN] size")
    return _make("LRN", [data], name, alpha=float(alpha), beta=float(beta), bias=float(bias),
                 size=size)


# ------------------------------------------------------------------- Python operators


def _install_operators() -> None:
    def rev(fn):
        return lambda self, other: fn(other, self)

    ops = {
        "__add__": add, "__radd__": rev(add),
        "__sub__": subtract, "__rsub__": rev(subtract),
        "__mul__": multiply, "__rmul__": rev(multiply),
        "__truediv__": divide, "__rtruediv__": rev(divide),
        "__pow__": power, "__rpow__": rev(power),
        "__neg__": negative,
        "__abs__": absolute,
        "__matmul__": matmul, "__rmatmul__": rev(matmul),
        "__eq__": equal, "__ne__": not_equal,
        "__lt__": less, "__le__": less_eq, "__gt__": greater, "__ge__": greater_eq,
    }  # fmt: skip
    for k, fn in ops.items():
        setattr(Node, k, lambda self, *args, _fn=fn: _fn(self, *args))
    # NumPy arrays on the left (``array + node``, ``array < node``) defer to the node's
    # reflected operators instead of building an object array of per-element nodes.
    Node.__array_ufunc__ = None
    # `==` builds a node, so `node in list` or `if a == b` would always be true: refuse.
    def _no_truth_value(self):
        raise NgraphTypeError(
            f"the truth value of {self!r} is undefined (comparisons build nodes); "
            "compare nodes with `is`"
        )

    Node.__bool__ = _no_truth_value

    def get_data(self) -> np.ndarray:
        """The value of a Constant node, as a new ndarray (NgraphTypeError for other nodes)."""
        return _ngraph.constant_value(self)

    Node.get_data = get_data
    # Comparisons return nodes, so identity is what hashing uses.
    Node.__hash__ = lambda self: builtins.hash(self.get_instance_id())


_install_operators()


def __getattr__(name: str) -> Any:
    """nGraph's ``ngraph.ops`` holds every op function: the fused ones (ngraph.fused) resolve
    here too, and a name ngraph does not provide says why."""
    from ngraph import fused
    from ngraph._not_provided import missing_attribute

    fn = getattr(fused, name, None)
    if not name.startswith("_") and getattr(fn, "__module__", None) == fused.__name__:
        return fn
    return missing_attribute(name, "ngraph.ops")
