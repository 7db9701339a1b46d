"""What one framework's replay of the demo did, and the names it stores it under."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from historykit._pipeline import Report
from historykit.testing import Call

if TYPE_CHECKING:
    from historykit.checkpointers import Transcript

DEFAULT_WINDOW = 10_000
"""The demo's context window: the sample's raw history grows to more than twice this."""
THREAD_IDS = {"pydantic-ai": "demo-pydantic-ai", "langgraph": "demo-langgraph"}
"""The conversation / thread ids the demo writes (each run replaces the previous run's)."""


@dataclass
class ReplayRun:
    """One framework's replay of the recording, and what it stored.

    Example:
        ```python
        import historykit
        from historykit.demo import run_langgraph
        from historykit.testing import Recording

        run = run_langgraph(Recording.load(), historykit.default_pipeline())
        run.sent, run.reused, run.compactions    # tokens over all calls, their prompt-cache reuse
        ```
    """

    framework: str
    """`Pydantic AI` or `LangGraph`."""
    thread_id: str
    """The conversation (Pydantic AI) or thread (LangGraph) id the run was stored under."""
    calls: list[Call]
    """Every model call, as the replayed model measured it."""
    reports: list[Report]
    """The pipeline's report of every model call, in order."""
    answer: str
    """The agent's final answer (the last turn's)."""
    seconds: float
    """How long the replay took."""
    transcript: Transcript | None = None
    """What the store kept (`historykit.checkpointers.Transcript`), `None` without persistence."""
    history: int = 0
    """Messages in the stored current history (the conversation, or the graph state)."""
    notes: list[str] = field(default_factory=list)
    """What the run could not do here (such as persisting without Pydantic AI 2.x)."""

    @property
    def sent(self) -> int:
        """Tokens sent over all calls."""
        return sum(c.sent for c in self.calls)

    @property
    def reused(self) -> int:
        """Tokens over all calls that repeated the previous call's input from its start."""
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
