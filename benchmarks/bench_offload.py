"""Large tool outputs offloaded when they arrive: tokens saved and the whole-session cost.

Each corpus session is replayed model call by model call (`replay.py`, persistent mode, priced as
a provider prompt cache does: `bench_replay.py`) through `historykit.default_pipeline()`, then through
the same pipeline with `OffloadToolOutputs` in front (with the recall tool's note), for each
`max_tokens`/`keep_tokens` setting. Reported per setting and window:

- `shortened`: the tool outputs over `max_tokens`, and the tokens they had and have after;
- `cost`: the whole-session cost, and its ratio to the default pipeline's; the input tokens sent;
  the share served from the previous call's prefix; the summaries written; calls over the window.

Run: `python benchmarks/bench_offload.py` (`--windows 32000 100000`, `--settings 6000:1500 2000:800`).
"""

from __future__ import annotations

import argparse
import time

from replay import CountingSummarizer, Result, load_sessions, replay_processor, total

from historykit._messages import Message, ToolResultPart
from historykit._pipeline import Pipeline
from historykit._tokens import TokenCounter
from historykit.processors import OffloadToolOutputs
from historykit.processors._default_pipeline import default_pipeline

Sessions = list[tuple[str, list[Message]]]


def replay(
    sessions: Sessions, window: int, counter: TokenCounter, offload: OffloadToolOutputs | None
) -> Result:
    results = []
    for _, session in sessions:
        summarizer = CountingSummarizer(counter)
        pipeline = default_pipeline(summarizer=summarizer)
        if offload is not None:
            pipeline = Pipeline([offload, *pipeline.processors])
        results.append(
            replay_processor(
                pipeline,
                session,
                window=window,
                mode="persistent",
                counter=counter,
                summarizer=summarizer,  # type: ignore[arg-type]
                binds_thinking=True,
            )
        )
    return total(results)


def shortened(sessions: Sessions, counter: TokenCounter, offload: OffloadToolOutputs) -> tuple[int, int, int]:
    """How many tool outputs the setting shortens, their tokens before and after."""
    count = before = after = 0
    for _, session in sessions:
        out, _ = offload.process(session, _context(counter))
        for old, new in zip(session, out):
            for a, b in zip(old.parts, new.parts):
                if a is not b and isinstance(a, ToolResultPart) and isinstance(b, ToolResultPart):
                    count += 1
                    before += counter.count_text(a.content)
                    after += counter.count_text(b.content)
    return count, before, after


def _context(counter: TokenCounter) -> object:
    from historykit._pipeline import ProcessContext

    return ProcessContext(1_000_000, "explicit", counter)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[32_000, 100_000])
    parser.add_argument(
        "--settings", nargs="+", default=["6000:1500", "4000:1200", "2000:800"], help="max_tokens:keep_tokens"
    )
    args = parser.parse_args()
    counter = TokenCounter()
    sessions = load_sessions()
    settings = [tuple(int(x) for x in s.split(":")) for s in args.settings]
    offloads = [OffloadToolOutputs(max_tokens=m, keep_tokens=k, recall_tool="recall") for m, k in settings]
    arrivals = sum(counter.count_text(p.content) for _, s in sessions for m in s for p in m.tool_results)
    print(f"{len(sessions)} corpus sessions; tool output tokens: {arrivals:,}")
    for offload in offloads:
        count, before, after = shortened(sessions, counter, offload)
        print(
            f"OffloadToolOutputs(max_tokens={offload.max_tokens:,}, keep_tokens={offload.keep_tokens:,}): "
            f"{count} outputs shortened, {before:,} -> {after:,} tokens ({before - after:,} saved, "
            f"{(before - after) / arrivals:.1%} of all tool output)"
        )
    for window in args.windows:
        started = time.process_time()
        base = replay(sessions, window, counter, None)
        print(f"\n== window {window:,}, persistent mode")
        header = (
            f"{'pipeline':44} {'cost':>11} {'vs default':>10} {'input':>12} {'cached':>7} "
            f"{'summ.':>5} {'over':>4}"
        )
        print(header + "\n" + "-" * len(header))
        rows: list[tuple[str, Result]] = [("default_pipeline()", base)]
        rows += [
            (f"+ Offload({o.max_tokens:,}, keep {o.keep_tokens:,})", replay(sessions, window, counter, o))
            for o in offloads
        ]
        for label, r in rows:
            print(
                f"{label:44} {r.cost:>11,.0f} {r.cost / base.cost:>10.3f} {r.input_tokens:>12,} "
                f"{r.cached_share:>7.1%} {r.summaries:>5} {r.over_window:>4}"
            )
        print(f"({time.process_time() - started:.0f} s CPU)")


if __name__ == "__main__":
    main()
