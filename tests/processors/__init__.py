"""Tests of the history processors."""

import pytest

# The shared assertions in support.py get pytest's detailed failure output too.
pytest.register_assert_rewrite("tests.processors.support")
