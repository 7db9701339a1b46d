"""`HistoryKit` with Pydantic AI's durability capabilities and wrappers, without a crash.

- every durability capability accepts it (Pydantic AI inspects every capability's members);
- Temporal: the agent registers historykit's operations as activities, and its workflow module
  passes Temporal's sandbox validation offline (Temporal's test server is a download, so no
  workflow runs here: see the README's "Durable execution" section for what stays unproven);
- the deprecated `TemporalAgent` wrapper, which binds no capability operations, is refused inside
  a workflow with a clear error;
- in a DBOS workflow a `Summarize(background_at=...)` is refused, and a sync summarizer runs inside
  the step;
- in a DBOS workflow an output `OffloadToolOutputs` shortened is read back with `recall(grep=...)`,
  and the search tool's read of the conversation store is a step of its own;
- in a DBOS workflow the compaction hooks run inside the view's step, with the run's conversation.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from historykit import Pipeline
from historykit._messages import Message
from historykit.errors import UserError
from historykit.plugins.pydantic_ai import HistoryKit
from historykit.processors import Repair, Summarize, Trigger

durable_exec = pytest.importorskip("pydantic_ai.durable_exec")


def _capabilities() -> list[Any]:
    found: list[Any] = []
    for module, name in (("dbos", "DBOSDurability"), ("temporal", "TemporalDurability")):
        try:
            found.append(getattr(__import__(f"pydantic_ai.durable_exec.{module}", fromlist=[name]), name))
        except (ImportError, AttributeError):  # the engine's SDK missing; Pydantic AI 1.x has no capability
            continue
    return found


@pytest.mark.parametrize("durability", _capabilities(), ids=lambda c: c.__name__)
def test_every_durability_capability_takes_a_history_kit(durability: Any) -> None:
    agent = Agent(TestModel(), name="reader", capabilities=[HistoryKit(Repair(), recall=True), durability()])
    assert agent.run_sync("hi").output  # outside a workflow the run is an ordinary one


def test_member_inspection_sees_no_langchain_hook() -> None:
    """What Pydantic AI's durable execution does to every capability: no error, no such hook."""
    from historykit.plugins._glue import WrongFramework

    members = dict(inspect.getmembers(HistoryKit))
    assert isinstance(members["wrap_tool_call"], WrongFramework)  # the trap itself, never a hook
    assert not hasattr(HistoryKit, "wrap_tool_call")


def test_temporal_registers_historykits_operations_as_activities() -> None:
    from temporalio import activity

    from tests.durable.temporal_workflow import agent

    durability = durable_exec.temporal.TemporalDurability.from_agent(agent)
    names = {activity._Definition.must_from_callable(a).name for a in durability.temporal_activities}
    assert {
        "agent__reader__capability__historykit__view",
        "agent__reader__capability__historykit__recompact",
        "agent__reader__capability__historykit__recall",
        "agent__reader__capability__historykit__search",
        "agent__reader__toolset__historykit_recall__call_tool",
    } <= names
    recall_tool = HistoryKit(Repair(), recall=True).get_toolset().tools["recall"]
    assert recall_tool.metadata == {"temporal": False, "prefect": False}  # looked up in the workflow


def test_the_temporal_workflow_passes_the_sandbox_validation() -> None:
    from pydantic_ai.durable_exec.temporal import _workflow_runner
    from temporalio import workflow
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from tests.durable.temporal_workflow import Conversation

    runner = _workflow_runner(SandboxedWorkflowRunner())
    # historykit is passed through, as the README's recipe says (its workflow-side code is
    # deterministic; re-imported in the sandbox it subclasses a proxied object); the workflow module
    # is imported again inside the sandbox and builds the agent there.
    runner = replace(runner, restrictions=runner.restrictions.with_passthrough_modules("historykit"))
    definition = workflow._Definition.must_from_class(Conversation)

    async def validate() -> None:  # a worker validates on its event loop
        runner.prepare_workflow(definition)

    asyncio.run(validate())


def test_the_deprecated_temporal_agent_is_refused_inside_a_workflow(monkeypatch: pytest.MonkeyPatch) -> None:
    import temporalio.workflow

    agent = Agent(TestModel(), name="reader", capabilities=[HistoryKit(Repair())])
    monkeypatch.setattr(temporalio.workflow, "in_workflow", lambda: True)
    with pytest.raises(UserError, match=r"capabilities=\[HistoryKit\(\.\.\.\), TemporalDurability\(\)\]"):
        agent.run_sync("hi")


def _reader(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
    """Reads files until six were read or the history was summarized (a summary replaces reads)."""
    reads = sum(isinstance(p, pai.ToolReturnPart) for m in messages for p in m.parts)
    summarized = any(type(p).__name__ == "CompactionPart" for m in messages for p in m.parts)
    if reads < 6 and not summarized:
        n = len(messages)
        return pai.ModelResponse([pai.ToolCallPart("read_file", {"name": str(n)}, tool_call_id=f"call-{n}")])
    return pai.ModelResponse([pai.TextPart("done")])


def test_in_a_dbos_workflow_background_summaries_are_refused_and_sync_summarizers_run_in_the_step(
    tmp_path: Path,
) -> None:
    dbos = pytest.importorskip("dbos")
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    threads: list[tuple[str, int | None]] = []

    def summarize(messages: list[Message]) -> str:
        threads.append((threading.current_thread().name, dbos.DBOS.step_id))
        return "## Task\nread\n## Done\nread some files"

    def agent_with(summarizer: Summarize, name: str) -> Agent[None, str]:
        agent: Agent[None, str] = Agent(
            FunctionModel(_reader),
            name=name,
            capabilities=[HistoryKit(Pipeline([summarizer])), DBOSDurability()],
        )

        @agent.tool_plain
        def read_file(name: str) -> str:
            """Read a file."""
            return f"file {name}: " + " ".join(f"word{i}" for i in range(200))

        return agent

    trigger = Trigger(max_tokens=900)
    background = agent_with(Summarize(trigger=trigger, background_at=0.5, summary_tokens=50), "background")
    foreground = agent_with(
        Summarize(trigger=trigger, keep_last=1, summarizer=summarize, summary_tokens=50, min_gain=100),
        "foreground",
    )
    dbos.DBOS(
        config={
            "name": "historykit-durable-agents",
            "system_database_url": f"sqlite:///{tmp_path / 'db.sqlite'}",
        }
    )

    @dbos.DBOS.workflow()
    async def run(which: str) -> str:
        agent = background if which == "background" else foreground
        return (await agent.run("Read the files")).output

    async def main() -> None:
        dbos.DBOS.launch()
        with pytest.raises(UserError, match=r"background_at=\.\.\.\) starts background summaries"):
            await run("background")
        assert await run("foreground") == "done"

    try:
        asyncio.run(main())
    finally:
        dbos.DBOS.destroy(destroy_registry=True)
    assert threads, "the run must summarize"
    # The sync summarizer ran on a worker thread, inside the DBOS step of the pipeline call.
    assert all(name != threading.main_thread().name and step is not None for name, step in threads)


def test_in_a_dbos_workflow_offloaded_outputs_are_read_back_and_the_store_is_searched_in_a_step(
    tmp_path: Path,
) -> None:
    """A tool output offloaded when it arrived is read back by range and found by search inside a
    DBOS workflow; the search's read of the conversation store (an earlier run's transcript) is a
    DBOS step of its own, never workflow code."""
    dbos = pytest.importorskip("dbos")
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    from historykit import Recall
    from historykit.checkpointers import SQLModelConversationStore
    from historykit.processors import OffloadToolOutputs

    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    log = "\n".join(f"step {i} ok" for i in range(4_000))
    log = log.replace("step 2500 ok", "step 2500 FAILED: disk quota 9137 exceeded")
    answers: list[str] = []

    def model(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        final = messages[-1].parts[-1]
        if isinstance(final, pai.UserPromptPart):
            if "earlier" in str(final.content):
                return pai.ModelResponse(
                    [pai.ToolCallPart("search_history", {"query": "quota"}, tool_call_id="s")]
                )
            return pai.ModelResponse([pai.ToolCallPart("run_job", {}, tool_call_id="j")])
        if isinstance(final, pai.ToolReturnPart) and final.tool_name == "run_job":
            answers.append(str(final.content))
            return pai.ModelResponse(
                [
                    pai.ToolCallPart(
                        "recall", {"handle": _handle(final.content), "grep": "failed"}, tool_call_id="r"
                    )
                ]
            )
        answers.append(str(final.content) if isinstance(final, pai.ToolReturnPart) else "")
        return pai.ModelResponse([pai.TextPart("done")])

    def agent_with(name: str) -> Agent[None, str]:
        kit = HistoryKit(
            Pipeline([OffloadToolOutputs(max_tokens=2_000, keep_tokens=500), Repair()]),
            id="hk",
            recall=Recall(store=store, search=True),
        )
        agent: Agent[None, str] = Agent(FunctionModel(model), name=name, capabilities=[kit, DBOSDurability()])

        @agent.tool_plain
        def run_job() -> str:
            """Run the nightly job."""
            return log

        return agent

    first, second = agent_with("first"), agent_with("second")
    dbos.DBOS(
        config={"name": "historykit-offload", "system_database_url": f"sqlite:///{tmp_path / 'db.sqlite'}"}
    )

    @dbos.DBOS.workflow()
    async def run(which: str, prompt: str, messages: list[Any]) -> list[Any]:
        agent = first if which == "first" else second
        result = await agent.run(prompt, conversation=Conversation(conversation_id="job", messages=messages))
        return [dbos.DBOS.workflow_id, result.all_messages_json().decode()]

    async def main() -> list[str]:
        dbos.DBOS.launch()
        _, messages_json = await run("first", "Run the job.", [])
        result_messages = pai.ModelMessagesTypeAdapter.validate_json(messages_json)
        await store.save(Conversation(conversation_id="job", messages=result_messages))
        later, _ = await run("second", "What failed earlier?", [])
        steps = await dbos.DBOS.list_workflow_steps_async(later)
        return [step["function_name"] for step in steps]

    try:
        names = asyncio.run(main())
    finally:
        dbos.DBOS.destroy(destroy_registry=True)
    shortened, grep, search = answers
    assert "FAILED" not in shortened and "recall(handle=" in shortened.rsplit("\n", 1)[1]
    assert "  2501\tstep 2500 FAILED: disk quota 9137 exceeded" in grep
    # The second run's own history is empty: the hit came from the store, read in a step.
    assert "step 2500 FAILED: disk quota 9137 exceeded" in search
    assert any("search" in name for name in names), names


def _handle(content: object) -> str:
    import re

    found = re.search(r"recall\(handle='([0-9a-f]{10})'\)", str(content))
    assert found, str(content)[-300:]
    return found[1]


def test_in_a_dbos_workflow_the_compaction_hooks_run_inside_the_views_step(tmp_path: Path) -> None:
    """The hooks are part of the view's durable unit: called inside the DBOS step that computes the
    view (a recovery reuses the step's recorded view, so a hook is not called twice for one
    compaction), with the run's conversation."""
    dbos = pytest.importorskip("dbos")
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    from historykit import AfterCompaction, BeforeCompaction

    calls: list[tuple[str, Any, int | None]] = []

    def before(event: BeforeCompaction) -> None:
        calls.append(("before", event.conversation, dbos.DBOS.step_id))

    def after(event: AfterCompaction) -> None:
        calls.append(("after", event.conversation, dbos.DBOS.step_id))

    summarize = Summarize(
        trigger=Trigger(max_tokens=900),
        keep_last=1,
        summarizer=lambda messages: "## Task\nread\n## Done\nread some files",
        summary_tokens=50,
        min_gain=100,
    )
    kit = HistoryKit(Pipeline([summarize]), id="hk", before_compaction=before, after_compaction=after)
    agent: Agent[None, str] = Agent(
        FunctionModel(_reader), name="hooked", capabilities=[kit, DBOSDurability()]
    )

    @agent.tool_plain
    def read_file(name: str) -> str:
        """Read a file."""
        return f"file {name}: " + " ".join(f"word{i}" for i in range(200))

    dbos.DBOS(
        config={"name": "historykit-hooks", "system_database_url": f"sqlite:///{tmp_path / 'db.sqlite'}"}
    )

    @dbos.DBOS.workflow()
    async def run() -> str:
        return (await agent.run("Read the files", conversation=Conversation(conversation_id="c7"))).output

    async def main() -> str:
        dbos.DBOS.launch()
        return await run()

    try:
        assert asyncio.run(main()) == "done"
    finally:
        dbos.DBOS.destroy(destroy_registry=True)
    assert [c[0] for c in calls][:2] == ["before", "after"]
    assert all(conversation == ("pydantic-ai", "c7") for _, conversation, _ in calls)
    assert all(step is not None for _, _, step in calls), calls  # inside the view's step
