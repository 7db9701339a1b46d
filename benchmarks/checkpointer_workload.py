"""The agent-like workload of `bench_checkpointers.py`, through a real graph or direct saver calls.

A step is one model turn of a coding agent: the model calls a tool (`read_file`) and the tool
returns 2-8 KB of source text. Every `USER_EVERY`-th step starts with a user message, so 1,000
steps hold 2,143 messages (1,000 tool calls, 1,000 tool results, 143 user messages). Everything is
derived from the step number, so every saver stores exactly the same conversation.

Two ways to drive a checkpointer with it:
- `build_graph(...)`: a real `StateGraph` (fake chat model node, `ToolNode`), compiled with the
  checkpointer and invoked once per step with the thread's config. `state="plain"` keeps messages
  with `add_messages`; `state="delta"` opts into LangGraph's `DeltaChannel` (beta) with LangGraph's
  own batch reducer, the way its docstring shows.
- `DirectSteps`: the calls LangGraph makes for one superstep, made by hand (`put_writes` of the
  step's messages, then `put` of the next checkpoint), so a saver's own cost is measured without
  the graph's. With `state="delta"` the checkpoint leaves the message channel out, except for a
  `_DeltaSnapshot` every `DELTA_SNAPSHOT_FREQUENCY` updates, and records the update counters in the
  metadata, as `DeltaChannel` does.

Example:
    ```python
    graph = build_graph(saver, "plain", WORKLOAD)
    config = {"configurable": {"thread_id": "bench"}}
    for step in range(100):
        graph.invoke(WORKLOAD.graph_input(step), config)
    ```
"""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, TypedDict, cast

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.prebuilt import ToolNode

__all__ = [
    "DELTA_SNAPSHOT_FREQUENCY",
    "USER_EVERY",
    "WORKLOAD",
    "DirectSteps",
    "StateKind",
    "Workload",
    "build_graph",
    "payload_bytes",
]

StateKind = Literal["plain", "delta"]

USER_EVERY = 7
"""A user message opens every 7th step."""

DELTA_SNAPSHOT_FREQUENCY = 100
"""`DeltaChannel`'s default: a full snapshot of the channel every 100 updates."""

_WORDS = (
    "self",
    "value",
    "result",
    "items",
    "config",
    "request",
    "response",
    "index",
    "count",
    "buffer",
    "cache",
    "thread",
    "state",
    "message",
    "payload",
    "record",
    "handler",
    "parser",
    "token",
    "offset",
    "length",
    "stream",
    "reader",
    "writer",
    "update",
)
_STATEMENTS = (
    "{a} = {b}.get({c!r}, {n})",
    "if {a} is None:\n        return {b}",
    "for {a} in {b}:\n        {c}.append({a})",
    "{a}.{b}({c}, {n})",
    "return {a} + {n}",
    "raise ValueError(f'bad {a}: {{{b}!r}}')",
    "# {a} {b} {c}: keep the {a} until the {b} is flushed",
)


@dataclass(frozen=True)
class Workload:
    """The conversation: deterministic messages for each step.

    Example:
        ```python
        assert 2048 <= len(WORKLOAD.file_text(WORKLOAD.path(3)).encode()) <= 8192
        ```
    """

    result_min: int = 2048
    """Smallest tool result, in bytes."""
    result_max: int = 8192
    """Largest tool result, in bytes."""
    user_every: int = USER_EVERY
    """A user message opens every `user_every`-th step."""

    def path(self, step: int) -> str:
        return f"src/pkg_{step % 13}/module_{step}.py"

    def file_text(self, path: str) -> str:
        """Python-like source of a size between `result_min` and `result_max`, seeded by `path`
        (cached: `prepare` builds the texts before a timed run, as a real tool reads a file)."""
        return _file_text(path, self.result_min, self.result_max)

    def prepare(self, steps: int) -> None:
        """Build the tool results of `steps` steps now, so timed steps do not generate text."""
        for step in range(steps):
            self.file_text(self.path(step))

    def user_message(self, step: int) -> HumanMessage | None:
        if step % self.user_every:
            return None
        return HumanMessage(
            f"Task {step // self.user_every}: read the modules of package pkg_{step % 13} and fix the "
            "failing test in tests/test_pkg.py; keep the public API unchanged.",
            id=f"user-{step}",
        )

    def tool_call(self, step: int) -> AIMessage:
        return AIMessage(
            content="",
            id=f"ai-{step}",
            tool_calls=[{"name": "read_file", "args": {"path": self.path(step)}, "id": f"call-{step}"}],
        )

    def tool_result(self, step: int) -> ToolMessage:
        """What `ToolNode` returns for the step's call (direct mode makes it by hand, with an id)."""
        return ToolMessage(
            self.file_text(self.path(step)), tool_call_id=f"call-{step}", name="read_file", id=f"tool-{step}"
        )

    def step_messages(self, step: int) -> list[BaseMessage]:
        user = self.user_message(step)
        return [*([user] if user else []), self.tool_call(step), self.tool_result(step)]

    def graph_input(self, step: int) -> dict[str, list[AnyMessage]]:
        """The input of one `invoke`: the user message, if the step has one (else an empty list)."""
        user = self.user_message(step)
        return {"messages": [user] if user else []}

    def model_script(self, start: int = 0) -> Iterator[AIMessage]:
        step = start
        while True:
            yield self.tool_call(step)
            step += 1


WORKLOAD = Workload()


def _line_pool(size: int = 4096) -> tuple[str, ...]:
    rng = random.Random(20240607)
    lines = []
    for _ in range(size):
        a, b, c = rng.sample(_WORDS, 3)
        if rng.random() < 0.15:
            lines.append(f"def {a}_{b}({c}, {a}=None):")
        else:
            lines.append("    " + rng.choice(_STATEMENTS).format(a=a, b=b, c=c, n=rng.randint(0, 9999)))
    return tuple(lines)


_LINES = _line_pool()


@functools.cache
def _file_text(path: str, smallest: int, largest: int) -> str:
    rng = random.Random(path)
    target = rng.randint(smallest, largest)
    parts = [f'"""{path}: generated for the checkpointer benchmark."""\n']
    size = len(parts[0])
    while size < target:
        line = _LINES[rng.randrange(len(_LINES))] + "\n"
        parts.append(line)
        size += len(line)
    return "".join(parts)[:target]


class PlainState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]


def build_graph(
    saver: BaseCheckpointSaver[Any] | None, kind: StateKind, workload: Workload = WORKLOAD
) -> Any:
    """A compiled agent graph: START -> agent (fake chat model) -> tools (`ToolNode`) -> END."""

    @tool
    def read_file(path: str) -> str:
        """Read a file of the project."""
        return workload.file_text(path)

    model = GenericFakeChatModel(messages=workload.model_script())

    def agent(state: Any) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(PlainState if kind == "plain" else DeltaState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([read_file]))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=saver)


@dataclass
class DirectSteps:
    """The saver calls of one superstep per workload step, made by hand.

    `start()` returns the calls that create the thread's first (empty) checkpoint; each `step(i)`
    returns `(config, writes, task_id)` for `put_writes` and `(checkpoint, metadata, new_versions)`
    for `put`; `advance(config)` takes the config `put` returned.

    Example:
        ```python
        steps = DirectSteps(saver, "plain", "t1")
        steps.advance(saver.put(*steps.start()))
        for i in range(10):
            writes, put_args = steps.step(i)
            saver.put_writes(*writes)
            steps.advance(saver.put(steps.config, *put_args))
        ```
    """

    saver: BaseCheckpointSaver[Any]
    state: StateKind
    thread_id: str
    workload: Workload = WORKLOAD
    messages: list[BaseMessage] = field(default_factory=list)
    config: RunnableConfig = field(default_factory=RunnableConfig)
    version: Any = None
    since_snapshot: int = 0

    def start(self) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, dict[str, Any]]:
        checkpoint = self._checkpoint(-1, {}, {})
        config: RunnableConfig = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        return config, checkpoint, {"source": "input", "step": -1, "parents": {}}, {}

    def advance(self, config: RunnableConfig) -> None:
        self.config = config

    def step(
        self, step: int
    ) -> tuple[
        tuple[RunnableConfig, list[tuple[str, Any]], str],
        tuple[Checkpoint, CheckpointMetadata, dict[str, Any]],
    ]:
        new = self.workload.step_messages(step)
        writes: tuple[RunnableConfig, list[tuple[str, Any]], str] = (
            self.config,
            [("messages", new)],
            str(uuid.uuid4()),
        )
        self.messages = self.messages + new  # a new list of the same objects, as add_messages makes
        self.version = self.saver.get_next_version(self.version, None)
        metadata: dict[str, Any] = {"source": "loop", "step": step, "parents": {}}
        values: dict[str, Any] = {}
        if self.state == "plain":
            values["messages"] = self.messages
        else:
            self.since_snapshot += 1
            if self.since_snapshot >= DELTA_SNAPSHOT_FREQUENCY:
                values["messages"] = _DeltaSnapshot(self.messages)
                self.since_snapshot = 0
            else:
                metadata["counters_since_delta_snapshot"] = {
                    "messages": [self.since_snapshot, self.since_snapshot]
                }
        checkpoint = self._checkpoint(step, values, {"messages": self.version})
        return writes, (checkpoint, cast(CheckpointMetadata, metadata), {"messages": self.version})

    @staticmethod
    def _checkpoint(step: int, values: dict[str, Any], versions: dict[str, Any]) -> Checkpoint:
        return Checkpoint(
            v=4,
            id=str(uuid6(clock_seq=step)),
            ts=datetime.now(timezone.utc).isoformat(),
            channel_values=values,
            channel_versions=versions,
            versions_seen={},
            updated_channels=list(versions),
        )


def payload_bytes(messages: list[BaseMessage]) -> tuple[int, int]:
    """`(count, bytes)` of the distinct messages (by id), each serialized as LangGraph's default
    serializer stores it."""
    serde = JsonPlusSerializer()
    distinct: dict[str, int] = {}
    for i, message in enumerate(messages):
        key = message.id or f"#{i}"
        if key not in distinct:
            distinct[key] = len(serde.dumps_typed(message)[1])
    return len(distinct), sum(distinct.values())
