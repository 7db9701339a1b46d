"""Prefect flows with a `HistoryKit` agent, run as one process by `test_prefect_recovery.py`.

    python prefect_app.py OUTDIR FAIL_AT [MODE ...]

Runs the flow `conversation` (two turns of `reader.py`'s agent) on Prefect's local ephemeral
server (the caller gives the process a `PREFECT_HOME` of its own), four times: in each mode
(`persistent`, `view`: `HistoryKit(persist=False)`), once uninterrupted and once with the model
failing in call FAIL_AT of the flow's first attempt. `PrefectDurability` runs the model requests,
the tool calls and historykit's operations as Prefect tasks whose results are persisted and cached
per flow run; the flow's retry (the same flow run) replays the cached tasks and goes on from the
failed call. Each run gets a folder `OUTDIR/<mode>-<uninterrupted|failing>` with `reader.py`'s
records and `output.json`. One process for the four: the ephemeral server starts once.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from prefect import flow
from pydantic_ai import Agent
from pydantic_ai.durable_exec.prefect import PrefectDurability

from historykit.plugins.pydantic_ai import HistoryKit
from tests import class_source
from tests.durable.reader import pipeline, read_file, scripted_model

class_source.install()  # each agent built here would parse pydantic_ai's messages once per class


def agent(workdir: Path, mode: str, fail_at: int) -> Agent[None, str]:
    failed = workdir / "failed.flag"

    def fail(call: int) -> bool:  # in call `fail_at` of the first attempt only
        if call != fail_at or failed.exists():
            return False
        failed.touch()
        return True

    kit = HistoryKit(pipeline(workdir), persist=mode == "persistent", context_window=100_000)
    model = scripted_model(workdir, fail_at=fail if fail_at else None)
    return Agent(model, name="reader", capabilities=[kit, PrefectDurability()], tools=[read_file])


@flow(name="historykit-conversation", retries=1, retry_delay_seconds=0)
async def conversation(workdir: str, mode: str, fail_at: int) -> str:
    reader = agent(Path(workdir), mode, fail_at)
    first = await reader.run("Read the first batch of files")
    second = await reader.run("Read the second batch", message_history=first.all_messages())
    return json.dumps([first.output, second.output])


async def main(outdir: Path, fail_at: int, modes: list[str]) -> None:
    for mode in modes:
        for case, failing in (("uninterrupted", 0), ("failing", fail_at)):
            workdir = outdir / f"{mode}-{case}"
            workdir.mkdir(parents=True)
            output = await conversation(str(workdir), mode, failing)
            (workdir / "output.json").write_text(json.dumps({"output": output}))


asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] or ["persistent", "view"]))
