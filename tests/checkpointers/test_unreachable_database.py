"""A database that cannot be reached is one historykit error, in one line, where it is first used
(issue 24): `UnreachableDatabaseError` (a `ConnectionError`) naming the URL and the driver's reason,
with no SQLAlchemy error chained to it (that one is a hundred lines saying the same).

The server is a closed port on this machine (nothing listens on port 1), so the driver's refusal is
real and immediate. A SQLite file in a directory that does not exist is the file-based case.
"""

from __future__ import annotations

import socket
import time
import traceback
from pathlib import Path

import pytest

from historykit.errors import HistoryKitError, StoreError, UnreachableDatabaseError

pytest.importorskip("pydantic_ai.conversation_store", reason="the conversation store needs Pydantic AI 2.x")


def _closed_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on: bound, then released, so the connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _assert_one_line(error: BaseException, *words: str) -> None:
    message = str(error)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)
    assert error.__cause__ is None and error.__suppress_context__
    # What a user sees when it is not caught: the traceback of historykit's call, nothing chained.
    shown = "".join(traceback.format_exception(error))
    assert "sqlalchemy" not in shown.lower().replace("historykit", ""), shown


def test_the_conversation_store_on_a_closed_postgresql_port() -> None:
    from historykit.checkpointers import SQLModelConversationStore

    port = _closed_port()
    started = time.monotonic()
    with pytest.raises(UnreachableDatabaseError) as caught:
        SQLModelConversationStore(f"postgresql://postgres@127.0.0.1:{port}/test")
    assert time.monotonic() - started < 30  # refused, not retried
    _assert_one_line(caught.value, f"127.0.0.1:{port}", "cannot connect", "refused")
    assert isinstance(caught.value, (StoreError, ConnectionError))


async def test_the_conversation_store_on_an_async_engine_fails_at_first_use() -> None:
    from historykit.checkpointers import SQLModelConversationStore
    from historykit.checkpointers._database import create_async_engine

    port = _closed_port()
    engine = create_async_engine(f"postgresql+psycopg://postgres@127.0.0.1:{port}/test")
    store = SQLModelConversationStore(engine)  # an engine made elsewhere connects on first use
    try:
        with pytest.raises(UnreachableDatabaseError) as caught:
            await store.load("thread-1")
        _assert_one_line(caught.value, f"127.0.0.1:{port}", "refused")
    finally:
        await engine.dispose()


def test_the_saver_on_a_closed_postgresql_port() -> None:
    pytest.importorskip("langgraph")
    from historykit.checkpointers import SQLModelSaver

    port = _closed_port()
    saver = SQLModelSaver(f"postgresql://postgres@127.0.0.1:{port}/test")
    with pytest.raises(UnreachableDatabaseError) as caught:
        saver.get_tuple({"configurable": {"thread_id": "t"}})
    _assert_one_line(caught.value, f"127.0.0.1:{port}", "cannot connect", "refused")


def test_the_conversation_store_on_a_sqlite_file_that_cannot_be_created(tmp_path: Path) -> None:
    from historykit.checkpointers import SQLModelConversationStore

    missing = tmp_path / "no-such-directory" / "history.db"
    with pytest.raises(HistoryKitError) as caught:  # refused before any connection is tried
        SQLModelConversationStore(f"sqlite:///{missing}")
    assert "\n" not in str(caught.value) and "no-such-directory" in str(caught.value)


def test_the_cli_exits_non_zero_in_one_line() -> None:
    from typer.testing import CliRunner

    from historykit.cli import app

    port = _closed_port()
    result = CliRunner().invoke(app, ["threads", f"postgresql+psycopg://postgres@127.0.0.1:{port}/test"])
    assert result.exit_code != 0
    assert len(result.stderr.strip().splitlines()) == 1
    assert "refused" in result.stderr
