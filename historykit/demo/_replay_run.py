"""What one framework's replay of the demo did, and the names it stores it under."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from historykit.pipeline import Report
from historykit.testing import Call

DEFAULT_WINDOW = 10_000
"""The demo's context window: the sample's raw history grows to more than twice this."""
THREAD_IDS = {"pydantic-ai": "demo-pydantic-ai", "langgraph": "demo-langgraph"}
"""The conversation / thread ids the demo writes (each run replaces the previous run's)."""


@dataclass
class ReplayRun:
    """One framework's replay of the recording, and what it stored."""

    framework: str
    """`Pydantic AI` or `LangGraph`."""
    thread_id: str
    calls: list[Call]
    reports: list[Report]
    """The pipeline's report of every model call, in order."""
    answer: str
    """The agent's final answer (the last turn's)."""
    seconds: float
    transcript: Any = None
    """What the store kept (`historykit.checkpointers.Transcript`), `None` without persistence."""
    history: int = 0
    """Messages in the stored current history (the conversation, or the graph state)."""
    notes: list[str] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return sum(c.sent for c in self.calls)

    @property
    def reused(self) -> int:
        return sum(c.reused for c in self.calls)

    @property
    def compactions(self) -> dict[str, int]:
        """Compactions the pipeline reported, by strategy (`summarize`, `truncate`)."""
        out: dict[str, int] = {}
        for report in self.reports:
            for marker in report.markers:
                out[marker.strategy] = out.get(marker.strategy, 0) + 1
        return out


def collecting(on_report: Callable[[Report], None] | None) -> tuple[list[Report], Callable[[Report], None]]:
    """A list of reports, and the `on_report` callback that appends to it, then calls `on_report`."""
    reports: list[Report] = []

    def report(r: Report) -> None:
        reports.append(r)
        if on_report is not None:
            on_report(r)

    return reports, report
