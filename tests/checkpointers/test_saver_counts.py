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


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_cold_load_brings_back_the_counts_made_the_same_way_only(
    database_url: str, monkeypatch: pytest.MonkeyPatch, use_async: bool
) -> None:
    monkeypatch.setattr(tokens, "_KNOWN_COUNTS", {})
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
    monkeypatch.setattr(tokens, "_KNOWN_COUNTS", {})
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
    brought = dict(tokens._KNOWN_COUNTS)
    assert set(brought) == {exact.count_method}
    counted = neutral[:-1]
    assert {message_digest(m) for m in counted} == set(brought[exact.count_method])
    # The stored count is the one a counter of the same method makes itself.
    monkeypatch.setattr(tokens, "_KNOWN_COUNTS", {})
    for message in counted:
        assert brought[exact.count_method][message_digest(message)] == TokenCounter().count_message(message)
    # A count made another way (another tokenizer, or a counting scheme after an upgrade) is not
    # reused: the counter counts for itself.
    planted = {exact.count_method: {message_digest(counted[0]): 10**9}}
    monkeypatch.setattr(tokens, "_KNOWN_COUNTS", planted)
    other = TokenCounter(tokenizer=heuristic_tokenizer)
    assert other.count_method != exact.count_method
    assert other.count_message(counted[0]) < 10**9
    monkeypatch.setattr(tokens, "COUNT_SCHEME", tokens.COUNT_SCHEME + 1)
    assert TokenCounter().count_message(counted[0]) < 10**9


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
