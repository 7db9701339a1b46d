"""`HistoryKit` in a Prefect flow whose model fails mid-run, then retried by Prefect.

Real Prefect (its local ephemeral server, a `PREFECT_HOME` of the test's own), `PrefectDurability`,
both modes, one process (`prefect_app.py`). Prefect recovers a flow by running it again: a flow
retry (the same flow run) takes every task that completed from its persisted, cached result, so
the model requests, the tool calls and historykit's operations that ran before the failure are not
run again. (A process killed outright leaves its flow run "Running" until a worker or the user
runs it again; there is no recovery in the next process as DBOS has, so the failure here is the
model's exception, as a provider outage is.)

What must hold, as for DBOS (`test_dbos_recovery.py`):
- the retry's first request is the very request of the failed call, summary text and the marker's
  time included (both from Prefect's cache, not from a second summarizer call or the clock);
- every request is, one for one, the request of the same flow run without the failure;
- the summarizer is called exactly as often, and the flow's output is the uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.durable.test_dbos_recovery import PER_PROCESS, PER_RUN, _summary_numbers, _without

pytest.importorskip("prefect")
pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("prefect_app.py")
ROOT = APP.parents[2]
FAIL_AT = 10
"""The model call that fails in the first attempt (of 18: two turns of eight tool calls and an answer)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The four flow runs (two modes, uninterrupted and failing), in one process."""
    outdir = tmp_path_factory.mktemp("prefect")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
        "PYTHONPATH": str(ROOT),
        "PREFECT_HOME": str(outdir / "prefect-home"),
        # The ephemeral server starts as a child process; a loaded machine needs more than 20 s.
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
        "PREFECT_LOGGING_LEVEL": "ERROR",
    }
    done = subprocess.run(
        [sys.executable, str(APP), str(outdir / "runs"), str(FAIL_AT)],
        capture_output=True,
        text=True,
        timeout=1_200,
        env=env,
        cwd=outdir,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return outdir / "runs"


def _records(workdir: Path) -> tuple[str, list[dict[str, Any]], int]:
    requests = [json.loads(line) for line in (workdir / "requests.jsonl").read_text().splitlines()]
    calls = len((workdir / "summaries.txt").read_text().splitlines())
    return json.loads((workdir / "output.json").read_text())["output"], requests, calls


@pytest.mark.parametrize("mode", ["persistent", "view"])
def test_a_retried_flow_sends_what_the_failed_attempt_would_have(runs: Path, mode: str) -> None:
    expected_output, expected, expected_calls = _records(runs / f"{mode}-uninterrupted")
    assert len(expected) == 18 and expected_calls >= 3, (
        "the scenario must summarize before and after the failure"
    )
    assert any(_summary_numbers(r) for r in expected[: FAIL_AT - 1]), "a summary must be carried across it"

    output, sent, calls = _records(runs / f"{mode}-failing")
    assert (runs / f"{mode}-failing" / "failed.flag").exists(), "the first attempt must have failed"
    failed, retried = sent[:FAIL_AT], sent[FAIL_AT:]
    # Prefect replays the tasks that completed: the first request sent again is the failed one.
    assert _without(retried[0], PER_PROCESS) == _without(failed[-1], PER_PROCESS)
    assert [_without(r, PER_RUN) for r in [*failed[:-1], *retried]] == [
        _without(r, PER_RUN) for r in expected
    ]
    assert calls == expected_calls, "the retry summarized again what the failed attempt had summarized"
    assert output == expected_output
