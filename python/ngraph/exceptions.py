"""ngraph's exceptions (nGraph's ``ngraph.exceptions``).

Errors of user input subclass both ``NgraphError`` and the built-in exception that code
written without ngraph in mind catches: a node whose shapes do not fit its op, a bad argument
or a wrong value in a call raise ``UserInputError`` (a ``ValueError``); a wrong element type or
argument type raises ``NgraphTypeError`` (a ``TypeError``).
"""

from __future__ import annotations


class NgraphError(Exception):
    """Base class of ngraph's exceptions."""


class UserInputError(NgraphError, ValueError):
    """User provided unexpected input: a shape, axis, attribute or value."""


class NgraphTypeError(NgraphError, TypeError):
    """An element type or argument of the wrong type."""


for _cls in (NgraphError, UserInputError, NgraphTypeError):
    _cls.__module__ = "ngraph.exceptions"
