"""What the transcript commands share: reading a file, the format option, checking where output goes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from historykit._tokens import DEFAULT_CONTEXT_WINDOW
from historykit.cli._app import EXIT_NOT_FOUND, CliError
from historykit.formats import FORMATS, TranscriptFile, read_transcript


def _read(path: Path, format: str | None) -> TranscriptFile:
    if not path.exists():
        raise CliError(f"{path}: no such file", EXIT_NOT_FOUND)
    return read_transcript(path, format)


def _format_option(format: str | None) -> str | None:
    if format is None:
        return None
    from historykit.formats import resolve_format

    return resolve_format(format)


_FROM_HELP = f"Input format ({', '.join(FORMATS)}); detected from the content when not given."
_PIPELINE_HELP = (
    "Processors to run: `default` or e.g. dedupe,clear:keep=5,strip,truncate, "
    "summarize:model=openai:gpt-4o-mini (see `historykit --help`)."
)


def _window_option(what: str) -> Any:
    """`--window`/`-w`, optional: without it a transcript's own window is used (the one a Codex
    rollout records, else its model's from genai-prices, else the default)."""
    return typer.Option(
        "--window",
        "-w",
        min=1,
        help=f"{what} Default: the transcript's: the one a Codex rollout records, else its model's "
        f"(genai-prices), else {DEFAULT_CONTEXT_WINDOW:,}.",
        show_default=False,
    )


def _check_writable(path: Path) -> None:
    parent = path.expanduser().resolve().parent
    if not parent.is_dir():
        raise CliError(f"{path}: the directory {parent} does not exist", EXIT_NOT_FOUND)
