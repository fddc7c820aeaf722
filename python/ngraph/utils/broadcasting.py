"""Broadcasting helpers (nGraph's ``ngraph.utils.broadcasting``)."""

from __future__ import annotations

from ngraph._ngraph import Node
from ngraph.ops import get_broadcast_axes
from ngraph.utils import NodeInput, as_nodes


def as_elementwise_compatible_nodes(*input_values: NodeInput) -> list[Node]:
    """Nodes for `input_values`; non-nodes become constants of the first node's dtype.
    Elementwise ops broadcast NumPy-style, so no shapes need changing."""
    return as_nodes(*input_values, op="elementwise")


__all__ = ["as_elementwise_compatible_nodes", "get_broadcast_axes"]
