"""Compaction quality x cost: what each strategy keeps of the corpus sessions' probes, and what it costs.

Every corpus session is replayed call by call (persistent mode: a strategy's output carries
forward) at each window, and the view each call sent is scored against the session's probes
(`historykit.evaluation`: recall, artifacts, continuation, decisions; a probe is scored at every
call after it appeared, against what the full history had then). Cost prices each call's input as
a provider prompt cache does: the previous call's prefix at 0.1 per token, the rest at 1.25
(`historykit.evaluation._cost`, the prices of `bench_replay.py`).

Strategies, none of which calls an LLM:

- `full context`: every call sends the raw history (the baseline every probe is scored against, so
  it keeps 100% by construction, at any size: over the window too);
- `historykit <preset>`: `historykit.default_pipeline(preset=...)`, its extractive summarizer, run
  through `historykit.evaluation.evaluate` (the `historykit analyze` replay); `+ recall`: the same
  with the recall tool installed, so cleared outputs count as recoverable through their handles;
- `langchain:ContextEditing`: LangChain v1 `ContextEditingMiddleware(ClearToolUsesEdit(trigger=0.8 x
  window, keep=3))`, driven as `create_agent` drives it (`anchors/langchain_anchors.py`);
- `langchain:trim_messages`: LangChain's `trim_messages` (a sliding window by tokens) in a
  `before_model` middleware, as LangChain v1's recipe runs it: past 0.8 x window, the first user
  message and the latest whole messages within 0.5 x window;
- `harness:ClearToolResults`, `harness:DeduplicateFileReads`, `harness:SlidingWindow`
  (`SlidingWindowCompaction(max_tokens=0.8 x window, keep_tokens=0.5 x window)`, the first user
  message kept, its default) and `harness:Tiered (extractive)` (`TieredCompaction` down to 0.8 x
  window through dedupe, clearing and the sliding window: its tiers that need no LLM):
  pydantic-ai-harness 0.62, in its own environment (`benchmarks/.envs/harness`, created on first
  use, as `bench_replay.py` does).

LLM summarizers (harness `TieredCompaction`'s summarizing tier, LangChain `SummarizationMiddleware`)
are left out: the benchmarks run them on fake models whose summaries say nothing, which a quality
score would only measure as loss. Each anchor's probes are extracted from the session as that
framework holds it (Pydantic AI groups a turn's tool results into one request), so their counts may
differ by a few from historykit's.

Generated long sessions (`--generated N`, 2 by default): `tests/evaluation/long_sessions.py`
writes N seeded sessions of `--generated-calls` model calls each (1,500 by default: many file
edits, failing test runs and the fix that follows, todo plans, a new request now and then), scored
beside the corpus; the table names them `generated-<seed>`.

`--write-docs` puts each window's Markdown table, with the command that made it, between that
window's `<!-- quality-table:WINDOW:start/end -->` markers in `benchmarks/README.md` and
`docs/quality.md` (generated, not typed).

Run: `make bench-quality` (the table, `benchmarks/results/quality.json` and the Pareto plot
`docs/assets/quality.png`: quality, the mean over the kinds, against cost relative to the
full context), or `python benchmarks/bench_quality.py` (each window in a process of its own, side
by side: about 70 minutes on 2 cores, LangChain's `ContextEditingMiddleware` the longest); `--help`
for the options. The table and the command are in `docs/quality.md`.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import shlex
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchors import harness
from anchors import langchain_anchors as lc
from replay import call_points, load_sessions

import historykit
from historykit._messages import Message
from historykit._pipeline import Pipeline
from historykit._tokens import TokenCounter
from historykit.evaluation import KINDS, CallScore, Evaluation, ViewScorer, evaluate, extract_probes
from historykit.processors._default_pipeline import TRIGGER_PRESETS

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # the generator lives in tests/
from tests.evaluation.long_sessions import long_session

FULL = "full context"
PRESETS = tuple(f"historykit {name}" for name in TRIGGER_PRESETS)
RECALL = "historykit default + recall"
LANGCHAIN = {"langchain:ContextEditing": "context-editing", "langchain:trim_messages": "trim"}
HARNESS = {
    "harness:ClearToolResults": "clear",
    "harness:DeduplicateFileReads": "dedupe",
    "harness:SlidingWindow": "sliding",
    "harness:Tiered (extractive)": "tiered-extractive",
}
STRATEGIES = (FULL, *PRESETS, RECALL, *LANGCHAIN, *HARNESS)
Sessions = list[tuple[str, list[Message]]]


@dataclass
class Row:
    """One strategy over every session at one window."""

    strategy: str
    runs: list[Evaluation] = field(default_factory=list)

    @property
    def calls(self) -> list[CallScore]:
        return [c for run in self.runs for c in run.calls]

    @property
    def cost(self) -> float:
        return sum(run.cost for run in self.runs)

    def kind(self, kind: str) -> tuple[float | None, float | None, int]:
        """(held or recoverable share over all calls, the worst session's share, probe-calls scored)."""
        scored = reached = 0
        worst: float | None = None
        for run in self.runs:
            k = next(k for k in run.kinds if k.kind == kind)
            scored, reached = scored + k.scored, reached + k.held + k.recoverable
            if k.reachable_share is not None:
                worst = k.reachable_share if worst is None else min(worst, k.reachable_share)
        return (reached / scored if scored else None), worst, scored

    def over(self, window: int) -> int:
        """Calls whose input is over the window (a provider would refuse them)."""
        return sum(1 for c in self.calls if c.tokens > window)

    def calls_below(self, share: float) -> int:
        """Calls at which some kind is held-or-recoverable below `share`."""
        return sum(1 for c in self.calls if any((s := c.share(k)) is not None and s < share for k in KINDS))


def scored_views(
    name: str, strategy: str, window: int, raw: Sequence[Message], points: Sequence[int], views: Sequence[Any]
) -> Evaluation:
    """An anchor's views (neutral messages, one list per call) scored on its own raw session."""
    probes = extract_probes(raw)
    scorer = ViewScorer(raw, probes)
    calls = tuple(scorer.score(n, p, view) for n, (p, view) in enumerate(zip(points, views, strict=True), 1))
    return Evaluation(name, strategy, window, tuple(probes), calls)


def run_historykit(sessions: Sessions, strategy: str, window: int, counter: TokenCounter) -> Row:
    row = Row(strategy)
    for name, session in sessions:
        if strategy == FULL:
            pipeline: Pipeline = Pipeline([], counter=counter)
        else:
            preset = "default" if strategy == RECALL else strategy.removeprefix("historykit ")
            pipeline = historykit.default_pipeline(preset=preset)
        row.runs.append(
            evaluate(
                session, pipeline, window=window, recall=strategy == RECALL, name=name, strategy=strategy
            )
        )
    return row


def run_langchain(sessions: Sessions, strategy: str, window: int, counter: TokenCounter) -> Row:
    row = Row(strategy)
    for name, session in sessions:
        raw, points, calls = lc.replay(
            session,
            strategy=LANGCHAIN[strategy],
            window=window,
            mode="persistent",
            counter=counter,
            summary_tokens=0,
        )
        row.runs.append(scored_views(name, strategy, window, raw, points, [c.sent for c in calls]))
    return row


def run_harness(sessions: Sessions, strategy: str, window: int) -> Row:
    row = Row(strategy)
    calls = harness.replay(
        sessions, strategy=HARNESS[strategy], window=window, mode="persistent", summary_tokens=0
    )
    for name, session in sessions:
        raw = harness.from_json(harness.to_json(session))  # the session as Pydantic AI shapes it
        points = call_points(raw)
        row.runs.append(scored_views(name, strategy, window, raw, points, [c.sent for c in calls[name]]))
    return row


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def print_table(window: int, rows: list[Row]) -> list[str]:
    """Prints the window's table; returns it as Markdown rows for the docs."""
    full = next((r.cost for r in rows if r.strategy == FULL), None)
    print(
        f"\n== window {window:,} tokens: held or recoverable, over every call after each probe appeared "
        "(worst session in brackets)"
    )
    header = (
        f"{'strategy':30} {'calls':>6} {'over':>5} {'cost':>12} {'vs full':>8} "
        + "".join(f"{k:>22}" for k in KINDS)
        + f" {'calls <95%':>10}"
    )
    print(header)
    print("-" * len(header))
    markdown = []
    for row in rows:
        ratio = f"{row.cost / full:.3f}" if full else "-"
        cells = []
        for kind in KINDS:
            share, worst, _ = row.kind(kind)
            cells.append(f"{_pct(share)} ({_pct(worst)})")
        below = row.calls_below(0.95)
        over = row.over(window)
        print(
            f"{row.strategy:30} {len(row.calls):>6} {over:>5} {row.cost:>12,.0f} {ratio:>8} "
            + "".join(f"{c:>22}" for c in cells)
            + f" {below:>10}"
        )
        markdown.append(
            f"| {row.strategy} | {window:,} | {over} | {row.cost:,.0f} | {ratio} | "
            + " | ".join(cells)
            + f" | {below} |"
        )
    return markdown


def quality(row: Row) -> float:
    """One number per strategy for the plot: the mean over the kinds of the held-or-recoverable share."""
    shares = [share for kind in KINDS if (share := row.kind(kind)[0]) is not None]
    return sum(shares) / len(shares) if shares else 0.0


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (cost no higher and quality no lower, one of
    them strictly), cheapest first."""
    front = [
        i
        for i, (cost, score) in enumerate(points)
        if not any(
            c <= cost and q >= score and (c, q) != (cost, score) for j, (c, q) in enumerate(points) if j != i
        )
    ]
    return sorted(front, key=lambda i: points[i][0])


def plot(tables: Sequence[tuple[int, list[Row]]], path: Path) -> None:
    """Quality against cost, one panel per window; the Pareto front is drawn through the strategies
    that send no call over the window (a provider refuses those), which are drawn hollow."""
    import matplotlib

    matplotlib.use("Agg")  # a file, no display
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(10 * len(tables), 5.5), squeeze=False)
    for ax, (window, rows) in zip(axes[0], tables, strict=True):
        full = next((r.cost for r in rows if r.strategy == FULL), None) or max(r.cost for r in rows)
        points = [(r.cost / full, 100 * quality(r)) for r in rows]
        fits = [i for i, r in enumerate(rows) if r.over(window) == 0]
        colours = plt.get_cmap("tab20").colors
        for i, (row, (x, y)) in enumerate(zip(rows, points, strict=True)):
            over = row.over(window)
            colour = colours[i % len(colours)]
            # A legend, not labels by the points: strategies of about the same cost and score overlap.
            ax.scatter(
                x,
                y,
                s=70,
                marker="o" if row.strategy.startswith("historykit") or row.strategy == FULL else "s",
                facecolors=colour if i in fits else "none",
                edgecolors=colour,
                linewidths=1.5,
                label=row.strategy + (f" ({over} calls over)" if over else ""),
            )
        front = [fits[k] for k in pareto([points[i] for i in fits])]
        ax.step(
            [points[i][0] for i in front],
            [points[i][1] for i in front],
            "k--",
            where="post",
            lw=0.8,
            marker="x",
            label="Pareto front (calls within the window)",
        )
        ax.set_title(f"window {window:,} tokens")
        ax.set_xlabel("cost, relative to the full context (cache hits 0.1, the rest 1.25)")
        ax.set_ylabel("held or recoverable, mean over the four probe kinds (%)")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    fig.suptitle("Compaction quality x cost on the corpus (hollow: some calls over the window)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"plot written to {path}")


DOCS = ("benchmarks/README.md", "docs/quality.md")


def marks(window: int) -> tuple[str, str]:
    """The markers a window's table goes between in each file of `DOCS`."""
    return f"<!-- quality-table:{window}:start -->", f"<!-- quality-table:{window}:end -->"


def write_docs(window: int, table: str, root: Path) -> None:
    """Put `table` between the window's markers in each file of `DOCS` (the text outside them
    stays); a lock lets runs of the two windows side by side write the same files."""
    import fcntl
    import tempfile

    start, end = marks(window)
    with open(Path(tempfile.gettempdir()) / "historykit-quality-docs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in DOCS:
            path = root / name
            text = path.read_text()
            if start not in text or end not in text:
                raise SystemExit(f"{name} has no {start} ... {end} markers")
            head, rest = text.split(start, 1)
            _, tail = rest.split(end, 1)
            path.write_text(f"{head}{start}\n{table}\n{end}{tail}")
            print(f"window {window:,}: table written to {name}")


_RUN: dict[str, Any] = {}
"""What `main` loaded, for the forked process of each window (`window_rows`)."""


def window_rows(window: int) -> list[Row]:
    """Every strategy of the run at `window`, in the order given."""
    sessions, counter = _RUN["sessions"], _RUN["counter"]
    rows = []
    for strategy in _RUN["strategies"]:
        started = time.perf_counter()
        if strategy in LANGCHAIN:
            rows.append(run_langchain(sessions, strategy, window, counter))
        elif strategy in HARNESS:
            rows.append(run_harness(sessions, strategy, window))
        else:
            rows.append(run_historykit(sessions, strategy, window, counter))
        print(f"  {window:,}: {strategy}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[32_000, 100_000])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument(
        "--sessions", nargs="*", default=[], help="substrings of session names (default: all)"
    )
    parser.add_argument("--json", type=Path, help="also write every session's result to this file")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown rows")
    parser.add_argument("--plot", type=Path, help="also draw quality against cost (a PNG) to this file")
    parser.add_argument("--generated", type=int, default=2, help="generated long sessions (seeds 1..N)")
    parser.add_argument("--generated-calls", type=int, default=1_500, help="model calls per generated one")
    parser.add_argument("--no-corpus", action="store_true", help="the generated sessions only")
    parser.add_argument(
        "--write-docs", action="store_true", help="write the table into benchmarks/README.md, docs/quality.md"
    )
    args = parser.parse_args()
    # The full context goes over the window on purpose: its usage warnings (one a call) are noise here.
    logging.getLogger("historykit").setLevel(logging.ERROR)
    began = time.perf_counter()
    counter = TokenCounter()
    sessions = [] if args.no_corpus else load_sessions(args.sessions)
    sessions += [
        (f"generated-{seed}", long_session(seed, calls=args.generated_calls))
        for seed in range(1, args.generated + 1)
    ]
    print(
        f"{len(sessions)} sessions, {sum(len(call_points(s)) for _, s in sessions):,} model calls; "
        f"tokenizer {counter.tokenizer_name}; prices: previous prefix 0.1, rest 1.25"
    )
    _RUN.update(sessions=sessions, counter=counter, strategies=args.strategies)
    # One process per window, side by side (each window's rows take the better part of an hour):
    # forked, they share the loaded sessions; their rows come back for one table and one plot.
    with ProcessPoolExecutor(len(args.windows), mp_context=multiprocessing.get_context("fork")) as pool:
        tables: list[tuple[int, list[Row]]] = list(zip(args.windows, pool.map(window_rows, args.windows)))
    dump: list[dict[str, Any]] = []
    markdown: list[str] = []
    for window, rows in tables:
        markdown += print_table(window, rows)
        for row in rows:
            for run in row.runs:
                data = run.to_dict()
                dump.append(
                    {"window": window, **{k: v for k, v in data.items() if k not in ("calls", "lost")}}
                )
        sys.stdout.flush()
    header = [
        "| strategy | window | over | cost | vs full | " + " | ".join(KINDS) + " | calls <95% |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(KINDS) + "---:|",
    ]
    if args.markdown:
        print("\n" + "\n".join([*header, *markdown]))
    if args.write_docs:
        command = shlex.join(["python", "benchmarks/bench_quality.py", *sys.argv[1:]])
        names = f"{len(sessions)} sessions ({sum(len(call_points(s)) for _, s in sessions):,} model calls)"
        for window in args.windows:
            lines = [line for line in markdown if line.split(" | ")[1] == f"{window:,}"]
            text = "\n".join([f"{names}, written by `{command}`:", "", *header, *lines])
            write_docs(window, text, Path(__file__).resolve().parent.parent)
    if args.plot:
        plot(tables, args.plot)
    print(f"\n({time.perf_counter() - began:.0f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
