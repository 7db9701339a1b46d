"""Processor speed: milliseconds per model call at 1,000 and 10,000 messages, against the anchors.

The histories are real: the corpus sessions' tool exchanges (file reads, shell runs, edits, parallel
calls, thinking) appended one after another, with fresh tool-call ids, after the largest session's
system prompt and task, up to the size asked, ending with tool results the model must answer. At a
32,000-token window every strategy has work to do on them (they are 30-100 times the window).

- `historykit: first call (cold)`: `historykit.default_pipeline()` (the five processors and `Repair`,
  extractive summarizer, no LLM) built afresh with an empty token-count cache, on the whole history:
  what the first call on a long stored conversation costs (every message tokenized, every
  compaction along the history replayed);
- `historykit: first call, estimated tokens`: the same, with historykit's character-based token
  estimate (`heuristic_tokenizer`) instead of tiktoken, as the harness and LangChain count by
  default: what the first call costs apart from exact tokenization;
- `historykit: next call (warm)`: the same pipeline on the next model request of the same
  conversation, the raw history grown by one exchange (view-only use: the whole history again, the
  conversation's remembered view continued): what each call of an agent run costs.
  Every historykit row calls `Pipeline.run(..., mode="view", conversation=...)`, what
  `HistoryKitMiddleware` and `HistoryKit` call, not `Pipeline.process` (which would re-run every
  compaction, the extractive summaries included, on each call). Persistent use, where the input is
  the short compacted history, is measured on equal inputs by `bench_resume.py`.
- `harness:*`: pydantic-ai-harness 0.62 `TieredCompaction` (dedupe, clear, summarize, as its README
  composes them), `ClearToolResults`, `DeduplicateFileReads`, each call through the capability's
  `before_model_request` on a fresh capability, in their own environment (`benchmarks/.envs/harness`),
  with the harness's own token estimate; the summarizing tier runs on a `FunctionModel` that returns
  a fixed-size summary instantly (so no LLM time is counted, only the harness's own work);
- `langchain:*`: `ContextEditingMiddleware` and `SummarizationMiddleware` (fake chat model
  summarizer, also instant), run as `create_agent` runs them, with LangChain's own token count.

Each cell is CPU time (the process's, so other work on a shared machine does not count), the
fastest of `--repeat` calls after one untimed warm-up call (the fastest, because
other processes on the machine only ever add time). Target: the full pipeline at least 5x faster
than harness `TieredCompaction`.

Run: `python benchmarks/bench_processors.py` (or `make bench-processors`).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from anchors import harness
from anchors import langchain_anchors as lc
from replay import load_sessions

from historykit._messages import Message, ToolCallPart, ToolResultPart
from historykit._tokens import TokenCounter, heuristic_tokenizer
from historykit.processors._default_pipeline import default_pipeline
from historykit.processors._turns import split_units

WINDOW = 32_000
COLD = "historykit: first call (cold)"
COLD_ESTIMATED = "historykit: first call, estimated tokens"
WARM = "historykit: next call (warm)"
SUMMARY_TOKENS = 750
"""The anchors' fake summaries: about as long as historykit's extractive ones on the corpus."""
HARNESS = {
    "harness:TieredCompaction": "tiered",
    "harness:ClearToolResults": "clear",
    "harness:DeduplicateFileReads": "dedupe",
}
LANGCHAIN = {"langchain:ContextEditing": "context-editing", "langchain:Summarization": "summarization"}


def _renamed(messages: list[Message], suffix: str) -> list[Message]:
    """`messages` with every tool-call id made unique by `suffix`."""
    out = []
    for msg in messages:
        parts = tuple(
            replace(p, id=f"{p.id}_{suffix}")
            if isinstance(p, ToolCallPart)
            else replace(p, tool_call_id=f"{p.tool_call_id}_{suffix}")
            if isinstance(p, ToolResultPart)
            else p
            for p in msg.parts
        )
        out.append(Message(msg.role, parts, pinned=msg.pinned))
    return out


def corpus_history(n_messages: int) -> tuple[list[Message], list[Message]]:
    """A history of about `n_messages` built from the corpus, and one more exchange to grow it by."""
    sessions = load_sessions()
    head_source = sessions[-1][1]
    head = [m for m in head_source[:2] if m.role in ("system", "user")]
    exchanges: list[list[Message]] = []
    for _, session in sessions:
        for unit in split_units(session):
            chunk = session[unit.start : unit.end]
            if chunk[0].role == "assistant" and len(chunk) > 1 and chunk[-1].role == "tool":
                exchanges.append(chunk)
    history = list(head)
    round_ = 0
    while len(history) < n_messages + 1:
        for index, chunk in enumerate(exchanges):
            history += _renamed(chunk, f"r{round_}x{index}")
            if len(history) >= n_messages + 1:
                break
        round_ += 1
    # End on whole exchanges; the last one is the extra exchange the warm call adds.
    cut = len(history)
    while history[cut - 1].role != "assistant" or cut > n_messages:
        cut -= 1
    body = history[: cut - 1]
    grown = history[cut - 1 :]
    while grown and grown[-1].role == "assistant":
        grown.pop()
    return body, grown if len(grown) > 1 else body[-2:]


def ours(history: list[Message], extra: list[Message], repeat: int) -> tuple[float, float, float]:
    """Best-of-`repeat` ms per call of the default pipeline, through `Pipeline.run` in view-only mode
    with a conversation key, as the integrations call it: cold, cold with estimated token counts,
    then the next call of the same conversation."""
    cold: list[float] = []
    estimated: list[float] = []
    warm: list[float] = []
    grown = history + extra
    default_pipeline().run(history, WINDOW, mode="view", conversation="warm-up")
    for n in range(repeat):
        start = time.process_time()
        default_pipeline().run(
            history,
            WINDOW,
            mode="view",
            conversation=f"estimated-{n}",
            counter=TokenCounter(tokenizer=heuristic_tokenizer),
        )
        estimated.append((time.process_time() - start) * 1000)
        pipeline = default_pipeline()
        counter = TokenCounter()
        start = time.process_time()
        pipeline.run(history, WINDOW, mode="view", conversation=n, counter=counter)
        cold.append((time.process_time() - start) * 1000)
        # The next model request of the same conversation: the raw history, grown by one exchange.
        start = time.process_time()
        pipeline.run(grown, WINDOW, mode="view", conversation=n, counter=counter)
        warm.append((time.process_time() - start) * 1000)
    return min(cold), min(estimated), min(warm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument(
        "--repeat", type=int, default=0, help="calls timed per cell (0: 5 below 5,000 messages, else 3)"
    )
    args = parser.parse_args()
    counter = TokenCounter()
    print(f"window {WINDOW:,} tokens; anchors' fake summaries {SUMMARY_TOKENS} tokens, returned instantly")
    rows: list[tuple[str, dict[int, float]]] = []
    times: dict[str, dict[int, float]] = {}
    sizes_info = []
    histories = {}
    for size in args.sizes:
        history, extra = corpus_history(size)
        histories[size] = (history, extra)
        sizes_info.append(
            f"{len(history):,} messages = {sum(counter.count_message(m) for m in history):,} tokens"
        )
    print("histories: " + "; ".join(sizes_info))
    harness_ms = harness.timing(
        [(str(size), h) for size, (h, _) in histories.items()],
        strategies=list(HARNESS.values()),
        window=WINDOW,
        repeat=max(args.repeat, 3),
        summary_tokens=SUMMARY_TOKENS,
        clock="cpu",
    )
    for size, (history, extra) in histories.items():
        repeat = args.repeat or (5 if size < 5_000 else 3)
        cold, estimated, warm = ours(history, extra, repeat)
        times.setdefault(COLD, {})[size] = cold
        times.setdefault(COLD_ESTIMATED, {})[size] = estimated
        times.setdefault(WARM, {})[size] = warm
        for name, strategy in HARNESS.items():
            times.setdefault(name, {})[size] = harness_ms[(str(size), strategy)]
        for name, strategy in LANGCHAIN.items():
            times.setdefault(name, {})[size] = lc.timing(
                history, strategy, window=WINDOW, summary_tokens=SUMMARY_TOKENS, repeat=repeat
            )
    rows = list(times.items())
    tiered = times["harness:TieredCompaction"]
    width = max(len(name) for name in times) + 2
    header = f"{'ms per call':{width}}" + "".join(f" {f'{s:,} msgs':>12} {'Tiered/x':>9}" for s in args.sizes)
    print(header)
    print("-" * len(header))
    for name, by_size in rows:
        cells = "".join(f" {by_size[s]:>12.1f} {tiered[s] / by_size[s]:>8.1f}x" for s in args.sizes)
        print(f"{name:{width}}{cells}")
    print("\n'Tiered/x': harness TieredCompaction's time divided by the row's (above 1: faster than Tiered).")
    for label in (WARM, COLD, COLD_ESTIMATED):
        for size in args.sizes:
            speedup = tiered[size] / times[label][size]
            verdict = "met" if speedup >= 5 else "MISSED"
            print(f"target at {size:,} messages, {label}: {speedup:.1f}x Tiered's speed (>= 5x: {verdict})")


if __name__ == "__main__":
    main()
