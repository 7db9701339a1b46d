"""The Agent Server checkpointer (`historykit.checkpointers.agent_server`): the implementation."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from historykit.checkpointers._database import DEFAULT_BUSY_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
from historykit.errors import InvalidArgumentError

if TYPE_CHECKING:
    from historykit.checkpointers._saver import SQLModelSaver

__all__ = ["DEFAULT_URL", "URL_VARIABLE", "AgentServerCheckpointer", "checkpointer"]

URL_VARIABLE = "HISTORYKIT_CHECKPOINTER_URL"
"""The environment variable naming the database when `AgentServerCheckpointer.url` is not set."""

DEFAULT_URL = "sqlite:///historykit.db"
"""The database when neither `url` nor `HISTORYKIT_CHECKPOINTER_URL` names one: a SQLite file in
the server's working directory."""


@dataclass(frozen=True)
class AgentServerCheckpointer:
    """The factory LangGraph's Agent Server calls for a checkpointer: each call gives an async
    context manager that opens a `SQLModelSaver` (its tables created or migrated first) and closes
    it when the server is done with it.

    The server opens one per thread it runs graphs or API calls on, so several savers share the
    database in one process, as they do across worker processes: each message is still stored
    once per thread and every saver reads what the others wrote.

    Example:
        ```python
        # checkpointer.py, named in langgraph.json as {"checkpointer": {"path": "./checkpointer.py:make"}}
        from historykit.checkpointers._agent_server import AgentServerCheckpointer

        make = AgentServerCheckpointer(url="postgresql+psycopg://user@db-host/agents")
        ```
    """

    url: str | None = None
    """The database (`sqlite:///path.db`, `postgresql+psycopg://...`, `mysql://...`); `None` reads
    `HISTORYKIT_CHECKPOINTER_URL` when the server opens the saver, else `sqlite:///historykit.db`."""
    single_writer: bool = False
    """One run per thread at a time (`SQLModelSaver(single_writer=True)`): a second run started on
    a thread while another one writes, or is in the middle of a step, is refused with
    `ConcurrentRunError`."""
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    """Seconds a SQLite writer waits for another process's lock."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    """Seconds a database server connection may take to open."""
    cached_threads: int = 32
    """How many threads' message objects each saver remembers (0 turns the cache off)."""
    engine_kwargs: Mapping[str, Any] | None = None
    """Extra arguments for SQLAlchemy's engines (pool size, echo, ...)."""

    def resolved_url(self) -> str:
        """The database this factory opens: `url`, else `HISTORYKIT_CHECKPOINTER_URL`, else
        `DEFAULT_URL`."""
        url = self.url if self.url is not None else os.environ.get(URL_VARIABLE) or DEFAULT_URL
        if not isinstance(url, str) or not url.strip():
            raise InvalidArgumentError(
                f"AgentServerCheckpointer: the database URL must be a non-empty string, got {url!r}"
            )
        return url

    def __call__(self) -> AbstractAsyncContextManager[SQLModelSaver]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[SQLModelSaver]:
        from historykit.checkpointers._saver import SQLModelSaver

        saver = SQLModelSaver(
            self.resolved_url(),
            busy_timeout=self.busy_timeout,
            cached_threads=self.cached_threads,
            engine_kwargs=self.engine_kwargs,
            connect_timeout=self.connect_timeout,
            single_writer=self.single_writer,
        )
        try:
            # The schema now, so a database the server cannot use stops it at startup, not at
            # the first run.
            await saver.asetup()
            yield saver
        finally:
            await saver.aclose()
            saver.close()  # the sync engine, if a sync method was called


checkpointer = AgentServerCheckpointer()
"""The default factory (`HISTORYKIT_CHECKPOINTER_URL`, else `sqlite:///historykit.db`): in
langgraph.json, `"checkpointer": {"path": "historykit.checkpointers.agent_server.checkpointer"}`."""
