"""The README says what the code does: its option tables, commands, code and links are checked.

- it opens with the two commands, `make demo` and `make test`, which the Makefile has;
- each processor's option table lists exactly the processor's options, with the defaults they have;
- `default_pipeline()`'s table lists its arguments, the CLI section its commands, the demo section
  the demo's options;
- every Python block runs as written, in order (test models where a provider is named); every
  link to a file of the repository points at one.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import historykit
from historykit.demo._command import _parser
from historykit.processors import (
    ClearToolResults,
    DedupeFileReads,
    PairwiseTruncate,
    Repair,
    StripThinking,
    Summarize,
    Trigger,
)

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def section(title: str) -> str:
    """The text under a `## ` or `### ` heading, up to the next heading of any level."""
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ )", README + "\n# end", re.S | re.M)
    assert match, f"no section {title!r}"
    return match.group(1)


def table(text: str, first_header: str) -> list[list[str]]:
    """The rows of the first markdown table in `text` whose first header is `first_header`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_header:
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    raise AssertionError(f"no table starting with {first_header!r}")


def test_opens_with_the_two_commands() -> None:
    head = README.splitlines()[:6]
    assert head[0] == "# historykit"
    assert any(line.startswith("make demo") for line in head)
    assert any(line.startswith("make test") for line in head)
    makefile = (REPO / "Makefile").read_text()
    for target in ("demo", "test", "lint", "typecheck", "test-main", "test-pai1"):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), target


@pytest.mark.parametrize(
    "cls", [DedupeFileReads, ClearToolResults, StripThinking, Summarize, PairwiseTruncate, Repair, Trigger]
)
def test_each_processor_table_lists_its_options(cls: type) -> None:
    rows = table(section(f"`{cls.__name__}`"), "option")
    documented = {row[0].strip("`"): row[1] for row in rows}
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    assert list(documented) == list(fields)
    for name, shown in documented.items():
        default = fields[name].default
        if default is dataclasses.MISSING or callable(default):
            continue  # a factory (a Trigger) or a function (a clock): described, not a literal
        try:
            literal = ast.literal_eval(shown.strip("`").replace("_", ""))
        except (ValueError, SyntaxError):
            literal = shown
        assert literal == default, (name, shown, default)


def test_the_default_pipeline_table_lists_its_arguments() -> None:
    rows = table(section("The default pipeline"), "argument")
    documented = [name.strip("`") for row in rows for name in row[0].split(" / ")]
    assert documented == list(inspect.signature(historykit.default_pipeline).parameters)
    steps = [row[0].strip("`") for row in table(section("The default pipeline"), "step")]
    assert steps == [p.name for p in historykit.default_pipeline().processors]


def test_the_command_line_section_lists_the_commands() -> None:
    from historykit.cli import app

    usage = re.findall(r"^historykit (\w+)", section("The command line"), re.M)
    commands = [c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands]
    assert usage == commands


def test_the_demo_section_names_the_demo_options() -> None:
    text = section("What `make demo` shows")
    options = [a.option_strings[0] for a in _parser()._actions if a.option_strings[0] != "-h"]
    for option in options:
        assert f"`{option}" in text, option


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def test_python_blocks_are_valid_python() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 10
    for block in blocks:
        compile(block, "README.md", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_links_to_repository_files_exist() -> None:
    links = re.findall(r"\]\(([^)#]+)\)", README)
    local = [link for link in links if "://" not in link]
    assert local
    for link in local:
        assert (REPO / link).exists(), link
    for path in re.findall(r"`((?:historykit|notebooks|benchmarks|tests)/[\w./-]+\.\w+)`", README):
        assert (REPO / path).exists(), path


def test_the_names_the_recipes_import_exist() -> None:
    imported: list[tuple[str, str]] = []
    for block in python_blocks():
        tree = compile(block, "README.md", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        for node in ast.walk(tree):  # type: ignore[arg-type]
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("historykit"):
                imported += [(node.module, alias.name) for alias in node.names]
    assert imported
    for module, name in imported:
        assert hasattr(_import(module), name), f"from {module} import {name}"
    for name in re.findall(r"historykit\.(\w+)\(", README):
        assert callable(getattr(historykit, name, None)), f"historykit.{name}"


def _import(module: str) -> Any:
    import importlib

    return importlib.import_module(module)


# ---------------------------------------------------------------------------------------------
# Every Python block runs as written, with test models where a provider is named
# ---------------------------------------------------------------------------------------------

_PAI_MODELS = ('"anthropic:claude-sonnet-4-5"', '"openai:gpt-5"', '"anthropic:claude-opus-5-5"')
"""Pydantic AI model names the recipes use: a `TestModel` answers instead (no network, no key)."""

_LC_MODELS = (
    'init_chat_model("anthropic:claude-sonnet-4-5")',
    'ChatAnthropic(model="claude-haiku-4-5")',
    '"anthropic:claude-sonnet-4-5"',
    'ChatOpenAI(model="gpt-5", use_responses_api=True)',
)
"""LangChain chat models the recipes use: a fake chat model answers instead."""

_SDK_CLIENTS = {
    "anthropic.AsyncAnthropic()": "EMULATOR.anthropic_client(async_=True)",
    "openai.AsyncOpenAI()": "EMULATOR.openai_client(async_=True)",
}
"""Provider SDK clients the recipes pass (native compaction): the provider emulator answers instead."""


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def _substituted(code: str, postgres_url: str) -> str:
    langchain = "langchain" in code or "langgraph" in code
    for client, emulated in _SDK_CLIENTS.items():
        code = code.replace(client, emulated)
    if langchain:
        for name in _LC_MODELS:
            code = code.replace(name, "FAKE_CHAT_MODEL")
        code = code.replace("from langchain_anthropic import ChatAnthropic\n", "")
    else:
        for name in _PAI_MODELS:
            code = code.replace(name, "TEST_MODEL")
    # A server the test does not have: the same code against a SQLite file.
    return code.replace("postgresql+psycopg://user:password@db.example.com/agents", postgres_url)


def _fake_chat_model() -> Any:
    from itertools import cycle

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class FakeToolChatModel(GenericFakeChatModel):
        """Answers every call with text; takes tools as a provider's chat model does."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    return FakeToolChatModel(messages=cycle([AIMessage("The test passes now.")]))


def test_every_python_block_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks run in order in one namespace, as a reader following the README would run them
    in one session; only the provider models (and a PostgreSQL server) are replaced."""
    import asyncio

    from pydantic_ai.models.test import TestModel

    blocks = _python_blocks()
    assert len(blocks) >= 10
    monkeypatch.chdir(tmp_path)
    (tmp_path / "session.jsonl").write_text((REPO / "historykit/data/sample_session.jsonl").read_text())
    from tests.emulator import ProviderEmulator, Turn

    namespace: dict[str, Any] = {
        "TEST_MODEL": TestModel(call_tools=[]),
        "FAKE_CHAT_MODEL": _fake_chat_model(),
        "EMULATOR": ProviderEmulator(lambda request: Turn(text="The test passes now.")),
        "__name__": "readme",
    }
    import importlib.metadata

    pydantic_ai_1 = importlib.metadata.version("pydantic-ai-slim").startswith("1.")
    for n, block in enumerate(blocks):
        if "history_processors=" in block and not pydantic_ai_1:
            continue  # the Pydantic AI 1.x recipe: 2.x has capabilities instead (see the test below)
        code = _substituted(block, f"sqlite:///{tmp_path / 'pg-stand-in.db'}")
        compiled = compile(code, f"README block {n}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        try:
            result = eval(compiled, namespace)  # the README's own code
            if inspect.iscoroutine(result):
                asyncio.run(result)
        except Exception as exc:
            raise AssertionError(
                f"README block {n} fails as written:\n{block}\n{type(exc).__name__}: {exc}"
            ) from exc


@pytest.mark.pydantic_ai
def test_the_pydantic_ai_1x_recipe_runs_on_1x() -> None:
    """`make test-pai1` runs this against Pydantic AI 1.x, where `history_processors=` is the API."""
    import importlib.metadata

    from pydantic_ai.models.test import TestModel

    if not importlib.metadata.version("pydantic-ai-slim").startswith("1."):
        pytest.skip("the 1.x recipe: Pydantic AI 2.x has capabilities instead")
    (block,) = [b for b in _python_blocks() if "history_processors=" in b]
    namespace: dict[str, Any] = {"TEST_MODEL": TestModel(call_tools=[])}
    exec(compile(_substituted(block, ""), "README 1.x recipe", "exec"), namespace)
    assert namespace["agent"].run_sync("Fix the failing test").output
