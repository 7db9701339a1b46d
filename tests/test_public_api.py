"""The public API, checked by introspection: every public module of `historykit` (a dotted path
with no `_`-prefixed part, found by walking the package) has an `__all__`; each name in it
resolves, is documented, and is public through and through.

- resolves: `getattr(module, name)` works (the framework packages' names are looked up lazily;
  this imports their frameworks, all installed here);
- documented: a class, function or module has a docstring; a constant or a type alias has the
  attribute docstring that follows its assignment, in the module that assigns it;
- nothing private leaks: no `_name` is exported, no exported object is a private one under a
  public alias, a class or function exported is historykit's own (not a dependency's re-exported
  as ours), and no exported signature names a private type.

What is public is what `__all__` says (curated in each `__init__`); this test keeps every such
name usable and documented, whatever is added."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from functools import cache
from types import ModuleType
from typing import Any

import pytest

import historykit


def public_modules() -> list[str]:
    """`historykit` and every module under it whose dotted path has no private part."""
    found = ["historykit"]
    for info in pkgutil.walk_packages(historykit.__path__, "historykit."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return found


PUBLIC_MODULES = public_modules()


def test_the_walk_finds_the_public_modules_and_no_private_one() -> None:
    # A broken walk (an import error swallowed, a renamed package) would check nothing.
    for expected in (
        "historykit",
        "historykit.processors",
        "historykit.processors._file_reads",
        "historykit.checkpointers",
        "historykit.plugins.pydantic_ai",
        "historykit.plugins.langchain",
        "historykit.formats",
        "historykit.testing",
        "historykit.cli",
    ):
        assert expected in PUBLIC_MODULES
    assert not [name for name in PUBLIC_MODULES if "._" in name]
    assert "historykit.plugins.pydantic_ai._adapter" not in PUBLIC_MODULES


@cache
def _module_tree(module_name: str) -> ast.Module | None:
    try:
        return ast.parse(inspect.getsource(importlib.import_module(module_name)))
    except (OSError, TypeError):
        return None


def _assigned_names(statement: ast.stmt) -> list[str]:
    if isinstance(statement, ast.Assign):
        return [t.id for t in statement.targets if isinstance(t, ast.Name)]
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return [statement.target.id]
    return []


def attribute_docstring(module_name: str, name: str, depth: int = 0) -> str | None:
    """The docstring after `name`'s assignment in `module_name`, or in the module it is imported
    from (followed through `from x import name`); `None` when there is none."""
    tree = _module_tree(module_name)
    if tree is None or depth > 5:
        return None
    body = tree.body
    for index, statement in enumerate(body):
        if name in _assigned_names(statement):
            following = body[index + 1] if index + 1 < len(body) else None
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
                and following.value.value.strip()
            ):
                return following.value.value
            return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return attribute_docstring(node.module, alias.name, depth + 1)
    return None


def _documented(module_name: str, name: str, member: Any) -> bool:
    member = inspect.unwrap(member) if callable(member) else member  # functools.cache, ...
    if inspect.isclass(member) or inspect.isroutine(member) or isinstance(member, ModuleType):
        own = member.__doc__
        return bool(own and own.strip())
    return attribute_docstring(module_name, name) is not None


_PRIVATE_NAME = re.compile(r"(?<![\w.])_[A-Za-z]\w*")


def _annotations(member: Any) -> list[str]:
    """The annotations of a function's or a class constructor's signature, as written."""
    try:
        signature = inspect.signature(member)
    except (TypeError, ValueError):
        return []
    found = [str(p.annotation) for p in signature.parameters.values() if p.annotation is not p.empty]
    if signature.return_annotation is not signature.empty:
        found.append(str(signature.return_annotation))
    return found


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_exported_name_resolves_is_documented_and_public(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__ and module.__doc__.strip(), f"{module_name} has no docstring"
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, (list, tuple)), f"{module_name} has no __all__"
    assert len(set(exported)) == len(exported), f"{module_name}.__all__ repeats a name"
    problems: list[str] = []
    for name in exported:
        if name.startswith("_"):
            problems.append(f"{name}: a private name exported")
            continue
        try:
            member = getattr(module, name)
        except AttributeError as error:
            problems.append(f"{name}: does not resolve ({error})")
            continue
        if not _documented(module_name, name, member):
            problems.append(f"{name}: no docstring")
        if inspect.isclass(member) or inspect.isfunction(member):
            own = getattr(member, "__name__", name)
            if own.startswith("_"):
                problems.append(f"{name}: the private {own} under a public name")
            if not member.__module__.startswith("historykit."):
                problems.append(f"{name}: {member.__module__}'s, re-exported as historykit's")
            for annotation in _annotations(member):
                for private in _PRIVATE_NAME.findall(annotation):
                    problems.append(f"{name}: its signature names the private {private}")
    assert not problems, f"{module_name}:\n" + "\n".join(problems)


def test_the_top_level_names_are_the_everyday_ones() -> None:
    # `import historykit` gives what most users need without a second import; a check that the
    # curated `__init__` still holds them (the rest lives in the subpackages).
    for name in ("Message", "Pipeline", "default_pipeline", "TokenCounter", "HistoryKitError", "check"):
        assert name in historykit.__all__
        assert getattr(historykit, name) is not None
