"""`before_compaction` / `after_compaction` through real agents (`historykit._hooks`).

Pydantic AI 2.x (`HistoryKit` capability, `FunctionModel`, runs saved in a
`SQLModelConversationStore`) and LangChain v1 (`create_agent` + `HistoryKitMiddleware`, a scripted
chat model, threads in a `SQLModelSaver`), in persistent and view-only mode: each compaction fires
the hooks once, with the conversation's key, the sizes of the report and the summary the store
keeps; the two modes fire the same hooks; a veto leaves the history uncompacted (and a vetoed
history over the window fails the run with `CompactionVetoedError`); a focus the hook gives reaches
the summarizer; a manual compaction is `automatic=False`; one integration serving concurrent
conversations gives each hook call its own conversation. `HistoryKitHook` and `HistoryKitProcessor`
take the hooks too.
"""

from __future__ import annotations

import asyncio
import re
import uuid
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from historykit import AdjustCompaction, AfterCompaction, BeforeCompaction, Pipeline, Report
from historykit.errors import ArgumentTypeError, CompactionVetoedError
from historykit.processors import Repair, Summarize, Trigger
from historykit.testing import CountingSummarizer
from tests.test_compaction_hooks import Recorder

WINDOW = 20_000
MARK = 2_500
"""Summarize's trigger: a turn of `READS` reads crosses it more than once."""
READS = 8
TOKEN = re.compile(r"TOKEN\d\d\dX[0-9a-f]{6}")


def new_token(n: int = 0) -> str:
    return f"TOKEN{n:03d}X{uuid.uuid4().hex[:6]}"


def file_content(path: str) -> str:
    """About 400 tokens, naming the path (and so the conversation's token)."""
    return "\n".join(f"{path}:{i}: total = compute(value_{i})" for i in range(30))


def pipeline(summarizer: CountingSummarizer, **hooks: Any) -> Pipeline:
    summarize = Summarize(
        trigger=Trigger(max_tokens=MARK), summarizer=summarizer, keep_last=2, min_gain=50, summary_tokens=300
    )
    return Pipeline([summarize, Repair()], **hooks)


class Hooks(Recorder):
    """`Recorder`'s hooks, plain or async (which let the other conversations run first)."""

    async def aon_before(self, event: BeforeCompaction) -> Any:
        await asyncio.sleep(0)  # other conversations run here
        return self.on_before(event)

    async def aon_after(self, event: AfterCompaction) -> None:
        await asyncio.sleep(0)
        self.on_after(event)

    def given(self, use_async: bool = False) -> dict[str, Any]:
        if use_async:
            return {"before_compaction": self.aon_before, "after_compaction": self.aon_after}
        return {"before_compaction": self.on_before, "after_compaction": self.on_after}


def assert_each_its_own(hooks: Hooks, tokens: dict[str, str]) -> None:
    """Every conversation (its id: its token) compacted, and each after-hook call got its own
    conversation's summary, with the focus the before-hook gave that conversation, and no other's."""
    by_conversation = defaultdict(list)
    for event in hooks.after:
        by_conversation[event.conversation[1]].append(event)  # type: ignore[index]
    assert set(by_conversation) == set(tokens)
    for conversation_id, events in by_conversation.items():
        token = tokens[conversation_id]
        for event in events:
            assert event.summary is not None and token in event.summary
            assert f"focus of {conversation_id}" in event.summary
            assert [t for t in tokens.values() if t != token and t in event.summary] == []


def watched(
    integration: Any, persist: bool, use_async: bool
) -> tuple[Any, Hooks, CountingSummarizer, list[Report]]:
    """`integration` (`HistoryKit`, `HistoryKitMiddleware`) on `pipeline`, with recording hooks, a
    counting summarizer and the reports it gives: a new one is what a new process would make."""
    hooks, summarizer, reports = Hooks(), CountingSummarizer(), []
    made = integration(
        pipeline(summarizer),
        context_window=WINDOW,
        persist=persist,
        on_report=reports.append,
        **hooks.given(use_async),
    )
    return made, hooks, summarizer, reports


def fresh_summaries(reports: list[Report]) -> list[Any]:
    """The summary markers the calls wrote (one per compaction)."""
    return [m for r in reports for m in r.markers if m.strategy == "summarize"]


def assert_fired_once_per_compaction(hooks: Hooks, reports: list[Report], key: tuple[Any, ...]) -> None:
    markers = fresh_summaries(reports)
    assert len(markers) >= 2, "the conversation must compact several times"
    assert len(hooks.before) == len(hooks.after) == len(markers)
    assert [a.markers[-1] for a in hooks.after] == markers
    compacted = [r for r in reports if any(m.strategy == "summarize" for m in r.markers)]
    for before, after, report in zip(hooks.before, hooks.after, compacted, strict=True):
        assert before.conversation == after.conversation == key
        assert before.tokens_before == after.tokens_before == report.tokens_before > MARK
        assert after.tokens_after < after.tokens_before
        assert (before.automatic, before.reason, before.step) == (True, "trigger", "Summarize")
        assert after.summary is not None and key[1] in str(key) and after.summary.startswith("[historykit]")


# --- Pydantic AI ---------------------------------------------------------------------------------


def _pai_agent(kit: Any, **install: Any) -> Any:
    """An agent reading `READS` files of the conversation whose token the task names, then
    answering; with the capability `kit`, else installed by `install` (`Agent` keyword arguments)."""
    from pydantic_ai import Agent
    from pydantic_ai import messages as pai
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    asked: dict[str, int] = defaultdict(int)

    async def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        await asyncio.sleep(0)  # let the other conversations' runs interleave
        token = TOKEN.search(str(messages[0])).group()  # type: ignore[union-attr]  # the task names it
        asked[token] += 1
        n = asked[token]
        if n % (READS + 1) == 0:
            return pai.ModelResponse([pai.TextPart(f"Read {READS} files.")])
        return pai.ModelResponse([pai.ToolCallPart("read_file", {"path": f"{token}/f{n}.py"}, f"r{n}")])

    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_content(path)

    return Agent(FunctionModel(respond), tools=[read_file], **(install or {"capabilities": [kit]}))


def _needs_capabilities(conversations: bool = True) -> None:
    pytest.importorskip("pydantic_ai.capabilities", reason="HistoryKit needs Pydantic AI capabilities")
    if conversations:
        pytest.importorskip("pydantic_ai.conversation_store", reason="conversations need Pydantic AI 2.x")


def _summary_texts(messages: list[Any]) -> list[str]:
    from historykit._messages import SummaryPart
    from historykit.plugins.pydantic_ai import PydanticAIAdapter

    neutral = PydanticAIAdapter().to_neutral(messages)
    return [p.text for m in neutral for p in m.parts if isinstance(p, SummaryPart)]


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_pydantic_ai_hooks_fire_once_per_compaction_with_the_store(
    tmp_path: Path, persist: bool
) -> None:
    _needs_capabilities()
    from pydantic_ai.usage import UsageLimits

    from historykit.checkpointers import SQLModelConversationStore
    from historykit.plugins.pydantic_ai import HistoryKit

    kit, hooks, summarizer, reports = watched(HistoryKit, persist, use_async=True)
    agent = _pai_agent(kit)
    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    token, limits = new_token(), UsageLimits(request_limit=None)
    first = await agent.run(f"Read the {token} files.", usage_limits=limits)
    await store.save(first)
    conversation_id = first.conversation.conversation_id
    loaded = await store.load(conversation_id)
    assert loaded is not None
    second = await agent.run(f"Read more {token} files.", conversation=loaded, usage_limits=limits)
    await store.save(second)

    assert_fired_once_per_compaction(hooks, reports, ("pydantic-ai", conversation_id))
    assert len(summarizer.calls) == len(hooks.before)
    assert all(token in a.summary for a in hooks.after if a.summary)
    stored = await store.load(conversation_id)
    assert stored is not None
    if persist:
        # The history kept is the compacted one: its summary is the last one the hook was given.
        assert _summary_texts(stored.messages) == [hooks.after[-1].summary]
    else:
        assert _summary_texts(stored.messages) == []  # view-only keeps every message as it arrived
    transcript = await store.transcript(conversation_id)
    assert transcript is not None

    # Another process (a new capability, empty caches) continues the stored conversation: in
    # view-only mode it derives the earlier compactions again, without a hook; only the calls it
    # makes fire them.
    cold, cold_hooks, cold_summarizer, cold_reports = watched(HistoryKit, persist, use_async=True)
    stored = await store.load(conversation_id)
    third = await _pai_agent(cold).run(
        f"Read the last {token} files.", conversation=stored, usage_limits=limits
    )
    await store.save(third)
    fired = len(fresh_summaries(cold_reports))
    assert fired >= 1 and len(cold_hooks.before) == len(cold_hooks.after) == fired
    if not persist:
        assert cold_reports[0].replayed_calls > 1
        assert len(cold_summarizer.calls) >= fired + len(hooks.before)  # the replay summarized again
    await store.aclose()


@pytest.mark.pydantic_ai
async def test_pydantic_ai_modes_fire_the_same_hooks() -> None:
    _needs_capabilities(conversations=False)
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    fired = {}
    for persist in (True, False):
        hooks = Hooks()
        kit = HistoryKit(
            pipeline(CountingSummarizer()), context_window=WINDOW, persist=persist, **hooks.given()
        )
        agent = _pai_agent(kit)
        token = "TOKEN000Xabcdef"
        first = await agent.run(f"Read the {token} files.", usage_limits=UsageLimits(request_limit=None))
        await agent.run(
            f"Read more {token} files.",
            message_history=first.all_messages(),
            usage_limits=UsageLimits(request_limit=None),
        )
        fired[persist] = (
            [(b.tokens_before, b.step) for b in hooks.before],
            [(a.tokens_before, a.tokens_after, a.summary) for a in hooks.after],
        )
    assert fired[True] == fired[False]
    assert len(fired[True][0]) >= 2


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_pydantic_ai_veto_and_focus(persist: bool) -> None:
    _needs_capabilities(conversations=False)
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    limits = UsageLimits(request_limit=None)
    vetoing, summarizer = Hooks(answer=False), CountingSummarizer()
    kit = HistoryKit(pipeline(summarizer), context_window=WINDOW, persist=persist, **vetoing.given())
    result = await _pai_agent(kit).run(f"Read the {new_token()} files.", usage_limits=limits)
    assert len(vetoing.before) >= 2 and vetoing.after == []  # asked at every call over the mark
    assert summarizer.calls == [] and _summary_texts(result.all_messages()) == []
    assert kit.last_report is not None and not kit.last_report.markers

    # The history outgrows the window: the vetoed run fails rather than send what cannot fit.
    small = HistoryKit(pipeline(summarizer), context_window=MARK + 800, persist=persist, **vetoing.given())
    with pytest.raises(CompactionVetoedError, match="vetoed the compaction"):
        await _pai_agent(small).run(f"Read the {new_token()} files.", usage_limits=limits)
    assert summarizer.calls == []

    focused, summarizer = Hooks(answer=AdjustCompaction(focus="the failing test")), CountingSummarizer()
    kit = HistoryKit(pipeline(summarizer), context_window=WINDOW, persist=persist, **focused.given())
    await _pai_agent(kit).run(f"Read the {new_token()} files.", usage_limits=limits)
    assert summarizer.focuses and set(summarizer.focuses) == {"the failing test"}
    assert {a.focus for a in focused.after} == {"the failing test"}
    assert all(m.focus == "the failing test" and m.automatic for a in focused.after for m in a.markers)


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_pydantic_ai_manual_compaction_fires_the_hooks(persist: bool) -> None:
    _needs_capabilities()
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    hooks, summarizer = Hooks(), CountingSummarizer()
    quiet = Pipeline([Summarize(summarizer=summarizer), Repair()])  # no automatic compaction
    kit = HistoryKit(quiet, context_window=WINDOW, persist=persist, **hooks.given(use_async=True))
    agent = _pai_agent(kit)
    token, limits = new_token(), UsageLimits(request_limit=None)
    first = await agent.run(f"Read the {token} files.", conversation=Conversation(conversation_id="m1"))
    assert hooks.before == []
    kit.compact("keep the file names", conversation="m1")
    await agent.run(
        f"Read more {token} files.",
        conversation=Conversation(conversation_id="m1", messages=first.all_messages()),
        usage_limits=limits,
    )
    (before,) = hooks.before
    (after,) = hooks.after
    assert (before.conversation, before.automatic, before.reason, before.focus) == (
        ("pydantic-ai", "m1"),
        False,
        "manual",
        "keep the file names",
    )
    assert summarizer.focuses == ["keep the file names"]
    assert after.markers[0].automatic is False and after.summary is not None and token in after.summary


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_one_capability_gives_concurrent_conversations_their_own_hook_calls(persist: bool) -> None:
    _needs_capabilities()
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    hooks = Hooks(answer=lambda event: AdjustCompaction(focus=f"focus of {event.conversation[1]}"))
    kit = HistoryKit(
        pipeline(CountingSummarizer()), context_window=WINDOW, persist=persist, **hooks.given(True)
    )
    agent = _pai_agent(kit)
    tokens = {f"conv-{n}": new_token(n) for n in range(16)}

    async def one(conversation_id: str, token: str) -> None:
        await agent.run(
            f"Read the {token} files.",
            conversation=Conversation(conversation_id=conversation_id),
            usage_limits=UsageLimits(request_limit=None),
        )

    await asyncio.gather(*(one(c, t) for c, t in tokens.items()))
    assert_each_its_own(hooks, tokens)


def test_history_kit_processor_takes_the_hooks() -> None:
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKitProcessor
    from tests.plugins.test_pydantic_ai_adapter import _history_processing

    hooks, summarizer = Hooks(), CountingSummarizer()
    processor = HistoryKitProcessor(
        pipeline(summarizer), context_window=WINDOW, **hooks.given(use_async=True)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 1.107 deprecates history_processors= in favour of capabilities
        agent = _pai_agent(None, **_history_processing(processor))
    token = new_token()
    result = agent.run_sync(f"Read the {token} files.", usage_limits=UsageLimits(request_limit=None))
    assert len(hooks.before) == len(hooks.after) == len(summarizer.calls) >= 1
    key = hooks.before[0].conversation
    assert isinstance(key, tuple) and key[0] == "pydantic-ai"
    assert hooks.after[-1].summary in _summary_texts(result.all_messages())


# --- LangChain -----------------------------------------------------------------------------------


def _lc_model() -> Any:
    """A chat model that reads `READS` files of the conversation whose token the task names, then
    answers (and again for the next task)."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    asked: dict[str, int] = defaultdict(int)

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            task = next(m for m in messages if m.type == "human")
            token = TOKEN.search(str(task.content)).group()  # type: ignore[union-attr]
            asked[token] += 1
            n = asked[token]
            if n % (READS + 1) == 0:
                reply = AIMessage(f"Read {READS} files.")
            else:
                call = {"id": f"r{n}", "name": "read_file", "args": {"path": f"{token}/f{n}.py"}}
                reply = AIMessage("", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=reply)])

        async def _agenerate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            await asyncio.sleep(0)  # let the other threads' runs interleave
            return self._generate(messages)

    return Scripted()


def _lc_read_file() -> Any:
    from langchain_core.tools import tool

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_content(path)

    return read_file


def _lc_agent(middleware: Any, checkpointer: Any) -> Any:
    from langchain.agents import create_agent

    return create_agent(_lc_model(), [_lc_read_file()], middleware=[middleware], checkpointer=checkpointer)


def _lc_summaries(messages: list[Any]) -> list[str]:
    from historykit._messages import SummaryPart
    from historykit.plugins.langchain import LangChainAdapter

    neutral = LangChainAdapter().to_neutral(messages)
    return [p.text for m in neutral for p in m.parts if isinstance(p, SummaryPart)]


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_langchain_hooks_fire_once_per_compaction_with_the_saver(
    tmp_path: Path, persist: bool, use_async: bool
) -> None:
    from langchain_core.messages import HumanMessage

    from historykit.checkpointers import SQLModelSaver
    from historykit.plugins.langchain import HistoryKitMiddleware

    middleware, hooks, summarizer, reports = watched(HistoryKitMiddleware, persist, use_async)
    token = new_token()
    config: Any = {"configurable": {"thread_id": "t1"}}
    with SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}") as saver:
        agent = _lc_agent(middleware, saver)
        for prompt in (f"Read the {token} files.", f"Read more {token} files."):
            if use_async:
                await agent.ainvoke({"messages": [HumanMessage(prompt)]}, config)
            else:
                agent.invoke({"messages": [HumanMessage(prompt)]}, config)
        state = agent.get_state(config).values["messages"]
        transcript = saver.transcript("t1")
    assert_fired_once_per_compaction(hooks, reports, ("langgraph", "t1", ""))
    assert len(summarizer.calls) == len(hooks.before)
    assert all(token in a.summary for a in hooks.after if a.summary)
    if persist:
        assert _lc_summaries(state) == [hooks.after[-1].summary]
    else:
        assert _lc_summaries(state) == []
    assert transcript is not None
    assert sum(1 for m in transcript.messages if m.type == "human") == 2

    # Another process (a new middleware, empty caches) continues the stored thread: the saver keeps
    # the view last sent beside the raw messages (view-only mode), so it resumes from that view and
    # summarizes only for its own calls, each firing the hooks once.
    cold, cold_hooks, cold_summarizer, cold_reports = watched(HistoryKitMiddleware, persist, use_async)
    with SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}") as saver:
        agent = _lc_agent(cold, saver)
        prompt = {"messages": [HumanMessage(f"Read the last {token} files.")]}
        if use_async:
            await agent.ainvoke(prompt, config)
        else:
            agent.invoke(prompt, config)
    fired = len(fresh_summaries(cold_reports))
    assert fired >= 1 and len(cold_hooks.before) == len(cold_hooks.after) == fired
    assert len(cold_summarizer.calls) == fired


def test_langchain_sync_run_refuses_an_async_hook() -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    hooks = Hooks()
    middleware = HistoryKitMiddleware(
        pipeline(CountingSummarizer()), context_window=WINDOW, **hooks.given(True)
    )
    agent = _lc_agent(middleware, InMemorySaver())
    with pytest.raises(ArgumentTypeError, match="aon_before is async"):
        agent.invoke(
            {"messages": [HumanMessage(f"Read the {new_token()} files.")]},
            {"configurable": {"thread_id": "x"}},
        )


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
def test_langchain_veto_focus_and_manual_compaction(persist: bool) -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    def run(middleware: Any, thread: str, *prompts: str) -> list[Any]:
        agent = _lc_agent(middleware, InMemorySaver())
        config: Any = {"configurable": {"thread_id": thread}}
        for prompt in prompts:
            state = agent.invoke({"messages": [HumanMessage(prompt)]}, config)
        return list(state["messages"])

    vetoing, summarizer = Hooks(answer=False), CountingSummarizer()
    middleware = HistoryKitMiddleware(
        pipeline(summarizer), context_window=WINDOW, persist=persist, **vetoing.given()
    )
    messages = run(middleware, "v", f"Read the {new_token()} files.")
    assert len(vetoing.before) >= 2 and vetoing.after == [] and summarizer.calls == []
    assert _lc_summaries(messages) == [] and middleware.last_report is not None
    assert not middleware.last_report.markers

    small = HistoryKitMiddleware(
        pipeline(summarizer), context_window=MARK + 800, persist=persist, **vetoing.given()
    )
    with pytest.raises(CompactionVetoedError, match="over the 3,300-token context window"):
        run(small, "w", f"Read the {new_token()} files.")

    focused, summarizer = Hooks(answer=AdjustCompaction(focus="the failing test")), CountingSummarizer()
    middleware = HistoryKitMiddleware(
        pipeline(summarizer), context_window=WINDOW, persist=persist, **focused.given()
    )
    run(middleware, "f", f"Read the {new_token()} files.")
    assert summarizer.focuses and set(summarizer.focuses) == {"the failing test"}
    assert all(m.focus == "the failing test" for a in focused.after for m in a.markers)

    manual, summarizer = Hooks(), CountingSummarizer()
    quiet = Pipeline([Summarize(summarizer=summarizer), Repair()])
    middleware = HistoryKitMiddleware(quiet, context_window=WINDOW, persist=persist, **manual.given())
    agent = _lc_agent(middleware, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "m"}}
    token = new_token()
    agent.invoke({"messages": [HumanMessage(f"Read the {token} files.")]}, config)
    assert manual.before == []
    middleware.compact("keep the file names", thread_id="m")
    agent.invoke({"messages": [HumanMessage(f"Read more {token} files.")]}, config)
    (before,) = manual.before
    (after,) = manual.after
    assert (before.conversation, before.automatic, before.reason, before.focus) == (
        ("langgraph", "m", ""),
        False,
        "manual",
        "keep the file names",
    )
    assert summarizer.focuses == ["keep the file names"] and after.markers[0].automatic is False


@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view"])
async def test_one_middleware_gives_concurrent_threads_their_own_hook_calls(persist: bool) -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    hooks = Hooks(answer=lambda event: AdjustCompaction(focus=f"focus of {event.conversation[1]}"))
    middleware = HistoryKitMiddleware(
        pipeline(CountingSummarizer()), context_window=WINDOW, persist=persist, **hooks.given(True)
    )
    agent = _lc_agent(middleware, InMemorySaver())
    tokens = {f"thread-{n}": new_token(n) for n in range(16)}

    async def one(thread: str, token: str) -> None:
        config: Any = {"configurable": {"thread_id": thread}}
        await agent.ainvoke({"messages": [HumanMessage(f"Read the {token} files.")]}, config)

    await asyncio.gather(*(one(t, k) for t, k in tokens.items()))
    assert_each_its_own(hooks, tokens)


def test_history_kit_hook_takes_the_hooks() -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent

    from historykit.plugins.langchain import HistoryKitHook

    hooks, summarizer = Hooks(), CountingSummarizer()
    hook = HistoryKitHook(pipeline(summarizer), context_window=WINDOW, **hooks.given())
    model = _lc_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved to langchain.agents in LangGraph 1.0
        agent = create_react_agent(
            model, [_lc_read_file()], pre_model_hook=hook, checkpointer=InMemorySaver()
        )
    token = new_token()
    agent.invoke(
        {"messages": [HumanMessage(f"Read the {token} files.")]}, {"configurable": {"thread_id": "h"}}
    )
    assert len(hooks.before) == len(hooks.after) == len(summarizer.calls) >= 1
    assert {e.conversation for e in hooks.before} == {("langgraph", "h", "")}
    assert all(token in (e.summary or "") for e in hooks.after)


@pytest.mark.pydantic_ai
async def test_compacting_a_stored_conversation_fires_the_hooks(tmp_path: Path) -> None:
    _needs_capabilities()
    from historykit.checkpointers import SQLModelConversationStore
    from historykit.plugins.pydantic_ai import HistoryKit

    hooks = Hooks(answer=lambda event: AdjustCompaction(focus=f"{event.focus}, and the tests"))
    summarizer = CountingSummarizer()
    quiet = Pipeline([Summarize(summarizer=summarizer), Repair()])  # no automatic compaction
    kit = HistoryKit(quiet, context_window=WINDOW, **hooks.given(use_async=True))
    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'chat.db'}")
    token = new_token()
    first = await _pai_agent(kit).run(f"Read the {token} files.")
    await store.save(first)
    conversation_id = first.conversation.conversation_id
    loaded = await store.load(conversation_id)
    assert loaded is not None and hooks.before == []
    await store.save(await kit.compact_conversation(loaded, "the file names"))
    (before,) = hooks.before
    (after,) = hooks.after
    assert (before.conversation, before.reason, before.focus) == (
        ("pydantic-ai", conversation_id),
        "manual",
        "the file names",
    )
    assert summarizer.focuses == ["the file names, and the tests"]
    stored = await store.load(conversation_id)
    assert stored is not None and _summary_texts(stored.messages) == [after.summary]
    await store.aclose()


def test_compacting_a_stored_thread_fires_the_hooks(tmp_path: Path) -> None:
    from langchain_core.messages import HumanMessage

    from historykit.checkpointers import SQLModelSaver
    from historykit.plugins.langchain import HistoryKitMiddleware

    hooks, summarizer = Hooks(), CountingSummarizer()
    quiet = Pipeline([Summarize(summarizer=summarizer), Repair()])
    middleware = HistoryKitMiddleware(quiet, context_window=WINDOW, persist=True, **hooks.given())
    config: Any = {"configurable": {"thread_id": "stored"}}
    with SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}") as saver:
        agent = _lc_agent(middleware, saver)
        agent.invoke({"messages": [HumanMessage(f"Read the {new_token()} files.")]}, config)
        assert hooks.before == []
        report = middleware.compact_thread(agent, config, "the file names")
        state = agent.get_state(config).values["messages"]
    (before,) = hooks.before
    (after,) = hooks.after
    assert (before.conversation, before.automatic, before.focus) == (
        ("langgraph", "stored", ""),
        False,
        "the file names",
    )
    assert list(after.markers) == report.markers and _lc_summaries(state) == [after.summary]

    vetoing = Hooks(answer=False)
    middleware = HistoryKitMiddleware(quiet, context_window=WINDOW, persist=True, **vetoing.given())
    with SQLModelSaver(f"sqlite:///{tmp_path / 'agent.db'}") as saver:
        agent = _lc_agent(middleware, saver)
        kept = agent.get_state(config).values["messages"]
        report = middleware.compact_thread(agent, config, "again")
        assert agent.get_state(config).values["messages"] == kept  # vetoed: nothing written
    assert report.markers == [] and len(vetoing.before) == 1 and vetoing.after == []
