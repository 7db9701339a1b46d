"""JSON Lines, read with errors that name the file and the line, and written one object a line."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from historykit.formats._detect import TranscriptFormatError


def read_jsonl_objects(path: Path, format_name: str) -> list[tuple[int, dict[str, Any]]]:
    """`(line number, object)` for every non-blank line; `TranscriptFormatError` names the bad line."""
    text = _read_text(path)
    out: list[tuple[int, dict[str, Any]]] = []
    lines = text.splitlines()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            hint = (
                " (the line is cut short: was the file still being written?)" if lineno == len(lines) else ""
            )
            raise TranscriptFormatError(
                f"{path}:{lineno}: not valid JSON in a {format_name} file: {exc.msg} at column "
                f"{exc.colno}{hint}"
            ) from None
        if not isinstance(record, dict):
            raise TranscriptFormatError(
                f"{path}:{lineno}: expected a JSON object in a {format_name} file, "
                f"got {type(record).__name__}"
            )
        out.append((lineno, record))
    return out


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptFormatError(f"{path}: not UTF-8 text (byte {exc.start}): not a transcript") from None


def dump_line(record: Any) -> str:
    """One JSON object on one line, non-ASCII text kept as is."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)


def write_jsonl(path: Path, records: Iterable[Any]) -> None:
    """Write `records` one a line, replacing `path` only once every line is written."""
    text = "".join(dump_line(record) + "\n" for record in records)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(path)
