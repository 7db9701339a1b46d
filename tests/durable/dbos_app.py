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

The agent, its model and its summarizer are `reader.py`'s.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent, DBOSDurability

from historykit.plugins.pydantic_ai import HistoryKit
from tests import class_source
from tests.durable.reader import pipeline, read_file, scripted_model

class_source.install()  # each agent built here would parse pydantic_ai's messages once per class

WORKFLOW_ID = "historykit-durable-conversation"

role, database_url, wrapper, mode, workdir_name = sys.argv[1:6]
kill_at = int(sys.argv[6]) if len(sys.argv) > 6 else 0
workdir = Path(workdir_name)

kit = HistoryKit(
    pipeline(workdir),
    persist=mode == "persistent",
    context_window=100_000,
    on_report=(print if os.environ.get("SHOW") else None),
)
model = scripted_model(workdir, kill_at=kill_at)
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
