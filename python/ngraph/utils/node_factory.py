"""Building any op by name (nGraph's ``ngraph.utils.node_factory``)."""

from __future__ import annotations

from typing import Any

from ngraph import _ngraph
from ngraph._ngraph import Node
from ngraph.utils import as_node


class NodeFactory:
    """Creates nodes of any op of the core from its name, its inputs and its attributes (by
    their names in the op's attribute visitor, e.g. ``create("Softmax", [x], {"axes": [1]})``).
    `opset_version` is accepted for nGraph's signature; ngraph has one op set."""

    def __init__(self, opset_version: str = "opset1") -> None:
        self.opset_version = opset_version

    def create(self, op_type_name: str, arguments: list[Any],
               attributes: dict[str, Any] | None = None) -> Node:
        """A validated node of `op_type_name`; unknown ops and attributes raise
        UserInputError naming them."""
        inputs = [as_node(a) for a in arguments]
        return _ngraph.make_node(op_type_name, inputs, dict(attributes or {}), "")
