"""Opening the database a command names, for reading, through `historykit.checkpointers._inspection`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from historykit.cli._app import EXIT_NOT_FOUND, CliError

if TYPE_CHECKING:
    from historykit.checkpointers._inspection import DatabaseInspector, ThreadSummary

_DB_ARGUMENT = typer.Argument(
    metavar="DB_URL",
    help="sqlite:///path.db, postgresql+psycopg://user@host/db, or the path of a SQLite file.",
    show_default=False,
)


def _database_url(value: str) -> str:
    """A SQLAlchemy URL for `value`; a SQLite file must exist (connecting would create it)."""
    from sqlalchemy.engine import make_url

    if "://" not in value:
        path = Path(value).expanduser()
        if not path.exists():
            raise CliError(f"{value}: no such database file", EXIT_NOT_FOUND)
        return f"sqlite:///{path.resolve()}"
    try:
        url = make_url(value)
    except Exception:
        raise CliError(
            f"{value!r} is not a database URL (sqlite:///path.db or postgresql+psycopg://...)"
        ) from None
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            raise CliError(f"{value}: an in-memory database holds no threads; give a SQLite file")
        if not Path(url.database).expanduser().exists():
            raise CliError(f"{url.database}: no such database file", EXIT_NOT_FOUND)
    return value


@contextmanager
def _database(value: str) -> Iterator[DatabaseInspector]:
    """The database `value` names, opened for reading: checked first, never created or migrated."""
    from historykit.checkpointers._inspection import DatabaseInspector

    db = DatabaseInspector(_database_url(value))
    try:
        yield db
    finally:
        db.close()


def _thread(db: DatabaseInspector, thread_id: str) -> ThreadSummary:
    """The thread's summary; a thread the database does not have is an error (exit 3)."""
    found = db.thread(thread_id)
    if found is None:
        raise _no_thread(db, thread_id)
    return found


def _no_thread(db: DatabaseInspector, thread_id: str) -> CliError:
    return CliError(f"thread {thread_id!r} is not in {db.where}", EXIT_NOT_FOUND)
