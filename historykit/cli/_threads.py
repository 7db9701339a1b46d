"""`historykit threads`, `show` and `export`: stored threads, rendered from the inspection API."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from historykit.cli._app import EXIT_NOT_FOUND, CliError, _errors, app
from historykit.cli._database import _DB_ARGUMENT, _database, _no_thread, _thread
from historykit.cli._options import _check_writable, _format_option
from historykit.cli._render import _out, _safe, _say, _size, _when, _working
from historykit.formats import write_transcript

if TYPE_CHECKING:
    from historykit.checkpointers._inspection import ThreadDetails, ThreadSummary


@app.command()
def threads(
    db_url: Annotated[str, _DB_ARGUMENT],
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List the stored threads (LangGraph threads and Pydantic AI conversations)."""
    with _errors(), _working("reading the database"), _database(db_url) as db:
        found = db.threads()
        if json_out:
            sys.stdout.write(json.dumps([_thread_dict(t) for t in found], indent=2) + "\n")
            return
        if not found:
            _say(f"no threads in {db.where}")
            return
        _say(f"{len(found)} thread(s) in {db.where}", style="bold")
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("thread", overflow="fold", min_width=min(30, max(len(t.thread_id) for t in found)))
        table.add_column("framework", no_wrap=True)
        table.add_column("created", no_wrap=False)
        for header in ("messages", "ckpts", "markers", "storage"):
            table.add_column(header, justify="right", no_wrap=True)
        for t in found:
            table.add_row(
                _safe(t.thread_id),
                t.framework,
                _when(t.created_at),
                str(t.messages),
                str(t.checkpoints) if t.framework == "langgraph" else "-",
                str(t.compactions),
                _size(t.storage_bytes),
            )
        _out.print(table)


@app.command()
def show(
    db_url: Annotated[str, _DB_ARGUMENT],
    thread: Annotated[
        str, typer.Argument(metavar="THREAD", help="The thread (or conversation) id.", show_default=False)
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """One thread: its checkpoints, messages, storage and compaction markers."""
    with _errors(), _database(db_url) as db:
        with _working("reading the thread"):
            found = db.details(thread)
            if found is None:
                raise _no_thread(db, thread)
            info = found.summary
            details = _details_dict(found)
        if json_out:
            sys.stdout.write(json.dumps(details, indent=2, default=str) + "\n")
            return
        _say(f"thread {thread!r} ({info.framework})", style="bold")
        table = Table(box=box.SIMPLE, show_header=False, pad_edge=False)
        table.add_column("", style="bold")
        table.add_column("", overflow="fold")
        for key, value in details["summary"].items():
            table.add_row(key, _safe(_when(value) if isinstance(value, datetime) else value))
        for key, value in info.storage.items():
            table.add_row(f"storage: {key}", _size(value))
        _out.print(table)
        markers = found.markers
        if not markers:
            _say("no compaction markers")
            return
        _out.print(
            f"{len(markers)} compaction marker(s), every kind (at: originals logged before the message it "
            "wrote; covered: the messages it replaced, as indices of the history it saw)",
            style="bold",
        )
        marks = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for header in ("at", "covered", "before", "after", "strategy", "model", "when", "auto"):
            numeric = header in ("at", "before", "after")
            marks.add_column(
                header, justify="right" if numeric else "left", no_wrap=numeric or header == "covered"
            )
        for at, m in ((found_marker.at, found_marker.marker) for found_marker in markers):
            marks.add_row(
                str(at),
                f"{m.covered_from}-{m.covered_to}",
                f"{m.tokens_before:,}",
                f"{m.tokens_after:,}",
                _safe(m.strategy),
                _safe(m.model or "-"),
                _when(m.created_at),
                "yes" if m.automatic else "no",
            )
        _out.print(marks)


def _thread_dict(t: ThreadSummary) -> dict[str, Any]:
    return {
        "thread_id": t.thread_id,
        "framework": t.framework,
        "created_at": t.created_at.isoformat() if t.created_at else None,
        "messages": t.messages,
        "compactions": t.compactions,
        "checkpoints": t.checkpoints,
        "entries": t.entries,
        "storage_bytes": t.storage_bytes,
        "storage_by_table": dict(t.storage),
    }


def _details_dict(details: ThreadDetails) -> dict[str, Any]:
    info = details.summary
    summary: dict[str, Any] = {"framework": info.framework, "created": info.created_at}
    if info.framework == "langgraph":
        summary["checkpoints"] = info.checkpoints
        latest = details.latest_checkpoint
        if latest is not None:
            summary["latest checkpoint"] = latest.checkpoint_id
            summary["latest checkpoint time"] = latest.timestamp
            summary["latest step"] = latest.step
            summary["messages in the state"] = latest.messages if latest.messages is not None else "-"
            summary["pending writes"] = latest.pending_writes
    else:
        record = details.conversation
        if record is not None:
            summary["messages in the history"] = record.messages
            summary["entries"] = info.entries
            summary["branches left"] = record.branches
            summary["revision"] = record.revision
            summary["updated"] = record.updated_at
            if record.forked_from:
                summary["forked from"] = record.forked_from
    summary["original messages (transcript)"] = details.original_messages
    if details.view_messages is not None:
        summary["messages in the view"] = details.view_messages
    summary["messages stored (log rows)"] = info.messages
    summary["compaction markers"] = info.compactions
    summary["storage (total)"] = _size(info.storage_bytes)
    return {
        "thread_id": info.thread_id,
        "summary": summary,
        "storage": dict(info.storage),
        "compactions": [{"at": m.at, **m.marker.to_dict()} for m in details.markers],
    }


@app.command()
def export(
    db_url: Annotated[str, _DB_ARGUMENT],
    thread: Annotated[
        str, typer.Argument(metavar="THREAD", help="The thread (or conversation) id.", show_default=False)
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="The file to write.", show_default=False)],
    to_format: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Output format; default: langchain for LangGraph threads, pydantic-ai for conversations.",
        ),
    ] = None,
    view: Annotated[
        bool,
        typer.Option(
            "--view",
            help="Write the view instead: the history as last stored, which is what the model was last "
            "sent plus what came after (summaries, cleared copies and notices in place of what they "
            "replaced).",
        ),
    ] = False,
) -> None:
    """Write a thread's original transcript (every original message, each once, never edited) to a file."""
    with _errors(), _working("exporting the thread"), _database(db_url) as db:
        fmt = _format_option(to_format)
        _check_writable(output)
        info = _thread(db, thread)
        transcript = db.transcript(thread)
        fmt = fmt or ("langchain" if info.framework == "langgraph" else "pydantic-ai")
        messages = (transcript.view or []) if view and transcript is not None else None
        if transcript is not None and messages is None:
            messages = transcript.messages
        if transcript is None or not messages:
            raise CliError(f"thread {thread!r} has no messages to export", EXIT_NOT_FOUND)
        write_transcript(messages, output, fmt)
        what = "messages of the view" if view else "original messages"
        _say(
            f"wrote {len(messages)} {what} of thread {thread!r} to {output} ({fmt}); "
            f"{len(transcript.compactions)} compaction marker(s): `historykit show` lists them"
        )
