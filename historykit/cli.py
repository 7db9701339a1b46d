"""The `historykit` command: look at a transcript's tokens, try processors on it, browse stored threads.

```
historykit analyze FILE... [--window N] [--pipeline SPEC] [--json] [--plot out.png] [--from F]
historykit compact FILE --window N [--pipeline SPEC] -o OUT [--from F] [--to F] [--json]
historykit threads DB_URL [--json]
historykit show DB_URL THREAD [--json]
historykit export DB_URL THREAD -o FILE [--to F]
historykit doctor DB_URL [--repair] [--json]
```

Transcripts are read in any of the formats of `historykit.formats` (the corpus chat JSONL, Pydantic
AI JSON, LangChain JSON, Claude Code session logs, Codex CLI rollouts), detected from the content
unless `--from` names one; `--to` names the format written (`compact` writes the input's format
unless told). `--format`/`-f`, the earlier name of both, still works for one release, with a warning.
Output that is not a terminal (a pipe, a file) is never cut to 80 columns. `DB_URL` is a SQLAlchemy URL (`sqlite:///agent.db`,
`postgresql+psycopg://user@host/db`) or the path of a SQLite file.

Pipeline SPEC: `default` (what `historykit.default_pipeline()` builds) or processor names separated
by commas, each with optional `:option=value` settings, run in the order given (a `:` starts a new
setting only when `option=` follows it, so values may hold colons:
`summarize:model=openai:gpt-4o-mini`); `Repair` is always
the last step (added when the spec does not end with `repair`). Names: `dedupe`
(DedupeFileReads), `clear` (ClearToolResults), `strip` (StripThinking), `truncate`
(PairwiseTruncate), `summarize` (Summarize), `repair` (Repair). Values are numbers, `true` /
`false`, `none`, text, or lists joined with `+`. Examples: `dedupe,clear,strip,truncate`,
`clear:keep=5:min_gain=2000,truncate:max_fraction=0.7`, `clear:exclude_tools=Read+Grep`.

Exit codes, for scripts: 0 success; 1 runtime failure (a processor, a database connection, a
missing optional dependency); 2 bad input or usage (unreadable, empty, truncated or unknown
transcript, a database of another schema or a newer version, bad options); 3 not found (a file, a
database file, a thread); 4 `doctor` found provider-rule violations it did not repair.
Every error is one line on stderr, `historykit: error: ...`; `--debug` shows the traceback.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from historykit.errors import CorruptRowError, HistoryKitError, SchemaError
from historykit.formats import (
    FORMATS,
    TranscriptFile,
    TranscriptFormatError,
    read_transcript,
    write_transcript,
)
from historykit.messages import Message
from historykit.pipeline import HistoryProcessor, Pipeline
from historykit.tokens import DEFAULT_CONTEXT_WINDOW, TokenCounter

__all__ = [
    "EXIT_FAILURE",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "PROCESSOR_NAMES",
    "CliError",
    "app",
    "build_pipeline",
]

EXIT_OK = 0
EXIT_FAILURE = 1
"""A runtime failure: a processor raised, the database could not be reached, a dependency is missing."""
EXIT_USAGE = 2
"""Bad input or usage: the transcript or database is not what it must be, an option is wrong."""
EXIT_NOT_FOUND = 3
"""A file, a database file or a thread that does not exist."""
EXIT_PROBLEMS = 4
"""`doctor` found provider-rule violations and did not repair them (all of them)."""

_EPILOG = """\b
Transcript formats (detected, or --from; written as --to): chat (the corpus
JSONL), pydantic-ai, langchain, claude-code, codex.
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


def _console(stderr: bool = False) -> Console:
    """A console that is not cut to 80 columns when its output is a pipe or a file.

    On a terminal Rich uses the terminal's width; elsewhere it would assume 80 and fold tables.
    `COLUMNS` still wins when set.
    """
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, highlight=False, width=_PIPE_WIDTH)
    return console


_PIPE_WIDTH = 1000
"""Columns when writing to a pipe: wide enough that no table folds (tables take only what they need)."""

_out = _console()
_err = _console(stderr=True)
_state = {"debug": os.environ.get("HISTORYKIT_DEBUG", "") not in ("", "0")}


class CliError(HistoryKitError):
    """An error the command reports as one line, with the exit code scripts rely on."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------
# Errors and progress
# ---------------------------------------------------------------------------------------------


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


def _fail(message: str, code: int) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.write(f"historykit: error: {_safe(_one_line(message)).plain}\n")
    sys.stderr.flush()
    raise typer.Exit(code)


def _classify(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit code of an exception."""
    if isinstance(exc, CliError):
        return str(exc), exc.code
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


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")
    ] = False,
) -> None:
    if debug:
        _state["debug"] = True


# ---------------------------------------------------------------------------------------------
# Pipeline specs
# ---------------------------------------------------------------------------------------------

PROCESSOR_NAMES: dict[str, tuple[str, str]] = {
    "dedupe": ("historykit.processors.dedupe_file_reads", "DedupeFileReads"),
    "clear": ("historykit.processors.clear_tool_results", "ClearToolResults"),
    "strip": ("historykit.processors.strip_thinking", "StripThinking"),
    "truncate": ("historykit.processors.pairwise_truncate", "PairwiseTruncate"),
    "summarize": ("historykit.processors.summarize", "Summarize"),
    "repair": ("historykit.processors.repair", "Repair"),
}
"""Pipeline-spec name -> (module, class) of each processor."""

_NAME_ALIASES = {
    "dedupefilereads": "dedupe",
    "dedupe_file_reads": "dedupe",
    "cleartoolresults": "clear",
    "clear_tool_results": "clear",
    "stripthinking": "strip",
    "strip_thinking": "strip",
    "pairwisetruncate": "truncate",
    "pairwise_truncate": "truncate",
    "summary": "summarize",
    "summarise": "summarize",
}


def build_pipeline(spec: str) -> Pipeline:
    """The pipeline a spec names (see the module docstring); `CliError` (exit 2) says what is wrong."""
    text = spec.strip()
    if not text:
        raise CliError("empty pipeline spec: give `default` or names such as dedupe,clear,strip,truncate")
    if text.lower() == "default":
        return _default_pipeline()
    steps: list[HistoryProcessor] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise CliError(f"pipeline spec {spec!r}: an empty step (two commas in a row?)")
        steps.append(_build_step(item, spec))
    if not steps or type(steps[-1]).__name__ != "Repair":
        steps.append(_processor_class("repair")())
    return Pipeline(steps)


def _default_pipeline() -> Pipeline:
    import historykit

    factory = getattr(historykit, "default_pipeline", None)
    if factory is None:
        raise CliError(
            "the default pipeline (historykit.default_pipeline) is not available in this installation; "
            "name the processors instead, e.g. --pipeline dedupe,clear,strip,truncate",
            EXIT_FAILURE,
        )
    pipeline = factory()
    return pipeline if isinstance(pipeline, Pipeline) else Pipeline([pipeline])


def _processor_class(name: str) -> Any:
    module_name, class_name = PROCESSOR_NAMES[name]
    import historykit.processors as processors

    cls = getattr(processors, class_name, None)
    if cls is None:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            raise CliError(
                f"the processor {name!r} ({class_name}) is not available in this installation",
                EXIT_FAILURE,
            ) from None
    return cls


_SETTING_START = re.compile(r":(?=\s*[A-Za-z_][\w-]*\s*=)")
"""A `:` that starts a setting (`:option=`); any other colon belongs to a value (`openai:gpt-4o`)."""


def _build_step(item: str, spec: str) -> HistoryProcessor:
    raw_name, _, rest = item.partition(":")
    if rest and not _SETTING_START.match(":" + rest):
        raise CliError(f"pipeline spec {spec!r}: {raw_name.strip()} setting {rest!r} is not option=value")
    settings = _SETTING_START.split(":" + rest)[1:] if rest else []
    key = raw_name.strip().lower().replace("-", "_")
    name = _NAME_ALIASES.get(key, key)
    if name == "default":
        raise CliError(
            f"pipeline spec {spec!r}: `default` stands alone, it cannot be combined with other steps"
        )
    if name not in PROCESSOR_NAMES:
        raise CliError(
            f"pipeline spec {spec!r}: unknown processor {raw_name.strip()!r}; valid names: "
            f"default, {', '.join(PROCESSOR_NAMES)}"
        )
    cls = _processor_class(name)
    options = _settable_options(cls)
    kwargs: dict[str, Any] = {}
    for setting in settings:
        option, sep, value = setting.partition("=")
        option = option.strip().replace("-", "_")
        if not sep or not option:
            raise CliError(f"pipeline spec {spec!r}: {name} setting {setting!r} is not option=value")
        if option not in options:
            valid = ", ".join(options) or "(none)"
            raise CliError(f"pipeline spec {spec!r}: {name} has no option {option!r}; its options: {valid}")
        kwargs[option] = _parse_value(value.strip())
    try:
        processor = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise CliError(f"pipeline spec {spec!r}: {item}: {_one_line(str(exc))}") from None
    if not isinstance(processor, HistoryProcessor):
        raise CliError(f"pipeline spec {spec!r}: {name} did not build a historykit processor", EXIT_FAILURE)
    return processor


_PLAIN = (int, float, bool, str, tuple, list, frozenset, set, type(None))


def _settable_options(cls: Any) -> list[str]:
    """Constructor options a spec may set: those with plain values (numbers, text, flags, lists)."""
    out = []
    for param in inspect.signature(cls).parameters.values():
        if param.name.startswith("_") or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = param.default
        if default is inspect.Parameter.empty or isinstance(default, _PLAIN):
            out.append(param.name)
    return out


def _parse_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    for convert in (int, float):
        try:
            return convert(text.replace("_", ""))
        except ValueError:
            pass
    if "+" in text:
        return tuple(v for v in (s.strip() for s in text.split("+")) if v)
    return text


# ---------------------------------------------------------------------------------------------
# Transcripts: analyze and compact
# ---------------------------------------------------------------------------------------------


def _read(path: Path, format: str | None) -> TranscriptFile:
    if not path.exists():
        raise CliError(f"{path}: no such file", EXIT_NOT_FOUND)
    return read_transcript(path, format)


def _format_option(format: str | None) -> str | None:
    if format is None:
        return None
    from historykit.formats import resolve_format

    return resolve_format(format)


def _format_flags(new: str | None, old: str | None, flag: str) -> str | None:
    """The format `flag` (`--from`/`--to`) names, or the deprecated `--format`'s, with a warning."""
    if old is not None:
        if new is not None and _format_option(new) != _format_option(old):
            raise CliError(f"{flag} {new} and --format {old} disagree: give {flag} only")
        _say(
            f"historykit: warning: --format/-f is deprecated here and goes in the next release; use {flag}",
            err=True,
        )
        new = new if new is not None else old
    return _format_option(new)


_FROM_HELP = f"Input format ({', '.join(FORMATS)}); detected from the content when not given."
_LEGACY_FORMAT = typer.Option(
    "--format", "-f", hidden=True, help="Deprecated: --from (input) or --to (output)."
)
_PIPELINE_HELP = (
    "Processors to run: `default` or e.g. dedupe,clear:keep=5,strip,truncate, "
    "summarize:model=openai:gpt-4o-mini (see `historykit --help`)."
)


@app.command()
def analyze(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE...", help="Transcript files.", show_default=False)
    ],
    window: Annotated[
        int, typer.Option("--window", "-w", min=1, help="Context window in tokens the replay runs under.")
    ] = DEFAULT_CONTEXT_WINDOW,
    pipeline: Annotated[str, typer.Option("--pipeline", "-p", help=_PIPELINE_HELP)] = "default",
    json_out: Annotated[
        bool, typer.Option("--json", help="Print a JSON array, one object per file read.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Write a PNG of the context size per call, before and after."),
    ] = None,
    from_format: Annotated[str | None, typer.Option("--from", help=_FROM_HELP)] = None,
    top: Annotated[
        int, typer.Option("--top", min=1, help="How many of the largest tool outputs to list.")
    ] = 10,
    legacy_format: Annotated[str | None, _LEGACY_FORMAT] = None,
) -> None:
    """Where a transcript's tokens go, and what each processor would save, replayed call by call.

    Each file that cannot be read is reported on its own line (stderr) and the others are still
    analysed; the exit code is then that of the failure (2 for an unreadable transcript).
    """
    from historykit.analysis import Analysis
    from historykit.analysis import analyze as run_analysis
    from historykit.formats import compaction_boundaries

    with _errors():
        fmt = _format_flags(from_format, legacy_format, "--from")
        built = build_pipeline(pipeline)
        if plot is not None:
            _check_writable(plot)
        analyses: list[Analysis] = []
        failed: list[int] = []
        for path in files:
            started = time.perf_counter()
            try:
                with _working(f"reading {path.name}"):
                    transcript = _read(path, fmt)
                with _Progress(f"replaying {path.name}", _model_calls(transcript.messages)) as progress:
                    analysis = run_analysis(
                        transcript.messages,
                        window=window,
                        pipeline=Pipeline(built.processors, counter=TokenCounter()),
                        name=str(path),
                        format=transcript.format,
                        top=top,
                        on_call=progress.update,
                        boundaries=compaction_boundaries(transcript.messages),
                    )
            except Exception as exc:
                if _state["debug"] or len(files) == 1:
                    raise
                message, code = _classify(exc)
                failed.append(code)
                sys.stdout.flush()
                sys.stderr.write(f"historykit: error: {_safe(_one_line(message)).plain}\n")
                continue
            analyses.append(analysis)
            if not json_out:
                _out.print(analysis)
                _say(f"(analysed in {time.perf_counter() - started:.2f} s)\n")
        if json_out:
            sys.stdout.write(json.dumps([a.to_dict() for a in analyses], indent=2, ensure_ascii=False) + "\n")
        if plot is not None and analyses:
            _plot(analyses, plot)
            _say(f"wrote the plot to {plot}", err=json_out)
        if failed:
            if not json_out:
                _say(
                    f"{len(failed)} of {len(files)} file(s) could not be analysed (see the errors above)",
                    err=True,
                )
            raise typer.Exit(max(failed))


def _model_calls(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if m.role == "assistant")


def _check_writable(path: Path) -> None:
    parent = path.expanduser().resolve().parent
    if not parent.is_dir():
        raise CliError(f"{path}: the directory {parent} does not exist", EXIT_NOT_FOUND)


def _plot(analyses: Sequence[Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"--plot needs matplotlib ({exc}): pip install 'historykit[notebooks]'") from exc
    fig, axes = plt.subplots(len(analyses), 1, figsize=(11, 3.8 * len(analyses)), squeeze=False)
    for analysis, ax in zip(analyses, axes[:, 0]):
        analysis.plot(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@app.command()
def compact(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="The transcript to compact.", show_default=False)
    ],
    window: Annotated[
        int, typer.Option("--window", "-w", min=1, help="Context window in tokens.", show_default=False)
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the processed history.", show_default=False)
    ],
    pipeline: Annotated[str, typer.Option("--pipeline", "-p", help=_PIPELINE_HELP)] = "default",
    from_format: Annotated[str | None, typer.Option("--from", help=_FROM_HELP)] = None,
    to_format: Annotated[
        str | None,
        typer.Option(
            "--to", help=f"Output format ({', '.join(FORMATS)}); the input's format when not given."
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    focus: Annotated[
        str | None,
        typer.Option(
            "--focus",
            help="Compact now (as --now) and tell the summarizer what to keep, e.g. "
            "'the details of the auth refactor'.",
            show_default=False,
        ),
    ] = None,
    now: Annotated[
        bool,
        typer.Option(
            "--now",
            help="Compact now, even below the pipeline's triggers: its Summarize step summarizes "
            "(a small history too); the marker records a manual compaction.",
        ),
    ] = False,
    legacy_format: Annotated[str | None, _LEGACY_FORMAT] = None,
) -> None:
    """Write the history the model would be sent next, processed, in the input's format or --to's.

    With --now or --focus, compact now, as Claude Code's /compact does: the pipeline's Summarize
    step summarizes whatever the triggers say, with the focus when given.
    """
    from historykit.validity import check

    with _errors():
        fmt = _format_flags(from_format, legacy_format, "--from")
        out_fmt = _format_option(to_format)
        if not file.exists():
            raise CliError(f"{file}: no such file", EXIT_NOT_FOUND)
        built = build_pipeline(pipeline)
        manual = now or focus is not None
        if manual and not any(p.compacts_on_request for p in built.processors):
            raise CliError(
                f"--{'focus' if focus is not None else 'now'} needs a pipeline with a Summarize step; "
                f"{pipeline!r} has none"
            )
        _check_writable(output)
        if output.expanduser().resolve() == file.expanduser().resolve():
            raise CliError(f"{output}: refusing to overwrite the input; write the result to another file")
        with _working(f"compacting {file.name}"):
            transcript = _read(file, fmt)
            out_fmt = out_fmt or transcript.format
            started = time.perf_counter()
            try:
                if manual:
                    result = built.compact(transcript.history, window, focus=focus)
                else:
                    result = built.run(transcript.history, window)
            except Exception as exc:
                raise RuntimeError(f"the pipeline failed on {file}: {exc}") from exc
            write_transcript(result.messages, output, out_fmt)
            report = result.report
            violations = check(result.messages)
            elapsed = time.perf_counter() - started
        if json_out:
            sys.stdout.write(
                json.dumps(_report_dict(report, transcript, output, violations, out_fmt), indent=2) + "\n"
            )
            return
        _print_report(report)
        converted = f" (converted from {transcript.format})" if out_fmt != transcript.format else ""
        _say(
            f"wrote {len(result.messages)} {out_fmt} messages{converted} ({report.tokens_after:,} tokens, "
            f"from {report.tokens_before:,}) to {output} in {elapsed:.2f} s"
        )
        if violations:
            _say(f"{len(violations)} provider-rule violation(s) remain: {violations[0]}")


def _print_report(report: Any) -> None:
    """A pipeline report as a table that fits a narrow terminal, then one line per change."""
    _say(
        f"{report.tokens_before:,} → {report.tokens_after:,} tokens; window {report.context_window:,}; "
        f"tokenizer {report.tokenizer}",
        style="bold",
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    width = max((len(s.processor) for s in report.steps), default=9)
    table.add_column("processor", min_width=min(width, 24))
    for header in ("before", "after", "msgs", "replaced", "removed", "added", "markers"):
        table.add_column(header, justify="right", no_wrap=True)
    for s in report.steps:
        n = s.notes
        table.add_row(
            _safe(s.processor),
            f"{s.tokens_before:,}",
            f"{s.tokens_after:,}",
            f"{s.messages_before}→{s.messages_after}",
            str(n.replaced),
            str(n.removed),
            str(n.added),
            str(len(n.markers)),
        )
    _out.print(table)
    for s in report.steps:
        for detail in s.notes.details:
            _say(f"  {s.processor}: {detail}")


def _report_dict(
    report: Any, transcript: TranscriptFile, output: Path, violations: Sequence[Any], out_format: str
) -> dict[str, Any]:
    return {
        "input": str(transcript.path),
        "output": str(output),
        "format": transcript.format,
        "output_format": out_format,
        "context_window": report.context_window,
        "tokenizer": report.tokenizer,
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "steps": [
            {
                "processor": s.processor,
                "tokens_before": s.tokens_before,
                "tokens_after": s.tokens_after,
                "messages_before": s.messages_before,
                "messages_after": s.messages_after,
                "replaced": s.notes.replaced,
                "removed": s.notes.removed,
                "added": s.notes.added,
                "markers": [m.to_dict() for m in s.notes.markers],
                "details": list(s.notes.details),
            }
            for s in report.steps
        ],
        "violations": [str(v) for v in violations],
    }


# ---------------------------------------------------------------------------------------------
# Stored threads: threads, show, export, doctor
# ---------------------------------------------------------------------------------------------

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


@dataclass
class _Thread:
    """What the tables say about one stored thread."""

    thread_id: str
    framework: str
    created_at: datetime | None
    messages: int = 0
    compactions: int = 0
    checkpoints: int = 0
    entries: int = 0
    storage: dict[str, int] = field(default_factory=dict)
    """Bytes of stored payload by table."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "framework": self.framework,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "messages": self.messages,
            "compactions": self.compactions,
            "checkpoints": self.checkpoints,
            "entries": self.entries,
            "storage_bytes": sum(self.storage.values()),
            "storage_by_table": dict(self.storage),
        }


class _Database:
    """A historykit database opened for inspection: checked first, never created or migrated."""

    def __init__(self, value: str) -> None:
        import sqlalchemy as sa

        from historykit.checkpointers.database import normalize_url

        self.url = _database_url(value)
        self.engine = sa.create_engine(
            _read_only(normalize_url(self.url).render_as_string(hide_password=False))
        )
        self.tables = self._check_schema()

    def close(self) -> None:
        self.engine.dispose()

    def _check_schema(self) -> set[str]:
        import sqlalchemy as sa

        from historykit.checkpointers.conversation_schema import CONVERSATIONS
        from historykit.checkpointers.database import SchemaError, SchemaVersionError
        from historykit.checkpointers.schema import CHECKPOINTS, CORE

        with self.engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
            if "historykit_schema" not in tables:
                found = ", ".join(sorted(tables)[:8]) or "no tables at all"
                raise SchemaError(
                    f"{_safe_url(self.url)} is not a historykit database: it has no historykit_schema table "
                    f"(it has {found})"
                )
            recorded = {
                row[0]: row[1]
                for row in conn.execute(sa.text("SELECT component, version FROM historykit_schema"))
            }
        for component in (CORE, CHECKPOINTS, CONVERSATIONS):
            version = recorded.get(component.name)
            if version is not None and version > component.version:
                raise SchemaVersionError(
                    f"{_safe_url(self.url)}: its historykit component {component.name!r} has schema version "
                    f"{version}, written by a newer historykit (this one reads up to {component.version}); "
                    "upgrade historykit to open it"
                )
            if version is not None:
                names = [str(m.__table__.name) for m in component.tables]  # type: ignore[attr-defined]
                missing = [name for name in names if name not in tables]
                if missing:
                    raise SchemaError(
                        f"{_safe_url(self.url)}: the historykit table(s) {', '.join(missing)} are missing "
                        f"(component {component.name!r} is recorded): the database was altered outside "
                        "historykit"
                    )
        if "core" not in recorded:
            raise SchemaError(f"{_safe_url(self.url)}: a historykit_schema table without the core component")
        return tables

    def threads(self, only: str | None = None) -> list[_Thread]:
        import sqlalchemy as sa

        with self.engine.connect() as conn:
            query = "SELECT thread_id, framework, created_at FROM historykit_thread"
            params: dict[str, Any] = {}
            if only is not None:
                query += " WHERE thread_id = :thread_id"
                params["thread_id"] = only
            rows = conn.execute(sa.text(query + " ORDER BY created_at, thread_id"), params).all()
            found = {r[0]: _Thread(r[0], r[1], _as_datetime(r[2])) for r in rows}
            if not found:
                return []

            def per_thread(sql: str, key: str = "thread_id") -> dict[str, tuple[Any, ...]]:
                where = f" WHERE {key} = :thread_id" if only is not None else ""
                result = conn.execute(sa.text(sql.format(where=where, key=key)), params).all()
                return {r[0]: tuple(r[1:]) for r in result}

            stats = per_thread(
                "SELECT {key}, count(*), coalesce(sum(length(data)), 0) FROM historykit_message{where} "
                "GROUP BY {key}"
            )
            for tid, (count, size) in stats.items():
                if tid in found:
                    found[tid].messages = int(count)
                    found[tid].storage["messages"] = int(size)
            for tid, (count,) in per_thread(
                "SELECT {key}, count(*) FROM historykit_compaction{where} GROUP BY {key}"
            ).items():
                if tid in found:
                    found[tid].compactions = int(count)
            if "historykit_checkpoint" in self.tables:
                for tid, (count, size) in per_thread(
                    "SELECT {key}, count(*), coalesce(sum(length(checkpoint)), 0) "
                    "FROM historykit_checkpoint{where} GROUP BY {key}"
                ).items():
                    if tid in found:
                        found[tid].checkpoints = int(count)
                        found[tid].storage["checkpoints"] = int(size)
                for table, label in (
                    ("historykit_blob", "channel values"),
                    ("historykit_write", "checkpoint writes"),
                ):
                    for tid, (size,) in per_thread(
                        f"SELECT {{key}}, coalesce(sum(length(data)), 0) FROM {table}{{where}} "
                        "GROUP BY {key}"
                    ).items():
                        if tid in found:
                            found[tid].storage[label] = int(size)
            if "historykit_conversation_entry" in self.tables:
                for tid, (count,) in per_thread(
                    "SELECT {key}, count(*) FROM historykit_conversation_entry{where} GROUP BY {key}"
                ).items():
                    if tid in found:
                        found[tid].entries = int(count)
        return list(found.values())

    def thread(self, thread_id: str) -> _Thread:
        found = self.threads(only=thread_id)
        if not found:
            raise CliError(f"thread {thread_id!r} is not in {_safe_url(self.url)}", EXIT_NOT_FOUND)
        return found[0]


def _read_only(url: str) -> str:
    """For SQLite, a read-only connection: inspecting a file must never change it."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return url
    path = Path(parsed.database).expanduser().resolve()
    return f"sqlite:///file:{path}?mode=ro&uri=true"


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def _as_datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


@contextmanager
def _database(value: str) -> Iterator[_Database]:
    db = _Database(value)
    try:
        yield db
    finally:
        db.close()


def _saver(db: _Database) -> Any:
    from historykit.checkpointers import SQLModelSaver

    return SQLModelSaver(db.url)


def _store(db: _Database) -> Any:
    from historykit.checkpointers import SQLModelConversationStore

    return SQLModelConversationStore(db.url)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@app.command()
def threads(
    db_url: Annotated[str, _DB_ARGUMENT],
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List the stored threads (LangGraph threads and Pydantic AI conversations)."""
    with _errors(), _working("reading the database"), _database(db_url) as db:
        found = db.threads()
        if json_out:
            sys.stdout.write(json.dumps([t.to_dict() for t in found], indent=2) + "\n")
            return
        if not found:
            _say(f"no threads in {_safe_url(db.url)}")
            return
        _say(f"{len(found)} thread(s) in {_safe_url(db.url)}", style="bold")
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
                _size(sum(t.storage.values())),
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
            info = db.thread(thread)
            details = _thread_details(db, info)
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
        markers = details["compactions"]
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
        for m in markers:
            marks.add_row(
                str(m["at"]),
                f"{m['covered_from']}-{m['covered_to']}",
                f"{m['tokens_before']:,}",
                f"{m['tokens_after']:,}",
                _safe(m["strategy"]),
                _safe(m["model"] or "-"),
                _when(_as_datetime(m["created_at"])),
                "yes" if m["automatic"] else "no",
            )
        _out.print(marks)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else ""


def _thread_details(db: _Database, info: _Thread) -> dict[str, Any]:
    summary: dict[str, Any] = {"framework": info.framework, "created": info.created_at}
    if info.framework == "langgraph":
        saver = _saver(db)
        try:
            latest = saver.get_tuple({"configurable": {"thread_id": info.thread_id, "checkpoint_ns": ""}})
            transcript = saver.transcript(info.thread_id)
        finally:
            saver.close()
        summary["checkpoints"] = info.checkpoints
        if latest is not None:
            summary["latest checkpoint"] = latest.checkpoint["id"]
            summary["latest checkpoint time"] = latest.checkpoint.get("ts")
            summary["latest step"] = latest.metadata.get("step")
            state = latest.checkpoint.get("channel_values", {}).get("messages")
            summary["messages in the state"] = len(state) if isinstance(state, list) else "-"
            summary["pending writes"] = len(latest.pending_writes or ())
    else:
        store = _store(db)
        try:
            record = asyncio.run(store.read_record(info.thread_id))
            history = asyncio.run(store.read_history(record.head_id)) if record is not None else []
            transcript = asyncio.run(store.transcript(info.thread_id))
        finally:
            asyncio.run(store.aclose())
        if record is not None:
            summary["messages in the history"] = len(history)
            summary["entries"] = info.entries
            summary["branches left"] = len(record.branches)
            summary["revision"] = record.revision
            summary["updated"] = record.updated_at
            if record.forked_from:
                summary["forked from"] = record.forked_from
    summary["original messages (transcript)"] = len(transcript.messages) if transcript is not None else 0
    if transcript is not None and transcript.view is not None:
        summary["messages in the view"] = len(transcript.view)
    summary["messages stored (log rows)"] = info.messages
    summary["compaction markers"] = info.compactions
    summary["storage (total)"] = _size(sum(info.storage.values()))
    compactions = [{"at": c.at, **c.marker.to_dict()} for c in (transcript.compactions if transcript else [])]
    return {
        "thread_id": info.thread_id,
        "summary": summary,
        "storage": info.storage,
        "compactions": compactions,
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
    legacy_format: Annotated[str | None, _LEGACY_FORMAT] = None,
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
        fmt = _format_flags(to_format, legacy_format, "--to")
        _check_writable(output)
        info = db.thread(thread)
        if info.framework == "langgraph":
            saver = _saver(db)
            try:
                transcript = saver.transcript(thread)
            finally:
                saver.close()
            fmt = fmt or "langchain"
        else:
            store = _store(db)
            try:
                transcript = asyncio.run(store.transcript(thread))
            finally:
                asyncio.run(store.aclose())
            fmt = fmt or "pydantic-ai"
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
            saver = _saver(db) if any(t.framework == "langgraph" for t in found) else None
            store = _store(db) if any(t.framework != "langgraph" for t in found) else None
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


def _print_diagnoses(db: _Database, results: list[_Diagnosis]) -> None:
    if not results:
        _say(f"no threads in {_safe_url(db.url)}")
        return
    _say(f"{len(results)} thread(s) in {_safe_url(db.url)}", style="bold")
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
    from historykit.validity import check

    return [str(v) for v in check(messages)] if messages else []


def _repaired(messages: Sequence[Any]) -> list[Any]:
    from historykit.processors import Repair

    return list(Pipeline([Repair()]).run(messages).messages)


def _doctor_langgraph(saver: Any, info: _Thread, repair: bool) -> _Diagnosis:
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


async def _doctor_pydantic_ai(store: Any, info: _Thread, repair: bool) -> _Diagnosis:
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


def main() -> None:  # pragma: no cover - the console script calls `app`
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
