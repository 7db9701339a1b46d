"""`historykit doctor`: check every stored thread against the provider rules, and repair on request."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from historykit._pipeline import Pipeline
from historykit.cli._app import EXIT_PROBLEMS, _classify, _errors, _state, app
from historykit.cli._database import _DB_ARGUMENT, _database
from historykit.cli._render import _out, _Progress, _safe, _say

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from historykit.checkpointers._inspection import DatabaseInspector, ThreadSummary


def _saver(url: URL) -> Any:
    from historykit.checkpointers import SQLModelSaver

    return SQLModelSaver(url)


def _store(url: URL) -> Any:
    from historykit.checkpointers import SQLModelConversationStore

    return SQLModelConversationStore(url)


@dataclass
class _Diagnosis:
    thread_id: str
    framework: str
    messages: int
    violations: list[str]
    status: str
    """`ok`, `violations`, `repaired`, `not repaired: <why>`, `skipped: <why>`, or `unreadable: <why>`
    (the thread's rows could not be read: a corrupt row, named with its table)."""

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@app.command()
def doctor(
    db_url: Annotated[str, _DB_ARGUMENT],
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Write a repaired checkpoint (LangGraph) or save a repaired history (Pydantic AI) for each "
            "thread with violations, through the store's normal write path; nothing is edited in place.",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Check every stored thread's current history against the provider rules (exit 4 when broken)."""
    with _errors(), _database(db_url) as db:
        found = db.threads()
        results: list[_Diagnosis] = []
        with _Progress("checking threads", len(found)) as progress:
            saver = _saver(db.url) if any(t.framework == "langgraph" for t in found) else None
            store = _store(db.url) if any(t.framework != "langgraph" for t in found) else None
            try:
                for n, info in enumerate(found, start=1):
                    # One broken thread (a corrupt row) is that thread's finding, not the end of the check.
                    try:
                        if info.framework == "langgraph":
                            results.append(_doctor_langgraph(saver, info, repair))
                        else:
                            results.append(asyncio.run(_doctor_pydantic_ai(store, info, repair)))
                    except Exception as exc:
                        if _state["debug"]:
                            raise
                        message, _ = _classify(exc)
                        results.append(
                            _Diagnosis(info.thread_id, info.framework, 0, [], f"unreadable: {message}")
                        )
                    progress.update(n)
            finally:
                if saver is not None:
                    saver.close()
                if store is not None:
                    asyncio.run(store.aclose())
        broken = [
            r for r in results if r.status not in ("ok", "repaired") and not r.status.startswith("skipped")
        ]
        if json_out:
            sys.stdout.write(json.dumps([r.to_dict() for r in results], indent=2) + "\n")
        else:
            _print_diagnoses(db, results)
        if broken:
            raise typer.Exit(EXIT_PROBLEMS)


def _print_diagnoses(db: DatabaseInspector, results: list[_Diagnosis]) -> None:
    if not results:
        _say(f"no threads in {db.where}")
        return
    _say(f"{len(results)} thread(s) in {db.where}", style="bold")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for header in ("thread", "framework", "messages", "violations", "status"):
        table.add_column(
            header,
            justify="right" if header in ("messages", "violations") else "left",
            overflow="fold",
            min_width=min(30, max(len(r.thread_id) for r in results)) if header == "thread" else None,
        )
    for r in results:
        table.add_row(
            _safe(r.thread_id), r.framework, str(r.messages), str(len(r.violations)), _safe(r.status)
        )
    _out.print(table)
    for r in results:
        for v in r.violations[:5]:
            _say(f"  {r.thread_id}: {v}")
        if len(r.violations) > 5:
            _say(f"  {r.thread_id}: ... and {len(r.violations) - 5} more")


def _violations(messages: Sequence[Any]) -> list[str]:
    from historykit._validity import check

    return [str(v) for v in check(messages)] if messages else []


def _repaired(messages: Sequence[Any]) -> list[Any]:
    from historykit.processors import Repair

    return list(Pipeline([Repair()]).run(messages).messages)


def _doctor_langgraph(saver: Any, info: ThreadSummary, repair: bool) -> _Diagnosis:
    config = {"configurable": {"thread_id": info.thread_id, "checkpoint_ns": ""}}
    latest = saver.get_tuple(config)
    if latest is None:
        return _Diagnosis(info.thread_id, info.framework, 0, [], "skipped: no checkpoint")
    messages = latest.checkpoint.get("channel_values", {}).get("messages")
    if not isinstance(messages, list):
        return _Diagnosis(info.thread_id, info.framework, 0, [], "skipped: no 'messages' channel")
    found = _violations(messages)
    if not found:
        return _Diagnosis(info.thread_id, info.framework, len(messages), [], "ok")
    if not repair:
        return _Diagnosis(info.thread_id, info.framework, len(messages), found, "violations")
    if latest.pending_writes:
        return _Diagnosis(
            info.thread_id,
            info.framework,
            len(messages),
            found,
            "not repaired: the latest checkpoint has pending writes (a run in progress or interrupted)",
        )
    fixed = _repaired(messages)
    left = _violations(fixed)
    _put_repaired_checkpoint(saver, latest, fixed, len(found))
    status = "repaired" if not left else f"not repaired: {len(left)} violation(s) remain after Repair"
    return _Diagnosis(info.thread_id, info.framework, len(messages), found, status)


def _put_repaired_checkpoint(saver: Any, latest: Any, messages: list[Any], violations: int) -> None:
    """A new checkpoint after the latest, whose messages are the repaired ones, written with `put`."""
    from langgraph.checkpoint.base import copy_checkpoint, create_checkpoint

    step = int(latest.metadata.get("step", -1)) + 1
    base = copy_checkpoint(latest.checkpoint)
    version = saver.get_next_version(base["channel_versions"].get("messages"), None)
    base["channel_values"]["messages"] = messages
    base["channel_versions"]["messages"] = version
    checkpoint = create_checkpoint(base, None, step)
    metadata = {
        "source": "update",
        "step": step,
        "parents": dict(latest.metadata.get("parents", {})),
        "historykit": {
            "repaired_by": "historykit doctor --repair",
            "violations": violations,
            "at": datetime.now(timezone.utc).isoformat(),
        },
    }
    saver.put(latest.config, checkpoint, metadata, {"messages": version})


async def _doctor_pydantic_ai(store: Any, info: ThreadSummary, repair: bool) -> _Diagnosis:
    conversation = await store.load(info.thread_id)
    if conversation is None:
        return _Diagnosis(info.thread_id, info.framework, 0, [], "skipped: no conversation record")
    messages = list(conversation.messages)
    found = _violations(messages)
    if not found:
        return _Diagnosis(info.thread_id, info.framework, len(messages), [], "ok")
    if not repair:
        return _Diagnosis(info.thread_id, info.framework, len(messages), found, "violations")
    from pydantic_ai.conversation import Conversation

    fixed = _repaired(messages)
    left = _violations(fixed)
    # A conversation that was not loaded from the store: `save` compares it with the stored history
    # and branches the rewritten part off, leaving the original history stored as a branch.
    rewritten = Conversation(
        messages=fixed,
        usage=conversation.usage,
        conversation_id=conversation.conversation_id,
        deferred_tool_requests=conversation.deferred_tool_requests,
        revision=conversation.revision,
    )
    await store.save(rewritten)
    status = "repaired" if not left else f"not repaired: {len(left)} violation(s) remain after Repair"
    return _Diagnosis(info.thread_id, info.framework, len(messages), found, status)
