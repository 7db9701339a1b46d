"""Which context window a run uses, and where it came from.

The framework glue (`historykit.plugins.pydantic_ai`, `historykit.plugins.langchain`) asks
for the window in this order: the caller's explicit value, else what the run's model says about
itself (its profile, or a table of known models), else historykit's conservative default. The
report of every call names the source, so a surprising budget can be traced to its cause.

Example:
    ```python
    from historykit._context_window import resolve_context_window

    resolve_context_window(None, 200_000, "model profile")  # ContextWindow(200000, 'model profile')
    resolve_context_window(32_000, 200_000, "model profile")  # ContextWindow(32000, 'explicit')
    resolve_context_window(None, None, "model profile")  # ContextWindow(128000, 'default')
    ```
"""

from __future__ import annotations

from dataclasses import dataclass

from historykit._tokens import DEFAULT_CONTEXT_WINDOW
from historykit.errors import InvalidArgumentError

MAX_CONTEXT_WINDOW = 1_000_000_000
"""The largest window (and token count a trigger takes) accepted: a thousand times the largest models
of today. Beyond it a number is a slip (`10**30`), and budgets computed from it mean nothing."""


@dataclass(frozen=True)
class ContextWindow:
    """A context window in tokens, and where it came from."""

    tokens: int
    source: str
    """`explicit`, `model profile`, `genai-prices` (Pydantic AI 1.x: the known-models table) or `default`."""


def check_context_window(value: object, name: str = "context_window") -> int | None:
    """`value` when it is `None` or a positive int; else an `InvalidArgumentError` (a `ValueError`)
    naming it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive int or None, got {value!r}")
    if value > MAX_CONTEXT_WINDOW:
        raise InvalidArgumentError(f"{name} must be at most {MAX_CONTEXT_WINDOW:,} tokens, got {value:,}")
    return value


def resolve_context_window(explicit: int | None, found: int | None, found_source: str) -> ContextWindow:
    """The explicit window, else the one the model gave (`found`, from `found_source`), else the default.

    A `found` value that is not a positive int (a profile with `None`, `0` or junk) counts as none.
    """
    if explicit is not None:
        return ContextWindow(explicit, "explicit")
    if isinstance(found, int) and not isinstance(found, bool) and found > 0:
        return ContextWindow(found, found_source)
    return ContextWindow(DEFAULT_CONTEXT_WINDOW, "default")
