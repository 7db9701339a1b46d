"""Session replay: every corpus session, model call by model call, priced as a provider prompt cache does.

Call t sees every message before the t-th assistant message of a session. In `persistent` mode the
processed history carries forward (the strategy's edits persist, as in an agent's state); in `view`
mode every call processes the raw history. Each call's input is priced: the longest run of leading
messages identical to the previous call's input at 0.1 per token, the rest at 1.25, and what a
summarizer reads at 1.0 (`replay.py`). Strategies, all on the same sessions and counted with the
same tokenizer:

- `historykit`: `historykit.default_pipeline()`, extractive summarizer (no LLM), its summaries priced
  as if an LLM summarizer had read what `PydanticAISummarizer` would send;
- `harness:*`: pydantic-ai-harness 0.62 `TieredCompaction` (DeduplicateFileReads, ClearToolResults,
  SummarizingCompaction, as its README composes them), `ClearToolResults`, `DeduplicateFileReads`, in
  their own environment (`benchmarks/.envs/harness`, created on first use); the summarizing tier
  runs on a `FunctionModel` that answers instantly with a fixed-size summary;
- `langchain:*`: LangChain v1 `ContextEditingMiddleware` (`ClearToolUsesEdit`) and
  `SummarizationMiddleware`, driven as `create_agent` drives them, with a fake chat model summarizer.

The anchors fire at 80% of the window. Their fake summaries are as long as historykit's extractive
summaries were on average in the same configuration (printed), so summaries cost the same room.

Run: `python benchmarks/bench_replay.py` (or `make bench-processors`); `--help` for the options.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from anchors import harness
from anchors import langchain_anchors as lc
from replay import (
    CACHE_READ,
    CACHE_WRITE,
    CountingSummarizer,
    Meter,
    Mode,
    Result,
    arrival_tokens,
    call_points,
    load_sessions,
    replay_processor,
    total,
)

from historykit._messages import Message
from historykit._tokens import TokenCounter
from historykit.processors._default_pipeline import default_pipeline

OURS = "historykit"
TIERED = "harness:TieredCompaction"
HARNESS = {
    TIERED: "tiered",
    "harness:ClearToolResults": "clear",
    "harness:ClearToolResults+inputs": "clear-inputs",
    "harness:DeduplicateFileReads": "dedupe",
}
# Whole-session cost targets against the cheapest anchor configuration, by window (issue 23).
CHEAPEST_TARGET = {32_000: 0.75, 100_000: 0.70}
LANGCHAIN = {"langchain:ContextEditing": "context-editing", "langchain:Summarization": "summarization"}
STRATEGIES = (OURS, *HARNESS, *LANGCHAIN)
Sessions = list[tuple[str, list[Message]]]


def run_ours(
    sessions: Sessions, window: int, mode: Mode, counter: TokenCounter, binds_thinking: bool = True
) -> tuple[dict[str, Result], int]:
    """historykit's default pipeline on each session; returns the results and the mean summary size."""
    results: dict[str, Result] = {}
    written = made = 0
    for name, session in sessions:
        summarizer = CountingSummarizer(counter)
        pipeline = default_pipeline(summarizer=summarizer)
        results[name] = replay_processor(
            pipeline,
            session,
            window=window,
            mode=mode,
            counter=counter,
            summarizer=summarizer,  # type: ignore[arg-type]
            binds_thinking=binds_thinking,
        )
        written, made = written + summarizer.written, made + summarizer.calls
    return results, (written // made if made else 0)


def meter_harness(
    sessions: Sessions, calls: dict[str, list[harness.HarnessCall]], window: int, counter: TokenCounter
) -> dict[str, Result]:
    results: dict[str, Result] = {}
    for name, session in sessions:
        raw = harness.from_json(harness.to_json(session))  # the session as Pydantic AI shapes it
        meter = Meter(window, counter)
        for t, call in zip(call_points(raw), calls[name], strict=True):
            meter.add(
                call.sent,
                raw[t - 1],
                raw=raw[:t],
                summarizer_tokens=call.summarizer_tokens,
                summaries=call.summaries,
            )
            meter.responded(raw[t])
        results[name] = meter.result
    return results


def run_langchain(
    sessions: Sessions, strategy: str, window: int, mode: str, counter: TokenCounter, summary_tokens: int
) -> dict[str, Result]:
    results: dict[str, Result] = {}
    for name, session in sessions:
        raw, points, calls = lc.replay(
            session,
            strategy=strategy,
            window=window,
            mode=mode,
            counter=counter,
            summary_tokens=summary_tokens,
        )
        meter = Meter(window, counter)
        for t, call in zip(points, calls, strict=True):
            meter.add(
                call.sent,
                raw[t - 1],
                raw=raw[:t],
                summarizer_tokens=call.summarizer_tokens,
                summaries=call.summaries,
            )
            meter.responded(raw[t])
        results[name] = meter.result
    return results


def print_config(
    window: int, mode: str, by_strategy: dict[str, dict[str, Result]], summary_tokens: int, per_session: str
) -> None:
    print(f"\n== window {window:,} tokens, {mode} mode; anchors' fake summaries: {summary_tokens:,} tokens")
    header = (
        f"{'strategy':30} {'calls':>6} {'over':>5} {'unavoid.':>8} {'dropped':>7} {'viol.':>5} {'cached':>7} "
        f"{'input tokens':>13} {'summ. in':>9} {'summ.':>5} {'cost':>11} {'vs Tiered':>9} "
        f"{'thinking':>8} {'R13 rej.':>8} {'th. dropped':>11}"
    )
    print(header)
    print("-" * len(header))
    tiered = total(by_strategy[TIERED].values()).cost if TIERED in by_strategy else None
    for strategy, results in by_strategy.items():
        t = total(results.values())
        ratio = f"{t.cost / tiered:.3f}" if tiered else "-"
        print(
            f"{strategy:30} {t.calls:>6} {t.over_window:>5} {t.unavoidable:>8} {t.dropped_newest:>7} "
            f"{t.violations:>5} {t.cached_share:>7.1%} {t.input_tokens:>13,} {t.summarizer_tokens:>9,} "
            f"{t.summaries:>5} {t.cost:>11,.0f} {ratio:>9} "
            f"{t.thinking_calls:>8} {t.binding_rejected:>8} {t.thinking_dropped_tokens:>11,}"
        )
    if per_session == "none":
        return
    shown = list(by_strategy) if per_session == "all" else [s for s in (OURS, TIERED) if s in by_strategy]
    names = list(next(iter(by_strategy.values())))
    print("\nper session: cost (cached share, calls over the window / dropping the newest message)")
    print(
        f"{'session':46}" + "".join(f" {s[-24:]:>31}" for s in shown) + (" ratio" if TIERED in shown else "")
    )
    for name in names:
        cells = []
        for strategy in shown:
            r = by_strategy[strategy][name]
            cells.append(
                f" {r.cost:>12,.0f} ({r.cached_share:>5.1%}, {r.over_window}/{r.dropped_newest})".rjust(32)
            )
        ratio = ""
        if OURS in shown and TIERED in shown:
            ratio = f" {by_strategy[OURS][name].cost / by_strategy[TIERED][name].cost:5.2f}"
        print(f"{name[:46]:46}" + "".join(cells) + ratio)


def cheapest_at_reuse(arrivals: int, share: float) -> float:
    """The lowest cost any strategy can have while serving `share` of its input from the previous
    prefix. The `arrivals` tokens are never served from it, so the input is at least
    `arrivals / (1 - share)`, and at that size its cost is the smallest."""
    total_input = arrivals / (1 - share)
    return CACHE_READ * (total_input - arrivals) + CACHE_WRITE * arrivals


def check_targets(
    window: int, mode: str, by_strategy: dict[str, dict[str, Result]], arrivals: int
) -> list[str]:
    ours = total(by_strategy[OURS].values())
    lines = [
        f"{mode}: calls over the window: {ours.over_window} "
        f"({ours.unavoidable} where the system prompt, task and final request alone are over it)",
        f"{mode}: calls dropping the newest message: {ours.dropped_newest}",
        f"{mode}: calls a model that binds thinking would reject: {ours.binding_rejected} of "
        f"{ours.thinking_calls} replaying thinking ({ours.thinking_dropped_tokens:,} thinking tokens "
        "dropped for binding)",
        f"{mode}: input served from the previous prefix: {ours.cached_share:.1%} (target >= 95%)",
    ]
    if TIERED in by_strategy:
        tiered = total(by_strategy[TIERED].values())
        below = 1 - ours.cost / tiered.cost
        lines.append(
            f"{mode}: total cost {ours.cost:,.0f} vs TieredCompaction {tiered.cost:,.0f}: "
            f"{below:.1%} below (target >= 25%)"
        )
        anchors = {s: total(r.values()).cost for s, r in by_strategy.items() if s != OURS}
        cheapest = min(anchors, key=anchors.__getitem__)
        target = CHEAPEST_TARGET.get(window)
        lines.append(
            f"{mode}: total cost vs the cheapest anchor here, {cheapest} ({anchors[cheapest]:,.0f}): "
            f"{ours.cost / anchors[cheapest]:.3f}x" + (f" (target <= {target:.2f}x)" if target else "")
        )
        floor = cheapest_at_reuse(arrivals, 0.95)
        lines.append(
            f"{mode}: both targets at once need a cost <= {0.75 * tiered.cost:,.0f}; any strategy serving "
            f">= 95% from the previous prefix costs >= {floor:,.0f} ({arrivals:,} tokens arrive between "
            f"calls and are never in it)"
            + (": the two targets exclude each other" if floor > 0.75 * tiered.cost else "")
        )
    return [f"window {window:,}, {line}" for line in lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[32_000, 100_000])
    parser.add_argument("--modes", nargs="+", default=["persistent", "view"], choices=["persistent", "view"])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument(
        "--sessions", nargs="*", default=[], help="substrings of session names (default: all)"
    )
    parser.add_argument("--per-session", choices=["ours", "all", "none"], default="ours")
    parser.add_argument(
        "--summary-tokens",
        type=int,
        default=0,
        help="size of the anchors' fake summaries (0: historykit's mean)",
    )
    parser.add_argument("--json", type=Path, help="also write every result to this file")
    parser.add_argument(
        "--no-binding",
        action="store_true",
        help="process as for models that do not bind thinking (the meter still counts R13 rejections)",
    )
    args = parser.parse_args()
    began = time.perf_counter()
    counter = TokenCounter()
    sessions = load_sessions(args.sessions)
    print(
        f"{len(sessions)} sessions, {sum(len(call_points(s)) for _, s in sessions):,} model calls; "
        f"tokenizer {counter.tokenizer_name}; prices: previous prefix 0.1, rest 1.25, summarizer input 1.0"
    )
    dump: list[dict[str, Any]] = []
    views: dict[tuple[int, str], dict[str, Result]] = {}
    targets: list[str] = []
    # The harness side runs in its own process: one job at a time in the background, while the
    # in-process strategies use the other core.
    with ThreadPoolExecutor(max_workers=1) as pool:
        for window in args.windows:
            for mode in args.modes:
                by_strategy: dict[str, dict[str, Result]] = {}
                ours, mean_summary = run_ours(
                    sessions, window, mode, counter, binds_thinking=not args.no_binding
                )
                views[window, mode] = ours
                summary_tokens = args.summary_tokens or mean_summary or 750
                if OURS in args.strategies:
                    by_strategy[OURS] = ours
                jobs: dict[str, Future[dict[str, list[harness.HarnessCall]]]] = {
                    name: pool.submit(
                        harness.replay,
                        sessions,
                        strategy=HARNESS[name],
                        window=window,
                        mode=mode,
                        summary_tokens=summary_tokens,
                    )
                    for name in HARNESS
                    if name in args.strategies
                }
                for name, strategy in LANGCHAIN.items():
                    if name in args.strategies:
                        by_strategy[name] = run_langchain(
                            sessions, strategy, window, mode, counter, summary_tokens
                        )
                for name, job in jobs.items():
                    by_strategy[name] = meter_harness(sessions, job.result(), window, counter)
                order = [s for s in STRATEGIES if s in by_strategy]
                by_strategy = {s: by_strategy[s] for s in order}
                print_config(window, mode, by_strategy, summary_tokens, args.per_session)
                if OURS in by_strategy:
                    arrivals = sum(arrival_tokens(session, counter) for _, session in sessions)
                    targets += check_targets(window, mode, by_strategy, arrivals)
                for strategy, results in by_strategy.items():
                    for name, r in results.items():
                        row = {"window": window, "mode": mode, "strategy": strategy, "session": name}
                        fields = {k: v for k, v in asdict(r).items() if k != "views"}
                        dump.append({**row, **fields, "cost": r.cost, "cached_share": r.cached_share})
                sys.stdout.flush()
    for window in args.windows:
        if (window, "persistent") in views and (window, "view") in views:
            a, b = views[window, "persistent"], views[window, "view"]
            differ = sum(x != y for name in a for x, y in zip(a[name].views, b[name].views, strict=True))
            calls = sum(len(r.views) for r in a.values())
            targets.append(
                f"window {window:,}: persistent and view-only modes sent different views on {differ} of "
                f"{calls} calls"
            )
    print("\ntargets for default_pipeline():")
    for line in targets:
        print(f"  {line}")
    print(f"\n({time.perf_counter() - began:.0f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
