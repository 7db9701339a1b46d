"""The README says what the code does: its option tables, commands, code and links are checked.

- it opens with the two commands, `make demo` and `make test`, which the Makefile has;
- each processor's option table lists exactly the processor's options, with the defaults they have;
- `default_pipeline()`'s table lists its arguments, the CLI section its commands, the demo section
  the demo's options;
- every Python block runs alone, as a file of its own in a process of its own (a fork of a warm
  interpreter that imported the frameworks once: a fresh namespace, environment and directory), with
  its model swapped the way "Testing your agent" tells users to swap it, and prints what the README
  shows it printing; it imports only what `historykit[all]` or the providers table installs, and
  calls no deprecated API;
- every link to a file of the repository points at one.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import historykit
from historykit.demo._command import _parser
from historykit.processors import (
    ClearMedia,
    ClearToolResults,
    DedupeFileReads,
    OffloadToolOutputs,
    PairwiseTruncate,
    Repair,
    StripThinking,
    Summarize,
    Trigger,
)
from tests.checkpointers.conftest import postgres_database  # noqa: F401  (a PostgreSQL block's database)

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
    "cls",
    [
        ClearMedia,
        DedupeFileReads,
        ClearToolResults,
        OffloadToolOutputs,
        StripThinking,
        Summarize,
        PairwiseTruncate,
        Repair,
        Trigger,
    ],
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
        for node in ast.walk(ast.parse(block)):
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
# Every Python block runs alone, in a new interpreter, with the model swapped as the README says
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """A ```python block of the README."""

    id: str
    """The heading it is under and its place there: `quick-start-2`."""
    line: int
    """Its first line in README.md."""
    code: str
    output: str | None
    """The ```text block right after it, if any: what it prints (`...` lines stand for any lines)."""

    @property
    def framework(self) -> str | None:
        """`pydantic_ai` or `langchain` when the block imports one of them (LangGraph counts as LangChain)."""
        if re.search(r"^(from|import) pydantic_ai\b", self.code, re.M):
            return "pydantic_ai"
        if re.search(r"^(from|import) (langchain|langgraph)\w*\b", self.code, re.M):
            return "langchain"
        return None

    @property
    def model_lines(self) -> list[str]:
        """The lines that name the block's model: the one line a user changes to swap it."""
        return re.findall(r"^model = .*$", self.code, re.M)


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
_HEADING = re.compile(r"^#+ (.+)$", re.M)


def readme_blocks() -> list[Block]:
    headings = [(m.start(), m.group(1)) for m in _HEADING.finditer(README)]
    fences = list(_FENCE.finditer(README))
    blocks: list[Block] = []
    per_heading: dict[str, int] = {}
    for index, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        title = [t for start, t in headings if start < fence.start()][-1]
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        per_heading[slug] = per_heading.get(slug, 0) + 1
        following = fences[index + 1] if index + 1 < len(fences) else None
        output = None
        if following and following.group(1) == "text" and not README[fence.end() : following.start()].strip():
            output = following.group(2)
        line = README.count("\n", 0, fence.start()) + 1
        blocks.append(Block(f"{slug}-{per_heading[slug]}", line, fence.group(2), output))
    return blocks


BLOCKS = readme_blocks()


def python_blocks() -> list[str]:
    return [block.code for block in BLOCKS]


def test_python_blocks_are_scripts() -> None:
    """Each block compiles as a file does: no top-level `await` (a `SyntaxError` in a script)."""
    assert len(BLOCKS) >= 10
    for block in BLOCKS:
        try:
            compile(block.code, f"README.md block {block.id}", "exec")  # compiled, not run
        except SyntaxError as exc:
            raise AssertionError(f"README block {block.id} (line {block.line}): {exc}") from exc


def _swap_block() -> Block:
    """The lines "Testing your agent" tells users to put in place of an example's model line."""
    (swap,) = [
        b for b in BLOCKS if "model = PydanticAIReplay(" in b.code and "model = LangChainReplay(" in b.code
    ]
    return swap


def swapped(block: Block) -> str:
    """The block with its model line replaced as the README says: the swap block's lines, with the
    model line of the block's framework (Pydantic AI or LangChain)."""
    if not block.model_lines or block is _swap_block():
        return block.code
    assert len(block.model_lines) == 1, f"block {block.id} names its model on more than one line"
    replay = "PydanticAIReplay" if block.framework == "pydantic_ai" else "LangChainReplay"
    lines = _swap_block().code.splitlines()
    swap = [line for line in lines if not line.startswith("model = ") or f"= {replay}(" in line]
    return block.code.replace(block.model_lines[0], "\n".join(swap), 1)


def test_each_agent_names_its_model_on_one_line() -> None:
    """The line a user changes to swap the model; every example that makes an agent has exactly one."""
    makers = re.compile(r"\b(Agent|create_agent|init_chat_model|StateGraph)\(")
    for block in BLOCKS:
        if block is _swap_block() or "Replay(" in block.code:
            continue  # the testing examples: their model is a replay already
        if makers.search(block.code):
            assert len(block.model_lines) == 1, f"README block {block.id} (line {block.line})"


# Where a block's code sends the provider SDKs (the native compaction summarizers): their own
# environment variables, which the README documents. A block whose model line was not swapped gets
# no key and an address nothing answers at, so it fails instead of reaching a provider.
_SDK_IMPORT = re.compile(r"^import (anthropic|openai)$", re.M)
_NOWHERE = "http://127.0.0.1:9"


def _pydantic_ai_major() -> int:
    import importlib.metadata

    return int(importlib.metadata.version("pydantic-ai-slim").split(".")[0])


def _needs(block: Block) -> str | None:
    """Why the block cannot run with the installed Pydantic AI, if it cannot."""
    major = _pydantic_ai_major()
    if "history_processors=" in block.code and major >= 2:
        return "the Pydantic AI 1.x recipe: 2.x has capabilities instead (make test-pai1 runs it on 1.x)"
    if major < 2 and re.search(r"pydantic_ai\.conversation|SQLModelConversationStore", block.code):
        return "the conversation store needs Pydantic AI 2.x"
    if major < 2 and "pydantic_ai.durable_exec" in block.code:
        return "the durability capabilities need Pydantic AI 2.x"
    if "temporalio.client" in block.code:
        return "needs a Temporal server (its dev and test servers are downloads this machine cannot make)"
    return None


def _params() -> list[Any]:
    params = []
    for block in BLOCKS:
        marks = [pytest.mark.pydantic_ai] if block.framework == "pydantic_ai" else []
        if "postgresql+psycopg" in block.code:
            marks.append(pytest.mark.postgres)
        params.append(pytest.param(block, id=block.id, marks=marks))
    return params


@pytest.fixture(scope="module")
def emulator_url() -> Iterator[str]:
    """The provider emulator (tests/emulator) served over HTTP, for the SDK clients' base URL variables."""
    from tests.emulator import ProviderEmulator, Turn
    from tests.emulator.http_server import serve_http

    emulator = ProviderEmulator(lambda request: Turn(text="The test passes now."))
    with serve_http(emulator) as url:
        yield url
    assert not emulator.rejected, [r.error for r in emulator.rejected]


def _install_names(spec: str) -> set[str]:
    """The distributions `pip install spec` brings directly: the package and its requirements
    (with the extras named), canonicalized."""
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    wanted = Requirement(spec)
    names = {canonicalize_name(wanted.name)}
    for line in importlib.metadata.requires(wanted.name) or []:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in wanted.extras or {""}):
            names.add(canonicalize_name(requirement.name))
    return names


def test_each_import_is_installed_by_historykit_all_or_the_providers_table() -> None:
    """What a block imports comes with `historykit[all]`, with a package the README's "Models and
    providers" table says to install or with the durable execution section's install line; every
    provider a block names a model of is in that table."""
    import importlib.metadata

    from packaging.utils import canonicalize_name

    rows = table(section("Models and providers"), "provider")
    named = [spec for row in rows for cell in (row[2], row[4]) for spec in re.findall(r"`([^`<]+)`", cell)]
    assert "langchain-anthropic" in named and "pydantic-ai-slim[anthropic]" in named
    # The durable execution engines come with the extras the section's install line names.
    named += re.findall(r'`pip install "([^"]+)"`', section("Durable execution"))
    assert "pydantic-ai-slim[dbos]" in named
    installed = _install_names("historykit[all]").union(*(_install_names(spec) for spec in named))
    distributions = importlib.metadata.packages_distributions()
    for block in BLOCKS:
        for node in ast.walk(ast.parse(block.code)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top == "historykit":
                    continue
                dists = {canonicalize_name(d) for d in distributions.get(top, [])}
                assert dists & installed, f"README block {block.id}: `{module}` comes from {dists or '?'}"
        providers = {row[0].lower() for row in rows}
        for provider in re.findall(r"model\s*=\s*(?:init_chat_model\()?[\"'](\w[\w-]*):", block.code):
            assert provider in providers, f"README block {block.id}: no install line for {provider!r} models"


def test_the_examples_do_not_teach_create_react_agent() -> None:
    """LangGraph 1.x deprecates `create_react_agent` for `langchain.agents.create_agent`: no code of
    the README or the docs pages uses it (the prose may say so)."""
    pages = [README, *(path.read_text() for path in (REPO / "docs").rglob("*.md"))]
    for text in pages:
        for code in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M):
            assert "create_react_agent" not in code, code


# A warm interpreter: it imports what the blocks import once, then runs each block in a child of its
# own (a fork), as `python block.py` would: a fresh `__main__` namespace, the block's environment and
# working directory, nothing left over from another block.
_RUNNER = r"""
import json, os, runpy, signal, subprocess, sys, threading, traceback, warnings

# Class sources found once per module (the durable-execution blocks build agents whose schemas read
# every message class's source: seconds per block otherwise; `tests/class_source.py`).
from tests import class_source

class_source.install()
for name in json.loads(sys.argv[1]):
    try:
        __import__(name)
    except Exception:
        pass  # the block that imports it fails on it, with its own traceback
# Forking a process that runs threads is unsafe: should an import ever start one, each block gets a
# new interpreter instead (slower, the same result).
fork = hasattr(os, "fork") and threading.active_count() == 1
print("ready", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    if not fork:
        command = [sys.executable, "-W", "error::DeprecationWarning:__main__", job["path"]]
        with open(job["output"], "w") as out:
            done = subprocess.run(
                command, cwd=job["cwd"], env=job["env"], stdout=out, stderr=out, timeout=job["timeout"]
            )
        print(done.returncode, flush=True)
        continue
    pid = os.fork()
    if pid == 0:
        out = os.open(job["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        sys.argv = [job["path"]]
        # A deprecated API the block's own code calls (LangGraph's create_react_agent, a keyword
        # historykit renamed) fails the block: the README teaches what to write today.
        warnings.filterwarnings("error", category=DeprecationWarning, module="__main__")
        signal.alarm(job["timeout"])
        status = 0
        try:
            runpy.run_path(job["path"], run_name="__main__")
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    _, wait = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(wait), flush=True)
"""

_TIMEOUT = 180
"""Seconds a block may take (the slowest replays the bundled session twice)."""


def _imported_modules() -> list[str]:
    names: set[str] = set()
    for block in BLOCKS:
        for node in ast.walk(ast.parse(swapped(block))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return sorted(names)


def _base_env() -> dict[str, str]:
    """This environment without provider keys or addresses, the checkout on the path, a fixed width."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not re.search(r"_API_KEY$|_BASE_URL$|_API_BASE$|_API_URL$|^PYTEST_|^COV_", k)
    }
    env.update({"PYTHONPATH": str(REPO), "COLUMNS": "100", "PYDANTIC_AI_NO_BANNER": "1"})
    return env


@dataclass
class Runner:
    """Runs a file's code alone in a fork of the warm interpreter."""

    process: subprocess.Popen[str]

    def run(self, code: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
        path, output = cwd / "block.py", cwd / "block.out"
        path.write_text(code)
        job = {"path": str(path), "output": str(output), "cwd": str(cwd), "env": env, "timeout": _TIMEOUT}
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        status = int(self.process.stdout.readline())
        return status, output.read_text()


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    process = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, json.dumps(_imported_modules())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_base_env(),
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    yield Runner(process)
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=30)


def lines_match(expected: str, actual: str, *, excerpt: bool = False) -> bool:
    """Whether `actual` is `expected` line by line (trailing spaces aside), each `...` line of
    `expected` standing for one line or more; with `excerpt`, `expected` may start and end anywhere
    in `actual`."""
    pattern = "".join(
        r"(?:.*\n)+" if line.strip() == "..." else re.escape(line.rstrip()) + r"\n"
        for line in expected.splitlines()
    )
    if excerpt:
        pattern = rf"(?:.*\n)*?{pattern}(?:.*\n)*"
    return re.fullmatch(pattern, "".join(line.rstrip() + "\n" for line in actual.splitlines())) is not None


@pytest.mark.parametrize("block", _params())
def test_each_python_block_runs_alone(
    block: Block, runner: Runner, emulator_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The block as a file of its own, `python block.py` in an empty directory, the model swapped as
    "Testing your agent" says; the SDK clients of native compaction reach the provider emulator
    through their documented environment variables; a PostgreSQL block gets `DATABASE_URL`."""
    reason = _needs(block)
    if reason:
        pytest.skip(reason)
    env = _base_env()
    if _SDK_IMPORT.search(block.code):
        env.update(
            ANTHROPIC_BASE_URL=emulator_url,
            ANTHROPIC_API_KEY="emulated",
            OPENAI_BASE_URL=f"{emulator_url}/v1",
            OPENAI_API_KEY="emulated",
        )
    else:
        env.update(ANTHROPIC_BASE_URL=_NOWHERE, OPENAI_BASE_URL=_NOWHERE)
    if "DATABASE_URL" in block.code:
        env["DATABASE_URL"] = request.getfixturevalue("postgres_database")
    status, output = runner.run(swapped(block), tmp_path, env)
    print(output)  # shown with -rP
    assert status == 0, (
        f"README block {block.id} (line {block.line}) fails alone:\n{swapped(block)}\n{output}"
    )
    if block.output is not None:
        where = f"README block {block.id} (line {block.line})"
        assert lines_match(block.output, output), (
            f"{where} prints:\n{output}\nthe README shows:\n{block.output}"
        )
