"""The core never names a framework: only `historykit.plugins` imports one, or names a plugin.

Everything outside `historykit/plugins/` is walked (its AST, so nothing is imported): no import of a
framework (`pydantic_ai`, `langchain*`, `langgraph*`) or of `historykit.plugins`, and no string
naming one of their modules (the way a lazy import or a module-name check would), docstrings
aside. The exceptions are listed below with the reason each has.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import historykit

PACKAGE = Path(historykit.__file__).parent

FORBIDDEN = re.compile(r"^(pydantic_ai|langchain(_[a-z]+)?|langgraph(_[a-z]+)?|historykit\.plugins)(\.|$)")
"""Module names the core must not import or name."""

FRAMEWORK_BOUND = {
    "checkpointers/_serde.py": "the LangGraph checkpointer's serializer",
    "checkpointers/_langgraph_protocol.py": "the LangGraph checkpointer's protocol methods",
    "checkpointers/_saver_base.py": "the LangGraph checkpointer's base (BaseCheckpointSaver)",
    "checkpointers/_saver_messages.py": "the LangGraph checkpointer's messages in and out of the log",
    "checkpointers/_saver_values.py": "the LangGraph checkpointer's channel values",
    "checkpointers/_saver_sql.py": "the LangGraph checkpointer's statements (its index of special writes)",
    "checkpointers/_message_form.py": "the LangGraph checkpointer's own form of LangChain messages",
    "checkpointers/_saver.py": "the LangGraph checkpointer (SQLModelSaver)",
    "checkpointers/_conversation_store.py": "the Pydantic AI conversation store",
    "demo/": "the demo application, which runs agents of both frameworks",
    "cli/_doctor.py": "the command line's doctor, which opens LangGraph threads to check them",
    "testing/": "the replay models users' tests give their agents, one per framework (imported lazily)",
}
"""Modules outside `plugins/` that are one framework's store, or an application or test double
using them (a key ending in `/` is every module under that folder)."""


APPLICATIONS = ("demo/", "testing/")
"""Framework-bound modules that use the integrations themselves (and so import the plugin packages)."""


def _framework_bound(rel: str) -> bool:
    return rel in FRAMEWORK_BOUND or any(k.endswith("/") and rel.startswith(k) for k in FRAMEWORK_BOUND)


NAMES_PLUGIN_PACKAGES = {
    "_frameworks.py": "the registry's list of the built-in framework packages",
    "processors/__init__.py": "deprecated re-exports of the summarizers that moved to the plugins",
    "processors/_summarizers.py": "deprecated re-exports of the summarizers that moved to the plugins",
}
"""Core modules that name a plugin package in a string (not an import), and why."""


def _core_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "plugins" not in p.relative_to(PACKAGE).parts)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
        else:
            continue
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                found.add(id(stmt.value))
    return found


def _violations(path: Path) -> list[str]:
    rel = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    out: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            # A module name in a string: a lazy import, or a check of a class's module. A bare
            # "langchain" is a format or store name, not a module.
            value = node.value
            allowed = value.startswith("historykit.plugins") and rel in NAMES_PLUGIN_PACKAGES
            if FORBIDDEN.match(value) and "." in value and not allowed:
                out.append(f"{rel}:{node.lineno}: names {value!r}")
        out += [f"{rel}:{node.lineno}: imports {name}" for name in names if FORBIDDEN.match(name)]
    return out


def test_no_core_module_imports_or_names_a_framework() -> None:
    modules = _core_modules()
    assert len(modules) > 20 and all((PACKAGE / rel).exists() for rel in FRAMEWORK_BOUND)
    found = []
    for path in modules:
        rel = path.relative_to(PACKAGE).as_posix()
        for v in _violations(path):
            if not _framework_bound(rel):
                found.append(v)
            elif "historykit.plugins" in v and not rel.startswith(APPLICATIONS):
                # A framework's store may use the framework, but reaches the adapters through the seam.
                found.append(v)
    assert found == []


def test_the_check_catches_an_import_and_a_lazy_module_name(tmp_path: Path) -> None:
    sample = PACKAGE / "_sample_for_the_seam_test.py"
    try:
        sample.write_text(
            '"""Mentions pydantic_ai.messages in a docstring: allowed."""\n'
            "def f():\n    from historykit.plugins.langchain import LangChainAdapter\n"
            "    import langgraph.graph\n    return type(f).__module__.startswith('pydantic_ai.')\n",
            encoding="utf-8",
        )
        assert [v.split(": ", 1)[1] for v in _violations(sample)] == [
            "imports historykit.plugins.langchain",
            "imports langgraph.graph",
            "names 'pydantic_ai.'",
        ]
    finally:
        sample.unlink()


def test_importing_historykit_imports_no_framework() -> None:
    import subprocess
    import sys

    code = (
        "import sys, historykit, historykit.formats, historykit.processors, historykit._frameworks as f\n"
        "from historykit._messages import Message\n"
        "f.adapter_for([Message.user('hi')]); historykit.TokenCounter().count([Message.user('hi')])\n"
        "import historykit.plugins.pydantic_ai, historykit.plugins.langchain\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic_ai', 'langchain', 'langchain_core', 'langgraph')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent
    )
    assert out.stdout.strip() == "[]"
