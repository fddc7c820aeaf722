"""Reduction helpers (nGraph's ``ngraph.utils.reduction``)."""

from __future__ import annotations

from collections.abc import Iterable

from ngraph._ngraph import Node
from ngraph.utils import axis_list


def get_reduction_axes(node: Node, reduction_axes: Iterable[int] | int | None) -> set[int]:
    """The axes to reduce as a set: all of `node`'s axes when `reduction_axes` is None;
    negative axes count from the end."""
    rank = len(node.shape)
    if reduction_axes is None:
        return set(range(rank))
    return set(axis_list(reduction_axes, rank, "reduction_axes"))
