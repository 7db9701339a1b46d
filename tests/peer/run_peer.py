"""LangGraph's own test suites, from the sdists of the installed versions, with SQLModelSaver swapped in.

Usage: python tests/peer/run_peer.py [--suite langgraph|sqlite|postgres ...] [--workers N] [--files ...]

For each suite the official saver runs on the same tests in the same run, and the table compares them:
- langgraph: every test taking the `sync_checkpointer` / `async_checkpointer` fixture, parametrised
  over SqliteSaver, PostgresSaver, AsyncSqliteSaver, AsyncPostgresSaver and SQLModelSaver on SQLite and
  PostgreSQL, sync and async (`peer_langgraph.py` replaces the two fixtures in the sdist's conftest);
- sqlite / postgres: the checkpointer tests of langgraph-checkpoint-sqlite / -postgres, once as shipped
  and once with the saver classes replaced by SQLModelSaver factories (`peer_plugin.py`).
The sdists are downloaded into .peer/sdist (git-ignored) once and unpacked afresh into .peer/src each run;
the JUnit reports, the table and the list of differences go to .peer/results.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = REPO / ".peer"
PATCH_LINE = (
    "\nfrom peer_langgraph import *  # noqa: F403  (appended by historykit's tests/peer/run_peer.py)\n"
)

DISTRIBUTIONS = {
    "langgraph": "langgraph",
    "sqlite": "langgraph-checkpoint-sqlite",
    "postgres": "langgraph-checkpoint-postgres",
}
CHECKPOINT_SUITE_FILES = {
    # Their store and TTL tests do not involve a checkpointer.
    "sqlite": [
        "test_sqlite.py",
        "test_aiosqlite.py",
        "test_conformance_delta.py",
        "test_delta_channel_migration.py",
        "test_delta_parent_walk.py",
        "test_get_delta_channel_history.py",
        "test_writes_task_path_migration.py",
    ],
    "postgres": [
        "test_sync.py",
        "test_async.py",
        "test_conformance_delta.py",
        "test_delta_pagination.py",
        "test_delta_plain_value_seed.py",
        "test_prune.py",
    ],
}
LANGGRAPH_PAIRS = {
    "hk_sqlite": "sqlite",
    "hk_postgres": "postgres",
    "hk_sqlite_aio": "sqlite_aio",
    "hk_postgres_aio": "postgres_aio",
}


def sdist(distribution: str) -> Path:
    """The unpacked sdist of the installed version (downloaded once into .peer/sdist)."""
    version = importlib.metadata.version(distribution)
    archive_dir = CACHE / "sdist"
    archive_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{distribution.replace('-', '_')}-{version}"
    archive = next((p for p in archive_dir.glob("*.tar.gz") if p.name.lower() == f"{stem}.tar.gz"), None)
    if archive is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
             "--dest", str(archive_dir), f"{distribution}=={version}"],
            check=True,
        )  # fmt: skip
        archive = next(p for p in archive_dir.glob("*.tar.gz") if p.name.lower() == f"{stem}.tar.gz")
    target = CACHE / "src"
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        root = tar.getnames()[0].split("/")[0]
        shutil.rmtree(target / root, ignore_errors=True)
        tar.extractall(target, filter="data")
    return target / root


@dataclass
class Outcomes:
    """pytest outcomes of one saver on one suite, by test id without the saver's name."""

    by_test: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    """The first line of each failure."""

    def counts(self) -> Counter[str]:
        return Counter(self.by_test.values())


def read_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """`(outcome by test id, first line of the failure by test id)`."""
    outcomes: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            outcome = "failed"
            message = (problem.get("message") or "").strip()
            reasons[test_id] = message.splitlines()[0][:300] if message else ""
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        # An error in teardown after a pass is a second testcase entry with the same id: worst wins.
        if outcomes.get(test_id) != "failed":
            outcomes[test_id] = outcome
    return outcomes, reasons


def split_langgraph(outcomes: dict[str, str], reasons: dict[str, str]) -> dict[str, Outcomes]:
    """One Outcomes per checkpointer fixture parameter, keyed by the test id with the parameter blanked."""
    names = set(LANGGRAPH_PAIRS) | set(LANGGRAPH_PAIRS.values())
    by_saver: dict[str, Outcomes] = defaultdict(Outcomes)
    for test_id, outcome in outcomes.items():
        match = re.search(r"\[(.*)\]$", test_id)
        if match is None:
            continue
        params = match.group(1).split("-")
        saver = next((p for p in params if p in names), None)
        if saver is None:
            continue
        blanked = test_id[: match.start(1)] + "-".join("*" if p == saver else p for p in params) + "]"
        by_saver[saver].by_test[blanked] = outcome
        if test_id in reasons:
            by_saver[saver].reasons[blanked] = reasons[test_id]
    return by_saver


def pytest_run(suite: str, root: Path, files: list[str], junit: Path, swap: bool, workers: int) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["NO_DOCKER"] = "true"  # no redis: caches and stores stay in memory
    env["HISTORYKIT_PEER_SWAP"] = "1" if swap else ""
    args = [sys.executable, "-m", "pytest", "-p", "peer_plugin", "--peer-suite", suite, "-q", "-rN",
            "--no-header", "-p", "no:cacheprovider", "--tb=line", f"--junitxml={junit}", "-o", "addopts=",
            "-o", "junit_family=xunit1", *files]  # fmt: skip
    if suite != "langgraph":
        args += ["-o", "asyncio_mode=auto"]
    if workers > 1:
        args += ["-n", str(workers)]
    started = time.perf_counter()
    subprocess.run(args, cwd=root, env=env, check=False)
    return time.perf_counter() - started


def checkpointer_test_files(root: Path) -> list[str]:
    """The langgraph test files that take a checkpointer fixture (whichever this sdist ships)."""
    pattern = re.compile(r"\b(sync|async)_checkpointer\b")
    return sorted(
        f"tests/{p.name}" for p in (root / "tests").glob("test_*.py") if pattern.search(p.read_text())
    )


def fmt(counts: Counter[str]) -> str:
    return f"{counts['passed']} / {counts['failed']} / {counts['skipped']}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", action="append", choices=list(DISTRIBUTIONS), help="default: all three")
    parser.add_argument("--files", nargs="*", help="langgraph test files to run (default: every one that "
                        "takes a checkpointer fixture)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=int(os.environ.get("PEER_WORKERS", "1")))
    options = parser.parse_args()
    suites = options.suite or list(DISTRIBUTIONS)
    results = CACHE / "results"
    results.mkdir(parents=True, exist_ok=True)

    rows: list[tuple[str, str, str, str, str, int]] = []
    differences: list[str] = []
    durations: dict[str, float] = {}
    for suite in suites:
        root = sdist(DISTRIBUTIONS[suite])
        version = f"{DISTRIBUTIONS[suite]} {importlib.metadata.version(DISTRIBUTIONS[suite])}"
        if suite == "langgraph":
            conftest = root / "tests" / "conftest.py"
            conftest.write_text(conftest.read_text() + PATCH_LINE)
            files = options.files or checkpointer_test_files(root)
            junit = results / "langgraph.xml"
            durations[suite] = pytest_run(suite, root, files, junit, swap=False, workers=options.workers)
            by_saver = split_langgraph(*read_junit(junit))
            pairs = [
                (hk, official, by_saver[hk], by_saver[official]) for hk, official in LANGGRAPH_PAIRS.items()
            ]
        else:
            files = [
                f"tests/{name}" for name in CHECKPOINT_SUITE_FILES[suite] if (root / "tests" / name).exists()
            ]
            official_junit, swapped_junit = (
                results / f"{suite}-official.xml",
                results / f"{suite}-historykit.xml",
            )
            durations[suite] = pytest_run(
                suite, root, files, official_junit, swap=False, workers=options.workers
            )
            durations[suite] += pytest_run(
                suite, root, files, swapped_junit, swap=True, workers=options.workers
            )
            official_name = (
                "SqliteSaver/AsyncSqliteSaver" if suite == "sqlite" else "PostgresSaver/AsyncPostgresSaver"
            )
            pairs = [
                (
                    "swapped",
                    official_name,
                    Outcomes(*read_junit(swapped_junit)),
                    Outcomes(*read_junit(official_junit)),
                )
            ]
        for hk_name, official_name, hk, official in pairs:
            missing = sorted(
                t for t, o in official.by_test.items() if o == "passed" and hk.by_test.get(t) != "passed"
            )
            rows.append(
                (version, hk_name, official_name, fmt(hk.counts()), fmt(official.counts()), len(missing))
            )
            differences += [
                f"{suite}\t{hk_name}\t{hk.by_test.get(t, 'absent')}\t{t}\t{hk.reasons.get(t, '')}"
                for t in missing
            ]

    table = [
        "| suite | historykit | official | historykit passed / failed / skipped | official passed / failed / "
        "skipped | official passes, historykit does not |",
        "|---|---|---|---|---|---|",
        *(f"| {v} | {hk} | {official} | {h} | {o} | {n} |" for v, hk, official, h, o, n in rows),
    ]
    timing = ", ".join(f"{suite} {seconds:.0f} s" for suite, seconds in durations.items())
    summary = "\n".join([*table, "", f"Duration: {timing} (workers: {options.workers})."])
    (results / "summary.md").write_text(summary + "\n")
    (results / "differences.tsv").write_text("".join(f"{line}\n" for line in differences))
    print(summary)
    print(f"{len(differences)} difference(s) listed in {results / 'differences.tsv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
