"""A DBOS application with a `HistoryKit` agent, run as its own process by `test_dbos_recovery.py`.

    python dbos_app.py ROLE DATABASE_URL WRAPPER MODE WORKDIR [KILL_AT]

- ROLE `run` starts the workflow `conversation` (two turns of an agent that reads files) and prints
  its output; with KILL_AT, the process kills itself with SIGKILL inside that model call, after
  recording the request. ROLE `recover` launches DBOS on the same database, which recovers the
  workflow a killed process left pending, and prints its output.
- WRAPPER `capability`: `Agent(..., capabilities=[HistoryKit(...), DBOSDurability()])`; `agent`: the
  deprecated `DBOSAgent(Agent(..., capabilities=[HistoryKit(...)]))`.
- MODE `persistent` or `view` (`HistoryKit(persist=False)`).
- WORKDIR gets `requests.jsonl` (every request the model was sent, appended as it arrives, by the
  process that sent it) and `summaries.txt` (one line per summarizer call).

The summarizer writes another text every time it is called, as an LLM does: its text names how
many times it had been called before, counted across processes in `summaries.txt`. A recovery that
summarized again what the killed process had summarized would write another text than the one the
in-flight request carried.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent, DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from historykit import Pipeline
from historykit.messages import Message
from historykit.plugins.pydantic_ai import HistoryKit
from historykit.processors import Repair, Summarize, Trigger

WORKFLOW_ID = "historykit-durable-conversation"
FILES_PER_TURN = 8
"""Tool calls per turn: each turn makes this many model calls plus one for the answer."""

role, database_url, wrapper, mode, workdir_name = sys.argv[1:6]
kill_at = int(sys.argv[6]) if len(sys.argv) > 6 else 0
workdir = Path(workdir_name)
requests_path = workdir / "requests.jsonl"
summaries_path = workdir / "summaries.txt"


def summarize(messages: list[Message]) -> str:
    """Another text on every call, across processes (a file counts the calls)."""
    with summaries_path.open("a+") as log:
        log.seek(0)
        earlier = len(log.read().splitlines())
        log.write(f"{os.getpid()} {len(messages)}\n")
    return f"## Task\nread the files\n## Done\nsummary number {earlier + 1}, of {len(messages)} messages"


def record(messages: list[ModelMessage]) -> int:
    """Append the request to `requests.jsonl`; its number in this process's count of model calls."""
    line = ModelMessagesTypeAdapter.dump_json(messages).decode()
    with requests_path.open("a") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())
    record.calls += 1  # type: ignore[attr-defined]
    return record.calls  # type: ignore[attr-defined,no-any-return]


record.calls = 0  # type: ignore[attr-defined]


def model_function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    call = record(messages)
    if kill_at and call == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)  # inside the model call: the request is in flight
    # What to do next, from the final request alone (a summary may have replaced everything else).
    part = messages[-1].parts[-1]
    if part.part_kind == "user-prompt":
        turn, done = (1 if "first" in str(part.content) else 2), -1
    else:
        turn, done = (int(n) for n in str(part.tool_call_id).removeprefix("call-").split("-"))
    if done + 1 < FILES_PER_TURN:
        name = f"{turn}-{done + 1}"
        return ModelResponse(parts=[ToolCallPart("read_file", {"name": name}, tool_call_id=f"call-{name}")])
    return ModelResponse(parts=[TextPart(f"read {FILES_PER_TURN} files of batch {turn}")])


def read_file(name: str) -> str:
    """Read a file."""
    return f"contents of {name}: " + " ".join(f"line{i}" for i in range(160))


pipeline = Pipeline(
    [
        Summarize(
            trigger=Trigger(max_tokens=1_500),
            keep_last=2,
            summarizer=summarize,
            summary_tokens=60,
            min_gain=200,
        ),
        Repair(),
    ]
)
kit = HistoryKit(
    pipeline,
    persist=mode == "persistent",
    context_window=100_000,
    on_report=(print if os.environ.get("SHOW") else None),
)
model = FunctionModel(model_function)
if wrapper == "capability":
    agent: Agent[None, str] = Agent(
        model, name="reader", capabilities=[kit, DBOSDurability()], tools=[read_file]
    )
    runner: Any = agent
else:
    agent = Agent(model, name="reader", capabilities=[kit], tools=[read_file])
    runner = DBOSAgent(agent)

DBOS(config={"name": "historykit-durable", "system_database_url": database_url})


@DBOS.workflow()
async def conversation() -> str:
    first = await runner.run("Read the first batch of files")
    second = await runner.run("Read the second batch", message_history=first.all_messages())
    return json.dumps([first.output, second.output])


async def main() -> None:
    DBOS.launch()  # also recovers the workflows a killed process left pending
    if role == "run":
        with SetWorkflowID(WORKFLOW_ID):
            output = await conversation()
    else:
        output = await (await DBOS.retrieve_workflow_async(WORKFLOW_ID)).get_result()
    print(json.dumps({"output": output, "last_report": str(kit.last_report is not None)}), flush=True)
    DBOS.destroy()


asyncio.run(main())
