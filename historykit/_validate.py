"""Argument checks shared by the configuration classes (processors, triggers, the pipeline).

Each check raises the `historykit.errors` class callers expect (`InvalidArgumentError`, a
`ValueError`, for a value out of range or of a number type that is not one; `ArgumentTypeError`,
a `TypeError`, for an object of the wrong class) with the message users have always seen:
`keep must be a non-negative int, got -1`.

Example:
    ```python
    from historykit._validate import check_fraction, check_instance, check_int, check_ratio

    check_int("keep", keep)                                   # an int >= 0 (not a bool)
    check_int("max_tokens", max_tokens, minimum=1, optional=True)
    check_fraction("warn_at", warn_at, what="a fraction in (0, 1]", optional=True)
    check_instance("trigger", trigger, Trigger, "a historykit Trigger", optional=True)
    check_ratio("rewrite_ratio", rewrite_ratio)                # a finite number >= 0
    ```
"""

from __future__ import annotations

import math
from collections.abc import Collection

from historykit.errors import ArgumentTypeError, InvalidArgumentError

_INT_WORDS = {0: "a non-negative int", 1: "a positive int"}


def check_int(
    name: str, value: object, *, minimum: int | None = 0, what: str | None = None, optional: bool = False
) -> None:
    """Raise `InvalidArgumentError` unless `value` is an int (a bool is not) of at least `minimum`
    (`None`: any int).

    `what` is how the message names the requirement (`an int >= 0`); by default `a non-negative int`
    for a minimum of 0, `a positive int` for 1. `optional` lets `None` through.
    """
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        if what is not None:
            wanted = what
        elif minimum is None:
            wanted = "an int"
        else:
            wanted = _INT_WORDS.get(minimum, f"an int >= {minimum}")
        raise InvalidArgumentError(f"{name} must be {wanted}, got {value!r}")


def check_fraction(
    name: str,
    value: object,
    *,
    what: str = "in (0, 1]",
    below_one: bool = False,
    numbers_only: bool = True,
    optional: bool = False,
) -> None:
    """Raise `InvalidArgumentError` unless `0 < value <= 1` (`< 1` with `below_one`).

    `what` is how the message names the range (`a fraction in (0, 1)`). With `numbers_only` a bool
    or a non-number is refused too; without it, only the range is checked (as `Trigger` always has).
    `optional` lets `None` through.
    """
    if value is None and optional:
        return
    if numbers_only and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InvalidArgumentError(f"{name} must be {what}, got {value!r}")
    try:
        in_range = 0 < value < 1 if below_one else 0 < value <= 1  # type: ignore[operator]
    except TypeError:  # a value no number compares with (the string "0.5")
        in_range = False
    if isinstance(value, (str, bytes)) or not in_range:
        raise InvalidArgumentError(f"{name} must be {what}, got {value!r}")


def check_ratio(name: str, value: object) -> None:
    """Raise `InvalidArgumentError` unless `value` is a finite number >= 0 (a bool is refused)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidArgumentError(f"{name} must be a finite number >= 0, got {value!r}")


def check_instance(name: str, value: object, cls: type, what: str, *, optional: bool = False) -> None:
    """Raise `ArgumentTypeError` unless `value` is a `cls` (`what` names it in the message)."""
    if value is None and optional:
        return
    if not isinstance(value, cls):
        raise ArgumentTypeError(f"{name} must be {what}, got {type(value).__qualname__}")


def check_bool(name: str, value: object) -> bool:
    """`value` when it is `True` or `False`; else `InvalidArgumentError`. A truthy string (`"no"`)
    would otherwise turn an option on."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")
    return value


def check_tool_names(name: str, value: object) -> None:
    """Raise `ArgumentTypeError` unless `value` is a collection of tool names (a lone string is
    not: `exclude_tools="Bash"` would otherwise exclude the tools `B`, `a`, `s` and `h`)."""
    if isinstance(value, str) or not isinstance(value, Collection):
        raise ArgumentTypeError(
            f"{name} must be a collection of tool names, got {type(value).__name__} {value!r}"
        )
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ArgumentTypeError(f"{name}[{index}] must be a tool name (str), got {type(item).__name__}")
