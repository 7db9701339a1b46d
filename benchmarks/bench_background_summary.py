"""Background summaries: the latency they take off the call that triggers a compaction.

An agent loop is replayed call by call in persistent mode through `Pipeline.arun` (as the
framework glue drives it), with the agent's work between two calls simulated by an
`asyncio.sleep` (the model call and the tools: `--work`, 0.3 s). The summarizer is the extractive
one behind an `asyncio.sleep` (`--delay`, 0.2 s: a fast LLM). Each configuration runs the same
history twice: `Summarize(...)` (the foreground: the anchor) and `Summarize(..., background_at=)`.

Printed per configuration: the median (and mean) latency of the triggering calls (those that wrote
a summary) and the median of the other calls, how many triggering calls found their summary done in the
background, the summarizer calls made, and the ratio background / foreground of the triggering
calls' latency. Both runs must send the same views (checked; the script fails otherwise).

Histories: a generated agent loop of file reads of uneven size (`--calls`), and with `--corpus`
the largest session of `corpus/`.

Run: `.venv/bin/python benchmarks/bench_background_summary.py` (about a minute; `--help` for options).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart
from historykit._pipeline import Pipeline
from historykit._view import request_points
from historykit.formats import read_chat_jsonl
from historykit.processors._summarize import Summarize
from historykit.processors._summarizers import ExtractiveSummarizer
from historykit.processors._trigger import Trigger

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def generated_history(calls: int) -> list[Message]:
    """A file-reading agent loop: a task, then `calls` call/result pairs of 30-120 lines."""
    messages = [Message.system("You are a coding agent."), Message.user("Read the project and fix the bug.")]
    for step in range(calls):
        call_id = f"call_{step}"
        path = f"src/module_{step % 97}.py"
        messages.append(
            Message(
                "assistant",
                (TextPart(f"Reading {path}."), ToolCallPart(call_id, "Read", {"file_path": path})),
            )
        )
        body = "\n".join(f"    line {j}: value = compute({j}, {step})" for j in range(30 + (step * 37) % 90))
        messages.append(Message("tool", (ToolResultPart(call_id, "Read", body),)))
    return messages


def _when() -> datetime:
    return datetime(2026, 1, 1, tzinfo=timezone.utc)


class SlowSummarizer:
    """The extractive summary after `delay` seconds, as an LLM would take; counts its calls."""

    model_name = "slow-extractive"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0
        self.inner = ExtractiveSummarizer()

    async def __call__(self, messages: Sequence[Message]) -> str:
        self.calls += 1
        await asyncio.sleep(self.delay)
        return self.inner(messages)


@dataclass
class Run:
    views: list[list[Message]]
    triggering: list[float]
    """Seconds of each call that wrote a summary."""
    others: list[float]
    from_background: int
    """Triggering calls whose summary was written in the background."""
    summarizer_calls: int


async def replay(
    history: list[Message],
    window: int,
    fraction: float,
    background_at: float | None,
    delay: float,
    work: float,
) -> Run:
    summarizer = SlowSummarizer(delay)
    # A fixed clock: the markers' `created_at` would be the only difference between the runs.
    summarize = Summarize(
        trigger=Trigger(max_fraction=fraction),
        summarizer=summarizer,
        background_at=background_at,
        clock=_when,
    )
    pipeline = Pipeline([summarize])
    carried: list[Message] = []
    last = 0
    run = Run([], [], [], 0, 0)
    for point in request_points(history):
        started = time.perf_counter()
        result = await pipeline.arun(carried + history[last:point], window)
        elapsed = time.perf_counter() - started
        carried, last = list(result.messages), point
        run.views.append(carried)
        if result.report.markers:
            run.triggering.append(elapsed)
            details = [d for s in result.report.steps for d in s.notes.details]
            run.from_background += any("written in the background" in d for d in details)
        else:
            run.others.append(elapsed)
        await asyncio.sleep(work)  # the agent works: the model call, the tools
    run.summarizer_calls = summarizer.calls
    return run


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms" if values else "-"


def _mean_ms(values: list[float]) -> str:
    return f"{statistics.fmean(values) * 1000:.1f} ms" if values else "-"


async def bench(name: str, history: list[Message], window: int, args: argparse.Namespace) -> None:
    foreground = await replay(history, window, args.fraction, None, args.delay, args.work)
    background = await replay(history, window, args.fraction, args.background_at, args.delay, args.work)
    if foreground.views != background.views:
        raise SystemExit(f"{name}: the background run sent other views than the foreground run")
    print(f"\n{name}: {len(request_points(history))} calls, window {window:,}, trigger {args.fraction:.0%}")
    print(
        f"  {'':22} {'triggering call':>15} {'(mean)':>10} {'other calls':>12} "
        f"{'from background':>16} {'summarizer calls':>17}"
    )
    for label, run in (
        ("foreground (anchor)", foreground),
        (f"background_at={args.background_at}", background),
    ):
        print(
            f"  {label:22} {_ms(run.triggering):>15} {_mean_ms(run.triggering):>10} {_ms(run.others):>12} "
            f"{run.from_background:>9} of {len(run.triggering):<4} {run.summarizer_calls:>17}"
        )
    if foreground.triggering and background.triggering:
        ratio = statistics.median(background.triggering) / statistics.median(foreground.triggering)
        saved = statistics.median(foreground.triggering) - statistics.median(background.triggering)
        print(
            f"  triggering-call latency, background / foreground: {ratio:.2f} "
            f"(median {saved * 1000:.0f} ms saved)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=60, help="model calls of the generated history")
    parser.add_argument("--window", type=int, default=16_000, help="context window of the generated history")
    parser.add_argument("--fraction", type=float, default=0.8, help="Summarize's max_fraction")
    parser.add_argument("--background-at", type=float, default=0.5, help="Summarize's background_at")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds each summary takes")
    parser.add_argument("--work", type=float, default=0.3, help="seconds the agent works between two calls")
    parser.add_argument(
        "--corpus", action="store_true", help="also the largest corpus session (window 60,000)"
    )
    args = parser.parse_args()
    print(f"summarizer delay {args.delay * 1000:.0f} ms; agent work between calls {args.work * 1000:.0f} ms")
    asyncio.run(bench("generated agent loop", generated_history(args.calls), args.window, args))
    if args.corpus:
        path = max(CORPUS.glob("*.jsonl"), key=lambda p: p.stat().st_size)
        asyncio.run(bench(path.stem, read_chat_jsonl(path), 60_000, args))


if __name__ == "__main__":
    main()
