"""The public API's types as a user's type checker sees them (mypy on a small user module).

The module below holds `assert_type` lines: mypy reports each one whose expression is not of
exactly the stated type (a `list[Any]` is not a `list[ModelMessage]`). The lines marked
`# wrong` state a type on purpose that is not the expression's, so the test also proves the check
reports what it should: it expects mypy's errors on exactly those lines.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import historykit

api = pytest.importorskip("mypy.api")
pytest.importorskip("pydantic_ai")
pytest.importorskip("langchain_core")

ROOT = Path(historykit.__file__).resolve().parent.parent

USER_MODULE = '''
from typing_extensions import assert_type

from langchain_core.messages import BaseMessage
from pydantic_ai.messages import ModelMessage

from historykit import Message, Pipeline, PipelineResult


class OwnMessage:
    """A message type historykit has never heard of: the types follow it all the same."""


def pydantic_ai(history: list[ModelMessage]) -> None:
    result = Pipeline().run(history, 128_000)
    assert_type(result, PipelineResult[ModelMessage])
    assert_type(result.messages, list[ModelMessage])
    assert_type(Pipeline().compact(history).messages, list[ModelMessage])
    assert_type(Pipeline()(history), list[ModelMessage])
    assert_type(result.messages, list[BaseMessage])  # wrong


async def langchain(history: list[BaseMessage]) -> None:
    assert_type((await Pipeline().arun(history)).messages, list[BaseMessage])
    assert_type((await Pipeline().acompact(history, focus="auth")).messages, list[BaseMessage])
    assert_type(Pipeline()(history), list[BaseMessage])


def neutral(history: list[Message], own: tuple[OwnMessage, ...]) -> None:
    assert_type(Pipeline().run(history).messages, list[Message])
    assert_type(Pipeline().run(own).messages, list[OwnMessage])
    assert_type(Pipeline().run(own).messages, list[Message])  # wrong
'''

# The frameworks' own modules are skipped (their types become `Any`) except the two that define
# the message types: the check then takes seconds instead of minutes.
CONFIG = """
[mypy]
mypy_path = {root}
follow_imports = silent
ignore_missing_imports = true

[mypy-pydantic_ai.*,pydantic.*,pydantic_core.*,langchain_core.*,langchain.*,langgraph.*,sqlalchemy.*,sqlmodel.*,rich.*,matplotlib.*,opentelemetry.*,typer.*,tiktoken.*,genai_prices.*,httpx.*,openai.*,anthropic.*]
follow_imports = skip

[mypy-pydantic_ai.messages,langchain_core.messages,langchain_core.messages.base]
follow_imports = silent
"""


def test_a_run_hands_back_the_message_type_it_was_given(tmp_path: Path) -> None:
    module = tmp_path / "user_code.py"
    module.write_text(textwrap.dedent(USER_MODULE), encoding="utf-8")
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG.format(root=ROOT), encoding="utf-8")
    stdout, stderr, _ = api.run(
        [
            str(module),
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
        ]
    )
    assert not stderr, stderr
    reported = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"^.*user_code\.py:(\d+): error: (.*)$", stdout, re.M)
    }
    lines = module.read_text(encoding="utf-8").splitlines()
    wrong = {n for n, line in enumerate(lines, start=1) if line.endswith("# wrong")}
    assert set(reported) == wrong, stdout
    assert all("[assert-type]" in error for error in reported.values()), stdout


def test_the_package_is_marked_typed() -> None:
    """Without `py.typed` (PEP 561) a user's type checker ignores every hint above."""
    assert (ROOT / "historykit" / "py.typed").is_file()
