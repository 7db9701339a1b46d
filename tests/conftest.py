"""Shared fixtures: the corpus of real transcripts and the PostgreSQL server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import settings

from historykit._messages import Message
from historykit.formats import read_chat_jsonl
from tests import class_source

# Agents with a durability capability are built in many tests; before Python 3.13 each build parses
# Pydantic AI's message module once per message class (`tests/class_source.py`).
class_source.install()

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("HISTORYKIT_CORPUS", REPO / "corpus"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# Hypothesis profiles. `default`, a developer's run: each property test's own budget, random
# examples (a new failure is saved in .hypothesis/ and replayed first next time). `ci` (CI=true):
# the same properties on a fixed set of examples (derandomize: a run fails or passes the same way
# every time, and a failure prints the example and its blob to reproduce it), half the budget of
# each test (`tests.strategies.examples`). `thorough`: ten times the budget, for a run before a
# release or after changing a recogniser. HYPOTHESIS_PROFILE=<name> picks one explicitly.
settings.register_profile("ci", max_examples=50, derandomize=True, deadline=None, print_blob=True)
settings.register_profile("thorough", max_examples=1_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if IN_CI else "default"))

# pytest-xdist workers set COLUMNS=80, which the CLI's consoles obey (it wins over a pipe's width):
# its tables would fold there and not in a plain run. Every run sees what a pipe sees.
os.environ.pop("COLUMNS", None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A skip must say why (`-rs` prints it): one without a reason is a failure, naming the test."""
    report: pytest.TestReport = yield
    if report.skipped and not hasattr(report, "wasxfail") and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2].removeprefix("Skipped:").strip()
        if reason in ("", "Skipped", "unconditional skip"):
            report.outcome = "failed"
            report.longrepr = f"{item.nodeid} skipped without saying why: give pytest.skip() a reason"
    return report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with a `slow` test first, the rest in their order. Under xdist (`--dist loadfile
    --no-loadscope-reorder`, the Makefile) a module runs on one worker, handed out in this order:
    the modules that take minutes (real servers and processes) start at once on both workers and the
    quick ones fill in after, rather than one of them starting last while the other worker idles."""
    slow = {item.module for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.module not in slow)  # stable: the order within stays


def corpus_paths() -> list[Path]:
    paths = sorted(CORPUS.glob("*.jsonl"))
    if not paths and IN_CI:
        raise RuntimeError(f"the corpus is missing at {CORPUS}: CI must run the corpus tests")
    return paths


def corpus_ids() -> list[str]:
    return [p.stem for p in corpus_paths()]


@pytest.fixture(params=corpus_paths(), ids=corpus_ids())
def corpus_session(request: pytest.FixtureRequest) -> list[Message]:
    """Each corpus session, as neutral messages without native objects."""
    return read_chat_jsonl(request.param)


@pytest.fixture(scope="session")
def largest_corpus_session() -> list[Message]:
    path = max(corpus_paths(), key=lambda p: p.stat().st_size)
    return read_chat_jsonl(path)


POSTGRES_URL = os.environ.get("HISTORYKIT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def postgres_admin_url() -> str:
    """The server to create test databases on: skip here, fail in CI, when it is not reachable."""
    try:
        import psycopg
    except ImportError:
        if IN_CI:
            raise
        pytest.skip("psycopg is not installed")
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3):
            pass
    except Exception as exc:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required in CI but {POSTGRES_URL} is not reachable: {exc}")
        pytest.skip(f"PostgreSQL is not reachable at {POSTGRES_URL}: {exc}")
    return POSTGRES_URL


MYSQL_URL = os.environ.get("HISTORYKIT_TEST_MYSQL_URL", "")
"""A MySQL/MariaDB server to run the MySQL tests on (`mysql://root@127.0.0.1:3306/test`, which
`.ci/run` sets): opt-in, since a developer's machine may have none. Unset, those tests skip, saying so."""


def mysql_admin_url() -> str:
    """The MySQL/MariaDB server to create test databases on; a visible skip when it is not
    configured (`HISTORYKIT_TEST_MYSQL_URL`), a failure when it is configured but unreachable."""
    if not MYSQL_URL:
        pytest.skip("MySQL/MariaDB tests run when HISTORYKIT_TEST_MYSQL_URL names a server")
    import pymysql

    url = sa.make_url(MYSQL_URL)
    try:
        pymysql.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 3306,
            user=url.username or "root",
            password=url.password or "",
            connect_timeout=3,
        ).close()
    except Exception as exc:
        pytest.fail(f"HISTORYKIT_TEST_MYSQL_URL={MYSQL_URL} is not reachable: {exc}")
    return MYSQL_URL
