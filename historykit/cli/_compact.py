"""`historykit compact`: write the history the model would be sent next, processed."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from historykit.cli._app import EXIT_FAILURE, EXIT_NOT_FOUND, CliError, _errors, app
from historykit.cli._options import (
    _FROM_HELP,
    _PIPELINE_HELP,
    _check_writable,
    _format_option,
    _read,
    _window_option,
)
from historykit.cli._pipeline_spec import build_pipeline
from historykit.cli._render import _out, _safe, _say, _working
from historykit.formats import FORMATS, TranscriptFile, write_transcript


@app.command()
def compact(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="The transcript to compact.", show_default=False)
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the processed history.", show_default=False)
    ],
    window: Annotated[int | None, _window_option("Context window in tokens.")] = None,
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
) -> None:
    """Write the history the model would be sent next, processed, in the input's format or --to's.

    With --now or --focus, compact now, as Claude Code's /compact does: the pipeline's Summarize
    step summarizes whatever the triggers say, with the focus when given.

    An agent log that the agent compacted itself (Claude Code's compact_boundary, Codex's
    compacted row) is processed from its latest compaction on: what the agent had already dropped
    is written back as it was, boundary included (to another format, only what follows it).
    """
    from historykit._validity import check
    from historykit.formats._recorded import compaction_boundaries, transcript_window

    with _errors():
        fmt = _format_option(from_format)
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
            resolved = transcript_window(transcript.messages, window)
            # The agent's own compaction already dropped what precedes its latest boundary from
            # every later call: the pipeline starts there, and the log keeps the rest as it was.
            boundaries = compaction_boundaries(transcript.messages) if transcript.native is None else []
            start = boundaries[-1] if boundaries else 0
            kept, history = transcript.history[:start], transcript.history[start:]
            started = time.perf_counter()
            try:
                if manual:
                    result = built.compact(
                        history, resolved.tokens, focus=focus, window_source=resolved.source
                    )
                else:
                    result = built.run(history, resolved.tokens, window_source=resolved.source)
            except Exception as exc:
                raise CliError(f"the pipeline failed on {file}: {exc}", EXIT_FAILURE) from exc
            same_format = out_fmt == transcript.format
            write_transcript([*kept, *result.messages] if same_format else result.messages, output, out_fmt)
            report = result.report
            violations = check(result.messages)
            elapsed = time.perf_counter() - started
        kept_count = len(kept) if same_format else 0
        if json_out:
            out = _report_dict(report, transcript, output, violations, out_fmt)
            out["agent_compaction"] = {"starts_at": start, "kept_as_written": kept_count} if start else None
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
            return
        if start:
            _say(
                f"the agent compacted its own history at message {start}: processed what follows; "
                + (
                    f"the {kept_count} messages before it are written back as they were"
                    if kept_count
                    else "what precedes it is left out (another format has no place for it)"
                )
            )
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
        f"{report.tokens_before:,} → {report.tokens_after:,} tokens; window {report.context_window:,} "
        f"({report.window_source}); tokenizer {report.tokenizer}",
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
        "window_source": report.window_source,
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
