"""The suite's own rules (tests/conftest.py, pyproject's pytest settings): a skip says why."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_a_skip_without_a_reason_fails_and_one_with_a_reason_shows_it(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tests.conftest import pytest_runtest_makereport  # noqa: F401\n")
    pytester.makepyfile(
        """
        import pytest

        def test_bare():
            pytest.skip()

        @pytest.mark.skip
        def test_marked():
            pass

        def test_said():
            pytest.skip("the server is not there")

        @pytest.mark.xfail(reason="known")
        def test_expected():
            assert False
        """
    )
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider", "-p", "no:asyncio")
    result.assert_outcomes(failed=1, errors=1, skipped=1, xfailed=1)  # the marked one fails at setup
    result.stdout.fnmatch_lines(["*test_bare skipped without saying why*", "SKIPPED*the server is not there"])
    result.stdout.fnmatch_lines(["*test_marked skipped without saying why*"])
