"""ngraph's exceptions (nGraph's ``ngraph.exceptions``).

Errors of user input subclass both ``NgraphError`` and the built-in exception that code
written without ngraph in mind catches: a node whose shapes do not fit its op, a bad argument
or a wrong value in a call raise ``UserInputError`` (a ``ValueError``); a wrong element type or
argument type raises ``NgraphTypeError`` (a ``TypeError``). A NaN or Inf found by the opt-in
numerics check raises ``NumericsError`` (a ``FloatingPointError``).
"""

from __future__ import annotations


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


for _cls in (NgraphError, UserInputError, NgraphTypeError, NumericsError):
    _cls.__module__ = "ngraph.exceptions"
