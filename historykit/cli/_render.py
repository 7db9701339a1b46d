"""Output: consoles that survive a pipe, status lines, user data shown as text, progress on stderr."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.text import Text


def _console(stderr: bool = False) -> Console:
    """A console laid out for `_PIPE_WIDTH` columns when its output is a pipe or a file.

    On a terminal Rich uses the terminal's width; elsewhere it would assume 80. `COLUMNS` still wins
    when set. Status lines (`_say`) and the headings and notes of an analysis are never wrapped, so
    paths stay whole; tables fold their long cells to fit.
    """
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, highlight=False, width=_PIPE_WIDTH)
    return console


_PIPE_WIDTH = 120
"""Columns when writing to a pipe or a file: what a log viewer or a pager shows without scrolling
sideways. A table wider than this (one long path in a cell) folds that cell rather than padding every
row to its width."""

_out = _console()
_err = _console(stderr=True)


def _say(text: str, *, err: bool = False, style: str | None = None) -> None:
    """A status line: never re-wrapped (paths stay whole for copy and paste), no markup."""
    (_err if err else _out).print(_safe(text), highlight=False, soft_wrap=True, style=style)


def _safe(text: object) -> Text:
    """User data (thread ids, paths, messages) as plain text: never Rich markup, control characters
    shown escaped (`\\x1b`) so they cannot restyle or hide what the terminal shows."""
    return Text("".join(c if c.isprintable() or c in "\t\n" else repr(c)[1:-1] for c in str(text)))


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return " / ".join(lines) if lines else "(no details)"


class _Progress:
    """A progress bar on stderr that appears only once the work has taken a second, on a terminal."""

    def __init__(self, description: str, total: int) -> None:
        self.description = description
        self.total = total
        self.start = time.perf_counter()
        self.bar: Any = None
        self.task: Any = None
        self.enabled = _err.is_terminal

    def update(self, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.start < 1.0:
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("{task.description}", markup=False),  # a file name is not markup
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=_err,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=total or self.total)
        self.bar.update(self.task, completed=done, total=total or self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def _working(description: str) -> Iterator[None]:
    """A spinner on stderr for work with no steps to count, shown once it has taken a second."""
    if not _err.is_terminal:
        yield
        return
    import threading

    status = _err.status(_safe(description))
    timer = threading.Timer(1.0, status.start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        status.stop()


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else ""
