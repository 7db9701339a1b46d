"""The live display while a run replays: calls done, the context gauge, the raw history, each compaction."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.text import Text

from historykit._gauge import Gauge
from historykit._pipeline import Report, StepReport
from historykit.testing import Call


class _Display(Progress):
    """Calls done and the raw history as progress bars, with the public context gauge between them."""

    def __init__(self, gauge: Gauge, console: Console) -> None:
        self.gauge = gauge  # before Progress starts rendering
        super().__init__(
            TextColumn("{task.description:<18}"),
            BarColumn(bar_width=gauge.width, complete_style="cyan", finished_style="red"),
            TextColumn("{task.fields[label]}"),
            console=console,
        )

    def get_renderables(self) -> Any:
        # The tasks in the order they were added: the calls, then the raw history.
        tasks = self.tasks
        yield self.make_tasks_table(tasks[:1])
        yield self.gauge
        yield self.make_tasks_table(tasks[1:])


class LiveGauge:
    """The live display of one run: calls done, the context sent against the window (the public
    `historykit.Gauge`, fed the reports), the raw history."""

    def __init__(self, console: Console, title: str, calls: int, window: int, warn_at: float | None) -> None:
        self.console = console
        self.window = window
        self.title = title
        # Lined up with the progress rows: their 18-character description and a column gap.
        self.context = Gauge(warn_at=warn_at, width=28, label="context sent", label_width=19, history=False)
        self.progress = _Display(self.context, console)
        self.calls: TaskID = self.progress.add_task("model calls", total=calls, label="")
        self.raw: TaskID = self.progress.add_task("without historykit", total=window, label="")
        self._pending: list[Report] = []

    def __enter__(self) -> LiveGauge:
        self.console.print(Text(self.title, style="bold"))
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def report(self, report: Report) -> None:
        # A call's report arrives before the model sees the call: it is shown with its call.
        self.context(report)
        self._pending.append(report)

    def call(self, call: Call) -> None:
        w = self.window
        total = int(self.progress.tasks[self.calls].total or 0)
        label = (
            f"{call.number} of {total}"
            if call.number <= total
            else f"{total} of {total} + {call.number - total}"
        )
        self.progress.update(self.calls, completed=min(call.number, total), label=label)
        if call.raw is not None:
            over = f" ({call.raw / w:.1f}x the window)" if call.raw > w else ""
            self.progress.update(self.raw, completed=min(call.raw, w), label=f"{call.raw:>6,} tokens{over}")
        for report in self._pending:
            for step in report.steps:
                if step.changed:
                    self.progress.console.print(_event(call.number, step))
        self._pending.clear()
        self.progress.refresh()


def _event(number: int, step: StepReport) -> Text:
    """One line announcing what a processor did at a call."""
    n = step.notes
    strategies = {m.strategy for m in n.markers}
    if n.markers and n.removed:
        kind = "summary" if strategies == {"summarize"} else "notice"
        what = f"{n.removed} messages -> 1 {kind}"
    elif step.processor == "ClearToolResults":
        what = f"{n.replaced} old tool output{'s' if n.replaced != 1 else ''} cleared"
    elif step.processor == "DedupeFileReads":
        what = f"{n.replaced} superseded file read{'s' if n.replaced != 1 else ''}"
    else:
        what = ", ".join(
            f"{count} {label}"
            for count, label in ((n.replaced, "replaced"), (n.removed, "removed"), (n.added, "added"))
            if count
        )
    line = Text(f"  call {number:>3}  ", style="dim")
    line.append(f"{step.processor:<17}", style="bold magenta" if n.markers else "yellow")
    line.append(f"{step.tokens_before:>6,} -> {step.tokens_after:>6,}  {what}")
    if n.markers:
        line.append(" + marker", style="magenta")
    return line
