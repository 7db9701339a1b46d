"""`python -m historykit.demo`: the options, the two runs with their live display, the printout."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from historykit._tokens import TokenCounter
from historykit.demo._langgraph import run_langgraph
from historykit.demo._live import LiveGauge
from historykit.demo._pydantic_ai import run_pydantic_ai
from historykit.demo._render import print_report, print_threads, print_where, shown_url
from historykit.demo._replay_run import DEFAULT_WINDOW, ReplayRun
from historykit.errors import CorruptRowError, SchemaError
from historykit.testing import Recording

DEFAULT_DATABASE = Path(".historykit-demo") / "demo.db"
"""Where the demo keeps its SQLite database, relative to the working directory."""


def _database(value: str | None) -> tuple[str, Path | None]:
    """The SQLAlchemy URL for `--db`, and the SQLite file when it is one."""
    if value is not None and "://" in value:
        on_disk = value.split(":///", 1)[1] if value.startswith("sqlite:///") else None
        return value, Path(on_disk).resolve() if on_disk else None
    path = Path(value or DEFAULT_DATABASE).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}", path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m historykit.demo",
        description="Replay a real agent session through Pydantic AI and LangGraph with historykit, offline.",
    )
    parser.add_argument(
        "--window", type=int, default=DEFAULT_WINDOW, help="context window in tokens (default: %(default)s)"
    )
    parser.add_argument(
        "--db",
        default=None,
        metavar="PATH_OR_URL",
        help=f"SQLite file or SQLAlchemy URL for the store and the saver (default: {DEFAULT_DATABASE})",
    )
    parser.add_argument(
        "--session",
        type=Path,
        default=None,
        metavar="FILE",
        help="replay this transcript instead of the sample",
    )
    parser.add_argument(
        "--delay",
        type=float,
        default=None,
        metavar="SECONDS",
        help="pause per model call, to follow the gauge (default: 0.05 in a terminal, else 0)",
    )
    parser.add_argument(
        "--only", choices=("pydantic-ai", "langgraph"), default=None, help="replay in one framework only"
    )
    return parser


def _quiet_pydantic_ai_banner() -> None:
    """The demo owns its screen: Pydantic AI's first-run banner would print into the live gauge."""
    try:
        import pydantic_ai
    except ImportError:
        return
    if hasattr(pydantic_ai, "BANNER_ENABLED"):
        pydantic_ai.BANNER_ENABLED = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns the exit code (0 done, 1 nothing could run, 2 bad input)."""
    args = _parser().parse_args(argv)
    console = Console(highlight=False)
    _quiet_pydantic_ai_banner()
    if args.window <= 0:
        _error(f"--window must be a positive number of tokens, got {args.window}")
        return 2
    if args.delay is not None and args.delay < 0:
        _error(f"--delay must not be negative, got {args.delay}")
        return 2
    try:
        recording = Recording.load(args.session)
    except (OSError, ValueError, TypeError) as exc:
        _error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return 2
    url, db_file = _database(args.db)
    delay = args.delay if args.delay is not None else (0.05 if console.is_terminal else 0.0)
    counter = TokenCounter()
    raw = recording.raw_sizes(counter)

    console.rule("[bold]historykit demo")
    source = (
        "the bundled sample, see historykit/data/SAMPLE-SOURCE.md" if args.session is None else "your file"
    )
    total = sum(counter.count_message(m) for m in recording.messages)
    console.print(
        Text.assemble(
            "Replaying ",
            (recording.name, "bold"),
            f" ({source}): a real agent session of {len(recording.messages)} messages and "
            f"{recording.model_calls} model calls, {total:,} tokens.\n",
            "No LLM is called: the model answers each call with the session's next assistant message, "
            "each tool returns its recorded result. historykit's default pipeline runs before every "
            f"model call, persistent, for a {args.window:,}-token window (from the model's profile). "
            "Every call is saved to SQLite as it happens.",
        )
    )
    runs: list[ReplayRun] = []
    for framework in [args.only] if args.only else ["pydantic-ai", "langgraph"]:
        console.print()
        number = len(runs) + 1
        try:
            run = _run(framework, number, recording, url, args.window, console, counter, delay)
        except ImportError as exc:
            console.print(Text(f"{framework} skipped: {exc} (pip install 'historykit[all]')", style="yellow"))
            continue
        except KeyboardInterrupt:
            _error("interrupted")
            return 130
        except Exception as exc:
            if not _is_database_error(exc):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            _error(f"the database {shown_url(url)} cannot be used: {first}")
            return 1
        for note in run.notes:
            console.print(Text(note, style="yellow"))
        runs.append(run)
    if not runs:
        _error("neither Pydantic AI nor LangGraph could run: pip install 'historykit[all]'")
        return 1
    print_report(console, recording, runs, args.window, raw)
    print_threads(console, runs)
    print_where(console, url, db_file, args)
    return 0


def _is_database_error(exc: BaseException) -> bool:
    """A database that cannot be reached, or holds something else: reported in one line."""
    from sqlalchemy.exc import SQLAlchemyError

    return isinstance(exc, (SQLAlchemyError, SchemaError, CorruptRowError))


def _error(message: str) -> None:
    print(f"historykit demo: error: {message}", file=sys.stderr)


def _run(
    framework: str,
    number: int,
    recording: Recording,
    url: str,
    window: int,
    console: Console,
    counter: TokenCounter,
    delay: float,
) -> ReplayRun:
    import historykit

    pipeline = historykit.default_pipeline()
    if framework == "pydantic-ai":
        title = f"{number}. Pydantic AI: an Agent with HistoryKit, saved in SQLModelConversationStore"
    else:
        title = f"{number}. LangGraph: create_agent with HistoryKitMiddleware, saved by SQLModelSaver"
    with LiveGauge(console, title, recording.model_calls, window, pipeline.usage.warn_at) as gauge:
        options: dict[str, Any] = {
            "window": window,
            "database": url,
            "counter": counter,
            "on_call": gauge.call,
            "on_report": gauge.report,
            "delay": delay,
        }
        if framework == "pydantic-ai":
            return asyncio.run(run_pydantic_ai(recording, pipeline, **options))
        return run_langgraph(recording, pipeline, **options)
