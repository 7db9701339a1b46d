"""The LangChain anchors, `ContextEditingMiddleware` and `SummarizationMiddleware`, driven as an agent does.

A LangChain v1 agent (`create_agent`) keeps the conversation in graph state (without the system
prompt, which it passes separately), runs each middleware's `before_model` hook on the state and
applies the update with the `add_messages` reducer (so `SummarizationMiddleware`'s
`RemoveMessage(REMOVE_ALL_MESSAGES)` + summary replace the state: persistent), then calls the model
through each middleware's `wrap_model_call` (so `ContextEditingMiddleware`'s edits reach only that
request: view-only by design). This module does exactly that for one model call at a time, with a
fake chat model as the summarizer (`FakeListChatModel`, answering instantly with a summary of a
fixed size and counting the tokens of the prompt it gets).

Both middlewares count tokens with historykit's counter (through its LangChain adapter), so their
triggers measure what the benchmark measures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from historykit._messages import Message
from historykit._tokens import TokenCounter
from historykit.plugins.langchain import LangChainAdapter

STRATEGIES = ("context-editing", "summarization")


def _summary_text(counter: TokenCounter, tokens: int) -> str:
    line = "- decision: kept the public API; files: src/module.py, tests/test_module.py; next: run tests\n"
    text = "## Intent\nFix the reported bug without breaking the public API.\n## Key decisions\n"
    while counter.count_text(text) < tokens:
        text += line
    return text


def summarizer_model(counter: TokenCounter, summary_tokens: int) -> Any:
    """A fake chat model that answers with a fixed-size summary and counts what it reads."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    class RecordingFakeChatModel(FakeListChatModel):
        read_tokens: int = 0
        calls: int = 0

        def _call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
            self.calls += 1
            self.read_tokens += sum(counter.count_text(m.text) for m in messages)
            return super()._call(messages, *args, **kwargs)

    return RecordingFakeChatModel(responses=[_summary_text(counter, summary_tokens)])


@dataclass
class Anchor:
    """One LangChain middleware with what it needs to run a model call."""

    middleware: Any
    summarizer: Any
    adapter: LangChainAdapter

    def call(self, state: list[Any], system: Any) -> tuple[list[Any], list[Any]]:
        """One model call: returns the state after the `before_model` hooks and what the model is sent."""
        from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
        from langchain_core.messages import AIMessage
        from langgraph.graph.message import add_messages

        # An agent runs the hooks a middleware defines, and only those.
        kind = type(self.middleware)
        if kind.before_model is not AgentMiddleware.before_model:
            update = self.middleware.before_model({"messages": state}, None)
            if update:
                state = cast(
                    "list[Any]", add_messages(state, update["messages"])
                )  # the reducer an agent's graph applies
        sent: list[Any] = []

        def handler(request: Any) -> Any:
            sent.extend(request.messages)
            return ModelResponse(result=[AIMessage("ok")])

        request = ModelRequest(
            model=self.summarizer,
            messages=list(state),
            system_message=system,
            tools=[],
            state={"messages": state},
            runtime=None,
        )
        if kind.wrap_model_call is not AgentMiddleware.wrap_model_call:
            self.middleware.wrap_model_call(request, handler)
        else:
            handler(request)
        return state, ([system] if system is not None else []) + sent


def anchor(
    name: str, window: int, counter: TokenCounter, summary_tokens: int, *, own_counter: bool = False
) -> Anchor:
    """The anchor configurations; `own_counter`: LangChain's default token count (for timing).

    Both fire at 80% of the window, like harness `TieredCompaction`'s target; each keeps its
    documented default tail (`ClearToolUsesEdit`: the last 3 results; summarization: 20 messages).
    """
    from langchain.agents.middleware import (
        ClearToolUsesEdit,
        ContextEditingMiddleware,
        SummarizationMiddleware,
    )

    adapter = LangChainAdapter()
    trigger = int(window * 0.8)
    summarizer = summarizer_model(counter, summary_tokens)

    def count(messages: Iterable[Any]) -> int:
        return sum(counter.count_message(m) for m in adapter.to_neutral(list(messages)))

    if own_counter:
        from langchain_core.messages.utils import count_tokens_approximately as count  # type: ignore[assignment]

    middleware: Any
    if name == "trim":
        middleware = trim_middleware(trigger, window // 2, count)
    elif name == "context-editing":
        middleware = ContextEditingMiddleware(
            edits=[ClearToolUsesEdit(trigger=trigger, keep=3)], token_counter=count
        )
    elif name == "summarization":
        middleware = SummarizationMiddleware(
            summarizer, trigger=("tokens", trigger), keep=("messages", 20), token_counter=count
        )
    else:
        raise ValueError(f"unknown LangChain anchor {name!r}")
    return Anchor(middleware, summarizer, adapter)


def trim_middleware(trigger: int, keep: int, count: Callable[[Iterable[Any]], int]) -> Any:
    """LangChain's `trim_messages` (a sliding window by tokens) in a `before_model` middleware, the
    way LangChain v1's "trim messages" recipe runs it: past `trigger` tokens, the state becomes the
    first user message and the latest messages within `keep` tokens (`strategy="last"`, whole
    messages, starting on a user or assistant message so that no tool result loses its call)."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import HumanMessage, RemoveMessage, trim_messages
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    class TrimMessages(AgentMiddleware):  # type: ignore[type-arg]
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            messages = state["messages"]
            if count(messages) <= trigger:
                return None
            first = next((m for m in messages if isinstance(m, HumanMessage)), None)
            head = [first] if first is not None else []
            rest = messages[messages.index(first) + 1 :] if first is not None else messages
            tail = trim_messages(
                rest,
                max_tokens=max(keep - count(head), 0),
                token_counter=count,
                strategy="last",
                start_on=("human", "ai"),
                allow_partial=False,
            )
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *head, *tail]}

    return TrimMessages()


def native_session(session: Sequence[Message]) -> tuple[Any, list[Any]]:
    """The session as LangChain messages: the system prompt apart (as `create_agent` keeps it) and
    the state, every message with a stable id (as the `add_messages` reducer gives them)."""
    native = LangChainAdapter().to_native(session)
    for index, msg in enumerate(native):
        msg.id = msg.id or f"msg-{index}"
    system = native[0] if native and type(native[0]).__name__ == "SystemMessage" else None
    return system, native[1:] if system is not None else native


@dataclass
class LangChainCall:
    sent: list[Message]
    summarizer_tokens: int
    summaries: int


def replay(
    session: Sequence[Message],
    *,
    strategy: str,
    window: int,
    mode: str,
    counter: TokenCounter,
    summary_tokens: int,
) -> tuple[list[Message], list[int], list[LangChainCall]]:
    """Replays a session through a LangChain anchor.

    Returns the raw session as neutral messages (as LangChain sees it), the call points in it, and
    each call's input as neutral messages.
    """
    system, state_raw = native_session(session)
    run = anchor(strategy, window, counter, summary_tokens)
    offset = 1 if system is not None else 0
    raw = run.adapter.to_neutral(([system] if system is not None else []) + state_raw)
    points = [i for i, m in enumerate(raw) if m.role == "assistant" and i > 0]
    calls: list[LangChainCall] = []
    carried: list[Any] = []
    previous = 0
    for t in points:
        upto = t - offset
        state = carried + state_raw[previous:upto] if mode == "persistent" else list(state_raw[:upto])
        read, made = run.summarizer.read_tokens, run.summarizer.calls
        state, sent = run.call(state, system)
        calls.append(
            LangChainCall(
                run.adapter.to_neutral(sent), run.summarizer.read_tokens - read, run.summarizer.calls - made
            )
        )
        carried, previous = state, upto
    return raw, points, calls


def timing(
    history: Sequence[Message], strategy: str, *, window: int, summary_tokens: int, repeat: int
) -> float:
    """Milliseconds per model call of a LangChain anchor on `history` (best of `repeat`), each call
    on a fresh middleware with LangChain's own token count, as it comes out of the box."""
    import time

    system, state = native_session(history)
    samples = []
    for attempt in range(repeat + 1):
        run = anchor(strategy, window, TokenCounter(), summary_tokens, own_counter=True)
        fresh = list(state)
        start = time.process_time()
        run.call(fresh, system)
        if attempt:  # the first call warms up
            samples.append((time.process_time() - start) * 1000)
    return min(samples)
