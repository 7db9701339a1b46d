"""The transcript search tool through real agents of both frameworks (LangChain `create_agent` with
`HistoryKitMiddleware`, Pydantic AI with the `HistoryKit` capability), both modes, with the stores:
the model reads files until the old ones are cleared, searches for a value only an old file had,
and recalls that file by the handle the hit names. One shared instance serves two conversations,
each with its own planted token: neither search ever finds the other's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from historykit import Pipeline, Recall
from historykit.checkpointers import SQLModelSaver
from historykit.plugins.langchain import HistoryKitMiddleware
from historykit.processors import ClearToolResults, Repair, Trigger
from tests.plugins.test_recall_langgraph import ScriptedChatModel, thread

READS = 6
WINDOW = 6_000
HIT_HANDLE = re.compile(r"recall\(handle='([0-9a-f]{10})'\) returns this output")


def file_content(path: str, token: str) -> str:
    """About 600 tokens of a source file; the first file of a conversation holds its `token`."""
    lines = [f"{path}:{i}: total = compute(value_{i}, factor={i * 7 % 13})" for i in range(30)]
    if path.endswith("f0.py"):
        lines[17] = f"SECRET_ROUTE = '/internal/{token}'"
    return "\n".join(lines)


def pipeline() -> Pipeline:
    clear = ClearToolResults(keep=1, min_tokens=50, min_gain=100, trigger=Trigger(max_tokens=2_000))
    return Pipeline([clear, Repair()])


class Searcher:
    """Reads `READS` files, then searches for `SECRET_ROUTE`, recalls the output the newest hit
    names, and answers with what it found."""

    def __init__(self) -> None:
        self.sent_reads: list[str] = []
        self.search_answers: list[str] = []
        self.recalled: list[str] = []
        self.calls = 0

    def respond(self, latest: tuple[str, str] | None, reads: list[str]) -> tuple[str, dict[str, Any]] | str:
        """The next action from the latest tool answer (`(tool, text)`) and the read outputs sent."""
        self.calls += 1
        self.sent_reads = reads
        if latest is not None and latest[0] == "search_history":
            self.search_answers.append(latest[1])
            found = HIT_HANDLE.search(latest[1])
            return ("recall", {"handle": found[1]}) if found else "Nothing found."
        if latest is not None and latest[0] == "recall":
            self.recalled.append(latest[1])
            return "Found it."
        if len(reads) < READS:
            return ("read_file", {"path": f"src/f{len(reads)}.py"})
        return ("search_history", {"query": "secret_route"})


def check(script: Searcher, token: str, other: str) -> None:
    (answer,) = script.search_answers
    assert f"SECRET_ROUTE = '/internal/{token}'" in answer
    assert other not in answer  # another conversation's content never crosses over
    assert script.recalled == [file_content("src/f0.py", token)]
    # The search was needed: the file the token is in had been cleared from what the model was sent.
    assert not any(token in read for read in script.sent_reads)


# --- LangChain --------------------------------------------------------------------------------


class LangChainSearcher(Searcher):
    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        latest = messages[-1]
        last = (latest.name or "", str(latest.content)) if isinstance(latest, ToolMessage) else None
        reads = [str(m.content) for m in messages if isinstance(m, ToolMessage) and m.name == "read_file"]
        action = self.respond(last, reads)
        if isinstance(action, str):
            return AIMessage(action)
        name, args = action
        return AIMessage("", tool_calls=[{"id": f"call_{self.calls}", "name": name, "args": args}])


def langchain_tool(tokens: dict[str, str]) -> Any:
    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_content(path, tokens["current"])

    return read_file


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
async def test_langchain_the_model_finds_a_cleared_value_by_searching(persist: bool, tmp_path: Path) -> None:
    saver = SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}")
    recall = Recall(store=saver, search=True)
    middleware = HistoryKitMiddleware(pipeline(), context_window=WINDOW, persist=persist, recall=recall)
    tokens = {"current": ""}
    scripts = {}
    for name, token in (("alpha", "tok-alpha-5519"), ("beta", "tok-beta-7730")):
        tokens["current"] = token
        scripts[name] = LangChainSearcher()
        model = ScriptedChatModel(respond=scripts[name])
        agent = create_agent(model, [langchain_tool(tokens)], middleware=[middleware], checkpointer=saver)
        out = await agent.ainvoke({"messages": [HumanMessage("Find the internal route.")]}, thread(name))
        assert out["messages"][-1].content == "Found it."
        assert {"recall", "search_history"} <= model.tools_offered
    check(scripts["alpha"], "tok-alpha-5519", "tok-beta-7730")
    check(scripts["beta"], "tok-beta-7730", "tok-alpha-5519")


# --- Pydantic AI -------------------------------------------------------------------------------


def pydantic_ai_searcher(script: Searcher) -> Any:
    from pydantic_ai import messages as pai
    from pydantic_ai.models.function import AgentInfo

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        returns = [
            p
            for m in messages
            if isinstance(m, pai.ModelRequest)
            for p in m.parts
            if isinstance(p, pai.ToolReturnPart)
        ]
        final = messages[-1]
        latest = (
            (returns[-1].tool_name, str(returns[-1].content))
            if returns and isinstance(final, pai.ModelRequest) and final.parts[-1] is returns[-1]
            else None
        )
        action = script.respond(latest, [str(p.content) for p in returns if p.tool_name == "read_file"])
        if isinstance(action, str):
            return pai.ModelResponse([pai.TextPart(action)])
        name, args = action
        return pai.ModelResponse([pai.ToolCallPart(name, args, tool_call_id=f"call_{script.calls}")])

    return respond


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
async def test_pydantic_ai_the_model_finds_a_cleared_value_by_searching(
    persist: bool, tmp_path: Path
) -> None:
    import importlib.metadata

    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    pai2 = not importlib.metadata.version("pydantic-ai-slim").startswith("1.")
    store: Any = None
    if pai2:
        from historykit.checkpointers import SQLModelConversationStore

        store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    kit = HistoryKit(
        pipeline(), context_window=WINDOW, persist=persist, recall=Recall(store=store, search=True)
    )
    scripts = {}
    for name, token in (("alpha", "tok-alpha-5519"), ("beta", "tok-beta-7730")):
        scripts[name] = script = Searcher()
        agent: Agent[None, str] = Agent(FunctionModel(pydantic_ai_searcher(script)), capabilities=[kit])

        @agent.tool_plain
        def read_file(path: str) -> str:
            """Read a file of the repository."""
            return file_content(path, token)  # noqa: B023 (the agent runs within this iteration)

        options: dict[str, Any] = {"usage_limits": UsageLimits(request_limit=None)}
        if pai2:
            from pydantic_ai.conversation import Conversation

            options["conversation"] = Conversation(conversation_id=name)
        result = await agent.run("Find the internal route.", **options)
        assert result.output == "Found it."
        if store is not None:
            await store.save(result)
    check(scripts["alpha"], "tok-alpha-5519", "tok-beta-7730")
    check(scripts["beta"], "tok-beta-7730", "tok-alpha-5519")
