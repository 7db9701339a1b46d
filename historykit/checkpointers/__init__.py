"""SQLModel persistence (SQLite, PostgreSQL, MySQL/MariaDB): the LangGraph checkpointer, the Pydantic
AI conversation store, the shared message log and compaction markers, and a read-only inspection
API over both (`DatabaseInspector`, what `historykit threads`/`show` render).

Framework packages are imported only when a name that needs them is used, so importing
`historykit.checkpointers` works without LangGraph or Pydantic AI installed.

Example:
    ```python
    from historykit.checkpointers import SQLModelSaver

    saver = SQLModelSaver("sqlite:///agent.db")
    ```

LangGraph's Agent Server takes the saver from `langgraph.json`:
`"checkpointer": {"path": "historykit.checkpointers.agent_server.checkpointer"}`
(`AgentServerCheckpointer`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from historykit.checkpointers._agent_server import AgentServerCheckpointer
    from historykit.checkpointers._conversation_store import SQLModelConversationStore, ViewSaving
    from historykit.checkpointers._database import (
        CorruptRowError,
        ReadOnlyDatabaseError,
        SchemaError,
        SchemaVersionError,
        UnreachableDatabaseError,
        create_async_engine,
        create_engine,
        prepare_database,
    )
    from historykit.checkpointers._inspection import (
        ConversationState,
        DatabaseInspector,
        LatestCheckpoint,
        MarkerInfo,
        SchemaInfo,
        ThreadDetails,
        ThreadSummary,
    )
    from historykit.checkpointers._saver import PruneStrategy, SQLModelSaver
    from historykit.checkpointers._serde import RefusedTypeError, StateSerializer
    from historykit.checkpointers._transcript import StoredCompaction, Transcript

__all__ = [
    "AgentServerCheckpointer",
    "ConversationState",
    "CorruptRowError",
    "DatabaseInspector",
    "LatestCheckpoint",
    "MarkerInfo",
    "PruneStrategy",
    "ReadOnlyDatabaseError",
    "RefusedTypeError",
    "SQLModelConversationStore",
    "SQLModelSaver",
    "SchemaError",
    "SchemaInfo",
    "SchemaVersionError",
    "StateSerializer",
    "StoredCompaction",
    "ThreadDetails",
    "ThreadSummary",
    "Transcript",
    "UnreachableDatabaseError",
    "ViewSaving",
    "create_async_engine",
    "create_engine",
    "prepare_database",
]

_LAZY = {
    "AgentServerCheckpointer": "historykit.checkpointers.agent_server",
    "SQLModelSaver": "historykit.checkpointers._saver",
    "SQLModelConversationStore": "historykit.checkpointers._conversation_store",
    "DatabaseInspector": "historykit.checkpointers._inspection",
    "ConversationState": "historykit.checkpointers._inspection",
    "LatestCheckpoint": "historykit.checkpointers._inspection",
    "MarkerInfo": "historykit.checkpointers._inspection",
    "SchemaInfo": "historykit.checkpointers._inspection",
    "ThreadDetails": "historykit.checkpointers._inspection",
    "ThreadSummary": "historykit.checkpointers._inspection",
    "PruneStrategy": "historykit.checkpointers._saver",
    "ViewSaving": "historykit.checkpointers._conversation_store",
    "CorruptRowError": "historykit.checkpointers._database",
    "ReadOnlyDatabaseError": "historykit.checkpointers._database",
    "RefusedTypeError": "historykit.checkpointers._serde",
    "StateSerializer": "historykit.checkpointers._serde",
    "SchemaError": "historykit.checkpointers._database",
    "SchemaVersionError": "historykit.checkpointers._database",
    "UnreachableDatabaseError": "historykit.checkpointers._database",
    "create_async_engine": "historykit.checkpointers._database",
    "create_engine": "historykit.checkpointers._database",
    "prepare_database": "historykit.checkpointers._database",
    "StoredCompaction": "historykit.checkpointers._transcript",
    "Transcript": "historykit.checkpointers._transcript",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'historykit.checkpointers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
