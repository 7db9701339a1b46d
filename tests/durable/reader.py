"""The scripted agent the durable-execution apps run (`dbos_app.py`, `prefect_app.py`): it reads
files in two turns of eight tool calls and an answer, and a pipeline summarizes as it goes.

The summarizer writes another text every time it is called, as an LLM does: its text names how
many times it had been called before, counted across processes in `summaries.txt`. A recovery that
summarized again what the first attempt had summarized would write another text than the one the
in-flight request carried. Every request the model is sent is appended to `requests.jsonl` by the
process that sent it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from historykit import Pipeline
from historykit._messages import Message
from historykit.processors import Repair, Summarize, Trigger

FILES_PER_TURN = 8
"""Tool calls per turn: each turn makes this many model calls plus one for the answer."""


class Failure(Exception):
    """The failure `scripted_model` raises in the model call it is told to fail in."""


def read_file(name: str) -> str:
    """Read a file."""
    return f"contents of {name}: " + " ".join(f"line{i}" for i in range(160))


def pipeline(workdir: Path) -> Pipeline:
    """Summarize past 1,500 tokens with a summarizer that writes another text on every call."""
    summaries = workdir / "summaries.txt"

    def summarize(messages: list[Message]) -> str:
        with summaries.open("a+") as log:
            log.seek(0)
            earlier = len(log.read().splitlines())
            log.write(f"{os.getpid()} {len(messages)}\n")
        return f"## Task\nread the files\n## Done\nsummary number {earlier + 1}, of {len(messages)} messages"

    summary = Summarize(
        trigger=Trigger(max_tokens=1_500), keep_last=2, summarizer=summarize, summary_tokens=60, min_gain=200
    )
    return Pipeline([summary, Repair()])


def scripted_model(
    workdir: Path, *, kill_at: int = 0, fail_at: Callable[[int], bool] | None = None
) -> FunctionModel:
    """The model: records each request, then asks for the next file of the turn or answers.

    `kill_at`: the process kills itself with SIGKILL inside that model call (of this process),
    after recording the request; `fail_at(call)`: raise `Failure` in that call instead.
    """
    calls = 0

    def model_function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        with (workdir / "requests.jsonl").open("a") as out:
            out.write(ModelMessagesTypeAdapter.dump_json(messages).decode() + "\n")
            out.flush()
            os.fsync(out.fileno())
        calls += 1
        if kill_at and calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # inside the model call: the request is in flight
        if fail_at is not None and fail_at(calls):
            raise Failure(f"model call {calls} failed")
        # What to do next, from the final request alone (a summary may have replaced the rest).
        part = messages[-1].parts[-1]
        if part.part_kind == "user-prompt":
            turn, done = (1 if "first" in str(part.content) else 2), -1
        else:
            turn, done = (int(n) for n in str(part.tool_call_id).removeprefix("call-").split("-"))
        if done + 1 < FILES_PER_TURN:
            name = f"{turn}-{done + 1}"
            return ModelResponse(
                parts=[ToolCallPart("read_file", {"name": name}, tool_call_id=f"call-{name}")]
            )
        return ModelResponse(parts=[TextPart(f"read {FILES_PER_TURN} files of batch {turn}")])

    return FunctionModel(model_function)
