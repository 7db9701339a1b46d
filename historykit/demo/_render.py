"""What the demo prints after the runs: the report, the stored threads, and where the database is."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from historykit._messages import Message, SummaryPart, TextPart, ToolCallPart, ToolResultPart
from historykit.demo._replay_run import THREAD_IDS, ReplayRun
from historykit.testing import Recording, sample_path
from historykit.testing._recording import message_text

CACHE_READ = 0.1
"""Price of an input token read from the provider's prompt cache, in base input-token prices."""
CACHE_WRITE = 1.25
"""Price of an input token that misses the cache (Anthropic charges 1.25x to write it to the cache)."""


def _sparkline(values: Sequence[int], window: int, top: int) -> Text:
    bars = "▁▂▃▄▅▆▇█"
    out = Text()
    for v in values:
        level = 0 if top <= 0 else min(len(bars) - 1, round(v / top * (len(bars) - 1)))
        out.append(bars[level], style="red" if v > window else "cyan")
    return out


def _cost(sent: int, reused: int) -> float:
    return CACHE_READ * reused + CACHE_WRITE * (sent - reused)


def _summary_table(recording: Recording, runs: Sequence[ReplayRun], window: int, raw: Sequence[int]) -> Table:
    # The raw history only ever grows: each call's input starts with the whole previous one.
    raw_total, raw_reused = sum(raw), sum(raw[:-1])
    # Calls the replay added to close a turn have no raw counterpart: compared, they are left out.
    recorded = [[c for c in r.calls if c.replayed] for r in runs]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("without historykit", justify="right")
    for run in runs:
        table.add_column(run.framework, justify="right")

    def share(part: float, whole: float) -> str:
        return f"{part / whole:.0%}" if whole else "-"

    sent = [sum(c.sent for c in calls) for calls in recorded]
    reused = [sum(c.reused for c in calls) for calls in recorded]
    rows: list[tuple[str, str, list[str]]] = [
        ("input tokens, all calls", f"{raw_total:,}", [f"{n:,}" for n in sent]),
        ("saved", "", [share(raw_total - n, raw_total) for n in sent]),
        (
            "largest call",
            f"{max(raw, default=0):,}",
            [f"{max((c.sent for c in calls), default=0):,}" for calls in recorded],
        ),
        (
            "calls over the window",
            str(sum(1 for v in raw if v > window)),
            [str(sum(1 for c in calls if c.sent > window)) for calls in recorded],
        ),
        (
            "prompt-cache hits (input)",
            share(raw_reused, raw_total),
            [share(r, n) for r, n in zip(reused, sent)],
        ),
        (
            "input cost, cache-priced*",
            f"{_cost(raw_total, raw_reused):,.0f}",
            [f"{_cost(n, r):,.0f}" for n, r in zip(sent, reused)],
        ),
        ("compactions", "0", [_compactions(r) for r in runs]),
        ("messages in history at end", str(len(recording.messages)), [str(r.history) for r in runs]),
        ("replay time", "", [f"{r.seconds:.1f} s" for r in runs]),
    ]
    for label, before, after in rows:
        table.add_row(label, before, *after)
    return table


def _compactions(run: ReplayRun) -> str:
    counts = run.compactions
    if not counts:
        return "0"
    total = sum(counts.values())
    if set(counts) == {"summarize"}:
        return f"{total} summaries" if total > 1 else "1 summary"
    return f"{total} (" + ", ".join(f"{n} {strategy}" for strategy, n in sorted(counts.items())) + ")"


def _processor_table(run: ReplayRun) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("processor", no_wrap=True)
    for header in ("calls", "tokens freed", "replaced", "removed", "added", "markers"):
        table.add_column(header, justify="right")
    tallies: dict[str, list[int]] = {}
    for report in run.reports:
        for step in report.steps:
            tally = tallies.setdefault(step.processor, [0] * 6)
            if not step.changed:
                continue
            n = step.notes
            freed = max(0, step.tokens_before - step.tokens_after)
            for i, value in enumerate((1, freed, n.replaced, n.removed, n.added, len(n.markers))):
                tally[i] += value
    for name, tally in tallies.items():
        table.add_row(name, *(f"{v:,}" for v in tally))
    return table


def _transcript_view(run: ReplayRun, width: int, edge: int = 2) -> Group:
    """The stored thread: its compaction markers, and the logged messages around each summary."""
    from collections import Counter

    from historykit._frameworks import adapter_for

    transcript = run.transcript
    assert transcript is not None  # only the runs that stored their thread are shown
    messages = transcript.logged()
    adapter = adapter_for(messages) if messages else None
    markers = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for header in ("marker", "logged at", "covers", "tokens before", "after", "strategy", "automatic"):
        markers.add_column(header, justify="left" if header == "strategy" else "right")
    # Where each compaction's message sits among the logged ones: after `at` originals and the
    # compactions logged before it. Summaries and truncations get a row; the many small edits a count.
    summaries: dict[int, int] = {}
    small: Counter[str] = Counter()
    for number, compaction in enumerate(transcript.compactions):
        m = compaction.marker
        if m.strategy not in ("summarize", "truncate", "pairwise_truncate"):
            small[m.strategy] += 1
            continue
        at = compaction.at + number
        summaries[at] = len(summaries) + 1
        markers.add_row(
            str(summaries[at]),
            f"message {at}",
            f"{m.covered_from}-{m.covered_to}",
            f"{m.tokens_before:,}",
            f"{m.tokens_after:,}",
            m.strategy,
            "yes" if m.automatic else "no",
        )
    if small:
        markers.caption = "and " + ", ".join(f"{n} {strategy}" for strategy, n in sorted(small.items()))
    shown = set(range(edge)) | set(range(len(messages) - edge, len(messages)))
    for index in summaries:
        shown |= {index - 1, index, index + 1}
    digits = len(str(len(messages)))
    lines: list[Text] = []
    previous = -1
    for index in sorted(i for i in shown if 0 <= i < len(messages)):
        if index > previous + 1:
            lines.append(Text(f"{'':>{digits}}  ... {index - previous - 1} more ...", style="dim"))
        native = messages[index]
        neutral = adapter.to_neutral([native]) if adapter is not None else []
        line = Text(f"{index:>{digits}}  ", style="dim")
        room = width - digits - 2
        if index in summaries:
            label = f"marker {summaries[index]}: "
            line.append(label, style="bold magenta")
            line.append(_one_line(native, neutral, room - len(label)), style="magenta")
        else:
            line.append(_one_line(native, neutral, room))
        lines.append(line)
        previous = index
    title = Text(
        f"{run.framework}, {run.thread_id!r}: {len(transcript.messages)} original messages and "
        f"{len(transcript.compactions)} written by compactions stored, {run.history} in the current history",
        style="bold",
    )
    return Group(title, markers, *lines)


def _one_line(native: Any, neutral: Sequence[Message], width: int) -> str:
    bits: list[str] = []
    for msg in neutral:
        for part in msg.parts:
            if isinstance(part, (TextPart, SummaryPart)) and part.text.strip():
                bits.append(part.text)
            elif isinstance(part, ToolCallPart):
                bits.append(f"calls {part.name}")
            elif isinstance(part, ToolResultPart):
                bits.append(f"{part.name or 'tool'} -> {part.content}")
            elif part.kind == "thinking":
                bits.append("(thinking)")
    text = " | ".join(" ".join(b.split()) for b in bits)
    line = f"{type(native).__name__:<13} {text}"
    return line if len(line) <= width else line[: max(0, width - 3)] + "..."


def _latest_summary(run: ReplayRun, lines: int = 18) -> Panel | None:
    if run.transcript is None or not run.transcript.compactions:
        return None
    from historykit._frameworks import adapter_for

    numbered = list(enumerate(run.transcript.compactions))
    found = [(n, c) for n, c in numbered if c.marker.strategy == "summarize"]
    if not found:
        return None
    number, last = found[-1]
    native = last.message
    text = "\n".join(message_text(m) for m in adapter_for([native]).to_neutral([native]))
    shown = text.splitlines()
    body = "\n".join(shown[:lines]) + (
        f"\n... ({len(shown) - lines} more lines)" if len(shown) > lines else ""
    )
    return Panel(
        Text(body),
        title=f"the latest summary, as the model reads it ({run.framework}, message {last.at + number})",
        title_align="left",
        border_style="magenta",
    )


def print_report(
    console: Console, recording: Recording, runs: Sequence[ReplayRun], window: int, raw: Sequence[int]
) -> None:
    console.print()
    console.rule("[bold]the report")
    console.print(
        Text(f"{recording.name}: {recording.model_calls} model calls, {window:,}-token window", style="bold")
    )
    console.print(_summary_table(recording, runs, window, raw))
    console.print(
        Text(
            f"* input tokens at the base price: cache hits at {CACHE_READ}x, the rest at {CACHE_WRITE}x "
            "(Anthropic's cache pricing). Each compaction edits the history, so the next call misses the "
            "cache from the edit on.",
            style="dim",
        )
    )
    added = max(sum(1 for c in r.calls if not c.replayed) for r in runs)
    if added:
        console.print(
            Text(
                f"Not counted above: {added} call(s) the replay added to close turns the recording left "
                "without a final answer.",
                style="dim",
            )
        )
    console.print()
    top = max([*raw, *(c.sent for r in runs for c in r.calls)], default=0)
    spark = Table(box=None, show_header=False, pad_edge=False)
    spark.add_column(style="dim", no_wrap=True)
    spark.add_column(no_wrap=True)
    spark.add_row("without historykit", _sparkline(raw, window, top))
    for run in runs:
        spark.add_row(run.framework, _sparkline([c.sent for c in run.calls], window, top))
    console.print(Text(f"context per model call (red: over the {window:,}-token window)", style="bold"))
    console.print(spark)
    if len(runs) == 2 and [c.sent for c in runs[0].calls] == [c.sent for c in runs[1].calls]:
        console.print(
            Text(
                "Both frameworks sent the same number of tokens at every call: the processors run on the "
                "same neutral history, whichever framework holds it.",
                style="dim",
            )
        )
    console.print()
    last = runs[-1]
    console.print(
        Text(
            f"what each processor did ({last.framework}; calls: the calls where it changed something)",
            style="bold",
        )
    )
    console.print(_processor_table(last))


def print_threads(console: Console, runs: Sequence[ReplayRun]) -> None:
    stored = [r for r in runs if r.transcript is not None]
    if not stored:
        return
    console.print()
    console.rule("[bold]the stored threads")
    console.print(
        Text(
            "transcript(thread_id): every message the thread ever had (compaction removed them from the "
            "history, not from the database), with the compaction markers.",
            style="dim",
        )
    )
    for run in stored:
        console.print(_transcript_view(run, console.width))
        console.print()
    panel = _latest_summary(stored[-1])
    if panel is not None:
        console.print(panel)
    answer = stored[-1].answer
    if answer:
        answer = answer if len(answer) <= 500 else answer[:497] + "..."
        console.print(Panel(Text(answer), title="the agent's final answer (replayed)", title_align="left"))


def print_where(console: Console, url: str, db_file: Path | None, args: argparse.Namespace) -> None:
    console.print()
    console.rule("[bold]where it is")
    target = _relative(db_file) if db_file is not None else shown_url(url)
    console.print(
        Text.assemble("database: ", (str(db_file) if db_file is not None else shown_url(url), "bold"))
    )
    session = _relative(sample_path()) if args.session is None else str(args.session)
    command = _command()
    # Only the threads this run stored: `--only` replays one framework.
    ran = [args.only] if args.only else ["langgraph", "pydantic-ai"]
    console.print(
        Text(
            "Look inside with the historykit command:\n"
            f"  {command} threads {target}\n"
            f"  {command} show {target} {THREAD_IDS[ran[0]]}\n"
            f"  {command} export {target} {THREAD_IDS[ran[-1]]} -o thread.json\n"
            f"  {command} analyze {session} --window {args.window}"
        ),
        soft_wrap=True,  # commands stay whole, to copy and paste, whatever the width
    )


def _command() -> str:
    """How to call the `historykit` command from here: by name when it is this environment's on PATH."""
    script = Path(sys.executable).parent / "historykit"
    found = shutil.which("historykit")
    if not script.exists() or (found is not None and Path(found).resolve() == script.resolve()):
        return "historykit"
    return _relative(script)


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def shown_url(url: str) -> str:
    """The URL without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url
