"""The typer app, exit codes, and the one-line errors every command reports."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer

from historykit.cli._render import _one_line, _safe
from historykit.errors import (
    CorruptRowError,
    HistoryKitError,
    ReadOnlyDatabaseError,
    SchemaError,
    TranscriptFormatError,
    UserError,
)

EXIT_OK = 0
"""Success: the command did what it was asked, and found nothing to report as a problem."""
EXIT_FAILURE = 1
"""A runtime failure: a processor raised, the database could not be reached, a dependency is missing."""
EXIT_USAGE = 2
"""Bad input or usage: the transcript or database is not what it must be, an option is wrong."""
EXIT_NOT_FOUND = 3
"""A file, a database file or a thread that does not exist."""
EXIT_PROBLEMS = 4
"""`doctor` found provider-rule violations and did not repair them (all of them)."""

_EPILOG = """\b
Transcript formats (detected, or --from; written as --to): chat (OpenAI
chat-completions messages, one JSON object a line), pydantic-ai, langchain,
claude-code, codex.

\b
Pipeline SPEC: `default`, or names joined by commas, run in order, each with
optional :option=value settings (lists joined with +); Repair always runs last.
Values may hold colons (a colon starts a setting only before option=).
Names: dedupe, clear, strip, truncate, summarize, repair. Examples:
  dedupe,clear,strip,truncate
  clear:keep=5:min_gain=2000,truncate:max_fraction=0.7
  summarize:model=openai:gpt-4o-mini

\b
DB_URL: sqlite:///path.db, postgresql+psycopg://user@host/db, or a SQLite file path.

\b
Exit codes: 0 ok; 1 runtime failure; 2 bad input or usage; 3 not found (file,
database file, thread); 4 doctor found violations it did not repair."""
"""Click keeps a paragraph that starts with a `\\b` line as written (no re-wrapping); paragraphs are
separated by a blank line, or the marker is printed as a character."""

app = typer.Typer(
    name="historykit",
    help="Keep long LLM agent conversations inside the context window: analyse transcripts, "
    "compact them, and inspect stored threads.",
    epilog=_EPILOG,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
"""The `historykit` command (a Typer app): the console script, and `python -m historykit.cli`."""

_state = {"debug": os.environ.get("HISTORYKIT_DEBUG", "") not in ("", "0")}


class CliError(HistoryKitError):
    """An error the command reports as one line, with the exit code scripts rely on."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def _fail(message: str, code: int) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.write(f"historykit: error: {_safe(_one_line(message)).plain}\n")
    sys.stderr.flush()
    raise typer.Exit(code)


def _classify(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit code of an exception."""
    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, UserError):  # historykit refused an option or value the command passed on
        return str(exc), EXIT_USAGE
    if isinstance(exc, ReadOnlyDatabaseError):  # a PermissionError whose message says why
        return str(exc), EXIT_FAILURE
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename or exc}: no such file", EXIT_NOT_FOUND
    if isinstance(exc, IsADirectoryError):
        return f"{exc.filename}: a directory, not a file", EXIT_USAGE
    if isinstance(exc, PermissionError):
        return f"{exc.filename or ''}: permission denied", EXIT_FAILURE
    if isinstance(exc, TranscriptFormatError):
        return str(exc), EXIT_USAGE
    if isinstance(exc, ImportError):
        return str(exc), EXIT_FAILURE
    if isinstance(exc, (SchemaError, CorruptRowError)):
        return str(exc), EXIT_USAGE
    module = type(exc).__module__
    if module.startswith("sqlalchemy"):
        from sqlalchemy import exc as sa_exc

        if isinstance(exc, sa_exc.OperationalError):
            message = _driver_message(exc)
            missing = "database" in message and "does not exist" in message
            return f"cannot use the database: {message}", EXIT_NOT_FOUND if missing else EXIT_FAILURE
        if isinstance(exc, sa_exc.DatabaseError):
            return f"cannot read the database: {_driver_message(exc)}", EXIT_USAGE
        if isinstance(exc, sa_exc.ArgumentError):
            return f"not a database URL: {exc}", EXIT_USAGE
    if isinstance(exc, ValueError):
        return str(exc), EXIT_USAGE
    if isinstance(exc, RuntimeError) and type(exc) is RuntimeError:
        return str(exc), EXIT_FAILURE
    return f"{type(exc).__name__}: {exc}", EXIT_FAILURE


def _driver_message(exc: Any) -> str:
    orig = getattr(exc, "orig", None)
    return _one_line(str(orig if orig is not None else exc))


@contextmanager
def _errors() -> Iterator[None]:
    """Turn every failure into one line on stderr and its exit code (a traceback with `--debug`)."""
    try:
        yield
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("historykit: interrupted\n")
        raise typer.Exit(130) from None
    except Exception as exc:
        if _state["debug"]:
            raise
        message, code = _classify(exc)
        _fail(message, code)


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")
    ] = False,
) -> None:
    if debug:
        _state["debug"] = True


def main() -> None:  # pragma: no cover - the console script calls `app`
    """Run the `historykit` command on `sys.argv`."""
    app()
