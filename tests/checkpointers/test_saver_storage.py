"""How `SQLModelSaver` stores things: messages once, compact references, delta channels, pruning,
filters, serialization without pickle, encryption."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, cast

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

from historykit._messages import COMPACTION_KEY, CompactionMarker
from historykit.checkpointers import CorruptRowError, SQLModelSaver
from historykit.checkpointers._database import create_engine
from historykit.checkpointers._refs import decode_refs
from tests.strategies import examples

# ---------------------------------------------------------------------------------------------
# Helpers: direct puts of a growing conversation
# ---------------------------------------------------------------------------------------------


class Thread:
    """Puts checkpoints of one thread, each holding the whole message list, like a graph does."""

    def __init__(self, saver: SQLModelSaver, thread_id: str | None = None, ns: str = "") -> None:
        self.saver = saver
        self.thread_id = thread_id or uuid.uuid4().hex
        self.ns = ns
        self.config: RunnableConfig = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ns}}
        self.version: str | None = None
        self.step = 0

    def put(
        self, messages: list[BaseMessage], parent: RunnableConfig | None = None, **metadata: Any
    ) -> RunnableConfig:
        config = parent if parent is not None else self.config
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": list(messages), "counter": self.step}
        checkpoint["channel_versions"] = {"messages": self.version, "counter": self.version}
        meta = cast(CheckpointMetadata, {"source": "loop", "step": self.step, "parents": {}, **metadata})
        self.config = self.saver.put(
            config, checkpoint, meta, {"messages": self.version, "counter": self.version}
        )
        self.step += 1
        return self.config

    @property
    def base(self) -> RunnableConfig:
        """The thread's config without a checkpoint id (for `list`)."""
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": self.ns}}

    def messages_at(self, config: RunnableConfig) -> list[BaseMessage]:
        loaded = self.saver.get_tuple(config)
        assert loaded is not None
        return list(loaded.checkpoint["channel_values"].get("messages", []))


def tool_round(i: int, size: int = 2000) -> list[BaseMessage]:
    return [
        AIMessage("", id=f"ai-{i}", tool_calls=[{"name": "read", "args": {"path": f"/f{i}"}, "id": f"c{i}"}]),
        ToolMessage(f"contents of /f{i}\n" + "x" * size, tool_call_id=f"c{i}", id=f"tool-{i}"),
    ]


def query(url: str, sql: str, **params: Any) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(sql), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


def fingerprint(messages: Sequence[BaseMessage]) -> list[tuple[str, Any, Any]]:
    return [(m.type, m.id, m.content) for m in messages]


# ---------------------------------------------------------------------------------------------
# Messages once, references small
# ---------------------------------------------------------------------------------------------


def test_each_message_is_stored_once_and_a_checkpoint_stores_a_few_bytes(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    history: list[BaseMessage] = [HumanMessage("start", id="h-0")]
    ref_sizes = []
    for i in range(120):
        history = [*history, *tool_round(i)]
        config = thread.put(history)
        (blob,) = query(
            sqlite_url,
            "SELECT b.data FROM historykit_blob b JOIN historykit_checkpoint c ON c.thread_id = b.thread_id "
            "AND b.channel = 'messages' AND b.version = json_extract(c.channel_versions, '$.messages') "
            "WHERE c.checkpoint_id = :cid",
            cid=config["configurable"]["checkpoint_id"],
        )
        ref_sizes.append(len(blob.data))
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_message")[0][0] == len(history)
    assert max(ref_sizes) <= 40
    assert thread.messages_at(thread.config) == history
    payload = sum(len(saver.serde.dumps_typed(m)[1]) for m in history)  # serialized, uncompressed
    stored = sum(len(row.data or b"") for row in query(sqlite_url, "SELECT data FROM historykit_blob"))
    # 120 checkpoints of a growing conversation: their blobs weigh a few % of the messages.
    assert stored < payload / 20


class CountingSerializer(JsonPlusSerializer):
    """The default serializer, noting the id of every message it serializes."""

    def __init__(self) -> None:
        super().__init__(allowed_msgpack_modules=None)
        self.serialized: list[str | None] = []

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        # (A new message with an id is also serialized without it, to find it among the messages
        # logged from writes before they had an id: those copies have no id and are not noted.)
        if isinstance(obj, BaseMessage) and obj.id is not None:
            self.serialized.append(obj.id)
        return super().dumps_typed(obj)


def test_a_step_costs_the_database_no_more_on_a_long_thread(tmp_path: Path) -> None:
    """What a write asks SQLite to do does not grow with the thread: the same step (read the
    latest checkpoint, write two new messages and a checkpoint) on a thread of 2,000 messages runs
    about as many SQLite VM instructions as on one of 20. Counted, not timed: SQLite calls the
    progress handler at every instruction. (The lookup of a write's messages by hash and by
    anonymous hash, joined by OR, once searched the whole log: 20x the instructions here.)"""
    counted = [0]

    def count() -> int:
        counted[0] += 1
        return 0

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_progress_handler(count, 1)

    sa.event.listen(sa.pool.Pool, "connect", on_connect)
    try:
        saver = SQLModelSaver(f"sqlite:///{tmp_path / 'growth.db'}")
        instructions = {}
        for length in (20, 2_000):
            thread = Thread(saver)
            history = [m for i in range(length // 2) for m in tool_round(i, size=20)]
            thread.put(history)
            counted[0] = 0
            loaded = thread.messages_at(thread.config)
            thread.put([*loaded, *tool_round(length, size=20)])
            instructions[length] = counted[0]
    finally:
        sa.event.remove(sa.pool.Pool, "connect", on_connect)
    assert instructions[20] > 0
    assert instructions[2_000] < 1.5 * instructions[20], instructions


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_graph_conversation_is_one_run_of_numbers(database_url: str, asynchronous: bool) -> None:
    """LangGraph saves a step's writes from several threads (or tasks) at once; the log still
    numbers the conversation's messages in its order, so its reference list stays one run of
    numbers, a few bytes, however long the thread. (Left to race for the database, later writes
    committed first, about once a step: 32-42 runs after 30 steps.)"""

    @tool
    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    script = (
        AIMessage("", tool_calls=[{"name": "read", "args": {"path": f"/f{i}"}, "id": f"c{i}"}])
        for i in range(10_000)
    )
    model = GenericFakeChatModel(messages=script)

    class State(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]

    builder = StateGraph(State)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([read]))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    saver = SQLModelSaver(database_url)
    graph = builder.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": "ordered"}}

    async def steps() -> None:
        for step in range(30):
            await graph.ainvoke({"messages": [HumanMessage(f"step {step}")]}, config)

    if asynchronous:
        import asyncio

        asyncio.run(steps())
    else:
        for step in range(30):
            graph.invoke({"messages": [HumanMessage(f"step {step}")]}, config)
    (blob,) = query(
        database_url,
        "SELECT data FROM historykit_blob WHERE thread_id = 'ordered' AND channel = 'messages' "
        "ORDER BY version DESC LIMIT 1",
    )
    refs = decode_refs(bytes(blob.data))
    assert sum(length for _, length in refs.runs) == 90
    assert len(refs.runs) == 1, refs.runs


def test_known_messages_are_not_serialized_again(sqlite_url: str) -> None:
    serde = CountingSerializer()
    saver = SQLModelSaver(sqlite_url, serde=serde)
    thread = Thread(saver)
    history: list[BaseMessage] = []
    for i in range(5):
        history = [*history, *tool_round(i)]
        thread.put(history)
    assert len(serde.serialized) == len(history)
    serde.serialized.clear()
    history = [*history, *tool_round(99)]
    thread.put(history)
    assert serde.serialized == ["ai-99", "tool-99"]
    # A resumed graph hands back the objects get_tuple returned: they are known too.
    reread = thread.messages_at(thread.config)
    serde.serialized.clear()
    thread.put([*reread, HumanMessage("next", id="h-next")])
    assert serde.serialized == ["h-next"]
    # A new saver (another process) knows nothing: it hashes, finds the rows, adds nothing.
    other = SQLModelSaver(sqlite_url, serde=serde)
    serde.serialized.clear()
    Thread(other, thread.thread_id).put([*reread, HumanMessage("next", id="h-next")])
    assert len(serde.serialized) == len(reread) + 1
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_message")[0][0] == len(reread) + 1


def test_without_the_cache_equal_messages_still_map_to_one_row(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url, cached_threads=0)
    thread = Thread(saver)
    first = [HumanMessage("hi", id="h"), *tool_round(0)]
    thread.put(first)
    copies = [m.model_copy(deep=True) for m in first]
    config = thread.put([*copies, HumanMessage("again", id="h2")])
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_message")[0][0] == 4
    assert thread.messages_at(config) == [*first, HumanMessage("again", id="h2")]


def test_written_messages_are_logged_once_whichever_form_comes_first(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    # The call the results answer (a result whose call the log lacks waits out of the transcript).
    call = AIMessage(
        "", id="a", tool_calls=[{"name": "f", "args": {}, "id": "c1"}, {"name": "f", "args": {}, "id": "c2"}]
    )
    first = thread.put([HumanMessage("go", id="h"), call])
    # A node returns a tool result without an id; its write is saved as references to the log.
    result = ToolMessage("result " + "r" * 3000, tool_call_id="c1")
    saver.put_writes(first, [("messages", [result])], "tools-task")
    (write,) = query(sqlite_url, "SELECT encoding, data FROM historykit_write")
    assert write.encoding == "historykit.refs" and len(write.data) < 60
    # LangGraph gives it an id as it enters the state (the same object), then stores the state.
    result.id = "given-by-add-messages"
    second = thread.put([HumanMessage("go", id="h"), call, result])
    rows = query(sqlite_url, "SELECT native_id FROM historykit_message ORDER BY seq")
    assert [row.native_id for row in rows] == ["h", "a", "given-by-add-messages"]  # completed in place
    # The write still reads back as written (no id): replaying it gives an id again, as LangGraph did.
    loaded = saver.get_tuple(first)
    assert loaded is not None and loaded.pending_writes is not None
    assert fingerprint(loaded.pending_writes[0][2]) == [("tool", None, result.content)]

    # The other order: the next checkpoint (with the id given) is saved before the write of the
    # message without it (LangGraph saves writes and checkpoints from several threads).
    late = ToolMessage("late " + "l" * 3000, tool_call_id="c2", id="late-id")
    third = thread.put([HumanMessage("go", id="h"), call, result, late])
    saver.put_writes(second, [("messages", [late.model_copy(update={"id": None})])], "tools-task")
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_message")[0][0] == 4
    # One row, at the write's (earlier) place; the write reads back without the id.
    assert [m.id for m in saver.transcript(thread.thread_id).messages] == [
        "h",
        "a",
        "given-by-add-messages",
        "late-id",
    ]
    cold = SQLModelSaver(sqlite_url, cached_threads=0)
    loaded = cold.get_tuple(second)
    assert loaded is not None and loaded.pending_writes is not None
    assert fingerprint(loaded.pending_writes[0][2]) == [("tool", None, late.content)]
    assert fingerprint(cold.get_tuple(third).checkpoint["channel_values"]["messages"])[-1] == (  # type: ignore[union-attr]
        "tool",
        "late-id",
        late.content,
    )
    position = query(sqlite_url, "SELECT position FROM historykit_message WHERE native_id = 'late-id'")[0][0]
    assert position.startswith(second["configurable"]["checkpoint_id"])


# ---------------------------------------------------------------------------------------------
# Property: whatever edits a history goes through, every checkpoint reads back exactly
# ---------------------------------------------------------------------------------------------

_counter = iter(range(10**9))


def _new_message(kind: int, text: str) -> BaseMessage:
    n = next(_counter)
    if kind == 0:
        return HumanMessage(text, id=f"m{n}")
    if kind == 1:
        return AIMessage(text, id=f"m{n}", tool_calls=[{"name": "t", "args": {"q": text}, "id": f"c{n}"}])
    return ToolMessage(text, tool_call_id=f"c{n}", id=f"m{n}")


edit = st.one_of(
    st.tuples(
        st.just("append"),
        st.lists(st.tuples(st.integers(0, 2), st.text(max_size=20)), min_size=1, max_size=4),
    ),
    st.tuples(st.just("remove"), st.lists(st.integers(0, 50), min_size=1, max_size=5)),
    st.tuples(st.just("replace"), st.integers(0, 50), st.text(max_size=20)),
    st.tuples(st.just("compact"), st.integers(0, 3)),
    st.tuples(st.just("travel"), st.integers(0, 50)),
    st.tuples(st.just("copies"), st.integers(0, 50)),
    st.tuples(st.just("empty")),
    st.tuples(
        st.just("write"),
        st.lists(st.tuples(st.integers(0, 2), st.text(max_size=20)), min_size=1, max_size=3),
        st.booleans(),
    ),
)


@pytest.fixture(scope="module")
def property_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('property') / 'edits.db'}"


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(edit, min_size=1, max_size=14))
# Found by hypothesis: a message edited in place is new where the edit was made; the transcript
# keeps it after the messages the thread had before it, and moves none of them.
@example(edits=[("append", [(0, "a")]), ("append", [(0, "b")]), ("replace", 0, "x")])
def test_any_sequence_of_history_edits_reads_back_exactly(
    property_db: str, edits: list[tuple[Any, ...]]
) -> None:
    saver = SQLModelSaver(property_db)
    thread = Thread(saver)
    current: list[BaseMessage] = []
    parent: RunnableConfig | None = None
    puts: list[tuple[RunnableConfig, list[BaseMessage]]] = []
    parents: list[int | None] = []  # the put each put followed (time travel: an older one)
    writes: dict[int, list[BaseMessage]] = {}  # put index -> messages written after it
    entered: dict[int, list[BaseMessage]] = {}  # ... as they entered the state (given ids)
    travelled_to = None
    for op, *args in edits:
        if op == "write" and puts:
            # A node's output, saved as a write of the last checkpoint; without ids, LangGraph
            # gives them one as they enter the state (on the same objects), as here.
            written = [_new_message(kind, text) for kind, text in args[0]]
            if args[1]:
                written = [m.model_copy(update={"id": None}) for m in written]
            saver.put_writes(puts[-1][0], [("messages", written)], f"task-{len(puts)}")
            writes[len(puts) - 1] = [m.model_copy() for m in written]  # as written
            for m in written:
                m.id = m.id or f"given-{next(_counter)}"
            entered[len(puts) - 1] = written
            current = [*current, *written]
        elif op == "append":
            current = [*current, *(_new_message(kind, text) for kind, text in args[0])]
        elif op == "remove" and current:
            doomed = {i % len(current) for i in args[0]}
            current = [m for i, m in enumerate(current) if i not in doomed]
        elif op == "replace" and current:
            i = args[0] % len(current)
            current = [
                *current[:i],
                current[i].model_copy(update={"content": args[1] + "!"}),
                *current[i + 1 :],
            ]
        elif op == "compact":
            marker = CompactionMarker(0, max(len(current) - args[0], 0), 100, 10, "summarize")
            summary = HumanMessage(
                f"summary {next(_counter)}",
                id=f"s{next(_counter)}",
                additional_kwargs={COMPACTION_KEY: marker.to_dict()},
            )
            current = [summary, *current[len(current) - args[0] :]] if args[0] else [summary]
        elif op == "travel" and puts:
            parent, old = puts[args[0] % len(puts)]
            current = list(old)
            travelled_to: int | None = args[0] % len(puts)
        elif op == "copies" and current:
            # Equal messages that are new objects: found by hash, not by identity.
            current = [m.model_copy(deep=True) for m in current] + [
                current[args[0] % len(current)].model_copy()
            ]
        elif op == "empty":
            current = []
        config = thread.put(current, parent=parent)
        parents.append(travelled_to if parent is not None else (len(puts) - 1 if puts else None))
        parent, travelled_to = None, None
        puts.append((config, list(current)))

    cold = SQLModelSaver(property_db, cached_threads=0)
    for index, (config, expected) in enumerate(puts):
        for reader in (saver, cold):
            loaded = reader.get_tuple(config)
            assert loaded is not None
            assert fingerprint(loaded.checkpoint["channel_values"].get("messages", [])) == fingerprint(
                expected
            )
            read_back: list[Any] = [value for _, _, value in loaded.pending_writes or []]
            assert [fingerprint(value) for value in read_back] == (
                [fingerprint(writes[index])] if index in writes else []
            )

    # The transcript: every distinct message once, in the order the thread first had it, each
    # branch of the checkpoints in one piece (depth first: a checkpoint's messages, then those
    # written after it, then its branches, oldest first), without the tool results whose call
    # the thread never had.
    children: dict[int | None, list[int]] = {}
    for index, parent_index in enumerate(parents):
        children.setdefault(parent_index, []).append(index)
    walk: list[int] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        index = stack.pop()
        walk.append(index)
        stack.extend(reversed(children.get(index, [])))
    seen: dict[str, BaseMessage] = {}
    for index in walk:
        for m in [*puts[index][1], *entered.get(index, [])]:
            seen.setdefault(json.dumps([m.type, m.model_dump()], sort_keys=True, default=str), m)
    called = {c["id"] for m in seen.values() if isinstance(m, AIMessage) for c in m.tool_calls}
    for key, m in list(seen.items()):
        if isinstance(m, ToolMessage) and m.tool_call_id not in called:
            del seen[key]
    transcript = cold.transcript(thread.thread_id)
    assert fingerprint(transcript.logged()) == fingerprint(list(seen.values()))
    summaries = [m for m in seen.values() if COMPACTION_KEY in m.additional_kwargs]
    assert [c.message.id for c in transcript.compactions] == [m.id for m in summaries]
    assert fingerprint(transcript.messages) == fingerprint([m for m in seen.values() if m not in summaries])
    saver.close()
    cold.close()


# ---------------------------------------------------------------------------------------------
# DeltaChannel graphs
# ---------------------------------------------------------------------------------------------


def _add_batch(state: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    return functools.reduce(add_messages, writes, state)  # type: ignore[arg-type]


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_batch, snapshot_frequency=3)]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}: " + "v" * 200


def delta_graph(checkpointer: Any, turns: int, first: int = 0) -> Any:
    script = iter(
        [
            msg
            for i in range(first, first + turns)
            for msg in (
                AIMessage(
                    "",
                    id=f"ai-{i}-a",
                    tool_calls=[{"name": "lookup", "args": {"key": f"k{i}"}, "id": f"c{i}"}],
                ),
                AIMessage(f"answer {i}", id=f"ai-{i}-b"),
            )
        ]
    )
    model = GenericFakeChatModel(messages=script)

    def agent(state: DeltaState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(DeltaState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _run_turns(graph: Any, config: dict[str, Any], turns: int) -> None:
    for i in range(turns):
        graph.invoke({"messages": [HumanMessage(f"question {i}", id=f"h-{i}")]}, config)


def _shape(messages: Sequence[BaseMessage]) -> list[tuple[str, Any]]:
    """Messages without the random ids LangGraph gives tool results."""
    return [(m.type, m.content if m.type != "ai" else (m.id, m.content)) for m in messages]


def test_delta_channel_graph_matches_the_in_memory_saver_and_survives_prune(database_url: str) -> None:
    turns = 4
    saver = SQLModelSaver(database_url)
    graph = delta_graph(saver, turns)
    reference = delta_graph(InMemorySaver(), turns)
    config = {"configurable": {"thread_id": "delta"}}
    _run_turns(graph, config, turns)
    _run_turns(reference, config, turns)

    history = list(graph.get_state_history(config))
    expected = list(reference.get_state_history(config))
    assert len(history) == len(expected) > 3 * turns
    for ours, theirs in zip(history, expected, strict=True):
        assert _shape(ours.values.get("messages", [])) == _shape(theirs.values.get("messages", []))
    # Snapshots were written (frequency 3) as reference lists, not message copies.
    snapshots = query(
        database_url,
        "SELECT data FROM historykit_blob WHERE channel = 'messages' AND encoding = 'historykit.refs'",
    )
    assert snapshots and all(decode_refs(row.data)[1] for row in snapshots)

    # The one-query history equals the base class's walk over get_tuple, at every checkpoint.
    for snapshot in history:
        fast = saver.get_delta_channel_history(config=snapshot.config, channels=["messages"])
        walked = BaseCheckpointSaver.get_delta_channel_history(
            saver, config=snapshot.config, channels=["messages"]
        )
        assert fast == walked

    final = graph.get_state(config).values["messages"]
    saver.copy_thread("delta", "delta-copy")
    assert graph.get_state({"configurable": {"thread_id": "delta-copy"}}).values["messages"] == final

    saver.prune(["delta"], strategy="keep_latest")
    kept = list(graph.get_state_history(config))
    assert 1 < len(kept) < len(history)  # the ancestors back to the last snapshot survive
    assert graph.get_state(config).values["messages"] == final
    # ... and the thread goes on.
    more = delta_graph(saver, 1, first=turns)
    more.invoke({"messages": [HumanMessage("one more", id="h-more")]}, config)
    assert _shape(more.get_state(config).values["messages"])[: len(final)] == _shape(final)
    # The transcript has every message, in order, pruned checkpoints or not, the last ones
    # (never in a snapshot) included.
    latest = more.get_state(config).values["messages"]
    assert len(latest) == len(final) + 4
    assert _shape(saver.transcript("delta").messages) == _shape(latest)
    saver.close()


def test_prune_keep_last_and_delete(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    history: list[BaseMessage] = []
    configs = []
    for i in range(6):
        history = [*history, *tool_round(i, size=10)]
        configs.append(thread.put(history))
        saver.put_writes(configs[-1], [("messages", tool_round(100 + i, size=5))], f"task-{i}")
    saver.prune([thread.thread_id], strategy="keep_last", keep_last=3)
    listed = list(saver.list(thread.base))
    assert [t.config["configurable"]["checkpoint_id"] for t in listed] == [
        c["configurable"]["checkpoint_id"] for c in reversed(configs[-3:])
    ]
    assert listed[-1].parent_config is None  # its parent is gone
    assert listed[0].checkpoint["channel_values"]["messages"] == history
    assert len(listed[0].pending_writes or []) == 1
    # Blobs only pruned checkpoints used are gone; writes of pruned checkpoints too.
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_blob")[0][0] == 2 * 3
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_write")[0][0] == 3
    saver.prune([thread.thread_id], strategy="delete")
    assert list(saver.list(thread.base)) == []
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_blob")[0][0] == 0
    # The log stays, writes' messages included, each after the checkpoint its write follows.
    assert [m.id for m in saver.transcript(thread.thread_id).messages] == [
        f"{kind}-{n}" for i in range(6) for n in (i, 100 + i) for kind in ("ai", "tool")
    ]

    with pytest.raises(ValueError, match="unknown prune strategy 'newest'"):
        saver.prune(["x"], strategy="newest")
    with pytest.raises(ValueError, match="keep_last=N"):
        saver.prune(["x"], strategy="keep_last")
    with pytest.raises(ValueError, match="positive int"):
        saver.prune(["x"], strategy="keep_last", keep_last=0)
    with pytest.raises(TypeError, match="not a single string"):
        saver.prune("x")


def test_delete_for_runs_keeps_other_runs_readable(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    first = thread.put([HumanMessage("a", id="a")], run_id="run-1")
    thread.put([HumanMessage("a", id="a"), HumanMessage("b", id="b")], run_id="run-2")
    saver.delete_for_runs(["run-1"])
    assert saver.get_tuple(first) is None
    (left,) = list(saver.list(thread.base))
    assert left.parent_config is None
    assert fingerprint(left.checkpoint["channel_values"]["messages"]) == [
        ("human", "a", "a"),
        ("human", "b", "b"),
    ]
    with pytest.raises(TypeError, match="not a single string"):
        saver.delete_for_runs("run-2")


# ---------------------------------------------------------------------------------------------
# list filters
# ---------------------------------------------------------------------------------------------


def test_list_filters_mean_what_they_mean_for_in_memory_saver(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    memory = InMemorySaver()
    threads = [Thread(saver), Thread(memory)]  # type: ignore[arg-type]
    threads[1].thread_id = threads[0].thread_id
    threads[1].config = threads[1].base
    thread = threads[0]
    variants: list[dict[str, Any]] = [
        {"flag": True, "score": 1, "tags": {"a": 1, "b": [1, 2]}, "note": None},
        {"flag": False, "score": 1.5, "tags": {"a": 2, "b": [2]}, "note": "x", "ключ": "значение"},
        {"flag": 1, "score": 2, "tags": {"a": 1}, "note": "y", "list": [1, "a"]},
    ]
    for i, v in enumerate(variants):
        for t in threads:
            t.put([HumanMessage(str(i), id=f"h{i}")], index=i, **v)

    def matching(filter: dict[str, Any], on: Any = saver, **kw: Any) -> list[int]:
        return sorted(t.metadata["index"] for t in on.list(thread.base, filter=filter, **kw))  # type: ignore[typeddict-item]

    expected = {
        "flag True": ({"flag": True}, [0, 2]),  # 1 == True, as in Python
        "flag 1": ({"flag": 1}, [0, 2]),
        "flag 0": ({"flag": 0}, [1]),
        "score 1": ({"score": 1}, [0]),
        "score 1.5": ({"score": 1.5}, [1]),
        "note None": ({"note": None}, [0]),
        "missing None": ({"missing": None}, [0, 1, 2]),  # a missing key is None
        "two keys": ({"note": "x", "score": 1.5}, [1]),
        "dict equal": ({"tags": {"a": 1}}, [2]),  # equality, not containment
        "dict not contained": ({"tags": {"b": [2]}}, []),
        "whole dict": ({"tags": {"a": 2, "b": [2]}}, [1]),
        "list": ({"list": [1, "a"]}, [2]),
        "tuple": ({"list": (1, "a")}, []),  # as InMemorySaver: a tuple is not the list stored
        "non-ascii key": ({"ключ": "значение"}, [1]),
        "source": ({"source": "loop"}, [0, 1, 2]),
        "string vs number": ({"score": "1"}, []),
    }
    for name, (filter, indexes) in expected.items():
        assert matching(filter, memory) == indexes, name
        assert matching(filter) == indexes, name
    assert matching({"source": "loop"}, limit=2) == [1, 2]
    assert matching({"tags": {"a": 1}}, limit=1) == [2]
    ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(thread.base)]
    before = {"configurable": {"checkpoint_id": ids[0]}}
    assert matching({"source": "loop"}, before=before) == [0, 1]

    with pytest.raises(TypeError, match="must be a dict"):
        list(saver.list(thread.base, filter="source=loop"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys must be non-empty strings"):
        list(saver.list(thread.base, filter={1: "x"}))  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"\['when'\] is a object"):
        list(saver.list(thread.base, filter={"when": object()}))
    with pytest.raises(ValueError, match="must not be negative"):
        list(saver.list(thread.base, limit=-1))
    with pytest.raises(TypeError, match="must be an int"):
        list(saver.list(thread.base, limit="2"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no configurable 'checkpoint_id'"):
        list(saver.list(thread.base, before={"configurable": {}}))
    saver.close()


def test_bad_input_to_put_is_named(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    with pytest.raises(TypeError, match=r"checkpoint metadata\['when'\] is a object"):
        thread.put([HumanMessage("a", id="a")], when=object())
    with pytest.raises(ValueError, match="no configurable 'thread_id'"):
        saver.put({"configurable": {}}, empty_checkpoint(), {}, {})
    bad_marker = HumanMessage("summary", id="s", additional_kwargs={COMPACTION_KEY: {"covered_from": 0}})
    with pytest.raises(ValueError, match="message 's' of thread .*missing the field 'covered_to'"):
        thread.put([bad_marker])
    with pytest.raises(ValueError, match="no configurable 'checkpoint_id'"):
        saver.put_writes({"configurable": {"thread_id": "t"}}, [("ch", 1)], "task")


def test_channel_versions_are_stored_once_and_read_back_with_their_type(database_url: str) -> None:
    saver = SQLModelSaver(database_url)
    base: RunnableConfig = {"configurable": {"thread_id": "versions", "checkpoint_ns": ""}}
    for versions in ({"a": saver.get_next_version(None, None)}, {"a": 3, "b": 7}):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"a": "x", "b": "y"}
        checkpoint["channel_versions"] = dict(versions)
        config = saver.put(base, checkpoint, {}, dict(versions))
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["channel_versions"] == versions
        assert {type(v) for v in got.checkpoint["channel_versions"].values()} == {
            type(v) for v in versions.values()
        }
    # String versions (what this saver makes) live in their column only; others stay in the body.
    rows = query(database_url, "SELECT checkpoint FROM historykit_checkpoint WHERE thread_id = 'versions'")
    bodies = [saver.serde.loads_typed(("msgpack", row.checkpoint)) for row in rows]
    assert sorted("channel_versions" in body for body in bodies) == [False, True]
    saver.close()


# ---------------------------------------------------------------------------------------------
# Serialization: no pickle, encryption
# ---------------------------------------------------------------------------------------------


class _StreamCipher:
    """A keyed SHA-256 stream cipher, enough to show that stored bytes are not the plaintext."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def _stream(self, nonce: bytes, length: int) -> bytes:
        blocks = (
            hashlib.sha256(self.key + nonce + i.to_bytes(8, "big")).digest() for i in range(length // 32 + 1)
        )
        return b"".join(blocks)[:length]

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(16)
        return "sha256-stream", nonce + bytes(
            a ^ b for a, b in zip(plaintext, self._stream(nonce, len(plaintext)))
        )

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "sha256-stream"
        nonce, body = ciphertext[:16], ciphertext[16:]
        return bytes(a ^ b for a, b in zip(body, self._stream(nonce, len(body))))


def test_an_encrypted_serializer_encrypts_every_stored_value(sqlite_url: str) -> None:
    serde = EncryptedSerializer(_StreamCipher(b"k" * 32), JsonPlusSerializer(allowed_msgpack_modules=None))
    saver = SQLModelSaver(sqlite_url, serde=serde)
    thread = Thread(saver)
    history: list[BaseMessage] = [HumanMessage("SECRET-PAYLOAD in the question", id="h")]
    config = thread.put(history)
    saver.put_writes(config, [("messages", [AIMessage("SECRET-PAYLOAD in a write", id="w")])], "task")
    config = thread.put([*history, AIMessage("SECRET-PAYLOAD answered", id="a")])
    for table, column in [
        ("historykit_message", "data"),
        ("historykit_blob", "data"),
        ("historykit_write", "data"),
        ("historykit_checkpoint", "checkpoint"),
    ]:
        for (data,) in query(sqlite_url, f"SELECT {column} FROM {table}"):
            assert b"SECRET-PAYLOAD" not in (data or b""), table
    encodings = {row[0] for row in query(sqlite_url, "SELECT encoding FROM historykit_message")}
    assert encodings == {"historykit.message+sha256-stream"}  # historykit's message form, encrypted
    # Identical messages are still stored once: the address is the hash of the plaintext.
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_message")[0][0] == 3  # h, w (a write), a
    cold = SQLModelSaver(sqlite_url, serde=serde, cached_threads=0)
    Thread(cold, thread.thread_id).put(
        [m.model_copy() for m in [*history, AIMessage("SECRET-PAYLOAD answered", id="a")]]
    )
    assert query(sqlite_url, "SELECT COUNT(*) FROM historykit_message")[0][0] == 3
    assert fingerprint(cold.get_tuple(config).checkpoint["channel_values"]["messages"]) == [  # type: ignore[union-attr]
        ("human", "h", "SECRET-PAYLOAD in the question"),
        ("ai", "a", "SECRET-PAYLOAD answered"),
    ]
    # Without the key, nothing decodes: a clear error, not garbage.
    plain = SQLModelSaver(sqlite_url, cached_threads=0)
    with pytest.raises(
        CorruptRowError,
        match=r"historykit_.*cannot be decoded \(encoding '(historykit\.message|msgpack)\+sha256-stream'\)",
    ):
        plain.get_tuple(config)


class _Boom:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (Path(self.path),))


def test_pickle_is_never_written_nor_loaded(sqlite_url: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pickle_fallback=False"):
        SQLModelSaver(sqlite_url, serde=JsonPlusSerializer(pickle_fallback=True))
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    config = thread.put([HumanMessage("hi", id="h")])
    canary = tmp_path / "executed"
    query(
        sqlite_url,
        "UPDATE historykit_message SET encoding = 'pickle', data = :data",
        data=pickle.dumps(_Boom(str(canary))),
    )
    cold = SQLModelSaver(sqlite_url, cached_threads=0)
    with pytest.raises(CorruptRowError, match="message seq .* holds a pickle, which historykit never writes"):
        cold.get_tuple(config)
    with pytest.raises(CorruptRowError, match="holds a pickle"):
        cold.transcript(thread.thread_id)
    assert not canary.exists()


# ---------------------------------------------------------------------------------------------
# Subgraph namespaces share the thread's log
# ---------------------------------------------------------------------------------------------


def test_namespaces_share_one_message_log(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    root, child = Thread(saver, "t"), Thread(saver, "t", ns="child:1")
    shared = [HumanMessage("in both", id="s")]
    root.put([*shared, HumanMessage("root only", id="r")])
    child.put([*shared, HumanMessage("child only", id="c")])
    assert [m.id for m in saver.transcript("t").messages] == ["s", "r", "c"]
    assert [m.id for m in child.messages_at(child.config)] == ["s", "c"]
    assert [m.id for m in root.messages_at(root.config)] == ["s", "r"]


def _iter_ids(items: Iterator[Any]) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in items]


def test_list_pages_through_many_checkpoints(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    configs = [thread.put([HumanMessage(str(i), id=str(i))]) for i in range(230)]
    expected = [c["configurable"]["checkpoint_id"] for c in reversed(configs)]
    assert _iter_ids(saver.list(thread.base)) == expected
    assert _iter_ids(saver.list(thread.base, limit=150)) == expected[:150]
    assert _iter_ids(saver.list(None, limit=3)) == expected[:3]


def test_large_messages_are_stored_compressed_and_older_rows_still_read(sqlite_url: str) -> None:
    saver = SQLModelSaver(sqlite_url)
    thread = Thread(saver)
    history: list[BaseMessage] = [HumanMessage("start", id="h-0"), *tool_round(0, size=6000)]
    thread.put(history)
    rows = query(sqlite_url, "SELECT native_id, encoding, data FROM historykit_message ORDER BY seq")
    by_id = {row.native_id: row for row in rows}
    assert by_id["h-0"].encoding == "historykit.message"  # too small to be worth compressing
    tool = by_id["tool-0"]
    assert tool.encoding == "historykit.message;zstd"
    assert len(tool.data) < len(saver.serde.dumps_typed(history[-1])[1]) / 5
    # A row written before compression (plain msgpack) reads back the same.
    _, plain = saver.serde.dumps_typed(history[-1])
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE historykit_message SET encoding = 'msgpack', data = :d WHERE native_id = 'tool-0'"
            ),
            {"d": plain},
        )
    engine.dispose()
    cold = SQLModelSaver(sqlite_url, cached_threads=0)
    assert Thread(cold, thread.thread_id).messages_at(thread.config) == history
    assert cold.transcript(thread.thread_id).messages == history


@pytest.mark.postgres
async def test_postgres_message_rows_arrive_in_binary_format(postgres_url: str) -> None:
    """psycopg reads PostgreSQL's text format unless told otherwise, in which a `bytea` arrives as
    hex, twice its size, to be decoded. A statement with `BINARY_RESULTS` (the saver's message
    reads) is read in binary format, by the sync and the asyncio engine alike, and its values come
    back the same; other statements keep the text format."""
    from historykit.checkpointers._database import create_async_engine
    from historykit.checkpointers._dialect import BINARY_RESULTS

    def listen(engine: sa.Engine, formats: list[int]) -> None:
        def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
            result = getattr(cursor, "_cursor", cursor).pgresult
            if result is not None and result.nfields:
                formats.append(result.fformat(0))

        sa.event.listen(engine, "after_cursor_execute", seen)

    plain = sa.select(
        sa.literal(b"\x00\xff" * 300, sa.LargeBinary), sa.literal("h\u00e9"), sa.literal(2**40, sa.BigInteger)
    )
    binary = plain.execution_options(**{BINARY_RESULTS: True})
    engine, formats = create_engine(postgres_url), []
    listen(engine, formats)
    with engine.connect() as conn:
        rows = [conn.execute(plain).one(), conn.execute(binary).one()]
    async_engine, async_formats = create_async_engine(postgres_url), []
    listen(async_engine.sync_engine, async_formats)
    async with async_engine.connect() as conn:
        rows += [(await conn.execute(plain)).one(), (await conn.execute(binary)).one()]
    await async_engine.dispose()
    engine.dispose()
    assert formats == async_formats == [0, 1]
    assert [tuple(row) for row in rows] == [(b"\x00\xff" * 300, "h\u00e9", 2**40)] * 4
