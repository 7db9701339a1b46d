"""Every error historykit raises on purpose, under one root.

```text
HistoryKitError                          except HistoryKitError: anything historykit raises on purpose
├── UserError                            historykit was called wrongly; the message says how to call it
│   ├── InvalidArgumentError (ValueError)    a value out of range, an unknown option, a bad URL
│   └── ArgumentTypeError (TypeError)        a value of the wrong type (a message of no known framework)
│       └── WrongFrameworkError (AttributeError)  one framework's glue handed to another framework
├── CompactionVetoedError (RuntimeError)  a vetoed compaction left a history over the context window
├── TranscriptFormatError (ValueError)   a transcript file in no known format, or broken in its own
├── ReplayMismatchError (LookupError)    a replay (historykit.testing) asked for what its recording lacks
└── StoreError                           the database behind a saver or a conversation store
    ├── SchemaError (RuntimeError)           the tables are not what this version expects
    │   └── SchemaVersionError                   written by a newer historykit
    ├── CorruptRowError (ValueError)         a stored row that cannot be decoded
    │   └── RefusedTypeError                     a stored value naming a type never built from a database
    ├── ReadOnlyDatabaseError (PermissionError)  a write to a database that can only be read
    ├── UnreachableDatabaseError (ConnectionError)  a database that cannot be opened or reached
    └── WriteConflictError (RuntimeError)    another writer changed the thread since it was read
        └── ConcurrentRunError                   a second run of a thread the single-writer guard holds
```

Each class also derives from the built-in exception callers caught before this module existed
(shown in brackets), so `except ValueError` around a historykit call keeps working.

Example:
    ```python
    from historykit.errors import HistoryKitError, UserError

    try:
        pipeline.run(messages, context_window=0)
    except UserError as exc:        # InvalidArgumentError: context_window must be a positive int
        print(exc)
    ```
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "CompactionVetoedError",
    "ConcurrentRunError",
    "CorruptRowError",
    "HistoryKitError",
    "InvalidArgumentError",
    "ReadOnlyDatabaseError",
    "RefusedTypeError",
    "ReplayMismatchError",
    "SchemaError",
    "SchemaVersionError",
    "StoreError",
    "TranscriptFormatError",
    "UnreachableDatabaseError",
    "UserError",
    "WriteConflictError",
    "WrongFrameworkError",
]


class HistoryKitError(Exception):
    """The root: every error historykit raises on purpose is one of these."""


class UserError(HistoryKitError):
    """historykit was called wrongly: a configuration or an argument it cannot use."""


class InvalidArgumentError(UserError, ValueError):
    """A value historykit cannot use: out of range, an unknown option, an unparsable URL."""


class ArgumentTypeError(UserError, TypeError):
    """A value of the wrong type, such as an item that is not a message of the history's framework."""


class WrongFrameworkError(ArgumentTypeError, AttributeError):
    """One framework's glue handed to another (the Pydantic AI capability to LangChain's `create_agent`).

    Raised when the other framework reads the hook it expects.
    Also an `AttributeError`, so a tool that only inspects members (`inspect.getmembers`, `hasattr`,
    as Pydantic AI's durable execution does on every capability) sees no such hook instead of failing.
    """


class CompactionVetoedError(HistoryKitError, RuntimeError):
    """A `before_compaction` hook vetoed a compaction of a history that does not fit the context
    window (`historykit.BeforeCompaction`): the request is not sent, since it would be refused."""


class TranscriptFormatError(HistoryKitError, ValueError):
    """A transcript file that is not (or not validly) in the format it was read as."""


class ReplayMismatchError(HistoryKitError, LookupError):
    """A replayed tool (`historykit.testing`) was called with a call id its recording has no result for."""


class StoreError(HistoryKitError):
    """The database behind a saver or a conversation store cannot be used as asked."""


class SchemaError(StoreError, RuntimeError):
    """The database's historykit tables are not what this version of historykit expects."""


class SchemaVersionError(SchemaError):
    """The database was written by a newer historykit (or a version with no migration path)."""


class CorruptRowError(StoreError, ValueError):
    """A stored row cannot be decoded; the message names the table, the row and the reason."""


class RefusedTypeError(CorruptRowError):
    """A stored value names a type the saver does not build from a database."""


class ReadOnlyDatabaseError(StoreError, PermissionError):
    """A write to a SQLite database that can only be read (the message says why)."""


class UnreachableDatabaseError(StoreError, ConnectionError):
    """A database that cannot be opened (a SQLite file) or reached (a server), with where and why."""


class WriteConflictError(StoreError, RuntimeError):
    """A write checked against the state it was computed from found that another writer changed
    the thread since (a manual compaction racing a run): nothing was written; read again and retry."""


class ConcurrentRunError(WriteConflictError):
    """A run of a thread another run is writing, refused by the saver's single-writer guard
    (`SQLModelSaver(single_writer=True)`): nothing of the refused run was written."""
