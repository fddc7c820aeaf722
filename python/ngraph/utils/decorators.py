"""Decorators of op functions (nGraph's ``ngraph.utils.decorators``)."""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable

from ngraph._ngraph import Node
from ngraph.utils import as_node, as_nodes


def _set_node_name(node: Node, **kwargs: Any) -> Node:
    if kwargs.get("name"):
        node.name = kwargs["name"]
    return node


def nameable_op(node_factory_function: Callable) -> Callable:
    """Names the node the wrapped function returns after its `name` keyword."""

    @wraps(node_factory_function)
    def wrapper(*args: Any, **kwargs: Any) -> Node:
        return _set_node_name(node_factory_function(*args, **kwargs), **kwargs)

    return wrapper


def unary_op(node_factory_function: Callable) -> Callable:
    """Like nameable_op; the first argument becomes a Constant when it is not a node."""

    @wraps(node_factory_function)
    def wrapper(input_value: Any, *args: Any, **kwargs: Any) -> Node:
        node = node_factory_function(as_node(input_value), *args, **kwargs)
        return _set_node_name(node, **kwargs)

    return wrapper


def binary_op(node_factory_function: Callable) -> Callable:
    """Like nameable_op; the first two arguments become Constants (of the other's dtype)
    when they are not nodes."""

    @wraps(node_factory_function)
    def wrapper(left: Any, right: Any, *args: Any, **kwargs: Any) -> Node:
        left, right = as_nodes(left, right, op=node_factory_function.__name__)
        return _set_node_name(node_factory_function(left, right, *args, **kwargs), **kwargs)

    return wrapper
