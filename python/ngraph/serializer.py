"""Graphs as JSON in nGraph's format (``ng.serialize``, ``ng.deserialize``).

The document holds the whole graph: every op with its attributes, constants' data, and the
variables a function reads and updates with their current values, so a compiled training
step can be saved and run elsewhere. Collectives keep their reduction and ranks; the
communicator they run on is chosen when the document is read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ngraph import _ngraph
from ngraph._ngraph import Function, Node, SerializationError
from ngraph.runtime import Computation

__all__ = ["serialize", "deserialize", "SerializationError"]


def _parameters_of(nodes: Sequence[Node]) -> list[Node]:
    """The Parameters `nodes` depend on, in the order a depth-first walk reaches them."""
    found: list[Node] = []
    seen: set[int] = set()
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        key = node.get_instance_id()
        if key in seen:
            continue
        seen.add(key)
        if node.get_type_name() == "Parameter":
            found.append(node)
        stack.extend(reversed(node.inputs()))
    return found


def function_of(graph: Any, what: str) -> Function:
    """The Function of a Function or a Computation, or of the graph computing a node (or a
    list of nodes) from the parameters they depend on (`what`: the caller, for errors)."""
    if isinstance(graph, Computation):
        return graph.function
    if isinstance(graph, Function):
        return graph
    if isinstance(graph, Node) or (isinstance(graph, Sequence) and not isinstance(graph, str)):
        nodes = [graph] if isinstance(graph, Node) else list(graph)
        for i, n in enumerate(nodes):
            if not isinstance(n, Node):
                raise TypeError(f"{what}: expected a Function, a Computation, a Node or a list "
                                f"of Nodes; item {i} is a {type(n).__name__}")
        results = [n for n in nodes if n.get_output_size() > 0]
        sinks = [n for n in nodes if n.get_output_size() == 0]
        name = nodes[0].name if isinstance(graph, Node) else ""
        return _ngraph.make_function(results, _parameters_of(nodes), [], sinks, name)
    raise TypeError(f"{what}: expected a Function, a Computation, a Node or a list of Nodes, "
                    f"got {type(graph).__name__}")


def serialize(node_or_function: Node | Sequence[Node] | Function | Computation,
              indent: int = 0) -> str:
    """JSON text of a Function (or a Computation's), or of the graph computing a node (or
    list of nodes) from the parameters it depends on, in the order it reaches them.
    ``indent`` > 0 writes one member per line. Variable updates belong to a computation:
    serialize the computation."""
    function = function_of(node_or_function, "serialize")
    if isinstance(indent, bool) or not isinstance(indent, int) or indent < 0:
        raise ValueError(f"serialize: indent must be an integer >= 0, got {indent!r}")
    return _ngraph.serialize(function, indent)


def deserialize(text: str | bytes | os.PathLike, communicator: Any = None) -> Function:
    """The Function a JSON document (text, UTF-8 bytes, or a path to a file) describes; also
    nGraph's binary container (cpio: the JSON and constants' data) as bytes or a path.
    Collective ops run on `communicator` (an ngraph or mpi4py communicator; None: the
    default one when the function runs). A malformed document raises SerializationError (a
    ValueError) naming the field."""
    if isinstance(text, os.PathLike):
        with open(text, "rb") as f:
            text = f.read()
    if isinstance(text, (bytes, bytearray)) and bytes(text[:2]) in (b"\xc7\x71", b"\x71\xc7"):
        text = bytes(text)  # nGraph's binary (cpio) container, read as it is
    elif isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise SerializationError(f"deserialize: the document is not UTF-8: {e}") from None
    if not isinstance(text, (str, bytes)):
        raise TypeError(f"deserialize: expected JSON text, bytes or a path, got "
                        f"{type(text).__name__}")
    comm = None
    if communicator is not None:
        from ngraph.distributed import as_communicator  # noqa: PLC0415

        comm = as_communicator(communicator)
    return _ngraph.deserialize(text, comm)
