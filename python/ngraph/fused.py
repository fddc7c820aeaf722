"""nGraph's fused ops, as compositions of ngraph's ops (nGraph's own fused ops decomposed the
same way): their gradients follow from the ops they are built of. Exported from ``ngraph``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ngraph._ngraph import Node
from ngraph.exceptions import NgraphTypeError, UserInputError
from ngraph.ops import (
    add,
    convert,
    divide,
    equal,
    exp,
    floor,
    greater,
    less,
    less_eq,
    matmul,
    maximum,
    minimum,
    multiply,
    reshape,
    select,
    sqrt,
    subtract,
    sum,
)
from ngraph.utils import NodeInput, as_node, as_nodes, axis_list


def _named(node: Node, name: str | None) -> Node:
    if name:
        node.name = name
    return node


def _float_data(op: str, data: NodeInput) -> Node:
    node = as_node(data)
    if node.dtype.kind != "f":
        raise NgraphTypeError(f"[{op}] data must be floating-point, got {node.dtype}")
    return node


def elu(data: NodeInput, alpha: float, name: str | None = None) -> Node:
    """Exponential linear unit: x where x > 0, alpha * (exp(x) - 1) elsewhere."""
    x = _float_data("Elu", data)
    return _named(select(greater(x, 0), x, multiply(alpha, subtract(exp(x), 1))), name)


def clamp(data: NodeInput, min_value: float, max_value: float, name: str | None = None) -> Node:
    """Each element clipped to [min_value, max_value]."""
    if min_value > max_value:
        raise UserInputError(f"[Clamp] min_value {min_value} is greater than max_value "
                             f"{max_value}")
    x = as_node(data)
    return _named(minimum(maximum(x, min_value), max_value), name)


def squared_difference(x1: NodeInput, x2: NodeInput, name: str | None = None) -> Node:
    """(x1 - x2) ** 2, elementwise (inputs broadcast NumPy-style)."""
    d = subtract(*as_nodes(x1, x2, op="SquaredDifference"))
    return _named(multiply(d, d), name)


def prelu(data: NodeInput, slope: NodeInput, name: str | None = None) -> Node:
    """x where x >= 0, slope * x elsewhere; `slope` broadcasts against the data NumPy-style."""
    x, s = as_nodes(data, slope, op="PRelu")
    return _named(select(less(x, 0), multiply(x, s), x), name)


def hard_sigmoid(data: NodeInput, alpha: float, beta: float, name: str | None = None) -> Node:
    """max(0, min(1, alpha * x + beta))."""
    x = _float_data("HardSigmoid", data)
    return _named(maximum(0, minimum(1, add(multiply(x, alpha), beta))), name)


def scale_shift(data: NodeInput, scale: NodeInput, shift: NodeInput,
                name: str | None = None) -> Node:
    """scale * data + shift (broadcast NumPy-style)."""
    x, a, b = as_nodes(data, scale, shift, op="ScaleShift")
    return _named(add(multiply(a, x), b), name)


def gemm(A: NodeInput, B: NodeInput, C: NodeInput, alpha: float, beta: float,  # noqa: N803
         transA: bool, transB: bool, name: str | None = None) -> Node:  # noqa: N803
    """alpha * A' B' + beta * C, A' and B' transposed when transA / transB; C broadcasts."""
    a, b, c = as_nodes(A, B, C, op="Gemm")
    product = matmul(a, b, transpose_a=transA, transpose_b=transB)
    return _named(add(multiply(product, alpha), multiply(c, beta)), name)


def _axes_value(op: str, axes: Any) -> list[int]:
    """Axes given as a list, an int or a Constant node of them (nGraph passes a node)."""
    if isinstance(axes, Node):
        if axes.get_type_name() != "Constant":
            raise UserInputError(f"[{op}] axes must be a Constant node or a list, got {axes!r}")
        axes = axes.get_data()
    return [int(a) for a in np.asarray(axes).reshape(-1)]


def squeeze(data: NodeInput, axes: Any, name: str | None = None) -> Node:
    """Removes the axes `axes` (each of size 1); all axes of size 1 when `axes` is empty."""
    x = as_node(data)
    shape = x.shape
    wanted = axis_list(_axes_value("Squeeze", axes), len(shape), "[Squeeze] axes")
    if not wanted:
        wanted = [i for i, d in enumerate(shape) if d == 1]
    for a in wanted:
        if shape[a] != 1:
            raise UserInputError(f"[Squeeze] axis {a} of shape {shape} has size {shape[a]}, "
                                 "not 1")
    return _named(reshape(x, [d for i, d in enumerate(shape) if i not in wanted]), name)


def unsqueeze(data: NodeInput, axes: Any, name: str | None = None) -> Node:
    """Inserts axes of size 1 at `axes` (positions in the result)."""
    x = as_node(data)
    rank = len(x.shape) + len(_axes_value("Unsqueeze", axes))
    wanted = set(axis_list(_axes_value("Unsqueeze", axes), rank, "[Unsqueeze] axes"))
    dims = iter(x.shape)
    return _named(reshape(x, [1 if i in wanted else next(dims) for i in range(rank)]), name)


def _transpose_reshape(x: Node, split: Sequence[int], order: Sequence[int],
                       out: Sequence[int]) -> Node:
    """x viewed as `split`, axes permuted by `order`, laid out as `out`."""
    return reshape(reshape(x, list(split)), list(out), list(order))


def shuffle_channels(data: NodeInput, axis: int, groups: int, name: str | None = None) -> Node:
    """Channel shuffle: axis `axis` (size C) viewed as [groups, C / groups], transposed."""
    x = as_node(data)
    shape = x.shape
    (axis,) = axis_list(axis, len(shape), "[ShuffleChannels] axis")
    if groups < 1 or shape[axis] % groups:
        raise UserInputError(f"[ShuffleChannels] groups {groups} must divide axis {axis} of "
                             f"shape {shape}")
    pre = int(np.prod(shape[:axis], dtype=np.int64))
    post = int(np.prod(shape[axis + 1:], dtype=np.int64))
    split = [pre, groups, shape[axis] // groups, post]
    return _named(_transpose_reshape(x, split, [0, 2, 1, 3], shape), name)


def _block_check(op: str, x: Node, block_size: int | None, mode: str) -> list[int]:
    if block_size is None:
        raise UserInputError(f"[{op}] block_size is missing: the signature is (data, mode, "
                             f"block_size) as in nGraph v0.26; nGraph's earlier (data, "
                             f"block_size) form is not provided (mode {mode!r})")
    shape = x.shape
    if len(shape) != 4:
        raise UserInputError(f"[{op}] data must be NCHW (rank 4), got shape {shape}")
    if block_size < 1:
        raise UserInputError(f"[{op}] block_size must be >= 1, got {block_size}")
    if mode not in ("blocks_first", "depth_first"):
        raise UserInputError(f"[{op}] mode must be 'blocks_first' or 'depth_first', "
                             f"got {mode!r}")
    return shape


def depth_to_space(node: NodeInput, mode: str, block_size: int | None = None,
                   name: str | None = None) -> Node:
    """[N, C, H, W] to [N, C / b^2, H b, W b]: the channels' blocks become spatial blocks
    (ONNX's DCR order for 'blocks_first', CRD for 'depth_first')."""
    x = as_node(node)
    n, c, h, w = _block_check("DepthToSpace", x, block_size, mode)
    b = block_size
    if c % (b * b):
        raise UserInputError(f"[DepthToSpace] channels {c} are not a multiple of "
                             f"block_size^2 = {b * b}")
    c2 = c // (b * b)
    if mode == "blocks_first":
        split, order = [n, b, b, c2, h, w], [0, 3, 4, 1, 5, 2]
    else:
        split, order = [n, c2, b, b, h, w], [0, 1, 4, 2, 5, 3]
    return _named(_transpose_reshape(x, split, order, [n, c2, h * b, w * b]), name)


def space_to_depth(data: NodeInput, mode: str, block_size: int | None = None,
                   name: str | None = None) -> Node:
    """The inverse of depth_to_space: [N, C, H, W] to [N, C b^2, H / b, W / b]."""
    x = as_node(data)
    n, c, h, w = _block_check("SpaceToDepth", x, block_size, mode)
    b = block_size
    if h % b or w % b:
        raise UserInputError(f"[SpaceToDepth] spatial shape {[h, w]} is not a multiple of "
                             f"block_size {b}")
    split = [n, c, h // b, b, w // b, b]
    order = [0, 3, 5, 1, 2, 4] if mode == "blocks_first" else [0, 1, 3, 5, 2, 4]
    return _named(_transpose_reshape(x, split, order, [n, c * b * b, h // b, w // b]), name)


def _round_half_to_even(y: Node) -> Node:
    """y rounded to the nearest integer, a tie to the even one (C's nearbyint)."""
    low = floor(y)
    frac = subtract(y, low)
    odd = subtract(low, multiply(2, floor(multiply(low, 0.5))))  # 1 where low is odd, else 0
    return select(greater(frac, 0.5), add(low, 1), select(less(frac, 0.5), low, add(low, odd)))


def fake_quantize(data: NodeInput, input_low: NodeInput, input_high: NodeInput,
                  output_low: NodeInput, output_high: NodeInput, levels: int,
                  name: str | None = None) -> Node:
    """Quantizes `data` to `levels` evenly spaced values and maps them back to floats, as
    nGraph's FakeQuantize: `output_low` where x <= input_low, `output_high` where
    x > input_high, else round((x - input_low) / (input_high - input_low) * (levels - 1))
    / (levels - 1) * (output_high - output_low) + output_low, rounding a tie to even. The four
    bounds broadcast (NumPy-style) to the shape of `data`."""
    x = _float_data("FakeQuantize", data)
    try:
        steps = float(levels) - 1
    except (TypeError, ValueError):
        steps = float("nan")
    if not (steps.is_integer() and steps >= 1):
        raise UserInputError(f"[FakeQuantize] levels must be an integer >= 2, got {levels!r}")
    x, in_low, in_high, out_low, out_high = as_nodes(
        x, input_low, input_high, output_low, output_high, op="FakeQuantize")
    for what, bound in zip(("input_low", "input_high", "output_low", "output_high"),
                           (in_low, in_high, out_low, out_high)):
        try:
            fits = list(np.broadcast_shapes(tuple(bound.shape), tuple(x.shape))) == x.shape
        except ValueError:
            fits = False
        if not fits:
            raise UserInputError(f"[FakeQuantize] {what} of shape {bound.shape} does not "
                                 f"broadcast to the data's shape {x.shape}")
    width = subtract(in_high, in_low)
    # Where input_high == input_low every x is below or above: divide by 1 there, not 0.
    width = select(equal(width, 0), add(multiply(width, 0), 1), width)
    q = _round_half_to_even(multiply(divide(subtract(x, in_low), width), steps))
    mid = add(multiply(divide(q, steps), subtract(out_high, out_low)), out_low)
    return _named(select(less_eq(x, in_low), out_low,
                         select(greater(x, in_high), out_high, mid)), name)


def mvn(data: NodeInput, axes: Iterable[int], normalize_variance: bool, eps: float,
        name: str | None = None) -> Node:
    """Mean-variance normalization over `axes`: x - mean, divided by sqrt(variance) + eps
    when `normalize_variance` (nGraph's MVN)."""
    x = _float_data("MVN", data)
    shape = x.shape
    axes = sorted(set(axis_list(axes, len(shape), "[MVN] axes")))
    count = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    kept = [1 if i in axes else d for i, d in enumerate(shape)]
    mean = reshape(divide(sum(x, axes), count), kept)
    centered = subtract(x, mean)
    if not normalize_variance:
        return _named(centered, name)
    var = reshape(divide(sum(multiply(centered, centered), axes), count), kept)
    return _named(divide(centered, add(sqrt(var), eps)), name)


def grn(data: NodeInput, bias: float, name: str | None = None) -> Node:
    """Global response normalization across channels (axis 1): x / sqrt(sum_c x^2 + bias)."""
    x = _float_data("GRN", data)
    shape = x.shape
    if not 2 <= len(shape) <= 4:
        raise UserInputError(f"[GRN] data must have rank 2 to 4, got shape {shape}")
    kept = [1 if i == 1 else d for i, d in enumerate(shape)]
    norm = sqrt(add(reshape(sum(multiply(x, x), [1]), kept), bias))
    return _named(divide(x, norm), name)


def dequantize(data: NodeInput, scale: NodeInput, zero_point: NodeInput, element_type: Any,
               axes: Iterable[int] = (), name: str | None = None) -> Node:
    """(data - zero_point) * scale in `element_type` (a float type); scale and zero_point
    broadcast NumPy-style (`axes` is accepted for nGraph's signature)."""
    q, zp = as_nodes(data, zero_point, op="Dequantize")
    f = convert(subtract(convert(q, np.int64), convert(zp, np.int64)), element_type)
    return _named(multiply(f, as_node(scale, f.dtype if not isinstance(scale, Node) else None)),
                  name)


__all__ = [
    "clamp", "depth_to_space", "dequantize", "elu", "gemm", "grn", "hard_sigmoid", "mvn",
    "prelu", "scale_shift", "shuffle_channels", "space_to_depth", "squared_difference",
    "squeeze", "unsqueeze",
]  # fmt: skip
