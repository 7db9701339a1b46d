"""LangGraph's official checkpointer conformance suite, every capability, on SQLite, PostgreSQL and
MySQL/MariaDB (opt-in: `HISTORYKIT_TEST_MYSQL_URL`, see `conftest.py`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import CapabilityReport

from historykit.checkpointers import SQLModelSaver

TOTAL_TESTS = 81
"""58 base tests (put, put_writes, get_tuple, list, delete_thread) + 23 extended (delete_for_runs,
copy_thread, prune) in langgraph-checkpoint-conformance 0.0.2."""


async def _run_suite(make_url: Callable[[], str]) -> CapabilityReport:
    @checkpointer_test(name="SQLModelSaver")
    async def factory() -> AsyncIterator[SQLModelSaver]:
        # An empty database for each capability suite, as the suite expects.
        saver = SQLModelSaver(make_url())
        yield saver
        await saver.aclose()

    return await validate(factory)


def _assert_full_pass(report: CapabilityReport) -> None:
    failures = [f for result in report.results.values() for f in result.failures]
    assert not failures, "\n".join(failures)
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == {cap.value for cap in ALL_CAPABILITIES}
    assert all(result.passed for result in report.results.values())
    passed = sum(result.tests_passed for result in report.results.values())
    assert passed == TOTAL_TESTS, f"{passed} of {TOTAL_TESTS} conformance tests passed"


async def test_conformance_sqlite(tmp_path_factory: pytest.TempPathFactory) -> None:
    counter = iter(range(100))

    def make_url() -> str:
        return f"sqlite:///{tmp_path_factory.mktemp('conformance') / f'db{next(counter)}.db'}"

    _assert_full_pass(await _run_suite(make_url))


@pytest.mark.postgres
async def test_conformance_postgres(new_postgres_database: Callable[[], str]) -> None:
    _assert_full_pass(await _run_suite(new_postgres_database))


@pytest.mark.mysql
async def test_conformance_mysql(new_mysql_database: Callable[[], str]) -> None:
    _assert_full_pass(await _run_suite(new_mysql_database))
