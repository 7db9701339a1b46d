"""`historykit analyze`: where a transcript's tokens go, and what each processor would save."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from historykit._messages import Message
from historykit._pipeline import Pipeline
from historykit._tokens import TokenCounter
from historykit.cli._app import EXIT_FAILURE, CliError, _classify, _errors, _state, app
from historykit.cli._options import (
    _FROM_HELP,
    _PIPELINE_HELP,
    _check_writable,
    _format_option,
    _read,
    _window_option,
)
from historykit.cli._pipeline_spec import build_pipeline
from historykit.cli._render import _one_line, _out, _Progress, _safe, _say, _working


@app.command()
def analyze(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE...", help="Transcript files.", show_default=False)
    ],
    window: Annotated[int | None, _window_option("Context window in tokens the replay runs under.")] = None,
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
) -> None:
    """Where a transcript's tokens go, and what each processor would save, replayed call by call.

    Each file that cannot be read is reported on its own line (stderr) and the others are still
    analysed; the exit code is then that of the failure (2 for an unreadable transcript).
    """
    from historykit.analysis._analysis import Analysis
    from historykit.analysis._analysis import analyze as run_analysis

    with _errors():
        fmt = _format_option(from_format)
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
                # Into a pipe or a file, headings and notes stay whole lines (paths and the pipeline
                # copyable); tables still fit the width, folding long cells.
                _out.print(analysis, soft_wrap=not _out.is_terminal)
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


def _plot(analyses: Sequence[Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise CliError(
            f"--plot needs matplotlib ({exc}): pip install 'historykit[notebooks]'", EXIT_FAILURE
        ) from exc
    fig, axes = plt.subplots(len(analyses), 1, figsize=(11, 3.8 * len(analyses)), squeeze=False)
    for analysis, ax in zip(analyses, axes[:, 0]):
        analysis.plot(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
