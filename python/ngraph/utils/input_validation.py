"""Checks of user input (nGraph's ``ngraph.utils.input_validation``)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ngraph.exceptions import UserInputError


def assert_list_of_ints(value_list: Iterable[int], message: str) -> None:
    """Raises UserInputError with `message` unless `value_list` is an iterable of ints."""
    try:
        values = list(value_list)
    except TypeError:
        raise UserInputError(f"{message} (got {value_list!r})") from None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        raise UserInputError(f"{message} (got {value_list!r})")
