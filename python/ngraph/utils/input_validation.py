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


def _check_value(op_name: str, attr_key: str, value, val_type, cond=None) -> bool:
    """True when `value` (one attribute value of op `op_name`) is of NumPy kind `val_type`
    (``np.integer``, ``np.floating``, ``np.str_`` ...) and satisfies `cond` (a callable, or
    None); raises UserInputError naming the op, the attribute and the value otherwise."""
    if not np.issubdtype(type(value), val_type):
        raise UserInputError(
            f"[{op_name}] attribute '{attr_key}': {value!r} is a {type(value).__name__}, "
            f"not of kind {getattr(val_type, '__name__', val_type)}")
    if cond is not None and not cond(value):
        raise UserInputError(f"[{op_name}] attribute '{attr_key}': {value!r} does not satisfy "
                             f"{getattr(cond, '__name__', 'the condition')}")
    return True


def check_valid_attribute(op_name: str, attr_dict: dict, attr_key: str, val_type, cond=None,
                          required: bool = False) -> bool:
    """Checks the attribute `attr_key` of `attr_dict` with _check_value (each element, for a
    list); a missing attribute is fine unless `required` (then UserInputError)."""
    if attr_key not in attr_dict:
        if required:
            raise UserInputError(f"[{op_name}] the required attribute '{attr_key}' is missing "
                                 f"(given: {sorted(attr_dict)})")
        return True
    value = attr_dict[attr_key]
    values = [value] if np.isscalar(value) else value
    return all(_check_value(op_name, attr_key, v, val_type, cond) for v in values)


def check_valid_attributes(op_name: str, attributes: dict, requirements) -> bool:
    """Checks every (name, required, val_type, cond) of `requirements` with
    check_valid_attribute."""
    for attr, required, val_type, cond in requirements:
        check_valid_attribute(op_name, attributes, attr, val_type, cond, required)
    return True


def is_positive_value(x) -> bool:
    """x > 0."""
    return x > 0


def is_non_negative_value(x) -> bool:
    """x >= 0."""
    return x >= 0
