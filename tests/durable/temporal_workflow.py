"""A Temporal workflow module with a `HistoryKit` agent under `TemporalDurability`, for
`test_durable_agents.py` to validate in Temporal's workflow sandbox (the module is imported again
there, as a worker does)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.test import TestModel
from temporalio import workflow

from historykit import Pipeline
from historykit.plugins.pydantic_ai import HistoryKit
from historykit.processors import ClearToolResults, Repair, Summarize

kit = HistoryKit(Pipeline([ClearToolResults(), Summarize(), Repair()]), recall=True)
agent: Agent[None, str] = Agent(TestModel(), name="reader", capabilities=[kit, TemporalDurability()])


@workflow.defn
class Conversation:
    @workflow.run
    async def run(self, prompt: str) -> str:
        return (await agent.run(prompt)).output
