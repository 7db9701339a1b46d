"""Cold resume: the first model call after loading a stored conversation, against the anchor.

A web server that loads the conversation per request (the common deployment) makes every call the
first call of a new pipeline on a freshly loaded history. This measures that call on a 1,000- and a
10,000-message conversation built from the corpus (the histories of `bench_processors.py`):

- the conversation is run persistently, call by call, through `historykit.default_pipeline()` at a
  32,000-token window (extractive summaries, no LLM) and saved to a `SQLModelConversationStore` on a
  SQLite file every ten calls, as the README's store recipe does (the store keeps the originals and
  the view as last sent);
- `historykit: resume`: in a new process, a new store on the file and a new pipeline load the
  conversation and process it with the next exchange appended: load and first call, timed apart
  (the token counts the store kept come back with the load, `historykit._tokens.remember_counts`).
  The store is made before anything is timed, as a server makes it once: it checks the schema and
  has SQLAlchemy compile the statements a load runs; the load is one transaction;
- `historykit: view-only resume`: view-only mode with the view last sent stored beside the raw
  history (as `HistoryKitMiddleware` keeps it in the LangGraph state): in a new process, a new
  pipeline is given that view (`Pipeline.remember_view`) and derives the next call's view from the
  whole raw history; no token count comes back with it, so every message of the view is counted.
  The raw history the call is given holds the very messages the view was remembered with (as the
  integrations' resume gives them), so it is converted but not digested (`historykit._view`);
- `historykit: view-only replay`: what the first call costs when the raw history is all there is
  (view-only mode, no stored view): the whole conversation replayed, once;
- `harness:TieredCompaction`: pydantic-ai-harness 0.62 on the whole history, one call through its
  capability (its own environment, its own token estimate), as `bench_processors.py` runs it.

Equal inputs (the second table): each strategy is run persistently over the same calls and works
on its own compacted history. `warm` is the next call of the run (historykit's `Pipeline.run` as
the `HistoryKit` capability calls it: under the conversation's key, on the history it kept plus the
next exchange; TieredCompaction's `before_model_request` on its own); `cold` is a new process that
loads that history from the same SQLite file (historykit through `SQLModelConversationStore`, the
anchor a `SELECT` and Pydantic AI's validation) and makes the first call. Both cold children
collect garbage once everything is imported and set up, before anything is timed: a full
collection walks every object the process imported and would otherwise land in whichever timed
step an allocation happened to tip it.

Each cell is CPU time, the fastest of `--repeat` runs (other processes only ever add time).
Targets (issue 23): on equal inputs, the warm call and the cold load plus first call at least as
fast as TieredCompaction's; the view-only resume from a stored view at least 2x TieredCompaction on
the raw history.

Run: `python benchmarks/bench_resume.py` (or `make bench-resume`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from anchors import harness
from bench_processors import SUMMARY_TOKENS, WINDOW, corpus_history
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessagesTypeAdapter

from historykit._messages import Message
from historykit._pipeline import Pipeline
from historykit._tokens import default_tokenizer
from historykit._view import request_points
from historykit.checkpointers import SQLModelConversationStore
from historykit.plugins.pydantic_ai import PydanticAIAdapter
from historykit.processors._default_pipeline import default_pipeline

CALLS_PER_SAVE = 10
CLOCK = time.process_time
"""Every cell is CPU time (the machine is shared: other processes add wall time, not CPU time)."""


def store_persistently(raw: list[Any], url: str, conversation_id: str) -> tuple[int, Pipeline, list[Any]]:
    """Run `raw` (Pydantic AI messages) call by call through a persistent pipeline, saving the
    conversation every `CALLS_PER_SAVE` calls; returns the model calls, the pipeline (warm) and the
    run's history as stored."""
    pipeline = default_pipeline()
    store = SQLModelConversationStore(url)
    points = request_points(PydanticAIAdapter().to_neutral(raw))

    async def run() -> tuple[int, list[Any]]:
        view: list[Any] = []
        at = 0
        history: list[Any] = []
        for n, point in enumerate(points, start=1):
            # What `HistoryKit` keeps as the run's history (compaction edits, not the request's
            # repairs), under the conversation's key as the integration passes it.
            view = pipeline.run([*view, *raw[at:point]], WINDOW, conversation=conversation_id).history
            at = point
            # The run's history after the call: the view kept and the response that followed.
            history = [*view, *raw[point : point + 1]]
            view, at = history, min(point + 1, len(raw))
            if n % CALLS_PER_SAVE == 0 or n == len(points):
                loaded = await store.load(conversation_id)
                conversation = Conversation(
                    conversation_id=conversation_id,
                    messages=history,
                    revision=loaded.revision if loaded is not None else None,
                )
                await store.save(conversation)
        await store.aclose()
        return len(points), history

    calls, history = asyncio.run(run())
    return calls, pipeline, history


def warm_persistent(
    pipeline: Pipeline, history: list[Any], extra: list[Any], repeat: int, conversation_id: str
) -> float:
    """Best-of-`repeat` ms for the next persistent call of a warm pipeline: its own compacted history
    with `extra` appended (what an agent's next model request costs)."""
    best = float("inf")
    for _ in range(repeat):
        start = CLOCK()
        pipeline.run([*history, *extra], WINDOW, conversation=conversation_id)
        best = min(best, (CLOCK() - start) * 1000)
    return best


def resume(url: str, conversation_id: str, extra: list[Any], repeat: int) -> tuple[float, float, int]:
    """Best-of-`repeat` ms to load the conversation with a new store, and for a new pipeline's first
    call on it with `extra` appended, each in a new process (nothing of this one's caches reaches
    it: the token counts come from the database); and the number of messages loaded."""
    loads: list[float] = []
    calls: list[float] = []
    size = 0
    with tempfile.TemporaryDirectory() as tmp:
        extra_file = Path(tmp) / "extra.json"
        extra_file.write_bytes(ModelMessagesTypeAdapter.dump_json(extra))
        for _ in range(repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--resume", url, conversation_id, str(extra_file)],
                check=True,
                capture_output=True,
                text=True,
            )
            timed = json.loads(out.stdout.strip().splitlines()[-1])
            loads.append(timed["load_ms"])
            calls.append(timed["call_ms"])
            size = timed["loaded"]
    return min(loads), min(calls), size


def resume_here(url: str, conversation_id: str, extra_file: Path) -> None:
    """The child of `resume`: everything imported first, then the load and the first call timed."""
    extra = ModelMessagesTypeAdapter.validate_json(extra_file.read_bytes())
    store = SQLModelConversationStore(url)
    pipeline = default_pipeline()
    default_tokenizer()  # loaded once per process, before any request
    # A full garbage collection walks every object this process imported (the benchmark's own
    # modules, LangChain's among them): it happens wherever an allocation happens to tip it, and
    # would time this process's imports, not the call. Both sides collect before they are timed
    # (`anchors/harness_side.py`, `cold_timing`), as a server that preloads its modules does.
    # The event loop a server already runs: `asyncio.run` would also format its task's result (the
    # whole conversation) when it looks at the SIGINT handler on the way out (CPython 3.11).
    loop = asyncio.new_event_loop()
    gc.collect()
    start = CLOCK()
    conversation = loop.run_until_complete(store.load(conversation_id))
    load_ms = (CLOCK() - start) * 1000
    assert conversation is not None
    start = CLOCK()
    pipeline.run([*conversation.messages, *extra], WINDOW, conversation=conversation_id)
    call_ms = (CLOCK() - start) * 1000
    loop.run_until_complete(store.aclose())
    loop.close()
    print(json.dumps({"load_ms": load_ms, "call_ms": call_ms, "loaded": len(conversation.messages)}))


def view_only_resume(raw: list[Any], extra: list[Any], repeat: int) -> float:
    """Best-of-`repeat` ms, each in a new process, for a new pipeline's first view-only call on
    `raw + extra` given the view of the call before it (what the state kept)."""
    history = [*raw, *extra]
    previous = request_points(PydanticAIAdapter().to_neutral(history))[-2]
    view = default_pipeline().run(history[:previous], WINDOW, mode="view").messages
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / name for name in ("history.json", "view.json")]
        for path, messages in zip(files, (history, view), strict=True):
            path.write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
        for _ in range(repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--view-resume", str(previous), *map(str, files)],
                check=False,
                capture_output=True,
                text=True,
            )
            if out.returncode:
                raise SystemExit(out.stderr)
            best = min(best, json.loads(out.stdout.strip().splitlines()[-1])["call_ms"])
    return best


def view_resume_here(previous: int, history_file: Path, view_file: Path) -> None:
    """The child of `view_only_resume`: the stored view remembered, then the first call, timed together."""
    history, view = (
        ModelMessagesTypeAdapter.validate_json(f.read_bytes()) for f in (history_file, view_file)
    )
    pipeline = default_pipeline()
    gc.collect()  # as `resume_here`: the imports' garbage collection is not the call's
    start = CLOCK()
    # The conversation key is what a view is remembered under (an integration passes its thread's).
    pipeline.remember_view(history[:previous], view, WINDOW, conversation="resume")
    result = pipeline.run(history, WINDOW, mode="view", conversation="resume")
    call_ms = (CLOCK() - start) * 1000
    assert result.report.replayed_calls == 1, result.report.replayed_calls
    print(json.dumps({"call_ms": call_ms}))


def view_only_replay(raw: list[Any], repeat: int) -> float:
    """Best-of-`repeat` ms for a new pipeline's first view-only call on the whole raw history."""
    best = float("inf")
    for _ in range(repeat):
        pipeline: Pipeline = default_pipeline()
        start = CLOCK()
        pipeline.run(raw, WINDOW, mode="view")
        best = min(best, (CLOCK() - start) * 1000)
    return best


def main() -> None:
    # Usage warnings (the replay runs near the warn mark) would flood the table's terminal.
    logging.getLogger("historykit").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeat", type=int, default=5, help="runs timed per historykit cell")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--resume", nargs=3, metavar=("URL", "ID", "EXTRA"), help=argparse.SUPPRESS)
    parser.add_argument("--view-resume", nargs=3, metavar=("AT", "HISTORY", "VIEW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.resume:
        resume_here(args.resume[0], args.resume[1], Path(args.resume[2]))
        return
    if args.view_resume:
        view_resume_here(int(args.view_resume[0]), Path(args.view_resume[1]), Path(args.view_resume[2]))
        return
    adapter = PydanticAIAdapter()
    histories: dict[int, tuple[list[Message], list[Message]]] = {
        size: corpus_history(size) for size in args.sizes
    }
    tiered = harness.timing(
        [(str(size), history) for size, (history, _) in histories.items()],
        strategies=["tiered"],
        window=WINDOW,
        repeat=3,
        summary_tokens=SUMMARY_TOKENS,
        clock="cpu",
    )
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size, (history, extra) in histories.items():
            raw = adapter.to_native(history)
            native_extra = adapter.to_native(extra)
            url = f"sqlite:///{Path(tmp) / f'resume-{size}.db'}"
            began = time.perf_counter()
            calls, pipeline, stored = store_persistently(raw, url, f"resume-{size}")
            stored_s = time.perf_counter() - began
            warm_ms = warm_persistent(pipeline, stored, native_extra, args.repeat, f"resume-{size}")
            load_ms, first_ms, loaded = resume(url, f"resume-{size}", native_extra, args.repeat)
            # The anchor on equal inputs: run persistently over the same calls, its compacted
            # history stored in the same database file, loaded by a new process.
            database = Path(tmp) / f"resume-{size}.db"
            tiered_run = harness.persistent(
                history,
                extra,
                strategy="tiered",
                window=WINDOW,
                repeat=args.repeat,
                summary_tokens=SUMMARY_TOKENS,
                database=database,
                key=f"resume-{size}",
                clock="cpu",
            )
            tiered_cold = [
                harness.cold(
                    extra,
                    strategy="tiered",
                    window=WINDOW,
                    summary_tokens=SUMMARY_TOKENS,
                    database=database,
                    key=f"resume-{size}",
                    clock="cpu",
                )
                for _ in range(args.repeat)
            ]
            t_load = min(c["load_ms"] for c in tiered_cold)
            t_call = min(c["call_ms"] for c in tiered_cold)
            view_resume_ms = view_only_resume(raw, native_extra, args.repeat)
            replay_ms = view_only_replay(raw, 1 if size >= 5_000 else min(args.repeat, 3))
            anchor = tiered[(str(size), "tiered")]
            figures.append(
                {
                    "messages": len(history),
                    "model_calls": calls,
                    "stored_in": round(stored_s, 1),
                    "view_messages_loaded": loaded,
                    "load_ms": round(load_ms, 2),
                    "first_call_ms": round(first_ms, 2),
                    "view_only_resume_ms": round(view_resume_ms, 2),
                    "view_only_replay_ms": round(replay_ms, 1),
                    "tiered_ms": round(anchor, 1),
                    "speedup_first_call": round(anchor / first_ms, 1),
                    "speedup_load_and_call": round(anchor / (load_ms + first_ms), 1),
                    "speedup_view_only_resume": round(anchor / view_resume_ms, 1),
                    "speedup_view_only_replay": round(anchor / replay_ms, 2),
                    "warm_persistent_ms": round(warm_ms, 2),
                    "tiered_warm_persistent_ms": round(tiered_run["warm_ms"], 2),
                    "tiered_stored_messages": tiered_run["stored_messages"],
                    "tiered_cold_load_ms": round(t_load, 2),
                    "tiered_cold_call_ms": round(t_call, 2),
                    "equal_warm": round(tiered_run["warm_ms"] / warm_ms, 2),
                    "equal_cold_call": round(t_call / first_ms, 2),
                    "equal_cold_load_and_call": round((t_load + t_call) / (load_ms + first_ms), 2),
                }
            )
    print(f"window {WINDOW:,} tokens; stored every {CALLS_PER_SAVE} calls on SQLite; best of {args.repeat}")
    header = (
        f"{'messages':>9} {'calls':>6} {'view':>5} {'load ms':>8} {'1st call':>9} {'Tiered ms':>10} "
        f"{'x (call)':>9} {'x (load+call)':>14} {'view-only resume ms':>20} {'x':>6} "
        f"{'view-only replay ms':>20} {'x':>6}"
    )
    print(header)
    print("-" * len(header))
    for f in figures:
        print(
            f"{f['messages']:>9,} {f['model_calls']:>6,} {f['view_messages_loaded']:>5} {f['load_ms']:>8.1f} "
            f"{f['first_call_ms']:>9.1f} {f['tiered_ms']:>10.1f} {f['speedup_first_call']:>8.1f}x "
            f"{f['speedup_load_and_call']:>13.1f}x {f['view_only_resume_ms']:>20.1f} "
            f"{f['speedup_view_only_resume']:>5.1f}x {f['view_only_replay_ms']:>20.1f} "
            f"{f['speedup_view_only_replay']:>5.2f}x"
        )
    print("\nequal inputs: each strategy run persistently over the same calls, on its own compacted history")
    header = (
        f"{'messages':>9} {'stored (hk/Tiered)':>19} {'warm ms hk':>11} {'Tiered':>8} {'x':>6} "
        f"{'cold load+call hk':>18} {'Tiered':>16} {'x call':>7} {'x load+call':>12}"
    )
    print(header)
    print("-" * len(header))
    for f in figures:
        print(
            f"{f['messages']:>9,} {f['view_messages_loaded']:>9}/{f['tiered_stored_messages']:<9} "
            f"{f['warm_persistent_ms']:>11.2f} {f['tiered_warm_persistent_ms']:>8.2f} "
            f"{f['equal_warm']:>5.2f}x {f['load_ms']:>8.1f}+{f['first_call_ms']:<9.1f} "
            f"{f['tiered_cold_load_ms']:>7.1f}+{f['tiered_cold_call_ms']:<8.1f} "
            f"{f['equal_cold_call']:>6.2f}x {f['equal_cold_load_and_call']:>11.2f}x"
        )
    for f in figures:
        print(
            f"target at {f['messages']:,} messages (equal inputs, >= 1x TieredCompaction): "
            f"warm persistent call {f['equal_warm']:.2f}x, "
            f"cold first call after a load {f['equal_cold_load_and_call']:.2f}x "
            f"(call alone {f['equal_cold_call']:.2f}x); view-only resume from the stored view "
            f"{f['speedup_view_only_resume']:.1f}x TieredCompaction on the raw history (>= 2x)"
        )
    for f in figures:
        verdict = "met" if f["speedup_first_call"] >= 5 else "MISSED"
        print(
            f"target at {f['messages']:,} messages: first call after a load {f['speedup_first_call']:.1f}x "
            f"TieredCompaction's speed (>= 5x: {verdict}); with the load {f['speedup_load_and_call']:.1f}x"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
