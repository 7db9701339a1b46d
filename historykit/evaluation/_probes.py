"""A probe: one thing an agent must still know at a model call, and the text that shows it does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProbeKind = Literal["recall", "artifacts", "continuation", "decisions"]
"""The four kinds of probe (Factory's taxonomy: recall, artifact, continuation, decision)."""

KINDS: tuple[ProbeKind, ...] = ("recall", "artifacts", "continuation", "decisions")
"""Every probe kind, in the order reports list them."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One fact the view sent at a call should still hold.

    A probe holds at a call when every one of its `needles` is in the view sent (compared
    normalised: `historykit.evaluation.normalise`); it is scored at each call whose input
    reaches past `appeared` and does not reach past `until`.

    Example:
        ```python
        from historykit.evaluation import Probe

        probe = Probe("recall", ("src/app.py",), appeared=3, source=3,
                      question="Which path did message 3 give that the agent used at message 5?")
        ```
    """

    kind: ProbeKind
    """Which of the four kinds (`KINDS`)."""
    needles: tuple[str, ...]
    """The answer: texts that must all be in the view (normalised), e.g. a path and its change."""
    appeared: int
    """Index of the message from which on the answer is known: calls whose input holds this message
    (the call at assistant message `i` sees `messages[:i]`, so calls with `i > appeared`) score it."""
    source: int
    """Index of the message the answer comes from (a tool result, a user message, a tool call)."""
    question: str
    """The probe as a question a judge could ask, naming where its answer came from."""
    until: int | None = None
    """Index of the message that supersedes it (a newer request, plan or edit of the same file):
    calls whose input holds that message no longer score it. `None`: scored to the end."""

    def active_at(self, point: int) -> bool:
        """True when the call at message `point` (its input: `messages[:point]`) scores this probe."""
        return self.appeared < point and (self.until is None or self.until >= point)
