"""Reverse-mode autodiff as graph construction.

``gradients(y, [x0, x1, ...])`` returns nodes computing dy/dx_i; they are ordinary nodes,
so they can be compiled, printed and differentiated again. Every differentiable op has a
gradient rule defined with the op in the C++ core; a gradient that would have to pass
through an op without one (ArgMax, comparisons, OneHot, integer values) raises
NoGradientError naming the op, instead of silently giving zero.
"""

from __future__ import annotations

from collections.abc import Sequence

from ngraph import _ngraph
from ngraph._ngraph import Node, NoGradientError
from ngraph.exceptions import NgraphTypeError
from ngraph.utils import NodeInput, as_node

__all__ = ["gradients", "NoGradientError"]


def gradients(y: Node, xs: Sequence[Node] | Node, seed: NodeInput | None = None):
    """Gradients of `y` with respect to each node of `xs` (a list in, a list out; one node
    in, one node out). `seed` is the incoming gradient of `y` (default: ones, so a
    non-scalar `y` is differentiated as ``sum(y)``). A node that `y` does not depend on gets
    zeros of its shape."""
    single = isinstance(xs, Node)
    xs_list = [xs] if single else list(xs)
    for i, x in enumerate(xs_list):
        if not isinstance(x, Node):
            raise NgraphTypeError(f"[gradients] xs[{i}] is a {type(x).__name__}, not a Node")
    if not isinstance(y, Node):
        raise NgraphTypeError(f"[gradients] y is a {type(y).__name__}, not a Node")
    seed_node = None if seed is None else as_node(seed, y.dtype)
    out = _ngraph.gradients(y, xs_list, seed_node)
    return out[0] if single else out
