"""ngraph's exceptions (nGraph's ``ngraph.exceptions``).

Errors of user input subclass both ``NgraphError`` and the built-in exception that code
written without ngraph in mind catches: a node whose shapes do not fit its op, a bad argument
or a wrong value in a call raise ``UserInputError`` (a ``ValueError``); a wrong element type or
argument type raises ``NgraphTypeError`` (a ``TypeError``).

The exceptions the C++ core raises (``NoGradientError``, ``SerializationError``,
``DistributedError``) live in the extension module but are published here, so they print,
pickle and are caught as ``ngraph.exceptions.<Name>`` (each is also ``ngraph.<Name>``). A NaN
or Inf found by the opt-in numerics check raises ``NumericsError`` (a ``FloatingPointError``).
"""

from __future__ import annotations

from ngraph._ngraph import DistributedError, NoGradientError, SerializationError

__all__ = [
    "NgraphError",
    "NumericsError",
    "UserInputError",
    "NgraphTypeError",
    "CheckpointError",
    "DatasetError",
    "NoGradientError",
    "SerializationError",
    "DistributedError",
]


class NgraphError(Exception):
    """Base class of ngraph's exceptions."""


class UserInputError(NgraphError, ValueError):
    """User provided unexpected input: a shape, axis, attribute or value."""


class NgraphTypeError(NgraphError, TypeError):
    """An element type or argument of the wrong type."""


class NumericsError(NgraphError, FloatingPointError):
    """A NaN or Inf found by the numerics check (``ng.detect_anomaly()``,
    ``NGRAPH_CHECK_NUMERICS=1``): the message names the first op (or argument, or variable)
    whose value holds one, its output index, shape and element and, in a distributed graph,
    the rank. A ``FloatingPointError`` (an ``ArithmeticError``), as NumPy raises under
    ``np.errstate(all="raise")``."""


class CheckpointError(NgraphError, ValueError):
    """A checkpoint file (``ng.load``) is missing, truncated or corrupt, or does not match the
    variables it is loaded into (names, shapes, dtypes), or holds NaN/Inf values."""


class DatasetError(NgraphError, ValueError):
    """A dataset file is missing, truncated or corrupt, or holds values it must not (labels
    that are negative, fractional or not below the number of classes)."""


# NoGradientError (a ValueError), SerializationError (a ValueError) and DistributedError (a
# RuntimeError) are made by pybind11 in ngraph._ngraph; pickle finds a class by __module__
# and __qualname__, so they must name this module, where they are attributes.
for _cls in (NgraphError, UserInputError, NgraphTypeError, CheckpointError, DatasetError,
             NumericsError,
             NoGradientError, SerializationError, DistributedError):
    _cls.__module__ = "ngraph.exceptions"
    _cls.__qualname__ = _cls.__name__
del _cls
