"""`SQLModelConversationStore` reads a SQLite database it cannot write (a read-only filesystem),
as `SQLModelSaver` and the CLI do: `load`, `read_records` and `transcript` work, and a save is
refused with `ReadOnlyDatabaseError` naming why. And a new saver or store reads a file another
connection is writing at once (WAL), without waiting for the writer."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai.conversation")

from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from historykit.checkpointers import SQLModelConversationStore, SQLModelSaver
from tests.checkpointers.read_only_mount import run_read_only, skip_without_namespaces

_READER = """
import asyncio, sys
from pydantic_ai.conversation import Conversation
from historykit.checkpointers import SQLModelConversationStore, SQLModelSaver
from tests.checkpointers.read_only_mount import run_read_only, skip_without_namespaces
from historykit.errors import ReadOnlyDatabaseError

async def main():
    store = SQLModelConversationStore(sys.argv[1])
    loaded = await store.load("chat")
    print(len(loaded.messages), [r.conversation_id for r in await store.read_records()])
    print(len((await store.transcript("chat")).messages))
    try:
        await store.save(Conversation(conversation_id="other"))
    except ReadOnlyDatabaseError as exc:
        print("refused:", exc)

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("writer", "mounted"),
    [("closed", "folder"), ("still open", "folder"), ("closed", "file"), ("still open", "file")],
)
def test_a_store_on_a_read_only_filesystem_is_readable(tmp_path: Path, writer: str, mounted: str) -> None:
    """Closed: the file alone (opened immutable); still open: its -wal file holds the conversation.
    The folder read-only (a read-only filesystem), or only the database file (a file the store's
    user cannot write, in a folder it can)."""
    skip_without_namespaces()
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder / 'chat.db'}"
    store = SQLModelConversationStore(url)
    history = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("hello")]),
    ]
    asyncio.run(store.save(Conversation(conversation_id="chat", messages=history)))
    if writer == "closed":
        asyncio.run(store.aclose())
    assert (folder / "chat.db-wal").exists() is (writer == "still open")
    script = tmp_path / "reader.py"
    script.write_text(_READER)
    lines = run_read_only(folder if mounted == "folder" else folder / "chat.db", script, url)
    assert lines[0] == "2 ['chat']"
    assert lines[1] == "2"
    why = "its directory" if mounted == "folder" else "the file"
    assert "refused:" in lines[2] and f"opened read-only because {why}" in lines[2]


# ---- a reader never waits behind a writer (SQLite, WAL) -----------------------------------------


def _hold_the_write_lock(path: Path, held: threading.Event, release: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO historykit_thread (thread_id, framework, created_at) VALUES ('w', 'x', 'now')")
    held.set()
    release.wait(30)
    conn.execute("ROLLBACK")
    conn.close()


@pytest.mark.parametrize("reader", ["saver", "store"])
def test_a_new_reader_does_not_wait_for_a_writer(tmp_path: Path, reader: str) -> None:
    """Another connection holds the file's write lock: a new saver's first `get_tuple`, and a new
    store's `load`, read at once (WAL) instead of waiting for it, and past `busy_timeout` failing."""
    path = tmp_path / "busy.db"
    url = f"sqlite:///{path}"
    saver = SQLModelSaver(url)
    saver.setup()
    store = SQLModelConversationStore(url)
    first = [ModelRequest(parts=[UserPromptPart("hi")])]
    asyncio.run(store.save(Conversation(conversation_id="chat", messages=first)))
    asyncio.run(store.aclose())
    saver.close()
    held, release = threading.Event(), threading.Event()
    writer = threading.Thread(target=_hold_the_write_lock, args=(path, held, release))
    writer.start()
    try:
        assert held.wait(10)
        if reader == "saver":
            fresh = SQLModelSaver(url, busy_timeout=0.5)
            assert fresh.get_tuple({"configurable": {"thread_id": "t"}}) is None
            fresh.close()
        else:
            loaded = asyncio.run(SQLModelConversationStore(url).load("chat"))
            assert loaded is not None and len(loaded.messages) == 1
        assert writer.is_alive(), "the reader waited for the writer"
    finally:
        release.set()
        writer.join()
