"""How full the context window is, and the warnings when it gets too full.

Every `Report` carries the used fraction of the window (`report.used_fraction`: what the call sends,
over the window; `used_fraction_before`: the history the pipeline was given). Each `Pipeline` has a
`UsageMonitor` that turns its reports into warnings:

- `near-limit`: what a call sends crossed the warn mark (`warn_at`, a fraction of the window; the
  default pipeline's preset sets it, 0.9 by default) and this call compacted nothing;
- `not-freed`: the call compacted, and what it sends is still over the warn mark;
- `over-window`: what the call sends is over the context window once every processor has run: the
  provider will likely refuse it (historykit's integrations then compact and retry once).

A warning is given once per crossing: a conversation whose calls stay over a mark is warned once,
and again only after it went back under it and crossed again. The level is kept with the
conversation (`historykit._conversations`, the call's `conversation=` or the integration's key), so
one pipeline serves many; a call that names no conversation is judged on its own. Each warning is
logged on the `historykit` logger at WARNING level, added to the call's report (`report.warnings`),
passed to `on_warning` when given, and recorded as an OpenTelemetry span event
(`historykit._telemetry`). The pipeline is the one that emits them: the integrations only pass
reports on.

Example:
    ```python
    import historykit

    warned = []
    pipeline = historykit.default_pipeline(preset="chainreview", on_warning=warned.append)
    result = pipeline.run(messages, context_window=32_000)
    result.report.used_fraction    # e.g. 0.42: what the call sends is 42% of the window
    result.report.warnings         # the warnings this call gave (usually none)
    ```
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from historykit.errors import ArgumentTypeError, InvalidArgumentError

if TYPE_CHECKING:
    from historykit._conversations import ConversationState
    from historykit._pipeline import Report


logger = logging.getLogger("historykit")

WarningKind = Literal["near-limit", "not-freed", "over-window"]
"""Why a `UsageWarning` was given: `near-limit` (over the warn mark, nothing compacted),
`not-freed` (compacted, and still over the warn mark), `over-window` (over the context window)."""


@dataclass(frozen=True)
class UsageWarning:
    """A call that crossed a warn mark or that compaction could not bring under the window."""

    kind: WarningKind
    """`near-limit`, `not-freed` or `over-window` (see the module documentation)."""
    tokens: int
    """What the call sends, in tokens (the report's `tokens_after`)."""
    context_window: int
    """The window the call budgeted for."""
    mark: float
    """The fraction of the window that was crossed: the warn mark, or 1.0 for the window itself."""
    message: str
    """The sentence logged, for people."""

    @property
    def used_fraction(self) -> float:
        """What the call sends, as a fraction of the window."""
        return self.tokens / self.context_window


_BELOW, _NEAR, _OVER = 0, 1, 2


class UsageMonitor:
    """Turns a pipeline's reports into warnings, once per crossing per conversation.

    Example:
        ```python
        monitor = UsageMonitor(warn_at=0.9, on_warning=print)
        warnings = monitor.check(report, pipeline.conversations.get("user-42"))  # () unless it crossed
        ```
    """

    def __init__(
        self, warn_at: float | None = None, on_warning: Callable[[UsageWarning], None] | None = None
    ) -> None:
        if warn_at is not None and (
            isinstance(warn_at, bool) or not isinstance(warn_at, (int, float)) or not 0 < warn_at <= 1
        ):
            raise InvalidArgumentError(f"warn_at must be a fraction in (0, 1] or None, got {warn_at!r}")
        if on_warning is not None and not callable(on_warning):
            raise ArgumentTypeError(
                f"on_warning must be a callable taking a UsageWarning, got {on_warning!r}"
            )
        self.warn_at = warn_at
        """Warn when what a call sends crosses this fraction of the window; `None`: only over it."""
        self.on_warning = on_warning
        """Called with each warning, after it is logged."""

    def check(self, report: Report, conversation: ConversationState) -> tuple[UsageWarning, ...]:
        """The warnings of the call `report` describes, given the state of its `conversation` (which
        keeps the level reached); each is logged and passed to `on_warning`."""
        window = report.context_window
        tokens = report.tokens_after
        if tokens > window:
            level = _OVER
        elif self.warn_at is not None and tokens > window * self.warn_at:
            level = _NEAR
        else:
            level = _BELOW
        previous, conversation.usage_level = conversation.usage_level, level
        if level <= previous:
            return ()
        warning = self._warning(report, level)
        logger.warning("%s", warning.message)
        if self.on_warning is not None:
            self.on_warning(warning)
        return (warning,)

    def _warning(self, report: Report, level: int) -> UsageWarning:
        window, tokens = report.context_window, report.tokens_after
        used = f"{tokens:,} tokens, {tokens / window:.0%} of the {window:,}-token window"
        if level == _OVER:
            return UsageWarning(
                "over-window",
                tokens,
                window,
                1.0,
                f"historykit: the call sends {used} after every processor ran: compaction could not "
                "free enough, and the provider will likely refuse it",
            )
        mark = self.warn_at
        assert mark is not None  # _NEAR needs a warn mark
        if report.changed:
            return UsageWarning(
                "not-freed",
                tokens,
                window,
                mark,
                f"historykit: the call sends {used} after compacting: still over the warn mark ({mark:.0%})",
            )
        return UsageWarning(
            "near-limit",
            tokens,
            window,
            mark,
            f"historykit: the call sends {used}: over the warn mark ({mark:.0%})",
        )
