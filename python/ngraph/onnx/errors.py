"""The bridge's exception."""

from __future__ import annotations

from ngraph.exceptions import UserInputError

__all__ = ["ONNXError"]


class ONNXError(UserInputError):
    """An ONNX model ngraph cannot import or export: malformed or truncated protobuf, a
    missing or dangling value name, a cycle, an unknown domain or op, an attribute of the
    wrong type, a dynamic shape, a tensor claiming more bytes than the file holds... The
    message names the node (op type and name) and the field. A ``ValueError``."""
