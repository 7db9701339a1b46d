"""One historykit instance serving many conversations at once, as a web app serves its users: no
conversation's content ever reaches another.

Each conversation has a token of its own, planted where the model reads it: in the bytes of an
image (every conversation sends the same text and an image of the same type and size, the bytes
alone differ, so a digest that skipped the bytes would hand one conversation another's view), in
the paths the model reads and so in every tool output, and through them in every summary and
placeholder. The model reads its conversation's token from the image it is sent, so a conversation
sent another's image reads another's files. At the end of its run each conversation asks `recall`
for its own cleared output and for outputs of other conversations.

Served at once from one `HistoryKit`, one `HistoryKitMiddleware` and one `Pipeline`, by asyncio
tasks and OS threads, in persistent and view-only mode, with compaction, background summaries and
recall on; LangGraph thread ids of type `str`, `int` and `UUID`, and runs without a checkpointer.
Checked: every request a model got, every stored history, every summary (its inputs and its text)
and every recall answer holds its own conversation's token and no other.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import re
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from historykit import Pipeline
from historykit._messages import MediaPart, Message, SummaryPart, TextPart
from historykit._recall import recall_handle
from historykit.processors import ClearToolResults, DedupeFileReads, Repair, Summarize, Trigger
from historykit.processors._summarizers import ExtractiveSummarizer

CONVERSATIONS = 40
"""Per framework and mode: at least 40 conversations served at once."""
READS = 8
WINDOW = 5_000
TASK = "Describe the image, then read the files it names."
TOKEN = re.compile(rb"TOKEN\d{3}X[0-9a-f]{8}")
IMAGE_SIZE = 96

CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("conversation")
"""The token of the conversation the code running now belongs to (set by each run)."""


def new_tokens(count: int) -> list[str]:
    return [f"TOKEN{n:03d}X{uuid.uuid4().hex[:8]}" for n in range(count)]


def image(token: str) -> bytes:
    """The conversation's image: the same size for every conversation, only the bytes differ."""
    return token.encode().ljust(IMAGE_SIZE, b".")


def file_content(path: str) -> str:
    """About 500 tokens of a file; the path (and so the conversation's token) is on every line."""
    return "\n".join(f"{path}:{i}: total = compute(value_{i}, factor={i * 7 % 13})" for i in range(28))


def path_of(token: str, k: int) -> str:
    return f"{token}/f{k}.py"


def tokens_in(data: bytes | str) -> set[str]:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return {m.decode() for m in TOKEN.findall(raw)}


class Seen:
    """What every conversation was sent, wrote or was answered, by the conversation it belongs to."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.foreign: list[str] = []
        self.requests: dict[str, int] = defaultdict(int)
        self.summaries = 0
        self.recalls: dict[str, list[str]] = defaultdict(list)

    def check(self, owner: str, where: str, data: bytes | str) -> None:
        found = tokens_in(data) - {owner}
        if found:
            with self.lock:
                self.foreign.append(f"{where} of {owner} holds {sorted(found)}")


def pipeline(background: bool = True) -> Pipeline:
    """Deduplicate and clear early, summarize past 12 messages (started in the background from
    half of that)."""
    summarize = Summarize(
        trigger=Trigger(max_messages=12),
        keep_last=2,
        summary_tokens=150,
        min_gain=50,
        summarizer=RecordingSummarizer(),
        background_at=0.5 if background else None,
    )
    clear = ClearToolResults(keep=3, min_tokens=50, min_gain=100, trigger=Trigger(max_tokens=2_000))
    return Pipeline([DedupeFileReads(), clear, summarize, Repair()])


SEEN = Seen()


class RecordingSummarizer:
    """The extractive summarizer that also describes the images it is given, as an LLM would;
    checked: its inputs are one conversation's, and so is its text."""

    model_name = None

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()

    async def __call__(self, messages: Sequence[Message]) -> str:
        inputs = "\n".join(_message_text(m) for m in messages)
        images = sorted(
            tokens_in("\n".join(repr(p.native) for m in messages for p in m.parts if p.kind == "media"))
        )
        text = (
            self.inner(list(messages)) + "\n\n## Images\n" + "\n".join(f"- an image of {t}" for t in images)
        )
        owners = tokens_in(inputs)
        with SEEN.lock:
            SEEN.summaries += 1
            if len(owners) != 1:
                SEEN.foreign.append(f"a summary's inputs hold {sorted(owners)}")
        for owner in owners:
            SEEN.check(owner, "a summary", text)
        return text


def _message_text(message: Message) -> str:
    out = []
    for part in message.parts:
        if isinstance(part, (TextPart, SummaryPart)):
            out.append(part.text)
        elif isinstance(part, MediaPart):
            out.append(repr(part.native))
        else:
            out.append(repr(part))
    return "\n".join(out)


def foreign_handles(token: str, tokens: Sequence[str]) -> list[str]:
    """Handles of other conversations' first outputs: what an attacker would ask recall for."""
    others = [t for t in tokens if t != token]
    return [recall_handle(file_content(path_of(t, 0))) for t in others[:3]]


def assert_isolated(tokens: Iterable[str]) -> None:
    assert SEEN.foreign == [], SEEN.foreign[:10]
    for token in tokens:
        assert SEEN.requests[token] >= READS, f"{token} made only {SEEN.requests[token]} model calls"
        answers = SEEN.recalls[token]
        assert answers, f"{token} never got a recall answer"
        # Its own cleared output comes back; another conversation's never does.
        assert any(file_content(path_of(token, 0)) in a for a in answers), answers
        assert sum(a.startswith("[recall: no cleared output") for a in answers) >= 3, answers
    assert SEEN.summaries > 0


@pytest.fixture(autouse=True)
def _fresh() -> None:
    global SEEN
    SEEN = Seen()


# --- Pydantic AI ---------------------------------------------------------------------------------


def _pydantic_ai_agent(kit: Any, tokens: Sequence[str]) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai import messages as pai
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        owner = CURRENT.get()
        with SEEN.lock:
            SEEN.requests[owner] += 1
        for message in messages:
            SEEN.check(owner, "a request", repr(message))
        # The token the model goes by is the one in the image it was sent.
        images = [
            item.data
            for m in messages
            if isinstance(m, pai.ModelRequest)
            for p in m.parts
            if isinstance(p, pai.UserPromptPart) and not isinstance(p.content, str)
            for item in p.content
            if isinstance(item, pai.BinaryContent)
        ]
        token = TOKEN.search(images[0]).group().decode() if images else owner  # type: ignore[union-attr]
        returns = [
            p
            for m in messages
            if isinstance(m, pai.ModelRequest)
            for p in m.parts
            if isinstance(p, pai.ToolReturnPart)
        ]
        recalled = [str(p.content) for p in returns if p.tool_name == "recall"]
        reads = sum(1 for p in returns if p.tool_name == "read_file")
        done = SEEN.requests[owner]
        if done <= READS:
            args = {"path": path_of(token, done - 1)}
            return pai.ModelResponse([pai.ToolCallPart("read_file", args, f"r{done}")])
        asks = [*foreign_handles(token, tokens), recall_handle(file_content(path_of(token, 0)))]
        step = done - READS - 1
        if step < len(asks):
            return pai.ModelResponse([pai.ToolCallPart("recall", {"handle": asks[step]}, f"k{done}")])
        with SEEN.lock:
            SEEN.recalls[owner].extend(recalled)
        return pai.ModelResponse([pai.TextPart(f"Read {reads} files.")])

    async def arespond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        await asyncio.sleep(0)  # let the other conversations' tasks interleave
        return respond(messages, info)

    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_content(path)

    model = FunctionModel(arespond)  # the window is the capability's own (`context_window=`)
    return Agent(model, tools=[read_file], capabilities=[kit])


def _pydantic_prompt(token: str) -> list[Any]:
    from pydantic_ai import messages as pai

    return [TASK, pai.BinaryContent(image(token), media_type="image/png")]


def _check_pydantic_history(token: str, messages: list[Any]) -> None:
    for message in messages:
        SEEN.check(token, "the stored history", repr(message))


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_one_pydantic_ai_capability_serves_concurrent_conversations_apart(persist: bool) -> None:
    pytest.importorskip("pydantic_ai.capabilities", reason="HistoryKit needs Pydantic AI capabilities")
    from pydantic_ai.usage import UsageLimits

    from historykit.plugins.pydantic_ai import HistoryKit

    tokens = new_tokens(CONVERSATIONS)
    kit = HistoryKit(pipeline(), context_window=WINDOW, persist=persist, recall=True)
    agent = _pydantic_ai_agent(kit, tokens)
    limits = UsageLimits(request_limit=None)
    by_task, by_thread = tokens[: CONVERSATIONS // 2], tokens[CONVERSATIONS // 2 :]

    async def one(token: str) -> None:
        CURRENT.set(token)
        result = await agent.run(_pydantic_prompt(token), usage_limits=limits)
        _check_pydantic_history(token, result.all_messages())

    def in_thread(token: str) -> None:
        CURRENT.set(token)
        result = agent.run_sync(_pydantic_prompt(token), usage_limits=limits)
        _check_pydantic_history(token, result.all_messages())

    async def everything() -> None:
        threads = [threading.Thread(target=in_thread, args=(t,)) for t in by_thread]
        for t in threads:
            t.start()
        await asyncio.gather(*(one(t) for t in by_task))
        for t in threads:
            t.join()

    asyncio.run(everything())
    assert_isolated(tokens)


# --- LangChain / LangGraph -----------------------------------------------------------------------


def _langchain_agent(middleware: Any, tokens: Sequence[str], checkpointer: Any) -> Any:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    class Scripted(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        @property
        def profile(self) -> dict[str, Any]:  # type: ignore[override]
            return {"max_input_tokens": WINDOW}

        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            owner = CURRENT.get()
            with SEEN.lock:
                SEEN.requests[owner] += 1
            for message in messages:
                SEEN.check(owner, "a request", repr(message))
            first = next(m for m in messages if isinstance(m, HumanMessage))
            blocks = [b for b in first.content if isinstance(b, dict) and b.get("type") == "image"]
            data = base64.b64decode(blocks[0]["base64"]) if blocks else owner.encode()
            token = TOKEN.search(data).group().decode()  # type: ignore[union-attr]
            done = SEEN.requests[owner]
            if done <= READS:
                call = {"id": f"r{done}", "name": "read_file", "args": {"path": path_of(token, done - 1)}}
                return _result(AIMessage("", tool_calls=[call]))
            asks = [*foreign_handles(token, tokens), recall_handle(file_content(path_of(token, 0)))]
            step = done - READS - 1
            if step < len(asks):
                call = {"id": f"k{done}", "name": "recall", "args": {"handle": asks[step]}}
                return _result(AIMessage("", tool_calls=[call]))
            recalled = [str(m.content) for m in messages if isinstance(m, ToolMessage) and m.name == "recall"]
            with SEEN.lock:
                SEEN.recalls[owner].extend(recalled)
            return _result(AIMessage("Read the files."))

    def _result(message: AIMessage) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_content(path)

    return create_agent(Scripted(), [read_file], middleware=[middleware], checkpointer=checkpointer)


def _langchain_input(token: str) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    block = {"type": "image", "base64": base64.b64encode(image(token)).decode(), "mime_type": "image/png"}
    return {"messages": [HumanMessage([{"type": "text", "text": TASK}, block])]}


def _thread_ids(tokens: Sequence[str]) -> dict[str, Any]:
    """A thread id per conversation: str, int and UUID in turn; every fourth has none (no checkpointer)."""
    ids: dict[str, Any] = {}
    for n, token in enumerate(tokens):
        kind = n % 4
        ids[token] = (f"thread-{n}", 1_000 + n, uuid.uuid4(), None)[kind]
    return ids


@pytest.mark.filterwarnings(
    "ignore:Pydantic serializer warnings:UserWarning"
)  # LangChain's, of a UUID thread id
@pytest.mark.parametrize("persist", [True, False], ids=["persistent", "view-only"])
def test_one_langchain_middleware_serves_concurrent_threads_apart(persist: bool) -> None:
    pytest.importorskip("langgraph", reason="needs LangGraph and LangChain (the langgraph extra)")
    from langgraph.checkpoint.memory import InMemorySaver

    from historykit.plugins.langchain import HistoryKitMiddleware

    tokens = new_tokens(CONVERSATIONS)
    middleware = HistoryKitMiddleware(pipeline(), context_window=WINDOW, persist=persist, recall=True)
    stored = _langchain_agent(middleware, tokens, InMemorySaver())
    unstored = _langchain_agent(middleware, tokens, None)
    threads = _thread_ids(tokens)
    by_task, by_thread = tokens[: CONVERSATIONS // 2], tokens[CONVERSATIONS // 2 :]

    def config(token: str) -> dict[str, Any]:
        thread = threads[token]
        configurable = {} if thread is None else {"thread_id": thread}
        return {"recursion_limit": 200, "configurable": configurable}

    def agent_of(token: str) -> Any:
        return unstored if threads[token] is None else stored

    def check_state(token: str, out: dict[str, Any]) -> None:
        for message in out["messages"]:
            SEEN.check(token, "the final state", repr(message))
        if threads[token] is not None:
            state = stored.get_state(config(token))
            for key, value in state.values.items():
                SEEN.check(token, f"the stored state's {key}", repr(value))

    async def one(token: str) -> None:
        CURRENT.set(token)
        check_state(token, await agent_of(token).ainvoke(_langchain_input(token), config(token)))

    def in_thread(token: str) -> None:
        CURRENT.set(token)
        check_state(token, agent_of(token).invoke(_langchain_input(token), config(token)))

    async def everything() -> None:
        workers = [threading.Thread(target=in_thread, args=(t,)) for t in by_thread]
        for w in workers:
            w.start()
        await asyncio.gather(*(one(t) for t in by_task))
        for w in workers:
            w.join()

    asyncio.run(everything())
    assert_isolated(tokens)


# --- one Pipeline, called directly ----------------------------------------------------------------


def _direct_history(token: str, reads: int, twin: bool) -> list[Message]:
    """A conversation's raw history; a twin's reads the same files as every other twin's, so its
    image's bytes are all that tells it apart."""
    from historykit._messages import ToolCallPart, ToolResultPart

    history = [Message("user", (TextPart(TASK), MediaPart("image/png", "", IMAGE_SIZE, native=image(token))))]
    for k in range(reads):
        path = f"shared/f{k}.py" if twin else path_of(token, k)
        call = ToolCallPart(f"r{k}", "read_file", {"path": path})
        history += [
            Message("assistant", (call,)),
            Message("tool", (ToolResultPart(f"r{k}", "read_file", file_content(path)),)),
        ]
    return history


@pytest.mark.parametrize("mode", ["persistent", "view"])
def test_one_pipeline_serves_concurrent_conversations_apart(mode: str) -> None:
    """Twins: the same text and an image of the same type and size with other bytes, keyed by
    conversation (str, int and UUID keys), or by none; from tasks and threads at once."""
    tokens = new_tokens(CONVERSATIONS)
    shared = pipeline()
    keys: list[Any] = [(f"c{n}", n, uuid.uuid4(), None)[n % 4] for n in range(CONVERSATIONS)]

    def converse(token: str, key: Any) -> None:
        carried: list[Message] = []
        previous = 0
        raw = _direct_history(token, READS, twin=tokens.index(token) % 2 == 0)
        points = [i for i, m in enumerate(raw) if m.role == "assistant"] + [len(raw)]
        for point in points:
            given = carried + raw[previous:point] if mode == "persistent" else raw[:point]
            result = shared.run(given, WINDOW, mode=mode, conversation=key)  # type: ignore[arg-type]
            for message in result.messages:
                SEEN.check(token, "a view", _message_text(message))
            with SEEN.lock:
                SEEN.requests[token] += 1
            carried, previous = list(result.messages), point

    async def one(token: str, key: Any) -> None:
        await asyncio.to_thread(converse, token, key)

    async def everything() -> None:
        half = CONVERSATIONS // 2
        workers = [threading.Thread(target=converse, args=(t, k)) for t, k in zip(tokens[half:], keys[half:])]
        for w in workers:
            w.start()
        await asyncio.gather(*(one(t, k) for t, k in zip(tokens[:half], keys[:half])))
        for w in workers:
            w.join()

    asyncio.run(everything())
    assert SEEN.foreign == [], SEEN.foreign[:10]
    assert all(SEEN.requests[t] == READS + 1 for t in tokens)
    assert SEEN.summaries > 0
