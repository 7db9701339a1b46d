"""The LangGraph saver keeps the token counts the process made of a thread's messages, and a cold
load gives them back, on SQLite and PostgreSQL (issue 12, item 3)."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

from historykit import _tokens as tokens
from historykit._digests import message_digest
from historykit._tokens import TokenCounter, heuristic_tokenizer
from historykit.checkpointers import SQLModelSaver
from historykit.checkpointers._database import create_engine
from historykit.plugins.langchain import LangChainAdapter
from tests.checkpointers.stored_counts import PLANTED, plant_count, spy_loaded_counts


def _graph(saver: SQLModelSaver) -> object:
    def agent(state: MessagesState) -> dict[str, list[AIMessage]]:
        # What a pipeline does before a model call: count the history.
        TokenCounter().count(state["messages"])
        return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def _stored_counts(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT COUNT(*) FROM historykit_token_count")).scalar_one())
    finally:
        engine.dispose()


def _brought(messages: list[object]) -> dict[str, dict[bytes, int]]:
    """The counts a load made known for `messages` (`tokens.remember_counts`), by method."""
    out: dict[str, dict[bytes, int]] = {}
    for message in messages:
        entry = tokens._LOADED.get(id(message))
        assert entry is not None and entry[0]() is message, message
        for method, counts in entry[1].items():
            out.setdefault(method, {}).update(counts)
    return out


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_cold_load_brings_back_the_counts_made_the_same_way_only(
    database_url: str, monkeypatch: pytest.MonkeyPatch, use_async: bool
) -> None:
    monkeypatch.setattr(tokens, "_LOADED", {})
    monkeypatch.setattr(tokens, "_NOTED", [])
    config: RunnableConfig = {"configurable": {"thread_id": "counted"}}
    saver = SQLModelSaver(database_url)
    graph = _graph(saver)
    for turn in range(3):
        graph.invoke({"messages": [("user", f"turn {turn}: " + "words " * 50)]}, config)  # type: ignore[attr-defined]
    saver.close()
    # Every message but the last answer was counted before a model call, and kept.
    assert _stored_counts(database_url) == 5

    # A new process: nothing known, nothing counted.
    monkeypatch.setattr(tokens, "_LOADED", {})
    monkeypatch.setattr(tokens, "_NOTED", [])
    cold = SQLModelSaver(database_url)
    if use_async:

        async def load() -> object:
            loaded = await cold.aget_tuple(config)
            await cold.aclose()
            return loaded

        loaded = asyncio.run(load())
    else:
        loaded = cold.get_tuple(config)
    cold.close()
    assert loaded is not None
    messages = loaded.checkpoint["channel_values"]["messages"]  # type: ignore[attr-defined]
    neutral = LangChainAdapter().to_neutral(messages)
    exact = TokenCounter()
    brought = _brought(messages)
    assert set(brought) == {exact.count_method}
    counted = neutral[:-1]
    assert {message_digest(m) for m in counted} == set(brought[exact.count_method])
    # What a counter of the same method takes for the loaded messages is the count it makes itself.
    known = [TokenCounter().count_message(m) for m in counted]
    monkeypatch.setattr(tokens, "_LOADED", {})
    assert known == [TokenCounter().count_message(m) for m in counted]
    assert known == [brought[exact.count_method][message_digest(m)] for m in counted]
    # A count made another way (another tokenizer, or a counting scheme after an upgrade) is not
    # reused: the counter counts for itself.
    tokens.remember_counts({exact.count_method: {message_digest(counted[0]): 10**9}}, messages)
    assert TokenCounter().count_message(LangChainAdapter().to_neutral(messages)[0]) == 10**9
    other = TokenCounter(tokenizer=heuristic_tokenizer)
    assert other.count_method != exact.count_method
    assert other.count_message(counted[0]) < 10**9
    monkeypatch.setattr(tokens, "COUNT_SCHEME", tokens.COUNT_SCHEME + 1)
    assert TokenCounter().count_message(counted[0]) < 10**9


def test_a_runs_first_step_after_a_cold_load_counts_only_what_is_new(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new process's first run on a thread: the messages its read hands the graph are the ones
    the stored counts were made known for, so the node's count finds every earlier message."""
    monkeypatch.setattr(tokens, "_NOTED", [])
    config: RunnableConfig = {"configurable": {"thread_id": "resumed"}}
    saver = SQLModelSaver(database_url)
    for turn in range(2):
        _graph(saver).invoke({"messages": [("user", f"turn {turn}: " + "words " * 50)]}, config)  # type: ignore[attr-defined]
    saver.close()

    monkeypatch.setattr(tokens, "_LOADED", {})
    monkeypatch.setattr(tokens, "_NOTED", [])
    found = spy_loaded_counts(monkeypatch)
    cold = SQLModelSaver(database_url)
    try:
        _graph(cold).invoke({"messages": [("user", "turn 2")]}, config)  # type: ignore[attr-defined]
    finally:
        cold.close()
    answers = [answer for _, answer in found]
    # The 3 earlier messages counted before a model call found; the last answer (never counted,
    # so not stored) and the new question counted.
    assert len(answers) == 5
    assert all(a is not None for a in answers[:3]) and answers[3:] == [None, None]


def test_a_threads_stored_counts_never_count_another_threads_messages(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads hold a message with the same content; one's stored count of it is planted wrong.
    After a cold load of both in one process, the planted count is used for that thread's own
    loaded message only: the other thread's equal message is counted as it is (stored counts are
    known by the very objects a read handed out, not by content)."""
    monkeypatch.setattr(tokens, "_LOADED", {})
    monkeypatch.setattr(tokens, "_NOTED", [])
    saver = SQLModelSaver(database_url)
    graph = _graph(saver)
    same = "the same question, word for word " * 20
    for thread in ("planted", "clean"):
        graph.invoke({"messages": [("user", same)]}, {"configurable": {"thread_id": thread}})  # type: ignore[attr-defined]
    saver.close()
    plant_count(database_url, "planted")

    monkeypatch.setattr(tokens, "_LOADED", {})
    monkeypatch.setattr(tokens, "_NOTED", [])
    cold = SQLModelSaver(database_url)
    try:
        read = {
            thread: cold.get_tuple({"configurable": {"thread_id": thread}}).checkpoint["channel_values"][
                "messages"
            ]  # type: ignore[union-attr]
            for thread in ("planted", "clean")
        }
    finally:
        cold.close()
    counter = TokenCounter()
    first = {thread: LangChainAdapter().to_neutral(messages)[0] for thread, messages in read.items()}
    assert message_digest(first["planted"]) == message_digest(first["clean"])
    assert counter.count_message(first["planted"]) == PLANTED  # its own thread's count (planted)
    honest = counter.count_message(first["clean"])
    assert honest < 1000
    monkeypatch.setattr(tokens, "_LOADED", {})
    assert honest == TokenCounter().count_message(first["clean"])
    # Nor does a long text of it learn the planted count for the other thread's equal text.
    assert counter.count_text(first["clean"].parts[0].text) == TokenCounter().count_text(same)


def test_the_saver_does_not_tokenize_and_forgets_counts_with_the_thread(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens, "_NOTED", [])
    saver = SQLModelSaver(sqlite_url)

    def agent(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage("no counting here")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": "uncounted"}}
    graph.invoke({"messages": [("user", "hi")]}, config)
    assert _stored_counts(sqlite_url) == 0  # nothing counted, nothing kept

    counted = _graph(saver)
    counted.invoke({"messages": [("user", "again")]}, config)  # type: ignore[attr-defined]
    assert _stored_counts(sqlite_url) == 3
    saver.copy_thread("uncounted", "copy")
    assert _stored_counts(sqlite_url) == 6
    saver.delete_thread("uncounted")
    saver.delete_thread("copy")
    assert _stored_counts(sqlite_url) == 0
    saver.close()
