"""The result of an evaluation: per-kind scores, per-call tokens and cost, and the probes lost.

Renders as tables in a terminal (rich) and as HTML in Jupyter; `to_dict()` is JSON-ready.

Example:
    ```python
    evaluation = evaluate(messages)
    evaluation.kinds[0].reachable_share     # recall: held or recoverable, over all calls
    evaluation.lost()                       # (probe, first call that lost it), in order
    ```
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from historykit.evaluation._judge import JudgedProbe, JudgeKindScore, judge_kind_scores
from historykit.evaluation._probes import KINDS, Probe
from historykit.evaluation._scoring import CallScore, KindScore, kind_scores

_Table = tuple[str, tuple[str, ...], list[tuple[str, ...]]]
"""A table to render: its title, its headers (none: the title is a note) and its rows."""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


@dataclass(frozen=True)
class Evaluation:
    """What one strategy kept of one transcript's probes, call by call."""

    name: str
    """The transcript (its path, or a name given)."""
    strategy: str
    """The pipeline's steps (or the anchor's name)."""
    window: int
    probes: tuple[Probe, ...]
    calls: tuple[CallScore, ...]
    judged: tuple[JudgedProbe, ...] = ()
    """The judge's answers (`evaluate(judge=...)`), one per probe asked; empty without a judge."""

    @property
    def judge_kinds(self) -> tuple[JudgeKindScore, ...]:
        """Per kind, the judge's answers with the view and with the full history (`KINDS` order)."""
        return judge_kind_scores(self.probes, self.judged)

    @property
    def kinds(self) -> tuple[KindScore, ...]:
        """Per kind, over every call (`KINDS` order)."""
        return kind_scores(self.probes, self.calls)

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.calls)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.calls)

    def lost(self) -> list[tuple[Probe, int]]:
        """Each probe lost at some call, with the first call that lost it, in probe order."""
        first: dict[int, int] = {}
        for c in self.calls:
            for number in c.lost:
                first.setdefault(number, c.call)
        return [(self.probes[n], call) for n, call in sorted(first.items())]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what `historykit eval --json` prints."""
        return {
            "name": self.name,
            "strategy": self.strategy,
            "window": self.window,
            "tokens": self.tokens,
            "cost": round(self.cost, 1),
            "kinds": {
                k.kind: {
                    "probes": k.probes,
                    "scored": k.scored,
                    "held": k.held,
                    "recoverable": k.recoverable,
                    "reachable_share": k.reachable_share,
                    "worst_call": k.worst,
                }
                for k in self.kinds
            },
            "calls": [
                {
                    "call": c.call,
                    "message": c.point,
                    "tokens": c.tokens,
                    "reused": c.reused,
                    "cost": round(c.cost, 1),
                    "scored": c.scored,
                    "held": c.held,
                    "recoverable": c.recoverable,
                    "lost": list(c.lost),
                }
                for c in self.calls
            ],
            "lost": [
                {
                    "kind": p.kind,
                    "question": p.question,
                    "answer": list(p.needles),
                    "first_lost_at_call": call,
                }
                for p, call in self.lost()
            ],
            **({"judge": self._judge_dict()} if self.judged else {}),
        }

    def _judge_dict(self) -> dict[str, Any]:
        return {
            "kinds": {
                k.kind: {
                    "asked": k.asked,
                    "view_correct": k.view_correct,
                    "full_correct": k.full_correct,
                    "held_by_matching": k.matched,
                    "errors": k.errors,
                }
                for k in self.judge_kinds
            },
            "probes": [
                {
                    "kind": self.probes[j.probe].kind,
                    "call": j.call,
                    "question": j.question,
                    "expected": list(j.expected),
                    "matching": j.matched,
                    "view_answer": j.view_answer,
                    "view_correct": j.view_correct,
                    "full_answer": j.full_answer,
                    "full_correct": j.full_correct,
                    "view_error": j.view_error,
                    "full_error": j.full_error,
                }
                for j in self.judged
            ],
        }

    def _tables(self, lost_shown: int) -> list[_Table]:
        kinds: _Table = (
            f"{self.name}: {self.strategy}, window {self.window:,}: {len(self.calls)} calls, "
            f"{self.tokens:,} input tokens, cost {self.cost:,.0f}",
            ("kind", "probes", "scored", "held", "+ recoverable", "worst call"),
            [
                (
                    k.kind,
                    f"{k.probes:,}",
                    f"{k.scored:,}",
                    _pct(k.held_share),
                    _pct(k.reachable_share),
                    _pct(k.worst),
                )
                for k in self.kinds
            ],
        )
        calls: _Table = (
            "per call (held or recoverable / scored)",
            ("call", "message", "tokens", "cached", "cost", *KINDS),
            [
                (
                    str(c.call),
                    str(c.point),
                    f"{c.tokens:,}",
                    _pct(c.reused / c.tokens if c.tokens else None),
                    f"{c.cost:,.0f}",
                    *(f"{c.held[k] + c.recoverable[k]}/{c.scored[k]}" if c.scored[k] else "-" for k in KINDS),
                )
                for c in self.calls
            ],
        )
        lost = self.lost()
        rows: list[tuple[str, ...]] = [
            (p.kind, str(call), " | ".join(p.needles), p.question) for p, call in lost[:lost_shown]
        ]
        more = f" (the first {lost_shown} of {len(lost)})" if len(lost) > lost_shown else ""
        lost_table: _Table = (
            f"probes lost{more}" if lost else "no probe lost",
            ("kind", "first lost at call", "answer", "what") if lost else (),
            rows,
        )
        tables = [kinds, calls, lost_table]
        if self.judged:
            tables.append(
                (
                    "judge: each probe's question asked with the view and with the full history, at "
                    "the last call scoring it",
                    (
                        "kind",
                        "asked",
                        "right with view",
                        "right with full history",
                        "held (matching)",
                        "errors",
                    ),
                    [
                        (
                            k.kind,
                            str(k.asked),
                            _pct(k.view_share),
                            _pct(k.full_share),
                            _pct(k.matched / k.asked if k.asked else None),
                            str(k.errors),
                        )
                        for k in self.judge_kinds
                    ],
                )
            )
        return tables

    def render(self, *, per_call: bool = True, lost_shown: int = 20) -> Any:
        """A rich renderable: the kinds table, the per-call table (unless `per_call` is false), and
        the first `lost_shown` probes lost."""
        from rich import box
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        out: list[Any] = []
        for n, (title, headers, rows) in enumerate(self._tables(lost_shown)):
            if n == 1 and not per_call:
                continue
            out.append(Text(title, style="bold"))
            if not headers:
                out.append(Text(""))
                continue
            table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
            for header in headers:
                wide = header in ("answer", "what")
                table.add_column(
                    header, justify="left" if wide or header == "kind" else "right", overflow="fold"
                )
            for row in rows:
                # Answers come from the transcript: plain text, never markup.
                table.add_row(*(Text(cell) for cell in row))
            out.append(table)
        return Group(*out)

    def __rich__(self) -> Any:
        return self.render()

    def _repr_html_(self) -> str:
        parts = []
        for title, headers, rows in self._tables(20):
            parts.append(f"<p><b>{html.escape(title)}</b></p>")
            if headers:
                head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
                body = "".join(
                    "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
                )
                parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        return "<div>" + "".join(parts) + "</div>"
