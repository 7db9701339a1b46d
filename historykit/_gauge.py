"""The context gauge: how full the window is, call by call, in a terminal and in Jupyter.

`Gauge` is an `on_report` callback: give it to a pipeline or an integration and it keeps every
call's report. It shows the latest call as a bar of what the call sends against the window (the
warn mark drawn on it; the bar turns yellow past the mark and red over the window), the history the
pipeline was given beside it, and the used fraction of the recent calls as a sparkline, with the
compactions counted. It renders as text (`str(gauge)`), as a rich renderable (`console.print(gauge)`,
or live: each report printed as it arrives with `Gauge(console=Console())`), and as HTML in
Jupyter (`display(gauge)`, or the gauge as a cell's last expression).

Example:
    ```python
    import historykit
    from historykit import Gauge
    from historykit.plugins.pydantic_ai import HistoryKit

    gauge = Gauge(warn_at=0.9)
    kit = HistoryKit(historykit.default_pipeline(preset="chainreview"), on_report=gauge)
    ...                  # run the agent
    print(gauge)         # the bundled sample, preset="chainreview", a 10,000-token window:
    # sent     ██████████▍················│··   35%  3,482 / 10,000 tokens
    # given    ██████████▍················│··   35%  given to the pipeline; window: model profile
    # calls    ▄▄▄▅▆▆▃▄▄▄▄▆▃▄▅▅▅▂▂▂▂▂▂▂▃▃▃▃▃▃  53 calls, 1 compaction, peak 68%
    ```
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from historykit._pipeline import Report
from historykit.errors import ArgumentTypeError, InvalidArgumentError

_EIGHTHS = " ▏▎▍▌▋▊▉"
_SPARKS = "▁▂▃▄▅▆▇█"


@dataclass
class Gauge:
    """How full the context window is: the latest call as a bar, the recent calls as a sparkline.

    Example:
        ```python
        from rich.console import Console
        from historykit import Gauge

        gauge = Gauge(warn_at=0.9)                   # keeps the reports; print or display it
        live = Gauge(console=Console(), history=False)  # prints one gauge line per report
        pipeline = historykit.default_pipeline(on_report=gauge)
        ```
    """

    warn_at: float | None = None
    """The warn mark drawn on the bar (a fraction of the window); past it the bar turns yellow."""
    width: int = 30
    """Width of the bar and of the sparkline, in characters."""
    label_width: int = 9
    """Width of the labels before the bars (to line them up with other rows of a display)."""
    label: str = "sent"
    """The label of the bar of what the call sends."""
    history: bool = True
    """Show the bar of the history the pipeline was given and the sparkline of the recent calls."""
    console: Any = None
    """A `rich.console.Console` that each report's gauge is printed to as it arrives; `None`: the
    gauge only keeps the reports (print it, or display it in Jupyter)."""
    reports: list[Report] = field(default_factory=list, init=False, repr=False)
    """Every report received, in order."""

    def __post_init__(self) -> None:
        if self.warn_at is not None and (
            isinstance(self.warn_at, bool)
            or not isinstance(self.warn_at, (int, float))
            or not 0 < self.warn_at <= 1
        ):
            raise InvalidArgumentError(f"warn_at must be a fraction in (0, 1] or None, got {self.warn_at!r}")
        for name in ("width", "label_width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive int, got {value!r}")

    def __call__(self, report: Report) -> None:
        """Keep `report` (the `on_report` seam); print the gauge when a console was given."""
        if not isinstance(report, Report):
            raise ArgumentTypeError(f"a Gauge takes historykit Reports, got a {type(report).__qualname__}")
        self.reports.append(report)
        if self.console is not None:
            self.console.print(self)

    @property
    def last(self) -> Report | None:
        """The latest report, `None` before the first."""
        return self.reports[-1] if self.reports else None

    # --- what is shown ------------------------------------------------------------------------

    def _bar(self, fraction: float) -> str:
        """A bar `width` long, filled to `fraction` (eighths of a cell), the warn mark drawn as `│`."""
        cells = min(max(fraction, 0.0), 1.0) * self.width
        full = int(cells)
        partial = _EIGHTHS[int((cells - full) * 8)] if full < self.width else ""
        bar = list("█" * full + partial.strip() + "·" * self.width)[: self.width]
        if self.warn_at is not None:
            mark = min(self.width - 1, int(self.warn_at * self.width))
            if bar[mark] == "·":
                bar[mark] = "│"
        return "".join(bar)

    def _style(self, fraction: float) -> str:
        if fraction > 1:
            return "bold red"
        if self.warn_at is not None and fraction > self.warn_at:
            return "yellow"
        return "cyan"

    def _recent(self) -> Sequence[Report]:
        return self.reports[-self.width :]

    def _rows(self) -> list[tuple[str, str, str, str]]:
        """(label, bar or sparkline, figures, style) for each line of the gauge."""
        report = self.last
        if report is None:
            return [(self.label, "·" * self.width, "no call yet", "dim")]
        used = report.used_fraction
        rows = [
            (
                self.label,
                self._bar(used),
                f"{used:>4.0%}  {report.tokens_after:,} / {report.context_window:,} tokens",
                self._style(used),
            )
        ]
        if not self.history:
            return rows
        given = report.used_fraction_before
        rows.append(
            (
                "given",
                self._bar(given),
                f"{given:>4.0%}  given to the pipeline; window: {report.window_source}",
                "dim",
            )
        )
        recent = self._recent()
        sparks = "".join(_SPARKS[min(len(_SPARKS) - 1, int(r.used_fraction * len(_SPARKS)))] for r in recent)
        compactions = sum(len(r.markers) for r in self.reports)
        peak = max(r.used_fraction for r in self.reports)
        rows.append(
            (
                "calls",
                sparks.ljust(self.width),
                f"{len(self.reports)} call{'s' if len(self.reports) != 1 else ''}, "
                f"{compactions} compaction{'s' if compactions != 1 else ''}, peak {peak:.0%}",
                "cyan",
            )
        )
        return rows

    def _warnings(self) -> list[str]:
        report = self.last
        return [] if report is None else [f"warning ({w.kind}): {w.message}" for w in report.warnings]

    def __str__(self) -> str:
        lines = [f"{label:<{self.label_width}}{bar}  {figures}" for label, bar, figures, _ in self._rows()]
        return "\n".join(lines + self._warnings())

    def __rich__(self) -> Any:
        from rich.text import Text

        text = Text()
        for i, (label, bar, figures, style) in enumerate(self._rows()):
            if i:
                text.append("\n")
            text.append(f"{label:<{self.label_width}}")
            text.append(bar, style=style)
            text.append(f"  {figures}")
        for line in self._warnings():
            text.append("\n" + line, style="bold yellow")
        return text

    def _repr_html_(self) -> str:
        def bar(fraction: float, color: str) -> str:
            mark = (
                f'<div style="position:absolute;left:{self.warn_at:.1%};top:0;bottom:0;'
                'border-left:2px solid #d90"></div>'
                if self.warn_at is not None
                else ""
            )
            return (
                '<div style="position:relative;display:inline-block;vertical-align:middle;width:20em;'
                'height:1em;background:#eee">'
                f'<div style="width:{min(fraction, 1.0):.1%};height:100%;background:{color}"></div>'
                f"{mark}</div>"
            )

        colors = {"cyan": "#29b6d8", "yellow": "#e6b800", "bold red": "#d33", "dim": "#aaa"}
        rows = []
        for label, shown, figures, style in self._rows():
            report = self.last
            if report is not None and label in (self.label, "given"):
                fraction = report.used_fraction if label == self.label else report.used_fraction_before
                cell = bar(fraction, colors[style])
            else:
                cell = f"<code>{html.escape(shown)}</code>"
            rows.append(
                f"<tr><td>{html.escape(label)}</td><td>{cell}</td><td>{html.escape(figures)}</td></tr>"
            )
        warnings = "".join(f'<li style="color:#b80">{html.escape(w)}</li>' for w in self._warnings())
        return f"<div><table>{''.join(rows)}</table>{f'<ul>{warnings}</ul>' if warnings else ''}</div>"
