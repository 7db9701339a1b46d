"""`SQLModelConversationStore`: Pydantic AI 2.x's `ConversationStore` on SQLite and PostgreSQL.

What is checked:
- it behaves like Pydantic AI's own `InMemoryConversationStore` on any sequence of saves, loads,
  rewrites, stale saves, branches, forks, deletes and listings, with and without scopes (a
  Hypothesis state machine runs both side by side), and leaves no unreachable row behind;
- real agents continue a stored conversation across runs and across a restart (a new store on the
  same database), including a run paused on a tool call that needs approval;
- `read_history` issues one SELECT however long the history (a real corpus session);
- summaries record compaction markers, `transcript()` is complete after a compaction, and
  `delete` removes every row of a conversation while sparing what a fork of it still uses;
- conflicting writers, corrupt rows, encrypted messages and bad markers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("pydantic_ai.conversation_store", reason="the conversation store needs Pydantic AI 2.x")

import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests

from historykit._messages import COMPACTION_KEY, CompactionMarker, Message
from historykit._messages import TextPart as NeutralText
from historykit._messages import ThinkingPart as NeutralThinking
from historykit._messages import ToolCallPart as NeutralToolCall
from historykit._messages import ToolResultPart as NeutralToolResult
from historykit.checkpointers._conversation_schema import CONVERSATIONS
from historykit.checkpointers._conversation_store import SQLModelConversationStore, ViewSaving
from historykit.checkpointers._database import CorruptRowError, create_async_engine, create_engine
from historykit.checkpointers._schema import CORE
from tests.conftest import postgres_admin_url
from tests.strategies import examples

_T = TypeVar("_T")

TABLES = [model.__table__ for component in (CORE, CONVERSATIONS) for model in component.tables]  # type: ignore[attr-defined]
TS = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


# ---------------------------------------------------------------------------------------------
# Databases
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_postgres_url() -> Iterator[str]:
    """A database of its own on the test server, dropped after the module."""
    import psycopg

    admin = postgres_admin_url()
    name = f"historykit_conversations_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = sa.make_url(admin).set(drivername="postgresql+psycopg", database=name)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database with no historykit rows in it: a new SQLite file, or the emptied PostgreSQL or
    MySQL one (MySQL: opt-in, see `conftest.py`)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'conversations.db'}"
    if request.param == "mysql":
        return str(request.getfixturevalue("new_mysql_database")())
    url: str = request.getfixturevalue("module_postgres_url")
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            if sa.inspect(conn).has_table("historykit_conversation"):
                _empty(conn)
    finally:
        engine.dispose()
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[SQLModelConversationStore]:
    opened = SQLModelConversationStore(store_url)
    yield opened
    sync_engine(opened).dispose()


def sync_engine(store: SQLModelConversationStore) -> sa.Engine:
    engine = store.engine
    assert isinstance(engine, sa.Engine)
    return engine


def _empty(conn: sa.Connection) -> None:
    for table in TABLES:
        if table.name != "historykit_schema":
            conn.execute(sa.delete(table))


def count_rows(store: SQLModelConversationStore, table: str, **where: str) -> int:
    query = f"SELECT COUNT(*) FROM {table}"
    if where:
        query += " WHERE " + " AND ".join(f"{column} = :{column}" for column in where)
    with sync_engine(store).connect() as conn:
        return int(conn.execute(sa.text(query), where).scalar_one())


# ---------------------------------------------------------------------------------------------
# The differential test: the SQL store against Pydantic AI's in-memory reference
# ---------------------------------------------------------------------------------------------

IDS = ("c1", "c2", "c3", "c4")
SCOPES = st.sampled_from([None, "alice", "bob"])
LENIENT_SCOPES = st.sampled_from([None, None, None, "alice", "bob"])
"""For reading and deleting: mostly no scope, so the operation usually reaches the conversation."""
WORDS = st.sampled_from(["hi", "why?", "ok", "go on", "stop", "ünïcode ✓"])


def _summary(text: str, covered: int) -> ModelRequest:
    marker = CompactionMarker(
        covered_from=0,
        covered_to=covered,
        tokens_before=900,
        tokens_after=90,
        strategy="summarize",
        created_at=TS,
    )
    return ModelRequest(
        parts=[CompactionPart(content=text)], metadata={COMPACTION_KEY: marker.to_dict()}, timestamp=TS
    )


# A small vocabulary and fixed timestamps, so equal messages recur: at several points of one
# history (one message row, several entries) and across rewrites (where histories share a prefix).


class _ViewSavingMemory(ViewSaving, InMemoryConversationStore):
    """Pydantic AI's in-memory store, saving a compacted history as the view the way ours does: the
    reference the SQL store is held to (`ViewSaving` is the one deliberate difference from it)."""


MESSAGES = st.one_of(
    WORDS.map(lambda w: ModelRequest(parts=[UserPromptPart(w, timestamp=TS)], timestamp=TS)),
    WORDS.map(lambda w: ModelResponse(parts=[TextPart(w)], timestamp=TS)),
    st.builds(_summary, WORDS, st.integers(min_value=1, max_value=9)),
)


@dataclasses.dataclass
class Outcome:
    """What one store did: a value, or the class of the Pydantic AI error it raised."""

    error: type[Exception] | None
    value: Any = None


class StoreComparison(RuleBasedStateMachine):
    """Runs every operation on the in-memory store and on the SQL store, and compares."""

    sql: SQLModelConversationStore  # set by `_comparison`

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.memory = _ViewSavingMemory()
        with sync_engine(self.sql).begin() as conn:
            _empty(conn)
        # The conversation each store's copy of a conversation continues from, per id.
        self.current: dict[str, tuple[Conversation, Conversation]] = {}
        # (id, revision per store, messages) of copies that were current once.
        self.stale: list[tuple[str, tuple[str | None, str | None], list[ModelMessage]]] = []

    def teardown(self) -> None:
        self.loop.close()

    def run(self, awaitable: Awaitable[_T]) -> _T:
        return self.loop.run_until_complete(awaitable)  # type: ignore[arg-type]

    @property
    def stores(self) -> tuple[ConversationStore, SQLModelConversationStore]:
        return self.memory, self.sql

    def both(self, operation: Callable[[ConversationStore, int], Awaitable[Any]]) -> tuple[Outcome, Outcome]:
        outcomes = []
        for index, store in enumerate(self.stores):
            try:
                outcomes.append(Outcome(None, self.run(operation(store, index))))
            except UserError as exc:  # ConversationConflict included: compared by exact class
                outcomes.append(Outcome(type(exc)))
        memory, sql = outcomes
        assert memory.error is sql.error, (memory, sql)
        return memory, sql

    def remember(self, conversation_id: str, pair: tuple[Conversation, Conversation]) -> None:
        old = self.current.get(conversation_id)
        if old is not None:
            self.stale.append((conversation_id, (old[0].revision, old[1].revision), list(old[0].messages)))
        assert pair[0].messages == pair[1].messages
        self.current[conversation_id] = pair

    # ---- operations ----------------------------------------------------------------------

    @rule(
        conversation_id=st.sampled_from(IDS),
        messages=st.lists(MESSAGES, min_size=1, max_size=4),
        scope=SCOPES,
    )
    def create(self, conversation_id: str, messages: list[ModelMessage], scope: str | None) -> None:
        pair = tuple(Conversation(conversation_id=conversation_id, messages=list(messages)) for _ in range(2))
        memory, sql = self.both(lambda store, i: store.save(pair[i], scope=scope))
        if memory.error is None:
            assert [e.message for e in memory.value] == [e.message for e in sql.value]
            self.remember(conversation_id, (pair[0], pair[1]))

    @precondition(lambda self: self.current)
    @rule(data=st.data(), messages=st.lists(MESSAGES, min_size=1, max_size=3), scope=SCOPES)
    def append(self, data: st.DataObject, messages: list[ModelMessage], scope: str | None) -> None:
        self.append_to(data.draw(st.sampled_from(sorted(self.current))), messages, scope)

    def append_to(self, conversation_id: str, messages: list[ModelMessage], scope: str | None) -> None:
        pair = self.current[conversation_id]
        for conversation in pair:
            conversation.messages.extend(messages)
        memory, sql = self.both(lambda store, i: store.save(pair[i], scope=scope))
        if memory.error is None:
            assert [e.message for e in memory.value] == [e.message for e in sql.value]

    @precondition(lambda self: self.current)
    @rule(data=st.data(), messages=st.lists(MESSAGES, max_size=3))
    def rewrite(self, data: st.DataObject, messages: list[ModelMessage]) -> None:
        """Save a history edited before its end, as compaction does: the stored one becomes a branch."""
        conversation_id = data.draw(st.sampled_from(sorted(self.current)))
        old = self.current[conversation_id]
        keep = data.draw(st.integers(min_value=0, max_value=len(old[0].messages)))
        pair = tuple(
            Conversation(
                conversation_id=conversation_id,
                messages=[*base.messages[:keep], *messages],
                usage=base.usage,
                revision=base.revision,
            )
            for base in old
        )
        memory, _ = self.both(lambda store, i: store.save(pair[i]))
        if memory.error is None:
            self.remember(conversation_id, (pair[0], pair[1]))

    @precondition(lambda self: self.stale)
    @rule(data=st.data(), message=MESSAGES)
    def save_stale(self, data: st.DataObject, message: ModelMessage) -> None:
        conversation_id, revisions, messages = data.draw(st.sampled_from(self.stale))
        pair = tuple(
            Conversation(conversation_id=conversation_id, messages=[*messages, message], revision=revision)
            for revision in revisions
        )
        memory, _ = self.both(lambda store, i: store.save(pair[i]))
        if memory.error is None:
            self.remember(conversation_id, (pair[0], pair[1]))

    @rule(
        conversation_id=st.sampled_from(IDS),
        scope=SCOPES,
        limit=st.one_of(st.none(), st.integers(min_value=0, max_value=6)),
    )
    def load(self, conversation_id: str, scope: str | None, limit: int | None) -> None:
        memory, sql = self.both(lambda store, i: store.load(conversation_id, scope=scope, limit=limit))
        assert (memory.value is None) == (sql.value is None)
        if memory.value is not None:
            assert memory.value.messages == sql.value.messages
            assert memory.value.usage == sql.value.usage
            assert memory.value.new_message_index == sql.value.new_message_index
            self.remember(conversation_id, (memory.value, sql.value))

    @precondition(lambda self: self.current)
    @rule(data=st.data(), stale=st.booleans(), scope=SCOPES)
    def branch_at(self, data: st.DataObject, stale: bool, scope: str | None) -> None:
        conversation_id = data.draw(st.sampled_from(sorted(self.current)))
        pair = self.current[conversation_id]
        at = data.draw(st.integers(min_value=0, max_value=len(pair[0].messages) + 1))
        revisions = (
            data.draw(
                st.sampled_from([r for c, r, _ in self.stale if c == conversation_id] or [(None, None)])
            )
            if stale
            else (pair[0].revision, pair[1].revision)
        )
        memory, sql = self.both(
            lambda store, i: store.branch(conversation_id, at=at, expected_revision=revisions[i], scope=scope)
        )
        if memory.error is None:
            self.remember(conversation_id, (memory.value, sql.value))

    @precondition(lambda self: self.current)
    @rule(data=st.data())
    def branch_from_entry(self, data: st.DataObject) -> None:
        """Branch to an entry of the current history or of a branch left, or to one that isn't there."""
        conversation_id = data.draw(st.sampled_from(sorted(self.current)))
        pair = self.current[conversation_id]
        reachable = [self.run(self.entries_of(store, conversation_id)) for store in self.stores]
        assert [[e.message for e in line] for line in reachable[0]] == [
            [e.message for e in line] for line in reachable[1]
        ]
        choices = [
            (line, index) for line in range(len(reachable[0])) for index in range(len(reachable[0][line]))
        ]
        target = data.draw(st.sampled_from([*choices, None]))
        entry_ids = (
            ["not-an-entry", "not-an-entry"]
            if target is None
            else [reachable[i][target[0]][target[1]].id for i in range(2)]
        )
        memory, sql = self.both(
            lambda store, i: store.branch(
                conversation_id, from_entry=entry_ids[i], expected_revision=pair[i].revision
            )
        )
        if memory.error is None:
            self.remember(conversation_id, (memory.value, sql.value))

    def known_id(self, data: st.DataObject) -> str:
        """Mostly a stored conversation the test holds a copy of, sometimes any id."""
        usually: bool = data.draw(st.integers(min_value=0, max_value=3)) > 0
        if self.current and usually:
            return data.draw(st.sampled_from(sorted(self.current)))
        return data.draw(st.sampled_from(IDS))

    @precondition(lambda self: self.current)
    @rule(data=st.data(), fork_id=st.sampled_from(IDS), scope=SCOPES, source_scope=LENIENT_SCOPES)
    def fork(self, data: st.DataObject, fork_id: str, scope: str | None, source_scope: str | None) -> None:
        source = self.known_id(data)
        known = self.current.get(source)
        longest = len(known[0].messages) if known is not None else 3
        at = data.draw(st.one_of(st.none(), st.integers(min_value=0, max_value=longest + 1)))
        memory, sql = self.both(
            lambda store, i: store.fork(
                source, at=at, new_conversation_id=fork_id, scope=scope, source_scope=source_scope
            )
        )
        if memory.error is None:
            self.remember(fork_id, (memory.value, sql.value))
            # Most forks are continued at once: their new entries hang off the source's.
            self.append_to(fork_id, data.draw(st.lists(MESSAGES, min_size=1, max_size=2)), None)

    @precondition(lambda self: self.current)
    @rule(data=st.data(), scope=LENIENT_SCOPES)
    def delete(self, data: st.DataObject, scope: str | None) -> None:
        records = self.run(self.memory.read_records())
        sources = sorted({record.forked_from for record in records if record.forked_from is not None})
        # Often the source of a fork: what the fork shares must outlive it.
        pick_source: bool = data.draw(st.booleans())
        if sources and pick_source:
            conversation_id = data.draw(st.sampled_from(sources))
        else:
            conversation_id = self.known_id(data)
        self.both(lambda store, i: store.delete(conversation_id, scope=scope))
        if conversation_id in self.current and self.run(self.memory.read_record(conversation_id)) is None:
            # Gone: its copies can only conflict from now on.
            old = self.current.pop(conversation_id)
            self.stale.append((conversation_id, (old[0].revision, old[1].revision), list(old[0].messages)))

    # ---- what both stores hold -----------------------------------------------------------

    async def entries_of(self, store: ConversationStore, conversation_id: str) -> list[list[Any]]:
        """The current history, then each branch left, as entries."""
        record = await store.read_record(conversation_id)
        if record is None:
            return []
        return [await store.read_history(tip) for tip in [record.head_id, *record.branches]]

    async def summary(self, store: ConversationStore) -> tuple[dict[str, Any], set[str]]:
        """Every record with its entry references replaced by the messages up to them; all entry ids."""
        described: dict[str, Any] = {}
        reached: set[str] = set()
        for conversation_id in IDS:
            record = await store.read_record(conversation_id)
            if record is None:
                continue
            paths: dict[str, Any] = {}
            for name, tip in [
                ("head", record.head_id),
                *((f"branch{i}", tip) for i, tip in enumerate(record.branches)),
            ]:
                history = await store.read_history(tip)
                reached.update(entry.id for entry in history)
                paths[name] = [entry.message for entry in history]
            try:
                paths["forked_at"] = [entry.message for entry in await store.read_history(record.forked_at)]
            except LookupError:
                # The fork has moved off the entry it was forked at, and deleting its source released it.
                paths["forked_at"] = "released"
            described[conversation_id] = (
                paths,
                record.usage,
                record.deferred_tool_requests,
                record.scope,
                record.forked_from,
                record.format_version,
            )
        return described, reached

    @invariant()
    def same_contents(self) -> None:
        (memory, memory_reached), (sql, sql_reached) = (
            self.run(self.summary(store)) for store in self.stores
        )
        assert memory == sql
        assert len(memory_reached) == len(sql_reached)
        for scope in (None, "alice", "bob"):
            for limit in (None, 2):
                listed = [
                    self.run(store.list_conversations(scope=scope, limit=limit)) for store in self.stores
                ]
                assert [r.conversation_id for r in listed[0]] == [r.conversation_id for r in listed[1]]
        # The in-memory store deletes every entry no record reaches; so must this one.
        assert count_rows(self.sql, "historykit_conversation_entry") == len(sql_reached)
        assert_no_orphans(self.sql)


def assert_no_orphans(store: SQLModelConversationStore) -> None:
    """Every row is used: no entry without its message, no message, marker or thread left over."""
    checks = {
        "entry without its message": """
            SELECT COUNT(*) FROM historykit_conversation_entry e WHERE NOT EXISTS (
                SELECT 1 FROM historykit_message m
                WHERE m.thread_id = e.thread_id AND m.seq = e.message_seq)""",
        "message no entry uses": """
            SELECT COUNT(*) FROM historykit_message m WHERE NOT EXISTS (
                SELECT 1 FROM historykit_conversation_entry e
                WHERE e.thread_id = m.thread_id AND e.message_seq = m.seq)""",
        "marker without its summary": """
            SELECT COUNT(*) FROM historykit_compaction k WHERE NOT EXISTS (
                SELECT 1 FROM historykit_message m
                WHERE m.thread_id = k.thread_id AND m.seq = k.summary_seq)""",
        "thread with neither conversation nor messages": """
            SELECT COUNT(*) FROM historykit_thread t
            WHERE NOT EXISTS (SELECT 1 FROM historykit_conversation c WHERE c.conversation_id = t.thread_id)
              AND NOT EXISTS (SELECT 1 FROM historykit_message m WHERE m.thread_id = t.thread_id)""",
        "branch of no conversation": """
            SELECT COUNT(*) FROM historykit_conversation_branch b WHERE NOT EXISTS (
                SELECT 1 FROM historykit_conversation c WHERE c.conversation_id = b.conversation_id)""",
        "message stored twice in a thread": """
            SELECT COUNT(*) FROM (SELECT thread_id, hash FROM historykit_message
                                  GROUP BY thread_id, hash HAVING COUNT(*) > 1) AS twice""",
    }
    with sync_engine(store).connect() as conn:
        found = {name: conn.execute(sa.text(sql)).scalar_one() for name, sql in checks.items()}
    assert found == dict.fromkeys(checks, 0)


def _comparison(store: SQLModelConversationStore) -> type[StoreComparison]:
    return type("StoreComparisonOn" + store.engine.dialect.name.title(), (StoreComparison,), {"sql": store})


def test_behaves_like_the_in_memory_store(store: SQLModelConversationStore) -> None:
    # Through `examples`, the profile decides as for every property test (half the budget in CI).
    budget = examples(40 if store.engine.dialect.name == "sqlite" else 20)
    run_state_machine_as_test(
        _comparison(store),
        settings=settings(
            max_examples=budget,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


# ---------------------------------------------------------------------------------------------
# Real agents
# ---------------------------------------------------------------------------------------------


def _prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def remembering_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls `remember` with the newest prompt, then answers with every prompt the history holds."""
    if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
        return ModelResponse(parts=[TextPart(" | ".join(_prompts(messages)))])
    return ModelResponse(parts=[ToolCallPart("remember", {"fact": _prompts(messages)[-1]})])


def remembering_agent() -> Agent[None, str]:
    agent = Agent(FunctionModel(remembering_model))

    @agent.tool_plain
    def remember(fact: str) -> str:
        return f"remembered {fact!r}"

    return agent


@pytest.mark.parametrize("engine_kind", ["url", "engine", "async_engine"])
async def test_agent_continues_a_stored_conversation_after_a_restart(
    store_url: str, engine_kind: str
) -> None:
    def open_store() -> SQLModelConversationStore:
        if engine_kind == "engine":
            return SQLModelConversationStore(create_engine(store_url))
        if engine_kind == "async_engine":
            return SQLModelConversationStore(create_async_engine(store_url))
        return SQLModelConversationStore(store_url)

    agent = remembering_agent()
    first_store = open_store()
    first = await agent.run("My name is Ada.")
    assert first.output == "My name is Ada."
    await first_store.save(first, scope="ada")
    conversation_id = first.conversation.conversation_id

    # The same store, a second run.
    conversation = await first_store.load(conversation_id, scope="ada")
    assert conversation is not None
    second = await agent.run("I live in Lyon.", conversation=conversation)
    assert second.output == "My name is Ada. | I live in Lyon."
    assert len(await first_store.save(second)) == 4
    await first_store.aclose()

    # A restart: a new store on the same database picks the conversation up.
    restarted = open_store()
    conversation = await restarted.load(conversation_id, scope="ada")
    assert conversation is not None
    assert conversation.messages == second.all_messages()
    assert conversation.usage == second.usage
    assert conversation.usage.requests == 4 and conversation.usage.tool_calls == 2
    third = await agent.run("What do you know?", conversation=conversation)
    assert third.output == "My name is Ada. | I live in Lyon. | What do you know?"
    await restarted.save(third)
    reloaded = await restarted.load(conversation_id)
    assert reloaded is not None and reloaded.messages == third.all_messages()
    assert [r.conversation_id for r in await restarted.list_conversations(scope="ada")] == [conversation_id]
    assert await restarted.load(conversation_id, scope="bob") is None
    await restarted.aclose()


async def test_a_paused_run_resumes_from_the_store(store: SQLModelConversationStore, store_url: str) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
            return ModelResponse(parts=[TextPart("deleted it")])
        return ModelResponse(parts=[ToolCallPart("delete_file", {"path": "a.py"}, tool_call_id="call-1")])

    agent = Agent(FunctionModel(model), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    paused = await agent.run("Delete a.py")
    assert isinstance(paused.output, DeferredToolRequests)
    await store.save(paused)

    restarted = SQLModelConversationStore(store_url)
    conversation = await restarted.load(paused.conversation.conversation_id)
    assert conversation is not None and conversation.deferred_tool_requests == paused.output
    results = conversation.deferred_tool_requests.build_results(approvals={"call-1": True})
    resumed = await agent.run(conversation=conversation, deferred_tool_results=results)
    assert resumed.output == "deleted it"
    await restarted.save(resumed)
    done = await restarted.load(paused.conversation.conversation_id)
    assert done is not None and done.deferred_tool_requests is None
    assert done.messages == resumed.all_messages()
    await restarted.aclose()


async def test_test_model_runs_fork_and_branch(store: SQLModelConversationStore) -> None:
    agent = Agent(TestModel(custom_output_text="fine"))
    first = await agent.run("start")
    await store.save(first)
    conversation_id = first.conversation.conversation_id
    loaded = await store.load(conversation_id)
    assert loaded is not None
    await store.save(await agent.run("second", conversation=loaded))

    fork = await store.fork(conversation_id, at=2, new_conversation_id="explore")
    explored = await agent.run("elsewhere", conversation=fork)
    await store.save(explored)
    assert _prompts((await store.load("explore")).messages) == ["start", "elsewhere"]  # type: ignore[union-attr]
    assert _prompts((await store.load(conversation_id)).messages) == ["start", "second"]  # type: ignore[union-attr]

    current = await store.load(conversation_id)
    assert current is not None
    branched = await store.branch(conversation_id, at=2, expected_revision=current.revision)
    await store.save(await agent.run("instead", conversation=branched))
    record = await store.read_record(conversation_id)
    assert record is not None and len(record.branches) == 1
    left = await store.read_history(record.branches[0])
    assert _prompts([entry.message for entry in left]) == ["start", "second"]
    assert _prompts((await store.load(conversation_id)).messages) == ["start", "instead"]  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# One query per history
# ---------------------------------------------------------------------------------------------


def pydantic_history(messages: list[Message]) -> list[ModelMessage]:
    """A corpus session as Pydantic AI messages (the test's own conversion, not the plugin's)."""
    history: list[ModelMessage] = []
    for message in messages:
        if message.role == "assistant":
            parts: list[Any] = []
            for part in message.parts:
                if isinstance(part, NeutralThinking):
                    parts.append(ThinkingPart(part.text, signature=part.signature))
                elif isinstance(part, NeutralText):
                    parts.append(TextPart(part.text))
                elif isinstance(part, NeutralToolCall):
                    parts.append(ToolCallPart(part.name, part.arguments, tool_call_id=part.id))
            history.append(ModelResponse(parts=parts or [TextPart("")], timestamp=TS))
        elif message.role == "tool":
            results = [
                ToolReturnPart(
                    part.name or "tool", part.content, tool_call_id=part.tool_call_id, timestamp=TS
                )
                for part in message.parts
                if isinstance(part, NeutralToolResult)
            ]
            history.append(ModelRequest(parts=results, timestamp=TS))
        elif message.role == "system":
            history.append(ModelRequest(parts=[SystemPromptPart(message.text, timestamp=TS)], timestamp=TS))
        else:
            history.append(ModelRequest(parts=[UserPromptPart(message.text, timestamp=TS)], timestamp=TS))
    return history


class StatementLog:
    """The SQL statements an engine runs, transaction control left out."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.statements: list[str] = []

    def _record(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.strip().split()[0].upper() not in ("BEGIN", "COMMIT", "ROLLBACK"):
            self.statements.append(statement)

    def __enter__(self) -> StatementLog:
        sa.event.listen(self.engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._record)


async def test_read_history_is_one_select(
    store: SQLModelConversationStore, largest_corpus_session: list[Message]
) -> None:
    history = pydantic_history(largest_corpus_session)
    assert len(history) > 300
    # Saved in turns, as an agent would: each save appends to what is stored.
    conversation = Conversation(conversation_id="long", messages=history[:50])
    await store.save(conversation)
    for start in range(50, len(history), 97):
        conversation.messages.extend(history[start : start + 97])
        await store.save(conversation)
    record = await store.read_record("long")
    assert record is not None

    with StatementLog(sync_engine(store)) as log:
        entries = await store.read_history(record.head_id)
    assert [entry.message for entry in entries] == history
    assert len(log.statements) == 1 and log.statements[0].lstrip().upper().startswith(("SELECT", "WITH"))

    with StatementLog(sync_engine(store)) as log:
        tail = await store.read_history(record.head_id, limit=25)
    assert [entry.message for entry in tail] == history[-25:]
    assert len(log.statements) == 1

    with StatementLog(sync_engine(store)) as log:
        loaded = await store.load("long", limit=10)
    assert loaded is not None and loaded.messages == history[-10:]
    # The record, its branches (apart: joined, the record row would be read once per branch), the
    # history and the token counts kept for it, in one transaction.
    assert len(log.statements) == 4
    assert [entry.parent_id for entry in entries[1:]] == [entry.id for entry in entries[:-1]]


_FIRST_LOAD = """
import asyncio, sys
from sqlalchemy.sql import compiler
from historykit.checkpointers import SQLModelConversationStore

store = SQLModelConversationStore(sys.argv[1])
compiled = []
compile_statement = compiler.SQLCompiler.__init__
def counted(self, *args, **kwargs):
    compiled.append(args[1] if len(args) > 1 else kwargs.get("statement"))
    compile_statement(self, *args, **kwargs)
compiler.SQLCompiler.__init__ = counted
loop = asyncio.new_event_loop()
loaded = loop.run_until_complete(store.load(sys.argv[2], limit=int(sys.argv[3]) if sys.argv[3:] else None))
loop.run_until_complete(store.aclose())
print(len(loaded.messages), len(compiled))
"""


@pytest.mark.parametrize("limit", [None, 1])
async def test_a_new_processs_first_load_compiles_nothing(
    store: SQLModelConversationStore, store_url: str, limit: int | None
) -> None:
    """A server makes its store once and loads a conversation per request: the statements a load
    runs are compiled, and their forms on the driver's cursor built, when the store is made, so
    that work is not in the first request's load (a few ms of CPU each)."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Fix the parser.", timestamp=TS)], timestamp=TS),
        ModelResponse(parts=[TextPart("Done.")], timestamp=TS),
    ]
    conversation = Conversation(conversation_id="resumed", messages=history)
    await store.save(conversation)
    await store.save(conversation)  # a branch: the record's second statement finds a row
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_LOAD, store_url, "resumed", *([] if limit is None else [str(limit)])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(limit or 2), "0"]


# ---------------------------------------------------------------------------------------------
# Compaction markers, transcripts and deletion
# ---------------------------------------------------------------------------------------------


async def compacted_conversation(
    store: SQLModelConversationStore,
) -> tuple[str, list[ModelMessage], CompactionMarker]:
    """Three agent turns, then the application compacts the history into a summary and runs on.

    Returns the conversation id, every message it ever had (in order) and the marker.
    """
    agent = remembering_agent()
    result = await agent.run("Task: fix the parser.")
    await store.save(result)
    conversation_id = result.conversation.conversation_id
    for prompt in ("Use the tokenizer.", "Keep the API."):
        loaded = await store.load(conversation_id)
        result = await agent.run(prompt, conversation=loaded)
        await store.save(result)
    original = result.all_messages()
    loaded = await store.load(conversation_id)
    assert loaded is not None

    marker = CompactionMarker(
        covered_from=0, covered_to=8, tokens_before=1200, tokens_after=150, strategy="summarize", model="test"
    )
    summary = ModelRequest(
        parts=[CompactionPart(content="Task: fix the parser, with the tokenizer, keeping the API.")],
        metadata={COMPACTION_KEY: marker.to_dict()},
    )
    compacted = Conversation(
        conversation_id=conversation_id,
        # The summary covers the last user prompt too: a request right after it would be merged
        # into it by Pydantic AI's history normalization, which drops the application's metadata.
        messages=[summary, *loaded.messages[-3:]],
        usage=loaded.usage,
        revision=loaded.revision,
    )
    after = await agent.run("Now add a test.", conversation=compacted)
    await store.save(after)
    return conversation_id, [*original, summary, *after.new_messages()], marker


async def test_compaction_marker_and_complete_transcript(store: SQLModelConversationStore) -> None:
    conversation_id, everything, marker = await compacted_conversation(store)

    current = await store.load(conversation_id)
    assert current is not None
    assert isinstance(current.messages[0].parts[0], CompactionPart)
    assert _prompts(current.messages) == ["Now add a test."]

    transcript = await store.transcript(conversation_id)
    assert transcript is not None
    # The originals, without the summary; the summary is the compaction's message, in its place.
    assert transcript.messages == everything[:12] + everything[13:]
    assert transcript.logged() == everything
    assert len(transcript.compactions) == 1
    stored = transcript.compactions[0]
    assert stored.marker == marker
    assert stored.message == everything[12] and stored.at == 12
    assert transcript.view == current.messages
    assert count_rows(store, "historykit_compaction", thread_id=conversation_id) == 1
    # The three messages compaction kept verbatim are stored once, under two entries each.
    assert count_rows(store, "historykit_message", thread_id=conversation_id) == len(everything)
    assert (
        count_rows(store, "historykit_conversation_entry", thread_id=conversation_id) == len(everything) + 3
    )
    assert await store.transcript(conversation_id, scope="someone-else") is None
    assert await store.transcript("no-such-conversation") is None


async def test_a_summary_written_by_the_adapter_records_its_marker(store: SQLModelConversationStore) -> None:
    # The Pydantic AI adapter puts the marker on the CompactionPart (part metadata survives Pydantic
    # AI merging the summary's request with the next one), not on the request.
    from historykit._messages import SummaryPart
    from historykit.plugins.pydantic_ai import PydanticAIAdapter

    marker = CompactionMarker(
        covered_from=1, covered_to=5, tokens_before=900, tokens_after=120, strategy="summarize", model=None
    )
    summary = PydanticAIAdapter().to_native(
        [Message("user", (SummaryPart("Task: fix the parser.", marker),))]
    )
    assert len(summary) == 1 and isinstance(summary[0], ModelRequest) and not summary[0].metadata
    assert isinstance(summary[0].parts[0], CompactionPart)
    conversation = Conversation(
        conversation_id="adapter-summary", messages=[*summary, ModelResponse([TextPart("ok")])]
    )
    await store.save(conversation)

    transcript = await store.transcript("adapter-summary")
    assert transcript is not None
    assert [c.marker for c in transcript.compactions] == [marker]
    assert transcript.compactions[0].at == 0
    assert transcript.compactions[0].message == summary[0]
    assert transcript.messages == conversation.messages[1:]
    assert count_rows(store, "historykit_compaction", thread_id="adapter-summary") == 1


async def test_delete_removes_every_row_but_what_a_fork_uses(store: SQLModelConversationStore) -> None:
    conversation_id, _, marker = await compacted_conversation(store)
    bystander = await remembering_agent().run("Unrelated.")
    await store.save(bystander)
    # A fork of the compacted history: it shares the summary and what follows it.
    fork = await store.fork(conversation_id, at=4, new_conversation_id="fork")
    forked = await remembering_agent().run("Fork turn.", conversation=fork)
    await store.save(forked)

    await store.delete(conversation_id)
    assert await store.load(conversation_id) is None
    assert await store.transcript(conversation_id) is None
    # The fork is whole: its shared entries, their messages and the summary's marker were kept.
    fork_transcript = await store.transcript("fork")
    assert fork_transcript is not None
    assert fork_transcript.logged() == forked.all_messages()
    assert fork_transcript.view == forked.all_messages()
    assert [c.marker for c in fork_transcript.compactions] == [marker]
    assert count_rows(store, "historykit_message", thread_id=conversation_id) == 4
    assert count_rows(store, "historykit_compaction", thread_id=conversation_id) == 1
    assert_no_orphans(store)

    await store.delete("fork")
    for table in (
        "historykit_message",
        "historykit_compaction",
        "historykit_conversation_entry",
        "historykit_thread",
    ):
        for thread in (conversation_id, "fork"):
            assert count_rows(store, table, thread_id=thread) == 0, (table, thread)
    assert count_rows(store, "historykit_conversation_branch") == 0
    assert [r.conversation_id for r in await store.list_conversations()] == [bystander.conversation_id]
    remaining = await store.load(bystander.conversation_id)
    assert remaining is not None and remaining.messages == bystander.all_messages()

    await store.delete(bystander.conversation_id)
    for table in TABLES:
        if table.name != "historykit_schema":
            assert count_rows(store, table.name) == 0, table.name


# ---------------------------------------------------------------------------------------------
# Conflicts, bad rows, bad input, encryption
# ---------------------------------------------------------------------------------------------


async def test_write_primitives_check_revisions(store: SQLModelConversationStore) -> None:
    """The conditional writes themselves, without the base class's own check before them."""
    await store.save(Conversation(conversation_id="c", messages=[ModelRequest.user_text_prompt("hi")]))
    record = await store.read_record("c")
    assert record is not None
    moved = dataclasses.replace(record, revision="next")
    with pytest.raises(ConversationConflict):
        await store.write_record(moved, expected_revision="not-the-stored-one")
    with pytest.raises(ConversationConflict):
        await store.write_record(moved, expected_revision=None)  # it exists
    with pytest.raises(ConversationConflict):
        await store.delete_record("c", expected_revision="not-the-stored-one")
    # A fork pointing at an entry a concurrent delete released leaves nothing behind.
    orphan = ConversationRecord(conversation_id="orphan", head_id="released-entry")
    with pytest.raises(ConversationConflict):
        await store.write_record(orphan, expected_revision=None)
    assert await store.read_record("orphan") is None
    assert count_rows(store, "historykit_thread", thread_id="orphan") == 0
    await store.write_record(moved, expected_revision=record.revision)
    assert (await store.read_record("c")) == moved
    with pytest.raises(LookupError):
        await store.read_entry("released-entry")
    with pytest.raises(LookupError):
        await store.read_history("released-entry")


async def test_concurrent_writers_conflict(store: SQLModelConversationStore, store_url: str) -> None:
    agent = Agent(TestModel(custom_output_text="ok"))
    first = await agent.run("hello")
    await store.save(first)
    conversation_id = first.conversation.conversation_id
    other = SQLModelConversationStore(store_url)

    mine, theirs = await store.load(conversation_id), await other.load(conversation_id)
    assert mine is not None and theirs is not None
    mine_run, their_run = (
        await agent.run("mine", conversation=mine),
        await agent.run("theirs", conversation=theirs),
    )
    outcomes = await asyncio.gather(store.save(mine_run), other.save(their_run), return_exceptions=True)
    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["ConversationConflict", "list"]
    winner = "mine" if isinstance(outcomes[1], ConversationConflict) else "theirs"
    stored = await other.load(conversation_id)
    assert stored is not None and _prompts(stored.messages) == ["hello", winner]

    # Two processes creating the same conversation: one of them gets the conflict.
    racers = [Conversation(conversation_id="raced", messages=first.all_messages()) for _ in range(2)]
    outcomes = await asyncio.gather(store.save(racers[0]), other.save(racers[1]), return_exceptions=True)
    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["ConversationConflict", "list"]
    # A delete and a save racing on one conversation: never both.
    loaded = await store.load("raced")
    assert loaded is not None
    loaded.messages.append(ModelRequest(parts=[UserPromptPart("more", timestamp=TS)]))
    record = await other.read_record("raced")
    assert record is not None
    raced = await asyncio.gather(
        store.save(loaded),
        other.delete_record("raced", expected_revision=record.revision),
        return_exceptions=True,
    )
    assert sum(isinstance(outcome, ConversationConflict) for outcome in raced) == 1
    assert_no_orphans(store)
    await other.aclose()


async def test_fork_racing_the_delete_of_its_source(store: SQLModelConversationStore, store_url: str) -> None:
    """A fork either fails or keeps every entry it shares, whichever way it interleaves with the delete."""
    other = SQLModelConversationStore(store_url)
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(f"turn {i}", timestamp=TS)], timestamp=TS) for i in range(6)
    ]
    forks: list[str] = []
    for attempt in range(12):
        source = f"source-{attempt}"
        saved = Conversation(conversation_id=source, messages=list(messages))
        await store.save(saved)
        outcomes = await asyncio.gather(
            other.fork(source, at=4, new_conversation_id=f"fork-{attempt}"),
            store.delete(source),
            return_exceptions=True,
        )
        fork, deleted = outcomes
        assert deleted is None
        assert isinstance(fork, (Conversation, UserError)), fork
        if isinstance(fork, Conversation):
            forks.append(fork.conversation_id)
            loaded = await store.load(f"fork-{attempt}")
            assert loaded is not None and loaded.messages == messages[:4]
    assert sorted(r.conversation_id for r in await store.list_conversations()) == sorted(forks)
    assert_no_orphans(store)
    # Each surviving fork keeps the four entries it shares; everything else of its source is gone.
    assert count_rows(store, "historykit_conversation_entry") == 4 * len(forks)
    await other.aclose()


async def test_corrupt_rows_are_named(store: SQLModelConversationStore) -> None:
    agent = Agent(TestModel(custom_output_text="ok"))
    result = await agent.run("hello")
    await store.save(result)
    conversation_id = result.conversation.conversation_id
    with sync_engine(store).begin() as conn:
        first, second = conn.execute(
            sa.text("SELECT seq FROM historykit_message WHERE thread_id = :t ORDER BY seq"),
            {"t": conversation_id},
        ).scalars()
        conn.execute(
            sa.text("UPDATE historykit_message SET data = :data WHERE thread_id = :t AND seq = :seq"),
            {"data": b'{"kind": "response", "parts": 7}', "t": conversation_id, "seq": second},
        )
    with pytest.raises(
        CorruptRowError, match=rf"historykit_message row \(thread_id='{conversation_id}', seq={second}\)"
    ):
        await store.load(conversation_id)

    with sync_engine(store).begin() as conn:
        conn.execute(
            sa.text("UPDATE historykit_message SET encoding = 'pickle' WHERE thread_id = :t AND seq = :seq"),
            {"t": conversation_id, "seq": first},
        )
    with pytest.raises(CorruptRowError, match="encoding 'pickle', which this store never writes"):
        await store.load(conversation_id)

    with sync_engine(store).begin() as conn:
        conn.execute(sa.text("DELETE FROM historykit_message WHERE thread_id = :t"), {"t": conversation_id})
    with pytest.raises(CorruptRowError, match="which does not exist"):
        await store.load(conversation_id)


async def test_malformed_marker_is_refused_before_anything_is_written(
    store: SQLModelConversationStore,
) -> None:
    bad = ModelRequest(parts=[CompactionPart(content="summary")], metadata={COMPACTION_KEY: "not a dict"})
    with pytest.raises(TypeError, match=r"metadata\['historykit_compaction'\] of type str"):
        await store.save(Conversation(conversation_id="bad", messages=[bad]))
    missing = ModelRequest(
        parts=[CompactionPart(content="summary")], metadata={COMPACTION_KEY: {"covered_from": 0}}
    )
    with pytest.raises(ValueError, match="malformed compaction marker.*'covered_to'"):
        await store.save(Conversation(conversation_id="bad", messages=[missing]))
    assert await store.read_record("bad") is None
    assert count_rows(store, "historykit_message") == 0
    # A summary without historykit's marker (a provider's, say) is stored as a message, with no marker.
    plain = ModelRequest(parts=[CompactionPart(content="provider summary")])
    await store.save(Conversation(conversation_id="plain", messages=[plain]))
    transcript = await store.transcript("plain")
    assert transcript is not None and transcript.messages == [plain] and transcript.compactions == []


async def test_a_langgraph_thread_id_is_not_taken_over(store: SQLModelConversationStore) -> None:
    with sync_engine(store).begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO historykit_thread (thread_id, framework, created_at) "
                "VALUES ('t1', 'langgraph', :now)"
            ),
            {"now": TS},
        )
    with pytest.raises(ValueError, match="'t1' is already the id of a langgraph thread"):
        await store.save(Conversation(conversation_id="t1", messages=[ModelRequest.user_text_prompt("hi")]))
    assert await store.read_record("t1") is None


class KeystreamCipher:
    """A `CipherProtocol` from the standard library: SHA-256 counter keystream with an HMAC tag."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def _stream(self, nonce: bytes, size: int) -> bytes:
        blocks = (
            hashlib.sha256(self.key + nonce + i.to_bytes(8, "big")).digest() for i in range(size // 32 + 1)
        )
        return b"".join(blocks)[:size]

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(16)
        body = bytes(a ^ b for a, b in zip(plaintext, self._stream(nonce, len(plaintext))))
        tag = hmac.new(self.key, nonce + body, hashlib.sha256).digest()
        return "sha256ctr", nonce + tag + body

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "sha256ctr"
        nonce, tag, body = ciphertext[:16], ciphertext[16:48], ciphertext[48:]
        if not hmac.compare_digest(tag, hmac.new(self.key, nonce + body, hashlib.sha256).digest()):
            raise ValueError("wrong key or tampered ciphertext")
        return bytes(a ^ b for a, b in zip(body, self._stream(nonce, len(body))))


async def test_encrypted_messages(store_url: str) -> None:
    pytest.importorskip("langgraph.checkpoint.serde.encrypted")
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = EncryptedSerializer(KeystreamCipher(b"k" * 32), JsonPlusSerializer(pickle_fallback=False))
    store = SQLModelConversationStore(store_url, serde=serde)
    result = await Agent(TestModel(custom_output_text="the secret is 42")).run("tell me the secret")
    await store.save(result)
    conversation_id = result.conversation.conversation_id
    with sync_engine(store).connect() as conn:
        rows = conn.execute(
            sa.text("SELECT encoding, data FROM historykit_message WHERE thread_id = :t"),
            {"t": conversation_id},
        ).all()
    assert rows and all(row.encoding == "bytes+sha256ctr" for row in rows)
    assert not any(b"secret" in bytes(row.data) for row in rows)

    loaded = await store.load(conversation_id)
    assert loaded is not None and loaded.messages == result.all_messages()
    # Saving the same messages again adds no row: the address is the hash of the plain JSON.
    await store.save(Conversation(conversation_id="again", messages=result.all_messages()))
    assert count_rows(store, "historykit_message", thread_id="again") == len(rows)
    with pytest.raises(CorruptRowError, match="open the store with the serializer that wrote it"):
        await SQLModelConversationStore(store_url).load(conversation_id)
    sync_engine(store).dispose()


def test_messages_are_stored_as_json(tmp_path: Path) -> None:
    """No pickle, no opaque format: the message log holds `ModelMessagesTypeAdapter` JSON."""
    store = SQLModelConversationStore(f"sqlite:///{tmp_path / 'json.db'}")
    message = ModelRequest(parts=[UserPromptPart("hello", timestamp=TS)], timestamp=TS)
    asyncio.run(store.save(Conversation(conversation_id="c", messages=[message])))
    with sync_engine(store).connect() as conn:
        row = conn.execute(sa.text("SELECT encoding, data, hash, kind FROM historykit_message")).one()
    assert row.encoding == "json" and row.kind == "request"
    assert json.loads(row.data)["parts"][0]["content"] == "hello"
    assert row.hash == hashlib.sha256(row.data).hexdigest()[:32]


async def test_shares_a_database_with_the_langgraph_saver(store_url: str) -> None:
    pytest.importorskip("langgraph")
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    from historykit.checkpointers._saver import SQLModelSaver

    # The functional form: this module's postponed annotations could not see a local class's names.
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], add_messages]})  # type: ignore[misc]  # noqa: UP013

    def reply(state: Any) -> Any:
        return {"messages": [AIMessage(f"heard {len(state['messages'])}")]}

    builder = StateGraph(State)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    saver = SQLModelSaver(store_url)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "graph-thread"}}
    graph.invoke({"messages": [HumanMessage("hello")]}, config)  # type: ignore[call-overload]

    store = SQLModelConversationStore(store_url)
    result = await Agent(TestModel(custom_output_text="ok")).run("hello")
    await store.save(result)
    with pytest.raises(ValueError, match="already the id of a langgraph thread"):
        await store.save(Conversation(conversation_id="graph-thread", messages=result.all_messages()))

    await store.delete(result.conversation.conversation_id)
    assert await store.list_conversations() == []
    transcript = saver.transcript("graph-thread")
    assert [m.content for m in transcript.messages] == ["hello", "heard 1"]
    assert count_rows(store, "historykit_message") == 2
    sync_engine(store).dispose()


async def test_encrypted_store_refuses_unencrypted_rows(store_url: str, tmp_path: Path) -> None:
    """With a cipher, a row written without the key is an error, and the inner serializer (here
    LangGraph's permissive default) never decodes a crafted row."""
    pytest.importorskip("langgraph.checkpoint.serde.encrypted")
    import ormsgpack
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG

    cipher = KeystreamCipher(b"k" * 32)
    store = SQLModelConversationStore(store_url, serde=EncryptedSerializer(cipher))
    result = await Agent(TestModel(custom_output_text="fine")).run("hello")
    await store.save(result)
    conversation_id = result.conversation.conversation_id

    def overwrite(encoding: str, data: bytes) -> None:
        with sync_engine(store).begin() as conn:
            conn.execute(
                sa.text("UPDATE historykit_message SET encoding = :e, data = :d WHERE thread_id = :t"),
                {"e": encoding, "d": data, "t": conversation_id},
            )

    plain = ModelMessagesTypeAdapter.dump_json(result.all_messages()[:1])[1:-1]
    overwrite("json", plain)
    with pytest.raises(CorruptRowError, match=r"is not encrypted \(encoding 'json'\).*refused"):
        await store.load(conversation_id)
    canary = tmp_path / "ran"
    attack = ormsgpack.packb(
        ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(["os", "system", f"touch {canary}"]))
    )
    for encoding, data in [("msgpack", attack), ("msgpack+sha256ctr", cipher.encrypt(attack)[1])]:
        overwrite(encoding, data)
        with pytest.raises(CorruptRowError):
            await store.load(conversation_id)
    assert not canary.exists()
    sync_engine(store).dispose()


async def test_malformed_messages_are_refused_before_they_are_stored(
    store: SQLModelConversationStore,
) -> None:
    no_parts = ModelRequest(parts=[UserPromptPart("x")])
    no_parts.parts = None  # type: ignore[assignment]
    no_content = UserPromptPart("x")
    no_content.content = None  # type: ignore[assignment]
    for conversation_id, message, match in [
        ("no-parts", no_parts, r"the ModelRequest is not a valid Pydantic AI message.*request\.parts"),
        (
            "no-content",
            ModelRequest(parts=[no_content]),
            "the ModelRequest is not a valid Pydantic AI message",
        ),
    ]:
        with pytest.raises(ValueError, match=rf"(?s)entry .* of conversation '{conversation_id}': {match}"):
            await store.save(Conversation(conversation_id=conversation_id, messages=[message]))
        assert await store.load(conversation_id) is None  # nothing was written


async def test_loaded_messages_are_the_callers_to_change(store: SQLModelConversationStore) -> None:
    """The store keeps no objects: an in-place edit of what it handed out changes nothing stored."""
    result = await Agent(TestModel(custom_output_text="stored answer")).run("question")
    await store.save(result)
    conversation_id = result.conversation.conversation_id
    loaded = await store.load(conversation_id)
    assert loaded is not None
    part = loaded.messages[0].parts[0]
    assert isinstance(part, UserPromptPart)
    part.content = "edited in place"
    again = await store.load(conversation_id)
    assert again is not None and again.messages == result.all_messages()
