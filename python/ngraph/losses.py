"""Losses as compositions of ops (their gradients come from the ops' rules)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ngraph import ops
from ngraph._ngraph import Node
from ngraph.exceptions import NgraphTypeError, UserInputError
from ngraph.utils import NodeInput, as_node, axis_list


def mean(node: NodeInput, axes: Iterable[int] | int | None = None, name: str | None = None) -> Node:
    """Mean over `axes` (default: all), which are removed."""
    node = as_node(node)
    shape = node.shape
    axes = list(range(len(shape))) if axes is None else axis_list(axes, len(shape), "[mean] axes")
    count = int(np.prod([shape[a] for a in axes])) if axes else 1
    return ops.divide(ops.sum(node, axes), max(count, 1), name=name)


def log_softmax(logits: NodeInput, axis: int = -1, name: str | None = None) -> Node:
    """log(softmax(logits)) along `axis`, computed stably as x - max - log(sum(exp(x - max)))."""
    logits = as_node(logits)
    rank = len(logits.shape)
    (axis,) = axis_list(axis, rank, "[log_softmax] axis")
    # The shift cancels out of the result: no gradient flows through it.
    m = ops.stop_gradient(ops.max(logits, [axis]))
    m_b = ops.broadcast(m, logits.shape, [axis])
    shifted = logits - m_b
    lse = ops.log(ops.sum(ops.exp(shifted), [axis]))
    return ops.subtract(shifted, ops.broadcast(lse, logits.shape, [axis]), name=name)


def softmax_cross_entropy(
    logits: NodeInput, labels: NodeInput, axis: int = -1, reduction: str = "mean",
    name: str | None = None, label_smoothing: float = 0.0,
) -> Node:
    """Cross-entropy between softmax(logits) and the labels, computed from logits without
    overflow. `labels` are class indices (an integer node/array with logits' shape minus
    `axis`) or a distribution (one-hot or soft, logits' shape). reduction: 'mean' (over the
    batch), 'sum' or 'none'. `label_smoothing` ε in [0, 1] mixes the target with the uniform
    distribution, as PyTorch's: (1 - ε) * target + ε / classes."""
    if isinstance(label_smoothing, bool) or not 0 <= label_smoothing <= 1:
        raise UserInputError(f"[softmax_cross_entropy] label_smoothing must be in [0, 1], got "
                             f"{label_smoothing!r}")
    logits = as_node(logits)
    shape = logits.shape
    rank = len(shape)
    (axis,) = axis_list(axis, rank, "[softmax_cross_entropy] axis")
    logp = log_softmax(logits, axis)
    if not isinstance(labels, Node):
        labels = np.asarray(labels)
        kind = labels.dtype.kind
        labels = ops.constant(labels.astype(np.int64 if kind in "iub" else logits.dtype))
    if list(labels.shape) == [d for i, d in enumerate(shape) if i != axis]:
        if labels.dtype.kind not in "i":
            raise NgraphTypeError(f"[softmax_cross_entropy] class-index labels must be integers, "
                            f"got {labels.dtype}")
        target = ops.one_hot(labels, shape, axis)
        target = ops.convert(target, logits.dtype)
    elif list(labels.shape) == list(shape):
        target = ops.convert(labels, logits.dtype) if labels.dtype != logits.dtype else labels
    else:
        raise UserInputError(f"[softmax_cross_entropy] labels shape {labels.shape} matches neither "
                         f"logits shape {shape} nor it without axis {axis}")
    if label_smoothing:
        eps = float(label_smoothing)
        target = target * (1 - eps) + eps / shape[axis]
    per_example = ops.negative(ops.sum(target * logp, [axis]))
    return _reduce(per_example, reduction, "softmax_cross_entropy", name)


def mean_squared_error(prediction: NodeInput, target: NodeInput, reduction: str = "mean",
                       name: str | None = None) -> Node:
    """Mean (or sum, or elementwise with 'none') of (prediction - target)**2."""
    prediction = as_node(prediction)
    diff = prediction - target
    return _reduce(diff * diff, reduction, "mean_squared_error", name)


def _reduce(node: Node, reduction: str, op: str, name: str | None) -> Node:
    if reduction == "mean":
        return mean(node, name=name)
    if reduction == "sum":
        return ops.sum(node, name=name)
    if reduction == "none":
        if name:
            node.name = name
        return node
    raise UserInputError(f"[{op}] reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
