"""`historykit eval`: what a pipeline keeps of a transcript's probes, call by call, and at what cost."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from historykit._pipeline import Pipeline
from historykit.cli._app import CliError, _errors, app
from historykit.cli._options import _FROM_HELP, _PIPELINE_HELP, _format_option, _read, _window_option
from historykit.cli._pipeline_spec import build_pipeline
from historykit.cli._render import _out, _Progress, _say, _working


def _strategies(presets: list[str], pipeline: str | None) -> list[tuple[str, Pipeline]]:
    """(label, a new pipeline) for each preset asked, or for the spec; a new pipeline per run, so no
    run inherits another's conversation state or recall setting."""
    from historykit.processors._default_pipeline import TRIGGER_PRESETS, default_pipeline

    if pipeline is not None:
        if presets:
            raise CliError("give --preset or --pipeline, not both")
        return [(f"pipeline {pipeline}", build_pipeline(pipeline))]
    out = []
    for preset in presets or ["default"]:
        if preset not in TRIGGER_PRESETS:
            raise CliError(f"unknown preset {preset!r}: one of {', '.join(TRIGGER_PRESETS)}")
        out.append((f"default_pipeline(preset={preset!r})", default_pipeline(preset=preset)))
    return out


@app.command(name="eval")
def eval_command(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE...", help="Transcript files.", show_default=False)
    ],
    preset: Annotated[
        list[str],
        typer.Option(
            "--preset",
            help="A default_pipeline() preset to evaluate (default, cline, chainreview); repeat for "
            "several. Default: default.",
            show_default=False,
        ),
    ] = [],  # noqa: B006  (typer reads the default; it is never mutated)
    pipeline: Annotated[
        str | None, typer.Option("--pipeline", "-p", help=_PIPELINE_HELP, show_default=False)
    ] = None,
    window: Annotated[int | None, _window_option("Context window in tokens the replay runs under.")] = None,
    recall: Annotated[
        bool,
        typer.Option(
            "--recall",
            help="Install the recall tool: placeholders name handles, and what one returns counts as "
            "recoverable.",
        ),
    ] = False,
    calls: Annotated[bool, typer.Option("--calls/--no-calls", help="Print the per-call table.")] = True,
    lost: Annotated[int, typer.Option("--lost", min=0, help="How many lost probes to list.")] = 20,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print a JSON array, one object per file and strategy.")
    ] = False,
    from_format: Annotated[str | None, typer.Option("--from", help=_FROM_HELP)] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            metavar="MODEL",
            help="A Pydantic AI model name (anthropic:claude-haiku-4-5; its provider's key from the "
            "environment) that answers each probe's question with the compacted view and with the "
            "full history: two requests per probe asked.",
            show_default=False,
        ),
    ] = None,
    judge_probes: Annotated[
        int,
        typer.Option("--judge-probes", min=1, help="With --judge: how many probes to ask about per run."),
    ] = 40,
) -> None:
    """Replay each transcript call by call through a pipeline and score what every call's view keeps
    of the transcript's probes (recall, artifacts, continuation, decisions), with its tokens and
    cost (cache hits at 0.1, the rest at 1.25).

    A probe holds when its answer is in the view sent, and is recoverable when a recall handle the
    view names returns it (--recall); every call after the probe appeared is scored, against what
    the full history had at that call. Rules: `historykit.evaluation.extract_probes`. With --judge, a
    model answers each probe's question with the view and with the full history.
    """
    from historykit.evaluation import evaluate

    with _errors():
        fmt = _format_option(from_format)
        _strategies(preset, pipeline)  # bad options fail before any file is read
        results = []
        for path in files:
            with _working(f"reading {path.name}"):
                transcript = _read(path, fmt)
            for label, built in _strategies(preset, pipeline):
                total = sum(1 for m in transcript.messages if m.role == "assistant")
                with _Progress(f"evaluating {path.name} ({label})", total) as progress:
                    evaluation = evaluate(
                        transcript.messages,
                        built,
                        window=window,
                        recall=recall,
                        name=str(path),
                        strategy=f"{label}{' with recall' if recall else ''}",
                        on_call=progress.update,
                        judge=judge,
                        judge_probes=judge_probes,
                        on_question=progress.update,
                    )
                results.append(evaluation)
                if not json_out:
                    _out.print(
                        evaluation.render(per_call=calls, lost_shown=lost), soft_wrap=not _out.is_terminal
                    )
                    _say("")
        if json_out:
            sys.stdout.write(json.dumps([e.to_dict() for e in results], indent=2, ensure_ascii=False) + "\n")
