"""A server that drops the saver's connections (a restart, an idle timeout, a proxy) costs no call:
the saver does not ping the server before each transaction (a round trip for each of a step's
eight), so a dropped connection is found by the statement that uses it, and the transaction runs
again on a new connection. Nothing had been committed on the dropped one.

The drop is real: the server is told to end every other connection to the test's database
(`pg_terminate_backend`, MariaDB's `KILL`), between two steps of a real graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from historykit.checkpointers import SQLModelSaver
from historykit.checkpointers._database import create_engine


def _graph(saver: SQLModelSaver) -> Any:
    def reply(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=saver)


def _drop_connections(url: str) -> int:
    """End every connection to `url`'s database but the one asking; how many were ended."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                ended = conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).all()
                return len(ended)
            ids = conn.execute(
                sa.text(
                    "SELECT id FROM information_schema.processlist "
                    "WHERE db = DATABASE() AND id <> CONNECTION_ID()"
                )
            ).all()
            for (connection_id,) in ids:
                conn.execute(sa.text(f"KILL {int(connection_id)}"))
            return len(ids)
    finally:
        engine.dispose()


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ]
)
def server_url(request: pytest.FixtureRequest) -> str:
    if request.param == "mysql":
        return str(request.getfixturevalue("new_mysql_database")())
    return str(request.getfixturevalue("postgres_url"))


def test_a_step_after_the_server_dropped_every_connection_succeeds(server_url: str) -> None:
    config: Any = {"configurable": {"thread_id": "dropped"}}
    with SQLModelSaver(server_url) as saver:
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage("first")]}, config)
        assert _drop_connections(server_url) >= 1  # the saver's pooled connections, at least one
        graph.invoke({"messages": [HumanMessage("second")]}, config)
        texts = [m.content for m in graph.get_state(config).values["messages"]]
    assert texts == ["first", "answer 1", "second", "answer 3"]
    with SQLModelSaver(server_url) as fresh:  # what was stored, not what was cached
        assert [m.content for m in _graph(fresh).get_state(config).values["messages"]] == texts


async def test_an_async_step_after_the_server_dropped_every_connection_succeeds(server_url: str) -> None:
    config: Any = {"configurable": {"thread_id": "dropped-async"}}
    async with SQLModelSaver(server_url) as saver:
        graph = _graph(saver)
        await graph.ainvoke({"messages": [HumanMessage("first")]}, config)
        assert _drop_connections(server_url) >= 1
        await graph.ainvoke({"messages": [HumanMessage("second")]}, config)
        texts = [m.content for m in (await graph.aget_state(config)).values["messages"]]
    assert texts == ["first", "answer 1", "second", "answer 3"]


def test_a_connection_dropped_twice_in_one_call_raises(server_url: str) -> None:
    """A second drop within one call is an outage: the driver's error reaches the caller, once
    retried, not in a loop."""
    config: Any = {"configurable": {"thread_id": "outage"}}
    with SQLModelSaver(server_url) as saver:
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage("first")]}, config)
        engine = saver._db.sync(write=False)
        attempts: list[int] = []

        def drop_before_each_statement(conn: Any, *args: Any) -> None:
            attempts.append(1)
            _drop_connections(server_url)

        listen: Callable[..., Any] = sa.event.listen
        listen(engine, "before_cursor_execute", drop_before_each_statement)
        try:
            with pytest.raises(sa.exc.DBAPIError):
                graph.get_state(config)
        finally:
            sa.event.remove(engine, "before_cursor_execute", drop_before_each_statement)
        assert len(attempts) == 2
        assert [m.content for m in graph.get_state(config).values["messages"]] == ["first", "answer 1"]
