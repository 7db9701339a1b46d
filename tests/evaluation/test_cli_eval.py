"""`historykit eval`, driven through typer's runner: the corpus format and raw Claude Code and Codex
transcripts, presets and pipeline specs, JSON output, and one-line errors with their exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from historykit.cli import EXIT_NOT_FOUND, EXIT_USAGE, app
from historykit.evaluation import KINDS
from tests.conftest import corpus_paths
from tests.formats.helpers import CLAUDE_CODE, CODEX

runner = CliRunner()


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def small() -> Path:
    path = next((p for p in corpus_paths() if p.stem == "sweagent__demo-fc-marshmallow-1867"), None)
    if path is None:
        pytest.skip("the corpus is missing")
    return path


def test_prints_per_kind_scores_and_tokens_and_cost_per_call() -> None:
    result = run("eval", small(), "--window", 8000)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "default_pipeline(preset='default'), window 8,000: 13 calls" in out
    for kind in KINDS:
        assert f" {kind} " in out
    assert "per call" in out and "cached" in out and "cost" in out
    rows = [ln.split() for ln in out.splitlines() if ln.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == list(range(1, 14))


def test_json_has_one_object_per_file_and_preset() -> None:
    result = run(
        "eval", small(), CLAUDE_CODE, "--preset", "default", "--preset", "chainreview", "--json", "-w", 8000
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [(Path(d["name"]).name, d["strategy"]) for d in data] == [
        (small().name, "default_pipeline(preset='default')"),
        (small().name, "default_pipeline(preset='chainreview')"),
        (CLAUDE_CODE.name, "default_pipeline(preset='default')"),
        (CLAUDE_CODE.name, "default_pipeline(preset='chainreview')"),
    ]
    for d in data:
        assert set(d["kinds"]) == set(KINDS)
        assert d["tokens"] == sum(c["tokens"] for c in d["calls"])
        for kind in d["kinds"].values():
            assert kind["held"] + kind["recoverable"] <= kind["scored"]


@pytest.mark.parametrize("raw", [CLAUDE_CODE, CODEX], ids=["claude-code", "codex"])
def test_runs_on_raw_agent_transcripts(raw: Path) -> None:
    result = run("eval", raw, "--pipeline", "clear:keep=1,truncate", "--recall", "--json")
    assert result.exit_code == 0, result.stderr
    (data,) = json.loads(result.stdout)
    assert data["strategy"] == "pipeline clear:keep=1,truncate with recall"
    assert data["calls"] and sum(k["probes"] for k in data["kinds"].values()) > 0


def test_errors_are_one_line_with_their_exit_code() -> None:
    for args, code, fragment in [
        (("missing.jsonl",), EXIT_NOT_FOUND, "no such file"),
        ((small(), "--preset", "fastest"), EXIT_USAGE, "unknown preset 'fastest'"),
        ((small(), "--preset", "cline", "--pipeline", "clear"), EXIT_USAGE, "not both"),
        ((small(), "--pipeline", "nonsense"), EXIT_USAGE, "nonsense"),
    ]:
        result = run("eval", *args)
        assert result.exit_code == code, (args, result.stdout, result.stderr)
        assert result.stderr.startswith("historykit: error: ") and fragment in result.stderr
        assert result.stdout == ""
