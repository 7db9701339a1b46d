"""`make demo`: a real agent session replayed offline through Pydantic AI and LangGraph, with historykit.

The bundled sample (`data/sample_session.jsonl`, a real Claude Code sub-agent session under the MIT
license: `data/SAMPLE-SOURCE.md`) is replayed model call by model call, first by a Pydantic AI agent,
then by a LangChain v1 agent (a LangGraph graph). Nothing calls an LLM: the model is a stand-in that
answers each call with the session's next assistant message, and each tool returns the result the
session recorded for that call. Everything else is the real thing:

- the agent runs historykit's default pipeline (`historykit.default_pipeline()`) before every model
  call, in persistent mode: the Pydantic AI `HistoryKit` capability, the LangChain
  `HistoryKitMiddleware(persist=True)`;
- the context window comes from the model's profile, set small enough (10,000 tokens by default)
  that the pipeline clears old tool outputs and summarizes while the session runs (the raw
  history grows to more than twice the window);
- every model call is persisted as it happens: Pydantic AI's conversation in
  `SQLModelConversationStore`, the LangGraph thread in `SQLModelSaver`, both in one SQLite file
  (`./.historykit-demo/demo.db` by default);
- a live gauge (`historykit.gauge.Gauge`, fed every report) shows the tokens each call sends against
  the window, next to what the raw history
  would have sent, and each compaction is announced as it happens.

It ends with the report (tokens sent, prompt-cache reuse, compactions, per processor), the stored
thread with its compaction markers (`transcript()`), and where the database file is.

The replay pieces are usable on their own (the notebooks do): `Recording.load()` reads a
transcript, `PydanticAIReplay(recording)` gives a `FunctionModel` and tools for an `Agent`, and
`LangChainReplay(recording)` a chat model and tools for `create_agent`.

Run: `python -m historykit.demo [--window N] [--db PATH_OR_URL] [--session FILE] [--delay SECONDS]
[--only pydantic-ai|langgraph]`.

Example:
    ```python
    from pydantic_ai import Agent
    from pydantic_ai.usage import UsageLimits
    import historykit
    from historykit.demo import PydanticAIReplay, Recording
    from historykit.plugins.pydantic_ai import HistoryKit

    replay = PydanticAIReplay(Recording.load(), window=10_000)
    kit = HistoryKit(historykit.default_pipeline())
    agent = Agent(replay.model, tools=replay.tools, system_prompt=replay.system_prompts, capabilities=[kit])
    result = await agent.run(replay.prompts[0], usage_limits=UsageLimits(request_limit=None))
    ```
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Table
from rich.text import Text

from historykit.formats import detached
from historykit.gauge import Gauge
from historykit.messages import Message, SummaryPart, TextPart, ToolCallPart, ToolResultPart
from historykit.pipeline import HistoryProcessor, Report, StepReport
from historykit.tokens import TokenCounter

__all__ = [
    "CLOSING_TEXT",
    "DEFAULT_DATABASE",
    "DEFAULT_WINDOW",
    "Call",
    "LangChainReplay",
    "PydanticAIReplay",
    "Recording",
    "ReplayRun",
    "main",
    "run_langgraph",
    "run_pydantic_ai",
    "sample_path",
]

DEFAULT_WINDOW = 10_000
"""The demo's context window: the sample's raw history grows to more than twice this."""
DEFAULT_DATABASE = Path(".historykit-demo") / "demo.db"
"""Where the demo keeps its SQLite database, relative to the working directory."""
THREAD_IDS = {"pydantic-ai": "demo-pydantic-ai", "langgraph": "demo-langgraph"}
"""The conversation / thread ids the demo writes (each run replaces the previous run's)."""
CLOSING_TEXT = "[historykit demo] The recording has no answer to this call: the replay ends the turn here."
"""What the replayed model answers when a recorded turn ends without a final answer."""


def sample_path() -> Path:
    """The bundled sample transcript (see `data/SAMPLE-SOURCE.md`)."""
    return Path(str(resources.files("historykit") / "data" / "sample_session.jsonl"))


# ---------------------------------------------------------------------------------------------
# The recording
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recording:
    """A recorded agent session, cut into what a replay needs.

    Turns start at the user's messages: a turn is the user message(s) that open it, then the
    assistant messages (one per model call) and tool results up to the next user message.

    Example:
        ```python
        from historykit.demo import Recording

        recording = Recording.load()                 # the bundled sample
        recording = Recording.load("session.jsonl")  # any format historykit.formats reads
        recording.model_calls, len(recording.turns)
        ```
    """

    name: str
    """The file name."""
    messages: list[Message]
    """The whole session, neutral."""
    turns: list[tuple[int, int]]
    """`(start, end)` message indices of each turn; the system messages before the first are not in any."""

    @classmethod
    def load(cls, path: str | Path | None = None) -> Recording:
        """Read a transcript (the bundled sample by default), in any format `historykit.formats` reads."""
        from historykit.formats import read_transcript

        path = Path(path) if path is not None else sample_path()
        return cls.of(read_transcript(path).messages, name=path.name)

    @classmethod
    def of(cls, messages: Sequence[Message], *, name: str = "transcript") -> Recording:
        """A recording of neutral messages; `ValueError` when there is nothing to replay."""
        for index, msg in enumerate(messages):
            if not isinstance(msg, Message):
                raise TypeError(f"message {index} is a {type(msg).__name__}, not a historykit Message")
        # Cut loose from the file's own rows (a Claude Code or Codex log): the framework adapters
        # build their messages anew, and the recorded usage belongs to the original run, not the replay.
        messages = [replace(detached(m), usage=None) for m in messages]
        starts: list[int] = []
        for index, msg in enumerate(messages):
            if not _is_prompt(msg):
                continue
            previous = messages[index - 1] if index else None
            # Consecutive user messages open one turn together.
            if previous is None or not _is_prompt(previous):
                starts.append(index)
        if not starts:
            raise ValueError(f"{name}: no user message to start a replay from")
        for index, msg in enumerate(messages[: starts[0]]):
            if msg.role != "system":
                raise ValueError(
                    f"{name}: message {index} ({msg.role}) comes before the first user message, "
                    "where a replay starts"
                )
        if not any(m.role == "assistant" for m in messages):
            raise ValueError(f"{name}: no assistant message (model call) to replay")
        ends = [*starts[1:], len(messages)]
        return cls(name, messages, list(zip(starts, ends)))

    @property
    def model_calls(self) -> int:
        """Assistant messages: each answers one model call."""
        return sum(1 for m in self.messages if m.role == "assistant")

    @property
    def system_prompts(self) -> list[str]:
        """The text of the system messages before the first turn."""
        first = self.turns[0][0]
        return [_text(m) for m in self.messages[:first] if m.role == "system"]

    def prompts(self, turn: int) -> list[str]:
        """The text of the user messages that open a turn."""
        start, end = self.turns[turn]
        out = []
        for msg in self.messages[start:end]:
            if not _is_prompt(msg):
                break
            out.append(_text(msg))
        return out

    def tool_results(self) -> dict[str, str]:
        """The recorded result of every tool call, by call id."""
        return {
            part.tool_call_id: part.content
            for msg in self.messages
            for part in msg.parts
            if isinstance(part, ToolResultPart)
        }

    def raw_sizes(self, counter: TokenCounter) -> list[int]:
        """Tokens of the raw history each model call would send: everything before its answer."""
        sizes, total = [], 0
        for msg in self.messages:
            if msg.role == "assistant":
                sizes.append(total)
            total += counter.count_message(msg)
        return sizes


def _is_prompt(msg: Message) -> bool:
    """A user message in the user's own voice (tool results are not)."""
    return msg.role == "user" and not any(isinstance(p, ToolResultPart) for p in msg.parts)


def _text(msg: Message) -> str:
    return "\n\n".join(p.text for p in msg.parts if isinstance(p, (TextPart, SummaryPart)) and p.text)


# ---------------------------------------------------------------------------------------------
# What the model saw at each call
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One model call of a replay, measured where the model receives it."""

    number: int
    """1-based, over the whole replay."""
    turn: int
    """0-based turn of the recording."""
    sent: int
    """Tokens of the messages the model was sent."""
    reused: int
    """Tokens at the start of the input identical to the previous call's (what a prompt cache reuses)."""
    raw: int | None
    """Tokens the recorded history had at this call (`None` for a call the replay added)."""
    replayed: bool
    """False when the recording had no answer and the replay closed the turn (`CLOSING_TEXT`)."""


class _Meter:
    """Counts each call's input, and how much of it repeats the previous call's input from its start.

    Inputs are compared as a provider sees them: role and content of each message (neutral), not
    the framework's ids or metadata, which are not sent.
    """

    def __init__(
        self,
        recording: Recording,
        counter: TokenCounter | None,
        on_call: Callable[[Call], None] | None,
    ) -> None:
        self.counter = counter or TokenCounter()
        self.raw = recording.raw_sizes(self.counter)
        self.on_call = on_call
        self.calls: list[Call] = []
        self._previous: list[tuple[Any, ...]] = []
        self._recorded = 0  # calls answered from the recording so far: the index into `raw`

    def measure(self, messages: Sequence[Any], turn: int, replayed: bool) -> Call:
        from historykit.frameworks import adapter_for

        neutral = adapter_for(messages).to_neutral(list(messages)) if messages else []
        sizes = [self.counter.count_message(m) for m in neutral]
        seen: list[tuple[Any, ...]] = [(m.role, m.parts) for m in neutral]
        reused = 0
        for old, new, size in zip(self._previous, seen, sizes):
            if old != new:
                break
            reused += size
        self._previous = seen
        raw = None
        if replayed:
            raw = self.raw[self._recorded]
            self._recorded += 1
        call = Call(len(self.calls) + 1, turn, sum(sizes), reused, raw, replayed)
        self.calls.append(call)
        if self.on_call is not None:
            self.on_call(call)
        return call


# ---------------------------------------------------------------------------------------------
# Pydantic AI
# ---------------------------------------------------------------------------------------------


class PydanticAIReplay:
    """A recording as Pydantic AI pieces: a `FunctionModel` that answers as the session did, and its tools.

    The model answers each call with the turn's next recorded `ModelResponse` (reporting as its input
    tokens what historykit counts in the messages it was sent, as a provider would), and closes a turn
    whose recording has no final answer with `CLOSING_TEXT`. Each tool returns the result the session
    recorded for the call id it is given. Call `start_turn(n)` before running turn `n` (the first is
    started already).

    Example:
        ```python
        replay = PydanticAIReplay(Recording.load(), window=10_000)
        agent = Agent(replay.model, tools=replay.tools, system_prompt=replay.system_prompts)
        result = await agent.run(replay.prompts[0], usage_limits=UsageLimits(request_limit=None))
        replay.calls[-1].sent    # tokens the last call sent
        ```
    """

    def __init__(
        self,
        recording: Recording,
        *,
        window: int | None = DEFAULT_WINDOW,
        counter: TokenCounter | None = None,
        on_call: Callable[[Call], None] | None = None,
        delay: float = 0.0,
    ) -> None:
        from pydantic_ai.messages import ModelResponse
        from pydantic_ai.models.function import FunctionModel

        from historykit.plugins.pydantic_ai import PydanticAIAdapter

        self.recording = recording
        self.delay = delay
        """Seconds each model call waits, so a live display can be followed."""
        self._meter = _Meter(recording, counter, on_call)
        self._results = recording.tool_results()
        self._turns: list[list[Any]] = []
        for start, end in recording.turns:
            native = PydanticAIAdapter().to_native(recording.messages[start:end])
            self._turns.append([m for m in native if isinstance(m, ModelResponse)])
        self._turn = 0
        self._next = 0
        profile: Any = {"context_window": window} if window is not None else None
        self.model = FunctionModel(self._answer, model_name=f"replay:{recording.name}", profile=profile)
        """The model: pass it to `Agent(...)`."""
        self.tools = [self._tool(name) for name in _tool_names(recording)]
        """One tool per tool name the session used, each returning the recorded results."""
        self.system_prompts = recording.system_prompts
        """For `Agent(system_prompt=...)`."""
        self.prompts = ["\n\n".join(recording.prompts(t)) for t in range(len(recording.turns))]
        """The user prompt of each turn."""

    @property
    def calls(self) -> list[Call]:
        """Every model call so far."""
        return self._meter.calls

    def start_turn(self, turn: int) -> None:
        """Answer the next calls from turn `turn` of the recording."""
        if not 0 <= turn < len(self._turns):
            raise ValueError(f"the recording has {len(self._turns)} turns, not a turn {turn}")
        self._turn, self._next = turn, 0

    async def _answer(self, messages: list[Any], info: Any) -> Any:
        from pydantic_ai.messages import ModelResponse
        from pydantic_ai.messages import TextPart as PaiTextPart
        from pydantic_ai.usage import RequestUsage

        recorded = self._turns[self._turn]
        replayed = self._next < len(recorded)
        call = self._meter.measure(messages, self._turn, replayed)
        if self.delay:
            await asyncio.sleep(self.delay)
        if not replayed:
            return ModelResponse(
                parts=[PaiTextPart(CLOSING_TEXT)], usage=RequestUsage(input_tokens=call.sent)
            )
        response = recorded[self._next]
        self._next += 1
        # A copy: the agent stamps its own fields (run id, timestamps) on what the model returns.
        return replace(response, usage=RequestUsage(input_tokens=call.sent, output_tokens=0))

    def _tool(self, name: str) -> Any:
        from pydantic_ai import RunContext, Tool

        results = self._results

        async def recorded(ctx: RunContext[Any], **arguments: Any) -> str:
            if ctx.tool_call_id not in results:
                raise LookupError(f"the recording has no result for {name} call {ctx.tool_call_id!r}")
            return results[ctx.tool_call_id]

        return Tool.from_schema(
            recorded,
            name=name,
            description=f"Returns what `{name}` returned in the recorded session.",
            json_schema={"type": "object", "additionalProperties": True},
            takes_ctx=True,
        )


def _tool_names(recording: Recording) -> list[str]:
    names = {p.name for m in recording.messages for p in m.tool_calls}
    return sorted(names)


# ---------------------------------------------------------------------------------------------
# LangChain / LangGraph
# ---------------------------------------------------------------------------------------------


class LangChainReplay:
    """A recording as LangChain pieces: a chat model that answers as the session did, and its tools.

    The chat model (`model`, with `profile={"max_input_tokens": window}`) answers each call with the
    turn's next recorded `AIMessage` (with `usage_metadata` counted on what it was sent), and closes a
    turn whose recording has no final answer with `CLOSING_TEXT`. Each tool returns the recorded
    result of the call id it is given. Call `start_turn(n)` before running turn `n`.

    Example:
        ```python
        from langchain.agents import create_agent

        replay = LangChainReplay(Recording.load(), window=10_000)
        agent = create_agent(replay.model, replay.tools, system_prompt=replay.system_prompt)
        agent.invoke({"messages": replay.prompts[0]}, {"recursion_limit": 10_000})
        ```
    """

    def __init__(
        self,
        recording: Recording,
        *,
        window: int | None = DEFAULT_WINDOW,
        counter: TokenCounter | None = None,
        on_call: Callable[[Call], None] | None = None,
        delay: float = 0.0,
    ) -> None:
        from langchain_core.messages import AIMessage, HumanMessage

        from historykit.plugins.langchain import LangChainAdapter

        self.recording = recording
        self.delay = delay
        """Seconds each model call waits, so a live display can be followed."""
        self._meter = _Meter(recording, counter, on_call)
        self._turns: list[list[Any]] = []
        for start, end in recording.turns:
            native = LangChainAdapter().to_native(recording.messages[start:end])
            self._turns.append([m for m in native if isinstance(m, AIMessage)])
        self._turn = 0
        self._next = 0
        profile = {"max_input_tokens": window} if window is not None else None
        self.model = _replay_chat_model_class()(replay=self, profile=profile)
        """The chat model: pass it to `create_agent(...)` (it binds any tools)."""
        results = recording.tool_results()
        tool_class = _recorded_tool_class()
        self.tools = [
            tool_class(
                name=name,
                description=f"Returns what `{name}` returned in the recorded session.",
                results=results,
            )
            for name in _tool_names(recording)
        ]
        """One tool per tool name the session used, each returning the recorded results."""
        system = recording.system_prompts
        self.system_prompt: str | None = "\n\n".join(system) if system else None
        """For `create_agent(system_prompt=...)`."""
        self.prompts = [
            [HumanMessage(text) for text in recording.prompts(t)] for t in range(len(recording.turns))
        ]
        """The user messages that open each turn."""

    @property
    def calls(self) -> list[Call]:
        """Every model call so far."""
        return self._meter.calls

    def start_turn(self, turn: int) -> None:
        """Answer the next calls from turn `turn` of the recording."""
        if not 0 <= turn < len(self._turns):
            raise ValueError(f"the recording has {len(self._turns)} turns, not a turn {turn}")
        self._turn, self._next = turn, 0

    def _answer(self, messages: list[Any]) -> Any:
        from langchain_core.messages import AIMessage

        recorded = self._turns[self._turn]
        replayed = self._next < len(recorded)
        call = self._meter.measure(messages, self._turn, replayed)
        if self.delay:
            time.sleep(self.delay)
        usage = {"input_tokens": call.sent, "output_tokens": 0, "total_tokens": call.sent}
        if not replayed:
            return AIMessage(CLOSING_TEXT, usage_metadata=usage)
        response = recorded[self._next]
        self._next += 1
        return response.model_copy(update={"usage_metadata": usage})


@lru_cache(maxsize=1)
def _replay_chat_model_class() -> type:
    """The replaying chat model class, built on first use so LangChain is imported only when needed."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ReplayChatModel(BaseChatModel):
        """Answers every call with the next message of a recorded session (see `LangChainReplay`)."""

        replay: Any
        """The `LangChainReplay` it answers for."""

        @property
        def _llm_type(self) -> str:
            return "historykit-replay"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            # The answers are recorded already: the tools change nothing.
            return self

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            return ChatResult(generations=[ChatGeneration(message=self.replay._answer(messages))])

    return ReplayChatModel


@lru_cache(maxsize=1)
def _recorded_tool_class() -> type:
    """A LangChain tool returning the recorded result of the call id it is given."""
    from typing import Annotated

    from langchain_core.tools import BaseTool, InjectedToolCallId
    from pydantic import BaseModel, ConfigDict

    class RecordedArguments(BaseModel):
        # Any arguments the recording has; the call id comes from LangChain, not from the model.
        model_config = ConfigDict(extra="allow")
        tool_call_id: Annotated[str, InjectedToolCallId]

    class RecordedTool(BaseTool):
        """Returns what the tool returned in the recorded session."""

        args_schema: Any = RecordedArguments
        results: dict[str, str]

        def _run(self, tool_call_id: str, **arguments: Any) -> str:
            if tool_call_id not in self.results:
                raise LookupError(f"the recording has no result for {self.name} call {tool_call_id!r}")
            return self.results[tool_call_id]

    return RecordedTool


# ---------------------------------------------------------------------------------------------
# The two runs
# ---------------------------------------------------------------------------------------------


@dataclass
class ReplayRun:
    """One framework's replay of the recording, and what it stored."""

    framework: str
    """`Pydantic AI` or `LangGraph`."""
    thread_id: str
    calls: list[Call]
    reports: list[Report]
    """The pipeline's report of every model call, in order."""
    answer: str
    """The agent's final answer (the last turn's)."""
    seconds: float
    transcript: Any = None
    """What the store kept (`historykit.checkpointers.Transcript`), `None` without persistence."""
    history: int = 0
    """Messages in the stored current history (the conversation, or the graph state)."""
    notes: list[str] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return sum(c.sent for c in self.calls)

    @property
    def reused(self) -> int:
        return sum(c.reused for c in self.calls)

    @property
    def compactions(self) -> dict[str, int]:
        """Compactions the pipeline reported, by strategy (`summarize`, `truncate`)."""
        out: dict[str, int] = {}
        for report in self.reports:
            for marker in report.markers:
                out[marker.strategy] = out.get(marker.strategy, 0) + 1
        return out


async def run_pydantic_ai(
    recording: Recording,
    pipeline: HistoryProcessor,
    *,
    window: int = DEFAULT_WINDOW,
    database: str | None = None,
    counter: TokenCounter | None = None,
    on_call: Callable[[Call], None] | None = None,
    on_report: Callable[[Report], None] | None = None,
    delay: float = 0.0,
) -> ReplayRun:
    """Replay `recording` with a Pydantic AI agent running `pipeline` (persistent), saving every call.

    With `database` (a SQLAlchemy URL) the conversation is saved to `SQLModelConversationStore`
    after every model call (so a compaction leaves the original history stored as a branch), under
    the id `demo-pydantic-ai`, replacing the previous demo's.
    """
    from pydantic_ai import Agent
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    replay = PydanticAIReplay(recording, window=window, counter=counter, on_call=on_call, delay=delay)
    reports: list[Report] = []

    def report(r: Report) -> None:
        reports.append(r)
        if on_report is not None:
            on_report(r)

    kit = HistoryKit(pipeline, on_report=report)
    agent = Agent(replay.model, tools=replay.tools, system_prompt=replay.system_prompts, capabilities=[kit])
    store, conversation = await _open_store(database)
    thread_id = THREAD_IDS["pydantic-ai"]
    history: list[Any] = []
    answer = ""
    started = time.perf_counter()
    for turn in range(len(recording.turns)):
        replay.start_turn(turn)
        async with agent.iter(
            replay.prompts[turn], message_history=history, usage_limits=UsageLimits(request_limit=None)
        ) as run:
            async for node in run:
                if store is not None and Agent.is_call_tools_node(node):
                    # Saved once per model call: a compaction shows as a history that no longer
                    # extends the stored one, which the store keeps as a branch.
                    await _save(store, conversation, run.all_messages())
            assert run.result is not None
            history = run.result.all_messages()
            answer = str(run.result.output)
    seconds = time.perf_counter() - started
    result = ReplayRun("Pydantic AI", thread_id, replay.calls, reports, answer, seconds)
    if store is not None:
        await _save(store, conversation, history)
        result.transcript = await store.transcript(thread_id)
        loaded = await store.load(thread_id)
        result.history = len(loaded.messages) if loaded is not None else 0
        await store.aclose()
    else:
        result.history = len(history)
        result.notes.append("not persisted: SQLModelConversationStore needs Pydantic AI 2.x")
    return result


async def _open_store(database: str | None) -> tuple[Any, Any]:
    if database is None:
        return None, None
    try:
        from pydantic_ai.conversation import Conversation

        from historykit.checkpointers import SQLModelConversationStore
    except ImportError:
        return None, None
    store = SQLModelConversationStore(database)
    thread_id = THREAD_IDS["pydantic-ai"]
    if await store.read_record(thread_id) is not None:
        await store.delete(thread_id)
    return store, Conversation(conversation_id=thread_id, messages=[])


async def _save(store: Any, conversation: Any, messages: Sequence[Any]) -> None:
    if list(messages) == list(conversation.messages):
        return
    conversation.messages = list(messages)
    await store.save(conversation)


def run_langgraph(
    recording: Recording,
    pipeline: HistoryProcessor,
    *,
    window: int = DEFAULT_WINDOW,
    database: str | None = None,
    counter: TokenCounter | None = None,
    on_call: Callable[[Call], None] | None = None,
    on_report: Callable[[Report], None] | None = None,
    delay: float = 0.0,
) -> ReplayRun:
    """Replay `recording` with a LangChain `create_agent` graph running `pipeline` as middleware (persistent).

    With `database` (a SQLAlchemy URL) the graph is checkpointed by `SQLModelSaver` at every step,
    under the thread id `demo-langgraph`, replacing the previous demo's; otherwise in memory.
    """
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    replay = LangChainReplay(recording, window=window, counter=counter, on_call=on_call, delay=delay)
    reports: list[Report] = []

    def report(r: Report) -> None:
        reports.append(r)
        if on_report is not None:
            on_report(r)

    thread_id = THREAD_IDS["langgraph"]
    saver: Any
    if database is not None:
        from historykit.checkpointers import SQLModelSaver

        saver = SQLModelSaver(database)
        saver.delete_thread(thread_id)
    else:
        saver = InMemorySaver()
    agent = create_agent(
        replay.model,
        replay.tools,
        system_prompt=replay.system_prompt,
        middleware=[HistoryKitMiddleware(pipeline, persist=True, on_report=report)],
        checkpointer=saver,
    )
    config: Any = {"configurable": {"thread_id": thread_id}, "recursion_limit": 100_000}
    answer = ""
    started = time.perf_counter()
    for turn in range(len(recording.turns)):
        replay.start_turn(turn)
        state: Any = agent.invoke({"messages": replay.prompts[turn]}, config)  # type: ignore[call-overload]
        last = state["messages"][-1]
        answer = str(last.text) if isinstance(last, AIMessage) else ""
    seconds = time.perf_counter() - started
    result = ReplayRun("LangGraph", thread_id, replay.calls, reports, answer, seconds)
    result.history = len(agent.get_state(config).values["messages"])
    if database is not None:
        result.transcript = saver.transcript(thread_id)
        saver.close()
    return result


# ---------------------------------------------------------------------------------------------
# The terminal display
# ---------------------------------------------------------------------------------------------

CACHE_READ = 0.1
"""Price of an input token read from the provider's prompt cache, in base input-token prices."""
CACHE_WRITE = 1.25
"""Price of an input token that misses the cache (Anthropic charges 1.25x to write it to the cache)."""


class _Display(Progress):
    """Calls done and the raw history as progress bars, with the public context gauge between them."""

    def __init__(self, gauge: Gauge, console: Console) -> None:
        self.gauge = gauge  # before Progress starts rendering
        super().__init__(
            TextColumn("{task.description:<18}"),
            BarColumn(bar_width=gauge.width, complete_style="cyan", finished_style="red"),
            TextColumn("{task.fields[label]}"),
            console=console,
        )

    def get_renderables(self) -> Any:
        # The tasks in the order they were added: the calls, then the raw history.
        tasks = self.tasks
        yield self.make_tasks_table(tasks[:1])
        yield self.gauge
        yield self.make_tasks_table(tasks[1:])


class _Gauge:
    """The live display of one run: calls done, the context sent against the window (the public
    `historykit.gauge.Gauge`, fed the reports), the raw history."""

    def __init__(self, console: Console, title: str, calls: int, window: int, warn_at: float | None) -> None:
        self.console = console
        self.window = window
        self.title = title
        # Lined up with the progress rows: their 18-character description and a column gap.
        self.context = Gauge(warn_at=warn_at, width=28, label="context sent", label_width=19, history=False)
        self.progress = _Display(self.context, console)
        self.calls: TaskID = self.progress.add_task("model calls", total=calls, label="")
        self.raw: TaskID = self.progress.add_task("without historykit", total=window, label="")
        self._pending: list[Report] = []

    def __enter__(self) -> _Gauge:
        self.console.print(Text(self.title, style="bold"))
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def report(self, report: Report) -> None:
        # A call's report arrives before the model sees the call: it is shown with its call.
        self.context(report)
        self._pending.append(report)

    def call(self, call: Call) -> None:
        w = self.window
        total = int(self.progress.tasks[self.calls].total or 0)
        label = (
            f"{call.number} of {total}"
            if call.number <= total
            else f"{total} of {total} + {call.number - total}"
        )
        self.progress.update(self.calls, completed=min(call.number, total), label=label)
        if call.raw is not None:
            over = f" ({call.raw / w:.1f}x the window)" if call.raw > w else ""
            self.progress.update(self.raw, completed=min(call.raw, w), label=f"{call.raw:>6,} tokens{over}")
        for report in self._pending:
            for step in report.steps:
                if step.changed:
                    self.progress.console.print(_event(call.number, step))
        self._pending.clear()
        self.progress.refresh()


def _event(number: int, step: StepReport) -> Text:
    """One line announcing what a processor did at a call."""
    n = step.notes
    strategies = {m.strategy for m in n.markers}
    if n.markers and n.removed:
        kind = "summary" if strategies == {"summarize"} else "notice"
        what = f"{n.removed} messages -> 1 {kind}"
    elif step.processor == "ClearToolResults":
        what = f"{n.replaced} old tool output{'s' if n.replaced != 1 else ''} cleared"
    elif step.processor == "DedupeFileReads":
        what = f"{n.replaced} superseded file read{'s' if n.replaced != 1 else ''}"
    else:
        what = ", ".join(
            f"{count} {label}"
            for count, label in ((n.replaced, "replaced"), (n.removed, "removed"), (n.added, "added"))
            if count
        )
    line = Text(f"  call {number:>3}  ", style="dim")
    line.append(f"{step.processor:<17}", style="bold magenta" if n.markers else "yellow")
    line.append(f"{step.tokens_before:>6,} -> {step.tokens_after:>6,}  {what}")
    if n.markers:
        line.append(" + marker", style="magenta")
    return line


def _sparkline(values: Sequence[int], window: int, top: int) -> Text:
    bars = "▁▂▃▄▅▆▇█"
    out = Text()
    for v in values:
        level = 0 if top <= 0 else min(len(bars) - 1, round(v / top * (len(bars) - 1)))
        out.append(bars[level], style="red" if v > window else "cyan")
    return out


def _cost(sent: int, reused: int) -> float:
    return CACHE_READ * reused + CACHE_WRITE * (sent - reused)


def _summary_table(recording: Recording, runs: Sequence[ReplayRun], window: int, raw: Sequence[int]) -> Table:
    # The raw history only ever grows: each call's input starts with the whole previous one.
    raw_total, raw_reused = sum(raw), sum(raw[:-1])
    # Calls the replay added to close a turn have no raw counterpart: compared, they are left out.
    recorded = [[c for c in r.calls if c.replayed] for r in runs]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("without historykit", justify="right")
    for run in runs:
        table.add_column(run.framework, justify="right")

    def share(part: float, whole: float) -> str:
        return f"{part / whole:.0%}" if whole else "-"

    sent = [sum(c.sent for c in calls) for calls in recorded]
    reused = [sum(c.reused for c in calls) for calls in recorded]
    rows: list[tuple[str, str, list[str]]] = [
        ("input tokens, all calls", f"{raw_total:,}", [f"{n:,}" for n in sent]),
        ("saved", "", [share(raw_total - n, raw_total) for n in sent]),
        (
            "largest call",
            f"{max(raw, default=0):,}",
            [f"{max((c.sent for c in calls), default=0):,}" for calls in recorded],
        ),
        (
            "calls over the window",
            str(sum(1 for v in raw if v > window)),
            [str(sum(1 for c in calls if c.sent > window)) for calls in recorded],
        ),
        (
            "prompt-cache hits (input)",
            share(raw_reused, raw_total),
            [share(r, n) for r, n in zip(reused, sent)],
        ),
        (
            "input cost, cache-priced*",
            f"{_cost(raw_total, raw_reused):,.0f}",
            [f"{_cost(n, r):,.0f}" for n, r in zip(sent, reused)],
        ),
        ("compactions", "0", [_compactions(r) for r in runs]),
        ("messages in history at end", str(len(recording.messages)), [str(r.history) for r in runs]),
        ("replay time", "", [f"{r.seconds:.1f} s" for r in runs]),
    ]
    for label, before, after in rows:
        table.add_row(label, before, *after)
    return table


def _compactions(run: ReplayRun) -> str:
    counts = run.compactions
    if not counts:
        return "0"
    total = sum(counts.values())
    if set(counts) == {"summarize"}:
        return f"{total} summaries" if total > 1 else "1 summary"
    return f"{total} (" + ", ".join(f"{n} {strategy}" for strategy, n in sorted(counts.items())) + ")"


def _processor_table(run: ReplayRun) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("processor", no_wrap=True)
    for header in ("calls", "tokens freed", "replaced", "removed", "added", "markers"):
        table.add_column(header, justify="right")
    tallies: dict[str, list[int]] = {}
    for report in run.reports:
        for step in report.steps:
            tally = tallies.setdefault(step.processor, [0] * 6)
            if not step.changed:
                continue
            n = step.notes
            freed = max(0, step.tokens_before - step.tokens_after)
            for i, value in enumerate((1, freed, n.replaced, n.removed, n.added, len(n.markers))):
                tally[i] += value
    for name, tally in tallies.items():
        table.add_row(name, *(f"{v:,}" for v in tally))
    return table


def _transcript_view(run: ReplayRun, width: int, edge: int = 2) -> Group:
    """The stored thread: its compaction markers, and the logged messages around each summary."""
    from collections import Counter

    from historykit.frameworks import adapter_for

    transcript = run.transcript
    messages = transcript.logged()
    adapter = adapter_for(messages) if messages else None
    markers = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for header in ("marker", "logged at", "covers", "tokens before", "after", "strategy", "automatic"):
        markers.add_column(header, justify="left" if header == "strategy" else "right")
    # Where each compaction's message sits among the logged ones: after `at` originals and the
    # compactions logged before it. Summaries and truncations get a row; the many small edits a count.
    summaries: dict[int, int] = {}
    small: Counter[str] = Counter()
    for number, compaction in enumerate(transcript.compactions):
        m = compaction.marker
        if m.strategy not in ("summarize", "truncate", "pairwise_truncate"):
            small[m.strategy] += 1
            continue
        at = compaction.at + number
        summaries[at] = len(summaries) + 1
        markers.add_row(
            str(summaries[at]),
            f"message {at}",
            f"{m.covered_from}-{m.covered_to}",
            f"{m.tokens_before:,}",
            f"{m.tokens_after:,}",
            m.strategy,
            "yes" if m.automatic else "no",
        )
    if small:
        markers.caption = "and " + ", ".join(f"{n} {strategy}" for strategy, n in sorted(small.items()))
    shown = set(range(edge)) | set(range(len(messages) - edge, len(messages)))
    for index in summaries:
        shown |= {index - 1, index, index + 1}
    digits = len(str(len(messages)))
    lines: list[Text] = []
    previous = -1
    for index in sorted(i for i in shown if 0 <= i < len(messages)):
        if index > previous + 1:
            lines.append(Text(f"{'':>{digits}}  ... {index - previous - 1} more ...", style="dim"))
        native = messages[index]
        neutral = adapter.to_neutral([native]) if adapter is not None else []
        line = Text(f"{index:>{digits}}  ", style="dim")
        room = width - digits - 2
        if index in summaries:
            label = f"marker {summaries[index]}: "
            line.append(label, style="bold magenta")
            line.append(_one_line(native, neutral, room - len(label)), style="magenta")
        else:
            line.append(_one_line(native, neutral, room))
        lines.append(line)
        previous = index
    title = Text(
        f"{run.framework}, {run.thread_id!r}: {len(transcript.messages)} original messages and "
        f"{len(transcript.compactions)} written by compactions stored, {run.history} in the current history",
        style="bold",
    )
    return Group(title, markers, *lines)


def _one_line(native: Any, neutral: Sequence[Message], width: int) -> str:
    bits: list[str] = []
    for msg in neutral:
        for part in msg.parts:
            if isinstance(part, (TextPart, SummaryPart)) and part.text.strip():
                bits.append(part.text)
            elif isinstance(part, ToolCallPart):
                bits.append(f"calls {part.name}")
            elif isinstance(part, ToolResultPart):
                bits.append(f"{part.name or 'tool'} -> {part.content}")
            elif part.kind == "thinking":
                bits.append("(thinking)")
    text = " | ".join(" ".join(b.split()) for b in bits)
    line = f"{type(native).__name__:<13} {text}"
    return line if len(line) <= width else line[: max(0, width - 3)] + "..."


def _latest_summary(run: ReplayRun, lines: int = 18) -> Panel | None:
    if run.transcript is None or not run.transcript.compactions:
        return None
    from historykit.frameworks import adapter_for

    numbered = list(enumerate(run.transcript.compactions))
    found = [(n, c) for n, c in numbered if c.marker.strategy == "summarize"]
    if not found:
        return None
    number, last = found[-1]
    native = last.message
    text = "\n".join(_text(m) for m in adapter_for([native]).to_neutral([native]))
    shown = text.splitlines()
    body = "\n".join(shown[:lines]) + (
        f"\n... ({len(shown) - lines} more lines)" if len(shown) > lines else ""
    )
    return Panel(
        Text(body),
        title=f"the latest summary, as the model reads it ({run.framework}, message {last.at + number})",
        title_align="left",
        border_style="magenta",
    )


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------


def _database(value: str | None) -> tuple[str, Path | None]:
    """The SQLAlchemy URL for `--db`, and the SQLite file when it is one."""
    if value is not None and "://" in value:
        on_disk = value.split(":///", 1)[1] if value.startswith("sqlite:///") else None
        return value, Path(on_disk).resolve() if on_disk else None
    path = Path(value or DEFAULT_DATABASE).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}", path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m historykit.demo",
        description="Replay a real agent session through Pydantic AI and LangGraph with historykit, offline.",
    )
    parser.add_argument(
        "--window", type=int, default=DEFAULT_WINDOW, help="context window in tokens (default: %(default)s)"
    )
    parser.add_argument(
        "--db",
        default=None,
        metavar="PATH_OR_URL",
        help=f"SQLite file or SQLAlchemy URL for the store and the saver (default: {DEFAULT_DATABASE})",
    )
    parser.add_argument(
        "--session",
        type=Path,
        default=None,
        metavar="FILE",
        help="replay this transcript instead of the sample",
    )
    parser.add_argument(
        "--delay",
        type=float,
        default=None,
        metavar="SECONDS",
        help="pause per model call, to follow the gauge (default: 0.05 in a terminal, else 0)",
    )
    parser.add_argument(
        "--only", choices=("pydantic-ai", "langgraph"), default=None, help="replay in one framework only"
    )
    return parser


def _quiet_pydantic_ai_banner() -> None:
    """The demo owns its screen: Pydantic AI's first-run banner would print into the live gauge."""
    try:
        import pydantic_ai
    except ImportError:
        return
    if hasattr(pydantic_ai, "BANNER_ENABLED"):
        pydantic_ai.BANNER_ENABLED = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns the exit code (0 done, 1 nothing could run, 2 bad input)."""
    args = _parser().parse_args(argv)
    console = Console(highlight=False)
    _quiet_pydantic_ai_banner()
    if args.window <= 0:
        _error(f"--window must be a positive number of tokens, got {args.window}")
        return 2
    if args.delay is not None and args.delay < 0:
        _error(f"--delay must not be negative, got {args.delay}")
        return 2
    try:
        recording = Recording.load(args.session)
    except (OSError, ValueError, TypeError) as exc:
        _error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return 2
    url, db_file = _database(args.db)
    delay = args.delay if args.delay is not None else (0.05 if console.is_terminal else 0.0)
    counter = TokenCounter()
    raw = recording.raw_sizes(counter)

    console.rule("[bold]historykit demo")
    source = (
        "the bundled sample, see historykit/data/SAMPLE-SOURCE.md" if args.session is None else "your file"
    )
    total = sum(counter.count_message(m) for m in recording.messages)
    console.print(
        Text.assemble(
            "Replaying ",
            (recording.name, "bold"),
            f" ({source}): a real agent session of {len(recording.messages)} messages and "
            f"{recording.model_calls} model calls, {total:,} tokens.\n",
            "No LLM is called: the model answers each call with the session's next assistant message, "
            "each tool returns its recorded result. historykit's default pipeline runs before every "
            f"model call, persistent, for a {args.window:,}-token window (from the model's profile). "
            "Every call is saved to SQLite as it happens.",
        )
    )
    runs: list[ReplayRun] = []
    for framework in [args.only] if args.only else ["pydantic-ai", "langgraph"]:
        console.print()
        number = len(runs) + 1
        try:
            run = _run(framework, number, recording, url, args.window, console, counter, delay)
        except ImportError as exc:
            console.print(Text(f"{framework} skipped: {exc} (pip install 'historykit[all]')", style="yellow"))
            continue
        except KeyboardInterrupt:
            _error("interrupted")
            return 130
        except Exception as exc:
            if not _is_database_error(exc):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            _error(f"the database {_shown_url(url)} cannot be used: {first}")
            return 1
        for note in run.notes:
            console.print(Text(note, style="yellow"))
        runs.append(run)
    if not runs:
        _error("neither Pydantic AI nor LangGraph could run: pip install 'historykit[all]'")
        return 1
    _print_report(console, recording, runs, args.window, raw)
    _print_threads(console, runs)
    _print_where(console, url, db_file, args)
    return 0


def _is_database_error(exc: BaseException) -> bool:
    """A database that cannot be reached, or holds something else: reported in one line."""
    from sqlalchemy.exc import SQLAlchemyError

    from historykit.checkpointers.database import CorruptRowError, SchemaError

    return isinstance(exc, (SQLAlchemyError, SchemaError, CorruptRowError))


def _shown_url(url: str) -> str:
    """The URL without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def _error(message: str) -> None:
    print(f"historykit demo: error: {message}", file=sys.stderr)


def _run(
    framework: str,
    number: int,
    recording: Recording,
    url: str,
    window: int,
    console: Console,
    counter: TokenCounter,
    delay: float,
) -> ReplayRun:
    import historykit

    pipeline = historykit.default_pipeline()
    if framework == "pydantic-ai":
        title = f"{number}. Pydantic AI: an Agent with HistoryKit, saved in SQLModelConversationStore"
    else:
        title = f"{number}. LangGraph: create_agent with HistoryKitMiddleware, saved by SQLModelSaver"
    with _Gauge(console, title, recording.model_calls, window, pipeline.usage.warn_at) as gauge:
        options: dict[str, Any] = {
            "window": window,
            "database": url,
            "counter": counter,
            "on_call": gauge.call,
            "on_report": gauge.report,
            "delay": delay,
        }
        if framework == "pydantic-ai":
            return asyncio.run(run_pydantic_ai(recording, pipeline, **options))
        return run_langgraph(recording, pipeline, **options)


def _print_report(
    console: Console, recording: Recording, runs: Sequence[ReplayRun], window: int, raw: Sequence[int]
) -> None:
    console.print()
    console.rule("[bold]the report")
    console.print(
        Text(f"{recording.name}: {recording.model_calls} model calls, {window:,}-token window", style="bold")
    )
    console.print(_summary_table(recording, runs, window, raw))
    console.print(
        Text(
            f"* input tokens at the base price: cache hits at {CACHE_READ}x, the rest at {CACHE_WRITE}x "
            "(Anthropic's cache pricing). Each compaction edits the history, so the next call misses the "
            "cache from the edit on.",
            style="dim",
        )
    )
    added = max(sum(1 for c in r.calls if not c.replayed) for r in runs)
    if added:
        console.print(
            Text(
                f"Not counted above: {added} call(s) the replay added to close turns the recording left "
                "without a final answer.",
                style="dim",
            )
        )
    console.print()
    top = max([*raw, *(c.sent for r in runs for c in r.calls)], default=0)
    spark = Table(box=None, show_header=False, pad_edge=False)
    spark.add_column(style="dim", no_wrap=True)
    spark.add_column(no_wrap=True)
    spark.add_row("without historykit", _sparkline(raw, window, top))
    for run in runs:
        spark.add_row(run.framework, _sparkline([c.sent for c in run.calls], window, top))
    console.print(Text(f"context per model call (red: over the {window:,}-token window)", style="bold"))
    console.print(spark)
    if len(runs) == 2 and [c.sent for c in runs[0].calls] == [c.sent for c in runs[1].calls]:
        console.print(
            Text(
                "Both frameworks sent the same number of tokens at every call: the processors run on the "
                "same neutral history, whichever framework holds it.",
                style="dim",
            )
        )
    console.print()
    last = runs[-1]
    console.print(
        Text(
            f"what each processor did ({last.framework}; calls: the calls where it changed something)",
            style="bold",
        )
    )
    console.print(_processor_table(last))


def _print_threads(console: Console, runs: Sequence[ReplayRun]) -> None:
    stored = [r for r in runs if r.transcript is not None]
    if not stored:
        return
    console.print()
    console.rule("[bold]the stored threads")
    console.print(
        Text(
            "transcript(thread_id): every message the thread ever had (compaction removed them from the "
            "history, not from the database), with the compaction markers.",
            style="dim",
        )
    )
    for run in stored:
        console.print(_transcript_view(run, console.width))
        console.print()
    panel = _latest_summary(stored[-1])
    if panel is not None:
        console.print(panel)
    answer = stored[-1].answer
    if answer:
        answer = answer if len(answer) <= 500 else answer[:497] + "..."
        console.print(Panel(Text(answer), title="the agent's final answer (replayed)", title_align="left"))


def _print_where(console: Console, url: str, db_file: Path | None, args: argparse.Namespace) -> None:
    console.print()
    console.rule("[bold]where it is")
    target = _relative(db_file) if db_file is not None else _shown_url(url)
    console.print(
        Text.assemble("database: ", (str(db_file) if db_file is not None else _shown_url(url), "bold"))
    )
    session = _relative(sample_path()) if args.session is None else str(args.session)
    command = _command()
    console.print(
        Text(
            "Look inside with the historykit command:\n"
            f"  {command} threads {target}\n"
            f"  {command} show {target} {THREAD_IDS['langgraph']}\n"
            f"  {command} export {target} {THREAD_IDS['pydantic-ai']} -o thread.json\n"
            f"  {command} analyze {session} --window {args.window}"
        ),
        soft_wrap=True,  # commands stay whole, to copy and paste, whatever the width
    )


def _command() -> str:
    """How to call the `historykit` command from here: by name when it is this environment's on PATH."""
    script = Path(sys.executable).parent / "historykit"
    found = shutil.which("historykit")
    if not script.exists() or (found is not None and Path(found).resolve() == script.resolve()):
        return "historykit"
    return _relative(script)


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    raise SystemExit(main())
